"""What the row cache costs a chunk of rows, its lock included (`RowCache.computing`, a flock per chunk of rows
computed): `cached_chunk_fn` over chunks of new rows with a function that does nothing, this checkout's `src` against
another's (`--vs SRC`), alternated in their own processes, so the cache's own work is all that is timed.

    python benchmarks/bench_row_cache.py --vs /tmp/src-c522d5d/src
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from saved import save_json

ONE = """
import json, sys, tempfile, time
from repro.cache import RowCache, cached_chunk_fn
chunks, size = int(sys.argv[1]), int(sys.argv[2])
with tempfile.TemporaryDirectory() as root:
    cache = RowCache.open(root, "bench", {"v": 1})
    run = cached_chunk_fn(lambda items: [{"t": t} for t in items], cache)
    start = time.perf_counter()
    for c in range(chunks):
        run([f"row {c} {i}" for i in range(size)])
    print(json.dumps((time.perf_counter() - start) / chunks))
"""


def per_chunk(src: Path, chunks: int, size: int) -> float:
    env = dict(os.environ, PYTHONPATH=str(src))
    done = subprocess.run([sys.executable, "-c", ONE, str(chunks), str(size)], env=env, capture_output=True, text=True,
                          check=True)
    return json.loads(done.stdout)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--vs", type=Path, required=True, help="another checkout's src folder (the baseline)")
    ap.add_argument("--chunks", type=int, default=300)
    ap.add_argument("--size", type=int, default=16, help="rows a chunk (the demo's chunk_size is 16)")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args(argv)
    here = Path(__file__).resolve().parents[1] / "src"
    times: dict[str, list[float]] = {"baseline": [], "this checkout": []}
    for _ in range(args.repeats):  # alternated, so that a change in the machine's load hits both
        times["baseline"].append(per_chunk(args.vs, args.chunks, args.size))
        times["this checkout"].append(per_chunk(here, args.chunks, args.size))
    ratios = [b / a for a, b in zip(times["baseline"], times["this checkout"])]
    result = {"chunks": args.chunks, "rows_a_chunk": args.size, "seconds_a_chunk": times,
              "median_ms_a_chunk": {k: 1000 * statistics.median(v) for k, v in times.items()},
              "ratio_this_over_baseline": {"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios)}}
    for k, v in result["median_ms_a_chunk"].items():
        print(f"{k:>14}: {v:.3f} ms a chunk of {args.size} new rows")
    print(f"this checkout / baseline, pair by pair: median {statistics.median(ratios):.2f} "
          f"({min(ratios):.2f} to {max(ratios):.2f})")
    print(save_json(result, "row_cache"))


if __name__ == "__main__":
    main()
