"""Loading rows: the demo, a hub dataset, a .jsonl/.parquet file, a saved dataset, a hub-layout folder, a run dir."""

from __future__ import annotations

import contextlib
import functools
import glob
import gzip
import hashlib
import json
import os
import shutil
from importlib import resources
from pathlib import Path
from typing import Any, Iterable, Iterator

import datasets
from datasets.data_files import FILES_TO_IGNORE, get_data_patterns
import pyarrow as pa
import pyarrow.parquet as pq

from .dataset_io import split_files
from .errors import DataError, DatasetLoadError, counted, did_you_mean, notice
from .parameters import FAMILY_NOTEBOOK
from .paths import (DEMO, MANIFEST_JSON, SELFCHECK_JSON, SPLIT, STAND_IN_MARKER, RunDir, beside_hint, is_hub_id,
                    project_root, unicode_twin)
from .revisions import check_revision_target, hub_offline, hub_snapshot

DATA_SUFFIXES = {".jsonl", ".json", ".parquet", ".csv", ".tsv", ".arrow", ".txt", ".gz", ".zst"}
FILE_SUFFIXES = (".jsonl", ".json", ".jsonl.gz", ".json.gz", ".parquet")
# records beside data files, no rows: those datasets' folder loader leaves out, a save_to_disk folder's state.json, and
# the marker `repro score` writes beside its output (datasets would read it as rows: left out of its data_files here)
RECORDS = {*FILES_TO_IGNORE, "state.json", STAND_IN_MARKER}


def demo_path() -> Path:
    """The embedded demo sample shipped with the package (prompts, reference, 3-4 candidates each)."""
    return Path(str(resources.files("repro") / "data" / "demo_prompts.jsonl"))


def _pick_split(obj, split: str, where: str, split_parameter: str) -> datasets.Dataset:
    """`obj`'s `split`."""
    if isinstance(obj, (datasets.DatasetDict, dict)):
        if split not in obj:
            raise _no_split(where, split, sorted(obj), split_parameter)
        return obj[split]
    return obj


def _no_split(where: str, split: str, names: list[str], split_parameter: str) -> DataError:
    """The refusal of a `split` the dataset has not; `names`: the splits to offer."""
    return DataError(f"{where} has no split {split!r}; it has {names}.{did_you_mean(split, names)} "
                     f"Set {split_parameter} to one of those.")


def load_source(spec: str, split: str = SPLIT, parameter: str = "source",
                split_parameter: str | None = None, revision: str | None = None) -> datasets.Dataset:
    """One split of "demo", a local file or folder, a run directory, or a hub id (at `revision`); errors name
    `parameter` / `split_parameter` (default `<parameter>_split`)."""
    check_revision_target(spec, revision, f"{parameter}_revision", parameter)
    split_parameter = split_parameter or f"{parameter}_split"
    if spec == DEMO:
        return datasets.Dataset.from_json(glob.escape(str(demo_path())))
    path = Path(os.path.expanduser(spec))
    if path.exists():
        return _load_local(path, split, parameter, split_parameter)
    check_exists(spec, parameter)
    return _load_hub(spec, split, parameter, split_parameter, revision)


def check_exists(spec: str, parameter: str) -> None:
    """Refuse a `parameter` that is neither `demo`, an existing file or folder, nor a hub id (before any work)."""
    path = Path(os.path.expanduser(spec))
    if spec != DEMO and not path.exists() and not is_hub_id(spec):
        root = project_root()  # a near name as the parameter takes it: from the project root (a relative path)

        def shown(q: Path) -> str:
            return os.path.relpath(q, root) if q.is_relative_to(root) else str(q)
        siblings = {q.name: shown(q) for q in path.parent.iterdir()} if path.parent.is_dir() else {}
        twin = unicode_twin(path)  # (a near name that looks the same: said as such, not as "did you mean")
        near = "" if twin else did_you_mean(path.name, siblings, siblings)
        raise DataError(
            f"{parameter} {spec!r} is neither an existing file or folder nor a hub dataset id (owner/name).{near} "
            f"Give a .jsonl/.parquet file, a saved dataset folder, a run directory, or an id like "
            f"'HuggingFaceH4/ultrafeedback_binarized'.{twin or beside_hint(spec)}")


def _dataset_of(path: Path) -> Path:
    """A run directory's `dataset/` folder, else `path` itself."""
    run = RunDir(path)
    return run.dataset if run.dataset.is_dir() and run.manifest.exists() else path


def _suffix(path: Path) -> str:
    return "".join(path.suffixes[-2:]) if path.suffix == ".gz" else path.suffix


def file_problem(path: Path, name: str | None = None) -> str | None:
    """Why file `path` cannot be a dataset (a type not read here, no bytes, no rows), or None; with `name` (the load's)
    every json line is read, one that is not UTF-8 raising as `name`'s (other read errors: the load says why)."""
    if _suffix(path) not in FILE_SUFFIXES:
        return f": unsupported file type {_suffix(path)!r}; use .jsonl, .json or .parquet"
    if path.stat().st_size == 0:
        return " is an empty file: it holds no rows"
    if path.suffix == ".gz" and glob.escape(str(path)) != str(path):  # (datasets' gzip reader parses it as a URL)
        return (" is compressed and has [, ], * or ? in its path, which datasets cannot read: rename it, or "
                "decompress it")
    # (pyarrow's ArrowInvalid is a ValueError; so is the DataError the load's read of a json file raises, kept)
    unread = (OSError,) if name and path.suffix != ".parquet" else (OSError, ValueError)
    with contextlib.suppress(*unread):
        if not (footer(path).num_rows if path.suffix == ".parquet" else
                (sum if name else any)(bool(line.strip()) for _, line in text_lines(path, name or str(path)))):
            return " holds no rows: give a file that has rows (or write them again)"
    return None


def footer(path: str | Path) -> pq.FileMetaData:
    """A parquet file's footer (rows, schema), read once while the file stays as it is (by a load's checks and load)."""
    return _footer(str(path), ((st := os.stat(path)).st_ino, st.st_size, st.st_mtime_ns))


_footer = functools.lru_cache(maxsize=1024)(lambda path, stamp: pq.read_metadata(path))


def build_first(how: str | None = None) -> str:
    """What to do about a dataset not built yet (`how`: the command that builds it)."""
    return f"build it first ({how or '`repro run` with 01_construct'}), or give the path of a dataset"


def data_files(path: Path) -> list[Path]:
    """The data files in folder `path`, below it too, a run's and a saved dataset's own records aside."""
    run = RunDir(path)
    own = {run.manifest, run.metrics, run.compare, path / SELFCHECK_JSON}
    return sorted(f for f in path.rglob("*")
                  if f.suffix in DATA_SUFFIXES and f not in own and f.name not in RECORDS and f.is_file())


def data_suffixes(path: Path) -> list[str]:
    """The kinds of data files in folder `path` (".jsonl", ...), a run's and a saved dataset's own records aside."""
    return sorted({_suffix(f) for f in data_files(path)})


def folder_problem(path: Path) -> str | None:
    """Why folder `path` holds no dataset to read (a run directory without one, no data files but ours), or None."""
    run, parent = RunDir(path), RunDir(path.parent)
    if run.manifest.is_file() and not run.dataset.is_dir():
        try:
            notebooks = list(json.loads(run.manifest.read_text()).get("notebooks") or ())
        except (OSError, ValueError, AttributeError):
            notebooks = []
        if notebooks == [FAMILY_NOTEBOOK]:
            return "is a family's folder: give one of its members (a folder in it)"
        if notebooks and "01_construct" not in notebooks:  # a comparison-only run: it never builds a dataset
            return (f"is a run directory without a dataset of its own (its notebooks: {', '.join(notebooks)}; no "
                    f"01_construct): give the run that built it (or the path of a dataset)")
        return (f"is a run directory without a dataset (no {run.dataset.name}/: its 01_construct has not finished); "
                f"{build_first()}")
    if parent.manifest.is_file() and path in (parent.work, parent.tables, parent.figures, parent.notebooks):
        return f"is the {path.name}/ folder of the run {path.parent}, not a dataset: give the run directory itself"
    if not run.manifest.is_file() and any((child / MANIFEST_JSON).is_file() for child in path.iterdir()):
        return "holds run directories, not one dataset: give one of them (04_compare's reference takes a list)"
    if not (kinds := data_suffixes(path)):
        return ("holds no data files (.jsonl, .json, .parquet, .csv, .arrow; a save_to_disk folder; "
                "data/<split>-*.parquet): give the folder or file that holds the dataset")
    if len(kinds) > 1:  # datasets' folder loader reads the most common format and leaves the others out
        return (f"holds data files of {len(kinds)} formats ({', '.join(kinds)}), of which datasets would read one "
                f"and leave the others out without a word: give one file, or a folder of one format")
    if glob.escape(str(path)) != str(path):  # (datasets' folder loader lists its files by patterns under its path)
        return ("has [, ], * or ? in its path, which datasets reads as a pattern: it finds no data files there. "
                "Rename the folder, or give one of its files")
    return None


def local_splits(path: Path) -> list[str] | None:
    """A local dataset's splits (a folder or run directory), read without loading it; None where unknown (a file)."""
    path = _dataset_of(path)
    if (path / "dataset_dict.json").is_file():
        return list(json.loads((path / "dataset_dict.json").read_text()).get("splits") or []) or None
    return sorted(split_files(path)) or None if path.is_dir() else None


def held_splits(spec: str, but: Iterable[str] = ()) -> list[str]:
    """`spec`'s splits, unloaded: a local folder's, run directory's, or a cached hub id's (a folder of data files: as
    datasets names them, `loose_splits`); none for a file or an uncached id. Less `but` and, in a folder of data files,
    splits reading the same files as one of `but` (train_prefs.jsonl is datasets' train); beside a split of `but` named
    by its file, the others named by file too (test_prefs, not datasets' test)."""
    path = Path(os.path.expanduser(spec))
    folder = path if path.exists() else hub_snapshot(spec) if is_hub_id(spec) else None
    if not folder:
        return []
    folder = _dataset_of(folder)
    if (named := local_splits(folder)) or not folder.is_dir() or (folder / "state.json").exists() \
            or folder_problem(folder):  # (one Dataset saved has no splits)
        return [split for split in named or [] if split not in but]
    try:
        found = {split: {f.resolve() for f in files} for split, files in loose_splits(folder).items()}
    except Exception:  # (datasets raises many types: the load says why)
        return []
    own = {split: {f.resolve() for f in own_files(folder, split)} for split in [*but, *folder_splits(folder)]}
    read = set().union(*(own[split] or found.get(split, set()) for split in but))  # (`files_read`'s, found once)
    # beside a split read by its file's own name (train_prefs.jsonl as train_prefs), the others by theirs too
    named = {frozenset(files): split for split, files in own.items() if files} if any(own[s] for s in but) else {}
    return sorted(named.get(frozenset(files), split) for split, files in found.items()
                  if split not in but and not read & files)


def loose_splits(path: Path) -> dict[str, set[Path]]:
    """A folder of data files' splits as datasets names them (a README's configs, else the files' names: train.jsonl
    and test.jsonl are train and test, train_prefs.parquet is train, other names one split train), each with its
    files (as datasets lists them: not resolved), our RECORDS left out; before reading any rows."""
    found = datasets.load_dataset_builder(str(path)).config.data_files
    return {str(split): {Path(f) for f in files if Path(f).name not in RECORDS} for split, files in found.items()}


def own_files(path: Path, split: str) -> list[Path]:
    """`split`'s files by name, before datasets' names: its parquet shards (`split_shards`), else <split>.json(l)."""
    named = [f for f in (path / f"{split}.jsonl", path / f"{split}.json") if f.is_file()]
    return split_shards(path, split) or named * (len(named) == 1)


def files_read(path: Path, split: str) -> list[Path]:
    """The files `_load_local` reads as `split` of folder `path` of data files: its own by their names (`own_files`:
    train_prefs.jsonl is train_prefs), else those datasets names `split` (`loose_splits`: there, it is train)."""
    return own_files(path, split) or sorted(loose_splits(path).get(split) or ())


def folder_splits(path: Path) -> list[str]:
    """The splits `_load_local` reads from a folder of data files: by a file's name (<split>.jsonl, <split>.json,
    <split>.parquet, <split>-*.parquet), and those datasets tells from the names (train_prefs.jsonl: also "train")."""
    named = set()
    for f in (f for f in path.iterdir() if f.is_file() and f.suffix in (".parquet", ".jsonl", ".json")
              and f.name not in RECORDS):
        # <split>-*.parquet: the name before its first "-" (a split's name has none), not the file's name cut at each
        named.add(f.stem.split("-")[0] if f.suffix == ".parquet" else f.name.removesuffix(f.suffix))
    return sorted(named | set(map(str, get_data_patterns(str(path)))))


def _load_local(path: Path, split: str, parameter: str, split_parameter: str, name: str | None = None
                ) -> datasets.Dataset:
    where = f"{parameter} {name or str(path)!r}"  # `name`: a hub id read from the hub cache
    if path.is_file():
        if why := file_problem(path, where):  # (a line that is not UTF-8 raises, named)
            raise DataError(f"{where}{why}.")
        suffix = _suffix(path)
        try:
            loaded = read_parquet([str(path)]) if suffix == ".parquet" else \
                datasets.Dataset.from_json(glob.escape(str(path)))  # (read as a pattern: a [1] in its path too)
        except Exception as exc:  # datasets wraps parse errors in several types, without the line
            cause = f"{type(exc).__name__}: {str(exc)[:300]}"
            if suffix == ".parquet":
                raise DataError(f"{where} could not be read as parquet ({cause}); the file is truncated or damaged. "
                                f"Write it again (e.g. Dataset.to_parquet) or download it again.") from None
            if suffix.startswith(".jsonl"):  # raises naming the first broken line
                for line, row in iter_jsonl(path, option=parameter, name=where):
                    if not isinstance(row, dict):
                        raise DataError(f"{line} is a JSON "
                                        f"{type(row).__name__.replace('dict', 'object')}; each line must be one JSON "
                                        f"object (a row: {{\"prompt\": ...}}): fix or remove that line.") from None
            raise DataError(f"{where} could not be read as {suffix} ({cause}). Check the file: one JSON object per "
                            f"line for .jsonl, every row with the same columns and types.") from None
        return loaded
    if (dataset := _dataset_of(path)) != path:  # a run directory
        return _load_local(dataset, split, parameter, split_parameter)
    if (path / "dataset_dict.json").exists() or (path / "state.json").exists():
        try:
            saved = datasets.load_from_disk(str(path))
        except Exception as exc:
            raise DataError(f"{where} looks like a save_to_disk folder but could not be loaded "
                            f"({type(exc).__name__}: {str(exc)[:300]}); it may be empty or damaged.") from None
        return _pick_split(saved, split, where, split_parameter)
    if files := split_shards(path, split):
        if not (why := shards_problem(path, split, name)):
            try:
                return read_parquet([str(f) for f in files])
            except Exception as exc:  # (datasets says a bare DatasetGenerationError): its cause, the types that differ
                why = shards_problem(path, split, name, exc)
        raise DataError(f"{where}{why}.")
    if named := own_files(path, split):  # (split_shards found none: its one <split>.jsonl or <split>.json)
        return _load_local(named[0], split, parameter, split_parameter)  # train_prefs.jsonl: not datasets' "train"
    if why := folder_problem(path):
        raise DataError(f"{where} {why}.")
    try:  # the splits datasets tells from the files' names (and a README's configs), before reading any rows
        if split not in (found := loose_splits(path)):
            raise _no_split(where, split, sorted({*folder_splits(path), *found}), split_parameter)
        # (datasets would read repro score's marker as rows: where there is one, the split's files without it; not
        # always, as data_files given leave a README's dataset_info out: its features, given again)
        files = {split: sorted(glob.escape(str(f)) for f in found[split])} if any(path.rglob(STAND_IN_MARKER)) \
            else None
        features = datasets.load_dataset_builder(str(path)).info.features if files else None
        return datasets.load_dataset(str(path), split=split, data_files=files, features=features)
    except DataError:
        raise
    except Exception as exc:  # datasets raises many types here; the user needs one message
        raise DataError(f"{where}: could not read a dataset from this folder ({type(exc).__name__}: {exc}). "
                        f"Expected data/{split}-*.parquet, a save_to_disk folder, or .jsonl/.parquet files.") from None


def split_shards(path: Path, split: str) -> list[Path]:
    """data/<split>-*.parquet, else <split>.parquet and <split>-*.parquet (not train_prefs.parquet for train)."""
    return sorted(path.glob(f"data/{split}-*.parquet")) or sorted(
        [*path.glob(f"{split}.parquet"), *path.glob(f"{split}-*.parquet")])


def shards_problem(path: Path, split: str, hub_id: str | None = None, failure: Exception | None = None) -> str | None:
    """Why `split`'s shards in `path` cannot load as one dataset, from their footers, or None (also: no shards); with
    `failure` (the load's error), it and the differing types. `hub_id`: `path` is that dataset's hub-cache copy."""
    path = _dataset_of(path)
    names, schemas, rows = [f.relative_to(path).as_posix() for f in split_shards(path, split)], [], 0
    listing = f"{', '.join(names[:4])}{', ...' * (len(names) > 4)}"
    clashes: list[tuple[str, bool]] = []
    odd = 0
    try:
        for name in names:
            schemas.append((meta := footer(path / name)).schema.to_arrow_schema())
            rows += meta.num_rows
    except Exception as exc:  # (pyarrow's ArrowInvalid, OSError): a shard not whole, named
        why = f"{names[len(schemas)]}: {type(exc).__name__}: {str(exc)[:300]}"
    else:
        clashes = _type_clashes(schemas, names)
        if odd := next((i for i, c in enumerate(schemas) if set(c.names) != set(schemas[0].names)), 0):
            why = f"their columns differ: {names[odd]} has {', '.join(schemas[odd].names)}; {names[0]} has " \
                  f"{', '.join(schemas[0].names)}"
        elif text := [said for said, is_text in clashes if is_text]:
            why = text[0]
        elif failure:
            cause = failure.__cause__ or failure
            why = "; ".join([f"{type(cause).__name__}: {str(cause)[:300]}", *(said for said, _ in clashes)])
        elif names and not rows:
            return f": the {counted(len(names), 'shard')} of split {split!r} ({listing}) hold no rows: give a " \
                   f"dataset that has rows (or write the split again)"
        else:
            return None
    advice = "write the split again (e.g. Dataset.to_parquet), or download it again"
    if hub_id and (odd or clashes):  # the hub's own files: a new download gives the same
        advice = (f"these are the shards the hub publishes, so downloading them again gives the same: download them "
                  f"(`hf download {hub_id} --repo-type dataset --local-dir DIR`), write the split again with one type "
                  f"a column (e.g. Dataset.to_parquet), and give that folder instead of the id")
    return (f": the {counted(len(names), 'shard')} of split {split!r} ({listing}) could not be read as one dataset "
            f"({why}). Every shard of a split must have the same columns and types, and be whole: {advice}")


def _type_clashes(schemas: list[pa.Schema], names: list[str]) -> list[tuple[str, bool]]:
    """Each column whose type differs between shards (of `names`), said, and whether it is text in one only (datasets
    would cast it to the first shard's type without a word: "1.5" to 1.5); a column of nulls only has no type."""
    seen: dict[str, tuple[str, pa.DataType]] = {}
    clashes: dict[str, tuple[str, bool]] = {}
    for name, schema in zip(names, schemas):
        for column, kind in ((c, k) for c, k in zip(schema.names, schema.types) if k != pa.null()):
            first, first_kind = seen.setdefault(column, (name, kind))
            if kind != first_kind:
                text = [str(k).removeprefix("large_") for k in (kind, first_kind)].count("string") == 1
                clashes.setdefault(column, (f"column {column!r} holds {kind} in {name} and {first_kind} in {first}"
                                            + f", which datasets would cast to {first_kind} without a word" * text,
                                            text))
    return list(clashes.values())


def read_parquet(files: list[str]) -> datasets.Dataset:
    """`Dataset.from_parquet`, but rowless files load as an empty dataset (the caller refuses it by name) and a rowless
    shard beside others is left out (datasets refuses both); the Arrow copy goes to these files' own cache folder,
    emptied when they change, removed when gone (datasets keys copies by mtime: each re-run added one)."""
    rows = [footer(f).num_rows for f in files]
    if sum(rows) == 0:
        return datasets.Dataset(pq.read_table(files[0]))
    files = [f for f, n in zip(files, rows) if n]
    # shards of other types (nulls only, integers beside floats): each column as every shard's types allow (pyarrow's
    # permissive promotion), not as the first shard's (2.0 read as 2); text beside numbers fails (shards_problem says)
    schemas = [footer(f).schema.to_arrow_schema() for f in files]
    features = None
    if any(not s.equals(schemas[0]) for s in schemas[1:]):
        with contextlib.suppress(pa.ArrowTypeError, pa.ArrowInvalid):
            features = datasets.Features.from_arrow_schema(pa.unify_schemas(schemas, promote_options="permissive"))
    paths = [Path(os.path.abspath(f)) for f in files]
    cache = Path(datasets.config.HF_DATASETS_CACHE, "repro", hashlib.sha256(
        "\n".join(map(str, paths)).encode()).hexdigest()[:16])
    state, stamp = json.dumps([(str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in paths]), cache / "sources.json"
    if not stamp.is_file() or stamp.read_text() != state:  # a new copy: this one's old one, and copies of files
        for other in cache.parent.glob("*/sources.json"):  # deleted since (a run removed), go first
            with contextlib.suppress(OSError, ValueError):
                if other == stamp or not any(Path(name).exists() for name, *_ in json.loads(other.read_text())):
                    shutil.rmtree(other.parent, ignore_errors=True)
    literal = [glob.escape(f) for f in files]  # (datasets reads them as patterns: a [1] in a path too)
    try:
        loaded = datasets.Dataset.from_parquet(literal, features=features, cache_dir=str(cache))
    except FileNotFoundError:  # another process emptied the folder as the files changed: once more
        loaded = datasets.Dataset.from_parquet(literal, features=features, cache_dir=str(cache))
    stamp.write_text(state)
    return loaded


def _load_hub(repo_id: str, split: str, parameter: str, split_parameter: str, revision: str | None) -> datasets.Dataset:
    try:
        return datasets.load_dataset(repo_id, split=split, revision=revision)
    except Exception as exc:
        if isinstance(exc, ValueError) and "split" in str(exc).lower():
            raise DataError(f"hub dataset {repo_id!r} has no split {split!r} ({exc}). Set {split_parameter} to one "
                            f"of its splits.") from None
        switch = hub_offline("HF_DATASETS_OFFLINE")
        if cached := hub_snapshot(repo_id, revision):  # offline (or unreachable), datasets reads only its own copies
            if not switch:
                notice(f"{parameter} {repo_id!r}: read from the local hub cache ({type(exc).__name__} from the hub)")
            return _load_local(cached, split, parameter, split_parameter, name=repo_id)
        why = (f"the hub is switched off ({switch} is set)" if switch
               else "the hub could not be reached or the id is wrong")
        at = f" --revision {revision}" if revision else ""  # (a folder has no revisions: that one's, unpinned)
        raise DatasetLoadError(
            f"Could not load hub dataset {repo_id!r} ({parameter}): {why} ({type(exc).__name__}: {str(exc)[:300]}). "
            f"On a machine with network run `hf download {repo_id} --repo-type dataset{at} --local-dir DIR`, "
            f"copy DIR here, and set {parameter} to that folder instead of the id"
            + (f" (and {parameter}_revision: null)." if revision else ".")) from None


def iter_jsonl(path: Path, option: str = "--input", name: str | None = None) -> Iterator[tuple[str, Any]]:
    """(where, value) for each non-empty line of a jsonl file; `where` names the line (of `name`, else the path)."""
    if path.is_dir():
        raise DataError(f"{option} {path} is a folder; give the path of a jsonl file in it (one JSON object per line).")
    if not path.is_file():
        raise DataError(f"{option} {path} does not exist; check the path (relative paths start from the current "
                        f"directory) and give an existing jsonl file, one JSON object per line.{unicode_twin(path)}")
    name = name or str(path)
    for line_no, line in text_lines(path, name):
        if not line.strip():
            continue
        where = f"line {line_no} of {name}"
        try:
            yield where, json.loads(line)
        except ValueError as exc:
            raise DataError(f"{where} is not valid JSON ({exc}). Each line must be one whole JSON object "
                            f"(a line break inside a value breaks the file): fix or remove that line.") from None


def text_lines(path: Path, name: str) -> Iterator[tuple[int, str]]:
    """(number, text) per line (.gz: gunzipped; a BOM is no text); a line not UTF-8: an error naming it as `name`'s."""
    try:
        with (gzip.open if path.suffix == ".gz" else open)(path, "rb") as f:
            for line_no, raw in enumerate(f, start=1):
                try:
                    yield line_no, raw.decode("utf-8-sig" if line_no == 1 else "utf-8")
                except UnicodeDecodeError as exc:
                    raise DataError(f"line {line_no} of {name} is not UTF-8 text (byte {raw[exc.start]:#04x} at "
                                    f"column {exc.start + 1}): save the file as UTF-8 (e.g. `iconv -f cp1252 -t "
                                    f"utf-8`), then run again.") from None
    except gzip.BadGzipFile:
        raise DataError(f"{name} is not gzip-compressed, though its name ends in .gz: rename it without .gz, or "
                        f"compress it.") from None


def require_columns(ds: datasets.Dataset | Iterable[str], columns: Iterable[str], where: str, hint: str = "") -> None:
    """Raise DataError naming every missing column (and the columns that are there)."""
    have = list(ds.column_names) if isinstance(ds, datasets.Dataset) else list(ds)
    if missing := [c for c in columns if c not in have]:
        raise DataError(f"{where} lacks column{'s' * (len(missing) > 1)} {missing}; it has {have}. {hint}".strip())
