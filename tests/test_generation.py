"""Candidate generation on a tiny random policy built here: determinism, greedy, columns, long prompts, resume."""

from __future__ import annotations

import hashlib
import json
import random
import re

import datasets
import pytest

from repro.construct import generation
from repro.construct.pairs import collect_candidates
from repro.errors import DataError, ModelLoadError, ParameterError
from repro.construct.generation import generate_candidates, prompt_token_ids
from repro import manifest
from repro.manifest import Manifest
from repro.parameters import ConstructParams, GenerationParams
from repro.paths import STAND_IN_MARKER
from repro.scorers.tiny_policy import build_tiny_policy

NEW_TOKENS = 12


pytestmark = pytest.mark.usefixtures("one_torch_thread")  # the tiny policy gains nothing from more threads


@pytest.fixture(scope="module")
def policy_dir(tmp_path_factory):
    return build_tiny_policy(tmp_path_factory.mktemp("policy") / "tiny-policy")


@pytest.fixture(scope="module")
def short_context_dir(tmp_path_factory):
    """The same stand-in with a 96-token context: real prompts do not fit beside the new tokens."""
    return build_tiny_policy(tmp_path_factory.mktemp("policy") / "tiny-policy-ctx96", max_position_embeddings=96)


@pytest.fixture(scope="module")
def prompts(train_rows):
    """Ten real UltraFeedback rows (prompt and prompt_id only): every third of the 30 shortest, 27-90 characters."""
    rows = sorted(train_rows[:60], key=lambda r: len(r["prompt"]))[:30:3]
    return [{"prompt": r["prompt"], "prompt_id": r["prompt_id"]} for r in rows]


def params(policy, **kw) -> GenerationParams:
    values = dict(policy_model=str(policy), max_new_tokens=NEW_TOKENS, reference_max_new_tokens=NEW_TOKENS,
                  generation_batch_size=4, generation_chunk_size=4, generation_device="cpu")
    values.update(kw)
    return GenerationParams(**values)


def files_digest(path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(path.iterdir())}


def test_stand_in_builds_identically_and_loads_like_a_model_directory(tmp_path, policy_dir, prompts):
    again = build_tiny_policy(tmp_path / "again")
    assert files_digest(again) == files_digest(policy_dir)
    assert {"config.json", "model.safetensors", "tokenizer.json", "chat_template.jinja", STAND_IN_MARKER} <= \
        set(files_digest(again))
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(policy_dir)
    for row in prompts:  # byte-level: every real prompt round-trips exactly
        assert tok.decode(tok(row["prompt"], add_special_tokens=False)["input_ids"]) == row["prompt"]
    text = tok.decode(prompt_token_ids(["Why is the sky blue?"], tok, use_chat_template=True)[0])
    assert text == "<|im_start|>user\nWhy is the sky blue?<|im_end|>\n<|im_start|>assistant\n"


def test_generation_is_deterministic_and_adds_n_columns(tmp_path, policy_dir, prompts):
    p = params(policy_dir, n_candidates=3, temperature=0.8)
    before = json.dumps(prompts)
    first = generate_candidates(prompts, p, tmp_path / "a")
    second = generate_candidates(prompts, p, tmp_path / "b")
    assert json.dumps(prompts) == before  # input rows untouched
    assert first == second
    assert [r["prompt_id"] for r in first] == [r["prompt_id"] for r in prompts]
    for row in first:
        assert set(row) == {"prompt", "prompt_id", "reference_response", "resp0", "resp1", "resp2"}
        assert all(isinstance(row[c], str) and row[c] for c in ("reference_response", "resp0", "resp1", "resp2"))
    # sampling is sampling: the candidates of a prompt differ from each other and from the greedy reference
    distinct = [len({r["resp0"], r["resp1"], r["resp2"], r["reference_response"]}) for r in first]
    assert sum(d == 4 for d in distinct) >= 8
    # another seed gives other candidates, and the same greedy reference
    other = generate_candidates(prompts, params(policy_dir, n_candidates=3, temperature=0.8, generation_seed=1),
                                tmp_path / "c")
    assert [r["reference_response"] for r in other] == [r["reference_response"] for r in first]
    assert sum(o["resp0"] != f["resp0"] for o, f in zip(other, first)) >= 8


def test_greedy_reference_equals_sampling_at_temperature_zero(tmp_path, policy_dir, prompts):
    out = generate_candidates(prompts, params(policy_dir, temperature=0.0), tmp_path / "w")
    assert all(r["resp0"] == r["reference_response"] == r["resp1"] for r in out)
    sampled = generate_candidates(prompts, params(policy_dir, temperature=0.7), tmp_path / "w2")
    assert sum(r["resp0"] != r["reference_response"] for r in sampled) >= 8


def test_candidates_do_not_depend_on_batch_chunk_or_row_order(tmp_path, policy_dir, prompts):
    base = {r["prompt_id"]: r for r in generate_candidates(prompts, params(policy_dir), tmp_path / "a")}
    shuffled = list(prompts)
    random.Random(3).shuffle(shuffled)
    out = generate_candidates(shuffled, params(policy_dir, generation_batch_size=1, generation_chunk_size=3),
                              tmp_path / "b")
    assert [r["prompt_id"] for r in out] == [r["prompt_id"] for r in shuffled]
    assert all(r == base[r["prompt_id"]] for r in out)


def test_long_prompts_truncated_from_the_left(tmp_path, short_context_dir):
    # raw prompts (no template) on a byte-level tokenizer: the kept tokens of a long prompt are its last
    # 96 - 12 = 84 bytes, so its greedy reference equals that of those 84 characters given as the prompt
    long_prompt = "Summarise the following notes. " + "".join(f"note {i}: ok; " for i in range(30)) + "Thanks!"
    rows = [{"prompt": long_prompt}, {"prompt": long_prompt[-84:]}, {"prompt": "short"}]
    p = params(short_context_dir, use_chat_template=False, generation_batch_size=1, long_prompts="truncate_left")
    manifest = Manifest(tmp_path / "run")
    out = generate_candidates(rows, p, tmp_path / "w", manifest)
    assert len(out) == 3
    assert out[0]["reference_response"] == out[1]["reference_response"]
    assert out[0]["reference_response"] != out[2]["reference_response"]
    info = manifest.read()["generation"]
    assert (info["max_prompt_tokens"], info["truncated_long_prompts"], info["skipped_long_prompts"]) == (84, 1, 0)


def test_long_prompts_skipped_and_counted(tmp_path, short_context_dir, prompts):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(short_context_dir)
    lengths = [len(ids) for ids in prompt_token_ids([r["prompt"] for r in prompts], tok, use_chat_template=True)]
    fits = [r for r, n in zip(prompts, lengths) if n <= 96 - NEW_TOKENS]
    assert 0 < len(fits) < len(prompts)  # the real prompts give both cases
    manifest = Manifest(tmp_path / "run")
    out = generate_candidates(prompts, params(short_context_dir, long_prompts="skip"), tmp_path / "w", manifest)
    assert [r["prompt_id"] for r in out] == [r["prompt_id"] for r in fits]  # removed, order kept
    info = manifest.read()["generation"]
    assert info["skipped_long_prompts"] == len(prompts) - len(fits)
    assert info["prompts_generated"] == len(fits)
    # every prompt too long: 01_construct went on with no row and failed in a table (a KeyError, or max() of nothing)
    longest = [r for r, n in zip(prompts, lengths) if n > 96 - NEW_TOKENS]
    with pytest.raises(DataError, match=rf"^Every prompt \({len(longest)} of {len(longest)}\) is longer than "
                                        rf"max_prompt_tokens=84 tokens, and long_prompts: skip leaves each out"):
        generate_candidates(longest, params(short_context_dir, long_prompts="skip"), tmp_path / "w2")


def test_empty_prompt_is_an_error_naming_the_row(tmp_path, policy_dir, prompts):
    rows = prompts[:3] + [{"prompt": "  \n", "prompt_id": "abc123"}] + prompts[3:5]
    with pytest.raises(DataError, match=r"^source row 3 \(from 0; prompt_id abc123\) has an empty 'prompt'"):
        generate_candidates(rows, params(policy_dir), tmp_path / "w")
    with pytest.raises(DataError, match=r"^source row 1 \(from 0\) has no 'prompt' column"):
        generate_candidates([prompts[0], {"text": "x"}], params(policy_dir), tmp_path / "w")


def test_a_bad_prompt_gets_one_message_from_the_generation_and_from_the_candidates(tmp_path, policy_dir, prompts):
    """The generation and collect_candidates each checked the prompt, in two messages (the first "Row 3 (counted
    from 0 in the rows given to generation ...)", the second "'prompt' must be a non-empty string"): one check now."""
    two = ConstructParams(candidate_columns=["resp0", "resp1"])
    good = [{**r, "resp0": "Seven.", "resp1": "Eight."} for r in prompts[:3]]
    for bad, what in (({"prompt": "  \n", "prompt_id": "abc123"}, "(from 0; prompt_id abc123) has an empty 'prompt' "
                                                                   "('  \\n')"),
                      ({"text": "x"}, "(from 0) has no 'prompt' column"),
                      ({"prompt": [{"content": "Hi", "role": "user"}]},
                       "(from 0) has a 'prompt' of type list ([{'content': 'Hi', 'role': 'user'}]), not a text")):
        rows = good + [{**bad, "resp0": "Seven.", "resp1": "Eight."}]
        for numbers, split, row in ((None, None, "source row 3 "), ([10, 11, 12, 13], "test", "source row 13 of split "
                                                                                              "'test' ")):
            with pytest.raises(DataError) as generated:
                generate_candidates(rows, params(policy_dir), tmp_path / "w", row_numbers=numbers, split=split)
            with pytest.raises(DataError) as collected:
                collect_candidates(rows, two, row_numbers=numbers, split=split)
            assert str(generated.value) == str(collected.value) == (
                f"{row}{what}. Every row needs its prompt, a non-empty text, in the 'prompt' column: fix or remove "
                f"that row in the source.")


def test_interrupted_run_resumes_and_gives_identical_output(tmp_path, policy_dir, prompts, monkeypatch):
    p = params(policy_dir, generation_chunk_size=3)
    whole = generate_candidates(prompts, p, tmp_path / "whole")

    real_chunk = generation._generate_chunk
    calls = []

    def dies_on_second_chunk(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt("killed while generating chunk 2")
        return real_chunk(*args, **kwargs)

    monkeypatch.setattr(generation, "_generate_chunk", dies_on_second_chunk)
    with pytest.raises(KeyboardInterrupt):
        generate_candidates(prompts, p, tmp_path / "resumed")
    assert len(list((tmp_path / "resumed").glob("chunk-*.json"))) == 1
    monkeypatch.setattr(generation, "_generate_chunk", real_chunk)

    manifest = Manifest(tmp_path / "run")
    resumed = generate_candidates(prompts, p, tmp_path / "resumed", manifest)
    assert resumed == whole
    info = manifest.read()["generation"]
    assert (info["chunks"], info["chunks_resumed"], info["prompts_resumed"]) == (4, 1, 3)
    # changed sampling parameters never reuse those chunks
    changed = generate_candidates(prompts, params(policy_dir, generation_chunk_size=3, temperature=1.0),
                                  tmp_path / "resumed", manifest)
    assert manifest.read()["generation"]["chunks_resumed"] == 0
    assert [r["resp0"] for r in changed] != [r["resp0"] for r in whole]


@pytest.mark.parametrize("damage", [lambda row: {**row, "candidates": row["candidates"][:1]},
                                    lambda row: {k: v for k, v in row.items() if k != "reference_response"}])
def test_a_chunk_of_the_right_length_with_a_row_short_of_its_texts_is_refused_naming_it(tmp_path, policy_dir,
                                                                                      prompts, damage):
    # a row's candidates cut to one was used as finished (a row without resp1); one without its reference: a KeyError
    p = params(policy_dir, generation_chunk_size=4)
    whole = generate_candidates(prompts, p, tmp_path / "w")
    damaged = tmp_path / "w" / "chunk-000001.json"
    rows = json.loads(damaged.read_text())
    rows[1] = damage(rows[1])
    damaged.write_text(json.dumps(rows))
    with pytest.raises(DataError, match=rf"generation: {re.escape(str(damaged))} holds \{{\"tokens\": \d+, .* for its "
                                        r"result 2 of 4, not a token count, a reference response and 2 candidate "
                                        r"texts; delete it to recompute that chunk\.$"):
        generate_candidates(prompts, p, tmp_path / "w")
    damaged.unlink()
    assert generate_candidates(prompts, p, tmp_path / "w") == whole


def test_two_torchrun_processes_give_exactly_the_single_process_rows(tmp_path, prompts, monkeypatch, capfd,
                                                                     torchrun_processes):
    monkeypatch.setenv("REPRO_CACHE", str(tmp_path / "cache"))  # the workers build nothing: the parent did
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ValueError, match="generation_num_processes"):
        params("builtin:tiny-policy", generation_num_processes=0)
    p = params("builtin:tiny-policy", n_candidates=2, temperature=0.8, generation_chunk_size=3)
    one = generate_candidates(prompts, p, tmp_path / "one")
    manifest = Manifest(tmp_path / "run")
    two = generate_candidates(prompts, p.model_copy(update={"generation_num_processes": torchrun_processes}),
                              tmp_path / "two",
                              manifest)
    assert two == one
    assert files_digest(tmp_path / "two") == files_digest(tmp_path / "one")  # same chunks, same fingerprint
    info = manifest.read()["generation"]
    assert (info["processes"], info["chunks"], info["chunks_resumed"]) == (2, 4, 0)
    assert info["tokens_generated_this_run"] == len(prompts) * 3 * NEW_TOKENS  # both shares counted
    assert "generation:" in capfd.readouterr().err  # rank 0's progress is relayed
    # one process continues the two processes' work: every chunk is reused
    again = generate_candidates(prompts, p, tmp_path / "two", manifest)
    assert again == one and manifest.read()["generation"]["chunks_resumed"] == 4


def test_manifest_records_the_run(tmp_path, policy_dir, prompts):
    manifest = Manifest(tmp_path / "run")
    generate_candidates(prompts, params(policy_dir, n_candidates=2), tmp_path / "w", manifest)
    info = manifest.read()["generation"]
    assert info["stand_in"] is True and "noise" in info["note"]
    assert (info["backend"], info["device"], info["dtype"]) == ("transformers", "cpu", "fp32")
    assert (info["temperature"], info["top_p"], info["n_candidates"], info["generation_seed"]) == (0.7, 1.0, 2, 0)
    # the stand-in never emits EOS, so every sequence runs to its max_new_tokens
    assert info["tokens_generated"] == info["tokens_generated_this_run"] == len(prompts) * 3 * NEW_TOKENS
    assert info["tokens_per_second"] > 0 and info["generate_seconds"] > 0


def test_config_only_stand_in_draws_the_same_weights_at_load_time(tmp_path, policy_dir, prompts):
    config_only = build_tiny_policy(tmp_path / "config-only", config_only=True)
    assert not list(config_only.glob("*.safetensors"))
    a = generate_candidates(prompts[:4], params(policy_dir), tmp_path / "a")
    b = generate_candidates(prompts[:4], params(config_only), tmp_path / "b")
    assert a == b


def test_counter_gumbel_noise_samples_from_the_softmax():
    import numpy as np
    import torch
    from scipy.stats import chisquare

    logits = torch.tensor([2.0, 1.0, 0.0, -1.0, 0.5])
    seeds = generation.row_seeds(torch.tensor(generation.sample_keys("a prompt", seed=0, n=20000)))
    table = generation.token_table(5)

    def draw(step):
        u = generation.counter_uniform(seeds, step, table)
        return torch.argmax(logits[None, :] - torch.log(-torch.log(u)), dim=-1)

    expected = torch.softmax(logits.double(), -1).numpy() * len(seeds)
    picks = draw(5)
    for step in (0, 5, 1000):  # each step's draws across rows follow the softmax
        assert chisquare(np.bincount(draw(step).numpy(), minlength=5), expected).pvalue > 0.001
    # consecutive steps of one row are independent: the pair (step 5, step 6) follows the product law
    pairs = np.bincount((picks * 5 + draw(6)).numpy(), minlength=25)
    assert chisquare(pairs, np.outer(expected, expected).ravel() / len(seeds)).pvalue > 0.001


def test_bad_policy_settings_are_clear_errors(tmp_path, policy_dir, prompts, monkeypatch):
    import huggingface_hub.constants

    with pytest.raises(ParameterError, match="policy_model is not set"):
        generate_candidates(prompts, GenerationParams(), tmp_path / "w")
    with pytest.raises(ModelLoadError, match="no such directory"):
        generate_candidates(prompts, params(tmp_path / "nowhere" / "model"), tmp_path / "w")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(ModelLoadError, match="repro-tests/no-such-policy"):
        generate_candidates(prompts, params("repro-tests/no-such-policy"), tmp_path / "w")
    # a model without a chat template needs use_chat_template: false
    import shutil

    plain = tmp_path / "plain"
    shutil.copytree(policy_dir, plain)
    (plain / "chat_template.jinja").unlink()
    with pytest.raises(ParameterError, match="use_chat_template: false"):
        generate_candidates(prompts, params(plain), tmp_path / "w")
    assert len(generate_candidates(prompts[:2], params(plain, use_chat_template=False), tmp_path / "w")) == 2
    # a prompt budget the policy's context cannot hold with the new tokens
    context = json.loads((policy_dir / "config.json").read_text())["max_position_embeddings"]
    with pytest.raises(ParameterError, match=rf"max_prompt_tokens={context} plus \d+ new tokens exceeds the policy's "
                                             rf"context of {context} tokens: set max_prompt_tokens <= \d+"):
        generate_candidates(prompts[:2], params(policy_dir, max_prompt_tokens=context), tmp_path / "w")


def test_a_policy_that_names_no_context_needs_max_prompt_tokens_and_runs_with_it(tmp_path, policy_dir, prompts,
                                                                                 monkeypatch):
    # a model without positions (Mamba, say): no context length in its config, none in its tokenizer
    import transformers

    tokenizer = generation.load_tokenizer(generation.resolve_policy(str(policy_dir), None))
    tokenizer.model_max_length = int(1e30)  # transformers' value when a tokenizer names none
    monkeypatch.setattr(transformers.AutoConfig, "from_pretrained", lambda *a, **k: transformers.PretrainedConfig())
    assert generation.context_length(generation.resolve_policy(str(policy_dir), None), tokenizer) is None
    monkeypatch.undo()
    monkeypatch.setattr(generation, "context_length", lambda policy, tokenizer: None)
    with pytest.raises(ParameterError, match="Cannot tell the context length of .*: set max_prompt_tokens"):
        generate_candidates(prompts[:2], params(policy_dir), tmp_path / "w")
    rows = generate_candidates(prompts[:2], params(policy_dir, max_prompt_tokens=64, n_candidates=1), tmp_path / "w")
    assert len(rows) == 2 and all(r["resp0"] for r in rows)


@pytest.mark.vllm  # skips only where vLLM and a GPU are both here (the refusal is what it checks)
def test_vllm_backend_says_what_it_needs(tmp_path, policy_dir, prompts):
    try:
        import vllm  # noqa: F401
        import torch

        if torch.cuda.is_available():
            pytest.skip("vLLM and a GPU are both here: the backend would run, not refuse")
        needs = "needs a CUDA GPU"
    except ImportError:
        needs = "vLLM is not installed"
    with pytest.raises(ParameterError, match=needs):
        generate_candidates(prompts, params(policy_dir, generation_backend="vllm"), tmp_path / "w")


def test_progress_prints_lines_with_tokens_per_second_off_a_terminal(tmp_path, policy_dir, prompts, capfd):
    from transformers.utils import logging as hf_logging

    hf_logging.enable_progress_bar()
    generate_candidates(prompts, params(policy_dir), tmp_path / "w")
    err = capfd.readouterr().err
    assert "Loading weights" not in err  # (transformers' bar of the policy's load: a dead bar left in 01_construct)
    lines = [line for line in err.splitlines() if line.startswith("generation:")]
    assert lines and len(lines) <= 21
    assert lines[-1].startswith("generation: 100% (10/10 prompts)") and "tokens/s" in lines[-1]


def test_construction_with_generation_builds_the_dataset_offline(tmp_path, train_rows, monkeypatch):
    """Source prompts -> generated reference and candidates -> stand-in PairRM -> the seed's columns."""
    from repro.construct import stages as construct
    from repro.dataset_io import SEED_COLUMNS
    from repro.parameters import ConstructParams, build

    monkeypatch.setenv("REPRO_CACHE", str(tmp_path / "cache"))
    src = tmp_path / "prompts.jsonl"  # prompts only: everything else comes from the generation stage
    src.write_text("".join(json.dumps({"prompt": r["prompt"]}) + "\n" for r in train_rows[:6]))
    values = dict(run_dir=str(tmp_path / "run"), source=str(src), generate=True, candidate_columns=["resp0", "resp1"],
                  include_reference=True, scorer_model="builtin:tiny-pairrm", device="cpu", dtype="fp32",
                  policy_model="builtin:tiny-policy", generation_device="cpu", max_new_tokens=NEW_TOKENS,
                  reference_max_new_tokens=NEW_TOKENS)
    p, gen = build(ConstructParams, values), build(GenerationParams, values)
    ctx = construct.begin(p)
    rows = construct.generate(ctx, construct.slice_rows(ctx, construct.load(ctx)), gen)
    cands = construct.candidates(ctx, rows)
    out = construct.build(ctx, rows, cands, construct.score(ctx, cands))
    construct.write(ctx, out)

    assert out.column_names == SEED_COLUMNS and len(out) == 6
    generated = {r["prompt"]: r for r in rows.to_list()}
    for row in out.to_list():
        g = generated[row["prompt"]]
        assert row["reference_response"] == g["reference_response"]
        texts = {g["reference_response"], g["resp0"], g["resp1"]}
        assert row["chosen"][1]["content"] in texts and row["rejected"][1]["content"] in texts
        assert row["score_chosen"] >= row["score_rejected"]
    manifest = ctx.manifest.read()
    assert manifest["generation"]["stand_in"] is True and manifest["generation"]["prompts_generated"] == 6
    assert datasets.load_dataset(str(ctx.run.dataset))["train_prefs"].num_rows == 6


def test_the_same_policy_in_another_folder_has_the_same_fingerprint_and_another_policy_not(policy_dir, prompts,
                                                                                           tmp_path):
    # what decides the texts is the policy's content, not where it lies: a row cache serves its copies too
    import shutil

    copy = shutil.copytree(policy_dir, tmp_path / "elsewhere" / "my-policy")
    texts = [r["prompt"] for r in prompts]
    original = generation._Plan(texts, params(policy_dir)).fingerprint
    assert generation._Plan(texts, params(copy)).fingerprint == original
    (copy / "config.json").write_text((copy / "config.json").read_text().replace("}", ', "note": 1}', 1))
    assert generation._Plan(texts, params(copy)).fingerprint != original


def test_a_tokenizers_upgrade_gives_other_generation_work_and_an_unrelated_package_not(policy_dir, prompts,
                                                                                     monkeypatch):
    # the prompt's token ids decide the texts: a tokenizers upgrade reused every generated chunk
    texts, installed = [r["prompt"] for r in prompts], manifest.package_versions()

    def fingerprint(backend="transformers", **versions):
        monkeypatch.setattr(manifest, "package_versions", lambda: {**installed, **versions})
        return generation._Plan(texts, params(policy_dir, generation_backend=backend)).fingerprint

    original = fingerprint()
    assert fingerprint(seaborn="0.0.1") == original
    assert fingerprint(tokenizers="0.0.1") != original
    assert fingerprint(vllm="0.0.1") == original  # vLLM's version counts where it generates, and only there
    assert fingerprint("vllm", vllm="0.0.1") != fingerprint("vllm")


def stand_in_vllm() -> generation.VllmEngine:
    """A VllmEngine over a stand-in of vLLM that records the sampling parameters it is sent; its sample k of a
    request is the text "<prompt ids> k", k + 1 tokens long."""
    class FakeVllm:
        @staticmethod
        def SamplingParams(**kw):
            return kw

    class FakeLLM:
        def generate(self, prompts, sampling, use_tqdm):
            self.sampling = sampling
            return [type("O", (), {"outputs": [type("C", (), {"text": f"{p['prompt_token_ids']} {k}",
                                                              "token_ids": [1] * (k + 1)}) for k in range(s["n"])]})
                    for p, s in zip(prompts, sampling)]

    engine = generation.VllmEngine.__new__(generation.VllmEngine)
    engine.vllm, engine.eos_ids, engine.llm = FakeVllm, [2], FakeLLM()
    return engine


def test_vllm_gives_each_candidate_its_recipes_seed_for_every_prompt():
    # SPPO's generate.py samples candidate p of EVERY prompt with vLLM's per-request seed p*50; each sequence got a
    # seed hashed from the prompt instead, so no rebuild could give SPPO's texts, even on its vLLM and GPU
    engine = stand_in_vllm()
    sppo = GenerationParams(policy_model="builtin:tiny-policy", n_candidates=3, candidate_seeds=[0, 50, 100])
    items = [{"ids": [5, 6], "keys": generation.candidate_keys("p", sppo)},
             {"ids": [7], "keys": generation.candidate_keys("q", sppo)}]
    seqs = generation.candidate_requests(items, sppo)
    engine.generate(seqs, 4, 0.7, 0.9, lambda n, t: None)
    assert [s["seed"] for s in engine.llm.sampling] == [0, 50, 100, 0, 50, 100]
    plain = GenerationParams(policy_model="builtin:tiny-policy", n_candidates=2)
    items = [{"ids": [5, 6], "keys": generation.candidate_keys("p", plain)}]
    engine.generate(generation.candidate_requests(items, plain), 4, 0.7, 0.9, lambda n, t: None)
    assert [s["seed"] for s in engine.llm.sampling] == [k[0] << 31 | k[1] for k in items[0]["keys"]]
    greedy = GenerationParams(policy_model="builtin:tiny-policy", n_candidates=2, temperature=0)
    assert [(s.key, s.seed) for s in generation.candidate_requests(items, greedy)] == [(None, None)]


def test_strip_responses_false_keeps_each_text_as_decoded(tmp_path, policy_dir, prompts, monkeypatch):
    # SPPO's generate.py and RLHFlow's keep vLLM's text as it is (often with a leading space); every text was stripped
    decode = generation.TransformersEngine._decode  # the byte stand-in seldom decodes a space: a tokenizer that does
    monkeypatch.setattr(generation.TransformersEngine, "_decode",
                        lambda self, ids: (" " + decode(self, ids)[0] + "\n", decode(self, ids)[1]))
    stripped = generate_candidates(prompts, params(policy_dir, n_candidates=2), tmp_path / "a")
    raw = generate_candidates(prompts, params(policy_dir, n_candidates=2, strip_responses=False), tmp_path / "b")
    columns = ("reference_response", "resp0", "resp1")
    assert all(r[c].strip() == s[c] for r, s in zip(raw, stripped) for c in columns)
    assert all(r[c].startswith(" ") and r[c].endswith("\n") for r in raw for c in columns)
    texts = [r["prompt"] for r in prompts]  # a cached row of the other kind is not reused
    assert generation._Plan(texts, params(policy_dir, strip_responses=False)).fingerprint != \
        generation._Plan(texts, params(policy_dir)).fingerprint


def test_vllm_per_prompt_sends_one_request_of_n_samples_seeded_as_rlhflow_does():
    # RLHFlow's gen_hf.py asks vLLM for n=8 samples of each prompt in ONE request with seed 42; each candidate was a
    # request of its own, so no rebuild could give RLHFlow's texts
    engine = stand_in_vllm()
    rlhflow = GenerationParams(policy_model="builtin:tiny-policy", generation_backend="vllm", n_candidates=3,
                               generation_seed=42, vllm_requests="per_prompt", generate_reference=False)
    chunk = [{"ids": [5, 6], "keys": generation.candidate_keys("p", rlhflow)},
             {"ids": [7], "keys": generation.candidate_keys("q", rlhflow)}]
    counters = {"tokens": 0, "sequences": 0, "generate_seconds": 0.0}
    progress = type("P", (), {"add_tokens": lambda self, n: None})()
    out = generation._generate_chunk(engine, chunk, rlhflow, lambda n: None, progress, counters)
    assert [(s["n"], s["seed"]) for s in engine.llm.sampling] == [(3, 42), (3, 42)]
    assert [r["candidates"] for r in out] == [["[5, 6] 0", "[5, 6] 1", "[5, 6] 2"], ["[7] 0", "[7] 1", "[7] 2"]]
    assert counters["sequences"] == 6 and counters["tokens"] == 12
    with pytest.raises(ValueError, match="vllm_requests: per_prompt.*candidate_seeds"):
        GenerationParams(policy_model="builtin:tiny-policy", n_candidates=2, candidate_seeds=[0, 50],
                         vllm_requests="per_prompt")


def test_a_local_policy_folder_that_lacks_a_part_is_told_so_without_hub_advice(tmp_path, policy_dir, prompts):
    """policy_model=<an empty folder> said "Couldn't instantiate the backend tokenizer ... sentencepiece or tiktoken
    ..." and one without weights "Error no file named model.safetensors", both then "If it is a hub id ..., download
    it (`hf download <the local path>`)". Now: what the folder lacks, as the scorers' loader says it."""
    import shutil

    (empty := tmp_path / "empty").mkdir()
    no_weights = shutil.copytree(policy_dir, tmp_path / "no-weights", ignore=shutil.ignore_patterns("*.safetensors",
                                                                                                    STAND_IN_MARKER))
    no_tokenizer = shutil.copytree(policy_dir, tmp_path / "no-tokenizer", ignore=shutil.ignore_patterns("tokenizer*",
                                                                                                        STAND_IN_MARKER))
    (yaml := tmp_path / "policy.yaml").write_text("a: 1\n")
    for folder, words in ((empty, f"folder {empty} has no config.json"), (yaml, "is not a directory"),
                          (no_weights, f"folder {no_weights} has no weights"), (no_tokenizer, "its tokenizer could")):
        with pytest.raises(ModelLoadError, match=words) as failed:
            generate_candidates(prompts, params(folder), tmp_path / "w")
        assert "hf download" not in str(failed.value) and "hub id" not in str(failed.value)
