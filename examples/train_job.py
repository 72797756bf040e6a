"""A small JAX training job with a profiler server: the job ``tpuperf demo`` profiles.

Run it, then capture it from another shell::

    python examples/train_job.py --port 9012            # runs until Ctrl-C / SIGTERM
    tpuperf capture localhost:9012 --duration 2s --analyze

It prints ``READY port=9012`` once the profiler server is up and the step is compiled.
Options: ``--steps N`` (0, the default, runs until stopped), ``--log-every N``.
The code lives in ``tpuperf/_demo_job.py`` so that an installed tpuperf can run it too
(``python -m tpuperf._demo_job``).
"""

import sys
from pathlib import Path

try:
    from tpuperf._demo_job import main
except ModuleNotFoundError:  # run from a checkout without tpuperf installed
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tpuperf._demo_job import main

if __name__ == "__main__":
    sys.exit(main())
