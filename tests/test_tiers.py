"""The two tiers: `make test-fast` leaves out every test that runs notebooks, `repro run`, torchrun, a browser, a
training loop or a wheel build. One rule decides (tests/conftest.py: the fixtures a test uses); these tests check
that the heavy work is reached only through those fixtures, and that the rule selects as it says."""

import ast
import asyncio
import os
from pathlib import Path

import nbformat
import pytest
from jupyter_client.manager import AsyncKernelManager, KernelManager, start_new_kernel as start
from nbclient import NotebookClient

import conftest
from conftest import HEAVY_FIXTURES, pytest_collection_modifyitems

TESTS = Path(__file__).resolve().parent
# what only a heavy fixture may do: the text that does it, and the fixture to use instead (a kernel started in the
# test's own process is refused when it starts: conftest.no_kernel_in_a_light_test; these find those in subprocesses)
HEAVY_WORK = {
    '"repro.cli", "run"': "repro_run",
    "papermill.execute_notebook(": "run_notebook",
    '"-m", "papermill"': "papermill_cli",
    "nproc_per_node": "torchrun_processes",
    "launch_torchrun(": "torchrun_processes",
    '"generation_num_processes": 2': "torchrun_processes",
    "DPOTrainer(": "trl_policy",
    "sync_playwright(": "jupyterlab",
    '"pip", "wheel"': "wheel",
    "kill_while_scoring_the_third_chunk": "kill_during_scoring",
    "start_new_kernel(": "kernel",
    'nbconvert"': "papermill_cli",  # jupyter nbconvert --execute, python -m nbconvert
    '"execute"': "papermill_cli",  # jupyter execute (nbclient's command)
}


def _heavy_backed(tree: ast.Module) -> set[str]:
    """The functions of a test file that use a heavy fixture, directly or through the file's own fixtures."""
    functions = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    args = {name: {a.arg for a in f.args.args} for name, f in functions.items()}
    backed: set[str] = set()
    changed = True
    while changed:
        changed = False
        for name, used in args.items():
            if name not in backed and used & (HEAVY_FIXTURES.keys() | backed):
                backed.add(name)
                changed = True
    return backed


def test_heavy_work_is_reached_only_through_the_heavy_fixtures():
    offenders = []
    for path in sorted(TESTS.glob("test_*.py")):
        if path.name == Path(__file__).name:
            continue
        source = path.read_text()
        tree = ast.parse(source)
        backed = _heavy_backed(tree)
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef) or node.name in backed | HEAVY_FIXTURES.keys():
                continue
            body = ast.get_source_segment(source, node) or ""
            for text, fixture in HEAVY_WORK.items():
                if text in body:
                    offenders.append(f"{path.name}::{node.name} does {text!r} without a heavy fixture: use {fixture}")
    assert not offenders, "\n".join(offenders)


class _Item:
    """What the rule reads of a collected test: the fixtures it uses (with those of its fixtures) and its marks."""

    def __init__(self, *fixturenames: str, nodeid: str = "tests/test_x.py::test_x"):
        self.fixturenames = list(fixturenames)
        self.nodeid = nodeid
        self.marks: list[str] = []

    def add_marker(self, mark) -> None:
        self.marks.append(mark.name)


def test_the_rule_marks_a_test_heavy_by_the_fixtures_it_uses():
    light, demo, copy, torchrun = (_Item("tmp_path", "train_rows"), _Item("demo_run", "repro_run", "tmp_path"),
                                   _Item("demo_run_copy", "demo_run", "repro_run"), _Item("torchrun_processes"))
    pytest_collection_modifyitems(None, [light, demo, copy, torchrun])
    assert light.marks == [] and demo.marks == copy.marks == torchrun.marks == ["heavy"]


def test_the_longest_modules_are_handed_out_first_each_in_its_own_order(monkeypatch, tmp_path):
    durations = tmp_path / "durations.json"
    durations.write_text('{"tests/test_a.py": 5.0, "tests/test_b.py": 90.0}')
    monkeypatch.setattr(conftest, "DURATIONS", durations)
    items = [_Item(nodeid="tests/test_a.py::one"), _Item("repro_run", nodeid="tests/test_a.py::two"),
             _Item(nodeid="tests/test_b.py::one"), _Item(nodeid="tests/test_b.py::two"),
             _Item("repro_run", "demo_run", nodeid="tests/test_new.py::one"),  # not in the file: 10 s a heavy test
             _Item("repro_run", nodeid="tests/test_new.py::two"), _Item(nodeid="tests/test_light.py::one")]
    pytest_collection_modifyitems(None, items)
    assert [i.nodeid for i in items] == ["tests/test_b.py::one", "tests/test_b.py::two", "tests/test_new.py::one",
                                         "tests/test_new.py::two", "tests/test_a.py::one", "tests/test_a.py::two",
                                         "tests/test_light.py::one"]


def test_every_heavy_fixture_exists_and_says_why_it_is_heavy():
    import conftest

    defined = {name for name in dir(conftest) if hasattr(getattr(conftest, name), "_fixture_function_marker")
               or type(getattr(conftest, name)).__name__ == "FixtureFunctionDefinition"}
    local = {"jupyterlab": "test_browser.py", "trl_policy": "test_formats.py", "wheel": "test_packaging.py"}
    for name, why in HEAVY_FIXTURES.items():
        assert why
        assert name in defined or f"def {name}(" in (TESTS / local[name]).read_text(), name


def test_conftest_defines_each_function_once():
    """A second `def pytest_...` silently replaces the first: the rule, the durations or the skip guard would go."""
    tree = ast.parse((Path(__file__).parent / "conftest.py").read_text())
    names = [n.name for n in tree.body if isinstance(n, ast.FunctionDef)]
    assert sorted({n for n in names if names.count(n) > 1}) == []


def test_a_run_a_fixture_starts_gets_its_own_row_cache_and_a_tests_runs_share_the_tests(monkeypatch, tmp_path):
    monkeypatch.setenv("REPRO_ROW_CACHE", conftest.PROCESS_ROW_CACHE)  # as in a module or session fixture
    first, second = conftest.run_env(None)["REPRO_ROW_CACHE"], conftest.run_env(None)["REPRO_ROW_CACHE"]
    assert len({first, second, conftest.PROCESS_ROW_CACHE}) == 3
    monkeypatch.setenv("REPRO_ROW_CACHE", str(tmp_path))  # as in a test (own_row_cache)
    assert conftest.run_env(None)["REPRO_ROW_CACHE"] == conftest.run_env({**os.environ})["REPRO_ROW_CACHE"] == str(tmp_path)


def test_a_light_test_that_starts_a_kernel_in_this_process_fails_before_the_kernel_starts(tmp_path):
    """The text scan above looks for `start_new_kernel(`: an alias of it, a KernelManager, nbclient or papermill
    started a kernel in a test of the light tier unseen. Now each fails the test, naming the fixture to use."""
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1 + 1")])
    for route in (lambda: start(kernel_name="python3"), lambda: KernelManager(kernel_name="python3").start_kernel(),
                  lambda: asyncio.run(AsyncKernelManager(kernel_name="python3").start_kernel()),
                  lambda: NotebookClient(notebook, kernel_name="python3", resources={"metadata": {"path": tmp_path}}
                                         ).execute()):
        with pytest.raises(pytest.fail.Exception, match=r"starts a Jupyter kernel without a heavy fixture, so make "
                                                        r"test-fast would run it: start it with the `kernel` fixture"):
            route()
