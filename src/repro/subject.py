"""Which dataset a run directory describes (its manifest's `subject`: its own, or one made elsewhere), so that a
notebook about another dataset is refused there before anything is written."""

from __future__ import annotations

from pathlib import Path

from .errors import ParameterError
from .manifest import Manifest
from .paths import RunDir, dataset_run_name

OWN = None  # the subject of a run that built its own dataset


def subject_of(spec: str | None, run: RunDir) -> str | None:
    """The dataset `spec` names, as a run records it: OWN for none given or the run's own folder, else the spec."""
    if spec is None:
        return OWN
    path = Path(spec)
    if path.exists() and path.resolve() in (run.root.resolve(), run.dataset.resolve()):
        return OWN
    return spec


def recorded_subject(run: RunDir) -> tuple[bool, str | None]:
    """(whether the run directory describes a dataset yet, which: OWN or the recorded spec); a subject nothing was
    written about binds nothing."""
    manifest = Manifest(run).read()
    if "subject" in manifest:
        return bool(manifest.get("outputs") or run.shards()), manifest["subject"]["dataset"]
    if manifest.get("counts") or manifest.get("scorer") or run.shards():  # built here before subjects were recorded
        return True, OWN
    return False, OWN


def _describe(subject: str | None, run: RunDir) -> str:
    return f"its own dataset (built there by 01_construct, in {run.dataset})" if subject is OWN else f"{subject!r}"


def claim(run: RunDir, spec: str | None, parameter: str, building: bool = False) -> None:
    """Record that `run` describes `spec` (`parameter`; None: what it describes; `building`: 01_construct's own),
    or refuse before anything is written when it describes another dataset."""
    mine = OWN if building else subject_of(spec, run)
    known, theirs = recorded_subject(run)
    if known and theirs != mine and (building or mine is not OWN):
        if building:
            what, fix = "01_construct would build a dataset of its own there", "Give this run another run_dir"
        else:
            what = f"{parameter}={mine!r} is another dataset"
            fix = (f"Leave run_dir unset (the notebook then writes runs/{dataset_run_name(mine)}) or give a "
                   f"run_dir of its own")
        raise ParameterError(
            f"run_dir {str(run.root)!r} describes {_describe(theirs, run)} (its manifest.json says so), but {what}: "
            f"writing it there would mix two datasets in one run directory. {fix}; nothing was written.")
    # a first subject, or another one where nothing was written yet (a dataset not given keeps the recorded one)
    if not known and (building or mine is not OWN or theirs is OWN):
        run.root.mkdir(parents=True, exist_ok=True)
        Manifest(run).update(subject={"dataset": mine, "parameter": parameter})
