"""notebooks/02_analyze: scores validated, statistics and figures written (metrics.json last; failures leave none)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Sequence

import datasets
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from IPython import display as ipython

from ..errors import DataError, counted
from ..dataset_io import RESCORED_COLUMNS, SCORE_COLUMNS, response_texts, same_responses, score_array, scores_digest
from ..exporters import CALLED, detect_format, seed_view
from ..formats import holds_scores
from ..jobs import atomic_write_json
from ..manifest import Manifest
from ..parameters import AnalyzeParams, ConstructParams, code_span, one_line
from ..paths import EXTREMES_TABLE, SUMMARY_TABLE, RunDir, public_name, run_manifest_of
from ..sources import load_source, require_columns
from ..subject import claim, dataset_or_own, declared_scorer, read_as_pairrm, refuse_unbuilt
from . import agreement, plots, prose, stats

EXTREME_ROWS = 10
ID_SHOWN = 11  # characters of a prompt id a notebook's table shows, then "…"
SHORT = 160  # characters of a text shown in a table cell (the whole text is in the dataset)
METRICS_VERSION = 1
CANDIDATE_SCORES = "candidate_scores"  # the primary scorer's; candidate_scores_<name> for each further scorer
AGREEMENT = "scorer_agreement"  # the figure's and the table's name


@dataclass
class ScoreData:
    """Validated scores of one dataset split: the rows kept, what was excluded, and where they came from."""

    source: str
    split: str
    n_rows: int
    digest: str  # scores_digest of the rows
    score_chosen: np.ndarray
    score_rejected: np.ndarray
    row_index: np.ndarray  # position of each kept row in the dataset
    excluded_reasons: dict[str, int]
    table: pa.Table = field(repr=False)
    scorer: dict[str, Any] | None = None
    told_scorer: str | None = None  # the scorer known_recipe names (where `scorer` records none)
    selection: str | None = None  # the pair rule of the dataset's making (its manifest's), when recorded
    lowest_tie: str | None = None  # the tie rule of its pairs: the manifest's lowest_tie (unrecorded: the default)
    # per-row response lengths of the kept rows that have both responses (`length_rows` marks them), or why not
    lengths: dict[str, np.ndarray] | None = field(default=None, repr=False)
    length_rows: np.ndarray | None = field(default=None, repr=False)
    length_reason: dict[str, Any] = field(default_factory=dict)

    @property
    def n(self) -> int:
        return int(self.score_chosen.size)

    @property
    def pairwise(self) -> bool:
        """Whether the scores may be PairRM's: its kind of scorer made them, or an unknown one (the scale decides)."""
        return (self.scorer or {}).get("kind", "pairrm") == "pairrm"

    @property
    def margin(self) -> np.ndarray:
        return self.score_chosen - self.score_rejected

    def _repr_markdown_(self) -> str:
        return (f"**{self.n:,} rows** of {code_span(self.source)} (split {code_span(self.split)}) to analyse; "
                f"{self.n_rows - self.n:,} excluded {self.excluded_reasons or ''}".rstrip())


@dataclass
class AnalysisResult:
    """What the analysis wrote and computed; shows its headline in a notebook."""

    metrics: dict[str, Any]
    outputs: list[Path]
    summary: pd.DataFrame
    extremes: pd.DataFrame
    figures: dict[str, dict[str, Any]]
    agreement: pd.DataFrame | None = None  # one row per pair of scorers, when the dataset holds several

    def _repr_markdown_(self) -> str:
        return headline(self.metrics)


def require_scores(table: pa.Table, where: str) -> None:
    """A DataError unless `table` has the score columns (a dataset the analysis cannot read at all)."""
    # a recipe's pairs without scores: its table of scores has them
    layout = detect_format(datasets.Features.from_arrow_schema(table.schema))
    scored = {"sppo": "rm_scores", "rlhflow": "rewards"}.get(layout)
    require_columns(table.column_names, SCORE_COLUMNS, where,
                    hint="The analysis needs the paired scores of a preference dataset: rename the columns, "
                         "or point `dataset` at a dataset that has them" + (
                             f": these are {CALLED[layout]} pairs without their scores, which its table with "
                             f"`{scored}` (every candidate's score) holds." if scored else "."))


def validate_scores(table: pa.Table | datasets.Dataset | pd.DataFrame, where: str, exclude_nonfinite: bool,
                    min_rows: int = 2) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, int]]:
    """(score_chosen, score_rejected, kept row positions, excluded_reasons) of the finite rows, at least `min_rows`."""
    if isinstance(table, datasets.Dataset):
        table = table.with_format("arrow")[:]  # (its rows: `.data` is the whole table a select() maps into)
    elif isinstance(table, pd.DataFrame):
        table = pa.Table.from_pandas(table, preserve_index=False)
    if not isinstance(table, pa.Table):
        raise DataError(f"repro.analysis.report.validate_scores: table is {type(table).__name__}, expected a "
                        f"pyarrow.Table, a datasets.Dataset or a pandas DataFrame with columns score_chosen and "
                        f"score_rejected: make one first (`pyarrow.table(columns)` of a dict of columns).")
    require_scores(table, where)
    if table.num_rows == 0:
        raise DataError(f"{where} has no rows: there is nothing to analyse. Check `dataset` and `dataset_split`, "
                        f"or run the construction notebook first.")
    chosen, rejected = (score_array(table, column, where) for column in SCORE_COLUMNS)
    series, named = dict(zip(SCORE_COLUMNS, (chosen, rejected))), partial(rows_named, table)
    bad, reasons = stats.nonfinite_rows(where, series, None if exclude_nonfinite else stats.EXCLUDE_NONFINITE, named)
    keep = np.flatnonzero(~bad)
    if keep.size < min_rows:
        why = " (a spread, intervals and tests are undefined for one pair)" * (min_rows > 1)
        raise DataError(
            f"{where} has {counted(keep.size, 'row')} with finite scores (of {table.num_rows}); the analysis needs at "
            f"least {min_rows}{why}. Point `dataset` at more rows, or, for this run's own dataset, build more (a "
            f"higher `limit`, a larger slice).")
    stats.refuse_too_large(where, series, named)  # (NaN rows left out)
    return chosen[keep], rejected[keep], keep, reasons


def rows_named(table: pa.Table, rows: np.ndarray | Sequence[int]) -> str:
    """Row positions as a message names them (from 0, as `ds[i]`), each with the start of its prompt_id if any."""
    shown = [int(i) for i in rows]
    ids = values_at(table, "prompt_id", shown)
    if not ids:
        return stats.rows_shown(shown)
    return ", ".join(f"{i} ({'from 0; ' if n == 0 else ''}prompt_id {shorten(pid, 13)})"
                     for n, (i, pid) in enumerate(zip(shown, ids)))


def read(p: AnalyzeParams) -> tuple[str, str, pa.Table]:
    """(spec, split, rows) of the dataset `p.dataset` names (default: this run's own), which must have the scores."""
    spec, split = dataset_or_own(p.dataset, p.dataset_split, RunDir(p.run_root))
    ds = load_source(spec, split, "dataset")
    # another recipe's: seed columns (not of pairs without scores, SPPO's `_score` table: each score would be null)
    table = (seed_view(ds) if holds_scores(ds.column_names) else ds).with_format("arrow")[:]
    require_scores(table, dataset_named(spec, split))
    return spec, split, table


def dataset_named(spec: str, split: str) -> str:
    """`dataset` as a message names it: with its split, unless it is one file (which has none)."""
    return f"dataset {spec!r}" + ("" if Path(spec).expanduser().is_file() else f" (split {split!r})")


def load(p: AnalyzeParams, given: tuple[str, str, pa.Table] | None = None) -> ScoreData:
    """The dataset `p.dataset` names (`given`: as `read` gave it) with its scores validated."""
    run = RunDir(p.run_root)
    spec, split, table = given or read(p)
    chosen, rejected, keep, reasons = validate_scores(table, dataset_named(spec, split), p.exclude_nonfinite)
    lengths, length_rows, why = response_lengths(table, keep)
    try:  # the scorer the manifest of the dataset's making records (this run's, or that of the run `dataset` names)
        manifest = run.manifest if p.dataset is None else run_manifest_of(p.dataset)
        recorded = json.loads(manifest.read_text())
        parameters = recorded.get("parameters") or {}
        scorer, selection, lowest_tie = (recorded.get("scorer"), parameters.get("selection"),
                                         parameters.get("lowest_tie"))
    except (AttributeError, OSError, ValueError):  # no manifest, or not one
        scorer = selection = lowest_tie = None
    if scorer is None and p.dataset is not None:  # made elsewhere: a stand-in its card or folder declares, else the
        scorer = declared_scorer(p.dataset, split)  # scorer `repro score` recorded beside the file
    return ScoreData(source=spec, split=split, n_rows=table.num_rows, digest=scores_digest(table),
                     score_chosen=chosen, score_rejected=rejected, row_index=keep, excluded_reasons=reasons,
                     table=table, scorer=scorer if isinstance(scorer, dict) else None,
                     told_scorer=p.known_recipe.get("scorer") if isinstance(p.known_recipe, dict) else None,
                     selection=selection if isinstance(selection, str) else None, lengths=lengths,
                     lowest_tie=lowest_tie or ConstructParams.model_fields["lowest_tie"].default,
                     length_rows=length_rows, length_reason=why)


def text_lengths(texts: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(characters, whitespace tokens) of each text, as len(s) and len(s.split()) count them; NaN for null."""
    chars = pc.utf8_length(texts).to_numpy(zero_copy_only=False).astype(np.float64)
    # str.split() itself: as fast here as Arrow's regex or numpy byte scans were, and exact by definition
    tokens = np.array([np.nan if t is None else len(t.split()) for t in texts.to_pylist()], dtype=np.float64)
    return chars, tokens


def response_lengths(table: pa.Table, rows: np.ndarray) -> tuple[dict[str, np.ndarray] | None, np.ndarray | None,
                                                                 dict[str, Any]]:
    """Lengths at `rows` where chosen and rejected both exist (+ mask), or why not (`cause`, length_reason's facts)."""
    if missing := [c for c in ("chosen", "rejected") if c not in table.column_names]:
        return None, None, {"cause": "no_column", "columns": missing}
    out: dict[str, np.ndarray] = {}
    for side in ("chosen", "rejected"):
        texts = response_texts(table.column(side))
        if texts is None:
            return None, None, {"cause": "not_text", "column": side, "type": str(table.column(side).type)}
        out[f"{side}_chars"], out[f"{side}_tokens"] = text_lengths(texts.take(pa.array(rows)))
    present = np.isfinite(out["chosen_chars"]) & np.isfinite(out["rejected_chars"])
    if present.sum() < 2:
        return None, None, {"cause": "few_rows"}
    return {k: v[present] for k, v in out.items()}, present, {}


def compute(data: ScoreData, resamples: int, seed: int) -> dict[str, Any]:
    """Every statistic of metrics.json for `data` (JSON-ready, deterministic for a given seed)."""
    margin = data.margin
    scorer = data.scorer or {}
    metrics: dict[str, Any] = {
        "metrics_version": METRICS_VERSION,
        "dataset": {"source": data.source, "split": data.split, "rows": data.n_rows, "scores_sha256": data.digest},
        "n": data.n, "n_excluded": data.n_rows - data.n, "excluded_reasons": dict(data.excluded_reasons),
        "scorer": data.scorer, "scores_from_stand_in": bool(scorer["stand_in"]) if "stand_in" in scorer else None,
        "bootstrap": {"resamples": resamples, "seed": seed, "level": stats.CI_LEVEL, "method": "percentile",
                      "paired": True, "few_rows": data.n < stats.BOOTSTRAP_FEW_ROWS,
                      "about": "rows are resampled with replacement; the same rows for all three series"},
        "conventions": {"margin": "score_chosen - score_rejected", "std": "sample standard deviation (ddof = 1)",
                        "quantiles": "linear interpolation (numpy default)",
                        "skewness": "Fisher-Pearson g1 (biased moments)",
                        "kurtosis": "excess kurtosis g2 (normal = 0)"},
    }
    metrics.update(stats.summarize_scores(data.score_chosen, data.score_rejected, resamples, seed))
    metrics["margin_sign"] = stats.margin_sign(margin)
    metrics["ties"] = metrics["margin_sign"]["counts"]["zero"]
    if same := int(same_responses(data.table)[data.row_index].sum()):  # (none in a dataset built here: no key)
        metrics["same_responses"] = same  # pairs whose chosen and rejected response are one text
    metrics.update(tests=stats.paired_tests(margin), effect_size=stats.effect_sizes(margin),
                   correlation=stats.correlations(data.score_chosen, data.score_rejected))
    if data.lengths is None:
        metrics["length"] = {"available": False, "reason": prose("report", "length_reason", data.length_reason),
                             **data.length_reason}
    else:
        metrics["length"] = {
            "available": True, "n": int(data.length_rows.sum()),
            "response": "the last assistant message of chosen / rejected (or the text itself)",
            "tokens": "whitespace-separated tokens, as str.split() counts them",
            **stats.length_statistics(data.lengths, margin[data.length_rows])}
        if (left := data.row_index[~data.length_rows]).size:  # no response to measure on one side: the first named
            side = next(c for c in ("chosen", "rejected") if not response_texts(data.table.column(c))[left[0]].is_valid)
            metrics["length"]["left_out"] = {"rows": int(left.size), "first_row": int(left[0]), "column": side}
    rule = data.selection if data.selection not in (None, "best_worst") else None
    signs = stats.pairrm_invariants(data.score_chosen, data.score_rejected)
    metrics["scale"] = stats.detect_scale(data.score_chosen, data.score_rejected, read_as_pairrm(
        data.scorer, data.told_scorer, bool(signs["sign_order_fails"])), rule)
    # every candidate's score: a run's (a recipe's, as seed_view names it), else the `scores` of repro score's rows
    # where they gave the pair's (the input's kept as input_score_chosen; a pair kept as given is another scorer's)
    columns = data.table.column_names
    own = CANDIDATE_SCORES in columns or not {*RESCORED_COLUMNS, "input_score_chosen"} <= set(columns)
    ragged = candidate_score_lists(data.table, CANDIDATE_SCORES if own else "scores", data.row_index)
    metrics["invariants"] = {"expected_to_hold": metrics["scale"]["kind"] == "logit" and data.pairwise,
                             **({"selection": rule} if rule else {}),
                             **signs,
                             "candidate_scores": None if ragged is None or not ragged[1].any() else  # none given
                             stats.candidate_score_invariants(
                                 *ragged, data.score_chosen, data.score_rejected)}
    if (agreement := candidate_agreement(data)) is not None:  # several scorers; a one-scorer dataset has none
        metrics["agreement"] = agreement
    return stats.clean(metrics)


def candidate_score_lists(table: pa.Table, column: str, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """(every row's scores one after the other, candidates per row) of a list-of-numbers column at `rows`, else None."""
    if column not in table.column_names:
        return None
    values = table.column(column).combine_chunks().take(pa.array(rows))
    if not (pa.types.is_list(values.type) or pa.types.is_large_list(values.type)) or not (
            pa.types.is_integer(values.type.value_type) or pa.types.is_floating(values.type.value_type)):
        return None
    # flatten() skips null lists; null scores inside a list become NaN (excluded and counted downstream)
    return (pc.cast(values.flatten(), pa.float64()).to_numpy(zero_copy_only=False),
            pc.fill_null(pc.list_value_length(values), 0).to_numpy(zero_copy_only=False))


def primary_scorer_name(scorer: dict[str, Any] | None) -> str:
    """The primary scorer's name: the manifest scorer's `name` or `model`, else "primary"."""
    scorer = scorer or {}
    return public_name(str(scorer.get("name") or scorer.get("model") or "primary"))  # published: no machine path


def scorer_columns(column_names: list[str], primary: str) -> dict[str, str]:
    """{scorer name: column}: `candidate_scores` is the primary scorer's, `candidate_scores_<name>` another's."""
    prefix = CANDIDATE_SCORES + "_"
    others = {c[len(prefix):]: c for c in column_names if c.startswith(prefix) and len(c) > len(prefix)}
    if primary in others:  # a further scorer named like the primary's model: keep the names apart
        primary = f"{primary} (primary)"
    return {**({primary: CANDIDATE_SCORES} if CANDIDATE_SCORES in column_names else {}), **others}


def candidate_agreement(data: ScoreData) -> dict[str, Any] | None:
    """The `agreement` block of metrics.json when the dataset holds several scorers' candidate scores, else None."""
    columns = scorer_columns(data.table.column_names, primary_scorer_name(data.scorer))
    lists = {name: ragged for name, column in columns.items()
             if (ragged := candidate_score_lists(data.table, column, data.row_index)) is not None}
    if len(lists) < 2:
        return None
    primary = next((name for name in lists if columns[name] == CANDIDATE_SCORES), None)
    return {**agreement.agreement(lists, primary, data.lowest_tie), "columns": {name: columns[name] for name in lists}}


def agreement_table(agreement: dict[str, Any]) -> pd.DataFrame:
    """One row per pair of scorers: rows compared, same chosen/rejected, Kendall tau, margin correlations."""
    return pd.DataFrame([{
        "scorer_a": pair["scorers"][0], "scorer_b": pair["scorers"][1], "rows": pair["rows"],
        "rows_excluded": pair["rows_excluded"],
        "same_chosen": pair["same_chosen"]["count"], "same_chosen_fraction": pair["same_chosen"]["fraction"],
        "same_rejected": pair["same_rejected"]["count"], "same_rejected_fraction": pair["same_rejected"]["fraction"],
        "same_pair_fraction": pair["same_pair"]["fraction"],
        **{f"kendall_tau_{k}": pair["kendall_tau"][k] for k in ("mean", "median", "rows", "undefined")},
        **{f"margin_{k}": (pair["margin_correlation"][k] or {}).get("statistic") for k in ("pearson", "spearman")},
    } for pair in agreement["pairs"]])


def show_agreement(result: AnalysisResult) -> None:
    """Display how far the scorers agree (the table), or say that the dataset holds one scorer's scores."""
    if result.agreement is None:
        ipython.display(ipython.Markdown(
            "One scorer's scores only (no `candidate_scores_<name>` column): no agreement to report."))
        return
    block, table = result.metrics["agreement"], result.agreement
    # a column per pair of scorers, a row per measure: 15 columns were twice as wide as JupyterLab's panel
    shown = table.drop(columns=["scorer_a", "scorer_b"]).astype(object).set_axis(  # (counts stay integers)
        table["scorer_a"] + " vs " + table["scorer_b"]).T
    ipython.display(ipython.Markdown(f"Scorers: {', '.join(map(code_span, block['scorers']))}. "
                                     f"{one_line(block['decided_by'])}."), readable(shown.rename_axis("measure")))


def summary_table(metrics: dict[str, Any]) -> pd.DataFrame:
    """The summary statistics of the three series as a table (rows: statistics; CI bounds as _low/_high)."""
    columns = {name: {} for name in stats.SERIES}
    for name, column in columns.items():
        for key, value in metrics[name].items():
            if isinstance(value, list):  # an interval [low, high]: two rows
                column[f"{key}_low"], column[f"{key}_high"] = value
            else:
                column[key] = value
    return pd.DataFrame(columns).rename_axis("statistic")


def extreme_margins(data: ScoreData, k: int = EXTREME_ROWS) -> pd.DataFrame:
    """The k largest and k smallest margins, ties in row order, with their prompts (under 2k rows: each row once)."""
    margin = data.margin
    smallest = min(k, margin.size // 2)
    largest = np.argsort(-margin, kind="stable")[:min(k, margin.size - smallest)]
    frames = []
    for which, order in (("largest", largest),
                         ("smallest", np.setdiff1d(np.argsort(margin, kind="stable"), largest,
                                                   assume_unique=True)[:smallest])):
        frame = row_preview(data.table, data.row_index[order])
        frame.insert(0, "which", which)
        frame.insert(1, "rank", np.arange(1, order.size + 1))
        frames.append(frame.assign(score_chosen=data.score_chosen[order], score_rejected=data.score_rejected[order],
                                   margin=margin[order]))
    return pd.concat(frames, ignore_index=True)


def row_preview(table: pa.Table, rows: np.ndarray) -> pd.DataFrame:
    """Each row's position, prompt_id and the start of its prompt (shortened to one line); None where absent."""
    frame = pd.DataFrame({"row": rows.astype(np.int64)})
    for column in ("prompt_id", "prompt"):
        values = values_at(table, column, rows) or [None] * rows.size
        frame[column] = [shorten(v, 120) if column == "prompt" and v is not None else v for v in values]
    return frame


def shorten(text: Any, width: int = SHORT) -> str:
    """One line of at most `width` characters: whitespace collapsed, the cut marked with an ellipsis."""
    if text is None:
        return ""
    line = " ".join(str(text).split())
    return line if len(line) <= width else line[:width - 1].rstrip() + "…"


def values_at(table: pa.Table, column: str, rows: np.ndarray | Sequence[int]) -> list | None:
    """The values of `column` at the positions `rows`, or None when the table has no such column."""
    if column not in table.column_names:
        return None
    return table.column(column).take(pa.array(rows, type=pa.int64())).to_pylist()


def headline(metrics: dict[str, Any]) -> str:
    """A short Markdown account of the main findings, with the numbers from `metrics`."""
    return prose("report", "headline", metrics)


def analyze(p: AnalyzeParams) -> AnalysisResult:
    """The whole stage: load, validate, compute, draw, write metrics.json / figures / tables, record outputs."""
    run = RunDir(p.run_root)
    refuse_unbuilt(run, p.dataset)  # the input first: a half-built run's dataset, a missing one or one without
    given = read(p)  # scores are errors before anything is written
    claim(run, p.dataset, "dataset")  # ... and so is a run directory that describes another dataset
    run.root.mkdir(parents=True, exist_ok=True)
    manifest = Manifest(run)  # an earlier analysis's outputs must not outlive it
    manifest.remove_outputs(run.metrics, *plots.figure_files(run.figures, (*plots.FIGURE_NAMES, AGREEMENT)),
                            *(run.tables / name for name in (SUMMARY_TABLE, EXTREMES_TABLE, f"{AGREEMENT}.csv")))
    with manifest.notebook(p.model_dump(), "02_analyze"), manifest.stage("analyze", resumable=False) as info:
        info.update(dataset=given[0], split=given[1], rows=given[2].num_rows)
        data = load(p, given)  # its scores rejected (too few rows, NaN): a failed analysis, in the record
        metrics = compute(data, p.bootstrap_resamples, p.bootstrap_seed)
        lengths = data.lengths
        figures = plots.draw_all(data.score_chosen, data.score_rejected, run.figures,
                                 None if lengths is None else lengths["chosen_tokens"] - lengths["rejected_tokens"],
                                 length_margin=None if lengths is None else data.margin[data.length_rows])
        summary, extremes = summary_table(metrics), extreme_margins(data)
        tables = {"summary_statistics": (run.tables / SUMMARY_TABLE, summary.reset_index()),
                  "extreme_margins": (run.tables / EXTREMES_TABLE, extremes)}
        agreement = None
        if "agreement" in metrics:  # several scorers: their table and figure
            agreement = agreement_table(metrics["agreement"])
            tables[AGREEMENT] = (run.tables / f"{AGREEMENT}.csv", agreement)
            figure = plots.scorer_agreement(metrics["agreement"])
            figures[AGREEMENT] = plots.save_titled(figure, run.figures / AGREEMENT)
        outputs = write_outputs(manifest, run.metrics, metrics, figures, tables)
        info.update(n=metrics["n"], n_excluded=metrics["n_excluded"], scale=metrics["scale"]["kind"])
    return AnalysisResult(metrics=metrics, outputs=outputs, summary=summary, extremes=extremes, figures=figures,
                          agreement=agreement)


def write_outputs(manifest: Manifest, path: Path, result: dict[str, Any], figures: dict[str, dict[str, Any]],
                  tables: dict[str, tuple[Path, pd.DataFrame]]) -> list[Path]:
    """Write the tables (CSV), then `result` (JSON, listing figures and tables) at `path`; record, return them all."""
    run = manifest.run
    run.tables.mkdir(parents=True, exist_ok=True)
    for table, frame in tables.values():
        frame.to_csv(table, index=False)
    result["figures"] = {name: {"png": run.relative(f["png"]), "svg": run.relative(f["svg"]), "title": f["title"]}
                         for name, f in figures.items()}
    result["tables"] = {name: run.relative(table) for name, (table, _) in tables.items()}
    outputs = [f[ext] for f in figures.values() for ext in ("png", "svg")] + [t for t, _ in tables.values()] + [path]
    atomic_write_json(path, result, indent=2, allow_nan=False)
    manifest.add_outputs(*outputs)
    return outputs


def readable(frame: pd.DataFrame) -> Any:
    """A table as a notebook shows it: prompt ids cut short, texts left-aligned and uncut, numbers to 4 decimals."""
    ids = [c for c in frame.columns if c.endswith("prompt_id")]
    shown = frame.assign(**{c: frame[c].map(lambda v: v[:ID_SHOWN] + "…" if isinstance(v, str) and len(v) > ID_SHOWN
                                             else v) for c in ids})
    texts = [c for c in shown.columns if not pd.api.types.is_numeric_dtype(shown[c]) and c not in ids]
    wide = [c for c in texts if shown[c].astype(str).str.len().max() > 24]  # kept from being squeezed
    styled = shown.style.format(precision=4, na_rep="", escape="html")  # texts as written (`<textarea>`, not a box)
    styled = styled.format_index(escape="html", axis=0).format_index(escape="html", axis=1)  # column names too
    styled = styled.set_properties(subset=texts, **{"text-align": "left"}) \
        .set_properties(subset=wide, **{"min-width": "12em", "overflow-wrap": "anywhere"}).set_table_styles(
            {c: [{"selector": "th", "props": "text-align: left"}] for c in texts}, overwrite=False)  # headers too
    return styled.hide(axis="index") if isinstance(frame.index, pd.RangeIndex) else styled  # positions say nothing


def show_figures(result: Any) -> None:
    """Display the saved PNG figures of a result (an analysis's, a comparison's, a family's), each under its title."""
    for name, fig in result.figures.items():
        ipython.display(ipython.Markdown(f"**{fig['title']}** — `{name}`"), ipython.Image(filename=str(fig["png"])))
