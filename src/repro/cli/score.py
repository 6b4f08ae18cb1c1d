"""`repro score`: reward-model scores of jsonl (or parquet) rows of any layout repro writes, for SPPO-style scripts:
each output line is the input row plus `candidates`, `scores` (higher is better) and `ranks` (1 = best, ties share);
a pair's row (candidates: its chosen and rejected) gets them as its `score_chosen` / `score_rejected` too, and a row
that lists every candidate's score (`LISTED`) its chosen / rejected and their scores picked again from them."""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import shlex
import shutil
import sys
from itertools import islice
from pathlib import Path
from typing import Any, Callable, Sequence, get_args

import pyarrow.parquet as pq

from ..construct.scoring import score_candidates
from ..construct.selection import best_worst
from ..dataset_io import prompt_text, response_text
from ..errors import Busy, DataError, ParameterError, counted
from ..exporters import CALLED, LISTED, SCORED, detect_format, generate_columns, seed_row, sppo_columns
from ..jobs import (CHUNK_GLOB, FINGERPRINT_FILE, NOTE_GLOB, STALE_PREFIX, atomic_write_text, is_main_process,
                    json_default, world_size)
from ..parameters import (BATCH_TOKENS, PAIRRM_LIMITS, ConstructParams, Count, Device, Dtype, Index, ScorerBackend,
                          ScorerKind, TokenLimit, check_value)
from ..paths import (COMPARE_JSON, FAMILY_JSON, MANIFEST_JSON, METRICS_JSON, STAND_IN_MARKER, WORK_DIR, RunDir,
                     check_folder, here_path, typed_path, utf8_text, wait_advice)
from ..scorers import either, resolve_kind
from ..scorers.common import MIN_CANDIDATES, ranks_from_scores
from ..sources import DATA_SUFFIXES, RECORDS, iter_jsonl, load_source, local_splits
from ..subject import mark_scorer, marked_scorer

RUN = {name: field.default for name, field in ConstructParams.model_fields.items()}  # the run's defaults
# the json files of a dataset or run folder that hold no rows: a saved dataset's records, a run's own
SIDECARS = {*RECORDS, MANIFEST_JSON, METRICS_JSON, FAMILY_JSON, COMPARE_JSON, FINGERPRINT_FILE}


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True,
                        help="hub id (llm-blender/PairRM, llm-blender/PairRM-hf, a sequence-classifier reward "
                             "model), a local checkpoint directory, or a random stand-in whose scores are noise "
                             "(builtin:tiny-pairrm, builtin:tiny-reward-llama, builtin:tiny-reward-deberta)")
    parser.add_argument("--kind", default=RUN["scorer_kind"], choices=get_args(ScorerKind),
                        help=f"auto (read from the checkpoint's config.json), or the kind: {either()}; a "
                             "sequence_classifier is an AutoModelForSequenceClassification with one output: its "
                             "logits are the scores")
    parser.add_argument("--chat-template", type=typed_path, default=None,
                        help="sequence classifiers without a chat template: a Jinja file rendering the user and "
                             "assistant turns as the model was trained")
    parser.add_argument("--trust-remote-code", action="store_true",
                        help="sequence classifiers that ship their own code (e.g. ArmoRM): run it")
    parser.add_argument("--output-index", type=schema_type(Index), default=None,
                        help="sequence classifiers with several outputs: the one that is the reward")
    parser.add_argument("--max-length", type=schema_type(Count), default=None,
                        help="sequence classifiers: tokens per conversation, longer ones cut (default: its config's "
                             "max_position_embeddings)")
    parser.add_argument("--input", required=True, type=typed_path,
                        help="jsonl (or .parquet) rows with 'prompt' and 'candidates' (H4 and SELM rows: 'chosen' "
                             "and 'rejected'; SPPO's, Snorkel's, RLHFlow's: every candidate they list), or a dataset "
                             "folder of one split (data/<split>-*.parquet)")
    parser.add_argument("--output", required=True,
                        help="a .jsonl file: the input rows + 'scores' and 'ranks'; a pair's row (H4's, TRL's) gets "
                             "them as its 'score_chosen' and 'score_rejected' (and 'score_margin', where it has one), "
                             "the input's kept as 'input_score_chosen', ...; a row that lists every candidate's "
                             "score (the seed's 'candidate_scores', SPPO's, Snorkel's, RLHFlow's) gets them as that "
                             "list and its chosen / rejected (SPPO's probabilities) picked again from them, the "
                             "input's kept as 'input_<name>'")
    parser.add_argument("--force", action="store_true", help="replace an existing --output")
    parser.add_argument("--device", type=schema_type(Device), default=RUN["device"],
                        help=f"auto | cpu | cuda | cuda:N (default {RUN['device']})")
    parser.add_argument("--dtype", type=schema_type(Dtype), default=RUN["dtype"],
                        help="auto (fp16 on CUDA, fp32 on CPU) | fp32 | fp16 | bf16 (or torch's names: float16, ...)")
    parser.add_argument("--backend", default=RUN["scorer_backend"], choices=get_args(ScorerBackend),
                        help="repro (this package's engine) or llm-blender (the original code, as reference)")
    parser.add_argument("--batch-tokens", type=schema_type(Count), default=RUN["batch_tokens"],
                        help=f"token budget per forward batch, padding counted (default {BATCH_TOKENS['cuda']} on a "
                             f"GPU, {BATCH_TOKENS['cpu']} on a CPU)")
    for side, what in (("source", "prompt"), ("candidate", "candidate")):
        parser.add_argument(f"--{side}-maxlength", type=schema_type(TokenLimit), default=None,
                            help=f"PairRM's {what} limit in tokens (default: the checkpoint's own, as llm-blender; "
                                 f"{PAIRRM_LIMITS[f'{side}_maxlength']} where its config has none)")
    # resumable and multi-process scoring (repro.construct.scoring): chunks on disk, torchrun workers
    parser.add_argument("--num-processes", type=schema_type(Count), default=RUN["num_processes"],
                        help=f"torchrun workers on this node, e.g. one per GPU (default {RUN['num_processes']}); under "
                             "your own torchrun (several nodes) leave it at 1: every rank runs this command")
    parser.add_argument("--work-dir", type=typed_path, default=None,
                        help="keep finished chunks here, so that re-running the command continues after a crash or "
                             "Ctrl-C (default: OUTPUT.work/, removed once OUTPUT is written by one process)")
    parser.add_argument("--chunk-size", type=schema_type(Count), default=RUN["chunk_size"],
                        help=f"prompts per resumable chunk and engine call (default {RUN['chunk_size']})")


def schema_type(annotation: Any) -> Callable[[str], Any]:
    """An option's argparse type: its value read by the schema's rule (a notebook's parameter's), refused as argparse
    refuses one, naming the option (2048.0 is 2048, as in a params file and the Python API)."""
    return functools.partial(check_value, annotation, error=argparse.ArgumentTypeError)


def _assistant_text(turns: Any, where: str, column: str) -> str:
    text = response_text(turns)
    if not isinstance(text, str):
        raise DataError(f"{where}: '{column}' is neither a string nor a list of messages with an assistant message "
                        f"holding its 'content'.")
    return text


def _rows_of(path: Path, option: str):
    """(where, row) of each row, numbered from 1 as a viewer numbers them: a .parquet file's rows, a dataset folder's
    one split (hub layout, a run directory, save_to_disk: as 02_analyze reads them), else the jsonl file's lines."""
    if path.is_dir():
        if (path / "state.json").is_file():  # one Dataset's save_to_disk: no split
            return ((f"row {n} of {path}", row) for n, row in enumerate(load_source(str(path), "", option), 1))
        if len(splits := local_splits(path) or []) == 1:
            return ((f"row {n} of {path} (split {splits[0]})", row)
                    for n, row in enumerate(load_source(str(path), splits[0], option), 1))
        if len(splits) > 1 and (path / splits[0]).is_dir():  # a DatasetDict's save_to_disk: a folder per split
            raise DataError(f"{option} {path} holds splits {', '.join(splits)}: give one of their folders, e.g. "
                            f"{option} {path / splits[0]}.")
        files = sorted(f.relative_to(path).as_posix() for f in path.rglob("*")  # rows: not a run's work/ chunks
                       if f.suffix in {".jsonl", ".json", ".parquet"} and f.name not in SIDECARS
                       and WORK_DIR not in f.relative_to(path).parts)
        found = f"its data files: {', '.join(files[:6])}{', ...' * (len(files) > 6)}" if files else \
            "it holds no data file"
        raise DataError(f"{option} {path} is a folder ({found}); give the path of one jsonl or parquet file in it.")
    if path.suffix.lower() in DATA_SUFFIXES - {".jsonl", ".json", ".txt", ".gz", ".parquet"}:
        raise DataError(f"{option} {path} is a {path.suffix} file; rows are read from jsonl (one JSON object per "
                        f"line) or parquet: convert it to one of those.")
    if path.suffix.lower() != ".parquet" or not path.is_file():
        return iter_jsonl(path, option)
    try:
        table = pq.read_table(path)
    except Exception as exc:  # pyarrow's ArrowInvalid, OSError, ...: the file, not a row
        raise DataError(f"{option} {path} could not be read as parquet ({type(exc).__name__}: {str(exc)[:300]}); the "
                        f"file is truncated or damaged. Write it again (e.g. Dataset.to_parquet).") from None
    return ((f"row {n} of {path}", row) for n, row in enumerate(table.to_pylist(), 1))


def _layout_named(row: dict[str, Any], layout: str) -> str:
    """A row's layout as a message names it: the seed's reads a plain row and an H4 row too (chosen and rejected)."""
    pair = {"chosen", "rejected"} <= set(row)
    if layout == "seed" and "candidates" not in row and pair:
        return "an H4 row (candidates: its chosen and rejected)"
    if layout == "seed" and not pair:
        return "a row of prompt and candidates" if "candidates" in row else \
            "a row of neither 'candidates' nor 'chosen' and 'rejected'"
    return f"{CALLED[layout]} layout (candidates in '{SCORED.get(layout, 'candidates')}')"


def read_rows(path: Path, min_candidates: int = 2, limit: int | None = None,
              option: str = "--input") -> list[dict[str, Any]]:
    """`read_named_rows`' rows."""
    return [row for _, row in read_named_rows(path, min_candidates, limit, option)]


def read_named_rows(path: Path, min_candidates: int = 2, limit: int | None = None,
                    option: str = "--input") -> list[tuple[str, dict[str, Any]]]:
    """(name: "line 4" of a jsonl file, else "row 3", row) of the first `limit` rows of a jsonl (or .parquet) file, each
    checked: a string `prompt` and >= `min_candidates` strings in `candidates` (an H4 row's chosen and rejected; a row
    of another layout repro writes: its every candidate, its prompt's text as `prompt`, `repro.exporters.seed_row`)."""
    rows, found, first = [], list(islice(_rows_of(path, option), limit)), None
    for where, row in found:
        if not isinstance(row, dict):
            raise DataError(f"{where} is a JSON {type(row).__name__}; expected an object with 'prompt' and "
                            f"'candidates'. jsonl is one JSON object per line (not a JSON array of them); rows are "
                            f"read from jsonl or parquet.")
        layout = detect_format(row)  # each row by its own columns: a file of one layout
        first = first or (where.split(" of ")[0], layout, _layout_named(row, layout))
        if layout != first[1]:
            raise DataError(f"{where} holds {_layout_named(row, layout)}, but {first[0]} holds {first[2]}: give a file "
                            f"of one layout (split it where the layout changes).")
        column = SCORED.get(layout, "candidates")
        try:
            view = seed_row(row, layout, where) if layout != "seed" else {"prompt": prompt_text(row)}  # (TRL's turns)
        except DataError:  # (its scores do not fit its candidates)
            raise
        except (TypeError, ValueError, IndexError) as exc:  # a column of another type than its layout's
            raise DataError(f"{where} holds {CALLED[layout]} columns, but not of their types ({type(exc).__name__}: "
                            f"{str(exc)[:200]}); give its every row the columns repro writes for {CALLED[layout]} "
                            f"layout.") from None
        if view.get("candidates") is None and (layout != "seed" or "candidates" in row and row["candidates"] is None
                                               and {"chosen", "rejected"} <= set(row)):  # not its pair instead
            what = "null" if row.get(column, 0) is None else "empty" if column in row else "missing"
            raise DataError(f"{where}: '{column}' is {what}; rows of {CALLED[layout]} layout are scored on their every "
                            f"candidate, and its chosen and rejected alone would not compare with the other rows' "
                            f"scores: give the row its candidates, or leave it out.")
        row = row | {k: view[k] for k in ("prompt", "candidates") if view.get(k) is not None}
        prompt, cands = row.get("prompt"), row.get("candidates")
        if not isinstance(prompt, str):
            what = "missing" if "prompt" not in row else "null" if prompt is None else type(prompt).__name__
            turns = " (or, as in RLHFlow's and TRL's rows, a conversation with a user message)" * (what == "list")
            raise DataError(f"{where}: 'prompt' is {what}; expected a string{turns}.")
        bad = next((k for k, text in enumerate(cands) if not isinstance(text, str)), None) \
            if layout in SCORED and isinstance(cands, list) else None
        if bad is not None:  # one candidate of the layout's is no text: named by its column, or its place in the list
            name = generate_columns(row)[bad] if layout == "sppo" else None
            value = row[name] if name else cands[bad]
            shown = json.dumps(value, ensure_ascii=False, default=str)[:80]
            what = "null" if value is None else f"{shown}, not a conversation with an assistant message's text" \
                if name else f"{shown}, not a string"
            subject = repr(name) if name else f"candidate {bad + 1} of {len(cands)} in {column!r}"
            raise DataError(f"{where}: {subject} is {what}; rows of {CALLED[layout]} layout are scored on their every "
                            f"candidate: fill it in, or leave the row out.")
        missing = [side for side in ("chosen", "rejected") if side not in row]
        if cands is None and len(missing) == 1:
            raise DataError(f"{where}: '{missing[0]}' is missing; an H4 row gives both 'chosen' and 'rejected' (or "
                            f"give 'candidates').")
        if cands is None and len(missing) == 2 and "candidates" not in row:
            raise DataError(f"{where}: 'candidates' is missing (the row's fields: {', '.join(map(repr, row))}); give "
                            f"'candidates' (a list of the texts to score), or 'chosen' and 'rejected' (H4 rows).")
        if cands is None and not missing:
            cands = [_assistant_text(row[side], where, side) for side in ("chosen", "rejected")]
            row = {**row, "candidates": cands}
        if not isinstance(cands, list) or len(cands) < min_candidates or not all(isinstance(c, str) for c in cands):
            need = "at least two strings (PairRM compares pairs)" if min_candidates == 2 else "at least one string"
            raise DataError(f"{where}: '{column}' must be a list of {need}, or give "
                            f"'chosen' and 'rejected' (H4 rows), got {json.dumps(cands, ensure_ascii=False)[:80]}.")
        rows.append((where.split(" of ")[0], row))
    if not rows:
        raise DataError(f"{option} {path} holds no rows (it is empty or blank): nothing to score. Give a file "
                        f'(jsonl, or parquet) of {{"prompt": "...", "candidates": ["...", "..."]}} rows.')
    return rows


def answered(turns: list[Any], text: str) -> list[Any]:
    """A conversation with `text` as its last assistant turn's content, its other turns (a system turn) as they are."""
    last = next((k for k in reversed(range(len(turns)))
                 if isinstance(turns[k], dict) and turns[k].get("role") == "assistant"), None)
    return turns + [{"content": text, "role": "assistant"}] if last is None else \
        [*turns[:last], {**turns[last], "content": text}, *turns[last + 1:]]


def scored_row(row: dict[str, Any], scores: Sequence[float], pair: bool,
               layout: str) -> tuple[dict[str, Any], list[str]]:
    """The output row and the columns the new `scores` replaced (02_analyze reads them; the input's kept as
    `input_<name>`): a pair's row (candidates: chosen, rejected) gets `score_chosen` / `score_rejected` (and
    `score_margin`, to_trl's, if it has one); a row with its `LISTED` layout's list column, in the columns it has: that
    list as `scores`, `chosen` / `rejected` picked again (best and worst by the card's tie rule; a text, or the input's
    conversation with its last assistant turn's content replaced), their scores and difference (`score_margin`,
    RLHFlow's `margin`), SPPO's probabilities, and `messages` as the new chosen conversation where it was the old (as
    01_construct writes it); a row without the list, or whose list is not a score per candidate, keeps its pair."""
    if not pair and len(row.get(LISTED.get(layout)) or ()) != len(scores):  # (SPPO's 7 scores for 5: no list)
        return row, []
    i_c, i_r = (0, 1) if pair else best_worst(scores)
    new: dict[str, Any] = {"score_chosen": float(scores[i_c]), "score_rejected": float(scores[i_r])}
    new["score_margin"] = new["score_chosen"] - new["score_rejected"]
    if not pair:
        for side, k in (("chosen", i_c), ("rejected", i_r)):
            text = row["candidates"][k]
            new[side] = answered(row[side], text) if isinstance(row.get(side), list) else text
        new |= {"margin": new["score_margin"], LISTED[layout]: [float(s) for s in scores]}
        new |= sppo_columns(scores, i_c, i_r) if layout == "sppo" else {}
        new |= {"messages": new["chosen"]} if row.get("messages") == row.get("chosen") else {}
    new = {name: value for name, value in new.items() if name in row or pair and name != "score_margin"}
    kept = [name for name in new if name in row]
    return {**row, **{f"input_{name}": row[name] for name in kept}, **new}, kept


def check_output(given: str, input: Path, force: bool) -> Path:
    """--output as a path; refused, before any scoring, where it cannot be written as a file, names a folder or
    another format than JSON lines, is the input, exists (unless `force`), or the STAND_IN_MARKER beside it is
    damaged."""
    path = typed_path(given)
    if path.is_file() and path.resolve() == input.resolve():
        raise DataError(f"--output {path} is the --input: the scored rows would replace the rows they score; give "
                        f"another --output.")
    if path.is_file() and not force:
        raise DataError(f"--output {path} exists: give another --output, or pass --force to replace it.")
    if path.is_dir() or given.endswith(("/", os.sep)):  # (a new folder/: Path drops the slash, a file was written)
        raise DataError(f"--output {given} {'is' if path.is_dir() else 'names'} a folder; give a file path for the "
                        f"scored rows, e.g. --output {shlex.quote(str(path / 'scored.jsonl'))}.")
    if path.suffix.lower() != ".jsonl":  # (a .json file is read as one JSON document, not a row a line)
        other = path.suffix.lower() in DATA_SUFFIXES  # out.parquet: out.jsonl; out.v1 (no format), out.: out.v1.jsonl
        what = f"names another format ({path.suffix})" if other else "has no .jsonl suffix"
        stem = path.name.rstrip(".")  # less format suffixes: out.json.gz, out.jsonl. -> out, out.v1.json -> out.v1
        while suffix := next((s for s in DATA_SUFFIXES if stem.lower().endswith(s)), None):
            stem = stem[:-len(suffix)]
        if not stem.strip("."):
            raise DataError(f"--output {given} names no file, only a suffix: give the output a name, e.g. --output "
                            f"{shlex.quote(str(path.parent / 'scored.jsonl'))}.")
        raise DataError(f"--output {given} {what}, but repro score writes JSON lines: name the output .jsonl, e.g. "
                        f"--output {shlex.quote(str(path.parent / stem) + '.jsonl')}.")
    check_folder(path.parent, "--output's folder", "Give an --output in a folder that can be written.")
    marked_scorer(path)  # (the marker beside it, where the output's scorer goes: damaged, refused now)
    return path


def remove_own_work(folder: Path) -> None:
    """Remove what `repro score` made in `folder` (its chunks and their notes, those it set aside, its fingerprint and
    lock), and the folder where nothing else is left: a file someone made there, or a run made there, stays."""
    for path in (*folder.glob(CHUNK_GLOB), *folder.glob(NOTE_GLOB), *folder.glob(f"{STALE_PREFIX}*"),
                 folder / FINGERPRINT_FILE, RunDir(folder).lock):
        shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink(missing_ok=True)
    with contextlib.suppress(OSError):  # (not empty: another's files stay beside it)
        folder.rmdir()


def main(args: argparse.Namespace) -> int:
    args.output = check_output(args.output, args.input, args.force)
    if typed_path(args.model).is_dir():  # a local checkpoint, recorded by its full path as a run records its scorer
        args.model = str(here_path(args.model))
    kind = resolve_kind(args.model, args.kind)
    if kind != "pairrm" and (args.source_maxlength is not None or args.candidate_maxlength is not None):
        raise ParameterError("--source-maxlength / --candidate-maxlength are PairRM's limits; a sequence classifier "
                             "takes its own (--max-length). Leave them out with this model.")
    if kind == "pairrm" and args.max_length is not None:
        raise ParameterError("--max-length is a sequence classifier's limit; PairRM takes --source-maxlength / "
                             "--candidate-maxlength. Leave it out with this model.")
    rows = read_rows(args.input, min_candidates=MIN_CANDIDATES[kind])
    options: dict[str, Any] = {"trust_remote_code": True} if args.trust_remote_code else {}
    if args.chat_template is not None:
        if args.chat_template.is_dir():
            raise DataError(f"--chat-template {args.chat_template} is a folder; give the path of the Jinja template "
                            f"file in it.")
        if not args.chat_template.is_file():
            raise DataError(f"--chat-template {args.chat_template} does not exist (a Jinja template file).")
        options["chat_template"] = utf8_text(args.chat_template, "--chat-template", DataError)
        if not options["chat_template"].strip():
            raise DataError(f"--chat-template {args.chat_template} is empty: give a file holding the Jinja template "
                            f"the model was trained with (a tokenizer_config.json's chat_template).")
    options |= {name: value for name in ("output_index", "max_length") if (value := getattr(args, name)) is not None}
    own = args.output.with_name(args.output.name + ".work")  # the output's lock; its chunks, but with --work-dir
    work_dir = args.work_dir or own  # a re-run continues from it
    check_folder(work_dir, "--work-dir" if args.work_dir else "The work folder",
                 "It keeps the finished chunks a re-run continues from: give a new or existing folder (--work-dir).")
    locks = {work_dir.resolve(): f"--work-dir {work_dir}", own.resolve(): f"--output {args.output}"}  # one or two
    for folder, what in locks.items():  # (a part of one a link out of it: written through, as a run folder's)
        if why := RunDir(folder).foreign_refusal(building=False):
            raise ParameterError(f"{what}: {why}")
    for folder, what in locks.items():
        if is_main_process() and (holder := RunDir(folder).hold("`repro score`")):  # (it goes with the process)
            raise Busy(f"{what}: {holder} is writing it now: {wait_advice(holder)}, or give another {what.split()[0]}.")
    try:
        result = score_candidates(
            [r["prompt"] for r in rows], [r["candidates"] for r in rows], model=args.model, backend=args.backend,
            device=args.device, dtype=args.dtype, batch_tokens=args.batch_tokens, chunk_size=args.chunk_size,
            num_processes=args.num_processes, work_dir=work_dir, source_maxlength=args.source_maxlength,
            candidate_maxlength=args.candidate_maxlength, kind=kind, options=options)
    except BaseException:  # failed before any chunk: the output's own work folder holds only its lock, gone with it
        if is_main_process() and {p.name for p in own.iterdir()} <= {RunDir(own).lock.name, FINGERPRINT_FILE}:
            shutil.rmtree(own, ignore_errors=True)
        raise
    if not is_main_process():  # every rank of a torchrun job has the merged scores; rank 0 writes them
        return 0
    # what was scored: each row's pair (H4, SELM, TRL: no other candidates in them), else its layout's candidates
    layout = detect_format(rows[0])
    pairs = [LISTED.get(layout) not in r and r["candidates"] == [response_text(r.get(side))
                                                                  for side in ("chosen", "rejected")] for r in rows]
    ranks = [ranks_from_scores(s, f"--input {args.input}, row {k + 1} of {len(rows)} (prompt {row['prompt']!r:.80})")
             .tolist() for k, (row, s) in enumerate(zip(rows, result.scores))]  # (refusing a NaN, naming its row)
    written = [scored_row(row, s, pair, layout) for row, s, pair in zip(rows, result.scores, pairs)]
    renamed = list(dict.fromkeys(name for _, names in written for name in names))
    # atomically: a crash never leaves half an output file
    lines = (json.dumps({**row, "scores": s, "ranks": r}, ensure_ascii=False, default=json_default) + "\n"
             for (row, _), s, r in zip(written, result.scores, ranks))
    atomic_write_text(args.output, "".join(lines))
    # the scorer beside the scores, as a run's manifest records it, a stand-in's said so (02_analyze, 03_card)
    mark_scorer(args.output, {k: result.info[k] for k in ("model", "kind", "stand_in", "backend", "device", "dtype")
                              if k in result.info})
    if len(locks) == 2 or args.work_dir is None and args.num_processes == 1 and world_size() == 1:
        remove_own_work(own)  # the output holds it all now (several processes share it: kept)
    info, few, most = result.info, min(map(len, cands := [r["candidates"] for r in rows])), max(map(len, cands))
    note = f" — a random STAND-IN: these scores are noise ({STAND_IN_MARKER} beside it says so)" \
        if info.get("stand_in") else ""
    scored = ": their chosen and rejected" if all(pairs) else f", from {SCORED[layout]}" if layout in SCORED else ""
    print(f"repro score: {counted(len(rows), 'prompt')} scored with {info['model']} ({info['backend']}, "
          f"{info['device']}, {info['dtype']}) -> {args.output} ({few}{f' to {most}' * (most > few)} candidates a "
          f"prompt{scored}){note}", file=sys.stderr)
    if renamed:  # (02_analyze reads score_chosen / score_rejected: the new scores, not the input's)
        picked = " (chosen and rejected: the best and the worst by them)" * ("chosen" in renamed)
        print(f"repro score: the {'pairs' if all(pairs) else 'rows'}' {' / '.join(renamed)} follow these scores "
              f"now{picked}; the input's are kept as {' / '.join('input_' + name for name in renamed)}.",
              file=sys.stderr)
    if kept := sum(bool({"score_chosen", "rm_scores"} & set(row)) and not names for row, names in written):
        print(f"repro score: {counted(kept, 'row')} keep the input's "  # (no list to pick their pair again from)
              f"{'rm_scores / probability / chosen_probs' if layout == 'sppo' else 'score_chosen / score_rejected'} "
              f"(no list of every candidate's score, one each, to pick their pair again from): only their `scores` are "
              f"this model's.", file=sys.stderr)
    return 0
