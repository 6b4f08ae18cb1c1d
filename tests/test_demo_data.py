"""The embedded demo sample: shape, coverage and quirks of src/repro/data/demo_prompts.jsonl."""

from __future__ import annotations

import json
import re
from collections import Counter
from importlib.resources import as_file, files
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

DEMO = files("repro") / "data" / "demo_prompts.jsonl"
REQUIRED = ("prompt", "reference_response", "resp0", "resp1", "resp2")
OPTIONAL = ("resp3",)
MIN_PER_CATEGORY = {
    "instruction": 1, "qa": 1, "coding": 5, "math": 5, "false_premise": 5,
    "advice": 1, "creative": 1, "extraction": 1, "reasoning": 1, "multilingual": 1,
}
# Deliberate quirks, as in real UltraFeedback rows.
IDENTICAL_CANDIDATES_PROMPT = "What is the capital of Australia?"
ONE_WORD_ANSWER_PROMPT = "Is a tomato a fruit? Answer briefly and explain."
MAX_TEXT_CHARS = 800  # short texts keep the CPU demo fast


@pytest.fixture(scope="module")
def demo_rows() -> list[dict]:
    text = DEMO.read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def resp_columns(row: dict) -> list[str]:
    return sorted((k for k in row if k.startswith("resp")), key=lambda k: int(k[4:]))


def test_loads_with_datasets(demo_rows, tmp_path):
    from datasets import Dataset

    with as_file(DEMO) as path:
        ds = Dataset.from_json(str(path), cache_dir=str(tmp_path))
    assert ds.num_rows == len(demo_rows) >= 32
    assert "prompt_id" not in ds.column_names
    assert set(ds.column_names) == set(REQUIRED + OPTIONAL + ("quality", "category"))
    # rows without a fourth candidate come back as None, which the loader treats as absent
    for row, loaded in zip(demo_rows, ds):
        assert loaded["resp3"] == row.get("resp3")


def test_rows_well_formed(demo_rows):
    allowed = set(REQUIRED + OPTIONAL + ("quality", "category"))
    for i, row in enumerate(demo_rows):
        assert set(row) <= allowed, f"row {i}: unexpected keys {set(row) - allowed}"
        for key in REQUIRED:
            assert isinstance(row[key], str) and row[key].strip(), f"row {i}: {key}"
        if "resp3" in row:
            assert isinstance(row["resp3"], str) and row["resp3"].strip(), f"row {i}: resp3"
        cols = resp_columns(row)
        assert cols[:3] == ["resp0", "resp1", "resp2"] and set(cols) <= {"resp0", "resp1", "resp2", "resp3"}
        quality = row["quality"]
        assert len(quality) == len(cols), f"row {i}: quality has {len(quality)} entries for {len(cols)} candidates"
        assert all(isinstance(q, int) and 1 <= q <= 5 for q in quality), f"row {i}: {quality}"
        for key in [*REQUIRED, *cols[3:]]:
            assert len(row[key]) <= MAX_TEXT_CHARS, f"row {i}: {key} has {len(row[key])} characters"


def test_prompts_unique(demo_rows):
    prompts = [row["prompt"] for row in demo_rows]
    assert len(set(prompts)) == len(prompts)


def test_category_coverage(demo_rows):
    counts = Counter(row["category"] for row in demo_rows)
    assert set(counts) == set(MIN_PER_CATEGORY)
    for category, minimum in MIN_PER_CATEGORY.items():
        assert counts[category] >= minimum, f"{category}: {counts[category]} rows, want >= {minimum}"
    multilingual = [row["prompt"] for row in demo_rows if row["category"] == "multilingual"]
    assert any(re.search(r"[\u4e00-\u9fff]", p) for p in multilingual)


def test_candidates_differ_in_quality_and_best_is_shuffled(demo_rows):
    for row in demo_rows:
        assert max(row["quality"]) - min(row["quality"]) >= 2, row["prompt"]
    best_positions = Counter(row["quality"].index(max(row["quality"])) for row in demo_rows)
    assert len(best_positions) >= 3
    assert best_positions[0] < len(demo_rows) / 2
    with_four = sum("resp3" in row for row in demo_rows)
    assert len(demo_rows) / 3 <= with_four <= 2 * len(demo_rows) / 3


def test_quirk_rows(demo_rows):
    by_prompt = {row["prompt"]: row for row in demo_rows}
    duplicated = [row["prompt"] for row in demo_rows
                  if len({row[c] for c in resp_columns(row)}) < len(resp_columns(row))]
    assert duplicated == [IDENTICAL_CANDIDATES_PROMPT]
    row = by_prompt[IDENTICAL_CANDIDATES_PROMPT]
    texts = [row[c] for c in resp_columns(row)]
    twins = [i for i, t in enumerate(texts) if texts.count(t) > 1]
    assert len({row["quality"][i] for i in twins}) == 1  # same text, same judgement
    row = by_prompt[ONE_WORD_ANSWER_PROMPT]
    assert "Yes." in [row[c] for c in resp_columns(row)]


def test_not_copied_from_ultrafeedback(demo_rows, train_rows, test_rows):
    real_prompts = {r["prompt"] for r in train_rows + test_rows}
    real_responses = {r[k][-1]["content"] for r in train_rows + test_rows for k in ("chosen", "rejected")}
    for row in demo_rows:
        assert row["prompt"] not in real_prompts, row["prompt"]
        for col in resp_columns(row):
            assert row[col] not in real_responses or len(row[col]) < 40, (row["prompt"], col)
