#!/usr/bin/env python3
"""rubricrun entry point: `python run.py --config config.yaml`. All logic lives in src/rubricrun/."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "src"))

from rubricrun.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
