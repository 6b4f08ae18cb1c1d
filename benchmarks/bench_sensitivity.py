"""How far a rounding-sized change moves the scores of `repro bench`'s random PairRM: every weight scaled by
(1 + eps * N(0, 1)), each pass alone, fp32, against the unchanged model's scores on the same rows.

    python benchmarks/bench_sensitivity.py --eps 1e-7,1e-6          (the 'large' model, 6 rows: minutes on 2 cores)

A model whose scores move by as much as they are large at eps 1e-7 (fp32's own rounding) cannot tell a bug from
rounding when its batched scores are set against its scores of each pass alone, or fp16 against fp32.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).parent))
from bench_scoring import generated_model, generated_rows  # noqa: E402
from saved import save_json  # noqa: E402

from repro.scorers import load_scorer  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="large")
    ap.add_argument("--corpus-prompts", type=int, default=512, help="as in bench_precision.py")
    ap.add_argument("--rows", type=int, default=6, help="the first rows of bench_precision.py's")
    ap.add_argument("--eps", default="1e-7,1e-6")
    ap.add_argument("--initializer-range", type=float, default=1.0, help="as in bench_precision.py")
    args = ap.parse_args()
    prompts, candidates = (x[:args.rows] for x in generated_rows(128, seed=7))
    model = generated_model(args.size, args.corpus_prompts, init=args.initializer_range)
    engine = load_scorer(str(model), device="cpu", dtype="fp32")
    base = np.array(engine.score(prompts, candidates, batch_tokens=1))
    state = {k: v.clone() for k, v in engine.model.state_dict().items()}
    out = {"command": "python benchmarks/bench_sensitivity.py " + " ".join(sys.argv[1:]), "size": args.size,
           "initializer_range": args.initializer_range, "rows": args.rows, "max_abs_score": float(np.abs(base).max()), "results": {}}
    for eps in [float(x) for x in args.eps.split(",")]:
        g = torch.Generator().manual_seed(0)
        with torch.no_grad():
            for name, p in engine.model.named_parameters():
                p.copy_(state[name] * (1 + eps * torch.randn(p.shape, generator=g)))
        start = time.perf_counter()
        s = np.array(engine.score(prompts, candidates, batch_tokens=1))
        r = out["results"][f"{eps:.0e}"] = {"max_abs_score_change": float(np.abs(s - base).max()),
                                            "chosen_flipped": int((s.argmax(1) != base.argmax(1)).sum()),
                                            "seconds": round(time.perf_counter() - start, 1)}
        print(f"eps {eps:.0e}: max |score change| {r['max_abs_score_change']:.2e} (scores up to "
              f"{out['max_abs_score']:.3f}), chosen flipped in {r['chosen_flipped']} of {args.rows} rows", flush=True)
    print(f"results: {save_json(out, 'sensitivity-cpu')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
