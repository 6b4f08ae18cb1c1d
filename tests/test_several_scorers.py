"""Several scorers in one run (`scorers:`): the primary decides, every scorer's scores are kept, the card says which."""

import json
import os
from pathlib import Path

import datasets
import numpy as np
import pytest

from repro.errors import ParameterError
from repro.parameters import ConstructParams, build, load_params_file
from repro.scorers import load_scorer
from scoring_defaults import run_scoring

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "params" / "demo.yaml"
SECOND = "[{name: llama_rm, model: 'builtin:tiny-reward-llama', kind: sequence_classifier}]"


@pytest.mark.parametrize("override, match", [
    ({"keep_all_candidates": False}, "keep_all_candidates: true"),
    ({"scorers": [{"name": "a", "model": "m"}, {"name": "a", "model": "n"}]}, "every name must be different"),
    ({"scorers": [{"name": "Bad-Name", "model": "m"}]}, "lower-case letters"),
    ({"scorers": [{"name": "primary", "model": "m"}]}, "not 'primary'"),
    ({"scorers": [{"name": "a", "model": "m", "kind": "ranker"}]}, "kind"),
])
def test_bad_scorers_are_named_before_work_starts(tmp_path, override, match):
    values = {"scorers": [{"name": "second", "model": "builtin:tiny-reward-llama"}], **override}
    with pytest.raises(ParameterError, match=match):
        build(ConstructParams, {**_demo(), **values})


def _demo() -> dict:
    return {k: v for k, v in load_params_file(DEMO).items() if k != "notebooks"}


def test_repro_run_with_a_second_scorer_keeps_both_scores_and_the_primary_decides(repro_run, tmp_path):
    import torch

    out = tmp_path / "run"
    # the notebook's kernel scores with this process's thread count: CPU matrix products round differently with
    # another (whatever earlier tests or libraries left in OMP_NUM_THREADS), and the PairRM check below is bitwise
    env = {**os.environ, "OMP_NUM_THREADS": str(torch.get_num_threads())}
    proc = repro_run(DEMO, "--out", out, "--set", f"scorers={SECOND}", "--set", "bootstrap_resamples=200", env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    ds = datasets.load_dataset(str(out / "dataset"), split="train_prefs")
    assert {"candidates", "candidate_scores", "candidate_scores_llama_rm"} <= set(ds.column_names)
    prompts, candidates = ds["prompt"], ds["candidates"]

    # the primary's numbers are PairRM's as a run without a second scorer computes them, bit for bit
    demo = build(ConstructParams, _demo())
    pairrm = run_scoring(prompts, candidates, model=demo.scorer_model, device="cpu", dtype="fp32",
                         batch_tokens=demo.batch_tokens, chunk_size=demo.chunk_size,
                         work_dir=tmp_path / "pairrm", progress=False)
    assert ds["candidate_scores"] == pairrm.scores
    for row, scores in zip(ds, ds["candidate_scores"]):
        assert row["score_chosen"] == max(scores) and row["score_rejected"] == min(scores)
    # the second scorer's are its logits for the same candidates; they did not choose
    direct = load_scorer("builtin:tiny-reward-llama", device="cpu").score(prompts, candidates)
    for got, expected in zip(ds["candidate_scores_llama_rm"], direct):
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-5)
    assert any(int(np.argmax(a)) != int(np.argmax(b)) for a, b in zip(ds["candidate_scores"], direct))

    manifest = json.loads((out / "manifest.json").read_text())
    scorers = {s["name"]: s for s in manifest["scorers"]}
    assert scorers["primary"]["decides_pairs"] and scorers["primary"]["model"] == "builtin:tiny-pairrm"
    assert scorers["llama_rm"]["kind"] == "sequence_classifier" and not scorers["llama_rm"]["decides_pairs"]
    assert scorers["llama_rm"]["column"] == "candidate_scores_llama_rm"
    assert manifest["stages"]["score_llama_rm"]["status"] == "done"
    assert sorted(p.name for p in (out / "work" / "scoring" / "llama_rm").glob("chunk-*.json"))
    card = (out / "dataset" / "README.md").read_text()
    assert "decided by the primary scorer `builtin:tiny-pairrm`" in card
    assert ("`llama_rm`: `builtin:tiny-reward-llama` (a stand-in, not a trained reward model) (column "
            "`candidate_scores_llama_rm`)") in card
    assert "do not sum to zero" in card
    # 02_analyze reports how far the two scorers agree, and the card carries it
    metrics = json.loads((out / "metrics.json").read_text())
    [pair] = metrics["agreement"]["pairs"]
    assert set(pair["scorers"]) == {"builtin:tiny-pairrm", "llama_rm"} and pair["rows"] == ds.num_rows
    same_chosen = sum(int(np.argmax(a)) == int(np.argmax(b))
                      for a, b in zip(ds["candidate_scores"], ds["candidate_scores_llama_rm"]))
    assert pair["same_chosen"]["count"] == same_chosen
    assert (out / "tables" / "scorer_agreement.csv").is_file() and (out / "figures" / "scorer_agreement.png").is_file()
    assert "### Agreement between scorers" in card and "### 评分模型之间的一致性" in card
