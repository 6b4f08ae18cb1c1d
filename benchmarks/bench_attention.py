"""A candidate for PairRM's attention: one fused `scaled_dot_product_attention` with the position scores and the
padding mask as its float bias, against the engine's softmax in separate L×L passes (transformers' sums), timed side by
side in one process.

    .venv/bin/python benchmarks/bench_attention.py                       (CPU: the random 'mid' PairRM, fp32)
    python benchmarks/bench_attention.py --device cuda                   (the random 'large' PairRM, fp16)
    .venv/bin/python benchmarks/bench_attention.py --model builtin:tiny-pairrm

Both take the engine's `projections` and `position_scores` (`repro.scorers.pairrm_attention`); only the
last step differs. Rows: bench_scoring's generated rows with UltraFeedback's lengths. Slices alternate, who goes
first rotating (`repro.cli.measure.alternate`). Printed and saved (benchmarks/results/attention-*.json): seconds,
the peak memory above what was in use, the ratio, the largest score difference and the rows whose chosen differs.
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime, timezone
from functools import partial
from pathlib import Path
from unittest import mock

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).parent))
from bench_scoring import generated_model, generated_rows  # noqa: E402
from saved import save_json  # noqa: E402

from repro.cli.measure import Contender, alternate, engine_passes, machine_info  # noqa: E402
from repro.parameters import default_batch_tokens  # noqa: E402
from repro.scorers import load_scorer, pairrm_attention  # noqa: E402
from repro.scorers.pairrm_attention import position_scores, projections  # noqa: E402


def fused_forward(self, hidden_states, attention_mask, output_attentions=False, query_states=None,
                  relative_pos=None, rel_embeddings=None, *, owner):
    """The candidate: the engine's attention with its last steps (QKᵀ, softmax, × V) fused."""
    batch, dtype = owner.batch, hidden_states.dtype
    query, key, value, scale = projections(self, hidden_states)
    bias = position_scores(self, query, key, rel_embeddings, scale, batch)
    if batch["key_padding"] is not None:
        bias.masked_fill_(batch["key_padding"][:, None, None, :], torch.finfo(dtype).min)
    context = torch.nn.functional.scaled_dot_product_attention(query, key, value, attn_mask=bias,
                                                               scale=1.0 / float(scale)).transpose(1, 2)
    return context.reshape(context.shape[0], context.shape[1], -1), None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--size", default=None, choices=["tiny", "mid", "large"],
                    help="bench_scoring's random PairRM (default: mid on a CPU, large on a GPU)")
    ap.add_argument("--model", default=None, help="a PairRM checkpoint instead (e.g. builtin:tiny-pairrm)")
    ap.add_argument("--dtype", default=None, help="default: fp32 on a CPU, fp16 on a GPU")
    ap.add_argument("--prompts", type=int, default=None, help="default: 24 on a CPU, 512 on a GPU")
    ap.add_argument("--slice", type=int, default=None, dest="slice_size", help="default: 8 on a CPU, 128 on a GPU")
    ap.add_argument("--batch-tokens", type=int, default=None, help="default: the device's (repro's own default)")
    ap.add_argument("--output-dir", type=Path, default=Path(__file__).parent / "results")
    args = ap.parse_args()
    kind = torch.device(args.device).type
    gpu = kind == "cuda"
    size = args.size or ("large" if gpu else "mid")
    n, slice_size = args.prompts or (512 if gpu else 24), args.slice_size or (128 if gpu else 8)
    dtype, budget = args.dtype or ("fp16" if gpu else "fp32"), args.batch_tokens or default_batch_tokens(kind)
    model = args.model or str(generated_model(size, n))
    prompts, candidates = generated_rows(n, seed=0)  # the first rows of those the random model's tokenizer learned
    engine = load_scorer(model, device=args.device, dtype=dtype)
    # install_fast_attention binds the module's _fast_attention_forward as the model loads
    with mock.patch.object(pairrm_attention, "_fast_attention_forward", fused_forward):
        fused = load_scorer(model, device=args.device, dtype=dtype)
    assert engine.model.fast_attention and fused.model.fast_attention, "not DeBERTa-v3's attention settings"
    contenders = [Contender("engine: softmax in steps", partial(engine.score, batch_tokens=budget)),
                  Contender("candidate: fused SDPA", partial(fused.score, batch_tokens=budget))]
    alternate(contenders, prompts, candidates, slice_size, kind, print)
    ours, new = (np.array(x.scores) for x in contenders)
    lengths, _ = engine_passes(engine, prompts, candidates)
    out = {"when": datetime.now(timezone.utc).isoformat(timespec="seconds"),
           "command": "python benchmarks/bench_attention.py " + " ".join(sys.argv[1:]),
           "machine": machine_info(args.device), "model": args.model or f"random PairRM-architecture '{size}'",
           "dtype": dtype, "batch_tokens": budget, "prompts": n, "candidates_per_prompt": 2,
           "mean_pass_tokens": round(float(np.mean(lengths)), 1),
           "contenders": {x.name: {"seconds": round(x.seconds, 3),
                                   "peak_extra_mb": round(x.peak_extra_bytes / 2**20, 1)} for x in contenders},
           "candidate_speedup": round(contenders[0].seconds / contenders[1].seconds, 3),
           "max_abs_score_diff": float(np.abs(ours - new).max()), "max_abs_score": float(np.abs(ours).max()),
           "rows_chosen_differs": int((ours.argmax(axis=1) != new.argmax(axis=1)).sum())}
    for name, figures in out["contenders"].items():
        print(f"{name:>36}: {figures['seconds']:7.2f} s, peak +{figures['peak_extra_mb']:.0f} MB")
    print(f"candidate speed-up {out['candidate_speedup']:.2f}x; largest score difference "
          f"{out['max_abs_score_diff']:.2e} (scores up to {out['max_abs_score']:.3f}); chosen differs in "
          f"{out['rows_chosen_differs']} of {n} rows")
    print(save_json(out, "attention", folder=args.output_dir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
