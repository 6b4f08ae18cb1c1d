"""Everything a run's parameters need (GPU, vLLM or llm-blender, inputs local, cached or reachable, writable caches,
disk), checked before any download or notebook: `repro run` refuses to start, naming each; `--check` lists them."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shlex
import shutil
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import datasets.config
import huggingface_hub  # (its HfApi looked up at each check: what a test or a mirror's set-up replaces)
from huggingface_hub import constants
from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError, RevisionNotFoundError

from ..analysis import prose
from ..errors import (Busy, DataError, ModelLoadError, ParameterError, ReproError, counted, did_you_mean,
                      printable)
from ..exporters import FORMATS
from ..jobs import idle_processes
from ..manifest import git_refusal, package_versions
from ..parameters import NOTEBOOK_SECTIONS, SCHEMAS, builtin_folder, read_params_yaml
from ..paths import (CHECKPOINT, HOME_ENV, PROJECT_MARKER, STAND_IN_MARKER, RunDir, beside_hint, cache_root,
                     checkout_root, is_hub_id, local_checkpoint, nearest_existing, project_root, run_folder,
                     unreadable_stand_in, write_problem)
from ..revisions import REVISION_OF, check_revision_target, hub_offline, hub_snapshot, publish_blocker, revision_of
from ..slicing import mini_bounds
from ..sources import (build_first, data_suffixes, file_problem, folder_problem, folder_splits, local_splits,
                       shards_problem)
from ..subject import dataset_or_own

HUB_TIMEOUT_S = 5.0  # per hub request; all ids are asked at the same time
# rough bytes a run writes per row and candidate text (work chunks, arrow cache, parquet): the disk check's scale
BYTES_PER_TEXT = 4096
MARGIN_BYTES = 64 << 20  # executed notebooks, figures, tables (the demo writes about 2 MB of them)
# the build named: `torch==2.13.0` alone is satisfied by the lock's 2.13.0+cpu, which uv and pip then keep
CUDA_TORCH = "torch==2.13.0+cu128 --index-url https://download.pytorch.org/whl/cu128"
LLM_BLENDER = "llm-blender==0.0.2"  # pyproject.toml's pin
# the tracked packages not checked as dependencies: repro itself, and those only a backend needs (checked for it)
UNCHECKED = ("repro", "vllm", "llm-blender")


def install_line(make: str, pip: str) -> str:
    """How to install something here: `make install ...` in a checkout, `pip install ...` for an installed package."""
    return f"`make install {make}`" if checkout_root() else f"`pip install {pip}`"


def reinstall(pip: str) -> str:
    """What to do where a dependency of this package is missing (`make install -B` syncs the lock again)."""
    return f"a dependency of this package: reinstall with {install_line('-B', pip)}"


@dataclass(frozen=True)
class Check:
    """One thing a run needs: what (as the parameter names it), whether it is there, and what was found or to do."""

    what: str
    ok: bool
    detail: str
    problem: str = "MISSING"  # the word a check that fails is shown with
    note: str = ""  # the word of a check that passes but says what to weigh before the run (IDLE, NOTE), said first

    def line(self) -> str:
        return printable(f"  {self.note or 'ok' if self.ok else self.problem:<7}  {self.what}: {self.detail}")


@dataclass(frozen=True)
class Need:
    """One input: the parameter naming it, value, dataset or model, and revision (commit, tag, branch; None: newest)."""

    parameter: str
    value: str
    repo_type: str  # "dataset" | "model"
    splits: tuple[tuple[str, str], ...] = ()  # a dataset's (split parameter, split asked for), each
    revision: str | None = None


def needs(values: dict[str, Any], stand_ins: bool = False) -> list[Need]:
    """The datasets and models the notebooks read (not the demo; with `stand_ins` only `builtin:` models, else none);
    one input several parameters name at one revision is one need ("policy_model and scorer_prompt_tokenizer")."""
    notebooks = set(values.get("notebooks") or ())
    # (value, repo_type, splits, revision): the parameters naming it, in order
    named: dict[tuple[str, str, tuple[tuple[str, str], ...], str | None], list[str]] = {}

    def add(parameter: str, value: Any, repo_type: str, *splits: str) -> None:
        asked = tuple((split, values[split]) for split in splits if values.get(split))
        revision = revision_of(parameter, values)
        for one in value if isinstance(value, list) else [value]:
            if one and one != "demo" and str(one).startswith("builtin:") == stand_ins:
                named.setdefault((str(one), repo_type, asked, revision), []).append(parameter)

    if "01_construct" in notebooks:  # (a test split is read from the source too)
        add("source", values.get("source"), "dataset", "source_split", "test_split")
        if values.get("generate"):
            add("policy_model", values.get("policy_model"), "model")
        add("scorer_model", values.get("scorer_model"), "model")
        if values.get("scorer_prompt") == "chat_template":
            add("scorer_prompt_tokenizer", values.get("scorer_prompt_tokenizer"), "model")
        for spec in values.get("scorers") or ():
            add(f"scorers[{spec['name']}].model", spec["model"], "model")
    if "02_analyze" in notebooks:
        add("dataset", values.get("dataset"), "dataset", "dataset_split")
    if "03_card" in notebooks:
        add("card_dataset", values.get("card_dataset"), "dataset", "card_split")
    if "04_compare" in notebooks:
        for key in ("reference", "candidate", "compare_source"):
            add(key, values.get(key), "dataset", f"{key}_split")
    return [Need(" and ".join(dict.fromkeys(parameters)), value, repo_type, splits, revision)
            for (value, repo_type, splits, revision), parameters in named.items()]


def device_checks(values: dict[str, Any]) -> list[Check]:
    """A CUDA GPU (enough of them) for every `cuda` device the run uses."""
    wanted = []
    if "01_construct" in (values.get("notebooks") or ()):
        wanted.append(("device", values["device"], values["num_processes"]))
        if values.get("generate"):
            wanted.append(("generation_device", values["generation_device"], values["generation_num_processes"]))
    wanted = [(key, device, n) for key, device, n in wanted if str(device).startswith("cuda")]
    if not wanted:
        return []
    import torch  # only when a GPU is asked for

    visible = torch.cuda.device_count() if torch.cuda.is_available() else 0
    checks, cuda_torch = [], install_line("TORCH_SPEC=\"" + CUDA_TORCH + "\"", CUDA_TORCH)
    for key, device, processes in wanted:
        index = int(device.split(":")[1]) if ":" in device else 0
        need = max(index + 1, processes)
        what = f"{key}: {device}" + (f" with {processes} processes" if processes > 1 else "")
        if visible >= need:
            checks.append(Check(what, True, f"{counted(visible, 'CUDA GPU')} visible to torch {torch.__version__}"))
        elif visible == 0:
            checks.append(Check(what, False, f"no CUDA GPU: torch {torch.__version__} sees none. On a GPU machine "
                                             f"install CUDA torch: {cuda_torch}; or set {key}: cpu"))
        else:
            checks.append(Check(what, False, f"needs {counted(need, 'CUDA GPU')}, torch sees {visible}: lower the "
                                             f"number of processes or pick a visible device"))
    return checks


def package_checks(values: dict[str, Any]) -> list[Check]:
    """The notebooks' imports; vLLM for `generation_backend: vllm`, llm-blender for a `llm-blender` scorer backend."""
    missing = [name for name, version in package_versions().items() if version is None and name not in UNCHECKED]
    checks = [Check(name, False, f"{name} is not installed ({reinstall(name)})") for name in missing]
    if "01_construct" not in (values.get("notebooks") or ()):
        return checks
    wanted = []  # (what, module, name, how to get it)
    if values.get("generate") and values.get("generation_backend") == "vllm":
        wanted.append(("generation_backend: vllm", "vllm", "vLLM", f": {install_line('EXTRAS=vllm', 'vllm')} (a CUDA "
                       "machine), or set generation_backend: transformers"))
    if "llm-blender" in [values.get("scorer_backend")] + [s.get("backend") for s in values.get("scorers") or ()]:
        wanted.append(("scorer_backend: llm-blender", "llm_blender", "llm-blender",
                       f" ({reinstall(LLM_BLENDER)}), or set the backend to repro"))
    found = [importlib.util.find_spec(module) is not None for _, module, _, _ in wanted]
    return checks + [Check(what, ok, f"{name} is installed" if ok else f"{name} is not installed{fix}")
                     for (what, _, name, fix), ok in zip(wanted, found)]


def builder(folder: Path, params_file: Path | None) -> str | None:
    """`repro run F` for the params file F beside `params_file` whose run directory is `folder`, else None."""
    for other in sorted(params_file.parent.glob("*.yaml")) if params_file else ():
        with contextlib.suppress(ReproError, TypeError):  # (a file that does not read builds nothing)
            included, own = read_params_yaml(other)
            values = {**included, **own}
            if run_folder(values.get("run_dir"), values.get("run_name") or other.stem).resolve() == folder.resolve():
                shown = os.path.relpath(other) if other.is_relative_to(Path.cwd()) else str(other)
                return f"`repro run {shlex.quote(shown)}`"
    return None


def other_project(path: str, params_file: Path | None) -> str:
    """For a `path` missing from the project root: where `params_file` lies in another marked project, that the paths
    are read from the root, and how to read them from that project; else ""."""
    root = project_root()
    other = next((f for f in params_file.resolve().parents if (f / PROJECT_MARKER).is_file()), root) \
        if params_file else root
    why = (f"{HOME_ENV} names it" if os.environ.get(HOME_ENV) else "the current folder's project"
           if Path.cwd().resolve().is_relative_to(root) else "the current folder is in no project")
    return "" if other == root or not Path(path).is_relative_to(root) else (
        f" The paths are read from {root} ({why}), not from {other}, where {params_file.name} is: `cd` into {other} "
        f"or set {HOME_ENV}={other}.")


def _input_check(need: Need, params_file: Path | None = None) -> tuple[Check, int]:
    """(check, bytes to download): local, cached or reachable; a dataset not built names the params file building it."""
    what = f"{need.parameter}: {need.value}"
    if not is_hub_id(need.value):
        path = Path(need.value)
        there = path.exists()
        # a dataset not there yet that a params file beside builds (else a missing path, maybe a typo, is told as one)
        if need.repo_type == "dataset" and (not there or path.is_dir() and not data_suffixes(path)
                                            and not RunDir(path).manifest.is_file()) and \
                (how := builder(path, params_file)):
            return Check(what, False, f"{'holds no dataset' if there else 'does not exist'} yet: "
                                      f"{build_first(how)}"), 0
        splits = _splits(path) if there and need.splits else None
        if lacking := [(key, split) for key, split in need.splits if splits and split not in splits]:
            said = [f"local dataset without split {split!r} (it has {splits}): set {key} to one of those"
                    + (f".{near}" if (near := did_you_mean(split, splits)) else "") for key, split in lacking]
            return Check(what, False, "; ".join(said)), 0
        if there and need.repo_type == "dataset" and (why := _shards_problem(path, need) if splits else
                                                     folder_problem(path) if path.is_dir() else file_problem(path)):
            return Check(what, False, why.removeprefix(": ").strip()), 0
        try:  # a model's folder as its loader reads it (scorer_prompt_tokenizer alone reads a tokenizer only)
            if there and need.repo_type == "model" and need.parameter != "scorer_prompt_tokenizer":
                local_checkpoint(need.value, need.parameter, "", CHECKPOINT)
        except ModelLoadError as exc:
            return Check(what, False, str(exc)), 0
        return Check(what, there, f"local {need.repo_type}" if there else
                     "no such file or folder; give an existing path or a hub id (owner/name)."
                     + beside_hint(need.value) + other_project(need.value, params_file)), 0
    at = f" at revision {need.revision}" if need.revision else ""
    if cached := hub_snapshot(need.value, need.revision, need.repo_type):
        if why := need.repo_type == "dataset" and _shards_problem(cached, need, need.value):
            return Check(what, False, why.removeprefix(": ")), 0
        return Check(what, True, f"hub {need.repo_type}{at}, in the local hub cache"), 0
    if switch := hub_offline(*(["HF_DATASETS_OFFLINE"] if need.repo_type == "dataset" else [])):
        why = f"the hub is switched off here ({switch})"
    else:
        try:
            info = huggingface_hub.HfApi().repo_info(need.value, repo_type=need.repo_type, revision=need.revision,
                                     timeout=HUB_TIMEOUT_S, files_metadata=True)
        except GatedRepoError:
            why = "it is gated: accept its terms on the hub and log in (`hf auth login`)"
        except RevisionNotFoundError:
            why = "the hub has no such revision: check the commit, tag or branch"
        except RepositoryNotFoundError:
            why = f"no such {need.repo_type} on the hub (or it is private): check the id"
        except Exception as exc:  # connection refused, DNS, timeouts: the hub cannot be reached from here
            why = f"the hub cannot be reached ({type(exc).__name__})"
        else:
            size = sum(s.size for s in info.siblings or () if s.size is not None)
            return Check(what, True, f"hub {need.repo_type}{at}, reachable (downloaded on first use"
                         + (f", {size / 1e9:.1f} GB)" if size else ")")), size
    kind = " --repo-type dataset" if need.repo_type == "dataset" else ""
    kind += f" --revision {need.revision}" if need.revision else ""  # (the folder of that revision)
    # a folder has no revisions (the one downloaded is the pinned one's): the revision parameter is unset
    pins = " and ".join(REVISION_OF[p] for p in need.parameter.split(" and ") if p in REVISION_OF)
    return Check(what, False, f"hub {need.repo_type} not in the local hub cache{at} and {why}. With network: "
                              f"`hf download {need.value}{kind} --local-dir DIR`, then set {need.parameter} to DIR"
                              + (f" and {pins}: null." if need.revision else ".") + beside_hint(need.value)), 0


def _shards_problem(path: Path, need: Need, hub_id: str | None = None) -> str | None:
    """Why the shards of a split `need` reads cannot be one dataset (no rows, types that differ), as its load says."""
    return next(filter(None, (shards_problem(path, split, hub_id) for _, split in need.splits)), None)


def _splits(path: Path) -> list[str] | None:
    try:
        plain = path.is_dir() and not (path / "state.json").is_file() and data_suffixes(path)  # (a Dataset: no split)
        return local_splits(path) or (folder_splits(path) if plain else None)
    except (DataError, OSError, ValueError):  # damaged shards or record: the run's own load says what is wrong
        return None


def input_checks(values: dict[str, Any], params_file: Path | None = None) -> tuple[list[Check], int]:
    """(checks, bytes to download) of every input; all hub ids are asked at the same time."""
    inputs = needs(values)
    with ThreadPoolExecutor(max_workers=max(1, len(inputs))) as pool:
        found = list(pool.map(_input_check, inputs, [params_file] * len(inputs)))
    return [check for check, _ in found], sum(size for _, size in found)


def publish_checks(values: dict[str, Any]) -> list[Check]:
    """With `push_to_hub`, 03_card uploads at the end: the hub and a token must be there before the work starts."""
    if not values.get("push_to_hub") or "03_card" not in (values.get("notebooks") or ()):
        return []
    why = publish_blocker()
    return [Check(f"push_to_hub: {values.get('hub_repo_id')}", why is None,
                  "a token is here (its write access is checked at the upload)" if why is None
                  else f"{why}, or set push_to_hub: false")]


# the notebooks that read this run's dataset when their parameter (the schema's `subject`) is unset, by that parameter
READS_RUN_DATASET = {notebook: SCHEMAS[sections[0]].subject for notebook, sections in NOTEBOOK_SECTIONS.items()
                     if SCHEMAS[sections[0]].subject}


def run_dataset_checks(values: dict[str, Any], run_root: Path) -> list[Check]:
    """A notebook reading this run's dataset needs 01_construct before it, or a run that built it; the split it names
    (its `_split`) one 01_construct writes first, else the dataset's, as the notebook reads it (dataset_or_own)."""
    notebooks, run, checks = list(values.get("notebooks") or ()), RunDir(run_root), []  # (names without .ipynb)
    fmt, at = FORMATS[values["output_format"]], (values["iteration"], values["output_split"])
    for name, parameter in READS_RUN_DATASET.items():
        if name not in notebooks or values.get(parameter):
            continue
        built = "01_construct" in notebooks[:notebooks.index(name)]
        if not (built or run.dataset.is_dir()):
            checks.append(Check(f"{parameter}: this run's dataset", False,
                                f"{run.dataset} does not exist yet: add 01_construct to notebooks (before {name}), "
                                f"or set {parameter} to a run directory, a file or a hub id"))
            continue
        key = parameter.removesuffix("_dataset") + "_split"  # dataset_split, card_split, candidate_split
        writes = [fmt.split_name(*at), *[fmt.test_split_name(*at)] * bool(values["test_split"])] if built else []
        try:
            dataset_or_own(None, values[key], run, parameter, split_parameter=key, writes=writes)
        except DataError as exc:
            checks.append(Check(key, False, str(exc), problem="REFUSED"))
    return checks


def combination_checks(values: dict[str, Any]) -> list[Check]:
    """Notebooks that cannot run: 04_compare without a reference, 02_analyze of this run's dataset in SELM's layout."""
    notebooks, checks = values.get("notebooks") or (), []
    if "04_compare" in notebooks and not values.get("reference"):
        checks.append(Check("reference", False, prose("compare", "no_reference")))
    if "02_analyze" in notebooks and "01_construct" in notebooks and not values.get("dataset") and \
            values.get("output_format") == "selm":
        checks.append(Check("02_analyze", False, "output_format: selm writes SELM's columns, which carry no scores: "
                                                 "02_analyze has none to analyse. Leave it out of notebooks (SELM's "
                                                 "recipe lists 01_construct and 03_card), or choose another format"))
    return checks


def revision_checks(values: dict[str, Any]) -> list[Check]:
    """A revision pinned for a local path, a stand-in or an unset model: refused before, as the run would."""
    if "01_construct" not in (values.get("notebooks") or ()):
        return []
    checks = []
    for target, parameter in REVISION_OF.items():
        if target != "policy_model" or values.get("generate"):  # (the policy is read where the run generates)
            try:
                check_revision_target(values.get(target), values.get(parameter), parameter, target)
            except ParameterError as exc:
                checks.append(Check(parameter, False, str(exc), problem="REFUSED"))
    return checks


def sliced_rows(values: dict[str, Any]) -> int | None:
    """The rows the slice keeps (`limit` at most) as the parameters tell before loading (None: to the source's end)."""
    if values.get("part_stop") is None:
        return values.get("limit")
    start, stop = mini_bounds(values["part_stop"] - values["part_start"] - values["drop_rows"], values["mini_index"],
                              values["mini_count"])
    return min(stop - start, values.get("limit") or stop - start)


def process_checks(values: dict[str, Any]) -> list[Check]:
    """Processes that would get no chunk of the slice's prompts (a process takes whole chunks): an IDLE line each,
    which does not stop the run (the chunks decide the batches, and so the rounding: repro does not cut them)."""
    if "01_construct" not in (values.get("notebooks") or ()) or (rows := sliced_rows(values)) is None:
        return []
    jobs = [("generation_", "generation")] * bool(values.get("generate")) + [("", "scoring")]
    said = [(f"{key}num_processes", idle_processes(rows, values[f"{key}chunk_size"], values[f"{key}num_processes"],
                                                   what, f"{key}chunk_size")) for key, what in jobs]
    return [Check(what, True, idle, note="IDLE") for what, idle in said if idle]


def remote_code_checks(values: dict[str, Any]) -> list[Check]:
    """A NOTE per scorer with `trust_remote_code: true` (a colleague's params may set it): its model's Python runs."""
    if "01_construct" not in (values.get("notebooks") or ()):
        return []
    scorers = [("scorer_options", values.get("scorer_options"), values.get("scorer_model")),
               *((f"scorers[{s['name']}].options", s.get("options"), s["model"]) for s in values.get("scorers") or ())]
    return [Check(what, True, f"trust_remote_code: true runs the Python code that comes with {model} (its folder or "
                  "hub repository) on this machine as you: keep it only for a model whose code you have read or trust.",
                  note="NOTE") for what, options, model in scorers if (options or {}).get("trust_remote_code")]


def checkout_checks() -> list[Check]:
    """A NOTE where git refuses repro's checkout (owned by another user): the run records no commit."""
    return [Check("checkout", True, why, note="NOTE")] if (why := git_refusal()) else []


def estimated_bytes(values: dict[str, Any]) -> int:
    """Rough bytes the run writes into its folder (rows' texts, several times; the margin alone if rows unknown)."""
    rows = sliced_rows(values)
    if rows is None or "01_construct" not in (values.get("notebooks") or ()):
        return MARGIN_BYTES
    texts = len(values.get("candidate_columns") or ()) + 2  # + the prompt, the reference
    generated = 4 * int(values.get("max_new_tokens") or 0) if values.get("generate") else 0  # ~4 bytes a token at most
    return MARGIN_BYTES + 3 * int(rows) * texts * max(BYTES_PER_TEXT, generated)


def disk_check(values: dict[str, Any], run_root: Path, download: int) -> Check:
    """Free space where the run directory goes, for what the run writes (and the downloads, when known)."""
    existing = nearest_existing(run_root)
    free = shutil.disk_usage(existing).free
    need = estimated_bytes(values) + download
    detail = f"about {need / 1e9:.1f} GB to write, {free / 1e9:.1f} GB free at {existing}"
    fix = "" if free >= need else ": free some space or give another --out"
    return Check("disk space", free >= need, detail + fix)


def cache_checks(values: dict[str, Any], download: int) -> list[Check]:
    """The folders the run writes outside its run directory (the row cache is checked before: cache.check_format),
    each refused where it cannot be written (a read-only HOME), naming the variables that move it."""
    # every load writes (datasets locks its cache, rows cached or not); a stand-in is built once, then only read
    folders = [("datasets cache", datasets.config.HF_DATASETS_CACHE, "HF_HOME or HF_DATASETS_CACHE", False, "")]
    if stand_ins := [builtin_folder(need.value) for need in needs(values, stand_ins=True)]:
        denied = next(filter(None, map(unreadable_stand_in, stand_ins)), "")  # (built by another user)
        folders.append(("stand-in models' cache", cache_root(), "REPRO_CACHE",
                        not denied and all((folder / STAND_IN_MARKER).is_file() for folder in stand_ins), denied))
    if download:
        folders.append(("hub cache", constants.HF_HUB_CACHE, "HF_HOME or HF_HUB_CACHE", False, ""))
    checks = []
    for what, folder, variables, built, denied in folders:
        folder = os.path.abspath(folder)  # (as absolute_caches made its variable for the run)
        why = not (built or denied) and write_problem(Path(folder))
        checks.append(Check(what, not (why or denied), denied or (
            f"{folder} {why}: set {variables} to a folder that can be written" if why
            else f"{folder} ({'holds the stand-ins this run reads; ' * built}{variables} moves it)"),
                            problem="REFUSED"))
    return checks


def preflight(values: dict[str, Any], run_root: Path, params_file: Path | None = None,
              checkout: list[Check] | None = None) -> list[Check]:
    """Every check, in the order one fixes them: machine, packages, inputs, caches, disk (params_file: the one run;
    `checkout`: checkout_checks() where the caller asked git already, as a family does once for all its members)."""
    inputs, download = input_checks(values, params_file)
    return [*device_checks(values), *process_checks(values), *remote_code_checks(values),
            *(checkout_checks() if checkout is None else checkout),
            *package_checks(values), *combination_checks(values), *revision_checks(values), *inputs,
            *run_dataset_checks(values, run_root),
            *publish_checks(values), *cache_checks(values, download), disk_check(values, run_root, download)]


def report(checks: list[Check], params_file: str | Path) -> str:
    """The checks as lines, with a verdict line first."""
    missing = [c for c in checks if not c.ok]
    head = (f"{params_file}: everything the run needs is here" if not missing else
            f"{params_file}: {counted(len(missing), 'thing')} to fix ({'; '.join(c.what for c in missing)}); "
            f"nothing was downloaded or run")
    return "\n".join([printable(head), *(c.line() for c in checks)])


def say_notes(checks: list[Check]) -> None:
    """The lines of the checks that passed with a note (IDLE, NOTE): at a run's start, while a Ctrl-C costs nothing."""
    for check in checks:
        if check.ok and check.note:
            print(check.line())


def require(checks: list[Check], params_file: str | Path, list_only: bool = False) -> int | None:
    """`--check` (`list_only`): print the checks and return the exit code, 1 when something is missing; else raise
    one ReproError naming every missing piece, Busy where another process's work is all (None when all are there)."""
    if list_only:
        print(report(checks, params_file))
        return 0 if all(c.ok for c in checks) else 1
    if failed := {c.problem for c in checks if not c.ok}:
        raise (Busy if failed == {"BUSY"} else ReproError)(
            report(checks, params_file) + "\nFix these (or change the parameters), then run the same command again; "
            "`repro run --check PARAMS` lists them without running.")
