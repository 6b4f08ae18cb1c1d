"""Where the benchmark scripts keep their figures: benchmarks/results/<name>-<UTC time>.json."""

import json
from datetime import datetime, timezone
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def save_json(result: dict, name: str) -> Path:
    """Write `result` to benchmarks/results/<name>-<UTC time>.json and return the path."""
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}-{datetime.now(timezone.utc):%Y%m%d-%H%M%S}.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    return path
