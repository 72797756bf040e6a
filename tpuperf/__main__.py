from tpuperf.cli import main

main()
