"""notebooks/04_compare: a reproduction checked against the published dataset (rows aligned by key, pairs and
scores compared, the source slice inferred). Everything but `load_*` and `compare` is pure."""

from __future__ import annotations

import itertools
from collections import Counter
import os
import re
import unicodedata
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
from IPython.display import Markdown

from .analysis import number, percent, plots, prose, stats
from .analysis.report import (readable, response_texts, row_preview, show_figures, values_at,  # noqa: F401
                              write_outputs)  # show_figures: a cell's
from .dataset_io import SCORE_COLUMNS, SEED_COLUMNS, prompt_id_of, score_array
from .errors import DataError, ParameterError, ReproError, counted
from .exporters import seed_view
from .manifest import Manifest
from .parameters import PAIRRM_LIMITS, CompareParams, ConstructParams, Shown, build
from .paths import DATASET_DIR, RunDir, is_hub_id, run_manifest_of
from .revisions import hub_commit
from .slicing import plan_slice
from .sources import held_splits, load_source
from .subject import claim, dataset_or_own, declared_scorer, refuse_unbuilt

COMPARE_VERSION = 1
SIDES = ("reference", "candidate")  # Side.name of each, in this order
KEY_KINDS = ("prompt_id", "prompt_sha256", "prompt_normalised")
TEXTS = ("reference_chosen", "reference_rejected", "candidate_chosen", "candidate_rejected")  # of Aligned.texts
PAIR_CATEGORIES = ("same", "swapped", "same_chosen_only", "same_rejected_only", "one_shared_other_role", "reranked",
                   "different")  # reranked: no text of the pair shared, but both sides ranked the same candidates
PAIR_WORDS = {"same": "same chosen and rejected", "swapped": "swapped", "same_chosen_only": "only chosen equal",
              "same_rejected_only": "only rejected equal", "one_shared_other_role": "one text shared, other role",
              "reranked": "same candidates, ranked differently", "different": "different candidates"}
EXAMPLES = 5
SOLUTIONS_LISTED = 20  # a group's slice settings compare.json lists (solutions_total counts them all)
TABLES = ("only_reference", "only_candidate", "duplicates", "disagreements", "reference_source_index")
FIGURES = ("compare_scores", "compare_bland_altman", "compare_agreement")
PROBABILITIES = ("probability", "chosen_probs", "chosen_probs_win", "chosen_probs_lose")  # SPPO's (compute_prob.py)
SPPO_KEPT = (*PROBABILITIES, "rm_scores")  # kept beside the seed view (rm_scores: every text ranked, listed or not)
COLUMNS_COMPARED = ("reference_response", "messages")  # equal or not, row by row
OTHER_TEXTS_RANKED = ("other texts ranked beside the same candidates (a PairRM score depends on every text ranked "
                      "with it)")  # explain_rows: more texts ranked than listed on one side
SLICE_KEYS = ("part_start", "part_stop", "drop_rows", "drop_from", "mini_index", "mini_count")


@dataclass
class Side:
    """One dataset of the comparison: its rows as an Arrow table, and the group (file) of every row."""

    name: str  # of SIDES
    specs: list[str]
    split: str
    table: pa.Table = field(repr=False)
    group: np.ndarray = field(repr=False)  # index into specs, per row
    other_splits: list[str] = field(default_factory=list)  # of its specs, not compared (where they can be told)
    commits: dict[str, str] = field(default_factory=dict)  # each hub id's commit it was read at (local hub cache)

    @property
    def rows(self) -> int:
        return self.table.num_rows


def _load_one(spec: str, split: str, parameter: str, columns: Sequence[str] | None = None) -> pa.Table:
    """One split as an Arrow table (only `columns` where given); a load error names the parameter."""
    try:
        ds = load_source(spec, split, parameter)
    except ReproError as exc:
        if str(exc).startswith(f"{parameter} "):  # most of load_source's errors name the parameter and spec already
            raise
        raise type(exc)(f"Parameter {parameter}={spec!r}: {exc}") from None
    original, ds = ds, seed_view(ds)
    if "prompt_id" not in ds.column_names and "prompt" not in ds.column_names:
        raise DataError(f"Parameter {parameter}={spec!r} has neither a prompt_id nor a prompt column (it has "
                        f"{ds.column_names}), so its rows cannot be matched with the other dataset's. Point it at a "
                        f"preference dataset.")
    if columns is not None:
        ds = ds.select_columns([c for c in columns if c in ds.column_names])
    table = ds.with_format("arrow")[:]
    for column in SPPO_KEPT if columns is None else ():  # SPPO's, kept beside its seed view
        if column in original.column_names and column not in table.column_names:
            table = table.append_column(column, original.with_format("arrow")[column])
    return table


def load_side(name: str, specs: str | Sequence[str], split: str) -> Side:
    """One side, parameter `name`: its specs concatenated, a group each, in the columns all hold (SPPO_KEPT: any)."""
    specs = [specs] if isinstance(specs, (str, os.PathLike)) else specs
    if not isinstance(specs, (list, tuple)) or not all(isinstance(s, (str, os.PathLike)) for s in specs):
        raise ParameterError(f"{name} is a {type(specs).__name__}: give a dataset's hub id, folder or file (a Dataset "
                             f"in memory: save it first, e.g. ds.to_parquet('x.parquet')), or a list of them.")
    if not specs:
        raise ParameterError(f"{name} is an empty list: name at least one dataset (a hub id, folder or file).")
    specs = [str(s) for s in specs]
    tables = [_load_one(s, split, name) for s in specs]
    kept = [c for c in dict.fromkeys(c for t in tables for c in t.column_names)
            if c in SPPO_KEPT or all(c in t.column_names for t in tables)]
    table = pa.concat_tables([t.select([c for c in kept if c in t.column_names]) for t in tables],
                             promote_options="permissive")
    group = np.repeat(np.arange(len(tables)), [t.num_rows for t in tables])
    if table.num_rows == 0:
        raise DataError(f"Parameter {name}={specs if len(specs) > 1 else specs[0]!r} (split {split!r}) has no "
                        f"rows: there is nothing to compare. Check the dataset and the split.")
    held = {s for spec in specs for s in held_splits(spec, [split])}
    return Side(name=name, specs=specs, split=split, table=table, group=group, other_splits=sorted(held),
                commits={spec: commit for spec in specs if (commit := hub_commit(spec))})


def row_keys(table: pa.Table) -> dict[str, list[str | None] | None]:
    """The three identities of every row: prompt_id, sha256 of the prompt, normalised prompt (None where absent)."""
    keys: dict[str, list[str | None] | None] = dict.fromkeys(KEY_KINDS)
    if "prompt_id" in table.column_names:
        keys["prompt_id"] = [None if v is None else str(v) for v in table.column("prompt_id").to_pylist()]
    if "prompt" in table.column_names:
        prompts = table.column("prompt").to_pylist()
        keys["prompt_sha256"] = [None if p is None else prompt_id_of(p) for p in prompts]  # the prompt_id rule
        keys["prompt_normalised"] = [None if p is None else loose(p) for p in prompts]
    return keys


def loose(value: Any) -> Any:
    """`value` with every text's whitespace runs made one space (none around it) and its Unicode in NFC form."""
    if isinstance(value, str):
        return " ".join(unicodedata.normalize("NFC", value).split())
    if isinstance(value, (list, tuple)):
        return [loose(v) for v in value]
    return {k: loose(v) for k, v in value.items()} if isinstance(value, dict) else value


@dataclass
class Alignment:
    """Which rows of two datasets are the same prompt, and how each match was made."""

    first_rows: np.ndarray  # aligned positions in the first dataset (the reference)
    second_rows: np.ndarray  # ... and in the second (the candidate), pair by pair
    matched_by: np.ndarray  # KEY_KINDS index of each pair
    only_first: np.ndarray
    only_second: np.ndarray
    duplicates: list[dict[str, Any]]  # {side, row, key_kind, key, rows_with_key, duplicated_in}

    @property
    def n(self) -> int:
        return int(self.first_rows.size)

    def counts(self) -> dict[str, int]:
        return {kind: int((self.matched_by == i).sum()) for i, kind in enumerate(KEY_KINDS)}


def _rows_of(keys: list[str | None], free: np.ndarray) -> dict[str, list[int]]:
    rows_of: dict[str, list[int]] = {}
    for i in np.flatnonzero(free):
        if keys[i] is not None:
            rows_of.setdefault(keys[i], []).append(int(i))
    return rows_of


def align(first: dict[str, list | None], second: dict[str, list | None], n_first: int, n_second: int) -> Alignment:
    """Match rows by prompt_id, then sha256(prompt), then normalised prompt; duplicated keys are never merged."""
    free = [np.ones(n_first, dtype=bool), np.ones(n_second, dtype=bool)]
    pairs: list[tuple[int, int, int]] = []
    duplicates: list[dict[str, Any]] = []
    for k, kind in enumerate(KEY_KINDS):
        if first.get(kind) is None or second.get(kind) is None:
            continue
        a, b = _rows_of(first[kind], free[0]), _rows_of(second[kind], free[1])
        # rows sharing a key, and the other side's rows of that key (no telling which copy each is), are taken out
        for key in [key for key in {**a, **b} if max(len(a.get(key, ())), len(b.get(key, ()))) > 1]:
            rows = a.pop(key, []), b.pop(key, [])
            shared = ", ".join(name for name, r in zip(SIDES, rows) if len(r) > 1)
            for side in range(2):
                free[side][rows[side]] = False
                duplicates += [{"side": SIDES[side], "row": i, "key_kind": kind, "key": key,
                                "rows_with_key": len(rows[side]), "duplicated_in": shared} for i in rows[side]]
        for key, [i] in a.items():
            if (found := b.get(key)) is not None:
                pairs.append((i, found[0], k))
                free[0][i] = free[1][found[0]] = False
    matched = np.array(pairs, dtype=np.int64).reshape(-1, 3)
    order = np.argsort(matched[:, 0], kind="stable")
    # a row still free is neither matched nor one of several with a key
    return Alignment(first_rows=matched[order, 0], second_rows=matched[order, 1], matched_by=matched[order, 2],
                     only_first=np.flatnonzero(free[0]), only_second=np.flatnonzero(free[1]), duplicates=duplicates)


def locate(keys: dict[str, list | None], source_keys: dict[str, list | None], n: int,
           groups: np.ndarray | None = None) -> np.ndarray:
    """The source row of each of `n` rows (-1 where none), by prompt_id, then sha256(prompt), then normalised prompt;
    a key the source holds several times goes to a copy within (or next to) the span of its group's other rows, one
    not yet taken first, the nearest their median (whatever their order: a test split is a random sample)."""
    index, options = np.full(n, -1, dtype=np.int64), {}
    for kind in KEY_KINDS:
        todo = [i for i in np.flatnonzero(index < 0) if i not in options]  # (none left: no source index to build)
        if not todo or keys.get(kind) is None or source_keys.get(kind) is None:
            continue
        where = _rows_of(source_keys[kind], np.ones(len(source_keys[kind]), dtype=bool))
        for i in todo:
            if found := where.get(keys[kind][i]):
                index[i], options[i] = (found[0], None) if len(found) == 1 else (-1, found)
    groups = np.zeros(n, dtype=np.int64) if groups is None else groups
    placed, taken = index >= 0, set(index[index >= 0].tolist())
    for i, found in ((i, found) for i, found in options.items() if found):
        near = index[placed & (groups == groups[i])]
        lo, anchor, hi = (near.min(), np.median(near), near.max()) if near.size else (0, 0, 0)
        index[i] = min(found, key=lambda row: (not lo - 1 <= row <= hi + 1, row in taken, abs(row - anchor)))
        taken.add(int(index[i]))
    return index


def _examples(table: pa.Table, rows: np.ndarray) -> list[dict[str, Any]]:
    present = [c for c in ("prompt_id", "prompt") if c in table.column_names]
    return row_preview(table, rows[:EXAMPLES])[["row", *present]].to_dict("records")


def runs(indices: np.ndarray) -> list[list[int]]:
    """Maximal runs of consecutive integers in `indices`, as [start, stop) pairs."""
    x = np.unique(np.asarray(indices, dtype=np.int64))
    return [[int(run[0]), int(run[-1]) + 1] for run in np.split(x, np.flatnonzero(np.diff(x) != 1) + 1) if run.size]


def find_slice_parameters(start: int, stop: int, n_source: int, part_bounds: Sequence[tuple[int, int]],
                          mini_counts: Sequence[int]) -> list[dict[str, Any]]:
    """Every `plan_slice` setting among these bounds and counts keeping exactly rows [start, stop) (vectorised)."""
    found = []
    for (p0, p1), k, drop_from in itertools.product(part_bounds, mini_counts, ("end", "start")):
        part = p1 - p0
        if part < k or not (p0 <= start and stop <= p1):
            continue
        drop = np.arange(0, part - k + 1)  # drop_rows < part, and the rest must hold k minis
        kept_start = p0 + (drop if drop_from == "start" else 0)
        after = part - drop
        size = after // k
        for i in range(k):
            mini_start = kept_start + i * size
            mini_stop = kept_start + (after if i == k - 1 else (i + 1) * size)
            for d in drop[(mini_start == start) & (mini_stop == stop)]:
                setting = {"part_start": p0, "part_stop": p1, "drop_rows": int(d), "drop_from": drop_from,
                           "mini_index": i, "mini_count": k}
                plan = plan_slice(n_source, ConstructParams(**setting))
                assert (plan.start, plan.stop) == (start, stop)
                found.append(setting)
    return found


def _block(rows: np.ndarray) -> dict[str, Any]:
    ranges = runs(rows)
    return {"count": int(rows.size), "ranges": ranges, "contiguous": len(ranges) <= 1}


def _departures(setting: dict[str, Any], n_source: int) -> int:
    """How many of a slice setting's values are not plan_slice's defaults (the simplest explanation first)."""
    return sum((setting["part_start"] != 0, setting["part_stop"] != n_source, setting["drop_rows"] != 0,
                setting["drop_rows"] != 0 and setting["drop_from"] != "end", setting["mini_count"] != 1))


def infer_slice(groups: Sequence[np.ndarray], n_source: int, *, max_mini_count: int,
                candidate: np.ndarray | None = None, hints: dict[str, Any] | None = None,
                names: Sequence[str] | None = None, not_in_source: Sequence[int] | None = None) -> dict[str, Any]:
    """Where the reference's rows (source indices, a group per mini) lie in the source, and which slicing parameters
    give exactly those; `hints` (the candidate run's parameters) first; `not_in_source`: each group's rows the source
    lacks; `hints["dropped"]`: the candidate's rows dropped by reason, its slice's rows it lacks where as many."""
    hints = {k: v for k, v in (hints or {}).items() if v is not None}
    limit = hints.pop("limit", None)  # a candidate cut by `limit`: its parameters give more rows than it holds
    hints.pop("ties", None)  # no slicing parameter (compare_datasets reads it)
    dropped, plan, why = hints.pop("dropped", None) or {}, None, None
    given = {k: hints[k] for k in SLICE_KEYS if k in hints}
    if given and not limit:
        try:
            plan = plan_slice(n_source, build(ConstructParams, given, "the candidate run's parameters", advice=""))
        except ReproError as exc:
            why = str(exc)
    gone = np.empty(0, dtype=np.int64)  # the source rows the candidate's construction dropped, where known
    if plan is not None and candidate is not None and dropped:
        lacks = np.setdiff1d(np.arange(plan.start, plan.stop), candidate)
        gone = lacks if lacks.size == sum(dropped.values()) else gone
    names = list(names or [f"group {g}" for g in range(len(groups))])
    lacking = list(not_in_source or [0] * len(groups))
    every = np.unique(located := np.concatenate([np.asarray(g, dtype=np.int64) for g in groups]))
    if every.size == 0:
        return {"located": 0, "sentence": "No reference row was found in the source: nothing to infer."}
    lo, hi = int(every[0]), int(every[-1]) + 1
    family = len(groups) > 1
    bounds = [(int(hints["part_start"]), int(hints.get("part_stop") or n_source))] if "part_start" in hints else []
    # the parts searched, most natural first: the whole source; the reference's span; from either end of it
    bounds += [(0, n_source), (lo, hi), (lo, n_source), (0, hi)]
    bounds = list(dict.fromkeys(b for b in bounds if 0 <= b[0] < b[1] <= n_source))
    counts = sorted({*range(1, max_mini_count + 1), *([int(hints["mini_count"])] if "mini_count" in hints else []),
                     len(groups)})
    out_groups, family_settings = [], []  # per mini: the settings that make it mini `position` of len(groups)
    for position, (name, indices) in enumerate(zip(names, groups)):
        # a mini of the candidate's slice: the rows its construction dropped may be the ones the reference lacks too
        inside = gone.size and np.size(indices) and plan.start <= np.min(indices) and np.max(indices) < plan.stop
        filled = np.setdiff1d(gone, indices) if inside else gone[:0]
        ranges = runs(np.union1d(indices, filled))
        solutions = find_slice_parameters(*ranges[0], n_source, bounds, counts) if len(ranges) == 1 else []
        # first: what the hints say; for several minis, mini `position` of as many minis as were given
        solutions.sort(key=lambda s: (-sum(s.get(k) == v for k, v in hints.items()),
                                      -(family and s["mini_count"] == len(groups) and s["mini_index"] == position),
                                      _departures(s, n_source), bounds.index((s["part_start"], s["part_stop"])),
                                      s["mini_count"], s["drop_rows"], s["drop_from"] != "end"))
        gaps = [[a[1], b[0]] for a, b in zip(ranges, ranges[1:])]
        why_none = (prose("compare", "not_contiguous", len(ranges), gaps) if len(ranges) != 1 else
                    None if solutions else prose("compare", "no_solution", bounds, max(counts), *ranges[0]))
        out_groups.append({"name": name, "rows": int(np.asarray(indices).size),
                           "repeated": int(np.asarray(indices).size - np.unique(indices).size),
                           "not_in_source": lacking[position], "source_ranges": ranges,
                           "contiguous": len(ranges) == 1, "solutions_total": len(solutions),
                           "solutions": solutions[:SOLUTIONS_LISTED], "why_none": why_none,
                           **({"dropped_by_candidate": _block(filled)} if filled.size else {})})
        family_settings.append({tuple((k, v) for k, v in s.items() if k != "mini_index") for s in solutions
                                if s["mini_index"] == position and s["mini_count"] == len(groups)})
    missing = np.setdiff1d(np.arange(lo, hi), every)
    neither = missing if candidate is None else np.setdiff1d(missing, candidate)
    out: dict[str, Any] = {
        "source_rows": n_source, "located": int(located.size), "repeated": int(located.size - every.size),
        "not_in_source": sum(lacking), "span": [lo, hi], "before_span": lo, "after_span": n_source - hi,
        "inside_span_not_in_reference": _block(missing),
        "inside_span_in_neither": _block(neither), "groups": out_groups,
        "search": {"part_bounds": [list(b) for b in bounds], "mini_counts": counts, "drop_from": ["end", "start"]},
        "hints": hints}
    if limit:
        out["hints_limited"] = limit
    elif plan is not None:
        # every reference row (of every mini), and no other; or every one but those the construction dropped too
        whole = np.arange(plan.start, plan.stop)
        less = gone.size > 0 and np.array_equal(every, np.setdiff1d(whole, gone))
        exact = (np.array_equal(every, whole) or less) and not sum(lacking) and located.size == every.size
        out["hints_reproduce"] = {"parameters": given, "rows": [plan.start, plan.stop], "exact": exact}
        if gone.size:
            out["hints_reproduce"].update(dropped={**_block(gone), "reasons": dropped}, less_dropped=bool(less))
    elif given:
        out["hints_reproduce"] = {"parameters": given, "rows": None, "exact": False, "why": why}
    if candidate is not None and np.asarray(candidate).size:
        out["candidate_ranges"] = runs(candidate)
    if family:
        out["dropped_rows_of_part"] = _block(missing)
        out["family_solutions"] = [dict(s) for s in sorted(set.intersection(*family_settings))]
    out["sentence"] = prose("compare", "slice_sentence", out, SLICE_KEYS)
    return out


def _texts(table: pa.Table, column: str, rows: np.ndarray) -> list[str | None] | None:
    texts = response_texts(table.column(column)) if column in table.column_names else None
    return None if texts is None else texts.take(pa.array(rows, type=pa.int64())).to_pylist()


def _renamed(column: str, columns: Sequence[str]) -> str | None:
    """A column of `columns` that looks like `column` renamed ("chosen_score", "Score-Chosen" for "score_chosen"; else
    one of its words and more, no score nor known column: "chosen_conv" for "chosen")."""
    words = set(column.split("_"))
    split = {c: set(re.split(r"[^a-z]+", c.lower())) - {""} for c in columns if c != column}
    return next((c for c, w in split.items() if w == words), None) or next(
        (c for c, w in split.items() if words < w and c not in (*SEED_COLUMNS, *SCORE_COLUMNS)
         and not any("score" in word for word in w)), None)


def _scores(side: Side, rows: np.ndarray) -> dict[str, np.ndarray] | None:
    if not all(c in side.table.column_names for c in SCORE_COLUMNS):
        return None
    return {c: score_array(side.table, c, f"the {side.name}", side.name)[rows] for c in SCORE_COLUMNS}


def _equal_column(al: Aligned, column: str) -> dict[str, Any] | None:
    ref, cand = al.texts[f"reference_{column}"], al.texts[f"candidate_{column}"]
    if ref is None or cand is None:
        return None
    missing = sum(r is None or c is None for r, c in zip(ref, cand))
    equal = sum(r is not None and r == c for r, c in zip(ref, cand))
    return {"equal": equal, "different": len(ref) - equal - missing, "missing": missing,
            "missing_reference": ref.count(None), "missing_candidate": cand.count(None),
            "fraction_equal": equal / len(ref) if ref else None}


@dataclass
class Aligned:
    """The aligned rows' texts, prompt ids and scores, side by side (reference first)."""

    texts: dict[str, list | None]  # TEXTS, prompt, each side's candidates and scores, COLUMNS_COMPARED, PROBABILITIES
    prompt_ids: tuple[list | None, list | None]
    ref_scores: dict[str, np.ndarray] | None
    cand_scores: dict[str, np.ndarray] | None
    categories: np.ndarray | None
    same_candidates: list[bool | None]  # each row: both sides list the same texts (None: a side does not list them)

    @property
    def scored(self) -> bool:
        return self.ref_scores is not None and self.cand_scores is not None

    @cached_property
    def ranked(self) -> list[tuple[int, int, int, int] | None]:
        """Each row where both sides list the same candidates but one ranked more texts with them (SPPO's published 7
        rm_scores for 5 generate_i): the reference's texts ranked and listed, then the candidate's; else None."""
        n = len(self.same_candidates)
        sides = [[(len(rm if rm is not None else scores), len(listed)) if listed and (rm or scores) else None
                  for rm, scores, listed in zip(*(self.texts[f"{side}_{c}"] or [None] * n
                                                  for c in ("rm_scores", "candidate_scores", "candidates")))]
                 for side in SIDES]
        return [(*r, *c) if same and r and c and r[0] != c[0] else None
                for same, r, c in zip(self.same_candidates, *sides)]

    @cached_property
    def other_candidates(self) -> np.ndarray:
        """Each row: both sides ranked other texts, listed or not (SPPO's probabilities of them are not comparable)."""
        return np.array([same is False or ranked is not None for same, ranked in zip(self.same_candidates,
                                                                                     self.ranked)], dtype=bool)

    @cached_property
    def other_order(self) -> np.ndarray:
        """Each row: both sides ranked the same candidates in another order (SPPO's `probability` not comparable)."""
        ref, cand = (self.texts[f"{side}_candidates"] or [None] * len(self.same_candidates) for side in SIDES)
        return np.array([same is True and r != c for same, r, c in zip(self.same_candidates, ref, cand)],
                        dtype=bool) & ~self.other_candidates

    def not_comparable(self, column: str) -> np.ndarray:
        """The rows whose SPPO `column` is not comparable: other candidates, or another order for the matrix."""
        return self.other_candidates | (self.other_order if column == "probability" else False)

    @cached_property
    def probability_differences(self) -> dict[str, np.ndarray]:
        """Each SPPO probability column both sides hold: each aligned row's largest difference (NaN: not comparable)."""
        return {column: np.array([np.nan if other else _largest_difference(r, c)
                                  for r, c, other in zip(ref, cand, self.not_comparable(column))], dtype=np.float64)
                for column in PROBABILITIES
                if None not in (ref := self.texts[f"reference_{column}"], cand := self.texts[f"candidate_{column}"])}

    def margins(self) -> tuple[np.ndarray, np.ndarray]:
        """(reference, candidate) margin of each aligned row (when both sides have scores)."""
        return tuple(s["score_chosen"] - s["score_rejected"] for s in (self.ref_scores, self.cand_scores))

    def ordered_margins(self) -> tuple[np.ndarray, np.ndarray]:
        """(reference, candidate) margin over the reference's pair, in its order: the candidate's own for the same
        pair, its negative for a swapped one, NaN for other texts (whose margins say nothing of each other)."""
        mr, mc = self.margins()
        order = np.select([self.categories == 0, self.categories == 1], [1.0, -1.0], np.nan) \
            if self.categories is not None else np.full(mr.shape, np.nan)
        return mr, mc * order


def gather(reference: Side, candidate: Side, a: Alignment) -> Aligned:
    """Texts (last assistant message of chosen/rejected) and scores of the aligned rows."""
    texts = {"prompt": values_at(candidate.table, "prompt", a.second_rows)}
    for side, rows in ((reference, a.first_rows), (candidate, a.second_rows)):
        texts |= {f"{side.name}_{column}": _texts(side.table, column, rows) for column in ("chosen", "rejected")}
        texts |= {f"{side.name}_{column}": values_at(side.table, column, rows)  # candidates: every text each row ranked
                  for column in ("candidates", "candidate_scores", *COLUMNS_COMPARED, *SPPO_KEPT)}
    same_candidates = [None if None in (r, c) else sorted(r) == sorted(c) for r, c in
                       zip(*(texts[f"{side}_candidates"] or [None] * a.n for side in SIDES))]
    categories = None  # the PAIR_CATEGORIES index of each row, from its texts
    if all(texts[k] is not None for k in TEXTS):
        rc, rr, cc, cr = (np.array(texts[k], dtype=object) for k in TEXTS)
        same_chosen, same_rejected = (cc == rc).astype(bool), (cr == rr).astype(bool)
        crossed = ((cc == rr).astype(bool), (cr == rc).astype(bool))
        categories = np.select([same_chosen & same_rejected, crossed[0] & crossed[1], same_chosen, same_rejected,
                                crossed[0] | crossed[1], np.array(same_candidates, dtype=bool)],  # None: False
                               np.arange(6), 6).astype(np.int64)
    return Aligned(texts=texts, prompt_ids=(values_at(reference.table, "prompt_id", a.first_rows),
                                            values_at(candidate.table, "prompt_id", a.second_rows)),
                   ref_scores=_scores(reference, a.first_rows), cand_scores=_scores(candidate, a.second_rows),
                   categories=categories, same_candidates=same_candidates)


def pair_agreement(reference: Side, candidate: Side, a: Alignment, al: Aligned) -> dict[str, Any]:
    """Same / swapped / partly equal / different pairs, equal reference_response and messages, margin signs."""
    out: dict[str, Any] = {"n": a.n}
    if al.categories is None:  # each side's text columns absent, or unreadable, and a column that looks one renamed
        lacking = []
        for side in (reference, candidate):
            unread = [c for c in ("chosen", "rejected") if al.texts[f"{side.name}_{c}"] is None]
            absent = [c for c in unread if c not in side.table.column_names]
            lacking += [(side.name, absent, [c for c in unread if c not in absent],
                         {c: near for c in absent if (near := _renamed(c, side.table.column_names))})] * bool(unread)
        out.update(available=False, reason=prose("compare", "no_texts", lacking), cause="no_texts", lacking=lacking)
    else:
        counts = np.bincount(al.categories, minlength=len(PAIR_CATEGORIES))
        out.update(available=True, categories={c: int(n) for c, n in zip(PAIR_CATEGORIES, counts)},
                   fractions={c: float(n / max(a.n, 1)) for c, n in zip(PAIR_CATEGORIES, counts)})
    out.update({c: _equal_column(al, c) for c in COLUMNS_COMPARED})
    out["margin_sign"] = None
    if al.scored:
        mr, mc = al.ordered_margins()
        ok = np.isfinite(mr) & np.isfinite(mc)
        agree = int((np.sign(mr[ok]) == np.sign(mc[ok])).sum())  # none: no pair compared, no sign said
        out["margin_sign"] = {"n": int(ok.sum()), "agree": agree, "fraction": agree / ok.sum()} if ok.any() else None
    return stats.clean(out)


def matched_scores(al: Aligned) -> dict[str, np.ndarray]:
    """(reference, candidate) scores of the same text: chosen, rejected, crossed, other candidates both sides scored."""
    t, r, c = al.texts, al.ref_scores, al.cand_scores
    ref, cand, row, which = [], [], [], []
    lists = [t[f"{side}_{column}"] or [None] * len(al.same_candidates) for side in SIDES
             for column in ("candidates", "candidate_scores")]
    for k, (rc, rr, cc, cr) in enumerate(zip(*(t[name] for name in TEXTS))):
        pairs = ((cc == rc, "score_chosen", "score_chosen", 0, cc),
                 (cr == rr, "score_rejected", "score_rejected", 1, cr),
                 (cc == rr and cc != rc, "score_rejected", "score_chosen", 2, cc),
                 (cr == rc and cr != rr, "score_chosen", "score_rejected", 2, cr))
        for same, r_col, c_col, label, _ in pairs:
            if same:
                ref.append(r[r_col][k]), cand.append(c[c_col][k]), row.append(k), which.append(label)
        texts, scores, other_texts, other_scores = (column[k] for column in lists)
        if None not in (texts, scores, other_texts, other_scores):
            paired = {text for same, *_, text in pairs if same}
            for text in (x for x in dict.fromkeys(texts) if x in other_texts and x not in paired):
                ref.append(scores[texts.index(text)]), cand.append(other_scores[other_texts.index(text)])
                row.append(k), which.append(3)
    ref, cand = np.asarray(ref, dtype=np.float64), np.asarray(cand, dtype=np.float64)
    return {"reference": ref, "candidate": cand, "row": np.asarray(row, dtype=np.int64),
            "which": np.asarray(which, dtype=np.int64),
            # NaN (or missing) on both sides, or the same infinity: no difference, and not "on one side"
            "same_nonfinite": (np.isnan(ref) & np.isnan(cand)) | (np.isinf(ref) & (ref == cand))}


def _not_compared(**facts: Any) -> dict[str, Any]:
    """Scores not compared (or without statistics): their `cause` and its facts, and the reason worded by
    templates/compare.jinja's scores_reason (the card words the cause in each language)."""
    return {**facts, "available": False, "reason": prose("compare", "scores_reason", facts)}


def score_agreement(al: Aligned, p: CompareParams, reference: Side, candidate: Side) -> dict[str, Any]:
    """Agreement of the scores of the same texts (and of the margins of the same pairs), with bootstrap intervals."""
    lacking = [(side.name, missing, side.table.column_names, {c: _renamed(c, side.table.column_names) for c in missing})
               for side in (reference, candidate)
               if (missing := [c for c in SCORE_COLUMNS if c not in side.table.column_names])]
    if lacking:
        return _not_compared(cause="no_scores", lacking=lacking)
    if al.categories is None:
        return _not_compared(cause="no_texts")
    m = matched_scores(al)
    ok = np.isfinite(m["reference"]) & np.isfinite(m["candidate"])
    out: dict[str, Any] = {"available": True, "values": int(ok.sum()),
                           "excluded_nonfinite": int((~ok & ~m["same_nonfinite"]).sum()),
                           "nonfinite_on_both_sides": int(m["same_nonfinite"].sum()),
                           "rows": int(np.unique(m["row"][ok]).size),
                           "from": dict(zip(("chosen", "rejected", "crossed", "other"),
                                            np.bincount(m["which"][ok], minlength=4).tolist())),
                           "difference": "candidate − reference"}
    if ok.sum() < 3:  # 1 or 2: a reason "too few for statistics" ends; none: a sentence of why none
        return _not_compared(**out, cause="few_values" if ok.any() else "nonfinite" if out["excluded_nonfinite"]
                             + out["nonfinite_on_both_sides"] else "unmatched")
    out["scores"] = stats.agreement_statistics(m["reference"][ok], m["candidate"][ok], p.score_tolerances,
                                               p.bootstrap_resamples, p.bootstrap_seed, clusters=m["row"][ok])
    # pooled, the gap between chosen and rejected scores raises r whatever the scores: each role's and the margins'
    out["by_role"] = {}
    for which, role in enumerate(("chosen", "rejected")):
        own = ok & (m["which"] == which)
        r = stats.correlations(m["reference"][own], m["candidate"][own])
        out["by_role"][role] = {"n": int(own.sum()), **{name: r[name]["statistic"] for name in r}}
    mr, mc = (m[al.categories == 0] for m in al.margins())
    fine = np.isfinite(mr) & np.isfinite(mc)
    out["margin"] = stats.agreement_statistics(mr[fine], mc[fine], p.score_tolerances, p.bootstrap_resamples,
                                               p.bootstrap_seed)
    # the rows of each statistic with an interval too narrow to read as 95%: tentative
    rows = {"scores": out["rows"], "margin": out["margin"]["n"], **{k: v["n"] for k, v in out["by_role"].items()}}
    out["few_rows"] = {k: n for k, n in rows.items() if stats.rough_interval(n)}
    return stats.clean(out)


def _largest_difference(reference: Any, candidate: Any) -> float:
    """max |candidate − reference| over a value or a matrix (NaN: missing on a side; inf: another shape)."""
    if reference is None or candidate is None:
        return np.nan
    r, c = np.asarray(reference, dtype=np.float64), np.asarray(candidate, dtype=np.float64)
    return float(np.abs(c - r).max(initial=0.0)) if r.shape == c.shape else np.inf


def probability_agreement(al: Aligned, p: CompareParams) -> dict[str, Any]:
    """SPPO's probability columns both sides hold, compared row by row (missing or not comparable: counted apart)."""
    out = {}
    for column, every in al.probability_differences.items():
        d, shaped = every[~np.isnan(every)], every[np.isfinite(every)]
        other, order = int(al.other_candidates.sum()), int((al.not_comparable(column) & al.other_order).sum())
        out[column] = {"rows": d.size, "missing": every.size - d.size - other - order, "other_candidates": other,
                       "other_order": order, "other_shape": d.size - shaped.size,
                       "differ": (d > p.disagreement_tolerance).sum(),
                       "max_abs_difference": shaped.max() if shaped.size else None,
                       "within": {f"{t:g}": (d <= t).mean() if d.size else None for t in p.score_tolerances}}
    return stats.clean(out)


def over_length_limit(prompt: str | None, response: str | None) -> bool:
    """Whether PairRM certainly truncates `response`: more words (each at least a token) than the most tokens it
    keeps (the candidate budget plus half the source budget a prompt of as many tokens as words leaves)."""
    if not response:
        return False
    source_max = PAIRRM_LIMITS["source_maxlength"]
    prompt_tokens = min(len((prompt or "").split()), source_max)
    return len(response.split()) > PAIRRM_LIMITS["candidate_maxlength"] + (source_max - prompt_tokens) // 2


def explain_rows(a: Alignment, al: Aligned, p: CompareParams, other_prompt: np.ndarray, pairrm: bool) -> pd.DataFrame:
    """Every aligned row that disagrees, with why (PairRM's length limits only where it may have scored a side)."""
    n, t, same_candidates = a.n, al.texts, al.same_candidates
    ref_ids, cand_ids = [ids or [None] * n for ids in al.prompt_ids]
    categories = al.categories if al.categories is not None else np.full(n, -1)
    mr, mc = al.margins() if al.scored else (np.full(n, np.nan),) * 2  # each side's own, as the table shows them
    ordered = al.ordered_margins()[1] if al.scored else mc
    worst = np.full(n, -np.inf)  # NaN below for a row that shares no text (or no finite score) with its reference
    nonfinite = np.zeros(n, dtype=bool)  # a same-text score NaN, infinite or missing on one side
    if al.scored and al.categories is not None:
        m = matched_scores(al)
        diff = np.abs(m["candidate"] - m["reference"])
        fine = np.isfinite(diff)
        np.maximum.at(worst, m["row"][fine], diff[fine])
        if fine.any():  # else no score was compared: a NaN on a side is why, not a row's disagreement
            nonfinite[m["row"][~fine & ~m["same_nonfinite"]]] = True
    worst[worst == -np.inf] = np.nan
    sign_differs = np.isfinite(mr) & np.isfinite(ordered) & (np.sign(mr) != np.sign(ordered))
    # other messages, with the same chosen text (the chosen conversation, as a row's messages often is, or no texts)
    other = {c: np.array([None not in (r, s) and r != s for r, s in zip(t[f"reference_{c}"] or [None] * n,
                                                                        t[f"candidate_{c}"] or [None] * n)], dtype=bool)
             for c in COLUMNS_COMPARED}
    other["messages"] &= np.isin(categories, (-1, 0, 2))
    disagree = (categories > 0) | sign_differs | (worst > p.disagreement_tolerance) | nonfinite | other_prompt
    disagree |= a.matched_by == 2
    probabilities = {c: d > p.disagreement_tolerance for c, d in al.probability_differences.items()}  # NaN: missing
    disagree |= np.logical_or.reduce([*other.values(), *probabilities.values()])
    records = []
    for k in np.flatnonzero(disagree):
        truncated = pairrm and al.categories is not None and any(
            over_length_limit(t["prompt"][k] if t["prompt"] else None, t[name][k]) for name in TEXTS)
        near = None  # the pair the same but for whitespace/Unicode form: "" in the order, or crossed
        if categories[k] >= 2:
            rc, rr, cc, cr = (loose(t[name][k]) for name in TEXTS)
            near = "" if (cc, cr) == (rc, rr) else ", chosen and rejected the other way round" if (cc, cr) == (
                rr, rc) else None
        lists = [t[f"{side}_candidates"][k] if t[f"{side}_candidates"] else None for side in SIDES]
        listed = same_candidates[k] is False and sorted(loose(lists[0])) == sorted(loose(lists[1]))
        columns = [(other[c][k], f"`{c}` the same but for whitespace/Unicode form" if other[c][k] and loose(
            t[f"reference_{c}"][k]) == loose(t[f"candidate_{c}"][k]) else why)  # (other: both sides hold it)
            for c, why in (("messages", "other `messages`"), ("reference_response", "another `reference_response`"))]
        reasons = [why for holds, why in (
            (nonfinite[k], "a NaN, infinite or missing score (left out of the score agreement)"),
            (other_prompt[k], "another prompt text under the same prompt_id"),
            (a.matched_by[k] == 2, "prompt matched only after whitespace/Unicode normalisation"),
            (categories[k] >= 2 and near is not None, f"the same texts but for whitespace/Unicode form{near}"),
            (categories[k] >= 2 and near is None and not same_candidates[k], "a different candidate text"),
            (categories[k] >= 2 and near is None and same_candidates[k], "same candidates, ranked differently"),
            (same_candidates[k] is False and not listed,
             "other candidates ranked (a PairRM score depends on every candidate of its row)"),
            (al.ranked[k] is not None, OTHER_TEXTS_RANKED),
            (categories[k] == 1, "chosen and rejected the other way round" + (  # scores: a shared text's, finite
                "" if not (al.scored and np.isfinite(worst[k])) else ", their scores moved"
                if worst[k] > p.disagreement_tolerance else ", the same scores (one side's chosen scored lower)")),
            ((categories[k] == 1 or sign_differs[k]) and min(abs(mr[k]), abs(mc[k])) < p.near_tie,
             f"a near-tie (|margin| < {p.near_tie:g})"),
            (truncated, "a candidate over PairRM's length limits (truncated)"),
            *columns) if holds]
        # a near-tie, a swap or another pair of the same candidates explains a sign, not a same-text score that moved
        if worst[k] > p.disagreement_tolerance and all(why.startswith(("a near-tie", "chosen and", "same candidates"))
                                                       for why in reasons):
            reasons.append("unexplained")
        reasons += [f"other `{c}`" for c, apart in probabilities.items() if apart[k]]  # they explain no score
        records.append({"prompt_id": ref_ids[k], "candidate_prompt_id": cand_ids[k],
                        "reference_row": int(a.first_rows[k]), "candidate_row": int(a.second_rows[k]),
                        "matched_by": KEY_KINDS[a.matched_by[k]],
                        "pair": PAIR_CATEGORIES[categories[k]] if categories[k] >= 0 else None,
                        "margin_reference": mr[k], "margin_candidate": mc[k],
                        "max_abs_score_difference": worst[k],
                        "explanation": "; ".join(reasons) or "unexplained"})
    columns = ["prompt_id", "candidate_prompt_id", "reference_row", "candidate_row", "matched_by", "pair",
               "margin_reference", "margin_candidate", "max_abs_score_difference", "explanation"]
    return pd.DataFrame.from_records(records, columns=columns)


@dataclass
class ComparisonResult:
    """compare.json's content, the tables and figures written; shows the verdict in a notebook."""

    result: dict[str, Any]
    tables: dict[str, pd.DataFrame]
    figures: dict[str, dict[str, Any]]
    outputs: list[Path]

    def _repr_markdown_(self) -> str:
        return self.result["verdict"]


def _statistics(section: str, s: dict[str, Any]) -> list[tuple[str, str, str]]:
    """The rows of one agreement block: each statistic with its 95% interval, the limits of agreement, tolerances."""
    if "note" in s:
        return [(section, "not compared", s["note"])]
    ba, ci = s["bland_altman"], s["ci95"]
    found = {"Pearson r": (s["pearson"], "pearson"), "Spearman ρ": (s["spearman"], "spearman"),
             "Lin's CCC": (s["lin_ccc"], "lin_ccc"), "mean difference": (ba["mean_difference"], "mean_difference")}
    rows = [(section, name, f"{number(value)} [{', '.join(map(number, ci.get(key) or [None, None]))}]")
            for name, (value, key) in found.items()]
    rows += [(section, "limits of agreement", f"[{number(ba['loa_low'])}, {number(ba['loa_high'])}]"),
             (section, "max |difference|", number(s["max_abs_difference"]))]
    if stats.rough_interval(n := s["bootstrap"]["clusters"]):
        rows.append((section, "95% intervals", f"too narrow: {counted(n, 'row')}, fewer than "
                                               f"{stats.BOOTSTRAP_FEW_ROWS} (read them as rough)"))
    return rows + [(section, f"within {t}", percent(f)) for t, f in s["within"].items()]


def _said_categories(pairs: dict[str, Any]) -> dict[str, int]:
    """The pair categories the summary and its figure show: "reranked" only where some row is."""
    return {k: n for k, n in pairs["categories"].items() if n or k != "reranked"}


def as_text(facts: Any) -> Any:
    """`facts` (of compare.json) with their text marked shown (`one_line` leaves it as it is): the prose filled in with
    them is text, for a table (pandas shows it as it is), not Markdown (which the verdict is, escaped)."""
    if isinstance(facts, str):
        shown = Shown(facts)
        shown.raw = facts
        return shown
    if isinstance(facts, dict):
        return {k: as_text(v) for k, v in facts.items()}
    return [as_text(v) for v in facts] if isinstance(facts, (list, tuple)) else facts


def summary_table(result: dict[str, Any]) -> pd.DataFrame:
    """compare.json's main figures as one table (section, measure -> value; 95% intervals in brackets)."""
    al, cov, pairs, scores = result["alignment"], result["coverage"], result["pairs"], result["scores"]
    by = ", ".join(f"{n} by {k}" for k, n in al["matched_by"].items() if n)
    unseen = result["disagreements"].get("not_compared") or {}
    not_compared = f" ({' and '.join(unseen)} not compared)" if unseen else ""
    rows = [("rows", "aligned", f"{al['aligned']} of {result['reference']['rows']} reference rows ({by})"),
            ("rows", "only in the reference", str(cov["only_reference"])),
            ("rows", "only in the candidate", str(cov["only_candidate"])),
            *[("rows", "left out, their key duplicated (reference / candidate)",
               f"{cov['duplicates_reference']} / {cov['duplicates_candidate']}")] * bool(
                cov["duplicates_reference"] or cov["duplicates_candidate"]),
            ("rows", "disagreeing", f"{result['disagreements']['rows']}" + not_compared)]
    if pairs.get("available"):
        rows += [("pairs", PAIR_WORDS[k], f"{n} ({percent(pairs['fractions'][k])})")
                 for k, n in _said_categories(pairs).items()]
    else:
        rows.append(("pairs", "not compared", pairs["reason"]))
    if sign := pairs.get("margin_sign"):
        rows.append(("pairs", "margin signs agree", f"{sign['agree']} of {sign['n']} ({percent(sign['fraction'])})"))
    for column in COLUMNS_COMPARED:
        if same := pairs.get(column):
            n, gone = same["equal"] + same["different"], {s: same[f"missing_{s}"] for s in SIDES}
            said = [f"{same['equal']} of {n}"] * bool(n) + [f"missing in the {side} in {k} row{'s' * (k != 1)}"
                                                            for side, k in gone.items() if k]
            rows.append(("pairs", f"same {column}", "missing on both sides" if set(gone.values()) == {pairs["n"]}
                         else "; ".join(said)))
    if scores.get("available"):
        rows += _statistics(f"scores of the same texts ({scores['scores']['n']})", scores["scores"])
        roles = scores["by_role"]
        rows.append((f"scores of the same texts ({scores['scores']['n']})", "Pearson r within chosen / rejected",
                     " / ".join(f"{number(roles[role]['pearson'])} (n = {roles[role]['n']})"
                                for role in ("chosen", "rejected"))))
        rows += _statistics(f"margins of the same pairs ({scores['margin']['n']})", scores["margin"])
        if left_out := scores["excluded_nonfinite"] + scores.get("nonfinite_on_both_sides", 0):  # on one side or both
            rows.append(("scores", "left out: NaN, infinite or missing", str(left_out)))
    else:
        rows.append(("scores", "no statistics" if scores.get("values") else "not compared",
                     prose("compare", "scores_reason", as_text(scores))))  # (its names as they are: no Markdown)
    tolerance = number(result["parameters"]["disagreement_tolerance"])
    rows += [("SPPO probabilities", f"`{column}` further apart than {tolerance}",
              f"{d['differ']} of {d['rows']} rows (max |difference| {number(d['max_abs_difference'])}" + "".join(
                  f", {d[k]} {words}" for k, words in (("other_shape", "of another shape"),
                                                       ("missing", "missing on a side"),
                                                       ("other_candidates", "of other candidates, not comparable"),
                                                       ("other_order", "of the same candidates in another order, "
                                                                       "not comparable"))
                  if d.get(k)) + ")")
             for column, d in result.get("probabilities", {}).items()]
    return pd.DataFrame(rows, columns=["section", "measure", "value"]).set_index(["section", "measure"])


def disagreements(result: ComparisonResult) -> Any:
    """The aligned rows that disagree, their explanation first; a sentence when there is none."""
    table = result.tables["disagreements"]
    first = ["prompt_id", "pair", "explanation", "margin_reference", "margin_candidate", "max_abs_score_difference"]
    table = table[first + [c for c in table.columns if c not in first]]
    if table["candidate_prompt_id"].equals(table["prompt_id"]):
        table = table.drop(columns="candidate_prompt_id")
    if len(table):
        return readable(table)
    d = result.result["disagreements"]  # (a sentence, not a table of bare headers)
    return Markdown(prose("compare", "no_disagreement", d["tolerance"], d.get("not_compared") or {}))


def _recorded(spec: str) -> dict[str, Any]:
    """The manifest of the run `spec` names (`run_manifest_of`), or {} for a dataset of no run."""
    manifest = run_manifest_of(spec)
    return {} if manifest is None else Manifest(manifest.parent).read()


def _scorer(spec: str, split: str) -> dict[str, Any] | None:
    """The scorer of `spec`'s making: its run's manifest's, else the one it declares (a stand-in, `repro score`'s)."""
    return _recorded(spec).get("scorer") or declared_scorer(spec, split)


def _hints(candidate_spec: str) -> dict[str, Any]:
    """The candidate run's slicing parameters (`limit`, `ties` too) and `dropped` rows by reason; none if uncounted."""
    recorded = _recorded(candidate_spec)
    params, counts = recorded.get("parameters") or {}, recorded.get("counts") or {}
    dropped = {k.removeprefix("dropped_"): n for k, n in counts.items() if k.startswith("dropped_") and n}
    return {**{k: params[k] for k in (*SLICE_KEYS, "limit", "ties") if k in params},
            **({"dropped": dropped} if dropped else {})} if counts else {}


def compare_datasets(reference: Side | str | Sequence[str], candidate: Side | str | Sequence[str], p: CompareParams,
                     source: pa.Table | None = None,
                     hints: dict[str, Any] | None = None) -> tuple[dict[str, Any], dict[str, pd.DataFrame], Aligned]:
    """Everything compare.json holds, the tables, and the aligned rows the figures draw (no files written); a side
    that is no `Side` is what `load_side` takes, read at `p`'s split of it."""
    reference, candidate = (side if isinstance(side, Side) else load_side(name, side, getattr(p, f"{name}_split"))
                            for name, side in zip(SIDES, (reference, candidate)))
    ref_keys, cand_keys = row_keys(reference.table), row_keys(candidate.table)
    a = align(ref_keys, cand_keys, reference.rows, candidate.rows)
    sides = [(side, rows, len({(d["key_kind"], d["key"]) for d in rows})) for side in SIDES
             if (rows := [d for d in a.duplicates if d["side"] == side and d["rows_with_key"] > 1])]
    where = None if source is None else locate_in_source(reference, candidate, ref_keys, cand_keys, source, p, hints)
    if a.n == 0:
        raise DataError(prose("compare", "all_duplicated", sides, reference.rows) if sides else prose(
            "compare", "no_match", reference, candidate, _examples(reference.table, np.arange(1)),
            _examples(candidate.table, np.arange(1)), where and where[0]))
    al = gather(reference, candidate, a)
    twins = {side: n for side in SIDES
             if (n := sum(d["side"] == side and d["rows_with_key"] == 1 for d in a.duplicates))}
    notes: list[list] = [["duplicate_note", [  # [macro, *its arguments]: each side's rows, keys, an example
        (side, len(rows), keys, rows[0]["key_kind"], [d["row"] for d in rows if d["key"] == rows[0]["key"]][:4],
         rows[0]["key"][:16]) for side, rows, keys in sides], twins]] if sides else []
    # rows aligned by prompt_id: do their prompts agree?
    ref_loose, cand_loose = ref_keys["prompt_normalised"], cand_keys["prompt_normalised"]
    other_prompt = np.array([k == 0 and None not in (ref_loose, cand_loose) and ref_loose[i] != cand_loose[j]
                             for i, j, k in zip(a.first_rows, a.second_rows, a.matched_by)], dtype=bool)
    differs = a.first_rows[other_prompt].tolist()
    notes += [["prompt_note", len(differs), differs[:4]]] if differs else []
    notes += caveats(reference, candidate, al)
    only = {side.name: [c for c in SEED_COLUMNS if c in side.table.column_names and c not in other.table.column_names]
            for side, other in ((reference, candidate), (candidate, reference))}
    notes += [["columns_note", only]] if any(only.values()) else []
    if reference.other_splits or candidate.other_splits:
        notes.append(["splits_note", {side.name: side.split for side in (reference, candidate)},
                      {side.name: side.other_splits for side in (reference, candidate)}])
    result: dict[str, Any] = {
        "compare_version": COMPARE_VERSION,
        **{side.name: {"specs": [_public(s) for s in side.specs], "split": side.split, "rows": side.rows,
                       "columns": side.table.column_names, "other_splits": side.other_splits,
                       "commits": side.commits}
           for side in (reference, candidate)},
        "parameters": p.model_dump(include={"score_tolerances", "disagreement_tolerance", "near_tie",
                                            "bootstrap_resamples", "bootstrap_seed"}),
        "alignment": {"aligned": a.n, "matched_by": a.counts(), "duplicates": len(a.duplicates),
                      "prompt_differs": len(differs),
                      "order": "rows are matched by key; the order of rows on either side does not matter"},
        "coverage": {"in_both": a.n, "only_reference": int(a.only_first.size),
                     "only_candidate": int(a.only_second.size),
                     **{f"duplicates_{side}": len({d["row"] for d in a.duplicates if d["side"] == side})
                        for side in SIDES},
                     # each side's rows left out, by the side(s) that hold their key several times
                     "duplicated_in": {side: dict(Counter(d["duplicated_in"] for d in a.duplicates
                                                          if d["side"] == side)) for side in SIDES},
                     "fraction_of_reference": a.n / reference.rows, "fraction_of_candidate": a.n / candidate.rows,
                     "examples": {"only_reference": _examples(reference.table, a.only_first),
                                  "only_candidate": _examples(candidate.table, a.only_second)}},
    }
    result.update(pairs=pair_agreement(reference, candidate, a, al),
                  scores=score_agreement(al, p, reference, candidate), probabilities=probability_agreement(al, p))
    if few := result["scores"].get("few_rows"):
        notes.append(["few_rows_note", few, stats.BOOTSTRAP_FEW_ROWS])
    notes += [["missing_note", column, d, a.n] for column in COLUMNS_COMPARED
              if (d := result["pairs"][column])  # a null on one side only: the two sides' nulls not the same rows
              and not d["missing_reference"] == d["missing_candidate"] == d["missing"]]
    # scores of fewer than 3 values: no statistics, but each row's still compared (explain_rows)
    not_compared = {name: result[name]["reason"] for name in ("pairs", "scores")
                    if not result[name]["available"] and not result[name].get("values")}
    notes += [[f"{name}_note", not_compared[name], result[name].get("lacking")] for name in ("scores", "pairs")
              if name in not_compared]
    pairrm = any(pairrm_may_have_scored(side, scores)
                 for side, scores in ((reference, al.ref_scores), (candidate, al.cand_scores)))
    disagreements = explain_rows(a, al, p, other_prompt, pairrm)
    result["disagreements"] = {"rows": len(disagreements), "tolerance": p.disagreement_tolerance,
                               "not_compared": not_compared,  # none of its rows can disagree on these
                               "explanations": {k: int(v) for k, v in disagreements["explanation"].str.split("; ")
                                                .explode().value_counts().sort_index().items()}}
    if ranked := result["disagreements"]["explanations"].get(OTHER_TEXTS_RANKED):  # counts: the commonest
        counts = Counter(r for r in al.ranked if r).most_common(1)[0][0]
        sides = {"reference": list(counts[:2]), "candidate": list(counts[2:])}  # (texts ranked, listed)
        result["disagreements"]["other_texts_ranked"] = {"rows": ranked, **sides}
        notes.append(["ranked_note", ranked, *sides.values()])
    # a reference row of a tied pair, which a recipe with `ties: drop` leaves out (RLHFlow's run_dpo.py)
    tied = _scores(reference, a.only_first)
    if tied and (n_tied := int((tied["score_chosen"] == tied["score_rejected"]).sum())):
        ties = (hints or {}).get("ties")
        result["coverage"]["only_reference_tied"] = {"rows": n_tied, "candidate_ties": ties}
        notes.append(["ties_note", n_tied, ties])
    tables = {"only_reference": row_preview(reference.table, a.only_first),
              "only_candidate": row_preview(candidate.table, a.only_second),
              "duplicates": pd.DataFrame(a.duplicates, columns=["side", "row", "key_kind", "key", "rows_with_key",
                                                                "duplicated_in"]),
              "disagreements": disagreements}
    tables["reference_source_index"] = pd.DataFrame({} if where is None else {
        "reference_row": np.arange(reference.rows), "group": reference.group,
        "prompt_id": ref_keys["prompt_id"] or ref_keys["prompt_sha256"], "source_index": where[1]},
        columns=["reference_row", "group", "prompt_id", "source_index"])
    result["slice"] = None if where is None else where[0]
    result["notes"], result["note_facts"] = [prose("compare", name, *args) for name, *args in notes], notes
    result = stats.clean(result)
    result["verdict"] = prose("compare", "verdict", result)  # aligned rows, pairs, scores, coverage, slice, notes
    return result, tables, al


def locate_in_source(reference: Side, candidate: Side, ref_keys: dict, cand_keys: dict, source: pa.Table,
                     p: CompareParams, hints: dict[str, Any] | None) -> tuple[dict[str, Any], np.ndarray]:
    """infer_slice of the reference's rows in the source, and the source row of each reference row (-1: none)."""
    source_keys = row_keys(source)
    ref_index, cand_index = (locate(keys, source_keys, side.rows, side.group)
                             for keys, side in ((ref_keys, reference), (cand_keys, candidate)))
    located, members = ref_index >= 0, [reference.group == g for g in range(len(reference.specs))]
    return infer_slice([ref_index[located & m] for m in members], source.num_rows, hints=hints,
                       candidate=cand_index[cand_index >= 0], max_mini_count=p.max_mini_count,
                       names=[_public(s) for s in reference.specs],
                       not_in_source=[int((~located & m).sum()) for m in members]), ref_index


def pairrm_may_have_scored(side: Side, scores: dict[str, np.ndarray] | None) -> bool:
    """Whether PairRM (or a scorer of its kind) may have scored `side`: its run records one, or none is recorded and its
    scores, if any, are not on a scale PairRM's never are (ratings, probabilities: stats.detect_scale)."""
    recorded = [s for spec in side.specs if isinstance(s := _scorer(spec, side.split), dict)]
    if recorded:
        return any(s.get("kind", "pairrm") == "pairrm" for s in recorded)
    return scale_kind(scores) not in ("rating", "probability", "constant")


def scale_kind(scores: dict[str, np.ndarray] | None) -> str | None:
    """The scale stats.detect_scale reads of the finite pairs of `scores`; None without any."""
    if scores is None:
        return None
    chosen, rejected = scores["score_chosen"], scores["score_rejected"]
    fine = np.isfinite(chosen) & np.isfinite(rejected)
    return stats.detect_scale(chosen[fine], rejected[fine])["kind"] if fine.any() else None


def caveats(reference: Side, candidate: Side, al: Aligned) -> list[list]:
    """Notes on scores whose agreement says little: a stand-in's, ratings against logits, differences that cancel."""
    notes = [["stand_in_note", side.name, other.name]
             for side, other in ((reference, candidate), (candidate, reference))
             if any((_scorer(spec, side.split) or {}).get("stand_in") for spec in side.specs)]
    if al.scored:
        kinds, opposite = [scale_kind(al.ref_scores), scale_kind(al.cand_scores)], []
        for scores in (al.ref_scores, al.cand_scores):
            chosen, rejected = scores["score_chosen"], scores["score_rejected"]
            fine = np.isfinite(chosen) & np.isfinite(rejected)
            opposite.append(fine.any() and np.allclose(chosen[fine], -rejected[fine], rtol=0, atol=1e-6))
        if set(kinds) == {"rating", "logit"}:
            notes.append(["scale_note", *kinds])
        if all(opposite):  # PairRM of two candidates: a row's two differences cancel
            notes.append(["opposite_note"])
    return notes


def _public(spec: str) -> str:
    """How compare.json and the card name a dataset: a hub id as it is, a local path by its last part only."""
    if is_hub_id(spec):
        return spec
    path = Path(spec)
    return f"local:{path.parent.name if path.name == DATASET_DIR else path.name}"


def compare(p: CompareParams) -> ComparisonResult:
    """The stage: load reference, candidate (and source), compare, write compare.json, tables, figures; record them."""
    if p.reference is None:
        raise ParameterError(prose("compare", "no_reference"))
    run = RunDir(p.run_root)
    # read before anything is written: a half-built run (on any side), a missing or unreadable input write nothing
    for spec in (p.candidate, *([p.reference] if isinstance(p.reference, str) else p.reference),
                 *[p.compare_source] * (p.compare_source is not None)):
        refuse_unbuilt(run, spec)
    candidate_spec, candidate_split = dataset_or_own(p.candidate, p.candidate_split, run, "candidate", "comparison")
    reference = load_side("reference", p.reference, p.reference_split)
    candidate = load_side("candidate", candidate_spec, candidate_split)
    source = None if p.compare_source is None else _load_one(
        p.compare_source, p.compare_source_split, "compare_source", columns=("prompt_id", "prompt"))
    claim(run, p.candidate, "candidate")
    run.root.mkdir(parents=True, exist_ok=True)
    manifest = Manifest(run)  # a failed comparison must not leave an old verdict that looks current
    manifest.remove_outputs(run.compare, *plots.figure_files(run.figures, FIGURES),
                            *(run.tables / f"compare_{name}.csv" for name in TABLES))
    with manifest.notebook(p.model_dump(), "04_compare"), manifest.stage("compare", resumable=False) as info:
        result, tables, al = compare_datasets(reference, candidate, p, source, _hints(candidate_spec))
        if p.compare_source is not None:
            result["slice"]["source"] = _public(p.compare_source)
        drawn: dict[str, Any] = {}
        if result["scores"].get("available"):
            m = matched_scores(al)
            ok = np.isfinite(m["reference"]) & np.isfinite(m["candidate"])
            drawn["compare_scores"] = plots.compare_scores(m["reference"][ok], m["candidate"][ok])
            drawn["compare_bland_altman"] = plots.compare_bland_altman(m["reference"][ok], m["candidate"][ok],
                                                                       result["scores"]["scores"]["bland_altman"])
        if result["pairs"].get("categories"):
            drawn["compare_agreement"] = plots.compare_agreement(
                {PAIR_WORDS[k]: v for k, v in _said_categories(result["pairs"]).items()})
        figures = {name: plots.save_titled(fig, run.figures / name) for name, fig in drawn.items()}
        outputs = write_outputs(manifest, run.compare, result, figures,
                                {name: (run.tables / f"compare_{name}.csv", frame) for name, frame in tables.items()})
        info.update(aligned=result["alignment"]["aligned"], reference_rows=reference.rows,
                    candidate_rows=candidate.rows, same_pairs=(result["pairs"].get("categories") or {}).get("same"))
    return ComparisonResult(result=result, tables=tables, figures=figures, outputs=outputs)
