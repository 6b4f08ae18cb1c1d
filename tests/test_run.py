"""`repro run` and plain papermill over the real notebooks, asserting on the artifacts they write."""

import builtins
import errno
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import datasets
import nbformat
import pytest
from jupyter_core import paths as jupyter_paths
from papermill.exceptions import PapermillExecutionError

from repro.cli import main as cli_main
from repro.cli import run as run_cli
from repro.cli.run import KERNEL_NAME, ensure_kernel
from repro.errors import ReproError
from repro.manifest import sha256_file
from repro.sources import demo_path, load_source

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "params" / "demo.yaml"
SHARD = "dataset/data/train_prefs-00000-of-00001.parquet"


def test_demo_run_writes_its_artifacts(demo_run):
    manifest = json.loads((demo_run / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["driver"] == "repro run"
    assert (demo_run / "notebooks" / "01_construct.ipynb").exists()
    ds = datasets.load_dataset(str(demo_run / "dataset"), split="train_prefs")
    counts = manifest["counts"]
    assert counts["source"] == 40 and counts["kept"] == len(ds) >= 32
    assert manifest["scorer"]["stand_in"] is True and manifest["scorer"]["dtype"] == "fp32"
    assert manifest["parameters"]["scorer_model"] == "builtin:tiny-pairrm"
    assert manifest["environment"]["git"]["commit"]
    lock = manifest["environment"]["lock"]  # which lock, and whether the installed packages are its own
    assert lock["sha256"] == sha256_file(ROOT / "requirements.lock") and lock["file"] == "requirements.lock"
    assert lock["locked"] == (not lock["differs"])
    for rel, out in manifest["outputs"].items():
        assert sha256_file(demo_run / rel) == out["sha256"], rel
    executed = json.loads((demo_run / "notebooks" / "01_construct.ipynb").read_text())
    assert any("injected-parameters" in c["metadata"].get("tags", []) for c in executed["cells"])
    assert all(c["metadata"].get("papermill", {}).get("exception") in (None, False) for c in executed["cells"])


def test_same_parameters_give_byte_identical_datasets(demo_run, repro_run, tmp_path):
    proc = repro_run(DEMO, "--out", tmp_path / "again", "--set", "notebooks=[01_construct]")  # 01 writes it
    assert proc.returncode == 0, proc.stderr
    assert sha256_file(tmp_path / "again" / SHARD) == sha256_file(demo_run / SHARD)


def test_a_source_and_a_run_folder_with_square_brackets_in_their_names_run_through(repro_run, tmp_path):
    # datasets reads the files it is given as glob patterns: 01_construct could not read prompts[v2].jsonl (a bare
    # StopIteration), nor 02_analyze the shards of run[1]'s dataset, nor 03_card's check load its card's folder
    source, out = tmp_path / "prompts[v2].jsonl", tmp_path / "run[1]"
    source.write_bytes(demo_path().read_bytes())
    proc = repro_run(DEMO, "--out", out, "--set", f"source={source}")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "complete" and list(manifest["notebooks"]) == ["01_construct", "02_analyze", "03_card"]
    assert manifest["counts"]["source"] == 40 and len(load_source(str(out))) == manifest["counts"]["kept"] >= 32


def test_what_the_notebooks_say_on_stderr_reaches_the_terminal(repro_run, tmp_path):
    # a batch run's only trace of chunks set aside (here: another chunk_size), a damaged row-cache entry, a source
    # read from the local hub cache or rows cut at max_length was a line inside the executed notebook
    out = tmp_path / "run"
    first = repro_run(DEMO, "--out", out, "--set", "notebooks=[01_construct]", "--set", "cache=false")
    assert first.returncode == 0, first.stderr
    assert "repro run: 01_construct: " not in first.stderr  # nothing to say
    again = repro_run(DEMO, "--out", out, "--set", "notebooks=[01_construct]", "--set", "cache=false",
                      "--set", "chunk_size=5")
    assert again.returncode == 0, again.stderr
    said = [line for line in again.stderr.splitlines() if line.startswith("repro run: 01_construct: ")]
    assert len(said) == 1 and "finished chunks in" in said[0] and "set aside in" in said[0], again.stderr


def test_the_notices_of_a_notebook_are_repros_own_lines_and_warnings_once(tmp_path):
    import warnings

    import nbformat

    from repro.cli.run import notices
    from repro.construct import scoring
    from repro.errors import ReproWarning

    ours = warnings.formatwarning("12 row(s) had conversation(s) longer than max_length=64 tokens", RuntimeWarning,
                                  scoring.__file__, 157, "out = current.score(...)")
    theirs = warnings.formatwarning("Some weights were not initialized", UserWarning, "/site-packages/x/y.py", 3)
    # repro's own warnings point at the line of the cell that called repro: told by their type
    cell = warnings.formatwarning("1 row had a conversation longer than max_length=64 tokens", ReproWarning,
                                  "/tmp/ipykernel_71/2301.py", 4, "result = construct(params)")
    stderr = nbformat.v4.new_output("stream", name="stderr", text="repro: source 'a/b': read from the local hub "
                                    "cache (OSError from the hub)\n" + ours + theirs + cell + ours)
    stdout = nbformat.v4.new_output("stream", name="stdout", text="repro: printed on stdout\n")
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(outputs=[stderr, stdout])])
    nbformat.write(notebook, tmp_path / "x.ipynb")
    assert notices(tmp_path / "x.ipynb") == [
        "source 'a/b': read from the local hub cache (OSError from the hub)",
        "RuntimeWarning: 12 row(s) had conversation(s) longer than max_length=64 tokens",
        "ReproWarning: 1 row had a conversation longer than max_length=64 tokens"]


def test_a_failed_run_says_so_and_keeps_its_notebook(repro_run, tmp_path):
    proc = repro_run(DEMO, "--out", tmp_path / "bad", "--set", "candidate_columns=[resp0, answer]")
    assert proc.returncode == 1
    assert "Notebook 01_construct failed at cell" in proc.stderr and "answer" in proc.stderr
    manifest = json.loads((tmp_path / "bad" / "manifest.json").read_text())
    assert manifest["status"] == "failed" and "answer" in manifest["error"]
    assert (tmp_path / "bad" / "notebooks" / "01_construct.ipynb").exists()
    assert not (tmp_path / "bad" / SHARD).exists()
    # the failed cell shows the ReproError's paragraph alone, without the stack
    executed = json.loads((tmp_path / "bad" / "notebooks" / "01_construct.ipynb").read_text())
    [error] = [o for c in executed["cells"] for o in c.get("outputs", []) if o["output_type"] == "error"]
    assert len(error["traceback"]) == 1 and "answer" in error["traceback"][0]


class HalfWritten:
    """A file written on a disk that fills up: half of the text gets there, then ENOSPC."""

    def __init__(self, handle):
        self.handle = handle

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.handle.close()

    def write(self, text):
        self.handle.write(text[:len(text) // 2])
        self.handle.flush()
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def fill_the_disk(monkeypatch, folder: Path, full=lambda: True) -> Path:
    """Files this process writes in `folder` once `full()` get half their text, then ENOSPC; the disk's mount point."""
    real = io.open

    def opened(file, mode="r", *args, **kwargs):
        handle = real(file, mode, *args, **kwargs)
        inside = "w" in mode and isinstance(file, (str, os.PathLike)) and Path(file).is_relative_to(folder)
        return HalfWritten(handle) if inside and full() else handle
    monkeypatch.setattr(io, "open", opened)  # (pathlib's)
    monkeypatch.setattr(builtins, "open", opened)
    return next(p for p in (folder, *folder.parents) if os.path.ismount(p))


def test_a_full_disk_leaves_the_earlier_runs_notebook_whole_and_says_to_free_space(tmp_path, monkeypatch, capsys):
    # papermill saved the executed notebook in place: a full disk cut it off (not JSON: JupyterLab would not open
    # it) where an earlier run's good copy was, and the run said "saved at", "failed at start-up", "make writable"
    run = tmp_path / "run"
    earlier = run / "notebooks" / "01_construct.ipynb"
    earlier.parent.mkdir(parents=True)
    earlier.write_text(text := nbformat.writes(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1")])))
    mount = fill_the_disk(monkeypatch, earlier.parent)
    assert run_cli.run_notebooks({"notebooks": ["01_construct"]}, run, fingerprint={"given": 1}) == 1
    assert earlier.read_text() == text and os.listdir(earlier.parent) == [earlier.name]  # (no temporary file left)
    err = capsys.readouterr().err
    assert "Notebook 01_construct failed at start-up: OSError: [Errno 28] No space left on device\n" in err, err
    assert f"The disk is full: free space on {mount} (" in err and "writable" not in err
    assert f"The executed notebook could not be saved: {earlier} is its last copy written whole." in err
    assert "is saved at" not in err


FILLS_THE_DISK = ["x = 1", "from pathlib import Path\nfrom repro.manifest import Manifest\n"
                  "Manifest(run_dir).update(stages={'score': {'status': 'running'}})  # (its record on a full disk)\n"
                  "Path(run_dir, 'full').touch()", "y = 2"]


def test_a_disk_full_during_a_cell_is_said_where_and_the_notebook_stays_whole(run_notebook, tmp_path, monkeypatch,
                                                                              capsys):
    # the disk filled during scoring: "failed at start-up", a cut-off notebook, "make the run directory writable"
    notebook = tmp_path / "fills.ipynb"
    parameters = nbformat.v4.new_code_cell("run_dir = ''", metadata={"tags": ["parameters"]})
    kernel = {"kernelspec": {"name": KERNEL_NAME, "language": "python", "display_name": "Python (repro)"}}
    nbformat.write(nbformat.v4.new_notebook(cells=[parameters, *map(nbformat.v4.new_code_cell, FILLS_THE_DISK)],
                                            metadata=kernel), notebook)
    monkeypatch.setattr(run_cli, "notebook_path", lambda name: notebook)
    run = tmp_path / "run"
    mount = fill_the_disk(monkeypatch, run, full=(run / "full").exists)
    assert run_cli.run_notebooks({"notebooks": ["01_construct"]}, run, fingerprint={"given": 1}) == 1
    err = capsys.readouterr().err
    # cell 3: the one that filled it (0: parameters, 1: papermill's)
    assert "Notebook 01_construct failed at cell 3 (execution count 4), stage score: OSError: [Errno 28] " in err, err
    assert f"The disk is full: free space on {mount} (" in err and "writable" not in err
    saved = run / "notebooks" / "01_construct.ipynb"
    assert f"The executed notebook could not be saved: {saved} is its last copy written whole." in err
    assert "is saved at" not in err
    assert "The run directory could not record the failure (OSError: [Errno 28] No space left on device) " in err
    cells = json.loads(saved.read_text())["cells"]  # whole: as saved when cell 3 started
    assert [c["metadata"]["papermill"]["status"] for c in cells] == ["completed"] * 3 + ["running", "pending"]


# an error with indented lines of its own (pydantic's) was cut to what followed its last indented line: here nothing
VALIDATION_ERROR = ("pydantic_core._pydantic_core.ValidationError: 1 validation error for int\n  Input should be a valid "
                    "integer, unable to parse string as an integer [type=int_parsing, input_value='a', input_type=str]"
                    "\n    For further information visit https://errors.pydantic.dev/")


@pytest.mark.parametrize("x, said", [
    ("{}", "jinja2.exceptions.UndefinedError: 'dict object' has no attribute 'missing'"),
    ("type('X', (), {'missing': property(lambda _: pydantic.TypeAdapter(int).validate_python('a'))})()",
     VALIDATION_ERROR)], ids=["undefined", "indented"])
def test_an_error_ipython_could_not_show_is_said_from_the_cells_output(run_notebook, tmp_path, monkeypatch, capsys,
                                                                       x, said):
    # IPython, showing a traceback through a template's frame, read the .jinja file as Python and failed: the cell has
    # no error output, papermill's message is empty, and the line said "failed at cell 2 (...): CellExecutionError: "
    (tmp_path / "t.jinja").write_text("{{ x.missing }}\n(an open parenthesis\n")
    notebook = tmp_path / "unshown.ipynb"
    parameters = nbformat.v4.new_code_cell("run_dir = ''", metadata={"tags": ["parameters"]})
    renders = (f"import jinja2, pydantic\njinja2.Environment(loader=jinja2.FileSystemLoader({str(tmp_path)!r}), "
               f"undefined=jinja2.StrictUndefined).get_template('t.jinja').render(x={x})")
    kernel = {"kernelspec": {"name": KERNEL_NAME, "language": "python", "display_name": "Python (repro)"}}
    nbformat.write(nbformat.v4.new_notebook(cells=[parameters, nbformat.v4.new_code_cell(renders)], metadata=kernel),
                   notebook)
    monkeypatch.setattr(run_cli, "notebook_path", lambda name: notebook)
    assert run_cli.run_notebooks({"notebooks": ["01_construct"]}, tmp_path / "run", fingerprint={"given": 1}) == 1
    err = capsys.readouterr().err
    # the error the cell raised, not IPython's own (tokenize.TokenError: EOF in multi-line statement)
    assert f"Notebook 01_construct failed at cell 2 (execution count 3): {said}" in err, err
    assert "(from the text of the cell's output: the kernel gave no message)\n" in err
    assert json.loads((tmp_path / "run" / "manifest.json").read_text())["error"].startswith(
        f"Notebook 01_construct failed at cell 2 (execution count 3): {said}")


def test_a_notebooks_error_reaches_the_terminal_with_its_control_characters_escaped(tmp_path, monkeypatch, capsys,
                                                                                      stubbed_notebooks):
    # a kernel's error quoting a record's text (a name in it) reached the terminal raw: "\x1b[2K" erased the line
    def fails(*args, **kwargs):
        raise PapermillExecutionError(cell_index=3, exec_count=2, source="", ename="DataError",
                                      evalue="column 'old\x1b[2KEVIL' is not in the rows", traceback=["DataError"])
    monkeypatch.setattr("papermill.execute_notebook", fails)
    assert run_cli.run_notebooks({"notebooks": ["01_construct"]}, tmp_path / "run", fingerprint={"given": 1}) == 1
    err = capsys.readouterr().err
    assert ("Notebook 01_construct failed at cell 3 (execution count 2): DataError: column 'old\\x1b[2KEVIL' is not "
            "in the rows\n") in err and "\x1b" not in err


def closed_stdout(monkeypatch) -> None:
    """sys.stdout a pipe whose reader has gone (`repro run ... | head -1`, a log collector that died)."""
    read, write = os.pipe()
    os.close(read)
    monkeypatch.setattr(sys, "stdout", open(write, "w", buffering=1))  # (line by line: as PYTHONUNBUFFERED, a tty)


def test_a_closed_stdout_drops_the_lines_and_the_run_goes_on(tmp_path, monkeypatch, stubbed_notebooks):
    """`repro run demo ... | head -1`: the next line raised BrokenPipeError, the run died after 01_construct (exit 1,
    its manifest `running`, neither failed nor interrupted); `--check | head -2` printed a traceback."""
    out = tmp_path / "run"
    closed_stdout(monkeypatch)
    assert cli_main(["run", "--check", str(DEMO), "--out", str(out)]) == 0
    closed_stdout(monkeypatch)
    assert cli_main(["run", str(DEMO), "--out", str(out), "--set", "limit=8"]) == 0
    sys.stdout.flush()  # (nothing left that fails as Python exits)
    assert stubbed_notebooks == ["01_construct", "02_analyze", "03_card"]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "complete" and {n["status"] for n in manifest["notebooks"].values()} == {"done"}


def test_bad_parameters_fail_before_running(tmp_path, capsys):
    assert cli_main(["run", str(DEMO), "--out", str(tmp_path / "x"), "--set", "mini_idx=1"]) == 2
    err = capsys.readouterr().err
    assert "Unknown parameter 'mini_idx'" in err and "mini_index" in err
    assert not (tmp_path / "x").exists()


def test_the_parameters_echoed_show_a_path_as_typed(tmp_path, monkeypatch, capsys):
    """A non-ASCII run directory was echoed as JSON escapes ("/tmp/\\u504f\\u597d"); now as it is named."""
    monkeypatch.setattr(run_cli, "ensure_kernel", lambda kernel: None)
    monkeypatch.setattr(run_cli, "run_notebooks", lambda *args, **kw: 0)  # the echo, not the notebooks
    out = tmp_path / "偏好"
    assert cli_main(["run", str(DEMO), "--out", str(out)]) == 0
    said = capsys.readouterr().out
    assert f'"run_dir": "{out}"' in said and "\\u" not in said


@pytest.fixture
def kernels(tmp_path, monkeypatch):
    """Kernels of the test's own (JUPYTER_PATH is searched first), and a sys.prefix in tmp_path for what a run
    registers (never the test's environment); `add(name, python)` writes one."""
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "prefix"))
    # jupyter_core reads sys.prefix once, on import (here, at collection): its copy too, undone after the test
    monkeypatch.setattr(jupyter_paths, "ENV_JUPYTER_PATH", [str(tmp_path / "prefix" / "share" / "jupyter")])

    def add(name: str, python: str) -> None:
        folder = tmp_path / "jupyter" / "kernels" / name
        folder.mkdir(parents=True)
        (folder / "kernel.json").write_text(json.dumps({"argv": [python, "-m", "ipykernel_launcher", "-f",
                                                                 "{connection_file}"], "display_name": name,
                                                        "language": "python"}))
    return add


def other_venv(tmp_path: Path) -> str:
    """The python of another venv made from this one's base interpreter: a symlink to the same file."""
    python = tmp_path / "other" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.symlink_to(Path(sys.executable).resolve())
    (tmp_path / "other" / "pyvenv.cfg").write_text(f"home = {Path(sys.executable).resolve().parent}\n")
    return str(python)


def test_kernel_that_does_not_exist_is_refused_naming_those_that_do(kernels, tmp_path, capsys):
    # it was installed for this environment under that name, silently
    kernels("mine", sys.executable)
    assert cli_main(["run", str(DEMO), "--out", str(tmp_path / "run"), "--kernel", "mien", "--check"]) == 2
    err = capsys.readouterr().err
    assert "--kernel 'mien': no Jupyter kernel has that name" in err and "mine" in err and "Did you mean 'mine'?" in err
    assert "--kernel names an existing kernel of this environment" in err
    assert not (tmp_path / "prefix").exists() and not (tmp_path / "run").exists()


def test_kernel_of_another_venv_is_refused_though_both_pythons_are_one_file(kernels, tmp_path, capsys):
    # a venv's bin/python is a symlink to the base interpreter: resolved, every venv of it looked like this one
    python = other_venv(tmp_path)
    kernels("other", python)
    assert cli_main(["run", str(DEMO), "--out", str(tmp_path / "run"), "--kernel", "other", "--check"]) == 2
    err = capsys.readouterr().err
    assert f"runs {python}, another environment's Python, not this environment's {sys.executable}" in err, err
    assert not (tmp_path / "run").exists()
    kernels(KERNEL_NAME, python)  # the project's own name, found before this environment's: not re-registered away
    with pytest.raises(ReproError, match=f"runs {python}, another environment's Python"):
        ensure_kernel()
    # refused as `--kernel other` is, before anything is written (it was refused once the run's record was written:
    # a run folder left with a `failed` run); the family's members too
    family = ["--grid", "mini_index=0,1", "--set", "mini_count=2"]
    for run, more in ((tmp_path / "run", []), (tmp_path / "family", family), (tmp_path / "member", [*family, "--member",
                                                                                                     "1"])):
        assert cli_main(["run", str(DEMO), "--out", str(run), *more]) == 2
        assert f"The Jupyter kernel 'repro' ({tmp_path / 'jupyter'}" in capsys.readouterr().err
        assert not run.exists()


def test_a_kernel_of_this_environment_is_used_as_it_is(kernels, tmp_path):
    kernels("mine", sys.executable)
    kernels("bare", "python")  # jupyter_client runs sys.executable for it
    assert ensure_kernel("mine") == "mine" and ensure_kernel("bare") == "bare"
    assert not (tmp_path / "prefix").exists()  # nothing registered


REGISTER_AT_ONCE = """
import sys, time
from pathlib import Path
from jupyter_core import paths
from repro.cli import run
tmp, n = Path(sys.argv[1]), int(sys.argv[2])
sys.prefix = str(tmp / "prefix")
paths.ENV_JUPYTER_PATH = [str(tmp / "prefix" / "share" / "jupyter")]
check, waited = run.check_kernel, []
def check_then_wait(*args, **kwargs):  # every process finds no kernel before any registers one
    found = check(*args, **kwargs)
    if not waited:
        waited.append((tmp / f"ready-{n}").touch())
        while len(list(tmp.glob("ready-*"))) < int(sys.argv[3]):
            time.sleep(0.005)
    return found
run.check_kernel = check_then_wait
print(run.ensure_kernel())
"""


def test_runs_started_at_once_register_the_kernel_once_and_all_run(tmp_path):
    # a Slurm array of `repro run`s in an environment without the kernel: each registered it (ipykernel removes the
    # folder, then copies anew), and the others failed (FileExistsError, FileNotFoundError) before any notebook
    env = {**os.environ, "JUPYTER_PATH": str(tmp_path / "jupyter")}
    count = 4
    procs = [subprocess.Popen([sys.executable, "-c", REGISTER_AT_ONCE, str(tmp_path), str(n), str(count)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for n in range(count)]
    ended = [(p.wait(timeout=300), *p.communicate()) for p in procs]
    assert all(rc == 0 and out.strip() == KERNEL_NAME for rc, out, _ in ended), ended
    spec = json.loads((tmp_path / "prefix" / "share" / "jupyter" / "kernels" / KERNEL_NAME / "kernel.json").read_text())
    assert spec["argv"][0] == sys.executable

def test_the_kernels_of_a_test_leave_this_environments_kernels_to_the_tests_after_it(tmp_path):
    # a process whose first jupyter_core import came inside `kernels` took its tmp sys.prefix for this environment's
    # for good: every later test in it met "NoSuchKernel: repro", and `repro run` re-registered it in the shared venv
    first = f"{Path(__file__)}::test_kernel_that_does_not_exist_is_refused_naming_those_that_do"
    code = ("import sys, pytest; assert 'jupyter_core' not in sys.modules; "
            f"assert pytest.main(['-q', '-p', 'no:cacheprovider', '--basetemp', {str(tmp_path / 'in')!r}, {first!r}]) "
            "== 0; from jupyter_client.kernelspec import KernelSpecManager; print(KernelSpecManager().kernel_dirs)")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert str(Path(sys.prefix, "share", "jupyter", "kernels")) in proc.stdout.splitlines()[-1]


def test_repro_run_imports_papermill_without_compiling_the_rfc3987_grammar():
    code = ("import sys; from repro.cli.run import import_papermill; pm = import_papermill(); "
            "import jsonschema; print(pm.__name__, sys.modules['rfc3987_syntax'], 'lark' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["papermill", "None", "False"]  # jsonschema loaded, with IRI formats unchecked


def test_plain_papermill_runs_the_notebook_with_the_params_file(papermill_cli, tmp_path):
    out = tmp_path / "pm"
    proc = papermill_cli("notebooks/01_construct.ipynb", tmp_path / "o.ipynb", "-f", DEMO, "-p", "run_dir", out,
                         "-p", "limit", "6")
    assert proc.returncode == 0, proc.stderr[-3000:]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["driver"] == "papermill" and manifest["status"] == "complete"
    assert manifest["counts"]["sliced"] == 6


def test_generation_demo_goes_from_prompts_to_a_dataset(repro_run, tmp_path):
    out = tmp_path / "gen"
    proc = repro_run(ROOT / "params" / "demo_generate.yaml", "--out", out, "--set", "limit=4",
                     "--set", "notebooks=[01_construct]")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "complete"
    assert manifest["generation"]["stand_in"] is True and manifest["scorer"]["stand_in"] is True
    ds = datasets.load_dataset(str(out / "dataset"), split="train_prefs")
    assert len(ds) == manifest["counts"]["kept"] >= 1
    for row in ds:
        assert row["reference_response"] and set(row["candidates"]) >= {row["chosen"][1]["content"]}


def test_a_user_with_no_home_nor_account_runs_repro(monkeypatch, capsys):
    """HOME unset and a user id of no account (an arbitrary uid in a container): Path('~').expanduser() raises, and
    every command (--version too) crashed with 'RuntimeError: Could not determine home directory.'"""
    import pwd

    monkeypatch.delenv("HOME", raising=False)
    monkeypatch.delenv("IPYTHONDIR", raising=False)
    monkeypatch.setattr(pwd, "getpwuid", lambda uid: (_ for _ in ()).throw(KeyError(uid)))
    with pytest.raises(SystemExit) as stop:
        cli_main(["--version"])
    assert stop.value.code == 0 and "repro" in capsys.readouterr().out


@pytest.mark.parametrize("argv", [["run", "--check", str(DEMO), "--out", "out"],
                                  ["score", "--input", str(ROOT / "tests/fixtures/ultrafeedback/test_prefs.jsonl"),
                                   "--output", "scored.jsonl", "--model", "builtin:tiny-pairrm"]])
def test_a_command_with_no_home_nor_account_is_refused_in_one_line_naming_home(argv, monkeypatch, capsys, tmp_path):
    """HOME unset and a user id of no account: `repro run --check` crashed in the stand-ins' cache (Path.home()) with
    'RuntimeError: Could not determine home directory.', and the datasets cache became a folder ./~/.cache/..."""
    import pwd

    monkeypatch.delenv("HOME", raising=False)
    monkeypatch.delenv("REPRO_CACHE", raising=False)
    monkeypatch.setattr(pwd, "getpwuid", lambda uid: (_ for _ in ()).throw(KeyError(uid)))
    monkeypatch.chdir(tmp_path)
    assert cli_main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"user {os.getuid()} has no account" in err and "set HOME" in err, err
    assert list(tmp_path.iterdir()) == []  # (no ./~ folder)


def test_a_home_that_cannot_be_written_leaves_no_ipython_warning_nor_folder(tmp_path):
    """HOME read-only or none (a container's user): IPython warned "IPython parent '...' is not a writable location,
    using a temp directory." in `repro run` and in each kernel, and left its temp folders in TMPDIR (the demo: 10)."""
    (tmp_path / "a-file").touch()  # HOME inside a file: no one can write there, root neither
    (tmp_path / "tmp").mkdir()
    notebook = tmp_path / "one-cell.ipynb"  # (each notebook's stand-in: what counts is that kernels start)
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import IPython")],
                                            metadata={"language_info": {"name": "python"}}), notebook)
    env = {**os.environ, "HOME": str(tmp_path / "a-file" / "home"), "TMPDIR": str(tmp_path / "tmp"),
           "HF_HOME": str(tmp_path / "hf"), "REPRO_CACHE": str(tmp_path / "cache")}
    env.pop("IPYTHONDIR", None)
    code = ("import sys; from pathlib import Path; from repro.cli import main, run; "
            "run.notebook_path = lambda name: Path(sys.argv[1]); sys.exit(main(sys.argv[2:]))")
    proc = subprocess.run([sys.executable, "-c", code, str(notebook), "run", "demo", "--out", str(tmp_path / "run"),
                           "--set", "notebooks=[01_construct, 02_analyze]"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)  # (two kernels: each warned, each left folders)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "IPython" not in proc.stderr, proc.stderr
    assert [p.name for p in (tmp_path / "tmp").iterdir() if p.name.startswith(("tmp", "repro-"))] == []
