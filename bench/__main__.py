"""``python -m bench``: the whole benchmark (bench/run.py)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from run import main

sys.exit(main())
