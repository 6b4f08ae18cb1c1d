"""repro.scorers.tiny: the stand-in checkpoint is byte-identical for the same arguments and has the real layouts."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
import torch

from repro.errors import ModelLoadError, ParameterError
from repro.scorers.tiny import BACKBONE_DIR, build_builtin, build_tiny_pairrm


def digests(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_same_arguments_give_byte_identical_files(tmp_path, tiny_pairrm_dir):
    again = build_tiny_pairrm(tmp_path / "again")
    assert digests(again) == digests(tiny_pairrm_dir)
    other_seed = digests(build_tiny_pairrm(tmp_path / "seed1", seed=1))
    changed = {name for name, d in digests(tiny_pairrm_dir).items() if other_seed[name] != d}
    # the seed draws the weights (and is recorded); the tokenizer does not depend on it
    assert changed == {"model.safetensors", f"{BACKBONE_DIR}/model.safetensors", "repro_stand_in.json"}


def test_llm_blender_layout(tiny_pairrm_dir):
    from safetensors.torch import load_file
    from transformers import AutoTokenizer

    config = json.loads((tiny_pairrm_dir / "config.json").read_text())
    assert config["ranker_type"] == "pairranker" and config["model_name"] == BACKBONE_DIR
    assert (config["source_maxlength"], config["candidate_maxlength"], config["fp16"]) == (1224, 412, True)
    state = load_file(str(tiny_pairrm_dir / "model.safetensors"))
    assert {k.split(".")[0] for k in state} == {"pretrained_model", "head_layer"}
    assert set(k for k in state if k.startswith("head_layer")) == {
        "head_layer.1.weight", "head_layer.1.bias", "head_layer.4.weight", "head_layer.4.bias"}
    tok = AutoTokenizer.from_pretrained(str(tiny_pairrm_dir))
    n = len(tok)
    ids = tok.convert_tokens_to_ids(["<|source|>", "<|candidate1|>", "<|candidate2|>", "<|candidate|>", "[MASK]"])
    assert ids == [n - 4, n - 3, n - 2, n - 1, n - 5]  # DeBERTa-v3's order: pieces, [MASK], then PairRM's four
    assert state["pretrained_model.embeddings.word_embeddings.weight"].shape[0] == n
    assert (tok.pad_token_id, tok.cls_token_id, tok.sep_token_id, tok.unk_token_id) == (0, 1, 2, 3)
    # llm-blender's backbone: the tokenizer without the prefix tokens, weights it overwrites
    assert len(AutoTokenizer.from_pretrained(str(tiny_pairrm_dir / BACKBONE_DIR))) == n - 4
    assert json.loads((tiny_pairrm_dir / "repro_stand_in.json").read_text())["layout"] == "llm-blender"


def test_transformers_layout_names_the_prefix_ids(tmp_path):
    folder = build_tiny_pairrm(tmp_path / "hf", layout="transformers")
    config = json.loads((folder / "config.json").read_text())
    assert config["model_type"] == "deberta-v2" and config["architectures"] == ["DebertaV2PairRM"]
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(folder))
    assert [config[k] for k in ("source_prefix_id", "cand1_prefix_id", "cand2_prefix_id", "cand_prefix_id")] == \
        tok.convert_tokens_to_ids(["<|source|>", "<|candidate1|>", "<|candidate2|>", "<|candidate|>"])
    assert not (folder / BACKBONE_DIR).exists()


def test_both_weight_files_hold_the_same_tensors(tmp_path):
    from safetensors.torch import load_file

    folder = build_tiny_pairrm(tmp_path / "both", weights_format="both")
    bin_state = torch.load(folder / "pytorch_model.bin", weights_only=True)
    st_state = load_file(str(folder / "model.safetensors"))
    assert bin_state.keys() == st_state.keys()
    assert all(torch.equal(bin_state[k], st_state[k]) for k in st_state)


def test_mid_size_benchmark_model(tmp_path, train_rows, test_rows, mid_size_shape):
    """hidden 384, 6 layers, a few thousand pieces: UltraFeedback pairs come to several hundred tokens."""
    from repro.scorers.pairrm import PairRM

    texts = [r["prompt"] for r in train_rows[:200]] + [r["chosen"][1]["content"] for r in train_rows[:200]]
    folder = build_tiny_pairrm(tmp_path / "mid", **{**mid_size_shape, "vocab_size": 4000}, initializer_range=0.02,
                               extra_corpus=texts)
    scorer = PairRM.load(folder, device="cpu")
    n_params = sum(p.numel() for p in scorer.model.parameters())
    assert 10e6 < n_params < 20e6 and len(scorer.tokenizer) == 4005
    row = test_rows[0]  # a real row the tokenizer was not trained on
    ids = scorer.pass_inputs([row["prompt"]], [[row["chosen"][1]["content"], row["rejected"][1]["content"]]])[0]
    words = len((row["prompt"] + " " + row["chosen"][1]["content"] + " " + row["rejected"][1]["content"]).split())
    assert len(ids[(0, 1)]) < 3 * words  # English-like pieces, not characters


def test_impossible_sizes_are_refused(tmp_path):
    with pytest.raises(ParameterError, match="vocab_size=100000"):
        build_tiny_pairrm(tmp_path / "v", vocab_size=100000)
    with pytest.raises(ParameterError, match="multiple of num_heads"):
        build_tiny_pairrm(tmp_path / "h", hidden_size=30, num_heads=4)


def test_a_shared_cache_s_stand_in_takes_the_umask_s_modes_and_its_folder_s_group(tmp_path, monkeypatch):
    # an admin built the stand-ins once into a group-shared REPRO_CACHE (2775, umask 002) for every user: safetensors
    # wrote model.safetensors 0600 whatever the umask (another user got "FileNotFoundError: No such file or directory"
    # for it, and --check had said ok), and the folder built lost the setgid bit, so its files got the admin's group
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chown(shared, -1, 4242)  # the lab's group
    shared.chmod(0o2775)
    monkeypatch.setenv("REPRO_CACHE", str(shared))
    umask = os.umask(0o002)
    try:
        built = build_builtin("builtin:tiny-pairrm")
    finally:
        os.umask(umask)
    paths = [built, *built.rglob("*")]
    assert {p.stat().st_mode & 0o7777 for p in paths if p.is_dir()} == {0o2775}
    assert {p.stat().st_mode & 0o7777 for p in paths if p.is_file()} == {0o664}  # as every file the process writes
    assert {p.stat().st_gid for p in paths} == {4242}
    # a stand-in another user's umask left unreadable (root reads everything: os.access says what a user may)
    denied = built / BACKBONE_DIR / "model.safetensors"
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if Path(p) == denied and mode & os.R_OK
                        else real_access(p, mode, **kw))
    with pytest.raises(ModelLoadError) as refused:
        build_builtin("builtin:tiny-pairrm")
    assert str(refused.value) == (
        f"permission denied: {denied} cannot be read by you. Ask its owner to make the stand-in readable (chmod -R "
        f"a+rX {built}), or set REPRO_CACHE to a folder of your own, where repro builds the stand-ins it needs.")
