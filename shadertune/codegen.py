"""python -m shadertune.codegen: the codegen command line (shadertune/cli/codegen.py)."""
import sys

from .cli.codegen import main

if __name__ == "__main__":
    sys.exit(main())
