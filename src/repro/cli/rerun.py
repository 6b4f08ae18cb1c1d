"""`repro run` into a run directory that holds a run: the same parameters continue it, an added notebook may bring
its own; other values are refused unless `--force`, which removes the old run's outputs (its work/ is kept)."""

from __future__ import annotations

import collections
import contextlib
import os
import shutil
from pathlib import Path
from typing import Any, Iterator, Sequence

from ..cache import RowCache
from ..errors import Busy, DataError, ParameterError, counted, listed, printable
from ..family import Member
from ..jobs import FINGERPRINT_FILE, digest_on_disk, fingerprint_on_disk, finished_chunks, made_by, read_chunk
from ..manifest import (CITES_SELFCHECK, NAMING, NOT_SHAPING, OTHER_SELFCHECK, REUSED, ROUNDING, Manifest, as_recorded,
                        find_selfcheck, selfcheck_summary)
from ..parameters import FAMILY_NOTEBOOK, RUN_KEYS, SCHEMAS, check_value, differing, notebook_fields, set_option
from ..paths import WRITING_ENV, RunDir, row_cache_dir, wait_advice
from ..revisions import GENERATION_CODE, SCORING_CODE, hub_commit, local_content, python_digest
from ..subject import subject_refusal
from .preflight import READS_RUN_DATASET, Check, needs, run_dataset_checks


def changed_parameters(run: RunDir, parameters: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """{name: (recorded, new)} for each differing parameter of a notebook both runs execute (an added one is none)."""
    return Manifest(run).changed_parameters(parameters, parameters.get("notebooks") or ())


def unread_changes(run: RunDir, parameters: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """{name: (recorded, new)} per parameter that differs where it acts (`differing`), shapes the data and a notebook of
    this run reads (`notebooks` too): `changed_parameters` compares only a notebook both runs execute."""
    manifest, new = Manifest(run), as_recorded(parameters)
    recorded = manifest.recorded(manifest.read())  # (its paths in the project where it is now)
    return differing(recorded, new, (notebook_fields(*parameters["notebooks"]) | RUN_KEYS) - NOT_SHAPING
                     & recorded.keys() & new.keys())


def runs_again(run: RunDir, notebooks: Sequence[str]) -> str:
    """Which of `notebooks` (run_notebooks runs them all) ran there before and run again, and which run there first."""
    before = Manifest(run).read().get("notebooks") or {}
    again = [nb for nb in notebooks if nb in before]
    new = [nb for nb in notebooks if nb not in again]
    return "; ".join(f"{', '.join(nbs)} run{'s' * (len(nbs) == 1)}{how}"
                     for nbs, how in ((again, " again"), (new, " for the first time")) if nbs)


def executed(notebooks: Sequence[str], stale: str, force: bool = False) -> list[str]:
    """The notebooks a run into a folder that holds one executes: all of them, but only those citing the self-check
    (the card) where another self-check is all that changed since it completed (`stale`, `Manifest.unheld`)."""
    return [nb for nb in notebooks if nb in CITES_SELFCHECK or force or stale != OTHER_SELFCHECK]


def how_it_runs(run: RunDir, parameters: dict[str, Any]) -> str:
    """What a continued run changes in how the work runs (NOT_SHAPING), and what that costs its finished work; ""."""
    changed = Manifest(run).changed_parameters(parameters, parameters.get("notebooks") or (), ignore=NAMING)
    if not changed:
        return ""
    said = f"; how the work runs differs: {listed(changed)}"
    if not (budget := [k for k in ROUNDING if k in changed]):
        return said
    # the row cache's key holds the budgets, not the chunks: it gives back rows of another chunk_size
    cached = parameters.get("cache", True) and not {"batch_tokens", "generation_batch_size"} & set(budget)
    return (f"{said}: finished work of another {' or '.join(budget)} is set aside in work/"
            f"{'' if cached else ' and computed again'} (the batches, hence the float rounding, follow it)"
            f"{'; the row cache gives back the rows it holds, as they were scored' if cached else ''}")


def made_by_other_code(run: RunDir, parameters: dict[str, Any]) -> list[tuple[int, str]]:
    """(chunks, what a run does with them) of each job folder in work/ whose finished chunks other scoring or generation
    code made (an older repro's record no code): set aside and computed again, their rows from the row cache only
    where this code made them (its key holds the code too: a cache older code filled gives none back)."""
    cache, out = row_cache_dir(parameters.get("cache_dir")) if parameters.get("cache", True) else None, []
    for folder, n in sorted(collections.Counter(p.parent for p in finished_chunks(run.work)).items()):
        with contextlib.suppress(OSError, LookupError, TypeError, ValueError):  # (none told: the run says what it does)
            work = fingerprint_on_disk(folder)["fingerprint"]["work"]
            stage = "generation" if work.get("stage") == "generation" else "scores"
            code = python_digest(*(GENERATION_CODE if stage == "generation" else SCORING_CODE))
            if work.get("code") == code:
                continue
            held = cache is not None and RowCache(cache, stage, {**work, "code": code}).folder.is_dir()
            its = "its" if n == 1 else "their"
            rows = (f"; {its} rows come back from the row cache where this code made them with these values, the "
                    f"others are computed again" if held else " and computed again" + f" (the row cache holds none of "
                    f"{its} rows: it keys them on the code too)" * (cache is not None))
            out.append((n, f"{counted(n, 'finished chunk')} in {folder.relative_to(run.root)} "
                           f"{'was' if n == 1 else 'were'} made {made_by(work.get('code'), work.get('stage'))}: "
                           f"{'it is' if n == 1 else 'they are'} set aside{rows}"))
    return out


def damaged_work(run: RunDir) -> tuple[list[tuple[int, str]], list[str]]:
    """Damaged work/: (chunks, what a run does with them) per job folder whose fingerprint.json is not JSON (set aside:
    not known to be its work), and what is wrong with each chunk file elsewhere holding no JSON list (a run stops)."""
    folders: dict[Path, list[Path]] = collections.defaultdict(list)
    for path in sorted(finished_chunks(run.work)):
        folders[path.parent].append(path)
    aside, broken = [], []
    for folder, chunks in folders.items():
        if digest_on_disk(folder) == "damaged":  # (as the run reads it; none: a run writes its own, uses the chunks)
            n, where = len(chunks), folder.relative_to(run.root)
            aside.append((n, f"{counted(n, 'finished chunk')} in {where} cannot be told to be this run's: its "
                             f"{FINGERPRINT_FILE} is damaged (not what repro writes): "
                             f"{'it is' if n == 1 else 'they are'} set aside and computed again"))
            continue
        for path in chunks:
            try:
                read_chunk(path)
            except DataError as exc:
                broken.append(str(exc).removesuffix("."))
            except OSError:  # (unreadable: the run says so)
                continue
    return aside, broken


def kept_to_continue(members: Sequence[Member]) -> str:
    """What the same command keeps of `members`' work: chunks and cached rows, less `made_by_other_code`'s."""
    other = {m.name: n for m in members
             if (n := sum(k for k, _ in made_by_other_code(RunDir(m.run_dir), m.resolved)))}
    return "finished chunks and cached rows are kept" + (
        f", but not the {counted(sum(other.values()), 'finished chunk')} of {', '.join(other)} that other scoring or "
        f"generation code made (an older repro): they are computed again" if other else "")


def reused(run: RunDir, parameters: dict[str, Any]) -> str:
    """What a replaced run leaves the new one: `REUSED`, or, where both use the same row cache, that the rows it made
    come back from it (whatever the rows or their chunking: a limit changed sets its work/ chunks aside)."""
    manifest = Manifest(run)
    recorded = manifest.recorded(manifest.read())
    if not (parameters.get("cache", True) and recorded.get("cache", True)
            and row_cache_dir(recorded.get("cache_dir")) == row_cache_dir(parameters.get("cache_dir"))):
        return REUSED
    return ("its work/ stays, and the rows it made come back from the row cache where the generation and scoring "
            "values and the code that made them are the same, whatever the rows or chunking now; changed ones make "
            "their rows again")


def busy(given_as: str, holder: str) -> str:
    """What a refusal says of `holder`, writing into the folder given as `given_as`."""
    return f"{holder} is writing to it now: {wait_advice(holder)}, or give another {given_as}"


@contextlib.contextmanager
def writing(run: RunDir, given_as: str = "--out") -> Iterator[None]:
    """Hold `run` while this process writes there (others refused); the lock goes with the process, however it ends."""
    if (holder := run.hold("`repro run`")) is not None:
        raise Busy(f"Run directory {run.root}: {busy(given_as, holder)}.")
    before = os.environ.get(WRITING_ENV)
    os.environ[WRITING_ENV] = str(run.root)  # the notebooks' kernels this run starts are its own
    try:
        yield
    finally:
        run.release()
        if before is None:
            os.environ.pop(WRITING_ENV, None)
        else:
            os.environ[WRITING_ENV] = before


def kind_check(run: RunDir, notebooks: list[str], given_as: str, advice: str | None = None,
               parameters: dict[str, Any] | None = None) -> list[Check]:
    """The refusal of `run` when it is a run and this a family (or the other way round), or a run of another dataset
    (`advice`: what to do, else to give the run or the family its own `given_as`); [] when `run` is new or alike."""
    if why := run.foreign_refusal(rebuilds(notebooks)) or _foreign_subject(run, notebooks, parameters or {}, given_as,
                                                                            advice):
        return [Check("run directory", False, why, problem="REFUSED")]
    data = Manifest(run).read()  # (a family's plan, recorded before its members run, marks its folder too)
    recorded = list(data.get("notebooks") or [FAMILY_NOTEBOOK] * ("members" in data))
    family, held = notebooks == [FAMILY_NOTEBOOK], recorded == [FAMILY_NOTEBOOK]
    if not recorded or family == held:
        return []
    kinds = ("a run", "a family's folder")
    advice = advice or f"give the {'family' if family else 'run'} its own {given_as}"
    return [Check("run directory", False, f"{run.root} holds {kinds[held]} ({', '.join(recorded)}), not "
                                          f"{kinds[family]}: {advice} (--force replaces a run of other parameters, "
                                          f"not another kind of folder)", problem="REFUSED")]


def _foreign_subject(run: RunDir, notebooks: list[str], parameters: dict[str, Any], given_as: str,
                     advice: str | None = None) -> str | None:
    """Why a notebook of the run may not write into `run`, which describes another dataset (repro.subject); else None.
    (The notebooks refuse it too, but only once `repro run` has recorded the run it starts.)"""
    for nb in notebooks if parameters else ():
        building = nb == "01_construct"
        subject = READS_RUN_DATASET.get(nb)
        if (building or subject) and (why := subject_refusal(run, parameters.get(subject) if subject else None,
                                                             subject or "source", building, given_as, advice)):
            return why
    return None


def source_changed(run: RunDir, parameters: dict[str, Any]) -> str:
    """What a continued run says when its source's content or hub commit is not what it was built from; ""."""
    built = (Manifest(run).read().get("stages") or {}).get("load") or {}
    source, revision = parameters["source"], parameters.get("source_revision")
    now = {"content": local_content(source), "commit": hub_commit(source, revision)}
    changed = [k for k, v in now.items() if v and built.get(k) and built[k] != v]
    if not (changed and rebuilds(parameters.get("notebooks") or ())):
        return ""
    what = ("content" if "content" in changed else
            f"hub commit ({built['commit'][:12]} then, {now['commit'][:12]} in the local hub cache now)")
    return (f"; the source's {what} changed since the run was built from it: 01_construct builds again from the "
            f"new rows (work of the old ones is set aside)")


def rebuilds(notebooks: Sequence[str]) -> bool:
    """Whether these notebooks build the dataset again (then a replaced run's outputs all go first)."""
    return "01_construct" in notebooks


def scoring_code(run: RunDir, notebooks: Sequence[str]) -> str | None:
    """The digest of the code that scores the run's rows: this repro's where `notebooks` build them again, else the
    one its score stage recorded (None: an older repro's record), not the code installed now."""
    return python_digest(*SCORING_CODE) if rebuilds(notebooks) else \
        ((Manifest(run).read().get("stages") or {}).get("score") or {}).get("code")


def selfcheck_check(run: RunDir, given: str | None, notebooks: Sequence[str]) -> list[Check]:
    """A line where the card `notebooks` make cites a self-check of other (or unknown) scoring code than the run's."""
    found = find_selfcheck(run.root, given) if any(nb in CITES_SELFCHECK for nb in notebooks) else None
    same = found and selfcheck_summary(found, code=scoring_code(run, notebooks))["same_code_as_run"]
    said = {False: " ran other scoring code than this run", None: ": whether it ran this run's scoring code is not "
            "recorded"}.get(same) if found else None
    return [Check("selfcheck", True, f"{found}{said} (the card says so)", note="NOTE")] if said else []


def rerun_check(run: RunDir, changed: dict[str, tuple[Any, Any]], force: bool, given_as: str,
                parameters: dict[str, Any], stale: str = "", member: bool = False) -> Check:
    """Whether this run may write into `run`: nobody else writing there, and new, the same parameters, or `force`."""
    if (writer := run.writer()) is not None:
        return Check("run directory", False, busy(given_as, writer), problem="BUSY")
    runs = executed(parameters["notebooks"], stale, force)
    recorded = not changed and run.manifest.is_file()
    how = how_it_runs(run, parameters) + source_changed(run, parameters) if recorded else ""
    # chunks loaded as they are (not set aside as work of other values): a damaged one stops the run
    aside, broken = damaged_work(run) if not changed and rebuilds(runs) and "set aside" not in how else ([], [])
    if broken:
        n = len(finished_chunks(run.work)) - len(broken) - sum(k for k, _ in aside)
        return Check("run directory", False, f"{'; '.join(broken)}: a run there stops at "
                                             f"{'it' if len(broken) == 1 else 'the first'} (the other "
                                             f"{counted(n, 'finished chunk')} {'is' if n == 1 else 'are'} kept)",
                     problem="DAMAGED")
    if not changed and not run.manifest.is_file():  # (a replaced run's work/ stays: its record may be all that went)
        n = len(finished_chunks(run.work))
        return Check("run directory", True, f"{run.root} (new)" if not n else
                     f"{run.root} (no run recorded there; {counted(n, 'finished chunk')} in work/: each is used if "
                     f"it was made with these values, else set aside)")
    last = Manifest(run).last_run()
    if not changed:
        made = made_by_other_code(run, parameters) + aside if rebuilds(runs) else []  # (set aside, not kept)
        n = len(finished_chunks(run.work)) - sum(k for k, _ in made)
        kept = "" if "set aside" in how or made and not n else \
            f"; {counted(n, 'finished chunk')} {'is' if n == 1 else 'are'} kept"
        ended = (f"; the last run {last}{kept}" if last else
                 f"; it completed, but {stale}: {runs_again(run, runs)}" if stale else "") + \
            "".join(f"; {said}" for _, said in made)
        other = unread_changes(run, parameters)  # (`notebooks`, values of a notebook only one of the runs executes)
        same = (f", same {'data ' if how else ''}values for the notebooks both runs execute, other {listed(other)}"
                if other else "" if stale.startswith("its parameters") else  # (recorded by another repro: unsaid)
                f", same {'data ' if how else ''}parameters")
        return Check("run directory", True, f"{run.root} (continues the run there{same}{how}{ended})")
    notebooks, changes = parameters["notebooks"], listed(changed)
    if rebuilds(notebooks) and (read := read_from_outputs(run, parameters)):
        return Check("run directory", False, f"{', '.join(read)} {'is' if len(read) == 1 else 'are'} read from what "
                                             f"replacing the run in {run.root} removes first (--force too): give this "
                                             f"run another {given_as}, or copy what it reads out of that run directory "
                                             f"first and give the copy", problem="REFUSED")
    view = notebooks == [FAMILY_NOTEBOOK]  # a family's folder: its view of members that stay as they are
    held = "a family view of" if view else "a run with"
    if not Manifest(run).made_results():
        ended = f" and {last}" if last else ""
        return Check("run directory", True, f"{run.root} holds an unfinished run with other parameters ({changes}) "
                                            f"that made nothing but its notebooks{ended}: it is replaced "
                                            f"({'the members stay as they are' if view else reused(run, parameters)})")
    # a run without 01_construct keeps the dataset: its notebooks make their own outputs again, whole
    replaced = (f"its outputs are removed first ({reused(run, parameters)})" if rebuilds(notebooks) else
                f"{FAMILY_NOTEBOOK} makes the family view again with the new values (the members stay as they are)"
                if view else
                f"the notebooks listed ({', '.join(notebooks)}) run again with the new values and make their outputs "
                f"anew (the dataset and the other notebooks' outputs stay)")
    if force:
        return Check("run directory", True, f"{run.root} holds {held} other parameters ({changes}); --force: "
                                            f"{replaced}")
    sets = " ".join(set_option(key, old) for key, (old, _) in changed.items())
    # (a member's values may be its grid's; values this repro refuses cannot continue it, whatever the record says)
    wrong = [] if member else [why for key, (old, _) in changed.items() if (why := refused_value(key, old))] or [
        c.detail for c in run_dataset_checks({**parameters, **{k: old for k, (old, _) in changed.items()}}, run.root)
        if c.what in changed]
    again = "" if member or wrong else f"continue that one with its values (`{sets}`), "
    return Check("run directory", False,
                 f"{run.root} holds {held} other parameters: {changes}. Give another {given_as} for this run, "
                 f"{again}or pass --force: {replaced}" + f". Its own values cannot continue it: "
                 f"{' '.join(wrong)}" * bool(wrong), problem="REFUSED")


def refused_value(key: str, value: Any) -> str | None:
    """Why a recorded `value` of `key` is refused by type (an older repro's choice, since gone); paths unread."""
    fields = [schema.model_fields[key] for schema in SCHEMAS.values() if key in schema.model_fields]
    try:
        check_value(fields[0].annotation, value, key) if fields else None
    except ParameterError as exc:
        return str(exc)
    return None


def previous_outputs(run: RunDir) -> list[Path]:
    """What replacing the run removes: its recorded files, then its outputs' folders, records (no work/, selfcheck)."""
    recorded = [run.root / relative for relative in Manifest(run).outputs()]
    return list(dict.fromkeys([*(p for p in recorded if p.is_file()), *(p for p in (
        run.notebooks, run.dataset, run.figures, run.tables, run.metrics, run.compare, run.manifest) if p.exists())]))


def read_from_outputs(run: RunDir, parameters: dict[str, Any]) -> list[str]:
    """'parameter (path)' per input (`needs`) in or holding what replacing the run removes (the run: its dataset/)."""
    gone = [path.resolve() for path in previous_outputs(run)]
    read = {f"{need.parameter} ({need.value})": Path(need.value).resolve() for need in needs(parameters)
            if os.path.isabs(need.value)}
    return [name for name, path in read.items() if any(path.is_relative_to(g) or g.is_relative_to(path) for g in gone)]


def clear_previous_run(run: RunDir) -> list[str]:
    """Remove what a previous run made but work/ and self-checks; returns what went, relative to the run."""
    removed = previous_outputs(run)
    for path in removed:  # (a file may be named twice: notebooks/../metrics.json)
        shutil.rmtree(path) if path.is_dir() else path.unlink(missing_ok=True)
    return [str(path.relative_to(run.root)) for path in removed]


def replace_run(run: RunDir, force: bool) -> None:
    """Remove what the last run made (`--force`, or it made nothing), saying so and what its record names outside."""
    data = Manifest(run).read()
    inside, recorded = Manifest(run).outputs(data), data.get("outputs")  # (each key resolved once)
    elsewhere = [k for k in recorded if k not in inside] if isinstance(recorded, dict) else []
    removed = clear_previous_run(run)
    print(printable(f"repro run: {'--force: ' if force else ''}removed the previous run's "  # (its record's names)
                    f"{', '.join(removed) or 'nothing'} from {run.root}" + f"; its record also names "
                    f"{', '.join(elsewhere)}, outside {run.root}: left alone" * bool(elsewhere)))
