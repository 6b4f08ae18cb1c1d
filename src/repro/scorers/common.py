"""What every scorer shares: devices and precisions, input checks, ranks, the stand-in mark."""

from __future__ import annotations

import contextlib
import math
import numbers
import warnings
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import torch
from huggingface_hub import utils as hub_utils

from ..errors import DataError, ParameterError, ReproError, counted, warn
from ..jobs import Progress
from ..parameters import Count, Device, Dtype, check_value, default_batch_tokens
from ..paths import STAND_IN_MARKER

MIN_CANDIDATES = {"pairrm": 2, "sequence_classifier": 1}  # per prompt: PairRM compares pairs


def torch_dtype(name: str):
    """The torch dtype of 'fp32' | 'fp16' | 'bf16'."""
    return {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[name]


def resolve_device(device: str | None, key: str = "device"):
    """auto (CUDA if any, else CPU) | cpu | cuda | cuda:N | mps, any case (schema's `Device`); errors name `key`."""
    name = check_value(Device, str(device or "auto"), key)
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cpu":
        return torch.device("cpu")
    if name == "mps":
        if not (hasattr(torch.backends, "mps") and torch.backends.mps.is_available()):
            raise ParameterError(f"{key}='mps' was asked for but this torch sees no Apple GPU; use 'cpu' or 'auto'.")
        return torch.device("mps")
    if not torch.cuda.is_available():
        raise ParameterError(
            f"{key}={device!r} was asked for but no CUDA GPU is visible (torch {torch.__version__}, "
            f"torch.cuda.is_available() is False). Use {key}='cpu' or 'auto', or install a CUDA build of torch "
            f"on a GPU machine.")
    index = int(name.partition(":")[2] or 0)
    if index >= (n := torch.cuda.device_count()):
        raise ParameterError(f"{key}={device!r}: only {counted(n, 'CUDA device')} {'is' if n == 1 else 'are'} "
                             f"visible.")
    return torch.device(f"cuda:{index}")


def resolve_dtype(dtype: str | None, device, gpu_auto: str = "fp16") -> str:
    """fp32|fp16|bf16 (schema's `Dtype`, torch names too); auto: `gpu_auto` on GPU (fp16: llm-blender's), else fp32."""
    name = check_value(Dtype, str(dtype or "auto"), "dtype")
    if name == "auto":
        return gpu_auto if device.type in ("cuda", "mps") else "fp32"
    if name == "bf16" and device.type == "cuda" and not torch.cuda.is_bf16_supported():
        raise ParameterError(f"dtype='bf16' is not supported by {torch.cuda.get_device_name(device)}; use 'fp16'.")
    return name


def text_list(value: Any, what: str, expected: str = "a list of strings") -> list:
    """`value` as a list: a list, a tuple, a numpy array or a pandas Series (parquet's rows hold arrays, and
    `to_pandas()` gives Series); a DataError naming `what` for a bare string, a generator, None or anything else."""
    if hasattr(value, "tolist") and getattr(value, "ndim", 0) >= 1:  # numpy's and pandas' items become Python's
        value = value.tolist()
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return list(value)
    how = (": one text, not a list of texts; put it in a list" if isinstance(value, str) else
           ": a generator is read once; wrap it in list()" if isinstance(value, Iterator) else "")
    raise DataError(f"{what} is {type(value).__name__}, expected {expected} (a list, tuple, 1-d numpy array or "
                    f"pandas Series){how}.")


def check_inputs(prompts: Sequence[Any], candidates: Sequence[Any], min_candidates: int = 2,
                 candidate: Callable[[int, int], str] = lambda row, i: f"Row {row}: candidate {i}",
                 ) -> tuple[list[str], list[list[str]]]:
    """The prompts and each row's candidates as lists (`text_list`); a DataError naming the argument or the first bad
    row: non-strings, missing fields, too few candidates (`candidate(row, i)`: how a message names one)."""
    prompts = text_list(prompts, "prompts")
    candidates = text_list(candidates, "candidates", "one list of candidate texts per prompt")
    if len(candidates) != len(prompts):
        first = f", the first a {type(candidates[0]).__name__}" if candidates else ""
        raise DataError(f"candidates must be a list with one list of candidate texts per prompt "
                        f"({len(prompts)} prompts), got {counted(len(candidates), 'item')}{first}: give one list of "
                        f"candidates per prompt.")
    rows = []
    for row, (prompt, cands) in enumerate(zip(prompts, candidates)):
        if not isinstance(prompt, str):
            raise DataError(f"Row {row}: the prompt is {type(prompt).__name__} ({prompt!r:.60}), expected a string.")
        rows.append(cands := text_list(cands, f"Row {row}: candidates"))
        if len(cands) < min_candidates:
            need = ("PairRM compares pairs, so each prompt needs at least two" if min_candidates == 2
                    else f"each prompt needs at least {min_candidates}")
            raise DataError(f"Row {row}: {counted(len(cands), 'candidate')}; {need}. Drop the row or add candidates.")
        for i, cand in enumerate(cands):
            if not isinstance(cand, str):
                raise DataError(f"{candidate(row, i)} is {type(cand).__name__} ({cand!r:.60}), expected a string.")
    return prompts, rows


def check_pairs(prompts: Sequence[Any], candidates_a: Sequence[Any],
                candidates_b: Sequence[Any]) -> tuple[list[str], list[str], list[str]]:
    """`compare`'s inputs as lists, checked as `score`'s (`check_inputs`): one candidate A and one B per prompt."""
    prompts = text_list(prompts, "prompts")
    a = text_list(candidates_a, "candidates_a", "a list of strings, one per prompt")
    b = text_list(candidates_b, "candidates_b", "a list of strings, one per prompt")
    if not len(a) == len(b) == len(prompts):
        raise DataError(f"compare needs one candidate A and one candidate B per prompt: got {len(prompts)} "
                        f"prompts, {len(a)} A and {len(b)} B.")
    check_inputs(prompts, [[x, y] for x, y in zip(a, b)], candidate=lambda row, i: f"candidates_{'ab'[i]}[{row}]")
    return prompts, a, b


def check_scores(scores: Sequence[float], where: str = "A row") -> None:
    """A DataError naming `where` (a row) unless `scores` is a `text_list` of finite numbers (NaN: scorer failed)."""
    values = text_list(scores, f"{where}: the score list", "one number per candidate")
    bad = next((i for i, s in enumerate(values) if isinstance(s, (bool, np.bool_)) or not isinstance(s, numbers.Real)),
               None)
    if bad is not None:
        kind = "" if values[bad] is None else f" ({type(values[bad]).__name__})"
        raise DataError(f"{where}: score {bad} (from 0) is {values[bad]!r:.60}{kind}, not a number: give one int or "
                        f"float per candidate (text converted first; a row without its scores left out).")
    if not all(math.isfinite(s) for s in values):
        raise DataError(f"{where}: the scores contain NaN or infinity ({[float(s) for s in values]}): the scorer "
                        f"failed on this row. A reward model's head can overflow in fp16 or bf16: score in fp32 "
                        f"(--dtype fp32, or dtype: fp32 in the parameters), or try another dtype.")


def ranks_from_scores(scores: Sequence[float], where: str = "A row") -> np.ndarray:
    """1 = best; equal scores share the better rank (llm-blender's get_ranks_from_scores); NaN refused (`where`)."""
    check_scores(scores, where)
    s = np.asarray(scores, dtype=np.float64)
    return np.array([1 + int(np.sum(s > x)) for x in s], dtype=np.int64)


@contextlib.contextmanager
def with_progress(progress: Any, total: int, desc: str) -> Iterator[Callable[[int], Any]]:
    """A scorer's `progress` while a call runs, as a function of the prompts newly done: a function as given; True a bar
    of `total` prompts (`Progress`), False or None none (as score_candidates takes it); else a ParameterError."""
    if not (progress is None or isinstance(progress, bool) or callable(progress)):
        raise ParameterError(f"progress={progress!r:.60} is not a function: give True (a progress bar), False or None "
                             f"(none), or a function called with the number of prompts newly done.")
    with Progress(total, desc=desc, unit="prompt", enabled=progress is True) as bar:
        yield progress if callable(progress) else bar.advance


def no_folder(spec: str) -> str:
    """What a loader says of a model `spec` that is no local folder (a hub id's shape, models/rm, is a path too)."""
    return f"no folder {Path(spec).expanduser().resolve()}: a relative path is read from the current folder"


@contextlib.contextmanager
def no_progress_bars() -> Iterator[None]:
    """transformers' progress bars off (a load of weights draws a "Loading weights" bar: in a notebook or `repro run`,
    noise on every load), the hub's download bars as they were; after, transformers' as they were."""
    from transformers.utils import logging as hf_logging  # keeps transformers off `repro score --help`

    bar, hub_off = hf_logging.is_progress_bar_enabled(), hub_utils.are_progress_bars_disabled()
    with warnings.catch_warnings():  # (HF_HUB_DISABLE_PROGRESS_BARS set: the hub warns that it keeps its own way)
        warnings.simplefilter("ignore")
        hf_logging.disable_progress_bar()  # (the hub's too: on again, for a first download's bars)
        if not hub_off:
            hub_utils.enable_progress_bars()
    try:
        yield
    finally:
        if bar:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                hf_logging.enable_progress_bar()
                if hub_off:
                    hub_utils.disable_progress_bars()


def is_stand_in(spec: str | Path) -> bool:
    """True for a random stand-in (`builtin:...`, or a directory `repro.scorers.tiny` built): its scores are noise."""
    spec = str(spec)
    if spec.startswith("builtin:"):
        return True
    try:
        return (Path(spec).expanduser() / STAND_IN_MARKER).is_file()
    except OSError:
        return False


class BudgetedBatches:
    """Runs `self._forward(items)` over items sorted longest first, `batch_tokens` padded tokens at a time; the
    subclass sets `device`, `dtype`, `tokenizer`, `max_batch_tokens` (an out-of-memory lowers it) and its words."""

    label, unit, shrink_hint = "scorer", "pass", "smaller length limits"
    add_special_tokens = True
    max_batch_tokens: int | None = None  # an out-of-memory lowers it for the rest of the scorer's life

    def encode_texts(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Token ids of `texts` (untruncated; [CLS]/[SEP] with `add_special_tokens`), in slices of batched calls."""
        out: list[np.ndarray] = []
        for start in range(0, len(texts), 1024):
            batch = self.tokenizer(list(texts[start:start + 1024]), add_special_tokens=self.add_special_tokens,
                                   truncation=False)
            out.extend(np.asarray(ids, dtype=np.int64) for ids in batch["input_ids"])
        return out

    def _run(self, plan: Sequence[Any], order: list[int], batch_tokens: int | None, needed: Sequence[Sequence[int]],
             progress: Callable[[int], Any] | None) -> np.ndarray:
        """Each item's output; `progress(n)`: prompts whose `needed` items are newly all done; `batch_tokens` None: the
        device's. An out-of-memory halves the budget and starts over (the rounding depends on the budget); `progress`
        True or False as score_candidates takes it: a bar of the prompts (`Progress`), or none."""
        if getattr(self, "model", True) is None:
            raise ParameterError(f"This {self.label} scorer was loaded with weights=False (its record and tokenizer "
                                 f"only): call scorer.load_weights() first, then score.")
        with with_progress(progress, sum(len(items) > 0 for items in needed), f"{self.label} scoring") as progress:
            batch_tokens = check_value(Count, default_batch_tokens(self.device.type) if batch_tokens is None else
                                       batch_tokens, "batch_tokens")
            position = np.argsort(order)  # where each item runs (`order` is a permutation of the items)
            # a prompt is done after its last item (one that needs none is never reported: it has no pass to wait for)
            done_at = np.sort([position[items].max() if len(items) else -1 for items in needed])
            out = np.empty(len(plan), dtype=np.float32)
            budget = self.effective_batch_tokens(batch_tokens)
            reported = start = 0  # reported: how far into `order` progress went (a restart does not report again)
            while start < len(order):
                width = plan[order[start]].length  # the longest of the batch: items are sorted
                stop = min(len(order), start + max(1, budget // width))
                chunk = order[start:stop]
                try:
                    out[chunk] = self._forward([plan[k] for k in chunk])
                except torch.OutOfMemoryError:
                    if len(chunk) == 1:
                        raise ReproError(
                            f"Out of memory on {self.device} for a single {self.label} {self.unit} of {width} tokens "
                            f"({self.dtype}). Use a GPU with more free memory, dtype='fp16' or 'bf16', or "
                            f"{self.shrink_hint}.") from None
                    new_budget = max(width, (len(chunk) * width) // 2)
                    warn(f"{self.label}: out of memory on {self.device} with batch_tokens={budget}; starting this "
                         f"call over with batch_tokens={new_budget}, kept from now on (scores depend on the budget: "
                         f"set batch_tokens={new_budget}, or --batch-tokens {new_budget}, to start there).")
                    budget = self.max_batch_tokens = new_budget
                    if self.device.type == "cuda":
                        torch.cuda.empty_cache()
                    start = 0
                    continue
                finished = int(np.searchsorted(done_at, stop) - np.searchsorted(done_at, reported))
                if finished > 0:
                    progress(finished)
                reported, start = max(reported, stop), stop
            return out

    def rank(self, prompts: Sequence[str], candidates: Sequence[Sequence[str]], **kwargs) -> list[np.ndarray]:
        """Ranks per prompt (1 = best, ties share), from `score`."""
        return [ranks_from_scores(s) for s in self.score(prompts, candidates, **kwargs)]

    def compare(self, prompts: Sequence[str], candidates_a: Sequence[str], candidates_b: Sequence[str], *,
                batch_tokens: int | None = None, progress: Callable[[int], Any] | None = None) -> np.ndarray:
        """score(A) − score(B) per prompt, A and B scored as its two candidates (> 0: A is better): PairRM's
        M[A, B] − M[B, A] (llm-blender's compare mode "[A,B]+[B,A]"), a reward model's r(A) − r(B)."""
        prompts, a, b = check_pairs(prompts, candidates_a, candidates_b)
        scores = self.score(prompts, [[x, y] for x, y in zip(a, b)], batch_tokens=batch_tokens, progress=progress)
        return np.array([s[0] - s[1] for s in scores], dtype=np.float64)

    def effective_batch_tokens(self, batch_tokens: int) -> int:
        """The budget a call with `batch_tokens` uses: lower after an out-of-memory (the scores depend on it)."""
        budget = int(batch_tokens)
        return budget if self.max_batch_tokens is None else min(budget, self.max_batch_tokens)
