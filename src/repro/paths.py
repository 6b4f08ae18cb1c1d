"""Where a run's files go: the one place that names them (see the README's run-directory picture)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

SPLIT = "train_prefs"
NOTEBOOKS_DIR = Path(__file__).resolve().parents[2] / "notebooks"
# every stand-in model (policy or scorer) carries this file, saying how it was built; for a policy
# {"builder", "size", "seed", "random_init"}: random_init = no weights saved, drawn from the seed at load time
STAND_IN_MARKER = "repro_stand_in.json"


def cache_root() -> Path:
    """Where built stand-in models are kept: $REPRO_CACHE, else ~/.cache/repro."""
    env = os.environ.get("REPRO_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "repro"


def project_root() -> Path:
    """The repository root (where notebooks/ and params/ live)."""
    return NOTEBOOKS_DIR.parent


def shard_name(split: str, index: int, num_shards: int) -> str:
    """The parquet file name `push_to_hub` writes for one shard."""
    return f"{split}-{index:05d}-of-{num_shards:05d}.parquet"


@dataclass(frozen=True)
class RunDir:
    """The files of one run, all under `root` (default `runs/<name>/`)."""

    root: Path

    @classmethod
    def of(cls, root: str | Path) -> "RunDir":
        return cls(Path(root))

    @property
    def manifest(self) -> Path:
        return self.root / "manifest.json"

    @property
    def notebooks(self) -> Path:
        return self.root / "notebooks"

    @property
    def dataset(self) -> Path:
        return self.root / "dataset"

    @property
    def data(self) -> Path:
        return self.dataset / "data"

    @property
    def card(self) -> Path:
        return self.dataset / "README.md"

    @property
    def metrics(self) -> Path:
        return self.root / "metrics.json"

    @property
    def figures(self) -> Path:
        return self.root / "figures"

    @property
    def tables(self) -> Path:
        return self.root / "tables"

    @property
    def work(self) -> Path:
        """Intermediate, resumable work (scored and generated chunks); not part of the published dataset."""
        return self.root / "work"

    def work_dir(self, stage: str) -> Path:
        return self.work / stage

    def shards(self, split: str = SPLIT) -> list[Path]:
        return sorted(self.data.glob(f"{split}-*.parquet"))

    def executed_notebook(self, notebook: str) -> Path:
        return self.notebooks / Path(notebook).name
