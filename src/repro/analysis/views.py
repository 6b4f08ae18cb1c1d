"""What 01_construct shows after each stage (counts, rows, pairs, scores' distribution) as objects; writes nothing."""

from __future__ import annotations

import io
from typing import Any, Sequence

import datasets
import numpy as np
import pandas as pd
from IPython.display import Image

from . import plots
from ..exporters import seed_view
from .report import readable, response_texts, shorten

# what the notebook shows of the scorer (the manifest records everything)
SCORER_FIELDS = ("model", "stand_in", "backend", "device", "dtype", "prompts", "prompts_per_second", "scoring_seconds",
                 "load_seconds", "chunks", "chunks_resumed", "processes", "prompts_computed")
CACHE_FIELDS = {"rows_from_cache": "rows from the row cache", "rows_computed": "rows computed",
                "damaged_entries": "damaged row-cache entries (computed again)",
                "resumed_from_cache": "rows resumed that the row cache gave the call that made them",
                "resumed_unknown": "rows resumed from an older repro's chunks (from the row cache or not: not known)"}
INLINE_DPI = 80  # 512 px wide: a figure beside the tables, not a full-width poster
# what each count of the manifest means (the card says it in its own words, in templates/)
COUNT_MEANINGS = {
    "source": "rows in the source split", "part": "rows in the index part", "after_drop": "rows left after drop_rows",
    "sliced": "rows in the mini (after limit)", "dropped": "rows dropped by drop_rows",
    "generated": "rows after generation", "with_candidates": "rows with candidates to rank",
    "dropped_too_few_candidates": "rows dropped: fewer than two distinct candidates",
    "dropped_duplicate_prompt_id": "rows dropped: a prompt_id seen before", "scored": "rows scored",
    "dropped_tie": "rows dropped: chosen and rejected tied (ties: drop)",
    "dropped_below_min_margin": "rows dropped: a margin below min_margin",
    "dropped_fewer_than_two_candidates": "rows dropped: fewer than two candidates to pair",
    "kept_one_text": "rows kept with one text (too_few_candidates: keep): chosen = rejected",
    "dropped_long_prompts": "rows dropped: a prompt longer than max_prompt_tokens (long_prompts: skip)",
    "empty_candidates_dropped": "candidates (not rows) left out: empty texts (empty_candidates: drop)",
    "dropped_fewer_than_two_nonempty_candidates": "rows dropped: fewer than two distinct candidates once the empty "
                                                  "ones were left out",
    "kept": "rows written to the dataset"}


def counts_table(counts: dict[str, Any]) -> Any:
    """The rows left at each stage so far, with what each count means."""
    return readable(pd.DataFrame([{"stage": k, "rows": v, "meaning": COUNT_MEANINGS.get(k, "")}
                                  for k, v in counts.items()], columns=["stage", "rows", "meaning"]).set_index("stage"))


def rows_preview(ds: datasets.Dataset, columns: Sequence[str], k: int = 3) -> Any:
    """The first `k` rows of the named columns that exist, each text shortened to one line."""
    present = [c for c in columns if c in ds.column_names]
    head = ds.select(range(min(k, len(ds)))).select_columns(present).to_list()
    return readable(pd.DataFrame([{c: shorten(row[c]) for c in present} for row in head]))


def candidates_table(candidate_set) -> pd.DataFrame:
    """How many rows have how many candidates, and how many rows were dropped and why."""
    sizes = pd.Series([len(c) for c in candidate_set.candidates], dtype="int64").value_counts().sort_index()
    out = [{"rows": int(n), "what": f"{k} candidates"} for k, n in sizes.items()]
    if candidate_set.one_text:
        out.append({"rows": candidate_set.one_text, "what": "kept with one text: chosen = rejected"})
    out += [{"rows": n, "what": f"dropped: {reason.replace('_', ' ')}"} for reason, n in candidate_set.dropped.items()]
    return pd.DataFrame(out).set_index("what")


def scorer_table(info: dict[str, Any]) -> pd.DataFrame:
    """The scorer as the manifest records it: model, stand-in or not, device, precision, speed, the row cache."""
    cache = {k: v for k, v in (info.get("cache") or {}).items() if k in CACHE_FIELDS and (v or k != "damaged_entries")}
    rows = {**{k: info[k] for k in SCORER_FIELDS if k in info}, **{CACHE_FIELDS[k]: v for k, v in cache.items()}}
    return pd.DataFrame({"value": {k: str(v) for k, v in rows.items()}})


def figure(fig) -> "Image":
    """A matplotlib Figure as an inline PNG (the same picture under papermill and in JupyterLab)."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=INLINE_DPI)
    return Image(data=buffer.getvalue(), format="png")


def score_distribution(scores: Sequence[Sequence[float]]) -> "Image":
    """The best and worst candidate score of each row (what become score_chosen / score_rejected)."""
    best, worst = (np.array([extreme(s) for s in scores], dtype=np.float64) for extreme in (max, min))
    return figure(plots.score_distributions(best, worst))


def _margin(pairs: datasets.Dataset) -> np.ndarray | None:
    if "score_chosen" not in pairs.column_names:
        return None
    return np.asarray(pairs["score_chosen"], dtype=np.float64) - np.asarray(pairs["score_rejected"], dtype=np.float64)


def margin_distribution(pairs: datasets.Dataset) -> "Image | None":
    """The margin score_chosen − score_rejected of the pairs (any output format; None for one without scores)."""
    margin = _margin(seed_view(pairs))
    return None if margin is None else figure(plots.margin_distribution(margin))


def pair_examples(pairs: datasets.Dataset, candidate_set=None, scores: Sequence[Sequence[float]] | None = None,
                  picks: Sequence[tuple[int, int, int]] | None = None, params=None) -> Any:
    """Pairs to read, one line each: largest, middle, smallest margin (no scores: rows); given candidates, scores and
    `picks` (stages.build's), each candidate's score and role (best_worst_length_penalised: its penalised score)."""
    pairs = seed_view(pairs)
    chosen, rejected = (response_texts(pairs.data.table.column(c)).to_pylist() for c in ("chosen", "rejected"))
    margin = _margin(pairs)
    if margin is None:
        shown = {0: "first", len(pairs) // 2: "middle", len(pairs) - 1: "last"}
    else:
        order = np.argsort(-margin, kind="stable")
        shown = {}
        for label, i in zip(("largest margin", "middle margin", "smallest margin"), order[[0, len(order) // 2, -1]]):
            shown.setdefault(int(i), label)
    rows = [{"": label, "prompt": shorten(pairs[i]["prompt"]), "chosen": shorten(chosen[i]),
             "rejected": shorten(rejected[i])} for i, label in shown.items()]
    if margin is not None:
        for row, i in zip(rows, shown):
            row.update(score_chosen=round(float(pairs[i]["score_chosen"]), 4),
                       score_rejected=round(float(pairs[i]["score_rejected"]), 4), margin=round(float(margin[i]), 4))
    if candidate_set is None or picks is None or len(picks) != len(pairs):  # (no candidates of these pairs to show)
        return readable(pd.DataFrame(rows).set_index(""))
    penalty = params.length_penalty if getattr(params, "selection", None) == "best_worst_length_penalised" else None
    lines = []  # one line per candidate of each pair's row
    for (i, label), pair in zip(shown.items(), rows):
        k, marks = picks[i][0], dict(zip(("chosen", "rejected"), picks[i][1:]))
        for j, (name, text, score) in enumerate(zip(candidate_set.names[k], candidate_set.candidates[k], scores[k])):
            line = {"": label, "prompt": pair["prompt"] if j == 0 else "", "candidate": name,
                    "score": round(float(score), 4)}
            if penalty is not None:  # what best_worst_length_penalised ranked
                line[f"score − {penalty:g} × characters"] = round(float(score) - penalty * len(text), 4)
            lines.append(line | {"pair": " and ".join(m for m, at in marks.items() if at == j), "text": shorten(text)})
    return readable(pd.DataFrame(lines).set_index(["", "candidate"]))
