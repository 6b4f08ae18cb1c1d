"""`python -m repro.cli`: the `repro` command (torchrun launches it this way)."""

import sys

from . import main

sys.exit(main())
