"""The dataset card (notebooks/03_card): facts gathered from the run, rendered in English and Chinese."""

from .facts import *  # noqa: F401,F403  (the module's public names, as `repro.card` offered them)
from .facts import PHRASES, USE_PHRASES, selfcheck_lines  # noqa: F401
