"""The path rule: relative parameter paths mean the project root, from a shell at the root, from papermill and
from a JupyterLab kernel in notebooks/; hub ids and built-in specs are left alone; nothing lands elsewhere."""

import ast
import fcntl
import json
import multiprocessing
import os
import re
import subprocess
import sys
import time
import unicodedata
import uuid
from datetime import datetime
from pathlib import Path

import nbformat
import pytest
from papermill.iorw import load_notebook_node
from papermill.parameterize import parameterize_notebook

from repro import paths

from repro.analysis import report as analysis
from repro.errors import DataError, ParameterError, ReproError
from repro.parameters import AnalyzeParams, CardParams, ConstructParams, GenerationParams, build
from repro.cli.notebooks import make_project

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"


@pytest.fixture(autouse=True)
def no_repro_home(monkeypatch):
    monkeypatch.delenv(paths.HOME_ENV, raising=False)


def test_the_checkout_is_the_project_root_from_its_root_and_from_notebooks(monkeypatch):
    assert paths.checkout_root() == ROOT
    monkeypatch.chdir(ROOT)
    at_root = build(AnalyzeParams, {"run_dir": "runs/demo", "dataset": "runs/other"})
    monkeypatch.chdir(NOTEBOOKS)  # where JupyterLab starts a notebook's kernel
    in_notebooks = build(AnalyzeParams, {"run_dir": "runs/demo", "dataset": "runs/other"})
    assert in_notebooks.run_dir == at_root.run_dir == str(ROOT / "runs" / "demo")
    assert in_notebooks.dataset == at_root.dataset == str(ROOT / "runs" / "other")
    assert build(ConstructParams, {}).run_root == ROOT / "runs" / "demo"  # the default, too
    assert build(CardParams, {"card_dataset": "../elsewhere/copy"}).card_dataset == str(ROOT.parent / "elsewhere" / "copy")


def test_repro_home_names_the_root(monkeypatch, tmp_path):
    monkeypatch.setenv(paths.HOME_ENV, str(tmp_path))
    monkeypatch.chdir(NOTEBOOKS)
    p = build(ConstructParams, {"run_dir": "runs/x", "source": "data/rows.jsonl", "scorer_model": "models/pairrm"})
    assert (p.run_dir, p.source) == (str(tmp_path / "runs" / "x"), str(tmp_path / "data" / "rows.jsonl"))
    # no models/ folder under the root: `models/pairrm` is read as a hub id, as `llm-blender/PairRM` is
    assert p.scorer_model == "models/pairrm"
    (tmp_path / "models" / "pairrm").mkdir(parents=True)
    assert build(ConstructParams, {"scorer_model": "models/pairrm"}).scorer_model == str(tmp_path / "models" / "pairrm")


def test_a_command_line_folder_is_taken_from_the_current_folder(monkeypatch, tmp_path, capsys):
    # `repro run --out rel` from a sub-folder wrote to <root>/rel, where score --output and bench --output-dir are
    # the current folder's (a params file's run_dir stays the root's)
    from repro.cli import main

    monkeypatch.setenv(paths.HOME_ENV, str(tmp_path))
    monkeypatch.chdir((tmp_path / "sub").mkdir() or tmp_path / "sub")
    assert main(["run", "demo", "--out", "rel", "--check"]) == 0
    assert f"run directory: {tmp_path / 'sub' / 'rel'} (new)" in capsys.readouterr().out
    assert main(["run", "demo", "--set", "run_dir=rel", "--check"]) == 0
    assert f"run directory: {tmp_path / 'rel'} (new)" in capsys.readouterr().out


def test_a_missing_repro_home_is_an_error_naming_the_absolute_path(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(paths.HOME_ENV, "nowhere")
    with pytest.raises(ParameterError, match=str(tmp_path / "nowhere")):
        paths.project_root()


def test_one_rule_says_which_specs_are_written_as_hub_ids_and_the_card_shows_no_other_in_full():
    from repro.card.facts import public_value
    for spec in ("llm-blender/PairRM", "HuggingFaceH4/ultrafeedback_binarized", "meta-llama/Llama-3.1-8B"):
        assert paths.reads_as_hub_id(spec) and public_value(spec) == spec
    for spec in ("C:\\Users\\ada/data", "my data/rows", "owner/", "/abs/x", "./x/y", "~/x", "a/b/c", "x",
                 "builtin:tiny-pairrm", "", None):
        assert not paths.reads_as_hub_id(spec), spec
    # a Windows folder in owner/name's shape was taken for a hub id, and the card showed it with the user's name
    assert public_value("C:\\Users\\ada/data") == "data"


def test_hub_ids_and_builtin_specs_stay_as_they_are(monkeypatch):
    monkeypatch.chdir(NOTEBOOKS)
    p = build(ConstructParams, {"source": "HuggingFaceH4/ultrafeedback_binarized", "scorer_model": "llm-blender/PairRM"})
    assert (p.source, p.scorer_model) == ("HuggingFaceH4/ultrafeedback_binarized", "llm-blender/PairRM")
    assert build(ConstructParams, {"source": "demo", "scorer_model": "builtin:tiny-pairrm"}).source == "demo"
    assert build(ConstructParams, {"scorer_model": "builtin:tiny-pairrm"}).scorer_model == "builtin:tiny-pairrm"
    assert build(GenerationParams, {"policy_model": "builtin:tiny-policy"}).policy_model == "builtin:tiny-policy"
    assert build(GenerationParams, {"policy_model": "HuggingFaceH4/mistral-7b-sft-beta"}).policy_model == \
        "HuggingFaceH4/mistral-7b-sft-beta"
    assert build(AnalyzeParams, {"dataset": "owner/name"}).dataset == "owner/name"
    assert build(CardParams, {"card_dataset": "owner/name", "hub_repo_id": "me/mine"}).hub_repo_id == "me/mine"
    # shaped like owner/name, but a file or a run: a path
    assert build(AnalyzeParams, {"dataset": "owner/rows.jsonl"}).dataset == str(ROOT / "owner" / "rows.jsonl")
    assert paths.resolve_user_path("runs/demo") == str(ROOT / "runs" / "demo")
    assert paths.resolve_user_path("/abs/../abs/x") == "/abs/x" and paths.resolve_user_path(None) is None
    assert build(ConstructParams, {"run_dir": ""}).run_root == ROOT / "runs" / "demo"  # "" = not set


def test_a_marked_project_is_the_root_from_its_notebooks_folder(monkeypatch, tmp_path):
    project = tmp_path / "explore"
    written = make_project(project)
    assert {p.name for p in written} >= {p.name for p in NOTEBOOKS.glob("*.ipynb")} | {"demo.yaml"}
    monkeypatch.chdir(project / "notebooks")
    assert paths.project_root() == project
    assert build(AnalyzeParams, {"run_dir": "runs/demo"}).run_root == project / "runs" / "demo"
    monkeypatch.chdir(tmp_path)  # above the project: no marker, so the checkout this code runs from
    assert paths.project_root() == ROOT
    edited = project / "notebooks" / "01_construct.ipynb"  # a person's edits are not overwritten unasked
    edited.write_text(edited.read_text() + " ")
    with pytest.raises(ReproError, match=rf"^1 file in {project} differs from this package's copies and would be "
                                         rf"overwritten: {edited}\. Choose another folder, or pass --force to "
                                         rf"overwrite it\.$"):
        make_project(project)
    make_project(project, force=True)
    assert edited.read_text() == (NOTEBOOKS / "01_construct.ipynb").read_text()


def test_a_name_typed_in_another_unicode_form_than_the_files_is_told_with_the_spelling_that_exists(tmp_path, capsys):
    """A file named café.jsonl as macOS writes it (NFD: e and a combining accent), typed composed (NFC): the two paths
    look the same, so "does not exist" alone leaves the user nowhere; the message names the form and the spelling."""
    from repro import cli
    from repro.errors import listed

    nfd = unicodedata.normalize("NFD", "café")
    (tmp_path / f"{nfd}.jsonl").write_text('{"score_chosen": 1.0, "score_rejected": 0.0}\n', encoding="utf-8")
    (tmp_path / nfd).mkdir()
    (tmp_path / nfd / "rows.jsonl").write_text('{"prompt": "p", "candidates": ["a", "b"]}\n', encoding="utf-8")
    typed = tmp_path / "café.jsonl"
    assert not typed.exists() and unicodedata.is_normalized("NFC", str(typed))
    said = re.escape(f"{tmp_path / nfd}.jsonl exists with the same name in another Unicode form (NFD: "
                     f"{ascii(str(tmp_path / nfd) + '.jsonl')})")
    with pytest.raises(DataError, match=said):
        analysis.analyze(build(AnalyzeParams, {"dataset": str(typed)}))
    # repro score's --input (a folder in the other form too), and the run's recorded value against the given one
    assert cli.main(["score", "--input", str(tmp_path / "café" / "rows.jsonl"), "--output",
                     str(tmp_path / "out.jsonl"), "--model", "builtin:tiny-pairrm"]) == 2
    assert re.escape(f"exists with the same name in another Unicode form (NFD: "
                     f"{ascii(str(tmp_path / nfd / 'rows.jsonl'))})") in re.escape(capsys.readouterr().err)
    assert cli.main(["selfcheck", "--input", str(tmp_path / "café.jsonl"), "--report", str(tmp_path / "r")]) == 2
    assert f"another Unicode form (NFD: {ascii(str(tmp_path / nfd) + '.jsonl')})" in capsys.readouterr().err
    # repro run --check: the source's check says it too
    assert cli.main(["run", "--check", str(ROOT / "params" / "demo.yaml"), "--set", f"source={typed}", "--out",
                     str(tmp_path / "run")]) == 1
    assert f"another Unicode form (NFD: {ascii(str(tmp_path / nfd) + '.jsonl')})" in capsys.readouterr().out
    assert listed({"source": (str(tmp_path / nfd), str(tmp_path / "café"))}) == (
        f"source ({ascii(str(tmp_path / nfd))} there, {ascii(str(tmp_path / 'café'))} now: the same name in "
        f"another Unicode form, NFD there, NFC now)")
    assert listed({"limit": (None, 8)}) == "limit (null there, 8 now)"


def test_a_file_beside_the_notebook_given_by_its_name_is_refused_with_the_path_to_give(monkeypatch, tmp_path):
    """A person in JupyterLab types the name of a file in the notebooks' folder: relative paths mean the project
    root, so the file is not found there; the message says so and gives the path that works. Nothing is written."""
    project = tmp_path / "explore"
    make_project(project)
    (project / "notebooks" / "mine.jsonl").write_text('{"score_chosen": 1.0, "score_rejected": 0.0}\n')
    monkeypatch.chdir(project / "notebooks")
    with pytest.raises(DataError, match=r"mine.jsonl' is neither an existing file.*Relative paths are taken from the "
                                        rf"project root \({project}\), not from the current folder; "
                                        rf"{project}/notebooks/mine.jsonl exists: give 'notebooks/mine.jsonl'"):
        analysis.analyze(build(AnalyzeParams, {"dataset": "mine.jsonl"}))
    assert not (project / "runs").exists()
    # `../data/rows.jsonl`, right from the notebooks' folder, resolved outside the project and got no hint
    (project / "data").mkdir()
    (project / "data" / "rows.jsonl").write_text('{"score_chosen": 1.0, "score_rejected": 0.0}\n')
    with pytest.raises(DataError, match=rf"{project}/data/rows.jsonl exists: give 'data/rows.jsonl'"):
        analysis.analyze(build(AnalyzeParams, {"dataset": "../data/rows.jsonl"}))
    # a near name is offered as the parameter takes it, from the project root (it offered the bare file name)
    with pytest.raises(DataError, match=r"Did you mean 'data/rows.jsonl'\?"):
        analysis.analyze(build(AnalyzeParams, {"dataset": "data/row.jsonl"}))
    # names are compared, not paths: their shared folder made any sibling "near" (reference.parquet for a missing
    # candidate.parquet)
    (project / "data" / "reference.parquet").write_bytes(b"")
    with pytest.raises(DataError) as info:
        analysis.analyze(build(AnalyzeParams, {"dataset": "data/candidate.parquet"}))
    assert "Did you mean" not in str(info.value)
    monkeypatch.chdir(project)  # from the root, no such hint: the file is not beside the working folder
    with pytest.raises(DataError) as info:
        analysis.analyze(build(AnalyzeParams, {"dataset": "mine.jsonl"}))
    assert "Relative paths" not in str(info.value)


def test_make_project_keeps_changed_copies_unless_forced(tmp_path):
    make_project(tmp_path)
    mine = tmp_path / "params" / "demo.yaml"
    mine.write_text("run_name: mine\n")
    with pytest.raises(ReproError, match=str(mine)):
        make_project(tmp_path)
    assert mine.read_text() == "run_name: mine\n"
    make_project(tmp_path, force=True)
    assert mine.read_bytes() == (ROOT / "params" / "demo.yaml").read_bytes()


def test_notebooks_are_copied_without_the_outputs_a_run_in_the_checkout_saved(monkeypatch, tmp_path, capsys):
    # JupyterLab's autosave in `make lab` wrote 02_analyze's outputs (608 KB) into the checkout's notebooks, and
    # `repro notebooks DIR` copied them, executed, into the new project without a word
    import repro.cli.notebooks as cli_notebooks

    shipped = tmp_path / "pkg" / "notebooks"
    shipped.mkdir(parents=True)
    for src in NOTEBOOKS.glob("*.ipynb"):
        (shipped / src.name).write_bytes(src.read_bytes())
    # as papermill saves a run: its injected `# Parameters` cell (an earlier run's run_dir, which the copy then
    # quietly defaulted to) and its metadata, kept by the copy that said "without its outputs"
    ran = parameterize_notebook(load_notebook_node(str(NOTEBOOKS / "02_analyze.ipynb")), {"run_dir": "runs/earlier"})
    ran = json.loads(nbformat.writes(ran))
    assert "injected-parameters" in json.dumps(ran) and "papermill" in ran["metadata"]
    code = [c for c in ran["cells"] if c["cell_type"] == "code"]
    code[0].update(execution_count=7, outputs=[{"output_type": "stream", "name": "stdout", "text": ["x\n"]}])
    code[0]["metadata"]["execution"] = {"iopub.status.busy": "2026-12-05T09:14:37.005646Z"}  # nbclient's timing
    ran["metadata"]["language_info"] = {"name": "python", "version": "3.11.7", "pygments_lexer": "ipython3"}
    ran["cells"].insert(0, {"cell_type": "markdown", "id": "papermill-error-cell-tag", "metadata": {  # a failed run's
        "tags": ["papermill-error-cell-tag"]}, "source": "<span style='color:red'>An Exception was encountered</span>"})
    (shipped / "02_analyze.ipynb").write_text(json.dumps(ran))
    monkeypatch.setattr(cli_notebooks, "shipped", lambda name: shipped if name == "notebooks" else paths.shipped(name))
    cli_notebooks.make_project(tmp_path / "mine")
    assert "02_analyze.ipynb: copied without a run's outputs and papermill's parameters" in capsys.readouterr().err
    for copy in (tmp_path / "mine" / "notebooks").glob("*.ipynb"):  # every copy as the package ships it
        assert copy.read_bytes() == (NOTEBOOKS / copy.name).read_bytes(), copy.name
    cli_notebooks.make_project(tmp_path / "mine")  # the copies made are not "changed" ones
    # `make lab` (the checkout's JupyterLab) saves notebooks/ without outputs; other folders as they are
    model = {"type": "notebook", "content": json.loads(json.dumps(ran))}
    cli_notebooks.pre_save_hook(model=model, path="runs/x/nb.ipynb", contents_manager=None)
    assert model["content"] == ran
    cli_notebooks.pre_save_hook(model=model, path="notebooks/02_analyze.ipynb", contents_manager=None)
    assert model["content"] == json.loads((NOTEBOOKS / "02_analyze.ipynb").read_text())
    hook = re.search(r"pre_save_hook=(\S+)", (ROOT / "Makefile").read_text()).group(1)
    assert hook == "repro.cli.notebooks.pre_save_hook"


def test_find_params_by_path_or_by_example_name(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    assert paths.find_params("demo") == ROOT / "params" / "demo.yaml"
    assert paths.find_params("params/demo_generate.yaml") == ROOT / "params" / "demo_generate.yaml"
    (tmp_path / "demo").write_text("run_name: here\n")  # a file of that name wins over the example
    assert paths.find_params("demo") == tmp_path / "demo"
    with pytest.raises(ParameterError) as err:
        paths.find_params("nothing.yaml")
    assert str(tmp_path / "nothing.yaml") in str(err.value) and "demo_generate" in str(err.value)


def test_outside_a_project_the_suggested_params_file_is_one_that_works_there(monkeypatch, tmp_path):
    # an installed package, from a folder of one's own: "Did you mean 'params/demo.yaml'?" of params/demo.yaml itself
    monkeypatch.setenv("REPRO_HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    for given, meant in (("params/demo.yaml", "demo"), ("sppo_iter1.yaml", "sppo_iter1")):
        with pytest.raises(ParameterError, match=rf"Did you mean '{meant}'\?"):
            paths.find_params(given)
        assert paths.find_params(meant).is_file()


def test_a_bare_name_in_a_project_is_the_projects_own_copy(monkeypatch, tmp_path):
    """`repro notebooks DIR` copies the params files and the recipes; `repro run demo` there runs the copy the
    researcher edited, not the package's."""
    make_project(tmp_path)
    assert (tmp_path / "params" / "recipes" / "sppo_iter2.yaml").is_file()  # with the file it includes
    (tmp_path / "params" / "demo.yaml").write_text("run_name: edited\n")
    monkeypatch.chdir(tmp_path / "notebooks")
    assert paths.find_params("demo") == tmp_path / "params" / "demo.yaml"
    assert paths.find_params("sppo_iter1") == tmp_path / "params" / "recipes" / "sppo_iter1.yaml"
    (tmp_path / "params" / "demo_generate.yaml").unlink()  # removed from the project: the package's example
    assert paths.find_params("demo_generate") == ROOT / "params" / "demo_generate.yaml"


def test_an_analysis_from_notebooks_of_a_missing_run_names_it_and_writes_nothing(monkeypatch):
    name = f"missing-{uuid.uuid4().hex[:8]}"
    monkeypatch.chdir(NOTEBOOKS)
    with pytest.raises(DataError, match=str(ROOT / "runs" / name / "dataset")):
        analysis.analyze(build(AnalyzeParams, {"run_dir": f"runs/{name}"}))
    assert not (NOTEBOOKS / "runs").exists() and not (ROOT / "runs" / name).exists()


def test_a_relative_run_dir_from_notebooks_is_the_run_at_the_root(monkeypatch, tmp_path):
    # a marked project stands in for the checkout, so that the test writes only under tmp_path
    make_project(tmp_path)
    (tmp_path / "scores.jsonl").write_text("".join(
        json.dumps({"score_chosen": 0.1 * i + 0.5, "score_rejected": -0.05 * i}) + "\n" for i in range(30)))
    monkeypatch.chdir(tmp_path / "notebooks")
    result = analysis.analyze(build(AnalyzeParams, {"run_dir": "runs/mine", "dataset": "scores.jsonl",
                                                    "bootstrap_resamples": 100}))
    assert result.metrics["n"] == 30
    assert json.loads((tmp_path / "runs" / "mine" / "metrics.json").read_text())["n"] == 30
    assert not (tmp_path / "notebooks" / "runs").exists()


def test_papermill_in_notebooks_resolves_from_the_root_and_leaves_no_stray_files(papermill_cli):
    """As a JupyterLab kernel runs it: working folder notebooks/, run_dir as the README writes it."""
    name = f"missing-{uuid.uuid4().hex[:8]}"
    proc = papermill_cli("02_analyze.ipynb", "-", "-k", "python3", "-p", "run_dir", f"runs/{name}", cwd=NOTEBOOKS)
    assert proc.returncode != 0
    assert str(ROOT / 'runs' / name / 'dataset') in proc.stdout + proc.stderr  # the absolute path it looked at
    assert not (NOTEBOOKS / "runs").exists() and not (ROOT / "runs" / name).exists()


def test_a_params_path_that_does_not_exist_is_an_error_with_the_nearest_file(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ParameterError, match=r"'params/demo.yml' does not exist.*Did you mean 'params/demo.yaml'\?"):
        paths.find_params("params/demo.yml")  # never silently params/demo.yaml
    (tmp_path / "mine.yaml").write_text("run_name: mine\n")
    with pytest.raises(ParameterError, match=r"Did you mean 'mine.yaml'\?"):
        paths.find_params("mine.yml")
    # only a bare name (no folder, no extension) is looked up among the examples
    with pytest.raises(ParameterError, match=r"Did you mean 'params/demo.yaml'\?"):
        paths.find_params("demo.yaml")
    assert paths.find_params("demo") == ROOT / "params" / "demo.yaml"
    # two examples equally near: both named, not the first found
    with pytest.raises(ParameterError, match=r"Did you mean 'params/recipes/sppo_iter1.yaml' or "
                                             r"'params/recipes/sppo_iter2.yaml'\?"):
        paths.find_params("sppo_iter")


def test_repro_notebooks_says_how_edited_copies_run(tmp_path, capsys):
    # it said "or run them: repro run params/demo.yaml", which runs the package's notebooks, not the edited copies
    from jupyter_client.kernelspec import KernelSpecManager

    from repro.cli import main

    assert main(["notebooks", str(tmp_path / "mine")]) == 0
    out = capsys.readouterr().out
    assert f"cd {tmp_path / 'mine'} && papermill notebooks/01_construct.ipynb out.ipynb -f params/demo.yaml" in out
    assert "repro run executes the package's notebooks, not edited copies" in out
    # a folder with a space: the printed commands quote it (they were pasted as two words)
    assert main(["notebooks", str(tmp_path / "x sp" / "proj")]) == 0
    assert f"cd '{tmp_path / 'x sp' / 'proj'}' && jupyter lab" in capsys.readouterr().out
    # the kernel the copies declare is there for papermill and JupyterLab (plain papermill failed: NoSuchKernel)
    spec = KernelSpecManager().get_kernel_spec("repro")
    assert Path(spec.argv[0]).resolve() == Path(sys.executable).resolve()


# a run's folders (and its work's) and files, as a module would spell them to find or make one
RUN_FOLDERS = {"work", "generation", "scoring", "test", "figures", "tables", "dataset"}
RUN_FILES = {"manifest.json", "metrics.json", "compare.json", "family.json", "selfcheck.json"}


def _layout_literals(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, name) of each run folder's name written where it decides a path (after `/`, compared with a path's name
    or parts, a module's constant) and of each run file's name anywhere."""
    found = []
    for node in ast.walk(tree):
        deciding: list[ast.AST] = []
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            deciding = [node.right]
        elif isinstance(node, ast.Compare) and any(isinstance(side, ast.Attribute) and side.attr in ("name", "parts")
                                                   for side in (node.left, *node.comparators)):
            deciding = [node.left, *node.comparators]
        elif isinstance(node, ast.Assign) and node in tree.body and isinstance(node.value, ast.Constant):
            deciding = [node.value]
        elif isinstance(node, ast.Constant) and node.value in RUN_FILES:
            found.append((node.lineno, node.value))
        found += [(leaf.lineno, leaf.value) for side in deciding for leaf in ast.walk(side)
                  if isinstance(leaf, ast.Constant) and leaf.value in RUN_FOLDERS]
    return found


def test_a_runs_layout_is_decided_in_paths_alone():
    # card/facts.py, cli/score.py, construct/stages.py, parameters.py ... each spelt run folders and files of their own
    package = ROOT / "src" / "repro"
    spelt = [f"{path.relative_to(package)}:{line}: {name!r}" for path in sorted(package.rglob("*.py"))
             if path.name != "paths.py" for line, name in _layout_literals(ast.parse(path.read_text()))]
    assert not spelt, "a run's layout is repro.paths's (RunDir, or a constant there):\n" + "\n".join(spelt)


def _ask_who_writes(root, asking, stop):  # (a process of its own: --check, 05_family, a kernel, as a run starts)
    while not stop.is_set():
        paths.RunDir(root).writer()
        asking.set()


def test_a_run_killed_holding_its_folder_never_turns_away_the_next_one_beside_a_probe(tmp_path, monkeypatch):
    """A `repro run` killed (SIGKILL, the OOM killer) leaves its text in the lock file; the next run, taking the
    folder in the instant a probe (`RunDir.writer`) held it, was refused at once as BUSY, naming the dead pid. A live
    holder is still refused at once, by its text."""
    lock = paths.RunDir(tmp_path).lock
    dead = subprocess.Popen(["true"])
    dead.wait()
    for pid, taken in ((dead.pid, True), (os.getpid(), False)):
        lock.write_text(f"`repro run` (pid {pid}, since 2026-12-07 13:47:50)", encoding="utf-8")
        probe = open(lock, encoding="utf-8")  # (another open file: its flock is another holder's, as a probe's)
        fcntl.flock(probe, fcntl.LOCK_SH | fcntl.LOCK_NB)
        monkeypatch.setattr(paths.time, "sleep", lambda seconds: probe.close())  # the probe lets go meanwhile
        held = paths.take_lock(lock, "repro run")
        probe.close()
        assert isinstance(held, str) != taken, (pid, held)
        if taken:
            paths.let_go(held)
        else:
            assert held == f"`repro run` (pid {pid}, since 2026-12-07 13:47:50)"


def test_asking_who_writes_a_run_folder_never_turns_away_a_run_taking_it(tmp_path):
    """`RunDir.writer` takes a shared lock for an instant; a `repro run` taking the folder in that instant was refused
    as busy ("another process is writing to it now"), though no one was: a Slurm array task beside a --check."""
    context = multiprocessing.get_context("fork")
    asking, stop = context.Event(), context.Event()
    paths.RunDir(tmp_path).lock.touch()
    asker = context.Process(target=_ask_who_writes, args=(tmp_path, asking, stop))
    asker.start()
    try:
        assert asking.wait(60)
        refused = []
        for _ in range(20000):
            held = paths.take_lock(paths.RunDir(tmp_path).lock, "repro run")
            if isinstance(held, str):
                refused.append(held)
            else:
                paths.let_go(held)
    finally:
        stop.set()
        asker.join()
    assert refused == []


def test_a_lock_says_since_when_in_utc_with_its_zone(tmp_path, monkeypatch):
    """The BUSY line of a folder another machine's process writes said "(pid 8907, since 2026-12-07 22:24:28)": the
    holder's local time (Asia/Shanghai), read in Los Angeles as its own. Now UTC, with its zone, as manifest.json's."""
    monkeypatch.setenv("TZ", "Asia/Shanghai")
    time.tzset()
    try:
        held = paths.take_lock(paths.RunDir(tmp_path).lock, "`repro run`")
    finally:
        monkeypatch.undo()
        time.tzset()
    said = paths.RunDir(tmp_path).lock.read_text()
    paths.let_go(held)
    since = re.fullmatch(rf"`repro run` \(pid {os.getpid()}, since (.+)\)", said)
    assert since and since[1].endswith("+00:00") and datetime.fromisoformat(since[1]).tzinfo is not None, said
