"""A recipe's second, test split (issue 23): test prompts of another source split built and scored as the train rows
are, or a seeded sample of the built train rows (SPPO's); SPPO's 7-score rows (the original pair ranked first, never
paired); and what reads such a dataset: the manifest, the card in both languages, 02_analyze's split, `to_trl`."""

from __future__ import annotations

import json
import re
from pathlib import Path

import datasets
import numpy as np
import pytest
import yaml

from repro.analysis import report
from repro.cli import main
from repro.card.facts import gather_facts
from repro.card.publish import write_card
from repro.construct import stages
from repro.errors import DataError, ParameterError
from repro.exporters import seed_view, sppo_probabilities
from repro.formats import to_trl
from repro.manifest import Manifest
from repro.parameters import AnalyzeParams, CardParams, ConstructParams, GenerationParams, build
from repro.paths import RunDir
from repro.scorers import load_scorer

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "ultrafeedback"
STAND_IN = dict(scorer_model="builtin:tiny-pairrm", device="cpu", dtype="fp32", batch_tokens=2048)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def rows_of(split: str) -> list[dict]:
    return [json.loads(line) for line in (FIXTURES / f"{split}.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    """The fixture's real UltraFeedback rows as a hub-layout folder with splits train_prefs and test_prefs."""
    folder = tmp_path_factory.mktemp("uf")
    for split in ("train_prefs", "test_prefs"):
        (folder / "data").mkdir(exist_ok=True)
        datasets.Dataset.from_list(rows_of(split)).to_parquet(str(folder / "data" / f"{split}-00000-of-00001.parquet"))
    return folder


def construct(p: ConstructParams, generation: GenerationParams | None = None) -> stages.Context:
    """01_construct's cells, in order, on `p` (no generation unless `generation`)."""
    ctx = stages.begin(p, generation)
    rows = stages.generate(ctx, stages.slice_rows(ctx, stages.load(ctx)), generation)
    cs = stages.candidates(ctx, rows)
    pairs = stages.build(ctx, rows, cs, stages.score(ctx, cs))
    stages.write(ctx, pairs, test=stages.build_test(ctx, generation, pairs))
    return ctx


def split(run: Path, name: str) -> datasets.Dataset:
    return datasets.Dataset.from_parquet([str(f) for f in sorted((run / "dataset" / "data").glob(f"{name}-*.parquet"))])


def test_a_test_split_from_another_source_split_is_built_scored_and_described_as_the_train_split(source, tmp_path):
    run = tmp_path / "run"
    construct(ConstructParams(run_dir=str(run), source=str(source), limit=4, candidate_columns=[],
                              include_original_pair=True, output_format="snorkel", keep_all_candidates=True,
                              test_split="test_prefs", test_rows=3, **STAND_IN))
    train, test = split(run, "train_iteration_1"), split(run, "test_iteration_1")
    assert len(train) == 4 and len(test) == 3
    originals = rows_of("test_prefs")[:3]  # the first test_rows rows of test_prefs, in order
    assert test["prompt_id"] == [r["prompt_id"] for r in originals]
    # scored as the train rows are: the same scorer on the same candidates (the original pair) gives these scores
    candidates = [[r["chosen"][-1]["content"], r["rejected"][-1]["content"]] for r in originals]
    expected = load_scorer("builtin:tiny-pairrm", device="cpu", dtype="fp32").score(
        [r["prompt"] for r in originals], candidates)
    assert test["all_generated_responses"] == candidates
    np.testing.assert_allclose(np.array(test["all_rm_scores"]), np.array(expected), rtol=0, atol=1e-6)
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["dataset"]["split"] == "train_iteration_1" and manifest["counts"]["kept"] == 4
    assert manifest["counts"]["test_kept"] == 3 and manifest["counts"]["test_source"] == len(rows_of("test_prefs"))
    assert {k: manifest["test_split"][k] for k in ("split", "num_examples", "from", "source_split")} == {
        "split": "test_iteration_1", "num_examples": 3, "from": "source_split", "source_split": "test_prefs"}
    assert {"test_candidates", "test_score", "test_pairs"} <= set(manifest["stages"])
    assert any(Path(f).name.startswith("test_iteration_1-") for f in manifest["outputs"])
    assert (run / "work" / "test" / "scoring").is_dir()  # its own resumable chunks, apart from the train split's
    # 02_analyze reads the train split; the card lists both splits with their rows, in both languages
    data = report.load(AnalyzeParams(run_dir=str(run)))
    assert data.split == "train_iteration_1" and data.n_rows == 4
    card = write_card(gather_facts(CardParams(run_dir=str(run)))).read_text(encoding="utf-8")
    assert "4 rows in split `train_iteration_1`, 3 rows in split `test_iteration_1`" in card
    assert "`train_iteration_1` 划分 4 行、`test_iteration_1` 划分 3 行" in card
    assert "Split `test_iteration_1` holds 3 rows built from the source's split `test_prefs`" in card
    assert "划分 `test_iteration_1` 含 3 行，由源数据的划分 `test_prefs` 构建" in card
    assert "the statistics describe" not in card and "统计结果仅描述" not in card  # none: 02_analyze did not run
    report.analyze(AnalyzeParams(run_dir=str(run), bootstrap_resamples=100))
    analysed = write_card(gather_facts(CardParams(run_dir=str(run)))).read_text(encoding="utf-8")
    assert "the statistics describe split `train_iteration_1` only." in analysed and "统计结果仅描述" in analysed
    assert "The rows are in split `train_iteration_1`." in card
    # the published layout: load_dataset sees two splits (the card's configs), to_trl converts each
    both = datasets.load_dataset(str(run / "dataset"))
    assert {k: len(v) for k, v in both.items()} == {"train_iteration_1": 4, "test_iteration_1": 3}
    trl = to_trl(both)
    assert {k: len(v) for k, v in trl.items()} == {"train_iteration_1": 4, "test_iteration_1": 3}
    assert trl["test_iteration_1"][0]["prompt"] == [{"content": originals[0]["prompt"], "role": "user"}]


def test_a_test_split_of_the_source_split_is_a_seeded_sample_of_the_built_rows(source, tmp_path):
    def sample(seed: int, name: str) -> tuple[datasets.Dataset, datasets.Dataset]:
        run = tmp_path / name
        construct(ConstructParams(run_dir=str(run), source=str(source), limit=12, candidate_columns=[],
                                  include_original_pair=True, output_format="sppo", keep_all_candidates=True,
                                  test_split="train_prefs", test_rows=5, test_seed=seed, **STAND_IN))
        return split(run, "train"), split(run, "test")

    train, test = sample(0, "a")
    assert len(train) == 12 and len(test) == 5
    rows = {r["prompt_id"]: r for r in train}
    assert all(rows[r["prompt_id"]] == r for r in test)  # whole train rows, as SPPO's train_new.sample(n=500)
    assert sample(0, "b")[1]["prompt_id"] == test["prompt_id"]  # the seed decides which
    assert sample(1, "c")[1]["prompt_id"] != test["prompt_id"]
    card = write_card(gather_facts(CardParams(run_dir=str(tmp_path / "a")))).read_text(encoding="utf-8")
    assert "Split `test` holds 5 rows drawn from those of split `train` (seed 0)" in card
    assert "they are training rows, not held-out ones" in card
    assert "划分 `test` 含 5 行，抽取自划分 `train` 的行（种子 0）" in card



def test_a_sampled_test_splits_errors_name_its_source_rows(tmp_path):
    # a seeded sample of test_prefs named a bad row by its place in the sample ("source row 1"), as if of train_prefs
    p = ConstructParams(run_dir=str(tmp_path / "run"), source=str(tmp_path / "uf"), part_stop=2, candidate_columns=[],
                        include_original_pair=True, test_split="test_prefs", test_rows=5, test_seed=3, **STAND_IN)
    test_rows = rows_of("test_prefs")
    sample = stages.rows_for_test_split(p, len(test_rows))
    assert sample != list(range(5))

    def fails(bad: dict[int, dict], match: str) -> None:
        (tmp_path / "uf" / "data").mkdir(parents=True, exist_ok=True)
        for name, rows in (("train_prefs", rows_of("train_prefs")[:2]),
                           ("test_prefs", [{**r, **bad.get(i, {})} for i, r in enumerate(test_rows)])):
            datasets.Dataset.from_list(rows).to_parquet(str(tmp_path / "uf" / "data" / f"{name}-00000-of-00001.parquet"))
        with pytest.raises(DataError, match=match):
            construct(p.model_copy(update={"run_dir": str(tmp_path / f"run{len(match)}")}))

    bad = sample[2]
    fails({bad: {"rejected": test_rows[bad]["rejected"][:-1] + [{"content": " ", "role": "assistant"}]}},
          rf"source row {bad} of split 'test_prefs' \(from 0; prompt_id {test_rows[bad]['prompt_id']}\), candidate "
          r"'original_rejected' is empty")
    fails({sample[3]: {"prompt_id": test_rows[sample[1]]["prompt_id"]}},
          rf"prompt_id {test_rows[sample[1]]['prompt_id']} appears at source rows {sample[1]} and {sample[3]} of split "
          r"'test_prefs' \(from 0\)")

def test_limit_caps_the_test_rows_and_a_test_split_smaller_than_test_rows_is_refused_before_any_work(source, tmp_path):
    p = ConstructParams(run_dir=str(tmp_path / "run"), source=str(source), limit=2, candidate_columns=[],
                        include_original_pair=True, test_split="test_prefs", test_rows=50, **STAND_IN)
    construct(p)
    assert len(split(tmp_path / "run", "test_prefs")) == 2  # seed format: train_prefs beside test_prefs
    big = p.model_copy(update={"run_dir": str(tmp_path / "big"), "limit": None, "test_rows": 1000})
    ctx = stages.begin(big)
    with pytest.raises(DataError, match=r"test_rows=1000 but split 'test_prefs' of source .* holds 100 rows: lower "
                                        r"test_rows"):
        stages.load(ctx)
    assert not (tmp_path / "big" / "work").exists()
    with pytest.raises(DataError, match=r"has no split 'validation'; it has \['test_prefs', 'train_prefs'\]\. Set "
                                        r"test_split to one of those"):
        stages.load(stages.begin(big.model_copy(update={"test_split": "validation", "test_rows": 5})))


def test_sppo_published_rows_rank_the_original_pair_first_but_pair_and_list_the_generated_only(tmp_path):
    run = tmp_path / "run"
    rows = rows_of("train_prefs")[:3]
    generation = GenerationParams(policy_model="builtin:tiny-policy", n_candidates=3, generate_reference=False,
                                  max_new_tokens=6, generation_device="cpu", candidate_seeds=[0, 50, 100],
                                  temperature=1.0, generation_chunk_size=8)
    construct(ConstructParams(run_dir=str(run), source=str(FIXTURES / "train_prefs.jsonl"), limit=3, generate=True,
                              candidate_columns=["resp0", "resp1", "resp2"], include_original_pair=True,
                              original_pair_position="first_scored_only", output_format="sppo",
                              keep_all_candidates=True, empty_candidates="drop", **STAND_IN), generation)
    out = split(run, "train")
    assert [c for c in out.column_names if c.startswith("generate_")] == ["generate_0", "generate_1", "generate_2"]
    generated = [[row[f"generate_{i}"][1]["content"] for i in range(3)] for row in out]
    originals = [[r["chosen"][-1]["content"], r["rejected"][-1]["content"]] for r in rows]
    # all 7 (here 2 + 3) ranked together, originals first: the scores PairRM gives those lists
    ranked = load_scorer("builtin:tiny-pairrm", device="cpu", dtype="fp32").score(
        out["prompt"], [o + g for o, g in zip(originals, generated)])
    for row, generated, expected in zip(out, generated, ranked):
        np.testing.assert_allclose(row["rm_scores"], expected, rtol=0, atol=1e-5)  # fp32, batched otherwise
        last = np.array(row["rm_scores"][-3:])  # compute_prob.py: rm_scores[-5:], argmax / argmin
        assert row["chosen"][1]["content"] == generated[int(np.argmax(last))]
        assert row["rejected"][1]["content"] == generated[int(np.argmin(last))]
        # compute_prob.py's from_ranks: probability over score[0..pairs-1], the FIRST ones (here the 2 originals
        # and the first generated), indexed by the argmax / argmin of the last ones; it was over the last ones
        p = sppo_probabilities(row["rm_scores"][:3])
        np.testing.assert_allclose(row["probability"], p, rtol=0, atol=1e-12)
        assert row["chosen_probs"] == pytest.approx(p[np.argmax(last)][np.argmin(last)])
        assert row["chosen_probs_win"] == pytest.approx(p[np.argmax(last)].sum() / 3)
    # 04_compare and to_trl read it back with the generated scores (the last ones)
    view = seed_view(out)
    assert view["score_chosen"] == [max(r[-3:]) for r in out["rm_scores"]]
    # the card names the generating policy inside the list of candidates, not in parentheses within parentheses
    card = write_card(gather_facts(CardParams(run_dir=str(run)))).read_text(encoding="utf-8")
    # by count and policy: the generated texts' work columns (resp0 ..) are not in the published table
    assert "candidates (3 responses generated by `builtin:tiny-policy`; the source's original " \
           "`chosen`/`rejected` responses) were scored" in card
    assert "（由 `builtin:tiny-policy` 生成的 3 个回复；源数据原有的" in card
    assert "`resp0`" not in card  # (the parameters table lists candidate_columns)
    # what `probability` and `chosen_probs` mean in a 7-score row
    assert ("then the 3 generated ones' (as SPPO's published rows hold 7 scores for 5 responses): as `compute_prob.py` "
            "reads such a row, `probability` is over the first 3 scores (the two originals and the first generated "
            "response) and "
            "is indexed by the generated responses' positions, so `chosen_probs` is not the probability that") in card
    assert "再列出 3 条生成回复的得分" in card and "基于前 3 个得分（两条原始回复与前 1 条生成回复），并按生成回复的位置索引" in card
    # the source's reference_response among the candidates is not said to be generated (generate_reference false)
    run.joinpath("manifest.json").write_text(run.joinpath("manifest.json").read_text().replace(
        '"include_reference": false', '"include_reference": true'))
    card = write_card(gather_facts(CardParams(run_dir=str(run)))).read_text(encoding="utf-8")
    assert "(3 responses generated by `builtin:tiny-policy`; `reference_response`; the " in card
    # a generated reference is the policy's greedy response
    run.joinpath("manifest.json").write_text(run.joinpath("manifest.json").read_text().replace(
        '"generate_reference": false', '"generate_reference": true'))
    card = write_card(gather_facts(CardParams(run_dir=str(run)))).read_text(encoding="utf-8")
    assert "(3 responses generated by `builtin:tiny-policy` and its greedy `reference_response`; the " in card
    # SELM's: the greedy reference alone (it said "0 responses generated by ...")
    with Manifest(RunDir(run)).edit() as data:
        data["parameters"]["candidate_columns"] = []
    card = write_card(gather_facts(CardParams(run_dir=str(run)))).read_text(encoding="utf-8")
    assert "(`reference_response`, the greedy response of `builtin:tiny-policy`; the " in card
    assert "0 responses" not in card
    assert "（`builtin:tiny-policy` 贪心解码生成的 `reference_response`；" in card
    assert ("> **Stand-in candidates.** `reference_response` comes from `builtin:tiny-policy`, a stand-in policy built "
            "offline, not a language model worth imitating. The candidates ranked with it (the source's original "
            "`chosen`/`rejected` responses) are the source's own texts.") in card


@pytest.mark.parametrize("single_file", [True, False])
def test_a_test_split_of_a_single_file_source_is_refused_where_the_parameters_enter(single_file, tmp_path, capsys):
    # it was refused by 01_construct's first stage: after `repro run --check` had said everything was there, and
    # after a kernel had started
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps(r) + "\n" for r in rows_of("train_prefs")[:3]))
    values = {"run_dir": str(tmp_path / "run"), "source": str(rows) if single_file else "demo", "test_rows": 2,
              "test_split": "test_prefs", **STAND_IN}
    refusal = (r"\(parameters\): test_split='test_prefs', but source .* is a single file with no splits: its test rows "
               r"would repeat the train rows")
    with pytest.raises(ParameterError, match=refusal):
        build(ConstructParams, values)
    params = tmp_path / "p.yaml"
    params.write_text(yaml.safe_dump(values))
    assert main(["run", str(params), "--check"]) == 2
    assert re.search(refusal, capsys.readouterr().err)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("output_format", ["seed", "sppo", "snorkel", "rlhflow", "selm"])
def test_the_card_describes_every_column_this_project_wrote(output_format, source, tmp_path):
    # SPPO's generate_i, probability, rm_scores, chosen_probs*, Snorkel's all_*, RLHFlow's responses, rewards, margin
    # and a further scorer's candidate_scores_<name> were "no description is known", though the run wrote them
    run = tmp_path / "run"
    more = [{"name": "llama_rm", "model": "builtin:tiny-reward-llama", "dtype": "fp32"}] \
        if output_format == "seed" else []
    construct(ConstructParams(run_dir=str(run), source=str(source), limit=3, candidate_columns=[],
                              include_original_pair=True, output_format=output_format, keep_all_candidates=True,
                              scorers=more, **STAND_IN))
    card = write_card(gather_facts(CardParams(run_dir=str(run)))).read_text(encoding="utf-8")
    features = datasets.load_dataset(str(run / "dataset"), split="train" if output_format in ("sppo", "rlhflow")
                                     else None)
    columns = features.column_names if isinstance(features, datasets.Dataset) else \
        next(iter(features.values())).column_names
    for column in columns:
        assert f"| `{column}` |" in card
    assert "no description is known" not in card and "无已知说明" not in card
    wanted = {"sppo": ["(SPPO's `generate_0`)", "1 / (1 + exp(s_j − s_i))", "SPPO 的 `generate_0`"],
              "snorkel": ["in the order of `all_generated_responses`", "顺序与 `all_generated_responses` 一致"],
              "rlhflow": ["The preferred response's text.", "`rewards` of `chosen` − `rewards` of `rejected`"],
              "seed": ["by the further scorer `llama_rm`", "其他评分模型 `llama_rm`"], "selm": []}
    for words in wanted[output_format]:
        assert words in card
