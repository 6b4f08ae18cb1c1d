"""Reward-model scorers behind one interface.

    scorer = load_scorer("llm-blender/PairRM", device="auto", dtype="auto")
    scores = scorer.score(prompts, candidates)   # list of float64 arrays, one score per candidate, input order
    scorer.info                                   # what produced the scores, for the manifest

Modules (each imports only those above it in this list; none imports this package's `load_scorer`):

- `common`: devices and precisions, input checks, ranks, the stand-in mark, PairRM's default limits (1224/412);
- `pairrm_tokens`, `pairrm_attention`, `pairrm_checkpoint`, `pairrm`: PairRM's tokenisation, its fast
  DeBERTa-v3 attention, finding and building a checkpoint of either layout, and the engine;
- `tiny`: the random stand-ins built offline (`builtin:tiny-pairrm`);
- `blender_compat`: llm-blender's own code as a reference backend.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import ParameterError

BACKENDS = ("repro", "llm-blender")


def load_scorer(model: str | Path, *, backend: str = "repro", device: str = "auto", dtype: str = "auto",
                source_maxlength: int | None = None, candidate_maxlength: int | None = None, **kwargs):
    """A PairRM scorer: backend "repro" (the engine) or "llm-blender" (the original code, as reference).

    Limits left None are the checkpoint's own (llm-blender's RankerConfig), else 1224 / 412: `info["limits_from"]`.
    """
    common = dict(device=device, dtype=dtype, source_maxlength=source_maxlength,
                  candidate_maxlength=candidate_maxlength, **kwargs)
    if backend == "repro":
        from .pairrm import PairRM

        return PairRM.load(model, **common)
    if backend == "llm-blender":
        from .blender_compat import BlenderScorer

        return BlenderScorer.load(model, **common)
    raise ParameterError(f"backend={backend!r} is not a PairRM backend: expected 'repro' or 'llm-blender'.")
