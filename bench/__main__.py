"""``python -m graymq.bench``: see ``bench/runner.py``."""

import sys

from graymq.bench.runner import main

sys.exit(main())
