"""Shared fixtures: the real UltraFeedback sample (never committed) and tiny offline checkpoints."""

from __future__ import annotations

import json
import os
from pathlib import Path

# Tests never reach the hub (these machines cannot): fail fast instead of retrying the network.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("MPLBACKEND", "Agg")

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_SAMPLE = ROOT.parent / "shared" / "data" / "ultrafeedback_sample"


def read_jsonl(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


@pytest.fixture(scope="session")
def sample_dir() -> Path:
    """The folder of real UltraFeedback rows laid beside the project (skips where it is absent)."""
    if not (SHARED_SAMPLE / "train_prefs_1000.jsonl").exists():
        pytest.skip(f"real UltraFeedback sample not found at {SHARED_SAMPLE}")
    return SHARED_SAMPLE


@pytest.fixture(scope="session")
def train_rows(sample_dir: Path) -> list[dict]:
    return read_jsonl(sample_dir / "train_prefs_1000.jsonl")


@pytest.fixture(scope="session")
def test_rows(sample_dir: Path) -> list[dict]:
    return read_jsonl(sample_dir / "test_prefs_200.jsonl")


@pytest.fixture(scope="session")
def tiny_pairrm_dir(tmp_path_factory) -> Path:
    """A tiny random PairRM checkpoint in llm-blender's layout, built offline, deterministically."""
    from repro.scorers.tiny import build_tiny_pairrm

    return build_tiny_pairrm(tmp_path_factory.mktemp("tiny-pairrm"))


@pytest.fixture(scope="module")
def one_torch_thread():
    """One torch thread for a module's tiny models: on shared CI cores extra threads only spin (5x slower)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
