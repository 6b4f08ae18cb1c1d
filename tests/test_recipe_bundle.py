"""params/recipes/ travel in the wheel (hatch_build.py), and `repro run NAME` finds a recipe by its bare name in a
checkout and in an installed package, whose recipes' `include:` resolves inside the bundled copy."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

from repro import paths
from repro.parameters import load_params_file

ROOT = Path(__file__).resolve().parents[1]
RECIPES = sorted((ROOT / "params" / "recipes").glob("*.yaml"))


def test_the_build_hook_bundles_every_recipe():
    spec = importlib.util.spec_from_file_location("hatch_build", ROOT / "hatch_build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    build_data = {"force_include": {}}
    module.BundleHook(str(ROOT), {}, None, None, str(ROOT / "dist"), "wheel").initialize("standard", build_data)
    bundled = set(build_data["force_include"].values())
    assert len(RECIPES) >= 10 and {f"repro/_bundled/params/recipes/{p.name}" for p in RECIPES} <= bundled
    assert "repro/_bundled/params/demo.yaml" in bundled


def test_a_recipe_is_found_by_its_bare_name_in_a_checkout_and_in_an_installed_copy(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert paths.find_params("sppo_iter1") == ROOT / "params" / "recipes" / "sppo_iter1.yaml"
    verify = paths.find_params("recipes/verify_snorkel_iter1")
    assert verify == ROOT / "params" / "recipes" / "verify_snorkel_iter1.yaml"
    bundled = shutil.copytree(ROOT / "params", tmp_path / "site" / "repro" / "_bundled" / "params")
    monkeypatch.setattr(paths, "_BUNDLED", bundled.parent)
    monkeypatch.setattr(paths, "checkout_root", lambda: None)  # as an installed package has no checkout
    found = paths.find_params("sppo_iter2")
    assert found == bundled / "recipes" / "sppo_iter2.yaml"
    assert load_params_file(found) == load_params_file(ROOT / "params" / "recipes" / "sppo_iter2.yaml")
