"""The two tiers: `make test-fast` leaves out every test that runs notebooks, `repro run`, torchrun, a browser, a
training loop or a wheel build. One rule decides (tests/conftest.py: the fixtures a test uses); these tests check
that the heavy work is reached only through those fixtures, and that the rule selects as it says."""

import ast
import subprocess
import sys
from pathlib import Path

from conftest import HEAVY_FIXTURES

TESTS = Path(__file__).resolve().parent
# what only a heavy fixture may do: the text that does it, and the fixture to use instead
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


def test_the_rule_leaves_the_heavy_tests_out_of_the_fast_tier():
    proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:xdist", "-m", "not heavy",
                           "tests/test_run.py", "tests/test_scoring.py"], cwd=TESTS.parent, capture_output=True,
                          text=True, timeout=300)
    fast = proc.stdout
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "test_run.py::test_bad_parameters_fail_before_running" in fast  # no heavy fixture: fast
    assert "test_run.py::test_demo_run_writes_its_artifacts" not in fast  # the shared demo run
    assert "test_run.py::test_a_failed_run_says_so_and_keeps_its_notebook" not in fast  # repro run
    assert "test_scoring.py::test_two_torchrun_processes_give_byte_identical_chunks_and_scores" not in fast
    assert "test_scoring.py::test_a_run_killed_with_sigkill_resumes_to_byte_identical_results" not in fast  # kill -9
    assert "test_scoring.py::test_the_fingerprint_covers_what_decides_the_scores_and_nothing_else" in fast
