"""Sequence-classifier reward models: any one-output `AutoModelForSequenceClassification`. (prompt, candidate), a user
and an assistant turn through the chat template, tokenised without added special tokens, scores its logit; longest
first (ties by text) in right-padded batches by token budget; order and neighbours change a score only by rounding."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import torch
from torch.nn.utils.rnn import pad_sequence

from ..errors import ModelLoadError, ParameterError, counted, warn
from ..parameters import Count, check_value
from ..paths import CHECKPOINT, local_checkpoint
from .common import (MIN_CANDIDATES, BudgetedBatches, check_inputs, is_stand_in, no_folder,
                     no_progress_bars, resolve_device, resolve_dtype, torch_dtype)
from .tiny import BUILTIN_REWARD_MODELS, build_builtin

SCORE_MEANING = ("the reward model's logit for (prompt, candidate): no sum-to-zero over a prompt's candidates, "
                 "and a scale of its own (not comparable with PairRM's scores)")
SAMPLE_TURNS = [{"role": "user", "content": "Name a prime number."}, {"role": "assistant", "content": "Seven."}]


class _Sequence:
    """One (prompt, candidate) conversation as token ids."""

    __slots__ = ("ids", "length", "order_key")

    def __init__(self, ids: np.ndarray, order_key: tuple[str, str]):
        self.ids, self.length, self.order_key = ids, len(ids), order_key


def resolve_checkpoint(spec: str | Path) -> str:
    """A local folder (or a built-in stand-in, built once) as a path; a hub id as it is (transformers finds it)."""
    spec = str(spec).strip()
    if spec in BUILTIN_REWARD_MODELS:
        return str(build_builtin(spec))
    path = local_checkpoint(spec, "Reward model", "Skywork/Skywork-Reward-V2-Llama-3.1-8B", CHECKPOINT)
    return spec if path is None else str(path)


def _from_pretrained(cls, spec: str, path: str, trust_remote_code: bool, **kwargs):
    """`cls.from_pretrained(path)`; a failure (offline, not cached, remote code refused) says what to do for `spec`."""
    try:
        return cls.from_pretrained(path, trust_remote_code=trust_remote_code, **kwargs)
    except Exception as exc:
        if "trust_remote_code" in str(exc) and not trust_remote_code:
            raise ModelLoadError(
                f"Reward model '{spec}' ships its own modelling code (as ArmoRM does): loading it runs that code, so "
                f"it needs trust_remote_code=True (scorer option `trust_remote_code: true`, `repro score "
                f"--trust-remote-code`). Set it only for a checkpoint whose code you trust.") from None
        where = "" if Path(spec).is_dir() else (
            f" It is not a local folder ({no_folder(spec)}). If it is a hub id, fetch it once on a machine with "
            f"internet (`hf download {spec}`) into the hub cache (or set HF_HOME to a copy of it), or pass a local "
            f"folder.")
        raise ModelLoadError(f"Reward model '{spec}' could not be loaded ({type(exc).__name__}: "
                             f"{str(exc).splitlines()[0] if str(exc) else ''}).{where}") from None


def reward_model_dtype(dtype: str | None, device) -> str:
    """'fp32' | 'fp16' | 'bf16'; 'auto' is bf16 on a CUDA GPU that has it (else fp16) and fp32 elsewhere."""
    return resolve_dtype(dtype, device, "bf16" if device.type == "cuda" and torch.cuda.is_bf16_supported() else "fp16")


def cut_rows(model: str, rows: int, max_length: int) -> str:
    """The warning for rows whose conversation was cut at max_length."""
    one = rows == 1
    return (f"reward model '{model}': {counted(rows, 'row')} had {'a conversation' if one else 'conversations'} "
            f"longer than max_length={max_length} tokens, "
            f"cut to {'its' if one else 'their'} first {max_length} tokens (candidates cut alike score alike).")


class SequenceClassifierScorer(BudgetedBatches):
    """A one-output sequence-classification reward model: load with `SequenceClassifierScorer.load(model, ...)`."""

    backend = "repro"
    kind = "sequence_classifier"
    label, unit, shrink_hint = "reward model", "sequence", "a smaller max_length"
    add_special_tokens = False  # the chat template places them

    def __init__(self, model, tokenizer, *, config, spec: str, path: str, device, dtype: str, template: str,
                 template_source: str, output_index: int | None, max_length: int | None, trust_remote_code: bool):
        self.model, self.tokenizer, self.config = model, tokenizer, config  # model None: loaded without weights
        self.spec, self.path = spec, path
        self.device, self.dtype = device, dtype
        self.template, self.template_source = template, template_source
        self.output_index, self.max_length = output_index, max_length
        self.trust_remote_code = trust_remote_code
        self.pad_id = getattr(config, "pad_token_id", None)
        self.rows_truncated = 0  # rows scored so far with a conversation cut at max_length
        self.warn_cut = True  # a warning per call to `score` that cut rows

    @classmethod
    def load(cls, model: str | Path, *, device: str = "auto", dtype: str = "auto", chat_template: str | None = None,
             trust_remote_code: bool = False, output_index: int | None = None,
             max_length: int | None = None, weights: bool = True) -> "SequenceClassifierScorer":
        """Load a hub id, folder, `builtin:tiny-reward-llama`/`-deberta`; `weights=False`: config and tokenizer only."""
        from transformers import AutoConfig, AutoTokenizer  # keeps transformers off `repro score --help`

        max_length = check_value(Count | None, max_length, "max_length")  # (an entry of its own, as load_scorer)
        torch_device = resolve_device(device)
        dtype_name = reward_model_dtype(dtype, torch_device)
        path = resolve_checkpoint(model)
        spec = str(model)
        config = _from_pretrained(AutoConfig, spec, path, trust_remote_code)
        n_out = int(getattr(config, "num_labels", 1) or 1)
        if output_index is None and n_out != 1:
            labels = getattr(config, "id2label", None) or {}
            raise ModelLoadError(
                f"Reward model '{spec}' has a head of {n_out} outputs ({', '.join(map(str, list(labels.values())[:8]))}"
                f"{', ...' if n_out > 8 else ''}), but a reward model gives one score per response. If one output is "
                f"the reward, pass output_index=K (scorer option `output_index`, `repro score --output-index K`).")
        if output_index is not None and not 0 <= int(output_index) < n_out:
            raise ParameterError(f"output_index={output_index}: reward model '{spec}' has {counted(n_out, 'output')} "
                                 f"(0..{n_out - 1}).")
        tokenizer = _from_pretrained(AutoTokenizer, spec, path, trust_remote_code)
        template = chat_template or getattr(tokenizer, "chat_template", None)
        if not template:
            raise ModelLoadError(
                f"Reward model '{spec}' has no chat template, and the prompt and response must be rendered as a "
                f"conversation the way the model was trained. Pass the template it was trained with as "
                f"chat_template (a Jinja string over `messages`, as in tokenizer_config.json; scorer option "
                f"`chat_template`, `repro score --chat-template FILE`).")
        if isinstance(template, dict):  # several named templates: the default one renders conversations
            template = template.get("default") or next(iter(template.values()))
        source = "given as chat_template" if chat_template else f"of reward model '{spec}'"
        try:  # once on a sample, before any weights load: a broken template fails here, not inside the scoring job
            rendered = tokenizer.apply_chat_template(SAMPLE_TURNS, chat_template=template, tokenize=False)
        except Exception as exc:  # jinja2's syntax and undefined errors, raise_exception(...), a TypeError in it
            raise ParameterError(
                f"The chat template {source} cannot render a conversation of a user and an assistant turn "
                f"({type(exc).__name__}: {str(exc).rstrip('.')}). Fix it, or pass one that renders as chat_template "
                f"(scorer option `chat_template`, `repro score --chat-template FILE`).") from None
        if SAMPLE_TURNS[-1]["content"] not in rendered:  # (an empty rendering divided by zero inside the batching)
            raise ParameterError(
                f"The chat template {source} renders a conversation without the assistant's response "
                f"({rendered[:120]!r} for {SAMPLE_TURNS!r}): every candidate would score alike. Fix it, or pass one "
                f"that renders both turns as chat_template (scorer option `chat_template`, `repro score "
                f"--chat-template FILE`).")
        positions = getattr(config, "max_position_embeddings", None)
        if max_length is not None and positions and int(max_length) > positions:
            beyond = (f"max_length={max_length} is above the max_position_embeddings ({positions}) of reward model "
                      f"'{spec}'")
            # rotary (Llama's) or relative (DeBERTa's) positions read further; absolute ones (GPT-2's) fail there
            if not (getattr(config, "rope_theta", None) or getattr(config, "rope_parameters", None) or getattr(
                    config, "rope_scaling", None) or getattr(config, "relative_attention", False)):
                raise ParameterError(f"{beyond}, whose positions are absolute: give at most {positions}, or leave "
                                     f"max_length out.")
            warn(f"{beyond}: longer conversations score only where the model reads beyond it, and each costs memory.")
        max_length = max_length or positions
        scorer = cls(None, tokenizer, config=config, spec=spec, path=path, device=torch_device, dtype=dtype_name,
                     template=template, template_source="given" if chat_template else "the model's",
                     output_index=output_index, max_length=int(max_length) if max_length else None,
                     trust_remote_code=bool(trust_remote_code))
        return scorer.load_weights() if weights else scorer

    def load_weights(self) -> "SequenceClassifierScorer":
        """The model of the checkpoint, on the scorer's device and dtype (`load(weights=False)` had none)."""
        from transformers import AutoModelForSequenceClassification  # keeps transformers off `repro score --help`

        with no_progress_bars():
            module = _from_pretrained(AutoModelForSequenceClassification, self.spec, self.path,
                                      self.trust_remote_code, config=self.config, dtype=torch_dtype(self.dtype))
        self.model = module.to(self.device).eval()
        return self

    @property
    def info(self) -> dict[str, Any]:
        """What produced the scores, for the run manifest."""
        return {"model": self.spec, "path": self.path, "kind": self.kind, "backend": self.backend,
                "architecture": (getattr(self.config, "architectures", None) or [type(self.model).__name__])[0],
                "device": str(self.device), "dtype": self.dtype, "chat_template": self.template_source,
                "output_index": self.output_index, "max_length": self.max_length,
                "trust_remote_code": self.trust_remote_code, "stand_in": is_stand_in(self.path),
                "score": SCORE_MEANING}

    def render(self, prompt: str, candidate: str) -> str:
        """The conversation text of one (prompt, candidate): a user turn and an assistant turn."""
        return self.tokenizer.apply_chat_template(
            [{"role": "user", "content": prompt}, {"role": "assistant", "content": candidate}],
            chat_template=self.template, tokenize=False)

    def _encoded(self, prompts: Sequence[str], candidates: Sequence[Sequence[str]]):
        """Each distinct (prompt, candidate), its conversation's token ids, and how many rows have one cut."""
        keys = list(dict.fromkeys((p, c) for p, cands in zip(prompts, candidates) for c in cands))
        ids = self.encode_texts([self.render(p, c) for p, c in keys])
        cut = {key for i, key in zip(ids, keys) if self.max_length is not None and len(i) > self.max_length}
        return keys, ids, sum(any((p, c) in cut for c in cands) for p, cands in zip(prompts, candidates))

    def count_truncated(self, prompts: Sequence[str], candidates: Sequence[Sequence[str]]) -> int:
        """Rows with a conversation longer than max_length, without scoring them (rows resumed or from a cache)."""
        return self._encoded(prompts, candidates)[2] if self.max_length is not None else 0

    def plan(self, prompts: Sequence[str], candidates: Sequence[Sequence[str]]):
        keys, ids, rows = self._encoded(prompts, candidates)
        plan = [_Sequence(i[:self.max_length], key) for i, key in zip(ids, keys)]
        if rows:
            self.rows_truncated += rows
            if self.warn_cut:  # (a scoring job says its total once)
                warn(cut_rows(self.spec, rows, self.max_length))
        index = {key: k for k, key in enumerate(keys)}
        per_prompt = [np.array([index[(p, c)] for c in cands], dtype=np.int64) for p, cands in zip(prompts, candidates)]
        order = sorted(range(len(plan)), key=lambda k: (-plan[k].length, plan[k].order_key))
        return plan, order, per_prompt

    def _pad_id(self, batch: list[_Sequence]) -> int:
        """The model's pad id, else an id that ends no sequence of the batch (pooling reads the last real one)."""
        if self.pad_id is not None:
            return int(self.pad_id)
        last = {int(s.ids[-1]) for s in batch}
        for pad in (self.tokenizer.pad_token_id, self.tokenizer.eos_token_id, 0, 1, 2):
            if pad is not None and int(pad) not in last:
                return int(pad)
        return next(i for i in range(len(self.tokenizer)) if i not in last)

    def _forward(self, batch: list[_Sequence]) -> np.ndarray:
        pad = self._pad_id(batch)
        ids = pad_sequence([torch.from_numpy(s.ids) for s in batch], batch_first=True, padding_value=pad)
        mask = torch.arange(ids.shape[1]) < torch.tensor([s.length for s in batch])[:, None]
        config = self.model.config
        previous, config.pad_token_id = config.pad_token_id, pad  # pooling finds each row's last real token by it
        try:
            with torch.inference_mode():
                out = self.model(input_ids=ids.to(self.device), attention_mask=mask.long().to(self.device),
                                 use_cache=False)
        finally:
            config.pad_token_id = previous
        logits = out.logits if getattr(out, "logits", None) is not None else out.score
        logits = logits.float().reshape(len(batch), -1)
        return logits[:, self.output_index or 0].cpu().numpy()

    def score(self, prompts: Sequence[str], candidates: Sequence[Sequence[str]], *, batch_tokens: int | None = None,
              progress: Callable[[int], Any] | None = None) -> list[np.ndarray]:
        """One logit per candidate (float64 arrays, input order); `progress(n)` counts prompts finished."""
        prompts, candidates = check_inputs(prompts, candidates, min_candidates=MIN_CANDIDATES["sequence_classifier"])
        plan, order, per_prompt = self.plan(prompts, candidates)
        logits = self._run(plan, order, batch_tokens, per_prompt, progress)
        return [logits[index].astype(np.float64) for index in per_prompt]
