"""python -m shadertune.perfmodel: the perfmodel command line (shadertune/cli/perfmodel.py)."""
import sys

from ..cli.perfmodel import main

if __name__ == "__main__":
    sys.exit(main())
