"""PairRM on current transformers: the model, its tokenisation, loading of both layouts, and a fast engine.

PairRM (llm-blender's pairwise reward model) reads one ordered pair of candidates per forward pass,

    [CLS] <|source|> prompt [SEP] [CLS] <|candidate1|> a [SEP] [CLS] <|candidate2|> b [SEP]

and returns head(source, a) − head(source, b) from the last hidden states at the three prefix tokens.
For c candidates every ordered pair i ≠ j fills M[i, j]; score_i = mean over j of (M[i, j] − M[j, i])
(dividing by c), exactly as llm-blender's `Blender.rank(..., return_scores=True)`. Lengths follow
llm-blender at `batch_size=1`: the source keeps ≤ `source_maxlength` tokens (with [CLS]/[SEP]); each
candidate keeps ≤ `candidate_maxlength` + (source budget left unused) // 2, a budget per prompt.

The engine tokenises every distinct source and candidate text once, assembles each pass from ids, removes
passes that are identical, sorts passes by length and packs them into batches by a token budget (padded
tokens counted), and returns results in input order. The normaliser is sentencepiece's own table (what
transformers 4 gave DeBERTa-v3 tokenizers and what PairRM was used with; transformers 5 replaced it with
NFC, which turns full-width letters and ligatures into [UNK]); without an spm.model, NFKC is applied first.

    scorer = load_scorer("llm-blender/PairRM", device="auto", dtype="auto")
    scores = scorer.score(prompts, candidates)          # list of float64 arrays, input order
"""

from __future__ import annotations

import json
import re
import unicodedata
import warnings
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import torch
from torch import nn

from .errors import DataError, ModelLoadError, ParameterError, ReproError

BUILTIN_TINY = "builtin:tiny-pairrm"
SOURCE_PREFIX, CANDIDATE1_PREFIX, CANDIDATE2_PREFIX, CANDIDATE_PREFIX = (
    "<|source|>", "<|candidate1|>", "<|candidate2|>", "<|candidate|>")
PREFIX_TOKENS = (SOURCE_PREFIX, CANDIDATE1_PREFIX, CANDIDATE2_PREFIX, CANDIDATE_PREFIX)
KNOWN_HUB_IDS = ("llm-blender/PairRM", "llm-blender/PairRM-hf")
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
DEFAULT_BATCH_TOKENS = 16384
# microsoft/deberta-v3-large's config.json: the backbone of llm-blender/PairRM. Kept here so that loading
# the llm-blender layout needs nothing of deberta-v3-large (llm-blender downloads its 1.7 GB of weights
# only to overwrite them). vocab_size comes from the checkpoint's embedding matrix.
DEBERTA_V3_LARGE = dict(
    model_type="deberta-v2", hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
    intermediate_size=4096, hidden_act="gelu", hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1,
    max_position_embeddings=512, type_vocab_size=0, initializer_range=0.02, layer_norm_eps=1e-7,
    relative_attention=True, max_relative_positions=-1, pad_token_id=0, position_biased_input=False,
    pos_att_type=["p2c", "c2p"], position_buckets=256, norm_rel_ebd="layer_norm", share_att_key=True,
    vocab_size=128100)
DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
DTYPE_ALIASES = {"float32": "fp32", "float": "fp32", "float16": "fp16", "half": "fp16", "bfloat16": "bf16"}


# ------------------------------------------------------------------------------------------------
# finding a checkpoint
# ------------------------------------------------------------------------------------------------
def cache_root() -> Path:
    """Where built stand-ins are kept: $REPRO_CACHE, else ~/.cache/repro."""
    from .tiny_policy import cache_root as _root

    return _root()


def is_stand_in(spec: str | Path) -> bool:
    """True for a random stand-in (`builtin:tiny-pairrm`, or a directory `repro.tiny` built): its scores are noise."""
    from .tiny_policy import STAND_IN_MARKER

    spec = str(spec)
    if spec.startswith("builtin:"):
        return True
    try:
        return (Path(spec).expanduser() / STAND_IN_MARKER).is_file()
    except OSError:
        return False


def _how_to_provide(spec: str) -> str:
    repo = spec if "/" in spec else "llm-blender/PairRM-hf"
    return (f"To provide it: on a machine with internet run `hf download {repo} --include '*.json' spm.model "
            f"model.safetensors` (it lands in the hub cache; copy that cache or set HF_HOME to it), or download "
            f"the folder anywhere and pass its path as the model; for a run without any download use "
            f"'{BUILTIN_TINY}' (a random stand-in whose scores are noise).")


def _looks_like_path(spec: str) -> bool:
    return spec.startswith((".", "/", "~")) or spec.count("/") != 1 or "\\" in spec


def _has_weights(folder: Path) -> bool:
    return any((folder / name).is_file() for name in WEIGHT_FILES)


def _from_hub(repo_id: str) -> Path:
    """A hub checkpoint's local snapshot (config, tokenizer and one weights file only; never the backbone's)."""
    from huggingface_hub import constants, snapshot_download

    # llm-blender's own download location (`snapshot_download(local_dir=TRANSFORMERS_CACHE/<repo>)`)
    legacy = Path(constants.HF_HUB_CACHE) / repo_id
    if (legacy / "config.json").is_file() and _has_weights(legacy):
        return legacy
    reasons = []
    for weights in WEIGHT_FILES:
        try:
            folder = Path(snapshot_download(repo_id, allow_patterns=["*.json", "spm.model", weights]))
        except Exception as exc:  # offline, not cached, no such repo, network: all end the same way here
            reasons.append(f"{type(exc).__name__}: {str(exc).splitlines()[0].rstrip('.') if str(exc) else ''}")
            break
        if (folder / "config.json").is_file() and (folder / weights).is_file():
            return folder
        reasons.append(f"the snapshot at {folder} has no {weights}")
    offline = " (HF_HUB_OFFLINE=1: the hub was not asked)" if constants.HF_HUB_OFFLINE else ""
    raise ModelLoadError(
        f"PairRM model '{repo_id}' could not be loaded: it is not a local directory (no folder "
        f"{Path(repo_id).resolve()}), not in llm-blender's download folder ({legacy}) and not in the Hugging Face "
        f"hub cache ({constants.HF_HUB_CACHE}){offline}; {'; '.join(reasons)}. {_how_to_provide(repo_id)}")


def resolve_model(spec: str | Path) -> Path:
    """The local directory of a PairRM checkpoint: `builtin:tiny-pairrm` (built once), a directory, or a hub id."""
    spec = str(spec).strip()
    if spec == BUILTIN_TINY:
        from .tiny import build_cached_tiny_pairrm

        return build_cached_tiny_pairrm(cache_root())
    if spec.startswith("builtin:"):
        raise ModelLoadError(f"Unknown built-in model '{spec}': the only one is '{BUILTIN_TINY}'.")
    path = Path(spec).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ModelLoadError(
                f"PairRM directory {path} has no config.json: expected llm-blender's layout (a RankerConfig "
                f"config.json + model.safetensors or pytorch_model.bin) or the Transformers layout of "
                f"llm-blender/PairRM-hf. {_how_to_provide(spec)}")
        return path
    if path.exists() or _looks_like_path(spec):
        raise ModelLoadError(f"PairRM model '{spec}' is not a directory (looked for {path.resolve()}). "
                             f"{_how_to_provide(spec)}")
    return _from_hub(spec)


def detect_layout(config: dict[str, Any]) -> str:
    """'llm-blender' for a RankerConfig config.json, 'transformers' for the DebertaV2PairRM one (PairRM-hf)."""
    if "ranker_type" in config:
        if config["ranker_type"] != "pairranker":
            raise ModelLoadError(f"config.json has ranker_type={config['ranker_type']!r}; only 'pairranker' "
                                 f"(PairRM) is supported.")
        return "llm-blender"
    if config.get("model_type") == "deberta-v2" and "source_prefix_id" in config:
        return "transformers"
    raise ModelLoadError("config.json is neither llm-blender's RankerConfig (ranker_type: pairranker) nor a "
                         "DebertaV2PairRM config (model_type: deberta-v2 with source_prefix_id).")


# ------------------------------------------------------------------------------------------------
# tokenizer
# ------------------------------------------------------------------------------------------------
def sentencepiece_normalizer(precompiled_charsmap: bytes):
    """The normaliser transformers 4 built for DeBERTa-v3 (DebertaV2Converter): sentencepiece's own table."""
    from tokenizers import Regex, normalizers

    return normalizers.Sequence([normalizers.Strip(), normalizers.Precompiled(precompiled_charsmap),
                                 normalizers.Replace(Regex(" {2,}"), " ")])


def restore_sentencepiece_normalizer(tokenizer, folder: Path | None = None) -> bool:
    """Give a DeBERTa-v3 tokenizer back its spm.model normaliser; False where no spm.model is found."""
    from sentencepiece import sentencepiece_model_pb2

    candidates = [getattr(tokenizer, "vocab_file", None), folder and Path(folder) / "spm.model",
                  Path(str(getattr(tokenizer, "name_or_path", ""))) / "spm.model"]
    for spm in candidates:
        if spm and Path(spm).is_file():
            proto = sentencepiece_model_pb2.ModelProto()
            proto.ParseFromString(Path(spm).read_bytes())
            if proto.normalizer_spec.precompiled_charsmap:
                tokenizer.backend_tokenizer.normalizer = sentencepiece_normalizer(
                    proto.normalizer_spec.precompiled_charsmap)
                return True
    return False


def load_tokenizer(folder: Path, fallback: str | Path | None = None):
    """The checkpoint's tokenizer with the four prefix tokens and sentencepiece normalisation; (tokenizer, how)."""
    from transformers import AutoTokenizer

    source = folder if any((folder / f).is_file() for f in ("spm.model", "tokenizer.json")) else fallback
    if source is None:
        raise ModelLoadError(f"No tokenizer in {folder} (expected spm.model or tokenizer.json).")
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(source))
    except Exception as exc:
        raise ModelLoadError(f"The tokenizer of {source} could not be loaded ({type(exc).__name__}: {exc}). "
                             f"DeBERTa-v3 tokenizers need the sentencepiece and protobuf packages.") from None
    tokenizer.add_tokens([t for t in PREFIX_TOKENS if t not in tokenizer.get_vocab()])  # as llm-blender does
    tokenizer.model_max_length = int(1e30)  # truncation is ours, per prompt: silence length warnings
    how = "sentencepiece" if restore_sentencepiece_normalizer(tokenizer, Path(str(source))) else "nfkc"
    return tokenizer, how


# ------------------------------------------------------------------------------------------------
# model
# ------------------------------------------------------------------------------------------------
class PairRMModel(nn.Module):
    """DeBERTa-v2 backbone + llm-blender's head; state-dict keys `pretrained_model.*` and `head_layer.*`."""

    def __init__(self, config, n_tasks: int = 1, drop_out: float = 0.05):
        super().__init__()
        from transformers import DebertaV2Model

        hidden = config.hidden_size
        self.pretrained_model = DebertaV2Model(config)
        self.head_layer = nn.Sequential(nn.Dropout(drop_out), nn.Linear(2 * hidden, hidden), nn.Tanh(),
                                        nn.Dropout(drop_out), nn.Linear(hidden, n_tasks))
        self.fast_attention = False
        self._batch: dict[str, Any] = {}  # per forward: what every layer's fast attention shares

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                prefix_positions: torch.Tensor) -> torch.Tensor:
        """pair_logits [batch]: head(source, candidate1) − head(source, candidate2), averaged over tasks."""
        if self.fast_attention:
            self._batch = _batch_context(self.pretrained_model.encoder, attention_mask)
        try:
            hidden = self.pretrained_model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        finally:
            self._batch = {}
        rows = torch.arange(hidden.shape[0], device=hidden.device)[:, None]
        source, cand1, cand2 = hidden[rows, prefix_positions].unbind(1)
        left = self.head_layer(torch.cat([source, cand1], dim=-1))
        right = self.head_layer(torch.cat([source, cand2], dim=-1))
        return (left - right).mean(dim=-1)


# ------------------------------------------------------------------------------------------------
# DeBERTa-v3's disentangled attention, for inference, with the same arithmetic as transformers'
# DisentangledSelfAttention but fewer passes over the L×L matrices: the relative-position gather indices
# are built once per batch instead of once per layer, the 1/√(3d) scale is applied to the L×2k position
# scores before they are gathered to L×L, the [b, 1, L, L] mask is replaced by a key-padding mask (real
# query rows see exactly the same keys) that is skipped when the batch has no padding, and q/k/v stay
# views instead of being copied per head. On CPU these element-wise L×L passes cost as much as the matmuls.
# ------------------------------------------------------------------------------------------------
def _batch_context(encoder, attention_mask: torch.Tensor) -> dict[str, Any]:
    from transformers.models.deberta_v2.modeling_deberta_v2 import build_relative_position

    length = attention_mask.shape[1]
    probe = attention_mask.new_empty((1, length, 1), dtype=torch.float32)
    relative_pos = build_relative_position(probe, probe, bucket_size=encoder.position_buckets,
                                           max_position=encoder.max_relative_positions)[0]
    span = encoder.position_buckets
    return {
        "c2p_index": torch.clamp(relative_pos + span, 0, 2 * span - 1),
        "p2c_index": torch.clamp(-relative_pos + span, 0, 2 * span - 1),
        "key_padding": None if bool(attention_mask.all()) else ~attention_mask.bool(),
    }


def _fast_attention_forward(self, hidden_states, attention_mask, output_attentions=False, query_states=None,
                            relative_pos=None, rel_embeddings=None, *, owner: PairRMModel):
    batch = owner._batch
    b, length, _ = hidden_states.shape
    heads = self.num_attention_heads
    dtype = hidden_states.dtype

    def split(x):  # [b, L, h*d] -> [b, h, L, d], a view
        return x.view(x.shape[0], x.shape[1], heads, -1).transpose(1, 2)

    query, key, value = (split(proj(hidden_states)) for proj in (self.query_proj, self.key_proj, self.value_proj))
    # transformers: sqrt(d * 3) computed in fp32, then cast to the model's dtype
    scale = torch.sqrt(torch.tensor(query.shape[-1] * 3, dtype=torch.float)).to(dtype=dtype)
    span = self.pos_ebd_size
    rel = rel_embeddings[: 2 * span, :].unsqueeze(0)
    pos_key, pos_query = split(self.key_proj(rel)), split(self.query_proj(rel))  # [1, h, 2k, d]
    c2p = torch.matmul(query, pos_key.transpose(-1, -2)) / scale  # [b, h, L, 2k]
    c2p = torch.gather(c2p, -1, batch["c2p_index"].expand(b, heads, length, length))
    p2c = torch.matmul(key, pos_query.transpose(-1, -2)) / scale
    c2p += torch.gather(p2c, -1, batch["p2c_index"].expand(b, heads, length, length)).transpose(-1, -2)
    # in place, at most three L×L tensors at a time; the same sums as transformers' qk + (c2p + p2c)
    scores = torch.matmul(query, key.transpose(-1, -2) / scale)
    scores += c2p
    del c2p
    if batch["key_padding"] is not None:
        scores.masked_fill_(batch["key_padding"][:, None, None, :], torch.finfo(dtype).min)
    probs = torch.softmax(scores, dim=-1)
    del scores
    context = torch.matmul(probs, value).transpose(1, 2).reshape(b, length, -1)
    return context, None


def install_fast_attention(model: PairRMModel) -> bool:
    """Route the backbone's attention through `_fast_attention_forward` (DeBERTa-v3's settings only)."""
    import functools
    import types

    from transformers.models.deberta_v2.modeling_deberta_v2 import DisentangledSelfAttention

    config = model.pretrained_model.config
    encoder = model.pretrained_model.encoder
    if not (getattr(config, "relative_attention", False) and getattr(config, "share_att_key", False)
            and set(config.pos_att_type or []) == {"c2p", "p2c"} and getattr(config, "position_buckets", -1) > 0
            and "layer_norm" in encoder.norm_rel_ebd and encoder.conv is None):
        return False
    for module in model.pretrained_model.modules():
        if isinstance(module, DisentangledSelfAttention):
            module.forward = types.MethodType(functools.partial(_fast_attention_forward, owner=model), module)
    # the [b, 1, L, L] mask and per-forward relative positions are not needed by the fast attention
    encoder.get_attention_mask = lambda attention_mask: attention_mask
    encoder.get_rel_pos = lambda hidden_states, query_states=None, relative_pos=None: None
    model.fast_attention = True
    return True


def _read_state_dict(folder: Path) -> dict[str, torch.Tensor]:
    if (folder / "model.safetensors").is_file():
        from safetensors.torch import load_file

        return load_file(str(folder / "model.safetensors"))
    if (folder / "pytorch_model.bin").is_file():
        return torch.load(folder / "pytorch_model.bin", map_location="cpu", weights_only=True)
    raise ModelLoadError(f"No weights in {folder}: expected model.safetensors or pytorch_model.bin. "
                         f"{_how_to_provide(str(folder))}")


def _backbone_config(folder: Path, layout: str, config: dict[str, Any], vocab_size: int):
    """The DebertaV2Config: PairRM-hf's own; for llm-blender's layout, `model_name`'s config (never its weights)."""
    from transformers import DebertaV2Config

    if layout == "transformers":
        backbone = DebertaV2Config.from_pretrained(str(folder))
    else:
        name = config.get("model_name") or "microsoft/deberta-v3-large"
        local = [p for p in (folder / name, Path(name).expanduser()) if (p / "config.json").is_file()]
        if local:
            backbone = DebertaV2Config.from_pretrained(str(local[0]))
        elif name == "microsoft/deberta-v3-large":
            backbone = DebertaV2Config(**{k: v for k, v in DEBERTA_V3_LARGE.items() if k != "model_type"})
        else:
            try:
                from huggingface_hub import hf_hub_download

                backbone = DebertaV2Config.from_pretrained(str(Path(hf_hub_download(name, "config.json")).parent))
            except Exception as exc:
                raise ModelLoadError(
                    f"The backbone config of {folder} (model_name={name!r} in config.json) is neither a folder "
                    f"beside it nor in the hub cache ({type(exc).__name__}). {_how_to_provide(name)}") from None
    backbone.vocab_size = vocab_size
    return backbone


def load_pairrm_model(folder: Path, fast_attention: bool = True) -> tuple[PairRMModel, dict[str, Any]]:
    """Build the model of a checkpoint directory (either layout) in fp32 on CPU; returns (model, facts)."""
    try:
        config = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"Cannot read {folder / 'config.json'}: {exc}") from None
    layout = detect_layout(config)
    state = _read_state_dict(folder)
    key = "pretrained_model.embeddings.word_embeddings.weight"
    if key not in state:
        raise ModelLoadError(f"The weights in {folder} have no '{key}': not a PairRM checkpoint "
                             f"(expected keys pretrained_model.* and head_layer.*).")
    backbone = _backbone_config(folder, layout, config, vocab_size=state[key].shape[0])
    n_tasks = int(config.get("n_tasks") or 1)
    with torch.device("meta"):  # no random init of 435M parameters that are overwritten at once
        model = PairRMModel(backbone, n_tasks=n_tasks, drop_out=float(config.get("drop_out") or 0.05))
    # older transformers saved this buffer; it is recomputed, never learned
    state = {k: v for k, v in state.items() if not k.endswith("embeddings.position_ids")}
    result = model.load_state_dict(state, strict=False, assign=True)
    if result.missing_keys or result.unexpected_keys:
        raise ModelLoadError(f"The weights in {folder} do not fit PairRM: missing {result.missing_keys[:5]}, "
                             f"unexpected {result.unexpected_keys[:5]}.")
    embeddings = model.pretrained_model.embeddings
    embeddings.position_ids = torch.arange(backbone.max_position_embeddings).expand((1, -1))
    model.float().eval()
    if fast_attention:
        install_fast_attention(model)
    return model, {"layout": layout, "config": config, "backbone": backbone}


# ------------------------------------------------------------------------------------------------
# device, precision, input checks
# ------------------------------------------------------------------------------------------------
def resolve_device(device: str | None) -> torch.device:
    """auto (a CUDA GPU if there is one, else CPU) | cpu | cuda | cuda:N | mps; any letter case."""
    name = str(device or "auto").strip().lower()
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cpu":
        return torch.device("cpu")
    if name == "mps":
        if not (hasattr(torch.backends, "mps") and torch.backends.mps.is_available()):
            raise ParameterError("device='mps' was asked for but this torch sees no Apple GPU; use 'cpu' or 'auto'.")
        return torch.device("mps")
    match = re.fullmatch(r"cuda(?::(\d+))?", name)
    if not match:
        raise ParameterError(f"device={device!r} is not a device: expected 'auto', 'cpu', 'cuda', 'cuda:N' or "
                             f"'mps'.")
    if not torch.cuda.is_available():
        raise ParameterError(
            f"device={device!r} was asked for but no CUDA GPU is visible (torch {torch.__version__}, "
            f"torch.cuda.is_available() is False). Use device='cpu' or 'auto', or install a CUDA build of torch "
            f"on a GPU machine.")
    index = int(match.group(1) or 0)
    if index >= torch.cuda.device_count():
        raise ParameterError(f"device={device!r}: only {torch.cuda.device_count()} CUDA device(s) are visible.")
    return torch.device(f"cuda:{index}")


def resolve_dtype(dtype: str | None, device: torch.device) -> str:
    """'fp32' | 'fp16' | 'bf16'; 'auto' is fp16 on CUDA (llm-blender's choice there) and fp32 elsewhere."""
    name = str(dtype or "auto").strip().lower()
    name = DTYPE_ALIASES.get(name, name)
    if name == "auto":
        return "fp16" if device.type in ("cuda", "mps") else "fp32"
    if name not in DTYPES:
        raise ParameterError(f"dtype={dtype!r} is not a precision: expected 'auto', 'fp32', 'fp16' or 'bf16'.")
    if name == "bf16" and device.type == "cuda" and not torch.cuda.is_bf16_supported():
        raise ParameterError(f"dtype='bf16' is not supported by {torch.cuda.get_device_name(device)}; use 'fp16'.")
    return name


def check_inputs(prompts: Sequence[Any], candidates: Sequence[Any]) -> None:
    """Raise a DataError naming the first bad row: non-strings, missing fields, fewer than two candidates."""
    if isinstance(prompts, str) or not isinstance(prompts, Sequence):
        raise DataError(f"prompts must be a list of strings, got {type(prompts).__name__}.")
    if isinstance(candidates, str) or not isinstance(candidates, Sequence) or len(candidates) != len(prompts):
        raise DataError(f"candidates must be a list with one list of candidate texts per prompt "
                        f"({len(prompts)} prompts), got {type(candidates).__name__} of length "
                        f"{len(candidates) if isinstance(candidates, Sequence) else '?'}.")
    for row, (prompt, cands) in enumerate(zip(prompts, candidates)):
        if not isinstance(prompt, str):
            raise DataError(f"Row {row}: the prompt is {type(prompt).__name__} ({prompt!r:.60}), expected a string.")
        if isinstance(cands, str) or not isinstance(cands, Sequence):
            raise DataError(f"Row {row}: candidates is {type(cands).__name__}, expected a list of strings.")
        if len(cands) < 2:
            raise DataError(f"Row {row}: {len(cands)} candidate(s); PairRM compares pairs, so each prompt needs at "
                            f"least two. Drop the row or add candidates.")
        for i, cand in enumerate(cands):
            if not isinstance(cand, str):
                raise DataError(f"Row {row}: candidate {i} is {type(cand).__name__} ({cand!r:.60}), expected a "
                                f"string.")


# ------------------------------------------------------------------------------------------------
# scores from comparisons
# ------------------------------------------------------------------------------------------------
def scores_from_matrix(matrix: np.ndarray) -> np.ndarray:
    """score_i = mean over j of (M[i, j] − M[j, i]), the diagonal included (llm-blender's max_logits policy)."""
    m = np.asarray(matrix, dtype=np.float64)
    return (m - m.T).mean(axis=1)


def ranks_from_scores(scores: Sequence[float]) -> np.ndarray:
    """1 = best; equal scores share the better rank (llm-blender's get_ranks_from_scores)."""
    s = np.asarray(scores, dtype=np.float64)
    return np.array([1 + int(np.sum(s > x)) for x in s], dtype=np.int64)


# ------------------------------------------------------------------------------------------------
# the scorer
# ------------------------------------------------------------------------------------------------
class _Pass:
    """One forward pass: a source and an ordered pair of candidates, as token ids."""

    __slots__ = ("source", "first", "second", "length", "order_key")

    def __init__(self, source: np.ndarray, first: np.ndarray, second: np.ndarray, order_key: tuple):
        self.source, self.first, self.second = source, first, second
        self.length = len(source) + len(first) + len(second)
        self.order_key = order_key


def _truncate(ids: np.ndarray, max_length: int) -> np.ndarray:
    """What the tokenizer's own truncation keeps: [CLS] + the first max_length − 2 tokens + [SEP]."""
    if len(ids) <= max_length:
        return ids
    return np.concatenate([ids[:max_length - 1], ids[-1:]])


class PairRM:
    """PairRM scorer (backend "repro"): load with `PairRM.load(model, device=..., dtype=...)`."""

    backend = "repro"

    def __init__(self, model: PairRMModel, tokenizer, *, spec: str, path: Path, layout: str, device: torch.device,
                 dtype: str, normalization: str, source_maxlength: int = 1224, candidate_maxlength: int = 412):
        if source_maxlength < 3 or candidate_maxlength < 3:
            raise ParameterError(f"source_maxlength={source_maxlength} and candidate_maxlength={candidate_maxlength} "
                                 f"must both be >= 3 ([CLS], the prefix token and [SEP]).")
        self.model, self.tokenizer = model, tokenizer
        self.spec, self.path, self.layout = spec, path, layout
        self.device, self.dtype, self.normalization = device, dtype, normalization
        self.source_maxlength, self.candidate_maxlength = int(source_maxlength), int(candidate_maxlength)
        ids = tokenizer.convert_tokens_to_ids(list(PREFIX_TOKENS))
        self.prefix_ids = dict(zip(PREFIX_TOKENS, ids))
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        self.sep_token = tokenizer.sep_token or "[SEP]"
        # a CUDA out-of-memory lowers this for the rest of the scorer's life
        self.max_batch_tokens: int | None = None

    @classmethod
    def load(cls, model: str | Path, *, device: str = "auto", dtype: str = "auto", source_maxlength: int = 1224,
             candidate_maxlength: int = 412, fast_attention: bool = True) -> "PairRM":
        """Load a PairRM checkpoint (hub id, directory of either layout, or `builtin:tiny-pairrm`).

        `fast_attention=False` keeps transformers' own DeBERTa attention (same numbers, slower).
        """
        torch_device = resolve_device(device)
        dtype_name = resolve_dtype(dtype, torch_device)
        path = resolve_model(model)
        module, facts = load_pairrm_model(path, fast_attention=fast_attention)
        fallback = None
        if facts["layout"] == "llm-blender":
            name = facts["config"].get("model_name") or "microsoft/deberta-v3-large"
            fallback = path / name if (path / name).is_dir() else name
        tokenizer, how = load_tokenizer(path, fallback)
        if len(tokenizer) > facts["backbone"].vocab_size:
            raise ModelLoadError(f"The tokenizer of {path} has {len(tokenizer)} tokens but the model's embeddings "
                                 f"only {facts['backbone'].vocab_size}: tokenizer and weights do not belong together.")
        module.to(device=torch_device, dtype=DTYPES[dtype_name])
        return cls(module, tokenizer, spec=str(model), path=path, layout=facts["layout"], device=torch_device,
                   dtype=dtype_name, normalization=how, source_maxlength=source_maxlength,
                   candidate_maxlength=candidate_maxlength)

    @property
    def info(self) -> dict[str, Any]:
        """What produced the scores, for the run manifest."""
        return {"model": self.spec, "path": str(self.path), "layout": self.layout, "backend": self.backend,
                "device": str(self.device), "dtype": self.dtype, "source_maxlength": self.source_maxlength,
                "candidate_maxlength": self.candidate_maxlength, "stand_in": is_stand_in(self.path),
                "normalization": self.normalization}

    # -- tokenisation ---------------------------------------------------------------------------
    def _text(self, prefix: str, text: str) -> str:
        # llm-blender's collator turns the separator token inside texts into a space
        text = text.replace(self.sep_token, " ")
        if self.normalization == "nfkc":
            text = unicodedata.normalize("NFKC", text)
        return prefix + text

    def encode_texts(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Token ids (with [CLS]/[SEP], untruncated) of already prefixed texts, in slices of batched calls."""
        out: list[np.ndarray] = []
        for start in range(0, len(texts), 1024):
            batch = self.tokenizer(list(texts[start:start + 1024]), add_special_tokens=True, truncation=False)
            out.extend(np.asarray(ids, dtype=np.int64) for ids in batch["input_ids"])
        return out

    def _plan(self, prompts: Sequence[str], candidates: Sequence[Sequence[str]]):
        """Distinct passes (sorted longest first) and, per prompt, the pass index of every ordered pair."""
        sources = {p: None for p in prompts}
        texts = {c: None for cands in candidates for c in cands}
        source_ids = dict(zip(sources, self.encode_texts([self._text(SOURCE_PREFIX, p) for p in sources])))
        cand_ids = dict(zip(texts, self.encode_texts([self._text(CANDIDATE_PREFIX, c) for c in texts])))
        cand_prefix = self.prefix_ids[CANDIDATE_PREFIX]
        slot_ids = (self.prefix_ids[CANDIDATE1_PREFIX], self.prefix_ids[CANDIDATE2_PREFIX])
        passes: dict[tuple[str, str, str], int] = {}
        plan: list[_Pass] = []
        truncated: dict[tuple[str, int], tuple[np.ndarray, np.ndarray]] = {}
        per_prompt: list[np.ndarray] = []
        for prompt, cands in zip(prompts, candidates):
            src = _truncate(source_ids[prompt], self.source_maxlength)
            budget = self.candidate_maxlength + (self.source_maxlength - len(src)) // 2
            slots = []
            for c in cands:
                if (c, budget) not in truncated:
                    ids = _truncate(cand_ids[c], budget)
                    # llm-blender's _forward replaces every <|candidate|> id by the slot's prefix id
                    truncated[(c, budget)] = tuple(np.where(ids == cand_prefix, s, ids) for s in slot_ids)
                slots.append(truncated[(c, budget)])
            index = np.full((len(cands), len(cands)), -1, dtype=np.int64)
            for i, a in enumerate(cands):
                for j, b in enumerate(cands):
                    if i == j:
                        continue
                    key = (prompt, a, b)
                    if key not in passes:
                        passes[key] = len(plan)
                        plan.append(_Pass(src, slots[i][0], slots[j][1], key))
                    index[i, j] = passes[key]
            per_prompt.append(index)
        # longest first (the largest batches meet memory limits at once); ties by text so that the batches,
        # hence the numbers, do not depend on the order of the input
        order = sorted(range(len(plan)), key=lambda k: (-plan[k].length, plan[k].order_key))
        return plan, order, per_prompt

    # -- forward passes -------------------------------------------------------------------------
    def _batch_tensors(self, batch: list[_Pass]):
        width = max(p.length for p in batch)
        ids = np.full((len(batch), width), self.pad_id, dtype=np.int64)
        mask = np.zeros((len(batch), width), dtype=bool)
        positions = np.empty((len(batch), 3), dtype=np.int64)
        for row, p in enumerate(batch):
            ids[row, :p.length] = np.concatenate([p.source, p.first, p.second])
            mask[row, :p.length] = True
            positions[row] = (1, len(p.source) + 1, len(p.source) + len(p.first) + 1)
        return (torch.from_numpy(ids).to(self.device), torch.from_numpy(mask).to(self.device),
                torch.from_numpy(positions).to(self.device))

    def _forward(self, batch: list[_Pass]) -> np.ndarray:
        with torch.inference_mode():
            logits = self.model(*self._batch_tensors(batch))
        return logits.float().cpu().numpy()

    def _run(self, plan: list[_Pass], order: list[int], batch_tokens: int,
             on_done: Callable[[list[int]], None]) -> np.ndarray:
        """pair_logits of every pass; batches of at most `batch_tokens` padded tokens, halved on out-of-memory."""
        logits = np.empty(len(plan), dtype=np.float32)
        budget = int(batch_tokens)
        if self.max_batch_tokens is not None:
            budget = min(budget, self.max_batch_tokens)
        start = 0
        while start < len(order):
            width = plan[order[start]].length  # the longest of the batch: passes are sorted
            stop = min(len(order), start + max(1, budget // width))
            chunk = order[start:stop]
            try:
                logits[chunk] = self._forward([plan[k] for k in chunk])
            except torch.OutOfMemoryError:
                if len(chunk) == 1:
                    raise ReproError(
                        f"Out of memory on {self.device} for a single PairRM pass of {width} tokens ({self.dtype}). "
                        f"Use a GPU with more free memory, dtype='fp16' or 'bf16', or smaller "
                        f"source_maxlength/candidate_maxlength.") from None
                new_budget = max(width, (len(chunk) * width) // 2)
                warnings.warn(f"PairRM: out of memory on {self.device} with batch_tokens={budget}; continuing with "
                              f"batch_tokens={new_budget} (pass --batch-tokens {new_budget} to start there).",
                              RuntimeWarning, stacklevel=2)
                budget = self.max_batch_tokens = new_budget
                if self.device.type == "cuda":
                    torch.cuda.empty_cache()
                continue
            on_done(chunk)
            start = stop
        return logits

    # -- public ---------------------------------------------------------------------------------
    def score(self, prompts: Sequence[str], candidates: Sequence[Sequence[str]], *,
              batch_tokens: int = DEFAULT_BATCH_TOKENS, return_matrix: bool = False,
              progress: Callable[[int], Any] | None = None):
        """PairRM scores per prompt (float64 arrays, input order); with `return_matrix` also each M.

        `progress(n)` is called with the number of prompts newly finished after each batch.
        """
        check_inputs(prompts, candidates)
        if batch_tokens < 1:
            raise ParameterError(f"batch_tokens={batch_tokens} must be >= 1.")
        plan, order, per_prompt = self._plan(prompts, candidates)
        users: list[list[int]] = [[] for _ in plan]
        remaining = []
        for row, index in enumerate(per_prompt):
            needed = np.unique(index[index >= 0])
            remaining.append(len(needed))
            for k in needed:
                users[k].append(row)

        def on_done(chunk: list[int]) -> None:
            finished = 0
            for k in chunk:
                for row in users[k]:
                    remaining[row] -= 1
                    finished += remaining[row] == 0
            if progress is not None and finished:
                progress(finished)

        logits = self._run(plan, order, batch_tokens, on_done)
        matrices = []
        for index in per_prompt:
            m = np.where(index >= 0, logits[np.maximum(index, 0)].astype(np.float64), 0.0)
            matrices.append(m)
        scores = [scores_from_matrix(m) for m in matrices]
        return (scores, matrices) if return_matrix else scores

    def pass_inputs(self, prompts: Sequence[str], candidates: Sequence[Sequence[str]]) -> list[dict]:
        """The input ids of every forward pass, per prompt: {(i, j): ids} for candidate i first, j second."""
        check_inputs(prompts, candidates)
        plan, _, per_prompt = self._plan(prompts, candidates)
        return [{(i, j): np.concatenate([plan[k].source, plan[k].first, plan[k].second])
                 for (i, j), k in np.ndenumerate(index) if k >= 0} for index in per_prompt]

    def rank(self, prompts: Sequence[str], candidates: Sequence[Sequence[str]], **kwargs) -> list[np.ndarray]:
        """Ranks per prompt (1 = best, ties share), from `score`."""
        return [ranks_from_scores(s) for s in self.score(prompts, candidates, **kwargs)]

    def compare(self, prompts: Sequence[str], candidates_a: Sequence[str], candidates_b: Sequence[str],
                **kwargs) -> np.ndarray:
        """M[A, B] − M[B, A] per prompt (llm-blender's compare mode "[A,B]+[B,A]"): > 0 means A is better."""
        if len(candidates_a) != len(prompts) or len(candidates_b) != len(prompts):
            raise DataError(f"compare needs one candidate A and one candidate B per prompt: got {len(prompts)} "
                            f"prompts, {len(candidates_a)} A and {len(candidates_b)} B.")
        _, matrices = self.score(prompts, [[a, b] for a, b in zip(candidates_a, candidates_b)], return_matrix=True,
                                 **kwargs)
        return np.array([m[0, 1] - m[1, 0] for m in matrices], dtype=np.float64)


def load_scorer(model: str | Path, *, backend: str = "repro", device: str = "auto", dtype: str = "auto",
                source_maxlength: int = 1224, candidate_maxlength: int = 412, **kwargs):
    """A PairRM scorer: backend "repro" (this module's engine) or "llm-blender" (the original code, as reference)."""
    common = dict(device=device, dtype=dtype, source_maxlength=source_maxlength,
                  candidate_maxlength=candidate_maxlength, **kwargs)
    if backend == "repro":
        return PairRM.load(model, **common)
    if backend == "llm-blender":
        from .blender_compat import BlenderScorer

        return BlenderScorer.load(model, **common)
    raise ParameterError(f"backend={backend!r} is not a PairRM backend: expected 'repro' or 'llm-blender'.")
