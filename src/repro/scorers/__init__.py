"""Reward-model scorers behind one interface: `load_scorer(model, ...).score(prompts, candidates)` gives float64 arrays
(a score per candidate, input order: PairRM's sum to 0 per prompt, a sequence classifier's are its logits)."""

from __future__ import annotations

import inspect
import os
from pathlib import Path
from typing import Any, Iterable, get_args

import huggingface_hub  # (its download looked up at each use: what a test or a mirror's set-up replaces)

from ..errors import ModelLoadError, ParameterError, ReproError
from ..parameters import ScorerKind, ScorerOptions, check_value
from ..paths import local_checkpoint
from .blender_compat import BlenderScorer
from .common import no_folder
from .pairrm import PairRM
from .pairrm_checkpoint import KNOWN_HUB_IDS, PAIRRM_HF, read_config
from .sequence_classifier import SequenceClassifierScorer
from .tiny import BUILTIN_REWARD_MODELS, BUILTIN_TINY

KINDS = get_args(ScorerKind)
# the one registry of scorer classes, by (kind, backend); adding a kind: docs/architecture.md
SCORERS = {("pairrm", "repro"): PairRM, ("pairrm", "llm-blender"): BlenderScorer,
           ("sequence_classifier", "repro"): SequenceClassifierScorer}


def either(kind: str | None = None) -> str:
    """"'pairrm' or 'sequence_classifier'": the kinds SCORERS holds; with `kind`, that kind's backends."""
    return " or ".join(map(repr, dict.fromkeys(b if kind else k for k, b in SCORERS if kind in (None, k))))


def kind_of_config(config: dict[str, Any]) -> str | None:
    """'pairrm' (llm-blender's ranker config, DebertaV2PairRM), 'sequence_classifier' (*ForSequenceClassification)."""
    architectures = config.get("architectures") or []
    if "ranker_type" in config or "DebertaV2PairRM" in architectures or "source_prefix_id" in config:
        return "pairrm"
    if any(str(a).endswith("ForSequenceClassification") for a in architectures):
        return "sequence_classifier"
    return None


def _hub_config(spec: str) -> dict[str, Any] | None:
    """A hub checkpoint's config.json, from the hub cache (or the hub, when online); None where neither gives it."""
    try:
        return read_config(Path(huggingface_hub.hf_hub_download(spec, "config.json")).parent)
    except Exception:  # offline and not cached, no such repo, unreadable: the caller says what to do
        return None


def model_spec(model: str | Path) -> str:
    """`model` as a stripped string; None, "" or not a path refused (not read as a folder <cwd>/None, or the cwd)."""
    if not isinstance(model, (str, os.PathLike)) or not str(model).strip():
        raise ParameterError(f"model must be a hub id (such as {PAIRRM_HF}), a checkpoint's folder or a "
                             f"built-in stand-in ({', '.join([BUILTIN_TINY, *BUILTIN_REWARD_MODELS])}); got "
                             f"{model!r}.")
    return str(model).strip()


def detect_kind(model: str | Path) -> str:
    """'pairrm' or 'sequence_classifier', read from the checkpoint's config (built-in stand-ins by name; a hub id
    whose config is neither cached nor reachable counts as PairRM, so that its loader says how to fetch it)."""
    spec = model_spec(model)
    if spec == BUILTIN_TINY or spec in KNOWN_HUB_IDS:
        return "pairrm"
    if spec in BUILTIN_REWARD_MODELS:
        return "sequence_classifier"
    if spec.startswith("builtin:"):
        raise ModelLoadError(f"Unknown built-in model '{spec}': the built-in stand-ins are "
                             f"{', '.join([BUILTIN_TINY, *BUILTIN_REWARD_MODELS])}.")
    folder = local_checkpoint(spec, "Scorer model", PAIRRM_HF, "a PairRM or reward-model checkpoint.")
    config = read_config(folder) if folder else _hub_config(spec)
    if config is None:
        if "pairrm" in spec.lower():  # its loader says how to fetch it
            return "pairrm"
        raise ModelLoadError(
            f"Scorer model '{spec}' is neither a local folder ({no_folder(spec)}) nor in the hub cache, and the hub "
            f"could not be asked (offline?), so its kind cannot be read from its config.json. Fetch it once (`hf "
            f"download {spec}`), give a local folder, or set scorer_kind (or --kind on the command line) to "
            f"{either()}.")
    if (kind := kind_of_config(config)) is None:
        raise ModelLoadError(f"Cannot tell what kind of scorer '{spec}' is: its config.json names architectures "
                             f"{config.get('architectures')}, neither PairRM's nor a *ForSequenceClassification. Set "
                             f"scorer_kind (or --kind on the command line) to {either()}.")
    return kind


def resolve_kind(model: str | Path, kind: str = "auto") -> str:
    """`kind` checked; 'auto' read from the checkpoint (`detect_kind`)."""
    if kind == "auto":  # (the model checked there)
        return detect_kind(model)
    spec = model_spec(model)
    if kind not in KINDS:
        raise ParameterError(f"kind={kind!r} is not a scorer kind: expected one of {', '.join(KINDS)}.")
    try:  # a stand-in's or a local folder's own kind (a hub id's config is not fetched for this)
        own = detect_kind(spec) if spec.startswith("builtin:") or Path(spec).expanduser().is_dir() else kind
    except ReproError:  # unreadable, or of neither kind: the loader says what it lacks
        own = kind
    if own != kind:
        raise ParameterError(
            f"kind={kind!r} (scorer_kind, or --kind on the command line) does not match '{spec}': it is a "
            f"{'PairRM' if own == 'pairrm' else 'sequence-classifier'} "
            f"{'stand-in' if spec.startswith('builtin:') else 'checkpoint (by its config.json)'}. Set the kind to "
            f"'auto' or {own!r}.")
    return kind


def known_kind(model: str | Path, kind: str = "auto") -> str | None:
    """`resolve_kind`'s answer, or None where it cannot tell (the loader says why, when it loads the model)."""
    try:
        return resolve_kind(model, kind)
    except ReproError:
        return None


LOAD_SETTINGS = ("device", "dtype", "weights")  # the keywords of a scorer's `load` that are not its options


def load_scorer(model: str | Path, *, kind: str = "auto", backend: str = "repro", device: str = "auto",
                dtype: str = "auto", weights: bool = True, **options):
    """A scorer of `model`: PairRM (backend "repro" or "llm-blender") or a sequence-classifier reward model (options:
    its `load`'s keywords); `weights=False`: its record and tokenizer only, where the class can (nothing to score)."""
    cls = scorer_class(model, kind, backend, options)  # (no model: refused there, by `model_spec`)
    # each given option by the schema's rule (scorer_options'), named; None: the class's default (the checkpoint's own)
    options |= check_value(ScorerOptions, {name: value for name, value in options.items() if value is not None})
    light = {} if weights or "weights" not in inspect.signature(cls.load).parameters else {"weights": False}
    scorer = cls.load(model, device=device, dtype=dtype, **light, **options)
    kind = next(k for (k, _), c in SCORERS.items() if c is cls)
    if (told := scorer.info.get("kind")) != kind:  # what reads a record without one takes it for PairRM's
        raise ModelLoadError(f"{cls.__name__}.info records kind {told!r}, not {kind!r} (its kind in "
                             f"repro.scorers.SCORERS): a run's record of its scorer names the kind, and the card and "
                             f"02_analyze read a record without one as PairRM's (as repro wrote PairRM's before). Give "
                             f"its info \"kind\": {kind!r} (docs/architecture.md: Adding a reward-model kind).")
    return scorer


def scorer_class(model: str | Path, kind: str = "auto", backend: str = "repro", options: Iterable[str] = ()) -> type:
    """`model`'s class (kind as `resolve_kind` reads it, no weights); refuses a backend or `load` option not for it."""
    kind = resolve_kind(model, kind)
    if not any(k == kind for k, _ in SCORERS):
        raise ParameterError(f"kind={kind!r} (scorer_kind, or --kind on the command line) has no scorer class in "
                             f"repro.scorers.SCORERS, which holds {either()}: set one of those, or register the "
                             f"kind's class there (docs/architecture.md: Adding a reward-model kind).")
    if (kind, backend) not in SCORERS:
        raise ParameterError(f"backend={backend!r} (scorer_backend, or --backend) does not apply to a {kind} scorer "
                             f"('{model}'): expected {either(kind)}.")
    cls = SCORERS[kind, backend]
    allowed = [p.name for p in inspect.signature(cls.load).parameters.values()  # the options: load's keywords
               if p.kind is p.KEYWORD_ONLY and p.name not in LOAD_SETTINGS]
    if unknown := sorted(set(options) - set(allowed)):
        what = f"a {kind} scorer" + (f" with backend {backend!r}" if kind == "pairrm" else "")
        raise ParameterError(f"Scorer option{'s' * (len(unknown) > 1)} {', '.join(unknown)} "
                             f"{'does' if len(unknown) == 1 else 'do'} not apply to {what} ('{model}'); "
                             f"its options are {', '.join(allowed)}.")
    return cls
