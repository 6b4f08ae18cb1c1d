"""`repro selfcheck`: does this package give llm-blender's PairRM numbers on this machine, and how fast? Verdict FAIL
(exit 1), INCOMPLETE (exit 0; 2 when nothing could be checked) or PASS; see docs/selfcheck.md."""

from __future__ import annotations

import argparse
import gc
import os
import re
import shlex
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import jinja2
import numpy as np
import torch
from huggingface_hub import constants, get_session, try_to_load_from_cache

from ..construct.pairs import collect_candidates, select_pair
from ..errors import DataError, ParameterError, ReproError, counted, rendering
from ..jobs import atomic_write_json, atomic_write_text, json_default
from ..manifest import lock_status, lock_summary, now, package_versions
from ..parameters import (ConstructParams, Count, Device, check_value, code_span, default_batch_tokens, one_line,
                          table_cell)
from ..paths import (RUNS_DIR, SELFCHECK_JSON, SELFCHECK_MD, cache_root, check_folder, here_path, is_hub_id,
                     project_root, public_name, public_text, typed_path, unicode_twin)
from ..revisions import SCORING_CODE, hub_offline, model_identity, python_digest
from ..scorers import detect_kind, load_scorer
from ..scorers.blender_compat import import_llm_blender
from ..scorers.common import ranks_from_scores, resolve_device, resolve_dtype
from ..scorers.pairrm_checkpoint import KNOWN_HUB_IDS, PAIRRM_HF, WEIGHT_FILES
from ..sources import demo_path, iter_jsonl
from .measure import (PART2_MINI_1_PROMPTS, alternate, engine_passes, gpu_use, machine_info,
                      pairrm_contenders)
from .preflight import LLM_BLENDER, reinstall
from .score import read_named_rows, schema_type

DEFAULT_MODEL = PAIRRM_HF
DEFAULT_REPORT_DIR = Path(RUNS_DIR) / "selfcheck"
DEFAULT_ROWS = 40  # the embedded demo's prompts
DEMO_CANDIDATE_COLUMNS = ("resp0", "resp1", "resp2", "resp3")
HUB_TIMEOUT_S = 3.0
# The llm-blender/PairRM-hf model card's worked example (also LLM-Blender's README): one pass per pair, A first.
CARD_INPUTS = ["hello!", "I love you!"]
CARD_A = ["hi!", "I hate you!"]
CARD_B = ["f**k off!", "I love you, too!"]
CARD_LOGITS = [1.9003021717071533, -1.2547134160995483]
CARD_PREFERS_A = [True, False]
# |a − b| <= atol + rtol·|b|. fp32: float rounding only (1e-6 on the tiny models' tests). fp16: set before any GPU
# ran this; half precision keeps ~3 digits through 24 layers: read the reported max |difference| too.
TOLERANCE = {"fp32": (1e-4, 1e-4), "fp16": (5e-2, 2e-2), "bf16": (1e-1, 4e-2)}
CARD_ATOL = {"fp32": 1e-3, "fp16": 5e-2, "bf16": 1e-1}
SHOWN_ROWS = 10  # rows named in a failure line
# each check's one title (selfcheck.md's table, selfcheck.json), however it ends: pass, fail, measured or not run
TITLES = {
    "load_model": "load --model (engine, fp32)",
    "load_reference": "load --reference-model (engine, fp32)",
    "card_example": "model card example (PairRM-hf)",
    "layouts_fp32": "engine: --model vs --reference-model, fp32",
    "engine_vs_llm_blender_fp32": "engine vs llm-blender Blender.rank(batch_size=1), fp32",
    "engine_vs_llm_blender_run_dtype": "engine vs llm-blender Blender.rank(batch_size=1), run dtype",
    "run_dtype_vs_fp32_choices": "chosen/rejected, run dtype vs fp32 (engine)",
    "card_example_run_dtype": "model card example (PairRM-hf), run dtype",
    "speed": "speed against llm-blender (batch sizes 1 and 8)",
    "gpu_throughput": "useful TFLOP/s against a measured matmul",
}


@dataclass
class Check:
    """One step: `status` is pass | fail | not run | measured; `gap`: a not-run step makes it INCOMPLETE."""

    name: str
    title: str = field(init=False)
    status: str
    detail: str
    gap: bool = False
    data: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.title = TITLES[self.name]


def _not_run(name: str, why: str, gap: bool = True) -> Check:
    return Check(name, "not run", why, gap=gap)


@dataclass
class SelfCheck:
    """A self-check's findings; shows itself as markdown in a notebook."""

    settings: dict[str, Any]
    environment: dict[str, Any] = field(default_factory=dict)
    models: dict[str, Any] = field(default_factory=dict)
    rows: dict[str, Any] = field(default_factory=dict)
    checks: list[Check] = field(default_factory=list)
    timing: dict[str, Any] = field(default_factory=dict)
    when: str = field(default_factory=now)
    seconds: float = 0.0
    json_path: Path | None = None
    md_path: Path | None = None

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if c.status == "fail"]

    @property
    def gaps(self) -> list[Check]:
        return [c for c in self.checks if c.status == "not run" and c.gap]

    @property
    def verdict(self) -> str:
        return "FAIL" if self.failed else "INCOMPLETE" if self.gaps else "PASS"

    @property
    def nothing_checked(self) -> bool:
        return not any(c.status in ("pass", "fail") for c in self.checks)

    @property
    def exit_code(self) -> int:
        return 1 if self.failed else 2 if self.nothing_checked else 0

    def verdict_line(self) -> str:
        counts = {s: sum(c.status == s for c in self.checks) for s in ("pass", "fail", "not run")}
        why = ""
        if self.nothing_checked and self.gaps:  # the reason's first clause (the whole reason is in "Not run")
            first = self.gaps[0]
            reason = first.detail.split(". ")[0].split("; ")[0]
            reason = reason if len(reason) <= 160 else reason[:160].rsplit(" ", 1)[0] + " …"
            why = f" nothing could be checked, because {first.name} did not run ({reason});"
        line = (f"repro selfcheck: {self.verdict}:{why} {counts['pass']} checks passed, {counts['fail']} failed, "
                f"{counts['not run']} not run; {self.settings['model']} on {self.settings['device']} "
                f"({self.settings['run_dtype']})")
        if self.failed:
            line += "; failed: " + ", ".join(c.name for c in self.failed)
        elif self.gaps:
            line += "; missing: " + ", ".join(c.name for c in self.gaps)
        return line

    def to_json(self) -> dict[str, Any]:
        """The record selfcheck.json holds, home written `~` (as selfcheck.md writes it)."""
        return _home_as_tilde({"tool": "repro selfcheck", "when": self.when, "verdict": self.verdict,
                "verdict_line": self.verdict_line(), "settings": self.settings, "environment": self.environment,
                "models": self.models, "rows": self.rows, "checks": [asdict(c) for c in self.checks],
                "timing": self.timing, "seconds": round(self.seconds, 1)})

    def to_markdown(self) -> str:
        """The report as markdown tables, home written `~`."""
        return render_markdown(self.to_json())

    _repr_markdown_ = to_markdown

    def write(self, report_dir: str | Path) -> tuple[Path, Path]:
        self.json_path, self.md_path = Path(report_dir) / SELFCHECK_JSON, Path(report_dir) / SELFCHECK_MD
        atomic_write_json(self.json_path, self.to_json(), indent=2, default=json_default)
        atomic_write_text(self.md_path, self.to_markdown())
        return self.json_path, self.md_path


def hub_status(timeout: float = HUB_TIMEOUT_S) -> dict[str, Any]:
    """Whether the Hugging Face hub answers (HF_HUB_OFFLINE=1: not asked), within `timeout` seconds."""
    if switch := hub_offline():
        return {"offline": True, "reachable": None, "detail": f"{switch} is set: the hub was not asked"}
    url = f"{constants.ENDPOINT.rstrip('/')}/api/models/{DEFAULT_MODEL}"
    start = time.perf_counter()
    try:  # an error status is an answer too: the hub is reachable
        status = get_session().head(url, timeout=timeout).status_code
    except Exception as exc:  # refused, no route, no name, timed out
        return {"offline": False, "reachable": False, "endpoint": constants.ENDPOINT,
                "detail": f"no answer from {constants.ENDPOINT} within {timeout:g} s ({type(exc).__name__}: {exc})"}
    return {"offline": False, "reachable": True, "endpoint": constants.ENDPOINT, "http_status": status,
            "seconds": round(time.perf_counter() - start, 2)}


def weights_location(spec: str) -> dict[str, Any]:
    """Where a checkpoint's files are (or would be) found, without downloading anything."""
    if spec.startswith("builtin:"):
        return {"kind": "built-in stand-in", "path": str(cache_root())}
    path = Path(spec).expanduser()
    if path.is_dir():
        return {"kind": "local folder", "path": str(path.resolve())}
    out: dict[str, Any] = {"kind": "hub id", "hub_cache": str(constants.HF_HUB_CACHE), "cached": False}
    try:
        config = try_to_load_from_cache(spec, "config.json")
    except Exception:  # an id the hub library rejects: nothing cached under it
        config = None
    legacy = Path(constants.HF_HUB_CACHE) / spec  # llm-blender's own download folder
    for folder in ([Path(config).parent] if isinstance(config, str) else []) + [legacy]:
        weights = next((f for f in WEIGHT_FILES if (folder / f).is_file()), None)
        if weights:
            out.update(cached=True, path=str(folder), weights=weights,
                       weights_gb=round((folder / weights).stat().st_size / 2 ** 30, 2))
            break
    return out


def environment_report(device: Any, specs: Sequence[str]) -> dict[str, Any]:
    """torch/CUDA/GPU, transformers, llm-blender, scoring code (a fingerprint's `code`), the hub, weights' paths."""
    env: dict[str, Any] = machine_info(str(device))
    env.update(cuda_available=torch.cuda.is_available(), torch_cuda=torch.version.cuda,
               packages=package_versions(), scoring_code=python_digest(*SCORING_CODE), lock=lock_status())
    if torch.cuda.is_available():
        env["gpus"] = [{"name": torch.cuda.get_device_name(i),
                        "memory_gb": round(torch.cuda.get_device_properties(i).total_memory / 2 ** 30, 1)}
                       for i in range(torch.cuda.device_count())]
    try:
        import_llm_blender()
        env["llm_blender_importable"] = True
    except Exception as exc:  # absent, or broken on this transformers: the reference checks cannot run
        env["llm_blender_importable"] = False
        env["llm_blender_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    env["hub"] = hub_status()
    env["weights"] = {spec: weights_location(spec) for spec in dict.fromkeys(specs)}
    return env


def selfcheck_rows(input: str | Path | None = None, n: int | None = None
                   ) -> tuple[list[str], list[list[str]], str, list[str]]:
    """(prompts, candidates, source, row names): first `n` rows of the demo ("row 1") or a jsonl/parquet ("line 4")."""
    n = DEFAULT_ROWS if n is None else check_value(Count, n, "rows")  # (the Python API's; --rows: its argparse type)
    if input is not None:
        if not Path(input).exists():
            raise DataError(f"--input {input} does not exist: give a jsonl file of {{prompt, candidates}} rows or H4 "
                            f"rows (prompt, chosen, rejected), or leave --input out to use the embedded demo."
                            f"{unicode_twin(input)}")
        named = read_named_rows(Path(input), limit=n)
        return [r["prompt"] for _, r in named], [r["candidates"] for _, r in named], str(input), [w for w, _ in named]
    rows = [row for _, row in iter_jsonl(demo_path())][:n]
    found = collect_candidates(rows, ConstructParams(candidate_columns=list(DEMO_CANDIDATE_COLUMNS)))
    return (found.prompts, found.candidates, "the embedded demo (src/repro/data/demo_prompts.jsonl)",
            [f"row {i}" for i in range(1, len(found.prompts) + 1)])


def default_reference(model: str) -> str | None:
    """The other layout of a known PairRM hub id (PairRM-hf <-> PairRM); None for anything else."""
    return next((other for other in KNOWN_HUB_IDS if other != model), None) if model in KNOWN_HUB_IDS else None


def _rows_text(rows: Sequence[int], named: Sequence[tuple[str, str]]) -> str:
    """The rows at these indices of `named`'s (name, prompt): named as `selfcheck_rows` (repro score) names them."""
    texts = [" ".join(named[i][1].split()) for i in rows[:SHOWN_ROWS]]
    shown = ", ".join(f"{named[i][0]} ({t[:40] + ('…' if len(t) > 40 else '')!r})" for i, t in zip(rows, texts))
    return shown + (f" and {len(rows) - SHOWN_ROWS} more" if len(rows) > SHOWN_ROWS else "")


def compare_scores(scores: Sequence[Sequence[float]], reference: Sequence[Sequence[float]], dtype: str
                   ) -> dict[str, Any]:
    """Largest |difference|, rows beyond the dtype's tolerance, and rows whose ranks differ."""
    atol, rtol = TOLERANCE[dtype]
    diffs, bad, rank_differs = [], [], []
    for i, (a, b) in enumerate(zip(scores, reference)):
        a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
        diff = np.abs(a - b)
        diffs.append(float(diff.max()))
        if not np.all(diff <= atol + rtol * np.abs(b)):
            bad.append(i)
        if not np.array_equal(ranks_from_scores(a), ranks_from_scores(b)):
            rank_differs.append(i)
    return {"rows": len(diffs), "max_abs_diff": max(diffs, default=0.0), "atol": atol, "rtol": rtol,
            "rows_beyond_tolerance": bad, "rank_agreement": 1 - len(rank_differs) / max(1, len(diffs)),
            "rows_with_other_ranks": rank_differs}


def compare_choices(scores: Sequence[Sequence[float]], reference: Sequence[Sequence[float]], dtype: str
                    ) -> dict[str, Any]:
    """Rows whose chosen/rejected (the dataset's tie rule) differ from the reference's; decisive where not near-ties."""
    atol, rtol = TOLERANCE[dtype]
    differ, decisive = [], []
    for i, (a, b) in enumerate(zip(scores, reference)):
        mine, theirs = select_pair(list(a)), select_pair(list(b))
        if mine == theirs:
            continue
        differ.append(i)
        # a flip between picks the reference separates beyond the tolerance is an error; between near-ties, rounding
        if max(abs(b[m] - b[t]) for m, t in zip(mine, theirs)) > atol + rtol * max(abs(x) for x in b):
            decisive.append(i)
    return {"rows": len(scores), "agreement": 1 - len(differ) / max(1, len(scores)), "rows_with_other_choices": differ,
            "decisive_rows": decisive}


def _equivalence_check(name: str, scores, reference, dtype: str, named: Sequence[tuple[str, str]],
                       blender_spec: str | None = None) -> Check:
    found = {"llm_blender_model": _model_label(blender_spec)} if blender_spec else {}
    found.update(compare_scores(scores, reference, dtype))
    bad, tolerance = found["rows_beyond_tolerance"], f"{found['atol']:g} + {found['rtol']:g}·|score|"
    where = f"llm-blender on {code_span(found['llm_blender_model'])}: " if blender_spec else ""
    detail = (f"{where}max |diff| {found['max_abs_diff']:.2e} (tolerance {tolerance}) on "
              f"{counted(found['rows'], 'row')}; ranks agree on {100 * found['rank_agreement']:.1f} %")
    if bad:
        detail = f"{counted(len(bad), 'row')} beyond tolerance: {_rows_text(bad, named)}; " + detail
    return Check(name, "fail" if bad else "pass", detail, data=found)


def card_example_check(engines: dict[str, Any], name: str = "card_example") -> Check:
    """The PairRM-hf card's logits and preferences on each real (not stand-in) engine, within tolerance."""
    found, failures = {}, []
    for label, engine in engines.items():
        _, matrices = engine.score(CARD_INPUTS, [[a, b] for a, b in zip(CARD_A, CARD_B)], return_matrix=True)
        logits = [float(m[0, 1]) for m in matrices]
        prefers_a = (engine.compare(CARD_INPUTS, CARD_A, CARD_B) > 0).tolist()
        diff = max(abs(x - y) for x, y in zip(logits, CARD_LOGITS))
        atol = CARD_ATOL[engine.dtype]
        found[label] = {"logits": logits, "max_abs_diff": diff, "atol": atol, "prefers_a": prefers_a}
        if diff > atol or prefers_a != CARD_PREFERS_A:
            failures.append(f"{label}: logits {[round(x, 4) for x in logits]} (card {CARD_LOGITS}), prefers A "
                            f"{prefers_a} (card {CARD_PREFERS_A})")
    passed = [f"{k}: max |diff| {v['max_abs_diff']:.1e} <= {v['atol']:g}, preferences as the card"
              for k, v in found.items()]
    found["card_logits"] = CARD_LOGITS
    return Check(name, "fail" if failures else "pass", "; ".join(failures or passed), data=found)


def _model_label(spec: str) -> str:
    """The model as a report may publish it: hub id or built-in name as is, a local folder by its name only."""
    return spec if spec.startswith("builtin:") or is_hub_id(spec) else f"local folder {public_name(spec)}"


class _Run:
    """The state of one self-check while it runs (models loaded, scores kept) and the checks it adds."""

    def __init__(self, report: SelfCheck, prompts: list[str], candidates: list[list[str]], device, reference, log):
        self.report, self.prompts, self.candidates, self.device, self.log = report, prompts, candidates, device, log
        self.reference = reference
        self.budget = default_batch_tokens(device.type)  # the engine's, as a run's and bench's

    def add(self, check: Check) -> None:
        self.report.checks.append(check)
        mark = {"pass": "ok", "fail": "FAILED"}.get(check.status, check.status)
        self.log(f"  {check.name}: {mark}: {check.detail}")

    def load(self, spec: str, backend: str, dtype: str) -> tuple[Any, str]:
        """(a scorer through the run's loading code, ""), or (None, why) when it cannot load (also in `models`)."""
        self.log(f"repro selfcheck: loading {spec} ({backend}, {dtype}) ...")
        key = f"{'reference' if spec == self.reference else 'model'} {backend} {dtype}"
        start = time.perf_counter()
        try:
            scorer = load_scorer(spec, kind="pairrm", backend=backend, device=str(self.device), dtype=dtype)
        except Exception as exc:  # not cached, offline, llm-blender missing or broken: recorded, the rest goes on
            error = f"{type(exc).__name__}: {str(exc).strip()}" if str(exc).strip() else type(exc).__name__
            self.report.models[key] = {"spec": spec, "label": _model_label(spec), "error": error}
            return None, error
        self.report.models[key] = {**scorer.info, "spec": spec, "label": _model_label(spec),
                                   "identity": model_identity(spec),  # (a run's scorer is this model where equal)
                                   "load_seconds": round(time.perf_counter() - start, 2)}
        return scorer, ""

    def load_engine(self, name: str, spec: str):
        """The engine in fp32, and the check that says whether it loaded."""
        engine, error = self.load(spec, "repro", "fp32")
        self.add(Check(name, "pass", f"{engine.info['layout']} layout, stand-in: {engine.info['stand_in']}")
                 if engine else _not_run(name, error))
        return engine

    def score(self, scorer) -> list[np.ndarray]:
        if getattr(scorer, "backend", "repro") != "repro":
            return scorer.score(self.prompts, self.candidates)
        return scorer.score(self.prompts, self.candidates, batch_tokens=self.budget)


def _free_memory() -> None:
    """Give back the memory of models the caller dropped (a small GPU holds few PairRM copies)."""
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def run_selfcheck(model: str = DEFAULT_MODEL, reference_model: str | None = "default", *, device: str = "auto",
                  rows: int | None = None, input: str | Path | None = None,
                  report_dir: str | Path | None = DEFAULT_REPORT_DIR, timing: bool = True,
                  log: Callable[[str], None] | None = None) -> SelfCheck:
    """Check this machine's PairRM path end to end, writing selfcheck.json/.md into `report_dir` (None: nowhere);
    `reference_model` "default": the other layout of a known hub id (PairRM-hf <-> PairRM), None: none."""
    log = log or (lambda line: print(line, file=sys.stderr, flush=True))
    started = time.perf_counter()
    torch_device = resolve_device(device)
    run_dtype = resolve_dtype("auto", torch_device)
    prompts, candidates, source, names = selfcheck_rows(input, rows)  # bad input is an error before a model loads
    named, n_rows = list(zip(names, prompts)), counted(len(prompts), "row")
    if report_dir is not None:  # a relative folder (from Python; --report's is absolute): under the project root
        report_dir = Path(report_dir) if Path(report_dir).is_absolute() else project_root() / report_dir
        check_folder(report_dir, "--report", "The report (selfcheck.md, selfcheck.json) goes into a folder: give a "
                                             "new or existing folder that can be written, or a run directory.")
    model = str(model)
    reference = default_reference(model) if reference_model == "default" else (
        str(reference_model) if reference_model not in (None, "", "none") else None)
    reference = None if reference == model else reference
    for option, spec in (("--model", model), ("--reference-model", reference)):
        try:  # (a hub checkpoint that cannot be read: its load says why, in the report)
            kind = detect_kind(spec) if spec else "pairrm"
        except ReproError as exc:
            if not is_hub_id(spec) or Path(spec).expanduser().exists():  # a path or stand-in typed: refused at once
                raise type(exc)(f"{option} {spec}: {exc}") from None
            kind = "pairrm"
        if kind != "pairrm":
            raise ParameterError(f"{option} {spec} is a sequence-classifier reward model; repro selfcheck checks "
                                 f"PairRM against llm-blender only. Score it with `repro score --model "
                                 f"{shlex.quote(spec)} --input ...` and time it with `repro bench --model "
                                 f"{shlex.quote(spec)}`.")
    argv = sys.argv[1:]
    command = _shell_command(argv) if argv[:1] == ["selfcheck"] else "repro.cli.selfcheck.run_selfcheck(...)"
    report = SelfCheck(settings={
        "model": model, "model_label": _model_label(model), "reference_model": reference,
        "reference_model_label": _model_label(reference) if reference else None, "device": str(torch_device),
        "run_dtype": run_dtype, "rows": len(prompts), "input": str(input) if input is not None else None,
        "timing": timing, "command": command})
    report.rows = {"source": source, "prompts": len(prompts),
                   "candidates_per_prompt": sorted({len(c) for c in candidates})}
    log(f"repro selfcheck: {model}{f' and {reference}' if reference else ''} on {torch_device} "
        f"(run dtype {run_dtype}), {n_rows} from {source}")
    report.environment = env = environment_report(torch_device, [model] + ([reference] if reference else []))
    run = _Run(report, prompts, candidates, torch_device, reference, log)

    # 1. loading, fp32, through load_scorer as a run loads
    engine = run.load_engine("load_model", model)
    ref_engine = run.load_engine("load_reference", reference) if reference else None
    fp32_only = f"the run dtype on {torch_device.type} is fp32, checked above (fp16 is the CUDA path)"
    if engine is None:
        for name in ("card_example", "engine_vs_llm_blender_fp32", "engine_vs_llm_blender_run_dtype",
                     "run_dtype_vs_fp32_choices", "speed"):
            skipped = run_dtype == "fp32" and "run_dtype" in name
            run.add(_not_run(name, fp32_only if skipped else "--model could not be loaded (see load_model)",
                             gap=not skipped))
        return _finish(report, started, report_dir, log)
    stand_in = bool(engine.info["stand_in"])
    comparable_reference = ref_engine is not None and bool(ref_engine.info["stand_in"]) == stand_in

    # 2. the model card's example: only the real weights have the card's numbers
    real = {f"{role} ({e.info['layout']} layout, fp32)": e for role, e in (("model", engine), ("reference", ref_engine))
            if e is not None and not e.info["stand_in"]}
    run.add(card_example_check(real) if real else _not_run(
        "card_example", "stand-in: the card's logits are those of the real PairRM weights"))
    real = None  # drop the references: the models are freed below

    # 3. fp32: the two layouts, then llm-blender's own Blender.rank(batch_size=1)
    log(f"repro selfcheck: scoring {n_rows} (engine, fp32) ...")
    scores32 = run.score(engine)
    if comparable_reference:
        run.add(_equivalence_check("layouts_fp32", scores32, run.score(ref_engine), "fp32", named))
    elif reference:
        why = ("--reference-model could not be loaded" if ref_engine is None else
               "one model is a stand-in and the other is not: their weights differ by design")
        run.add(_not_run("layouts_fp32", why))
    ref_engine = None
    _free_memory()

    blender_spec, blender32, blender_errors = None, None, []
    if not env.get("llm_blender_importable"):
        blender_errors.append(f"llm-blender is not importable ({env.get('llm_blender_error')}), "
                              f"{reinstall(LLM_BLENDER)}")
    else:
        for spec in ([reference] if comparable_reference else []) + [model]:
            blender32, error = run.load(spec, "llm-blender", "fp32")
            if blender32 is not None:
                blender_spec = spec
                break
            blender_errors.append(f"{spec}: {error}")
    if blender32 is not None:
        log(f"repro selfcheck: scoring {n_rows} (llm-blender on {blender_spec}, fp32, batch_size=1) ...")
        run.add(_equivalence_check("engine_vs_llm_blender_fp32", scores32, run.score(blender32), "fp32", named,
                                   blender_spec))
    else:
        run.add(_not_run("engine_vs_llm_blender_fp32", "; ".join(blender_errors)))

    # 4. the run dtype (fp16 on CUDA, as llm-blender): against llm-blender in it, and its choices against fp32
    if run_dtype == "fp32":
        run.add(_not_run("engine_vs_llm_blender_run_dtype", fp32_only, gap=False))
        run.add(_not_run("run_dtype_vs_fp32_choices", fp32_only, gap=False))
        engine_rd, blender_rd = engine, blender32
    else:
        blender32 = None
        _free_memory()
        engine_rd, _ = run.load(model, "repro", run_dtype)
        blender_rd, blender_rd_error = run.load(blender_spec, "llm-blender", run_dtype) if blender_spec else (None, "")
        if blender_spec and blender_rd is None:  # why llm-blender is neither compared nor timed in the run dtype
            blender_errors.append(f"{blender_spec} in {run_dtype}: {blender_rd_error}")
        if engine_rd is None:
            why = f"the engine could not be loaded in {run_dtype} (see models)"
            run.add(_not_run("engine_vs_llm_blender_run_dtype", why))
            run.add(_not_run("run_dtype_vs_fp32_choices", why))
        else:
            log(f"repro selfcheck: scoring {n_rows} (engine, {run_dtype}) ...")
            scores_rd = run.score(engine_rd)
            if blender_rd is not None:
                run.add(_equivalence_check("engine_vs_llm_blender_run_dtype", scores_rd, run.score(blender_rd),
                                           run_dtype, named, blender_spec))
            else:
                run.add(_not_run("engine_vs_llm_blender_run_dtype", "; ".join(blender_errors)))
            run.add(_choices_check(scores_rd, scores32, run_dtype, named))
            if not stand_in:  # the card's numbers are the real weights'
                run.add(card_example_check({f"model ({engine_rd.info['layout']} layout, {run_dtype})": engine_rd},
                                           "card_example_run_dtype"))
    engine = None
    _free_memory()

    # 5. speed on the same rows, in the run dtype
    if not timing:
        run.add(_not_run("speed", "timing was switched off (--no-timing)", gap=False))
    elif engine_rd is None:
        run.add(_not_run("speed", f"the engine could not be loaded in {run_dtype}"))
    else:
        run.add(_speed_check(run, engine_rd, blender_rd, run_dtype, stand_in, "; ".join(blender_errors)))
    return _finish(report, started, report_dir, log)


def _choices_check(scores_rd, scores32, dtype: str, named: Sequence[tuple[str, str]]) -> Check:
    found = {**compare_choices(scores_rd, scores32, dtype), **compare_scores(scores_rd, scores32, dtype)}
    detail = (f"chosen/rejected agree on {100 * found['agreement']:.1f} % of {counted(found['rows'], 'row')}; "
              f"max |diff| {found['max_abs_diff']:.2e}")
    if found["decisive_rows"]:
        detail = (f"other chosen/rejected where fp32 separates the candidates: "
                  f"{_rows_text(found['decisive_rows'], named)}; " + detail)
    elif found["rows_with_other_choices"]:
        detail += f" (near-ties only: {_rows_text(found['rows_with_other_choices'], named)})"
    return Check("run_dtype_vs_fp32_choices", "fail" if found["decisive_rows"] else "pass", detail, data=found)


def _speed_check(run: _Run, engine, blender, dtype: str, stand_in: bool, blender_why: str) -> Check:
    """The engine against llm-blender at batch sizes 1 and 8 (bench's alternation), memory, TFLOP/s, projection."""
    prompts, candidates, device = run.prompts, run.candidates, run.device
    load = [round(os.getloadavg()[0], 2)]  # other jobs beside the timing make it no measurement
    contenders = pairrm_contenders(engine, [run.budget], blender)
    run.log(f"repro selfcheck: timing {', '.join(c.name for c in contenders)} on {counted(len(prompts), 'row')} ...")
    alternate(contenders, prompts, candidates, 8, device.type, run.log)
    lengths, useful_flops = engine_passes(engine, prompts, candidates)
    passes_per_job = PART2_MINI_1_PROMPTS * 2  # two candidates: two ordered pairs per prompt
    timing: dict[str, Any] = {
        "device": str(device), "dtype": dtype, "prompts": len(prompts), "passes": len(lengths),
        "mean_tokens_per_pass": round(statistics.mean(lengths), 1), "batch_tokens": run.budget,
        "torch_threads": torch.get_num_threads(), "load_average": [*load, round(os.getloadavg()[0], 2)],
        "contenders": {c.name: {
            "seconds": round(c.seconds, 3), "prompts_per_second": round(len(prompts) / c.seconds, 3),
            "peak_memory_mb": round(c.peak_extra_bytes / 2 ** 20, 1),
            "projected_part2_mini_1_seconds": round(c.seconds / len(lengths) * passes_per_job, 1)} for c in contenders},
        "speedup": {c.name: round(c.seconds / contenders[0].seconds, 2) for c in contenders[1:]},
        "memory": "CUDA allocator peak above the level before each call" if device.type == "cuda"
        else "process RSS peak above the level before each call (high-water mark)",
    }
    if device.type == "cuda":  # the models resident while timing; each call's peak above it is per contender
        timing["cuda_resident_mb"] = round(torch.cuda.memory_allocated(device) / 2 ** 20, 1)
        run.log("repro selfcheck: measuring the matmul peak ...")
        timing["gpu"] = gpu_use(useful_flops, contenders[0].seconds, str(device), dtype)
    timing["projection_note"] = (
        f"{PART2_MINI_1_PROMPTS} prompts x 2 candidates, at the seconds per pass measured here on passes of "
        f"{timing['mean_tokens_per_pass']:.0f} tokens on average" +
        ("; the model is a stand-in, far smaller than PairRM: not PairRM's time" if stand_in else ""))
    run.report.timing = timing
    engine_t = timing["contenders"][contenders[0].name]
    detail = "; ".join([f"engine {engine_t['prompts_per_second']:.2f} prompts/s", *(
        f"{k} takes {v:.2f}x the engine's time" for k, v in timing["speedup"].items())])
    if blender is None:
        detail += f"; llm-blender not timed: {blender_why.rstrip('.') or 'not loaded'}"
    if "gpu" in timing:
        g = timing["gpu"]
        detail += (f"; {g['engine_useful_tflops']:.1f} useful TFLOP/s = {100 * g['engine_fraction_of_peak']:.1f} % of "
                   f"the measured {dtype} matmul peak")
    detail += f"; part2_mini_1 projected {engine_t['projected_part2_mini_1_seconds'] / 60:.1f} min"
    # its own threads are part of the load: a core's worth beyond them is other work
    if (busiest := max(timing["load_average"])) > max(cores := os.cpu_count() or 1, torch.get_num_threads()) + 1:
        detail += (f"; the machine was busy (load {busiest:.1f} on {cores} cores): these times are not a measurement; "
                   f"run again on a quiet machine")
    return Check("speed", "measured", detail, data=timing)


def _finish(report: SelfCheck, started: float, report_dir, log) -> SelfCheck:
    if not report.settings["device"].startswith("cuda"):
        report.checks.append(_not_run("gpu_throughput", "no CUDA device here (a GPU measure)", gap=False))
    report.seconds = time.perf_counter() - started
    if report_dir is not None:
        report.write(report_dir)
        log(f"repro selfcheck: report -> {report.md_path} and {report.json_path.name}")
    return report


# what may stand before a path or after a folder's name in a text: no folder name goes on past these
PATH_EDGES = r"""\s'"`=:;,|()\[\]{}<>"""


def _home_as_tilde(value: Any) -> Any:
    """`value` with home as `~` in each text (through dicts and lists) only at a path's start (not /home/alice)."""
    if isinstance(value, dict):
        return {k: _home_as_tilde(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_home_as_tilde(v) for v in value]
    home = str(Path.home()).rstrip("/\\")
    text = str(value) if isinstance(value, Path) else value
    if not isinstance(text, str) or not home:
        return text
    return re.sub(rf"(?<![^{PATH_EDGES}]){re.escape(home)}(?=[/\\{PATH_EDGES}]|$)", "~", text)


def _pasteable(text: str) -> str:
    """`text` for pasting (selfcheck.md): cwd paths relative, home ones `~`, others by last name (`public_text`)."""
    cwd = str(Path.cwd()).rstrip("/\\")
    if cwd and not Path.home().is_relative_to(cwd):  # (else the home folder's paths: from ~)
        text = re.sub(rf"(?<![^{PATH_EDGES}]){re.escape(cwd)}([/\\]|(?=[{PATH_EDGES}]|$))",
                      lambda path: "" if path[1] else ".", text)
    return public_text(_home_as_tilde(text), keep=("~/", "."))  # (another user's ~bob/… by its last name)


def _shell_command(argv: Sequence[str]) -> str:
    """`repro ARGV` as a shell reads it, a home path as `~/` outside its quotes (`'~/my run'` is a folder named ~)."""
    home = str(Path.home()).rstrip("/")

    def word(arg: str) -> str:
        if home and (arg == home or arg.startswith(home + "/")):
            return "~/" + shlex.quote(arg[len(home) + 1:]) if arg != home else "~"
        return shlex.quote(arg)

    return " ".join(["repro", *map(word, argv)])


TEMPLATES = Path(__file__).parent / "templates"
REPORT = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES),
                            undefined=jinja2.ChainableUndefined, trim_blocks=True, lstrip_blocks=True,
                            keep_trailing_newline=True, autoescape=False)
# tidy: a text with no path of this machine (`_pasteable`), its HTML shown as text (`one_line`: its code spans kept
# unless spans=False, where another's follows); code: a name in a code span, as the card's; cell: a table's cell
REPORT.filters.update(rows=lambda n: counted(n, "row"), label=_model_label, lock_summary=lock_summary, f=format,
                      tidy=lambda text, spans=True: one_line(_pasteable(str(text)), spans),
                      code=lambda text: code_span(_pasteable(str(text))), cell=table_cell)


def render_markdown(record: dict[str, Any]) -> str:
    """selfcheck.md from a selfcheck.json record (templates/selfcheck.md.jinja)."""
    with rendering("The self-check's", f"This is a bug in repro.cli.selfcheck ({TEMPLATES}): report it with the "
                   f"{SELFCHECK_JSON} the check wrote."):
        return REPORT.get_template("selfcheck.md.jinja").render(record=record)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default=DEFAULT_MODEL,
                        help=f"the PairRM checkpoint a run will use: hub id, local folder or builtin:tiny-pairrm "
                             f"(default {DEFAULT_MODEL})")
    parser.add_argument("--reference-model", default="default",
                        help="a second checkpoint that must give the same scores (the other layout): default the "
                             "other of llm-blender/PairRM-hf and llm-blender/PairRM for those ids, else none; "
                             "'none' for none. llm-blender's own code runs on it (else on --model)")
    parser.add_argument("--device", type=schema_type(Device), default="auto",
                        help="auto | cpu | cuda | cuda:N (default auto)")
    parser.add_argument("--rows", type=schema_type(Count), default=None, help=f"rows to score (default {DEFAULT_ROWS})")
    parser.add_argument("--input", type=typed_path, default=None,
                        help="jsonl of {prompt, candidates} rows or H4 rows (prompt, chosen, rejected); default: "
                             "the embedded demo's prompts")
    parser.add_argument("--report", type=here_path, default=DEFAULT_REPORT_DIR,
                        help=f"where selfcheck.json and selfcheck.md go, from the current folder (default "
                             f"{DEFAULT_REPORT_DIR} of the project root); give a run directory and `repro run` into it "
                             f"cites the check")
    parser.add_argument("--no-timing", dest="timing", action="store_false", help="skip the speed measurements")


def main(args: argparse.Namespace) -> int:
    """Run the self-check, print the tables and the verdict line; exit 1 when a check failed, 2 when none ran."""
    report = run_selfcheck(args.model, args.reference_model, device=args.device, rows=args.rows,
                           input=args.input, report_dir=args.report, timing=args.timing)
    print(report.to_markdown().rstrip().rsplit("\n", 1)[0])  # its last line is the verdict, printed last below
    for check in report.failed:
        print(f"FAILED {check.name}: {check.detail}")
    print(report.verdict_line())
    return report.exit_code
