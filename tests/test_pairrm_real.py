"""The real PairRM-hf weights, where they are in the local hub cache: the model card's published example.

The card of `llm-blender/PairRM-hf` (and LLM-Blender's README, "Load PairRM with hugging face
from_pretrained()") runs one pass per pair, candidate A first, and prints
`[1.9003021717071533, -1.2547134160995483]` for the example below. Nothing is downloaded: without the
weights in the cache (HF_HOME / HF_HUB_CACHE) the test is skipped.
"""

from __future__ import annotations

import numpy as np
import pytest

from repro.errors import ModelLoadError
from repro.scorers.pairrm import PairRM
from repro.scorers.pairrm_checkpoint import resolve_model
from repro.cli.selfcheck import CARD_A, CARD_B, CARD_INPUTS, CARD_LOGITS, CARD_PREFERS_A, card_example_check


@pytest.fixture(scope="module")
def real_pairrm_hf():
    from huggingface_hub import constants

    if not constants.HF_HUB_OFFLINE:
        pytest.skip("runs offline only (HF_HUB_OFFLINE=1), never downloading the 1.7 GB weights")
    try:
        return resolve_model("llm-blender/PairRM-hf")
    except ModelLoadError as exc:
        pytest.skip(f"llm-blender/PairRM-hf is not in the local hub cache: {str(exc)[:120]}")


@pytest.mark.real_weights
def test_model_card_example(real_pairrm_hf):
    scorer = PairRM.load(real_pairrm_hf, device="auto", dtype="fp32")
    assert scorer.info["stand_in"] is False and scorer.info["layout"] == "transformers"
    _, matrices = scorer.score(CARD_INPUTS, [[a, b] for a, b in zip(CARD_A, CARD_B)], return_matrix=True)
    np.testing.assert_allclose([m[0, 1] for m in matrices], CARD_LOGITS, rtol=0, atol=1e-4)
    assert (scorer.compare(CARD_INPUTS, CARD_A, CARD_B) > 0).tolist() == CARD_PREFERS_A
    assert card_example_check({"PairRM-hf": scorer}).status == "pass"  # what `repro selfcheck` reports
