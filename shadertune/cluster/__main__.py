"""python -m shadertune.cluster: the cluster's worker command line (shadertune/cli/cluster.py)."""
import sys

from ..cli.cluster import main

if __name__ == "__main__":
    sys.exit(main())
