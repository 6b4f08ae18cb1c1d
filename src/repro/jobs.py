"""Resumable, shardable generation/scoring (chunks: `work_dir/chunk-NNNNNN.json`, what made them: `note-NNNNNN.json`,
another fingerprint's: `stale-<digest>/`), here, as a torchrun rank or in its workers; progress; atomic writes."""

from __future__ import annotations

import collections
import contextlib
import ctypes
import hashlib
import json
import math
import os
import pkgutil
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence, TextIO

from .cache import CacheCounts, RowCache, cached_chunk_fn
from .errors import DataError, ModelLoadError, ReproError, counted, listed, notice
from .paths import STAND_IN_MARKER, unreadable_stand_in
from .records import FINGERPRINT, NOTE, holds

FINGERPRINT_FILE = "fingerprint.json"
CHUNK_GLOB = "chunk-*.json"
NOTE_GLOB = "note-*.json"  # beside a chunk: the rows the row cache gave it, what it was made with (the scorer's budget)
STALE_PREFIX = "stale-"
JOB_FILE = "torchrun-job.json"
RESULT_FILE = "torchrun-result.json"
DIST_TIMEOUT = timedelta(hours=24)  # ranks wait for each other once, at the end: not the usual 10-30 minutes


class WorkersFailed(ReproError, RuntimeError):
    """torchrun worker processes failed; finished chunks stay in the work dir for a re-run to continue."""


def fingerprint_of(obj: Any) -> str:
    """A stable sha256 of a JSON-serialisable description of the work (parameters, input hashes, model)."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, ensure_ascii=False, default=str).encode()).hexdigest()[:16]


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write `text` (UTF-8) to a file beside `path`, then rename it: a crash never leaves half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    finally:  # a failed write leaves neither half a file nor the temp file
        tmp.unlink(missing_ok=True)


def json_default(value: Any) -> Any:
    """json.dumps's `default` for what JSON lacks: numpy scalars as their value, paths (and the rest) as text."""
    return value.item() if hasattr(value, "item") else str(value)


def atomic_write_json(path: str | Path, value: Any, *, indent: int | None = None, allow_nan: bool = True,
                      default: Callable[[Any], Any] | None = None) -> None:
    """`atomic_write_text` of JSON (`default`: json.dumps's); indented JSON ends with a newline, compact JSON not."""
    text = json.dumps(value, ensure_ascii=False, indent=indent, allow_nan=allow_nan, default=default)
    atomic_write_text(path, text + "\n" if indent is not None else text)


def build_once(target: Path, build: Callable[[Path], Any]) -> Path:
    """`build(folder)` into `target` once (atomically, safe with concurrent processes) until its marker exists."""
    if denied := unreadable_stand_in(target):
        raise ModelLoadError(denied)
    if (target / STAND_IN_MARKER).exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    # the modes the umask gives any folder and file (a shared cache's users read them), the setgid bit a group's
    # folder gave kept: not mkdtemp's 0700, nor safetensors' 0600 whatever the umask (read from a folder made, as
    # os.umask would change it for every thread an instant)
    (probe := tmp / ".umask").mkdir()
    mode = probe.stat().st_mode & 0o777
    probe.rmdir()
    tmp.chmod(mode | tmp.stat().st_mode & 0o7000)
    try:
        build(tmp)
        for path in tmp.rglob("*"):
            if path.is_file():
                path.chmod(mode & 0o666)
        try:
            os.replace(tmp, target)
        except OSError:  # another process finished first: its copy is byte-identical
            if not (target / STAND_IN_MARKER).exists():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def fingerprint_on_disk(work_dir: Path) -> dict[str, Any] | str | None:
    """None where none is (or it is being moved), "damaged" where not JSON shaped as records.Fingerprint."""
    try:
        found = json.loads((work_dir / FINGERPRINT_FILE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except ValueError:  # (not JSON, not UTF-8)
        return "damaged"
    return found if holds(FINGERPRINT, found) else "damaged"


def digest_on_disk(work_dir: Path) -> str | None:
    """The digest of `work_dir`'s work: None where none is, "damaged" as `fingerprint_on_disk` says."""
    return found["digest"] if isinstance(found := fingerprint_on_disk(work_dir), dict) else found


def _from_row_cache(cache: RowCache, rows: Sequence[Any]) -> str:
    """What a notice says of set-aside work of this run's settings: of its items `rows`, those `cache` holds."""
    held = sum(cache.path(cache.key(row)).exists() for row in rows)
    if not held:
        return f"not reused: the row cache in {cache.root} holds none of this run's {counted(len(rows), 'row')}"
    lacks = len(rows) - held
    made = f"; the {counted(lacks, 'row')} it lacks {'is' if lacks == 1 else 'are'} made" if lacks else ""
    return (f"not reused as chunks, but the settings that decide a row are the same: the row cache in {cache.root} "
            f"gives back {held} of this run's {counted(len(rows), 'row')}, not made again{made}")


def made_by(code: str | None, stage: str | None) -> str:
    """Who made work whose fingerprint holds another `code` digest (None: none) than this repro's for `stage`."""
    return ("by an older repro that did not record its code" if code is None else
            f"by other {'generation' if stage == 'generation' else 'scoring'} code")


def prepare_work_dir(work_dir: Path, fingerprint: dict[str, Any], cache: RowCache | None = None,
                     rows: Sequence[Any] = ()) -> str:
    """Create `work_dir`; set another fingerprint's chunks aside, said (`cache`, `rows`: this work's). Its digest."""
    work_dir.mkdir(parents=True, exist_ok=True)
    digest, fp_path = fingerprint_of(fingerprint), work_dir / FINGERPRINT_FILE
    if fp_path.exists() and (old := digest_on_disk(work_dir)) != digest:
        stale, chunks, differ, by = work_dir / f"{STALE_PREFIX}{old}", list(work_dir.glob(CHUNK_GLOB)), "", ""
        if stale.is_symlink():  # (a copied folder's: chunks moved through it would land outside the run)
            stale.unlink()
        stale.mkdir(exist_ok=True)
        reused = "not reused"
        with contextlib.suppress(OSError, LookupError, TypeError, ValueError):  # what they were made with, if told
            was, now = ({**f, **f["work"]} for f in (fingerprint_on_disk(work_dir)["fingerprint"], fingerprint))
            keys = [k for k in {**was, **now} if k not in ("work", "items", "code") and was.get(k) != now.get(k)]
            differ = ", ".join(filter(None, [listed({k: (was.get(k), now.get(k)) for k in keys}),
                                             "the rows" * (was["items"] != now["items"])]))
            by = "" if was.get("code") == now.get("code") else made_by(was.get("code"), now.get("stage"))
            if cache is not None and fingerprint_of(was["work"]) == fingerprint_of(now["work"]):  # rows, chunking
                reused = _from_row_cache(cache, rows)
        for p in chunks + list(work_dir.glob(NOTE_GLOB)) + [fp_path]:
            with contextlib.suppress(FileNotFoundError):  # ranks sharing a folder may race to move the same file
                shutil.move(str(p), stale / p.name)
        if chunks:
            was, they = ("was", "it is") if len(chunks) == 1 else ("were", "they are")
            made = " and ".join(filter(None, [by, differ and f"with other settings: {differ}"]))
            why = (f"cannot be told to be this work's: its {FINGERPRINT_FILE} is damaged (not what repro writes)"
                   if old == "damaged" else f"{was} made {made or 'with other settings'}")
            notice(f"{counted(len(chunks), 'finished chunk')} in {work_dir} {why}; {they} set aside in {stale} "
                   f"({reused}).")
    if not fp_path.exists():
        atomic_write_json(fp_path, {"digest": digest, "fingerprint": fingerprint})
    return digest


def chunk_path(work_dir: Path, index: int) -> Path:
    return work_dir / f"chunk-{index:06d}.json"


def note_path(work_dir: Path, index: int) -> Path:
    return work_dir / f"note-{index:06d}.json"


def read_note(work_dir: str | Path, index: int, what: str = "made_with") -> Any:
    """What chunk `index` was made with (`note`; `what="rows_from_cache"`: the rows the row cache gave it), or None: not
    kept (an older repro's note), unreadable, or not a records.ChunkNote (a damaged one's budgets are not known)."""
    with contextlib.suppress(OSError, ValueError):
        kept = json.loads(note_path(Path(work_dir), index).read_text(encoding="utf-8"))
        if holds(NOTE, kept):
            return kept.get(what) if "rows_from_cache" in kept else kept if what == "made_with" else None
    return None


def finished_chunks(work: Path) -> list[Path]:
    """The finished chunks in every job folder under `work` (those a re-run skips), not the stale ones."""
    return [p for p in work.rglob(CHUNK_GLOB) if not any(x.startswith(STALE_PREFIX) for x in p.relative_to(work).parts)]


def safe_chunks(work: Path) -> str:
    """What a stopped run keeps to continue from: the finished chunks of all its stages (generation's and scoring's)."""
    n = len(finished_chunks(work))
    return f"{counted(n, 'finished chunk')} (every stage's) {'is' if n == 1 else 'are'} safe in {work}"


def num_chunks(num_items: int, chunk_size: int) -> int:
    return math.ceil(num_items / max(1, int(chunk_size)))


def chunk_share(n_chunks: int, rank: int, world_size: int) -> range:
    """The contiguous chunks of rank `rank` of `world_size` (sizes within one, larger first: rank 0 shows progress)."""
    if not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} is not in 0..{world_size - 1}")
    return range(-(-rank * n_chunks // world_size), -(-(rank + 1) * n_chunks // world_size))


def idle_processes(items: int, chunk_size: int, processes: int, what: str, size_name: str = "chunk_size") -> str | None:
    """What `processes` leave idle (whole chunks each: `chunk_share`), the `size_name` giving each work; else None."""
    chunks = num_chunks(items, chunk_size)
    if not 0 < chunks < processes:
        return None
    even = -(-items // processes)
    said = (f"{processes} processes, {counted(chunks, 'chunk')} of {what} ({counted(items, 'prompt')}, {size_name} "
            f"{chunk_size}): {processes - chunks} would be idle")
    if items < processes:
        return f"{said}: {counted(items, 'prompt')} keep at most {items} busy; use {items} processes or fewer."
    said += f", and one does {min(items, chunk_size)} prompts where an even share is {even}"
    most = (items - 1) // (processes - 1)  # the largest size that makes `processes` chunks or more
    return said + f"; set {size_name} ≤ {most} for all to work" + (
        f" ({even}: even shares)." if even < most and num_chunks(items, even) == processes else ".")


def _format_seconds(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "?"
    h, rest = divmod(int(round(seconds)), 3600)
    m, s = divmod(rest, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else f"{m}m{s:02d}s"


PROGRESS_LINES_ENV = "REPRO_PROGRESS_LINES"  # set by `repro run --log-output`: a notebook's progress as lines


def _kernel() -> Any:
    try:
        import IPython  # keeps IPython off `repro run`
    except ImportError:
        return None
    return getattr(IPython.get_ipython(), "kernel", None)


class Progress(contextlib.AbstractContextManager):
    """Items done, items/s and ETA: a widget in a live notebook, a tqdm bar on a terminal, else a line per
    `every_percent` (updated in place in an executed notebook); `skip`ped items are left out of rate and ETA."""

    def __init__(self, total: int, *, desc: str, unit: str = "item", enabled: bool = True,
                 stream: TextIO | None = None, bar: bool | None = None, every_percent: float = 5.0):
        self.total, self.desc, self.unit, self.enabled = int(total), desc, unit, enabled
        self.stream = stream if stream is not None else sys.stderr
        kernel = _kernel() if stream is None else None  # a notebook's own output, not a given stream
        live = bool(getattr(kernel, "_allow_stdin", False))  # JupyterLab allows stdin, nbclient (papermill) never does
        self.widget = widget = bar is None and live
        self.bar = bar if bar is not None else widget or bool(getattr(self.stream, "isatty", lambda: False)())
        self.every = max(float(every_percent), 0.1)
        self.done = self.skipped = self.cached = 0  # skipped: resumed, and (`cached` of them) from the row cache
        self._start = time.monotonic()
        self._next_percent = self.every
        self._tqdm = self._display = None  # _display: the output updated in place, in an executed notebook
        # executed without a front end (papermill): one output updated in place, unless lines are asked for
        self._in_place = kernel is not None and not live and not self.bar and not os.environ.get(PROGRESS_LINES_ENV)
        if self.enabled and self.bar:
            options = dict(total=self.total, desc=desc, unit=unit, smoothing=0.05)
            if widget:
                try:
                    from tqdm.notebook import tqdm as notebook_tqdm  # keeps IPython off `repro run`

                    self._tqdm = notebook_tqdm(**options)
                except ImportError:  # without ipywidgets: plain lines
                    self.bar = False
            else:
                from tqdm.auto import tqdm  # keeps tqdm off `repro --help`

                self._tqdm = tqdm(file=self.stream, dynamic_ncols=True, **options)

    @property
    def rate(self) -> float:
        """Items per second computed here (resumed ones left out)."""
        computed = self.done - self.skipped
        return computed / self.elapsed if self.elapsed > 0 and computed > 0 else 0.0

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self._start

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Time spent inside (a model loading before the first item computed) left out of elapsed, rate and ETA."""
        start = time.monotonic()
        try:
            yield
        finally:
            self._start += time.monotonic() - start
            if self._tqdm is not None:
                self._tqdm.unpause()

    def skip(self, n: int, cached: bool = False) -> None:
        """Count `n` items resumed from earlier work (`cached`: taken from the row cache, said in the line) as done."""
        if n <= 0:
            return
        self.done += n
        self.skipped += n
        self.cached += n if cached else 0
        if self._tqdm is not None:
            self._tqdm.initial += n  # moving `initial` along keeps resumed items out of tqdm's rate and ETA
            self._tqdm.n += n
            self._tqdm.last_print_n += n
            self._tqdm.refresh()
        elif self.enabled and not cached:
            self._print(f"{self.desc}: {self.done}/{counted(self.total, self.unit)} resumed from earlier work")
            self._next_percent = self._percent_after(self.done)

    def advance(self, n: int) -> None:
        """Count `n` more items as computed."""
        if n <= 0:
            return
        n = min(n, self.total - self.done)
        self.done += n
        if self._tqdm is not None:
            self._tqdm.update(n)
        elif self.enabled and self._percent(self.done) + 1e-9 >= self._next_percent and self.done < self.total:
            self._print(self._line())
            self._next_percent = self._percent_after(self.done)

    def close(self) -> None:
        """Show the final line (once: a closed bar is disabled)."""
        if self._tqdm is not None:
            self._tqdm.close()
            if self.widget and self._tqdm.n == self.total:  # a saved notebook keeps the widget's first text, "0%"
                from IPython.display import display  # keeps IPython off `repro run`

                display({"text/plain": self._line(final=True)}, raw=True)
        elif self.enabled:
            self._print(self._line(final=True))
        self.enabled = False

    def _percent(self, done: int) -> float:
        return 100.0 * done / self.total if self.total else 100.0

    def _percent_after(self, done: int) -> float:
        return (math.floor(self._percent(done) / self.every) + 1) * self.every

    def _line(self, final: bool = False) -> str:
        rate, left = self.rate, self.total - self.done
        eta = left / rate if rate > 0 else (0.0 if left == 0 else math.inf)
        tail = f"in {_format_seconds(self.elapsed)}" if final else \
            f"elapsed {_format_seconds(self.elapsed)}, ETA {_format_seconds(eta)}"
        resumed = "".join(f", {n} {how}" for n, how in ((self.skipped - self.cached, "resumed"),
                                                         (self.cached, "from the row cache")) if n)
        speed = f"{rate:.2f} {self.unit}s/s, " if self.done > self.skipped else ""  # none computed: no rate
        return (f"{self.desc}: {self._percent(self.done):3.0f}% ({self.done}/{counted(self.total, self.unit)}"
                f"{resumed}), {speed}{tail}")

    def _print(self, line: str) -> None:
        if not self._in_place:
            print(line, file=self.stream, flush=True)
        elif self._display is None:
            from IPython.display import display  # keeps IPython off `repro run` (here: inside a kernel)

            self._display = display({"text/plain": line}, raw=True, display_id=True)
        else:
            self._display.update({"text/plain": line}, raw=True)

    def __exit__(self, *exc) -> None:
        self.close()


@dataclass
class ChunkedRun:
    """What `run_chunked_with_stats` did: the results (of the share, in input order) and the chunk counts."""

    results: list[Any]
    digest: str
    chunks_total: int  # chunks of the whole input
    chunks_resumed: int  # of this process's share, found finished on disk
    items_resumed: int
    seconds: float
    cache: dict[str, Any] | None = None  # rows from the row cache / computed (RowCache.counts), when one is used


def _damaged(path: Path, problem: str, desc: str = "") -> DataError:
    """The error of a chunk file that cannot be resumed: what is wrong with it, and to delete it."""
    return DataError(f"{desc}: " * bool(desc) + f"{path} {problem}; delete it to recompute that chunk.")


def read_chunk(path: Path, desc: str = "") -> list[Any]:
    """The results a chunk file holds; not a JSON list: a DataError naming it (after `desc`) that says to delete it."""
    try:
        out = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:  # (not UTF-8 either)
        raise _damaged(path, f"is not JSON ({exc})", desc) from None
    if not isinstance(out, list):
        raise _damaged(path, "holds no list of results", desc)
    return out


def _load_chunk(work_dir: Path, index: int, items: Sequence[Any], chunk_size: int, desc: str,
                check: Callable[[Any, Any], str | None] | None = None) -> list[Any] | None:
    """Finished chunk `index`, or None if not on disk; an error where it holds another number of results, or a result
    `check(item, result)` rejects (it returns what the result should be; None: fine)."""
    path = chunk_path(work_dir, index)
    if not path.exists():
        return None
    mine = items[index * chunk_size:(index + 1) * chunk_size]
    if len(out := read_chunk(path, desc)) != len(mine):
        raise _damaged(path, f"holds {len(out)} results, expected {len(mine)}", desc)
    for k, (item, result) in enumerate(zip(mine, out) if check is not None else ()):
        if (want := check(item, result)) is not None:
            held = json.dumps(result, ensure_ascii=False)
            raise _damaged(path, f"holds {held if len(held) <= 60 else held[:57] + '...'} for its result {k + 1} of "
                                 f"{len(out)}, not {want}", desc)
    return out


def _stored_fingerprint(fingerprint: dict[str, Any], items: Sequence[Any], chunk_size: int) -> dict[str, Any]:
    """The work's fingerprint with the chunk size and the items' sha256 (a chunk file depends on them too)."""
    h = hashlib.sha256()  # item by item: a large job's items are never all in memory as JSON at once
    for item in items:
        h.update(json.dumps(item, sort_keys=True, ensure_ascii=False, default=str).encode() + b"\x00")
    return {"work": fingerprint, "chunk_size": chunk_size, "num_items": len(items), "items": h.hexdigest()}


def run_chunked_with_stats(items: Sequence[Any], fn: Callable[..., list[Any]], *, work_dir: str | Path,
                           fingerprint: dict[str, Any], chunk_size: int, desc: str = "work",
                           progress: bool | Progress = False, fn_reports_progress: bool = False,
                           share: tuple[int, int] | None = None, unit: str = "item",
                           prepare: bool = True, cache: RowCache | None = None,
                           setup: Callable[[], Any] | None = None,
                           note: Callable[[list[Any]], Any] | None = None,
                           check: Callable[[Any, Any], str | None] | None = None) -> ChunkedRun:
    """`run_chunked`, returning a `ChunkedRun`. `fn_reports_progress`: `fn(chunk, advance)` moves the bar itself;
    `share=(rank, world)`: only that rank's contiguous chunks; `prepare=False`: another process readied the work dir;
    `cache`: rows the row cache holds (by `key_of(item)`) come from it, the others are added; `setup()`: called before
    the first row computed (never for resumed or cached ones), its time left out of the bar and run; `note(chunk)`:
    what a chunk made here was made with (JSON; None: nothing), kept beside it for `read_note` with the rows the cache
    gave it (a resumed chunk's count as `resumed_from_cache`); `check(item, result)`: as in `_load_chunk`."""
    start_time, setup_seconds = time.monotonic(), 0.0
    if setup is not None:
        compute = fn

        def fn(chunk: list[Any], *advance: Any) -> list[Any]:
            nonlocal setup, setup_seconds
            if setup is not None:
                start = time.monotonic()
                with bar.paused():
                    setup()
                setup, setup_seconds = None, time.monotonic() - start
            return compute(chunk, *advance)

    if cache is not None:  # issue 22: rows another run computed come from the project's row cache
        fn = cached_chunk_fn(fn, cache, reports_progress=fn_reports_progress,
                             cached=lambda n: bar.skip(n, cached=True))  # (not computed: out of the rate)
    work_dir, chunk_size = Path(work_dir), max(1, int(chunk_size))
    stored = _stored_fingerprint(fingerprint, items, chunk_size)
    digest = prepare_work_dir(work_dir, stored, cache, items) if prepare else fingerprint_of(stored)
    n_chunks = num_chunks(len(items), chunk_size)
    indices = chunk_share(n_chunks, *share) if share is not None else range(n_chunks)
    done = {index: out for index in indices
            if (out := _load_chunk(work_dir, index, items, chunk_size, desc, check)) is not None}
    items_resumed = sum(len(v) for v in done.values())
    share_items = sum(min(len(items), (i + 1) * chunk_size) - i * chunk_size for i in indices)
    bar = progress if isinstance(progress, Progress) else \
        Progress(share_items, desc=desc, unit=unit, enabled=bool(progress))
    bar.skip(items_resumed)
    results: list[Any] = []
    try:
        for index in indices:
            if index in done:
                results.extend(done[index])
                continue
            chunk = list(items[index * chunk_size:(index + 1) * chunk_size])
            before, hits = bar.done, cache.counts.rows_from_cache if cache is not None else 0
            out = fn(chunk, bar.advance) if fn_reports_progress else fn(chunk)
            if len(out) != len(chunk):
                raise RuntimeError(f"{desc}: chunk {index} returned {len(out)} results for {len(chunk)} items")
            hits = cache.counts.rows_from_cache - hits if cache is not None else 0
            made_with = note(chunk) if note is not None else None  # first: a chunk written has its note
            atomic_write_json(note_path(work_dir, index), {
                "rows_from_cache": hits, **({"made_with": made_with} if made_with is not None else {})})
            atomic_write_json(chunk_path(work_dir, index), out)
            bar.advance(before + len(chunk) - bar.done)
            results.extend(out)
    finally:
        if bar is not progress:
            bar.close()
    counts = CacheCounts()
    if cache is not None:  # this call's, and what the notes of the chunks resumed say (an interrupted call's)
        counts.add(cache.counts.as_dict())
        for index, out in done.items():
            cached = read_note(work_dir, index, "rows_from_cache")
            counts.resumed_from_cache += cached if isinstance(cached, int) else 0
            counts.resumed_unknown += 0 if isinstance(cached, int) else len(out)
    return ChunkedRun(results=results, digest=digest, chunks_total=n_chunks, chunks_resumed=len(done),
                      items_resumed=items_resumed, seconds=time.monotonic() - start_time - setup_seconds,
                      cache=counts.as_dict() if cache is not None else None)


def run_chunked(items: Sequence[Any], fn: Callable[..., list[Any]], **kwargs: Any) -> list[Any]:
    """Apply `fn` chunk by chunk, keeping finished chunks on disk so that a re-run continues; the results."""
    return run_chunked_with_stats(items, fn, **kwargs).results


def collect_chunks(items: Sequence[Any], *, work_dir: str | Path, fingerprint: dict[str, Any], chunk_size: int,
                   desc: str = "work") -> list[Any]:
    """Read back every chunk of a finished job (other processes wrote them) in input order; error if any is missing."""
    work_dir, chunk_size = Path(work_dir), max(1, int(chunk_size))
    digest, stored = fingerprint_of(_stored_fingerprint(fingerprint, items, chunk_size)), digest_on_disk(work_dir)
    if stored != digest:
        raise RuntimeError(f"{desc}: {work_dir} holds work of another fingerprint ({stored}, expected {digest})")
    results: list[Any] = []
    for index in range(num_chunks(len(items), chunk_size)):
        out = _load_chunk(work_dir, index, items, chunk_size, desc)
        if out is None:
            raise RuntimeError(f"{desc}: chunk {index} is missing in {work_dir} after all processes finished")
        results.extend(out)
    return results


def world_size() -> int:
    """The number of processes of the torchrun job this process belongs to (1 outside torchrun)."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def is_main_process() -> bool:
    """True outside torchrun and on rank 0: the process that writes outputs."""
    return int(os.environ.get("RANK", "0")) == 0


def run_as_rank(items: Sequence[Any], *, work_dir: str | Path, fingerprint: dict[str, Any], chunk_size: int,
                device: str, compute: Callable[..., tuple[ChunkedRun, dict]],
                cache: RowCache | None = None) -> list[dict[str, Any]]:
    """One rank of a torchrun job: `compute(device, (rank, world))` on its share ("cuda": cuda:LOCAL_RANK) after rank 0
    of each node prepared the work dir (`cache`: `run_job`'s); each rank's results and stats, by rank."""
    import torch  # keeps torch off `repro --help` and `repro run`
    import torch.distributed as dist

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if device == "cuda":  # one GPU per process of the node, whatever cuda:N the job names
        device = f"cuda:{local_rank % torch.cuda.device_count()}"
    if device.startswith("cuda"):
        torch.cuda.set_device(device)
    created = not dist.is_initialized()
    if created:
        dist.init_process_group(backend="nccl" if device.startswith("cuda") else "gloo", timeout=DIST_TIMEOUT)
    try:
        if local_rank == 0:  # one preparer per node: right with or without a file system shared by the nodes
            prepare_work_dir(Path(work_dir), _stored_fingerprint(fingerprint, items, max(1, int(chunk_size))), cache,
                             items)
        dist.barrier()
        run, extra = compute(device, (rank, world))
        mine = {"results": run.results, "stats": _share_stats(run, extra), "rank": rank}
        gathered: list[Any] = [None] * world
        dist.all_gather_object(gathered, mine)
        dist.barrier()  # nobody tears the group down while a peer still reads from it (gloo aborts on a closed socket)
    finally:
        if created:
            dist.destroy_process_group()
    return sorted(gathered, key=lambda g: g["rank"])


def exit_process(code: int) -> None:
    """Leave with `code`; a torchrun rank skips C++ destructors: gloo's threads can abort an ordinary exit after the
    work is written ("terminate called without an active exception", exit -6), a rank torchrun reports as failed."""
    if world_size() > 1:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


def torchrun_worker(entry: str, job_path: str) -> int:
    """One torchrun worker: `entry(spec)` returns (results, stats); rank 0 writes the stats (results: the chunks)."""
    _, stats = pkgutil.resolve_name(entry)(json.loads(Path(job_path).read_text()))
    if is_main_process():  # what the launching process reads back besides the chunks
        atomic_write_json(Path(job_path).parent / RESULT_FILE, {"result": stats})
    return 0


def _stop_with_parent() -> None:
    """In the torchrun launcher (Linux): SIGTERM when its parent dies, even by SIGKILL (a JupyterLab kernel restart)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def launch_torchrun(spec: dict[str, Any], num_processes: int, entry: str, *, work_dir: str | Path,
                    env_threads: int | None = None, progress: bool = True, what: str = "work",
                    error: type[Exception] = WorkersFailed) -> Any:
    """Run `entry(spec)` in `num_processes` torchrun workers on this node; returns the stats of rank 0's call."""
    work_dir = Path(work_dir)
    job_path, result_path = work_dir / JOB_FILE, work_dir / RESULT_FILE
    result_path.unlink(missing_ok=True)
    atomic_write_json(job_path, spec)  # (it makes the folder)
    env = dict(os.environ)
    if env_threads is not None:  # torchrun would give each worker one thread: CPU matrix products would round otherwise
        env.update(OMP_NUM_THREADS=str(env_threads), MKL_NUM_THREADS=str(env_threads))
    tail: collections.deque[str] = collections.deque(maxlen=40)
    worker = (f"from repro.jobs import exit_process, torchrun_worker; "
              f"exit_process(torchrun_worker({entry!r}, {str(job_path)!r}))")
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={num_processes}",
               "--no-python", sys.executable, "-c", worker]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            preexec_fn=_stop_with_parent if sys.platform == "linux" else None)
    try:
        for line in proc.stdout:  # relayed, so that progress shows in a notebook too
            tail.append(line.rstrip("\n"))
            if progress:
                print(line, end="", file=sys.stderr, flush=True)
        code = proc.wait()
    except BaseException:
        proc.terminate()
        proc.wait()
        raise
    if code != 0 or not result_path.exists():
        raise error(
            f"The {num_processes} torchrun {what} processes failed (exit code {code}); finished chunks are kept "
            f"in {work_dir}, and running the same call again continues from them. Last output:\n" + "\n".join(tail))
    result = json.loads(result_path.read_text())["result"]
    result_path.unlink()
    job_path.unlink()
    return result


def _share_stats(run: ChunkedRun, extra: dict[str, Any]) -> dict[str, Any]:
    """A process's run without its results (nor `cache` where none was used), and `extra`."""
    return {**{k: v for k, v in vars(run).items() if k != "results" and v is not None}, **extra}


def merge_stats(stats: list[dict[str, Any]], summed: Sequence[str] = (),
                slowest: Sequence[str] = ()) -> dict[str, Any]:
    """Every process's stats as one: counts add up (a {name: count} map name by name), times are the slowest's (they
    ran side by side), the rest is rank 0's; with `processes` and, where each names its `device`, sorted `devices`."""
    merged = dict(stats[0])
    for key in ("chunks_resumed", "items_resumed", *summed):
        counts = [s[key] for s in stats]
        merged[key] = dict(sum(map(collections.Counter, counts), collections.Counter())) \
            if isinstance(counts[0], dict) else sum(counts)
    for key in ("seconds", *slowest):
        merged[key] = max(s[key] for s in stats)
    merged["processes"] = len(stats)
    if "device" in merged:
        merged["devices"] = sorted({str(s["device"]) for s in stats})
    if "cache" in merged:
        counts = CacheCounts()
        for s in stats:
            counts.add(s["cache"])
        merged["cache"] = counts.as_dict()
    return merged


def run_job(entry: str, spec: dict[str, Any], items: Sequence[Any], *, work_dir: str | Path,
            fingerprint: dict[str, Any], chunk_size: int, device: str, num_processes: int,
            compute: Callable[[str | None, tuple[int, int] | None], tuple[ChunkedRun, dict[str, Any]]],
            summed: Sequence[str] = (), slowest: Sequence[str] = (), progress: bool = True, what: str = "work",
            error: type[Exception] = WorkersFailed, cache: RowCache | None = None,
            chunk_size_name: str = "chunk_size (repro score: --chunk-size)") -> tuple[list[Any], dict[str, Any]]:
    """(results in input order, `merge_stats` of every process): as one rank inside a torchrun job (every rank gets all
    results); else in `num_processes` torchrun workers each calling `entry(spec)`, which comes back here as one rank;
    else here. `compute(device, share)` runs `run_chunked_with_stats` over `share` (None: all; device None: the job's)
    and returns (the run, its stats: `summed` counts, `slowest` times, others); `cache`: the row cache `compute` uses
    (for `run_as_rank`'s set-aside notice); a process with no chunk is said (`idle_processes`, `chunk_size_name`)."""
    if world_size() > 1:
        if is_main_process() and (idle := idle_processes(len(items), chunk_size, world_size(), what, chunk_size_name)):
            notice(idle)  # (once: the workers launched below come back here, and rank 0's output is relayed)
        gathered = run_as_rank(items, work_dir=work_dir, fingerprint=fingerprint, chunk_size=chunk_size,
                               device=device, compute=compute, cache=cache)
        return [r for g in gathered for r in g["results"]], merge_stats([g["stats"] for g in gathered], summed,
                                                                         slowest)
    if num_processes > 1:
        import torch  # keeps torch off `repro --help` and `repro run`

        # CPU: each worker gets this process's threads, so that N processes match 1 bit for bit
        threads = torch.get_num_threads() if device.split(":")[0] == "cpu" else None
        stats = launch_torchrun(spec, num_processes, entry, work_dir=work_dir, env_threads=threads,
                                progress=progress, what=what, error=error)
        return collect_chunks(items, work_dir=work_dir, fingerprint=fingerprint, chunk_size=chunk_size,
                              desc=what), stats
    run, extra = compute(None, None)
    return run.results, merge_stats([_share_stats(run, extra)], summed, slowest)
