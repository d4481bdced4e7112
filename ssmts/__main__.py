"""`python -m ssmts ...`: the same command line as the `ssmts` console script."""

import sys

from ssmts.cli import main

if __name__ == "__main__":
    sys.exit(main())
