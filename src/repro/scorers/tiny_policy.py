"""The policy stand-in, built offline and deterministically: a byte-level tokenizer (id = byte) with ChatML tokens
and a random Llama that only generates printable ASCII and newlines, so responses run to exactly `max_new_tokens`
(`size="1b"`: a TinyLlama-1.1B-shaped config only, weights drawn at load time). Its text is noise."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers

from ..errors import ParameterError
from ..jobs import build_once
from ..parameters import STAND_IN_VERSION
from ..paths import STAND_IN_MARKER, cache_root

SPECIAL_TOKENS = ("<|im_start|>", "<|im_end|>", "<|pad|>")
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

SIZES: dict[str, dict] = {
    # a few hundred thousand parameters: builds in well under a second, generates fast on one CPU core
    # initializer_range 0.2 (not 0.02): the layers then matter, so the noise depends on the prompt
    "tiny": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, max_position_embeddings=2048, vocab_size=None, initializer_range=0.2),
    # TinyLlama-1.1B's shape (22 layers, hidden 2048, GQA 32/4 heads, 32000 tokens): a 1B-class GPU timing
    "1b": dict(hidden_size=2048, intermediate_size=5632, num_hidden_layers=22, num_attention_heads=32,
               num_key_value_heads=4, max_position_embeddings=2048, vocab_size=32000, initializer_range=0.02),
}
# The residual stream's first component is RESIDUAL_CONSTANT (set in every embedding, written by no layer), so it is
# positive after the final norm; the head reads it with weight -SILENT_WEIGHT for every non-speaking token (measured
# on the tiny size over real prompts: the best silent token stays >= 29 logits below the best speaking one, sd 2.5).
RESIDUAL_CONSTANT = 2.0
SPEAKING_TOKEN_IDS = [10] + list(range(0x20, 0x7F))  # the newline and printable ASCII (token id = byte value)
SILENT_WEIGHT = 100.0
SPEAKING_WEIGHT_STD = 0.3


def byte_tokenizer(vocab_size: int | None):
    """Byte-level tokenizer (id = byte), three special tokens, optional unused fillers up to `vocab_size`."""
    from transformers import PreTrainedTokenizerFast  # keeps transformers off `repro score --help`
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    byte_chars = bytes_to_unicode()  # byte value -> the printable character byte-level BPE uses for it
    vocab = {byte_chars[b]: b for b in range(256)}
    if vocab_size is not None:
        # fillers decode to their own (ASCII) names: never produced from text, only ever sampled
        for i in range(vocab_size - len(SPECIAL_TOKENS) - 256):
            vocab[f"<|reserved_{i}|>"] = len(vocab)
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    backend.decoder = decoders.ByteLevel()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<|im_end|>", pad_token="<|pad|>",
                                        additional_special_tokens=["<|im_start|>"], model_max_length=None)
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def shape_stand_in(model, seed: int) -> None:
    """Make a random Llama speak printable ASCII only: every other token (EOS included) is pushed far down."""
    generator = torch.Generator().manual_seed(seed + 1)
    head = model.get_output_embeddings().weight
    vocab, hidden = head.shape
    speaking = torch.tensor(SPEAKING_TOKEN_IDS)
    silent = torch.ones(vocab, dtype=torch.bool)
    silent[speaking] = False
    weights = torch.zeros((vocab, hidden), dtype=torch.float32)
    weights[speaking, 1:] = torch.randn(len(speaking), hidden - 1, generator=generator) * SPEAKING_WEIGHT_STD
    weights[silent, 0] = -SILENT_WEIGHT
    with torch.no_grad():
        model.get_input_embeddings().weight[:, 0] = RESIDUAL_CONSTANT
        for layer in model.model.layers:  # no layer writes into component 0 of the residual stream
            layer.self_attn.o_proj.weight[0, :] = 0
            layer.mlp.down_proj.weight[0, :] = 0
        head.copy_(weights.to(head.dtype))


def build_tiny_policy(out_dir: str | Path | None = None, seed: int = 0, size: str = "tiny",
                      max_position_embeddings: int | None = None, config_only: bool | None = None) -> Path:
    """Write the stand-in policy (tokenizer with chat template + random Llama) to `out_dir` or the cache; returns the
    dir. `config_only` (default: only for size "1b") writes no weights: they are drawn from `seed` at load time."""
    if size not in SIZES:
        raise ParameterError(f"Unknown stand-in policy size {size!r}; choose one of {sorted(SIZES)}.")
    config_only = size == "1b" if config_only is None else config_only
    if out_dir is None:
        ctx = f"-ctx{max_position_embeddings}" if max_position_embeddings else ""
        kind = "-config" if config_only and size != "1b" else ""
        out_dir = cache_root() / f"tiny-policy-{size}{kind}-seed{seed}{ctx}-v{STAND_IN_VERSION}"
    return build_once(Path(out_dir), lambda tmp: _write_policy(tmp, seed, size, max_position_embeddings, config_only))


def _write_policy(path: Path, seed: int, size: str, max_position_embeddings: int | None, config_only: bool) -> None:
    from transformers import GenerationConfig, LlamaConfig  # keeps transformers off `repro score --help`

    shape = dict(SIZES[size])
    tokenizer = byte_tokenizer(shape["vocab_size"])
    shape["vocab_size"] = shape["vocab_size"] or len(tokenizer)
    if max_position_embeddings is not None:
        shape["max_position_embeddings"] = int(max_position_embeddings)
    config = LlamaConfig(**shape, bos_token_id=None, eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id, tie_word_embeddings=False,
                         rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
    tokenizer.save_pretrained(path)
    GenerationConfig(eos_token_id=config.eos_token_id, pad_token_id=config.pad_token_id).save_pretrained(path)
    marker = {"builder": f"repro.scorers.tiny_policy v{STAND_IN_VERSION}", "size": size, "seed": seed,
              "random_init": config_only}
    (path / STAND_IN_MARKER).write_text(json.dumps(marker) + "\n")
    if config_only:
        config.save_pretrained(path)
    else:  # save_pretrained writes config.json last of all, which marks the directory complete
        init_random_weights(config, seed).save_pretrained(path)


def init_random_weights(config, seed: int, dtype=None, device: str = "cpu"):
    """The model of a config-only stand-in: random weights from `seed`, drawn on `device` (fast for 1B, reproducible
    per kind of device, not across CPU and GPU: fine for a timing stand-in), shaped head."""
    from transformers import AutoModelForCausalLM  # keeps transformers off `repro score --help`

    torch.manual_seed(seed)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    shape_stand_in(model, seed)
    return model
