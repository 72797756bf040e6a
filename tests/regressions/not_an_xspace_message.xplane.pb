
	plan