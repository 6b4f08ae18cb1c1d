"""Output formats (pure): each published layout of this field's recipes, as its upstream code writes it
(`Format.source`; docs/recipes.md says what is inferred), from the same scored rows (`construct.pairs.build_row`) and
the pair picked; `seed_view` maps any format back to the seed's columns (for 02_analyze, 04_compare and `to_trl`)."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import datasets
import numpy as np
from datasets import Features, List, Value

from .dataset_io import (MESSAGE_LIST, SEED_FEATURES, conversation, output_features, prompt_text, response_text,
                         row_prompt_id)
from .errors import DataError, counted
from .parameters import OutputFormat

FLOATS = List(Value("float64"))
SCORED_ONLY = "scored_only"  # a row's key: how many leading candidates were ranked but not candidates of the pair
STRINGS = List(Value("string"))


def sppo_probabilities(scores: Sequence[float]) -> np.ndarray:
    """SPPO's `probability[i][j] = 1 / (1 + exp(score[j] - score[i]))` (P[i][i] = 0.5)."""
    s = np.asarray(scores, dtype=np.float64)
    return 1.0 / (1.0 + np.exp(s[None, :] - s[:, None]))


def sppo_columns(scores: Sequence[float], chosen: int, rejected: int, lead: int = 0) -> dict[str, Any]:
    """SPPO's columns, as compute_prob.py writes them: `probability`, `rm_scores`, `chosen_probs`, `chosen_probs_win`,
    `chosen_probs_lose`; `lead`: the original pair ranked first (first_scored_only), in rm_scores only."""
    n, chosen, rejected = len(scores) - lead, chosen - lead, rejected - lead
    # compute_prob.py: probability over score[0..pairs-1] (the first n: with the originals first, the two of them
    # and the first generated ones), indexed by the argmax / argmin of rm_scores[-5:], the generated ones
    p = sppo_probabilities(scores[:n])
    return {"probability": p.tolist(), "rm_scores": [float(s) for s in scores],
            "chosen_probs": float(p[chosen][rejected]), "chosen_probs_win": float(p[chosen].sum() / n),
            "chosen_probs_lose": float(p[rejected].sum() / n)}


def _sppo(row: dict[str, Any], chosen: int, rejected: int) -> dict[str, Any]:
    lead = row.get(SCORED_ONLY, 0)
    return {"prompt": row["prompt"], "prompt_id": row["prompt_id"], "chosen": row["chosen"],
            "rejected": row["rejected"],
            **{f"generate_{i}": conversation(row["prompt"], text) for i, text in enumerate(row["candidates"][lead:])},
            **sppo_columns(row["candidate_scores"], chosen, rejected, lead)}


def _rlhflow(row: dict[str, Any], chosen: int, rejected: int) -> dict[str, Any]:
    return {"prompt": [{"content": row["prompt"], "role": "user"}], "responses": list(row["candidates"]),
            "rewards": [float(s) for s in row["candidate_scores"]], "chosen": response_text(row["chosen"]),
            "rejected": response_text(row["rejected"]), "margin": row["score_chosen"] - row["score_rejected"]}


@dataclass(frozen=True)
class Format:
    """One published layout: its split name, its features (given the candidate count), its row converter."""

    name: str
    split: str  # may hold {iteration}
    convert: Callable[[dict[str, Any], int, int], dict[str, Any]] | None  # None: the seed row's columns, renamed
    source: str  # where the layout is read from, for the card and the manifest
    columns: Features | None = None  # None: they depend on the run (the seed's extra columns, SPPO's candidates)
    renames: dict[str, str] = field(default_factory=dict)  # a published column -> the seed row's (convert None)

    def split_name(self, iteration: int, override: str | None = None) -> str:
        """The split the rows go to: `override`, else the format's own name for this iteration."""
        return override or self.split.format(iteration=iteration)

    def test_split_name(self, iteration: int, override: str | None = None) -> str:
        """The test split beside the train split: its leading `train` made `test` (else `<train split>_test`)."""
        train = self.split_name(iteration, override)
        return "test" + train[5:] if train.startswith("train") else f"{train}_test"

    def features(self, n_candidates: int, keep_all_candidates: bool = False,
                 more_scorers: Sequence[str] = ()) -> Features:
        """The output features (SPPO's `generate_{i}` columns need the number of candidates)."""
        if self.columns is not None:
            return self.columns.copy()
        if self.name == "seed":
            return output_features(keep_all_candidates, more_scorers)
        assert self.name == "sppo", self.name  # the one other format whose columns depend on the run
        return Features({"prompt": Value("string"), "prompt_id": Value("string"), "chosen": MESSAGE_LIST,
                         "rejected": MESSAGE_LIST, **{f"generate_{i}": MESSAGE_LIST for i in range(n_candidates)},
                         "probability": List(FLOATS), "rm_scores": FLOATS, "chosen_probs": Value("float64"),
                         "chosen_probs_win": Value("float64"), "chosen_probs_lose": Value("float64")})


FORMATS: dict[str, Format] = {
    "seed": Format("seed", "train_prefs", None,
                   "YYYYYYibo/ultrafeedback_binarized_dataset_offline_pairrm_part2_mini_1"),
    "sppo": Format("sppo", "train", _sppo, "uclaml/SPPO scripts/compute_prob.py"),
    "snorkel": Format("snorkel", "train_iteration_{iteration}", None, "snorkelai/Snorkel-Mistral-PairRM-DPO-Dataset",
                      Features({"prompt_id": Value("string"), "prompt": Value("string"),
                                "all_generated_responses": STRINGS, "all_rm_scores": FLOATS, "chosen": MESSAGE_LIST,
                                "rejected": MESSAGE_LIST}),
                      {"all_generated_responses": "candidates", "all_rm_scores": "candidate_scores"}),
    "rlhflow": Format("rlhflow", "train", _rlhflow,
                      "RLHFlow/Online-RLHF annotate_data/get_rewards.py, dpo_iteration/run_dpo.py",
                      Features({"prompt": MESSAGE_LIST, "responses": STRINGS, "rewards": FLOATS,
                                "chosen": Value("string"), "rejected": Value("string"), "margin": Value("float64")})),
    "selm": Format("selm", "train_prefs_{iteration}", None, "shenao-zhang/SELM scripts/online_feedback.py",
                   Features({k: SEED_FEATURES[k] for k in ("prompt", "prompt_id", "messages", "reference_response",
                                                           "chosen", "rejected")})),
}
assert tuple(FORMATS) == OutputFormat.__args__  # type: ignore[attr-defined]
# each layout as a researcher knows it (the recipe's name, as the README writes it), for messages: "SPPO's layout"
CALLED = {"seed": "the seed dataset's", "sppo": "SPPO's", "snorkel": "Snorkel's", "rlhflow": "RLHFlow's",
          "selm": "SELM's"}
assert tuple(CALLED) == tuple(FORMATS)
SCORED = {"sppo": "generate_<i>", "snorkel": "all_generated_responses", "rlhflow": "responses"}  # a layout's candidates
# a layout's list of every candidate's score (the seed's keep_all_candidates rows, SPPO's, Snorkel's, RLHFlow's)
LISTED = {"seed": "candidate_scores", "sppo": "rm_scores", "snorkel": "all_rm_scores", "rlhflow": "rewards"}


def check_same_candidates(sizes: Sequence[int], detail: str = "") -> None:
    """output_format sppo: one `generate_i` column per candidate, so every row lists as many (`detail`: which not)."""
    if len(set(sizes)) > 1:
        raise DataError(f"output_format 'sppo' has one `generate_i` column per candidate, but rows hold "
                        f"{sorted(set(sizes))} candidates{detail}. Give every row the same candidates: fill a null (it "
                        f"is no candidate) or leave its column out of candidate_columns; empty_candidates: rank ranks "
                        f"an empty response, as SPPO does, where drop leaves it out. Or choose another output_format.")


def export_rows(name: str, rows: Sequence[dict[str, Any]], picks: Sequence[tuple[int, int]],
                keep_all_candidates: bool = False, more_scorers: Sequence[str] = ()) -> datasets.Dataset:
    """The seed rows (with `candidates` / `candidate_scores` where the format needs them) in format `name`."""
    fmt = FORMATS[name]
    sizes = [len(r["candidates"]) - r.get(SCORED_ONLY, 0) for r in rows] if fmt.name == "sppo" else [0]
    check_same_candidates(sizes)
    features = fmt.features(max(sizes), keep_all_candidates, more_scorers)
    out = ([{k: r[fmt.renames.get(k, k)] for k in features} for r in rows] if fmt.convert is None else
           [fmt.convert(r, c, j) for r, (c, j) in zip(rows, picks)])
    return datasets.Dataset.from_list(out, features=features)


# back to the seed's columns
def detect_format(columns: Sequence[str] | Mapping[str, Any]) -> str:
    """Which format a table is, by its columns (so a published copy is recognised too): their names, or a row or a
    Dataset's features, whose `prompt` tells RLHFlow's pair table (a conversation) from TRL's reward-modelling pairs
    (a string prompt, chosen, rejected and a `margin`: plain pairs, as names alone are read)."""
    have = set(columns)
    if {"chosen_probs", "chosen_probs_win", "chosen_probs_lose"} <= have or "rm_scores" in have:
        return "sppo"
    if {"all_generated_responses", "all_rm_scores"} <= have:
        return "snorkel"
    if {"responses", "rewards"} <= have or (conversational(columns) and "margin" in have and "chosen" in have
                                               and not {"score_chosen", "prompt_id"} & have):
        return "rlhflow"
    return "seed"


def conversational(columns: Sequence[str] | Mapping[str, Any], column: str = "prompt") -> bool:
    """Whether a row's `column` (`prompt`), or a Dataset's feature of it, is a conversation (a list of messages)."""
    return isinstance(columns.get(column) if isinstance(columns, Mapping) else None, (list, List))


def _score_of(text: str | None, candidates: Sequence[str] | None, scores: Sequence[float] | None,
              missing: float | None = None, at: int | None = None) -> float | None:
    """The score of `text` among `candidates` (its first place, or `at`, where the row was paired by index)."""
    if text is None or not candidates or not scores or text not in candidates:
        return missing
    return float(scores[list(candidates).index(text) if at is None else at])


def generate_columns(row: dict[str, Any]) -> list[str]:
    """An SPPO row's candidate columns in their order: generate_0, generate_1, ... (a ValueError for generate_x)."""
    return sorted((c for c in row if c.startswith("generate_")), key=lambda c: int(c.split("_")[1]))


def check_fit(scores: Any, n: int, where: str, of: str) -> None:
    """A DataError naming `where` (a row's score column) unless `scores` gives each of its `n` candidates (column `of`)
    one number, in their order: a list that does not fit them would pair texts by another's score (a NaN is a number:
    where it is the pair's, it is told as the seed's are, and `exclude_nonfinite` leaves it out)."""
    if not isinstance(scores, (list, tuple)):
        problem = f"is {'null' if scores is None else type(scores).__name__}, not a list"
    elif len(scores) != n:
        problem = f"holds {counted(len(scores), 'score')} for {counted(n, 'candidate')}"
    elif (k := next((k for k, s in enumerate(scores) if isinstance(s, bool) or not isinstance(s, numbers.Real)),
                    None)) is not None:
        problem = f"score {k} (from 0) is {scores[k]!r:.40}, not a number"
    else:
        return
    raise DataError(f"{where} {problem}: give each candidate in '{of}' one score, in their order, or leave the row "
                    f"out.")


def seed_row(row: dict[str, Any], fmt: str, where: str = "A row") -> dict[str, Any]:
    """A `fmt` row in the seed's names (as `seed_view`, untyped); scores not fitting candidates: `check_fit`'s error."""
    prompt = prompt_text(row)
    chosen, rejected = response_text(row.get("chosen")), response_text(row.get("rejected"))
    if fmt == "sppo":
        candidates = [response_text(row[c]) for c in generate_columns(row)]
        # SPPO's published rows hold 7 scores for 5 generate_i columns (its issue #27); compute_prob.py ranks the
        # last 5 (`rm_scores[-5:]`), so the generated responses' scores are the last ones
        scores = row.get("rm_scores")
        scores = scores[-len(candidates):] if candidates and isinstance(scores, list) else scores
    elif fmt == "snorkel":
        candidates, scores = row.get("all_generated_responses"), row.get("all_rm_scores")
    else:
        candidates, scores = row.get("responses"), row.get("rewards")
    if candidates and fmt in SCORED and LISTED[fmt] in row:  # (a table without scores, as RLHFlow's pairs: no list)
        check_fit(scores, len(candidates), f"{where}, prompt_id {row_prompt_id(row, prompt)!r}: '{LISTED[fmt]}'",
                  SCORED[fmt])
    unpaired, at = None, (None, None)  # a row that cannot be paired: its scores NaN (told as the seed's NaN are)
    if chosen is None and rejected is None and candidates and scores and len(candidates) == len(scores):
        # rows scored but not yet paired (SPPO's from_ranks, RLHFlow's get_rewards): their code's argmax / argmin, of
        # the scores not NaN (upstream's have none; a NaN would be both: one candidate chosen and rejected)
        if np.count_nonzero(~np.isnan(s := np.asarray(scores, dtype=np.float64))) > 1:
            at = int(np.nanargmax(s)), int(np.nanargmin(s))  # (by place: a text may stand twice, one score NaN)
            chosen, rejected = candidates[at[0]], candidates[at[1]]
        else:
            unpaired = math.nan
    conv = (lambda t: None if t is None or prompt is None else conversation(prompt, t))
    ranked = row.get("rm_scores") if fmt == "sppo" else scores  # every score of the texts ranked together
    return {"prompt": prompt, "prompt_id": row_prompt_id(row, prompt),
            "score_chosen": _score_of(chosen, candidates, scores, unpaired, at[0]),
            "score_rejected": _score_of(rejected, candidates, scores, unpaired, at[1]),
            "chosen": conv(chosen), "rejected": conv(rejected), "candidates": candidates or None,
            # a score per candidate only where the format holds one each (not SPPO's 7 scores for 5 generate_i)
            "candidate_scores": ranked if candidates and ranked and len(ranked) == len(candidates) else None}


PAIR_VIEW_FEATURES = Features({k: SEED_FEATURES[k] for k in ("prompt", "prompt_id", "score_chosen", "score_rejected",
                                                             "chosen", "rejected")})
SEED_VIEW_FEATURES = Features({**PAIR_VIEW_FEATURES, "candidates": STRINGS, "candidate_scores": FLOATS})


def seed_view(ds: datasets.Dataset, candidates: bool = True) -> datasets.Dataset:
    """`ds` in the seed's column names, whatever its format (seed and SELM rows as they are); `prompt_id` = sha256 of
    the prompt where the format has none, a score null where its text is not listed; `candidates` / `candidate_scores`
    every candidate and its score (null where none; left out with `candidates=False`, for a reader of the pairs); TRL's
    conversational rows (`to_trl`'s) with their prompt's text and `chosen` / `rejected` conversations, as the seed's."""
    fmt = detect_format(ds.features)
    if fmt != "seed":
        features = SEED_VIEW_FEATURES if candidates else PAIR_VIEW_FEATURES
        rows = [{k: v for k, v in seed_row(r, fmt, f"Row {n} (from 0)").items() if k in features}
                for n, r in enumerate(ds)]
    elif conversational(ds.features):  # (their other columns kept: their scores, score_margin)
        view = [c for c in ("prompt", "prompt_id", "chosen", "rejected") if c in ds.column_names or c == "prompt_id"]
        features = Features({**ds.features, **{c: PAIR_VIEW_FEATURES[c] for c in view}})
        rows = [r | {c: v for c, v in seed_row(r, fmt).items() if c in view} for r in ds]
    else:
        return ds
    return datasets.Dataset.from_list(rows, features=features) if rows else \
        datasets.Dataset.from_dict({k: [] for k in features}, features=features)
