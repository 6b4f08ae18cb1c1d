"""A ReproError in a notebook cell shows its paragraph, not a stack; other exceptions keep their traceback."""

import jinja2
import pytest
from IPython.core.interactiveshell import InteractiveShell

from repro.errors import ReproError, rendering


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


def test_did_you_mean_names_every_option_as_near_as_the_nearest_and_how_it_is_written():
    from repro.errors import did_you_mean
    assert did_you_mean("mini_idx", ["mini_index", "mini_count", "limit"]) == " Did you mean 'mini_index'?"
    assert did_you_mean("iter", ["iter1", "iter2", "other"]) == " Did you mean 'iter1' or 'iter2'?"
    assert did_you_mean("demo", ["demo2"], {"demo2": "params/demo2.yaml"}) == " Did you mean 'params/demo2.yaml'?"
    assert did_you_mean("tiny-pairm", {"tiny-pairrm": "pairrm"}) == " Did you mean 'tiny-pairrm'?"  # a dict's keys
    assert did_you_mean("zzz", ["mini_index"]) == ""


def test_changed_values_are_named_as_a_params_file_writes_them():
    # a mapping showed as a Python dict ({'max_length': 64}) beside a suggested `--set scorer_options={"max_length":
    # 64}`; strings and numbers keep their repr
    from repro.errors import listed

    assert listed({"scorer_options": ({"max_length": 64}, {"max_length": 64, "output_index": 2}),
                   "limit": (None, 8), "source": ("demo", "x.jsonl")}) == (
        'scorer_options ({"max_length": 64} there, {"max_length": 64, "output_index": 2} now), limit (null there, 8 '
        "now), source ('demo' there, 'x.jsonl' now)")


def test_a_name_a_failed_cell_never_set_says_so_in_one_line(shell, capsys):
    # JupyterLab, Kernel > Interrupt during scoring: the cells after it showed raw NameError tracebacks
    # ("name 'candidate_scores' is not defined"), and §5 said running the scoring cell again continues (it refuses)
    import json
    from pathlib import Path

    shell.run_cell("from repro.parameters import validate_namespace\nlimit = 3\np = validate_namespace('construct', "
                   "globals())\nctx = object()")
    assert shell.run_cell("stages_fixed()").error_in_exec.__class__ is NameError  # exploring: the usual traceback
    assert "Traceback" in capsys.readouterr().out
    shell.run_cell("from repro.errors import Interrupted\nraise Interrupted('stage score: 1 finished chunk is safe')")
    capsys.readouterr()
    result = shell.run_cell("pairs = list(candidate_scores)\nprint('not reached')")
    assert type(result.error_in_exec) is NameError  # the cell still fails (Run All stops there)
    out = capsys.readouterr().out
    assert "`candidate_scores` is not set: a cell above failed before it set it (see its error); fix it and run the " \
           "notebook again." in out and "Traceback" not in out and "not reached" not in out
    notebook = json.loads((Path(__file__).parents[1] / "notebooks" / "01_construct.ipynb").read_text())
    scoring = next("".join(c["source"]) for c in notebook["cells"] if "".join(c["source"]).startswith("## 5 "))
    assert "Finished chunks stay in `work/scoring/`: after an interrupt or a failure, Run All continues from them" \
        in scoring


def test_a_template_error_names_its_template_and_line_and_ends_one_sentence_once(tmp_path):
    (tmp_path / "t.jinja").write_text("first line\n{{ '200' | comma }}\n", encoding="utf-8")
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(tmp_path))
    env.filters["comma"] = lambda value: format(value, ",")  # str's format: "Cannot specify ',' with 's'."
    with pytest.raises(ReproError) as caught, rendering("The test's", "Run it again."):
        env.get_template("t.jinja").render()
    assert str(caught.value) == ("The test's template t.jinja, line 2: ValueError: Cannot specify ',' with 's'. "
                                 "Run it again.")
