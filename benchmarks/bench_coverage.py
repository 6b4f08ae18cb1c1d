"""How often a 95% percentile-bootstrap interval of the mean (as repro.analysis.stats.bootstrap_intervals draws it:
rows resampled with replacement, np.quantile at 2.5% and 97.5%) covers the true mean of normal data, by rows.

    python benchmarks/bench_coverage.py           (20,000 datasets x 1,000 resamples per size: about 30 s of CPU)

The card and 02_analyze quote these figures below stats.BOOTSTRAP_FEW_ROWS rows (their `few_rows` caveat).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from saved import save_json  # noqa: E402


def coverage(rows: int, datasets: int, resamples: int, rng: np.random.Generator, block: int = 200) -> float:
    """The fraction of `datasets` standard-normal samples of `rows` whose percentile interval holds 0."""
    hits = 0
    for start in range(0, datasets, block):
        k = min(block, datasets - start)
        x = rng.standard_normal((k, 1, rows))
        drawn = rng.integers(0, rows, size=(k, resamples, rows), dtype=np.int16)
        means = np.take_along_axis(np.broadcast_to(x, drawn.shape), drawn, axis=2).mean(axis=2)
        low, high = np.quantile(means, [0.025, 0.975], axis=1)
        hits += int(((low <= 0) & (0 <= high)).sum())
    return hits / datasets


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", default="3,5,10,20,30")
    ap.add_argument("--datasets", type=int, default=20_000, help="simulated normal samples per size")
    ap.add_argument("--resamples", type=int, default=1_000, help="bootstrap resamples per sample")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    out = {"datasets": args.datasets, "resamples": args.resamples, "seed": args.seed, "level": 0.95,
           "method": "percentile bootstrap of the mean, standard normal data", "coverage": {}}
    start = time.process_time()
    for n in (int(v) for v in args.rows.split(",")):
        c = out["coverage"][str(n)] = coverage(n, args.datasets, args.resamples, rng)
        se = (c * (1 - c) / args.datasets) ** 0.5
        print(f"{n:>3} rows: covers the mean in {c:.1%} (Monte Carlo s.e. {se:.1%})", flush=True)
    out["cpu_seconds"] = round(time.process_time() - start, 1)
    print(f"results: {save_json(out, 'coverage')} ({out['cpu_seconds']} s of CPU)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
