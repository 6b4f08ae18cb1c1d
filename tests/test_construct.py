"""The construction stages end to end, on real UltraFeedback rows scored by the tiny stand-in ranker."""

import json

import datasets
import numpy as np
import pytest

from repro.construct import stages as construct
from repro.dataset_io import SEED_COLUMNS, SEED_FEATURES, prompt_id_of
from repro.errors import DataError, ParameterError
from repro.card.facts import gather_facts
from repro.card.publish import write_card
from repro.parameters import CardParams, ConstructParams, GenerationParams, build


def _params(tmp_path, **kw):
    base = dict(run_dir=str(tmp_path / "run"), scorer_model="builtin:tiny-pairrm", device="cpu", dtype="fp32",
                chunk_size=64)
    base.update(kw)
    return build(ConstructParams, base)


def _construct(p, generation=None):
    ctx = construct.begin(p)
    ds = construct.slice_rows(ctx, construct.load(ctx))
    ds = construct.generate(ctx, ds, generation)
    cs = construct.candidates(ctx, ds)
    scores = construct.score(ctx, cs)
    out = construct.build(ctx, ds, cs, scores)
    construct.write(ctx, out)
    return ctx, out


@pytest.fixture(scope="module")
def real_run(tmp_path_factory, sample_dir):
    tmp = tmp_path_factory.mktemp("real")
    src = tmp / "rows.jsonl"
    with open(src, "w") as f:
        for name in ("train_prefs.jsonl", "test_prefs.jsonl"):
            f.write((sample_dir / name).read_text())
    # real data has empty responses: they are left out of the ranking (and the row dropped as too few)
    # short length limits keep 300 prompts fast on 2 cores; truncation is still exercised (texts are longer)
    p = _params(tmp, source=str(src), candidate_columns=[], include_original_pair=True, keep_all_candidates=True,
                chunk_size=128, empty_candidates="drop", source_maxlength=96, candidate_maxlength=64,
                batch_tokens=8192)
    return src, _construct(p)


def test_real_rows_integration(real_run):
    src, (ctx, out) = real_run
    rows = [json.loads(line) for line in src.read_text().splitlines()]
    pairs = [(r["chosen"][-1]["content"], r["rejected"][-1]["content"]) for r in rows]
    texts = [{t for t in pair if t.strip()} for pair in pairs]
    too_few = sum(len(t) < 2 for t in texts)
    emptied = sum(len(t) < 2 and not all(x.strip() for x in pair) for t, pair in zip(texts, pairs))
    assert len(rows) == 300 and too_few >= 4  # 4 identical pairs in train alone, plus empty responses
    counts = ctx.manifest.read()["counts"]
    assert counts["source"] == 300 and counts["sliced"] == 300
    assert ctx.manifest.read()["stages"]["load"]["split"] is None  # one file: no split was read (source_split's
    # default, train_prefs, had been recorded, and the card named it)
    assert counts["dropped_too_few_candidates"] == too_few - emptied
    assert counts["dropped_fewer_than_two_nonempty_candidates"] == emptied > 0
    assert counts["empty_candidates_dropped"] == sum(not x.strip() for pair in pairs for x in pair)
    assert counts["kept"] == len(out) == 300 - too_few
    assert out.column_names == SEED_COLUMNS + ["candidates", "candidate_scores"]
    kept = {r["prompt_id"]: r for r in rows}
    for row in out.select(range(0, len(out), 37)):
        src_row = kept[row["prompt_id"]]
        assert row["prompt_id"] == prompt_id_of(row["prompt"]) == src_row["prompt_id"]
        assert row["score_chosen"] >= row["score_rejected"]
        # two candidates: PairRM's scores are antisymmetric and sum to zero
        assert sum(row["candidate_scores"]) == pytest.approx(0.0, abs=1e-9)
        assert row["score_chosen"] == pytest.approx(-row["score_rejected"], abs=1e-9)
        texts = {src_row["chosen"][-1]["content"], src_row["rejected"][-1]["content"]}
        assert {row["chosen"][1]["content"], row["rejected"][1]["content"]} == texts
        assert row["chosen"][0] == {"content": row["prompt"], "role": "user"}
    scores = np.array(out["score_chosen"])
    assert np.isfinite(scores).all() and np.ptp(scores) > 0  # the stand-in gives real, varied scores


def test_written_dataset_loads_with_the_seed_features(real_run):
    _, (ctx, out) = real_run
    files = ctx.run.shards()
    assert [f.name for f in files] == ["train_prefs-00000-of-00001.parquet"]
    loaded = datasets.load_dataset(str(ctx.run.dataset), split="train_prefs")
    assert len(loaded) == len(out)
    assert list(loaded.features)[:8] == SEED_COLUMNS
    assert {k: loaded.features[k] for k in SEED_COLUMNS} == dict(SEED_FEATURES)
    manifest = ctx.manifest.read()
    assert manifest["scorer"]["stand_in"] is True
    assert manifest["outputs"]["dataset/data/train_prefs-00000-of-00001.parquet"]["sha256"]


def test_empty_candidate_is_an_error_by_default(tmp_path, real_run):
    src, _ = real_run
    p = _params(tmp_path, source=str(src), candidate_columns=[], include_original_pair=True)
    ctx = construct.begin(p)
    with pytest.raises(DataError, match=r"source row \d+ \(from 0; prompt_id \w+\), candidate 'original_\w+' is empty"):
        construct.candidates(ctx, construct.slice_rows(ctx, construct.load(ctx)))


def test_a_source_that_does_not_exist_writes_nothing(tmp_path):
    # 01_construct in JupyterLab with a mistyped source: the run directory, its manifest (failed) and its lock were
    # made before the load stage found nothing there
    (tmp_path / "train_prefs_1000.jsonl").write_text("")
    p = _params(tmp_path, source=str(tmp_path / "train_prefs_100.jsonl"))
    with pytest.raises(DataError, match=r"source '.*train_prefs_100.jsonl' is neither an existing file or folder nor "
                                        rf"a hub dataset id \(owner/name\)\. Did you mean '{tmp_path}/train_prefs_1000.jsonl'\?"):
        construct.begin(p)
    assert not (tmp_path / "run").exists()


def test_a_device_this_machine_lacks_is_refused_where_the_notebook_begins(tmp_path, monkeypatch):
    # 01_construct on its own (JupyterLab) with device='cuda' and no GPU loaded, sliced and generated (hours with a
    # real policy) before scoring said so; `repro run`'s preflight had been the only earlier check
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ParameterError, match=r"device='cuda' was asked for but no CUDA GPU is visible"):
        construct.begin(_params(tmp_path, source="demo", device="cuda"))
    p = _params(tmp_path, source="demo", generate=True, candidate_columns=["resp0", "resp1"])
    generation = build(GenerationParams, {"policy_model": "builtin:tiny-policy", "n_candidates": 2,
                                          "generation_device": "cuda:1"})
    with pytest.raises(ParameterError, match=r"generation_device='cuda:1' was asked for but no CUDA GPU"):
        construct.begin(p, generation)
    assert not (tmp_path / "run").exists()


def test_a_scorer_option_of_another_kind_of_scorer_is_refused_where_the_notebook_begins(tmp_path):
    # scorer_options={chat_template: x} on PairRM passed `repro run --check` and the notebook's start, and failed at
    # scoring: after generation (params/demo_generate.yaml: the whole generate stage wasted)
    with pytest.raises(ParameterError, match=r"Scorer option chat_template does not apply to a pairrm scorer"):
        construct.begin(_params(tmp_path, source="demo", scorer_options={"chat_template": "x"}))
    extra = [{"name": "b", "model": "builtin:tiny-reward-llama", "options": {"fast_attention": True}}]
    with pytest.raises(ParameterError, match=r"fast_attention does not apply to a sequence_classifier scorer"):
        construct.begin(_params(tmp_path, source="demo", scorers=extra, keep_all_candidates=True))
    # PairRM's limit in a sequence classifier's options (it was accepted and recorded, and changed nothing); a limit
    # given twice (it failed at scoring, after generation)
    with pytest.raises(ParameterError, match=r"source_maxlength does not apply to a sequence_classifier scorer"):
        construct.begin(_params(tmp_path, source="demo", scorer_model="builtin:tiny-reward-llama",
                                scorer_options={"source_maxlength": 100}))
    with pytest.raises(ParameterError, match=r"source_maxlength is given twice \(200 and 100 in the scorer options\)"):
        construct.begin(_params(tmp_path, source="demo", scorer_options={"source_maxlength": 100},
                                source_maxlength=200))
    assert not (tmp_path / "run").exists()
    construct.begin(_params(tmp_path, source="demo", scorer_options={"fast_attention": False, "source_maxlength": 64}))


def test_missing_candidate_column_is_a_clear_error(tmp_path):
    p = _params(tmp_path, source="demo", candidate_columns=["resp0", "answer"])
    ctx = construct.begin(p)
    with pytest.raises(DataError, match=r"lacks column \['answer'\].*candidate_columns"):
        construct.load(ctx)
    assert ctx.manifest.read()["status"] == "failed"


def test_a_source_without_what_messages_and_candidate_columns_ask_is_refused_at_load(tmp_path, train_rows):
    # messages: source without a messages column failed in the pairs stage, after the whole scoring pass; an H4-shaped
    # source (chosen/rejected lists, no resp*) was told only of candidate_columns and generate
    p = _params(tmp_path, source="demo", messages="source")
    with pytest.raises(DataError, match=r"lacks column \['messages'\].*Set messages: chosen"):
        construct.load(construct.begin(p))
    h4 = tmp_path / "h4.jsonl"
    h4.write_text("".join(json.dumps({k: r[k] for k in ("prompt", "prompt_id", "chosen", "rejected")}) + "\n"
                          for r in train_rows[:3]))
    p = _params(tmp_path / "b", source=str(h4))
    with pytest.raises(DataError, match=r"lacks columns \['resp0', .*This source has chosen/rejected "
                                        r"responses: candidate_columns: \[\] with include_original_pair: true"):
        construct.load(construct.begin(p))


def test_slice_outside_the_data(tmp_path):
    p = _params(tmp_path, source="demo", part_start=0, part_stop=500)
    ctx = construct.begin(p)
    with pytest.raises(DataError, match="outside the source"):
        construct.slice_rows(ctx, construct.load(ctx))


def test_demo_with_all_candidates_sums_to_zero(tmp_path):
    p = _params(tmp_path, source="demo", candidate_columns=["resp0", "resp1", "resp2", "resp3"],
                keep_all_candidates=True, limit=12)
    ctx, out = _construct(p)
    for row in out:
        assert len(row["candidates"]) in (3, 4) or len(set(row["candidates"])) < len(row["candidates"])
        assert sum(row["candidate_scores"]) == pytest.approx(0.0, abs=1e-9)
        assert row["score_chosen"] == max(row["candidate_scores"])
        assert row["score_rejected"] == min(row["candidate_scores"])



def rlhflow_pair(choose_type: str, rewards: list[float], responses: list[str], length_penalty: float):
    """RLHFlow/Online-RLHF dpo_iteration/run_dpo.py `prepare_data`: a row's (chosen, rejected), None for a tie."""
    if choose_type == "random":
        a, b = 0, 1
    elif choose_type == "max_random":
        a = int(np.argmax(rewards))
        b = 1 if a == 0 else 0
    elif choose_type == "max_max":
        order = np.argsort(rewards)
        a, b = int(order[-1]), int(order[-2])
    else:
        r = [s - (length_penalty if choose_type == "max_min_p" else 0) * len(t) for s, t in zip(rewards, responses)]
        a, b = int(np.argmax(r)), int(np.argmin(r))
    return None if rewards[a] == rewards[b] else (a, b) if rewards[a] > rewards[b] else (b, a)


def test_the_manifest_names_rlhflow_choose_type_only_where_the_pairs_are_its(tmp_path):
    # every run recorded an RLHFlow choose_type: "max_random" for best_random, whose draw (selection_seed) is not
    # run_dpo.py's fixed candidate 0 (or 1), "max_min" with the seed's ties (the last of tied lowest scores, ties kept)
    p = _params(tmp_path, source="demo", candidate_columns=["resp0", "resp1", "resp2", "resp3"],
                keep_all_candidates=True, limit=12, length_penalty=0.002)
    ctx = construct.begin(p)
    ds = construct.slice_rows(ctx, construct.load(ctx))
    cs = construct.candidates(ctx, ds)
    scores = construct.score(ctx, cs)
    rlhflow = dict(lowest_tie="first", ties="drop")
    for settings, name, claimed in [
            (dict(selection="best_worst", **rlhflow), "max_min", "max_min"),
            (dict(selection="best_worst_length_penalised", **rlhflow), "max_min_p", "max_min_p"),
            (dict(selection="best_worst"), None, "max_min"),  # the seed's ties
            (dict(selection="best_worst", **rlhflow, min_margin=0.05), None, "max_min"),
            (dict(selection="best_second", **rlhflow), None, "max_max"),
            (dict(selection="best_random", selection_seed=1, **rlhflow), None, "max_random"),
            (dict(selection="random_pair", selection_seed=1, **rlhflow), None, "random")]:
        ctx.params = p.model_copy(update=settings)
        construct.build(ctx, ds, cs, scores)
        assert ctx.manifest.read()["stages"]["pairs"]["rlhflow_choose_type"] == name, settings
        built = {k: (c, r) for k, c, r in ctx.picks}
        theirs = {k: pair for k, (texts, s) in enumerate(zip(cs.candidates, scores))
                  if (pair := rlhflow_pair(claimed, s, texts, 0.002)) is not None}
        if name is not None:
            assert built == theirs and len(built) == 12, settings
        elif settings["selection"] in ("best_random", "random_pair"):  # (these rows hold no tied lowest score or
            assert built != theirs, settings  # repeated best text, which would tell the other three apart)


def test_a_source_of_plain_text_pairs_is_ranked_as_its_hint_says(tmp_path):
    # the hint said "candidate_columns: [] with include_original_pair: true ranks those two", which then failed on
    # chosen / rejected held as texts ("no assistant message")
    src = tmp_path / "pairs.jsonl"
    src.write_text('{"prompt": "p1", "chosen": "good", "rejected": "bad"}\n'
                   '{"prompt": "p2", "chosen": "good2", "rejected": "bad2"}\n')
    with pytest.raises(DataError, match=r"This source has chosen/rejected responses: candidate_columns: \[\] with "
                                        r"include_original_pair: true ranks those two"):
        _construct(_params(tmp_path / "a", source=str(src), candidate_columns=["resp0"]))
    _, out = _construct(_params(tmp_path / "b", source=str(src), candidate_columns=[], include_original_pair=True))
    assert {r["prompt"]: {r["chosen"][-1]["content"], r["rejected"][-1]["content"]} for r in out} == \
        {"p1": {"good", "bad"}, "p2": {"good2", "bad2"}}
    assert all(r["chosen"][0] == {"content": r["prompt"], "role": "user"} for r in out)



@pytest.mark.parametrize("long_prompts", ["skip", "truncate_left"])
def test_long_prompts_skipped_or_cut_are_counted_and_said_on_the_card(long_prompts, tmp_path):
    # a prompt left out by the generation (long_prompts: skip) was in no count ("sliced 3, generated 2") and not on
    # the card, and the card never said that the policy saw the end of a cut prompt only
    rows = [{"prompt": f"Question {i}? " + "Tell me more. " * (60 if i == 1 else 0), "prompt_id": f"id-{i}"}
            for i in range(3)]
    src = tmp_path / "rows.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    values = dict(source=str(src), generate=True, candidate_columns=["resp0", "resp1"], policy_model="builtin:tiny-policy",
                  n_candidates=2, max_new_tokens=4, generate_reference=False, generation_device="cpu",
                  long_prompts=long_prompts, max_prompt_tokens=100)
    ctx, out = _construct(_params(tmp_path / "a", **values), build(GenerationParams, values))
    counts = ctx.manifest.read()["counts"]
    skipped = long_prompts == "skip"
    assert (counts["sliced"], counts.get("dropped_long_prompts"), counts["generated"]) == \
        ((3, 1, 2) if skipped else (3, None, 3))
    assert len(out) == counts["kept"] == 3 - skipped
    card = write_card(gather_facts(CardParams(run_dir=str(tmp_path / "a" / "run")))).read_text(encoding="utf-8")
    if skipped:
        assert "| `dropped_long_prompts` | 1 | rows dropped: a prompt longer than `max_prompt_tokens`, not generated " \
               "for (`long_prompts: skip`) |" in card
        assert "| `dropped_long_prompts` | 1 | 被丢弃：提示词长于 `max_prompt_tokens`，未生成回复（`long_prompts: skip`） |" \
            in card
        assert "Prompts longer than 100 tokens were left out, with no candidates generated (`long_prompts: skip`): " \
               "1 row." in card
        assert "长于 100 个 token 的提示词被略去，未生成候选（`long_prompts: skip`）：1 行。" in card
    else:
        assert "Prompts longer than 100 tokens were cut to their last 100 tokens for the policy " \
               "(`long_prompts: truncate_left`): 1 row; `prompt` holds the whole text, which is what the scorer was given." in card
        assert "长于 100 个 token 的提示词在交给策略模型前被截为最后 100 个 token（`long_prompts: truncate_left`）：1 行；" \
               "`prompt` 保留全文，评分模型收到的也是全文。" in card
    # a row after the skipped one is named by its source row (2), not by its place among the generated rows
    rows[2]["prompt_id"] = "id-0"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(DataError, match=r"prompt_id id-0 appears at source rows 0 and 2 \(from 0\)"):
        _construct(_params(tmp_path / "b", **values), build(GenerationParams, values))


def test_sppo_rows_of_unequal_candidates_are_refused_before_scoring(tmp_path):
    # output_format: sppo with a null candidate in one row failed at writing, after all the scoring; its hint named
    # empty_candidates, which a null is not
    rows = [{"prompt": f"Question {i}?", "resp0": f"A{i}.", "resp1": f"B{i}.", "resp2": None if i == 1 else f"C{i}."}
            for i in range(3)]
    src = tmp_path / "rows.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(DataError, match=r"output_format 'sppo' has one `generate_i` column per candidate, but rows "
                                        r"hold \[2, 3\] candidates: source row 1 \(from 0\) has \['resp0', 'resp1'\] "
                                        r"of \['resp0', 'resp1', 'resp2'\]\. Give every row the same candidates: fill a null "
                                        r"\(it is no candidate\) or leave its column out of candidate_columns"):
        _construct(_params(tmp_path, source=str(src), candidate_columns=["resp0", "resp1", "resp2"],
                           output_format="sppo", keep_all_candidates=True))
    assert not (tmp_path / "run" / "work" / "scoring").exists()

def test_empty_candidates_dropped_are_counted_and_rows_they_empty_have_their_own_reason(tmp_path):
    # empty_candidates: drop counted its empty texts nowhere, and a row it left with one candidate was "fewer than
    # two distinct candidates", as one of equal texts is
    rows = [{"prompt": "q0", "resp0": "a", "resp1": "", "resp2": "c"},
            {"prompt": "q1", "resp0": "a", "resp1": " ", "resp2": ""},
            {"prompt": "q2", "resp0": "z", "resp1": "z", "resp2": "z"},
            {"prompt": "q3", "resp0": "q", "resp1": "r", "resp2": "s"}]
    src = tmp_path / "rows.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    values = dict(source=str(src), candidate_columns=["resp0", "resp1", "resp2"], empty_candidates="drop")
    ctx, out = _construct(_params(tmp_path / "a", **values))
    counts = ctx.manifest.read()["counts"]
    assert {k: counts[k] for k in ("with_candidates", "dropped_too_few_candidates", "empty_candidates_dropped",
                                   "dropped_fewer_than_two_nonempty_candidates", "kept")} == \
        {"with_candidates": 2, "dropped_too_few_candidates": 1, "empty_candidates_dropped": 3,
         "dropped_fewer_than_two_nonempty_candidates": 1, "kept": 2}
    assert sorted(out["prompt"]) == ["q0", "q3"]
    src.write_text(json.dumps(rows[1]) + "\n")
    with pytest.raises(DataError, match=r"No row is left to score: 1 of 1 rows have fewer than two distinct non-empty "
                                        r"candidates \(empty_candidates: drop left 2 empty texts out\)"):
        _construct(_params(tmp_path / "b", **values))

def test_rows_dropped_on_the_way_are_counted_and_a_source_without_rows_is_refused(tmp_path):
    rows = [{"prompt": f"Question {i}?", "prompt_id": "same" if i < 2 else f"id-{i}",
             "resp0": f"An answer to question {i}.", "resp1": f"Another, longer answer to question {i}, with detail."}
            for i in range(8)]
    src = tmp_path / "rows.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    _, everything = _construct(_params(tmp_path / "a", source=str(src), duplicate_prompt_ids="keep_first"))
    assert len(everything) == 7 and everything["prompt"][0] == "Question 0?"  # the first of the two "same"
    margins = sorted(c - r for c, r in zip(everything["score_chosen"], everything["score_rejected"]))
    ctx, out = _construct(_params(tmp_path / "b", source=str(src), duplicate_prompt_ids="keep_first",
                                  min_margin=margins[3]))
    counts = ctx.manifest.read()["counts"]
    assert counts["dropped_duplicate_prompt_id"] == 1 and counts["dropped_below_min_margin"] == 3
    assert counts["kept"] == len(out) == 4
    assert all(c - r >= margins[3] for c, r in zip(out["score_chosen"], out["score_rejected"]))
    # a min_margin above every margin left no row, and `datasets` failed writing none ("Keys mismatch")
    with pytest.raises(DataError, match=r"No row is left to write: 7 of 7 scored rows have a margin below "
                                        r"min_margin=1000 \(chosen minus rejected\)\. To keep rows, lower min_margin;"):
        _construct(_params(tmp_path / "c", source=str(src), duplicate_prompt_ids="keep_first", min_margin=1000.0))

    # a row after a dropped duplicate is named by its source row, not by its place among the kept rows
    rows[3]["resp1"] = rows[3]["resp0"]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(DataError, match=r"source row 3 \(from 0; prompt_id id-3\) has 1 distinct candidate"):
        _construct(_params(tmp_path / "e", source=str(src), duplicate_prompt_ids="keep_first",
                           too_few_candidates="error"))

    empty = tmp_path / "empty.parquet"
    datasets.Dataset.from_list(rows[:1]).select([]).to_parquet(empty)
    with pytest.raises(DataError, match=rf"source '{empty}' holds no rows: give a file that has rows"):
        _construct(_params(tmp_path / "c", source=str(empty)))
    with pytest.raises(DataError, match=r"reference_response.*Set include_reference: false"):
        _construct(_params(tmp_path / "d", source=str(src), include_reference=True))
