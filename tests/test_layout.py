"""The project's shape: layout, environment.yml vs pyproject.toml, committed notebooks without outputs."""

import ast
import json
import re
import subprocess
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


def test_notebook_parameters_cells_match_the_schemas():
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        nb = json.loads(path.read_text())
        tagged = [c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", [])]
        assert len(tagged) == 1, f"{path.name} needs exactly one cell tagged 'parameters'"
        sections = NOTEBOOK_SECTIONS[path.stem]
        fields = {}
        for s in sections:
            fields.update(SCHEMAS[s].model_fields)
        source = "".join(tagged[0]["source"])
        # the line repro.parameters.cell_names finds the cell by in IPython's history (a re-run cell's names)
        assert source.startswith(f"{PARAMETERS_HEADER}{path.name}"), f"{path.name}: its parameters cell's first line"
        # papermill skips (with a warning) a line with a second "=", comments too, and never passes it
        assert [x for x in source.splitlines() if not x.startswith("#") and x.count("=") > 1] == [], path.name
        tree = ast.parse(source)
        for node in tree.body:
            assert isinstance(node, ast.Assign), f"{path.name}: the parameters cell holds only assignments"
            name = node.targets[0].id
            assert name in fields, f"{path.name}: parameter {name!r} is not in the {sections} schema"
            value = ast.literal_eval(node.value)  # literals only
            assert value == fields[name].default, f"{path.name}: {name} = {value!r} differs from the schema default"
        # its first line says "every one, with its default": a schema field left out of the cell is missing
        missing = set(fields) - {node.targets[0].id for node in tree.body}
        assert not missing, f"{path.name}: its parameters cell lacks {sorted(missing)} of the {sections} schema"
        # JupyterLab opens them with the project's registered kernel, with no kernel picker
        assert nb["metadata"]["kernelspec"] == KERNELSPEC, f"{path.name} must declare the kernel {KERNELSPEC}"


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


def schema_comments() -> dict[str, str]:
    """Each schema field's comment in src/repro/parameters.py: on its line, else the comment lines just above it."""
    comments: dict[str, str] = {}
    above: list[str] = []
    for line in (ROOT / "src" / "repro" / "parameters.py").read_text().splitlines():
        text = line.strip()
        if text.startswith("#"):
            above.append(text[1:].strip())
            continue
        target = line[4:].split(":")[0] if line.startswith("    ") and not line.startswith("     ") else ""
        if target.isidentifier() and " = " in line:
            inline = line.split("  # ", 1)[1] if "  # " in line else ""
            comments[target] = inline or " ".join(above)  # (the last class naming it: ScorerSpec comes first)
        above = []
    return comments


def test_a_parameters_cell_says_what_the_schema_says_of_each_parameter():
    # 01_construct's cell kept "rows with < 2 distinct candidates" after the schema gained `keep`
    told = schema_comments()
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cell = next(c for c in json.loads(path.read_text())["cells"] if "parameters" in c["metadata"].get("tags", []))
        lines = "".join(cell["source"]).splitlines()
        for i, line in enumerate(lines):
            if line.startswith("#") or " = " not in line:
                continue
            name = line.split(" = ")[0]
            said = line.split("  # ", 1)[1] if "  # " in line else ""
            k = i
            while not said and k and lines[k - 1].startswith("# ") and not lines[k - 1].startswith(PARAMETERS_HEADER):
                k -= 1
            said = said or " ".join(x[2:] for x in lines[k:i])
            if told.get(name) and said:
                assert said == told[name], f"{path.name}: {name}: the cell says {said!r}, the schema {told[name]!r}"
