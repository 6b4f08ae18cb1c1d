"""repro.formats and the card's "How to use": the dataset as its users train on it, checked with TRL itself.

TRL is a dev dependency, pinned (pyproject.toml); the tests train its `DPOTrainer` for two steps on CPU with
the project's tiny random policy (repro.scorers.tiny_policy: byte-level tokenizer, ChatML chat template), on a
demo-like run built here: the demo's 40 prompts and candidates in the seed's schema (repro.construct.pairs), written
in push_to_hub's layout (repro.dataset_io), with metrics from repro.analysis.report.
"""

from __future__ import annotations

import json
import math
import re
import shutil
from dataclasses import replace
from pathlib import Path

import datasets
import numpy as np
import pytest
import trl
from huggingface_hub import DatasetCard
from trl.data_utils import extract_prompt, is_conversational, maybe_extract_prompt

from repro.analysis import report as analysis
from repro import card as repro_card
from repro.dataset_io import output_features, write_split
from repro.errors import DataError
from repro.exporters import FORMATS
from repro.formats import KEPT_COLUMNS, TESTED_TRL_VERSION, TRL_FEATURES, to_trl, to_trl_implicit
from repro.manifest import Manifest
from repro.construct.pairs import build_row, collect_candidates
from repro.parameters import AnalyzeParams, CardParams, ConstructParams, build
from repro.paths import SPLIT, RunDir
from repro.sources import load_source
from repro.scorers.tiny_policy import build_tiny_policy

CANDIDATES = ["resp0", "resp1", "resp2", "resp3"]


@pytest.fixture(autouse=True)
def _datasets_cache(monkeypatch, tmp_path):
    """load_dataset's cache goes to the test's own folder."""
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "hf-cache"))


def demo_like_rows() -> list[dict]:
    """The demo's prompts and candidates in the seed's schema, the demo's quality labels (centred) as scores.

    Every 7th row is a full tie (all scores 0), as near-ties are in PairRM's output.
    """
    source = load_source("demo").to_list()
    candidates = collect_candidates(source, ConstructParams(candidate_columns=CANDIDATES))
    rows = []
    for k, (i, prompt, names, texts) in enumerate(zip(candidates.rows, candidates.prompts, candidates.names,
                                                      candidates.candidates)):
        quality = np.array([source[i]["quality"][CANDIDATES.index(n)] for n in names], dtype=float)
        scores = np.zeros_like(quality) if k % 7 == 3 else quality - quality.mean()
        rows.append(build_row(source[i], prompt, texts, scores.tolist(), messages="chosen", keep_all_candidates=True))
    return rows


@pytest.fixture(scope="module")
def demo_like_run(tmp_path_factory) -> RunDir:
    """A run directory as `make demo` leaves it (dataset, manifest, metrics.json), built without notebooks."""
    root = tmp_path_factory.mktemp("formats") / "runs" / "demo"
    run = RunDir(root)
    rows = demo_like_rows()
    write_split(datasets.Dataset.from_list(rows, features=output_features(True)), run.dataset)
    manifest = Manifest(run)
    manifest.start_run({"run_dir": str(root), "source": "demo", "candidate_columns": CANDIDATES,
                        "keep_all_candidates": True, "scorer_model": "builtin:tiny-pairrm"}, ["01_construct"])
    manifest.set_counts(source=len(rows), kept=len(rows))
    manifest.record("scorer", {"model": "builtin:tiny-pairrm", "dtype": "fp32", "device": "cpu", "stand_in": True})
    data = analysis.load(build(AnalyzeParams, {"run_dir": str(root), "bootstrap_resamples": 100}))
    run.metrics.write_text(json.dumps(analysis.compute(data, 100, 0)))
    return run


@pytest.fixture
def seed_ds(demo_like_run) -> datasets.Dataset:
    """The demo run's dataset, loaded as its users load it."""
    return datasets.load_dataset(str(demo_like_run.dataset), split=SPLIT)


@pytest.fixture(scope="module")
def trl_policy(tmp_path_factory, one_torch_thread):
    """The tiny random policy and its tokenizer (ChatML chat template), built by repro.scorers.tiny_policy."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = build_tiny_policy(tmp_path_factory.mktemp("policy") / "tiny-policy")
    return AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path)


def dpo_config(tmp_path: Path, **overrides):
    args = dict(output_dir=str(tmp_path / "dpo"), max_steps=2, per_device_train_batch_size=2, max_length=96,
                learning_rate=1e-3, logging_steps=1, save_strategy="no", report_to="none", bf16=False,
                use_cpu=True, disable_tqdm=True, seed=0)
    return trl.DPOConfig(**{**args, **overrides})


# ---------------------------------------------------------------------------------------------
# the formats, against TRL's own rules
# ---------------------------------------------------------------------------------------------
def test_pinned_trl_is_the_version_the_formats_were_checked_against():
    assert trl.__version__ == TESTED_TRL_VERSION


def test_to_trl_is_trls_explicit_conversational_preference_format(seed_ds):
    out = to_trl(seed_ds)
    assert out.column_names == list(TRL_FEATURES) and out.features == TRL_FEATURES and len(out) == len(seed_ds)
    for seed_row, row in zip(seed_ds, out):
        for key in ("prompt", "chosen", "rejected"):  # TRL judges a row by one of these keys: each must agree
            assert is_conversational({key: row[key]}), key
        assert maybe_extract_prompt(row) == row  # explicit prompt: TRL leaves it as it is
        assert row["prompt"] == [{"content": seed_row["prompt"], "role": "user"}]
        assert row["chosen"] == [seed_row["chosen"][1]] and row["chosen"][0]["role"] == "assistant"
        assert row["rejected"] == [seed_row["rejected"][1]] and row["rejected"][0]["role"] == "assistant"
        assert {k: row[k] for k in KEPT_COLUMNS} == {k: seed_row[k] for k in KEPT_COLUMNS}
        assert row["score_margin"] == seed_row["score_chosen"] - seed_row["score_rejected"]


def test_trls_reward_trainer_does_not_take_the_score_margin_into_its_loss(seed_ds):
    # a column named `margin` made RewardTrainer's loss -logsigmoid(r_c - r_r - margin) on the scorer's scale,
    # silently, and SELM's null margins stopped it with a TypeError
    from trl.trainer.reward_trainer import DataCollatorForPreference
    rows = [{k: v for k, v in row.items() if k not in ("prompt", "chosen", "rejected")} | {"chosen_ids": [1, 2],
            "rejected_ids": [3]} for row in to_trl(seed_ds).select(range(2))]
    batch = DataCollatorForPreference(pad_token_id=0)(rows)
    assert "margin" not in batch and batch["input_ids"].shape[0] == 4
    assert "margin" in DataCollatorForPreference(pad_token_id=0)([r | {"margin": 1.0} for r in rows])


def test_implicit_view_gives_the_same_pairs_through_trls_extract_prompt(seed_ds):
    implicit = to_trl_implicit(seed_ds)
    assert "prompt" not in implicit.column_names
    assert implicit["chosen"] == seed_ds["chosen"] and implicit["rejected"] == seed_ds["rejected"]
    extracted = implicit.map(extract_prompt)  # what DPOTrainer does to a dataset without `prompt`
    explicit = to_trl(seed_ds)
    for key in ("prompt", "chosen", "rejected", "score_margin", "prompt_id"):
        assert extracted[key] == explicit[key], key


def test_an_empty_dataset_keeps_the_columns(seed_ds):
    assert to_trl(seed_ds.select([])).features == TRL_FEATURES


def test_rows_without_scores_get_no_score_columns(seed_ds):
    # the seed's pairs without score_chosen / score_rejected (SELM's layout): to_trl gave score columns and a
    # score_margin of nulls, on which the card's `row["score_margin"] > 0` is a TypeError
    unscored = seed_ds.remove_columns(["score_chosen", "score_rejected"])
    out, implicit = to_trl(unscored), to_trl_implicit(unscored)
    assert out.column_names == ["prompt_id", "prompt", "chosen", "rejected"] and len(out) == len(seed_ds)
    assert out["chosen"] == to_trl(seed_ds)["chosen"] and implicit.column_names == ["prompt_id", "chosen", "rejected"]
    assert to_trl(unscored.select([])).column_names == out.column_names


# ---------------------------------------------------------------------------------------------
# DPOTrainer on the output
# ---------------------------------------------------------------------------------------------
def test_dpo_trainer_trains_two_steps_on_to_trl(seed_ds, trl_policy, tmp_path):
    model, tokenizer = trl_policy
    train = to_trl(seed_ds)
    # small, but above the longest prompt: TRL drops rows whose prompt alone fills max_length
    longest = max(len(tokenizer.apply_chat_template(p, add_generation_prompt=True, return_dict=False)) for p in train["prompt"])
    trainer = trl.DPOTrainer(model=model, args=dpo_config(tmp_path, max_length=longest + 16), train_dataset=train,
                             processing_class=tokenizer)
    tokenised = trainer.train_dataset
    assert len(tokenised) == len(seed_ds)  # every row tokenised, none dropped
    for seed_row, row in zip(seed_ds, tokenised):
        user_turn = seed_row["chosen"][:1]
        # the prompt tokens are the user turn, up to the assistant's header
        assert row["prompt_ids"] == tokenizer.apply_chat_template(user_turn, add_generation_prompt=True,
                                                                  tokenize=True, return_dict=False)
        for side in ("chosen", "rejected"):
            # prompt + completion tokens are the whole seed conversation; the completion is the assistant turn
            whole = tokenizer.apply_chat_template(seed_row[side], tokenize=True, return_dict=False)
            assert row["prompt_ids"] + row[f"{side}_ids"] == whole
            assert tokenizer.decode(row[f"{side}_ids"], skip_special_tokens=True).strip() == \
                seed_row[side][1]["content"].strip()
    trainer.train()
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    assert trainer.state.global_step == 2 and len(losses) == 2
    assert all(math.isfinite(loss) for loss in losses)

    # the implicit-prompt view tokenises to the same ids (TRL extracts the same prompt)
    implicit = trl.DPOTrainer(model=model, args=trainer.args, train_dataset=to_trl_implicit(seed_ds),
                              processing_class=tokenizer).train_dataset
    for key in ("prompt_ids", "chosen_ids", "rejected_ids"):
        assert implicit[key] == tokenised[key], key


def test_the_seeds_columns_as_they_are_still_fail_in_the_pinned_trl(seed_ds, trl_policy, tmp_path):
    """When this test fails, TRL reads the seed's columns: the card can then say so (and drop its conversion)."""
    model, tokenizer = trl_policy
    # which error depends on the key TRL's is_conversational pops from a set (string hashing): both are failures
    with pytest.raises((TypeError, AttributeError), match="str|endswith"):
        trl.DPOTrainer(model=model, args=dpo_config(tmp_path), train_dataset=seed_ds, processing_class=tokenizer)


def test_rlhflows_columns_as_they_are_fail_in_the_pinned_trl_with_a_type_error(seed_ds, trl_policy, tmp_path):
    """RLHFlow's card says so: its conversational `prompt` beside string `chosen` / `rejected` is a TypeError
    whichever key TRL's is_conversational pops (the turns and a text are concatenated one way or the other)."""
    model, tokenizer = trl_policy
    texts = [(r["prompt"], r["chosen"][-1]["content"], r["rejected"][-1]["content"]) for r in seed_ds.select(range(4))]
    rows = [{"prompt": [{"content": p, "role": "user"}], "responses": [c, j], "rewards": [1.0, 0.0], "chosen": c,
             "rejected": j, "margin": 1.0} for p, c, j in texts]
    raw = datasets.Dataset.from_list(rows, features=FORMATS["rlhflow"].columns)
    with pytest.raises(TypeError, match="concatenate"):
        trl.DPOTrainer(model=model, args=dpo_config(tmp_path), train_dataset=raw, processing_class=tokenizer)


def test_rows_all_conversations_train_in_the_pinned_trl_on_the_prompt_twice(train_rows, trl_policy, tmp_path):
    """The card of RLHFlow's pair table (`prompt`, `chosen`, `rejected` all conversations, the latter two whole) says
    so: TRL raises nothing, it tokenises `prompt + chosen`, so the user turn comes twice, the second in the response
    (`chosen_ids`). When this fails, the card's sentence (templates' `trl`, `whole`) must change."""
    model, tokenizer = trl_policy
    rows = [{"prompt": [{"content": r["prompt"], "role": "user"}], "chosen": r["chosen"], "rejected": r["rejected"],
             "margin": 1.0} for r in train_rows[:2]]
    trainer = trl.DPOTrainer(model=model, args=dpo_config(tmp_path, max_length=None),
                             train_dataset=datasets.Dataset.from_list(rows), processing_class=tokenizer)
    for row, tokenised in zip(rows, trainer.train_dataset):
        prompt, chosen = (tokenizer.decode(tokenised[k]) for k in ("prompt_ids", "chosen_ids"))
        user, response = row["prompt"][0]["content"], row["chosen"][-1]["content"]
        assert prompt.count(user) == 1 and chosen.count(user) == 1 and chosen.count(response) == 1


# ---------------------------------------------------------------------------------------------
# bad input
# ---------------------------------------------------------------------------------------------
def test_a_dataset_without_the_seeds_columns_is_refused(seed_ds):
    with pytest.raises(DataError) as err:
        to_trl(seed_ds.remove_columns(["chosen", "score_rejected"]))
    message = str(err.value)
    assert "'chosen'" in message and "'score_rejected'" in message and "repro.formats.to_trl" in message
    with pytest.raises(DataError, match=r"to_trl_implicit lacks \['prompt_id'\]"):
        to_trl_implicit(seed_ds.rename_column("prompt_id", "id"))


@pytest.mark.parametrize(("given", "named", "says"), [
    (lambda ds: ds.to_pandas(), "DataFrame", "datasets.Dataset.from_pandas(df)"),
    (lambda ds: ds.to_list(), "list", "datasets.Dataset.from_list(rows)"),
    (lambda ds: ds.to_iterable_dataset(), "IterableDataset", "without streaming=True"),
    (lambda ds: None, "None", "datasets.Dataset.from_list(rows)"),
])
def test_what_is_not_a_dataset_is_refused_saying_how_to_make_one(seed_ds, given, named, says):
    # AttributeError: 'DataFrame' object has no attribute 'column_names'; an IterableDataset: no len()
    for convert in (to_trl, to_trl_implicit):
        with pytest.raises(DataError) as err:
            convert(given(seed_ds))
        message = str(err.value)
        assert f"repro.formats.{convert.__name__} needs a datasets.Dataset or DatasetDict, got {named}" in message
        assert says in message


def _broken(ds: datasets.Dataset, index: int, column: str, turn: int, content: str | None = None,
            role: str | None = None) -> datasets.Dataset:
    rows = ds.to_list()
    message = rows[index][column][turn]
    message.update({k: v for k, v in (("content", content), ("role", role)) if v is not None})
    return datasets.Dataset.from_list(rows, features=ds.features)


@pytest.mark.parametrize(("column", "turn", "change", "says"), [
    ("chosen", 0, {"content": "Some other question?"}, "`chosen` does not start with the prompt's user turn"),
    ("rejected", 0, {"role": "system"}, "`rejected` does not start with the prompt's user turn"),
    ("chosen", 1, {"content": ""}, "the assistant turn of `chosen` is empty ('')"),
    ("chosen", 1, {"content": "  "}, "the assistant turn of `chosen` is empty ('  '): DPO learns toward"),
    ("chosen", 1, {"role": "user"}, "the last turn of `chosen` must be the assistant's response"),
])
def test_a_bad_row_is_named(seed_ds, column, turn, change, says):
    bad = _broken(seed_ds, 5, column, turn, **change)
    for convert in (to_trl, to_trl_implicit):
        with pytest.raises(DataError) as err:
            convert(bad)
        message = str(err.value)
        assert message.startswith(f"Row 5 (from 0; prompt_id {seed_ds[5]['prompt_id']})") and says in message
        assert "fix the row or leave it out" in message


def test_an_empty_rejected_response_converts(seed_ds):
    # SPPO's and RLHFlow's recipes rank an empty response like any text (empty_candidates: rank): the worst is a pair
    # their trainers learn from
    rows = seed_ds.to_list()
    rows[4]["rejected"][-1]["content"] = ""
    rows[6]["rejected"][-1]["content"] = None
    out = to_trl(datasets.Dataset.from_list(rows[:6], features=seed_ds.features))
    assert out[4]["rejected"] == [{"content": "", "role": "assistant"}] and out[4]["chosen"] == [rows[4]["chosen"][-1]]
    with pytest.raises(DataError, match=r"^Row 0 \(from 0; prompt_id [0-9a-f]{64}\): the assistant turn of `rejected` is not a "
                                        r"text \(None\)"):
        to_trl(datasets.Dataset.from_list(rows[6:7], features=seed_ds.features))


def test_a_row_whose_conversations_are_short_or_differ_is_named(seed_ds):
    rows = seed_ds.to_list()
    user = rows[3]["chosen"][0]
    rows[3]["rejected"] = [user]  # the prompt without an answer
    rows[7]["chosen"] = [rows[7]["chosen"][0], {"role": "assistant", "content": "First."},
                         {"role": "user", "content": "And then?"}, {"role": "assistant", "content": "Then this."}]
    for index, says in ((3, "`rejected` must be a list of at least two {content, role} messages"),
                        (7, "`chosen` and `rejected` answer different conversations")):
        bad = datasets.Dataset.from_list([rows[index]], features=seed_ds.features)
        with pytest.raises(DataError) as err:
            to_trl(bad)
        assert str(err.value).startswith(f"Row 0 (from 0; prompt_id {rows[index]['prompt_id']}): {says}"), str(err.value)


def test_a_row_without_scores_is_named(seed_ds):
    rows = seed_ds.to_list()
    rows[2]["score_rejected"] = None
    with pytest.raises(DataError, match=r"^Row 2 \(from 0; prompt_id [0-9a-f]{64}\): `score_chosen` and `score_rejected` "
                                        r"must be finite numbers"):
        to_trl(datasets.Dataset.from_list(rows, features=seed_ds.features))


@pytest.mark.parametrize("index, column, value", [(1, "score_chosen", math.nan), (2, "score_rejected", math.inf)])
def test_a_row_whose_score_is_not_finite_is_named(seed_ds, index, column, value):
    # NaN and infinite scores converted to a score_margin of nan / inf, where the card says to_trl refuses them
    rows = seed_ds.to_list()
    rows[index][column] = value
    for convert in (to_trl, to_trl_implicit):
        with pytest.raises(DataError, match=rf"^Row {index} \(from 0; prompt_id [0-9a-f]{{64}}\): `score_chosen` and "
                                            rf"`score_rejected` must be finite numbers \(not null, NaN nor infinite\), "
                                            rf"got \[.*{value}.*\]"):
            convert(datasets.Dataset.from_list(rows, features=seed_ds.features))


def test_rlhflows_margin_that_is_not_finite_is_named(seed_ds):
    texts = [(r["prompt"], r["chosen"][-1]["content"], r["rejected"][-1]["content"]) for r in seed_ds.select(range(3))]
    rows = [{"prompt": [{"content": p, "role": "user"}], "chosen": c, "rejected": j, "margin": m}
            for (p, c, j), m in zip(texts, (1.0, math.nan, None))]
    with pytest.raises(DataError, match=r"^Row 1 \(from 0\b.*`margin` must be a finite number or null, got nan"):
        to_trl(datasets.Dataset.from_list(rows))
    assert to_trl(datasets.Dataset.from_list(rows[::2]))["score_margin"] == [1.0, None]


# ---------------------------------------------------------------------------------------------
# the card's "How to use"
# ---------------------------------------------------------------------------------------------
def use_section(card_text: str, heading: str) -> str:
    start = card_text.index(heading + "\n")
    end = card_text.index("\n## ", start + len(heading))
    return card_text[start:end]


def code_blocks(section: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)


def without_comments(code: str) -> str:
    return "\n".join(line for line in code.splitlines() if not line.lstrip().startswith("#"))


def test_the_cards_how_to_use_runs_as_written(demo_like_run, seed_ds, trl_policy, tmp_path, monkeypatch):
    facts = repro_card.gather_facts(build(CardParams, {"run_dir": str(demo_like_run.root)}))
    # (a stand-in's card advises against training and shows no recipe: these scores as a real scorer's)
    facts = replace(facts, scorer={**facts.scorer, "model": "llm-blender/PairRM", "stand_in": False})
    card_path = repro_card.write_card(facts)
    text = DatasetCard.load(card_path).text
    en, zh = use_section(text, "## How to use"), use_section(text, "## 使用方法")
    for section in (en, zh):  # nothing of this machine in what is published
        assert str(demo_like_run.root.parent) not in section and str(Path.home()) not in section
    blocks = code_blocks(en)
    assert len(blocks) == 3 and [without_comments(b) for b in code_blocks(zh)] == [without_comments(b) for b in blocks]
    assert f"TRL {TESTED_TRL_VERSION}" in en and f"TRL {TESTED_TRL_VERSION}" in zh

    # beside a copy of the dataset folder, as the card says; `model` and `tokenizer` are the user's
    shutil.copytree(demo_like_run.dataset, tmp_path / "downloads" / demo_like_run.dataset.name)
    monkeypatch.chdir(tmp_path / "downloads")
    model, tokenizer = trl_policy
    scope: dict = {"model": model, "tokenizer": tokenizer, "args": dpo_config(tmp_path, max_length=None)}
    exec(blocks[0] + blocks[1], scope)
    assert len(scope["ds"]) == len(seed_ds) and len(scope["trainer"].train_dataset) == len(seed_ds)
    plain: dict = {}
    exec(blocks[0] + blocks[2], plain)  # the same conversion with datasets alone
    assert plain["train"].to_list() == to_trl(seed_ds).to_list()
    assert set(plain["train"].column_names) == set(TRL_FEATURES)

    # the margin filter keeps the number of pairs the card states
    kept, n = map(int, re.search(r"keeps the (\d+) of the (\d+) pairs", en).groups())
    assert (kept, n) == (sum(c > r for c, r in zip(seed_ds["score_chosen"], seed_ds["score_rejected"])), len(seed_ds))
    assert 0 < kept < n and f"{n} 对中" in zh and f"的 {kept} 对" in zh
    line = re.search(r"`(train = train\.filter\(.*?\))`", en)[1]
    exec(line, scope)
    assert len(scope["train"]) == kept


def test_how_to_use_names_the_hub_id_when_known(demo_like_run):
    facts = repro_card.gather_facts(build(CardParams, {"run_dir": str(demo_like_run.root)}))
    for lang in ("en", "zh"):
        published = repro_card.render_section(replace(facts, hub_repo_id="someone/pairs"), "use", lang)
        assert code_blocks(published)[0].splitlines()[-1] == 'ds = load_dataset("someone/pairs", split="train_prefs")'
        assert 'load_dataset("dataset"' not in published
        local = repro_card.render_section(facts, "use", lang)
        assert code_blocks(local)[0].splitlines()[-1] == 'ds = load_dataset("dataset", split="train_prefs")'


def test_a_leading_system_turn_goes_into_the_prompt_as_trls_extract_prompt_puts_it(train_rows):
    """A system turn before the user's in `chosen` / `rejected`: to_trl refused row 0 ("`chosen` does not start with
    the prompt's user turn: its first turn is 'system'"), where the card offered it; TRL's extract_prompt puts that
    turn in the prompt, and so does to_trl now."""
    system = {"content": "You answer briefly.", "role": "system"}
    rows = [{**r, "chosen": [system, *r["chosen"]], "rejected": [system, *r["rejected"]]} for r in train_rows[:10]]
    ds = datasets.Dataset.from_list(rows)
    out, trls = to_trl(ds), ds.select_columns(["chosen", "rejected"]).map(extract_prompt)
    assert out[0]["prompt"] == [system, train_rows[0]["chosen"][0]]
    for key in ("prompt", "chosen", "rejected"):
        assert out[key] == trls[key], key
    # a system turn alone before the response is still no prompt
    with pytest.raises(DataError, match=r"`chosen` does not start with the prompt's user turn: .*'assistant'"):
        to_trl(datasets.Dataset.from_list([{**rows[0], "chosen": [system, rows[0]["chosen"][-1]]}]))
