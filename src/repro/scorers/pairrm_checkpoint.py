"""PairRM checkpoints: finding one (built-in stand-in, folder, hub id), telling its layout (llm-blender's RankerConfig
of `llm-blender/PairRM`, or the Transformers one of `llm-blender/PairRM-hf`), building the model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
import huggingface_hub  # (its download looked up at each use: what a test or a mirror's set-up replaces)
from huggingface_hub import constants
from safetensors.torch import load_file

from ..errors import ModelLoadError, ParameterError
from ..parameters import PAIRRM_LIMITS, TokenLimit, check_value
from ..paths import local_checkpoint, reads_as_hub_id
from ..revisions import hub_offline
from .common import is_stand_in, no_folder
from .pairrm_attention import PairRMModel, install_fast_attention
from .tiny import BUILTIN_TINY, DEBERTA_V3_LARGE, build_builtin

KNOWN_HUB_IDS = ("llm-blender/PairRM", PAIRRM_HF := "llm-blender/PairRM-hf")  # llm-blender's layout, Transformers
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")


def _how_to_provide(spec: str) -> str:
    repo = spec if reads_as_hub_id(spec) else PAIRRM_HF
    # PairRM-hf's weights are model.safetensors; another repo's (llm-blender's layout) may be either of WEIGHT_FILES
    weights = " --include ".join(WEIGHT_FILES[:1] if repo == PAIRRM_HF else WEIGHT_FILES)
    return (f"To provide it: on a machine with internet run `hf download {repo} --include '*.json' --include "
            f"spm.model --include {weights}` (it lands in the hub cache; copy that cache or set HF_HOME to "
            f"it), or download the folder anywhere and pass its path as the model; for a run without any download use "
            f"'{BUILTIN_TINY}' (a random stand-in whose scores are noise).")


def _from_hub(repo_id: str) -> Path:
    """A hub checkpoint's local snapshot (config, tokenizer and one weights file only; never the backbone's)."""
    # llm-blender's own download location (`snapshot_download(local_dir=TRANSFORMERS_CACHE/<repo>)`)
    legacy = Path(constants.HF_HUB_CACHE) / repo_id
    if (legacy / "config.json").is_file() and any((legacy / name).is_file() for name in WEIGHT_FILES):
        return legacy
    reasons = []
    for weights in WEIGHT_FILES:
        try:
            folder = Path(huggingface_hub.snapshot_download(repo_id, allow_patterns=["*.json", "spm.model", weights]))
        except Exception as exc:  # offline, not cached, no such repo, network: all end the same way here
            reasons.append(f"{type(exc).__name__}: {str(exc).splitlines()[0].rstrip('.') if str(exc) else ''}")
            break
        if (folder / "config.json").is_file() and (folder / weights).is_file():
            return folder
        reasons.append(f"the snapshot at {folder} has no {weights}")
    offline = f" ({switch} is set: the hub was not asked)" if (switch := hub_offline()) else ""
    raise ModelLoadError(
        f"PairRM model '{repo_id}' could not be loaded: it is not a local directory ({no_folder(repo_id)}), not in "
        f"llm-blender's download folder ({legacy}) and not "
        f"in the Hugging Face hub cache ({constants.HF_HUB_CACHE}){offline}; {'; '.join(reasons)}. "
        f"{_how_to_provide(repo_id)}")


def resolve_model(spec: str | Path) -> Path:
    """The local directory of a PairRM checkpoint: `builtin:tiny-pairrm` (built once), a directory, or a hub id."""
    spec = str(spec).strip()
    if spec == BUILTIN_TINY:
        return build_builtin(spec)
    if spec.startswith("builtin:"):
        raise ModelLoadError(f"Unknown built-in model '{spec}': the only one is '{BUILTIN_TINY}'.")
    return local_checkpoint(spec, "PairRM model", PAIRRM_HF, (
        f"llm-blender's layout (a RankerConfig config.json + model.safetensors or pytorch_model.bin) or the "
        f"Transformers layout of {PAIRRM_HF}. {_how_to_provide(spec)}")) or _from_hub(spec)


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


def checkpoint_limits(config: dict[str, Any], source_maxlength: int | None = None,
                      candidate_maxlength: int | None = None) -> tuple[dict[str, int], dict[str, str]]:
    """Each limit and its origin: "explicit", "checkpoint config" (llm-blender's RankerConfig, as `Blender.rank` reads
    it) or "default" (1224/412, PairRM-hf card's: its config has none); explicit ones by the schema's rule."""
    limits, origins = {}, {}
    for name, value in (("source_maxlength", source_maxlength), ("candidate_maxlength", candidate_maxlength)):
        if value is not None:
            limits[name], origins[name] = check_value(TokenLimit, value, name), "explicit"
        elif config.get(name) is not None:
            try:  # the schema's rule for the limit
                limits[name] = check_value(TokenLimit, config[name], f"config.json's {name}")
            except ParameterError as exc:
                raise ModelLoadError(f"{exc} Fix the checkpoint's config, or pass {name} explicitly.") from None
            origins[name] = "checkpoint config"
        else:
            limits[name], origins[name] = PAIRRM_LIMITS[name], "default"
    return limits, origins


class PairRMScorerBase:
    """What both PairRM backends record of themselves (`info`, for the run manifest)."""

    kind = "pairrm"
    backend = "repro"

    def __init__(self, *, spec: str, path: Path, layout: str, device, dtype: str, normalization: str,
                 source_maxlength: int, candidate_maxlength: int, limits_from: dict[str, str]):
        self.spec, self.path, self.layout = spec, path, layout
        self.device, self.dtype, self.normalization = device, dtype, normalization
        self.source_maxlength, self.candidate_maxlength = int(source_maxlength), int(candidate_maxlength)
        self.limits_from = limits_from

    @property
    def info(self) -> dict[str, Any]:
        """What produced the scores, for the run manifest."""
        return {"model": self.spec, "path": str(self.path), "kind": self.kind, "layout": self.layout,
                "backend": self.backend, "device": str(self.device), "dtype": self.dtype,
                "source_maxlength": self.source_maxlength, "candidate_maxlength": self.candidate_maxlength,
                "limits_from": dict(self.limits_from), "stand_in": is_stand_in(self.path),
                "normalization": self.normalization}


def _read_state_dict(folder: Path) -> dict[str, torch.Tensor]:
    if (folder / "model.safetensors").is_file():
        return load_file(str(folder / "model.safetensors"))
    if (folder / "pytorch_model.bin").is_file():
        return torch.load(folder / "pytorch_model.bin", map_location="cpu", weights_only=True)
    raise ModelLoadError(f"No weights in {folder}: expected model.safetensors or pytorch_model.bin. "
                         f"{_how_to_provide(str(folder))}")


def _backbone_config(folder: Path, layout: str, config: dict[str, Any], vocab_size: int):
    """The DebertaV2Config: PairRM-hf's own; for llm-blender's layout, `model_name`'s config (never its weights)."""
    from transformers import DebertaV2Config  # keeps transformers off `repro score --help`

    if layout == "transformers":
        backbone = DebertaV2Config.from_pretrained(str(folder))
    else:
        name = config.get("model_name") or "microsoft/deberta-v3-large"
        local = [p for p in (folder / name, Path(name).expanduser()) if (p / "config.json").is_file()]
        if local:
            backbone = DebertaV2Config.from_pretrained(str(local[0]))
        elif name == "microsoft/deberta-v3-large":
            backbone = DebertaV2Config(**DEBERTA_V3_LARGE)
        else:
            try:  # from the hub cache (or the hub, when online)
                backbone = DebertaV2Config.from_pretrained(name)
            except Exception as exc:
                raise ModelLoadError(
                    f"The backbone config of {folder} (model_name={name!r} in config.json) is neither a folder "
                    f"beside it nor in the hub cache ({type(exc).__name__}). {_how_to_provide(name)}") from None
    backbone.vocab_size = vocab_size
    return backbone


def read_config(folder: Path) -> dict[str, Any]:
    """A checkpoint directory's config.json, as a dict."""
    try:
        config = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"Cannot read {folder / 'config.json'}: {exc}") from None
    if not isinstance(config, dict):
        raise ModelLoadError(f"{folder / 'config.json'} holds {type(config).__name__}, not a JSON object.")
    return config


def load_pairrm_model(folder: Path, fast_attention: bool = True) -> PairRMModel:
    """Build the model of a checkpoint directory (either layout) in fp32 on CPU."""
    config = read_config(folder)
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
    model.pretrained_model.embeddings.position_ids = torch.arange(backbone.max_position_embeddings).expand((1, -1))
    model.float().eval()
    if fast_attention:
        install_fast_attention(model)
    return model
