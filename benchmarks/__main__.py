"""``python -m benchmarks``: run every benchmark (see ``benchmarks/run_all.py``)."""

import sys

from benchmarks.run_all import main

sys.exit(main())
