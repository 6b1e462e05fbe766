"""python -m shadertune.report: the report command line (shadertune/cli/report.py)."""
import sys

from ..cli.report import main

if __name__ == "__main__":
    sys.exit(main())
