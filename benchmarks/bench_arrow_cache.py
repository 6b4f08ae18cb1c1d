"""Benchmark: datasets' Arrow cache of a run's dataset that is written again and again (each re-run of
01_construct), read as 02_analyze and 03_card read it: `datasets.Dataset.from_parquet` into the shared cache (before)
against `repro.sources.read_parquet` (its own cache folder, earlier copies removed), side by side in one process.

    .venv/bin/python benchmarks/bench_arrow_cache.py [--rows 5183] [--rewrites 6] [--sample PATH]

The dataset: `--rows` seed-format rows (UltraFeedback's sample, ../shared/data/ultrafeedback_sample/, repeated with
new prompt ids), written `--rewrites` times with one score changed each time. After each write both ways read it,
who goes first alternating, each with its own empty cache at the start. Printed and saved
(benchmarks/results/arrow_cache-*.json): the cache's bytes after each write and the median read time of each way.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from saved import add_sample, save_json



def folder_bytes(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=5183)  # part2_mini_1's rows
    parser.add_argument("--rewrites", type=int, default=6)
    add_sample(parser)
    args = parser.parse_args(argv)
    os.environ["HF_HUB_OFFLINE"] = "1"
    import datasets

    from repro import sources
    from repro.dataset_io import SEED_FEATURES, write_split

    datasets.disable_progress_bars()
    sample = [json.loads(line) for line in args.sample.read_text(encoding="utf-8").splitlines() if line.strip()]
    rows = [{name: row.get(name) for name in SEED_FEATURES} | {"prompt_id": str(k), "score_chosen": 1.0,
                                                                "score_rejected": 0.0}
            for k, row in enumerate(sample[k % len(sample)] for k in range(args.rows))]
    ways = {"before": lambda files: datasets.Dataset.from_parquet(files), "after": sources.read_parquet}
    times: dict[str, list[float]] = {way: [] for way in ways}
    sizes: dict[str, list[int]] = {way: [] for way in ways}
    with tempfile.TemporaryDirectory() as tmp:
        caches = {way: Path(tmp, f"cache-{way}") for way in ways}
        for k in range(args.rewrites):
            rows[0]["score_chosen"] = float(k)
            write_split(datasets.Dataset.from_list(rows, features=SEED_FEATURES), Path(tmp, "dataset"))
            files = [str(f) for f in sorted(Path(tmp, "dataset").rglob("*.parquet"))]
            for way in sorted(ways, reverse=k % 2 == 1):
                datasets.config.HF_DATASETS_CACHE = str(caches[way])
                start = time.perf_counter()
                ds = ways[way](files)
                times[way].append(time.perf_counter() - start)
                assert ds[0]["score_chosen"] == float(k) and len(ds) == args.rows
                sizes[way].append(folder_bytes(caches[way]))
        parquet_bytes = sum(Path(f).stat().st_size for f in files)
    result = {"command": "python benchmarks/bench_arrow_cache.py " + " ".join(sys.argv[1:]), "rows": args.rows,
              "rewrites": args.rewrites, "parquet_bytes": parquet_bytes, "cache_bytes_after_each_write": sizes,
              "read_s_median": {way: round(statistics.median(t), 4) for way, t in times.items()},
              "cache_bytes_ratio_before_after": round(sizes["before"][-1] / sizes["after"][-1], 2),
              "read_time_ratio_after_before": round(statistics.median(times["after"]) /
                                                    statistics.median(times["before"]), 3)}
    print(json.dumps(result, indent=1))
    print(f"saved {save_json(result, 'arrow_cache')}")


if __name__ == "__main__":
    main()
