"""The project's content-addressed cache of generated and scored rows: an entry per row, keyed by content and the
stage's `namespace`, checksummed (damaged: moved to `<root>/damaged/`, recomputed); atomic writes, first writer wins
(a hard link): processes sharing a cache get the same bytes, waiting for rows another computes (a lock per chunk)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import socket
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from .errors import ReproError, counted, notice
from .paths import check_folder, let_go, take_lock

KEY_FORMAT = 1  # raise when the meaning of a key or the layout of an entry changes
FORMAT_FILE = "cache-format.json"
DAMAGED_FOLDER = "damaged"
LOCKS_FOLDER = "locks"  # in a namespace's folder: one file per chunk of rows computed (`RowCache.computing`)
_MISSING = object()


class CacheError(ReproError, RuntimeError):
    """The row cache cannot be used as it is (another key format, a folder that is a file)."""


def canonical_json(value: Any) -> str:
    """The one JSON text of a value that keys and checksums are computed over."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass
class CacheCounts:
    """Cache counts; `resumed_*`: resumed chunks' (`repro.jobs`) rows the cache gave their call, or unknown."""

    rows_from_cache: int = 0
    rows_computed: int = 0
    damaged_entries: int = 0
    damaged: list[str] = field(default_factory=list)  # entry names (not paths), at most a few
    resumed_from_cache: int = 0
    resumed_unknown: int = 0  # (an older repro's chunks: from the cache or not, not known)

    def as_dict(self) -> dict[str, Any]:
        """What the manifest records for a stage (no path of this machine; the resumed counts where not 0)."""
        out = {k: v for k, v in asdict(self).items()
               if k != "damaged" and (v or not k.startswith("resumed"))} | {"key_format": KEY_FORMAT}
        if self.damaged:
            out["damaged"] = self.damaged[:10]
        return out

    def add(self, d: dict[str, Any]) -> None:
        """Add another process's counts (their `as_dict()`)."""
        for name in ("rows_from_cache", "rows_computed", "damaged_entries", "resumed_from_cache", "resumed_unknown"):
            setattr(self, name, getattr(self, name) + int(d.get(name, 0)))
        self.damaged.extend(d.get("damaged", []))


def check_format(root: Path, create: bool = True) -> None:
    """Make `root` a cache of this key format (`create`: else only check, as `--check`); refuse another's, or a file."""
    check_folder(root, "The row cache", "Set cache_dir (or $REPRO_ROW_CACHE) to a folder, or move the file away.")
    path = root / FORMAT_FILE
    try:
        found = json.loads(path.read_text()).get("key_format")
    except FileNotFoundError:
        if not create:
            return
        _write_once(path, canonical_json({"key_format": KEY_FORMAT}))  # (it makes the folders)
        found = json.loads(path.read_text()).get("key_format")
    except (json.JSONDecodeError, AttributeError):
        found = "unreadable"
    if found != KEY_FORMAT:
        raise CacheError(
            f"The row cache {root} was written with key format {found!r}; this version of repro reads and writes "
            f"key format {KEY_FORMAT}. Nothing in it was changed. Give this run another cache folder (cache_dir: "
            f"..., or $REPRO_ROW_CACHE), or move {root} aside to start a new cache; its rows stay there for the "
            f"version of repro that wrote them.")


def _write_once(path: Path, text: str) -> bool:
    """Create `path` with `text` atomically unless it exists; True if this call created it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")  # unique across hosts sharing the folder
    try:
        tmp.write_text(text, encoding="utf-8")
        try:
            os.link(tmp, path)  # atomic create-if-absent, also on NFS
            return True
        except FileExistsError:
            return False
        except OSError:  # a file system without hard links: a rename (last writer wins, still never half a file)
            if path.exists():
                return False
            os.replace(tmp, path)
            return True
    finally:
        tmp.unlink(missing_ok=True)


class RowCache:
    """One stage's entries under one namespace (everything but the row that decides a row's result)."""

    def __init__(self, root: str | Path, stage: str, namespace: Any, describe: bool = False,
                 key_of: Callable = lambda item: item):
        self.root, self.stage, self.key_of = Path(root), stage, key_of
        self.counts, self.waited = CacheCounts(), False
        self.rekey(namespace, describe)

    @classmethod
    def open(cls, root: str | Path, stage: str, namespace: Any, key_of: Callable = lambda item: item) -> "RowCache":
        """The cache of `stage` under `namespace` in `root`, after checking `root`'s key format."""
        check_format(Path(root))
        return cls(root, stage, namespace, describe=True, key_of=key_of)

    def rekey(self, namespace: Any, describe: bool = True) -> "RowCache":
        """Use `namespace`'s rows from now (after an OOM: the lower budget's); `describe`: write it down for people."""
        self.namespace_digest = _sha256(canonical_json({"key_format": KEY_FORMAT, "namespace": namespace}))
        self.folder = self.root / self.stage / self.namespace_digest[:32]
        if describe:
            _write_once(self.folder / "namespace.json", json.dumps(
                {"key_format": KEY_FORMAT, "stage": self.stage, "namespace": namespace}, ensure_ascii=False, indent=1,
                default=str) + "\n")
        return self

    def key(self, item: Any) -> str:
        """The key of an item in this namespace: of `key_of(item)`, what decides its result (not its row number)."""
        return _sha256(canonical_json({"key_format": KEY_FORMAT, "namespace": self.namespace_digest,
                                       "row": self.key_of(item)}))

    def path(self, key: str) -> Path:
        return self.folder / key[:2] / f"{key}.json"

    def get(self, key: str) -> Any:
        """The stored value, or `_MISSING`; a damaged entry is said, moved aside, counted and treated as missing."""
        path = self.path(key)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return _MISSING
        problem = None
        try:
            entry = json.loads(text)
            if not isinstance(entry, dict) or entry.get("key") != key:
                problem = "it is not the entry of its key"
            elif entry.get("key_format") != KEY_FORMAT:
                problem = f"it was written with key format {entry.get('key_format')!r}, not {KEY_FORMAT}"
            elif entry.get("sha256") != _sha256(canonical_json(entry.get("value"))):
                problem = "its checksum does not match its value"
        except json.JSONDecodeError:
            problem = "it is not valid JSON"
        if problem is None:
            return entry["value"]
        self.counts.damaged_entries += 1
        self.counts.damaged.append(path.name)
        target = self.root / DAMAGED_FOLDER / f"{path.stem}.{uuid.uuid4().hex[:8]}.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):  # another process set it aside first
            shutil.move(str(path), target)  # kept for a look; never deleted
        notice(f"row cache: the {self.stage} entry {path.name} is damaged ({problem}); it was moved to {target} and "
               f"its row is computed again, in this run's batch: it may differ from its first computation in the last "
               f"bits (float rounding follows the batch).")
        return _MISSING

    def put(self, key: str, value: Any) -> Any:
        """Store `value` unless an entry exists; returns the stored value (the first writer's)."""
        text = canonical_json(value)
        entry = canonical_json({"key_format": KEY_FORMAT, "key": key, "sha256": _sha256(text), "value": value})
        if not _write_once(self.path(key), entry):
            if (stored := self.get(key)) is not _MISSING:
                return stored
            _write_once(self.path(key), entry)  # the entry there was damaged and set aside: this one takes its place
        return json.loads(text)  # what a reader gets back (JSON's values, not the caller's objects)

    @contextlib.contextmanager
    def computing(self, keys: list[str]) -> Iterator[None]:
        """Lock rows `keys` while computing them: another process about to (family members, Slurm tasks) waits,
        saying so once, then reads them. A flock: a holder that stops, crashed too, lets go; no flock: both compute."""
        held, path = None, self.folder / LOCKS_FOLDER / f"{_sha256(canonical_json(keys))}.lock"
        with contextlib.suppress(OSError):  # (no flock: Lustre mounted without -o flock; a cache not writable)
            if keys:
                path.parent.mkdir(parents=True, exist_ok=True)
                held = take_lock(path, f"repro's {self.stage} of {counted(len(keys), 'row')} on "
                                       f"{socket.gethostname()}", self._waits)
        try:
            yield
        finally:
            if held:
                let_go(held)

    def _waits(self, holder: str) -> None:
        if not self.waited:
            self.waited = True
            notice(f"row cache: this run waits for {holder}, rows it needs too, then reads them from the cache "
                   f"rather than computing them again (later waits of its {self.stage} are not said).")


def cached_chunk_fn(fn: Callable[..., list[Any]], cache: RowCache, *, reports_progress: bool = False,
                    cached: Callable[[int], None] | None = None) -> Callable[..., list[Any]]:
    """`fn` over a chunk's items the cache lacks, results the stored values; `reports_progress`: `fn` takes `(items,
    advance)`, cached rows advance at once or go to `cached(n)` if given (a bar's rate: computed rows only)."""

    def run(chunk: Sequence[Any], advance: Callable[[int], None] | None = None) -> list[Any]:
        keys = [cache.key(item) for item in chunk]
        results = [cache.get(k) for k in keys]
        with cache.computing([k for k, r in zip(keys, results) if r is _MISSING]):  # (another may have made them)
            results = [cache.get(k) if r is _MISSING else r for k, r in zip(keys, results)]
            missing = [i for i, r in enumerate(results) if r is _MISSING]
            cache.counts.rows_from_cache += len(chunk) - len(missing)
            if (counts := cached or advance) is not None and len(chunk) > len(missing):
                counts(len(chunk) - len(missing))
            if missing:
                todo, namespace = [chunk[i] for i in missing], cache.namespace_digest
                out = fn(todo, advance) if reports_progress else fn(todo)
                if len(out) != len(todo):
                    raise RuntimeError(f"{cache.stage}: {len(out)} results for {len(todo)} rows")
                if cache.namespace_digest != namespace:  # `fn` moved the cache to another namespace (RowCache.rekey)
                    keys = [cache.key(item) for item in chunk]
                for i, value in zip(missing, out):
                    results[i] = cache.put(keys[i], value)
                cache.counts.rows_computed += len(missing)
        return results

    return run
