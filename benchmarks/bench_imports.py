"""What the light paths cost to import (a fresh process each): `repro --help`'s parser, `repro run --check`'s
sub-packages, `repro score --help`'s scorers, 01_construct's stages, this checkout's `src` against another's
(`--vs SRC`), alternated so that a change in the machine's load hits both.

    python benchmarks/bench_imports.py --vs /tmp/src-79e0617/src
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from saved import save_json

PATHS = {  # what each path imports, as its command does
    "repro --help": "from repro.cli import build_parser; build_parser().format_help()",
    "repro run --check's imports": "import repro.formats, repro.parameters, repro.jobs, repro.analysis, repro.card, "
                                   "repro.construct, repro.cli",
    "repro score --help": "import repro.cli.score",
    "01_construct's stages": "import repro.construct.stages",
}
ONE = "import json, sys, time\nstart = time.perf_counter()\nexec(sys.argv[1])\n" \
      "print(json.dumps(time.perf_counter() - start))"


def seconds(src: Path, code: str) -> float:
    env = dict(os.environ, PYTHONPATH=str(src))
    done = subprocess.run([sys.executable, "-c", ONE, code], env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--vs", type=Path, required=True, help="another checkout's src folder (the baseline)")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args(argv)
    here = Path(__file__).resolve().parents[1] / "src"
    result = {}
    for name, code in PATHS.items():
        times: dict[str, list[float]] = {"baseline": [], "this checkout": []}
        for _ in range(args.repeats):
            times["baseline"].append(seconds(args.vs, code))
            times["this checkout"].append(seconds(here, code))
        ratios = [b / a for a, b in zip(times["baseline"], times["this checkout"])]
        result[name] = {"seconds": times, "median_s": {k: statistics.median(v) for k, v in times.items()},
                        "ratio_this_over_baseline": {"median": statistics.median(ratios), "min": min(ratios),
                                                     "max": max(ratios)}}
        median = result[name]["median_s"]
        print(f"{name:>28}: baseline {median['baseline']:.2f} s, this checkout {median['this checkout']:.2f} s, "
              f"pair by pair {statistics.median(ratios):.2f} ({min(ratios):.2f} to {max(ratios):.2f})")
    print(save_json(result, "imports"))


if __name__ == "__main__":
    main()
