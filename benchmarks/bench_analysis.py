"""Benchmark: the whole analysis stage (notebooks/02_analyze.ipynb's `analysis.analyze`) on a synthetic dataset the
size of UltraFeedback's train_prefs (61135 rows), with 1000 bootstrap resamples; time and peak memory.

    .venv/bin/python benchmarks/bench_analysis.py [--rows 61135] [--resamples 1000] [--kinds ratings logits]

Two datasets with the seed's columns and the same responses (realistic lengths) are built first, not timed:
`ratings` has H4-like 1-10 GPT-4 ratings (the bootstrap resamples category counts), `logits` has real-valued
PairRM-like scores (the bootstrap resamples rows in blocks). Each analysis runs in a fresh process, so its peak
memory (VmHWM) is its own. Side by side in that process: the project's bootstrap against scipy.stats.bootstrap
(percentile, batched) on the same three series. The figures are written to benchmarks/results/analysis-cpu-*.json
(`--output-dir`); benchmarks/RESULTS.md (section "Analysis") quotes that file.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np


def build_datasets(root: Path, rows: int, kinds: list[str], seed: int = 0) -> dict[str, Path]:
    """Seeded datasets in the seed's schema, one run directory per score kind, written as 01_construct writes them."""
    import datasets
    import pyarrow as pa

    from repro.dataset_io import SEED_FEATURES, write_split

    rng = np.random.default_rng(seed)
    words = np.array("the a of to and in is it that for with as on be this by are or from an at which model answer "
                     "step first then result value function return data example code because however".split())
    corpus = " ".join(rng.choice(words, size=400_000))

    def responses(median_chars: float) -> list[str]:
        lengths = np.clip(rng.lognormal(np.log(median_chars), 0.8, rows), 5, 8000).astype(int)
        starts = rng.integers(0, len(corpus) - 8001, rows)
        return [corpus[s:s + n] for s, n in zip(starts, lengths)]

    prompts = [f"Question {i}: " + corpus[s:s + 200] for i, s in enumerate(rng.integers(0, len(corpus) - 201, rows))]
    chosen_text, rejected_text = responses(950.0), responses(820.0)
    rating_chosen = np.clip(np.round(rng.normal(7.8, 1.2, rows) * 2) / 2, 1, 10)
    scores = {
        "ratings": (rating_chosen, np.clip(np.minimum(rating_chosen, np.round(rng.normal(5.9, 2.0, rows) * 2) / 2), 1, 10)),
        "logits": (np.abs(rng.normal(0.9, 0.7, rows)), -np.abs(rng.normal(0.9, 0.7, rows))),
    }

    def conversation(texts: list[str]) -> pa.Array:
        return pa.array([[{"content": p, "role": "user"}, {"content": t, "role": "assistant"}]
                         for p, t in zip(prompts, texts)])

    chosen_messages, rejected_messages = conversation(chosen_text), conversation(rejected_text)
    out = {}
    for kind in kinds:
        chosen, rejected = scores[kind]
        table = pa.table({
            "prompt": prompts, "prompt_id": [f"{i:064x}" for i in range(rows)], "messages": chosen_messages,
            "score_chosen": chosen, "score_rejected": rejected, "reference_response": [""] * rows,
            "chosen": chosen_messages, "rejected": rejected_messages,
        }).cast(SEED_FEATURES.arrow_schema)
        run_dir = root / kind
        write_split(datasets.Dataset(table), run_dir / "dataset")
        (run_dir / "manifest.json").write_text("{}\n")
        out[kind] = run_dir
    return out


def _peak_rss_mb() -> float:
    # VmHWM restarts at exec (ru_maxrss would carry over the parent's high-water mark)
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child(run_dir: Path, resamples: int) -> dict:
    """Run inside a fresh process: the whole analysis, then the bootstrap side by side with scipy's."""
    from scipy import stats as sps

    from repro.analysis import report as analysis, stats
    from repro.parameters import AnalyzeParams

    rss_imports = _peak_rss_mb()
    cpu0, t0 = time.process_time(), time.perf_counter()
    result = analysis.analyze(AnalyzeParams(run_dir=str(run_dir), bootstrap_resamples=resamples))
    total, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    rss_peak = _peak_rss_mb()
    stages = json.loads((run_dir / "manifest.json").read_text())["stages"]["analyze"]

    chosen = result.metrics["score_chosen"]
    data = analysis.load(AnalyzeParams(run_dir=str(run_dir)))
    series = {"score_chosen": data.score_chosen, "score_rejected": data.score_rejected, "margin": data.margin}
    t0 = time.perf_counter()
    ours = stats.bootstrap_intervals(series, resamples, seed=0)
    ours_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    for x in series.values():
        for statistic in (np.mean, np.median):
            sps.bootstrap((x,), statistic, n_resamples=resamples, method="percentile", batch=64,
                          rng=np.random.default_rng(0), axis=-1)
    scipy_s = time.perf_counter() - t0
    return {"scale": result.metrics["scale"]["kind"], "rows": result.metrics["n"], "resamples": resamples,
            "analyze_seconds": round(total, 2), "analyze_cpu_seconds": round(cpu, 2),
            "stage_seconds": stages["seconds"], "rss_after_imports_mb": round(rss_imports),
            "peak_rss_mb": round(rss_peak), "bootstrap_seconds": round(ours_s, 2),
            "scipy_bootstrap_seconds": round(scipy_s, 2), "scipy_over_ours": round(scipy_s / ours_s, 1),
            "score_chosen_mean": chosen["mean"], "score_chosen_mean_ci95": ours["score_chosen"]["mean_ci95"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=61135)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--kinds", nargs="+", choices=["ratings", "logits"], default=["ratings", "logits"])
    parser.add_argument("--output-dir", type=Path, default=Path(__file__).parent / "results",
                        help="where the JSON result goes (default: benchmarks/results)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(Path(args.child), args.resamples)))
        return
    from repro.cli.measure import machine_info

    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}")
    results = {"when": datetime.now(timezone.utc).isoformat(timespec="seconds"),
               "command": "python benchmarks/bench_analysis.py " + " ".join(sys.argv[1:]),
               "machine": machine_info("cpu"), "rows": args.rows, "resamples": args.resamples, "kinds": {}}
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        runs = build_datasets(Path(tmp), args.rows, args.kinds)
        print(f"built {args.rows} synthetic rows x {len(runs)} score kinds in {time.perf_counter() - t0:.1f}s (not timed)")
        for kind, run_dir in runs.items():
            load = os.getloadavg()[0]
            proc = subprocess.run([sys.executable, __file__, "--child", str(run_dir), "--resamples", str(args.resamples)],
                                  capture_output=True, text=True, check=True)
            out = json.loads(proc.stdout.strip().splitlines()[-1])
            results["kinds"][kind] = {"load_average_before": round(load, 2), **out}
            print(f"\n[{kind}] load average before: {load:.1f}\n" + json.dumps(out, indent=2))
            print(f"[{kind}] whole analysis: {out['analyze_seconds']} s wall ({out['analyze_cpu_seconds']} s CPU), peak RSS {out['peak_rss_mb']} MB (after "
                  f"imports {out['rss_after_imports_mb']} MB); bootstrap alone {out['bootstrap_seconds']} s vs "
                  f"scipy.stats.bootstrap {out['scipy_bootstrap_seconds']} s (scipy/ours = {out['scipy_over_ours']}x)")
    results["machine"]["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    args.output_dir.mkdir(parents=True, exist_ok=True)
    out_path = args.output_dir / f"analysis-cpu-{datetime.now().strftime('%Y%m%d-%H%M%S')}.json"
    out_path.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"results: {out_path}")


if __name__ == "__main__":
    main()
