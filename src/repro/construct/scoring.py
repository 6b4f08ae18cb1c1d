"""Scoring at scale (PairRM or a sequence-classifier reward model): resumable chunks, progress, and torchrun processes over contiguous shares.

    result = score_candidates(prompts, candidates, model="llm-blender/PairRM", work_dir=run.work_dir("scoring"))
    result.scores  # list[list[float]], input order;  result.info  # the scorer's info + throughput

The scores themselves come from `repro.scorers` (PairRM: one forward pass per ordered pair, batched by a
token budget). This module decides which process scores which prompts and keeps finished chunks on disk:

- one process: chunks of `chunk_size` prompts, each written to `work_dir` when it finishes; re-running
  the same call after a crash continues from the chunks on disk (`repro.jobs.run_chunked`);
- `num_processes > 1`: launches `torchrun --standalone --nproc_per_node N` workers on this node; each
  rank scores a contiguous share of the chunks and rank 0 merges them in input order;
- launched by `torchrun` yourself (several nodes, `WORLD_SIZE > 1` in the environment): this call is
  one rank of that job; every rank gets the merged result, rank 0 (`repro.jobs.is_main_process()`)
  writes outputs.

A chunk holds the same prompts whatever the number of processes, and the engine's result for a prompt
does not depend on its batch neighbours, so 1, 2 or 64 processes give byte-identical scores.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from ..errors import ParameterError, ReproError
from ..jobs import launch_and_collect, run_as_rank, run_chunked_with_stats, world_size
from ..jobs import torchrun_command as work_torchrun_command
from ..manifest import sha256_file
from ..parameters import DEFAULT_BATCH_TOKENS
from ..scorers import load_scorer, resolve_kind
from ..scorers.common import check_inputs, resolve_device, resolve_dtype
from ..scorers.sequence_classifier import reward_model_dtype


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
    backend: str = "repro"
    device: str = "auto"
    dtype: str = "auto"
    batch_tokens: int = DEFAULT_BATCH_TOKENS
    chunk_size: int = 256
    work_dir: str = "work/scoring"
    source_maxlength: int | None = None  # None: the checkpoint's own (repro.scorers.pairrm_checkpoint.checkpoint_limits)
    candidate_maxlength: int | None = None
    progress: bool = True
    kind: str = "auto"  # resolved ('pairrm' | 'sequence_classifier') by score_candidates before any work
    options: dict[str, Any] = field(default_factory=dict)  # a sequence classifier's (chat_template, ...)


# ------------------------------------------------------------------------------------------------
# checks and fingerprint
# ------------------------------------------------------------------------------------------------
def _check_job(job: ScoringJob, num_processes: int) -> None:
    if job.backend not in ("repro", "llm-blender"):
        raise ParameterError(f"backend={job.backend!r} is not known: use 'repro' (the engine) or 'llm-blender' "
                             f"(the original code, for cross-checks).")
    if int(job.chunk_size) < 1:
        raise ParameterError(f"chunk_size={job.chunk_size} must be >= 1 (prompts per resumable chunk).")
    if int(num_processes) < 1:
        raise ParameterError(f"num_processes={num_processes} must be >= 1.")
    if int(job.batch_tokens) < 1:
        raise ParameterError(f"batch_tokens={job.batch_tokens} must be >= 1 (tokens per forward batch).")


def _device_and_dtype(job: ScoringJob) -> tuple[str, str]:
    """('cuda' | 'cpu' | 'mps', 'fp32' | 'fp16' | 'bf16'): what the job's device and dtype mean on this machine."""
    device = resolve_device(job.device)
    if job.kind == "sequence_classifier":
        return device.type, reward_model_dtype(job.dtype, device)
    return device.type, resolve_dtype(job.dtype, device)


def model_identity(model: str) -> dict[str, Any]:
    """What identifies the checkpoint for reuse of old chunks: file sizes and hashes, or the hub commit."""
    path = Path(model).expanduser()
    if path.is_dir():
        files = {}
        for f in sorted(p for p in path.rglob("*") if p.is_file()):
            stat = f.stat()
            # hashing gigabytes on every call is slow; size + mtime catches a replaced checkpoint
            files[str(f.relative_to(path))] = (
                sha256_file(f) if stat.st_size <= 64 << 20 else f"size={stat.st_size} mtime={stat.st_mtime_ns}")
        return {"path": str(path.resolve()), "files": files}
    try:
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(model, "config.json")
        if isinstance(cached, str):
            return {"hub_id": model, "commit": Path(cached).parent.name}
    except Exception:  # not a hub id (e.g. "builtin:..."), or no cache: the name is all we know
        pass
    return {"name": model}


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)


def job_fingerprint(job: ScoringJob) -> dict[str, Any]:
    """What the scores depend on (not where or how fast they are computed); the items are hashed by `work`.

    `batch_tokens` is in it: the batches, hence the float rounding of every score, follow the budget
    (`work` adds the chunk size, which decides the batches too).
    """
    device_type, dtype = _device_and_dtype(job)
    versions = {}
    for name in ("torch", "transformers", "repro"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    if job.kind == "sequence_classifier":
        return {"what": "sequence-classifier-scores", "model": model_identity(job.model), "device_type": device_type,
                "dtype": dtype, "batch_tokens": int(job.batch_tokens), "options": job.options, "versions": versions}
    return {
        "what": "pairrm-scores",
        "model": model_identity(job.model),
        "backend": job.backend,
        "device_type": device_type,
        "dtype": dtype,
        "batch_tokens": int(job.batch_tokens),
        # None = the checkpoint's own, which `model` identifies
        "source_maxlength": _optional_int(job.source_maxlength),
        "candidate_maxlength": _optional_int(job.candidate_maxlength),
        "options": job.options,  # e.g. llm-blender's batch_size, which changes its scores
        "versions": versions,
    }


# ------------------------------------------------------------------------------------------------
# the public call
# ------------------------------------------------------------------------------------------------
def score_candidates(prompts: list[str], candidates: list[list[str]], *, model: str, backend: str = "repro",
                     device: str = "auto", dtype: str = "auto", batch_tokens: int = DEFAULT_BATCH_TOKENS,
                     chunk_size: int = 256, num_processes: int = 1, work_dir: str | Path,
                     source_maxlength: int | None = None, candidate_maxlength: int | None = None,
                     progress: bool = True, kind: str = "auto",
                     options: dict[str, Any] | None = None) -> ScoreResult:
    """Score every candidate of every prompt (PairRM or a sequence classifier), resumably, in one or several processes.

    `kind`: 'auto' (read from the checkpoint), 'pairrm' or 'sequence_classifier'; `options`: a sequence
    classifier's (chat_template, trust_remote_code, output_index, max_length). PairRM limits left None are the
    checkpoint's own (else 1224 / 412); the manifest entry's `limits_from` says which.
    """
    options = dict(options or {})
    limits = {"source_maxlength": source_maxlength, "candidate_maxlength": candidate_maxlength}
    for name in limits:  # a limit inside the scorer options too: one value, passed as the argument
        if name in options:
            given = options.pop(name)
            if limits[name] is not None and given != limits[name]:
                raise ParameterError(f"{name} is given twice ({limits[name]} and {given} in the scorer options): "
                                     f"give it once.")
            limits[name] = given
    job = ScoringJob(model=str(model), backend=backend, device=device, dtype=dtype, batch_tokens=int(batch_tokens),
                     chunk_size=int(chunk_size), work_dir=str(work_dir),
                     source_maxlength=_optional_int(limits["source_maxlength"]),
                     candidate_maxlength=_optional_int(limits["candidate_maxlength"]), progress=bool(progress),
                     kind=resolve_kind(model, kind), options=options)
    _check_job(job, num_processes)
    check_inputs(prompts, candidates, min_candidates=2 if job.kind == "pairrm" else 1)
    _device_and_dtype(job)  # an unknown or unavailable device or dtype fails here, before any worker starts
    items = [[p, list(c)] for p, c in zip(prompts, candidates)]
    if world_size() > 1:
        return _score_as_rank(items, job)
    if int(num_processes) > 1:
        return _launch_torchrun(items, job, int(num_processes))
    return _score_here(items, job)


# ------------------------------------------------------------------------------------------------
# one process
# ------------------------------------------------------------------------------------------------
def _load_scorer(job: ScoringJob, device: str | None = None):
    if job.kind == "sequence_classifier":
        return load_scorer(job.model, kind=job.kind, backend=job.backend, device=device or job.device,
                           dtype=job.dtype, **job.options)
    return load_scorer(job.model, kind=job.kind, backend=job.backend, device=device or job.device, dtype=job.dtype,
                       source_maxlength=job.source_maxlength, candidate_maxlength=job.candidate_maxlength,
                       **job.options)


def _desc(job: ScoringJob) -> str:
    return "PairRM scoring" if job.kind == "pairrm" else "reward-model scoring"


def _chunk_fn(scorer, job: ScoringJob, budgets_used: dict[str, int]):
    def score_chunk(chunk: list[list[Any]], advance) -> list[list[float]]:
        prompts = [p for p, _ in chunk]
        cands = [c for _, c in chunk]
        out = scorer.score(prompts, cands, batch_tokens=job.batch_tokens, progress=advance)
        if hasattr(scorer, "effective_batch_tokens"):  # an out-of-memory lowers it; each chunk is one budget's
            key = str(scorer.effective_batch_tokens(job.batch_tokens))
            budgets_used[key] = budgets_used.get(key, 0) + len(chunk)
        # Python floats: JSON writes them exactly (shortest repr round-trips), so chunks reload bit for bit
        return [[float(x) for x in row] for row in out]

    return score_chunk


def _score_share(items: list[list[Any]], job: ScoringJob, *, share: tuple[int, int] | None, device: str | None,
                 show_progress: bool, prepare: bool, desc: str) -> tuple[Any, dict[str, Any], float]:
    start = time.monotonic()
    scorer = _load_scorer(job, device)
    load_seconds = time.monotonic() - start
    budgets_used: dict[str, int] = {}
    run = run_chunked_with_stats(items, _chunk_fn(scorer, job, budgets_used), work_dir=job.work_dir,
                                 fingerprint=job_fingerprint(job), chunk_size=job.chunk_size, desc=desc,
                                 progress=show_progress, fn_reports_progress=True, share=share, unit="prompt",
                                 prepare=prepare)
    info = dict(scorer.info)
    if set(budgets_used) - {str(job.batch_tokens)}:
        # prompts scored here per budget: after an out-of-memory, which chunks a re-run at the lower budget matches
        info["batch_tokens_used"] = budgets_used
    return run, info, load_seconds


def _info(scorer_info: dict[str, Any], job: ScoringJob, *, processes: int, prompts: int, computed: int,
          scoring_seconds: float, seconds: float, load_seconds: float, chunks_total: int, chunks_resumed: int,
          digest: str) -> dict[str, Any]:
    return {
        **scorer_info,
        "prompts": prompts,
        "prompts_computed": computed,
        "prompts_per_second": round(computed / scoring_seconds, 4) if computed and scoring_seconds > 0 else None,
        "seconds": round(seconds, 3),
        "scoring_seconds": round(scoring_seconds, 3),
        "load_seconds": round(load_seconds, 3),
        "chunks": chunks_total,
        "chunks_resumed": chunks_resumed,
        "chunk_size": job.chunk_size,
        "processes": processes,
        "batch_tokens": job.batch_tokens,
        "work_dir": str(job.work_dir),
        "fingerprint": digest,
    }


def _score_here(items: list[list[Any]], job: ScoringJob) -> ScoreResult:
    start = time.monotonic()
    run, scorer_info, load_seconds = _score_share(items, job, share=None, device=None, show_progress=job.progress,
                                                  prepare=True, desc=_desc(job))
    computed = len(items) - run.items_resumed
    info = _info(scorer_info, job, processes=1, prompts=len(items), computed=computed, scoring_seconds=run.seconds,
                 seconds=time.monotonic() - start, load_seconds=load_seconds, chunks_total=run.chunks_total,
                 chunks_resumed=run.chunks_resumed, digest=run.digest)
    return ScoreResult(scores=run.results, info=info)


# ------------------------------------------------------------------------------------------------
# one rank of a torchrun job
# ------------------------------------------------------------------------------------------------
def _score_as_rank(items: list[list[Any]], job: ScoringJob) -> ScoreResult:
    start = time.monotonic()

    def compute(device: str, share: tuple[int, int]) -> dict[str, Any]:
        rank, world = share
        run, scorer_info, load_seconds = _score_share(
            items, job, share=share, device=device, show_progress=job.progress and rank == 0,
            prepare=False, desc=f"{_desc(job)} (rank 0 of {world}: its share)")
        return {"results": run.results, "resumed": run.chunks_resumed, "items_resumed": run.items_resumed,
                "seconds": run.seconds, "load_seconds": load_seconds, "info": scorer_info,
                "chunks_total": run.chunks_total, "digest": run.digest}

    gathered = run_as_rank(items, work_dir=job.work_dir, fingerprint=job_fingerprint(job), chunk_size=job.chunk_size,
                           device=_device_and_dtype(job)[0], compute=compute)
    scores = [row for g in gathered for row in g["results"]]
    computed = len(items) - sum(g["items_resumed"] for g in gathered)
    info = _info(gathered[0]["info"], job, processes=len(gathered), prompts=len(items), computed=computed,
                 scoring_seconds=max(g["seconds"] for g in gathered), seconds=time.monotonic() - start,
                 load_seconds=max(g["load_seconds"] for g in gathered), chunks_total=gathered[0]["chunks_total"],
                 chunks_resumed=sum(g["resumed"] for g in gathered), digest=gathered[0]["digest"])
    info["devices"] = sorted({str(g["info"].get("device", "?")) for g in gathered})
    return ScoreResult(scores=scores, info=info)


def _worker_main(spec: dict[str, Any]) -> dict[str, Any]:
    """Entry point of one torchrun worker launched by `score_candidates(num_processes=N)` (via repro.jobs)."""
    result = _score_as_rank(spec["items"], ScoringJob(**spec["job"]))
    # the scores the launching process reads back from the chunks; this is the rest
    return {"info": result.info, "prompts": len(result.scores)}


# ------------------------------------------------------------------------------------------------
# launching torchrun on this node
# ------------------------------------------------------------------------------------------------
WORKER_ENTRY = "repro.construct.scoring:_worker_main"


def torchrun_command(job_path: Path, num_processes: int) -> list[str]:
    """The torchrun command line that runs `num_processes` scoring workers on this node."""
    return work_torchrun_command(job_path, num_processes, WORKER_ENTRY)


def _launch_torchrun(items: list[list[Any]], job: ScoringJob, num_processes: int) -> ScoreResult:
    start = time.monotonic()
    done, scores = launch_and_collect({"job": asdict(job), "items": items}, items, num_processes, WORKER_ENTRY,
                                      work_dir=job.work_dir, fingerprint=job_fingerprint(job),
                                      chunk_size=job.chunk_size, device_type=_device_and_dtype(job)[0],
                                      progress=job.progress, what="scoring", error=ScoringError)
    info = dict(done["info"])
    info["seconds"] = round(time.monotonic() - start, 3)
    return ScoreResult(scores=scores, info=info)


__all__ = ["ScoreResult", "ScoringJob", "ScoringError", "score_candidates", "torchrun_command", "job_fingerprint"]
