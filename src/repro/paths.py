"""Where things are: the project root and the path rule (relative: from the root, in a shell, papermill or JupyterLab),
the notebooks and params files, and the files of one run."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import time
import unicodedata
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any, Callable, Literal

import psutil

from .errors import ModelLoadError, ParameterError, ReproError, did_you_mean, unicode_form

SPLIT = "train_prefs"
# every stand-in model (policy or scorer) carries this file, saying how it was built; for a policy
# {"builder", "size", "seed", "random_init"}: random_init = no weights saved, drawn from the seed at load time; beside
# the files `repro score` wrote, {"files": {name: its scorer, "stand_in" true or false}} (repro.subject.mark_scorer)
STAND_IN_MARKER = "repro_stand_in.json"


def cache_root() -> Path:
    """Where built stand-in models are kept: $REPRO_CACHE, else ~/.cache/repro."""
    env = os.environ.get("REPRO_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "repro"


def unreadable_stand_in(folder: Path) -> str:
    """Why this user cannot read `folder`'s stand-in (another's umask), and what to do; "" if readable or unbuilt."""
    paths = [folder, *folder.rglob("*")] if folder.is_dir() else []
    denied = next((p for p in paths if not os.access(p, os.R_OK | os.X_OK * p.is_dir())), None)
    return "" if denied is None else (
        f"permission denied: {denied} cannot be read by you. Ask its owner to make the stand-in readable (chmod -R "
        f"a+rX {folder}), or set REPRO_CACHE to a folder of your own, where repro builds the stand-ins it needs.")


def absolute_caches() -> None:
    """Cache variables' relative paths made absolute from the cwd, as `repro run` checks them, for kernels too."""
    for name in ("HF_HOME", "HF_DATASETS_CACHE", "HF_HUB_CACHE", "REPRO_CACHE", "REPRO_ROW_CACHE"):
        if os.environ.get(name):
            os.environ[name] = os.path.abspath(os.path.expanduser(os.environ[name]))


def row_cache_dir(given: str | Path | None = None) -> Path:
    """The row cache (repro.cache): `given` (cache_dir), $REPRO_ROW_CACHE, $REPRO_CACHE, else the project's cache/."""
    if given:
        return Path(given)
    for env in ("REPRO_ROW_CACHE", "REPRO_CACHE"):  # the first: the row cache alone (each test gets its own)
        if os.environ.get(env):
            return Path(os.environ[env]).expanduser()
    return project_root() / "cache"  # beside runs/


HOME_ENV = "REPRO_HOME"  # names the project root explicitly
WRITING_ENV = "REPRO_WRITING_RUN"  # set by the `repro run` writing a run directory, for its own notebooks' kernels
PROJECT_MARKER = ".repro-project"  # the file `repro notebooks DIR` writes: DIR is a project root
_PACKAGE = Path(__file__).resolve().parent
_HELD: dict[Path, tuple[IO[str], bool]] = {}  # run roots this process holds (RunDir.hold): the lock, a kernel's?
KERNEL = "a notebook's kernel"  # who holds a run folder for a notebook run on its own (RunDir.hold)
_BUNDLED = _PACKAGE / "_bundled"  # where a wheel carries notebooks/ and params/ (hatch_build.py)
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")  # owner/name: no more parts, nothing only a path would hold
_ENDS = r"\s`'\"‘’“”|,;()<>"  # what ends a path inside text (public_text)
# where a home folder's user's name starts, on any machine: /home/, /Users/, C:\Users\, //home/, \\host\Users\,
# /var/home/, /Volumes/<disk>/Users/, WSL's /mnt/c/Users/
_HOME_AT = (rf"(?i:(?:[a-z]:|/mnt/[a-z]|/volumes/[^\s/\\]+(?: [^\s/\\]+)*|(?<!:)[\\/]{{2}}[^{_ENDS}/\\]+)?"
            rf"[\\/]users|(?:/var|(?<!:)/)?/home)[\\/]")
_HOME = re.compile(rf"{_HOME_AT}[^/]+")  # a home folder, on any machine
# ... but one between letters, in a name (/home/o'brien, /home/al's/x), not a possessive's (/home/al's data: ~'s data)
_APOSTROPHE = r"(?<=\w)['’](?=\w)(?!s(?![^\W\d_]|[/\\]))"
_IN_PATH, _IN_NAME = rf"(?:[^{_ENDS}]|{_APOSTROPHE})", rf"(?:[^{_ENDS}/\\]|{_APOSTROPHE})"  # a path's, a name's letter
# a local path inside text: this machine's home folder, whatever its name holds (spaces, ~); /…, //…, ~/…, ~user/… (a
# user's name starts with a letter or _: ~8/10 is prose), ./…, C:\…, \\host\share\… (after key: too), a file URI's or
# scp's prefix (file://host, user@host:) dropped with it; a path goes on past a space into a word holding a separator
# that starts no path of its own (C:\Users\Alice Secret\x, /my data/x: a folder's name with a space), unless what it
# has reached is a file (a suffix: "uf.jsonl chosen/rejected", "uf.jsonl and/or" are prose after it), nor after a
# sentence's end ("/home/bob. Chosen/Rejected"); this machine's home is matched whole; a user's name: _PERSON
_SPACE = r"(?<!\w\w\.)(?<!:) "  # a space after no sentence's end (an initial's full stop is none: Mary A. Lee)
_NO_SUFFIX = "".join(rf"(?<!\.[A-Za-z0-9]{{{n}}})" for n in range(1, 9))
_PATH_GOES_ON = rf"{_IN_PATH}*(?:{_NO_SUFFIX}{_SPACE}(?![~.]*[/\\]|[^{_ENDS}]*:[/\\]){_IN_NAME}*[/\\]{_IN_PATH}*)*"
_BEFORE_PATH = rf"(?:(?<![\w.-])file://[^{_ENDS}/]*(?=/)|(?<![\w.@-])[\w.-]+@[\w.-]+:(?=~?/)|(?<![\w./\\~-]))"
# a user's name in several words after a home's start: capitalised words, a particle (de, van…) or d' before one
_CAP, _PARTICLE = "A-ZÀ-ÖØ-Þ", (r"(?:(?:al|bin|da|das|de|del|della|den|der|des|di|do|dos|du|ibn|la|las|le|los|op|"
                                r"te|ten|ter|van|von|y|zu) |[dl]['’])")
_PERSON = rf"[{_CAP}]{_IN_NAME}*(?:{_SPACE}{_PARTICLE}*[{_CAP}]{_IN_NAME}*)+"
# ~user/ (a user's name starts with a letter or _), not a letter, a slash and a digit (~n/2); ~half, ~alice: prose
_TILDE_USER = rf"~(?![A-Za-z_]/\d)[A-Za-z_](?:[\w.-]|{_APOSTROPHE})*/"
_PATH_STARTS = (rf"{_HOME_AT}{_PERSON}|{_HOME_AT}|{_TILDE_USER}"
                rf"|(?:(?:~|\.{{1,2}})?/|(?<!:)//+)[^{_ENDS}/]|[A-Za-z]:[\\/][^{_ENDS}]"
                rf"|\\\\[^{_ENDS}\\]")
_FILE_SUFFIXES = (".jsonl", ".json", ".parquet", ".gz", ".yaml", ".yml", ".csv", ".arrow")  # files, never repos
# the files of a run that more than one module names
DEMO = "demo"  # the source that names the demo rows shipped with the package (repro.sources)
MANIFEST_JSON = "manifest.json"
METRICS_JSON = "metrics.json"
COMPARE_JSON = "compare.json"
DATASET_DIR = "dataset"  # a run's built dataset, as the hub gets it (its card, DATA_DIR, FIGURES_DIR)
FIGURES_DIR = "figures"  # a run's figures (02_analyze), and the card's copies in its dataset/ (03_card)
RUNS_DIR = "runs"  # the project root's folder of runs (default_run_dir), families and self-check reports
WORK_DIR = "work"  # a run's resumable work, not published (RunDir.stage_work)
FAMILY_JSON = "family.json"  # a family's folder: its members side by side (notebooks/05_family)
FAMILY_LOGS = "logs"  # a family's folder: each member's output when members run at once (--jobs)
SELFCHECK_JSON = "selfcheck.json"
SELFCHECK_MD = "selfcheck.md"
SUMMARY_TABLE = "summary_statistics.csv"
EXTREMES_TABLE = "extreme_margins.csv"
LOCK_NAME = "requirements.lock"  # the environment, resolved once (make lock); the wheel carries a copy
DATA_DIR = "data"  # a dataset folder's parquet shards, as `push_to_hub` lays them out
SPLIT_NAME = r"\w+(?:\.\w+)*"  # the split names datasets reads and writes (datasets.naming's rule)
SHARD_RE = re.compile(rf"^(?P<split>{SPLIT_NAME})-(?P<index>\d{{5}})-of-(?P<count>\d{{5}})\.parquet$")  # shard_name's


def wait_advice(holder: str) -> str:
    """What to do about the writer `holder` (a lock's text) of a run folder another process wants."""
    return "wait for it to finish" + (" (a kernel stopped part-way keeps it until it is shut down: in JupyterLab, "
                                      "Kernel > Shut Down Kernel)" if holder.startswith(KERNEL) else "")


def utf8_text(path: Path, what: str, error: type[Exception] = ParameterError) -> str:
    """A text file's content (a byte order mark is no text); `error` naming its line where it is not UTF-8."""
    raw = path.read_bytes()
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise error(f"{what} {path} is not UTF-8 text (byte {raw[exc.start]:#04x} on line {line}): save it as UTF-8, "
                    f"then run again.") from None


def public_name(value: str) -> str:
    """A user path as published: its last name (a run's dataset/: <run>/dataset); a home (this machine's, /home/<user>,
    /Users/<user>, C:\\Users\\<user>): ~, never its user's name."""
    if value.startswith(("/", "~", "\\", "./", "../")) or re.match(r"^[A-Za-z]:[\\/]", value):
        # ~ read before any .. (~/../bob, ~al/../bob: bob's home, as /home/al/../bob is); a ~user the machine does not
        # know: a home all the same; a full stop or colon after a home is prose (and Path's expanduser raises)
        path, home = (Path(os.path.normpath(re.sub(r"^~([^/\\]+)", r"/home/\1", os.path.expanduser(v)).replace(
            "\\", "/"))) for v in (value, value.rstrip(".:")))
        here = Path(os.path.expanduser("~"))  # (not Path.home(): it raises on a machine that names no home)
        if any(p in (here, here.resolve()) or _HOME.fullmatch(str(p)) for p in (path, home)) or re.fullmatch(
                r"~[^/\\]*[/\\]?", value.rstrip(".:")):  # (/home/alice/x/..: a home, its .. no full stop)
            return "~" + value[len(value.rstrip(".:")):]
        if path.name == DATASET_DIR and (home.parent / MANIFEST_JSON).is_file():
            return f"{path.parent.name}/{DATASET_DIR}"
        return path.name or ("~" if value.startswith("~") else value)  # (~alice/../..: /, named by no one)
    return value


def public_text(text: str, keep: tuple[str, ...] = ()) -> str:
    """User text as published: each local path (/…, ~/…, ./…, C:\\…, file://…, user@host:/…) `public_name`d, but
    those starting with one of `keep` (selfcheck.md's ~/… and ./…). A tilde is prose without a slash after its word, or
    before a number or lone letter and a slash (~half, ~alice, ~8/10, ~n/2; ~bob/, ~n/x.json are homes). A user's name
    runs from a capitalised word over capitalised ones (or de, van…, d' before one) to `. `, `: `, 's, a quote or comma:
    /Users/Ana de la Cruz/x -> x; /home/Al Lee's data -> ~'s data; /home/al In Jan/Feb -> ~ In Jan/Feb. A lowercase
    name in several words (/users/mary ann lee: a home no system makes) shows its later words."""
    home = os.path.expanduser("~")  # (first, literally: a space or ~ in its name is no end of it)
    homes = "".join(rf"{re.escape(h)}(?![^{_ENDS}/\\.:])|" for h in dict.fromkeys(
        p.rstrip("/") for p in (home, os.path.realpath(home))) if len(h) > 1 and os.path.isabs(home))
    paths = re.compile(rf"{_BEFORE_PATH}(?P<path>(?:{homes}{_PATH_STARTS}){_PATH_GOES_ON})")
    return paths.sub(lambda found: found["path"] if found["path"].startswith(keep) else public_name(found["path"]),
                     text)


def without_folders(text: str, *folders: str | Path) -> str:
    """`text` with each of `folders` (home, cwd) `public_name`d anywhere: a guard for paths `public_text` missed."""
    for folder in dict.fromkeys(str(f).rstrip("/\\") for f in folders):
        if len(folder) > 1 and folder in text:  # (a search only where one is there)
            text = re.sub(rf"{re.escape(folder)}(?![^{_ENDS}/\\]){_PATH_GOES_ON}", lambda path: public_name(path[0]),
                          text)
    return text


def checkout_root() -> Path | None:
    """The source checkout this package runs from (an editable install: src/repro beside notebooks/), else None."""
    root = _PACKAGE.parents[1]
    checkout = _PACKAGE.parent.name == "src" and (root / "notebooks").is_dir() and (root / "pyproject.toml").is_file()
    return root if checkout else None


def project_root() -> Path:
    """$REPRO_HOME; else the nearest folder at or above this one marked a project or the checkout; else cwd."""
    if home := os.environ.get(HOME_ENV):
        path = Path(home).expanduser().resolve()
        if not path.is_dir():
            raise ParameterError(f"{HOME_ENV}={home!r} names {path}, which is not a folder. Create it, or unset "
                                 f"{HOME_ENV} to use the current folder as the project root.")
        return path
    checkout = checkout_root()
    cwd = Path.cwd().resolve()
    for folder in (cwd, *cwd.parents):
        if folder == checkout or (folder / PROJECT_MARKER).is_file():
            return folder
    return checkout or cwd


def typed_path(text: str) -> Path:
    """A command-line path option: `~` is the home folder where no shell made it so (`--output=~/s.jsonl`, '~/x')."""
    return Path(text).expanduser()


def here_path(text: str) -> Path:
    """A command-line folder (--out, --report): from the current folder, as every command-line path, not the root."""
    return Path(os.path.abspath(typed_path(text)))


def resolve_user_path(value: str | Path | None, *, may_be_id: bool = True) -> str | None:
    """`value` by the path rule: relative -> absolute from the project root; None, "", absolute paths and (`may_be_id`)
    "demo", "builtin:*" and hub ids (owner/name with no such local path) as they are."""
    if value is None or str(value) == "":
        return value  # "" means "not set", as None does (run_dir="" is the default run directory)
    text = str(value)
    if may_be_id and (text == DEMO or text.startswith("builtin:")):
        return text
    path = Path(text).expanduser()
    if path.is_absolute():
        return os.path.normpath(path)
    root = project_root()
    if may_be_id and is_hub_id(text) and path.parts[0] != RUNS_DIR and not (root / path.parts[0]).is_dir():
        return text  # a hub id: no such local file, nor a local folder it would be in, nor a run's
    return os.path.normpath(root / path)


def rebased(value: Any, old: str | Path, new: str | Path) -> Any:
    """`value` (in lists and mappings too) with absolute paths under root `old` moved under `new` (a moved project)."""
    if isinstance(value, (list, dict)):
        items = value.items() if isinstance(value, dict) else enumerate(value)
        moved = {key: rebased(item, old, new) for key, item in items}
        return moved if isinstance(value, dict) else list(moved.values())
    if isinstance(value, str) and os.path.isabs(value) and Path(value).is_relative_to(old):
        return str(Path(new, Path(value).relative_to(old)))
    return value


def within(path: str | Path, folder: Path) -> bool:
    """Whether `path` (relative: from `folder`) lies inside `folder`, links followed: a path from a run's own files
    (copied from anyone: `..`, absolute, a link, a NUL) that a run removes, moves or publishes must."""
    try:
        return "\0" not in str(path) and folder.resolve() in Path(folder, path).resolve().parents
    except OSError:  # (a name too long)
        return False


def record_project(data: dict[str, Any], run: Path) -> Path:
    """The project root `run`'s record `data` took paths from (`start_run` records it); an older record's: its run_dir's
    root, if the run lies at the same place in it now; else the root now."""
    if data.get("project"):
        return Path(data["project"])
    root, was = project_root(), Path((data.get("parameters") or {}).get("run_dir") or "").parts
    here = run.resolve()
    inside = here.relative_to(root).parts if here.is_relative_to(root) else ()
    return Path(*was[:-len(inside)]) if inside and was[-len(inside):] == inside else root


def unicode_twin(path: str | Path) -> str:
    """For a missing path: a hint where it exists in another Unicode form (macOS's NFD é, typed NFC é); else ""."""
    path = Path(path)
    found = Path(path.anchor) if path.anchor else Path()
    for part in path.parts[bool(path.anchor):]:
        if not (found / part).exists():
            same = unicodedata.normalize("NFC", part)
            try:
                part = next(q.name for q in found.iterdir()
                            if q.name != part and unicodedata.normalize("NFC", q.name) == same)
            except (OSError, StopIteration):  # (not a folder, unreadable, or no such name in any form)
                return ""
        found = found / part
    return (f" {found} exists with the same name in another Unicode form ({unicode_form(str(found))}: "
            f"{ascii(str(found))}): give the path in that spelling (a shell's tab completion types it), or rename "
            f"the file or folder.")


def beside_hint(path: str | Path) -> str:
    """For a missing path: a hint where it is in another Unicode form or from the cwd (JupyterLab, a shell); else ""."""
    root, here, given = project_root(), Path.cwd(), Path(path)
    if twin := unicode_twin(given if given.is_absolute() else root / given):
        return twin
    relative = Path(os.path.relpath(given, root)) if given.is_absolute() else given  # ../x: outside the root
    if here.resolve() == root.resolve() or not (there := Path(os.path.normpath(here / relative))).exists():
        return ""
    give = f"{os.path.relpath(there, root)!r} (or its absolute path)" if there.is_relative_to(root) else str(there)
    return (f" Relative paths are taken from the project root ({root}), not from the current folder; {there} "
            f"exists: give {give}.")


def nearest_existing(path: Path) -> Path:
    """`path` itself, or its nearest parent that exists."""
    return next((p for p in (path, *path.parents) if p.exists()), path)


def write_problem(folder: Path) -> str:
    """Why `folder` cannot be written into: it is (or lies inside) a file, or cannot be written; "" when it can."""
    existing = nearest_existing(folder)
    if not existing.is_dir():
        return ("is an existing file, not a folder" if existing == folder
                else f"lies inside {existing}, which is a file, so that folder cannot be made")
    if not os.access(existing, os.W_OK):  # a read-only mount (as root too), another user's folder
        return f"cannot be written ({existing} is read-only, or not yours)"
    return ""


def check_folder(folder: Path, given_as: str, advice: str) -> None:
    """Refuse, before any work, a folder to write into that is (or lies inside) a file, or that cannot be written."""
    if what := write_problem(folder):
        raise ReproError(f"{given_as} {folder} {what}. {advice}")


def reads_as_hub_id(spec: str | None) -> bool:
    """Whether `spec` is written as a hub id, owner/name, by its text alone (is_hub_id also looks at the disk)."""
    return bool(_HUB_ID.match(spec or ""))


def is_hub_id(value: str) -> bool:
    """Whether a parameter value, taken by the path rule, names a hub repository (owner/name) and not a local path."""
    return reads_as_hub_id(value) and not value.endswith(_FILE_SUFFIXES) and not (project_root() / value).exists()


CHECKPOINT = "a Transformers checkpoint's folder (config.json, the weights, the tokenizer's files)."


def local_checkpoint(spec: str, what: str, hub_example: str, layout: str) -> Path | None:
    """`spec`'s folder with config.json and weights (else `layout` says what is expected; a stand-in may draw weights
    at load time); None for a hub id. Every loader's and the preflight's test of a folder."""
    path = Path(spec).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            repo = f" It is a hub cache's folder of a repository: give one of its snapshots, {path / 'snapshots'}/" \
                   f"<commit>." if (path / "snapshots").is_dir() else ""
            raise ModelLoadError(f"{what} folder {path} has no config.json: expected {layout}{repo}")
        if not any(path.glob("*.safetensors")) and not any(path.glob("pytorch_model*.bin")) and \
                not (path / STAND_IN_MARKER).is_file():
            raise ModelLoadError(f"{what} folder {path} has no weights (model.safetensors or pytorch_model.bin, or "
                                 f"their shards): expected {layout}")
        return path
    if path.exists():
        raise ModelLoadError(f"{what} '{spec}' is not a directory (looked for {path.resolve()}): pass the "
                             f"checkpoint's folder (config.json, weights, tokenizer), not a file in it.")
    if reads_as_hub_id(spec):
        return None
    raise ModelLoadError(f"{what} '{spec}' is not a directory: it names a local path, and nothing is at "
                         f"{path.resolve()}. Check the path (a relative path is read from the current folder), or "
                         f"pass a hub id such as {hub_example}, or a built-in stand-in (builtin:tiny-pairrm, "
                         f"builtin:tiny-reward-llama) for a run without any download (its scores are noise).")


def default_run_dir(run_name: str) -> Path:
    """Where a run goes when no run_dir is given: runs/<run_name> of the project root."""
    return project_root() / RUNS_DIR / run_name


def run_folder(run_dir: str | Path | None, run_name: str) -> Path:
    """A run's folder: `run_dir` (by the path rule), else runs/<run_name> of the project root."""
    return Path(resolve_user_path(run_dir, may_be_id=False) or default_run_dir(run_name))


def run_dir_of(dataset: str | None, run_name: str) -> Path:
    """A notebook's run folder on `dataset` without run_dir: its run, else runs/<its name> (or an older
    `ascii_folder_safe` one that exists); with no dataset, runs/<run_name>."""
    if dataset is None:
        return default_run_dir(run_name)
    manifest = run_manifest_of(dataset) if Path(dataset).is_absolute() else None  # a local path, by the path rule
    if manifest is not None:
        return manifest.parent
    run, older = (default_run_dir(dataset_run_name(dataset, safe)) for safe in (folder_safe, ascii_folder_safe))
    return older if not run.exists() and older != run and describes(older, dataset) else run


def describes(run: Path, dataset: str) -> bool:
    """Whether the record of the run directory `run` says it describes `dataset` (its subject, rebased)."""
    with contextlib.suppress(OSError, ValueError):
        data = json.loads((run / MANIFEST_JSON).read_text(encoding="utf-8"))
        subject = data.get("subject") if isinstance(data, dict) else None
        return isinstance(subject, dict) and rebased(subject.get("dataset"), record_project(data, run),
                                                     project_root()) == dataset
    return False


def folder_safe(text: str) -> str:
    """`text` (NFC) as a folder name: any script's letters, digits and marks (डेटा's vowel signs) and '._-' kept, each
    run of others one '-', a mark on no letter or digit dropped."""
    kept: list[str] = []
    for c in unicodedata.normalize("NFC", text):
        if not unicodedata.category(c).startswith("M"):
            kept.append(c if c.isalnum() or c in "._-" else "/")
        elif kept and (kept[-1].isalnum() or unicodedata.category(kept[-1]).startswith("M")):
            kept.append(c)
    return re.sub("/+", "-", "".join(kept))


def ascii_folder_safe(text: str) -> str:
    """`text` as a folder name up to git 27efb89, before repro kept letters outside ASCII (Straße: Stra-e)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text)


def dataset_run_name(dataset: str, safe: Callable[[str], str] = folder_safe) -> str:
    """The run name of a dataset given by path or hub id: its file or repository name, without extension, `safe`."""
    name = Path(dataset.rstrip("/")).name
    for suffix in sorted(_FILE_SUFFIXES, key=len, reverse=True):
        name = name.removesuffix(suffix)
    return safe(name).strip(".-") or "dataset"


def shipped(name: str) -> Path:
    """The checkout's `name` (notebooks, params, LOCK_NAME), else the copy the installed package carries."""
    return (checkout_root() or _BUNDLED) / name


def find_params(name: str | Path) -> Path:
    """The params file NAME (from cwd, then the root); a bare name (`demo`, `recipes/sppo_iter1`) also among the
    project's params files and recipes, then the package's examples."""
    given, examples = Path(name).expanduser(), shipped("params")
    tried = [given.resolve()]
    if not given.is_absolute():
        tried.append(project_root() / given)
        if not given.suffix:
            tried += [folder / sub / f"{given}.yaml" for folder in dict.fromkeys([project_root() / "params", examples])
                      for sub in ("", "recipes")]
    if found := next((path for path in tried if path.is_file()), None):
        return found
    if (folder := next((path for path in tried if path.is_dir()), None)) is not None:
        raise ParameterError(f"Params file {str(name)!r} is a folder, not a file; give a YAML file in it "
                             f"{sorted(p.name for p in folder.glob('*.yaml'))[:5]} or an example's name, e.g. demo.")
    known = sorted(str(p.relative_to(examples).with_suffix("")) for p in examples.glob("**/*.yaml"))
    raise ParameterError(
        f"Params file {str(name)!r} does not exist: looked at " + ", ".join(str(p) for p in dict.fromkeys(tried)) +
        f".{_did_you_mean(given, tried, examples)} Give the path of a params YAML file, or the bare name of an "
        f"example: {', '.join(known)}.")


def _did_you_mean(given: Path, tried: list[Path], examples: Path) -> str:
    """" Did you mean 'params/demo.yaml'?" for the nearest YAML file beside the paths tried, or the nearest example."""
    options: dict[str, str] = {}  # file name without extension -> the file as the user would write it
    for folder in dict.fromkeys(p.parent for p in tried[:2]):  # the user's own paths, then the examples
        for path in sorted(folder.glob("*.y*ml")) if folder.is_dir() else ():
            options.setdefault(path.stem, str(given.parent / path.name))
    for path in sorted(examples.glob("**/*.yaml")):  # as a path where the project has it, else by its bare name
        written = f"params/{path.relative_to(examples)}"
        options.setdefault(path.stem, written if (project_root() / written).is_file() else path.stem)
    return did_you_mean(given.stem, options, options)


def shard_name(split: str, index: int, num_shards: int) -> str:
    """The parquet file name `push_to_hub` writes for one shard."""
    return f"{split}-{index:05d}-of-{num_shards:05d}.parquet"


def now() -> str:
    """The time now as repro's records and locks write it: UTC, with its zone (read on a machine in another zone)."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def take_lock(path: Path, who: str, waiting: Callable[[str], Any] | None = None) -> IO[str] | str:
    """The flock of `path` (let go when the process stops, crashed too) holding `who`, pid and time: the open file
    (close to let go); if another holds it, its text, or with `waiting`, the file once free (calls `waiting(text)`)."""
    held = open(path, "a+", encoding="utf-8")
    for tries in range(50, 0, -1):
        try:
            fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            held.seek(0)
            named = re.search(r"\(pid (\d+),", holder := held.read().strip())
            if tries > 1 and not (named and psutil.pid_exists(int(named[1]))):
                # no live holder named: a probe's shared lock for an instant (`RunDir.writer`: --check, 05_family),
                # beside a holder yet to write its name, or a dead one's (killed, its text left): asked again
                time.sleep(0.01)
                continue
            if waiting is None:
                held.close()
                return holder or "another process"
            waiting(holder or "another process")
            fcntl.flock(held, fcntl.LOCK_EX)
            break
    held.truncate(0)
    held.write(f"{who} (pid {os.getpid()}, since {now()})")
    held.flush()
    return held


def let_go(held: IO[str]) -> None:
    """Unlock (not just close: a forked vLLM engine or DataLoader worker shares the file), empty `take_lock`'s lock."""
    held.truncate(0)
    fcntl.flock(held, fcntl.LOCK_UN)
    held.close()


class RunDir:
    """The files of one run, all under `root` (default `runs/<name>/`)."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.manifest = self.root / MANIFEST_JSON
        self.notebooks = self.root / "notebooks"
        self.dataset = self.root / DATASET_DIR
        self.data = self.dataset / DATA_DIR
        self.card = self.dataset / "README.md"
        self.card_figures = self.dataset / FIGURES_DIR  # the card's copies of the figures
        self.metrics = self.root / METRICS_JSON
        self.figures = self.root / FIGURES_DIR
        self.tables = self.root / "tables"
        self.compare = self.root / COMPARE_JSON
        self.work = self.root / WORK_DIR  # resumable work (scored and generated chunks), not published
        self.lock = self.root / ".repro-run.lock"  # held by the process writing here (`hold`)

    def folders(self) -> tuple[Path, ...]:
        """The folders inside the run (JupyterLab's file browser shows them), none of them a run."""
        return self.dataset, self.data, self.card_figures, self.notebooks, self.figures, self.tables, self.work

    def stage_work(self, stage: Literal["generation", "scoring"], test: bool = False) -> Path:
        """Where `stage` keeps its resumable chunks: work/<stage>, and work/test/<stage> for a test_split of its own."""
        return self.work / ("test" if test else "") / stage

    def relative(self, path: str | Path) -> str:
        """`path` (under the run) as the run's files name it: relative to its root."""
        return str(Path(path).resolve().relative_to(self.root.resolve()))

    def foreign(self, building: bool) -> list[str]:
        """What an unclaimed folder holds where a run writes; dataset/ is input unless `building`; empty: nothing."""
        if self.manifest.exists():
            return []
        mine = (self.notebooks, self.figures, self.tables, self.metrics, self.compare,
                *((self.dataset,) if building else (self.card, self.card_figures)))
        return [self.relative(p) + "/" * p.is_dir() for p in sorted(mine)
                if p.is_file() or p.is_dir() and any(p.iterdir())]

    def foreign_refusal(self, building: bool) -> str:
        """Why a run may not write here (a part a link or outside, as a copy's; `foreign`), what to do; "" if it may."""
        work = [self.stage_work(s, t) for s in ("generation", "scoring") for t in (False, True)]
        parts = (*self.folders(), self.work / "test", *work, self.manifest, self.card, self.metrics, self.compare,
                 self.lock)
        if link := next((p for p in parts if p.is_symlink()), None):
            where = "another of its parts" if within(link, self.root) else "out of it"
            return (f"{self.root}'s {link.relative_to(self.root)} is a link to {link.resolve()}, {where}: a run "
                    f"removes and writes files there, so it is refused, with --force too. Replace the link by a copy "
                    f"of what it leads to, or give the run another folder (--out, or run_dir in a notebook); to keep "
                    f"a run's files on another disk, make its folder itself the link (ln -s /scratch/NAME runs/NAME)")
        if not (held := self.foreign(building)):
            return ""
        return (f"{self.root} holds {', '.join(held)} but no manifest.json, so no repro run made them: a run would "
                f"write over them, so it is refused, with --force too. Give the run another folder (--out, or "
                f"run_dir in a notebook), or move them out first")

    def shards(self, split: str = SPLIT) -> list[Path]:
        return sorted(self.data.glob(f"{split}-*.parquet"))

    def hold(self, who: str, kernel: bool = False) -> str | None:
        """Take the run's flock (`who`, pid in it), or give its holder's text; `kernel`: none under its `repro run`."""
        self._forget_removed()
        if (key := self.root.resolve()) in _HELD or (kernel and self.driven()):
            return None
        self.root.mkdir(parents=True, exist_ok=True)
        if isinstance(held := take_lock(self.lock, who), str):
            return held
        _HELD[key] = (held, kernel)
        return None

    def driven(self) -> bool:
        """Whether this process is the `repro run` writing the run, or a kernel of its notebooks (WRITING_ENV)."""
        return bool(mine := os.environ.get(WRITING_ENV)) and Path(mine).resolve() == self.root.resolve()

    def held(self) -> bool:
        """Whether this process holds the run's lock (`hold`)."""
        self._forget_removed()
        return self.root.resolve() in _HELD

    def release(self, kernel: bool = False) -> None:
        """Give back `hold`'s lock (`kernel`: a kernel's only); the file stays: one opened meanwhile locks this one."""
        key = self.root.resolve()
        if key in _HELD and (_HELD[key][1] or not kernel):
            let_go(_HELD.pop(key)[0])

    def _forget_removed(self) -> None:
        """Drop this process's hold on the run where its folder (and lock) was removed meanwhile: `hold` takes anew."""
        key = self.root.resolve()
        if key in _HELD and not (self.lock.exists() and os.path.samestat(os.fstat(_HELD[key][0].fileno()),
                                                                          self.lock.stat())):
            _HELD.pop(key)[0].close()

    def writer(self) -> str | None:
        """Who else writes here now: the text of the process holding `lock`, or None when none (or this one) does."""
        self._forget_removed()
        if self.root.resolve() in _HELD:
            return None
        with contextlib.suppress(FileNotFoundError, NotADirectoryError), open(self.lock, encoding="utf-8") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return lock.read().strip() or "another process"
        return None


def run_manifest_of(spec: str | Path, any_split: bool = False) -> Path | None:
    """The manifest.json of the run `spec` names (the run, dataset/, dataset/data/, a file of its split; `any_split`: of
    any split, the run that wrote it), or None."""
    path = Path(spec).expanduser()
    data = path.parent if path.suffix == ".parquet" else path  # (a shard: the data/ folder it is in)
    candidates = [path / MANIFEST_JSON, *([path.parent / MANIFEST_JSON] if path.name == DATASET_DIR else [])]
    if data.name == DATA_DIR and data.parent.name == DATASET_DIR:
        with contextlib.suppress(OSError, ValueError, AttributeError):  # (a damaged manifest: not this run's file)
            split = None if data == path or any_split else (json.loads(
                (data.parents[1] / MANIFEST_JSON).read_text()).get("dataset") or {}).get("split") or SPLIT
            if split is None or path.name.startswith(f"{split}-"):
                candidates.append(data.parents[1] / MANIFEST_JSON)
    return next((candidate for candidate in candidates if candidate.is_file()), None)
