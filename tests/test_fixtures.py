"""The committed UltraFeedback fixture keeps what the tests rely on (see tests/fixtures/ultrafeedback/PROVENANCE.md)."""

from __future__ import annotations

import hashlib


def answer(row: dict, side: str) -> str:
    return row[side][-1]["content"]


def test_fixture_is_small_and_in_h4s_schema(sample_dir, train_rows, test_rows):
    assert (len(train_rows), len(test_rows)) == (200, 100)
    assert sum(f.stat().st_size for f in sample_dir.iterdir()) < 1_000_000
    keys = {"prompt", "prompt_id", "chosen", "rejected", "messages", "score_chosen", "score_rejected", "source_index"}
    for row in train_rows + test_rows:
        assert set(row) == keys
        assert row["prompt_id"] == hashlib.sha256(row["prompt"].encode("utf-8")).hexdigest()
        assert row["chosen"][0] == row["rejected"][0] == {"content": row["prompt"], "role": "user"}
        assert row["messages"] == row["chosen"]
    assert not {r["prompt_id"] for r in train_rows} & {r["prompt_id"] for r in test_rows}


def test_fixture_keeps_the_quirks_of_real_data(train_rows, test_rows):
    rows = train_rows + test_rows
    assert sum(r["score_chosen"] == r["score_rejected"] for r in rows) >= 10  # ties
    assert sum(answer(r, "chosen") == answer(r, "rejected") for r in rows) >= 4  # identical pairs
    assert any(answer(r, "chosen") == "" for r in rows) and any(answer(r, "rejected") == "" for r in rows)
    # long rows, for truncation at PairRM's 1224 / 412 token limits: prompts of ~1000 words, answers of ~800
    assert sum(len(r["prompt"].split()) > 900 for r in train_rows) >= 2
    assert sum(max(len(answer(r, s).split()) for s in ("chosen", "rejected")) > 500 for r in train_rows) >= 2
