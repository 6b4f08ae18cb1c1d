"""Ctrl-C during `repro run`: the kernel and its workers stopped (through its process group; papermill runs in a
worker thread so Ctrl-C arrives as a plain KeyboardInterrupt), the interruption recorded, and how to continue."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from typing import Any, Callable

import psutil

from ..jobs import safe_chunks
from ..manifest import Manifest

GRACE_S = 20.0  # how long an interrupted kernel gets to stop its cell before it is killed
INTERRUPTED = "interrupted"
EXIT_INTERRUPTED = 130  # the exit status of a run stopped by Ctrl-C (128 + SIGINT, as a shell gives)


class Interrupted(Exception):
    """Ctrl-C stopped the notebook being executed (its kernel is gone)."""


def _is_kernel(child: psutil.Process) -> bool:
    try:
        return any("ipykernel" in part for part in child.cmdline())
    except psutil.Error:
        return False


def _signal_groups(kernels: list[psutil.Process], signum: int) -> None:
    for kernel in kernels:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(os.getpgid(kernel.pid), signum)  # the kernel's session: it and the workers it started


def _as_ctrl_c(signum: int, frame: Any) -> None:
    """A stop signal (a scheduler's time limit, `kill`) ends the run as Ctrl-C does: kernels stopped, recorded."""
    raise KeyboardInterrupt


def run_interruptible(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """`fn(*args, **kwargs)` in a thread; on Ctrl-C (or SIGTERM) stop this process's kernels, raise `Interrupted`."""
    outcome: dict[str, Any] = {}
    done = threading.Event()  # not Thread.join: a KeyboardInterrupt inside join can leave is_alive() wrong

    def target() -> None:
        try:
            outcome["value"] = fn(*args, **kwargs)
        except BaseException as exc:  # handed to the main thread
            outcome["error"] = exc
        finally:
            done.set()

    threading.Thread(target=target, name="papermill", daemon=True).start()
    main = threading.current_thread() is threading.main_thread()  # (only the main thread may set a handler)
    stop = signal.signal(signal.SIGTERM, _as_ctrl_c) if main else None
    try:
        while not done.wait(0.2):
            pass
    except KeyboardInterrupt:
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second stop signal must not cut the kernels' stop short
        try:
            kernels = [child for child in psutil.Process().children() if _is_kernel(child)]  # Jupyter kernels
            _signal_groups(kernels, signal.SIGINT)  # the cell raises KeyboardInterrupt; papermill then ends
            if not done.wait(GRACE_S):
                _signal_groups(kernels, signal.SIGKILL)
                done.wait(GRACE_S)
        finally:
            signal.signal(signal.SIGINT, previous)
        raise Interrupted() from None
    finally:
        if main:
            signal.signal(signal.SIGTERM, stop)
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


def record_interruption(manifest: Manifest, notebook: str | None, started: bool = True) -> str:
    """Mark the interrupted notebook (`started`: else it had not started: the one next, None after the last), its
    unfinished stages and the run `interrupted`; returns the line to print."""
    data = manifest.read()
    stages = [name for name, stage in (data.get("stages") or {}).items()
              if stage.get("status") in ("running", INTERRUPTED)]  # a stage records a KeyboardInterrupt as interrupted
    for name in stages:
        data["stages"][name].update(status=INTERRUPTED, error="interrupted (Ctrl-C)")
    if notebook:  # one that had not started yet may be marked running: it is pending
        data.setdefault("notebooks", {}).setdefault(notebook, {}).update(status=INTERRUPTED if started else "pending")
    when = f"in {notebook}" if started else f"before {notebook} started" if notebook else "after its last notebook"
    data.update(status=INTERRUPTED, error=f"interrupted (Ctrl-C) {when}")
    manifest.write(data)
    where = f"{when}, stage {stages[-1]}" if stages else when
    return f"repro run: interrupted {where}: {safe_chunks(manifest.run.work)}; run the same command to continue."
