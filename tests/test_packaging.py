"""The package as a user installs it: a wheel (not editable) carrying the notebooks and params, run from an
empty folder. The installed copy goes into a scratch target put first on PYTHONPATH, so that it, not the
checkout the test environment points at, is what the command and the notebooks' kernel import."""

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import datasets
import nbformat
import pytest

from repro import __version__
from repro.manifest import NOT_FROM_CHECKOUT, sha256_file

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("wheel")
    # hatchling is a dev dependency, so the wheel builds offline without an isolated build environment
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "--no-build-isolation",
                           "--wheel-dir", str(out), "--quiet"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [whl] = out.glob("repro-*.whl")
    return whl


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory):
    """The wheel installed without its dependencies (those of the test environment serve) into a target."""
    target = tmp_path_factory.mktemp("site")
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-compile", "--target", str(target),
                           str(wheel), "--quiet"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "REPRO_HOME")}
    env["PYTHONPATH"] = str(target)  # before site-packages, where an editable install points at a checkout
    return target, env


def test_the_wheel_carries_every_notebook_and_params_file(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    notebooks = sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))
    params = sorted(p.name for p in (ROOT / "params").glob("*.yaml"))
    assert {"01_construct.ipynb", "02_analyze.ipynb", "03_card.ipynb"} <= set(notebooks)
    assert {"demo.yaml", "demo_generate.yaml", "part2_mini_1.yaml"} <= set(params)
    assert {f"repro/_bundled/notebooks/{n}" for n in notebooks} <= names
    assert {f"repro/_bundled/params/{n}" for n in params} <= names
    recipes = sorted(p.name for p in (ROOT / "params" / "recipes").glob("*.yaml"))
    assert "sppo_iter1.yaml" in recipes and {f"repro/_bundled/params/recipes/{n}" for n in recipes} <= names
    assert "repro/data/demo_prompts.jsonl" in names  # the embedded demo travels too
    assert "repro/data/demo_prompts.jsonl" in names and "repro/paths.py" in names
    templates = sorted(p.name for p in (ROOT / "src" / "repro" / "card" / "templates").iterdir())
    assert {"card.md.jinja", "sections.jinja", "en.jinja", "zh.jinja"} <= set(templates)
    assert {f"repro/card/templates/{n}" for n in templates} <= names  # the card's sentences travel too
    assert "repro/cli/templates/selfcheck.md.jinja" in names  # and selfcheck.md's layout
    prose = sorted(p.name for p in (ROOT / "src" / "repro" / "analysis" / "templates").iterdir())
    assert {"report.jinja", "compare.jinja"} <= set(prose)
    assert {f"repro/analysis/templates/{n}" for n in prose} <= names  # and the analysis's and comparison's
    assert f"repro-{__version__}.dist-info/METADATA" in names
    assert "repro/_bundled/requirements.lock" in names  # what the manifest compares the installed packages with
    bundled = sorted(n.rsplit("/", 1)[1] for n in names if n.startswith("repro/_bundled/"))
    # nothing else (checkpoints, stray runs) rides along
    assert bundled == sorted(notebooks + params + recipes + ["requirements.lock"])


def test_the_installed_copy_is_what_python_imports(installed):
    target, env = installed
    proc = subprocess.run([sys.executable, "-c", "import repro.paths as p; print(p.__file__); print(p.checkout_root())"],
                          env=env, cwd=target, capture_output=True, text=True, timeout=60)
    assert proc.stdout.split() == [str(target / "repro" / "paths.py"), "None"], proc.stderr
    version = subprocess.run([str(target / "bin" / "repro"), "--version"], env=env, capture_output=True, text=True)
    assert version.stdout.startswith(f"repro {__version__} ({NOT_FROM_CHECKOUT}"), version.stderr


def test_the_installed_copy_finds_the_card_templates(installed):
    target, env = installed
    code = ("import sys, repro.card as c; print(sys.modules['repro.card.publish'].__file__); "
            "print(c.phrases('zh').h_summary)")
    proc = subprocess.run([sys.executable, "-c", code], env=env, cwd=target, capture_output=True, text=True, timeout=120)
    assert proc.stdout.splitlines() == [str(target / "repro" / "card" / "publish.py"), "## 数据集概述"], proc.stderr


def test_repro_run_demo_from_an_empty_folder(installed, tmp_path):
    target, env = installed
    work = tmp_path / "work"
    work.mkdir()
    proc = subprocess.run([str(target / "bin" / "repro"), "run", "demo", "--set", "limit=8",
                           "--set", "bootstrap_resamples=200"],
                          env=env, cwd=work, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sorted(p.name for p in work.iterdir()) == ["runs"]  # all it wrote is the run
    run = work / "runs" / "demo"
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["status"] == "complete"
    assert manifest["environment"]["repro"] == __version__
    assert manifest["environment"]["git"] == {"commit": NOT_FROM_CHECKOUT, "dirty": None}
    assert manifest["parameters"]["run_dir"] == str(run) and manifest["counts"]["sliced"] == 8
    ds = datasets.load_dataset(str(run / "dataset"), split="train_prefs")
    assert len(ds) == manifest["counts"]["kept"] >= 1 and set(ds.column_names) >= {"chosen", "rejected", "score_chosen"}
    for name in ("01_construct", "02_analyze", "03_card"):
        executed = json.loads((run / "notebooks" / f"{name}.ipynb").read_text())
        assert all(c["metadata"].get("papermill", {}).get("exception") in (None, False) for c in executed["cells"])
        assert manifest["notebooks"][name]["status"] == "done"
    assert json.loads((run / "metrics.json").read_text())["n"] == len(ds)
    card = (run / "dataset" / "README.md").read_text()  # it read "git commit `not from a checkout` (uncommitted ...)"
    assert "repro installed as a package, not from a git checkout" in card and "uncommitted changes: unknown" not in card
    for rel, out in manifest["outputs"].items():
        assert sha256_file(run / rel) == out["sha256"], rel


def test_the_kernel_imports_the_installed_copy(installed, tmp_path):
    """The notebooks' kernel (the `repro` kernel, as `repro run` uses it) sees the wheel's repro first."""
    target, env = installed
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("import repro.paths, sys\nprint(repro.paths.__file__)\nprint(sys.path)")]
    nbformat.write(nb, tmp_path / "where.ipynb")
    proc = subprocess.run([sys.executable, "-m", "papermill", "where.ipynb", "out.ipynb", "-k", "repro"],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = nbformat.read(tmp_path / "out.ipynb", as_version=4).cells[0].outputs[0]["text"]
    assert text.splitlines()[0] == str(target / "repro" / "paths.py")


def test_repro_notebooks_copies_the_packaged_files(installed, tmp_path):
    target, env = installed
    proc = subprocess.run([str(target / "bin" / "repro"), "notebooks", "explore"], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    project = tmp_path / "explore"
    for folder, pattern in (("notebooks", "*.ipynb"), ("params", "*.yaml")):
        for src in (ROOT / folder).glob(pattern):
            assert (project / folder / src.name).read_bytes() == src.read_bytes()
    assert (project / ".repro-project").is_file()


def test_version_from_the_checkout_names_its_commit(capsys):
    from repro.cli import main

    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"repro {__version__} (checkout {ROOT}, git commit {commit}") and NOT_FROM_CHECKOUT not in out
