"""Executed notebooks stay readable and light: one progress output per stage, no `datasets` widgets, no bare
path reprs; plain papermill runs without ipykernel's TCP warning."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOISE = ("Generating train split", "Creating parquet from Arrow", "Generating train_prefs split", "Map:",
         "Kernel is running over TCP")


def outputs(notebook: Path) -> list[tuple[int, str, str]]:
    """(cell index, output type, its text) of every output of an executed notebook."""
    found = []
    for index, cell in enumerate(json.loads(notebook.read_text())["cells"]):
        for output in cell.get("outputs", []):
            text = output.get("text") or output.get("data", {}).get("text/plain", "")
            found.append((index, output["output_type"], "".join(text)))
    return found


def test_scoring_progress_is_one_output_updated_in_place(demo_run):
    shown = outputs(demo_run / "notebooks" / "01_construct.ipynb")
    progress = [(cell, text) for cell, _, text in shown if text.startswith("PairRM scoring")]
    assert len(progress) == 1, progress
    assert progress[0][1].startswith("PairRM scoring: 100% (40/40 prompts)")


def test_no_datasets_widgets_and_no_bare_paths_in_the_executed_notebooks(demo_run):
    for name in ("01_construct", "02_analyze", "03_card"):
        for cell, kind, text in outputs(demo_run / "notebooks" / f"{name}.ipynb"):
            assert not any(noise in text for noise in NOISE), (name, cell, text[:200])
            assert not (kind == "execute_result" and text.startswith(("PosixPath(", "WindowsPath("))), (name, cell)
    shown = outputs(demo_run / "notebooks" / "01_construct.ipynb")
    assert any(text == f"run directory: {demo_run}\n" for _, _, text in shown)


def test_plain_papermill_prints_no_tcp_warning(papermill_cli, sample_dir, tmp_path):
    proc = papermill_cli(ROOT / "notebooks" / "02_analyze.ipynb", tmp_path / "out.ipynb", "-k", "repro",
                         "-p", "dataset", sample_dir / "train_prefs.jsonl", "-p", "run_dir", tmp_path / "run",
                         "-p", "bootstrap_resamples", "100")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "without encryption" not in proc.stdout + proc.stderr
    assert (tmp_path / "run" / "metrics.json").is_file()


def test_the_card_preview_links_its_figures_instead_of_inlining_them(demo_run):
    executed = demo_run / "notebooks" / "03_card.ipynb"
    text = executed.read_text()
    assert "data:image/png;base64" not in text and executed.stat().st_size < 250_000
    cells = json.loads(text)["cells"]
    shown = ["".join(o.get("data", {}).get("text/markdown", "")) for c in cells for o in c.get("outputs", [])]
    preview = [markdown for markdown in shown if "](../dataset/figures/" in markdown]
    assert preview  # the markdown preview, its figures linked from the executed notebook's folder
    for link in re.findall(r"\]\((\.\./dataset/figures/[^)]+)\)", preview[0]):
        assert (executed.parent / link).resolve().is_file(), link
