"""Benchmark: a recipe format read back as the seed's columns (`repro.exporters.seed_view`, which 02_analyze,
04_compare, 05_family and `repro.formats.to_trl` use), on `--rows` SPPO-format rows of 5 candidates with texts of
realistic length; then `to_trl` on them.

    PYTHONPATH=src .venv/bin/python benchmarks/bench_recipe_view.py [--rows 20000] [--format sppo]

The rows are built first, not timed (exporters.export_rows over seed rows, as 01_construct writes them). Prints the
seconds of each step and writes JSON into benchmarks/results/. Run it under `farm-bench --vs` against another
checkout's src/ for a ratio measured side by side.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from repro.construct.pairs import build_row
from repro.exporters import export_rows, seed_view
from repro.formats import to_trl

WORDS = "the model answers the question with a short explanation and an example of what it means".split()


def rows_of(n: int, rng: np.random.Generator) -> tuple[list[dict], list[tuple[int, int]]]:
    rows, picks = [], []
    for i in range(n):
        prompt = f"Question {i}: " + " ".join(rng.choice(WORDS, 30))
        candidates = [" ".join(rng.choice(WORDS, int(rng.integers(50, 250)))) + f" ({i}.{k})" for k in range(5)]
        scores = rng.normal(0.0, 1.0, 5)
        scores -= scores.mean()  # PairRM's sum to 0
        pick = (int(np.argmax(scores)), int(np.argmin(scores)))
        rows.append(build_row({"prompt_id": f"id-{i}"}, prompt, candidates, scores.tolist(), messages="chosen",
                              keep_all_candidates=True, pick=pick))
        picks.append(pick)
    return rows, picks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=20000)
    parser.add_argument("--format", default="sppo", choices=["sppo", "snorkel", "rlhflow"])
    args = parser.parse_args()
    rows, picks = rows_of(args.rows, np.random.default_rng(0))
    ds = export_rows(args.format, rows, picks, keep_all_candidates=True)
    timings = {}
    start = time.perf_counter()
    view = seed_view(ds)
    timings["seed_view"] = time.perf_counter() - start
    start = time.perf_counter()
    trl = to_trl(ds)
    timings["to_trl"] = time.perf_counter() - start
    result = {"rows": args.rows, "format": args.format, "seconds": {k: round(v, 3) for k, v in timings.items()},
              "seed_view_columns": view.column_names, "to_trl_rows": len(trl)}
    print(json.dumps(result))
    out = Path(__file__).parent / "results" / f"recipe-view-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
