"""Tokens/s of the Transformers generation backend, measured side by side in one run.

    python benchmarks/bench_generation.py                      # CPU: the tiny stand-in policy
    python benchmarks/bench_generation.py --size 1b            # CUDA: a TinyLlama-1.1B-shaped random model, bf16

For each batch size it times, alternating in the same process on the same sampled sequences:
- `counter noise`: repro's sampling (greedy over logits + Gumbel noise hashed from (seed, prompt, k, step,
  token), batch-independent and reproducible);
- `HF multinomial`: transformers' own `do_sample=True` (global RNG), the baseline for the noise's cost;
and reports tokens/s, the ratio of the two, and each batch size's speed-up over batch size 1. Then one
end-to-end `generate_candidates` call (greedy reference + 2 candidates per prompt, chunks on disk) gives
the stage's tokens/s as the manifest records it. The stand-in never emits EOS, so every sequence is exactly
`--max-new-tokens` long and all variants do the same work. Prompts come from `--data FILE` (jsonl rows with
a `prompt`) or are generated with UltraFeedback-like lengths (log-normal, median ~250 characters).
The figures are written to benchmarks/results/generation-<device>-*.json (`--output-dir`);
benchmarks/RESULTS.md (section "Generation") quotes that file.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import torch

from repro.construct import generation
from repro.manifest import Manifest
from repro.parameters import GenerationParams
from repro.scorers.tiny_policy import build_tiny_policy

WORDS = ("the a of to and in is that for it with as on be this how what why can you write explain list "
         "code function data model question answer example step first then should would could because "
         "python table story poem email summary translate sentence number math problem").split()


def synthetic_prompts(n: int, seed: int = 0) -> list[str]:
    """Prompts of UltraFeedback-like character lengths (log-normal, median ~250, long tail)."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        chars = int(min(4000, max(20, rng.lognormvariate(5.5, 1.0))))
        words: list[str] = []
        while sum(len(w) + 1 for w in words) < chars:
            words.append(rng.choice(WORDS))
        out.append(" ".join(words).capitalize() + "?")
    return out


class NativeSamplingEngine(generation.TransformersEngine):
    """The same engine with transformers' own multinomial sampling: the baseline for the counter noise."""

    def _sampling(self, batch, width, temperature, top_p):
        from transformers import LogitsProcessorList, TemperatureLogitsWarper, TopPLogitsWarper

        processors = LogitsProcessorList([TemperatureLogitsWarper(temperature)])
        if top_p < 1.0:
            processors.append(TopPLogitsWarper(top_p))
        return processors, True


def timed(engine, seqs, args) -> float:
    """Tokens/s of one pass over `seqs`."""
    sync = torch.cuda.synchronize if engine.device.startswith("cuda") else (lambda: None)
    tokens = [0]

    def count(_n_seqs: int, n_tokens: int) -> None:
        tokens[0] += n_tokens

    sync()
    start = time.perf_counter()
    engine.generate(seqs, args.max_new_tokens, args.temperature, args.top_p, count)
    sync()
    return tokens[0] / (time.perf_counter() - start)


def main(argv: list[str] | None = None) -> int:
    cuda = torch.cuda.is_available()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", choices=["tiny", "1b"], default="1b" if cuda else "tiny")
    ap.add_argument("--device", default="cuda" if cuda else "cpu")
    ap.add_argument("--prompts", type=int, default=64 if cuda else 24)
    ap.add_argument("--max-new-tokens", type=int, default=256 if cuda else 48)
    ap.add_argument("--batch-sizes", default="1,16,64" if cuda else "1,8,24")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--temperature", type=float, default=0.7)
    ap.add_argument("--top-p", type=float, default=1.0)
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    ap.add_argument("--data", type=Path, help="jsonl rows with a 'prompt' (default: synthetic prompts)")
    ap.add_argument("--output-dir", type=Path, default=Path(__file__).parent / "results",
                    help="where the JSON result goes (default: benchmarks/results)")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)

    if args.data:
        with open(args.data, encoding="utf-8") as f:
            prompts = [json.loads(line)["prompt"] for line in f if line.strip()][:args.prompts]
    else:
        prompts = synthetic_prompts(args.prompts)
    policy_dir = build_tiny_policy(size=args.size)
    policy = generation.resolve_policy(str(policy_dir), None)
    tokenizer = generation.load_tokenizer(policy)
    eos_ids = generation.eos_token_ids(policy, tokenizer)
    limit = generation.context_length(policy, tokenizer) - args.max_new_tokens
    ids = [x[-limit:] for x in generation.prompt_token_ids(prompts, tokenizer, use_chat_template=True)]
    seqs = [generation.SequenceRequest(i, key) for p, i in zip(prompts, ids)
            for key in generation.sample_keys(p, 0, 2)]
    seqs.sort(key=lambda s: -len(s.ids))  # as the stage does: longest first
    dtype = generation.resolve_dtype("auto", generation.resolve_device(args.device), gpu_auto="bf16")
    batch_sizes = [int(b) for b in args.batch_sizes.split(",")]
    ours = generation.TransformersEngine(policy, tokenizer, eos_ids, args.device, dtype, batch_sizes[0])
    native = NativeSamplingEngine.__new__(NativeSamplingEngine)
    native.__dict__.update(ours.__dict__)  # the same model object: no second copy in memory

    machine = (f"{torch.cuda.get_device_name(0)}" if args.device.startswith("cuda") else
               f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} torch threads")
    n_params = sum(p.numel() for p in ours.model.parameters())
    print(f"machine: {machine}; torch {torch.__version__}; model: stand-in {args.size} ({n_params / 1e6:.1f}M "
          f"parameters, {dtype}); {len(prompts)} prompts x 2 sampled sequences x {args.max_new_tokens} new tokens; "
          f"prompt tokens: median {statistics.median(len(i) for i in ids):.0f}, max {max(len(i) for i in ids)}")
    timed(ours, seqs[:batch_sizes[-1]], args)  # warm-up (allocator, kernels)

    rows = []
    for bs in batch_sizes:
        ours.batch_size = native.batch_size = bs
        a, b = [], []
        for _ in range(args.repeats):  # alternate, so drift in machine load hits both alike
            a.append(timed(ours, seqs, args))
            b.append(timed(native, seqs, args))
        rows.append({"batch_size": bs, "counter_noise_tokens_per_s": max(a), "hf_multinomial_tokens_per_s": max(b)})
    base = rows[0]["counter_noise_tokens_per_s"]
    print("\n| batch size | counter noise tokens/s | HF multinomial tokens/s | noise / HF | vs batch 1 |")
    print("| ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        r["noise_over_hf"] = r["counter_noise_tokens_per_s"] / r["hf_multinomial_tokens_per_s"]
        r["speedup_vs_batch_1"] = r["counter_noise_tokens_per_s"] / base
        print(f"| {r['batch_size']} | {r['counter_noise_tokens_per_s']:.1f} | {r['hf_multinomial_tokens_per_s']:.1f} "
              f"| {r['noise_over_hf']:.2f}x | {r['speedup_vs_batch_1']:.2f}x |")

    with tempfile.TemporaryDirectory() as tmp:
        params = GenerationParams(policy_model=str(policy_dir), generation_device=args.device,
                                  max_new_tokens=args.max_new_tokens, reference_max_new_tokens=args.max_new_tokens,
                                  temperature=args.temperature, top_p=args.top_p,
                                  generation_batch_size=batch_sizes[-1], generation_chunk_size=len(prompts))
        manifest = Manifest(Path(tmp) / "run")
        generation.generate_candidates([{"prompt": p} for p in prompts], params, Path(tmp) / "work", manifest)
        stage = manifest.read()["generation"]
    print(f"\nstage (generate_candidates: greedy reference + 2 candidates, batch {batch_sizes[-1]}): "
          f"{stage['tokens_generated']} tokens in {stage['generate_seconds']:.1f} s = "
          f"{stage['tokens_per_second']:.1f} tokens/s")
    from repro.cli.measure import machine_info

    results = {
        "when": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": "python benchmarks/bench_generation.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "machine": {**machine_info(args.device), "summary": machine}, "size": args.size,
        "parameters": n_params, "dtype": str(dtype), "prompts": len(prompts), "sequences_per_prompt": 2,
        "max_new_tokens": args.max_new_tokens, "repeats": args.repeats,
        "prompt_tokens": {"median": statistics.median(len(i) for i in ids), "max": max(len(i) for i in ids)},
        "rows": rows,
        "stage": {k: stage[k] for k in ("tokens_generated", "generate_seconds", "tokens_per_second")},
        "stage_batch_size": batch_sizes[-1]}
    args.output_dir.mkdir(parents=True, exist_ok=True)
    out_path = args.output_dir / f"generation-{args.device.split(':')[0]}-{datetime.now().strftime('%Y%m%d-%H%M%S')}.json"
    out_path.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"results: {out_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
