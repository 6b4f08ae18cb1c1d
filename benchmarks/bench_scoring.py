"""`repro bench`: the PairRM engine against llm-blender's `Blender.rank` (batch sizes 1 and 8), or with `--kind
sequence_classifier` the reward-model engine against padded batches of 8, timed side by side in one process.

    .venv/bin/repro bench --help      (or: .venv/bin/python benchmarks/bench_scoring.py --help)

The harness lives beside the other benchmarks, not in the package; `repro bench` runs it from a checkout.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import partial
from pathlib import Path
from typing import Any, get_args

import numpy as np
import torch

from repro.construct.scoring import score_candidates
from repro.errors import ParameterError, counted
from repro.jobs import build_once
from repro.parameters import STAND_IN_VERSION, ScorerKind, default_batch_tokens
from repro.paths import cache_root, check_folder
from repro.scorers import load_scorer, resolve_kind
from repro.scorers.blender_compat import BLENDER_DTYPES, BlenderScorer, blender_runs
from repro.scorers.common import resolve_device, resolve_dtype
from repro.scorers.sequence_classifier import reward_model_dtype
from repro.scorers.tiny import build_tiny_pairrm, build_tiny_reward_model
from repro.sources import demo_path, iter_jsonl
from repro.cli.score import RUN, read_rows
from repro.cli.measure import (PART2_MINI_1_PROMPTS, Contender, alternate, engine_passes, gpu_use,
                      machine_info, pairrm_contenders)

# Character-length quantiles (0, 5, ..., 100 %) of UltraFeedback `train_prefs` prompts and responses, measured on a
# seed-42 sample of 1000 rows; generated rows follow them.
PROMPT_CHAR_QUANTILES = (17, 40, 54, 69, 88, 109, 134, 173, 221, 279, 363, 411, 493, 584, 672, 801, 1000, 1267,
                         1770, 2534, 6308)
RESPONSE_CHAR_QUANTILES = (1, 24, 69, 111, 178, 243, 331, 454, 551, 701, 863, 1058, 1232, 1458, 1695, 1947, 2177,
                           2468, 2769, 3277, 5487)

# Random PairRM-architecture models. "mid": for CPUs; its tokenizer of a few thousand pieces, trained on the
# benchmark's kind of text, gives about 800 tokens per UltraFeedback pass as the real one does. "large":
# deberta-v3-large's shape, PairRM's cost per token (its embedding has one row per tokenizer entry: same FLOPs).
MODEL_SIZES = {
    "tiny": dict(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64, vocab_size=2000),  # smoke runs
    "mid": dict(hidden_size=384, num_layers=6, num_heads=6, intermediate_size=1536, vocab_size=8000),
    "large": dict(hidden_size=1024, num_layers=24, num_heads=16, intermediate_size=4096, vocab_size=8000),
}
TOKENIZER_CORPUS_ROWS = 500


def max_abs_diff(a: list[list[float]], b: list[list[float]]) -> float:
    return max((abs(x - y) for ra, rb in zip(a, b) for x, y in zip(ra, rb)), default=0.0)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", type=Path, default=None,
                        help="jsonl of H4 (chosen/rejected: the candidates) or {prompt, candidates} rows; default: "
                             "generated rows with UltraFeedback's lengths")
    parser.add_argument("--prompts", type=int, default=None, help="prompts to time (default: 16 on CPU, 512 on GPU)")
    parser.add_argument("--slice", type=int, default=None, dest="slice_size",
                        help="prompts per alternation slice (default: 8 on CPU, 128 on GPU)")
    parser.add_argument("--model", default=None,
                        help="a checkpoint (hub id or directory; PairRM or a sequence-classifier reward model) instead "
                             "of the random one built for the device")
    parser.add_argument("--size", choices=sorted(set(MODEL_SIZES) | {"1b"}), default=None,
                        help="random model to build (default: mid on CPU; on GPU large, or 1b for a reward model)")
    parser.add_argument("--kind", default="auto", choices=get_args(ScorerKind),
                        help="auto (--model's, from its config.json, as repro score; pairrm without --model), pairrm: "
                             "the engine vs llm-blender; sequence_classifier: vs padded batches of 8")
    parser.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N")
    parser.add_argument("--dtype", default="auto",
                        help="auto (fp16 on CUDA as llm-blender, fp32 on CPU) | fp32 | fp16 | bf16 (not with "
                             "llm-blender's contenders: --skip bs1,bs8, or --kind sequence_classifier)")
    parser.add_argument("--batch-tokens", default=None,
                        help="the engine's token budget; a comma-separated list times each (the first one gives the "
                             f"speed-ups); default: the engine's on the device, {default_batch_tokens('cpu')} on CPU")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    parser.add_argument("--job-prompts", type=int, default=None,
                        help=f"also time score_candidates alone on this many generated prompts x 2 candidates "
                             f"(default: {PART2_MINI_1_PROMPTS}, part2_mini_1's size, on GPU; 0 on CPU)")
    parser.add_argument("--skip", default="", help="comma-separated contenders to leave out: bs1, bs8")
    parser.add_argument("--seed", type=int, default=0, help="seed of the generated rows and the random model")
    parser.add_argument("--output-dir", type=Path, default=Path(__file__).parent / "results",
                        help="where the JSON result goes (default: benchmarks/results)")


def _corpus_sentences() -> list[str]:
    """Sentences of the embedded demo sample (UltraFeedback-style prompts and answers): the generated text."""
    return [s.strip() for _, row in iter_jsonl(demo_path()) for value in row.values() if isinstance(value, str)
            for s in re.split(r"(?<=[.!?:])\s+|\n+", value) if s.strip()]


def _text_of_length(rng: random.Random, sentences: list[str], chars: int) -> str:
    out, size = [], 0
    while size < chars:
        sentence = rng.choice(sentences)
        out.append(sentence)
        size += len(sentence) + 1
    return " ".join(out)[:max(1, chars)].rstrip() or "."


def _draw_length(rng: random.Random, quantiles: tuple[int, ...]) -> int:
    u = rng.random() * (len(quantiles) - 1)
    lo = int(u)
    hi = min(lo + 1, len(quantiles) - 1)
    return int(round(quantiles[lo] + (quantiles[hi] - quantiles[lo]) * (u - lo)))


def generated_rows(n: int, seed: int = 0, n_candidates: int = 2) -> tuple[list[str], list[list[str]]]:
    """`n` prompts with `n_candidates` answers each, of UltraFeedback's character lengths, from English sentences."""
    rng = random.Random(seed)
    sentences = _corpus_sentences()
    prompts = [_text_of_length(rng, sentences, _draw_length(rng, PROMPT_CHAR_QUANTILES)) for _ in range(n)]
    candidates = [[_text_of_length(rng, sentences, _draw_length(rng, RESPONSE_CHAR_QUANTILES))
                   for _ in range(n_candidates)] for _ in range(n)]
    return prompts, candidates


def corpus_of(prompts: list[str], candidates: list[list[str]]) -> list[str]:
    """The texts a random model's tokenizer learns from: the first TOKENIZER_CORPUS_ROWS rows'."""
    return [t for p, c in zip(prompts[:TOKENIZER_CORPUS_ROWS], candidates) for t in [p, *c]]


def generated_model(size: str, prompts: int, seed: int = 0, init: float = 1.0) -> Path:
    """The random PairRM that `repro bench --size SIZE --prompts PROMPTS --seed SEED` builds on generated rows
    (`init`: its weights' initializer_range)."""
    return bench_model(size, corpus_of(*generated_rows(max(prompts, TOKENIZER_CORPUS_ROWS), seed=seed)), seed,
                       init=init)


def bench_model(size: str, corpus: list[str], seed: int, cache: Path | None = None, init: float = 1.0) -> Path:
    """A random PairRM-architecture checkpoint of `size` (llm-blender layout), built once per corpus and cached.
    `init` 1.0 spreads the scores but magnifies rounding; 0.1 does not (benchmarks/RESULTS.md)."""
    shape = MODEL_SIZES[size]
    described = [STAND_IN_VERSION, size, shape, seed, corpus] + ([init] if init != 1.0 else [])
    key = hashlib.sha256(json.dumps(described).encode()).hexdigest()[:12]
    target = (cache or cache_root() / "bench") / f"pairrm-{size}-{key}"
    return build_once(target, lambda folder: build_tiny_pairrm(folder, seed=seed, extra_corpus=corpus,
                                                               initializer_range=init, **shape))


def bench_reward_model(size: str, seed: int) -> Path:
    """A random Llama reward model of `size`, built once into the cache."""
    target = cache_root() / "bench" / f"reward-llama-{size}-seed{seed}-v{STAND_IN_VERSION}"
    return build_once(target, lambda folder: build_tiny_reward_model(folder, "llama", seed=seed,
                                                                     **REWARD_SIZES[size]))


@dataclass
class Settings:
    """The command line, resolved for the device and the kind: what one benchmark run does."""

    device: Any
    dtype: str
    size: str
    prompts: int
    slice_size: int
    budgets: list[int]
    job_prompts: int = 0
    skip: set[str] = field(default_factory=set)


def _settings(args: argparse.Namespace) -> Settings:
    for option, value, least in (("--prompts", args.prompts, 1), ("--slice", args.slice_size, 1),
                                 ("--threads", args.threads, 1), ("--job-prompts", args.job_prompts, 0)):
        if value is not None and value < least:  # 0 must not read as "not given"
            raise ParameterError(f"{option} {value} must be >= {least}.")
    device = resolve_device(args.device)
    on_gpu = device.type == "cuda"
    reward = args.kind == "sequence_classifier"
    default_budget = default_batch_tokens(device.type)  # what a run uses (it timed 4096 for reward models on CPU)
    try:
        budgets = [int(b) for b in str(args.batch_tokens or default_budget).split(",") if b.strip()]
    except ValueError:
        raise ParameterError(f"--batch-tokens {args.batch_tokens!r}: expected integers separated by commas.") from None
    if not budgets or min(budgets) < 1:
        raise ParameterError(f"--batch-tokens {args.batch_tokens!r}: every budget must be >= 1.")
    if reward:
        size = args.size or ("1b" if on_gpu else "mid")
        if size not in REWARD_SIZES:
            raise ParameterError(f"--size {size!r}: reward models come in {', '.join(REWARD_SIZES)}.")
        return Settings(device, reward_model_dtype(args.dtype, device), size, args.prompts or (256 if on_gpu else 16),
                        args.slice_size or (64 if on_gpu else 8), budgets)
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    if skip - {"bs1", "bs8"}:
        raise ParameterError(f"--skip {args.skip!r}: only 'bs1' and 'bs8' can be left out.")
    if args.size is not None and args.size not in MODEL_SIZES:
        raise ParameterError(f"--size {args.size}: a random PairRM is built in sizes {', '.join(sorted(MODEL_SIZES))}; "
                             f"'{args.size}' is for --kind sequence_classifier.")
    dtype = resolve_dtype(args.dtype, device)
    if skip != {"bs1", "bs8"} and not blender_runs(dtype, device):  # (said before any model is built)
        raise ParameterError(f"--dtype {args.dtype} on {device}: repro bench times llm-blender's code too, which "
                             f"runs {BLENDER_DTYPES}; choose one of those, or --skip bs1,bs8 to time repro's engine "
                             f"alone.")
    # on CPU one slice is one llm-blender batch of 8: 16 prompts keep a 2-core run under 5 minutes
    return Settings(device=device, dtype=dtype, size=args.size or ("large" if on_gpu
                    else "mid"), prompts=args.prompts or (512 if on_gpu else 16),
                    slice_size=args.slice_size or (128 if on_gpu else 8), budgets=budgets,
                    job_prompts=PART2_MINI_1_PROMPTS if args.job_prompts is None and on_gpu
                    else int(args.job_prompts or 0), skip=skip)


def _inputs(args: argparse.Namespace, n: int) -> tuple[list[str], list[list[str]], str, list[str]]:
    """(prompts, candidates, where they come from, the texts the random model's tokenizer learns from)."""
    if args.data:
        rows = read_rows(args.data, limit=max(n, TOKENIZER_CORPUS_ROWS), option="--data")
        prompts, candidates = [r["prompt"] for r in rows], [r["candidates"] for r in rows]
        source = str(args.data)
    else:
        prompts, candidates = generated_rows(max(n, TOKENIZER_CORPUS_ROWS), seed=args.seed)
        source = f"generated (UltraFeedback character lengths, seed {args.seed})"
    return prompts[:n], candidates[:n], source, corpus_of(prompts, candidates)


def log(line: str) -> None:
    """Progress, not results: to stderr."""
    print(line, file=sys.stderr, flush=True)


def main(args: argparse.Namespace) -> int:
    """Run the benchmark, print the table, write the JSON; the last lines are the speed-ups."""
    args.kind = resolve_kind(args.model, args.kind) if args.model else "pairrm" if args.kind == "auto" else args.kind
    s = _settings(args)
    check_folder(args.output_dir, "--output-dir", "The results (a JSON file) go into a folder: give a new or "
                                                  "existing folder that can be written.")
    if args.threads:
        torch.set_num_threads(int(args.threads))
    started = time.perf_counter()
    reward = args.kind == "sequence_classifier"
    machine = machine_info(str(s.device))
    prompts, candidates, source, corpus = _inputs(args, s.prompts)
    if args.model:
        model, model_desc = args.model, {"model": args.model}
    elif reward:
        log(f"repro bench: building (or reusing) the random '{s.size}' Llama reward model ...")
        model = str(bench_reward_model(s.size, args.seed))
        model_desc = {"model": f"random LlamaForSequenceClassification '{s.size}'", **REWARD_SIZES[s.size]}
    else:
        log(f"repro bench: building (or reusing) the random '{s.size}' PairRM ...")
        model = str(bench_model(s.size, corpus, args.seed))
        model_desc = {"model": f"random PairRM-architecture '{s.size}'", "path": model, **MODEL_SIZES[s.size]}
    results: dict[str, Any] = {
        "when": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": "repro bench " + " ".join(sys.argv[2:] if sys.argv[1:2] == ["bench"] else sys.argv[1:]),
        **({"kind": "sequence_classifier"} if reward else {}), "machine": machine, "device": str(s.device),
        "dtype": s.dtype, "model": model_desc, "data": source, "prompts": len(prompts)}
    (_bench_reward if reward else _bench_pairrm)(args, s, model, prompts, candidates, results)
    results["total_seconds"] = round(time.perf_counter() - started, 1)
    args.output_dir.mkdir(parents=True, exist_ok=True)
    stem = f"bench-{'reward-' if reward else ''}{s.device.type}-{datetime.now().strftime('%Y%m%d-%H%M%S')}"
    out_path = args.output_dir / f"{stem}.json"
    out_path.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    _print_report(results, out_path)
    return 0


def _stats(x: Contender, prompts: int) -> dict[str, float]:
    return {"seconds": round(x.seconds, 3), "prompts_per_second": round(prompts / x.seconds, 4),
            "peak_memory_mb": round(x.peak_extra_bytes / 2 ** 20, 1)}


def _bench_pairrm(args, s: Settings, model: str, prompts, candidates, results: dict[str, Any]) -> None:
    """The engine at each budget, then llm-blender's `Blender.rank` at batch sizes 1 and 8 (one loaded model)."""
    engine = load_scorer(model, device=str(s.device), dtype=s.dtype)
    lengths, useful_flops = engine_passes(engine, prompts, candidates)
    blender = BlenderScorer.load(model, device=str(s.device), dtype=s.dtype) if s.skip != {"bs1", "bs8"} else None
    contenders = pairrm_contenders(engine, s.budgets, blender,
                                   [bs for tag, bs in (("bs1", 1), ("bs8", 8)) if tag not in s.skip])
    log(f"repro bench: {counted(len(prompts), 'prompt')} x {counted(len(candidates[0]), 'candidate')}, "
        f"{len(lengths)} passes of "
        f"{statistics.mean(lengths):.0f} tokens on average (max {max(lengths)}), {s.device} {s.dtype}, "
        f"{counted(torch.get_num_threads(), 'thread')}; slices of {counted(s.slice_size, 'prompt')}")
    alternate(contenders, prompts, candidates, s.slice_size, s.device.type, log)

    first = contenders[0]
    results.update({
        "candidates_per_prompt": sorted({len(c) for c in candidates}), "passes": len(lengths),
        "mean_tokens_per_pass": round(statistics.mean(lengths), 1), "max_tokens_per_pass": max(lengths),
        "slice_size": s.slice_size, "batch_tokens": s.budgets, "useful_gflops": round(useful_flops / 1e9, 1),
        "contenders": {x.name: {**_stats(x, len(prompts)), "useful_tflops": round(useful_flops / x.seconds / 1e12, 4),
                                "max_abs_score_diff_vs_repro": max_abs_diff(x.scores, first.scores)}
                       for x in contenders},
        "speedup": {x.name: round(x.seconds / first.seconds, 3) for x in contenders[1:]},  # > 1: the engine is faster
        "score_scale": max(abs(v) for row in first.scores for v in row)})
    if s.device.type == "cuda":
        log("repro bench: measuring the matmul peak ...")
        results["gpu"] = gpu_use(useful_flops, first.seconds, str(s.device), s.dtype)
    if s.job_prompts:
        log(f"repro bench: a job of {counted(s.job_prompts, 'generated prompt')} x 2 candidates through "
            f"score_candidates ...")
        job_p, job_c = generated_rows(s.job_prompts, seed=args.seed + 1)
        with tempfile.TemporaryDirectory() as work:
            start = time.perf_counter()
            job = score_candidates(job_p, job_c, model=model, backend="repro", kind="pairrm", device=str(s.device),
                                   dtype=s.dtype, batch_tokens=s.budgets[0], chunk_size=RUN["chunk_size"],
                                   num_processes=1, work_dir=Path(work), progress=True)
            results["job"] = {"prompts": s.job_prompts, "candidates_per_prompt": 2,
                              "seconds": round(time.perf_counter() - start, 2),
                              "prompts_per_second": job.info.get("prompts_per_second")}
    if hasattr(os, "getloadavg"):
        results["machine"]["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]


# --kind sequence_classifier: the engine against what a straightforward script does, on the same loaded model and
# inputs: the conversations rendered with the same chat template, 8 at a time in input order, padded per batch.
# Random Llama reward models: "mid" for CPUs, "1b" TinyLlama-1.1B's shape for a GPU (byte-level tokenizer).
REWARD_SIZES = {
    "tiny": dict(hidden_size=32, num_layers=2, num_heads=4, intermediate_size=64),
    "mid": dict(hidden_size=256, num_layers=4, num_heads=4, intermediate_size=1024),
    "1b": dict(hidden_size=2048, num_layers=22, num_heads=32, intermediate_size=5632),
}
BASELINE_BATCH = 8


def baseline(engine, prompts: list[str], candidates: list[list[str]]) -> list[np.ndarray]:
    """Padded batches of 8 conversations in input order through the model's own forward."""
    texts = [engine.render(p, c) for p, cands in zip(prompts, candidates) for c in cands]
    flat: list[float] = []
    for start in range(0, len(texts), BASELINE_BATCH):
        enc = engine.tokenizer(texts[start:start + BASELINE_BATCH], add_special_tokens=False, padding=True,
                               truncation=engine.max_length is not None, max_length=engine.max_length,
                               return_tensors="pt").to(engine.device)
        with torch.inference_mode():
            flat.extend(engine.model(**enc, use_cache=False).logits[:, 0].float().cpu().tolist())
    return np.split(np.array(flat), np.cumsum([len(c) for c in candidates])[:-1])


def _bench_reward(args, s: Settings, model: str, prompts, candidates, results: dict[str, Any]) -> None:
    """The sequence-classifier engine against padded batches of 8."""
    engine = load_scorer(model, kind="sequence_classifier", device=str(s.device), dtype=s.dtype)  # as a run loads it
    lengths = [p.length for p in engine.plan(prompts, candidates)[0]]
    contenders = [*(Contender(f"repro (batch_tokens={b})", partial(engine.score, batch_tokens=b)) for b in s.budgets),
                  Contender(f"padded batches of {BASELINE_BATCH}", partial(baseline, engine))]
    log(f"repro bench: {counted(len(prompts), 'prompt')}, {counted(len(lengths), 'conversation')} of "
        f"{statistics.mean(lengths):.0f} tokens on average (max {max(lengths)}), {s.device} {s.dtype}, "
        f"{counted(torch.get_num_threads(), 'thread')}")
    alternate(contenders, prompts, candidates, s.slice_size, s.device.type, log)
    ours, base = contenders[0], contenders[-1]  # the first budget gives the speed-up
    results.update({
        "conversations": len(lengths), "mean_tokens": round(statistics.mean(lengths), 1), "max_tokens": max(lengths),
        "slice_size": s.slice_size, "batch_tokens": s.budgets,
        "contenders": {x.name: _stats(x, len(prompts)) for x in contenders},
        "max_abs_score_diff": max_abs_diff(ours.scores, base.scores),
        "speedup_vs_padded_batches_of_8": round(base.seconds / ours.seconds, 3)})


def _print_report(results: dict[str, Any], out_path: Path) -> None:
    reward = "kind" in results
    width, diff = (28, "") if reward else (34, f" {'max |diff|':>11}")
    print(f"{'contender':{width}} {'seconds':>8} {'prompts/s':>10} {'peak MB':>9}{diff}")
    for name, r in results["contenders"].items():
        diff = "" if reward else f" {r['max_abs_score_diff_vs_repro']:11.2e}"
        print(f"{name:{width}} {r['seconds']:8.1f} {r['prompts_per_second']:10.3f} {r['peak_memory_mb']:9.0f}{diff}")
    if reward:
        print(f"max |score difference|: {results['max_abs_score_diff']:.2e}")
        print(f"results: {out_path}")
        print(f"speedup vs padded batches of {BASELINE_BATCH}: {results['speedup_vs_padded_batches_of_8']:.2f}x")
        return
    if "gpu" in results:
        g = results["gpu"]
        print(f"engine: {g['engine_useful_tflops']:.1f} useful TFLOP/s = {100 * g['engine_fraction_of_peak']:.1f} % "
              f"of the measured {results['dtype']} matmul peak ({g['matmul_peak_tflops']:.0f} TFLOP/s)")
    if "job" in results:
        j = results["job"]
        size = " (part2_mini_1's size)" if j["prompts"] == PART2_MINI_1_PROMPTS else ""
        print(f"a job of {counted(j['prompts'], 'prompt')} x 2 candidates{size} through score_candidates: "
              f"{j['seconds']:.0f} s")
    print(f"results: {out_path}")
    for bs in (1, 8):
        ratio = results["speedup"].get(f"llm-blender (batch_size={bs})")
        print(f"speedup vs llm-blender (batch_size={bs}): " + (f"{ratio:.2f}x" if ratio else "skipped"))


if __name__ == "__main__":
    from repro.cli import main as repro_main

    sys.modules.setdefault("bench_scoring", sys.modules["__main__"])  # repro bench finds this module, not a copy
    sys.exit(repro_main(["bench", *sys.argv[1:]]))
