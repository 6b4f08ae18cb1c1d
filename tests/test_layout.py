"""The project's shape: layout, environment.yml vs pyproject.toml, committed notebooks without outputs."""

import ast
import io
import json
import os
import re
import subprocess
import tokenize
import tomllib
from pathlib import Path

import yaml

from repro.parameters import NOTEBOOK_SECTIONS, PARAMETERS_HEADER, SCHEMAS

ROOT = Path(__file__).resolve().parents[1]
KERNELSPEC = {"name": "repro", "display_name": "Python (repro)", "language": "python"}


def test_layout():
    for name in ["notebooks", "src/repro", "params", "tests", "environment.yml", "README.md", "pyproject.toml",
                 "Makefile", ".ci/run"]:
        assert (ROOT / name).exists(), name


def test_environment_yml_installs_the_lock():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    deps = env["dependencies"]
    assert "conda-forge" in env["channels"]
    python = [d for d in deps if isinstance(d, str) and d.startswith("python")]
    assert python, "environment.yml must pin python"
    minimum = project["requires-python"].removeprefix(">=")
    assert tuple(map(int, python[0].split("=")[1].split("."))) >= tuple(map(int, minimum.split(".")))
    assert python[0] == "python=3.11", "the lock is resolved for Python 3.11"
    pip = next(d["pip"] for d in deps if isinstance(d, dict) and "pip" in d)
    # the environment installs the locked versions, nothing else (the project itself goes on top, --no-deps)
    assert "-r requirements.lock" in pip and all(p.startswith(("-r ", "--find-links")) for p in pip)
    conda_pkgs = {d.split("=")[0] for d in deps if isinstance(d, str)}
    assert conda_pkgs <= {"python", "pip"}


def _committed_notebooks():
    out = subprocess.run(["git", "ls-files", "*.ipynb"], cwd=ROOT, capture_output=True, text=True).stdout.split()
    return [ROOT / p for p in out] or sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_notebooks_have_no_outputs_or_execution_counts():
    notebooks = _committed_notebooks()
    assert notebooks
    for path in notebooks:
        nb = json.loads(path.read_text())
        for cell in nb["cells"]:
            if cell["cell_type"] == "code":
                assert not cell.get("outputs"), f"{path.name} is committed with outputs: strip them"
                assert cell.get("execution_count") is None, f"{path.name} is committed with execution counts"


def schema_comments() -> dict[tuple[str, str], tuple[list[str], str]]:
    """Each field's comments in src/repro/parameters.py, by (class, field): the comment lines just above it (a
    section's, e.g. "# slicing: ..."), and the one on its line."""
    text = (ROOT / "src" / "repro" / "parameters.py").read_text()
    lines = text.splitlines()
    comments = {t.start[0]: t.string for t in tokenize.generate_tokens(io.StringIO(text).readline)
                if t.type == tokenize.COMMENT}
    said = {}
    for cls in (node for node in ast.parse(text).body if isinstance(node, ast.ClassDef)):
        for node in (n for n in cls.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)):
            first = node.lineno
            while lines[first - 2].lstrip().startswith("#"):
                first -= 1
            said[cls.name, node.target.id] = ([comments[k] for k in range(first, node.lineno)],
                                              comments.get(node.lineno, ""))
    return said


def parameters_cell(notebook: str) -> str:
    """A notebook's parameters cell as its schemas write it: each section's header (PARAMETERS_HEADER first, which
    repro.parameters.cell_names finds the cell by), then each field once, `name = default` with its comments."""
    said, lines, done = schema_comments(), [], set()
    for section in NOTEBOOK_SECTIONS[notebook]:
        schema = SCHEMAS[section]
        lines.append(f"# {schema.__doc__.splitlines()[0]}" if lines else f"{PARAMETERS_HEADER}{notebook}.ipynb (every "
                     f"one, with its default and range: repro.parameters.{schema.__name__}).")
        for name, field in schema.model_fields.items():
            if name not in done:
                done.add(name)
                above, inline = next(said[c.__name__, name] for c in schema.__mro__ if (c.__name__, name) in said)
                lines += [*above, f"{name} = {field.default!r}" + f"  {inline}" * bool(inline)]
    return "\n".join(lines)


def test_notebook_parameters_cells_are_written_from_the_schemas():
    # each parameter's comment was written twice, in the schema and in each cell, and the two drifted apart (01's cell
    # kept "rows with < 2 distinct candidates" after the schema gained `keep`): the schema is now the one place
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        nb = json.loads(path.read_text())
        tagged = [c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", [])]
        assert len(tagged) == 1, f"{path.name} needs exactly one cell tagged 'parameters'"
        # JupyterLab opens them with the project's registered kernel, with no kernel picker
        assert nb["metadata"]["kernelspec"] == KERNELSPEC, f"{path.name} must declare the kernel {KERNELSPEC}"
        cell = parameters_cell(path.stem)
        if os.environ.get("REPRO_WRITE_CELLS") and "".join(tagged[0]["source"]) != cell:
            tagged[0]["source"] = cell.splitlines(keepends=True)
            path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
        assert "".join(tagged[0]["source"]) == cell, (
            f"{path.name}: its parameters cell is not the one src/repro/parameters.py writes (each parameter is "
            f"described there, once): rewrite the cells with\n"
            f"  REPRO_WRITE_CELLS=1 python -m pytest tests/test_layout.py -k cells")
        # papermill skips (with a warning) a line with a second "=", comments too, and never passes it
        assert [x for x in cell.splitlines() if not x.startswith("#") and x.count("=") > 1] == [], path.name
        fields = {name: f for s in NOTEBOOK_SECTIONS[path.stem] for name, f in SCHEMAS[s].model_fields.items()}
        for node in ast.parse(cell).body:  # only assignments of literals (papermill injects its own after them)
            assert ast.literal_eval(node.value) == fields[node.targets[0].id].default, (path.name, ast.dump(node))


def test_notebook_results_do_not_reuse_parameter_names():
    """Re-running a cell must not silently take a parameter back: results get their own names."""
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        nb = json.loads(path.read_text())
        fields = set().union(*(SCHEMAS[s].model_fields for s in NOTEBOOK_SECTIONS[path.stem]))
        for cell in nb["cells"]:
            if cell["cell_type"] != "code" or "parameters" in cell.get("metadata", {}).get("tags", []):
                continue
            assigned = {t.id for node in ast.walk(ast.parse("".join(cell["source"])))
                        if isinstance(node, ast.Assign) for t in node.targets if isinstance(t, ast.Name)}
            assert not assigned & fields, f"{path.name} assigns parameter names {assigned & fields} in a result cell"


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    assert "make test" in readme and "make demo" in readme and "make lab" in readme
    assert "make test" in (ROOT / ".ci/run").read_text()


def test_readme_draws_the_package_as_ls_shows_it():
    readme = (ROOT / "README.md").read_text()
    tree = next(b for b in readme.split("```") if b.lstrip("\n").startswith("src/repro/"))
    drawn = {w.rstrip("/").removesuffix(".py") for w in tree.split()}
    shown = {p.stem for p in (ROOT / "src/repro").iterdir()
             if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").is_file()}
    assert shown <= drawn, f"the README's tree lacks {sorted(shown - drawn)}"
    assert {f"{p}/" for p in shown if (ROOT / "src/repro" / p).is_dir()} <= set(tree.split()), "packages end in /"
    # and inside each folder (cli/family.py, cli/templates/, data/tiny_corpus.json went unsaid): its line, `  name/ ...`
    # with the deeper-indented lines under it, names its modules, its folders (templates/) and its data files
    lines, name = {}, None
    for line in tree.splitlines():
        if not line.startswith("   "):  # a line of its own (under src/repro/ or not), else one continued
            name = line.split()[0] if line.startswith("  ") else None
        if name:
            lines[name] = lines.get(name, "") + " " + line
    for folder in sorted(p for p in (ROOT / "src/repro").iterdir() if p.is_dir() and p.name != "__pycache__"):
        said = {w.rstrip(".") for w in re.split(r"[\s,;:()|]+", lines.get(f"{folder.name}/", ""))}
        inside = {p.stem if p.suffix == ".py" else p.name + "/" * p.is_dir() for p in folder.iterdir()
                  if not p.name.startswith("__")}
        assert inside <= said, f"the README's {folder.name}/ line lacks {sorted(inside - said)}"
