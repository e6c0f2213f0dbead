"""`python -m rewardlab` runs the CLI."""

import sys

from rewardlab.cli import main

sys.exit(main())
