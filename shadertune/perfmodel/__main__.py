"""Entry point of python -m shadertune.perfmodel."""
import sys

from ..cli.perfmodel import main

if __name__ == "__main__":
    sys.exit(main())
