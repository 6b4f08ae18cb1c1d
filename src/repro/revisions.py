"""Pinned hub revisions (`source_revision`, `policy_revision`, `scorer_revision`): a model at a revision is loaded
from its snapshot folder, so every later load (config, tokenizer, weights, vLLM) reads exactly that commit."""

from __future__ import annotations

import os
from pathlib import Path

import huggingface_hub
from huggingface_hub import constants

from .errors import ModelLoadError, ParameterError


def hub_offline(*also: str) -> str | None:
    """The variable that switches the hub off (HF_HUB_OFFLINE, TRANSFORMERS_OFFLINE or one of `also`, set true as
    huggingface_hub reads it, now or when huggingface_hub was imported); None when the hub may be asked."""
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", *also):
        if os.environ.get(name, "").strip().upper() in ("1", "ON", "YES", "TRUE"):
            return name
    return "HF_HUB_OFFLINE" if constants.HF_HUB_OFFLINE else None


def check_revision_target(spec: str | None, revision: str | None, parameter: str, target: str) -> None:
    """A revision needs a hub id: refuse it for a local path, a built-in stand-in or an unset model."""
    if revision is None:
        return
    if not spec or spec.startswith("builtin:") or spec == "demo" or Path(os.path.expanduser(spec)).exists():
        raise ParameterError(
            f"{parameter}={revision!r} pins a hub commit, but {target}={spec!r} is not a hub id (a local file or "
            f"folder, a built-in stand-in, or unset) and has no revisions: set {parameter}: null, or name the hub id.")


def pinned_model(spec: str, revision: str | None, parameter: str, target: str) -> str:
    """`spec` itself without a revision; else the local snapshot folder of hub model `spec` at `revision`."""
    if revision is None:
        return spec
    check_revision_target(spec, revision, parameter, target)
    try:
        return huggingface_hub.snapshot_download(spec, revision=revision)
    except Exception as exc:  # offline, unknown repo or revision: one message saying what to do
        raise ModelLoadError(
            f"Could not fetch {target}={spec!r} at {parameter}={revision!r} ({type(exc).__name__}: {str(exc)[:300]}). "
            f"Check the commit on the hub; offline, run `hf download {spec} --revision {revision}` where there is "
            f"network and copy the hub cache here (HF_HOME), or give the downloaded folder with {parameter}: null."
        ) from None
