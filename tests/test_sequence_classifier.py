"""Sequence-classifier reward models (repro.scorers.sequence_classifier) on tiny random Llama and DeBERTa-v2
checkpoints with chat templates: scores against a plain one-at-a-time transformers forward, batch and order
invariance, torchrun and kill -9 resume, kind detection, and the errors a user meets."""

from __future__ import annotations

import json
import random
import re
import shutil
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from repro.construct.scoring import score_candidates
from repro.errors import DataError, ModelLoadError, ParameterError
from repro import scorers
from repro.scorers import detect_kind, load_scorer
from repro.scorers.sequence_classifier import SequenceClassifierScorer
from repro.scorers.tiny import DEBERTA_CHAT_TEMPLATE, build_tiny_pairrm, build_tiny_reward_model
from scoring_defaults import run_scoring, with_run_defaults


pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tiny models: extra threads only spin
TOLERANCE = 1e-5  # fp32: a batched, padded forward against one sequence at a time


@pytest.fixture(scope="module")
def reward_dirs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("reward-models")
    return {arch: build_tiny_reward_model(root / arch, arch) for arch in ("llama", "deberta")}


@pytest.fixture(scope="module")
def rows(train_rows) -> tuple[list[str], list[list[str]]]:
    """12 real prompts with 1 to 3 candidates (chosen, rejected, an answer borrowed from another row)."""
    picked = train_rows[40:52]
    prompts = [r["prompt"] for r in picked]
    candidates = []
    for i, r in enumerate(picked):
        cands = [r["chosen"][-1]["content"]]
        if i % 4:
            cands.append(r["rejected"][-1]["content"])
        if i % 3 == 0:
            cands.append(picked[(i + 5) % len(picked)]["chosen"][-1]["content"])
        candidates.append(cands)
    return prompts, candidates


def one_at_a_time(folder: Path, prompts, candidates, output: int = 0, chat_template: str | None = None):
    """What transformers gives for each conversation alone: apply_chat_template's ids, no padding, no batching."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForSequenceClassification.from_pretrained(folder).eval()
    limit = model.config.max_position_embeddings
    out = []
    for prompt, cands in zip(prompts, candidates):
        row = []
        for cand in cands:
            conv = [{"role": "user", "content": prompt}, {"role": "assistant", "content": cand}]
            ids = tokenizer.apply_chat_template(conv, chat_template=chat_template, tokenize=True,
                                                return_dict=True)["input_ids"][:limit]
            with torch.no_grad():
                row.append(float(model(input_ids=torch.tensor([ids])).logits[0, output]))
        out.append(np.array(row))
    return out


@pytest.mark.parametrize("arch", ["llama", "deberta"])
def test_scores_equal_a_one_at_a_time_transformers_forward(arch, reward_dirs, rows):
    prompts, candidates = rows
    scorer = load_scorer(reward_dirs[arch], device="cpu")
    assert isinstance(scorer, SequenceClassifierScorer)
    got = scorer.score(prompts, candidates, batch_tokens=4096)
    expected = one_at_a_time(reward_dirs[arch], prompts, candidates)
    assert [len(g) for g in got] == [len(c) for c in candidates]
    assert all(g.dtype == np.float64 for g in got)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=0, atol=TOLERANCE)
    # the scores are not tied (a broken pooling reading padding would give one value per batch)
    assert len({round(float(x), 6) for g in got for x in g}) > len(prompts)


@pytest.mark.parametrize("arch", ["llama", "deberta"])
def test_scores_do_not_depend_on_batch_composition_or_input_order(arch, reward_dirs, rows):
    prompts, candidates = rows
    scorer = load_scorer(reward_dirs[arch], device="cpu")
    base = scorer.score(prompts, candidates, batch_tokens=4096)
    alone = scorer.score(prompts, candidates, batch_tokens=1)  # one sequence per forward
    order = list(range(len(prompts)))
    random.Random(3).shuffle(order)
    shuffled = scorer.score([prompts[i] for i in order], [candidates[i][::-1] for i in order], batch_tokens=4096)
    halves = scorer.score(prompts[:5], candidates[:5], batch_tokens=900) + \
        scorer.score(prompts[5:], candidates[5:], batch_tokens=900)
    for i in range(len(prompts)):
        np.testing.assert_allclose(alone[i], base[i], rtol=0, atol=TOLERANCE)
        np.testing.assert_allclose(halves[i], base[i], rtol=0, atol=TOLERANCE)
        # the same batches in another input order: bit for bit
        assert shuffled[order.index(i)][::-1].tolist() == base[i].tolist()


def test_a_model_without_a_pad_token_pads_with_an_id_that_ends_no_sequence(reward_dirs, rows, tmp_path):
    """Many reward models' configs name no pad token: the padding id chosen per batch must never be the last real
    token of a sequence, or the model's pooling would read the wrong position."""
    folder = shutil.copytree(reward_dirs["llama"], tmp_path / "no-pad")
    config = json.loads((folder / "config.json").read_text())
    config["pad_token_id"] = None
    (folder / "config.json").write_text(json.dumps(config))
    prompts, candidates = rows
    scorer = load_scorer(folder, device="cpu")
    assert scorer.pad_id is None
    got = scorer.score(prompts, candidates, batch_tokens=4096)
    for g, e in zip(got, one_at_a_time(reward_dirs["llama"], prompts, candidates)):
        np.testing.assert_allclose(g, e, rtol=0, atol=TOLERANCE)


def test_a_multi_output_head_is_refused_unless_an_output_is_named(tmp_path, rows):
    prompts, candidates = rows
    folder = build_tiny_reward_model(tmp_path / "three", "llama", num_labels=3)
    with pytest.raises(ModelLoadError, match="head of 3 outputs.*output_index"):
        load_scorer(folder, device="cpu")
    with pytest.raises(ParameterError, match="output_index=3"):
        load_scorer(folder, device="cpu", output_index=3)
    scorer = load_scorer(folder, device="cpu", output_index=2)
    got = scorer.score(prompts[:4], candidates[:4])
    for g, e in zip(got, one_at_a_time(folder, prompts[:4], candidates[:4], output=2)):
        np.testing.assert_allclose(g, e, rtol=0, atol=TOLERANCE)
    assert scorer.info["output_index"] == 2


def test_a_model_without_chat_template_needs_one_given(tmp_path, rows):
    prompts, candidates = rows
    folder = build_tiny_reward_model(tmp_path / "bare", "deberta", chat_template=False)
    with pytest.raises(ModelLoadError, match="no chat template.*chat_template"):
        load_scorer(folder, device="cpu")
    scorer = load_scorer(folder, device="cpu", chat_template=DEBERTA_CHAT_TEMPLATE)
    assert scorer.info["chat_template"] == "given"
    got = scorer.score(prompts[:3], candidates[:3])
    expected = one_at_a_time(folder, prompts[:3], candidates[:3], chat_template=DEBERTA_CHAT_TEMPLATE)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=0, atol=TOLERANCE)


@pytest.mark.parametrize("template, why", [("{% for m in messages %}{{ m.content ", "TemplateSyntaxError"),
                                            ('{{ raise_exception("nope") }}', "nope"),
                                            ("{{ messages[5].content }}", "no element 5"),
                                            # rendered empty (a ZeroDivisionError inside the batching), or with no
                                            # response: every candidate scores alike
                                            ("{% raw %}{% endraw %}", "renders a conversation without the assistant"),
                                            ("{{ messages[0].content }}", "without the assistant's response")])
def test_a_chat_template_that_cannot_render_is_refused_at_load(tmp_path, template, why):
    """A broken template ended in a raw jinja2 traceback from inside the scoring job; it is rendered once at load."""
    folder = build_tiny_reward_model(tmp_path / "bare", "llama", chat_template=False)
    with pytest.raises(ParameterError, match=r"given as chat_template .*" + why + r".*--chat-template FILE"):
        load_scorer(folder, device="cpu", chat_template=template)


def test_remote_code_is_run_only_when_asked_and_the_error_says_so(tmp_path, reward_dirs):
    folder = tmp_path / "custom"
    shutil.copytree(reward_dirs["llama"], folder)
    config = json.loads((folder / "config.json").read_text())
    config.update(model_type="my_reward_model", auto_map={"AutoConfig": "configuration_mine.MyConfig",
                                                          "AutoModelForSequenceClassification": "modeling_mine.MyRM"})
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelLoadError, match="trust_remote_code=True.*ArmoRM|ArmoRM.*trust_remote_code=True"):
        load_scorer(folder, kind="sequence_classifier", device="cpu")


def test_kind_is_read_from_the_checkpoint(tmp_path, reward_dirs, tiny_pairrm_dir):
    assert detect_kind(tiny_pairrm_dir) == "pairrm"
    assert detect_kind(build_tiny_pairrm(tmp_path / "hf", layout="transformers")) == "pairrm"
    assert detect_kind(reward_dirs["llama"]) == "sequence_classifier"
    assert detect_kind(reward_dirs["deberta"]) == "sequence_classifier"
    assert detect_kind("builtin:tiny-pairrm") == "pairrm"
    assert detect_kind("builtin:tiny-reward-llama") == "sequence_classifier"
    policy = tmp_path / "policy"
    policy.mkdir()
    (policy / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"]}))
    (policy / "model.safetensors").write_bytes(b"")  # (a folder without weights is refused before its kind is read)
    with pytest.raises(ModelLoadError, match="LlamaForCausalLM.*scorer_kind"):
        detect_kind(policy)
    with pytest.raises(ParameterError, match="kind='ranker'"):
        load_scorer(reward_dirs["llama"], kind="ranker")
    with pytest.raises(ParameterError, match="source_maxlength does not apply to a sequence_classifier"):
        load_scorer(reward_dirs["llama"], device="cpu", source_maxlength=64)
    # each option by the schema's rule, as scorer_options takes it ("max_length=0 must be >= 1 (tokens per sequence)"
    # was the class's own check, and "FILL_IN", the card's rebuild file's placeholder, was a template)
    for option, value, words in (("max_length", 0, "must be >= 1"), ("chat_template", "FILL_IN", "is still FILL_IN")):
        with pytest.raises(ParameterError, match=rf"^{option}: {words}"):
            load_scorer(reward_dirs["llama"], device="cpu", **{option: value})
    # ... and by the class's own load, which its docstring names as a way to load (it scored with max_length=-1)
    for value in (0, -1):
        with pytest.raises(ParameterError, match=r"^max_length: must be >= 1"):
            SequenceClassifierScorer.load(reward_dirs["llama"], device="cpu", max_length=value)


def test_resolve_kind_checks_the_model_once_where_it_reads_the_kind(monkeypatch, reward_dirs, tiny_pairrm_dir):
    """resolve_kind(model) (kind 'auto') checked the model spec, dropped it, and had detect_kind check the model again:
    now one check, the same kinds, and the same refusal first of a missing model with a wrong kind."""
    checked, check = [], scorers.model_spec
    monkeypatch.setattr(scorers, "model_spec", lambda model: checked.append(model) or check(model))
    for model, kind in (("builtin:tiny-pairrm", "pairrm"), (reward_dirs["llama"], "sequence_classifier"),
                        (tiny_pairrm_dir, "pairrm")):
        checked.clear()
        assert scorers.resolve_kind(model) == kind and checked == [model]
    with pytest.raises(ParameterError, match=r"^model must be a hub id"):
        scorers.resolve_kind(None, "ranker")


def test_a_kind_that_does_not_match_the_model_is_refused_naming_both(reward_dirs):
    """A PairRM stand-in as a sequence classifier was 'not a directory ... or a built-in stand-in' (it is one), and a
    Llama reward model as PairRM was 'neither llm-blender's RankerConfig ...' without the model or the fix."""
    with pytest.raises(ParameterError, match=r"kind='sequence_classifier' .*does not match 'builtin:tiny-pairrm': it "
                                             r"is a PairRM stand-in\. Set the kind to 'auto' or 'pairrm'"):
        load_scorer("builtin:tiny-pairrm", kind="sequence_classifier", device="cpu")
    with pytest.raises(ParameterError, match=rf"kind='pairrm' .*does not match '{reward_dirs['llama']}': it is a "
                                             r"sequence-classifier checkpoint .*'auto' or 'sequence_classifier'"):
        load_scorer(reward_dirs["llama"], kind="pairrm", device="cpu")


def test_a_kind_or_backend_without_a_scorer_class_is_refused_naming_those_there_are(reward_dirs, monkeypatch):
    """A sequence classifier with backend 'llm-blender', and a kind of parameters.ScorerKind missing from SCORERS (one
    being added), were told "backend='repro' applies to PairRM only; sequence classifiers use 'repro'."."""
    assert {k for k, _ in scorers.SCORERS} == set(scorers.KINDS) - {"auto"}  # ScorerKind and the registry agree
    with pytest.raises(ParameterError, match=re.escape(
            "backend='llm-blender' (scorer_backend, or --backend) does not apply to a sequence_classifier scorer "
            "('builtin:tiny-reward-llama'): expected 'repro'.")):
        load_scorer("builtin:tiny-reward-llama", backend="llm-blender", device="cpu")
    monkeypatch.delitem(scorers.SCORERS, ("sequence_classifier", "repro"))
    with pytest.raises(ParameterError, match=re.escape(
            "kind='sequence_classifier' (scorer_kind, or --kind on the command line) has no scorer class in "
            "repro.scorers.SCORERS, which holds 'pairrm': set one of those, or register the kind's class there "
            "(docs/architecture.md: Adding a reward-model kind).")):
        load_scorer(reward_dirs["llama"], kind="sequence_classifier", device="cpu")
    guide = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"  # where the message sends a developer
    assert "\n## Adding a reward-model kind\n" in guide.read_text(encoding="utf-8")


def test_every_scorer_records_its_kind_and_one_that_does_not_is_refused(monkeypatch):
    # PairRM's record named no kind: the card and 02_analyze read a record without one as PairRM's, so a new kind
    # whose info forgot it would have been taken for PairRM (its invariants, its licence line)
    for model, kind in (("builtin:tiny-pairrm", "pairrm"), ("builtin:tiny-reward-llama", "sequence_classifier")):
        assert load_scorer(model, device="cpu", weights=False).info["kind"] == kind
    monkeypatch.setattr(SequenceClassifierScorer, "info", property(lambda self: {"model": self.spec}))
    with pytest.raises(ModelLoadError, match=re.escape(
            "SequenceClassifierScorer.info records kind None, not 'sequence_classifier' (its kind in "
            "repro.scorers.SCORERS):")):
        load_scorer("builtin:tiny-reward-llama", device="cpu", weights=False)


@pytest.mark.parametrize("kind", ["auto", "pairrm", "sequence_classifier"])
def test_a_local_path_that_does_not_exist_is_named(tmp_path, kind):
    missing = tmp_path / "models" / "my-rm"
    with pytest.raises(ModelLoadError) as err:
        load_scorer(str(missing), kind=kind, device="cpu")
    text = str(err.value)
    assert str(missing) in text and "not a directory" in text and "hf download" not in text


def test_a_single_candidate_is_scored_and_bad_rows_are_named(reward_dirs):
    scorer = load_scorer(reward_dirs["llama"], device="cpu")
    assert [len(s) for s in scorer.score(["p"], [["only one"]])] == [1]
    with pytest.raises(DataError, match="Row 1: 0 candidate"):
        scorer.score(["p", "q"], [["a"], []])


def test_compare_is_the_reward_difference_and_rank_the_reward_order(reward_dirs, rows):
    """A sequence classifier had no compare (AttributeError), though the docs show one interface for every scorer."""
    scorer = load_scorer(reward_dirs["llama"], device="cpu")
    prompts, candidates = rows
    picked = [(p, c) for p, c in zip(prompts, candidates) if len(c) >= 2]
    prompts, a, b = [p for p, _ in picked], [c[0] for _, c in picked], [c[1] for _, c in picked]
    rewards = [scorer.score(prompts, [[x] for x in side]) for side in (a, b)]
    margins = scorer.compare(prompts, a, b)
    np.testing.assert_allclose(margins, [ra[0] - rb[0] for ra, rb in zip(*rewards)], rtol=0, atol=TOLERANCE)
    np.testing.assert_array_equal(scorer.compare(prompts, b, a), -margins)
    assert [r.tolist() for r in scorer.rank(prompts, [[x, y] for x, y in zip(a, b)])] == \
        [[1, 2] if m > 0 else [2, 1] if m < 0 else [1, 1] for m in margins]
    with pytest.raises(DataError, match="candidates_a is str"):
        scorer.compare(["p"], "a", ["b"])


def test_progress_true_and_a_scorer_without_weights_as_pairrm_s(reward_dirs, rows, capsys):
    """progress=True raised "TypeError: 'bool' object is not callable", a scorer loaded with weights=False
    "'NoneType' object is not callable" at self.model(...)."""
    prompts, candidates = rows
    scorer = load_scorer(reward_dirs["llama"], device="cpu")
    expected = scorer.score(prompts, candidates)
    capsys.readouterr()
    got = scorer.score(prompts, candidates, progress=True)
    assert all(np.array_equal(a, b) for a, b in zip(got, expected))
    assert re.search(r"^reward model scoring: 100% \(12/12 prompts\)", capsys.readouterr().err, re.M)
    light = load_scorer(reward_dirs["llama"], device="cpu", weights=False)
    with pytest.raises(ParameterError, match=r"reward model scorer was loaded with weights=False .*call "
                                             r"scorer\.load_weights\(\) first"):
        light.score(prompts, candidates)
    assert all(np.array_equal(a, b) for a, b in zip(light.load_weights().score(prompts, candidates), expected))


def test_two_torchrun_processes_give_the_scores_of_one(reward_dirs, rows, tmp_path, torchrun_processes):
    prompts, candidates = rows
    common = dict(model=str(reward_dirs["llama"]), device="cpu", chunk_size=3, progress=False)
    one = run_scoring(prompts, candidates, work_dir=tmp_path / "one", **common)
    two = run_scoring(prompts, candidates, work_dir=tmp_path / "two", num_processes=torchrun_processes, **common)
    assert two.info["processes"] == 2 and two.info["kind"] == "sequence_classifier"
    assert json.dumps(two.scores) == json.dumps(one.scores)
    assert _chunk_bytes(tmp_path / "two") == _chunk_bytes(tmp_path / "one")


def _chunk_bytes(work_dir: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(work_dir.glob("chunk-*.json"))}


def test_kill_9_and_resume_gives_the_same_bytes(reward_dirs, rows, tmp_path, kill_during_scoring):
    prompts, candidates = rows
    kwargs = dict(model=str(reward_dirs["deberta"]), device="cpu", chunk_size=4, progress=False)
    reference = run_scoring(prompts, candidates, work_dir=tmp_path / "reference", **kwargs)
    work = tmp_path / "work"
    kill_during_scoring(tmp_path, "repro.scorers.sequence_classifier:SequenceClassifierScorer",
                                       prompts, candidates, with_run_defaults(**kwargs, work_dir=str(work)))
    assert sorted(_chunk_bytes(work)) == ["chunk-000000.json", "chunk-000001.json"]
    resumed = run_scoring(prompts, candidates, work_dir=work, **kwargs)
    assert resumed.info["chunks_resumed"] == 2 and resumed.info["prompts_computed"] == len(prompts) - 8
    assert _chunk_bytes(work) == _chunk_bytes(tmp_path / "reference")
    assert json.dumps(resumed.scores) == json.dumps(reference.scores)


def test_other_options_in_the_same_work_folder_score_again(reward_dirs, rows, tmp_path):
    # max_length 64, then 16 in the same work folder: the chunks scored at 64 are not the answer at 16
    prompts, candidates = rows
    kwargs = dict(model=str(reward_dirs["llama"]), kind="sequence_classifier", device="cpu", dtype="fp32",
                  chunk_size=4, progress=False)
    with pytest.warns(RuntimeWarning, match="max_length"):
        first = run_scoring(prompts, candidates, work_dir=tmp_path / "w", options={"max_length": 64}, **kwargs)
        again = run_scoring(prompts, candidates, work_dir=tmp_path / "w", options={"max_length": 16}, **kwargs)
        alone = run_scoring(prompts, candidates, work_dir=tmp_path / "new", options={"max_length": 16}, **kwargs)
    assert again.info["chunks_resumed"] == 0 and again.info["max_length"] == 16
    assert again.scores == alone.scores != first.scores


def _no_weights(*args, **kwargs):
    raise AssertionError("the weights were loaded")


def test_rows_cut_at_max_length_are_counted_in_the_scorers_record(reward_dirs, rows, tmp_path):
    # a prompt longer than max_length cut every candidate's conversation to the same tokens: equal scores, taken for
    # ties and dropped, with a warning in the notebook as the only trace
    prompts, candidates = rows
    long = ["word " * 400 + prompts[0]] + prompts[1:]
    # one warning with the total, naming the scorer (one per chunk had shown only the first chunk's count)
    with pytest.warns(RuntimeWarning) as caught:
        result = run_scoring(long, candidates, model=str(reward_dirs["llama"]), kind="sequence_classifier",
                             device="cpu", dtype="fp32", work_dir=tmp_path / "w", options={"max_length": 64},
                             progress=False, chunk_size=4)
    assert [str(w.message) for w in caught if "max_length" in str(w.message)] == [
        f"reward model '{reward_dirs['llama']}': 12 rows had conversations longer than max_length=64 tokens, cut "
        f"to their first 64 tokens (candidates cut alike score alike)."]
    assert result.info["max_length"] == 64 and result.info["rows_truncated"] == 12  # 64 tokens: every row here
    # a re-run that resumes every chunk, and a run whose rows all come from the row cache, count the same rows
    kwargs = dict(model=str(reward_dirs["llama"]), kind="sequence_classifier", device="cpu", dtype="fp32",
                  options={"max_length": 64}, progress=False)
    run_scoring(long, candidates, work_dir=tmp_path / "c1", cache_dir=tmp_path / "cache", **kwargs)
    with pytest.MonkeyPatch.context() as patch:  # nothing left to score: the tokenizer counts, no weights load
        patch.setattr("transformers.AutoModelForSequenceClassification.from_pretrained", _no_weights)
        with pytest.warns(RuntimeWarning, match=r"12 rows had"):  # said again, as the record says it
            resumed = run_scoring(long, candidates, work_dir=tmp_path / "w", chunk_size=4, **kwargs)
        cached = run_scoring(long, candidates, work_dir=tmp_path / "c2", cache_dir=tmp_path / "cache", **kwargs)
    assert resumed.info["prompts_computed"] == 0 and resumed.info["rows_truncated"] == 12
    assert {k: resumed.info[k] for k in ("architecture", "device", "dtype", "max_length", "chat_template")} == {
        k: result.info[k] for k in ("architecture", "device", "dtype", "max_length", "chat_template")}
    assert cached.info["cache"]["rows_from_cache"] == len(long) and cached.info["rows_truncated"] == 12
    assert len(set(result.scores[0])) == 1  # the long prompt's candidates: all cut to its first 64 tokens
    # at the model's own limit: the rows with a conversation longer than it, as the tokenizer counts them
    from transformers import AutoConfig, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(reward_dirs["llama"])
    limit = AutoConfig.from_pretrained(reward_dirs["llama"]).max_position_embeddings
    longer = sum(any(len(tokenizer.apply_chat_template([{"role": "user", "content": p}, {"role": "assistant",
                                                                                      "content": c}],
                                                       tokenize=True, return_dict=True)["input_ids"]) > limit
                     for c in cands) for p, cands in zip(prompts, candidates))
    whole = run_scoring(prompts, candidates, model=str(reward_dirs["llama"]), kind="sequence_classifier",
                        device="cpu", dtype="fp32", work_dir=tmp_path / "w2", progress=False)
    assert 0 < longer < 12 and whole.info["rows_truncated"] == longer


def test_warnings_point_at_the_line_of_the_callers_code(reward_dirs, rows, tmp_path):
    # their stacklevel was fixed: the warning of rows cut at max_length, from scorer.compare or scorer.rank, pointed at
    # src/repro/scorers/common.py, and that of a max_length above the model's positions, from load_scorer, at
    # src/repro/scorers/__init__.py; now each points at the line here that called repro
    prompts, candidates = rows
    long = ["word " * 400 + p for p in prompts[:3]]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        scorer = load_scorer(reward_dirs["llama"], device="cpu", max_length=64)
        scorer.score(long, candidates[:3])
        scorer.compare(long, ["Yes."] * 3, ["No."] * 3)
        scorer.rank(long, candidates[:3])
        score_candidates(long, candidates[:3], **with_run_defaults(
            model=str(reward_dirs["llama"]), device="cpu", work_dir=str(tmp_path / "w"), options={"max_length": 64},
            progress=False))
        SequenceClassifierScorer.load(reward_dirs["llama"], device="cpu", max_length=10 ** 6, weights=False)
        load_scorer(reward_dirs["llama"], device="cpu", max_length=10 ** 6, weights=False)
    ours = [w for w in caught if "max_length" in str(w.message)]
    assert [(Path(w.filename), "longer than" in str(w.message)) for w in ours] == \
        [(Path(__file__), True)] * 4 + [(Path(__file__), False)] * 2


def test_a_load_draws_no_weights_bar_and_leaves_the_bar_settings_as_they_were(reward_dirs, capfd):
    # transformers 5 drew a "Loading weights" bar on every load of the weights: in a notebook or `repro run`, noise
    from huggingface_hub import utils as hub_utils
    from transformers.utils import logging as hf_logging

    was, hub_was = hf_logging.is_progress_bar_enabled(), hub_utils.are_progress_bars_disabled()
    try:
        for on in (True, False):
            (hf_logging.enable_progress_bar if on else hf_logging.disable_progress_bar)()
            load_scorer(reward_dirs["deberta"], device="cpu")
            assert "Loading weights" not in capfd.readouterr().err
            assert hf_logging.is_progress_bar_enabled() is on and hub_utils.are_progress_bars_disabled() is not on
        hf_logging.enable_progress_bar()
        hub_utils.disable_progress_bars()  # the hub's bars off, transformers' on: each as it was after the load
        load_scorer(reward_dirs["deberta"], device="cpu")
        assert hf_logging.is_progress_bar_enabled() and hub_utils.are_progress_bars_disabled()
        hf_logging.enable_progress_bar()  # transformers' own bars still draw outside repro's loads
        from transformers import AutoModelForSequenceClassification

        AutoModelForSequenceClassification.from_pretrained(reward_dirs["deberta"])
        assert "Loading weights" in capfd.readouterr().err
    finally:
        (hf_logging.enable_progress_bar if was else hf_logging.disable_progress_bar)()
        (hub_utils.disable_progress_bars if hub_was else hub_utils.enable_progress_bars)()


def test_a_load_keeps_the_hubs_download_bars_and_says_nothing_where_the_environment_fixes_them(monkeypatch):
    # a hub id's first load downloads: its bars stay; HF_HUB_DISABLE_PROGRESS_BARS=0 made every load warn
    from huggingface_hub import utils as hub_utils
    from transformers.utils import logging as hf_logging

    from repro.scorers.common import no_progress_bars

    hf_logging.enable_progress_bar()
    with no_progress_bars():
        assert not hf_logging.is_progress_bar_enabled() and not hub_utils.are_progress_bars_disabled()
    assert hf_logging.is_progress_bar_enabled()
    hub_tqdm = sys.modules["huggingface_hub.utils.tqdm"]  # (the module: the package's name is its tqdm class)
    monkeypatch.setattr(hub_tqdm, "HF_HUB_DISABLE_PROGRESS_BARS", False)  # (the variable as the hub read it: "0")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with no_progress_bars():
            pass


def test_repro_score_with_kind_writes_logits_and_ranks(reward_dirs, tmp_path):
    from repro.cli import main

    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in [{"prompt": "What is 2+2?", "candidates": ["4", "five"]},
                                                          {"prompt": "Hi", "candidates": ["Hello!"], "id": 7}]))
    out = tmp_path / "out.jsonl"
    assert main(["score", "--model", str(reward_dirs["llama"]), "--kind", "sequence_classifier", "--device", "cpu",
                 "--input", str(src), "--output", str(out)]) == 0
    written = [json.loads(line) for line in out.read_text().splitlines()]
    direct = load_scorer(reward_dirs["llama"], device="cpu").score(["What is 2+2?", "Hi"], [["4", "five"], ["Hello!"]])
    assert [w["scores"] for w in written] == [d.tolist() for d in direct]
    assert written[1]["id"] == 7 and written[1]["ranks"] == [1]
    assert sorted(written[0]["ranks"]) == [1, 2]
