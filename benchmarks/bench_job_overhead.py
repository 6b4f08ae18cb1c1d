"""What the resumable job costs over scoring in memory: `score_candidates` (fingerprint of every item, chunk files
written, what `repro score` does without --work-dir, in a temporary folder) against `scorer.score` on the same rows,
alternated, with one loaded stand-in so that the job's own work is as large a share as it can be.

    python benchmarks/bench_job_overhead.py --input ../shared/data/ultrafeedback_sample/train_prefs_1000.jsonl
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from saved import save_json

from repro.cli.measure import machine_info
from repro.cli.score import read_rows
from repro.construct.scoring import score_candidates
from repro.parameters import ConstructParams
from repro.scorers import load_scorer


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--input", type=Path, required=True, help="jsonl of {prompt, candidates} or H4 rows")
    ap.add_argument("--rows", type=int, default=1000)
    ap.add_argument("--model", default="builtin:tiny-pairrm")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    rows = read_rows(args.input, limit=args.rows)
    prompts, candidates = [r["prompt"] for r in rows], [r["candidates"] for r in rows]
    d = ConstructParams()
    settings = dict(model=args.model, backend=d.scorer_backend, kind=d.scorer_kind, device="cpu", dtype="fp32",
                    batch_tokens=d.batch_tokens, chunk_size=d.chunk_size, num_processes=1, progress=False)
    scorer = load_scorer(args.model, kind="pairrm", device="cpu", dtype="fp32")  # loaded once: its load is not timed
    times: dict[str, list[float]] = {"in memory (scorer.score)": [], "job (score_candidates, temp work dir)": []}
    for _ in range(args.repeats):  # alternated, so that a change in the machine's load hits both
        start = time.perf_counter()
        direct = scorer.score(prompts, candidates, batch_tokens=d.batch_tokens)
        times["in memory (scorer.score)"].append(time.perf_counter() - start)
        with tempfile.TemporaryDirectory() as work:
            start = time.perf_counter()
            result = score_candidates(prompts, candidates, work_dir=Path(work) / "w", **settings)
            # the job loads its own scorer: its load is taken out, as it is for the direct call
            times["job (score_candidates, temp work dir)"].append(
                time.perf_counter() - start - result.info["load_seconds"])
        assert [list(map(float, s)) for s in direct] == result.scores, "the two paths must give the same scores"
    medians = {k: statistics.median(v) for k, v in times.items()}
    base = medians["in memory (scorer.score)"]
    for name, seconds in medians.items():
        print(f"{name:40s} median {seconds:7.3f} s  ({seconds / base:.2f}x in memory)")
    saved = save_json({"command": "python benchmarks/bench_job_overhead.py " + " ".join(sys.argv[1:]),
                       "machine": machine_info("cpu"), "rows": len(rows), "model": args.model,
                       "chunk_size": d.chunk_size, "seconds": times, "median_seconds": medians,
                       "ratio_job_to_memory": medians["job (score_candidates, temp work dir)"] / base}, "job_overhead")
    print(f"saved {saved}")


if __name__ == "__main__":
    main()
