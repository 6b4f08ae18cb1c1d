"""Ctrl-C during `repro run`: one line, no traceback, no manifest entry left `running`, and the re-run continues."""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from killed_run import command_line
from repro.cli.interrupt import record_interruption
from repro.manifest import Manifest
from repro.paths import RunDir

ROOT = Path(__file__).resolve().parents[1]


def alive(process: psutil.Process) -> bool:
    """Whether `process` still runs (one ended that nobody has reaped yet does not)."""
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def kernels_of(pid: int) -> list[psutil.Process]:
    """The Jupyter kernels process `pid` started."""
    found = []
    for child in psutil.Process(pid).children(recursive=True):
        with contextlib.suppress(psutil.Error):  # (one that has just ended)
            if any("ipykernel" in part for part in command_line(child)):
                found.append(child)
    return found


def safe(kept: int) -> str:
    """What the interrupt's line says of `kept` finished chunks."""
    return f"{kept} finished chunk{'s' * (kept != 1)} (every stage's) {'is' if kept == 1 else 'are'} safe"


def test_the_interruption_is_recorded_for_every_unfinished_entry(tmp_path):
    run = RunDir(tmp_path / "run")
    manifest = Manifest(run)
    manifest.start_run({}, ["01_construct", "02_analyze"])
    manifest.notebook_status("01_construct", "running")
    with manifest.stage("load"):
        pass
    with pytest.raises(KeyboardInterrupt), manifest.stage("score"):  # as the kernel's interrupt stops a stage
        raise KeyboardInterrupt
    assert manifest.read()["stages"]["score"]["status"] == "interrupted"
    for index in range(3):
        (run.work / "scoring" / f"chunk-{index:06d}.json").parent.mkdir(parents=True, exist_ok=True)
        (run.work / "scoring" / f"chunk-{index:06d}.json").write_text("[]")
    (run.work / "scoring" / "stale-abc" / "chunk-000000.json").parent.mkdir()
    (run.work / "scoring" / "stale-abc" / "chunk-000000.json").write_text("[]")  # another fingerprint's: not safe
    (run.work / "generation").mkdir()
    (run.work / "generation" / "chunk-000000.json").write_text("[]")  # generation's: counted, and said so
    line = record_interruption(manifest, "01_construct")
    assert line == (f"repro run: interrupted in 01_construct, stage score: 4 finished chunks (every stage's) are safe "
                    f"in {run.work}; run the same command to continue.")
    data = manifest.read()
    assert data["status"] == "interrupted" and data["notebooks"]["01_construct"]["status"] == "interrupted"
    assert data["stages"]["score"]["status"] == "interrupted" and data["stages"]["load"]["status"] == "done"
    assert "running" not in json.dumps(data)


def test_ctrl_c_while_the_command_loads_its_libraries_is_one_line(monkeypatch, capsys):
    # Ctrl-C in the first second or two (torch and datasets importing for the command's options) printed a traceback
    import importlib

    from repro.cli import main

    def interrupted(name, *args):
        raise KeyboardInterrupt

    monkeypatch.setattr(importlib, "import_module", interrupted)
    assert main(["score", "--help"]) == 130
    assert capsys.readouterr().err == "repro score: interrupted; run the same command again to continue.\n"


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_stop_signal_while_the_command_starts_is_one_line_as_ctrl_c(monkeypatch, capsys, signum):
    # SIGTERM in the first second (reading the params, the checks) killed the command with 143 and no word
    import importlib

    from repro.cli import main

    def terminated(name, *args):
        os.kill(os.getpid(), signum)
        time.sleep(5)  # (the handler raises first)

    before = signal.getsignal(signum)
    monkeypatch.setattr(importlib, "import_module", terminated)
    assert main(["score", "--help"]) == 130
    assert capsys.readouterr().err == "repro score: interrupted; run the same command again to continue.\n"
    assert signal.getsignal(signum) == before  # given back


def test_a_command_started_with_nohup_ignores_sighup_still(monkeypatch):
    # `nohup repro run ...`: SIGHUP ignored when the command starts stays ignored (the run goes on as the terminal
    # closes); only a SIGHUP that would have killed the command ends it as Ctrl-C does
    from repro.cli.interrupt import noting_stops, stop_signal_as_ctrl_c

    monkeypatch.setattr(signal, "getsignal", lambda signum: signal.SIG_IGN if signum == signal.SIGHUP else None)
    set_here = []
    monkeypatch.setattr(signal, "signal", lambda signum, handler: set_here.append(signum))
    with stop_signal_as_ctrl_c(), noting_stops():
        pass
    assert signal.SIGHUP not in set_here and signal.SIGTERM in set_here and signal.SIGINT in set_here


@pytest.mark.parametrize("when", ["between", "after"])
def test_ctrl_c_outside_a_notebook_is_recorded_as_an_interruption(tmp_path, monkeypatch, capsys, when):
    # between two notebooks the manifest stayed `running`: "killed?" said --check
    from repro.cli import main
    from repro.cli import run as runner

    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(runner, "ensure_kernel", lambda name=runner.KERNEL_NAME: name)
    monkeypatch.setattr("papermill.execute_notebook", lambda src, out, **kw: Path(out).write_text("{}"))
    if when == "between":  # as 01_construct has just finished: 02_analyze is not left `running`
        monkeypatch.setattr(runner.Manifest, "add_outputs", interrupt)
    else:  # as the last one has finished, before the run is recorded complete
        monkeypatch.setattr(runner.Manifest, "finish_run", interrupt)
    assert main(["run", "demo", "--out", str(tmp_path / "run")]) == 130
    data = Manifest(RunDir(tmp_path / "run")).read()
    assert data["status"] == "interrupted" and "running" not in json.dumps(data)
    started = {"between": "before 02_analyze started", "after": "after its last notebook"}[when]
    assert f"repro run: interrupted {started}: 0 finished chunks (every stage's) are safe" in capsys.readouterr().err


def test_a_kernel_refused_or_ctrl_c_as_it_is_checked_leaves_nothing(tmp_path, monkeypatch, capsys):
    # the project's kernel name held by another environment's kernel: refused after the run was recorded (which
    # stayed `running`: "stopped without finishing (killed?)", said --check; then `failed`); now before anything
    from repro.cli import main
    from repro.cli import run as runner
    from repro.errors import ReproError

    def refused(name=runner.KERNEL_NAME):
        raise ReproError(f"The Jupyter kernel {name!r} runs another environment's Python")

    def interrupt(name=runner.KERNEL_NAME):
        raise KeyboardInterrupt

    for stop, code, said in ((refused, 2, "The Jupyter kernel 'repro' runs another environment's Python"),
                             (interrupt, 130, "repro run: interrupted; run the same command again to continue.")):
        monkeypatch.setattr(runner, "ensure_kernel", stop)
        assert main(["run", "demo", "--out", str(tmp_path / "run")]) == code
        assert said in capsys.readouterr().err and not (tmp_path / "run").exists()


def test_a_kernel_started_after_the_stop_is_stopped_too(monkeypatch):
    # a stop before papermill had started the kernel signalled no one, waited GRACE_S twice while the kernel it then
    # started ran the notebook, and left that kernel running on after the run had said it was interrupted
    from repro.cli import interrupt

    monkeypatch.setattr(interrupt, "GRACE_S", 3.0)
    started: list[subprocess.Popen] = []

    def papermill() -> None:  # its kernel (in a session of its own, as jupyter_client starts one) comes after the stop
        time.sleep(0.5)
        started.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)  # ipykernel"],
                                        start_new_session=True))
        started[0].wait()

    timer = threading.Timer(0.1, signal.raise_signal, args=(signal.SIGINT,))
    timer.start()
    try:
        with pytest.raises(interrupt.Interrupted):
            interrupt.run_interruptible(papermill)
    finally:
        timer.cancel()
        for kernel in started:
            stopped = kernel.poll() is not None
            kernel.kill()
    assert started and stopped, "the kernel started after the stop still runs"


def test_a_run_directory_that_cannot_be_written_fails_in_one_paragraph(tmp_path, monkeypatch, capsys):
    # made read-only partway: the failure's own record raised again, a 60-line traceback
    from repro.cli import main
    from repro.cli import run as runner

    def unwritable(*args, **kwargs):
        raise PermissionError(13, "Permission denied", str(tmp_path / "run" / ".manifest.json.tmp"))

    def fails(src, out, **kw):
        monkeypatch.setattr(runner.Manifest, "notebook_status", unwritable)
        raise PermissionError(13, "Permission denied", out)

    monkeypatch.setattr(runner, "ensure_kernel", lambda name=runner.KERNEL_NAME: name)
    monkeypatch.setattr("papermill.execute_notebook", fails)
    assert main(["run", "demo", "--out", str(tmp_path / "run")]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.startswith("repro run: FAILED\n")
    assert (f"The run directory could not record the failure (PermissionError: [Errno 13] Permission denied: "
            f"'{tmp_path / 'run' / '.manifest.json.tmp'}'): make {tmp_path / 'run'} writable, then run the same "
            f"command to continue.") in err


def test_ctrl_c_during_scoring_prints_one_line_and_the_same_command_continues(tmp_path, repro_run):
    out = tmp_path / "demo"
    arguments = ["demo", "--out", str(out), "--set", "notebooks=[01_construct]"]
    command = [sys.executable, "-m", "repro.cli", "run", *arguments]
    # as a terminal runs it: its own process group, SIGINT not ignored, Ctrl-C sent to the whole group
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 300
    while not list((out / "work" / "scoring").glob("chunk-*.json")) and proc.poll() is None:
        assert time.monotonic() < deadline, "no scoring chunk was written"
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stdout + stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    assert lines[0].startswith("repro run: interrupted in 01_construct, stage score: ")
    assert lines[0].endswith("run the same command to continue.")
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "interrupted" and "running" not in json.dumps(manifest)
    kept = len(list((out / "work" / "scoring").glob("chunk-*.json")))
    assert kept >= 1 and f": {safe(kept)}" in lines[0]
    again = repro_run(*arguments)
    assert again.returncode == 0, again.stderr[-3000:]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["stages"]["score"]["status"] == "done"
    assert manifest["scorer"]["chunks_resumed"] >= kept  # the finished chunks were not scored again


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_stop_signal_ends_the_run_as_ctrl_c_does(tmp_path, repro_run, signum):
    """SIGTERM to `repro run` alone (a scheduler's time limit, `kill PID`), or SIGHUP (the terminal closed, an SSH
    connection dropped): before, it died at once and its manifest said `running` for good, its lock naming a dead
    process; now its kernels are stopped and the interruption is recorded, as for Ctrl-C."""
    out = tmp_path / "demo"
    command = [sys.executable, "-m", "repro.cli", "run", "demo", "--out", str(out), "--set", "notebooks=[01_construct]"]
    # SIGHUP comes as the terminal closes: the run's last line cannot be written (it exited 1, not 130)
    hang_up = signum == signal.SIGHUP
    terminal, tty = os.openpty() if hang_up else (None, subprocess.PIPE)
    proc = subprocess.Popen(command, cwd=ROOT, stdout=tty, stderr=tty, text=True, start_new_session=True)
    deadline = time.monotonic() + 300
    while not list((out / "work" / "scoring").glob("chunk-*.json")) and proc.poll() is None:
        assert time.monotonic() < deadline, "no scoring chunk was written"
        while hang_up and select.select([terminal], [], [], 0.2)[0]:  # (read, as a terminal does: never full)
            os.read(terminal, 65536)
        time.sleep(0.2)
    kernels = [child for child in psutil.Process(proc.pid).children(recursive=True)
               if any("ipykernel" in part for part in command_line(child))]
    if hang_up:
        os.close(tty)
        os.close(terminal)
    proc.send_signal(signum)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, f"{stdout}{stderr}"
    assert kernels and not any(alive(kernel) for kernel in kernels)  # the kernel stopped too
    assert hang_up or "repro run: interrupted in 01_construct, stage score: " in stderr and "Traceback" not in stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "interrupted" and "running" not in json.dumps(manifest)
    # the record names the signal (it had said "interrupted (Ctrl-C)", which nobody had pressed)
    how = signal.Signals(signum).name
    assert manifest["error"] == f"interrupted ({how}) in 01_construct"
    assert manifest["stages"]["score"]["error"] == f"interrupted ({how})"
    assert not (out / ".repro-run.lock").read_text()  # the lock given back


def kernel_of(tmp_path: Path, code: str) -> dict[str, str]:
    """A kernel 'k' of this environment that runs `code` (JUPYTER_PATH in tmp_path): the environment that finds it."""
    folder = tmp_path / "jupyter" / "kernels" / "k"
    folder.mkdir(parents=True)
    (folder / "kernel.json").write_text(json.dumps({"argv": [sys.executable, "-c", code, "-f", "{connection_file}"],
                                                    "display_name": "k", "language": "python"}))
    return {**os.environ, "JUPYTER_PATH": str(tmp_path / "jupyter")}


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["Ctrl-C", "SIGTERM"])
def test_a_stop_while_the_kernel_starts_is_one_line(tmp_path, repro_run, signum):
    # Ctrl-C or SIGTERM as a notebook's kernel started (still importing): its KeyboardInterrupt traceback, some 60
    # lines, and "Kernel died before replying to kernel_info" came before the run's one line
    env = kernel_of(tmp_path, "import time; time.sleep(120); from ipykernel import kernelapp; "
                              "kernelapp.launch_new_instance()")  # (a kernel that takes its time to start)
    out = tmp_path / "demo"
    command = [sys.executable, "-m", "repro.cli", "run", "demo", "--out", str(out), "--set", "notebooks=[01_construct]",
               "--kernel", "k"]
    proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 300
    while not kernels_of(proc.pid):
        assert proc.poll() is None and time.monotonic() < deadline, "no kernel was started"
        time.sleep(0.1)
    os.killpg(proc.pid, signum)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stdout + stderr
    assert [line for line in stderr.splitlines() if line.strip()] == [
        f"repro run: interrupted in 01_construct: {safe(0)} in {out / 'work'}; run the same command to continue."]


def test_a_kernel_that_dies_as_it_starts_still_says_why(tmp_path, repro_run):
    env = kernel_of(tmp_path, "import sys; sys.exit('this kernel cannot start: ipykernel is broken here')")
    proc = repro_run("demo", "--out", tmp_path / "demo", "--set", "notebooks=[01_construct]", "--kernel", "k",
                     env=env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    said = proc.stderr.index("this kernel cannot start: ipykernel is broken here\n")
    assert said < proc.stderr.index("repro run: FAILED\nNotebook 01_construct failed at start-up: "), proc.stderr


def test_a_kernel_killed_during_scoring_is_said_so_and_the_same_command_continues(tmp_path, repro_run):
    """What the out-of-memory killer does (kill -9 of the kernel): the run said "failed at start-up" and left its
    scoring stage `running`; now it names the cell, the finished chunks kept and how to continue."""
    out = tmp_path / "demo"
    arguments = ["demo", "--out", str(out), "--set", "notebooks=[01_construct]", "--set", "chunk_size=4"]
    proc = subprocess.Popen([sys.executable, "-m", "repro.cli", "run", *arguments], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 300
    while not list((out / "work" / "scoring").glob("chunk-*.json")) and proc.poll() is None:
        assert time.monotonic() < deadline, "no scoring chunk was written"
        time.sleep(0.2)
    for child in psutil.Process(proc.pid).children(recursive=True):
        if any("ipykernel" in part for part in command_line(child)):
            child.kill()
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 1, stdout + stderr
    kept = len(list((out / "work" / "scoring").glob("chunk-*.json")))
    assert re.search(r"Notebook 01_construct's kernel died during cell \d+ \(", stderr), stderr
    assert f"{safe(kept)} in {out / 'work'}; run the same command to continue" in stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "failed" and "running" not in json.dumps(manifest)
    assert manifest["stages"]["score"]["status"] == "failed"
    again = repro_run(*arguments)
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads((out / "manifest.json").read_text())["scorer"]["chunks_resumed"] >= kept


def test_a_run_logged_to_a_file_writes_each_line_as_it_comes(tmp_path, repro_run):
    """`repro run demo > run.log 2>&1` (Slurm, nohup, `| tee`): run.log stayed empty until the run ended (stdout
    block-buffered where it is no terminal; PYTHONUNBUFFERED, which this machine sets, hid it), and stderr's lines came
    before the header; a SIGKILL lost the lines for good."""
    env = kernel_of(tmp_path, "import time; time.sleep(600); import ipykernel")  # (a kernel that never starts)
    env.pop("PYTHONUNBUFFERED", None)
    out, log = tmp_path / "demo", tmp_path / "run.log"
    command = [sys.executable, "-m", "repro.cli", "run", "demo", "--out", str(out), "--set", "notebooks=[01_construct]",
               "--kernel", "k"]
    with open(log, "w") as f:
        proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 300
    try:
        while not kernels_of(proc.pid):  # (the header is printed before the first notebook's kernel starts)
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        logged = log.read_text()  # while the run goes on
    finally:
        proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=120) == 130
    assert logged.startswith(f"repro run: {ROOT / 'params' / 'demo.yaml'} -> {out}\n  parameters: "), logged
    lines = log.read_text().splitlines()
    assert lines[0] == logged.splitlines()[0] and lines[1].startswith("  parameters: ")  # the header, then the stop
    assert lines[-1].startswith("repro run: interrupted in 01_construct: "), lines
