"""The README stays short, navigable and true: its commands name real targets, files, notebooks and parameters."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from repro.cli import build_parser
from repro.parameters import NOTEBOOK_SECTIONS, SCHEMAS
from repro.paths import find_params

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def commands(prefix: str) -> list[list[str]]:
    """The shell commands starting with `prefix` in the README's bash blocks (continuations joined, comments cut)."""
    found = []
    for block in re.findall(r"```bash\n(.*?)```", README, flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            if words[:len(prefix.split())] == prefix.split():
                found.append(words)
    return found


def test_short_with_a_table_of_contents():
    assert len(README.splitlines()) <= 300
    toc = README.split("## Contents", 1)[1].split("\n## ", 1)[0]
    for heading in re.findall(r"^#{2,3} (.+)$", README, flags=re.M):
        if heading != "Contents":
            anchor = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
            assert f"](#{anchor})" in toc, heading


def test_links_to_docs_exist():
    for target in re.findall(r"\]\((docs/[^)#]+)\)", README):
        assert (ROOT / target).is_file(), target


def test_make_targets_exist():
    makefile = (ROOT / "Makefile").read_text()
    for words in commands("make"):
        target = next(w for w in words[1:] if "=" not in w)
        assert re.search(rf"^{target}:", makefile, flags=re.M), words
    assert "make test" in (ROOT / ".ci/run").read_text()


@pytest.mark.parametrize("words", commands("repro"), ids=" ".join)
def test_repro_commands_parse_and_name_existing_params_files(words, monkeypatch):
    monkeypatch.chdir(ROOT)
    args = build_parser(words[1]).parse_args(words[1:])
    if args.command == "run":
        find_params(args.params)


@pytest.mark.parametrize("words", commands("papermill"), ids=" ".join)
def test_papermill_commands_name_real_notebooks_and_parameters(words):
    notebook = ROOT / words[1]
    assert notebook.is_file(), words[1]
    fields = set().union(*(SCHEMAS[s].model_fields for s in NOTEBOOK_SECTIONS[notebook.stem]))
    for flag, value in zip(words, words[1:]):
        if flag == "-p":
            assert value in fields, f"{value} is not a parameter of {notebook.name}"
        if flag == "-f":
            assert (ROOT / value).is_file(), value


def test_repro_help_says_what_repro_does_not_how_its_code_is_laid_out():
    # it printed the cli package's docstring: "the command line, one module per command (`repro run`: run.py, ..."
    text = build_parser().format_help()
    assert "reward-model-ranked preference dataset" in text and ".py" not in text and "module" not in text
    assert all(f"\n    {name} " in text for name in ("run", "notebooks", "score", "bench", "selfcheck"))
