"""`include:` in a params file: the values of other params files (paths from the including file's folder), which the
file's own values and `--set` override; a cycle or a missing file is an error naming the file that includes it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from repro.errors import ParameterError
from repro.parameters import load_params_file

RECIPES = Path(__file__).resolve().parents[1] / "params" / "recipes"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_included_values_are_overridden_by_the_file_then_by_set(tmp_path):
    write(tmp_path / "common" / "base.yaml", "run_name: base\nlimit: 4\nmini_count: 2\nnotebooks: [01_construct]\n")
    write(tmp_path / "common" / "more.yaml", "include: base.yaml\nlimit: 6\nsource_split: test_prefs\n")  # its folder
    child = write(tmp_path / "runs" / "child.yaml", "include: [../common/more.yaml]\nrun_name: child\n")
    values = load_params_file(child, ["mini_count=3"])
    assert values == {"run_name": "child", "limit": 6, "mini_count": 3, "notebooks": ["01_construct"],
                      "source_split": "test_prefs"}
    # a list: later files over earlier ones
    write(tmp_path / "a.yaml", "limit: 1\nmini_count: 5\n")
    write(tmp_path / "b.yaml", "limit: 2\n")
    assert load_params_file(write(tmp_path / "ab.yaml", "include: [a.yaml, b.yaml]\n")) == {"limit": 2, "mini_count": 5}


def test_an_include_may_start_from_the_home_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    write(tmp_path / "home" / "base.yaml", "limit: 4\n")
    child = write(tmp_path / "p" / "child.yaml", "include: ~/base.yaml\nmini_count: 2\n")
    assert load_params_file(child) == {"limit": 4, "mini_count": 2}


def test_iteration_2_of_sppo_is_iteration_1_with_its_own_prompts_and_policy():
    first, second = (yaml.safe_load((RECIPES / f"{n}.yaml").read_text()) for n in ("sppo_iter1", "sppo_iter2"))
    assert second.pop("include") == "sppo_iter1.yaml"
    assert load_params_file(RECIPES / "sppo_iter2.yaml") == {**first, **second}
    assert {k: second[k] for k in ("iteration", "source", "policy_model")} == {
        "iteration": 2, "source": "UCLA-AGI/data-mistral-7b-instruct-sppo-iter2",
        "policy_model": "UCLA-AGI/Mistral7B-PairRM-SPPO-Iter1"}
    verify = load_params_file(RECIPES / "verify_sppo_iter2.yaml")
    assert verify["notebooks"] == ["04_compare"] and verify["candidate"] == "runs/sppo_iter2"


def test_a_cycle_and_a_missing_file_are_errors_naming_the_including_file(tmp_path):
    write(tmp_path / "a.yaml", "include: b.yaml\nlimit: 1\n")
    write(tmp_path / "b.yaml", "include: sub/c.yaml\n")
    write(tmp_path / "sub" / "c.yaml", "include: ../a.yaml\n")
    with pytest.raises(ParameterError, match=re.escape(f"'include: ../a.yaml' in {tmp_path / 'sub' / 'c.yaml'} makes a "
                                                       f"cycle ({tmp_path / 'a.yaml'} -> {tmp_path / 'b.yaml'} -> ")):
        load_params_file(tmp_path / "a.yaml")
    for name, text, message in [
        ("self.yaml", "include: self.yaml\n", r"'include: self.yaml' in \S+self.yaml makes a cycle"),
        ("gone.yaml", "include: base.yml\n", re.escape(f"'include: base.yml' in {tmp_path / 'gone.yaml'}: "
                                                         f"{tmp_path / 'base.yml'} does not exist")),
        ("odd.yaml", "include: {a: 1}\n", r"'include' in \S+odd.yaml must be a params file's path .* got \{'a': 1\}"),
        # an included file's own mistakes are named in that file
        ("bad.yaml", "include: typo.yaml\n",
         r"Unknown parameter 'mini_idx' in \S+typo.yaml\. Did you mean 'mini_index'"),
    ]:
        write(tmp_path / "typo.yaml", "mini_idx: 1\n")
        with pytest.raises(ParameterError, match=message):
            load_params_file(write(tmp_path / name, text))
