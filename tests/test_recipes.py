"""The field's recipes: SPPO's chat-templated scorer prompt, pinned revisions reaching the loaders, per-candidate
seeds, the construction stages with a selection rule and an output format, and every params/recipes/ file run
offline on stand-ins through `repro run` (then 04_compare against a copy in that paper's format)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import datasets
import pytest

from repro import revisions, sources
from repro.construct import generation
from repro.construct import stages as construct
from repro.errors import ParameterError
from repro.exporters import FORMATS
from repro.construct.generation import generate_candidates
from repro.parameters import ConstructParams, GenerationParams, load_params_file
from repro.construct.scorer_prompt import chat_templated_prompt, load_prompt_tokenizer, scorer_prompts
from repro.scorers.tiny_policy import build_tiny_policy

from conftest import MAIN, PINNED

ROOT = Path(__file__).resolve().parents[1]
RECIPES = sorted((ROOT / "params" / "recipes").glob("*.yaml"))
FIXTURE = ROOT / "tests" / "fixtures" / "ultrafeedback" / "train_prefs.jsonl"

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def policy_dir(tmp_path_factory):
    return build_tiny_policy(tmp_path_factory.mktemp("policy") / "tiny-policy")


# ------------------------------------------------------------------------------------------------
# the scorer's prompt
# ------------------------------------------------------------------------------------------------
def test_chat_templated_prompt_is_sppos_split_of_apply_chat_template(policy_dir):
    tokenizer = load_prompt_tokenizer(str(policy_dir))
    prompts = ["What is 2+2?", "Write a haiku\nabout rain.", "Is None a value in Python?"]
    for prompt in prompts:
        expected = tokenizer.apply_chat_template(
            [{"role": "user", "content": prompt}, {"role": "assistant", "content": "None"}], tokenize=False,
        ).split("None")[0]
        assert chat_templated_prompt(prompt, tokenizer) == expected
    # by hand, from the stand-in's template (<|im_start|>role\ncontent<|im_end|>\n per turn)
    assert chat_templated_prompt("What is 2+2?", tokenizer) == \
        "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n"
    assert chat_templated_prompt("Is None a value?", tokenizer) == "<|im_start|>user\nIs "  # SPPO's quirk, kept
    assert scorer_prompts(prompts, "raw") == prompts


def test_a_prompt_tokenizer_without_a_template_is_refused(policy_dir, tmp_path):
    bare = shutil.copytree(policy_dir, tmp_path / "bare")
    (bare / "chat_template.jinja").unlink(missing_ok=True)
    config = json.loads((bare / "tokenizer_config.json").read_text())
    config.pop("chat_template", None)
    (bare / "tokenizer_config.json").write_text(json.dumps(config))
    with pytest.raises(ParameterError, match=r"scorer_prompt_tokenizer=.*has no chat template.*scorer_prompt: raw"):
        load_prompt_tokenizer(str(bare))


# ------------------------------------------------------------------------------------------------
# pinned revisions reach the loaders (spies, no download)
# ------------------------------------------------------------------------------------------------
@pytest.fixture
def hub_spies(monkeypatch, tiny_pairrm_dir, policy_dir):
    calls = {"load_dataset": [], "snapshot_download": []}
    rows = [json.loads(line) for line in FIXTURE.read_text().splitlines()[:6]]

    def load_dataset(repo_id, split=None, revision=None, **kw):
        calls["load_dataset"].append((repo_id, split, revision))
        return datasets.Dataset.from_list(rows)

    real_snapshot_download = revisions.huggingface_hub.snapshot_download

    def snapshot_download(repo_id, revision=None, **kw):
        if kw.get("local_files_only"):  # (a look in the local hub cache, revisions.hub_snapshot's: no load)
            return real_snapshot_download(repo_id, revision=revision, **kw)
        calls["snapshot_download"].append((repo_id, revision))
        return str(tiny_pairrm_dir if "pairrm" in repo_id.lower() else policy_dir)

    monkeypatch.setattr(sources.datasets, "load_dataset", load_dataset)
    monkeypatch.setattr(revisions.huggingface_hub, "snapshot_download", snapshot_download)
    return calls


def test_revisions_are_passed_to_every_load_and_recorded(hub_spies, tmp_path):
    p = ConstructParams(run_dir=str(tmp_path / "run"), source="owner/prompts", source_revision="abc123",
                        candidate_columns=[], include_original_pair=True, scorer_model="owner/PairRM-copy",
                        scorer_revision="def456", scorer_kind="pairrm", device="cpu", dtype="fp32", batch_tokens=2048,
                        output_format="snorkel", keep_all_candidates=True)
    ctx = construct.begin(p)
    rows = construct.slice_rows(ctx, construct.load(ctx))
    cs = construct.candidates(ctx, rows)
    out = construct.build(ctx, rows, cs, construct.score(ctx, cs))
    construct.write(ctx, out)
    assert hub_spies["load_dataset"] == [("owner/prompts", "train_prefs", "abc123")]
    assert hub_spies["snapshot_download"] == [("owner/PairRM-copy", "def456")]
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["lineage"] == {
        "iteration": 1, "source": "owner/prompts@abc123", "source_split": "train_prefs", "prompt_shard": [0, 6],
        "policy": None, "scorer": "owner/PairRM-copy@def456", "selection": "best_worst", "output_format": "snorkel",
        "split": "train_iteration_1"}
    assert manifest["scorer"]["revision"] == "def456" and manifest["stages"]["load"]["revision"] == "abc123"
    assert manifest["scorer"]["model"] == "owner/PairRM-copy"  # the hub id, not the snapshot folder of this machine
    files = sorted((tmp_path / "run" / "dataset" / "data").glob("train_iteration_1-*.parquet"))
    written = datasets.Dataset.from_parquet([str(f) for f in files])  # (load_dataset is the spy here)
    assert written.column_names == list(FORMATS["snorkel"].features(2)) and len(written) == 6


def test_policy_revision_is_passed_to_the_policy_load(hub_spies, policy_dir):
    policy = generation.resolve_policy("owner/policy", "rev9")
    assert hub_spies["snapshot_download"] == [("owner/policy", "rev9")] and policy.path == str(policy_dir)
    with pytest.raises(ParameterError, match=r"policy_revision='rev9' pins a hub commit, but policy_model=.* is not a hub id"):
        generation.resolve_policy(str(policy_dir), "rev9")
    with pytest.raises(ParameterError, match=r"source_revision='r' pins a hub commit, but source='demo'"):
        sources.load_source("demo", "train_prefs", revision="r")


def test_a_scorer_prompt_tokenizer_naming_the_policy_is_read_at_policy_revision(two_template_hub, tiny_pairrm_dir,
                                                                              tmp_path):
    # SPPO's recipe pinned at policy_revision: the policy generated at the pin, PairRM's prompts went through main's
    # template; now the policy's commit is the tokenizer's, and recorded
    common = dict(source=str(FIXTURE), source_split="train", limit=3, candidate_columns=[], include_original_pair=True,
                  scorer_model=str(tiny_pairrm_dir), scorer_kind="pairrm", device="cpu", dtype="fp32",
                  batch_tokens=2048, cache=False, scorer_prompt="chat_template")
    pinned = GenerationParams(policy_model="fakeorg/policy", policy_revision=PINNED)
    scores, prompts, manifests = {}, {}, {}
    for name, tokenizer, policy in (("pinned", "fakeorg/policy", pinned),
                                    ("folder", str(two_template_hub / "snapshots" / PINNED), None),
                                    ("main", "fakeorg/policy", None)):
        p = ConstructParams(run_dir=str(tmp_path / name), scorer_prompt_tokenizer=tokenizer, **common)
        ctx = construct.begin(p, policy)
        rows = construct.slice_rows(ctx, construct.load(ctx))
        cs = construct.candidates(ctx, rows)
        scores[name] = construct.score(ctx, cs)
        construct.write(ctx, construct.build(ctx, rows, cs, scores[name]))
        prompts[name], manifests[name] = chat_templated_prompt("Hi", ctx.prompt_tokenizer), ctx.manifest.read()
    assert prompts["pinned"] == prompts["folder"] == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    assert prompts["main"] == "### user: Hi\n### assistant: "
    assert scores["pinned"] == scores["folder"] != scores["main"]  # PairRM scored the pinned template's prompts
    assert manifests["pinned"]["scorer"]["scorer_prompt_tokenizer_commit"] == PINNED
    assert manifests["pinned"]["lineage"]["scorer_prompt_tokenizer"] == f"fakeorg/policy@{PINNED}"
    assert manifests["main"]["scorer"]["scorer_prompt_tokenizer_commit"] == MAIN  # unpinned: the commit read
    assert "scorer_prompt_tokenizer_commit" not in manifests["folder"]["scorer"]  # (a folder: its files' digest)


# ------------------------------------------------------------------------------------------------
# per-candidate seeds
# ------------------------------------------------------------------------------------------------
def test_candidate_seeds_draw_candidate_k_as_a_run_with_that_seed(policy_dir, tmp_path):
    rows = [{"prompt": "Name a fruit.", "prompt_id": "a"}, {"prompt": "Count to three.", "prompt_id": "b"}]
    common = dict(policy_model=str(policy_dir), max_new_tokens=12, generate_reference=False, generation_device="cpu",
                  generation_batch_size=4, generation_chunk_size=4, temperature=1.0)
    seeded = generate_candidates(rows, GenerationParams(n_candidates=2, candidate_seeds=[50, 100], **common),
                                 tmp_path / "seeded")
    for k, seed in enumerate((50, 100)):
        alone = generate_candidates(rows, GenerationParams(n_candidates=1, generation_seed=seed, **common),
                                    tmp_path / f"alone{seed}")
        assert [r[f"resp{k}"] for r in seeded] == [r["resp0"] for r in alone]
    assert [r["resp0"] for r in seeded] != [r["resp1"] for r in seeded]


# ------------------------------------------------------------------------------------------------
# every recipe, offline on stand-ins, through `repro run`; then 04_compare against a copy in its format
# ------------------------------------------------------------------------------------------------
STAND_INS = ["source_revision=null", "part_start=0", "part_stop=null", "limit=3",
             "policy_model=builtin:tiny-policy", "policy_revision=null", "generation_backend=transformers",
             "generation_device=cpu", "max_new_tokens=6", "reference_max_new_tokens=6", "generation_chunk_size=8",
             "scorer_revision=null", "device=cpu", "dtype=fp32", "batch_tokens=2048", "chunk_size=8",
             "scorer_prompt_tokenizer=builtin:tiny-policy", "bootstrap_resamples=100", "empty_candidates=drop"]
SCORER = {"rlhflow_iter1": "builtin:tiny-reward-llama"}  # the others rank with PairRM


@pytest.fixture(scope="module")
def split_source(tmp_path_factory) -> Path:
    """The fixture's rows as a hub-layout folder, since a recipe's test split needs a source with splits: train_prefs
    and test_prefs, and train_prefs again as `train` (the split SPPO's and RLHFlow's recipes read)."""
    folder = tmp_path_factory.mktemp("uf")
    (folder / "data").mkdir()
    for split, name in (("train_prefs", "train_prefs"), ("test_prefs", "test_prefs"), ("train_prefs", "train")):
        rows = [json.loads(line) for line in (FIXTURE.parent / f"{split}.jsonl").read_text().splitlines()]
        datasets.Dataset.from_list(rows).to_parquet(str(folder / "data" / f"{name}-00000-of-00001.parquet"))
    return folder


def test_the_recipes_folder_holds_each_recipe_and_its_verify_file():
    names = {p.stem for p in RECIPES}
    assert {"sppo_iter1", "snorkel_iter1", "selm_iter2", "rlhflow_iter1"} <= names
    for name in names - {n for n in names if n.startswith("verify_")}:
        assert f"verify_{name}" in names
        text = (ROOT / "params" / "recipes" / f"{name}.yaml").read_text()
        assert "documented" in text and "inferred" in text  # each says where its values come from


@pytest.mark.parametrize("recipe", [p for p in RECIPES if not p.stem.startswith("verify_")], ids=lambda p: p.stem)
def test_each_recipe_runs_offline_on_stand_ins_and_compares_with_a_copy(recipe, tmp_path, repro_run, split_source):
    values = load_params_file(recipe)
    out = tmp_path / recipe.stem
    scorer = SCORER.get(recipe.stem, "builtin:tiny-pairrm")
    sets = [x for item in [f"source={split_source}", *STAND_INS, f"scorer_model={scorer}"] for x in ("--set", item)]
    proc = repro_run(recipe, "--out", out, *sets)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    manifest = json.loads((out / "manifest.json").read_text())
    fmt = FORMATS[values["output_format"]]
    split = fmt.split_name(values.get("iteration", 1), values.get("output_split"))
    assert manifest["status"] == "complete" and manifest["lineage"]["split"] == split
    ds = datasets.load_dataset(str(out / "dataset"), split=split)
    assert len(ds) >= 1 and ds.column_names == list(fmt.features(len(values.get("candidate_columns") or [0]) or 1))
    assert manifest["lineage"]["policy"] == "builtin:tiny-policy"
    # the card describes the format it wrote, in both languages
    card = (out / "dataset" / "README.md").read_text(encoding="utf-8")
    english, chinese = card.split("### Output format", 1)[1], card.split("### 输出格式", 1)[1]
    assert f"The rows are in split `{split}`." in english and f"数据位于划分 `{split}`。" in chinese
    assert all(f"`{c}`" in english.split("###")[0] for c in ("chosen", "rejected"))
    # the paper's verify file, pointed at this run and at a copy of its data in that paper's format
    copy = tmp_path / "published.parquet"
    ds.to_parquet(str(copy))
    verify = recipe.parent / f"verify_{recipe.stem}.yaml"
    proc = repro_run(verify, "--out", tmp_path / "verify", "--set", f"candidate={out}", "--set", f"reference={copy}",
                     "--set", "compare_source=null", "--set", "bootstrap_resamples=100")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads((tmp_path / "verify" / "compare.json").read_text())
    assert result["alignment"]["aligned"] == len(ds)
    assert result["pairs"]["categories"]["same"] == len(ds)
