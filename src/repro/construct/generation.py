"""Candidate generation: a greedy `reference_response` and n sampled candidates `resp0..resp{n-1}` per prompt, their
noise a hash of (seed, prompt text, candidate, step, token): no batch, chunk or row order changes them."""

from __future__ import annotations

import functools
import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import torch
from transformers import (AutoConfig, AutoModelForCausalLM, AutoTokenizer, GenerationConfig, LogitsProcessor,
                          LogitsProcessorList, TemperatureLogitsWarper, TopPLogitsWarper)

from ..cache import RowCache, check_format
from ..errors import DataError, ModelLoadError, ParameterError
from ..manifest import job_versions
from ..parameters import BUILTIN_POLICIES, NO_POLICY, GenerationParams, builtin_folder
from ..paths import CHECKPOINT, STAND_IN_MARKER, local_checkpoint
from ..revisions import GENERATION_CODE, check_revision_target, model_identity, pinned_model, python_digest
from ..scorers.common import no_progress_bars, resolve_device, resolve_dtype, torch_dtype
from ..scorers import tiny_policy
from ..jobs import Progress, chunk_share, num_chunks, run_chunked_with_stats, run_job
from .pairs import check_prompts

# the parameters that decide the texts, in the fingerprint and the manifest
SAMPLING = ("generate_reference", "reference_max_new_tokens", "n_candidates", "temperature", "top_p",
            "max_new_tokens", "generation_seed", "candidate_seeds", "use_chat_template")
STAND_IN_NOTE = ("policy is a tiny RANDOM stand-in (repro.scorers.tiny_policy): reference_response and resp* are "
                 "noise, not model text")


@dataclass(frozen=True)
class Policy:
    """A resolved policy model: what the user named, where it loads from, and whether it is a stand-in."""

    name: str
    path: str  # local directory or hub id
    stand_in: bool
    random_init_seed: int | None = None  # config-only stand-in: weights drawn from this seed at load time


def resolve_policy(policy_model: str | None, revision: str | None) -> Policy:
    """`policy_model` as a loadable location: a built-in stand-in, a local folder, or the hub at `revision`."""
    check_revision_target(policy_model, revision, "policy_revision", "policy_model")
    if revision is not None:
        return Policy(policy_model, pinned_model(policy_model, revision, "policy_revision", "policy_model"), False)
    if not policy_model:
        raise ParameterError(NO_POLICY)
    if policy_model in BUILTIN_POLICIES:  # (the schema refuses any other builtin: name)
        return _local_policy(policy_model, tiny_policy.build_tiny_policy(builtin_folder(policy_model),
                                                                        size=BUILTIN_POLICIES[policy_model]))
    if Path(policy_model).expanduser().exists():  # a folder as every loader reads one (a file refused)
        return _local_policy(policy_model, local_checkpoint(policy_model, "Policy model", "", CHECKPOINT))
    # a hub id is "name" or "owner/name" (dots allowed: "meta-llama/Llama-3.1-8B"); anything else is a path
    if policy_model.startswith((".", "/", "~")) or policy_model.count("/") > 1 or "\\" in policy_model:
        raise ModelLoadError(
            f"policy_model={policy_model!r} looks like a local path, but no such directory exists. Point it at "
            f"a folder holding config.json, the weights and the tokenizer, or give a hub id such as "
            f"HuggingFaceH4/mistral-7b-sft-beta.")
    return Policy(policy_model, policy_model, False)


def _local_policy(name: str, path: Path) -> Policy:
    marker = path / STAND_IN_MARKER
    if not marker.exists():
        return Policy(name, str(path), False)
    info = json.loads(marker.read_text())
    return Policy(name, str(path), True, int(info["seed"]) if info.get("random_init") else None)


def _from_pretrained(policy: Policy, cls, **kwargs):
    """`cls.from_pretrained` of the policy; a failure says how to get the model onto an offline machine."""
    try:
        return cls.from_pretrained(policy.path, **kwargs)
    except (OSError, ValueError) as exc:
        said = f"{type(exc).__name__}: {' '.join(str(exc).split())}"
        if Path(policy.name).expanduser().is_dir():  # (a folder the user gave: no hub advice)
            part = "tokenizer" if cls.__name__ == "AutoTokenizer" else "config.json or weights"
            raise ModelLoadError(f"Policy model folder {policy.path}: its {part} could not be read ({said}); "
                                 f"expected {CHECKPOINT}") from None
        raise ModelLoadError(
            f"Could not load the policy model {policy.name!r} ({said}). If it is a hub id and this machine is offline "
            f"(HF_HUB_OFFLINE=1 or no network), download it where there is network (`hf download {policy.name}`) into "
            f"the hub cache or a folder, and set policy_model to that folder.") from None


def load_tokenizer(policy: Policy):
    """The policy's tokenizer, padding on the left (generation continues every row at its end)."""
    tokenizer = _from_pretrained(policy, AutoTokenizer)
    tokenizer.padding_side = "left"
    return tokenizer


def context_length(policy: Policy, tokenizer) -> int | None:
    """The longest sequence (prompt + new tokens), from the config or the tokenizer; None if neither says (Mamba)."""
    config = _from_pretrained(policy, AutoConfig)
    config = config.get_text_config() if hasattr(config, "get_text_config") else config
    for name in ("max_position_embeddings", "n_positions", "seq_length", "max_sequence_length"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    value = getattr(tokenizer, "model_max_length", None)
    return value if isinstance(value, int) and 0 < value < 10 ** 8 else None


def eos_token_ids(policy: Policy, tokenizer) -> list[int]:
    """Token ids that end a response: the tokenizer's EOS and those of the model's generation config."""
    ids = set() if tokenizer.eos_token_id is None else {int(tokenizer.eos_token_id)}
    try:
        eos = GenerationConfig.from_pretrained(policy.path).eos_token_id
    except (OSError, ValueError):  # no generation_config.json: the tokenizer's EOS is all there is
        eos = None
    ids.update(int(e) for e in ([eos] if isinstance(eos, int) else eos or []))
    if not ids:
        raise ParameterError(f"The policy {policy.name!r} names no EOS token (tokenizer or generation config): "
                             f"responses would never end. Use a model whose tokenizer has an eos_token.")
    return sorted(ids)


def prompt_token_ids(prompts: Sequence[str], tokenizer, use_chat_template: bool) -> list[list[int]]:
    """Token ids of each prompt as the policy sees it: one user turn through the chat template, or raw text."""
    if use_chat_template and not getattr(tokenizer, "chat_template", None):
        raise ParameterError(
            "use_chat_template is true, but the policy's tokenizer has no chat template. Set "
            "use_chat_template: false to feed the prompt text as it is (base models), or use a chat model.")
    out, bos = [], tokenizer.bos_token
    for prompt in prompts:
        text = tokenizer.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False,
                                             add_generation_prompt=True) if use_chat_template else prompt
        # as vLLM encodes a text prompt: the tokenizer's special tokens, but never a second BOS
        add_special = not (bos and text.startswith(bos))
        out.append(list(tokenizer(text, add_special_tokens=add_special)["input_ids"]))
    return out


def prompt_limit(params: GenerationParams, context: int | None) -> int:
    """The most prompt tokens kept: `max_prompt_tokens`, or the context minus the longest generation."""
    if context is None:
        if params.max_prompt_tokens is None:
            raise ParameterError(f"Cannot tell the context length of {params.policy_model!r} from its config or "
                                 f"tokenizer: set max_prompt_tokens (the prompt tokens kept).")
        return params.max_prompt_tokens
    longest = max(params.reference_max_new_tokens if params.generate_reference else 0,
                  params.max_new_tokens if params.n_candidates else 0)
    room = context - longest
    if params.max_prompt_tokens is None:
        if room < 1:
            raise ParameterError(
                f"The policy's context is {context} tokens, which leaves no room for a prompt before "
                f"{longest} new tokens: lower reference_max_new_tokens / max_new_tokens.")
        return room
    if params.max_prompt_tokens > room:
        raise ParameterError(
            f"max_prompt_tokens={params.max_prompt_tokens} plus {longest} new tokens exceeds the policy's "
            f"context of {context} tokens: set max_prompt_tokens <= {room} (or null), or generate fewer tokens.")
    return params.max_prompt_tokens


def sample_keys(prompt: str, seed: int, n: int) -> list[list[int]]:
    """Per-candidate noise keys (two 31-bit ints each) from the seed, the prompt text and the candidate index."""
    digests = [hashlib.sha256(f"{seed}\x00{k}\x00{prompt}".encode("utf-8")).digest() for k in range(n)]
    return [[int.from_bytes(d[:4], "big") >> 1, int.from_bytes(d[4:8], "big") >> 1] for d in digests]


def candidate_keys(prompt: str, params: GenerationParams) -> list[list[int]]:
    """The noise keys of a prompt's candidates; with `candidate_seeds`, candidate k's is the first one of seed k's."""
    if params.candidate_seeds is None:
        return sample_keys(prompt, params.generation_seed, params.n_candidates)
    return [sample_keys(prompt, seed, 1)[0] for seed in params.candidate_seeds]


_MASK32 = 0xFFFFFFFF


def _mul32(x, c: int):
    # (x * c) mod 2**32 for int64 tensors (or ints) holding uint32 values, with no int64 overflow
    return (x * (c & 0xFFFF) + (((x * (c >> 16)) & 0xFFFF) << 16)) & _MASK32


def _mix32(x):
    # "lowbias32" integer hash (C. Wellons): a bijection on 32 bits, every input bit reaching every output bit
    x = _mul32(x ^ (x >> 16), 0x7FEB352D)
    x = _mul32(x ^ (x >> 15), 0x846CA68B)
    return x ^ (x >> 16)


def row_seeds(keys):
    """One 32-bit stream seed per sequence from its two-int key (int64 tensor [rows, 2] -> [rows, 1])."""
    return _mix32(keys[:, 1:2] ^ _mix32(keys[:, 0:1]))


def counter_uniform(seeds, step: int, token_table):
    """Uniforms in (0, 1), shape [rows, vocab]: a hash of (row seed, step, token id), identical on any device."""
    h = _mix32(token_table[None, :] ^ (seeds ^ _mix32(step & _MASK32)))
    # 24 bits fit a float32 mantissa exactly; +0.5 keeps u away from 0 and 1
    return ((h >> 8).float() + 0.5) * (1.0 / (1 << 24))


def token_table(vocab_size: int, device="cpu"):
    """The per-token hashes `counter_uniform` combines with each row's seed."""
    return _mix32(torch.arange(vocab_size, device=device, dtype=torch.int64))


def _gumbel_processor(keys, prompt_length: int):
    """A logits processor adding Gumbel noise from `counter_uniform`: greedy decoding then samples exactly."""
    seeds = row_seeds(keys)
    tables: dict[int, Any] = {}

    class CounterGumbelNoise(LogitsProcessor):
        # argmax(logits / T + Gumbel) draws from softmax(logits / T): the Gumbel-max trick
        def __call__(self, input_ids, scores):
            vocab = scores.shape[-1]
            if vocab not in tables:
                tables[vocab] = token_table(vocab, scores.device)
            u = counter_uniform(seeds, input_ids.shape[1] - prompt_length, tables[vocab])
            return scores - torch.log(-torch.log(u))

    return CounterGumbelNoise()


@dataclass
class SequenceRequest:
    """One sequence to generate: the prompt ids and, for a sampled one, its noise key (and vLLM's seed)."""

    ids: list[int]
    key: list[int] | None  # None: greedy
    seed: int | None = None  # vLLM's per-request seed: candidate_seeds[k] (SPPO), else one made from the key
    n: int = 1  # vLLM's samples of this request (vllm_requests: per_prompt), returned one after another


def candidate_requests(chunk: list[dict], params: GenerationParams) -> list[SequenceRequest]:
    """The candidate sequences of a chunk's prompts, in order: one greedy sequence each at temperature 0."""
    if params.temperature == 0:
        return [SequenceRequest(item["ids"], None) for item in chunk]
    if params.generation_backend == "vllm" and params.vllm_requests == "per_prompt":
        return [SequenceRequest(item["ids"], item["keys"][0], params.generation_seed, params.n_candidates)
                for item in chunk]
    seeds = params.candidate_seeds or [None] * params.n_candidates
    return [SequenceRequest(item["ids"], key, seed) for item in chunk for key, seed in zip(item["keys"], seeds)]


class TransformersEngine:
    """`model.generate` over left-padded batches, in the order given (callers sort by prompt length)."""

    def __init__(self, policy: Policy, tokenizer, eos_ids: list[int], device: str, dtype: str, batch_size: int):
        if policy.random_init_seed is not None:
            model = tiny_policy.init_random_weights(_from_pretrained(policy, AutoConfig), policy.random_init_seed,
                                                    dtype=torch_dtype(dtype), device=device)
        else:
            with no_progress_bars():  # (no "Loading weights" bar left in the notebook)
                model = _from_pretrained(policy, AutoModelForCausalLM, dtype=torch_dtype(dtype)).to(device)
        self.model, self.tokenizer, self.eos_ids = model.eval(), tokenizer, eos_ids
        self.device, self.batch_size = device, batch_size
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos_ids[0]
        # the model's own generation defaults (sampling, penalties) are replaced by ours, never mixed in
        self.model.generation_config = GenerationConfig(eos_token_id=eos_ids, pad_token_id=self.pad_id,
                                                        bos_token_id=tokenizer.bos_token_id)

    def generate(self, seqs: list[SequenceRequest], max_new_tokens: int, temperature: float, top_p: float,
                 on_batch: Callable[[int, int], None]) -> list[tuple[str, int]]:
        """Texts and token counts of `seqs`; `on_batch(sequences, tokens)` after each batch."""
        config = GenerationConfig(max_new_tokens=max_new_tokens, do_sample=False, num_beams=1,
                                  eos_token_id=self.eos_ids, pad_token_id=self.pad_id)
        out: list[tuple[str, int]] = []
        for start in range(0, len(seqs), self.batch_size):
            batch = seqs[start:start + self.batch_size]
            width = max(len(s.ids) for s in batch)
            input_ids = torch.tensor([[self.pad_id] * (width - len(s.ids)) + s.ids for s in batch], dtype=torch.long)
            attention_mask = (torch.arange(width) >= torch.tensor([[width - len(s.ids)] for s in batch])).long()
            processors = LogitsProcessorList()
            if temperature > 0 and batch[0].key is not None:
                keys = torch.tensor([s.key for s in batch], dtype=torch.int64, device=self.device)
                processors.append(TemperatureLogitsWarper(temperature))
                if top_p < 1.0:
                    processors.append(TopPLogitsWarper(top_p))
                processors.append(_gumbel_processor(keys, width))
            with torch.inference_mode():
                generated = self.model.generate(input_ids=input_ids.to(self.device),
                                                attention_mask=attention_mask.to(self.device),
                                                generation_config=config, logits_processor=processors)
            results = [self._decode(ids) for ids in generated[:, width:].tolist()]
            out.extend(results)
            on_batch(len(batch), sum(n for _, n in results))
        return out

    def _decode(self, ids: list[int]) -> tuple[str, int]:
        # the response ends at its first EOS (counted as generated); what follows is padding
        end = next((i + 1 for i, t in enumerate(ids) if t in self.eos_ids), len(ids))
        return self.tokenizer.decode(ids[:end], skip_special_tokens=True), end


class VllmEngine:
    """vLLM's offline `LLM.generate` (one GPU), with a per-sequence seed; same outputs format as Transformers."""

    def __init__(self, policy: Policy, tokenizer, eos_ids: list[int], device: str, dtype: str, context: int | None,
                 seed: int):
        try:
            import vllm
        except ImportError:
            raise ParameterError(
                "generation_backend is 'vllm', but vLLM is not installed. Install it on a CUDA machine "
                "(pip install -e '.[vllm]'), or set generation_backend: transformers.") from None
        if not device.startswith("cuda"):
            raise ParameterError(
                f"generation_backend is 'vllm', which needs a CUDA GPU, but generation_device resolves to "
                f"{device!r}. Run on a GPU machine, or set generation_backend: transformers.")
        self.vllm, self.eos_ids = vllm, eos_ids
        self.llm = vllm.LLM(model=policy.path, tokenizer=policy.path, seed=seed, max_model_len=context,  # None: vLLM's
                            dtype={"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}[dtype],
                            # a config-only stand-in: vLLM draws its own random weights
                            load_format="dummy" if policy.random_init_seed is not None else "auto")

    def generate(self, seqs: list[SequenceRequest], max_new_tokens: int, temperature: float, top_p: float,
                 on_batch: Callable[[int, int], None]) -> list[tuple[str, int]]:
        """Texts and token counts of `seqs` (vLLM schedules the batches itself)."""
        params = []
        for s in seqs:
            sampled = temperature > 0 and s.key is not None
            params.append(self.vllm.SamplingParams(
                temperature=temperature if sampled else 0.0, top_p=top_p if sampled else 1.0, n=s.n,
                max_tokens=max_new_tokens, stop_token_ids=self.eos_ids, skip_special_tokens=True,
                seed=(s.key[0] << 31 | s.key[1] if s.seed is None else s.seed) if sampled else None))
        outputs = self.llm.generate([{"prompt_token_ids": s.ids} for s in seqs], params, use_tqdm=False)
        results = [(c.text, len(c.token_ids)) for o in outputs for c in o.outputs]
        on_batch(len(results), sum(n for _, n in results))
        return results


class GenerationProgress(Progress):
    """`repro.jobs.Progress` over prompts, with generated tokens/s (resumed chunks count no tokens)."""

    def __init__(self, total: int, **kwargs: Any):
        super().__init__(total, desc="generation", unit="prompt", **kwargs)
        self.tokens = 0

    def _rate(self) -> str:
        return f"{self.tokens / self.elapsed if self.elapsed > 0 else 0.0:.1f} tokens/s"

    def add_tokens(self, n: int) -> None:
        self.tokens += n
        if self._tqdm is not None:
            self._tqdm.set_postfix_str(self._rate(), refresh=False)

    def _line(self, final: bool = False) -> str:
        return super()._line(final) + (f", {self._rate()}" if self.done > self.skipped else "")


def _generate_chunk(engine, chunk: list[dict], params: GenerationParams, advance: Callable[[int], None],
                    progress: GenerationProgress, counters: dict[str, Any]) -> list[dict]:
    """Reference and candidates for one chunk of prompts; one JSON-ready result per prompt."""
    greedy = params.temperature == 0  # greedy candidates are all the same sequence: generate it once
    n = 1 if greedy else params.n_candidates
    per_prompt = int(params.generate_reference) + n
    done = [0]  # sequences of this chunk generated so far

    def on_batch(n_seqs: int, n_tokens: int) -> None:
        counters["tokens"] += n_tokens
        counters["sequences"] += n_seqs
        progress.add_tokens(n_tokens)
        advance((done[0] + n_seqs) // per_prompt - done[0] // per_prompt)
        done[0] += n_seqs

    def run(seqs: list[SequenceRequest], max_new_tokens: int, temperature: float) -> list[tuple[str, int]]:
        start = time.perf_counter()
        out = engine.generate(seqs, max_new_tokens, temperature, params.top_p, on_batch)
        counters["generate_seconds"] += time.perf_counter() - start
        return [(text.strip() if params.strip_responses else text, n) for text, n in out]

    results: list[dict] = [{"tokens": 0} for _ in chunk]
    if params.generate_reference:
        refs = run([SequenceRequest(item["ids"], None) for item in chunk], params.reference_max_new_tokens, 0.0)
        for r, (text, tokens) in zip(results, refs):
            r["reference_response"] = text
            r["tokens"] += tokens
    if params.n_candidates:
        outs = run(candidate_requests(chunk, params), params.max_new_tokens, params.temperature)
        for i, r in enumerate(results):
            mine = outs[i * n:(i + 1) * n]
            r["candidates"] = [text for text, _ in mine] * (params.n_candidates // n)
            r["tokens"] += sum(tokens for _, tokens in mine)
    return results


def plan_prompts(prompts: Sequence[str], params: GenerationParams, tokenizer,
                 limit: int) -> tuple[list[dict], int, int]:
    """The work items (row index, prompt ids, noise keys), longest prompt first; and the skipped/truncated counts."""
    kept, skipped, truncated = [], 0, 0
    for i, ids in enumerate(prompt_token_ids(prompts, tokenizer, params.use_chat_template)):
        if len(ids) > limit:
            if params.long_prompts == "skip":
                skipped += 1
                continue
            ids = ids[-limit:]  # keep the end: the question and the assistant turn the template opens
            truncated += 1
        kept.append({"row": i, "ids": ids, "keys": candidate_keys(prompts[i], params)})
    if prompts and not kept:  # nothing to generate for: said here, before any work (not as an empty dataset)
        raise DataError(f"Every prompt ({skipped} of {len(prompts)}) is longer than max_prompt_tokens={limit} tokens, "
                        f"and long_prompts: skip leaves each out: nothing is left to generate for. Raise "
                        f"max_prompt_tokens, or set long_prompts: truncate_left (keeps each prompt's end).")
    # longest first: similar lengths share a batch (little padding), and memory trouble shows at once
    kept.sort(key=lambda item: (-len(item["ids"]), item["row"]))
    return kept, skipped, truncated


class _Plan:
    """What every process derives alike from the prompts and parameters: the policy, the work items, the fingerprint."""

    def __init__(self, prompts: list[str], params: GenerationParams):
        self.policy = policy = resolve_policy(params.policy_model, params.policy_revision)
        self.tokenizer = load_tokenizer(policy)
        self.context = context_length(policy, self.tokenizer)
        self.limit = prompt_limit(params, self.context)
        self.eos_ids = eos_token_ids(policy, self.tokenizer)
        torch_device = resolve_device(params.generation_device, "generation_device")
        self.device = str(torch_device)
        self.dtype = resolve_dtype(params.generation_dtype, torch_device, gpu_auto="bf16")
        self.kept, self.skipped, self.truncated = plan_prompts(prompts, params, self.tokenizer, self.limit)
        vllm = params.generation_backend == "vllm"
        self.fingerprint = {
            # the policy by its content (or hub commit), not its name or folder: a copy elsewhere is the same work
            "stage": "generation", "model": model_identity(policy.path),
            "backend": params.generation_backend, "device_type": self.device.split(":")[0], "dtype": self.dtype,
            "batch_size": params.generation_batch_size, "sampling": {k: getattr(params, k) for k in SAMPLING},
            # vLLM samples candidate k of every prompt with candidate_seeds[k] itself (SPPO's generate.py)
            **({"vllm_seeds": "candidate_seeds"} if vllm and params.candidate_seeds else {}),
            **({"vllm_requests": "per_prompt"} if vllm and params.vllm_requests == "per_prompt" else {}),
            **({} if params.strip_responses else {"strip_responses": False}),  # (the texts of before: stripped)
            "eos_ids": self.eos_ids,
            "versions": job_versions(*["vllm"] * vllm),
            "code": python_digest(*GENERATION_CODE),
        }


def _cache_key(item: dict) -> dict:
    """A row's key in the row cache: its prompt tokens and noise keys, not its row number."""
    return {"ids": item["ids"], "keys": item["keys"]}


def _not_generated(params: GenerationParams, item: dict, result: Any) -> str | None:
    """What a finished chunk's result should be (`_generate_chunk`'s), where `result` is not that."""
    n, got = params.n_candidates, result if isinstance(result, dict) else {}
    texts, reference = got.get("candidates"), got.get("reference_response")
    if type(got.get("tokens")) is int and (isinstance(reference, str) or not params.generate_reference) and \
            (not n or isinstance(texts, list) and len(texts) == n and all(isinstance(t, str) for t in texts)):
        return None
    *told, last = ["a token count", *["a reference response"] * params.generate_reference,
                   *[f"{n} candidate texts"] * bool(n)]  # (a run generates one of them at least)
    return f"{', '.join(told)} and {last}"


def _generate_share(plan: _Plan, params: GenerationParams, work_dir: Path, device: str | None,
                    share: tuple[int, int] | None, *, cache: RowCache | None) -> tuple[Any, dict[str, Any]]:
    """Generate the chunks of `share` (all: None) not on disk yet on `device` (None: the plan's); the run, counters."""
    device = device or plan.device
    counters: dict[str, Any] = {"tokens": 0, "sequences": 0, "generate_seconds": 0.0, "load_seconds": 0.0}

    @functools.cache
    def engine():  # loaded on the first chunk that needs computing: a fully resumed run never loads the model
        t0 = time.perf_counter()
        if params.generation_backend == "vllm":
            loaded = VllmEngine(plan.policy, plan.tokenizer, plan.eos_ids, device, plan.dtype, plan.context,
                                params.generation_seed)
        else:
            loaded = TransformersEngine(plan.policy, plan.tokenizer, plan.eos_ids, device, plan.dtype,
                                        params.generation_batch_size)
        counters["load_seconds"] = time.perf_counter() - t0
        return loaded

    size = params.generation_chunk_size  # the bar counts this process's prompts only
    mine = chunk_share(num_chunks(len(plan.kept), size), *(share or (0, 1)))
    progress = GenerationProgress(len(plan.kept[mine.start * size:mine.stop * size]),
                                  enabled=share is None or share[0] == 0)

    def generate_chunk(chunk: list[dict], advance: Callable[[int], None]) -> list[dict]:
        return _generate_chunk(engine(), chunk, params, advance, progress, counters)

    try:
        run = run_chunked_with_stats(plan.kept, generate_chunk, work_dir=Path(work_dir),
                                     fingerprint=plan.fingerprint, chunk_size=params.generation_chunk_size,
                                     desc="generation", progress=progress, fn_reports_progress=True,
                                     unit="prompt", share=share, prepare=share is None, cache=cache, setup=engine,
                                     check=functools.partial(_not_generated, params))
    finally:
        progress.close()
    return run, counters


def generation_job(spec: dict[str, Any], plan: _Plan | None = None) -> tuple[list[dict], dict[str, Any]]:
    """The texts of `spec`'s prompts (plan order) and the merged stats via `repro.jobs.run_job` (torchrun's entry)."""
    params = GenerationParams(**spec["params"])
    plan = plan or _Plan(spec["prompts"], params)
    work_dir, cache_dir = Path(spec["work_dir"]), spec["cache_dir"]
    cache = RowCache.open(cache_dir, "generation", plan.fingerprint, _cache_key) if cache_dir is not None else None
    return run_job("repro.construct.generation:generation_job", spec, plan.kept, work_dir=work_dir,
                   fingerprint=plan.fingerprint, chunk_size=params.generation_chunk_size, device=plan.device,
                   num_processes=params.generation_num_processes, summed=("tokens", "sequences"),
                   compute=functools.partial(_generate_share, plan, params, work_dir, cache=cache),
                   slowest=("generate_seconds", "load_seconds"), what="generation", cache=cache,
                   chunk_size_name="generation_chunk_size")


def generate_candidates(rows: list[dict], params: GenerationParams, work_dir: Path,
                        manifest: Any | None = None, cache_dir: str | Path | None = None,
                        row_numbers: list[int] | None = None, split: str | None = None) -> list[dict]:
    """Rows with `reference_response` (if asked), `resp0..resp{n-1}` via `run_job`; bad rows named by `row_numbers`."""
    start = time.monotonic()
    cache_dir = None if cache_dir is None else str(cache_dir)
    if cache_dir is not None:  # a cache of another key format is refused here, before any work
        check_format(Path(cache_dir))
    check_prompts(rows, row_numbers, split)
    prompts = [row["prompt"] for row in rows]
    plan = _Plan(prompts, params)
    results, stats = generation_job({"prompts": prompts, "params": params.model_dump(mode="json"),
                                     "work_dir": str(work_dir), "cache_dir": cache_dir}, plan)

    out: list[dict] = []
    by_row = {item["row"]: result for item, result in zip(plan.kept, results)}
    for i in sorted(by_row):  # in row order; a long prompt left out (long_prompts: skip) is counted in the manifest
        reference = {"reference_response": by_row[i]["reference_response"]} if params.generate_reference else {}
        out.append({**rows[i], **reference, **{f"resp{k}": t for k, t in enumerate(by_row[i].get("candidates", []))}})

    if manifest is not None:
        policy = plan.policy
        manifest.record("generation", {
            "policy_model": policy.name, "policy_revision": params.policy_revision, "policy_path": policy.path,
            "stand_in": policy.stand_in, **({"note": STAND_IN_NOTE} if policy.stand_in else {}),
            "backend": params.generation_backend, "device": plan.device, "dtype": plan.dtype,
            **{k: getattr(params, k) for k in SAMPLING},
            "max_prompt_tokens": plan.limit, "context": plan.context, "long_prompts": params.long_prompts,
            "batch_size": params.generation_batch_size, "chunk_size": params.generation_chunk_size,
            "processes": stats["processes"], "prompts": len(rows), "prompts_generated": len(plan.kept),
            "skipped_long_prompts": plan.skipped, "truncated_long_prompts": plan.truncated,
            "chunks": stats["chunks_total"], "chunks_resumed": stats["chunks_resumed"],
            "prompts_resumed": stats["items_resumed"],
            "tokens_generated": sum(r["tokens"] for r in results),  # resumed chunks included
            "sequences_generated_this_run": stats["sequences"], "tokens_generated_this_run": stats["tokens"],
            "load_seconds": round(stats["load_seconds"], 3), "generate_seconds": round(stats["generate_seconds"], 3),
            "tokens_per_second": round(stats["tokens"] / stats["generate_seconds"], 2)
            if stats["generate_seconds"] > 0 else None,
            "seconds": round(time.monotonic() - start, 3), "fingerprint": stats["digest"],
            **({"cache": stats["cache"]} if "cache" in stats else {}),
        })
    return out
