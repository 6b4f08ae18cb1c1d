"""Ctrl-C during `repro run`: the kernel and its workers stopped (through its process group; papermill runs in a
worker thread so Ctrl-C arrives as a plain KeyboardInterrupt), the interruption recorded, and how to continue; the
kernels' stderr reaches the terminal through this process, so that a kernel stopped as it starts stays quiet."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
import time
from typing import Any, Callable, Iterator

import psutil

from ..errors import printable
from ..jobs import safe_chunks
from ..manifest import Manifest

GRACE_S = 20.0  # how long an interrupted kernel gets to stop its cell before it is killed
INTERRUPTED = "interrupted"
EXIT_INTERRUPTED = 130  # the exit status of a run stopped by Ctrl-C (128 + SIGINT, as a shell gives)
# as the records name them; SIGHUP: the terminal closed (an SSH connection dropped)
STOP_SIGNALS = {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM", signal.SIGHUP: "SIGHUP"}
QUIET = threading.Event()  # set while run_interruptible stops the kernels: what they write on stderr is not shown


class Interrupted(Exception):
    """Ctrl-C or a stop signal (`how`) stopped the notebook being executed (its kernel is gone)."""

    def __init__(self, how: str) -> None:
        super().__init__(how)
        self.how = how


class Terminated(KeyboardInterrupt):
    """SIGTERM (a scheduler's time limit, `kill`) or SIGHUP (terminal closed), raised as Ctrl-C is; `how`: its name."""

    def __init__(self, how: str = "SIGTERM") -> None:
        super().__init__(how)
        self.how = how


def cause(stop: KeyboardInterrupt) -> str:
    """What stopped the run, as its record says it."""
    return stop.how if isinstance(stop, Terminated) else "Ctrl-C"


def say(line: str) -> None:
    """Print a stopped run's last `line` to stderr. Where the terminal is gone (the SIGHUP that stopped it), stdout and
    stderr then write nowhere, so that the exit status stays the run's (Python exits 1 on the write, 120 on a flush)."""
    try:
        print(printable(line), file=sys.stderr, flush=True)
    except OSError:
        write_nowhere(sys.stdout, sys.stderr)


def write_nowhere(*streams: Any) -> None:
    """What `streams` are given from now on goes to /dev/null (their files, which the kernels started later share)."""
    nowhere = os.open(os.devnull, os.O_WRONLY)
    for stream in streams:
        with contextlib.suppress(OSError, ValueError):
            os.dup2(nowhere, stream.fileno())
    os.close(nowhere)


class DroppedWhenClosed:
    """A command's stdout that drops lines once its reader closed (`repro run ... | head -1`, a log collector gone), not
    a BrokenPipeError stopping the command half-way: stderr, the records and the exit status still say how it went."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)

    def write(self, text: str) -> int:
        try:
            return self.stream.write(text)
        except BrokenPipeError:
            write_nowhere(self.stream)
            return len(text)

    def flush(self) -> None:
        try:
            self.stream.flush()
        except BrokenPipeError:
            write_nowhere(self.stream)


def _is_kernel(child: psutil.Process) -> bool:
    try:
        return any("ipykernel" in part for part in child.cmdline())
    except psutil.Error:
        return False


def _signal_groups(kernels: list[psutil.Process], signum: int) -> None:
    for kernel in kernels:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(os.getpgid(kernel.pid), signum)  # the kernel's session: it and the workers it started


def _stop_kernels(done: threading.Event, signum: int) -> bool:
    """`signum` to this process's kernels, and one starting meanwhile, until `done` (True) or GRACE_S passed (False)."""
    sent: set[int] = set()
    deadline = time.monotonic() + GRACE_S
    while time.monotonic() < deadline:
        kernels = [child for child in psutil.Process().children() if child.pid not in sent and _is_kernel(child)]
        _signal_groups(kernels, signum)
        sent.update(kernel.pid for kernel in kernels)
        if done.wait(0.2):
            return True
    return False


def _terminated(signum: int, frame: Any) -> None:
    raise Terminated(STOP_SIGNALS[signum])


def _handle(signals: list[int], handler: Callable[[int, Any], Any]) -> dict[int, Any]:
    """`handler` for each of `signals` not ignored (as `nohup` or a background job left them); the old ones."""
    return {signum: signal.signal(signum, handler) for signum in signals if signal.getsignal(signum) != signal.SIG_IGN}


@contextlib.contextmanager
def noting_stops() -> Iterator[list[str]]:
    """Inside, Ctrl-C, SIGTERM and SIGHUP are noted by name in the yielded list, not raised (main thread only)."""
    stops: list[str] = []
    if threading.current_thread() is not threading.main_thread():
        yield stops
        return
    previous = _handle(list(STOP_SIGNALS), lambda signum, frame: stops.append(STOP_SIGNALS[signum]))
    try:
        yield stops
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


@contextlib.contextmanager
def stop_signal_as_ctrl_c() -> Iterator[None]:
    """Inside, SIGTERM and SIGHUP raise `Terminated` as Ctrl-C raises KeyboardInterrupt (in the main thread only)."""
    main = threading.current_thread() is threading.main_thread()
    previous = _handle([signal.SIGTERM, signal.SIGHUP], _terminated) if main else {}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _forward(pipe: int) -> None:
    """A kernel's stderr (the read end of its pipe) to this process's, line by line as it comes, but while QUIET."""
    with open(pipe, encoding="utf-8", errors="replace") as lines:
        for line in lines:
            if not QUIET.is_set():
                with contextlib.suppress(OSError, ValueError):  # (the terminal gone: SIGHUP)
                    sys.stderr.write(line)
                    sys.stderr.flush()


def kernel_manager() -> type:
    """jupyter_client's AsyncKernelManager, its kernels' stderr forwarded (_forward): a kernel that dies by itself
    says why, one that run_interruptible stops as it starts does not print a KeyboardInterrupt's traceback."""
    from jupyter_client.manager import AsyncKernelManager  # keeps jupyter_client off `repro --help`

    class Manager(AsyncKernelManager):
        forwarder: threading.Thread | None = None

        async def start_kernel(self, **kw: Any) -> None:
            read, write = os.pipe()
            self.forwarder = threading.Thread(target=_forward, args=(read,), name="kernel stderr", daemon=True)
            self.forwarder.start()
            try:
                await super().start_kernel(**{**kw, "stderr": write})
            finally:
                os.close(write)  # (the kernel holds its own)

        async def cleanup_resources(self, restart: bool = False) -> None:
            await super().cleanup_resources(restart=restart)
            if self.forwarder:  # the kernel's last words, before the run's (a process it forked may hold the pipe)
                self.forwarder.join(2.0)

    return Manager


def run_interruptible(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """`fn(*args, **kwargs)` in a thread; on Ctrl-C, SIGTERM or SIGHUP stop our kernels and raise `Interrupted`."""
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
    with noting_stops() as stops:  # (one more while the kernels stop is noted, not raised: it cuts nothing short)
        while not done.wait(0.2) and not stops:
            pass
        if stops:
            # a kernel still starting prints its KeyboardInterrupt's traceback, nbclient "Kernel died before replying
            # to kernel_info": neither is shown
            QUIET.set()
            logging.getLogger("papermill").disabled = True
            try:  # the cell raises KeyboardInterrupt; papermill then ends
                _stop_kernels(done, signal.SIGINT) or _stop_kernels(done, signal.SIGKILL)
            finally:
                QUIET.clear()
                logging.getLogger("papermill").disabled = False
            raise Interrupted(stops[0])
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


def what_is_kept(manifest: Manifest) -> str:
    """What a stopped run keeps, and how to continue it (a family's folder holds no work/: its members hold theirs)."""
    if "members" in manifest.read():
        return "the members' runs are kept in their folders; run the same command again to write the family view"
    return f"{safe_chunks(manifest.run.work)}; run the same command to continue"


def record_interruption(manifest: Manifest, notebook: str | None, started: bool = True, how: str = "Ctrl-C") -> str:
    """Mark the interrupted notebook (`started`: else it had not started: the one next, None after the last), its
    unfinished stages and the run `interrupted` by `how`; returns the line to print."""
    data = manifest.read()
    stages = [name for name, stage in (data.get("stages") or {}).items()
              if stage.get("status") in ("running", INTERRUPTED)]  # a stage records a KeyboardInterrupt as interrupted
    for name in stages:
        data["stages"][name].update(status=INTERRUPTED, error=f"interrupted ({how})")
    if notebook:  # one that had not started yet may be marked running: it is pending
        data.setdefault("notebooks", {}).setdefault(notebook, {}).update(status=INTERRUPTED if started else "pending")
    when = f"in {notebook}" if started else f"before {notebook} started" if notebook else "after its last notebook"
    data.update(status=INTERRUPTED, error=f"interrupted ({how}) {when}")
    manifest.write(data)
    where = f"{when}, stage {stages[-1]}" if stages else when
    return f"repro run: interrupted {where}: {what_is_kept(manifest)}."
