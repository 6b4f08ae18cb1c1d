"""Scoring at scale (PairRM or a sequence-classifier reward model) through `repro.jobs.run_job`: 1, 2 or 64
processes give byte-identical scores (a chunk holds the same prompts, and a prompt's scores ignore its neighbours)."""

from __future__ import annotations

import collections
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..cache import RowCache, check_format
from ..errors import ParameterError, ReproError, warn
from ..jobs import chunk_share, read_note, run_chunked_with_stats, run_job
from ..manifest import job_versions
from ..parameters import Count, TokenLimit, check_value, default_batch_tokens
from ..revisions import SCORING_CODE, model_identity, python_digest
from ..scorers import load_scorer, resolve_kind
from ..scorers.common import MIN_CANDIDATES, check_inputs, resolve_device, resolve_dtype
from ..scorers.sequence_classifier import cut_rows, reward_model_dtype


class ScoringError(ReproError, RuntimeError):
    """Scoring processes failed; finished chunks stay in the work dir for a re-run to continue."""


@dataclass
class ScoreResult:
    """Scores per prompt (input order, one float per candidate) and how they were computed."""

    scores: list[list[float]]
    info: dict[str, Any] = field(default_factory=dict)


@dataclass
class ScoringJob:
    """Everything that decides the scores and how the work is cut; JSON-serialisable for torchrun workers."""

    model: str
    backend: str
    device: str
    dtype: str
    batch_tokens: int
    chunk_size: int
    work_dir: str
    source_maxlength: int | None  # None: the checkpoint's own (repro.scorers.pairrm_checkpoint.checkpoint_limits)
    candidate_maxlength: int | None
    progress: bool
    kind: str  # 'pairrm' | 'sequence_classifier' (score_candidates resolves 'auto' before any work)
    options: dict[str, Any] = field(default_factory=dict)  # a sequence classifier's (chat_template, ...)
    cache_dir: str | None = None  # the project's row cache (repro.cache); None: no cache


def job_fingerprint(job: ScoringJob) -> dict[str, Any]:
    """What the scores depend on, batch_tokens included (the batches, so the float rounding, follow it)."""
    device = resolve_device(job.device)  # an unknown or unavailable device or dtype fails here, before any work
    dtype = (reward_model_dtype if job.kind == "sequence_classifier" else resolve_dtype)(job.dtype, device)
    common = {"model": model_identity(job.model), "device_type": device.type, "dtype": dtype,
              "batch_tokens": job.batch_tokens, "options": job.options,  # llm-blender's batch_size changes scores
              "versions": job_versions("repro", *["llm-blender"] * (job.backend == "llm-blender")),
              "code": python_digest(*SCORING_CODE)}
    if job.kind == "sequence_classifier":
        return {"what": "sequence-classifier-scores", **common}
    # limits None: the checkpoint's own, which `model` identifies
    return {"what": "pairrm-scores", **common, "backend": job.backend, "source_maxlength": job.source_maxlength,
            "candidate_maxlength": job.candidate_maxlength}


def split_limits(options: dict[str, Any] | None, source_maxlength: int | None,
                 candidate_maxlength: int | None) -> tuple[dict[str, int | None], dict[str, Any]]:
    """(PairRM's limits, the other scorer options): a limit inside the options too is one value, the argument's."""
    options = dict(options or {})
    limits = {"source_maxlength": source_maxlength, "candidate_maxlength": candidate_maxlength}
    for name, value in limits.items():
        given = options.pop(name, value)
        if value is not None and given != value:
            raise ParameterError(f"{name} is given twice ({value} and {given} in the scorer options): give it once.")
        limits[name] = given
    return limits, options


def score_candidates(prompts: list[str], candidates: list[list[str]], *, model: str, backend: str, device: str,
                     dtype: str, batch_tokens: int | None, chunk_size: int, num_processes: int, work_dir: str | Path,
                     kind: str, source_maxlength: int | None = None, candidate_maxlength: int | None = None,
                     progress: bool = True, options: dict[str, Any] | None = None,
                     cache_dir: str | Path | None = None) -> ScoreResult:
    """Score every candidate of every prompt, resumably, in one or several processes; `cache_dir`: the row cache."""
    limits, options = split_limits(options, source_maxlength, candidate_maxlength)
    if batch_tokens is None:  # (an unknown device fails here)
        batch_tokens = default_batch_tokens(resolve_device(device).type)
    # the Python API's entry: each count by the schema's rule (ConstructParams'), before any work
    limits = {name: check_value(TokenLimit | None, value, name) for name, value in limits.items()}
    job = ScoringJob(model=str(model), backend=backend, device=device, dtype=dtype,
                     batch_tokens=check_value(Count, batch_tokens, "batch_tokens"), work_dir=str(work_dir),
                     chunk_size=check_value(Count, chunk_size, "chunk_size"), **limits, progress=bool(progress),
                     kind=resolve_kind(model, kind), options=options,
                     cache_dir=None if cache_dir is None else str(cache_dir))
    # (an unknown backend: load_scorer's error, as the schema's and `repro score`'s choices keep it out)
    num_processes = check_value(Count, num_processes, "num_processes")
    if job.cache_dir is not None:  # a cache of another key format is refused here, before any work
        check_format(Path(job.cache_dir))
    prompts, candidates = check_inputs(prompts, candidates, min_candidates=MIN_CANDIDATES[job.kind])
    items = [[p, c] for p, c in zip(prompts, candidates)]
    start = time.monotonic()
    scores, stats = scoring_job({"job": asdict(job), "items": items, "num_processes": num_processes})
    computed = len(items) - stats["items_resumed"] - stats.get("cache", {}).get("rows_from_cache", 0)
    info = {
        **stats["info"], "prompts": len(items), "prompts_computed": computed,
        "prompts_per_second": round(computed / stats["seconds"], 4) if computed and stats["seconds"] > 0 else None,
        "seconds": round(time.monotonic() - start, 3), "scoring_seconds": round(stats["seconds"], 3),
        "load_seconds": round(stats["load_seconds"], 3), "chunks": stats["chunks_total"],
        "chunks_resumed": stats["chunks_resumed"], "chunk_size": job.chunk_size, "processes": stats["processes"],
        "batch_tokens": job.batch_tokens, "work_dir": str(job.work_dir), "fingerprint": stats["digest"],
        **({"devices": stats["devices"]} if stats["processes"] > 1 else {}),
        **({"cache": stats["cache"]} if "cache" in stats else {}),
    }
    if job.kind == "sequence_classifier":  # rows with a conversation cut at max_length (every row, resumed too)
        info["rows_truncated"] = stats["rows_truncated"]
        if info["rows_truncated"]:  # once for the job (a warning per chunk showed the first chunk's count alone)
            warn(cut_rows(str(model), info["rows_truncated"], info["max_length"]))
    if set(stats["batch_tokens_used"]) - {str(job.batch_tokens)} or stats["batch_tokens_unknown"] or \
            stats["chunks_resumed"]:
        # prompts per budget (every process's, resumed and cached ones too): after an out-of-memory, which chunks a
        # re-run at the lower one matches; unknown: prompts of chunks an older repro made, which keep no budget; where
        # chunks were resumed, always (an older repro's record lacks it: its resumed prompts' budget is not known)
        info["batch_tokens_used"] = stats["batch_tokens_used"]
        if stats["batch_tokens_unknown"]:
            info["batch_tokens_unknown"] = stats["batch_tokens_unknown"]
    return ScoreResult(scores=scores, info=info)


def _not_scores(item: list[Any], result: Any) -> str | None:
    """What a finished chunk's result of `item` ([prompt, candidates]) should be, where `result` is not that."""
    n = len(item[1])
    if isinstance(result, list) and len(result) == n and all(type(x) in (int, float) for x in result):
        return None
    return f"{n} scores (one number per candidate)"


def scoring_job(spec: dict[str, Any]) -> tuple[list[list[float]], dict[str, Any]]:
    """The scores of `spec`'s items and the merged stats via `repro.jobs.run_job` (torchrun workers' entry too)."""
    job, items = ScoringJob(**spec["job"]), spec["items"]
    fingerprint = job_fingerprint(job)  # once: the same for the work dir, the row cache and every process
    desc = "PairRM scoring" if job.kind == "pairrm" else "reward-model scoring"
    limits = {} if job.kind == "sequence_classifier" else {
        "source_maxlength": job.source_maxlength, "candidate_maxlength": job.candidate_maxlength}
    # issue 22: the row cache, keyed on the scorer's fingerprint and the row ([prompt, candidates])
    cache = RowCache.open(job.cache_dir, "scores", fingerprint) if job.cache_dir is not None else None

    def compute(device: str | None, share: tuple[int, int] | None):
        # record and tokenizer first: a model, option or template that fails, fails here with the work dir untouched;
        # the weights load at the first row left to score (a re-run whose chunks are all done loads no model)
        start = time.monotonic()
        scorer = load_scorer(job.model, kind=job.kind, backend=job.backend, device=device or job.device,
                             dtype=job.dtype, weights=False, **limits, **job.options)
        load_seconds = time.monotonic() - start
        scorer.warn_cut = False  # (score_candidates says the job's total once)

        def load_weights() -> None:
            nonlocal load_seconds
            start = time.monotonic()
            if getattr(scorer, "model", "loaded") is None:  # (llm-blender's backend loads whole)
                scorer.load_weights()
            load_seconds += time.monotonic() - start

        computed: set[int] = set()  # the items scored now (by id): the scorer counts their cut rows itself
        cache_budget = job.batch_tokens  # that of the namespace the row cache serves (lowered with the scorer's)

        def score_chunk(chunk: list[list[Any]], advance) -> list[list[float]]:
            computed.update(map(id, chunk))
            out = scorer.score([p for p, _ in chunk], [c for _, c in chunk], batch_tokens=job.batch_tokens,
                               progress=advance)
            if hasattr(scorer, "effective_batch_tokens"):  # an out-of-memory lowers it; each chunk is one budget's
                budget = scorer.effective_batch_tokens(job.batch_tokens)
                if cache is not None and budget != job.batch_tokens:  # its rows are the lower budget's, as a run's
                    cache.rekey({**fingerprint, "batch_tokens": budget})  # at it (which the rows after it read)
            # Python floats: JSON writes them exactly (shortest repr round-trips), so chunks reload bit for bit
            return [[float(x) for x in row] for row in out]

        def budgets_of(chunk: list[list[Any]]) -> dict[str, int] | None:
            """{budget: prompts} of a chunk made here, kept beside it: its rows scored now at the scorer's budget,
            those from the row cache at their namespace's (the one before the chunk: they were read first)."""
            nonlocal cache_budget
            if not hasattr(scorer, "effective_batch_tokens"):
                return None
            scored = sum(id(item) in computed for item in chunk)
            was, cache_budget = cache_budget, scorer.effective_batch_tokens(job.batch_tokens)
            counts = collections.Counter({str(was): len(chunk) - scored})
            counts[str(cache_budget)] += scored
            return {budget: n for budget, n in counts.items() if n}

        run = run_chunked_with_stats(
            items, score_chunk, work_dir=job.work_dir, fingerprint=fingerprint, chunk_size=job.chunk_size,
            desc=desc if share is None else f"{desc} (rank 0 of {share[1]}: its share)",
            progress=job.progress and (share is None or share[0] == 0), fn_reports_progress=True, share=share,
            unit="prompt", prepare=share is None, cache=cache, setup=load_weights, note=budgets_of, check=_not_scores)
        truncated, budgets_used, unknown = getattr(scorer, "rows_truncated", 0), collections.Counter(), 0
        size = job.chunk_size
        for index in range(run.chunks_total) if share is None else chunk_share(run.chunks_total, *share):
            chunk = items[index * size:(index + 1) * size]
            if hasattr(scorer, "count_truncated"):  # rows resumed or from the row cache: counted, not scored
                rest = [it for it in chunk if id(it) not in computed]
                truncated += scorer.count_truncated([p for p, _ in rest], [c for _, c in rest]) if rest else 0
            if hasattr(scorer, "effective_batch_tokens"):  # every chunk's budgets, as kept beside it (resumed too)
                made = read_note(job.work_dir, index)
                if isinstance(made, dict) and all(isinstance(n, int) for n in made.values()):
                    budgets_used.update(made)
                else:  # a chunk an older repro made (or its note damaged): its budget is not known
                    unknown += len(chunk)
        info = dict(scorer.info)
        if run.cache is not None:
            info["cache"] = run.cache  # this process's; score_candidates puts every process's counts in its place
        return run, {"info": info, "load_seconds": load_seconds, "device": info.get("device", "?"),
                     "batch_tokens_used": dict(budgets_used), "batch_tokens_unknown": unknown,
                     "rows_truncated": truncated}

    return run_job("repro.construct.scoring:scoring_job", spec, items, work_dir=job.work_dir, fingerprint=fingerprint,
                   chunk_size=job.chunk_size, device=fingerprint["device_type"], num_processes=spec["num_processes"],
                   compute=compute, summed=("batch_tokens_used", "batch_tokens_unknown", "rows_truncated"),
                   slowest=("load_seconds",), progress=job.progress, what="scoring", error=ScoringError, cache=cache)

