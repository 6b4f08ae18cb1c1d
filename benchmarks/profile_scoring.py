"""Where the PairRM engine's time goes on a GPU: tokenizing and planning, then torch.profiler over the scoring of the
same rows (the busiest kernels, and GPU busy time against wall time).

    python benchmarks/profile_scoring.py --device cuda      (the random 'large' PairRM of bench_scoring, fp16)
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).parent))
from bench_scoring import TOKENIZER_CORPUS_ROWS, generated_model, generated_rows  # noqa: E402

from repro.errors import ParameterError  # noqa: E402
from repro.scorers import load_scorer  # noqa: E402
from repro.scorers.common import resolve_device, resolve_dtype  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--size", default="large")
    ap.add_argument("--dtype", default="fp16")
    ap.add_argument("--corpus-prompts", type=int, default=512)
    ap.add_argument("--prompts", type=int, default=128)
    ap.add_argument("--batch-tokens", type=int, default=16384)
    args = ap.parse_args()
    try:  # before building the model (a minute): a CUDA device on a machine without one is refused at once
        resolve_dtype(args.dtype, resolve_device(args.device))
    except ParameterError as exc:
        ap.error(str(exc))
    model = str(generated_model(args.size, args.corpus_prompts))
    # the first rows of those the model's tokenizer learned from (the profile's recorded run: 128 of 512)
    rows = generated_rows(max(args.corpus_prompts, TOKENIZER_CORPUS_ROWS), seed=0)
    prompts, candidates = rows[0][:args.prompts], rows[1][:args.prompts]
    engine = load_scorer(model, device=args.device, dtype=args.dtype)
    engine.score(prompts, candidates, batch_tokens=args.batch_tokens)  # warm-up: allocator, kernels
    sync = torch.cuda.synchronize if args.device.startswith("cuda") else (lambda: None)
    start = time.perf_counter()
    engine.plan(prompts, candidates)
    plan_s = time.perf_counter() - start
    sync()
    start = time.perf_counter()
    engine.score(prompts, candidates, batch_tokens=args.batch_tokens)
    sync()
    wall = time.perf_counter() - start
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if args.device.startswith("cuda") else [])
    with profile(activities=activities) as prof:
        engine.score(prompts, candidates, batch_tokens=args.batch_tokens)
        sync()
    # the table's footer gives the kernels' total ("Self CUDA time total"): the GPU's busy time, to set against wall
    print(f"{args.prompts} prompts, {args.dtype}, batch_tokens={args.batch_tokens}: score {wall:.2f} s wall, of which "
          f"plan (tokenize, order) {plan_s:.2f} s")
    key = "self_device_time_total" if args.device.startswith("cuda") else "self_cpu_time_total"
    print(prof.key_averages().table(sort_by=key, row_limit=15, max_name_column_width=60))
    return 0


if __name__ == "__main__":
    sys.exit(main())
