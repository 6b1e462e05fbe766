"""python -m shadertune.db: the db command line (shadertune/cli/db.py)."""
import sys

from ..cli.db import main

if __name__ == "__main__":
    sys.exit(main())
