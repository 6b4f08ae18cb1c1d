"""The skip guard of tests/conftest.py: with REPRO_FORBID_SKIPS=1 only marked tests may skip (.ci/run sets it)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CONFTEST = Path(__file__).with_name("conftest.py")
TESTS = '''
import pytest

def test_passes():
    assert True

@pytest.mark.real_weights
def test_needs_weights():
    pytest.skip("no weights here")

@pytest.mark.gpu
def test_needs_a_gpu():
    pytest.skip("no GPU here")
'''
UNMARKED = '''

def test_skips_for_a_missing_file():
    pytest.skip("sample not found")
'''


def pytest_in(folder: Path, forbid: str | None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "REPRO_FORBID_SKIPS"}
    if forbid is not None:
        env["REPRO_FORBID_SKIPS"] = forbid
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(folder)],
                          cwd=folder, env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture
def suite(tmp_path) -> Path:
    shutil.copy(CONFTEST, tmp_path / "conftest.py")
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    real_weights: x\n    gpu: x\n    vllm: x\n")
    (tmp_path / "test_some.py").write_text(TESTS)
    return tmp_path


def test_marked_skips_are_allowed(suite):
    proc = pytest_in(suite, "1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 passed, 2 skipped" in proc.stdout


def test_an_unmarked_skip_fails_the_run_and_is_named(suite):
    (suite / "test_some.py").write_text(TESTS + UNMARKED)
    proc = pytest_in(suite, "1")
    assert proc.returncode == 1
    assert "skips not allowed (REPRO_FORBID_SKIPS=1)" in proc.stdout
    assert "test_some.py::test_skips_for_a_missing_file: sample not found" in proc.stdout
    assert "test_needs_weights" not in proc.stdout.split("skips not allowed")[1]
    # without the variable (a developer's run) the same skip is only reported
    assert pytest_in(suite, None).returncode == 0
    assert pytest_in(suite, "0").returncode == 0


def test_a_module_skipped_at_collection_counts(suite):
    (suite / "test_gone.py").write_text('import pytest\npytest.importorskip("no_such_module_here")\n')
    proc = pytest_in(suite, "1")
    assert proc.returncode == 1 and "test_gone.py" in proc.stdout.split("skips not allowed")[1]


def test_ci_sets_the_guard_and_runs_make_test():
    ci = (Path(__file__).resolve().parents[1] / ".ci" / "run").read_text()
    assert "export REPRO_FORBID_SKIPS=1" in ci and "make test" in ci
