"""The engine against llm-blender's own code (Blender.loadranker / Blender.rank at batch_size=1), same checkpoint.

Identical token ids for every forward pass, comparison matrices and scores within 1e-5 in fp32, identical
ranks, on 56 prompts with 2 to 6 candidates (full-width letters, ligatures, emoji, CJK, marks where NFKC and
sentencepiece disagree, empty-looking and very short answers, duplicates, texts long enough to be truncated),
and on real UltraFeedback rows at PairRM's real limits (1224/412).
"""

from __future__ import annotations

import random
import subprocess
import sys

import numpy as np
import pytest

from repro.errors import DataError
from repro.scorers.blender_compat import BlenderScorer, install_transformers5_shim
from repro.scorers.common import ranks_from_scores
from repro.scorers.pairrm import PairRM
from repro.scorers.tiny import SENTENCES

SPECIAL = [
    "Ｆｕｌｌ－ｗｉｄｔｈ ＡＢＣ ｘｙｚ １２３ letters", "ﬁnance and ﬂow: ﬀ ﬃ ligatures", "emoji 😀🎉 👩‍💻 🇫🇷 ❤️ here",
    "日本語のテキスト、東京は首都です。", "中文：人工智能正在改变世界", "한국어 문장입니다", "café naïve Ångström façade",
    "zero\u200bwidth\ufeffmarks, ～ tilde and \ufffd replacement", "tabs\tand\nnew lines  and   spaces",
    "a text with [SEP] inside it", "[CLS] starts this one", "Ⅻ ① ¼ ™ ㎏ symbols",
]
EMPTY_LOOKING = ["", " ", "\n", "  \t ", ".", "?", "OK", "a", "👍"]
S_MAX, C_MAX = 48, 24  # small limits: most texts below are truncated, and the tests stay fast


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def crafted_cases(n_prompts: int = 56, seed: int = 7) -> tuple[list[str], list[list[str]]]:
    """Prompts with 2..6 candidates mixing plain, special, empty-looking, duplicated and long texts."""
    rng = random.Random(seed)

    def long_text() -> str:
        return " ".join(rng.choice(SENTENCES) for _ in range(rng.randint(3, 8)))

    pools = [lambda: rng.choice(SENTENCES), lambda: rng.choice(SPECIAL), lambda: rng.choice(EMPTY_LOOKING), long_text]
    prompts, candidates = [], []
    for k in range(n_prompts):
        prompts.append(rng.choice(pools)() if k % 4 else long_text())
        cands = [rng.choice(pools)() for _ in range(2 + k % 5)]
        if k % 7 == 0:
            cands[-1] = cands[0]  # duplicates must tie
        candidates.append(cands)
    return prompts, candidates


def run_llm_blender(ref: BlenderScorer, prompts, candidates, monkeypatch):
    """llm-blender's scores, plus the input ids of each backbone call and each M, keyed by prompt row."""
    calls, matrices = [], []
    ranker = ref.blender.ranker
    original = ranker._full_predict

    def full_predict(*args, **kwargs):
        out = original(*args, **kwargs)
        matrices.append(out["logits"][0].double().cpu().numpy())
        return out

    monkeypatch.setattr(ranker, "_full_predict", full_predict)
    hook = ranker.pretrained_model.register_forward_pre_hook(
        lambda module, args, kwargs: calls.append(kwargs["input_ids"][0].tolist()), with_kwargs=True)
    try:
        scores = ref.score(prompts, candidates)
    finally:
        hook.remove()
    ids, mats = {}, {}
    calls_iter = iter(calls)
    for row, m in zip([r for group in ref.call_order(candidates) for r in group], matrices):
        c = len(candidates[row])
        ids[row] = {(i, j): next(calls_iter) for i in range(c) for j in range(c) if i != j}
        mats[row] = m
    assert next(calls_iter, None) is None
    return scores, ids, mats


def assert_same_as_llm_blender(ours: PairRM, ref: BlenderScorer, prompts, candidates, monkeypatch):
    ref_scores, ref_ids, ref_mats = run_llm_blender(ref, prompts, candidates, monkeypatch)
    scores, mats = ours.score(prompts, candidates, return_matrix=True)
    our_ids = ours.pass_inputs(prompts, candidates)
    for row in range(len(prompts)):
        assert {k: v.tolist() for k, v in our_ids[row].items()} == ref_ids[row], f"token ids differ in row {row}"
        np.testing.assert_allclose(mats[row], ref_mats[row], rtol=0, atol=1e-5, err_msg=f"M of row {row}")
        np.testing.assert_allclose(scores[row], ref_scores[row], rtol=0, atol=1e-5, err_msg=f"scores of row {row}")
        assert ranks_from_scores(scores[row]).tolist() == ranks_from_scores(ref_scores[row]).tolist(), row
        for s in (scores[row], np.asarray(ref_scores[row], dtype=np.float64)):
            assert abs(s.sum()) < 1e-6
    return our_ids


@pytest.fixture(scope="module")
def ours_small(tiny_pairrm_dir):
    return PairRM.load(tiny_pairrm_dir, device="cpu", source_maxlength=S_MAX, candidate_maxlength=C_MAX)


@pytest.fixture(scope="module")
def ref_small(tiny_pairrm_dir):
    return BlenderScorer.load(tiny_pairrm_dir, device="cpu", source_maxlength=S_MAX, candidate_maxlength=C_MAX)


def test_engine_matches_llm_blender_token_for_token(ours_small, ref_small, monkeypatch):
    prompts, candidates = crafted_cases()
    assert len(prompts) >= 50 and {len(c) for c in candidates} == {2, 3, 4, 5, 6}
    our_ids = assert_same_as_llm_blender(ours_small, ref_small, prompts, candidates, monkeypatch)
    # the cases reach what they are meant to: truncated sources, and candidates cut at a budget that the
    # source's unused tokens raised above C_MAX
    segments = [split_pass(ids.tolist(), ours_small) for row in our_ids for ids in row.values()]
    assert any(len(src) == S_MAX for src, _, _ in segments)
    budgets = [(C_MAX + (S_MAX - len(src)) // 2, len(c1)) for src, c1, _ in segments]
    assert any(budget > C_MAX and used == budget for budget, used in budgets)
    assert any(used <= 3 for _, used in budgets)  # empty-looking answers: [CLS] <|candidate1|> [SEP]


def split_pass(ids: list[int], scorer: PairRM) -> tuple[list[int], list[int], list[int]]:
    """(source, candidate 1, candidate 2) segments of one pass, each from its [CLS]."""
    first = ids.index(scorer.prefix_ids["<|candidate1|>"]) - 1
    second = ids.index(scorer.prefix_ids["<|candidate2|>"]) - 1
    return ids[:first], ids[first:second], ids[second:]


def test_two_candidates_are_exact_negatives_and_duplicates_tie(ours_small, ref_small):
    prompts, candidates = crafted_cases()
    for row, s in enumerate(ours_small.score(prompts, candidates)):
        if len(s) == 2:
            assert s[0] == -s[1]
        if candidates[row][-1] == candidates[row][0]:
            ranks = ranks_from_scores(s)
            assert s[0] == s[-1] and ranks[0] == ranks[-1]


def test_real_rows_at_real_limits(tiny_pairrm_dir, train_rows, monkeypatch):
    """PairRM's own limits (1224/412) on real UltraFeedback rows: long prompts and long answers truncated."""
    by_prompt = sorted(train_rows, key=lambda r: -len(r["prompt"]))
    by_answer = sorted(by_prompt[2:], key=lambda r: -len(r["chosen"][1]["content"]))
    rows = by_prompt[:2] + by_answer[:2]
    prompts = [r["prompt"] for r in rows]
    candidates = [[r["chosen"][1]["content"], r["rejected"][1]["content"]] for r in rows]
    candidates[-1].append("Short answer.")
    ours = PairRM.load(tiny_pairrm_dir, device="cpu")
    ref = BlenderScorer.load(tiny_pairrm_dir, device="cpu")
    assert (ours.source_maxlength, ours.candidate_maxlength) == (1224, 412)
    our_ids = assert_same_as_llm_blender(ours, ref, prompts, candidates, monkeypatch)
    segments = [split_pass(ids.tolist(), ours) for row in our_ids for ids in row.values()]
    assert any(len(src) == 1224 for src, _, _ in segments)  # a prompt cut at the source limit
    budgets = [(412 + (1224 - len(src)) // 2, len(c1)) for src, c1, _ in segments]
    assert any(budget > 412 and used == budget for budget, used in budgets)  # an answer cut at its raised budget
    assert max(sum(map(len, seg)) for seg in segments) <= 1224 + 2 * 412


def test_transformers_layout_through_llm_blender_classes(tmp_path, monkeypatch):
    """A PairRM-hf-layout checkpoint: llm-blender's classes read it, and the engine agrees."""
    from repro.scorers.tiny import build_tiny_pairrm

    folder = build_tiny_pairrm(tmp_path / "hf", layout="transformers", seed=3)
    prompts, candidates = crafted_cases(n_prompts=8, seed=11)
    ours = PairRM.load(folder, device="cpu", source_maxlength=S_MAX, candidate_maxlength=C_MAX)
    ref = BlenderScorer.load(folder, device="cpu", source_maxlength=S_MAX, candidate_maxlength=C_MAX)
    assert ours.info["layout"] == ref.info["layout"] == "transformers"
    assert_same_as_llm_blender(ours, ref, prompts, candidates, monkeypatch)


def test_compare_and_rank_agree_with_llm_blender(ours_small, ref_small):
    prompts, candidates = crafted_cases(n_prompts=10, seed=5)
    a, b = [c[0] for c in candidates], [c[1] for c in candidates]
    np.testing.assert_allclose(ours_small.compare(prompts, a, b), ref_small.compare(prompts, a, b), rtol=0, atol=1e-5)
    assert [r.tolist() for r in ours_small.rank(prompts, candidates)] == \
        [r.tolist() for r in ref_small.rank(prompts, candidates)]


def test_compare_checks_its_inputs_as_score_does(ref_small):
    """backend='llm-blender' compared a string's letters (compare(P, 'ab', 'cd')) and raised a raw TypeError for a
    generator as prompts."""
    with pytest.raises(DataError, match="candidates_a is str"):
        ref_small.compare(["p1", "p2"], "ab", ["c", "d"])
    with pytest.raises(DataError, match=r"prompts is generator, .*wrap it in list\(\)"):
        ref_small.compare((p for p in ["p1"]), ["a"], ["b"])
    prompts, candidates = crafted_cases(n_prompts=4, seed=3)
    a, b = np.array([c[0] for c in candidates]), np.array([c[1] for c in candidates])
    np.testing.assert_array_equal(ref_small.compare(np.array(prompts), a, b), ref_small.compare(prompts, list(a),
                                                                                               list(b)))


def test_settings_are_checked_as_the_engine_checks_them(ref_small):
    """batch_tokens='x' (score) and 0 (compare) gave scores here, where the engine refuses them; compare took
    return_matrix and any other keyword without a word."""
    from repro.errors import ParameterError

    with pytest.raises(ParameterError, match=r"batch_tokens: Input should be a valid integer.* \(got 'x'\)"):
        ref_small.score(["hi"], [["a", "b"]], batch_tokens="x")
    with pytest.raises(ParameterError, match=r"batch_tokens: must be >= 1 \(got 0\)"):
        ref_small.compare(["hi"], ["a"], ["b"], batch_tokens=0)
    with pytest.raises(TypeError, match="return_matrix"):
        ref_small.compare(["hi"], ["a"], ["b"], return_matrix=True)
    with pytest.raises(DataError, match=r"candidates_b\[0\] is NoneType"):
        ref_small.compare(["hi"], ["a"], [None])
    done = []
    np.testing.assert_array_equal(ref_small.compare(["hi"], ["a"], ["b"], batch_tokens=2048.0, progress=done.append),
                                  ref_small.compare(["hi"], ["a"], ["b"]))
    assert done == [1]


def test_progress_true_is_a_bar_here_too(ref_small, capsys):
    """progress=True, as score_candidates takes it, raised "TypeError: 'bool' object is not callable" here too."""
    from repro.errors import ParameterError

    prompts, candidates = crafted_cases(n_prompts=3, seed=4)
    expected = ref_small.score(prompts, candidates)
    capsys.readouterr()
    assert all(np.array_equal(x, y) for x, y in zip(ref_small.score(prompts, candidates, progress=True), expected))
    assert ref_small.compare(["hi"], ["a"], ["b"], progress=True).shape == (1,)
    err = capsys.readouterr().err
    assert "PairRM scoring (llm-blender): 100% (3/3 prompts)" in err and "100% (1/1 prompt)" in err, err
    with pytest.raises(ParameterError, match=r"^progress=1 is not a function"):
        ref_small.score(prompts, candidates, progress=1)
    with pytest.raises(ParameterError, match=r"^progress='yes' is not a function: give True \(a progress bar\)"):
        ref_small.compare(["hi"], ["a"], ["b"], progress="yes")


def test_transformers5_tokenizer_without_the_restored_table_loses_full_width_text(tiny_pairrm_dir):
    """Why the backend restores sentencepiece's table: transformers 5 alone maps full-width letters to [UNK]."""
    raw = BlenderScorer.load(tiny_pairrm_dir, device="cpu", restore_normalizer=False)
    fixed = BlenderScorer.load(tiny_pairrm_dir, device="cpu")
    assert (raw.info["normalization"], fixed.info["normalization"]) == ("transformers-5", "sentencepiece")
    text = "Ｆｕｌｌ－ｗｉｄｔｈ ＡＢＣ and ﬁne"
    unk = raw.blender.ranker_tokenizer.unk_token_id
    assert raw.blender.ranker_tokenizer.encode(text).count(unk) > fixed.blender.ranker_tokenizer.encode(text).count(unk)


def test_shim_is_installed_only_when_the_backend_is_used():
    code = (
        "import sys\n"
        "import repro.scorers.pairrm, repro.cli.score, repro.scorers.blender_compat\n"
        "import transformers.utils.hub as hub\n"
        "from transformers.tokenization_utils_base import PreTrainedTokenizerBase as T\n"
        "assert not hasattr(hub, 'TRANSFORMERS_CACHE') and not hasattr(T, 'batch_encode_plus')\n"
        "try:\n"
        "    import llm_blender\n"
        "    print('IMPORTED-WITHOUT-SHIM')\n"
        "except ImportError as exc:\n"
        "    print('FAILS-WITHOUT-SHIM', 'TRANSFORMERS_CACHE' in str(exc))\n"
        "for name in [m for m in sys.modules if m.startswith('llm_blender')]:\n"
        "    del sys.modules[name]\n"
        "print(repro.scorers.blender_compat.install_transformers5_shim())\n"
        "import llm_blender\n"
        "print('IMPORTED', llm_blender.Blender.__name__)\n"
        "print(repro.scorers.blender_compat.install_transformers5_shim())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.strip().splitlines()
    assert lines[0] == "FAILS-WITHOUT-SHIM True"
    assert lines[1] == "['transformers.utils.hub.TRANSFORMERS_CACHE', 'PreTrainedTokenizerBase.batch_encode_plus']"
    assert lines[2] == "IMPORTED Blender" and lines[3] == "[]"  # idempotent


def test_restored_batch_encode_plus_is_the_batch_call(tiny_pairrm_dir):
    from transformers import AutoTokenizer

    install_transformers5_shim()
    tok = AutoTokenizer.from_pretrained(str(tiny_pairrm_dir))
    texts = ["<|source|>hello there", "short", ""]
    got = tok.batch_encode_plus(texts, max_length=6, padding="max_length", truncation=True, return_tensors="pt")
    for row, text in enumerate(texts):
        ids = tok.encode(text, max_length=6, truncation=True)
        assert got["input_ids"][row].tolist() == ids + [tok.pad_token_id] * (6 - len(ids))
        assert got["attention_mask"][row].tolist() == [1] * len(ids) + [0] * (6 - len(ids))


def test_backend_refuses_precisions_llm_blender_does_not_have(tiny_pairrm_dir):
    from repro.errors import ParameterError

    with pytest.raises(ParameterError, match="bf16"):
        BlenderScorer.load(tiny_pairrm_dir, device="cpu", dtype="bf16")
    with pytest.raises(ParameterError, match="fp16"):
        BlenderScorer.load(tiny_pairrm_dir, device="cpu", dtype="fp16")


# -- the checkpoint's own limits (issue 11 item 2) ---------------------------------------------------
@pytest.fixture(scope="module")
def own_limits_dir(tmp_path_factory):
    """A checkpoint whose RankerConfig holds limits other than 1224/412."""
    from repro.scorers.tiny import build_tiny_pairrm

    return build_tiny_pairrm(tmp_path_factory.mktemp("own-limits") / "pairrm", seed=4, source_maxlength=64,
                             candidate_maxlength=32)


def blender_rank(ref: BlenderScorer, prompts, candidates, **limits) -> list[np.ndarray]:
    """llm-blender's own `Blender.rank(..., batch_size=1)` scores, `limits` passed to it as given (none: none)."""
    scores: list = [None] * len(prompts)
    for rows in ref.call_order(candidates):
        out = ref.blender.rank([prompts[r] for r in rows], [list(candidates[r]) for r in rows], return_scores=True,
                               batch_size=1, disable_tqdm=True, **limits)
        for r, s in zip(rows, out):
            scores[r] = np.asarray(s, dtype=np.float64)
    return scores


def repro_score(tmp_path, model, prompts, candidates, *flags) -> list[list[float]]:
    import json

    from repro.cli import main

    tmp_path.mkdir(parents=True, exist_ok=True)
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text("".join(json.dumps({"prompt": p, "candidates": c}) + "\n" for p, c in zip(prompts, candidates)))
    assert main(["score", "--model", str(model), "--input", str(src), "--output", str(out), "--device", "cpu",
                 *flags]) == 0
    return [json.loads(line)["scores"] for line in out.read_text().splitlines()]


def assert_same_scores_and_ranks(got, want):
    for row, (a, b) in enumerate(zip(got, want)):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-5, err_msg=f"row {row}")
        assert ranks_from_scores(a).tolist() == ranks_from_scores(b).tolist(), row


def test_without_limits_repro_score_uses_the_checkpoints_own_as_llm_blender_does(own_limits_dir, tmp_path):
    prompts, candidates = crafted_cases(n_prompts=20, seed=13)
    ref = BlenderScorer.load(own_limits_dir, device="cpu")
    # llm-blender itself read 64/32 from the config (nothing was passed to it)
    assert (ref.blender.ranker_config.source_maxlength, ref.blender.ranker_config.candidate_maxlength) == (64, 32)
    want = blender_rank(ref, prompts, candidates)
    got = repro_score(tmp_path / "own", own_limits_dir, prompts, candidates)
    assert_same_scores_and_ranks(got, want)
    # explicit limits override the checkpoint's, in repro as in llm-blender
    want_explicit = blender_rank(ref, prompts, candidates, source_max_length=1224, candidate_max_length=412)
    got_explicit = repro_score(tmp_path / "explicit", own_limits_dir, prompts, candidates,
                               "--source-maxlength", "1224", "--candidate-maxlength", "412")
    assert_same_scores_and_ranks(got_explicit, want_explicit)
    # the two settings really differ on these texts (so neither comparison holds by accident)
    assert max(np.abs(np.subtract(a, b)).max() for a, b in zip(got, got_explicit)) > 1e-3
    assert any(ranks_from_scores(a).tolist() != ranks_from_scores(b).tolist() for a, b in zip(got, got_explicit))
