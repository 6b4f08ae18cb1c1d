"""`repro run PARAMS.yaml`: execute the listed notebooks in order through papermill into the run directory."""

from __future__ import annotations

import argparse
import contextlib
import errno
import fcntl
import json
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any

from ..errors import NOTICE, ReproError, ReproWarning, did_you_mean, printable
from . import PACKAGE
from .interrupt import (EXIT_INTERRUPTED, Interrupted, cause, kernel_manager, record_interruption, run_interruptible,
                        say, what_is_kept)
from ..jobs import PROGRESS_LINES_ENV, atomic_write_text, fingerprint_of
from ..manifest import REUSED, Manifest, find_selfcheck
from ..parameters import DEFAULT_NOTEBOOKS, notebook_fields, resolve_parameters
from ..paths import RunDir, check_folder, here_path, nearest_existing, project_root, run_folder, shipped
from ..revisions import hub_commits, model_identity, revision_of, run_fingerprint
from .preflight import preflight, require, say_notes
from .rerun import (changed_parameters, executed, kind_check, rebuilds, replace_run, rerun_check, scoring_code,
                    selfcheck_check, writing)

KERNEL_NAME = "repro"


def notebook_path(name: str) -> Path:
    """The notebook called `name` (with or without .ipynb): the checkout's, else the installed package's copy."""
    folder = shipped("notebooks")
    path = folder / f"{Path(name).stem}.ipynb"
    if not path.exists():
        known = sorted(p.stem for p in folder.glob("*.ipynb"))
        raise ReproError(f"Notebook {name!r} listed in 'notebooks' does not exist in {folder}; known notebooks: "
                         f"{known}.{did_you_mean(Path(name).stem, known)}")
    return path


def notebook_parameters(name: str, values: dict[str, Any], run_root: Path) -> dict[str, Any]:
    """The parameters papermill injects into one notebook: its sections' keys present in `values`, plus the run."""
    fields = notebook_fields(name)
    return {**{k: v for k, v in values.items() if k in fields}, "run_dir": str(run_root),
            "run_name": values.get("run_name", run_root.name)}


def this_environment(python: str) -> bool:
    """Whether a kernel's python (argv[0]) is this environment's: a bare `python` (jupyter_client runs sys.executable)
    or one in the same bin folder (not the resolved file: every venv's bin/python links to its base interpreter)."""
    if python in ("python", f"python{sys.version_info[0]}", "python{}.{}".format(*sys.version_info[:2])):
        return True
    return Path(python).absolute().parent.resolve() == Path(sys.executable).absolute().parent.resolve()


def check_kernel(name: str, registered: bool = False) -> bool:
    """Whether the Jupyter kernel `name` runs this environment's python; a ReproError for a --kernel of no kernel or
    of another environment, and for the project's own (KERNEL_NAME) once `registered` here."""
    # keeps jupyter_client off `repro run --check`
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    manager = KernelSpecManager()
    own = name == KERNEL_NAME and not registered  # missing or another environment's: ensure_kernel registers it
    try:
        spec = manager.get_kernel_spec(name)
    except NoSuchKernel:
        if own:
            return False
        known = sorted(manager.find_kernel_specs())
        raise ReproError(
            f"--kernel {name!r}: no Jupyter kernel has that name; those that do (`jupyter kernelspec list`): "
            f"{', '.join(known) or 'none'}.{did_you_mean(name, known)} --kernel names an existing kernel of this "
            f"environment ({sys.executable}); left out, repro run registers and uses its own, "
            f"{KERNEL_NAME!r}.") from None
    if (mine := this_environment(spec.argv[0])) or own:
        return mine
    raise ReproError(
        f"The Jupyter kernel {name!r} ({spec.resource_dir}) runs {spec.argv[0]}, another environment's Python, not "
        f"this environment's {sys.executable}: its notebooks would run that environment's code while the manifest "
        f"records this one's. Remove it (`jupyter kernelspec remove {name}`), give --kernel a kernel of this "
        f"environment, or run repro from that environment.")


def ensure_kernel(name: str = KERNEL_NAME) -> str:
    """`name`, a kernel of this environment (check_kernel); the project's own registered in sys.prefix if need be."""
    if not check_kernel(name):
        from ipykernel.kernelspec import install  # keeps ipykernel off `repro run --check`

        kernels = Path(sys.prefix, "share", "jupyter", "kernels")
        kernels.mkdir(parents=True, exist_ok=True)
        with open(kernels / f".{name}.lock", "a") as lock:  # runs started at once (a Slurm array): one registers
            fcntl.flock(lock, fcntl.LOCK_EX)  # (ipykernel removes the folder, then copies anew)
            if not check_kernel(name):
                install(kernel_name=name, display_name="Python (repro)", prefix=sys.prefix)
        check_kernel(name, registered=True)  # another environment's may still come first on the Jupyter path
    return name


def kernel_config():
    """Kernels with CurveZMQ-encrypted transport where pyzmq supports it (else ipykernel >= 7 warns on every start)."""
    import zmq  # keeps zmq and traitlets off `repro run --check`
    from traitlets.config import Config

    config = Config()
    if zmq.has("curve"):
        config.KernelManager.transport_encryption = "auto"
    return config


def _last_cell(notebook: str | None) -> tuple[int, int | None] | None:
    """The index and execution count of the last cell papermill started in the `notebook` text; None if none."""
    cells = json.loads(notebook)["cells"] if notebook else []
    return next(((i, c.get("execution_count")) for i, c in reversed(list(enumerate(cells)))
                 if c.get("metadata", {}).get("papermill", {}).get("start_time")), None)


# what IPython prints where it could not show a traceback (one through a card template's frames: it read the .jinja
# file as Python), the chain of exceptions then printed as text, its own failure last
UNSHOWN = "Unexpected exception formatting exception"
CHAINED_RE = re.compile(r"\n\s*(?:During handling of the above exception, another exception occurred|The above "
                        r"exception was the direct cause of the following exception):\s*\n")


def _said_in_cell(notebook: str | None) -> str:
    """The error a failed cell of `notebook` printed as text (the kernel sent no error output): the whole message
    under the last traceback's frames (before IPython's own), indented lines too (pydantic's); "" if none."""
    cells = json.loads(notebook)["cells"] if notebook else []
    failed = next((c for c in cells if c.get("metadata", {}).get("papermill", {}).get("exception")), {})
    text = "".join("".join(o.get("text", "")) for o in failed.get("outputs", []) if o.get("output_type") == "stream")
    start = text.find("Traceback (most recent call last):")
    tracebacks = CHAINED_RE.split(text[start:]) if start >= 0 else []
    if UNSHOWN in text and len(tracebacks) > 1:
        tracebacks.pop()  # (IPython's own failure)
    lines = (tracebacks[-1] if tracebacks else "").rstrip().splitlines()
    frames = [i for i, line in enumerate(lines) if line.startswith("  File ")] or [len(lines)]  # (then their source)
    start = next((i for i in range(frames[-1], len(lines)) if not lines[i][:1].isspace()), len(lines))
    return "\n".join(lines[start:])


def _disk_full(exc: BaseException, run: RunDir) -> Path | None:
    """The full disk's path `exc` names (an OSError, a kernel's via papermill), else the run's; None if not ENOSPC."""
    if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
        return Path(exc.filename or run.root)
    said = re.fullmatch(rf"\[Errno {errno.ENOSPC}\] [^:]*(?:: '(.+)')?", str(getattr(exc, "evalue", "")))
    return said and Path(said[1] or run.root)


def free_space(path: Path) -> str:
    """What to free for `path` on a full disk: its file system's mount point, and what is free there now."""
    mount = nearest_existing(path.absolute())
    while not os.path.ismount(mount):
        mount = mount.parent
    return f"free space on {mount} ({shutil.disk_usage(mount).free / 1e9:.1f} GB free now)"


def _failure_message(name: str, output: Path, exc: Exception, run: RunDir, unsaved: str | None = None) -> str:
    """What a failed notebook's run says; `unsaved`: the notebook papermill could not save (its last save failed)."""
    saved = (f"The executed notebook, with the error and everything that ran before it, is saved at {output}."
             if unsaved is None else "The executed notebook could not be saved"
             + (f": {output} is its last copy written whole." if output.is_file() else "."))
    executed = unsaved if unsaved is not None or not output.is_file() else output.read_text(encoding="utf-8")
    if type(exc).__name__ == "DeadKernelError":  # killed from outside, in the last cell papermill started
        cell = f"cell {last[0]}" if (last := _last_cell(executed)) else "a cell"
        return (f"Notebook {name}'s kernel died during {cell} (killed from outside: the out-of-memory killer, a "
                f"scheduler's limit, kill -9): {what_is_kept(Manifest(run))}.\n"
                f"{saved}")
    cell, count = getattr(exc, "cell_index", None), getattr(exc, "exec_count", None)
    if cell is None and unsaved is not None and (last := _last_cell(unsaved)):  # (a save failed after it started)
        cell, count = last
    where = "start-up" if cell is None else f"cell {cell}" + ("" if count is None else f" (execution count {count})")
    if cell is not None:  # the stage it was in, where its kernel could not record its end (a full disk)
        stages = (Manifest(run).read().get("stages") or {}).items()
        where += next((f", stage {stage}" for stage, entry in reversed(stages) if entry.get("status") == "running"), "")
    error = f"{getattr(exc, 'ename', type(exc).__name__)}: {getattr(exc, 'evalue', str(exc))}"
    if getattr(exc, "evalue", None) == "" and not getattr(exc, "traceback", None):  # the cell has no error output
        said = _said_in_cell(executed)
        error = f"{said} (from the text of the cell's output: the kernel gave no message)" if said else \
            f"{error}the kernel gave no message: the cell's output in the executed notebook shows what it printed"
    full = _disk_full(exc, run)
    return (f"Notebook {name} failed at {where}: {error}\n"
            + (f"The disk is full: {free_space(full)}; {what_is_kept(Manifest(run))}.\n" if full else "") + saved)


def skip_rfc3987_grammar() -> None:
    """Spare jsonschema 1.3 s compiling rfc3987-syntax's grammar at import (no notebook schema checks an IRI format)."""
    sys.modules.setdefault("rfc3987_syntax", None)  # None: "not installed", which jsonschema handles


class AtomicSaves:
    """papermill's local I/O, but a notebook is saved beside, then renamed over: a full disk leaves the last copy
    whole (an earlier run's too), never cut off. `unsaved`: by path, the notebook whose save failed last."""

    def __init__(self) -> None:
        self.unsaved: dict[str, str] = {}

    def read(self, path: str) -> str:
        return Path(path).read_text(encoding="utf-8")

    def write(self, buf: str, path: str) -> None:
        try:
            atomic_write_text(path, buf)
        except OSError:
            self.unsaved[path] = buf
            raise
        self.unsaved.pop(path, None)

    def listdir(self, path: str) -> list[str]:
        return [os.path.join(path, name) for name in os.listdir(path)]

    def pretty_path(self, path: str) -> str:
        return path


SAVES = AtomicSaves()


def import_papermill():
    """papermill, without the RFC 3987 grammar (skip_rfc3987_grammar), saving notebooks as AtomicSaves does."""
    skip_rfc3987_grammar()
    import papermill  # keeps papermill off `repro run --check`
    from papermill.iorw import papermill_io

    if not isinstance(papermill_io.get_handler("/"), AtomicSaves):
        papermill_io.register("/", SAVES)  # (the handler of the longest scheme a path starts with: absolute paths)
    return papermill


# a warning as a kernel prints it on stderr: "/path/file.py:12: RuntimeWarning: text" (repro's: at a cell's line)
WARNING_LINE = re.compile(r"(?P<path>.+?):\d+: (?P<kind>\w*Warning): (?P<text>.+)")
NOTICES_SHOWN = 10


def notices(notebook: Path) -> list[str]:
    """repro's notices and warnings on stderr in an executed notebook, each once (papermill does not show them)."""
    said = []
    for cell in json.loads(notebook.read_text(encoding="utf-8")).get("cells", []):  # (nbformat: jsonschema's import)
        for out in cell.get("outputs", []):
            text = out.get("text", "") if out.get("name") == "stderr" else ""
            for line in ("".join(text) if isinstance(text, list) else text).splitlines():
                if line.startswith(NOTICE):
                    said.append(line[len(NOTICE):])
                elif (match := WARNING_LINE.fullmatch(line)) and (match["kind"] == ReproWarning.__name__
                                                                  or match["path"].startswith(PACKAGE)):
                    said.append(f"{match['kind']}: {match['text']}")
    return list(dict.fromkeys(said))


def _say_notices(name: str, notebook: Path) -> None:
    with contextlib.suppress(OSError, ValueError, AttributeError):  # (a notebook papermill could not write)
        said = notices(notebook)
        for line in said[:NOTICES_SHOWN]:
            print(f"repro run: {name}: {printable(line)}", file=sys.stderr)
        if len(said) > NOTICES_SHOWN:
            print(f"repro run: {name}: and {len(said) - NOTICES_SHOWN} more in {notebook}", file=sys.stderr)


def run_notebooks(values: dict[str, Any], run_root: Path, *, kernel: str = KERNEL_NAME,
                  log_output: bool = False, selfcheck: str | None = None, record: dict[str, Any] | None = None,
                  last_line: bool = True, fingerprint: dict[str, Any] | None = None,
                  only: list[str] | None = None, short_of: str | None = None) -> int:
    """Run the params' notebooks (`only`: those) in order into run_root/notebooks/; the manifest records the run,
    `record`, once complete `fingerprint` (None: `run_fingerprint` now); `last_line`: end with "complete"; `kernel`:
    ensure_kernel's; `short_of`: recorded failed with it when done (a family's members not all complete)."""
    papermill = import_papermill()
    notebooks = [Path(n).stem for n in values.get("notebooks", DEFAULT_NOTEBOOKS)]
    notebooks = [nb for nb in notebooks if only is None or nb in only]
    paths = {n: notebook_path(n) for n in notebooks}
    run = RunDir(run_root)
    run.notebooks.mkdir(parents=True, exist_ok=True)
    manifest = Manifest(run)
    fingerprint = fingerprint or run_fingerprint(values)
    manifest.start_run(values, notebooks, driver="repro run", merge=True)  # (a replaced run left no record)
    # `selfcheck`, else the newest selfcheck.json in the run directory; whether it checked the scorer (only if one is
    # cited) that scored the rows, at its revision, and their code: as recorded (01_construct's, unless it runs now)
    scored = {**values, **manifest.recorded(manifest.read())}
    manifest.record_selfcheck(selfcheck, lambda: model_identity(
        scored["scorer_model"], revision_of("scorer_model", scored)), lambda: scoring_code(run, notebooks))
    manifest.update(**(record or {}))
    # Ctrl-C (or SIGTERM, raised as it) before a notebook or between two: before this one started
    upcoming = notebooks[0]
    try:
        if log_output:  # the kernels inherit it: progress as lines, which papermill streams to the terminal
            os.environ[PROGRESS_LINES_ENV] = "1"
        for k, name in enumerate(notebooks):
            output = run.notebooks / f"{name}.ipynb"
            manifest.notebook_status(name, "running", executed=str(output.relative_to(run.root)))
            try:
                run_interruptible(
                    papermill.execute_notebook,
                    str(paths[name]), str(output), parameters=notebook_parameters(name, values, run.root),
                    kernel_name=kernel, progress_bar=False, log_output=log_output, cwd=str(project_root()),
                    config=kernel_config(), kernel_manager_class=kernel_manager())
            except Interrupted as stop:  # Ctrl-C or SIGTERM: the kernel is stopped; what finished is on disk
                say(record_interruption(manifest, name, how=stop.how))
                return EXIT_INTERRUPTED
            except Exception as exc:  # papermill's PapermillExecutionError, or a kernel that died
                unsaved = SAVES.unsaved.pop(str(output), None)  # (the notebook's last save failed: a full disk)
                if not log_output and unsaved is None:  # (with it, papermill showed the notebook's output as it came)
                    _say_notices(name, output)
                message = _failure_message(name, output, exc, run, unsaved)
                try:
                    manifest.notebook_status(name, "failed", error=message)
                    manifest.finish_run("failed", error=f"{message}\n({short_of})" if short_of else message)
                    if output.exists() and unsaved is None:
                        manifest.add_outputs(output)
                except OSError as unwritable:  # (the run directory made read-only partway, or its disk full)
                    full = _disk_full(unwritable, run)
                    fix = free_space(full) if full else f"make {run.root} writable"
                    message += (f"\nThe run directory could not record the failure ({type(unwritable).__name__}: "
                                f"{unwritable})" + (" either." if full and _disk_full(exc, run) else
                                                    f": {fix}, then run the same command to continue."))
                print(printable(f"repro run: FAILED\n{message}"), file=sys.stderr)  # (the kernel's: a record's text)
                return 1
            manifest.notebook_status(name, "done", executed=str(output.relative_to(run.root)))
            if not log_output:
                _say_notices(name, output)
            upcoming = notebooks[k + 1] if k + 1 < len(notebooks) else None
            manifest.add_outputs(output)
            print(f"repro run: {name} done -> {output}")
        # the hub commits as the run read them: a first run downloads what was not in the cache when it started
        manifest.update(fingerprint={**fingerprint, "hub commits": hub_commits(values)})
        manifest.finish_run(*(("failed", short_of) if short_of else ("complete",)))
    except KeyboardInterrupt as stop:
        say(record_interruption(manifest, upcoming, started=False, how=cause(stop)))
        return EXIT_INTERRUPTED
    if last_line:
        print(f"repro run: complete -> {run.root}")
    return 0


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("params", help="a params YAML file, e.g. params/demo.yaml, or an example's name, e.g. demo")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override one parameter (repeatable); VALUE is read as YAML (3, true, null, [a, b], "
                             "{k: v}), but plain text YAML would cut at ' #' or read as a mapping (a: b), and a date, "
                             "are kept as typed")
    parser.add_argument("--out", type=here_path,
                        help="the run directory, from the current folder (default: run_dir, else runs/<run_name> of "
                             "the project root)")
    parser.add_argument("--kernel", default=KERNEL_NAME,
                        help=f"an existing Jupyter kernel of this environment to execute with (default: "
                             f"{KERNEL_NAME}, which repro run registers for this environment)")
    parser.add_argument("--log-output", action="store_true", help="stream the notebooks' output to the terminal")
    parser.add_argument("--check", action="store_true",
                        help="only check that everything the run needs is here (GPU, packages, downloads, disk), "
                             "print the list and exit: 0 when all is there, 1 when something is missing")
    parser.add_argument("--force", action="store_true",
                        help="replace a run with other parameters in the run directory (its outputs are removed "
                             f"first; {REUSED}); with the same parameters, run its notebooks again (a family's "
                             "complete members are still reused)")


def run_params(args: argparse.Namespace, params_file: Path, values: dict[str, Any]) -> int:
    """`repro run` of one params file (`values`: its parameters, --set applied) into its run directory."""
    values.setdefault("run_name", params_file.stem)
    given_as = folder_given_as(args, values)
    if args.out:
        values["run_dir"] = args.out
    run_root = run_folder(values.get("run_dir"), values["run_name"])
    default = not values.get("run_dir")
    values["run_dir"] = str(run_root)
    check_run_root(run_root, given_as, default, unread=True)
    find_selfcheck(run_root, values.get("selfcheck"))  # a wrong `selfcheck` is an error before anything runs
    resolved = resolve_parameters(values)
    for name in resolved["notebooks"]:
        notebook_path(name)  # a misspelt notebook: an error before any check or work
    run = RunDir(run_root)
    # before any download or notebook: the run directory, then the machine
    changed = changed_parameters(run, resolved)
    fingerprint = run_fingerprint(resolved)  # the inputs as they are before any work (hashed once)
    stale = Manifest(run).unheld(fingerprint, values.get("selfcheck"), resolved)
    if not (changed or args.force or stale):
        print(f"repro run: nothing to do: {run_root} holds a complete run of these parameters, "
              f"{read_parts(fingerprint)}code and packages, with every output it recorded. --force runs its notebooks "
              f"again.")
        return 0
    check_run_root(run_root, given_as, default)
    runs = executed(resolved["notebooks"], "" if changed else stale, args.force)
    checks = [*(kind_check(run, resolved["notebooks"], given_as, parameters=resolved)
                or [rerun_check(run, changed, args.force, given_as, resolved, stale)]),
              *selfcheck_check(run, values.get("selfcheck"), runs), *preflight(resolved, run_root, params_file)]
    if (code := require(checks, params_file, args.check)) is not None:
        return code
    ensure_kernel(args.kernel)  # (another environment's: refused before the run's lock and record, as --kernel's)
    with writing(run, given_as):  # from here to the end, no other `repro run` writes into this directory
        if changed and rebuilds(resolved["notebooks"]):  # --force or a run that made nothing
            replace_run(run, args.force)  # nothing of it may outlive it (else require refused)
        shown = json.dumps(values, ensure_ascii=False, default=str)  # (a path as it is named, not as \u escapes)
        print(f"repro run: {params_file} -> {run_root}\n  parameters: {shown}")
        where = checks[0]  # why a complete run runs again, what a run there reuses, why one was replaced
        if where.what == "run directory" and not where.detail.endswith("(new)"):
            print(printable(f"  run directory: {where.detail}"))
        say_notes(checks)
        return run_notebooks(resolved, run_root, kernel=args.kernel, log_output=args.log_output,
                             selfcheck=values.get("selfcheck"), fingerprint=fingerprint, only=runs)


def read_parts(*fingerprints: dict[str, Any]) -> str:
    """'local inputs, hub commits, ': which of the two runs of `fingerprints` read (demo: none), for 'nothing to do'."""
    return "".join(f"{part}, " for part in ("local inputs", "hub commits")
                   if any(fingerprint[part] not in ("", fingerprint_of({})) for fingerprint in fingerprints))


def folder_given_as(args: argparse.Namespace, values: dict[str, Any]) -> str:
    """How the run's (or family's) folder was given, where a user changes it: run_dir, unless --out was given."""
    return "run_dir" if values.get("run_dir") and not args.out else "--out"


def check_run_root(run_root: Path, given_as: str, default: bool = False, unread: bool = False) -> None:
    """Refuse before any work a run directory at or in a file, or unwritable (`default`: not from --out or run_dir);
    `unread`: only an unreadable one, before reading it (nothing to do: need not be writable, a colleague's run)."""
    if unread and (not run_root.is_dir() or os.access(run_root, os.R_OK | os.X_OK)):
        return
    check_folder(run_root, "No --out or run_dir was given, and the default run directory (runs/<name> of the project "
                           "root)" if default else given_as,
                 "A run directory holds a run's notebooks, data and manifest: give " + (
                     "one that can be written with --out (or run_dir)." if default else
                     "a new or existing folder that can be written instead (for example runs/<name>)."))

