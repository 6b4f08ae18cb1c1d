"""Resumable, shardable work over a list of items: chunks written as they finish, a fingerprint guarding reuse.

Used by scoring and generation alike. Contract (keep it when extending):

    results = run_chunked(items, fn, work_dir=..., fingerprint={...}, chunk_size=256, desc="scoring")

- `fn(chunk_items) -> list[result]` (one JSON-serialisable result per item, same order);
- finished chunks live in `work_dir/chunk-{index:06d}.json`; a re-run with the same fingerprint skips them;
- a different fingerprint (parameters, inputs, model) never mixes with old chunks: they are moved aside
  to `work_dir/stale-<old fingerprint>/` and the work starts over;
- returns the results in input order.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any, Callable, Sequence

FINGERPRINT_FILE = "fingerprint.json"


def fingerprint_of(obj: Any) -> str:
    """A stable sha256 of a JSON-serialisable description of the work (parameters, input hashes, model)."""
    blob = json.dumps(obj, sort_keys=True, ensure_ascii=False, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def _atomic_write_json(path: Path, value: Any) -> None:
    tmp = path.with_suffix(path.suffix + f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(value, ensure_ascii=False))
    os.replace(tmp, path)


def prepare_work_dir(work_dir: Path, fingerprint: dict[str, Any]) -> str:
    """Create `work_dir` for this fingerprint; move chunks of another fingerprint aside. Returns the digest."""
    work_dir.mkdir(parents=True, exist_ok=True)
    digest = fingerprint_of(fingerprint)
    fp_path = work_dir / FINGERPRINT_FILE
    if fp_path.exists():
        old = json.loads(fp_path.read_text()).get("digest")
        if old != digest:
            stale = work_dir / f"stale-{old}"
            stale.mkdir(exist_ok=True)
            for p in list(work_dir.glob("chunk-*.json")) + [fp_path]:
                shutil.move(str(p), stale / p.name)
    if not fp_path.exists():
        _atomic_write_json(fp_path, {"digest": digest, "fingerprint": fingerprint})
    return digest


def chunk_path(work_dir: Path, index: int) -> Path:
    return work_dir / f"chunk-{index:06d}.json"


def run_chunked(items: Sequence[Any], fn: Callable[[list[Any]], list[Any]], *, work_dir: str | Path,
                fingerprint: dict[str, Any], chunk_size: int = 256, desc: str = "work") -> list[Any]:
    """Apply `fn` chunk by chunk, keeping finished chunks on disk so that a re-run continues."""
    work_dir = Path(work_dir)
    prepare_work_dir(work_dir, fingerprint)
    chunk_size = max(1, int(chunk_size))
    results: list[Any] = []
    for index, start in enumerate(range(0, len(items), chunk_size)):
        path = chunk_path(work_dir, index)
        if path.exists():
            results.extend(json.loads(path.read_text()))
            continue
        chunk = list(items[start:start + chunk_size])
        out = fn(chunk)
        if len(out) != len(chunk):
            raise RuntimeError(f"{desc}: chunk {index} returned {len(out)} results for {len(chunk)} items")
        _atomic_write_json(path, out)
        results.extend(out)
    return results
