"""A scoring run killed with SIGKILL while it scores its third chunk (two chunks are on disk by then)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

SCRIPT = r'''
import importlib, json, sys, time
from pathlib import Path
import torch

spec = json.loads(Path(sys.argv[1]).read_text())
marker = Path(sys.argv[2])
torch.set_num_threads(spec["threads"])  # as the test process: CPU matrix products round differently otherwise
module, _, name = spec["scorer_class"].partition(":")
cls = getattr(importlib.import_module(module), name)
original = cls.score
calls = []

def score(self, *args, **kwargs):
    calls.append(1)
    if len(calls) == 3:  # two chunks are on disk: announce it, then wait for the test's kill -9
        marker.write_text("scoring chunk 3")
        time.sleep(600)
    return original(self, *args, **kwargs)

cls.score = score
from repro.construct.scoring import score_candidates
score_candidates(spec["prompts"], spec["candidates"], **spec["kwargs"])
'''


def kill_while_scoring_the_third_chunk(tmp_path: Path, scorer_class: str, prompts: list[str],
                                       candidates: list[list[str]], kwargs: dict) -> None:
    """Run `score_candidates(prompts, candidates, **kwargs)` in a subprocess; SIGKILL it in its third chunk."""
    import torch

    (tmp_path / "spec.json").write_text(json.dumps({"prompts": prompts, "candidates": candidates, "kwargs": kwargs,
                                                    "scorer_class": scorer_class,
                                                    "threads": torch.get_num_threads()}))
    (tmp_path / "killed_run.py").write_text(SCRIPT)
    marker = tmp_path / "marker"
    proc = subprocess.Popen([sys.executable, str(tmp_path / "killed_run.py"), str(tmp_path / "spec.json"),
                             str(marker)], env={**os.environ, "HF_HUB_OFFLINE": "1"})
    try:
        deadline = time.monotonic() + 240
        while not marker.exists():
            assert proc.poll() is None, "the run ended before it could be killed"
            assert time.monotonic() < deadline, "the run never reached its third chunk"
            time.sleep(0.1)
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(timeout=60) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()


def sleep_in_worker(spec: dict) -> None:
    """A torchrun worker entry that announces itself (a file named by its pid) and then waits to be stopped."""
    Path(spec["folder"], f"worker-{os.getpid()}").write_text("")
    time.sleep(600)


def command_line(process) -> list[str]:
    """A psutil process's command line; none for one gone or a zombie (a forked child another test killed and never
    joined is one, under the same xdist worker)."""
    try:
        return process.cmdline()
    except psutil.Error:
        return []
