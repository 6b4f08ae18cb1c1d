"""`python -m repro.cli`: the `repro` command (torchrun launches it this way)."""

from ..jobs import exit_process
from . import main

exit_process(main())
