"""Entry point of python -m shadertune.db (and the shadertune-db script)."""
import sys

from ..cli.db import main

if __name__ == "__main__":
    sys.exit(main())
