"""`repro run` into a run directory that already holds a run.

The same parameters continue it, and notebooks may be added with parameters of their own (04_compare on a
rebuild); other values of the parameters of a notebook both runs execute are refused, naming them, unless
`--force`, which first removes everything the previous run made except its resumable work (content-fingerprinted,
so nothing computed is lost): no file of the old run, such as a compare.json the card would cite, outlives it."""

from __future__ import annotations

import json
import shutil
from typing import Any

from .manifest import Manifest
from .parameters import NOTEBOOK_SECTIONS, SCHEMAS
from .paths import RunDir
from .preflight import Check

IGNORED = {"run_dir"}  # where the run directory is: the same folder by definition


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def changed_parameters(run: RunDir, parameters: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """{name: (recorded, new)} for each parameter of a notebook both this run and the one recorded in the run
    directory execute, where the values differ (a notebook added to a run, with its own parameters, is no change)."""
    manifest = Manifest(run).read()
    recorded, done = manifest.get("parameters") or {}, manifest.get("notebooks") or {}
    both = [name for name in parameters.get("notebooks") or () if name in done]
    fields = set().union(*(SCHEMAS[s].model_fields for name in both for s in NOTEBOOK_SECTIONS.get(name, SCHEMAS)))
    new = _jsonable(parameters)
    return {key: (recorded[key], new[key]) for key in sorted(fields & set(recorded) & set(new) - IGNORED)
            if recorded[key] != new[key]}


def rerun_check(run: RunDir, parameters: dict[str, Any], force: bool, given_as: str) -> Check:
    """Whether this run may write into `run`: new, the same parameters, or `force`."""
    changed = changed_parameters(run, parameters)
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
    """Remove what a previous run made (its recorded outputs, notebooks, dataset, metrics, figures, tables, manifest),
    keeping work/ and self-check reports; returns what was removed, relative to the run directory."""
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
