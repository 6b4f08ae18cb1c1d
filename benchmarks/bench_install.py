"""`make install` from a fresh clone: this checkout against an older commit, side by side, in turn (A B A B ...).

    python benchmarks/bench_install.py --against 6ee05d1 --runs 3

Each run removes the clone's .venv and times `make install` as a whole process (wall and CPU seconds of the
children). Both clones share this machine's package caches (pip's and uv's), as a developer's machine does.
Prints the medians and the ratio A/B; writes benchmarks/results/install-<time>.json.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import shutil
import statistics
import subprocess
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from saved import save_json  # benchmarks/saved.py, beside this script

ROOT = Path(__file__).resolve().parents[1]


def clone(ref: str, into: Path) -> Path:
    subprocess.run(["git", "clone", "-q", str(ROOT), str(into)], check=True)
    subprocess.run(["git", "checkout", "-q", ref], cwd=into, check=True)
    return into


def timed_install(folder: Path) -> dict[str, float]:
    shutil.rmtree(folder / ".venv", ignore_errors=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(["make", "install"], cwd=folder, check=True, capture_output=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", default="6ee05d1", help="the commit to compare with (default: pip, unlocked)")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    with tempfile.TemporaryDirectory() as tmp:
        a, b = clone(head, Path(tmp) / "a"), clone(args.against, Path(tmp) / "b")
        runs: dict[str, list[dict]] = {"a": [], "b": []}
        for _ in range(args.runs):
            runs["a"].append(timed_install(a))
            runs["b"].append(timed_install(b))
    median = {k: {m: statistics.median(r[m] for r in v) for m in ("wall_s", "cpu_s")} for k, v in runs.items()}
    ratio = statistics.median(x["wall_s"] / y["wall_s"] for x, y in zip(runs["a"], runs["b"]))
    result = {"when": datetime.now(timezone.utc).isoformat(timespec="seconds"), "machine": {
        "cpu_count": os.cpu_count(), "processor": platform.processor() or platform.machine(),
        "load_average": os.getloadavg()}, "a": {"commit": head, "runs": runs["a"], "median": median["a"]},
        "b": {"commit": args.against, "runs": runs["b"], "median": median["b"]}, "wall_ratio_a_over_b": ratio}
    out = save_json(result, "install")
    print(f"make install, fresh clone: {head} {median['a']['wall_s']:.1f} s wall ({median['a']['cpu_s']:.1f} s CPU); "
          f"{args.against} {median['b']['wall_s']:.1f} s wall ({median['b']['cpu_s']:.1f} s CPU); "
          f"ratio {ratio:.3f} (median of pairs) -> {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
