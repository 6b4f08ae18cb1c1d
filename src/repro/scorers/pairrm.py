"""PairRM's engine: llm-blender's pairwise reward model (`Blender.rank(..., return_scores=True)` at batch_size=1). A
pass `[CLS] <|source|> prompt [SEP] [CLS] <|candidate1|> a [SEP] [CLS] <|candidate2|> b [SEP]` gives M[a, b]; each
distinct text is tokenised once, each distinct pass run once, longest first by token budget."""

from __future__ import annotations

import itertools
import unicodedata
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import torch
from torch.nn.utils.rnn import pad_sequence

from ..errors import ModelLoadError
from .common import BudgetedBatches, check_inputs, resolve_device, resolve_dtype, torch_dtype
from .pairrm_attention import PairRMModel
from .pairrm_checkpoint import (PairRMScorerBase, checkpoint_limits, detect_layout, load_pairrm_model, read_config,
                               resolve_model)
from .pairrm_tokens import (CANDIDATE1_PREFIX, CANDIDATE2_PREFIX, CANDIDATE_PREFIX, PREFIX_TOKENS, SOURCE_PREFIX,
                            load_tokenizer)


def scores_from_matrix(matrix: np.ndarray) -> np.ndarray:
    """score_i = mean over j of (M[i, j] − M[j, i]), the diagonal included (llm-blender's max_logits policy)."""
    m = np.asarray(matrix, dtype=np.float64)
    return (m - m.T).mean(axis=1)


class _Pass:
    """One forward pass: a source and an ordered pair of candidates, as token ids."""

    __slots__ = ("source", "first", "second", "length", "order_key")

    def __init__(self, source: np.ndarray, first: np.ndarray, second: np.ndarray, order_key: tuple):
        self.source, self.first, self.second = source, first, second
        self.length = len(source) + len(first) + len(second)
        self.order_key = order_key


def _truncate(ids: np.ndarray, max_length: int) -> np.ndarray:
    """What the tokenizer's own truncation keeps: [CLS] + the first max_length − 2 tokens + [SEP]."""
    return ids if len(ids) <= max_length else np.concatenate([ids[:max_length - 1], ids[-1:]])


class PairRM(PairRMScorerBase, BudgetedBatches):
    """PairRM scorer (backend "repro"): load with `PairRM.load(model, device=..., dtype=...)`."""

    label, unit, shrink_hint = "PairRM", "pass", "smaller source_maxlength/candidate_maxlength"

    def __init__(self, model: PairRMModel | None, tokenizer, fast_attention: bool = True, **facts):
        super().__init__(**facts)
        self.model, self.tokenizer, self.fast_attention = model, tokenizer, fast_attention
        self.prefix_ids = dict(zip(PREFIX_TOKENS, tokenizer.convert_tokens_to_ids(list(PREFIX_TOKENS))))
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        self.sep_token = tokenizer.sep_token or "[SEP]"

    @classmethod
    def load(cls, model: str | Path, *, device: str = "auto", dtype: str = "auto",
             source_maxlength: int | None = None, candidate_maxlength: int | None = None,
             fast_attention: bool = True, weights: bool = True) -> "PairRM":
        """Load a PairRM checkpoint (hub id, folder of either layout, `builtin:tiny-pairrm`); limits None: its own;
        `fast_attention=False`: transformers' (slower); `weights=False`: no model yet (`load_weights` adds it)."""
        torch_device = resolve_device(device)
        dtype_name = resolve_dtype(dtype, torch_device)
        path = resolve_model(model)
        config = read_config(path)
        limits, origins = checkpoint_limits(config, source_maxlength, candidate_maxlength)
        layout = detect_layout(config)
        name = config.get("model_name") or "microsoft/deberta-v3-large"
        fallback = (path / name if (path / name).is_dir() else name) if layout == "llm-blender" else None
        tokenizer, how = load_tokenizer(path, fallback)
        scorer = cls(None, tokenizer, fast_attention, spec=str(model), path=path, layout=layout, device=torch_device,
                     dtype=dtype_name, normalization=how, limits_from=origins, **limits)
        return scorer.load_weights() if weights else scorer

    def load_weights(self) -> "PairRM":
        """The model of the checkpoint, on the scorer's device and dtype (`load(weights=False)` had none)."""
        module = load_pairrm_model(self.path, fast_attention=self.fast_attention)
        vocab_size = module.pretrained_model.config.vocab_size
        if len(self.tokenizer) > vocab_size:
            raise ModelLoadError(f"The tokenizer of {self.path} has {len(self.tokenizer)} tokens but the model's "
                                 f"embeddings only {vocab_size}: tokenizer and weights do not belong together.")
        self.model = module.to(device=self.device, dtype=torch_dtype(self.dtype))
        return self

    def _text(self, prefix: str, text: str) -> str:
        # llm-blender's collator turns the separator token inside texts into a space
        text = text.replace(self.sep_token, " ")
        if self.normalization == "nfkc":
            text = unicodedata.normalize("NFKC", text)
        return prefix + text

    def plan(self, prompts: Sequence[str], candidates: Sequence[Sequence[str]]):
        """Distinct passes (sorted longest first) and, per prompt, the pass index of every ordered pair."""
        sources = dict.fromkeys(prompts)
        texts = dict.fromkeys(c for cands in candidates for c in cands)
        source_ids = dict(zip(sources, self.encode_texts([self._text(SOURCE_PREFIX, p) for p in sources])))
        cand_ids = dict(zip(texts, self.encode_texts([self._text(CANDIDATE_PREFIX, c) for c in texts])))
        cand_prefix = self.prefix_ids[CANDIDATE_PREFIX]
        slot_ids = (self.prefix_ids[CANDIDATE1_PREFIX], self.prefix_ids[CANDIDATE2_PREFIX])
        passes: dict[tuple[bytes, bytes, bytes], int] = {}  # by tokens: texts that read alike share a pass
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
            for (i, a), (j, b) in itertools.permutations(enumerate(cands), 2):
                # ("" and " " are the same tokens: one pass, so exactly tied scores, as llm-blender's own passes)
                key = (src.tobytes(), slots[i][0].tobytes(), slots[j][1].tobytes())
                if key not in passes:
                    passes[key] = len(plan)
                    plan.append(_Pass(src, slots[i][0], slots[j][1], (prompt, a, b)))
                index[i, j] = passes[key]
            per_prompt.append(index)
        # longest first (memory limits met at once); ties by text: the batches (so the numbers) ignore input order
        order = sorted(range(len(plan)), key=lambda k: (-plan[k].length, plan[k].order_key))
        return plan, order, per_prompt

    def _batch_tensors(self, batch: list[_Pass]):
        rows = [torch.from_numpy(np.concatenate([p.source, p.first, p.second])) for p in batch]
        ids = pad_sequence(rows, batch_first=True, padding_value=self.pad_id)
        mask = torch.arange(ids.shape[1]) < torch.tensor([p.length for p in batch])[:, None]
        positions = torch.tensor([(1, len(p.source) + 1, len(p.source) + len(p.first) + 1) for p in batch])
        return tuple(a.to(self.device) for a in (ids, mask, positions))

    def _forward(self, batch: list[_Pass]) -> np.ndarray:
        with torch.inference_mode():
            logits = self.model(*self._batch_tensors(batch))
        return logits.float().cpu().numpy()

    def score(self, prompts: Sequence[str], candidates: Sequence[Sequence[str]], *, batch_tokens: int | None = None,
              return_matrix: bool = False, progress: Callable[[int], Any] | None = None):
        """PairRM scores per prompt (float64, input order), each M too with `return_matrix`; `progress(n)` as `_run`."""
        prompts, candidates = check_inputs(prompts, candidates)
        plan, order, per_prompt = self.plan(prompts, candidates)
        logits = self._run(plan, order, batch_tokens, [index[index >= 0] for index in per_prompt], progress)
        matrices = [np.where(index >= 0, logits[np.maximum(index, 0)].astype(np.float64), 0.0) for index in per_prompt]
        scores = [scores_from_matrix(m) for m in matrices]
        return (scores, matrices) if return_matrix else scores

    def pass_inputs(self, prompts: Sequence[str], candidates: Sequence[Sequence[str]]) -> list[dict]:
        """The input ids of every forward pass, per prompt: {(i, j): ids} for candidate i first, j second."""
        prompts, candidates = check_inputs(prompts, candidates)
        plan, _, per_prompt = self.plan(prompts, candidates)
        return [{(i, j): np.concatenate([plan[k].source, plan[k].first, plan[k].second])
                 for (i, j), k in np.ndenumerate(index) if k >= 0} for index in per_prompt]
