"""`repro bench`: runs the scoring benchmark, benchmarks/bench_scoring.py of a checkout (it is not in the package)."""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from ..errors import ParameterError
from ..paths import checkout_root, project_root

HARNESS = Path("benchmarks") / "bench_scoring.py"


def harness() -> ModuleType | None:
    """The benchmark script of the checkout this package runs from (else of the project root), loaded once."""
    if "bench_scoring" in sys.modules:
        return sys.modules["bench_scoring"]
    path = next((r / HARNESS for r in (checkout_root(), project_root()) if r and (r / HARNESS).is_file()), None)
    if path is None:
        return None
    spec = importlib.util.spec_from_file_location("bench_scoring", path)
    module = sys.modules["bench_scoring"] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _harness_here() -> ModuleType:
    if (module := harness()) is None:  # said before argparse reads the options (it knows none of the harness's)
        raise ParameterError(f"repro bench runs {HARNESS.as_posix()} of a checkout of repro, and none is here: clone "
                             "the repository and run it from there (an installed wheel holds no benchmarks).")
    return module


def configure(parser: argparse.ArgumentParser) -> None:
    _harness_here().configure(parser)


def main(args: argparse.Namespace) -> int:
    return _harness_here().main(args)
