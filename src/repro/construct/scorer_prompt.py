"""The scorer's view of the prompt: the text as it is, or through the policy's chat template as uclaml/SPPO's
`scripts/rank.py` gives it to PairRM, quirk kept: a prompt that itself contains "None" is cut there."""

from __future__ import annotations

from typing import Sequence

from transformers import AutoTokenizer

from ..errors import ModelLoadError, ParameterError
from ..parameters import BUILTIN_POLICIES, builtin_folder
from ..revisions import check_revision_target
from ..scorers.tiny_policy import build_tiny_policy


def chat_templated_prompt(prompt: str, tokenizer) -> str:
    """SPPO's scorer prompt: the chat template over [user: prompt, assistant: "None"], up to the first "None"."""
    return tokenizer.apply_chat_template(
        [{"role": "user", "content": prompt}, {"role": "assistant", "content": "None"}], tokenize=False,
    ).split("None")[0]


def load_prompt_tokenizer(spec: str, revision: str | None = None):
    """Tokenizer templating the scorer's prompts at `revision` (the policy's for policy_model); must have a template."""
    check_revision_target(spec, revision, "policy_revision", "policy_model")
    path = str(build_tiny_policy(builtin_folder(spec), size=BUILTIN_POLICIES[spec])) if spec in BUILTIN_POLICIES \
        else spec
    try:
        tokenizer = AutoTokenizer.from_pretrained(path, revision=revision)
    except (OSError, ValueError) as exc:
        download = f"hf download {spec}" + (f" --revision {revision}" if revision else "")
        raise ModelLoadError(
            f"scorer_prompt_tokenizer={spec!r} could not be loaded ({type(exc).__name__}: {str(exc)[:300]}). Give a "
            f"local tokenizer folder, or a hub id that is cached (`{download}` where there is network)."
        ) from None
    if not getattr(tokenizer, "chat_template", None):
        raise ParameterError(
            f"scorer_prompt_tokenizer={spec!r} has no chat template, so scorer_prompt: chat_template cannot apply "
            f"it. Name the policy's chat tokenizer (SPPO: mistralai/Mistral-7B-Instruct-v0.2), or set "
            f"scorer_prompt: raw.")
    return tokenizer


def scorer_prompts(prompts: Sequence[str], mode: str, tokenizer=None) -> list[str]:
    """The prompts as the scorer reads them: `raw` as they are, `chat_template` through `tokenizer`'s template."""
    return list(prompts) if mode == "raw" else [chat_templated_prompt(p, tokenizer) for p in prompts]
