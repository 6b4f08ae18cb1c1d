"""Benchmark: the whole comparison stage (notebooks/04_compare.ipynb's `compare.compare`) on two datasets the size of
UltraFeedback's train_prefs, with slice inference against a 61135-row source and 1000 bootstrap resamples.

    .venv/bin/python benchmarks/bench_compare.py [--rows 61135] [--resamples 1000]

Built first, not timed (with bench_analysis's synthetic rows: seed columns, responses of realistic length):
- the candidate: `--rows` rows with PairRM-like scores;
- the reference, as four minis of a family (four parquet folders, given together): the same rows less 400 dropped
  from the middle, with 3 % of pairs swapped, 1 % of chosen texts changed and 5 % of scores jittered;
- the source: every row's prompt and prompt_id.
In a fresh process, side by side: the stage without and with slice inference (each loads, aligns, compares,
bootstraps, draws 3 figures, writes 5 tables and compare.json). Wall and CPU seconds, peak memory; JSON into
benchmarks/results/. Results are cited in benchmarks/RESULTS.md (section "Comparison").
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_analysis import _peak_rss_mb, build_datasets  # noqa: E402  (the same synthetic rows)
from saved import save_json  # noqa: E402  (benchmarks/saved.py, beside this script)

DROP_ROWS = 400  # source rows left out of the reference's minis, from the middle of the part


def build(root: Path, rows: int) -> dict[str, object]:
    """The candidate run, the reference's four minis and the source, with the known differences."""
    import datasets
    import pyarrow as pa
    import pyarrow.parquet as pq

    from repro.dataset_io import SEED_FEATURES, write_split

    candidate = build_datasets(root, rows, ["logits"])["logits"]
    table = datasets.load_dataset(str(candidate / "dataset"), split="train_prefs").with_format("arrow")[:]
    pq.write_table(table.select(["prompt", "prompt_id"]), root / "source.parquet")
    rng = np.random.default_rng(1)
    ref = table.to_pydict()
    n = table.num_rows
    swap = rng.random(n) < 0.03
    edit = (rng.random(n) < 0.01) & ~swap
    jitter = (rng.random(n) < 0.05) & ~swap & ~edit
    for i in np.flatnonzero(swap):
        ref["chosen"][i], ref["rejected"][i] = ref["rejected"][i], ref["chosen"][i]
        ref["score_chosen"][i], ref["score_rejected"][i] = ref["score_rejected"][i], ref["score_chosen"][i]
    for i in np.flatnonzero(edit):
        ref["chosen"][i] = [ref["chosen"][i][0], {"content": ref["chosen"][i][1]["content"] + " (edited)",
                                                   "role": "assistant"}]
    for i in np.flatnonzero(jitter):
        ref["score_chosen"][i] += float(rng.normal(0, 0.01))
    dropped = (n // 2, n // 2 + DROP_ROWS)
    kept = np.r_[np.arange(0, dropped[0]), np.arange(dropped[1], n)]
    size = kept.size // 4
    minis = []
    reference = pa.table(ref).cast(SEED_FEATURES.arrow_schema)
    for k in range(4):
        part = kept[k * size: kept.size if k == 3 else (k + 1) * size]
        folder = root / f"mini_{k}"
        write_split(datasets.Dataset(reference.take(pa.array(part))), folder)
        minis.append(str(folder))
    return {"candidate": str(candidate), "minis": minis, "source": str(root / "source.parquet"),
            "known": {"swapped": int(swap[kept].sum()), "edited": int(edit[kept].sum()), "rows": n, "dropped": list(dropped),
                      "reference_rows": int(kept.size)}}


def child(spec: dict, resamples: int) -> dict:
    """In a fresh process: the stage without, then with, slice inference."""
    from repro import compare
    from repro.parameters import CompareParams

    rss_imports = _peak_rss_mb()
    out = {}
    for label, source in (("without_slice", None), ("with_slice", spec["source"])):
        p = CompareParams(run_dir=str(Path(spec["candidate"]) / label), reference=spec["minis"],
                          candidate=spec["candidate"], compare_source=source, bootstrap_resamples=resamples)
        cpu0, t0 = time.process_time(), time.perf_counter()
        result = compare.compare(p).result
        out[label] = {"seconds": round(time.perf_counter() - t0, 2), "cpu_seconds": round(time.process_time() - cpu0, 2),
                      "aligned": result["alignment"]["aligned"], "categories": result["pairs"]["categories"],
                      "pearson": result["scores"]["scores"]["pearson"]}
        if source:
            out[label]["dropped_rows_of_part"] = result["slice"]["dropped_rows_of_part"]
            out[label]["solutions_first"] = [g["solutions"][:1] for g in result["slice"]["groups"]]
    out["slice_inference_extra_seconds"] = round(out["with_slice"]["seconds"] - out["without_slice"]["seconds"], 2)
    out["rss_after_imports_mb"], out["peak_rss_mb"] = round(rss_imports), round(_peak_rss_mb())
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=61135)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(json.loads(Path(args.child).read_text()), args.resamples)))
        return
    machine = f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
    print(f"machine: {machine}")
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        spec = build(Path(tmp), args.rows)
        print(f"built the candidate ({args.rows} rows), 4 reference minis ({spec['known']['reference_rows']} rows) "
              f"and the source in {time.perf_counter() - t0:.1f}s (not timed)")
        (Path(tmp) / "spec.json").write_text(json.dumps(spec))
        load = os.getloadavg()[0]
        proc = subprocess.run([sys.executable, __file__, "--child", str(Path(tmp) / "spec.json"), "--resamples",
                               str(args.resamples)], capture_output=True, text=True, check=True)
        out = json.loads(proc.stdout.strip().splitlines()[-1])
    out.update(machine=machine, rows=args.rows, resamples=args.resamples, load_average_before=round(load, 1),
               known=spec["known"], command=" ".join([Path(sys.executable).name, *sys.argv]))
    print(json.dumps(out, indent=2))
    w, s = out["without_slice"], out["with_slice"]
    print(f"comparison of two {args.rows}-row datasets: {w['seconds']} s wall ({w['cpu_seconds']} s CPU); with slice "
          f"inference against the source: {s['seconds']} s wall ({s['cpu_seconds']} s CPU); aim: under 30 s")
    print(f"saved {save_json(out, 'bench-compare')}")


if __name__ == "__main__":
    main()
