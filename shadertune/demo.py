"""python -m shadertune.demo: the demo command line (shadertune/cli/demo.py)."""
import sys

from .cli.demo import main

if __name__ == "__main__":
    sys.exit(main())
