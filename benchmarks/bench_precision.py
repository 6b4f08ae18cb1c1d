"""What PairRM's precision and batching do to its scores and choices: the engine in fp32, fp16 and bf16 on one device,
each pass alone (`batch_tokens=1`, no padding) and in the device's batches.

    python benchmarks/bench_precision.py --device cuda            (the random 'large' PairRM of bench_scoring)

Against fp32 with each pass alone, on the same rows and random checkpoint: the largest score difference and the share
of rows whose chosen (best) and rejected (worst) candidate stay the same; and, within each precision, how far the
batched scores are from the scores of each pass alone. bench_scoring's random models (initializer_range 1.0: attention
near one-hot) can turn a rounding of 1e-3 into another score, so the figures are of such a model, not of PairRM's real
weights; `--initializer-range 0.1` builds one that does not magnify rounding (smaller scores: see RESULTS.md). JSON: benchmarks/results/precision-*.json (with the settings that make fp32 products TF32 on a GPU).
"""

from __future__ import annotations

import argparse
import os
import sys
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).parent))
from bench_scoring import generated_model, generated_rows, max_abs_diff  # noqa: E402
from saved import save_json  # noqa: E402

from repro.cli.measure import machine_info  # noqa: E402
from repro.parameters import default_batch_tokens  # noqa: E402
from repro.scorers import load_scorer  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--size", default="large", choices=["tiny", "mid", "large"])
    ap.add_argument("--corpus-prompts", type=int, default=512,
                    help="bench_scoring's --prompts, whose rows its random model's tokenizer learned from")
    ap.add_argument("--prompts", type=int, default=128)
    ap.add_argument("--dtypes", default="fp32,fp16,bf16")
    ap.add_argument("--initializer-range", type=float, default=1.0,
                    help="of the random model's weights: 1.0 (bench_scoring's) magnifies rounding, 0.1 does not")
    ap.add_argument("--output-dir", type=Path, default=Path(__file__).parent / "results")
    args = ap.parse_args()
    model = str(generated_model(args.size, args.corpus_prompts, init=args.initializer_range))
    prompts, candidates = generated_rows(args.prompts, seed=7)
    batched = default_batch_tokens(args.device.split(":")[0])
    scores: dict[tuple[str, int], list[list[float]]] = {}
    for dtype in [d.strip() for d in args.dtypes.split(",") if d.strip()]:
        engine = load_scorer(model, device=args.device, dtype=dtype)
        for budget in (1, batched):
            scores[dtype, budget] = [[float(x) for x in row] for row in engine.score(prompts, candidates,
                                                                                      batch_tokens=budget)]
    reference = np.array(scores["fp32", 1])
    out = {"when": datetime.now(timezone.utc).isoformat(timespec="seconds"),
           "command": "python benchmarks/bench_precision.py " + " ".join(sys.argv[1:]),
           "machine": machine_info(args.device), "model": f"random PairRM-architecture '{args.size}'",
           "initializer_range": args.initializer_range,
           "prompts": args.prompts, "candidates_per_prompt": 2, "batched_tokens": batched,
           "fp32_alone_max_abs_score": float(np.abs(reference).max()),
           # what decides whether fp32 matrix products round as TF32 on a GPU
           "fp32_matmul": {"float32_matmul_precision": torch.get_float32_matmul_precision(),
                           "cuda_matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32,
                           **{k: os.environ.get(k) for k in ("TORCH_ALLOW_TF32_CUBLAS_OVERRIDE",
                                                             "NVIDIA_TF32_OVERRIDE")}},
           "results": {}}
    for (dtype, budget), s in scores.items():
        a = np.array(s)
        r = out["results"][f"{dtype} batch_tokens={budget}"] = {
            "max_abs_diff_vs_fp32_alone": max_abs_diff(s, scores["fp32", 1]),
            "max_abs_diff_vs_same_dtype_alone": max_abs_diff(s, scores[dtype, 1]),
            "same_chosen": float(np.mean(a.argmax(1) == reference.argmax(1))),
            "same_rejected": float(np.mean(a.argmin(1) == reference.argmin(1))),
            "finite": bool(np.isfinite(a).all())}
        print(f"{dtype:5} batch_tokens={budget:<6} vs fp32 alone: max |diff| {r['max_abs_diff_vs_fp32_alone']:.2e}, "
              f"same chosen {100 * r['same_chosen']:.1f} %; vs {dtype} alone: "
              f"{r['max_abs_diff_vs_same_dtype_alone']:.2e}; finite {r['finite']}")
    print(f"fp32 scores alone: max |score| {out['fp32_alone_max_abs_score']:.3e}")
    print(f"results: {save_json(out, 'precision-' + args.device.split(':')[0], args.output_dir)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
