"""Benchmark: the card's facts (`repro.card.facts.gather_facts`, 03_card's first step: the dataset read, the rows the
card's code keeps counted, metrics.json checked against the scores) on a dataset the size of UltraFeedback's
train_prefs, with the run directory 02_analyze made of it.

    papermill notebooks/02_analyze.ipynb /tmp/02.ipynb -p dataset DATA.jsonl -p run_dir RUN   # once, not timed
    PYTHONPATH=src .venv/bin/python benchmarks/bench_card.py --dataset DATA.jsonl --run RUN [--repeats 3]

Prints the seconds of each call and writes JSON into benchmarks/results/. Run it under `farm-bench --vs` against
another checkout's src/ for a ratio measured side by side.
"""

from __future__ import annotations

import argparse
import json
import time
from datetime import datetime, timezone
from pathlib import Path

from repro.card.facts import gather_facts
from repro.parameters import CardParams


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", required=True, help="the dataset 02_analyze analysed (card_dataset)")
    parser.add_argument("--run", required=True, help="its run directory (metrics.json, manifest.json)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--output-dir", default=str(Path(__file__).parent / "results"))
    args = parser.parse_args()
    seconds = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        facts = gather_facts(CardParams(card_dataset=args.dataset, run_dir=args.run))
        seconds.append(time.perf_counter() - start)
    result = {"benchmark": "card_facts", "rows": facts.num_examples, "seconds": seconds,
              "at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    print(json.dumps(result))
    out = Path(args.output_dir) / f"card_facts-{datetime.now():%Y%m%d-%H%M%S}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
