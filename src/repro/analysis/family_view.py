"""notebooks/05_family: members side by side (table, margins, verdicts) in `family.json`, `figures/family_margins.*`."""

from __future__ import annotations

import contextlib
import html
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd
import seaborn as sns
from IPython import display as ipython  # (its display: what a test or a notebook replaces)
from matplotlib.figure import Figure

from ..dataset_io import SCORE_COLUMNS
from ..errors import DataError, counted, did_you_mean
from ..family import short_of
from ..jobs import atomic_write_json
from ..manifest import LAST_RUN, Manifest, now
from ..parameters import FamilyViewParams, code_span, one_line, plain_text
from ..exporters import seed_view
from ..paths import FAMILY_JSON, MANIFEST_JSON, SPLIT, RunDir, project_root
from ..records import COMPARE, FAMILY_VIEW, METRICS, holds, read_record, redo
from ..sources import load_source
from ..subject import hold
from . import plots, prose
from .report import readable, show_figures, validate_scores  # noqa: F401 (show_figures: 05_family's)
from .stats import BOOTSTRAP_FEW_ROWS, bootstrap_intervals, clean

MARGIN_FIGURE = "family_margins"
NOT_STARTED = "not started"  # a member's status while the family's plan holds it and its run has not begun
MISSING = "missing (its folder is gone)"  # a member's status once its folder, complete in the last view, is deleted
# what a member's metrics.json, compare.json not in the shape its notebook writes is, and what to do (without one the
# view leaves that member's agreement, its verdict out)
MEMBER_METRICS_FIX = redo("02_analyze", "that member", " (05_family then leaves its scorers' agreement out)")
MEMBER_COMPARE_FIX = redo("04_compare", "that member", " (05_family then leaves its verdict out)")


@dataclass
class FamilyView:
    """The family's members as a table, their margins, and what `family.json` holds."""

    summary: dict[str, Any]
    table: pd.DataFrame
    margins: dict[str, np.ndarray] = field(default_factory=dict)
    figures: dict[str, dict[str, Any]] = field(default_factory=dict)  # as report.show_figures shows them


def find_members(root: Path) -> list[tuple[RunDir, dict[str, Any]]]:
    """Member runs under `root` (manifest with `family`), in order; those `repro run` last planned, if recorded."""
    if not root.is_dir():
        siblings = {q.name: str(q) for q in root.parent.iterdir() if q.is_dir()} if root.parent.is_dir() else {}
        raise DataError(f"{root} {'is a file' if root.exists() else 'does not exist'}."
                        f"{did_you_mean(root.name, siblings, siblings)} Give run_dir = the family's folder (the --out "
                        f"of its `repro run` with a grid, e.g. of demo_family), or run the family first."
                        f"{families_beside(root)}")
    if member := (record := Manifest(root).read()).get("family"):
        raise DataError(f"{root} is member {member.get('member')} of family {member.get('name')}: give run_dir = "
                        f"{root.parent}, the family's folder.")
    planned = record.get("members")  # a grid changed since: its old members' folders stay
    if isinstance(planned, list):  # a plan of names only (before each member's grid values were recorded)
        planned = dict.fromkeys(planned, {})
    found = [(RunDir(manifest.parent), data) for manifest in sorted(root.glob(f"*/{MANIFEST_JSON}"))
             if (data := Manifest(manifest.parent).read()).get("family")  # damaged: stops, not "not started"
             and (planned is None or data["family"].get("member") in planned)]
    names = {data["family"]["name"] for _, data in found}
    if len(names) > 1:
        raise DataError(f"{root} holds members of several families {sorted(names)}: give each family its own folder.")
    started = {data["family"]["member"] for _, data in found}  # a member of the plan not started yet: shown so
    # ... and one the last view found complete, whose folder was deleted since, said gone
    gone = {name for name in complete_before(root) if not (root / name).exists()}
    found += [(RunDir(root / name), {"status": MISSING if name in gone else NOT_STARTED,
                                     "family": {"name": record.get("family_name") or root.name,
                                                "member": name, "index": index, "grid": grid}})
              for index, (name, grid) in enumerate((planned or {}).items()) if name not in started]
    if not found:
        raise DataError(f"{root} holds no member of a family (no */manifest.json recording `family`). Run the family "
                        f"first (e.g. repro run demo_family), or give run_dir = the family's folder."
                        f"{families_beside(root)}")
    return sorted(found, key=lambda item: item[1]["family"].get("index", 0))


def complete_before(root: Path) -> set[str]:
    """The members the family's last view (its family.json) found complete, or missing; none if it has none."""
    with contextlib.suppress(OSError, ValueError):  # none yet, or not the view's (records.FamilyView)
        if holds(FAMILY_VIEW, view := json.loads((root / FAMILY_JSON).read_text())):
            return {m["member"] for m in view["members"] if m["status"] in ("complete", MISSING)}
    return set()


def families_beside(root: Path) -> str:
    """A sentence naming the folders beside `root` that hold a family's members, as run_dir takes them; "" if none."""
    found = set()
    for manifest in root.parent.glob(f"*/*/{MANIFEST_JSON}"):
        with contextlib.suppress(OSError, DataError):  # a damaged record is no family's (as family.holds_member)
            if Manifest(manifest.parent).read().get("family"):
                found.add(manifest.parent.parent)
    home = project_root()
    named = [repr(str(p.relative_to(home) if p.is_relative_to(home) else p)) for p in sorted(found)]
    if len(named) == 1:
        return f" A family beside it: {named[0]} (give it as run_dir)."
    return f" Families beside it: {', '.join(named)} (give one of them as run_dir)." if named else ""


def differing_parameters(manifests: list[dict[str, Any]]) -> list[str]:
    """The parameters whose values are not the same in every member (where a member lives excepted)."""
    keys = sorted(set().union(*(m.get("parameters", {}) for m in manifests)) - {"run_dir", "run_name"})
    return [k for k in keys
            if len({json.dumps(m.get("parameters", {}).get(k), sort_keys=True, default=str) for m in manifests}) > 1]


def _row_counts(info: dict[str, Any]) -> dict[str, int | None]:
    """A stage record's rows (score stage's, manifest's `generation`) computed, from the row cache (resumed chunks'
    too), or from its own work/ (`cache: false`: no cache record, own counts)."""
    cache = info.get("cache") or {}
    from_cache = cache.get("rows_from_cache", 0) + cache.get("resumed_from_cache", 0) if cache else None
    resumed = info.get("prompts_resumed")
    if resumed is not None:  # (generation's record: rows the cache gave its interrupted call are from the cache)
        resumed -= cache.get("resumed_from_cache", 0)
    elif "prompts_computed" in info:
        resumed = info["prompts"] - info["prompts_computed"] - (from_cache or 0)
    computed = cache.get("rows_computed")
    if computed is None and "prompts" in info:  # generation: the rows it made, less those resumed
        computed = info.get("prompts_computed", info.get("prompts_generated", 0) - (resumed or 0))
    return {"computed": computed, "from_cache": from_cache, "from_work": resumed}


def member_margins(run: RunDir, data: dict[str, Any]) -> np.ndarray:
    """A complete member's margins, as 02_analyze reads them (split, seed columns); none if incomplete or unscored."""
    split = (data.get("dataset") or {}).get("split") or SPLIT
    if data.get("status") != "complete" or not run.shards(split):
        return np.array([], dtype=np.float64)
    table = seed_view(load_source(str(run.dataset), split, "dataset")).with_format("arrow")[:]
    if not set(SCORE_COLUMNS) <= set(table.column_names):
        return np.array([], dtype=np.float64)
    chosen, rejected, _, _ = validate_scores(table, f"member {run.root.name}", exclude_nonfinite=True, min_rows=1)
    return chosen - rejected


def _agreement(metrics: dict[str, Any]) -> dict[str, float | None]:
    """Each other scorer's agreement with the primary: the fraction of rows with the same chosen candidate."""
    block = metrics.get("agreement") or {}
    primary = block.get("primary")
    return {(b if a == primary else a): (pair.get("same_chosen") or {}).get("fraction")
            for pair in block.get("pairs", []) if "scorers" in pair  # (a pair naming none: left out)
            for a, b in [pair["scorers"]] if primary in (a, b)}


def member_status(run: RunDir, data: dict[str, Any]) -> str | None:
    """A member's status; a `running` one whose process was killed said so, as for a run alone (`Manifest.last_run`)."""
    return (data.get("status") == "running" and Manifest(run).last_run()) or data.get("status")


def member_summary(run: RunDir, data: dict[str, Any], resamples: int, seed: int) -> tuple[dict[str, Any], np.ndarray]:
    """One member's row of the table, and its margins (empty when it has no dataset yet)."""
    family = data["family"]
    margin = member_margins(run, data)
    metrics = read_record(run.metrics, METRICS, MEMBER_METRICS_FIX, {})
    verdict = read_record(run.compare, COMPARE, MEMBER_COMPARE_FIX, {}).get("verdict")
    ci = bootstrap_intervals({"margin": margin}, resamples, seed)["margin"]["mean_ci95"] if margin.size else None
    counts, scorer = data.get("counts", {}), data.get("scorer") or {}
    return clean({
        "member": family["member"], "status": member_status(run, data),
        "grid": family.get("grid", {}),
        "scorer": {"model": scorer.get("model"), "stand_in": bool(scorer.get("stand_in"))},
        "rows": int(margin.size) if data.get("status") == "complete" else None,
        "sliced": counts.get("sliced"), "scored": counts.get("scored"), "generated": counts.get("generated"),
        # the rows the run's rules dropped on the way, by rule (a sweep over them is read here)
        "dropped": {k.removeprefix("dropped_"): n for k, n in counts.items() if k.startswith("dropped_") and n},
        "margin_mean": float(margin.mean()) if margin.size else None, "margin_mean_ci95": ci,
        "few_rows": bool(margin.size < BOOTSTRAP_FEW_ROWS) if ci else None,  # its interval too narrow (1 row: none)
        "ties": int((margin == 0).sum()) if margin.size else None,
        "scored_rows": _row_counts(data.get("stages", {}).get("score") or {}),
        "generated_rows": _row_counts(data.get("generation") or {}),
        "agreement_same_chosen": _agreement(metrics), "verdict": verdict,
    }), margin


def margins_figure(margins: dict[str, np.ndarray], members: Sequence[dict[str, Any]] = ()) -> Figure:
    """Members' margins as violins (quartiles, rows as dots) with `members`' mean, 95% interval; a stand-in starred."""
    long = pd.DataFrame([{"member": name, "margin": v} for name, m in margins.items() for v in m])
    drawn = sum(m.size > 0 for m in margins.values())  # "2 of 3" when a member has none (not complete, no scores)
    drawn_members = f"{drawn} of " * (drawn != len(margins)) + counted(len(margins), "member")
    # each member's rows, not their sum: members of one family often score the same prompts
    sizes = sorted({m.size for m in margins.values() if m.size}) or [0]
    rows = (f"{sizes[0]:,}" + f" to {sizes[-1]:,}" * (len(sizes) > 1) + f" row{'s' * (sizes[-1] != 1)}"
            + " each" * (drawn > 1))
    # one member a line, its name across on the left (at 30 degrees long names took half the figure and pushed
    # the axis's label out of it): ~0.085 in wide a character, ~0.5 in high a member
    longest = max(map(len, margins), default=0)
    size = (plots.FIGSIZE[0] + 0.085 * longest, max(plots.FIGSIZE[1], 0.5 * len(margins) + 2))
    with plots.axes(figsize=size) as (fig, ax):
        if len(long):
            sns.violinplot(data=long, x="margin", y="member", ax=ax, color="#c6dbef", inner="quart", cut=0)
            state = np.random.get_state()  # seaborn jitters the dots with numpy's global random state: a fixed one
            np.random.seed(0)              # for a byte-stable figure, and the caller's given back
            try:
                sns.stripplot(data=long, x="margin", y="member", ax=ax, color="#08519c", size=3, alpha=0.6)
            finally:
                np.random.set_state(state)
            drawn_names = list(dict.fromkeys(long["member"]))  # the violins' order
            shown = [m for m in members if m["member"] in drawn_names and m["margin_mean_ci95"]]
            # a member of few rows: a hollow mean, its interval said too narrow (as 02_analyze and the card say)
            labels = {False: "mean, 95% CI", True: f"mean, 95% CI: too narrow (< {BOOTSTRAP_FEW_ROWS} rows)"}
            for m in shown:
                mean, (low, high), few = m["margin_mean"], m["margin_mean_ci95"], bool(m.get("few_rows"))
                ax.errorbar(mean, drawn_names.index(m["member"]), xerr=[[mean - low], [high - mean]], fmt="D",
                            color="#d62728", mfc="white" if few else "#d62728", ms=5, capsize=4, zorder=5,
                            label=labels.pop(few, None))
            if shown:
                ax.legend(loc="best", fontsize="small")
        stand_ins = {m["member"] for m in members if m["scorer"]["stand_in"]}
        names = [t.get_text() for t in ax.get_yticklabels()]
        font = ax.get_yticklabels()[0].get_fontproperties() if names else None
        fonts = [plots.fonts_for(name, font) for name in names]  # None: no installed font has all its letters
        # such a name is drawn as its row of the table (#2), said under the axes: never as boxes
        labels = [(plots.literal(name) if fonts[k] else f"#{list(margins).index(name)}") + "*" * (name in stand_ins)
                  for k, name in enumerate(names)]
        ax.axvline(0.0, color="grey", lw=0.8, ls="--")
        ax.set(xlabel="margin = score_chosen − score_rejected"
               + ("\n* a stand-in scorer: its scores are noise" if stand_ins else "")
               + ("\n#k: row k of the table (names no installed font can draw)" if None in fonts else ""),
               ylabel="member", title=f"Margins of {drawn_members} (n = {rows})")
        if labels != names:
            ax.set_yticks(ax.get_yticks(), labels)
        for label, families in zip(ax.get_yticklabels(), fonts):
            if families and len(families) > 1:  # letters its font lacks: from installed fonts that have them
                label.set_fontfamily(families)
    return fig


def table_of(members: list[dict[str, Any]]) -> pd.DataFrame:
    """The members as the notebook shows them: grid values, counts, mean margin with its interval, tied pairs, cache."""
    rows = []
    for m in members:
        ci = m["margin_mean_ci95"] or [None, None]
        own = {"scorer": (m["scorer"]["model"] or "") + (" (STAND-IN: noise)" if m["scorer"]["stand_in"] else ""),
               "status": m["status"], "rows in": m.get("sliced"),
               "dropped": ", ".join(f"{n} {why.replace('_', ' ')}" for why, n in m.get("dropped", {}).items()),
               "rows": m["rows"],
               "margin mean": None if m["margin_mean"] is None else float(f"{m['margin_mean']:.4g}"),  # as its CI
               "95% CI": f"[{ci[0]:#.4g}, {ci[1]:#.4g}]" if ci[0] is not None else "",  # 0.1200, not 0.12
               "tied pairs": m["ties"], "scored here": m["scored_rows"]["computed"],
               "scored from cache": m["scored_rows"]["from_cache"],
               "scored before (work/)": m["scored_rows"]["from_work"],
               **{f"same chosen as {k}": v for k, v in m["agreement_same_chosen"].items()},
               "verdict": headline(m["verdict"])}
        # a grid key named as one of the table's own columns (a key of one's own, `rows`) is said to be the grid's
        rows.append({"member": m["member"], **{f"{k} (grid)" if k in own or k == "member" else k:
                                               v["name"] if isinstance(v, dict) and "name" in v  # a bundle's
                                               else json.dumps(v) if isinstance(v, (dict, list)) else v
                                               for k, v in m["grid"].items()}, **own})
    # counts and a grid's whole numbers stay whole, a member's unknown <NA> (NaN made such a column float)
    frame, counts = pd.DataFrame(rows), {"rows in", "rows", "tied pairs", "scored here", "scored from cache",
                                         "scored before (work/)"}
    return frame.astype({c: "Int64" for c in frame
                         if c in counts or {type(row.get(c)) for row in rows} - {type(None)} == {int}})


def family_view(params: FamilyViewParams) -> FamilyView:
    """Read every member of the family in `params.run_root`; write `family.json` and the margins figure there."""
    root = params.run_root
    found = find_members(root)  # (a folder that is no family's: refused first, nothing made)
    family = Manifest(root)  # the family folder's own record
    hold(family.run)  # (a family's `repro run` writing it: refused; its own view comes when its members are done)
    ran, unfinished = family.read(), {}  # (its status is its `repro run`'s: complete only once every member is)
    for run, data in found:
        if (status := member_status(run, data)) != "complete":
            unfinished.setdefault(status, []).append(data["family"]["member"])
    with family.notebook(params.model_dump(), "05_family"):  # (a member unreadable: the view failed, recorded)
        if unfinished:  # alone, its notebook runs; the family's record stays the family's (this one's kill or failure
            # is not the family's): its `repro run`'s stop as it left it, else failed, naming them (never complete)
            kept = {k: ran.get(k) for k in ("status", "driver", "started", "finished", "error")}
            if not (ran.get("driver") == "repro run" and ran.get("status") in LAST_RUN):
                kept.update(status="failed", error=short_of(unfinished), finished=ran.get("finished") or now())
            family.update(**kept)
        summaries = [member_summary(run, data, params.bootstrap_resamples, params.bootstrap_seed)
                     for run, data in found]
        members, margins = [row for row, _ in summaries], {row["member"]: margin for row, margin in summaries}
        figures = {MARGIN_FIGURE: plots.save_titled(margins_figure(margins, members),
                                                    family.run.figures / MARGIN_FIGURE)}
        summary = {
            "family": found[0][1]["family"]["name"], "members": members,
            "parameters_that_differ": differing_parameters([data for _, data in found if "parameters" in data]),
            "complete": sum(m["status"] == "complete" for m in members),
            "stand_in_members": [m["member"] for m in members if m["scorer"]["stand_in"]],
            **{f"rows_{what}": {k: sum(m[f"{what}_rows"][k] or 0 for m in members)
                                for k in ("computed", "from_cache", "from_work")} for what in ("scored", "generated")},
            "figures": {name: {k: str(paths[k].relative_to(root)) for k in ("png", "svg")}
                        for name, paths in figures.items()},
        }
        atomic_write_json(root / FAMILY_JSON, summary, indent=2, allow_nan=False)
        family.update(view=[m["member"] for m in members])  # (the plan may change since: `members` is the plan's)
        family.add_outputs(root / FAMILY_JSON, *(f[k] for f in figures.values() for k in ("png", "svg")))
    return FamilyView(summary=summary, table=table_of(members), margins=margins, figures=figures)


def show_members(view: FamilyView) -> None:
    """The members' table; under it, members with fewer rows than stats.BOOTSTRAP_FEW_ROWS: intervals too narrow."""
    # its cells whole (a DataFrame's are cut at 50 characters), its rows #k as the figure names a member it cannot draw
    ipython.display(readable(view.table.rename(index="#{}".format)))
    if few := [(m["member"], m["rows"]) for m in view.summary["members"] if m["few_rows"]]:
        ipython.display(ipython.Markdown(prose("report", "family_few_rows", few, BOOTSTRAP_FEW_ROWS)))


def origins(view: FamilyView) -> Any:
    """The family's rows scored (and generated) by where they came from, captioned with the parameters that differ."""
    counts = {f"rows {what}": view.summary[f"rows_{what}"] for what in ("scored", "generated")
              if any(m[f"{what}_rows"]["computed"] is not None for m in view.summary["members"])}
    table = pd.DataFrame.from_dict(counts, orient="index", columns=["computed", "from_cache", "from_work"]).rename(
        columns={"computed": "computed in the members' runs", "from_cache": "from the row cache",
                 "from_work": "from their own earlier runs (work/)"})
    differ = ", ".join(view.summary["parameters_that_differ"]) or "none"
    started = " that started" if any(m["status"] == NOT_STARTED for m in view.summary["members"]) else ""
    # (a Styler's caption is HTML, which pandas leaves as it is: its text escaped for HTML, not for Markdown)
    return table.style.set_caption(html.escape(f"Parameters that differ between the members{started}: {differ}"))


def headline(verdict: str | None) -> str:
    """A verdict's first paragraph (reproduced or not, within what, rows) as plain text (a table escapes its HTML)."""
    return plain_text((verdict or "").split("\n\n")[0])


def show_verdicts(view: FamilyView) -> None:
    """Members' verdicts vs their published counterparts (04_compare's `compare.json`): headlines, then each whole."""
    if not (compared := [m for m in view.summary["members"] if m["verdict"]]):
        return ipython.display(ipython.Markdown(prose("report", "no_family_verdict")))  # (not a table of bare headers)
    rows = pd.DataFrame([{"member": m["member"], "verdict": headline(m["verdict"])} for m in compared])
    # each as its compare.json holds it, where a copied member's may hold any text: its HTML and links shown as text
    whole = ["\n\n".join(one_line(p, markdown=True) for p in m["verdict"].split("\n\n")) for m in compared]
    ipython.display(readable(rows), ipython.Markdown("\n\n".join(f"#### {code_span(m['member'])}\n\n{verdict}"
                                                               for m, verdict in zip(compared, whole))))
