"""The reference backend: llm-blender 0.0.2's own `Blender.loadranker` / `Blender.rank`, on transformers 5 (two names
it imports from transformers < 5 put back when this backend is used, never on `import repro`)."""

from __future__ import annotations

import contextlib
import copy
import logging
import warnings
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import torch
from huggingface_hub import constants

from ..errors import ParameterError
from ..parameters import Count, check_value
from .common import check_inputs, check_pairs, no_progress_bars, resolve_device, resolve_dtype, with_progress
from .pairrm_checkpoint import PairRMScorerBase, checkpoint_limits, detect_layout, read_config, resolve_model
from .pairrm_tokens import restore_sentencepiece_normalizer


def _batch_encode_plus(self, batch_text_or_text_pairs, **kwargs):
    """transformers < 5's batch call: one `__call__` on the list."""
    return self(list(batch_text_or_text_pairs), **kwargs)


def install_transformers5_shim() -> list[str]:
    """Put back the names llm-blender 0.0.2 imports from transformers < 5; returns those restored now."""
    import transformers.utils.hub as hub  # keeps transformers off `repro score --help`
    from transformers.tokenization_utils_base import PreTrainedTokenizerBase

    restored = []
    if not hasattr(hub, "TRANSFORMERS_CACHE"):
        hub.TRANSFORMERS_CACHE = constants.HF_HUB_CACHE
        restored.append("transformers.utils.hub.TRANSFORMERS_CACHE")
    if not hasattr(PreTrainedTokenizerBase, "batch_encode_plus"):
        PreTrainedTokenizerBase.batch_encode_plus = _batch_encode_plus
        restored.append("PreTrainedTokenizerBase.batch_encode_plus")
    return restored


BLENDER_DTYPES = "fp16 on CUDA/MPS and fp32 otherwise"  # what llm-blender runs in


def blender_runs(dtype_name: str, device) -> bool:
    """Whether llm-blender's code runs in `dtype_name` (resolved) on the torch `device`."""
    return dtype_name == "fp32" or (dtype_name == "fp16" and device.type in ("cuda", "mps"))


def import_llm_blender():
    """`import llm_blender`, after the transformers-5 shim."""
    install_transformers5_shim()
    import llm_blender

    return llm_blender


@contextlib.contextmanager
def _quiet_loading():
    """Mute llm-blender's construction warnings, its print, dataclasses_json's and transformers' bars."""
    previous = logging.root.manager.disable
    logging.disable(logging.WARNING)
    try:
        with no_progress_bars(), warnings.catch_warnings(), contextlib.redirect_stdout(None):
            warnings.simplefilter("ignore")
            yield
    finally:
        logging.disable(previous)


class BlenderScorer(PairRMScorerBase):
    """Scores from llm-blender's own code; the same interface as `repro.scorers.pairrm.PairRM`."""

    backend = "llm-blender"

    def __init__(self, blender, *, batch_size: int, **facts):
        super().__init__(**facts)
        self.blender, self.batch_size = blender, batch_size

    @classmethod
    def load(cls, model: str | Path, *, device: str = "auto", dtype: str = "auto",
             source_maxlength: int | None = None, candidate_maxlength: int | None = None, batch_size: int = 1,
             restore_normalizer: bool = True) -> "BlenderScorer":
        """`Blender.loadranker` on a PairRM checkpoint (limits None: the checkpoint's); `batch_size=1`: SPPO's."""
        torch_device = resolve_device(device)
        dtype_name = resolve_dtype(dtype, torch_device)
        if not blender_runs(dtype_name, torch_device):
            raise ParameterError(f"dtype={dtype!r} on {torch_device}: llm-blender runs {BLENDER_DTYPES}; choose one "
                                 f"of those (or backend='repro').")
        path = resolve_model(model)
        config = read_config(path)
        layout = detect_layout(config)
        limits, origins = checkpoint_limits(config, source_maxlength, candidate_maxlength)
        # llm-blender reads a limit that is not given from its RankerConfig: pass only the others
        overrides: dict[str, Any] = {k: v for k, v in limits.items() if origins[k] != "checkpoint config"}
        overrides["fp16"] = dtype_name == "fp16"
        name = config.get("model_name") or ""
        if layout != "llm-blender":
            overrides.update(ranker_type="pairranker", model_type="deberta", model_name=str(path.resolve()))
        elif name and (path / name).is_dir():  # repro.scorers.tiny's convention: the backbone beside the checkpoint
            overrides["model_name"] = str((path / name).resolve())
        llm_blender = import_llm_blender()
        # llm-blender halves the model only for the exact strings "cuda" and "mps"
        blender_device = torch_device.type if torch_device.index in (None, 0) else str(torch_device)
        with _quiet_loading():
            blender = llm_blender.Blender(llm_blender.BlenderConfig(device=blender_device, use_tqdm=False))
            blender.loadranker(str(path), device=blender_device, **overrides)
        if dtype_name == "fp16":
            blender.ranker.half()
        restored = restore_normalizer and restore_sentencepiece_normalizer(blender.ranker_tokenizer)
        normalization = "sentencepiece" if restored else "transformers-5"
        return cls(blender, spec=str(model), path=path, layout=layout, device=str(torch_device), dtype=dtype_name,
                   normalization=normalization, batch_size=batch_size, limits_from=origins, **limits)

    @property
    def info(self) -> dict[str, Any]:
        """What produced the scores, for the run manifest."""
        return {**super().info, "batch_size": self.batch_size}

    def comparison_matrices(self, prompts: list[str], candidates: list[list[str]]) -> list[np.ndarray]:
        """M per prompt from llm-blender's `_full_predict`, batched as `Blender.rank` batches (equal counts)."""
        from llm_blender.blender.blender_utils import RankerDataset

        collate_fn = copy.copy(self.blender.ranker_collator)
        collate_fn.source_maxlength = self.source_maxlength
        collate_fn.candidate_maxlength = self.candidate_maxlength
        loader = torch.utils.data.DataLoader(RankerDataset(prompts, candidates), batch_size=self.batch_size,
                                             shuffle=False, collate_fn=collate_fn)
        out = []
        with torch.no_grad():
            for batch in loader:
                batch = {k: v.to(self.blender.ranker_config.device) for k, v in batch.items() if v is not None}
                logits = self.blender.ranker._full_predict(**batch)["logits"]
                out.extend(np.asarray(m, dtype=np.float64) for m in logits.float().cpu().numpy())
        return out

    @staticmethod
    def call_order(candidates: Sequence[Sequence[str]]) -> list[list[int]]:
        """The rows of each llm-blender call group: equal candidate counts, counts in order of first appearance."""
        counts = [len(cands) for cands in candidates]
        return [[row for row, n in enumerate(counts) if n == count] for count in dict.fromkeys(counts)]

    def score(self, prompts: Sequence[str], candidates: Sequence[Sequence[str]], *, batch_tokens: int | None = None,
              return_matrix: bool = False, progress: Callable[[int], Any] | None = None):
        """llm-blender's scores (float32, as float64 arrays) in input order; `batch_tokens` is only checked here."""
        prompts, candidates = check_inputs(prompts, candidates)
        check_value(Count | None, batch_tokens, "batch_tokens")
        scores: list[np.ndarray | None] = [None] * len(prompts)
        matrices: list[np.ndarray | None] = [None] * len(prompts)
        # llm-blender needs equal candidate counts in one call; calls of whole batches keep its batching
        step = 32 * self.batch_size
        with with_progress(progress, len(prompts), "PairRM scoring (llm-blender)") as progress:
            for rows in self.call_order(candidates):
                for start in range(0, len(rows), step):
                    part = rows[start:start + step]
                    p, c = [prompts[r] for r in part], [list(candidates[r]) for r in part]
                    ranked = self.blender.rank(p, c, return_scores=True, batch_size=self.batch_size, disable_tqdm=True,
                                               source_max_length=self.source_maxlength,
                                               candidate_max_length=self.candidate_maxlength)
                    found = self.comparison_matrices(p, c) if return_matrix else [None] * len(part)
                    for r, s, m in zip(part, ranked, found):
                        scores[r], matrices[r] = np.asarray(s, dtype=np.float64), m
                    progress(len(part))
        return (scores, matrices) if return_matrix else scores

    def rank(self, prompts: Sequence[str], candidates: Sequence[Sequence[str]], **kwargs) -> list[np.ndarray]:
        """Ranks per prompt from llm-blender's `get_ranks_from_scores` (1 = best, ties share)."""
        from llm_blender.gpt_eval.utils import get_ranks_from_scores

        return [np.asarray(get_ranks_from_scores(np.asarray(s, dtype=np.float32)), dtype=np.int64)
                for s in self.score(prompts, candidates, **kwargs)]

    def compare(self, prompts: Sequence[str], candidates_a: Sequence[str], candidates_b: Sequence[str], *,
                batch_tokens: int | None = None, progress: Callable[[int], Any] | None = None) -> np.ndarray:
        """`Blender.compare(..., mode="[A,B]+[B,A]", return_logits=True)`: M[A, B] − M[B, A]."""
        pairs = check_pairs(prompts, candidates_a, candidates_b)
        check_value(Count | None, batch_tokens, "batch_tokens")
        with with_progress(progress, len(pairs[0]), "PairRM scoring (llm-blender)") as progress:
            out = self.blender.compare(*pairs, batch_size=self.batch_size, return_logits=True, mode="[A,B]+[B,A]",
                                       disable_tqdm=True)
            progress(len(pairs[0]))
        return np.asarray(out, dtype=np.float64)
