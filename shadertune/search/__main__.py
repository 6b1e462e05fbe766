"""Entry point of python -m shadertune.search (and the shadertune-search script)."""
import sys

from ..cli.search import main

if __name__ == "__main__":
    sys.exit(main())
