"""Benchmark: what checking that a jsonl source is UTF-8 text costs its load (`repro.sources.load_source`).

    .venv/bin/python benchmarks/bench_source_load.py [--rows 20000] [--sample PATH]

`datasets.Dataset.from_json` takes bytes that are not UTF-8 into its strings; the loader then validates the loaded
Arrow table (`Table.validate(full=True)`) and, only when that fails, reads the file line by line to name the line.
The file: `--rows` rows of the sample jsonl (UltraFeedback's, ../shared/data/ultrafeedback_sample/), repeated with
new prompt ids, built first and not timed. Each load has a fresh datasets cache; median of 3. Side by side: the load
and the validation alone. Written to benchmarks/results/source_load-*.json.
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



def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20000)
    add_sample(parser)
    args = parser.parse_args(argv)
    os.environ["HF_HUB_OFFLINE"] = "1"
    import datasets

    from repro import sources

    rows = [json.loads(line) for line in args.sample.read_text(encoding="utf-8").splitlines() if line.strip()]
    loads, checks = [], []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "source.jsonl"
        with path.open("w", encoding="utf-8") as f:
            for k in range(args.rows):
                row = dict(rows[k % len(rows)], prompt_id=f"{k}")
                f.write(json.dumps(row) + "\n")
        datasets.disable_caching()
        for _ in range(3):
            with tempfile.TemporaryDirectory() as cache:
                datasets.config.HF_DATASETS_CACHE = cache
                start = time.perf_counter()
                ds = sources.load_source(str(path), "train", "source")
                loads.append(time.perf_counter() - start)
                start = time.perf_counter()
                ds.data.table.validate(full=True)
                checks.append(time.perf_counter() - start)
        size = path.stat().st_size
    load, check = statistics.median(loads), statistics.median(checks)
    result = {"command": "python benchmarks/bench_source_load.py " + " ".join(sys.argv[1:]), "rows": args.rows,
              "bytes": size, "load_s": round(load, 3), "utf8_validation_s": round(check, 4),
              "validation_share_of_load": round(check / load, 4)}
    print(json.dumps(result))
    print(f"saved {save_json(result, 'source_load')}")


if __name__ == "__main__":
    main()
