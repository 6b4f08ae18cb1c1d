"""Where the benchmark scripts keep their figures: benchmarks/results/<name>-<UTC time>.json."""

import json
from datetime import datetime, timezone
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def save_json(result: dict, name: str, folder: Path = RESULTS) -> Path:
    """Write `result` to <folder>/<name>-<UTC time>.json (benchmarks/results/ unless told) and return the path."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}-{datetime.now(timezone.utc):%Y%m%d-%H%M%S}.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    return path
