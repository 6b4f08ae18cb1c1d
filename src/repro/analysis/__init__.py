"""Stage 2, notebooks/02_analyze: statistics, figures and scorer agreement of a preference dataset."""

from pathlib import Path
from typing import Any

import jinja2

from ..errors import rendering
from ..parameters import code_span, one_line

# the prose of metrics.json, compare.json and the notebooks' headlines: templates/, one macro per text
TEMPLATES = Path(__file__).parent / "templates"
_ENV = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), trim_blocks=True, lstrip_blocks=True,
                          undefined=jinja2.StrictUndefined, autoescape=False)


def number(x: float | None, spec: str = ".4g") -> str:
    """A statistic as the prose writes it (4 significant digits; n/a for an undefined one)."""
    return "n/a" if x is None else format(x, spec)


def percent(x: float | None) -> str:
    """A fraction as the prose writes it: 81.1 %."""
    return "n/a" if x is None else f"{100 * x:.1f} %"


def p_value(x: float | None, spec: str = ".3g") -> str:
    """What follows "p": "= 0.0123", or "< 1e-300" for a p-value computed as 0 (below the smallest float)."""
    return "< 1e-300" if x == 0 else f"= {number(x, spec)}"


_ENV.filters.update(g=number, percent=percent, p=p_value, code=code_span, text=one_line)  # (code, text: as the card's)


def prose(template: str, macro: str, *args: Any) -> str:
    """A macro of templates/<template>.jinja filled with `args`, without the blank lines around it."""
    with rendering("The analysis'", "If a run's records (metrics.json, compare.json) were edited or cut short, run "
                   f"its notebooks again to write them anew; if not, this is a bug in repro.analysis ({TEMPLATES})."):
        return str(getattr(_ENV.get_template(f"{template}.jinja").module, macro)(*args)).strip("\n")
