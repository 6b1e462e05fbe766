import sys

from ..cli.cluster import main

sys.exit(main())
