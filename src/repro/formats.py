"""The dataset as TRL's `DPOTrainer` reads it (the seed's columns as they are do not train): TRL's preference formats,
keeping `prompt_id` and the scores, adding `score_margin` (not `margin`, which TRL's `RewardTrainer` puts in its loss;
docs/trl.md says why). Checked against TRL 1.16.0; tests/test_formats.py trains `DPOTrainer` on `to_trl`'s output."""

from __future__ import annotations

import math
from typing import Any

import datasets
from datasets import Features, Value

from .dataset_io import MESSAGE_LIST
from .errors import DataError
from .exporters import seed_view

TESTED_TRL_VERSION = "1.16.0"
GIVEN_MARGIN = "_repro_given_margin"  # a layout's own margin, where it publishes no pair scores (null: none)

# what to_trl / to_trl_implicit need from the seed's columns (messages, reference_response are not used)
REQUIRED_COLUMNS = ("prompt", "prompt_id", "chosen", "rejected", "score_chosen", "score_rejected")
KEPT_COLUMNS = ("prompt_id", "score_chosen", "score_rejected")
# a table with none of these publishes no scores (SELM's; SPPO's `_score` table): it gets no score columns, not
# refused; with `margin` alone (RLHFlow's pair table: prompt, chosen, rejected, margin), its margin is the score_margin
SCORE_COLUMNS = {"score_chosen", "score_rejected", "rm_scores", "all_rm_scores", "rewards", "margin"}

TRL_FEATURES = Features({"prompt_id": Value("string"), "prompt": MESSAGE_LIST, "chosen": MESSAGE_LIST,
                         "rejected": MESSAGE_LIST, "score_chosen": Value("float64"),
                         "score_rejected": Value("float64"), "score_margin": Value("float64")})
TRL_IMPLICIT_FEATURES = Features({k: v for k, v in TRL_FEATURES.items() if k != "prompt"})


def holds_scores(columns: Any) -> bool:
    """Whether a table of these columns holds its pairs' scores (to_trl keeps them and adds their difference)."""
    return bool(set(columns) & (SCORE_COLUMNS - {"margin"}))


def given_margins(ds: datasets.Dataset) -> list | None:
    """The margins to_trl takes as given (GIVEN_MARGIN) where a table holds no pair scores: RLHFlow's pairs' `margin`,
    else nulls (SELM's layout, SPPO's `_score` table: pairs, probabilities); None where it holds scores."""
    if holds_scores(ds.column_names):
        return None
    return list(ds["margin"]) if "margin" in ds.column_names else [None] * len(ds)


def trl_lacks(features: Features) -> list[str]:
    """The columns to_trl needs that a table of these features lacks as `seed_view` gives them (the scores where it
    holds any; `chosen`, `rejected` conversations, not texts: TRL's standard rows); [] where it reads the columns."""
    view = seed_view(datasets.Dataset.from_dict({k: [] for k in features}, features=features), False).features
    return [c for c in REQUIRED_COLUMNS[:4 + 2 * holds_scores(features)]
            if c not in view or c in ("chosen", "rejected") and view[c] in (Value("string"), Value("large_string"))]


def _short(text: Any, limit: int = 80) -> str:
    text = repr(text)
    return text if len(text) <= limit else text[:limit - 4] + "...'"


def _where(row: dict[str, Any], index: int) -> str:
    """A row by its index in the Dataset (counted from 0, as `ds[index]`) and its prompt_id."""
    return f"Row {index} (from 0; prompt_id {row.get('prompt_id') or '?'})"


def refused_turns(row: dict[str, Any]) -> tuple[str, str, str] | None:
    """Why to_trl refuses a seed row's turns: (the shape the card names, the column, its error); None where `chosen` and
    `rejected` agree from the user turn holding `prompt` (system turns before it are the prompt's, as TRL's
    extract_prompt takes them) up to an assistant turn (non-empty in `chosen`; `rejected`'s may be empty)."""
    for column in ("chosen", "rejected"):
        value = row.get(column)
        if not isinstance(value, list) or len(value) < 2 or not all(isinstance(m, dict) for m in value):
            return "turns", column, (f"`{column}` must be a list of at least two {{content, role}} messages (a user "
                                     f"turn, then the assistant's), got {_short(value)}")
        last = value[-1]
        if last.get("role") != "assistant":
            return "last", column, (f"the last turn of `{column}` must be the assistant's response, but its role is "
                                    f"{last.get('role')!r} ({_short(last.get('content'))})")
        content = last.get("content")
        if not isinstance(content, str):
            return "text", column, f"the assistant turn of `{column}` is not a text ({_short(content)})"
        if column == "chosen" and not content.strip():
            return "empty", column, (f"the assistant turn of `{column}` is empty ({_short(content)}): DPO learns "
                                     f"toward the chosen response, so it needs one (an empty `rejected` is fine)")
        first = next(m for m in value if m.get("role") != "system")  # (the last turn is the assistant's)
        if first.get("role") != "user" or first.get("content") != row.get("prompt"):
            return "prompt", column, (
                f"`{column}` does not start with the prompt's user turn: its first turn (after any system turn) is "
                f"{first.get('role')!r} {_short(first.get('content'))}, the `prompt` column is "
                f"{_short(row.get('prompt'))}")
    if row["chosen"][:-1] != row["rejected"][:-1]:
        return "differ", "chosen", ("`chosen` and `rejected` answer different conversations: their turns before the "
                                    "assistant's response differ")
    return None


def split_turns(row: dict[str, Any], index: int) -> tuple[list[dict], dict, dict]:
    """(prompt turns, chosen assistant turn, rejected assistant turn) of one seed row, checked (`refused_turns`)."""
    if refused := refused_turns(row):
        raise DataError(f"{_where(row, index)}: {refused[2]}. Each row needs `chosen` and `rejected` = [(system "
                        f"turn,) user turn with the `prompt` text, ..., assistant turn], as this project writes them; "
                        f"fix the row or leave it out (e.g. `ds.select(...)` / `ds.filter(...)`) before converting.")
    return row["chosen"][:-1], row["chosen"][-1], row["rejected"][-1]


def refused_scores(row: dict[str, Any]) -> tuple[str, str, str] | None:
    """Why to_trl refuses a row's scores, as `refused_turns` says it: a given margin (GIVEN_MARGIN: RLHFlow's pairs';
    SELM's null: none) neither finite nor null, else scores not both finite (a recipe's pairless row); None: taken."""
    if GIVEN_MARGIN in row:
        given = row[GIVEN_MARGIN]
        ok = given is None or _finite(given)
        return None if ok else ("margin", "margin", f"`margin` must be a finite number or null, got {given!r}")
    scores = [row.get("score_chosen"), row.get("score_rejected")]
    return None if all(map(_finite, scores)) else ("scores", "score_chosen", "`score_chosen` and `score_rejected` "
                                                   f"must be finite numbers (not null, NaN nor infinite), got {scores}")


def _margin(row: dict[str, Any], index: int) -> float | None:
    if refused := refused_scores(row):
        raise DataError(f"{_where(row, index)}: {refused[2]}; fix the row or leave it out before converting.")
    return row[GIVEN_MARGIN] if GIVEN_MARGIN in row else float(row["score_chosen"]) - float(row["score_rejected"])


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _explicit_row(row: dict[str, Any], index: int) -> dict[str, Any]:
    margin = _margin(row, index)  # first: a recipe's row without a pair (no finite scores) has no chosen either
    prompt, chosen, rejected = split_turns(row, index)
    return {"prompt": prompt, "chosen": [chosen], "rejected": [rejected], "score_margin": margin}


def _implicit_row(row: dict[str, Any], index: int) -> dict[str, Any]:
    margin = _margin(row, index)
    split_turns(row, index)
    return {"score_margin": margin}


def _convert(ds: datasets.Dataset, row_fn, features: Features, function: str) -> datasets.Dataset:
    if not isinstance(ds, (datasets.Dataset, datasets.DatasetDict)):  # (a DataFrame has no column_names)
        raise DataError(
            f"repro.formats.{function} needs a datasets.Dataset or DatasetDict, got "
            f"{'None' if ds is None else type(ds).__name__}: make one first, `datasets.Dataset.from_pandas(df)` of "
            f"a DataFrame, `datasets.Dataset.from_list(rows)` of a list of rows, and load a dataset without "
            f"streaming=True (an IterableDataset has no length, and every row is converted).")
    if isinstance(ds, datasets.DatasetDict):  # several splits (a recipe's train and test): each converted
        return datasets.DatasetDict({k: _convert(v, row_fn, features, function) for k, v in ds.items()})
    if lacks := trl_lacks(ds.features):
        raise DataError(f"The dataset given to repro.formats.{function} lacks {lacks} as the seed has them (`chosen`, "
                        f"`rejected`: conversations; texts are TRL's standard rows, which DPOTrainer reads as they "
                        f"are); it has {ds.column_names}. Rename your columns to repro.dataset_io.SEED_FEATURES', or "
                        f"load this project's data: `datasets.load_dataset(folder_or_hub_id, split='train_prefs')`.")
    given = given_margins(ds)
    absent = [] if given is None else ["score_chosen", "score_rejected"] + ["score_margin"] * (
        "margin" not in ds.column_names)  # (left out)
    features = Features({k: v for k, v in features.items() if k not in absent})
    ds = seed_view(ds, candidates=False)  # SPPO's, Snorkel's, RLHFlow's pairs in the seed's columns
    ds = ds if given is None else ds.add_column(GIVEN_MARGIN, given)  # for _margin
    if len(ds) == 0:  # map would not run the function, so it would not change the columns either
        return datasets.Dataset.from_dict({name: [] for name in features}, features=features)
    dropped = [c for c in ds.column_names if c not in features]
    # features given: the output's types and column order are exactly `features`, whatever the rows hold
    return ds.map(lambda row, i: {k: v for k, v in row_fn(row, i).items() if k not in absent}, with_indices=True,
                  remove_columns=dropped, features=features, desc=f"repro.formats.{function}")


def to_trl(ds: datasets.Dataset) -> datasets.Dataset:
    """TRL's explicit conversational preference format: prompt = user turn(s), chosen/rejected = assistant turn."""
    return _convert(ds, _explicit_row, TRL_FEATURES, "to_trl")


def to_trl_implicit(ds: datasets.Dataset) -> datasets.Dataset:
    """TRL's implicit-prompt format: chosen/rejected whole conversations, no `prompt` column, + score_margin."""
    return _convert(ds, _implicit_row, TRL_IMPLICIT_FEATURES, "to_trl_implicit")
