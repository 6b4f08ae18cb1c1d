"""Which dataset a run dir describes (its manifest's `subject`), so a notebook on another is refused before writing."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, Sequence

import yaml
from huggingface_hub.repocard import metadata_load

from .dataset_io import split_files
from .errors import DataError, ParameterError, did_you_mean
from .jobs import atomic_write_json
from .manifest import LAST_RUN, Manifest
from .paths import (DATA_DIR, KERNEL, SPLIT, STAND_IN_MARKER, RunDir, project_root, rebased, run_dir_of,
                    run_manifest_of, wait_advice)
from .records import STAND_IN, STAND_IN_FIX, read_record
from .sources import data_files, files_read

OWN = None  # the subject of a run that built its own dataset
STAND_IN_TAGS = {"scorer": "stand-in-scores", "generation": "stand-in-candidates"}  # a card's tags for its stand-ins


def declared_stand_ins(spec: str | None, split: str | None = None, marked: Any = ...) -> dict[str, dict[str, Any]]:
    """The stand-ins a dataset made elsewhere (`spec`: a local folder or a file in one) declares: {"scorer",
    "generation"}, each with `stand_in` and `declared`, its declarer: the building run's `manifest` (naming the model),
    its `card`'s tags (STAND_IN_TAGS) or a `marker` (STAND_IN_MARKER, scorer only; beside a file `repro score` wrote:
    `marked_scorer` of `split`, unless given as `marked`); {} where none does (a hub id)."""
    path = Path(spec).expanduser() if spec else None
    if path is None or not path.exists():
        return {}
    out: dict[str, dict[str, Any]] = {}
    if (scorer := marked_scorer(path, split) if marked is ... else marked) and scorer["stand_in"]:
        out["scorer"] = scorer
    with contextlib.suppress(OSError, ValueError, AttributeError):  # no manifest beside it, or not one
        recorded = Manifest(RunDir(run_manifest_of(path, any_split=True).parent)).read()
        scorer, generation = recorded.get("scorer") or {}, recorded.get("generation") or {}
        if scorer.get("stand_in") or str(scorer.get("model") or "").startswith("builtin:"):
            out["scorer"] = {"model": scorer.get("model"), "kind": scorer.get("kind", "pairrm"), "stand_in": True,
                             "declared": "manifest"}
        if generation.get("stand_in"):
            out["generation"] = {"policy_model": generation.get("policy_model"), "stand_in": True,
                                 "n_candidates": generation.get("n_candidates"), "declared": "manifest"}
    folder, card = path if path.is_dir() else path.parents[1] if path.parent.name == DATA_DIR else None, None
    with contextlib.suppress(OSError, ValueError, AttributeError, TypeError, yaml.YAMLError):  # no card, or no YAML
        tags = (card := metadata_load(folder / "README.md")).get("tags") or []
        for key, tag in STAND_IN_TAGS.items():
            if tag in tags:
                out.setdefault(key, {"stand_in": True, "declared": "card"})
    if folder is None or folder != path and card is None:  # (a file in a data/ folder of no dataset card: itself)
        return out
    marker = _marker(folder)  # (one of no "files", as before repro score named them: a stand-in's)
    read = {f.name for f in files_read(folder, split) if f.parent == folder} if split else set()
    if (folder / STAND_IN_MARKER).is_file() and ("files" not in marker or not all(  # (of the files read, if known)
            scorer.get("stand_in") is False for name, scorer in marker["files"].items()
            if not read or name in read)):
        out.setdefault("scorer", {"stand_in": True, "declared": "marker"})
    return out


def declared_scorer(spec: str | None, split: str | None = None) -> dict[str, Any] | None:
    """`spec`'s declared stand-in (`declared_stand_ins`), else the scorer `repro score` marked (`marked_scorer`)."""
    marked = marked_scorer(Path(spec).expanduser(), split) if spec else None
    return declared_stand_ins(spec, split, marked).get("scorer") or marked


def read_as_pairrm(scorer: dict[str, Any] | None, told: Any = None, breaks_sign_order: bool = False) -> bool | None:
    """Whose logits 02_analyze and 03_card read the scores as: per `scorer` (metrics.json's record), PairRM's (its kind)
    or a reward model's (another); unrecorded, per `told` (known_recipe's): PairRM's where it names PairRM and the
    scores keep its sign order (`breaks_sign_order`: some score_chosen >= 0 >= score_rejected fails), else a reward
    model's; None: nothing names one (read as PairRM's, said so)."""
    if scorer:
        return scorer.get("kind", "pairrm") == "pairrm"
    return "pairrm" in str(told).lower() and not breaks_sign_order if told else None


def _marker(folder: Path) -> dict[str, Any]:
    """The STAND_IN_MARKER in `folder` ({"files": {name: its scorer}}, beside what repro score wrote: of the files still
    there), else {}; a DataError naming it where it is not in the shape repro writes it in (records.StandInMarker)."""
    marker = read_record(folder / STAND_IN_MARKER, STAND_IN, STAND_IN_FIX, {})
    files = marker.get("files", {})
    return {**marker, "files": {name: s for name, s in files.items() if (folder / name).is_file()}} if files else marker


def marked_scorer(path: Path, split: str | None = None) -> dict[str, Any] | None:
    """The scorer the STAND_IN_MARKER beside file `path` records (`mark_scorer`; `stand_in`: a stand-in's); of a folder,
    the one scorer of its data files (`split`'s: `files_read`); else None. DataError: scorers differ."""
    if path.is_dir():
        files = (files_read(path, split) if split else []) or data_files(path)
        if None in (scorers := [marked_scorer(f) for f in files]) or not scorers:
            return None
        if any(scorer != scorers[0] for scorer in scorers):
            named = {f"{s['model']}{', a stand-in' * s['stand_in']}": f.relative_to(path).as_posix()
                     for f, s in zip(files, scorers)}
            raise DataError(f"{path} holds files `repro score` scored with different scorers ("
                            f"{'; '.join(f'{f}: {model}' for model, f in named.items())}); read together, their scores "
                            f"are no one scorer's. Give one of them, or a folder of one scorer's files.")
        return scorers[0]
    scorer = _marker(path.parent).get("files", {}).get(path.name)
    return {"model": scorer.get("model"), "kind": scorer.get("kind", "pairrm"), "stand_in": bool(
        scorer.get("stand_in")), "declared": "marker"} if scorer is not None and path.is_file() else None


def mark_scorer(path: Path, scorer: dict[str, Any]) -> None:
    """Record `scorer` (as a manifest keeps it, with `stand_in`) for `path` in the STAND_IN_MARKER beside it."""
    marker = _marker(path.parent)
    atomic_write_json(path.parent / STAND_IN_MARKER, {
        **marker, "what": "the scorer of each file repro score wrote here; stand_in true: a random stand-in's scores, "
                          "noise", "files": {**marker.get("files", {}), path.name: scorer}}, indent=2)


def is_own_dataset(run: RunDir, spec: str | None) -> bool:
    """Whether `spec` names `run` itself or its dataset folder (the run's own dataset, named explicitly)."""
    path = Path(spec).expanduser() if spec is not None else None
    return path is not None and path.exists() and (path.resolve() in (run.root.resolve(), run.dataset.resolve()) or (
        (manifest := run_manifest_of(path)) is not None and manifest.parent.resolve() == run.root.resolve()))


def _subjects(run: RunDir, spec: str | None, building: bool) -> tuple[str | None, bool, str | None]:
    """(what a notebook given `spec` describes, whether `run` describes a dataset yet, which one)."""
    mine = OWN if building or spec is None or is_own_dataset(run, spec) else spec
    manifest = Manifest(run).read()
    # whether the run directory describes a dataset yet (a subject nothing was written about binds nothing), which
    if "subject" in manifest:  # (a dataset of the project: where the project is now)
        theirs = rebased(manifest["subject"]["dataset"], Manifest(run).project(manifest), project_root())
        return mine, bool(manifest.get("outputs") or run.shards()), theirs
    # built here before subjects were recorded
    return mine, bool(manifest.get("counts") or manifest.get("scorer") or run.shards()), OWN


def subject_refusal(run: RunDir, spec: str | None, parameter: str, building: bool = False, given_as: str = "run_dir",
                    advice: str | None = None, subjects: tuple | None = None) -> str | None:
    """Why a notebook given `spec` (`parameter`; `building`: 01_construct's own) may not write into `run` (given as
    `given_as`), which describes another dataset (`advice`: a family member's; `subjects`: _subjects'); else None."""
    mine, known, theirs = subjects or _subjects(run, spec, building)
    if not (known and theirs != mine and (building or mine is not OWN)):
        return None
    if building:
        what, fix = "01_construct would build a dataset of its own there", f"Give this run another {given_as}"
    else:
        what = f"{parameter}={mine!r} is another dataset"
        own = run_dir_of(mine, "")  # (a dataset is given: run_name does not count)
        fix = (f"Give this notebook a {given_as} of its own" if run.root.resolve() == own.resolve() else
               f"Leave {given_as} unset (the notebook then writes {own}) or give a {given_as} of its own")
    described = f"its own dataset (built there by 01_construct, in {run.dataset})" if theirs is OWN else repr(theirs)
    if advice:  # a family member's folder: the family's folder is what was given
        given_as, fix = "the member's folder", f"Move that run, or {advice}"
    return (f"{given_as} {str(run.root)!r} describes {described} (its manifest.json says so), but {what}: writing it "
            f"there would mix two datasets in one run directory. {fix}")


def refuse_unbuilt(run: RunDir, spec: str | None) -> None:
    """Refuse, before writing, to describe a run's dataset (`spec`; None: `run`'s own; 02_analyze, 03_card, 04_compare)
    while its 01_construct has not finished (a stage run again, or a kernel stopped, since it wrote)."""
    if spec is not None and not is_own_dataset(run, spec):
        # (a link to a run's dataset/ or its data/: where it leads; a shard of any of its splits: that run)
        if (manifest := run_manifest_of(Path(spec).expanduser().resolve(), any_split=True)) is None:
            return  # (a dataset no run of repro built)
        run = RunDir(manifest.parent)
    built = ((Manifest(run).read().get("notebooks") or {}).get("01_construct") or {}).get("status")
    if built in LAST_RUN:
        raise DataError(f"{run.root} holds a run whose 01_construct did not finish (its manifest.json says {built}): "
                        f"its record may not describe {run.dataset}. Run notebooks/01_construct.ipynb to its end "
                        f"first (Run All; a kernel still running it: wait for it); nothing was written.")


def hold(run: RunDir) -> None:
    """Hold `run` until the notebook ends (under `repro run`, that run holds it), or refuse a folder another writes."""
    if (busy := run.hold(KERNEL, kernel=True)) is not None:
        raise ParameterError(f"run_dir {str(run.root)!r} is being written by {busy} now: {wait_advice(busy)}, or "
                             f"give this notebook another run_dir; nothing was written.")


def claim(run: RunDir, spec: str | None, parameter: str, building: bool = False) -> None:
    """Record that `run` describes `spec` (`parameter`; `building`: 01_construct's own) and hold it until the notebook
    ends (under `repro run`, that run holds it); or refuse, before any writing, another dataset or writer there."""
    if why := run.foreign_refusal(building):
        raise ParameterError(f"run_dir: {why}; nothing was written.")
    mine, known, theirs = subjects = _subjects(run, spec, building)  # (the manifest read once)
    if why := subject_refusal(run, spec, parameter, building, subjects=subjects):
        raise ParameterError(f"{why}; nothing was written.")
    hold(run)
    # a first subject, or another one where nothing was written yet (a dataset not given keeps the recorded one)
    if not known and (building or mine is not OWN or theirs is OWN):
        Manifest(run).update(subject={"dataset": mine, "parameter": parameter})


def dataset_or_own(value: str | None, split: str, run: RunDir, parameter: str = "dataset", stage: str = "analysis",
                   split_parameter: str | None = None, writes: Sequence[str] = ()) -> tuple[str, str]:
    """(`value`, `split`), or, `value` unset, this run's dataset and the split 01_construct wrote (or `split`, which
    it must hold: `split_parameter`, default `<parameter>_split`, is refused else); `writes`: the splits 01_construct
    is yet to write there, its own first (a run's check before it starts), read instead of the folder's."""
    if value is not None:
        return value, split
    if not (writes or run.dataset.is_dir()):
        raise DataError(
            f"Parameter {parameter} is not set, so the {stage} reads this run's dataset at {run.dataset}, which "
            f"does not exist. Run notebooks/01_construct.ipynb for run_dir={str(run.root)!r} first, or set "
            f"{parameter} to a run directory, a .jsonl/.parquet file, a saved dataset or a hub id.")
    recorded = writes[0] if writes else (Manifest(run).read().get("dataset") or {}).get("split")
    if split != SPLIT and (split in writes if writes else run.shards(split)):  # named: that split of the run's dataset
        return str(run.dataset), split
    if split in (SPLIT, recorded):  # the default: the split 01_construct wrote
        return str(run.dataset), recorded or split
    split_parameter = split_parameter or f"{parameter}_split"
    has, wrote = ("will have", "writes") if writes else ("has", "wrote")
    raise DataError(f"Parameter {split_parameter}={split!r}: this run's dataset at {run.dataset} {has} no such split "
                    f"(it {has} {(splits := sorted(writes or split_files(run.dataset)))}).{did_you_mean(split, splits)}"
                    f" Name one of those" + f", or leave {split_parameter} at its default for the split 01_construct "
                    f"{wrote} ({recorded!r})" * bool(recorded) + ".")
