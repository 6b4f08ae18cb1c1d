"""Where the benchmark scripts keep their figures (benchmarks/results/<name>-<UTC time>.json), and the sample rows
several of them read (`--sample`)."""

import argparse
import json
import sys
from datetime import datetime, timezone
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
# the 1000 real rows beside a checkout on this project's machines (../shared); elsewhere: --sample PATH
SAMPLE = Path(__file__).resolve().parents[2] / "shared" / "data" / "ultrafeedback_sample" / "train_prefs_1000.jsonl"


def sample_path(value: str) -> Path:
    """`--sample`'s type: an existing jsonl file of UltraFeedback rows, else a one-line usage error naming it."""
    if not Path(value).is_file():
        raise argparse.ArgumentTypeError(f"{value} does not exist: give --sample PATH, a jsonl file of UltraFeedback "
                                         f"rows (e.g. HuggingFaceH4/ultrafeedback_binarized's train_prefs)")
    return Path(value)


def add_sample(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sample", type=sample_path, default=str(SAMPLE), help="jsonl rows (default: %(default)s)")


def save_json(result: dict, name: str, folder: Path = RESULTS) -> Path:
    """Write `result` to <folder>/<name>-<UTC time>.json (benchmarks/results/ unless told) and return the path; the
    command that made it is recorded where the result does not say it."""
    result = {"command": "python " + " ".join(sys.argv), **result}
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}-{datetime.now(timezone.utc):%Y%m%d-%H%M%S}.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    return path
