"""The scorer stand-ins, built offline and byte-identically (a tiny random PairRM of either layout, its tokenizer
trained here; tiny random Llama / DeBERTa-v2 reward models): noise scores, through the real code paths."""

from __future__ import annotations

import io
import json
from importlib import resources
import random
import re
from pathlib import Path
from typing import Iterable

import sentencepiece as spm
import torch
from safetensors.torch import save_file
from sentencepiece import sentencepiece_model_pb2
from tokenizers import AddedToken, Tokenizer, decoders, pre_tokenizers, processors
from tokenizers.models import Unigram

from ..errors import ParameterError
from ..jobs import build_once
from ..parameters import BUILTIN_SCORERS, PAIRRM_LIMITS, STAND_IN_VERSION, builtin_folder
from ..paths import STAND_IN_MARKER
from .pairrm_attention import PairRMModel
from .pairrm_tokens import PREFIX_TOKENS, sentencepiece_normalizer
from .tiny_policy import byte_tokenizer

# microsoft/deberta-v3-large's config.json: llm-blender/PairRM's backbone (llm-blender downloads its 1.7 GB of weights
# only to overwrite them; loading needs just this), and at other sizes the stand-ins'.
DEBERTA_V3_LARGE = dict(
    hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096, hidden_act="gelu",
    hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1, max_position_embeddings=512, type_vocab_size=0,
    initializer_range=0.02, layer_norm_eps=1e-7, relative_attention=True, max_relative_positions=-1, pad_token_id=0,
    position_biased_input=False, pos_att_type=["p2c", "c2p"], position_buckets=256, norm_rel_ebd="layer_norm",
    share_att_key=True, vocab_size=128100)
SPECIAL_TOKENS = {"pad_token": "[PAD]", "cls_token": "[CLS]", "sep_token": "[SEP]", "unk_token": "[UNK]",
                  "mask_token": "[MASK]", "bos_token": "[CLS]", "eos_token": "[SEP]"}
BACKBONE_DIR = "backbone"

# The embedded corpus: assistant-style English plus the scripts and symbols scoring must survive.
SENTENCES = tuple(json.loads((resources.files("repro") / "data" / "tiny_corpus.json").read_text(encoding="utf-8")))
# English affixes on the corpus' stems: words enough for a few thousand English-like pieces (a benchmark model)
_PREFIXES = ("", "", "", "un", "re", "pre", "dis", "over", "under", "inter", "mis", "non", "sub", "super", "co",
             "anti", "auto", "semi", "trans")
_SUFFIXES = ("", "", "s", "ed", "ing", "ly", "ness", "ment", "tion", "able", "er", "est", "ful", "less", "ous",
             "ive", "al", "ity", "ize", "ship", "hood", "ism", "ist", "ward")
_CORPUS_SEED = 20240611


def training_corpus(vocab_size: int, extra: Iterable[str] = ()) -> list[str]:
    """The sentences the tokenizer is trained on: the embedded corpus, synthetic sentences, then `extra`."""
    rng = random.Random(_CORPUS_SEED)
    stems = sorted({re.sub(r"[^a-z]", "", w.lower()) for s in SENTENCES for w in s.split()} - {""})
    out = list(SENTENCES)
    for _ in range(min(max(300, vocab_size), 8000)):  # about one sentence per piece supports the vocab
        words = [rng.choice(_PREFIXES) + rng.choice(stems) + rng.choice(_SUFFIXES) for _ in range(rng.randint(4, 16))]
        words[0] = words[0].capitalize()
        out.append(" ".join(words) + rng.choice(".,;!?:"))
    return out + [str(t) for t in extra]


def train_sentencepiece(vocab_size: int, extra_corpus: Iterable[str] = ()) -> bytes:
    """A unigram sentencepiece model with DeBERTa-v3's special pieces ([PAD] 0, [CLS] 1, [SEP] 2, [UNK] 3)."""
    model = io.BytesIO()
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(training_corpus(vocab_size, extra_corpus)), model_writer=model,
            vocab_size=vocab_size, model_type="unigram", character_coverage=1.0,
            pad_id=0, pad_piece="[PAD]", bos_id=1, bos_piece="[CLS]", eos_id=2, eos_piece="[SEP]",
            unk_id=3, unk_piece="[UNK]", num_threads=1, minloglevel=2)  # one thread: byte-identical output
    except RuntimeError as exc:
        raise ParameterError(
            f"vocab_size={vocab_size} is more than the tiny tokenizer's corpus supports ({exc}); use a smaller "
            "vocab_size or pass more text as extra_corpus.") from None
    return model.getvalue()


def _backend_tokenizer(spm_model: bytes, with_prefixes: bool):
    """The `tokenizers` object transformers 4 built from spm.model (DebertaV2Converter), as PairRM shipped it."""
    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(spm_model)
    tok = Tokenizer(Unigram([(p.piece, p.score) for p in proto.pieces], unk_id=proto.trainer_spec.unk_id))
    tok.normalizer = sentencepiece_normalizer(proto.normalizer_spec.precompiled_charsmap)
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS]:0 $A:0 [SEP]:0", pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1",
        special_tokens=[("[CLS]", 1), ("[SEP]", 2)])
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False)
                            for t in ("[PAD]", "[CLS]", "[SEP]", "[UNK]", "[MASK]")])
    if with_prefixes:
        # what llm-blender's CrossCompareCollator adds with `tokenizer.add_tokens` (plain added tokens)
        tok.add_tokens([AddedToken(t, special=False, normalized=True) for t in PREFIX_TOKENS])
    return tok


def _write_json(path: Path, value) -> None:
    path.write_text(json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")


def _write_tokenizer(folder: Path, spm_model: bytes, with_prefixes: bool) -> int:
    """Write the tokenizer files of a DeBERTa-v3 checkpoint; returns the vocabulary size (len(tokenizer))."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "spm.model").write_bytes(spm_model)
    tok = _backend_tokenizer(spm_model, with_prefixes)
    (folder / "tokenizer.json").write_text(tok.to_str(pretty=True) + "\n", encoding="utf-8")
    _write_json(folder / "tokenizer_config.json", {
        "tokenizer_class": "DebertaV2Tokenizer", "vocab_type": "spm", "do_lower_case": False,
        "split_by_punct": False, "model_max_length": 1000000000000000019884624838656, **SPECIAL_TOKENS})
    _write_json(folder / "special_tokens_map.json", SPECIAL_TOKENS)
    base = tok.get_vocab_size(with_added_tokens=False)
    added = {t: tok.token_to_id(t) for t in ("[MASK]",) + (PREFIX_TOKENS if with_prefixes else ())
             if tok.token_to_id(t) >= base}
    _write_json(folder / "added_tokens.json", added)
    return tok.get_vocab_size(with_added_tokens=True)


def _backbone_config(vocab_size: int, hidden_size: int, num_layers: int, num_heads: int, **shape):
    """DeBERTa-v3-large's architecture settings at a chosen size."""
    from transformers import DebertaV2Config  # keeps transformers off `repro score --help`

    size = dict(vocab_size=vocab_size, hidden_size=hidden_size, num_hidden_layers=num_layers,
                num_attention_heads=num_heads)
    return DebertaV2Config(**DEBERTA_V3_LARGE | shape | size)


def _config_json(config, **extra) -> dict:
    """A config's JSON without the field that names the transformers version (kept byte-stable)."""
    return {k: v for k, v in config.to_dict().items() if k != "transformers_version"} | extra


def build_tiny_pairrm(out_dir: str | Path, *, seed: int = 0, hidden_size: int = 32, num_layers: int = 2,
                      num_heads: int = 2, intermediate_size: int = 64, vocab_size: int = 600,
                      initializer_range: float = 1.0, layout: str = "llm-blender",
                      weights_format: str = "safetensors", extra_corpus: Iterable[str] = (),
                      source_maxlength: int = PAIRRM_LIMITS["source_maxlength"],
                      candidate_maxlength: int = PAIRRM_LIMITS["candidate_maxlength"]) -> Path:
    """A random PairRM in `out_dir`, llm-blender's (`backbone/`) or PairRM-hf's; `initializer_range=1.0` spreads
    scores to ~0.1 (0.02: near-ties); `extra_corpus`: tokenizer text (realistic counts); limits into RankerConfig."""
    if layout not in ("llm-blender", "transformers"):
        raise ParameterError(f"layout={layout!r}: expected 'llm-blender' or 'transformers'.")
    if weights_format not in ("safetensors", "bin", "both"):
        raise ParameterError(f"weights_format={weights_format!r}: expected 'safetensors', 'bin' or 'both'.")
    if hidden_size % num_heads:
        raise ParameterError(f"hidden_size={hidden_size} must be a multiple of num_heads={num_heads}.")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    spm_model = train_sentencepiece(vocab_size, extra_corpus)
    n_tokens = _write_tokenizer(out_dir, spm_model, with_prefixes=True)
    shape = dict(hidden_size=hidden_size, num_layers=num_layers, num_heads=num_heads,
                 intermediate_size=intermediate_size, initializer_range=initializer_range)
    config = _backbone_config(n_tokens, **shape)
    torch.manual_seed(seed)  # default PyTorch init of llm-blender's network
    weights = {k: v.detach().contiguous().clone() for k, v in PairRMModel(config).state_dict().items()}
    if weights_format in ("safetensors", "both"):
        save_file(weights, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    if weights_format in ("bin", "both"):
        torch.save(weights, out_dir / "pytorch_model.bin")

    if layout == "llm-blender":
        _write_json(out_dir / "config.json", {  # llm-blender's RankerConfig as `llm-blender/PairRM` ships it
            "ranker_type": "pairranker", "model_type": "deberta", "model_name": BACKBONE_DIR, "cache_dir": None,
            "load_checkpoint": None, "source_maxlength": source_maxlength, "candidate_maxlength": candidate_maxlength,
            "n_tasks": 1, "num_pos": 5, "num_neg": 5, "sub_sampling_mode": "all_pair", "sub_sampling_ratio": 0.4,
            "loss_type": "instructgpt", "reduce_type": "linear", "inference_mode": "bubble", "drop_out": 0.05,
            "fp16": True})
        # llm-blender loads `model_name` with AutoModel/AutoTokenizer before overwriting its weights
        backbone = out_dir / BACKBONE_DIR
        n_base = _write_tokenizer(backbone, spm_model, with_prefixes=False)
        base_config = _config_json(_backbone_config(n_base, **shape), architectures=["DebertaV2Model"])
        _write_json(backbone / "config.json", base_config)
        base = {k[len("pretrained_model."):]: v for k, v in weights.items() if k.startswith("pretrained_model.")}
        base["embeddings.word_embeddings.weight"] = base["embeddings.word_embeddings.weight"][:n_base].clone()
        save_file(base, str(backbone / "model.safetensors"), metadata={"format": "pt"})
    else:
        ids = {t: n_tokens - len(PREFIX_TOKENS) + i for i, t in enumerate(PREFIX_TOKENS)}
        _write_json(out_dir / "config.json", _config_json(
            config, architectures=["DebertaV2PairRM"], n_tasks=1, drop_out=0.05, sep_token_id=2,
            source_prefix_id=ids["<|source|>"], cand1_prefix_id=ids["<|candidate1|>"],
            cand2_prefix_id=ids["<|candidate2|>"], cand_prefix_id=ids["<|candidate|>"]))
    _write_json(out_dir / STAND_IN_MARKER, {
        "builder": f"repro.tiny v{STAND_IN_VERSION}", "what": "random PairRM-architecture weights: scores are noise",
        "layout": layout, "seed": seed, "vocab_size": vocab_size, **shape})
    return out_dir


BUILTIN_TINY = next(name for name, what in BUILTIN_SCORERS.items() if what == "pairrm")
BUILTIN_REWARD_MODELS = {name: arch for name, arch in BUILTIN_SCORERS.items() if name != BUILTIN_TINY}  # -> arch
# an encoder reads the whole conversation and pools its first token ([CLS]): the template starts with it
DEBERTA_CHAT_TEMPLATE = ("[CLS]{% for message in messages %}{{ message['role'] }}: {{ message['content'] }}[SEP]"
                         "{% endfor %}")


def build_tiny_reward_model(out_dir: str | Path, arch: str = "llama", *, seed: int = 0, num_labels: int = 1,
                            chat_template: bool = True, hidden_size: int = 32, num_layers: int = 2,
                            num_heads: int = 4, intermediate_size: int = 64, initializer_range: float = 0.2,
                            vocab_size: int = 600) -> Path:
    """A random `*ForSequenceClassification` reward model in `out_dir`: Llama with the stand-in policy's byte-level
    ChatML tokenizer, or DeBERTa-v2 with a sentencepiece tokenizer trained here and `DEBERTA_CHAT_TEMPLATE`."""
    # keeps transformers off `repro score --help`
    from transformers import AutoModelForSequenceClassification, LlamaConfig

    if arch not in ("llama", "deberta"):
        raise ParameterError(f"arch={arch!r}: expected 'llama' or 'deberta'.")
    if hidden_size % num_heads:
        raise ParameterError(f"hidden_size={hidden_size} must be a multiple of num_heads={num_heads}.")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    if arch == "llama":
        tokenizer = byte_tokenizer(None)
        if not chat_template:
            tokenizer.chat_template = None
        tokenizer.save_pretrained(out_dir)
        config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=hidden_size, intermediate_size=intermediate_size,
                             num_hidden_layers=num_layers, num_attention_heads=num_heads,
                             num_key_value_heads=max(1, num_heads // 2), max_position_embeddings=2048,
                             initializer_range=initializer_range, bos_token_id=None,
                             eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
                             num_labels=num_labels, rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
    else:
        n_tokens = _write_tokenizer(out_dir, train_sentencepiece(vocab_size), with_prefixes=False)
        if chat_template:
            (out_dir / "chat_template.jinja").write_text(DEBERTA_CHAT_TEMPLATE, encoding="utf-8")
        config = _backbone_config(n_tokens, hidden_size, num_layers, num_heads, intermediate_size=intermediate_size,
                                  initializer_range=initializer_range, num_labels=num_labels)
    AutoModelForSequenceClassification.from_config(config).save_pretrained(out_dir)
    _write_json(out_dir / STAND_IN_MARKER, {
        "builder": f"repro.scorers.tiny v{STAND_IN_VERSION}", "arch": arch, "seed": seed, "num_labels": num_labels,
        "what": "random sequence-classifier reward model: scores are noise"})
    return out_dir


def build_builtin(spec: str) -> Path:
    """The built-in stand-in `spec` at its defaults, built once in the cache (atomically: safe across processes)."""
    return build_once(builtin_folder(spec), build_tiny_pairrm if spec == BUILTIN_TINY else
                      lambda folder: build_tiny_reward_model(folder, BUILTIN_REWARD_MODELS[spec]))
