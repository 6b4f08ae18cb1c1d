"""`score_candidates` takes every setting (its defaults live only in the parameter schema): tests call it through
`run_scoring`, which fills in what a test leaves out with the run's defaults (`ConstructParams`)."""

from __future__ import annotations

from typing import Any

from repro.construct.scoring import ScoreResult, score_candidates
from repro.parameters import ConstructParams

# score_candidates' keyword -> the parameter of the run that gives it
PARAMETERS = {"backend": "scorer_backend", "kind": "scorer_kind", "device": "device", "dtype": "dtype",
              "batch_tokens": "batch_tokens", "chunk_size": "chunk_size", "num_processes": "num_processes"}
RUN_DEFAULTS = {key: ConstructParams.model_fields[name].default for key, name in PARAMETERS.items()}


def with_run_defaults(**given: Any) -> dict[str, Any]:
    """score_candidates' keywords: `given`, and the run's defaults for the rest."""
    return {**RUN_DEFAULTS, **given}


def run_scoring(prompts: list[str], candidates: list[list[str]], **given: Any) -> ScoreResult:
    """`score_candidates` with the run's defaults for every setting `given` leaves out."""
    return score_candidates(prompts, candidates, **with_run_defaults(**given))
