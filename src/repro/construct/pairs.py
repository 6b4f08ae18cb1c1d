"""Each row's candidates, and output rows in the seed's shape (pure). Tie rule (in the card): `chosen` is the FIRST
candidate with the highest score, `rejected` the LAST with the lowest, in candidate order (`row_candidates`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from ..dataset_io import SEED_COLUMNS, conversation, response_text, row_prompt_id
from ..errors import DataError, counted
from ..parameters import ConstructParams
from ..scorers.common import check_scores
from .selection import DROP_EMPTIED, DROP_TOO_FEW, best_worst

REFERENCE = "reference_response"
ORIGINAL_CHOSEN = "original_chosen"
ORIGINAL_REJECTED = "original_rejected"


def last_assistant_text(messages: Any, where: str) -> str:
    """The source's chosen/rejected as text: itself, or the last assistant message of a [{content, role}] list."""
    text = response_text(messages)
    if text is None:
        raise DataError(f"{where} has no assistant message; expected a text or a list of {{content, role}} dicts.")
    return text


def select_pair(scores: Sequence[float]) -> tuple[int, int]:
    """Indices (chosen, rejected): first of the highest score, last of the lowest (see the module's tie rule)."""
    check_scores(scores)
    if len(scores) < 2:
        raise DataError(f"select_pair needs at least two scores, got {len(scores)}.")
    return best_worst(scores)  # distinct: with >= 2 scores, a full tie gives (0, last)


@dataclass
class CandidateSet:
    """The candidates of each kept row, with the source row index and the candidate names."""

    rows: list[int] = field(default_factory=list)  # source row index (within the sliced table)
    prompts: list[str] = field(default_factory=list)
    candidates: list[list[str]] = field(default_factory=list)
    names: list[list[str]] = field(default_factory=list)
    dropped: dict[str, int] = field(default_factory=dict)  # reason -> count
    one_text: int = 0  # rows kept although their candidates are one text (too_few_candidates: keep)
    empty_dropped: int = 0  # empty texts left out of the candidates (empty_candidates: drop)

    def __len__(self) -> int:
        return len(self.rows)


def row_candidates(row: dict[str, Any], p: ConstructParams, where: str) -> list[tuple[str, str]]:
    """(name, text) of a row's candidates in order, None skipped (empty: an error with empty_candidates: error); the
    source's chosen/rejected last if original_pair_position is last, else first (SPPO ranks the last 5 of 7)."""
    names = list(p.candidate_columns) + ([REFERENCE] if p.include_reference else [])
    out = [(name, row[name]) for name in names if row.get(name) is not None]
    if p.include_original_pair:
        original = [(ORIGINAL_CHOSEN, last_assistant_text(row.get("chosen"), f"{where} column 'chosen'")),
                    (ORIGINAL_REJECTED, last_assistant_text(row.get("rejected"), f"{where} column 'rejected'"))]
        out = out + original if p.original_pair_position == "last" else original + out
    kept = []
    for name, text in out:
        if not isinstance(text, str):
            hint = (" For a chosen / rejected conversation: include_original_pair: true ranks its last assistant "
                    "message (with candidate_columns: [] alone).") if name in ("chosen", "rejected") else ""
            raise DataError(f"{where}, candidate {name!r}: expected a string, got {type(text).__name__} "
                            f"({str(text)[:80]!r}). Fix the source column or leave it out of candidate_columns.{hint}")
        if not text.strip() and p.empty_candidates == "error":
            raise DataError(f"{where}, candidate {name!r} is empty. Fix the source, or set empty_candidates: "
                            f"drop to leave empty texts out of the ranking (rank: rank them, as the recipes do).")
        kept.append((name, text))
    return kept


def of_split(split: str | None) -> str:
    """What follows a source row's number in an error: the split it is of, where that is not the train rows'."""
    return f" of split {split!r}" if split else ""


def row_where(number: int, prompt_id: Any, split: str | None = None) -> str:
    """How an error names a source row: by its number (of `split`), and its prompt_id where it has one."""
    pid = f"; prompt_id {prompt_id}" if prompt_id not in (None, "") else ""
    return f"source row {number}{of_split(split)} (from 0{pid})"


def check_prompts(rows: Sequence[Any], row_numbers: Sequence[int] | None = None, split: str | None = None) -> None:
    """Every row needs a non-empty text `prompt` (the generation's and the candidates' check): the error names the
    first row without one by `row_numbers` (its source row; default its place in `rows`), of `split` where given."""
    for i, row in enumerate(rows):
        prompt = row.get("prompt") if isinstance(row, dict) else None
        if isinstance(prompt, str) and prompt.strip():
            continue
        what = "has no 'prompt' column" if not isinstance(row, dict) or "prompt" not in row else \
            f"has an empty 'prompt' ({prompt!r})" if isinstance(prompt, str) else \
            f"has a 'prompt' of type {type(prompt).__name__} ({prompt!r}), not a text"
        pid = row.get("prompt_id") if isinstance(row, dict) else None
        raise DataError(f"{row_where(row_numbers[i] if row_numbers else i, pid, split)} {what}. Every row needs its "
                        f"prompt, a non-empty text, in the 'prompt' column: fix or remove that row in the source.")


def collect_candidates(rows: Sequence[dict[str, Any]], p: ConstructParams,
                       row_numbers: Sequence[int] | None = None, split: str | None = None) -> CandidateSet:
    """Every row's candidates by `p`; rows of fewer than two distinct texts dropped, an error, or kept. Errors name a
    row by `row_numbers` (its source row; default its place in `rows`), of `split` where given."""
    check_prompts(rows, row_numbers, split)
    cs = CandidateSet()
    for i, row in enumerate(rows):
        where = row_where(row_numbers[i] if row_numbers else i, row.get("prompt_id"), split)
        prompt = row["prompt"]
        named = row_candidates(row, p, where)
        pairs = [(name, text) for name, text in named if text.strip() or p.empty_candidates != "drop"]
        cs.empty_dropped += len(named) - len(pairs)
        distinct = len({text.strip() for _, text in pairs})
        kept_alone = distinct < 2 and p.too_few_candidates == "keep" and len(pairs) > 1
        cs.one_text += kept_alone
        if distinct < 2 and not kept_alone:
            if p.too_few_candidates == "error":
                raise DataError(f"{where} has {counted(distinct, 'distinct candidate')} among {[n for n, _ in pairs]}; "
                                f"PairRM needs two. Set too_few_candidates: drop to skip such rows.")
            reason = DROP_EMPTIED if len(pairs) < len(named) else DROP_TOO_FEW
            cs.dropped[reason] = cs.dropped.get(reason, 0) + 1
            continue
        cs.rows.append(i)
        cs.prompts.append(prompt)
        cs.names.append([n for n, _ in pairs])
        cs.candidates.append([t for _, t in pairs])
    return cs


def build_row(source_row: dict[str, Any], prompt: str, candidates: Sequence[str], scores: Sequence[float], *,
              messages: str, keep_all_candidates: bool,
              more_scores: dict[str, Sequence[float]] | None = None,
              pick: tuple[int, int] | None = None) -> dict[str, Any]:
    """One output row in the seed's column order: the `pick` (chosen, rejected) a selection rule chose, default best
    and worst; `more_scores` (other scorers', by name) go to `candidate_scores_<name>` and never decide the pair."""
    i_c, i_r = pick if pick is not None else select_pair(scores)
    chosen = conversation(prompt, candidates[i_c])
    msgs = source_row.get("messages") if messages == "source" else chosen
    if not isinstance(msgs, list):
        raise DataError("messages: source needs a 'messages' column of {content, role} lists in the source.")
    row = {"prompt": prompt, "prompt_id": row_prompt_id(source_row, prompt), "messages": msgs,
           "score_chosen": float(scores[i_c]), "score_rejected": float(scores[i_r]),
           "reference_response": source_row.get(REFERENCE), "chosen": chosen,
           "rejected": conversation(prompt, candidates[i_r])}
    assert list(row) == SEED_COLUMNS
    if keep_all_candidates:
        row["candidates"] = list(candidates)
        row["candidate_scores"] = [float(s) for s in scores]
        for name, more in (more_scores or {}).items():
            row[f"candidate_scores_{name}"] = [float(s) for s in more]
    return row


def check_prompt_ids(prompt_ids: Sequence[str | None], policy: str, row_numbers: Sequence[int] | None = None,
                     split: str | None = None) -> list[int]:
    """Positions to keep: a duplicate id errs naming its rows (`policy` "error") or keeps its first; a None id: kept."""
    numbers = row_numbers or range(len(prompt_ids))
    first: dict[str | int, int] = {}  # each id's first position, in order: the positions kept (no id: by position)
    for i, pid in enumerate(prompt_ids):
        if pid is None or pid not in first:
            first[i if pid is None else pid] = i
        elif policy == "error":
            raise DataError(
                f"prompt_id {pid} appears at source rows {numbers[first[pid]]} and {numbers[i]}{of_split(split)} "
                f"(from 0). Deduplicate the source, or set duplicate_prompt_ids: keep_first.")
    return list(first.values())
