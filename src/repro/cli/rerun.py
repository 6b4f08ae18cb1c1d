"""`repro run` into a run directory that holds a run: the same parameters continue it, an added notebook may bring
its own; other values are refused unless `--force`, which removes the old run's outputs (its work/ is kept)."""

from __future__ import annotations

import json
import shutil
from typing import Any

from ..manifest import Manifest
from ..parameters import notebook_fields
from ..paths import RunDir
from .preflight import Check

IGNORED = {"run_dir"}  # where the run directory is: the same folder by definition


def changed_parameters(run: RunDir, parameters: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """{name: (recorded, new)} for each differing parameter of a notebook both runs execute (an added one is none)."""
    manifest = Manifest(run).read()
    recorded, done = manifest.get("parameters") or {}, manifest.get("notebooks") or {}
    fields = notebook_fields(*(name for name in parameters.get("notebooks") or () if name in done))
    new = json.loads(json.dumps(parameters, default=str))  # as the manifest recorded it
    return {key: (recorded[key], new[key]) for key in sorted(fields & set(recorded) & set(new) - IGNORED)
            if recorded[key] != new[key]}


def rerun_check(run: RunDir, changed: dict[str, tuple[Any, Any]], force: bool, given_as: str) -> Check:
    """Whether this run may write into `run`: new, the same parameters (`changed`: none), or `force`."""
    if not changed:
        return Check("run directory", True, f"{run.root} (" + ("continues the run there, same parameters)"
                                                               if run.manifest.is_file() else "new)"))
    listed = ", ".join(f"{key} ({old!r} there, {new!r} now)" for key, (old, new) in changed.items())
    if force:
        return Check("run directory", True, f"{run.root} holds a run with other parameters ({listed}); --force: "
                                            f"its outputs are removed first (its resumable work/ is kept)")
    return Check("run directory", False,
                 f"{run.root} holds a run with other parameters: {listed}. Give another {given_as} for this run, "
                 f"or pass --force to replace that run (its outputs are removed; its resumable work/ is kept)",
                 problem="REFUSED")


def clear_previous_run(run: RunDir) -> list[str]:
    """Remove what a previous run made but work/ and self-checks; returns what went, relative to the run."""
    recorded = Manifest(run).read().get("outputs") or {}
    removed = []
    for relative in recorded:
        path = run.root / relative
        if path.is_file():
            path.unlink()
            removed.append(relative)
    for path in (run.notebooks, run.dataset, run.figures, run.tables, run.metrics, run.compare, run.manifest):
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
        else:
            continue
        removed.append(str(path.relative_to(run.root)))
    return removed
