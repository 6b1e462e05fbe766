"""python -m shadertune.search: the search command line (shadertune/cli/search.py)."""
import sys

from ..cli.search import main

if __name__ == "__main__":
    sys.exit(main())
