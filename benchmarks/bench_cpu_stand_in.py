"""Benchmark: scoring on a CPU with the built-in stand-in PairRM (`builtin:tiny-pairrm`), as a user without a GPU
runs 01_construct on real rows: the engine's position indices built for every forward (as before) against built
once per model for the longest batch (`PairRMModel.batch_context`), at the budgets 2048 and 16384 tokens.

    .venv/bin/python benchmarks/bench_cpu_stand_in.py [--prompts 40] [--rounds 2] [--sample PATH]

Rows: every 25th row of ../shared/data/ultrafeedback_sample/train_prefs_1000.jsonl, its chosen and rejected answers
as the two candidates (`include_original_pair: true`). Contenders run one after another in rotating order, `rounds`
times each, in one process; their scores must be bit-identical at each budget. The JSON goes to benchmarks/results/.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

import numpy as np
import torch

from repro.scorers import load_scorer
from repro.sources import iter_jsonl
from saved import add_sample, save_json



def rows(sample: Path, n: int) -> tuple[list[str], list[list[str]]]:
    picked = [r for i, (_, r) in enumerate(iter_jsonl(sample)) if i % 25 == 0][:n]
    return [r["prompt"] for r in picked], [[r["chosen"][-1]["content"], r["rejected"][-1]["content"]] for r in picked]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=2)
    add_sample(parser)
    args = parser.parse_args()
    prompts, candidates = rows(args.sample, args.prompts)
    scorer = load_scorer("builtin:tiny-pairrm", device="cpu", dtype="fp32")
    model, cached = scorer.model, type(scorer.model).batch_context

    def every_forward(self, mask):  # the rule before: the indices of each batch built for it
        self.positions = {}
        return cached(self, mask)

    scorer.score(prompts[:2], candidates[:2], batch_tokens=2048)  # warm-up: the first forward pays for allocations
    contenders = {f"{rule} {budget}": (rule, budget) for budget in (2048, 16384) for rule in ("per_forward", "cached")}
    seconds = {name: [] for name in contenders}
    scores = {}
    for k in range(args.rounds * len(contenders)):
        names = list(contenders)
        name = names[(k + k // len(names)) % len(names)]
        rule, budget = contenders[name]
        type(model).batch_context = every_forward if rule == "per_forward" else cached
        model.positions = {}
        start = time.perf_counter()
        got = scorer.score(prompts, candidates, batch_tokens=budget)
        seconds[name].append(time.perf_counter() - start)
        scores.setdefault(name, got)
    type(model).batch_context = cached
    for budget in (2048, 16384):
        assert all(np.array_equal(a, b) for a, b in zip(scores[f"cached {budget}"], scores[f"per_forward {budget}"]))
    best = {name: min(times) for name, times in seconds.items()}
    result = {"machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs",
              "torch_threads": torch.get_num_threads(), "load_avg": os.getloadavg(), "prompts": len(prompts),
              "rounds": args.rounds, "seconds": seconds, "best_seconds": best,
              "speedup_cached_vs_per_forward": {b: best[f"per_forward {b}"] / best[f"cached {b}"] for b in (2048, 16384)},
              "speedup_2048_vs_16384_cached": best["cached 16384"] / best["cached 2048"],
              "scores_bit_identical": True}
    for name, value in best.items():
        print(f"{name:>20}: {value:7.2f} s  ({len(prompts) / value:.2f} prompts/s)")
    print(f"cached vs per forward: {result['speedup_cached_vs_per_forward']}; "
          f"2048 vs 16384 (cached): {result['speedup_2048_vs_16384_cached']:.2f}x")
    print(save_json(result, "cpu-stand-in"))


if __name__ == "__main__":
    main()
