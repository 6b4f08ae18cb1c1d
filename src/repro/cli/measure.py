"""What `repro selfcheck` and `repro bench` measure with: contenders timed side by side, peak memory, FLOPs."""

from __future__ import annotations

import contextlib
import ctypes
import os
import platform
import re
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Callable

import torch

from ..manifest import package_versions
from ..scorers.common import torch_dtype

PART2_MINI_1_PROMPTS = 5183
POSITION_BUCKETS = 256  # DeBERTa-v3 (PairRM): relative positions in 2 x 256 buckets


def _status_bytes(key: str) -> int:
    with open("/proc/self/status") as f:
        return 1024 * int(re.search(rf"^{key}:\s+(\d+) kB", f.read(), re.MULTILINE).group(1))


def _start_peak(device_type: str) -> int | None:
    """Start measuring a new memory peak; returns the memory in use now (None where the peak cannot be read)."""
    if device_type == "cuda":
        torch.cuda.reset_peak_memory_stats()
        return torch.cuda.memory_allocated()
    with contextlib.suppress(OSError, AttributeError):  # not glibc: some freed memory stays, peaks read a little low
        ctypes.CDLL("libc.so.6").malloc_trim(0)  # freed heap pages back to the OS: the RSS now is what is in use
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # the high-water mark VmHWM starts again from the RSS now
        return _status_bytes("VmRSS")
    except (OSError, AttributeError):  # not Linux: no peak
        return None


def _peak(device_type: str) -> int:
    """The memory peak since `_start_peak`: CUDA allocator statistics, or the RSS high-water mark."""
    return torch.cuda.max_memory_allocated() if device_type == "cuda" else _status_bytes("VmHWM")


@dataclass
class Contender:
    """One way of scoring: a name, the call, and what it measured."""

    name: str
    run: Callable[[list[str], list[list[str]]], list[Any]]
    seconds: float = 0.0
    peak_extra_bytes: int = 0
    scores: list[list[float]] = field(default_factory=list)


def _sync(device_type: str) -> None:
    if device_type == "cuda":
        torch.cuda.synchronize()


def alternate(contenders: list[Contender], prompts: list[str], candidates: list[list[str]], slice_size: int,
              device_type: str, log: Callable[[str], None]) -> None:
    """After a warm-up each (GPU: first slice, growing the allocator), all score each slice, rotating who is first."""
    warm = slice_size if device_type == "cuda" else 2
    for contender in contenders:
        contender.run(prompts[:warm], candidates[:warm])
    starts = range(0, len(prompts), slice_size)
    for k, lo in enumerate(starts):
        p, c = prompts[lo:lo + slice_size], candidates[lo:lo + slice_size]
        order = contenders[k % len(contenders):] + contenders[:k % len(contenders)]
        for contender in order:
            _sync(device_type)
            base = _start_peak(device_type)
            start = time.perf_counter()
            out = contender.run(p, c)
            _sync(device_type)
            contender.seconds += time.perf_counter() - start
            if base is not None:  # the peak above the memory in use before the call
                contender.peak_extra_bytes = max(contender.peak_extra_bytes, _peak(device_type) - base)
            contender.scores.extend([float(x) for x in s] for s in out)
        log(f"  slice {k + 1}/{len(starts)}, time so far: "
            + ", ".join(f"{x.name} {x.seconds:.1f}s" for x in contenders))


def pass_flops(length: int, *, hidden: int, layers: int, intermediate: int, span: int = POSITION_BUCKETS) -> float:
    """Useful FLOPs of one DeBERTa-v2 pass over `length` real tokens (no padding) with disentangled attention."""
    per_layer = (2 * length * (4 * hidden * hidden + 2 * hidden * intermediate)  # projections + feed-forward
                 + 4 * length * length * hidden  # QK^T and attention x V
                 + 4 * length * 2 * span * hidden  # content->position and position->content scores
                 + 4 * 2 * span * hidden * hidden)  # the shared query/key projections of the relative embeddings
    return float(layers * per_layer)


def gpu_use(useful_flops: float, seconds: float, device: str, dtype: str, n: int = 8192,
            repeats: int = 20) -> dict[str, float]:
    """The engine's useful TFLOP/s against the roof: an n x n x n matrix product in `dtype`, timed now on `device`."""
    a, b = (torch.randn(n, n, device=device, dtype=torch_dtype(dtype)) for _ in range(2))
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(repeats):
        a @ b
    torch.cuda.synchronize()
    peak = 2 * n ** 3 * repeats / (time.perf_counter() - start) / 1e12
    achieved = useful_flops / seconds / 1e12
    return {"matmul_peak_tflops": round(peak, 1), "engine_useful_tflops": round(achieved, 2),
            "engine_fraction_of_peak": round(achieved / peak, 4)}


def machine_info(device: str) -> dict[str, Any]:
    """CPU model, cores, load, versions and the GPU `device` names: what a figure in RESULTS.md must be read with."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        lines = []
    cpu = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")),
               platform.processor() or platform.machine())
    versions = package_versions()  # None where not installed
    info: dict[str, Any] = {"cpu": cpu, "cpu_count": os.cpu_count(), "torch_threads": torch.get_num_threads(),
                            "python": platform.python_version(), "torch": torch.__version__,
                            "platform": platform.platform(), "transformers": versions["transformers"],
                            "llm_blender": versions["llm-blender"]}
    if hasattr(os, "getloadavg"):
        info["load_average_at_start"] = [round(x, 2) for x in os.getloadavg()]
    if str(device).startswith("cuda"):  # "cuda" alone: the current device, as torch takes it
        index = torch.device(device).index
        index = torch.cuda.current_device() if index is None else index
        info["gpu"] = torch.cuda.get_device_name(index)
        info["gpu_memory_gb"] = round(torch.cuda.get_device_properties(index).total_memory / 2 ** 30, 1)
    return info


def pairrm_contenders(engine, budgets, blender=None, batch_sizes=(1, 8)) -> list[Contender]:
    """The engine at each token budget, then llm-blender's `Blender.rank` at each batch size (one loaded model)."""
    def rank(batch_size: int, p, c):
        blender.batch_size = batch_size  # BlenderScorer.score calls Blender.rank(..., batch_size=...)
        return blender.score(p, c)

    ranks = [Contender(f"llm-blender (batch_size={bs})", partial(rank, bs)) for bs in batch_sizes]
    return [Contender(f"repro (batch_tokens={b})", partial(engine.score, batch_tokens=b)) for b in budgets] + (
        ranks if blender is not None else [])


def engine_passes(engine, prompts: list[str], candidates: list[list[str]]) -> tuple[list[int], float]:
    """Token lengths of the engine's distinct forward passes over these rows, and their useful FLOPs."""
    backbone = engine.model.pretrained_model.config
    shape = dict(hidden=backbone.hidden_size, layers=backbone.num_hidden_layers,
                 intermediate=backbone.intermediate_size)
    lengths = [p.length for p in engine.plan(prompts, candidates)[0]]
    return lengths, sum(pass_flops(n, **shape) for n in lengths)
