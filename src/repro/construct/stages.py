"""The construction stages, one function per notebook cell: load -> slice -> (generate) -> candidates ->
score -> pairs -> write. Each records its counts and timing in the run's manifest."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import datasets
import numpy as np

from ..dataset_io import row_prompt_id, write_split
from ..errors import DataError, ParameterError, Refused, counted
from ..exporters import FORMATS, SCORED_ONLY, check_same_candidates, export_rows
from ..manifest import Manifest
from ..parameters import TIE_RULES, ConstructParams, GenerationParams, check_generated_columns
from ..paths import RunDir
from ..revisions import SCORING_CODE, hub_commit, local_content, pinned_model, python_digest, revision_of
from ..scorers import known_kind, scorer_class
from ..scorers.common import resolve_device
from ..slicing import plan_slice
from ..sources import check_exists, load_source, require_columns
from ..subject import claim
from .generation import generate_candidates
from .pairs import (ORIGINAL_CHOSEN, ORIGINAL_REJECTED, CandidateSet, build_row, check_prompt_ids, collect_candidates,
                    row_where)
from .scorer_prompt import load_prompt_tokenizer, scorer_prompts
from .scoring import score_candidates, split_limits
from .selection import DROP_EMPTIED, DROP_MARGIN, DROP_SINGLE, DROP_TIE, DROP_TOO_FEW, rlhflow_name, select

NOTEBOOK = "01_construct"
# the stages in the notebook's order, each by its section (what a cell given results made before is told to run)
SECTIONS = {"load": "§1 Source rows", "slice": "§2 Slice", "generate": "§3 Generate candidates",
            "candidates": "§4 Candidates", "score": "§5 PairRM scores", "pairs": "§6 Pairs",
            "test": "§7 The test split", "write": "§8 Write the dataset"}


@dataclass
class Context:
    """What the notebook carries from cell to cell: the parameters, the run directory and its manifest."""

    params: ConstructParams
    run: RunDir
    manifest: Manifest
    slice_start: int = 0  # source row number of the first sliced row
    more_scores: dict[str, list[list[float]]] = field(default_factory=dict)  # `scorers:` by name, from score()
    prompt_tokenizer: Any = None  # scorer_prompt: chat_template's tokenizer, loaded (and checked) by load()
    prompt_revision: str | None = None  # the revision it is read at (revision_of: the policy's, where it names it)
    slice_stop: int = 0
    test_source: datasets.Dataset | None = None  # the rows of `test_split` (another split than source_split)
    test: bool = False  # the test split's stages (test_split other than source_split): their own work folders
    row_numbers: list[int] = field(default_factory=list)  # each row's number in its source split, for errors
    picks: list[tuple[int, int, int]] = field(default_factory=list)  # build(): each pair's candidate row, (chosen,
    # rejected) indices in it, in the dataset's row order (what 01_construct shows of a pair's candidates)
    made: dict[str, Any] = field(default_factory=dict)  # each stage's result as it last ran with this ctx (`starts`)
    parameters: dict[str, Any] = field(default_factory=dict)  # the notebook's values, generation's too (`start`)

    def start(self, setup: bool = False) -> None:
        """Mark the run running for the notebook (record joined or replaced: `ensure_started`), its folder held until
        the notebook ends; or refuse a folder of other parameters that made results, or another writer's. From the setup
        cell (`setup`), a complete run of these values stays complete, its folder free, until a stage runs again."""
        replacing, ours = self.manifest.refuse_other_parameters(self.parameters, NOTEBOOK), self.run.held()
        claim(self.run, None, "source", building=True)
        if not setup or replacing or self.manifest.read().get("status") != "complete":
            self.manifest.ensure_started(self.parameters, NOTEBOOK, replacing, ours)
        elif not ours:
            self.run.release(kernel=True)

    def starts(self, stage: str, *given: Any) -> None:
        """Before `stage` writes: what it is `given` must be results of the stages above as they last ran with this ctx
        (JupyterLab runs cells in any order: a new ctx with an earlier one's rows); its own and later ones go stale. A
        refusal (`Refused`) changes nothing, so the notebook goes on as it says."""
        names = list(SECTIONS)
        if any(all(x is not made for made in self.made.values()) for x in given):
            raise Refused(
                f"This cell was given results made before the setup cell (`ctx = stages.begin(...)`) last ran, or "
                f"before a cell above ran again: run the cells above first, §1 Source rows to "
                f"{SECTIONS[names[names.index(stage) - 1]]} (or Run All); nothing was written.")
        if (self.manifest.read().get("notebooks") or {}).get(NOTEBOOK, {}).get("status") != "running" or \
                not self.run.held():  # the notebook ended (its write cell, a failure): a stage run again opens the
            try:  # run anew; or the folder is not held yet (the setup cell): a stage takes it, or is refused
                self.start()
            except ParameterError as refused:  # (another writer's folder, ...: nothing written, ctx as it was)
                raise Refused(str(refused)) from None
        for later in names[names.index(stage):]:
            self.made.pop(later, None)

    def keep(self, stage: str, result: Any) -> Any:
        """`result`, kept as what `stage` last made with this ctx."""
        self.made[stage] = result
        return result


class PrefixedManifest:
    """The manifest as the test split's stages write it: their stages, counts and records under `test_` names."""

    def __init__(self, manifest: Manifest):
        self.manifest = manifest

    def stage(self, name: str):
        return self.manifest.stage(f"test_{name}")

    def set_counts(self, **counts: int) -> None:
        self.manifest.set_counts(**{f"test_{k}": v for k, v in counts.items()})

    def record(self, key: str, value: Any) -> None:
        self.manifest.record(f"test_{key}", value)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.manifest, name)


def rows_for_test_split(p: ConstructParams, available: int, where: str | None = None) -> list[int]:
    """Which of `available` rows the test split takes: the first test_rows (capped by limit), or a seeded sample;
    fewer rows than that are an error naming `where`, or (`where` None: the built rows, after drops) all taken."""
    n = min(p.test_rows or available, p.limit or p.test_rows or available)
    if n > available and where:
        raise DataError(f"test_rows={p.test_rows} but {where} holds {available} rows: lower test_rows (or null: all).")
    n = min(n, available)
    return sorted(np.random.default_rng(p.test_seed).choice(available, n, replace=False).tolist()) \
        if p.test_seed is not None else list(range(n))


def begin(params: ConstructParams, generation: GenerationParams | None = None) -> Context:
    """Open the run directory and manifest (started here, generation parameters too, when papermill runs it alone)."""
    if generation is not None:
        check_generated_columns(params, generation)
    resolve_device(params.device)  # a device this machine lacks: refused here, not at scoring (after generation)
    if generation is not None and params.generate:
        resolve_device(generation.generation_device, "generation_device")
    scorers = [(params.scorer_model, params.scorer_kind, params.scorer_backend, params.scorer_options),
               *((s.model, s.kind, s.backend, s.options) for s in params.scorers)]
    split_limits(params.scorer_options, params.source_maxlength, params.candidate_maxlength)  # (a limit given twice)
    for model, kind, backend, options in scorers:  # an option of another kind of scorer: refused here, not at scoring
        if options:  # (PairRM's limits among them: a sequence classifier has none)
            scorer_class(model, kind, backend, options)
    # scorer_kind auto: the checkpoint's kind, which the schema could not read (read only for chat_template)
    if why := params.templated_twice(known_kind(model, kind) for model, kind, *_ in scorers):
        raise ParameterError(why)
    check_exists(params.source, "source")  # a mistyped path writes nothing, not even the run directory
    parameters = {**params.model_dump(), **(generation.model_dump() if generation else {})}
    run = RunDir(params.run_root)
    ctx = Context(params, run, Manifest(run), parameters=parameters,
                  prompt_revision=revision_of("scorer_prompt_tokenizer", parameters))
    ctx.start(setup=True)
    return ctx


def load(ctx: Context) -> datasets.Dataset:
    """Load the source split and check it has what the later stages read."""
    p = ctx.params
    ctx.starts("load")
    with ctx.manifest.stage("load") as info:
        if p.scorer_prompt == "chat_template":  # a tokenizer without a template fails here, before any work
            ctx.prompt_tokenizer = load_prompt_tokenizer(p.scorer_prompt_tokenizer, ctx.prompt_revision)
        ds = load_source(p.source, p.source_split, revision=p.source_revision)
        if p.test_split not in (None, p.source_split):  # its size checked here, before any work
            ctx.test_source = load_source(p.source, p.test_split, "source", "test_split", revision=p.source_revision)
            rows_for_test_split(p, len(ctx.test_source), f"split {p.test_split!r} of source {p.source!r}")
        if len(ds) == 0:
            raise DataError(f"source {p.source!r} split {p.source_split!r} has no rows.")
        conversation = next((c for c in ("context_messages", "messages") if c in ds.column_names), None)
        require_columns(ds, ["prompt"], f"source {p.source!r}", hint=(
            f"Write the user turn of its `{conversation}` to a `prompt` column first (e.g. `ds.map(lambda r: "
            f"{{'prompt': r['{conversation}'][0]['content']}})`, with the user turn first), and give that as "
            f"source.") if conversation else "")
        if not p.generate:
            pair = {"chosen", "rejected"} <= set(ds.column_names) and not p.include_original_pair
            require_columns(ds, p.candidate_columns, f"source {p.source!r}",
                            hint="Set candidate_columns to the columns holding the responses to rank "
                                 "(or turn on generate to produce resp0..resp{n-1})." + (
                                     " This source has chosen/rejected responses: candidate_columns: [] with "
                                     "include_original_pair: true ranks those two." if pair else ""))
        if p.messages == "source":
            require_columns(ds, ["messages"], f"source {p.source!r}",
                            hint="Set messages: chosen (the chosen conversation) for sources without one.")
        if p.include_reference and not p.generate:
            require_columns(ds, ["reference_response"], f"source {p.source!r}",
                            hint="Set include_reference: false, or use a source with reference responses.")
        if p.include_original_pair:
            require_columns(ds, ["chosen", "rejected"], f"source {p.source!r}",
                            hint="Set include_original_pair: false for sources without chosen/rejected.")
        info.update(source=p.source, split=None if Path(p.source).is_file() else p.source_split,  # a file: no split
                    revision=p.source_revision, rows=len(ds),
                    columns=ds.column_names, **({"content": content} if (content := local_content(p.source)) else {}),
                    **({"commit": commit} if (commit := hub_commit(p.source, p.source_revision)) else {}))
    ctx.manifest.update(counts={"source": len(ds)})  # the counts of the stages this attempt reaches (none earlier)
    return ctx.keep("load", ds)


def slice_rows(ctx: Context, ds: datasets.Dataset) -> datasets.Dataset:
    """Keep the part, drop, mini (and limit) rows the parameters name."""
    p = ctx.params
    ctx.starts("slice", ds)
    with ctx.manifest.stage("slice") as info:
        plan = plan_slice(len(ds), p)
        info.update(plan.counts, start=plan.start, stop=plan.stop, dropped_source_rows=list(plan.dropped))
        sliced = ds.select(plan.indices)
    ctx.manifest.set_counts(**{k: plan.counts[k] for k in ("part", "dropped", "after_drop")}, sliced=len(sliced))
    ctx.slice_start, ctx.slice_stop, ctx.row_numbers = plan.start, plan.stop, list(plan.indices)
    if p.test_split == p.source_split:  # a sample of the built rows: at most the sliced ones
        rows_for_test_split(p, len(sliced), f"the slice of split {p.source_split!r} (the test rows are drawn from it)")
    return ctx.keep("slice", sliced)


def generate(ctx: Context, ds: datasets.Dataset, generation: GenerationParams | None) -> datasets.Dataset:
    """Generate the reference and candidates with a policy model when `generate` is on; else pass through."""
    p = ctx.params
    ctx.starts("generate", ds)
    if not p.generate:
        return ctx.keep("generate", ds)
    if p.include_reference and not generation.generate_reference:  # the source's own, kept beside the generated ones
        require_columns(ds, ["reference_response"], f"source {p.source!r}",
                        hint="include_reference ranks the source's reference_response when generate_reference is "
                             "false: set include_reference: false, or generate_reference: true, or use a source "
                             "with reference responses.")
    with ctx.manifest.stage("generate") as info:
        rows = generate_candidates(ds.to_list(), generation, ctx.run.stage_work("generation", ctx.test), ctx.manifest,
                                   cache_dir=p.row_cache, row_numbers=ctx.row_numbers,
                                   split=p.source_split if ctx.test else None)
        out = datasets.Dataset.from_list(rows)
        info.update(rows_in=len(ds), rows_out=len(out))
        given = iter(zip(ctx.row_numbers or range(len(ds)), ds["prompt"]))  # the rows left (long_prompts: skip)
        ctx.row_numbers = [next(n for n, prompt in given if prompt == row["prompt"]) for row in rows]
    ctx.manifest.set_counts(**({"dropped_long_prompts": len(ds) - len(out)} if generation.long_prompts == "skip"
                               else {}), generated=len(out))
    return ctx.keep("generate", out)


def candidates(ctx: Context, ds: datasets.Dataset) -> CandidateSet:
    """Each kept row's candidate texts; rows with fewer than two distinct ones are dropped and counted."""
    p = ctx.params
    ctx.starts("candidates", ds)
    with ctx.manifest.stage("candidates") as info:
        rows = ds.to_list()
        ids = [row_prompt_id(r, r.get("prompt")) for r in rows]
        numbers, split = ctx.row_numbers or list(range(len(rows))), p.source_split if ctx.test else None
        keep = check_prompt_ids(ids, p.duplicate_prompt_ids, numbers, split)
        cs = collect_candidates([rows[i] for i in keep], p, row_numbers=[numbers[i] for i in keep], split=split)
        cs.rows = [keep[i] for i in cs.rows]
        if len(keep) < len(rows):
            cs.dropped["duplicate_prompt_id"] = len(rows) - len(keep)
        if rows and not len(cs):  # nothing to score: say why here, not through an empty figure or dataset
            why = {DROP_TOO_FEW: f"fewer than two distinct candidates in candidate_columns {p.candidate_columns} "
                                 f"(equal texts count once)",
                   DROP_EMPTIED: f"fewer than two distinct non-empty candidates (empty_candidates: drop left "
                                 f"{counted(cs.empty_dropped, 'empty text')} out)",
                   "duplicate_prompt_id": "the prompt_id of an earlier row (duplicate_prompt_ids: keep_first)"}
            counts = " and ".join(f"{n} of {len(rows)} rows have {why.get(k, k)}" for k, n in cs.dropped.items())
            raise DataError(f"No row is left to score: {counts}. Check candidate_columns against the source's "
                            f"columns ({sorted(ds.column_names)}) and its texts.")
        if p.output_format == "sppo":  # one generate_i column per candidate: checked here, not after the scoring
            listed = [names[scored_only(names, p):] for names in cs.names]
            most = max(listed, key=len)
            odd = next((k for k, names in enumerate(listed) if len(names) < len(most)), 0)
            where = row_where(numbers[cs.rows[odd]], rows[cs.rows[odd]].get("prompt_id"), split)
            check_same_candidates([len(names) for names in listed], f": {where} has {listed[odd]} of {most}")
        sizes = [len(c) for c in cs.candidates]
        info.update(rows=len(cs), dropped=cs.dropped,
                    candidates_per_row={str(k): sizes.count(k) for k in sorted(set(sizes))})
    ctx.manifest.set_counts(with_candidates=len(cs), dropped_too_few_candidates=cs.dropped.get(DROP_TOO_FEW, 0),
                            dropped_duplicate_prompt_id=cs.dropped.get("duplicate_prompt_id", 0),
                            **({"empty_candidates_dropped": cs.empty_dropped,
                                f"dropped_{DROP_EMPTIED}": cs.dropped.get(DROP_EMPTIED, 0)}
                               if p.empty_candidates == "drop" else {}),
                            **({"kept_one_text": cs.one_text} if p.too_few_candidates == "keep" else {}))
    return ctx.keep("candidates", cs)


def scored_only(names: list[str], p: ConstructParams) -> int:
    """How many of a row's first candidates are ranked but never paired nor listed (first_scored_only's originals)."""
    return sum(n in (ORIGINAL_CHOSEN, ORIGINAL_REJECTED) for n in names) \
        if p.original_pair_position == "first_scored_only" else 0


def score(ctx: Context, cs: CandidateSet) -> list[list[float]]:
    """The primary scorer's scores (work/scoring); each of `scorers` scores too (work/scoring/<name>/, in ctx)."""
    p = ctx.params
    ctx.starts("score", cs)
    prompts = scorer_prompts(cs.prompts, p.scorer_prompt, ctx.prompt_tokenizer)
    work = ctx.run.stage_work("scoring", ctx.test)
    common = dict(device=p.device, chunk_size=p.chunk_size, num_processes=p.num_processes, cache_dir=p.row_cache)
    with ctx.manifest.stage("score") as info:
        model = pinned_model(p.scorer_model, p.scorer_revision, "scorer_revision", "scorer_model")
        result = score_candidates(prompts, cs.candidates, model=model, backend=p.scorer_backend, dtype=p.dtype,
                                  batch_tokens=p.batch_tokens, work_dir=work, source_maxlength=p.source_maxlength,
                                  candidate_maxlength=p.candidate_maxlength, kind=p.scorer_kind,
                                  options=p.scorer_options, **common)
        # code: the scoring fingerprint's (`job_fingerprint`): a card says whether its self-check tested it
        info.update(result.info, scorer_prompt=p.scorer_prompt, code=python_digest(*SCORING_CODE))
    # the model as the user named it (a pinned revision loads from a snapshot folder, which `path` keeps); the hub
    # commit whose chat template the prompts went through
    commit = p.scorer_prompt == "chat_template" and hub_commit(p.scorer_prompt_tokenizer, ctx.prompt_revision, "model")
    ctx.manifest.record("scorer", {**result.info, "model": p.scorer_model, "revision": p.scorer_revision,
                                   "scorer_prompt": p.scorer_prompt,
                                   "scorer_prompt_tokenizer": p.scorer_prompt_tokenizer,
                                   **({"scorer_prompt_tokenizer_commit": commit} if commit else {})})
    ctx.manifest.set_counts(scored=len(result.scores))
    recorded = [{"name": "primary", "column": "candidate_scores", "decides_pairs": True, **result.info}]
    for spec in p.scorers:
        options = dict(spec.options)
        limits = {k: options.pop(k, getattr(p, k)) for k in ("source_maxlength", "candidate_maxlength")}
        with ctx.manifest.stage(f"score_{spec.name}") as info:
            more = score_candidates(prompts, cs.candidates, model=spec.model, kind=spec.kind, backend=spec.backend,
                                    dtype=spec.dtype, batch_tokens=spec.batch_tokens or p.batch_tokens,
                                    work_dir=work / spec.name, options=options, **limits, **common)
            info.update(more.info)
        ctx.more_scores[spec.name] = more.scores
        recorded.append({"name": spec.name, "column": f"candidate_scores_{spec.name}", "decides_pairs": False,
                         **more.info})
    if p.scorers:
        ctx.manifest.record("scorers", recorded)
    return ctx.keep("score", result.scores)


def build(ctx: Context, ds: datasets.Dataset, cs: CandidateSet, scores: list[list[float]]) -> datasets.Dataset:
    """Rows in the output format's columns (default the seed's): the pair the `selection` rule picks."""
    p = ctx.params
    ctx.starts("pairs", ds, cs, scores)
    with ctx.manifest.stage("pairs") as info:
        rows, picks, kept, dropped = [], [], [], {}
        for k, (i, prompt, cands, s) in enumerate(zip(cs.rows, cs.prompts, cs.candidates, scores)):
            source_row = ds[int(i)]
            lead = scored_only(cs.names[k], p)
            pick = select(s[lead:], cands[lead:], row_prompt_id(source_row, prompt), p)
            if pick.dropped:
                dropped[pick.dropped] = dropped.get(pick.dropped, 0) + 1
                continue
            picks.append((pick.chosen + lead, pick.rejected + lead))
            kept.append(k)
            rows.append(build_row(source_row, prompt, cands, s, messages=p.messages,
                                  keep_all_candidates=p.keep_all_candidates,
                                  more_scores={name: more[k] for name, more in ctx.more_scores.items()},
                                  pick=picks[-1]) | {SCORED_ONLY: lead})
        if not rows:  # `datasets` cannot write no rows; the scores are kept (work/, the row cache) for a re-run
            why = {DROP_MARGIN: (f"a margin below min_margin={p.min_margin:g} (chosen minus rejected)",
                                 "lower min_margin"),
                   DROP_TIE: ("chosen and rejected tied (ties: drop)", "set ties: keep"),
                   DROP_SINGLE: ("fewer than two candidates to pair (original_pair_position: first_scored_only)",
                                 "give each row more candidates")}
            counts = " and ".join(f"{n} of {len(cs)} scored rows have {why[k][0]}" for k, n in dropped.items())
            fix = " or ".join(why[k][1] for k in dropped)
            raise DataError(f"No row is left to write: {counts}. To keep rows, {fix}; the scores are kept, so a run "
                            f"with the new values does not score again.")
        out = export_rows(p.output_format, rows, picks, p.keep_all_candidates, list(ctx.more_scores))
        ctx.picks = [(k, *pick) for k, pick in zip(kept, picks)]
        info.update(rows=len(out), selection=p.selection, rlhflow_choose_type=rlhflow_name(p),
                    ties=p.ties, min_margin=p.min_margin, dropped=dropped, output_format=p.output_format,
                    tie_rule=TIE_RULES[p.lowest_tie])
    ctx.manifest.set_counts(kept=len(out), **{f"dropped_{reason}": n for reason, n in sorted(dropped.items())})
    return ctx.keep("pairs", out)


def build_test(ctx: Context, generation: GenerationParams | None, train: datasets.Dataset) -> datasets.Dataset | None:
    """The test split: the built train rows sampled if it is the source split (SPPO's), else its rows built alike."""
    p = ctx.params
    ctx.starts("test", train)
    if p.test_split is None:
        return None
    if p.test_split == p.source_split:
        return ctx.keep("test", train.select(rows_for_test_split(p, len(train))))
    numbers = rows_for_test_split(p, len(ctx.test_source), f"split {p.test_split!r}")
    rows = ctx.test_source.select(numbers)
    t = replace(ctx, params=p.model_copy(update={"source_split": p.test_split}), test=True, more_scores={},
                manifest=PrefixedManifest(ctx.manifest), slice_start=0, row_numbers=numbers, made={"slice": rows})
    t.manifest.set_counts(source=len(ctx.test_source), sliced=len(rows))
    rows = generate(t, rows, generation)
    cs = candidates(t, rows)
    return ctx.keep("test", build(t, rows, cs, score(t, cs)))


def write(ctx: Context, out: datasets.Dataset, notebook: str = NOTEBOOK,
          test: datasets.Dataset | None = None) -> dict[str, Any]:
    """Write the dataset (and the `test` split) in push_to_hub's layout and record its files' hashes."""
    p, fmt = ctx.params, FORMATS[ctx.params.output_format]
    ctx.starts("write", out, *(() if test is None else (test,)))
    split = fmt.split_name(p.iteration, p.output_split)
    with ctx.manifest.stage("write") as info:
        split_info = write_split(out, ctx.run.dataset, split)
        facts = {k: v for k, v in split_info.items() if k != "files"}
        info.update(facts)
        if test is not None:
            test_info = write_split(test, ctx.run.dataset, fmt.test_split_name(p.iteration, p.output_split))
            test_files = test_info.pop("files")
            ctx.manifest.record("test_split", {**test_info, "from": "train_sample" if p.test_split == p.source_split
                                               else "source_split", "source_split": p.test_split,
                                               "test_rows": p.test_rows, "test_seed": p.test_seed})
            ctx.manifest.add_outputs(*test_files)
    ctx.manifest.record("dataset", {**facts, "output_format": p.output_format, "output_format_from": fmt.source})
    ctx.manifest.record("lineage", lineage(ctx, split))
    ctx.manifest.add_outputs(*split_info["files"])
    ctx.manifest.notebook_ended(notebook)
    return split_info


def _at(name: str | None, revision: str | None) -> str | None:
    return None if name is None else f"{name}@{revision}" if revision else name


def lineage(ctx: Context, split: str) -> dict[str, Any]:
    """Iteration -> prompt shard -> policy@revision -> scorer (+ tokenizer@commit of its prompts) -> outputs."""
    p, data = ctx.params, ctx.manifest.read()
    generation, load = data.get("generation") or {}, (data.get("stages") or {}).get("load") or {}
    tokenizer = _at(p.scorer_prompt_tokenizer, (data.get("scorer") or {}).get("scorer_prompt_tokenizer_commit"))
    return {"iteration": p.iteration, "source": _at(p.source, load.get("commit") or p.source_revision),
            "source_split": p.source_split, "prompt_shard": [ctx.slice_start, ctx.slice_stop],
            "policy": _at(generation.get("policy_model"), generation.get("policy_revision")) if p.generate else None,
            "scorer": _at(p.scorer_model, p.scorer_revision), "selection": p.selection,
            "output_format": p.output_format, "split": split,
            **({"scorer_prompt_tokenizer": tokenizer} if p.scorer_prompt == "chat_template" else {})}


def summary(ctx: Context) -> dict[str, Any]:
    """The counts at each stage and the scorer, for display at the end of the notebook."""
    data = ctx.manifest.read()
    return {"counts": data.get("counts", {}), "scorer": data.get("scorer", {}), "dataset": data.get("dataset", {})}
