"""A ReproError in a notebook cell shows its paragraph, not a stack; other exceptions keep their traceback."""

import pytest
from IPython.core.interactiveshell import InteractiveShell


@pytest.fixture
def shell():
    shell = InteractiveShell.instance(colors="nocolor")
    yield shell
    InteractiveShell.clear_instance()


def test_repro_error_shows_its_paragraph_without_the_traceback(shell, capsys):
    result = shell.run_cell(
        "from repro.errors import ParameterError\n"
        "def validate():\n"
        "    raise ParameterError('Parameter limit=0 must be at least 1; set limit: 10 or null.')\n"
        "validate()\n")
    assert not result.success and type(result.error_in_exec).__name__ == "ParameterError"
    out = capsys.readouterr().out
    assert "ParameterError" in out and "Parameter limit=0 must be at least 1; set limit: 10 or null." in out
    assert "Traceback" not in out and "validate()" not in out and "line " not in out


def test_other_exceptions_keep_their_traceback(shell, capsys):
    result = shell.run_cell("def broken():\n    return {}['missing']\nbroken()\n")
    assert not result.success
    out = capsys.readouterr().out
    assert "KeyError" in out and "broken()" in out and "return {}['missing']" in out
