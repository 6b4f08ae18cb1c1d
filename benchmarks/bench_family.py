"""Benchmark: the demo family of four minis (params/demo_family.yaml) against four separate runs of the same minis,
side by side in one run: rows scored, rows generated, rows taken from the row cache, and wall time. Also a sweep
over two reward models on generated candidates (params/demo_generate.yaml's stand-ins): as a family sharing the
generation through the cache vs two separate runs; and the scorer's batch tolerance (how far a row's scores move
when other rows share its batches), measured on the demo's 40 rows.

    .venv/bin/python benchmarks/bench_family.py [--limit-generate 8]

Each `repro run` is its own process, as a user starts it; every row cache is fresh (a temporary folder) unless a
step says it reuses one. JSON into benchmarks/results/; cited in benchmarks/RESULTS.md ("Families of runs").
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
from datetime import datetime, timezone
from pathlib import Path

from saved import save_json  # benchmarks/saved.py, beside this script

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "params" / "demo.yaml"
DEMO_FAMILY = ROOT / "params" / "demo_family.yaml"
DEMO_GENERATE = ROOT / "params" / "demo_generate.yaml"
SHARED = ["--set", "notebooks=[01_construct, 02_analyze]", "--set", "bootstrap_resamples=200"]


def repro_run(args: list[str], cache: Path) -> float:
    """Wall seconds of one `repro run`, in its own process, with `cache` as the row cache."""
    env = {**os.environ, "REPRO_ROW_CACHE": str(cache)}
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "repro.cli", "run", *args], cwd=ROOT, capture_output=True, text=True,
                          env=env)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"repro run {' '.join(args)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return seconds


def rows(run_dir: Path) -> dict[str, int]:
    """Rows scored and generated in this run, and rows its stages took from the cache (manifest.json)."""
    m = json.loads((run_dir / "manifest.json").read_text())
    out = {"scored": 0, "scored_from_cache": 0, "generated": 0, "generated_from_cache": 0}
    for stage, s in m.get("stages", {}).items():
        if stage == "score" or stage.startswith("score_"):
            cache = s.get("cache")
            out["scored"] += cache["rows_computed"] if cache else s["prompts_computed"]
            out["scored_from_cache"] += cache["rows_from_cache"] if cache else 0
    gen = m.get("generation")
    if gen:
        cache = gen.get("cache")
        out["generated"] += cache["rows_computed"] if cache else gen["prompts_generated"] - gen["prompts_resumed"]
        out["generated_from_cache"] += cache["rows_from_cache"] if cache else 0
    return out


def total(dirs: list[Path], since: dict[Path, str] | None = None) -> dict[str, int]:
    """Rows of these runs; with `since` (each run's start before), only runs started again count."""
    sums: dict[str, int] = {"runs": 0}
    for d in dirs:
        if since is not None and started(d) == since[d]:
            continue  # not run again: it computed nothing this time
        sums["runs"] += 1
        for k, v in rows(d).items():
            sums[k] = sums.get(k, 0) + v
    return sums


def started(run_dir: Path) -> str:
    return json.loads((run_dir / "manifest.json").read_text())["started"]


def minis(tmp: Path) -> dict[str, object]:
    """Four separate runs of the demo's minis vs the family; then each again (a second run)."""
    out: dict[str, object] = {}
    separate = [tmp / "separate" / f"mini_{i}" for i in range(4)]
    cache_a = tmp / "cache-separate"
    t = [repro_run([str(DEMO), "--out", str(d), "--set", "mini_count=4", "--set", f"mini_index={i}",
                    "--set", "cache=false", *SHARED], cache_a) for i, d in enumerate(separate)]
    out["four_separate_runs"] = {"wall_s": round(sum(t), 1), "per_run_s": [round(x, 1) for x in t], **total(separate),
                                 "note": "cache: false, as every run was before the row cache"}
    cache_b = tmp / "cache-family"
    family = tmp / "family"
    t_family = repro_run([str(DEMO_FAMILY), "--out", str(family)], cache_b)
    members = [family / f"mini_{i}" for i in range(4)]
    out["family"] = {"wall_s": round(t_family, 1), **total(members), "includes": "05_family over the four"}
    jobs = tmp / "family-jobs2"
    t_jobs = repro_run([str(DEMO_FAMILY), "--out", str(jobs), "--jobs", "2"], tmp / "cache-jobs2")
    out["family_jobs_2"] = {"wall_s": round(t_jobs, 1), **total([jobs / f"mini_{i}" for i in range(4)]),
                            "includes": "05_family over the four"}
    before = {m: started(m) for m in members}
    t_again = repro_run([str(DEMO_FAMILY), "--out", str(family)], cache_b)
    out["family_second_run"] = {"wall_s": round(t_again, 1), **total(members, since=before),
                                "note": "members complete with the same fingerprint are not run again; 05_family runs"}
    again = [tmp / "separate-again" / f"mini_{i}" for i in range(4)]
    t = [repro_run([str(DEMO), "--out", str(d), "--set", "mini_count=4", "--set", f"mini_index={i}",
                    "--set", "cache=false", *SHARED], cache_a) for i, d in enumerate(again)]
    out["four_separate_runs_again"] = {"wall_s": round(sum(t), 1), "per_run_s": [round(x, 1) for x in t],
                                       **total(again)}
    # the members' datasets equal the separate runs' (rows computed in the same batches)
    shard = "dataset/data/train_prefs-00000-of-00001.parquet"
    out["members_equal_separate_runs_bytes"] = all(
        (m / shard).read_bytes() == (s / shard).read_bytes() for m, s in zip(members, separate))
    return out


def scorer_sweep(tmp: Path, limit: int) -> dict[str, object]:
    """Two reward models over the same generated candidates: two separate runs vs a family of two members."""
    base = [str(DEMO_GENERATE), "--set", f"limit={limit}", "--set", "notebooks=[01_construct]"]
    models = ["builtin:tiny-pairrm", "builtin:tiny-reward-llama"]
    separate = [tmp / "sweep-separate" / f"m{i}" for i in range(2)]
    t = [repro_run([*base, "--out", str(d), "--set", f"scorer_model={m}", "--set", "cache=false"], tmp / "c1")
         for d, m in zip(separate, models)]
    out: dict[str, object] = {"two_separate_runs": {"wall_s": round(sum(t), 1), **total(separate)}}
    family = tmp / "sweep-family"
    t_family = repro_run([*base, "--out", str(family), "--grid", f"scorer_model={','.join(models)}"], tmp / "c2")
    out["family_of_two"] = {"wall_s": round(t_family, 1),
                            **total(sorted(p.parent for p in family.glob("*/manifest.json"))),
                            "includes": "05_family over the two"}
    return out


def batch_tolerance() -> dict[str, object]:
    """How far the stand-in's scores of a row move with the rows that share its batches (the demo's 40 rows)."""
    import numpy as np
    import torch

    from repro.parameters import ConstructParams, load_params_file
    from repro.scorers import load_scorer
    from repro.sources import load_source

    p = ConstructParams(**{k: v for k, v in load_params_file(DEMO).items() if k in ConstructParams.model_fields})
    ds = load_source(p.source, p.source_split).to_list()
    prompts = [r["prompt"] for r in ds]
    cands = [[r[c] for c in p.candidate_columns if r.get(c)] for r in ds]
    scorer = load_scorer(p.scorer_model, device=p.device, dtype=p.dtype)

    def score(groups: list[range]) -> np.ndarray:
        out = []
        for g in groups:
            out += [np.asarray(s) for s in scorer.score([prompts[i] for i in g], [cands[i] for i in g],
                                                        batch_tokens=p.batch_tokens)]
        return out

    n = len(prompts)
    ways = {"one run of 40 in chunks of 16": [range(i, min(n, i + p.chunk_size)) for i in range(0, n, p.chunk_size)],
            "four minis of 10": [range(i, i + n // 4) for i in range(0, n, n // 4)],
            "every row alone": [range(i, i + 1) for i in range(n)]}
    scores = {k: score(g) for k, g in ways.items()}
    ref = scores["one run of 40 in chunks of 16"]
    diffs = {k: float(max(np.max(np.abs(a - b)) for a, b in zip(v, ref))) for k, v in scores.items()}
    return {"scorer": p.scorer_model, "dtype": p.dtype, "batch_tokens": p.batch_tokens,
            "torch_threads": torch.get_num_threads(),
            "max_abs_difference_vs_one_run": diffs,
            "mean_abs_score": float(np.mean([np.mean(np.abs(s)) for s in ref])),
            "same_chosen_and_rejected_everywhere": all(
                int(np.argmax(a)) == int(np.argmax(b)) and int(np.argmin(a)) == int(np.argmin(b))
                for v in scores.values() for a, b in zip(v, ref))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit-generate", type=int, default=8, help="prompts of the reward-model sweep")
    args = parser.parse_args()
    out: dict[str, object] = {
        "benchmark": "family", "when": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "python": platform.python_version()},
        "load_average_before": os.getloadavg(),
        "command": "PYTHONPATH=src .venv/bin/python benchmarks/bench_family.py " + " ".join(sys.argv[1:]),
    }
    with tempfile.TemporaryDirectory(prefix="bench-family-") as tmp:
        out["minis"] = minis(Path(tmp))
        out["scorer_sweep"] = scorer_sweep(Path(tmp), args.limit_generate)
    out["batch_tolerance"] = batch_tolerance()
    out["load_average_after"] = os.getloadavg()
    print(json.dumps(out, indent=2))
    print(f"-> {save_json(out, 'family-cpu')}")


if __name__ == "__main__":
    main()
