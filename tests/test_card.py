"""The dataset card (repro.card, notebooks/03_card.ipynb): YAML equal to push_to_hub's, a body quoting the run.

Every test builds its own small run directory (data written with write_split, a manifest, a metrics.json
with issue 4's keys computed by numpy/scipy, a PNG), so none depends on the other notebooks.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import re
import shlex
import math
import shutil
import subprocess
import traceback
from collections import Counter
from pathlib import Path

import datasets
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from huggingface_hub import DatasetCard
from conftest import html_elements, shown_text
from markdown_it import MarkdownIt
from scipy import stats

from repro import card as repro_card
from repro import compare
from repro import manifest as manifest_module
from repro.analysis.report import analyze
from repro.analysis.stats import detect_scale
from repro.card import facts as card_facts
from repro.card.facts import LENGTH_BIAS_ROWS, MANY_TIES, SEED_REPO, shaping_parameters
from repro.cli.run import configure
from repro.card.publish import facts_card_data, placeholders
from repro.construct import stages
from repro.construct.pairs import build_row
from repro.dataset_io import SEED_COLUMNS, SEED_FEATURES, write_split
from repro.errors import DataError, ParameterError, ReproError
from repro.exporters import FORMATS, conversational, export_rows
from repro.family import plan_family
from repro.formats import to_trl, to_trl_implicit
from repro.manifest import Manifest
from repro.parameters import (AnalyzeParams, CardParams, CompareParams, ConstructParams, GenerationParams, build,
                              load_params_file, resolve_parameters)
from repro.paths import STAND_IN_MARKER, RunDir
from repro.scorers.tiny import DEBERTA_CHAT_TEMPLATE

ROOT = Path(__file__).resolve().parents[1]
SEED_CARD = Path(__file__).parent / "seed_card.yaml"  # the seed card's front matter
GOLDEN = Path(__file__).parent / "golden" / "card_yaml_seed_schema.yaml"


@pytest.fixture(autouse=True)
def _offline(monkeypatch, tmp_path):
    """No test here may reach the hub; the datasets cache goes to the test's own folder."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "hf-cache"))


# ---------------------------------------------------------------------------------------------
# building a run directory by hand
# ---------------------------------------------------------------------------------------------
TOPICS = ["sorting a list in Python", "the boiling point of water", "why the sky is blue", "a haiku about rain",
          "the capital of Australia", "integrating x squared", "a polite refusal email", "binary search"]


def seed_rows(n: int) -> list[dict]:
    """n deterministic rows in the seed's schema: two candidates, so score_rejected = -score_chosen."""
    rng = np.random.default_rng(7)
    rows = []
    for i in range(n):
        prompt = f"Explain {TOPICS[i % len(TOPICS)]} (variant {i})."
        good = f"A careful answer about {TOPICS[i % len(TOPICS)]}. " * int(rng.integers(1, 6))
        bad = "Not sure. " * int(rng.integers(1, 4))
        s = float(abs(rng.normal(0.4, 0.3)))
        s = 0.0 if i % 11 == 5 else s  # a few ties, as real PairRM output has
        chosen = [{"content": prompt, "role": "user"}, {"content": good, "role": "assistant"}]
        rows.append({
            "prompt": prompt, "prompt_id": hashlib.sha256(prompt.encode()).hexdigest(), "messages": chosen,
            "score_chosen": s, "score_rejected": -s, "reference_response": f"Reference {i}.",
            "chosen": chosen, "rejected": [{"content": prompt, "role": "user"}, {"content": bad, "role": "assistant"}],
        })
    return rows


def analysis_metrics(ds: datasets.Dataset, figures: dict) -> dict:
    """metrics.json in the layout repro.analysis.report writes (issue 4's keys), computed independently with numpy/scipy."""
    chosen = np.asarray(ds["score_chosen"], dtype=float)
    rejected = np.asarray(ds["score_rejected"], dtype=float)
    margin = chosen - rejected
    rng = np.random.default_rng(0)
    rows = rng.integers(0, len(ds), size=(200, len(ds)))

    def block(x):
        return {"mean": float(x.mean()), "std": float(x.std(ddof=1)), "median": float(np.median(x)),
                "q25": float(np.quantile(x, 0.25)), "q75": float(np.quantile(x, 0.75)), "min": float(x.min()),
                "max": float(x.max()), "skewness": float(stats.skew(x)), "kurtosis": float(stats.kurtosis(x)),
                "mean_ci95": [float(v) for v in np.quantile(x[rows].mean(1), [0.025, 0.975])],
                "median_ci95": [float(v) for v in np.quantile(np.median(x[rows], 1), [0.025, 0.975])]}

    def lengths(column, unit):
        texts = [c[-1]["content"] for c in ds[column]]
        return np.array([len(t) if unit == "chars" else len(t.split()) for t in texts], dtype=float)

    w = stats.wilcoxon(margin[margin != 0])
    t = stats.ttest_1samp(margin, 0.0)
    pos, zero, neg = int((margin > 0).sum()), int((margin == 0).sum()), int((margin < 0).sum())
    length = {"available": True, "n": len(ds), "response": "the last assistant message of chosen / rejected"}
    for side in ("chosen", "rejected"):
        length[side] = {u: {"mean": float(lengths(side, u).mean()), "median": float(np.median(lengths(side, u)))}
                        for u in ("chars", "tokens")}
    length["margin_vs_length_difference"] = {
        u: dict(zip(("spearman", "pvalue"), map(float, stats.spearmanr(margin, lengths("chosen", u) - lengths("rejected", u)))))
        for u in ("chars", "tokens")}
    length["chosen_longer_test"] = {}
    for u in ("chars", "tokens"):
        d = lengths("chosen", u) - lengths("rejected", u)
        longer, shorter = int((d > 0).sum()), int((d < 0).sum())
        length["chosen_longer_test"][u] = {"positive": longer, "negative": shorter, "pvalue": float(
            stats.binomtest(longer, longer + shorter).pvalue), "zeros_discarded": len(d) - longer - shorter}
    return {
        "metrics_version": 1, "dataset": {"source": "test", "split": "train_prefs", "rows": len(ds)},
        "n": len(ds), "n_excluded": 0, "excluded_reasons": {},
        "bootstrap": {"resamples": 200, "seed": 0, "level": 0.95, "method": "percentile",
                      "about": "rows are resampled with replacement; the same rows for all three series"},
        "score_chosen": block(chosen), "score_rejected": block(rejected), "margin": block(margin),
        "margin_sign": {"counts": {"positive": pos, "zero": zero, "negative": neg},
                        "fractions": {"positive": pos / len(ds), "zero": zero / len(ds), "negative": neg / len(ds)}},
        "ties": zero,
        "tests": {"wilcoxon": {"zero_method": "wilcox", "zeros_discarded": zero, "statistic": float(w.statistic),
                               "pvalue": float(w.pvalue),
                               "zeros": "rows with margin == 0 (ties) are dropped before ranking (Wilcoxon's method)"},
                  "paired_t": {"statistic": float(t.statistic), "pvalue": float(t.pvalue), "df": len(ds) - 1},
                  "sign_test": {"positive": pos, "negative": neg, "pvalue": float(stats.binomtest(pos, pos + neg).pvalue)}},
        "effect_size": {"cohens_dz": float(margin.mean() / margin.std(ddof=1)), "rank_biserial": None},
        "correlation": {"pearson": {"statistic": float(stats.pearsonr(chosen, rejected)[0]), "pvalue": None},
                        "spearman": {"statistic": float(stats.spearmanr(chosen, rejected)[0]), "pvalue": None}},
        "length": length,
        "invariants": {"expected_to_hold": True, "sign_order_fails": int((~((chosen >= 0) & (rejected <= 0))).sum()),
                       "antisymmetry_holds": int(np.isclose(chosen, -rejected).sum())},
        "scale": detect_scale(chosen, rejected),  # the analysis' own reading: its sentence is a template's
        "figures": figures,
    }


def write_png(path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(2, 1.5))
    ax.plot([0, 1], [0, 1])
    fig.savefig(path)
    plt.close(fig)


def make_run(root: Path, rows: list[dict] | None = None, features=SEED_FEATURES, *, metrics: bool = True,
             stand_in: bool = True, manifest: bool = True) -> dict:
    """A run directory by hand: dataset (write_split), manifest, metrics.json, one PNG figure."""
    run = RunDir(root)
    rows = rows if rows is not None else seed_rows(24)
    ds = datasets.Dataset.from_list(rows, features=features)
    split = write_split(ds, run.dataset)
    if manifest:
        m = Manifest(run)
        params = {"run_dir": str(root), "source": "demo", "source_split": "train_prefs", "part_start": 0,
                  "part_stop": None, "drop_rows": 2, "mini_index": 0, "mini_count": 1,  # drop_from: default
                  "limit": None, "candidate_columns": ["resp0", "resp1"], "include_reference": False,
                  "include_original_pair": False, "too_few_candidates": "drop", "messages": "chosen",
                  "scorer_model": "builtin:tiny-pairrm" if stand_in else "llm-blender/PairRM",
                  "scorer_backend": "repro", "dtype": "auto", "device": "auto"}
        m.start_run(params, ["01_construct", "02_analyze", "03_card"])
        m.set_counts(source=len(rows) + 5, sliced=len(rows) + 3, dropped=3, scored=len(rows), kept=len(rows))
        m.update(stages={"candidates": {"status": "done", "rows": len(rows), "candidates_per_row": {"2": len(rows)}}})
        m.record("scorer", {"model": params["scorer_model"], "dtype": "fp32", "device": "cpu", "stand_in": stand_in})
    if metrics:
        figures = {}
        for name, title in (("score_ecdf", "ECDF of scores (24 pairs)"), ("score_distributions", "Distribution of scores")):
            write_png(run.figures / f"{name}.png")
            figures[name] = {"png": f"figures/{name}.png", "svg": f"figures/{name}.svg", "title": title}
        run.metrics.write_text(json.dumps(analysis_metrics(ds, figures)))
        if manifest:
            record_scorer(run, Manifest(run).read()["scorer"])
    return {"run": run, "ds": ds, "split": split}


def record_scorer(run: RunDir, scorer: dict) -> None:
    """`scorer` in the run's manifest and, as 02_analyze then records what it read, in its metrics.json."""
    Manifest(run).record("scorer", scorer)
    if run.metrics.is_file():
        run.metrics.write_text(json.dumps({**json.loads(run.metrics.read_text()), "scorer": scorer}))


def recipe_rows(fmt: str, n: int = 12) -> datasets.Dataset:
    """seed_rows(n) in a recipe's layout (repro.exporters): each pair and a third candidate, the pair picked."""
    rows = []
    for r in seed_rows(n):
        texts = [r["chosen"][-1]["content"], r["rejected"][-1]["content"], "A third answer."]
        scores = [r["score_chosen"], r["score_rejected"], -r["score_chosen"] - r["score_rejected"]]  # sum 0, as PairRM's
        rows.append(build_row(r, r["prompt"], texts, scores, messages="chosen", keep_all_candidates=True, pick=(0, 1)))
    return export_rows(fmt, rows, [(0, 1)] * n)


def card_for(root: Path, **params) -> tuple[repro_card.CardFacts, Path]:
    p = build(CardParams, {"run_dir": str(root), **params})
    facts = repro_card.gather_facts(p)
    path = repro_card.write_card(facts)
    # what 03_card's check refuses (Snorkel's citation held "}}": every Snorkel run failed there)
    assert not placeholders(DatasetCard.load(path).text), placeholders(DatasetCard.load(path).text)
    return facts, path


def halves(card_path: Path) -> tuple[str, str]:
    """The English and Chinese halves of a card's body."""
    body = DatasetCard.load(card_path).text
    zh = body.index("# 「")
    return body[:zh], body[zh:]


def table_rows(text: str, first_cell: str) -> list[list[str]]:
    """Cells of markdown table rows whose first cell is `first_cell`."""
    out = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0] == first_cell:
            out.append(cells)
    return out


def section(text: str, heading: str) -> str:
    """The text under a markdown heading, up to the next heading of any level."""
    start = text.index(heading + "\n") + len(heading)
    end = re.search(r"^#+ ", text[start:], flags=re.M)
    return text[start:start + end.start()] if end else text[start:]


def part(text: str, heading: str) -> str:
    """The text under a second-level heading, up to the next one (code comments in it start with "# ")."""
    start = text.index(heading + "\n") + len(heading)
    return text[start:text.index("\n## ", start)]

def as_numbers(cell: str) -> list[float]:
    return [float(x) for x in re.findall(r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?", cell)]


# ---------------------------------------------------------------------------------------------
# the seed card's YAML (a copy kept in tests/, see its header)
# ---------------------------------------------------------------------------------------------
def seed_card_yaml() -> dict:
    """dataset_info and configs of the seed card, as nested data."""
    seed = yaml.safe_load(SEED_CARD.read_text(encoding="utf-8"))
    return {**seed["dataset_info"], "configs": seed["configs"]}


def ordered(value):
    """Nested data with dict key order made visible (so `==` checks order too)."""
    if isinstance(value, dict):
        return [(k, ordered(v)) for k, v in value.items()]
    if isinstance(value, list):
        return [ordered(v) for v in value]
    return value


# ---------------------------------------------------------------------------------------------
# YAML
# ---------------------------------------------------------------------------------------------
SEED_SPLIT = repro_card.SplitFacts(name="train_prefs", num_bytes=41380967, num_examples=5183, download_size=23152573)
GOLDEN_METADATA = dict(language=["en"], license="mit", size_categories=["1K<n<10K"],
                       source_datasets=["extended|ZHLiu627/ultrafeedback_binarized_with_response_full"],
                       task_categories=["text-generation"], pretty_name="ultrafeedback_binarized_dataset_offline_pairrm_part2_mini_1",
                       tags=["preference", "dpo", "rlhf", "pairrm", "ultrafeedback"])


def test_yaml_matches_golden_file():
    """Guards the YAML that datasets/huggingface_hub produce (a library upgrade that changes it fails here)."""
    data = repro_card.card_data(SEED_FEATURES, [SEED_SPLIT], **GOLDEN_METADATA)
    assert data.to_yaml() + "\n" == GOLDEN.read_text(encoding="utf-8")


def test_golden_yaml_equals_the_seed_cards_block():
    seed = seed_card_yaml()
    golden = yaml.safe_load(GOLDEN.read_text(encoding="utf-8"))
    info = golden["dataset_info"]
    assert ordered(info["features"]) == ordered(seed["features"])
    assert info["splits"] == seed["splits"]
    assert (info["download_size"], info["dataset_size"]) == (seed["download_size"], seed["dataset_size"])
    assert golden["configs"] == seed["configs"]
    # the same block order as the seed: dataset_info, then configs
    keys = list(golden)
    assert keys.index("dataset_info") + 1 == keys.index("configs")


def test_yaml_equals_what_push_to_hub_writes(tmp_path):
    """Our card data equals datasets' own push_to_hub card update (first push: empty repo)."""
    from datasets.arrow_dataset import _get_updated_dataset_card
    from fsspec.implementations.dirfs import DirFileSystem
    from fsspec.implementations.local import LocalFileSystem

    built = make_run(tmp_path / "run")
    facts, card_path = card_for(tmp_path / "run")
    (tmp_path / "empty-repo").mkdir()
    split = built["split"]
    theirs, _ = _get_updated_dataset_card(
        fs=DirFileSystem(path=str(tmp_path / "empty-repo"), fs=LocalFileSystem()), config_name="default",
        splits_info=[datasets.SplitInfo(name="train_prefs", num_bytes=split["num_bytes"],
                                        num_examples=split["num_examples"])],
        features=built["ds"].features, data_dir="data", set_default=None, uploaded_sizes=[split["download_size"]],
        deleted_sizes=[0], remove_other_splits=False)
    ours = DatasetCard.load(card_path).data.to_dict()
    expected = theirs.data.to_dict()
    assert ordered({k: ours[k] for k in expected}) == ordered(expected)
    assert list(ours)[-2:] == ["dataset_info", "configs"]


def test_card_built_from_a_run(tmp_path):
    built = make_run(tmp_path / "run")
    _, card_path = card_for(tmp_path / "run")
    assert card_path == tmp_path / "run" / "dataset" / "README.md"
    card = DatasetCard.load(card_path)
    # the whole front matter, expected from what was built (24 rows of the seed's schema, a stand-in scorer, a
    # run folder named "run", parquet files on disk) and the seed card's own dataset_info / configs
    split, seed = built["split"], seed_card_yaml()
    expected = {
        "language": ["en"], "license": "mit", "size_categories": ["n<1K"], "task_categories": ["text-generation"],
        "pretty_name": "run", "tags": ["preference", "rlhf", "stand-in-scores"],  # (not `dpo`: a stand-in's scores)
        "dataset_info": {"features": seed["features"],
                         "splits": [{"name": "train_prefs", "num_bytes": split["num_bytes"], "num_examples": 24}],
                         "download_size": sum(f.stat().st_size for f in (tmp_path / "run" / "dataset" / "data").iterdir()),
                         "dataset_size": split["num_bytes"]},
        "configs": seed["configs"]}
    assert ordered(card.data.to_dict()) == ordered(expected)
    info = card.data.to_dict()["dataset_info"]
    assert info["splits"] == [{"name": "train_prefs", "num_bytes": split["num_bytes"],
                               "num_examples": split["num_examples"]}]
    assert info["download_size"] == split["download_size"] == sum(Path(f).stat().st_size for f in split["files"])
    assert info["dataset_size"] == split["num_bytes"]
    assert ordered(info["features"]) == ordered(seed_card_yaml()["features"])
    assert card.data.license == "mit" and card.data.size_categories == ["n<1K"]
    assert "stand-in-scores" in card.data.tags and "pairrm" not in card.data.tags
    # datasets loads the folder with the seed's features
    ds = datasets.load_dataset(str(card_path.parent), split="train_prefs")
    assert ds.features == SEED_FEATURES and list(ds.features) == list(SEED_FEATURES)
    assert ds.to_list() == built["ds"].to_list()
    report = repro_card.check_card(card_path)
    assert report["splits"]["train_prefs"]["num_examples"] == 24 and report["placeholders"] == []
    # the manifest records the card and its figure
    manifest = Manifest(tmp_path / "run").read()
    assert manifest["stages"]["card"]["status"] == "done"
    assert {"dataset/README.md", "dataset/figures/score_ecdf.png"} <= set(manifest["outputs"])


def test_03_card_refuses_a_run_whose_dataset_is_a_link_out_of_it_and_removes_nothing_there(tmp_path):
    # dataset/ a link to another folder (a copied run): the card's set-aside of stale figures removed that folder's
    run = make_run(tmp_path / "run")["run"]
    theirs = tmp_path / "theirs"
    shutil.move(run.dataset, theirs)
    write_png(theirs / "figures" / "theirs.png")
    run.dataset.symlink_to(theirs)
    with pytest.raises(ParameterError, match=rf"run_dir: {run.root}'s dataset is a link to {theirs}, out of it: a run "
                                             r"removes and writes files there, so it is refused"):
        card_for(run.root)
    assert sorted(p.name for p in (theirs / "figures").iterdir()) == ["theirs.png"]


@pytest.mark.parametrize("png", ["{private}/id_rsa", "../../private/passport.png", "metrics.json", "figures/leak.png"])
def test_a_figure_not_in_the_runs_figures_folder_is_neither_copied_nor_cited(tmp_path, png, capsys):
    # metrics.json of a copied run named {"png": "/…/private/id_rsa"}, "../../private/passport.png": both were copied
    # into the card's dataset/figures/ (the folder published) and shown by the card
    run = make_run(tmp_path / "runs" / "run")["run"]
    private = tmp_path / "private"
    private.mkdir()
    for name in ("id_rsa", "passport.png"):
        (private / name).write_text("a private file")
    (run.figures / "leak.png").symlink_to(private / "id_rsa")
    metrics = json.loads(run.metrics.read_text())
    metrics["figures"]["secret"] = {"png": png.format(private=private), "title": "Secret figure"}
    run.metrics.write_text(json.dumps(metrics))
    _, card = card_for(run.root)
    assert sorted(p.name for p in run.card_figures.iterdir()) == ["score_distributions.png", "score_ecdf.png"]
    assert "Secret figure" not in card.read_text()
    assert f"metrics.json's figure secret ({png.format(private=private)}) is not in {run.figures}" in \
        capsys.readouterr().err


def test_num_bytes_equals_push_to_hub_on_real_rows(tmp_path, train_rows):
    """On real UltraFeedback rows (long texts), the card's num_bytes is push_to_hub's Arrow size of the same data."""
    rows = [{**{k: r[k] for k in SEED_FEATURES if k in r}, "reference_response": r["chosen"][-1]["content"][:200]}
            for r in train_rows]
    built = make_run(tmp_path / "run", rows, metrics=False)
    facts, _ = card_for(tmp_path / "run")
    assert facts.splits[0].num_bytes == built["ds"]._estimate_nbytes() == built["split"]["num_bytes"]
    assert facts.prompt_id_sha256_rows == len(rows) == 200  # the H4 rule holds on the real rows


def test_load_dataset_goes_through_the_cards_configs(tmp_path):
    make_run(tmp_path / "run", metrics=False)
    _, card_path = card_for(tmp_path / "run")
    card = DatasetCard.load(card_path)
    card.data["configs"][0]["data_files"][0]["split"] = "renamed_split"
    card.data["dataset_info"]["splits"][0]["name"] = "renamed_split"
    card.save(card_path)
    # datasets follows the card's configs: the files now load as the split the card names ...
    ds = datasets.load_dataset(str(card_path.parent), split="renamed_split")
    assert len(ds) == 24 and ds.features == SEED_FEATURES
    # ... and checks the card's dataset_info against what it loaded
    card.data["dataset_info"]["splits"][0]["num_examples"] = 25
    card.save(card_path)
    with pytest.raises(datasets.exceptions.NonMatchingSplitsSizesError):
        datasets.load_dataset(str(card_path.parent), split="renamed_split", download_mode="force_redownload")


# ---------------------------------------------------------------------------------------------
# body
# ---------------------------------------------------------------------------------------------
def test_body_quotes_metrics_and_manifest(tmp_path):
    make_run(tmp_path / "run")
    facts, card_path = card_for(tmp_path / "run")
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    counts = Manifest(tmp_path / "run").read()["counts"]
    for lang, half, counts_heading in zip(("en", "zh"), halves(card_path), ("### Counts at each stage", "### 各阶段行数")):
        t = repro_card.phrases(lang)
        # one compact table: location and intervals per score column ...
        for stat in ("mean", "median", "mean_ci95", "median_ci95"):
            [row] = table_rows(half, getattr(t, "stat_" + stat))
            got = [as_numbers(c) for c in row[1:]]
            want = [np.atleast_1d(metrics[b][stat]).tolist() for b in repro_card.SCORE_BLOCKS]
            for g, w in zip(got, want):
                assert np.allclose(g, w, rtol=5e-6, atol=0), (stat, g, w)
        # ... then the margin's test p-values, effect sizes, ties and length bias
        for key, value in (("stat_p_wilcoxon", metrics["tests"]["wilcoxon"]["pvalue"]),
                           ("stat_p_paired_t", metrics["tests"]["paired_t"]["pvalue"]),
                           ("stat_p_sign_test", metrics["tests"]["sign_test"]["pvalue"]),
                           ("stat_cohens_dz", metrics["effect_size"]["cohens_dz"])):
            [row] = table_rows(half, getattr(t, key))
            assert row[1:3] == ["", ""] and np.isclose(float(row[3]), value, rtol=5e-6), (key, row)
        [row] = table_rows(half, t.stat_rank_biserial)
        assert row[3] == t.undefined  # null in metrics.json: undefined, not unknown
        [row] = table_rows(half, t.stat_ties)
        assert as_numbers(row[3])[0] == metrics["ties"] > 0
        rhos = metrics["length"]["margin_vs_length_difference"]
        length_rows = table_rows(half, t.stat_length)
        assert np.allclose([as_numbers(r[3]) for r in length_rows],
                           [[rhos[u]["spearman"], rhos[u]["pvalue"]] for u in ("chars", "tokens")], rtol=5e-6)
        # no dotted metric keys, no bootstrap set-up or raw group dumps: those stay in metrics.json
        dotted = set(re.findall(r"`(\w+\.\w+)`", half)) - {"metrics.json", "README.md", "requirements.lock", "rebuild.yaml"}
        assert not dotted and "zero_method" not in half and "`counts." not in half
        mean = metrics["margin"]["mean"]
        assert f"{mean:.6g}" in half.split(t.h_statistics)[0]  # the headline sentence quotes the mean margin
        for stage, value in counts.items():
            [row] = table_rows(section(half, counts_heading), f"`{stage}`")
            assert int(row[1]) == value
        aside = t.aside(parts=[])[:-1].strip()  # each half's own opening bracket: " (" or "（"
        assert all(f"{aside}p " in r[3] and r[3].endswith(t.aside(parts=[])[-1]) for r in length_rows), length_rows
        assert f"ρ = {rhos['chars']['spearman']:.6g}{' ' * (aside == '(')}{aside}" in half
        assert f"{rhos['tokens']['spearman']:.6g}{' ' * (aside == '(')}{aside}" in half
    en, zh = halves(card_path)
    # figures in metrics.json's order, captioned with its titles (in Chinese in the Chinese half), linked relatively
    ecdf = en.index("![ECDF of scores (24 pairs)](figures/score_ecdf.png)")
    assert ecdf < en.index("![Distribution of scores](figures/score_distributions.png)")
    assert zh.index("![分数的经验累积分布（n = 24 对）](figures/score_ecdf.png)") < zh.index("![分数分布（n = 24 对）](")
    for name in ("score_ecdf", "score_distributions"):
        assert (card_path.parent / "figures" / f"{name}.png").read_bytes() == \
            (tmp_path / "run" / "figures" / f"{name}.png").read_bytes()


def test_no_excluded_rows_are_not_counted_in_the_characteristics(tmp_path):
    # "n = 24 rows analysed, 0 excluded" on every card of a run with no row excluded
    make_run(tmp_path / "run")
    en, zh = halves(card_for(tmp_path / "run")[1])
    assert "02_analyze computes it again from this dataset): n = 24 rows analysed. `margin` =" in en
    assert "02_analyze 可由本数据集重新算出）：分析了 n = 24 行。`margin` =" in zh
    assert "0 excluded" not in en and "排除 0 行" not in zh
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    (tmp_path / "run" / "metrics.json").write_text(json.dumps({**metrics, "n": 20, "n_excluded": 4}))
    en, zh = halves(card_for(tmp_path / "run")[1])
    assert "n = 20 rows analysed, 4 excluded. `margin` =" in en and "分析了 n = 20 行，排除 4 行。`margin` =" in zh


def test_an_error_while_the_templates_render_names_the_template_its_line_and_the_error(tmp_path, monkeypatch):
    # a value the templates could not render reached IPython with the templates' frames in its traceback: IPython read
    # sections.jinja as Python, failed (tokenize: "EOF in multi-line statement"), and the cell, then `repro run`'s
    # line, said nothing ("Notebook 03_card failed at cell 7 (execution count 6): CellExecutionError: ")
    make_run(tmp_path / "run")
    facts = repro_card.gather_facts(build(CardParams, {"run_dir": str(tmp_path / "run")}))
    card_publish = importlib.import_module("repro.card.publish")  # (repro.card.publish is the function)
    sections = (card_publish.TEMPLATES / "sections.jinja").read_text(encoding="utf-8").splitlines()

    def failure(reason: str) -> ReproError:  # what rendering the body raises; no template's frame in its traceback
        with pytest.raises(ReproError) as caught:
            repro_card.render_body(facts)
        assert str(caught.value).startswith(f"The card's template sections.jinja, line {line}: {reason}. ")
        assert "run the notebooks again" in str(caught.value) and "a bug in repro.card" in str(caught.value)
        assert caught.value.__suppress_context__
        assert not [f for f, _ in traceback.walk_tb(caught.value.__traceback__) if f.f_code.co_filename.endswith(
            ".jinja")]
        return caught.value

    metrics = json.loads(json.dumps(facts.metrics))
    facts.metrics["scale"] = {"kind": "rating"}  # (its grid step, bounds... missing)
    line = next(i for i, text in enumerate(sections, 1) if 'scale["grid_step"]' in text)
    failure("UndefinedError: 'dict object' has no attribute 'grid_step'")
    facts.metrics = metrics  # a function a template calls raises
    monkeypatch.setattr(card_publish, "p_value", lambda *args: (_ for _ in ()).throw(ValueError("no p here")))
    line = next(i for i, text in enumerate(sections, 1) if '(r["margin"]|p)' in text)
    failure("ValueError: no p here")


def test_asterisks_and_underscores_in_names_show_as_written_and_code_keeps_them_raw(tmp_path):
    # a dataset named `_my_set_` (a run `run *q*`) had its card titled "<em>my_set</em>": Markdown's emphasis
    make_run(tmp_path / "run *q*")
    for params, title in (({}, "run *q*"), ({"hub_repo_id": "me/_my_set_"}, "_my_set_")):
        en, zh = halves(card_for(tmp_path / "run *q*", **params)[1])
        for half in (en, zh):
            assert f'Dataset Card for "{title}"' in shown_text(half) or f"「{title}」" in shown_text(half)
            assert "<em>" not in MarkdownIt().enable("table").render(half)
    assert 'ds = load_dataset("me/_my_set_", split="train_prefs")' in en  # (Python in a code block: as it is)


def test_checks_that_do_not_apply_say_so_and_why(tmp_path):
    make_run(tmp_path / "run")
    facts = repro_card.gather_facts(build(CardParams, {"run_dir": str(tmp_path / "run")}))
    facts.metrics["invariants"]["candidate_scores"] = {
        "rows": 24, "candidates_per_row": {"min": 3, "max": 4}, "sum_to_zero_holds": 24, "two_candidate_rows": 0,
        "antisymmetry_holds_among_two_candidate_rows": 0, "chosen_is_best_and_rejected_is_worst": 24}
    body = repro_card.render_body(facts)
    assert ("`score_chosen` = −`score_rejected` in rows with two candidates: not applicable: no row has exactly "
            "two candidates (rows have 3 to 4).") in body
    assert "两个候选的行中 `score_chosen` = −`score_rejected`：不适用：没有恰好两个候选的行（每行有 3 到 4 个候选）。" in body
    assert "a row's candidate scores sum to 0: holds in 24 of 24 rows." in body
    # every row has as many candidates: it said "(rows have 5 to 5)"
    facts.metrics["invariants"]["candidate_scores"]["candidates_per_row"] = {"min": 5, "max": 5}
    body = repro_card.render_body(facts)
    assert "not applicable: no row has exactly two candidates (every row has 5)." in body
    assert "不适用：没有恰好两个候选的行（每行都有 5 个候选）。" in body
    facts.metrics["invariants"]["candidate_scores"]["candidates_per_row"] = {"min": 3, "max": 4}
    # ratings (H4's GPT-4 scores): none of PairRM's invariants applies
    def with_scale(kind, lo, hi, distinct, fraction):  # the card of these facts, the analysis reading `kind`
        facts.metrics["scale"] = {"kind": kind, "grid_step": 0.5, "grid_fraction": fraction, "min": lo, "max": hi,
                                  "distinct_values": distinct}
        return repro_card.render_body(facts)

    facts.metrics["invariants"]["expected_to_hold"] = False
    body = with_scale("rating", 1.0, 10.0, 19, 1.0)
    assert body.count("not applicable: the scores are ratings, not PairRM scores.") == 3
    assert "the scores are ratings on a grid of 0.5 from 1 to 10 (19 distinct values)" in body
    assert "分数是以 0.5 为间隔、从 1 到 10 的评分（19 个不同取值）" in body
    # a pair that is not each row's best and worst (selection best_second): the sign order and "chosen is the best"
    # are not PairRM's to keep, and were reported broken in every row; the sum over a row's candidates still holds
    facts.metrics["invariants"].update(expected_to_hold=True, sign_order_fails=20, selection="best_second")
    body = with_scale("logit", -1.0, 1.0, 40, 0.0)
    assert body.count("not applicable: the pair is not each row's best and worst (selection `best_second`).") == 2
    assert "a row's candidate scores sum to 0: holds in 24 of 24 rows." in body and facts.sign_order_fails == 0
    assert "break PairRM's sign order" not in body
    assert "ties should be rare and PairRM's invariants should hold" not in body  # the scale says why, as metrics do
    assert ("ties should be rare; a row's candidate scores sum to 0, but the pair was chosen by selection "
            "`best_second`, not as each row's best and worst, so `score_chosen` ≥ 0 ≥ `score_rejected` need not "
            "hold.") in body
    assert "平局应当罕见；每行候选得分之和为 0，但偏好对由 selection `best_second` 选出" in body
    assert body.count("不适用：每行的偏好对不是最高分与最低分（selection `best_second`）。") == 2
    del facts.metrics["invariants"]["selection"]
    facts.metrics["invariants"]["expected_to_hold"] = False
    # a classifier's or a judge's probabilities: not logits
    body = with_scale("probability", 0.02, 0.97, 48, 0.0)
    assert body.count("not applicable: the scores are probabilities, not PairRM scores.") == 3
    assert ("the scores all lie in [0, 1] (48 distinct values from 0.02 to 0.97): a classifier's or a judge's "
            "probabilities, not log-odds; PairRM's invariants do not apply.") in body
    assert "分数全部落在 [0, 1] 内（48 个不同取值，从 0.02 到 0.97）：是分类器或评判模型给出的概率，而非对数几率" in body
    # constant scores (a scorer that gave every text 0): not ratings, as the analysis used to say
    body = with_scale("constant", 0.0, 0.0, 1, 1.0)
    assert body.count("not applicable: the scores are constant (every pair a tie), not PairRM scores.") == 3
    assert "every score is 0: constant scores rank nothing (every pair is a tie); check the scorer and the data" in body
    assert "所有分数都是 0：常数分数无法排序（每一对都是平局）；请检查打分模型和数据" in body


def test_a_recipe_layout_built_here_shows_to_trl_and_its_background(tmp_path):
    # a Snorkel-layout run built here: "How to use" said to check its format against TRL's (to_trl reads it), and
    # "Background" called the data's background unknown, for rows this run built from UltraFeedback prompts
    ds = recipe_rows("snorkel")
    make_run(tmp_path / "run", ds.to_list(), ds.features, metrics=False, stand_in=False)
    en, zh = halves(card_for(tmp_path / "run")[1])
    use = part(en, "## How to use")
    assert "train = to_trl(ds)" in use and "check its format against TRL's dataset formats" not in use
    assert 'row["score_chosen"]' not in use  # the seed's columns, which this layout lacks, are not in its code
    assert "belongs to a family built on UltraFeedback" in part(en, "## Background")
    assert "train = to_trl(ds)" in part(zh, "## 使用方法")


@pytest.mark.parametrize("fmt", ["sppo", "snorkel"])
def test_a_recipe_layouts_candidate_scores_are_checked_on_its_card(tmp_path, fmt):
    # SPPO's rm_scores and Snorkel's all_rm_scores are every candidate's score; the card said "not applicable: the
    # dataset has no `candidate_scores` column"
    ds = recipe_rows(fmt)
    run = make_run(tmp_path / "run", ds.to_list(), ds.features, metrics=False)["run"]
    analyze(AnalyzeParams(run_dir=str(run.root), bootstrap_resamples=100))
    en, zh = halves(card_for(run.root)[1])
    assert "a row's candidate scores sum to 0: holds in 12 of 12 rows." in en and "`candidate_scores` column" not in en
    assert "每行候选得分之和为 0：在 12 行中有 12 行成立。" in zh


@pytest.mark.parametrize("fmt", ["sppo", "snorkel", "rlhflow", "sppo_score"])
def test_a_recipe_cards_code_runs_on_its_own_rows(tmp_path, monkeypatch, fmt):
    # "How to use" offered `row["score_margin"] > 0` after to_trl on every recipe layout; SPPO's `_score` table (the
    # pair and its probabilities, no rm_scores) has no scores, to_trl gives it no margin, and the card still promised
    # `score_chosen`, `score_rejected` and a `score_margin`. The `rlhflow` format's table holds every candidate's
    # `rewards`: scored (only RLHFlow's margin-only pair table, which repro does not write, is not)
    ds = recipe_rows(fmt.removesuffix("_score"))
    if fmt == "sppo_score":
        ds = ds.select_columns(["prompt", "prompt_id", "chosen", "rejected", "chosen_probs", "chosen_probs_win",
                                "chosen_probs_lose"])
    make_run(tmp_path / "run", ds.to_list(), ds.features, metrics=False, stand_in=False)
    en, zh = halves(card_for(tmp_path / "run")[1])
    monkeypatch.chdir(tmp_path / "run")
    for half, heading in ((en, "## How to use"), (zh, "## 使用方法")):
        use = part(half, heading)
        scope: dict = {}
        exec(re.findall(r"```python\n(.*?)```", use, flags=re.S)[0], scope)
        scope["train"] = to_trl(scope["ds"])
        filters = re.findall(r"`(train = train\.filter\(.*?\))`", use)
        for code in filters:
            exec(code, scope)
        if fmt == "sppo_score":
            assert not filters and "score_margin" not in use and "`score_chosen`" not in use
            assert "score_margin" not in scope["train"].column_names and len(scope["train"]) == 12
        else:  # (seed_rows(12): one tie)
            assert len(filters) == 1 and len(scope["train"]) == 11
    if fmt != "sppo_score":
        assert "keeps the 11 of the 12 pairs whose `chosen` scored strictly higher, leaving out 1 tie." in en


RECIPE_WORKS = {"sppo": ("SPPO", "arXiv:2405.00675"), "snorkel": ("Snorkel", "https://huggingface.co/datasets/snorkelai/"
                "Snorkel-Mistral-PairRM-DPO-Dataset"), "selm": ("SELM", "arXiv:2405.19332"),
                "rlhflow": ("RLHFlow", "arXiv:2405.07863")}


@pytest.mark.parametrize("fmt", ["seed", *RECIPE_WORKS])
def test_a_recipes_card_cites_the_recipe_and_names_it_as_its_background(tmp_path, fmt):
    # every recipe's card cited UltraFeedback, Zephyr and LLM-Blender only (one fixed block) and carried the seed's
    # Background ("The seed then ranked ... with PairRM ... parts and minis"); RLHFlow's reward model is no PairRM
    ds = recipe_rows(fmt) if fmt != "seed" else datasets.Dataset.from_list(seed_rows(12), features=SEED_FEATURES)
    run = make_run(tmp_path / "run", ds.to_list(), ds.features, metrics=False)["run"]
    manifest = Manifest(run)
    manifest.update(parameters={**manifest.read()["parameters"], "output_format": fmt})
    if fmt == "rlhflow":
        manifest.record("scorer", {"model": "builtin:tiny-reward-llama", "kind": "sequence_classifier",
                                   "stand_in": True})
    en, zh = halves(card_for(run.root)[1])
    background, bibtex = part(en, "## Background"), en[en.index("```bibtex"):].split("\n```")[0]
    assert "cui2023ultrafeedback" in bibtex and "tunstall2023zephyr" in bibtex
    assert ("jiang2023llmblender" in bibtex) == (fmt != "rlhflow") and bibtex in zh
    if fmt == "seed":
        assert "The seed then ranked" in background and "@misc" not in bibtex and "2405." not in bibtex
        return
    name, reference = RECIPE_WORKS[fmt]
    assert reference in bibtex and sum(work[1] in bibtex for work in RECIPE_WORKS.values()) == 1
    assert "The seed then ranked" not in background and "parts and minis" not in background
    said = f"This dataset follows the layout of {name}'s data (read from {FORMATS[fmt].source})"  # (no code span)
    assert said in background and background.strip().count(". ") == 0  # one sentence
    assert f"本数据集沿用 {name} 数据的格式（取自 {FORMATS[fmt].source}）" in part(zh, "## 背景概述")


def test_the_chinese_half_is_chinese(tmp_path):
    make_run(tmp_path / "run")
    _, card_path = card_for(tmp_path / "run")
    _, zh = halves(card_path)
    prose = re.sub(r"```.*?```|`[^`]*`|\([^)]*\)|!\[[^\]]*\]\([^)]*\)", " ", zh, flags=re.S)  # code, names, links
    prose = re.sub(r"https?://\S+", " ", prose)
    english_runs = re.findall(r"[A-Za-z]+(?:[ ,'-]+[A-Za-z]+){3,}", prose)
    allowed = ("Spearman", "Cohen", "Wilcoxon", "Python", "PairRM", "UltraFeedback", "SELM", "SPPO", "DPO", "PPO")
    assert [r for r in english_runs if not any(a in r for a in allowed)] == []
    # Chinese sentences follow each other without a space (a space stays before a table's closing bar)
    assert re.findall(r".{0,12}[。；：，）] +[^|\s`].{0,12}", zh) == []


def leaves(tree, prefix=""):
    """(dotted path, value) of every leaf of nested metrics."""
    if isinstance(tree, dict):
        return [leaf for k, v in tree.items() for leaf in leaves(v, f"{prefix}.{k}" if prefix else k)]
    return [(prefix, tree)]


def test_card_quotes_the_analysis_modules_own_metrics(tmp_path):
    """Integration with repro.analysis.report (issue 4): its metrics.json and figures go into the card as they are."""
    from repro.analysis import report as analysis
    from repro.parameters import AnalyzeParams

    make_run(tmp_path / "run", seed_rows(40), metrics=False)
    analysis.analyze(build(AnalyzeParams, {"run_dir": str(tmp_path / "run"), "bootstrap_resamples": 100}))
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    facts, card_path = card_for(tmp_path / "run")
    assert facts.left_out == [] and len(facts.figures) == len(metrics["figures"])
    en, zh = halves(card_path)
    for lang, half in (("en", en), ("zh", zh)):
        t = repro_card.phrases(lang)
        [row] = table_rows(half, t.stat_mean)
        assert np.allclose([float(c) for c in row[1:]],
                           [metrics[b]["mean"] for b in repro_card.SCORE_BLOCKS], rtol=5e-6)
        [row] = table_rows(half, t.stat_ties)
        assert as_numbers(row[3])[0] == metrics["margin_sign"]["counts"]["zero"]
        for f in metrics["figures"].values():
            assert f"]({Path(f['png']).as_posix()})" in half and (card_path.parent / f["png"]).is_file()
        # two candidates per row: antisymmetry applies and is counted
        assert t.check_antisymmetry + t.labelled(label="", value=t.holds(
            k=metrics["invariants"]["antisymmetry_holds"], n=40)) in half
    assert "Scale, as the analysis reads it: the scores are real-valued" in en
    assert "Length bias: the Spearman correlation" in en
    repro_card.check_card(card_path)


@pytest.mark.parametrize("chars, tokens, longer, verdict", [
    ((0.30, 0.001), (0.05, 0.4), (22, 18), "the scores favour longer responses"),
    ((-0.25, 0.01), (-0.05, 0.6), (20, 20), "the scores favour shorter responses"),
    ((0.30, 0.20), (0.12, 0.30), (22, 18), "no clear length bias"),  # large but not significant (few rows)
    ((0.04, 0.001), (0.02, 0.01), (22, 18), "no clear length bias"),  # significant but negligible (many rows)
    ((0.50, None), (0.50, None), (22, 18), "no clear length bias"),  # rho without a p: it was called a bias
    # the chosen response nearly always the longer, its margin unrelated to length: it said "no clear length bias"
    ((0.05, 0.7), (0.04, 0.8), (38, 2), "the chosen response is the longer one in at least 60.0 % of them"),
    ((0.05, 0.7), (0.04, 0.8), (6, 34), "the chosen response is the shorter one in at least 60.0 % of them"),
    ((0.05, 0.7), (0.04, 0.8), (24, 16), "no clear length bias"),  # 60 % of 40, p = 0.27
    # the two signals opposite: the chosen response the longer in 75 % of the pairs, yet larger margins with shorter
    # chosen responses; the card said only "the scores favour shorter responses" (the rho decided alone)
    ((-0.12, 0.036), (-0.11, 0.04), (30, 10), "they point opposite ways: the chosen response is the longer one in at "
     "least 60.0 % of them (sign test p < 0.05), while within the pairs larger margins go with shorter chosen "
     "responses (|ρ| ≥ 0.1, p < 0.05)"),
    ((0.15, 0.01), (0.12, 0.04), (8, 32), "they point opposite ways: the chosen response is the shorter one in at "
     "least 60.0 % of them (sign test p < 0.05), while within the pairs larger margins go with longer chosen "
     "responses (|ρ| ≥ 0.1, p < 0.05)"),
    ((0.30, 0.001), (0.05, 0.4), (32, 8), "the scores favour longer responses"),  # the two agree: as before
])
def test_length_bias_verdict(tmp_path, chars, tokens, longer, verdict):
    make_run(tmp_path / "run", metrics=True)
    facts = repro_card.gather_facts(build(CardParams, {"run_dir": str(tmp_path / "run")}))
    length = facts.metrics["length"]
    assert set(length["chosen_longer_test"]) == {"chars", "tokens"}
    length["n"] = 40
    length["margin_vs_length_difference"] = {
        "chars": {"spearman": chars[0], "pvalue": chars[1]}, "tokens": {"spearman": tokens[0], "pvalue": tokens[1]}}
    sign = {"positive": longer[0], "negative": longer[1], "zeros_discarded": 40 - sum(longer),
            "pvalue": stats.binomtest(longer[0], sum(longer)).pvalue}
    length["chosen_longer_test"] = {"chars": sign, "tokens": sign}
    body = repro_card.render_body(facts)
    [line] = [x for x in body.splitlines() if x.startswith("- Length bias")]
    [zh_line] = [x for x in body.splitlines() if x.startswith("- 长度偏差")]
    opposite = "opposite" in verdict  # then no one direction: neither "favour" verdict
    assert ("相反" in zh_line) == opposite and not (opposite and "favour" in line), zh_line
    about = f"characters, p = {chars[1]:g}" if chars[1] is not None else "characters"
    assert verdict in line and f"{chars[0]:g} ({about})" in line, line
    share = f"{100 * longer[0] / sum(longer):.1f} %"
    assert f"the chosen response is the longer one in {share} ({longer[0]} of {sum(longer)}, characters, sign test p = " \
           f"{sign['pvalue']:.4g})" in line


def test_the_tests_of_margin_are_said_to_be_of_margins_nonnegative_by_construction(tmp_path):
    # a pair built here, chosen the higher-scored of its two, never has a margin below 0: the card gave Wilcoxon, t and sign-test p-values (1.8e-12 in
    # the demo) with nothing to say that they measure how few ties there are, not a preference
    make_run(tmp_path / "run", metrics=True)  # two candidates in every row, as its candidates stage records
    facts = repro_card.gather_facts(build(CardParams, {"run_dir": str(tmp_path / "run")}))
    en, zh = (repro_card.phrases(lang).tests_by_construction("two") for lang in ("en", "zh"))
    assert en.startswith("By construction (chosen is the higher-scored of the row's two candidates), no margin is "
                         "below 0") and zh.startswith("按构造（chosen 为该行两个候选中得分较高者），差值不会小于 0")
    assert facts.built_here and facts.parameters.get("selection", "best_worst") == "best_worst"
    body = repro_card.render_body(facts)
    assert en in body and zh in body and body.index(en) > body.index("Wilcoxon signed-rank p")
    facts.parameters["selection"] = "best_second"  # every rule here orders its pair by score (selection.select)
    assert en in repro_card.render_body(facts)
    # rows of 3 or 4 candidates (the demo's): it said "the higher-scored of the pair's two candidates"; the best of
    # the row's, where the rule takes the best; the higher of the two it picked, where it draws or penalises length
    facts.stages["candidates"]["candidates_per_row"] = {"3": 10, "4": 14}
    for rule, said, zh_said in (("best_second", "the highest-scored of the row's candidates", "该行候选中得分最高者"),
                                ("random_pair", "the higher-scored of the two candidates `selection` picked",
                                 "`selection` 选出的两个候选中得分较高者")):
        facts.parameters["selection"] = rule
        body = repro_card.render_body(facts)
        assert f"By construction (chosen is {said}), no margin is below 0" in body
        assert f"按构造（chosen 为{zh_said}），差值不会小于 0" in body and en not in body and zh not in body
    # the original pair ranked but never paired (first_scored_only, SPPO's 7 scores for 5 candidates): it said "the
    # highest-scored of the row's candidates", false where an original outscores every candidate that may be paired
    run = make_run(tmp_path / "sppo", metrics=True)["run"]
    with Manifest(run).edit() as data:
        data["parameters"].update(include_original_pair=True, original_pair_position="first_scored_only")
        data["stages"]["candidates"]["candidates_per_row"] = {"7": 24}
    body = repro_card.render_body(repro_card.gather_facts(build(CardParams, {"run_dir": str(run.root)})))
    assert "By construction (chosen is the higher-scored of the two candidates `selection` picked), no margin is " \
           "below 0" in body and "highest-scored" not in body
    assert "按构造（chosen 为`selection` 选出的两个候选中得分较高者），差值不会小于 0" in body
    assert "得分最高者" not in body
    facts.built_here = False
    assert "By construction" not in repro_card.render_body(facts)


def test_length_bias_is_not_measurable_when_the_lengths_never_differ(tmp_path):
    # chosen and rejected of one length in every pair: the card said "metrics.json reports no correlation", which
    # reads as "no bias found"
    make_run(tmp_path / "run", metrics=True)
    facts = repro_card.gather_facts(build(CardParams, {"run_dir": str(tmp_path / "run")}))
    same = {"positive": 0, "negative": 0, "zeros_discarded": 30, "pvalue": None}
    facts.metrics["length"].update(n=30, chosen_longer_test={"chars": same, "tokens": same}, margin_vs_length_difference={
        unit: {"spearman": None, "pvalue": None} for unit in ("chars", "tokens")})
    assert facts.length_bias == {"verdict": "same_lengths"}
    body = repro_card.render_body(facts)
    assert all(repro_card.phrases(lang).lim_length_same in body for lang in ("en", "zh"))


def test_length_bias_by_the_share_when_every_margin_is_the_same(tmp_path):
    # 0.7 / 0.2 in every row: no correlation with length can be computed, and the card said "metrics.json reports
    # no correlation" though the chosen response was the longer in 30 of 30 pairs
    make_run(tmp_path / "run", metrics=True)
    facts = repro_card.gather_facts(build(CardParams, {"run_dir": str(tmp_path / "run")}))
    sign = {"positive": 30, "negative": 0, "zeros_discarded": 0, "pvalue": 1.86e-09}
    facts.metrics["length"].update(n=30, chosen_longer_test={"chars": sign, "tokens": sign}, margin_vs_length_difference={
        unit: {"spearman": None, "pvalue": None} for unit in ("chars", "tokens")})
    assert facts.length_bias == {"verdict": "longer_share"}
    lines = [x for x in repro_card.render_body(facts).splitlines() if x.startswith(("- Length bias", "- 长度偏差"))]
    assert lines[0].startswith("- Length bias: the margin's correlation with the length difference is undefined (the "
                               "margins, or the length differences, are all equal), and the chosen response is the "
                               "longer one in 100.0 % (30 of 30, characters, sign test p = 1.86e-09)")
    assert lines[0].endswith("the scores favour longer responses.")
    assert lines[1].startswith("- 长度偏差：差值与长度差的相关系数无定义") and lines[1].endswith("分数偏向较长的回复。")
    assert "chosen 较长的占 100.0 %（30 对中的 30 对，字符，" in lines[1]  # the share's count too


@pytest.mark.parametrize("chosen_longer", [0, 2])
def test_a_length_units_missing_figures_are_said_why(tmp_path, chosen_longer):
    # the stand-in policy's responses are all 48 characters: metrics.json said "every length difference is zero:
    # there is nothing to test" for characters, and the card gave whitespace tokens' figures only, without a word on
    # characters; so for a chosen response 2 characters longer in every pair (a ρ undefined, a share of 100 %)
    words = ["a" * 48, "a" * 23 + " " + "b" * 24, "a" * 15 + " " + "b" * 15 + " " + "c" * 16]  # 48 characters each
    rows = seed_rows(30)
    for i, r in enumerate(rows):
        r["chosen"][-1]["content"] = words[i % 3] + "!" * chosen_longer
        r["rejected"][-1]["content"] = words[i // 3 % 3]
    make_run(tmp_path / "run", rows, metrics=False)
    analyze(build(AnalyzeParams, {"run_dir": str(tmp_path / "run"), "bootstrap_resamples": 100}))
    facts, card = card_for(tmp_path / "run")
    chars = facts.metrics["length"]["chosen_longer_test"]["chars"]
    assert (chars["positive"], chars["negative"]) == ((0, 0) if not chosen_longer else (30, 0))
    assert facts.metrics["length"]["margin_vs_length_difference"]["chars"]["spearman"] is None
    assert facts.metrics["length"]["margin_vs_length_difference"]["tokens"]["spearman"] is not None
    en, zh = halves(card)
    why, zh_why = (("chosen and rejected have the same length in every pair", "每一对中 chosen 与 rejected 的长度都相同")
                   if not chosen_longer else ("every pair's length difference is the same", "每一对的长度差都相同"))
    rows_en, rows_zh = table_rows(en, "length bias: Spearman ρ(margin, length difference)"), table_rows(zh, "长度偏差：Spearman ρ（差值，长度差）")
    assert [r[-1] for r in rows_en][0] == f"characters: undefined ({why})"
    assert rows_en[1][-1].startswith("whitespace tokens: ") and rows_zh[1][-1].startswith("空白分词：")
    assert rows_zh[0][-1] == f"字符：无定义（{zh_why}）"
    [line] = [x for x in en.splitlines() if x.startswith("- Length bias")]
    [zh_line] = [x for x in zh.splitlines() if x.startswith("- 长度偏差")]
    if not chosen_longer:
        assert "whitespace tokens, p = " in line and "characters, sign test" not in line
        assert f"of the pairs whose lengths differ; in characters, there is neither figure: {why}; " in line
        assert f"；按字符计两者皆无：{zh_why}；" in zh_line
    else:  # the share of characters given (30 of 30), the correlation said to be missing
        assert "(30 of 30, characters, sign test p = " in line
        assert f"; in characters, there is no correlation: {why}; " in line and f"；按字符计没有相关系数：{zh_why}；" in zh_line


@pytest.mark.parametrize("change, en_why, zh_why", [
    ({"chosen": None, "rejected": None}, "the dataset has no chosen or rejected column",
     "数据集没有 chosen 或 rejected 列"),
    ({"rejected": None}, "the dataset has no rejected column", "数据集没有 rejected 列"),
    ({"chosen": 3}, "column 'chosen' is int64, neither text nor a list of {content, role} messages",
     "列 'chosen' 的类型是 int64，既不是文本也不是 {content, role} 消息列表"),
    ({"rejected": "user turn only"}, "fewer than 2 rows have both an assistant response in chosen and in rejected",
     "同时在 chosen 与 rejected 中有助手回复的行不到 2 行")])
def test_the_card_says_in_both_languages_why_no_length_was_measured(tmp_path, train_rows, change, en_why, zh_why):
    # 30 rows of prompt_id, prompt and the scores: the English said "(the dataset has no chosen or rejected column)",
    # the Chinese gave no reason (the analysis wrote it in English, which the Chinese half left out)
    rows = [{k: r[k] for k in ("prompt_id", "prompt", "score_chosen", "score_rejected", "chosen", "rejected")}
            for r in train_rows[:30]]
    for i, r in enumerate(rows):
        for column, value in change.items():
            if value is None:
                del r[column]
            elif value == "user turn only":  # every row but the first: no assistant response to measure
                r[column] = r[column][:1] if i else r[column]
            else:
                r[column] = value
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    analyze(build(AnalyzeParams, {"run_dir": str(tmp_path / "run"), "dataset": str(path), "bootstrap_resamples": 100}))
    facts, card_path = card_for(tmp_path / "run", card_dataset=str(path))
    assert facts.metrics["length"]["reason"] == en_why  # metrics.json's reader still reads it
    en, zh = halves(card_path)
    assert f"- Length bias: `metrics.json` reports no correlation of the margin with length ({en_why})." in en
    assert f"- 长度偏差：`metrics.json` 未报告差值与长度的相关性（{zh_why}）。" in zh
    # a metrics.json of an older repro (a reason, no cause): the English card keeps its reason, as it did
    facts.metrics["length"].pop("cause")
    assert f"- Length bias: `metrics.json` reports no correlation of the margin with length ({en_why})." in \
        repro_card.render_body(facts)


def test_length_bias_is_not_judged_on_a_few_rows(tmp_path):
    # two or three rows: rho = -1 with p = 0 (scipy's t approximation) or no p made the card say "p < 0.05"
    make_run(tmp_path / "run", metrics=True)
    facts = repro_card.gather_facts(build(CardParams, {"run_dir": str(tmp_path / "run")}))
    facts.metrics["length"].update(n=3, margin_vs_length_difference={"chars": {"spearman": -1.0, "pvalue": 0.0}})
    lines = [x for x in repro_card.render_body(facts).splitlines() if x.startswith(("- Length bias", "- 长度偏差"))]
    assert lines == ["- Length bias: not judged on 3 rows (it takes at least 10).", "- 长度偏差：仅 3 行，不作判断（至少需要 10 行）。"]
    facts.metrics["length"]["n"] = LENGTH_BIAS_ROWS  # at least 10: judged (ρ = −1, chosen the longer in 24 of 24)
    assert LENGTH_BIAS_ROWS == 10 and facts.length_bias == {"verdict": "longer_share_shorter_margins"}


def analysed_run(root: Path, rows: list[dict], **analysis) -> tuple[repro_card.CardFacts, str, str]:
    """A run of `rows` not built here (no manifest), analysed by 02_analyze's own code; its facts and card halves."""
    make_run(root, rows, metrics=False, manifest=False)
    analyze(build(AnalyzeParams, {"run_dir": str(root), "bootstrap_resamples": 100, **analysis}))
    facts, card_path = card_for(root)
    return (facts, *halves(card_path))


@pytest.mark.parametrize("rating", [False, True])
def test_inverted_pairs_are_flagged_and_named_by_the_filter(tmp_path, monkeypatch, rating):
    # 44 of 60 rows score_chosen < score_rejected: no limitation said so, the filter sentence called what it drops
    # "ties" (there were none) and still recommended DPO; on integer ratings the checks lost their "Inversions" line
    rows = seed_rows(60)
    for i, r in enumerate(rows):
        low, high = 2.0 + i % 3, 7.0 + i % 3
        low, high = (low, high) if rating else (low / 3 + i / 997, high / 3 + i / 991)
        r["score_chosen"], r["score_rejected"] = (low, high) if i < 44 else (high, low)
    facts, en, zh = analysed_run(tmp_path / "run", rows)
    assert facts.metrics["scale"]["kind"] == ("rating" if rating else "logit")
    # what scored them not known: no recipe, so no filter for the limitation to point at
    assert "For inspection only" in part(en, "## How to use") and "the filter by margin" not in en
    assert "DPO on them as they stand learns toward their `chosen` response all the same." in en
    assert "仍会朝其 `chosen` 回复学习。" in zh and "按差值的筛选" not in zh
    facts, card_path = card_for(tmp_path / "run", known_recipe={"scorer": "my-org/rm"})  # (told what scored them)
    en, zh = halves(card_path)
    assert ("- Pairs without a preference for `chosen`: of the 60 pairs, 44 are inverted (`score_chosen` < "
            "`score_rejected`: the scores prefer `rejected`). DPO") in part(en, "## Challenges and limitations")
    assert "60 对中有 44 对倒置" in part(zh, "## 当前挑战与局限")
    assert "Inversions (`score_chosen` < `score_rejected`): 44 rows." in en and "倒置（`score_chosen` < `score_rejected`）：44 行。" in zh
    assert "The margin is positive in 16 rows and negative in 44." in en and "差值为正的有 16 行，为负的有 44 行。" in zh
    use = part(en, "## How to use")
    assert ("Ties and inverted pairs carry no preference for `chosen`: `train = train.filter(lambda row: "
            "row[\"score_margin\"] > 0)` keeps the 16 of the 60 pairs whose `chosen` scored strictly higher, leaving "
            "out 44 inverted pairs (") in use
    assert "保留 60 对中 `chosen` 得分严格更高的 16 对，去掉 44 对倒置的偏好对" in part(zh, "## 使用方法")
    monkeypatch.chdir(tmp_path / "run")
    scope: dict = {}
    exec(re.findall(r"```python\n(.*?)```", use, flags=re.S)[0], scope)
    scope["train"] = to_trl(scope["ds"])
    exec(re.search(r"`(train = train\.filter\(.*?\))`", use)[1], scope)
    assert len(scope["train"]) == 16
    en = halves(card_for(tmp_path / "run", known_recipe={"scorer": "my-org/rm"})[1])[0]  # (told what scored them)
    assert "Offline preference optimisation" in part(en, "## Typical uses")  # 16 pairs still prefer `chosen`


def test_pairs_without_any_preference_are_not_recommended_for_dpo(tmp_path):
    # every score equal: the card still recommended DPO, and "Ties carry no preference ... keeps the 0 of the 30 pairs"
    rows = seed_rows(30)
    for r in rows:
        r["score_chosen"] = r["score_rejected"] = 0.5
    facts, en, zh = analysed_run(tmp_path / "run", rows)
    assert facts.metrics["scale"]["kind"] == "constant"
    assert "Pairs without a preference for `chosen`: of the 30 pairs, 30 are ties (`score_chosen` = `score_rejected`)." \
        in part(en, "## Challenges and limitations") and "30 对中有 30 对为平局" in part(zh, "## 当前挑战与局限")
    uses, uses_zh = part(en, "## Typical uses"), part(zh, "## 常用场景")
    assert "- Offline preference optimisation (DPO" not in uses and "上进行离线偏好优化" not in uses_zh
    assert "no pair's `chosen` scored higher than its `rejected`" in uses and "没有一对的 `chosen` 得分高于" in uses_zh
    assert "dpo" not in facts_card_data(facts).tags  # (it was tagged for DPO all the same)
    assert "keeps the 0 of" not in en and "得分严格更高的 0 对" not in zh  # (a filter that keeps nothing: not offered)
    # no row left by the card's code (every chosen response empty; every score null): no sentence of "0 of the 0
    # pairs", and not "no pair's chosen scored higher" of pairs that all did
    for name, change in (("empty", {"chosen": [{"role": "user", "content": "q"}, {"role": "assistant", "content": ""}],
                                    "score_chosen": 1.0, "score_rejected": 0.0}),
                         ("null", {"score_chosen": None, "score_rejected": None})):
        make_run(tmp_path / name, [{**r, **change} for r in seed_rows(20)], metrics=False, manifest=False)
        facts, card_path = card_for(tmp_path / name)
        en, zh = halves(card_path)
        said = "20 with an empty chosen response" if name == "empty" else "20 without finite scores"
        assert f"none of its 20 rows is a pair the code in \"How to use\" keeps ({said})" in en
        assert "0 of the 0" not in en and "of the 0 pairs" not in en and "no pair's `chosen`" not in en
        assert "Pairs without a preference" not in en and "0 对中" not in zh and "没有一行是" in zh
        assert "Ties carry no preference" not in en  # (there were no ties, and the code above kept no row)
    # a few ties among many preferences: not called a limitation
    facts, en, zh = analysed_run(tmp_path / "few", seed_rows(36))
    assert 0 < facts.metrics["ties"] < 0.1 * 36 and "Pairs without a preference" not in en
    # nor counted where there are none: "negative in 0", "Inversions (...): 0 rows"
    assert "The margin is positive in 33 rows and zero (a tie) in 3." in en and "差值为正的有 33 行，为零（平局）的有 3 行。" in zh
    assert "Inversions" not in en and "倒置（" not in zh and "negative in" not in en and "为负" not in zh
    # ties in exactly MANY_TIES of the pairs (3 of 30): a limitation from that share on
    facts, en, zh = analysed_run(tmp_path / "tenth", seed_rows(30))
    assert facts.pair_signs == {"positive": 27, "zero": 3, "negative": 0, "same": 0} and MANY_TIES == 0.1
    assert "Pairs without a preference for `chosen`: of the 30 pairs, 3 are ties" in en and "30 对中有 3 对为平局" in zh


def test_pairs_counted_after_the_empty_chosen_rows_say_so(tmp_path, train_rows):
    # 40 real rows, one with an empty chosen response (a positive margin): Characteristics said "n = 40", "positive in
    # 34 and zero (a tie) in 6", the limitation "of the 39 pairs, 6 are ties" and How to use "keeps the 33 of the 39
    # pairs", two denominators with no word of the row the card's code leaves out
    rows = train_rows[160:200]
    assert sum(not r["chosen"][-1]["content"].strip() for r in rows) == 1
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    analyze(build(AnalyzeParams, {"run_dir": str(tmp_path / "run"), "dataset": str(path), "bootstrap_resamples": 100}))
    facts, card_path = card_for(tmp_path / "run", card_dataset=str(path), known_recipe={"scorer": "gpt-4"})
    en, zh = halves(card_path)
    # (2 of its pairs hold one response twice: rows 185 and 198, whose chosen scored higher, are not counted as such)
    assert facts.empty_chosen == 1 and facts.pair_signs == {"positive": 31, "zero": 6, "negative": 0, "same": 2}
    assert "n = 40 rows analysed" in en and "The margin is positive in 34 rows and zero (a tie) in 6." in en
    assert ("Pairs without a preference for `chosen`: of the 39 pairs (40 rows less the 1 with an empty chosen "
            "response, which `to_trl` refuses), 6 are ties") in part(en, "## Challenges and limitations")
    assert ("keeps the 31 of the 39 pairs (40 rows less the 1 with an empty chosen response, which `to_trl` refuses) "
            "whose `chosen` scored strictly higher and differs from `rejected`, leaving out 6 ties and 2 pairs of one "
            "response.") in part(en, "## How to use")
    said_zh = "39 对（40 行减去 chosen 回复为空的 1 行，to_trl 不接受这些行）"
    assert f"{said_zh}中有 6 对为平局" in part(zh, "## 当前挑战与局限")
    assert f"保留 {said_zh}中 `chosen` 得分严格更高且与 `rejected` 不同的 31 对" in part(zh, "## 使用方法")
    # no empty chosen response: the pairs are the rows, said as before
    path.write_text("".join(json.dumps(r) + "\n" for r in rows if r["chosen"][-1]["content"].strip()))
    analyze(build(AnalyzeParams, {"run_dir": str(tmp_path / "run2"), "dataset": str(path), "bootstrap_resamples": 100}))
    en, zh = halves(card_for(tmp_path / "run2", card_dataset=str(path), known_recipe={"scorer": "gpt-4"})[1])
    assert "of the 39 pairs, 6 are ties" in en and "keeps the 31 of the 39 pairs whose" in en and "39 对中有 6 对" in zh


def test_the_size_is_called_small_only_when_it_is(tmp_path):
    # "Small size: 61135 rows" on every card, whatever its size
    make_run(tmp_path / "run")
    facts = repro_card.gather_facts(build(CardParams, {"run_dir": str(tmp_path / "run")}))
    body = repro_card.render_body(facts)
    assert "- Small size: 24 rows, out of 29 rows in the source file." in body and "- 规模较小：24 行" in body
    facts.splits[0].num_examples = facts.counts["source"] = 61135
    body = repro_card.render_body(facts)
    assert "Small size" not in body and "规模较小" not in body
    assert "- Size: 61135 rows, out of 61135 rows in the source file." in body and "- 规模：61135 行" in body


def test_each_figure_caption_counts_its_own_unit(tmp_path):
    # the Chinese caption of the agreement figure said "（n = 40 对）" (pairs) where the English said 40 prompts
    make_run(tmp_path / "run")
    facts = repro_card.gather_facts(build(CardParams, {"run_dir": str(tmp_path / "run")}))
    write_png(png := facts.run.figures / "scorer_agreement.png")
    facts.figures.append((png, "Agreement between scorers (n = 20 prompts)"))
    pair = {"scorers": ["a", "b"], "rows": 20, "same_chosen": {"count": 15, "fraction": 0.75},
            "same_rejected": {"count": 10, "fraction": 0.5}, "kendall_tau": {"mean": 0.5, "median": 0.5, "undefined": 0},
            "margin_correlation": {}}
    facts.metrics["agreement"] = {"primary": "a", "pairs": [pair]}
    body = repro_card.render_body(facts)
    assert "![Agreement between scorers (n = 20 prompts)](figures/scorer_agreement.png)" in body
    assert "![评分模型之间的一致性（n = 20 个提示词）](figures/scorer_agreement.png)" in body
    assert "![分数分布（n = 24 对）](figures/score_distributions.png)" in body


def test_a_prompt_id_never_the_prompts_hash_and_an_undefined_test_are_said_plainly(tmp_path):
    # "It equals the sha256 ... in 0 of 2500 rows"; the t-test's row left out when undefined, d_z's kept as undefined
    rows = seed_rows(24)
    for i, r in enumerate(rows):
        r["prompt_id"] = f"id-{i}"
    make_run(tmp_path / "run", rows)
    facts = repro_card.gather_facts(build(CardParams, {"run_dir": str(tmp_path / "run")}))
    facts.metrics["tests"]["paired_t"].update(statistic=None, pvalue=None)
    facts.metrics["effect_size"]["cohens_dz"] = None
    body = repro_card.render_body(facts)
    assert "It is not the sha256 hex digest of the UTF-8 `prompt` in any of the 24 rows." in body and "0 of" not in body
    assert "24 行中没有一行等于 `prompt`（UTF-8）的 sha256 十六进制摘要。" in body
    en, zh = body[:body.index("# 「")], body[body.index("# 「"):]
    for lang, half in (("en", en), ("zh", zh)):
        t = repro_card.phrases(lang)
        for stat in (t.stat_p_paired_t, t.stat_cohens_dz):
            [row] = table_rows(half, stat)
            assert row[3] == t.undefined, (stat, row)


def test_no_machine_path_in_the_card_or_the_upload(tmp_path):
    marker = "zq7-home-of-someone"
    root = tmp_path / marker / "runs" / "demo"
    make_run(root)
    manifest_path = root / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    local_model = str(tmp_path / marker / "models" / "PairRM-hf")
    manifest["parameters"].update(source=str(tmp_path / marker / "data" / "rows.jsonl"), scorer_model=local_model,
                                  batch_tokens=2048, chunk_size=16)
    manifest["scorer"].update(model=local_model, path=local_model, work_dir=str(root / "work" / "scoring"))
    manifest_path.write_text(json.dumps(manifest))
    _, card_path = card_for(root)
    folder = card_path.parent
    uploaded = [folder / "README.md"] + sorted((folder / "data").glob("*.parquet")) + sorted((folder / "figures").glob("*.png"))
    assert len(uploaded) >= 3
    for path in uploaded:
        assert marker.encode() not in path.read_bytes(), path
    text = card_path.read_text(encoding="utf-8")
    assert "`PairRM-hf`" in text and "`rows.jsonl`" in text  # named, without the folders above them
    # the parameters that shaped the data, not where or how the work ran
    en, _ = halves(card_path)
    shown = {row[0].strip().strip("`") for row in (line.strip("|").split("|") for line in
             section(en, "### Parameters of this run").splitlines() if line.startswith("| `"))}
    assert {"source", "scorer_model", "drop_rows", "candidate_columns"} <= shown
    assert not shown & {"run_dir", "run_name", "batch_tokens", "chunk_size", "notebooks", "bootstrap_seed"}
    assert not shown & {"temperature", "policy_model", "max_new_tokens"}  # nothing was generated
    # without metrics.json, the left-out notice names files relative to the run
    (root / "metrics.json").unlink()
    _, card_path = card_for(root)
    assert marker not in card_path.read_text(encoding="utf-8")


def test_generation_settings_are_listed_when_the_run_generated():
    shown = repro_card.shaping_parameters(repro_card.effective_parameters(
        {"generate": True, "policy_model": "/data/alice/policy", "temperature": 0.7, "generation_batch_size": 8}))
    assert shown["temperature"] == 0.7 and shown["policy_model"] == "policy" and "generation_batch_size" not in shown
    assert "temperature" not in repro_card.shaping_parameters(repro_card.effective_parameters({"generate": False}))


def test_a_value_idle_by_the_runs_own_values_is_not_one_that_shaped_the_data(demo_run_copy):
    # a run given `--set length_penalty=0.5` (its selection best_worst) listed `length_penalty` 0.5 among the
    # parameters that shaped the data, and its rebuild command carried `--set length_penalty=0.5` (said not used)
    shown = shaping_parameters(repro_card.effective_parameters({"length_penalty": 0.5, "selection_seed": 3}))
    assert not shown.keys() & {"length_penalty", "selection_seed"} and shown["selection"] == "best_worst"
    assert shaping_parameters(repro_card.effective_parameters(
        {"length_penalty": 0.5, "selection": "best_worst_length_penalised"}))["length_penalty"] == 0.5
    with Manifest(RunDir(demo_run_copy)).edit() as data:
        data["parameters"].update(length_penalty=0.5, selection_seed=3)  # (recorded as given)
    en, zh = halves(card_for(demo_run_copy)[1])
    assert code_blocks(en, "bash") == code_blocks(zh, "bash") == [
        "repro run params/demo.yaml --out runs/rebuild --set cache=false --set batch_tokens=2048 --set chunk_size=16"]
    assert "length_penalty" not in en + zh and "selection_seed" not in en + zh


def test_a_selm_run_is_described_as_it_was_made(tmp_path):
    # SELM: one greedy reference generated, the pair ranked by a stand-in, no score columns, no 02_analyze. Its card
    # said "0 [candidates] per prompt ... at most 1024 new tokens", that score_chosen and score_rejected (absent)
    # came from the stand-in, and to run 02_analyze, which has no scores to read
    rows = [{k: r[k] for k in FORMATS["selm"].columns} for r in seed_rows(12)]
    run = make_run(tmp_path / "run", rows, FORMATS["selm"].columns, metrics=False)["run"]
    Manifest(run).record("generation", {"policy_model": "builtin:tiny-policy", "stand_in": True, "n_candidates": 0,
                                        "generate_reference": True, "reference_max_new_tokens": 6,
                                        "max_new_tokens": 1024, "temperature": 0.7, "top_p": 1.0,
                                        "generation_seed": 0})
    _, card_path = card_for(run.root)
    en, zh = halves(card_path)
    assert ("`reference_response` was generated here by `builtin:tiny-policy`, greedily (temperature 0), at most 6 "
            "new tokens; no candidate was generated.") in en and "1024" not in en
    assert "`reference_response` 由 `builtin:tiny-policy` 在本项目中以贪心方式（temperature 0）生成，最多 6 个新 token" in zh
    assert "`score_chosen` and `score_rejected` come from" not in en
    assert "> **Stand-in scores.** The scores that chose `chosen` and `rejected` come from `builtin:tiny-pairrm`" in en
    assert "> **替身分数。** 决定 `chosen` 与 `rejected` 的分数来自 `builtin:tiny-pairrm`，" in zh  # (no space)
    assert "the rows carry no scores to analyse" in en and "02_analyze.ipynb` on this run" not in en
    assert "数据行不含可分析的分数" in zh
    # the generated reference is described as generated, not "carried over from the source"
    assert "A reference response to the prompt, generated here by `builtin:tiny-policy`, greedily (temperature 0)." in en
    assert "提示词的参考回复，由 `builtin:tiny-policy` 在本项目中以贪心方式（temperature 0）生成。" in zh
    assert "carried over from the source" not in en
    # to_trl reads SELM's rows (said, with no recipe: a stand-in ranked them); and no score column is there to be
    # "`score_chosen` = −`score_rejected`"
    assert "`repro.formats.to_trl(ds)` of this project's package `repro` (" in en and "check its format" not in en
    assert "Scale of the scores" not in en and "`score_chosen` = −`score_rejected`" not in en


def test_a_selm_cards_trl_paragraph_has_no_scores_to_filter_by(tmp_path):
    # SELM's layout has no scores (to_trl gives null margins), yet "How to use" printed the tie filter
    # `row["score_margin"] > 0`, a TypeError on its rows, and promised to keep `score_chosen`, `score_rejected`
    rows = [{k: r[k] for k in FORMATS["selm"].columns} for r in seed_rows(12)]
    run = make_run(tmp_path / "run", rows, FORMATS["selm"].columns, metrics=False, stand_in=False)["run"]
    en, zh = halves(card_for(run.root)[1])
    use_en, use_zh = part(en, "## How to use"), part(zh, "## 使用方法")
    converted = to_trl(datasets.Dataset.from_list(rows, features=FORMATS["selm"].columns))
    assert converted.column_names == ["prompt_id", "prompt", "chosen", "rejected"]  # (null scores and margins before)
    assert "score_margin" not in use_en and "score_margin" not in use_zh
    assert "`score_chosen`" not in use_en and "`score_chosen`" not in use_zh
    assert "train = to_trl(ds)" in use_en and "keeping `prompt_id`." in use_en and "保留 `prompt_id`。" in use_zh


def test_an_rlhflow_cards_trl_paragraph_describes_its_own_columns(tmp_path):
    # RLHFlow's `prompt` is the conversation and `chosen` / `rejected` are strings, and its rows have no `prompt_id`
    # (to_trl adds the prompt's sha256); the card said the reverse of the first and to keep the missing column
    ds = recipe_rows("rlhflow")
    make_run(tmp_path / "run", ds.to_list(), ds.features, metrics=False, stand_in=False)
    en, zh = halves(card_for(tmp_path / "run")[1])
    use_en, use_zh = part(en, "## How to use"), part(zh, "## 使用方法")
    assert "prompt_id" not in ds.column_names and isinstance(ds[0]["prompt"], list) and isinstance(ds[0]["chosen"], str)
    converted = to_trl(ds)
    assert converted["prompt_id"] == [hashlib.sha256(p[0]["content"].encode()).hexdigest() for p in ds["prompt"]]
    assert "Beside the string `chosen` / `rejected`, the conversational `prompt` makes TRL" in use_en
    assert "the string `prompt`" not in use_en and "keeping `prompt_id`" not in use_en
    assert "Keep `prompt_id` as the key" not in use_en
    assert "adding `prompt_id` = the sha256 of the prompt (the rows have none)" in use_en
    assert "`chosen` / `rejected` 为字符串，而 `prompt` 为对话式" in use_zh and "保留 `prompt_id`" not in use_zh
    assert "请以 `prompt_id` 作为键" not in use_zh and "新增 `prompt_id` = 提示词的 sha256（数据行中没有）" in use_zh
    # an empty chosen text: the card's code leaves it out by RLHFlow's string column (it counted conversations only)
    rows = ds.to_list()
    rows[0]["chosen"] = ""
    make_run(tmp_path / "empty", rows, ds.features, metrics=False, stand_in=False)
    use_en = part(halves(card_for(tmp_path / "empty")[1])[0], "## How to use")
    assert ('# 1 row with an empty chosen response: to_trl refuses it (DPO learns toward the chosen one)\n'
            'ds = ds.filter(lambda row: row["chosen"].strip() != "")\n```') in use_en
    empty = datasets.Dataset.from_list(rows, features=ds.features)
    assert len(to_trl(empty.filter(lambda row: row["chosen"].strip() != ""))) == len(rows) - 1


def test_a_card_of_rows_all_conversations_says_trl_trains_on_the_prompt_twice(tmp_path, train_rows):
    """RLHFlow's pair table: `prompt`, `chosen` and `rejected` all conversations, `chosen` / `rejected` the whole
    conversation. The card said "Beside the string `chosen` / `rejected`, the conversational `prompt` makes TRL stop
    with a `TypeError`": none is a string, and TRL raises nothing (tests/test_formats.py shows what it does)."""
    rows = [{"prompt": [{"content": r["prompt"], "role": "user"}], "chosen": r["chosen"], "rejected": r["rejected"],
             "margin": 1.5} for r in train_rows[:12]]
    path = tmp_path / "rlhflow_pairs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    facts, card_path = card_for(tmp_path / "run", card_dataset=str(path), known_recipe={"scorer": "my-org/rm"})
    assert facts.conversations == ["prompt", "chosen", "rejected"] and facts.for_training
    en, zh = (part(half, heading) for half, heading in zip(halves(card_path), ("## How to use", "## 使用方法")))
    assert ("the columns as stored are not a format `DPOTrainer` reads correctly. Beside the conversational "
            "`prompt`, `chosen` / `rejected` hold the whole conversation, the prompt's turns included: TRL 1.16.0 "
            "raises no error but appends them to `prompt`, so every sequence it trains on holds the prompt's turns "
            "twice (the second time as part of the response). Convert the rows") in en
    assert ("按存储原样的列不是 `DPOTrainer` 能正确读取的格式。`prompt` 为对话式，而 `chosen` / `rejected` "
            "为含提示词轮次的完整对话：TRL 1.16.0 不会报错，但会把它们接在 `prompt` 之后，"
            "因此它训练的每个序列都含有两遍提示词的轮次（第二遍计入回复）。请先把各行转换") in zh
    assert "TypeError" not in en + zh and "string `chosen`" not in en and "为字符串" not in zh


def test_an_sppo_card_says_what_its_scorer_saw_and_what_probability_is_over(tmp_path):
    # SPPO's distinctive step, PairRM over the chat-templated prompt, was only in the parameters table; and with the
    # original pair scored first (7 rm_scores for 5 generate_i) the Features table said `probability` was over "the
    # candidates' scores" while Output format said (truly) the first 5 of `rm_scores`
    ds = recipe_rows("sppo")
    run = make_run(tmp_path / "run", ds.to_list(), ds.features, metrics=False)["run"]
    with Manifest(run).edit() as data:
        data["parameters"].update(output_format="sppo", scorer_prompt="chat_template",
                                  scorer_prompt_tokenizer="mistralai/Mistral-7B-Instruct-v0.2")
    en, zh = (section(half, heading) for half, heading in zip(halves(card_for(run.root)[1]),
                                                              ("### Candidates and scoring", "### 候选回复与打分")))
    assert "The scorer saw each prompt as `mistralai/Mistral-7B-Instruct-v0.2`'s chat template renders it " \
           "(`scorer_prompt: chat_template`, SPPO's `rank.py`)" in en
    assert "评分器看到的每个提示词都经过 `mistralai/Mistral-7B-Instruct-v0.2` 的对话模板渲染" in zh
    en, zh = halves(card_for(run.root)[1])
    probability = table_rows(en, "`probability`")[0][-1]
    assert "over the candidates" in probability and "s the candidates' scores" in probability
    with Manifest(run).edit() as data:
        data["parameters"].update(include_original_pair=True, original_pair_position="first_scored_only",
                                  scorer_prompt="raw")
    en, zh = halves(card_for(run.root)[1])
    generated = sum(c.startswith("generate_") for c in ds.column_names)
    assert f"`probability` is over the first {generated} scores" in en  # Output format
    probability = table_rows(en, "`probability`")[0][-1]
    assert f"over the first {generated} scores of `rm_scores`" in probability and "candidates" not in probability
    assert f"前 {generated} 个 `rm_scores` 得分" in table_rows(zh, "`probability`")[0][-1]
    assert all("candidates" not in table_rows(en, f"`{c}`")[0][-1] for c in ("chosen_probs_win", "chosen_probs_lose"))
    assert "The scorer saw each prompt" not in en and "评分器看到的每个提示词" not in zh


def test_generation_with_a_seed_per_candidate_names_those_seeds(tmp_path):
    # SPPO draws candidate k with seed candidate_seeds[k]; the card said "seed 0" (generation_seed, unused then)
    run = make_run(tmp_path / "run", metrics=False)["run"]
    Manifest(run).record("generation", {"policy_model": "builtin:tiny-policy", "stand_in": True, "n_candidates": 3,
                                        "generate_reference": False, "max_new_tokens": 64, "temperature": 1.0,
                                        "top_p": 0.9, "generation_seed": 0, "candidate_seeds": [0, 50, 100]})
    en, zh = halves(card_for(run.root)[1])
    assert "3 per prompt, temperature 1, top_p 0.9, at most 64 new tokens, seeds 0, 50, 100 (one per candidate)." in en
    assert "最多 64 个新 token，随机种子 0、50、100（每个候选一个）。" in zh


def test_preview_links_the_figures_from_the_notebook_and_the_card_keeps_relative_links(tmp_path, monkeypatch):
    make_run(tmp_path / "run")
    facts, card_path = card_for(tmp_path / "run")
    notebooks = tmp_path / "project" / "notebooks"
    notebooks.mkdir(parents=True)
    monkeypatch.chdir(notebooks)  # JupyterLab starts the kernel in the notebook's folder
    shown = repro_card.preview_markdown(card_path)
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", shown)
    assert len(links) == 2 * len(facts.figures) and "data:image" not in shown  # both halves, nothing inlined
    assert links[0] == "../../run/dataset/figures/score_ecdf.png"
    assert all((notebooks / link).resolve().is_file() for link in links)
    assert card_path.read_text(encoding="utf-8").count("](figures/") == 2 * len(facts.figures)
    # under repro run, 03_card is executed into the run's notebooks/: the links start there
    Manifest(RunDir(tmp_path / "run")).notebook_status("03_card", "running", executed="notebooks/03_card.ipynb")
    assert re.findall(r"!\[[^\]]*\]\(([^)]+)\)", repro_card.preview_markdown(card_path))[0] == \
        "../dataset/figures/score_ecdf.png"


def test_english_and_chinese_state_the_same_numbers(tmp_path):
    make_run(tmp_path / "run")
    _, card_path = card_for(tmp_path / "run")
    # figure captions aside: the Chinese ones state n, as the analysis' titles do (this run's made-up titles may not)
    en, zh = (re.sub(r"!\[[^\]]*\]", "", half) for half in halves(card_path))
    number = r"(?<![\w.])-?\d+(?:\.\d+)?(?:e[-+]?\d+)?"
    assert Counter(re.findall(number, en)) == Counter(re.findall(number, zh))
    assert len(re.findall(number, en)) > 80


def test_no_template_placeholders_and_nothing_unfilled(tmp_path):
    make_run(tmp_path / "run")
    _, card_path = card_for(tmp_path / "run")
    text = card_path.read_text(encoding="utf-8")
    seed_placeholders = ["More Information needed", "需补充更多信息", "[More Information Needed]"]
    assert not [p for p in seed_placeholders + ["{{", "}}", "TODO"] if p.lower() in text.lower()]
    assert not re.search(r"\bNone\b|\bnan\b|\{[a-z_]+\}", DatasetCard.load(card_path).text)


def test_the_card_says_where_the_repro_it_names_is(tmp_path):
    """The card had readers install "this project's package `repro`" and never said where it is: `pip install repro`
    installs an unrelated PyPI project without `repro.formats`. It names the checkout's origin and commit where the
    manifest records them, else that it is not that PyPI package and is installed from its repository's clone."""
    sha = "6c5767ef7429aff13475f1e0630d3a55879ef789"
    for name, stand_in in (("trained", False), ("stand_in", True)):
        make_run(tmp_path / name, stand_in=stand_in)
    with Manifest(RunDir(tmp_path / "trained")).edit() as data:
        data["environment"]["git"] = {"commit": sha, "dirty": False, "origin": "https://github.com/owner/repro.git"}
    en, zh = (part(half, heading) for half, heading in zip(halves(card_for(tmp_path / "trained")[1]),
                                                          ("## How to use", "## 使用方法")))
    assert f"With this project's package `repro` (https://github.com/owner/repro.git, commit `{sha}`) installed:" in en
    assert f"已安装本项目的 `repro`（https://github.com/owner/repro.git，提交 `{sha}`）包时：" in zh
    with Manifest(RunDir(tmp_path / "stand_in")).edit() as data:
        data["environment"]["git"] = {"commit": sha, "dirty": False}  # no public origin (none, or a local path)
    en, zh = (part(half, heading) for half, heading in zip(halves(card_for(tmp_path / "stand_in")[1]),
                                                          ("## How to use", "## 使用方法")))
    assert ("`repro.formats.to_trl(ds)` of this project's package `repro` (not the PyPI package of that name: in a "
            f"clone of its repository, check out commit `{sha}`, then install it with `pip install -e .` or "
            "`make install`) converts the rows") in en
    assert ("；本项目的 `repro`（不是 PyPI 上的同名包：请在其仓库的克隆中检出提交 "
            f"`{sha}`，用 `pip install -e .` 或 `make install` 安装）包中的 `repro.formats.to_trl(ds)` 可将") in zh


def test_environment_states_the_lock(tmp_path):
    """The manifest's `environment.lock`: the locked environment by the lock's sha256, or the packages that differ."""
    make_run(tmp_path / "run", stand_in=False)
    sha = hashlib.sha256(b"a lock file").hexdigest()
    manifest_path = tmp_path / "run" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["environment"].pop("lock")  # a manifest written before the lock existed
    manifest_path.write_text(json.dumps(manifest))
    _, card_path = card_for(tmp_path / "run")
    assert "requirements.lock" not in card_path.read_text(encoding="utf-8")  # an older manifest: nothing said
    lock = {"file": "requirements.lock", "sha256": sha, "locked": True, "differs": []}
    manifest["environment"]["lock"] = lock
    manifest_path.write_text(json.dumps(manifest))
    en, zh = halves(card_for(tmp_path / "run")[1])
    assert f"The environment is the locked one (`requirements.lock`, sha256 {sha[:12]})." in section(en, "### Environment")
    assert f"运行环境即锁定的环境（`requirements.lock`，sha256 {sha[:12]}）。" in section(zh, "### 运行环境")
    lock.update(locked=False, differs=[{"package": "torch", "locked": "2.13.0+cpu", "installed": "2.13.0+cu128"},
                                       {"package": "vllm", "locked": "0.11.0", "installed": None}])
    manifest_path.write_text(json.dumps(manifest))
    en, zh = halves(card_for(tmp_path / "run")[1])
    assert (f"The environment differs from the locked one (`requirements.lock`, sha256 {sha[:12]}): torch locked "
            f"2.13.0+cpu, installed 2.13.0+cu128; vllm locked 0.11.0, not installed.") in en
    assert (f"运行环境与锁定的环境（`requirements.lock`，sha256 {sha[:12]}）不同：torch 锁定为 2.13.0+cpu，实际安装 "
            f"2.13.0+cu128；vllm 锁定为 0.11.0，未安装。") in zh
    assert sha[:13] not in en + zh


def test_every_language_says_the_same_things():
    """A translation defines every word and sentence of the English templates, with the same blanks in their order."""
    def said(lang):
        module = repro_card.phrases(lang)
        return {name: list(getattr(value, "arguments", ())) for name, value in vars(module).items()
                if not name.startswith("_")}

    english = said("en")
    assert len(english) > 150 and english["summary_built"] == [
        "splits", "source", "source_split", "candidates", "scorer", "pair"]
    chinese = said("zh")
    assert chinese.keys() == english.keys()
    # in the same order too: sections.jinja passes some by position (`t.k_of_n(k, n)`), and a translation that swapped
    # them to (n, k) read "40 of 22" with its blanks all there
    differ = {name: (", ".join(chinese[name]), ", ".join(english[name])) for name in english
              if chinese[name] != english[name]}
    assert not differ, "; ".join(f"zh.jinja has {name}({zh}), en.jinja {name}({en}): keep the arguments in English's "
                                 f"order" for name, (zh, en) in differ.items())


def test_an_edited_template_is_read_at_the_next_render(tmp_path, monkeypatch):
    # the templates were read once per process: a translator who edited zh.jinja and ran 03_card again in the same
    # kernel saw the old sentence until the kernel restarted
    make_run(tmp_path / "run")
    facts = repro_card.gather_facts(build(CardParams, {"run_dir": str(tmp_path / "run")}))
    publish_module = importlib.import_module("repro.card.publish")
    templates = tmp_path / "templates"
    shutil.copytree(publish_module.TEMPLATES, templates)
    monkeypatch.setattr(publish_module, "TEMPLATES", templates)
    assert "\n## 数据集概述\n" in repro_card.render_body(facts)
    zh = templates / "zh.jinja"
    zh.write_text(zh.read_text(encoding="utf-8").replace("## 数据集概述", "## 概述"), encoding="utf-8")
    body = repro_card.render_body(facts)
    assert "\n## 概述\n" in body and "数据集概述" not in body and repro_card.phrases("zh").h_summary == "## 概述"
    assert "A preference dataset of 24 rows" in repro_card.render_section(facts, "summary", "en")


def test_the_chinese_half_joins_its_lists_and_clauses_with_its_own_marks(tmp_path):
    """The Chinese half joined lists with English commas ("`train_prefs` 划分 24 行, `test` 划分 3 行", "软件包：repro
    0.1.0, torch 2.4.0", "未运行的检查：`a`, `b`"), its schema's two clauses with a list's mark ("缺少
    `reference_response`、种子数据集没有的列 `source_index`"), and wrote a boolean as "false"."""
    rows = [{**{k: v for k, v in r.items() if k != "reference_response"}, "source_index": i}
            for i, r in enumerate(seed_rows(24))]
    features = datasets.Features({**{k: v for k, v in SEED_FEATURES.items() if k != "reference_response"},
                                  "source_index": datasets.Value("int64")})
    make_run(tmp_path / "run", rows, features)
    versions = {"repro": "0.1.0", "torch": "2.4.0"}
    with Manifest(RunDir(tmp_path / "run")).edit() as data:
        data["environment"] = {"python": "3.11.7", "packages": versions, "git": {"commit": "abc123", "dirty": False}}
        data["selfcheck"] = {"verdict": "INCOMPLETE", "device": "cpu", "dtype": "fp32", "model": "builtin:tiny-pairrm",
                             "versions": versions, "not_run": ["card_example", "gpu_throughput"]}
    facts = repro_card.gather_facts(build(CardParams, {"run_dir": str(tmp_path / "run")}))
    facts.splits.append(repro_card.SplitFacts(name="test", num_bytes=10, num_examples=3, download_size=10))
    body = repro_card.render_body(facts)
    en, zh = body[:body.index("# 「")], body[body.index("# 「"):]
    assert "A preference dataset of 24 rows in split `train_prefs`, 3 rows in split `test`, built" in en
    assert "一个偏好数据集（`train_prefs` 划分 24 行、`test` 划分 3 行），" in zh
    assert ("(the one this project rebuilds): missing `reference_response`; not in the seed `source_index`." in en)
    assert "（本项目所重建的数据集）的结构不同：缺少 `reference_response`；种子数据集没有的列 `source_index`。" in zh
    assert "Python 3.11.7; packages: repro 0.1.0, torch 2.4.0; git commit `abc123` (uncommitted changes: false)." in en
    assert "Python 3.11.7；软件包：repro 0.1.0、torch 2.4.0；git 提交 `abc123`（存在未提交的修改：否）。" in zh
    assert ("model `builtin:tiny-pairrm`; repro 0.1.0, torch 2.4.0. Checks not run: `card_example`, "
            "`gpu_throughput`.") in en
    assert ("模型 `builtin:tiny-pairrm`；repro 0.1.0、torch 2.4.0。未运行的检查："
            "`card_example`、`gpu_throughput`。") in zh
    # the length bias' asides, in each half's own brackets ("ρ = 0.06 (字符、p = 0.70)" had English ones), their
    # facts (a count, a unit, a p-value) apart with the comma, not the mark of a list of one kind ("（字符、p = 0.70）")
    bias_en = next(line for line in en.splitlines() if line.startswith("- Length bias:"))
    bias_zh = next(line for line in zh.splitlines() if line.startswith("- 长度偏差："))
    assert re.search(r"ρ = [-\d.]+ \(characters, p = ", bias_en) and re.search(r"ρ = [-\d.]+（字符，p = ", bias_zh)
    assert re.search(r"% \(\d+ of \d+, characters, sign test p = ", bias_en)
    assert re.search(r"%（\d+ 对中的 \d+ 对，字符，符号检验 p = ", bias_zh) and " (" not in bias_zh


def test_gather_facts_reads_what_the_run_recorded(tmp_path, compared_run):
    make_run(tmp_path / "run", stand_in=False)
    manifest_path = tmp_path / "run" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["selfcheck"] = {"verdict": "PASS", "device": "cuda", "model": "llm-blender/PairRM"}
    manifest["scorers"] = [{"name": "primary", "column": "candidate_scores", "decides_pairs": True}]
    manifest_path.write_text(json.dumps(manifest))
    comparison = json.loads((compared_run / "compare.json").read_text())  # (what 04_compare writes)
    (tmp_path / "run" / "compare.json").write_text(json.dumps(comparison))
    facts = repro_card.gather_facts(build(CardParams, {"run_dir": str(tmp_path / "run")}))
    assert facts.selfcheck == manifest["selfcheck"] and facts.scorers == manifest["scorers"]
    assert facts.comparison == comparison and facts.built_here


def test_the_rows_another_scorer_cut_are_stated_too(tmp_path):
    # a second reward model (max_length 512) cut 23 of 30 rows' conversations, so 7 rows had every candidate scored
    # alike; the card stated the primary scorer's truncation only
    make_run(tmp_path / "run")
    manifest_path = tmp_path / "run" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["scorers"] = [
        {"name": "primary", "column": "candidate_scores", "decides_pairs": True, "model": "builtin:tiny-pairrm"},
        {"name": "rm_deb", "column": "candidate_scores_rm_deb", "decides_pairs": False, "kind": "sequence_classifier",
         "model": "builtin:tiny-reward-deberta", "max_length": 512, "rows_truncated": 23}]
    manifest_path.write_text(json.dumps(manifest))
    en, zh = halves(card_for(tmp_path / "run")[1])
    assert "`rm_deb` cut the conversations of 23 rows to their first 512 tokens (candidates cut alike score alike)." in en
    assert "`rm_deb` 将 23 行的对话截断为前 512 个 token（截断后相同的候选得分相同）。" in zh


def test_stand_in_scorers_are_marked_among_several(tmp_path):
    # the primary stand-in was called "(PairRM)" and the further stand-ins were not marked at all
    make_run(tmp_path / "run")
    manifest_path = tmp_path / "run" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["scorers"] = [
        {"name": "primary", "column": "candidate_scores", "decides_pairs": True, "model": "builtin:tiny-pairrm",
         "stand_in": True},
        {"name": "deb", "column": "candidate_scores_deb", "decides_pairs": False, "kind": "sequence_classifier",
         "model": "builtin:tiny-reward-deberta", "stand_in": True},
        {"name": "real", "column": "candidate_scores_real", "decides_pairs": False, "kind": "sequence_classifier",
         "model": "my-org/reward-8b", "stand_in": False}]
    manifest_path.write_text(json.dumps(manifest))
    en, zh = halves(card_for(tmp_path / "run")[1])
    assert "decided by the primary scorer `builtin:tiny-pairrm` (a stand-in, not PairRM)." in en
    # a reward-model stand-in is no stand-in for PairRM
    assert ("`deb`: `builtin:tiny-reward-deberta` (a stand-in, not a trained reward model) (column "
            "`candidate_scores_deb`)") in en
    assert "`real`: `my-org/reward-8b` (column `candidate_scores_real`)" in en and "(PairRM)" not in en
    assert "由主评分模型 `builtin:tiny-pairrm`（替身评分器，并非 PairRM）决定。" in zh and "（PairRM）" not in zh
    assert "`deb`：`builtin:tiny-reward-deberta`（替身评分器，并非训练所得的奖励模型）（列 `candidate_scores_deb`）" in zh


def test_one_row_is_one_row(tmp_path):
    # a one-row run's card said "A preference dataset of 1 rows", "Small size: 1 rows", ...
    make_run(tmp_path / "run", seed_rows(1), metrics=False)
    manifest = Manifest(RunDir(tmp_path / "run"))
    manifest.update(parameters={**manifest.read()["parameters"], "limit": 1, "ties": "drop", "min_margin": 0.5})
    manifest.set_counts(dropped_tie=1, dropped_below_min_margin=1)
    with manifest.edit() as data:
        data["scorer"].update(batch_tokens=2048, prompts=1, cache={"rows_from_cache": 1})
    en, zh = halves(card_for(tmp_path / "run")[1])
    assert " The 1 row scored came from the row cache (`cache: true`)" in en  # (it said "1 of the 1 rows scored")
    assert "打分的 1 行，来自行缓存（`cache: true`）" in zh
    assert "(`ties: drop`): 1 row." in en and "are left out: 1 row." in en
    assert "A preference dataset of 1 row in split `train_prefs`," in en and "Small size: 1 row, out of 6 rows" in en
    assert "Only the first 1 row was kept (`limit`)." in en and "2 candidates in 1 row." in en
    assert "It equals the sha256 hex digest of the UTF-8 `prompt` in the 1 row." in en  # (it said "in 1 of 1 rows")
    assert re.findall(r"(?<!// )\b1 rows", en) == []  # ("n // 1 rows" reads as it should)
    assert "`train_prefs` 划分 1 行" in zh and "规模较小：1 行" in zh



def test_the_counts_of_empty_candidates_dropped_are_explained(tmp_path):
    # empty_candidates: drop's counts (its texts left out, the rows that left with fewer than two) and generation's
    # skipped prompts showed in the counts table with no meaning
    make_run(tmp_path / "run")
    Manifest(RunDir(tmp_path / "run")).set_counts(empty_candidates_dropped=3,
                                                  dropped_fewer_than_two_nonempty_candidates=1,
                                                  test_empty_candidates_dropped=2)
    for half, heading in zip(halves(card_for(tmp_path / "run")[1]), ("### Counts at each stage", "### 各阶段行数")):
        table = section(half, heading)
        for stage, value in (("empty_candidates_dropped", 3), ("dropped_fewer_than_two_nonempty_candidates", 1),
                             ("test_empty_candidates_dropped", 2)):
            [row] = table_rows(table, f"`{stage}`")
            assert int(row[1]) == value and "empty_candidates" in row[2], row
    en, zh = halves(card_for(tmp_path / "run")[1])
    assert "| `empty_candidates_dropped` | 3 | candidates (not rows) left out: empty texts (`empty_candidates: drop`) |" \
        in en
    assert "| `empty_candidates_dropped` | 3 | 被略去的候选（非行）：空文本（`empty_candidates: drop`） |" in zh

def test_the_selection_paragraph_gives_the_rules_own_values(tmp_path):
    # best_random said "seed `selection_seed`" (its value only in the parameters table) and then the best/worst
    # tie rule ("rejected = the last with the lowest"), which is not this rule's
    make_run(tmp_path / "run")
    manifest_path = tmp_path / "run" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["parameters"].update(selection="best_random", selection_seed=3)
    manifest.setdefault("stages", {})["pairs"] = {"tie_rule": "chosen = first highest score, rejected = last lowest"}
    manifest_path.write_text(json.dumps(manifest))
    en, zh = halves(card_for(tmp_path / "run")[1])
    assert "`rejected` a candidate of another text drawn at random (seed `selection_seed`, per `prompt_id`). " \
           "`selection_seed` is 3." in en
    assert "Ties:" not in en and "`selection_seed` 为 3。" in zh


def test_stand_in_scorer_is_stated_at_the_top(tmp_path):
    make_run(tmp_path / "run", stand_in=True)
    _, card_path = card_for(tmp_path / "run")
    for half in halves(card_path):
        second_block = half.strip().split("\n\n")[1]
        assert "builtin:tiny-pairrm" in second_block
        assert "Stand-in scores" in second_block or "替身分数" in second_block
    make_run(tmp_path / "real", stand_in=False)
    facts, card_path = card_for(tmp_path / "real")
    body = DatasetCard.load(card_path).text
    assert "Stand-in" not in body and "替身" not in body
    assert "pairrm" in DatasetCard.load(card_path).data.tags


def test_a_stand_in_reward_model_is_not_called_pairrm(tmp_path):
    make_run(tmp_path / "run", stand_in=True)
    record_scorer(RunDir(tmp_path / "run"), {"model": "builtin:tiny-reward-llama", "dtype": "fp32",
                                             "kind": "sequence_classifier", "stand_in": True})
    _, card_path = card_for(tmp_path / "run")
    english, chinese = (half.strip().split("\n\n")[1] for half in halves(card_path))
    assert "builtin:tiny-reward-llama" in english and "sequence classifier" in english and "PairRM" not in english
    assert "序列分类器" in chinese and "PairRM" not in chinese
    # nor is the stand-in it is said to be in the Limitations
    en, zh = (section(half, heading) for half, heading in zip(halves(card_path), ("## Challenges and limitations",
                                                                                    "## 当前挑战与局限")))
    assert "Stand-in scorer: the scores come from a stand-in reward model built offline" in en and "PairRM" not in en
    assert "替身奖励模型" in zh and "PairRM" not in zh
    # nowhere in the card are its scores PairRM's (its mechanics, scale or uses), nor are stand-in scores for training
    en, zh = halves(card_path)
    for said in ("PairRM compares every ordered pair", "PairRM scores are not ratings", "Studying PairRM",
                 "as PairRM's logits are", "Offline preference optimisation"):
        assert said not in en
    for said in ("PairRM 对每一对有序候选", "PairRM 分数不是评分", "研究 PairRM", "与 PairRM 的 logit 相同", "离线偏好优化"):
        assert said not in zh
    assert "Trying `repro` itself" in section(en, "## Typical uses") and "试用 `repro`" in section(zh, "## 常用场景")
    # a real reward model: the uses of a preference dataset, none of PairRM's
    record_scorer(RunDir(tmp_path / "run"), {"model": "my-org/reward-8b", "dtype": "bf16",
                                             "kind": "sequence_classifier", "stand_in": False})
    Manifest(RunDir(tmp_path / "run")).update(parameters={**Manifest(RunDir(tmp_path / "run")).read()["parameters"],
                                                          "scorer_model": "my-org/reward-8b"})
    facts, card_path = card_for(tmp_path / "run")
    en, _ = halves(card_path)
    assert not facts.pairrm_scores and "Offline preference optimisation" in en and "Studying PairRM" not in en
    assert "PairRM scores are not ratings" not in en and "as a reward model's logits are" in en
    assert "the scores are logit," not in en
    # its length limit, and the rows it cut (which score their candidates alike): not "unknown prompt tokens"
    Manifest(RunDir(tmp_path / "run")).record("scorer", {"model": "my-org/reward-8b", "dtype": "bf16", "device": "cpu",
                                                            "kind": "sequence_classifier", "max_length": 2048,
                                                            "rows_truncated": 3})
    en, zh = halves(card_for(tmp_path / "run")[1])
    assert "device `cpu`, at most 2048 tokens per conversation (prompt and response together)." in en
    assert "3 of the rows scored in this run had a conversation longer than 2048 tokens" in en
    assert "unknown prompt tokens" not in en and "本次打分的行中有 3 行的对话超过 2048 个 token" in zh


def test_usage_snippet_runs(tmp_path, monkeypatch):
    make_run(tmp_path / "run", metrics=False)
    _, card_path = card_for(tmp_path / "run", hub_repo_id="someone/pairs")
    en, _ = halves(card_path)
    assert 'load_dataset("someone/pairs", split="train_prefs")' in re.search(r"```python\n(.*?)```", en, flags=re.S)[1]
    _, card_path = card_for(tmp_path / "run")  # no hub id: the folder by its own name, from the folder above
    code = re.search(r"```python\n(.*?)```", halves(card_path)[0], flags=re.S)[1]
    monkeypatch.chdir(card_path.parent.parent)
    scope: dict = {}
    exec(code, scope)
    assert len(scope["ds"]) == 24 and scope["ds"].features == SEED_FEATURES


def test_rows_without_a_score_are_said_and_dropped_by_the_usage_snippet(tmp_path, monkeypatch):
    # 02_analyze with exclude_nonfinite: the card printed the reasons as a Python dict (English in the Chinese half)
    # and its code stopped on the unscored rows (TypeError in `ds.map`, DataError in `to_trl`)
    from repro.analysis import report as analysis
    from repro.parameters import AnalyzeParams

    # without metrics.json (02_analyze refused the rows) the card had no filter at all and its code failed; the
    # counts it stated ("keeps the 181 of the 200 pairs") were not those of its code's rows (180 of 199)
    rows = seed_rows(24)
    for i in (3, 13):
        rows[i]["score_chosen"] = None
    rows[5]["score_rejected"] = None
    rows[7]["score_rejected"] = float("nan")
    rows[9]["chosen"][-1]["content"] = " "
    make_run(tmp_path / "bare", rows, metrics=False, stand_in=False)
    make_run(tmp_path / "run", rows, metrics=False, stand_in=False)
    analysis.analyze(build(AnalyzeParams, {"run_dir": str(tmp_path / "run"), "bootstrap_resamples": 100,
                                           "exclude_nonfinite": True}))
    for run in ("bare", "run"):
        _, card_path = card_for(tmp_path / run)
        en, zh = halves(card_path)
        if run == "run":
            assert "Excluded rows: 2 whose `score_chosen` is NaN, infinite or missing; 2 whose `score_rejected` is" in en
            assert "被排除的行：`score_chosen` 为 NaN、无穷或缺失的 2 行；`score_rejected` 为 NaN、无穷或缺失的 2 行。" in zh
            assert "{" not in section(en, "## Characteristics").split("|")[0]
        assert "# 4 rows without a finite score in both columns: to_trl refuses them" in en
        for i in (3, 5, 7, 13):  # as it refuses each of them: the NaN one became a score_margin of nan
            with pytest.raises(DataError, match="must be finite numbers"):
                to_trl(datasets.Dataset.from_list([rows[i]], features=SEED_FEATURES))
        monkeypatch.chdir(card_path.parent.parent)
        for half in (en, zh):
            load, _, plain = re.findall(r"```python\n(.*?)```", half, flags=re.S)[:3]
            scope: dict = {}
            exec(load, scope)
            train = to_trl(scope["ds"])
            assert len(scope["ds"]) == len(train) == 19
            exec(plain, scope)
            assert len(scope["train"]) == 19
        kept, n = map(int, re.search(r"keeps the (\d+) of the (\d+) pairs", en).groups())
        assert (kept, n) == (len(train.filter(lambda row: row["score_margin"] > 0)), len(train))


def test_missing_metrics_leaves_sections_out_and_says_why(tmp_path):
    make_run(tmp_path / "run", metrics=False)
    facts, card_path = card_for(tmp_path / "run")
    assert facts.metrics is None and [s for s, _ in facts.left_out] == ["characteristics", "figures"]
    en, zh = halves(card_path)
    assert "Sections left out" in en and "`metrics.json` was not found in the run directory; run" in en
    assert "02_analyze.ipynb" in en and "(`metrics.json`)" not in en  # the name once, not again as its "path"
    assert "省略的章节" in zh and "运行目录中未找到 `metrics.json`；" in zh
    assert "## Characteristics" not in en and "## 数据特点" not in zh
    assert "Length bias: not measured" in en
    assert not (card_path.parent / "figures").exists()
    repro_card.check_card(card_path)  # still a loadable, complete card


def test_a_failed_analysis_is_said_with_its_reason_not_to_be_run_again(tmp_path):
    # 02_analyze failed (one row: it needs two); the card said metrics.json was not found and to run 02_analyze on
    # this run, which fails again. The manifest's record of the failure, as `repro run` writes it, gives the reason
    run = make_run(tmp_path / "run", seed_rows(1), metrics=False)["run"]
    error = (f"Notebook 02_analyze failed at cell 6 (execution count 5): DataError: dataset '{run.dataset}' (split "
             f"'train_prefs') has 1 row with finite scores (of 1); the analysis needs at least 2.\nThe executed "
             f"notebook, with the error and everything that ran before it, is saved at {run.notebooks}/02_analyze.ipynb.")
    Manifest(run).notebook_status("02_analyze", "failed", error=error)
    facts, card_path = card_for(run.root)
    en, zh = halves(card_path)
    said = ("`notebooks/02_analyze.ipynb` failed on this run, so there is no `metrics.json`: Notebook 02_analyze failed "
            "at cell 6 (execution count 5): DataError: dataset 'run/dataset' (split 'train_prefs') has 1 row with "
            "finite scores (of 1); the analysis needs at least 2.")
    assert said in en and "was not found" not in en and "writes them." not in en
    assert "本次运行的 `notebooks/02_analyze.ipynb` 执行失败，因此没有 `metrics.json`：Notebook 02_analyze" in zh
    assert str(tmp_path) not in DatasetCard.load(card_path).text and "saved at" not in en
    assert [s for s, _ in facts.left_out] == ["characteristics", "figures"]
    # once the analysis has run, its failure is history: a card of the run's metrics
    Manifest(run).notebook_status("02_analyze", "done")
    assert "failed on this run" not in halves(card_for(run.root)[1])[0]


def test_metrics_of_other_data_are_refused(tmp_path):
    make_run(tmp_path / "run")
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    metrics["n"] = 1000
    (tmp_path / "run" / "metrics.json").write_text(json.dumps(metrics))
    with pytest.raises(DataError, match="metrics belong to other data"):
        card_for(tmp_path / "run")


def test_metrics_of_other_scores_in_as_many_rows_are_refused(tmp_path):
    # the data changed after 02_analyze, its row count did not: the card published the old statistics beside it
    from repro.analysis import report as analysis
    from repro.parameters import AnalyzeParams

    made = make_run(tmp_path / "run", seed_rows(30), metrics=False)
    analysis.analyze(build(AnalyzeParams, {"run_dir": str(tmp_path / "run"), "bootstrap_resamples": 100}))
    card_for(tmp_path / "run")  # the scores analysed: the card is written
    write_split(made["ds"].map(lambda r: {"score_chosen": r["score_chosen"] + 100}), made["run"].dataset)
    with pytest.raises(DataError, match=r"metrics.json describes other scores than .*dataset.*: the data changed "
                                        r"after notebooks/02_analyze.ipynb ran. Re-run it on this run"):
        card_for(tmp_path / "run")


def test_a_damaged_run_is_refused_naming_what_to_redo(tmp_path):
    run = make_run(tmp_path / "run")["run"]
    good = run.metrics.read_text()
    run.metrics.write_text(good[: len(good) // 2])  # cut short
    with pytest.raises(DataError, match=r"metrics.json is not JSON .*run notebooks/02_analyze.ipynb again on this "
                                        r"run, or delete the file"):
        card_for(tmp_path / "run")
    run.metrics.write_text(good)
    manifest = json.loads(run.manifest.read_text())
    manifest["counts"]["kept"] += 1  # the data changed after construction
    run.manifest.write_text(json.dumps(manifest))
    with pytest.raises(DataError, match=r"says 25 rows were kept, but \S+ holds 24; the data changed after "
                                        r"construction\. Re-run notebooks/01_construct.ipynb"):
        card_for(tmp_path / "run")
    manifest["counts"]["kept"] -= 1
    run.manifest.write_text(json.dumps(manifest))
    with pytest.raises(ParameterError, match="known_recipe is for datasets this project did not build"):
        card_for(tmp_path / "run", known_recipe="PairRM-ranked pairs")


def test_a_dataset_with_other_columns_gets_its_own_columns(tmp_path):
    features = datasets.Features({"question": datasets.Value("string"),
                                  "answers": datasets.List(datasets.Value("string")),
                                  "label": datasets.ClassLabel(names=["bad", "good"]),
                                  "grid": datasets.List(datasets.List(datasets.Value("float64")))})
    rows = [{"question": f"q{i}", "answers": [f"a{i}", f"b{i}"], "label": i % 2, "grid": [[0.5]]} for i in range(10)]
    make_run(tmp_path / "run", rows, features, metrics=False)
    facts, card_path = card_for(tmp_path / "run")
    card = DatasetCard.load(card_path)
    assert [f["name"] for f in card.data.dataset_info["features"]] == ["question", "answers", "label", "grid"]
    en, zh = halves(card_path)
    assert table_rows(en, "`question`")[0][1] == "string"
    assert table_rows(en, "`answers`")[0][1] == "list of string"
    assert table_rows(en, "`label`")[0][1] == "class label (bad, good)"
    assert table_rows(en, "`grid`")[0][1] == "list of list of float64"
    # Chinese said "列表，元素为 列表，元素为 float64" and "类别标签（bad, good）"
    assert [table_rows(zh, f"`{name}`")[0][1] for name in ("answers", "label", "grid")] == [
        "列表（元素为 string）", "类别标签（bad、good）", "列表（元素为列表（元素为 float64））"]
    assert "missing `prompt`, `prompt_id`," in en and "not in the seed `question`, `answers`, `label`" in en
    for absent in ("`score_chosen`", "`chosen`", "`prompt`"):
        assert not table_rows(en, absent)
    assert "cannot be used for DPO" in en and card.data.task_categories is None
    assert datasets.load_dataset(str(card_path.parent), split="train_prefs").features == features


def test_extra_candidate_columns_and_parameter_defaults(tmp_path):
    from repro.dataset_io import output_features

    rows = [{**r, "candidates": [r["chosen"][1]["content"], "x", r["rejected"][1]["content"]],
             "candidate_scores": [r["score_chosen"], 0.0, r["score_rejected"]]} for r in seed_rows(12)]
    make_run(tmp_path / "run", rows, output_features(keep_all_candidates=True), metrics=False)
    facts, card_path = card_for(tmp_path / "run")
    en, zh = halves(card_path)
    assert "The seed dataset's columns, in its order and types, followed by `candidates`, `candidate_scores`." in en
    assert table_rows(en, "`candidate_scores`")[0][1:] == [
        "list of float64", "The score of each candidate, in the order of `candidates`."]
    # drop_from is not in the recorded parameters: its default ("end") is what the run used
    assert facts.parameters["drop_from"] == "end" and "2 rows were dropped from the end" in en
    assert "从末端丢弃 2 行" in zh
    assert datasets.load_dataset(str(card_path.parent), split="train_prefs").features == facts.features


def test_a_dataset_not_built_here(tmp_path):
    """A local copy of a published dataset (hub layout), with part of its recipe known."""
    copy = make_run(tmp_path / "published", seed_rows(12), manifest=False, metrics=False)["ds"]
    recipe = {"source": "ZHLiu627/ultrafeedback_binarized_with_response_full", "scorer": "llm-blender/PairRM"}
    facts, card_path = card_for(tmp_path / "card-run", card_dataset=str(tmp_path / "published" / "dataset"),
                                known_recipe=recipe, pretty_name="mini_1 copy")
    assert not facts.built_here and facts.parameters == {} and facts.counts == {}
    assert datasets.load_dataset(str(card_path.parent), split="train_prefs").to_list() == copy.to_list()
    recorded = Manifest(RunDir(tmp_path / "card-run")).read()["outputs"]  # the copy, as every output, by its sha256
    shard = card_path.parent / "data" / "train_prefs-00000-of-00001.parquet"
    assert recorded["dataset/data/train_prefs-00000-of-00001.parquet"]["sha256"] == hashlib.sha256(
        shard.read_bytes()).hexdigest()
    en, zh = halves(card_path)
    assert "Not built by this project" in en and "并非由本项目构建" in zh
    assert table_rows(en, "source dataset")[0][1] == "`ZHLiu627/ultrafeedback_binarized_with_response_full`" \
        or table_rows(en, "source dataset")[0][1] == recipe["source"]
    for fact in ("slice", "rows dropped and why", "candidates", "scorer precision", "selection rule", "tie rule"):
        assert table_rows(en, fact)[0][1] == "unknown"
    assert table_rows(zh, "平局处理")[0][1] == "未知"
    assert "### Parameters of this run" not in en and "Stand-in" not in en
    card = DatasetCard.load(card_path)
    assert card.data.source_datasets == [f"extended|{recipe['source']}"] and card.data.pretty_name == "mini_1 copy"
    # told with this machine's paths: the card names each by its last name (its title, its recipe, in both halves)
    recipe = {"source": "/home/alice/data/uf_prefs.jsonl", "scorer": "/home/alice/models/PairRM",
              "candidates": "2 responses of ~/models/my-sft"}
    facts, card_path = card_for(tmp_path / "card-run", card_dataset=str(tmp_path / "published" / "dataset"),
                                known_recipe=recipe, pretty_name="/home/alice/work/mine")
    en, zh = halves(card_path)
    assert "alice" not in card_path.read_text() and "~/" not in card_path.read_text()
    assert table_rows(en, "source dataset")[0][1] == "uf_prefs.jsonl" and table_rows(en, "scorer model")[0][1] == "PairRM"
    assert "2 responses of my-sft" in en and "2 responses of my-sft" in zh
    assert DatasetCard.load(card_path).data.pretty_name == "mine"


def test_a_known_recipe_told_as_uris_scp_paths_or_paths_with_spaces_names_no_user_or_host(tmp_path, monkeypatch):
    """A privacy audit: `known_recipe: {scorer: 'file:///home/alice/…', source: 'alice@vm:/home/alice/…'}` was
    printed whole in both halves of the card, user and host; free text `(source:/home/alice/…)` too."""
    make_run(tmp_path / "published", seed_rows(12), manifest=False, metrics=False)
    theirs = str(tmp_path / "published" / "dataset")
    recipe = {"scorer": "file:///home/alice/models/pairrm", "source": "alice@vm:/home/alice/uf.jsonl",
              "candidates": "2 responses of C:\\Users\\Alice Secret\\my sft"}
    _, card_path = card_for(tmp_path / "run", card_dataset=theirs, known_recipe=recipe)
    en, zh = halves(card_path)
    assert "alice" not in card_path.read_text().lower() and "vm:" not in card_path.read_text()
    assert table_rows(en, "scorer model")[0][1] == "pairrm" and table_rows(en, "source dataset")[0][1] == "uf.jsonl"
    assert "2 responses of my sft" in en and "2 responses of my sft" in zh
    note = "Ranked rows (source:/home/alice/uf.jsonl)"
    _, card_path = card_for(tmp_path / "run2", card_dataset=theirs, known_recipe=note)
    en, zh = halves(card_path)
    assert "Notes given with the dataset: Ranked rows (source:uf.jsonl)" in en and "(source:uf.jsonl)" in zh
    # a path of this home folder by a route no rule above catches (glued to a word): the card is written without it
    home = tmp_path / "alice-Secret"
    monkeypatch.setenv("HOME", str(home))
    _, card_path = card_for(tmp_path / "run3", card_dataset=theirs, known_recipe=f"rows-from{home}/raw data/uf.jsonl")
    assert "alice-Secret" not in card_path.read_text() and "rows-fromuf.jsonl" in halves(card_path)[0]


def test_a_known_recipe_naming_this_machines_home_with_spaces_in_its_name_names_none_of_it(tmp_path, monkeypatch):
    """A verifier: the card said "~ Secret 用户/notes" of this machine's home folder, cut at its "~"."""
    make_run(tmp_path / "published", seed_rows(12), manifest=False, metrics=False)
    home = tmp_path / "v85" / "home" / "Jean Pierre Dupont ~ Secret 用户"  # (this machine's: matched whole)
    monkeypatch.setenv("HOME", str(home))
    recipe = {"scorer": f"{home}/models/PairRM",
              "candidates": f"4 completions from {home}/gen out/run 1/cands.jsonl, and {home}/notes"}
    _, card_path = card_for(tmp_path / "run", card_dataset=str(tmp_path / "published" / "dataset"), known_recipe=recipe)
    assert not {"Jean", "Pierre", "Dupont", "Secret", "用户", "~"} & set(re.findall(r"[^\s/|]+", card_path.read_text()))
    for half in halves(card_path):
        assert "| PairRM |" in half and "| 4 completions from cands.jsonl, and notes |" in half


def test_a_foreign_card_from_scores_alone_claims_nothing_it_was_not_told(tmp_path):
    """Only `score_chosen` / `score_rejected`: no licence, language, source, scorer or family is claimed."""
    rows = tmp_path / "scores.jsonl"
    rows.write_text("".join(json.dumps({"score_chosen": 1.0 + i / 10, "score_rejected": -i / 10}) + "\n"
                            for i in range(12)))
    facts, card_path = card_for(tmp_path / "run", card_dataset=str(rows))
    assert not facts.built_here and facts.license is None and facts.language == []
    card = DatasetCard.load(card_path)
    assert {"license", "language", "source_datasets"}.isdisjoint(card.data.to_dict())
    en, zh = halves(card_path)
    assert "The licence of this dataset is not stated" in en and "Its sources are not known to this project." in en
    assert "本数据集的许可未说明" in zh and "本项目不了解其来源" in zh
    # one score written as text: datasets makes the column JSON text, which the card would publish as is
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text("".join(json.dumps({"score_chosen": "7.5" if i == 5 else 1.0, "score_rejected": 0.0}) + "\n"
                             for i in range(12)))
    with pytest.raises(DataError, match=r"card_dataset '\S*mixed.jsonl': column 'score_chosen' must hold numbers .*"
                                        r"point `card_dataset` at"):
        card_for(tmp_path / "run2", card_dataset=str(mixed))
    assert not (tmp_path / "run2").exists()
    told_nothing = ("UltraFeedback", "PairRM", "HuggingFaceH4", "MIT", "mit", "GPT-4", "llm-blender", "SELM",
                    "SPPO", "Zephyr", "ZHLiu627")
    for text in (en, zh, card.data.to_yaml()):
        assert not [word for word in told_nothing if re.search(rf"\b{re.escape(word)}\b", text)]
    # the seed is named only as what the schema is compared with, never as a source
    assert [line for line in en.splitlines() if SEED_REPO in line] == [
        f"The columns differ from those of the seed dataset `{SEED_REPO}` (the one this project rebuilds): missing "
        + ", ".join(f"`{c}`" for c in SEED_COLUMNS if not c.startswith("score_")) + "."]
    # told: a licence and a source; the card says those, and still no scorer or family
    facts, card_path = card_for(tmp_path / "run", card_dataset=str(rows), license="cc-by-4.0",
                                known_recipe={"source": "someone/rows"})
    card = DatasetCard.load(card_path)
    assert card.data.license == "cc-by-4.0" and card.data.source_datasets == ["extended|someone/rows"]
    en, _ = halves(card_path)
    assert "released under `cc-by-4.0` (as given to this card)" in en and "`known_recipe`: someone/rows." in en
    assert "PairRM" not in en and "UltraFeedback" not in en


def test_a_built_card_names_its_own_sources_and_claims_a_licence_only_where_they_give_one(tmp_path):
    """A built card named UltraFeedback, H4 and PairRM (MIT) as its sources and claimed MIT whatever it was built
    from and scored by: the demo rows with the stand-in, or one's own file with another reward model."""
    run = make_run(tmp_path / "run", metrics=False)["run"]  # the demo rows, the stand-in scorer
    card_path = card_for(run.root)[1]
    card, en = DatasetCard.load(card_path), halves(card_path)[0]
    assert card.data.license == "mit" and card.data.language == ["en"] and card.data.tags[-1] == "stand-in-scores"
    assert "Its sources: the demo prompts and responses that `repro` ships (written for it); a stand-in scorer built " \
           "by `repro` (`builtin:tiny-pairrm`), no third party's weights." in en and "(`openbmb/UltraFeedback`" not in en

    def built_from(source: str, scorer: str) -> tuple[DatasetCard, str, str]:
        with Manifest(run).edit() as data:
            data["parameters"].update(source=source, scorer_model=scorer)
            data["scorer"].update(model=scorer, stand_in=False)
        path = card_for(run.root)[1]
        return DatasetCard.load(path), *halves(path)

    card, en, zh = built_from("ZHLiu627/ultrafeedback_binarized_with_response_full", "llm-blender/PairRM")
    assert card.data.license == "mit" and card.data.tags[-2:] == ["pairrm", "ultrafeedback"]
    assert "Its sources: UltraFeedback (`openbmb/UltraFeedback`, MIT) as binarised in " \
           "`HuggingFaceH4/ultrafeedback_binarized` (MIT), here `ZHLiu627/ultrafeedback_binarized_with_response_full`; " \
           "the scorer PairRM (`llm-blender/PairRM`, MIT)." in en and "评分器 PairRM（`llm-blender/PairRM`，MIT）" in zh
    card, en, zh = built_from("/home/alice/prefs.jsonl", "/home/alice/models/rm")
    assert card.data.license is None and "The licence of this dataset is not stated" in en and "许可未说明" in zh
    assert "Its sources: `prefs.jsonl` (its licence is not known to this project: check it before publishing); the " \
           "scorer `rm` (see its model card for its licence)." in en and "alice" not in card_path.read_text()
    assert card.data.tags[-1] == "reward-model-scores" and "ultrafeedback" not in card.data.tags
    # a local file's licence never rests on its folder's name: the same rows elsewhere got none
    card, en, zh = built_from("/home/alice/ultrafeedback_sample/train_prefs_1000.jsonl", "llm-blender/PairRM")
    assert card.data.license is None and "`train_prefs_1000.jsonl` (its licence is not known to this project" in en
    # nor a hub dataset's on its name: only the UltraFeedback datasets this project knows
    card, en, zh = built_from("someone/ultrafeedback-gpt4-nc-outputs", "llm-blender/PairRM")
    assert card.data.license is None and "`someone/ultrafeedback-gpt4-nc-outputs` (its licence is not known" in en
    card, en, zh = built_from("HuggingFaceH4/ultrafeedback_binarized", "llm-blender/PairRM")
    assert card.data.license == "mit" and "as binarised in `HuggingFaceH4/ultrafeedback_binarized` (MIT); the " in en
    assert "经 `HuggingFaceH4/ultrafeedback_binarized`（MIT）二值化；" in zh
    # responses a policy generated are its outputs, whatever the prompts' licence: no MIT on the source's word
    with Manifest(run).edit() as data:
        data["generation"] = {"policy_model": "mistralai/Mistral-7B-Instruct-v0.2", "stand_in": False}
    card, en, zh = built_from("HuggingFaceH4/ultrafeedback_binarized", "llm-blender/PairRM")
    assert card.data.license is None and "The licence of this dataset is not stated" in en
    assert ("; the responses generated by `mistralai/Mistral-7B-Instruct-v0.2` (see its model card for the terms of "
            "its outputs); the scorer PairRM") in en and "由 `mistralai/Mistral-7B-Instruct-v0.2` 生成的回复" in zh
    with Manifest(run).edit() as data:  # the built-in stand-in policy: repro's own, no third party's terms
        data["generation"] = {"policy_model": "builtin:tiny-policy", "stand_in": True}
    card, en, zh = built_from("HuggingFaceH4/ultrafeedback_binarized", "llm-blender/PairRM")
    assert card.data.license == "mit" and "generated by `builtin:tiny-policy`, a stand-in built by `repro`" in en
    with Manifest(run).edit() as data:  # the demo's prompts, the policy's responses: not "prompts and responses"
        data["parameters"]["source"] = "demo"
    en = halves(card_for(run.root)[1])[0]
    assert "Its sources: the demo prompts that `repro` ships (written for it); the responses generated by" in en


def test_a_copy_of_a_stand_in_dataset_keeps_its_warning_and_tags(tmp_path):
    """A stand-in run's dataset/ copied elsewhere, analysed and carded again: the new card had no stand-in banner nor
    tag, metrics.json said scores_from_stand_in null, and Typical uses recommended DPO on the stand-in's noise."""
    run = make_run(tmp_path / "uf300b")["run"]  # scored by builtin:tiny-pairrm
    Manifest(run).update(generation={"policy_model": "builtin:tiny-policy", "stand_in": True, "n_candidates": 2})
    card_for(run.root)
    stand_in_tags = {"stand-in-scores", "stand-in-candidates"}
    assert stand_in_tags <= set(DatasetCard.load(run.card).data.tags)
    copy = tmp_path / "x" / "alice_ds"
    shutil.copytree(run.dataset, copy)
    metrics = analyze(build(AnalyzeParams, {"dataset": str(copy), "run_dir": str(tmp_path / "alice"),
                                            "bootstrap_resamples": 100})).metrics
    assert metrics["scores_from_stand_in"] is True

    def said(card_path: Path) -> tuple[str, str, str, str]:
        """The top of each half (before the summary) and each half's Typical uses."""
        en, zh = halves(card_path)
        return (en.split("## Summary")[0], zh.split("## 数据集概述")[0], part(en, "## Typical uses"),
                part(zh, "## 常用场景"))

    for copied in (copy, tmp_path / "alice" / "dataset"):  # the copy, then a copy of the copy's card
        facts, card_path = card_for(tmp_path / "alice", card_dataset=str(copied))
        assert not facts.built_here and stand_in_tags <= set(DatasetCard.load(card_path).data.tags)
        top, top_zh, uses, uses_zh = said(card_path)
        assert "**Stand-in scores.** `score_chosen` and `score_rejected` come from a stand-in scorer, as the card " \
               "that came with the data declares (its tag `stand-in-scores`)." in top and "do not train on them" in top
        # declared by the card's tag alone: no policy named (it said "generated by `unknown`"), and where it is said
        assert ("> **Stand-in candidates.** The generated candidate responses come from a stand-in policy (which one "
                "is not known to this card), not a language model worth imitating, as the card that came with the data "
                "declares (its tag `stand-in-candidates`).") in top
        assert "替身分数" in top_zh and "请勿用于训练" in top_zh and "`unknown`" not in top and "`未知`" not in top_zh
        assert "替身候选回复。** 生成的候选回复来自一个替身策略模型（本卡片不知道是哪一个）" in top_zh
        assert "Trying `repro` itself" in uses and "Offline preference optimisation" not in uses
        assert "试用 `repro`" in uses_zh and "离线偏好优化" not in uses_zh
        shutil.copytree(tmp_path / "alice" / "dataset", tmp_path / "x" / "bob_ds", dirs_exist_ok=True)
    # the run's own dataset/ given to another run: the manifest beside it names the stand-ins
    facts, card_path = card_for(tmp_path / "carol", card_dataset=str(run.dataset))
    top, top_zh, uses, _ = said(card_path)
    assert "come from `builtin:tiny-pairrm`, a stand-in ranker" in top
    assert ("> **Stand-in candidates.** The generated candidate responses come from `builtin:tiny-policy`, a stand-in "
            "policy built offline, not a language model worth imitating, as the `manifest.json` of the run that built "
            "the data records.") in top
    assert "`builtin:tiny-pairrm`" in top_zh and "Trying `repro` itself" in uses
    en, zh = halves(card_path)  # its table names the stand-in too (it said "scorer model: unknown")
    assert table_rows(en, "scorer model")[0][1] == ("`builtin:tiny-pairrm` (a stand-in, not PairRM), recorded in the "
                                                    "`manifest.json` of the run that built it")
    assert table_rows(zh, "评分模型")[0][1] == ("`builtin:tiny-pairrm`（替身评分器，并非 PairRM），"
                                              "据构建它的运行的 `manifest.json` 记录")
    # rows alone in a folder holding a stand-in marker
    (tmp_path / "marked" / "data").mkdir(parents=True)
    shutil.copy2(next(copy.glob("data/*.parquet")), tmp_path / "marked" / "data")
    (tmp_path / "marked" / STAND_IN_MARKER).write_text("{}")
    facts, card_path = card_for(tmp_path / "dave", card_dataset=str(tmp_path / "marked"))
    top, top_zh, uses, _ = said(card_path)
    assert "(`repro_stand_in.json`)" in top and "Stand-in candidates" not in top and "Trying `repro`" in uses
    assert DatasetCard.load(card_path).data.tags[-1] == "stand-in-scores"


def test_a_card_of_a_dataset_of_unknown_making_does_not_recommend_training_on_it(tmp_path):
    """A dataset not built here, its scorer not given: Typical uses recommended DPO and reward models on it."""
    make_run(tmp_path / "theirs", stand_in=False, manifest=False, metrics=False)
    theirs = str(tmp_path / "theirs" / "dataset")
    en, zh = halves(card_for(tmp_path / "run", card_dataset=theirs)[1])
    uses, uses_zh = part(en, "## Typical uses"), part(zh, "## 常用场景")
    assert "Offline preference optimisation" not in uses and "离线偏好优化（DPO 及其变体）" not in uses_zh
    assert "what scored these pairs is not known to this card" in uses and "本卡片不知道这些偏好对由什么评分" in uses_zh
    assert "Stand-in" not in en and "替身" not in zh
    # told its scorer: the uses of a preference dataset
    en, zh = halves(card_for(tmp_path / "run", card_dataset=theirs, known_recipe={"scorer": "my-org/rm"})[1])
    assert "Offline preference optimisation" in part(en, "## Typical uses")
    assert "离线偏好优化" in part(zh, "## 常用场景")


def test_a_card_that_advises_against_training_neither_tags_nor_shows_training(tmp_path, sample_dir):
    """A stand-in's scores ("do not train on them", "not for training"), a dataset whose scorer the card does not know
    ("not recommended for training"): the YAML still tagged them `dpo` and "How to use" gave the DPOTrainer recipe."""
    run = built_with_a_stand_in_policy(tmp_path / "run", sample_dir)  # real rows, the stand-in scorer and policy
    bare = tmp_path / "theirs"  # its rows alone: nothing declares what scored them
    shutil.copytree(run.dataset / "data", bare / "data")
    for root, params in ((run.root, {}), (tmp_path / "foreign", {"card_dataset": str(bare)})):
        facts, card_path = card_for(root, **params)
        assert "dpo" not in DatasetCard.load(card_path).data.tags and "preference" in DatasetCard.load(card_path).data.tags
        en, zh = halves(card_path)
        use, use_zh = part(en, "## How to use"), part(zh, "## 使用方法")
        assert ("**For inspection only**: \"Typical uses\" below advises against training on these pairs, so this card "
                "gives no recipe for it; `repro.formats.to_trl(ds)` of this project's package `repro` (") in use
        assert ") converts the rows to TRL's conversational preference format, to look at them as a trainer would" in use
        assert "**仅供查看**：下文“常用场景”不建议在这些偏好对上训练，因此本卡片不给出训练方法" in use_zh
        for text in (use, use_zh):
            assert "DPOTrainer" not in text and "trainer.train()" not in text and "score_margin\"] > 0" not in text
        assert 'load_dataset("' in use  # (loading them stays)
    # told what scored them: the recipe and the tag
    facts, card_path = card_for(tmp_path / "foreign", card_dataset=str(bare), known_recipe={"scorer": "my-org/rm"})
    assert "dpo" in DatasetCard.load(card_path).data.tags
    assert "DPOTrainer" in part(halves(card_path)[0], "## How to use") and "inspection" not in halves(card_path)[0]


def test_a_foreign_dataset_never_replaces_a_built_one(tmp_path):
    make_run(tmp_path / "run", metrics=False)
    make_run(tmp_path / "other", seed_rows(5), manifest=False, metrics=False)
    before = {p: p.read_bytes() for p in (tmp_path / "run").rglob("*") if p.is_file()}
    with pytest.raises(ParameterError, match=r"describes its own dataset \(built there by 01_construct.*"
                                             r"card_dataset='\S*other/dataset' is another dataset.*nothing was written"):
        card_for(tmp_path / "run", card_dataset=str(tmp_path / "other" / "dataset"))
    assert {p: p.read_bytes() for p in (tmp_path / "run").rglob("*") if p.is_file()} == before


def test_no_dataset_is_a_clear_error(tmp_path):
    with pytest.raises(DataError, match="01_construct"):
        card_for(tmp_path / "empty")


def test_no_dataset_writes_nothing_and_leaves_the_run_directory_free(tmp_path):
    # 03_card before 01_construct (the verifier's s16) failed, but made runs/new1/ with a lock and a manifest, and its
    # kernel held that folder: 01_construct in another kernel was refused as busy ("being written by a notebook's
    # kernel"); 02_analyze and 04_compare write nothing there, not even the folder
    with pytest.raises(DataError, match=r"No dataset at \S*new1/dataset: expected data/<split>-00000-of-00001"):
        card_for(tmp_path / "new1")
    assert not (tmp_path / "new1").exists()


def test_card_parameters_are_checked():
    with pytest.raises(ParameterError, match="hub_repo_id"):
        build(CardParams, {"push_to_hub": True})
    with pytest.raises(ParameterError, match="known_recipe"):
        build(CardParams, {"known_recipe": {"source": "x", "recipie": "typo"}})
    with pytest.raises(ParameterError, match=r"unknown fact 'scorr'\. Did you mean 'scorer'\? known_recipe takes"):
        build(CardParams, {"known_recipe": {"scorr": "PairRM"}})
    assert build(CardParams, {}).push_to_hub is False


# ---------------------------------------------------------------------------------------------
# publishing: never reaches the network here
# ---------------------------------------------------------------------------------------------
@pytest.fixture
def hub_calls(monkeypatch):
    """Records any call that would talk to the hub (and stops it)."""
    import huggingface_hub

    calls = []
    for name in ("whoami", "create_repo", "upload_folder"):
        def fake(self, *a, _name=name, **k):
            calls.append(_name)
            raise AssertionError(f"HfApi.{_name} must not be called in this test")
        monkeypatch.setattr(huggingface_hub.HfApi, name, fake)
    return calls


def test_publish_is_off_by_default(tmp_path, hub_calls, capsys):
    make_run(tmp_path / "run", metrics=False)
    card_for(tmp_path / "run")
    assert repro_card.publish(build(CardParams, {"run_dir": str(tmp_path / "run")})) is None
    assert "nothing uploaded" in capsys.readouterr().out and hub_calls == []


@pytest.fixture
def publishable(tmp_path) -> CardParams:
    """A run with its card written, and parameters asking to publish it."""
    make_run(tmp_path / "run", metrics=False)
    card_for(tmp_path / "run")
    with Manifest(tmp_path / "run").edit() as data:  # as 03_card run alone (papermill, JupyterLab) leaves it
        data.update(status="complete", driver="papermill", notebooks={"03_card": {"status": "done"}})
    return build(CardParams, {"run_dir": str(tmp_path / "run"), "push_to_hub": True, "hub_repo_id": "me/pairs"})


@pytest.fixture
def hub_switched_on(monkeypatch):
    from huggingface_hub import constants

    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)


def test_publish_offline_fails_before_uploading(publishable, hub_calls):
    with pytest.raises(repro_card.PublishError, match="HF_HUB_OFFLINE"):
        repro_card.publish(publishable)
    assert hub_calls == []
    # the run's record says so: it said complete, 03_card done, after a publish that failed
    record = Manifest(publishable.run_root).read()
    assert record["status"] == "failed" and record["notebooks"]["03_card"]["status"] == "failed"
    assert record["stages"]["publish"]["status"] == "failed" and "HF_HUB_OFFLINE" in record["error"]
    # 03_card again without publishing: the failed upload is no longer this run's record
    repro_card.write_card(repro_card.gather_facts(publishable.model_copy(update={"push_to_hub": False})))
    repro_card.publish(publishable.model_copy(update={"push_to_hub": False}))
    record = Manifest(publishable.run_root).read()
    assert record["status"] == "complete" and "publish" not in record["stages"]


def test_publish_without_token_fails_before_uploading(publishable, hub_calls, hub_switched_on, monkeypatch, tmp_path):
    from huggingface_hub import constants

    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "no-token"))
    monkeypatch.setattr(constants, "HF_STORED_TOKENS_PATH", str(tmp_path / "no-tokens"))
    with pytest.raises(repro_card.PublishError, match="no Hugging Face token"):
        repro_card.publish(publishable)
    assert hub_calls == []


def test_publish_with_a_refused_token_fails_before_uploading(publishable, hub_calls, hub_switched_on, monkeypatch):
    import huggingface_hub

    monkeypatch.setattr(huggingface_hub, "get_token", lambda: "hf_bad")
    with pytest.raises(repro_card.PublishError, match="did not accept the token or could not be reached"):
        repro_card.publish(publishable)
    assert hub_calls == ["whoami"]  # the check itself; nothing created, nothing uploaded


def test_publish_checks_the_token_then_uploads_the_folder(publishable, hub_switched_on, monkeypatch, capsys):
    """The upload path, with the hub replaced by a recorder (the client itself, as a notebook's or a mirror's set-up
    replaces it after repro is imported): whoami first, then the repo, then the folder."""
    import huggingface_hub

    monkeypatch.setattr(huggingface_hub, "get_token", lambda: "hf_fake")
    calls = []

    class Hub:
        def __init__(self, token=None):
            calls.append(("token", token))

        def whoami(self):
            return calls.append(("whoami",)) or {"name": "me"}

        def create_repo(self, repo_id, **k):
            calls.append(("create_repo", repo_id, k["repo_type"]))
            return huggingface_hub.RepoUrl(f"https://huggingface.co/datasets/{repo_id}")

        def upload_folder(self, **k):
            calls.append(("upload_folder", k))

    monkeypatch.setattr(huggingface_hub, "HfApi", Hub)
    assert repro_card.publish(publishable) == "https://huggingface.co/datasets/me/pairs"
    assert calls.pop(0) == ("token", "hf_fake")
    assert [c[0] for c in calls] == ["whoami", "create_repo", "upload_folder"]
    assert calls[1][1:] == ("me/pairs", "dataset")
    upload = calls[2][1]
    assert upload["folder_path"] == str(publishable.run_root / "dataset") and upload["repo_type"] == "dataset"
    # an earlier push's shards of the same split go (a re-push with fewer shards served stale rows); other splits stay
    assert upload["delete_patterns"] == ["data/train_prefs-*.parquet"]
    assert "https://huggingface.co/datasets/me/pairs" in capsys.readouterr().out
    record = Manifest(publishable.run_root).read()
    assert record["status"] == "complete" and record["stages"]["publish"]["url"] == "https://huggingface.co/datasets/me/pairs"


def test_trls_conversational_rows_are_described_by_their_prompts_text(tmp_path, train_rows):
    """to_trl's rows (`prompt` a [user] conversation, `chosen` / `rejected` the assistant turn) stopped 03_card with
    "AttributeError: 'list' object has no attribute 'encode'"; their prompt is its user turn's text now."""
    rows = [r for r in train_rows[:30] if r["chosen"][-1]["content"].strip()]
    path = tmp_path / "trl.parquet"
    to_trl(datasets.Dataset.from_list(rows)).to_parquet(str(path))
    facts, card_path = card_for(tmp_path / "run", card_dataset=str(path))
    assert facts.layout == "seed" and facts.num_examples == facts.prompt_id_sha256_rows == len(rows)
    en, zh = halves(card_path)  # (of its user turn's text: the prompt is a conversation)
    assert f"sha256 hex digest of the UTF-8 text of `prompt`'s user turn in {len(rows)} of {len(rows)} rows." in en
    assert f"在 {len(rows)} 行中有 {len(rows)} 行等于 `prompt` 中用户轮次的文本（UTF-8）的 sha256 十六进制摘要。" in zh


def test_rows_already_in_trls_format_are_said_to_be_so(tmp_path, monkeypatch, train_rows):
    """to_trl's own rows, carded: "How to use" said `repro.formats.to_trl(ds)` converts them to TRL's conversational
    format, which they are in (to_trl gives them back unchanged); told their scorer, it said their `prompt` is a string
    TRL stops on, and its `ds.map` made every prompt empty (`chosen[:-1]` of the assistant turn alone). TRL's standard
    rows (text) with a `prompt_id`: it said to_trl converts them, and gave `train = to_trl(ds)`, which refuses them."""
    rows = [r for r in train_rows[:30] if r["chosen"][-1]["content"].strip()]
    converted = to_trl(datasets.Dataset.from_list(rows))
    assert to_trl(converted).to_list() == converted.to_list()  # in TRL's format already
    path = tmp_path / "trl.parquet"
    converted.to_parquet(str(path))

    def use(root, spec, **params):
        en, zh = halves(card_for(root, card_dataset=spec, **params)[1])
        return part(en, "## How to use"), part(zh, "## 使用方法")

    en, zh = use(tmp_path / "conv", str(path))
    assert ("so this card gives no recipe for it; the rows are already in TRL's conversational preference "
            "format.\n") in en and "converts" not in en
    assert "因此本卡片不给出训练方法；数据行已是 TRL 的对话式偏好格式。\n" in zh and "转换" not in zh
    assert "```\n\n**For inspection only**" in en and "```\n\n**仅供查看**" in zh  # (a paragraph of its own)
    # told their scorer: DPOTrainer reads them as they are, to_trl checks them; no conversion of them
    en, zh = use(tmp_path / "scored", str(path), known_recipe={"scorer": "my-org/rm"})
    assert ("**With TRL's `DPOTrainer`** (tested with TRL 1.16.0): the rows are already in TRL's conversational "
            "preference format, which `DPOTrainer` reads as they are; `repro.formats.to_trl` checks every row and "
            "keeps that format, with `score_margin` = `score_chosen` − `score_rejected`. With this project's package "
            "`repro` (not the PyPI package of that name: in a clone of its repository, install it with `pip install "
            "-e .` or `make install`) installed:") in en
    assert ("**配合 TRL 的 `DPOTrainer` 使用**（已在 TRL 1.16.0 上测试）：数据行已是 TRL 的对话式偏好格式，"
            "`DPOTrainer` 可按原样读取；`repro.formats.to_trl` 会逐行检查，并保持该格式，其中 `score_margin` = "
            "`score_chosen` − `score_rejected`。已安装本项目的 `repro`（不是 PyPI 上的同名包：请在其仓库的克隆中用 "
            "`pip install -e .` 或 `make install` 安装）包时：") in zh
    for text in (en, zh):
        assert "string `prompt`" not in text and "ds.map(" not in text and "Keeping only" not in text
    assert ("Then `trainer.train()`. `repro.formats.to_trl_implicit(ds)` gives TRL's implicit-prompt format "
            "(`chosen` / `rejected` the whole conversations, no `prompt`), which trains too.") in en
    assert ("然后调用 `trainer.train()`。`repro.formats.to_trl_implicit(ds)` 给出 TRL 的隐式提示词格式（`chosen` / "
            "`rejected` 为完整对话，没有 `prompt`），同样可以训练。") in zh
    monkeypatch.chdir(tmp_path / "scored")  # the card's code gives the rows back, the margin filter runs on them
    scope: dict = {}
    exec(re.findall(r"```python\n(.*?)```", en, flags=re.S)[0], scope)
    assert "\ntrain = to_trl(ds)\n" in en
    scope["train"] = to_trl(scope["ds"])
    assert scope["train"].to_list() == converted.to_list()
    exec(re.search(r"`(train = train\.filter\(.*?\))`", en)[1], scope)
    assert len(scope["train"]) == sum(r["score_chosen"] > r["score_rejected"] for r in rows)
    assert to_trl_implicit(converted).to_list() == to_trl_implicit(datasets.Dataset.from_list(rows)).to_list()
    # TRL's standard rows (text), a prompt_id beside them: no to_trl, which refuses them
    standard = write_rows(tmp_path / "standard.jsonl", [
        {"prompt": r["prompt"], "prompt_id": r["prompt_id"], "chosen": r["chosen"][-1]["content"],
         "rejected": r["rejected"][-1]["content"], "score_chosen": r["score_chosen"],
         "score_rejected": r["score_rejected"]} for r in rows])
    with pytest.raises(DataError, match=r"lacks \['chosen', 'rejected'\] as the seed has them \(`chosen`, `rejected`: "
                                        r"conversations; texts are TRL's standard rows"):
        to_trl(datasets.Dataset.from_json(standard))
    en, zh = use(tmp_path / "standard", standard)
    assert "gives no recipe for it; the rows are already in TRL's standard preference format.\n" in en
    assert "因此本卡片不给出训练方法；数据行已是 TRL 的标准偏好格式。\n" in zh
    en, zh = use(tmp_path / "standard-scored", standard, known_recipe={"scorer": "my-org/rm"})
    assert "to_trl" not in en and "to_trl" not in zh and "check its format against TRL's" not in en


def test_rows_in_trls_format_are_named_so_where_training_is_advised(tmp_path, monkeypatch, train_rows):
    """Told their scorer (training advised), TRL's standard rows and to_trl's rows without a `prompt_id` (to_trl adds
    it) read "check its format against TRL's dataset formats"; polars' large_string standard rows were not known as
    TRL's standard format at all. Now they are named by their format, and to_trl's rows get `train = to_trl(ds)`."""
    rows = [r for r in train_rows[:20] if r["chosen"][-1]["content"].strip()]
    standard = [{"prompt": r["prompt"], "prompt_id": r["prompt_id"], "chosen": r["chosen"][-1]["content"],
                 "rejected": r["rejected"][-1]["content"], "score_chosen": r["score_chosen"],
                 "score_rejected": r["score_rejected"]} for r in rows]
    table = pa.Table.from_pylist(standard)
    large = table.cast(pa.schema([pa.field(f.name, pa.large_string() if f.type == pa.string() else f.type)
                                  for f in table.schema]))
    pq.write_table(table, tmp_path / "std.parquet")
    pq.write_table(large, tmp_path / "std_large.parquet")
    noid = tmp_path / "noid.parquet"
    to_trl(datasets.Dataset.from_list(rows)).remove_columns("prompt_id").to_parquet(str(noid))
    scored = {"known_recipe": {"scorer": "my-org/rm"}}
    for name in ("std", "std_large"):
        facts, card_path = card_for(tmp_path / name, card_dataset=str(tmp_path / f"{name}.parquet"), **scored)
        assert facts.trl_format == "standard" and not facts.trl_ready and facts.chosen_text == 'row["chosen"]'
        en, zh = (part(h, heading) for h, heading in zip(halves(card_path), ("## How to use", "## 使用方法")))
        assert ("**With TRL's `DPOTrainer`** (tested with TRL 1.16.0): the rows are already in TRL's standard "
                "preference format, which `DPOTrainer` reads as they are.") in en
        assert ("**配合 TRL 的 `DPOTrainer` 使用**（已在 TRL 1.16.0 上测试）：数据行已是 TRL 的标准偏好格式，"
                "`DPOTrainer` 可按原样读取。") in zh
        assert "check its format" not in en and "to_trl" not in en and "to_trl" not in zh
    facts, card_path = card_for(tmp_path / "noid", card_dataset=str(noid), **scored)
    assert facts.trl_format == "conversational" and facts.trl_ready
    en = part(halves(card_path)[0], "## How to use")
    assert "the rows are already in TRL's conversational preference format" in en and "check its format" not in en
    assert "Keep the `prompt_id` that `to_trl` adds" in en
    monkeypatch.chdir(tmp_path / "noid")  # the card's code runs: to_trl takes the rows, adding their prompt_id
    scope: dict = {}
    exec(re.findall(r"```python\n(.*?)```", en, flags=re.S)[0], scope)
    assert "\ntrain = to_trl(ds)\n" in en
    assert to_trl(scope["ds"])["prompt_id"] == [r["prompt_id"] for r in rows]


def test_the_card_offers_to_trl_for_the_columns_to_trl_reads(tmp_path, monkeypatch, train_rows):
    """The card's `trl_ready` repeated to_trl's column rules by hand, and they parted: Snorkel's rows without their
    `all_generated_responses` (their `all_rm_scores` kept) got `train = to_trl(ds)`, which stops with "lacks columns
    ['score_chosen', 'score_rejected']"; to_trl's own rows with text responses got "check its format", though to_trl
    reads them. Now the card asks to_trl's own rule, for these and the seed's columns dropped, renamed or texts."""
    rows = [r for r in train_rows[:20] if r["chosen"][-1]["content"].strip()]
    seed = datasets.Dataset.from_list(rows)
    converted = to_trl(seed)
    texts = {c: [r[c][-1]["content"] for r in rows] for c in ("chosen", "rejected")}
    tables = {"snorkel_unlisted": recipe_rows("snorkel").remove_columns("all_generated_responses"),
              "trl_texts": converted.remove_columns(["chosen", "rejected"]).add_column("chosen", texts["chosen"])
              .add_column("rejected", texts["rejected"]),
              "no_prompt_id": seed.remove_columns("prompt_id"), "one_score": seed.remove_columns("score_rejected"),
              "renamed_scores": seed.rename_columns({"score_chosen": "chosen-rating", "score_rejected": "rating"}),
              "seed_texts": seed.remove_columns(["chosen", "rejected"]).add_column("chosen", texts["chosen"])
              .add_column("rejected", texts["rejected"]), "snorkel": recipe_rows("snorkel")}
    read = set()
    for name, table in tables.items():
        table.to_parquet(str(tmp_path / f"{name}.parquet"))
        try:
            reads = bool(to_trl(table)) and not read.add(name)
        except DataError:
            reads = False
        facts, card_path = card_for(tmp_path / name, card_dataset=str(tmp_path / f"{name}.parquet"),
                                    known_recipe={"scorer": "my-org/rm"})
        assert facts.trl_ready == reads, name
        en = part(halves(card_path)[0], "## How to use")
        assert ("\ntrain = to_trl(ds)\n" in en) == reads, name
        if reads:  # the card's code runs: its rows, converted by to_trl and by the card's `ds.map` where it gives one
            monkeypatch.chdir(tmp_path / name)
            scope: dict = {}
            for code in re.findall(r"```python\n(.*?)```", en, flags=re.S):
                if "DPOTrainer" not in code:
                    exec(code, scope)
            train = to_trl(scope["ds"])
            assert len(train) == len(table) and scope.get("train", train)["chosen"] == train["chosen"], name
            assert ("the string `prompt` makes" in en) == (not conversational(table.features)), name
    assert read == {"snorkel", "trl_texts", "renamed_scores"}


SYSTEM = {"content": "You answer briefly.", "role": "system"}
# how rows 3 and 8 of real rows are reshaped so that to_trl refuses them, and the card's words for that shape
REFUSED_SHAPES = {
    "a reply missing": (lambda r: r["rejected"].pop(), "`rejected` is not a conversation of at least two turns",
                        "`rejected` 不是至少两个轮次的对话"),
    "a user turn last": (lambda r: r["chosen"].append({"content": "And then?", "role": "user"}),
                         "the last turn of `chosen` is not the assistant's response",
                         "`chosen` 的最后一个轮次不是助手回复"),
    "a reply not a text": (lambda r: r["rejected"][-1].update(content=None),
                           "the assistant's response in `rejected` is not a text", "`rejected` 中的助手回复不是文本"),
    "another prompt": (lambda r: [r[c][0].update(content="Another question?") for c in ("chosen", "rejected")],
                       "`chosen` does not start (after any system turn) with the user turn holding `prompt`",
                       "`chosen` 不以含 `prompt` 文本的用户轮次开头（系统轮次之后）"),
    "a system turn in chosen alone": (lambda r: r["chosen"].insert(0, SYSTEM),
                                      "`chosen` and `rejected` differ before the assistant's response",
                                      "`chosen` 与 `rejected` 在助手回复之前的轮次不同"),
    "a longer conversation in rejected": (
        lambda r: r.update(rejected=[r["rejected"][0], {"content": "Which one?", "role": "assistant"},
                                     {"content": "The first.", "role": "user"}, r["rejected"][-1]]),
        "`chosen` and `rejected` differ before the assistant's response",
        "`chosen` 与 `rejected` 在助手回复之前的轮次不同"),
}


def refused_card(tmp_path: Path, train_rows: list[dict], shape: str, refused: tuple[int, ...]) -> tuple:
    """The card of real rows (told their scorer: training advised) whose rows `refused` are reshaped as `shape`, and
    its English and Chinese "How to use", "Typical uses" and limitations by heading."""
    rows = json.loads(json.dumps([r for r in train_rows[:21] if r["chosen"][-1]["content"].strip()]))
    for i in refused:
        REFUSED_SHAPES[shape][0](rows[i])
    path = write_rows(tmp_path / "rows.jsonl", rows)
    facts, card_path = card_for(tmp_path / "run", card_dataset=path, known_recipe={"scorer": "my-org/rm"})
    headings = ("## How to use", "## Typical uses", "## Challenges and limitations", "## 使用方法", "## 常用场景",
                "## 当前挑战与局限")
    en, zh = halves(card_path)
    return facts, {h: part(en if h.isascii() else zh, h) for h in headings} | {"tags": DatasetCard.load(
        card_path).data.tags}


@pytest.mark.parametrize("shape", REFUSED_SHAPES)
def test_rows_to_trl_refuses_get_why_not_code_that_fails(tmp_path, monkeypatch, train_rows, shape):
    """Rows whose turns `to_trl` refuses (a reply missing, not last or not a text, another prompt than `prompt`,
    `chosen` and `rejected` conversations that differ): their card, training advised, gave `train = to_trl(ds)`, which
    stops with a DataError; then it gave no code, but "Typical uses" and the `dpo` tag still offered the rows for DPO
    as they stand, and no limitation named them. Now training is advised against as for a stand-in's scores (no `dpo`
    tag, "How to use" for inspection only), and the limitations say how many rows, the first and its shape."""
    _, en_says, zh_says = REFUSED_SHAPES[shape]
    facts, card = refused_card(tmp_path, train_rows, shape, (3, 8))
    en, zh = card["## How to use"], card["## 使用方法"]
    monkeypatch.chdir(tmp_path / "run")  # the card's code loads the rows, which to_trl refuses as the card says
    scope: dict = {}
    exec(re.findall(r"```python\n(.*?)```", en, flags=re.S)[0], scope)
    with pytest.raises(DataError, match=r"^Row 3 \(from 0;"):
        to_trl(scope["ds"])
    assert "to_trl(ds)" not in en and "to_trl(ds)" not in zh and not facts.trl_ready and not facts.for_training
    assert en.strip().endswith('**For inspection only**: "Typical uses" below advises against training on these '
                               'pairs, so this card gives no recipe for it.')
    assert (f"- Rows that `repro.formats.to_trl` refuses: 2 of the rows the code in \"How to use\" keeps (the first is "
            f"row 3, counted from 0: {en_says}); fix or leave out those rows before training on the data.\n"
            ) in card["## Challenges and limitations"]
    assert (f"- `repro.formats.to_trl` 不接受的行：“使用方法”中的代码保留的行中有 2 行（第一个是从 0 计第 3 行："
            f"{zh_says}）；在此数据上训练之前，请先修正或排除这些行。\n") in card["## 当前挑战与局限"]
    assert card["## Typical uses"].strip() == (
        '- Not for training as it stands: `repro.formats.to_trl` refuses 2 of its rows (see "Challenges and '
        'limitations"). Fix or leave them out before offline preference optimisation (DPO) or reward-model training '
        'on the pairs.')
    assert card["## 常用场景"].strip() == (
        "- 按现状不可用于训练：`repro.formats.to_trl` 不接受其中 2 行（见“当前挑战与局限”）。"
        "在这些偏好对上做离线偏好优化（DPO）或训练奖励模型之前，请先修正或排除这些行。")
    assert "dpo" not in card["tags"] and "preference" in card["tags"]
    for text in (en, zh):  # nor the margin filter that follows to_trl's code
        assert "train.filter" not in text and "the filter by margin" not in text


def test_one_row_to_trl_refuses_is_named_as_one(tmp_path, train_rows):
    facts, card = refused_card(tmp_path, train_rows, "a reply missing", (5,))
    assert facts.trl_refused == {"first": 5, "shape": "turns", "column": "rejected", "rows": 1}
    assert ("- Rows that `repro.formats.to_trl` refuses: 1 of the rows the code in \"How to use\" keeps (row 5, "
            "counted from 0: `rejected` is not a conversation of at least two turns); fix or leave out that row before "
            "training on the data.\n") in card["## Challenges and limitations"]
    assert "请先修正或排除该行。\n" in card["## 当前挑战与局限"] and "（从 0 计第 5 行：" in card["## 当前挑战与局限"]
    assert "refuses 1 of its rows" in card["## Typical uses"] and "Fix or leave it out" in card["## Typical uses"]
    assert "不接受其中 1 行" in card["## 常用场景"] and "请先修正或排除该行。" in card["## 常用场景"]


@pytest.mark.parametrize("left_out", [lambda r: r.update(score_chosen=None),
                                      lambda r: r["chosen"][-1].update(content="  ")], ids=["no score", "empty chosen"])
def test_the_refused_row_is_numbered_in_the_rows_the_cards_code_gives_to_trl(tmp_path, monkeypatch, train_rows,
                                                                           left_out):
    """Row 1 without a finite score (or with an empty chosen response), row 4 with a system turn in `chosen` alone: the
    card's code filters row 1 out, so to_trl refuses its row 3, yet the card said "row 4, counted from 0". Now it
    numbers the row in the rows its code gives to_trl, as to_trl's own message does."""
    rows = json.loads(json.dumps([r for r in train_rows[:12] if r["chosen"][-1]["content"].strip()]))
    left_out(rows[1])
    rows[4]["chosen"].insert(0, SYSTEM)
    path = write_rows(tmp_path / "rows.jsonl", rows)
    facts, card_path = card_for(tmp_path / "run", card_dataset=path, known_recipe={"scorer": "my-org/rm"})
    en, zh = (part(h, heading) for h, heading in zip(halves(card_path), ("## How to use", "## 使用方法")))
    monkeypatch.chdir(tmp_path / "run")
    scope: dict = {}
    exec(re.findall(r"```python\n(.*?)```", en, flags=re.S)[0], scope)
    assert len(scope["ds"]) == len(rows) - 1
    with pytest.raises(DataError, match=r"^Row 3 \(from 0;"):
        to_trl(scope["ds"])
    en, zh = (part(h, heading) for h, heading in zip(halves(card_path), ("## Challenges and limitations",
                                                                       "## 当前挑战与局限")))
    assert "`repro.formats.to_trl` refuses: 1 of the rows the code in \"How to use\" keeps (row 3, counted from 0: " \
           "`chosen` and `rejected`" in en
    assert "中有 1 行（从 0 计第 3 行：`chosen` 与 `rejected`" in zh


def test_the_trl_paragraph_says_what_prompt_holds(tmp_path, train_rows):
    """A system turn before the user's in every row: to_trl puts it in the prompt (as TRL's extract_prompt does), but
    the card said "`prompt` = the user turn". Now it names the turns the prompt holds; plain rows' is the user turn."""
    rows = [r for r in train_rows[:20] if r["chosen"][-1]["content"].strip()]
    system = write_rows(tmp_path / "system.jsonl", [
        {**r, "chosen": [SYSTEM, *r["chosen"]], "rejected": [SYSTEM, *r["rejected"]]} for r in rows])
    assert to_trl(datasets.Dataset.from_json(system))["prompt"][0] == [SYSTEM, rows[0]["chosen"][0]]
    scored = {"known_recipe": {"scorer": "my-org/rm"}}
    en, zh = halves(card_for(tmp_path / "system", card_dataset=system, **scored)[1])
    assert ("Convert the rows to TRL's conversational preference format first: `prompt` = the turns before the "
            "assistant's response, `[system prompt, user prompt]`, `chosen` / `rejected` = the assistant turn "
            "only") in en
    assert ("请先把各行转换为 TRL 的对话式偏好格式：`prompt` 为助手回复之前的轮次 `[系统提示词, 用户提示词]`，"
            "`chosen` / `rejected` 仅为助手轮次") in zh
    assert "TRL then takes their common first turns (`[system prompt, user prompt]`) as the prompt." in en
    assert "TRL 会把两者共同的开头轮次（`[系统提示词, 用户提示词]`）当作提示词。" in zh
    en, zh = halves(card_for(tmp_path / "plain", card_dataset=write_rows(tmp_path / "plain.jsonl", rows), **scored)[1])
    assert "`prompt` = the user turn, `chosen` / `rejected` = the assistant turn only" in en
    assert "TRL then takes their common first turn as the prompt." in en
    assert "`prompt` 为用户轮次，`chosen` / `rejected` 仅为助手轮次" in zh and "共同的第一个轮次当作提示词" in zh


def test_real_ultrafeedback_rows_not_built_here(tmp_path, sample_dir, train_rows):
    """H4-style rows (GPT-4 ratings, no reference_response, an extra source_index): the card says what they are."""
    from repro.analysis import report as analysis
    from repro.parameters import AnalyzeParams

    spec = str(sample_dir / "train_prefs.jsonl")
    run = tmp_path / "h4-sample"
    p = build(CardParams, {"run_dir": str(run), "card_dataset": spec,
                           "known_recipe": "A seed-42 sample of trl-lib/ultrafeedback_binarized rows."})
    repro_card.gather_facts(p)  # copies the rows into the run's dataset/ (no metrics yet)
    analysis.analyze(build(AnalyzeParams, {"run_dir": str(run), "bootstrap_resamples": 100}))
    facts = repro_card.gather_facts(p)
    card_path = repro_card.write_card(facts)
    en, _ = halves(card_path)
    assert facts.num_examples == facts.prompt_id_sha256_rows == len(train_rows) == 200
    assert "missing `reference_response`" in en and "not in the seed `source_index`" in en
    assert f"The columns differ from those of the seed dataset `{SEED_REPO}` (the one this project rebuilds)" in en
    assert "Scale, as the analysis reads it: the scores are ratings on a grid of 0.5" in en  # the analysis' reading
    assert "not applicable: the scores are ratings, not PairRM scores." in en  # PairRM's invariants do not apply
    assert "PairRM scores are not ratings" not in en  # no PairRM claim about data not known to be PairRM's
    assert "A seed-42 sample of trl-lib/ultrafeedback_binarized rows." in en
    [row] = table_rows(en, repro_card.phrases("en").stat_ties)
    ties = sum(r["score_chosen"] == r["score_rejected"] for r in train_rows)
    assert as_numbers(row[3])[0] == ties and ties > 0  # the rows' own ties
    # a row with an empty chosen response: the card's `to_trl(ds)` failed on it; its code leaves such rows out first
    empty = sum(r["chosen"][-1]["content"].strip() == "" for r in train_rows)
    assert empty == facts.empty_chosen == 1
    assert ("# 1 row with an empty chosen response: to_trl refuses it (DPO learns toward the chosen one)\n"
            "ds = ds.filter(lambda row: row[\"chosen\"][-1][\"content\"].strip() != \"\")\n```") in en
    ds = datasets.load_dataset(str(run / "dataset"), split="train_prefs")
    assert len(to_trl(ds.filter(lambda row: row["chosen"][-1]["content"].strip() != ""))) == 200 - empty
    repro_card.check_card(card_path)


# ---------------------------------------------------------------------------------------------
# the notebook
# ---------------------------------------------------------------------------------------------
NOTEBOOK = ROOT / "notebooks" / "03_card.ipynb"


def test_notebook_is_thin_and_committed_clean():
    nb = json.loads(NOTEBOOK.read_text(encoding="utf-8"))
    assert nb["metadata"]["kernelspec"]["name"] == "repro"
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert all(not c["outputs"] and c["execution_count"] is None for c in code)
    [params] = [c for c in code if "parameters" in c["metadata"].get("tags", [])]
    assert set(re.findall(r"^(\w+) =", "".join(params["source"]), flags=re.M)) == set(CardParams.model_fields)
    assert 'validate_namespace("card", globals())' in "".join(code[code.index(params) + 1]["source"])
    # thin: after validation, each cell makes one call into repro.card
    assert all(len(re.findall(r"repro\.card\.\w+\(", "".join(c["source"]))) == 1 for c in code[code.index(params) + 2:])


def test_notebook_runs_under_papermill(run_notebook, tmp_path):
    built = make_run(tmp_path / "run")
    out = tmp_path / "03_card.out.ipynb"
    run_notebook(NOTEBOOK, out, parameters={"run_dir": str(tmp_path / "run")}, kernel_name="python3",
                 cwd=str(tmp_path))
    card = DatasetCard.load(tmp_path / "run" / "dataset" / "README.md")
    assert card.data.dataset_info["splits"][0]["num_bytes"] == built["split"]["num_bytes"]
    assert "builtin:tiny-pairrm" in card.text


def test_card_says_where_the_token_limits_came_from(tmp_path):
    # the card said "at most 64 prompt tokens and 100 tokens per candidate", but PairRM gives each candidate
    # candidate_maxlength + (source_maxlength - the prompt's tokens) // 2 (repro.scorers.pairrm, llm-blender's rule)
    make_run(tmp_path / "run", stand_in=False)
    manifest_path = tmp_path / "run" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    scorer = manifest["scorer"]
    scorer.update(source_maxlength=64, candidate_maxlength=100,
                  limits_from={"source_maxlength": "checkpoint config", "candidate_maxlength": "explicit"})
    manifest_path.write_text(json.dumps(manifest))
    en, zh = halves(card_for(tmp_path / "run")[1])
    assert ("device `cpu`, at most 64 prompt tokens and, per candidate, 100 tokens plus half of what the prompt "
            "leaves unused of its 64.") in en
    assert ("设备 `cpu`，提示词最多 64 个 token，每个候选最多 100 个 token "
            "再加上提示词在其 64 个 token 中未用完部分的一半。") in zh
    assert "Prompt limit: the checkpoint's own config; candidate limit: given explicitly." in en
    assert "提示词上限取自检查点自身的配置，候选上限由参数显式指定。" in zh
    scorer["limits_from"] = {"source_maxlength": "default", "candidate_maxlength": "default"}
    manifest_path.write_text(json.dumps(manifest))
    en, _ = halves(card_for(tmp_path / "run")[1])
    assert "Both limits: PairRM's defaults (its config names none)." in en


def test_the_summary_names_the_candidates_in_a_sentence_that_reads(tmp_path):
    """Ranking the source's own pair (include_original_pair, no candidate columns): the summary says which the
    candidates were in parentheses, not run into the sentence ("the candidates the source's original ... were")."""
    made = make_run(tmp_path / "run")
    Manifest(made["run"]).update(parameters={**Manifest(made["run"]).read()["parameters"], "candidate_columns": [],
                                             "include_original_pair": True})
    _, card_path = card_for(tmp_path / "run")
    en, zh = halves(card_path)
    assert ("For each prompt the candidates (the source's original `chosen`/`rejected` responses) were scored with "
            "`builtin:tiny-pairrm`") in section(en, "## Summary")
    assert "候选回复（源数据原有的 `chosen`/`rejected` 回复）由 `builtin:tiny-pairrm`" in section(zh, "## 数据集概述")


def test_the_scale_of_scores_made_elsewhere_is_read_as_known_recipe_names_their_scorer(tmp_path):
    """Rows made elsewhere, known_recipe naming a reward model (sfairXC/FsfairX-LLaMA3-RM-v0.1): the card's scale said
    "as PairRM's logits are (…; no record names the scorer: read as PairRM's)" beside its own recipe table naming that
    scorer; with llm-blender/PairRM named, "no record names the scorer" too. metrics.json records no scorer there."""
    from repro.analysis import report as analysis
    from repro.parameters import AnalyzeParams

    rng = np.random.default_rng(2)
    rows = [{"prompt": f"prompt {i}", "chosen": "a", "rejected": "b", "score_chosen": abs(c), "score_rejected": -abs(d)}
            for i, (c, d) in enumerate(rng.normal(1.0, 1.0, (30, 2)).tolist())]  # PairRM's sign order, off any grid
    (tmp_path / "theirs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    run = tmp_path / "theirs"
    told = {"run_dir": str(run), "card_dataset": str(tmp_path / "theirs.jsonl")}
    repro_card.gather_facts(build(CardParams, told))  # the rows into the run's dataset/, then 02_analyze on them
    m = analysis.analyze(build(AnalyzeParams, {"run_dir": str(run), "bootstrap_resamples": 100})).metrics
    assert m["scale"]["kind"] == "logit" and m["scorer"] is None
    for scorer, en_said, zh_said in (
            ("sfairXC/FsfairX-LLaMA3-RM-v0.1", "as a reward model's logits are", "与奖励模型的 logit 相同"),
            ("llm-blender/PairRM", "as PairRM's logits are", "与 PairRM 的 logit 相同")):
        en, zh = halves(card_for(run, **told, known_recipe={"scorer": scorer})[1])
        assert f"the scores are real-valued, {en_said} (" in en
        assert f"分数是实数，{zh_said}（" in zh
        assert scorer in en and "no record names the scorer" not in en and "没有记录说明评分模型" not in zh
        assert "if PairRM made them" not in en and "（如果分数出自 PairRM）" not in zh
    # named by nothing: read as PairRM's, and said so
    en, zh = halves(card_for(run, **told)[1])
    assert "as PairRM's logits are (" in en and "no record names the scorer: read as PairRM's" in en
    assert "没有记录说明评分模型：按 PairRM 的分数解读" in zh


def test_scores_told_as_pairrm_that_break_its_sign_order_are_said_not_to_be_its(tmp_path):
    """Real-valued scores told to be PairRM's (known_recipe) that break its sign order: the analysis' headline and
    the card say they are not PairRM's scores of the rows' candidates, and the card claims nothing of PairRM's about
    them (before, it stated PairRM's scale beside checks that failed, and counted two-candidate antisymmetry over
    rows whose candidates it did not know)."""
    from repro.analysis import report as analysis
    from repro.parameters import AnalyzeParams

    rng = np.random.default_rng(1)
    rows = [{"prompt": f"prompt {i}", "chosen": "a", "rejected": "b", "score_chosen": c, "score_rejected": c - abs(d)}
            for i, (c, d) in enumerate(rng.normal(1.0, 1.0, (30, 2)).tolist())]
    (tmp_path / "mine.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    run = tmp_path / "mine"
    p = build(CardParams, {"run_dir": str(run), "card_dataset": str(tmp_path / "mine.jsonl"),
                           "known_recipe": {"scorer": "llm-blender/PairRM"}})
    repro_card.gather_facts(p)  # the rows into the run's dataset/, then 02_analyze on them
    m = analysis.analyze(build(AnalyzeParams, {"run_dir": str(run), "bootstrap_resamples": 100})).metrics
    fails = sum(not (r["score_chosen"] >= 0 >= r["score_rejected"]) for r in rows)
    assert m["invariants"]["sign_order_fails"] == fails and 0 < fails < 30
    headline = analysis.headline(m)
    assert f"- PairRM's invariants: score_chosen >= 0 >= score_rejected holds in {30 - fails} of 30 rows." in headline
    assert "these are not such scores, or chosen / rejected are not each row's best and worst" in headline
    facts = repro_card.gather_facts(p)
    assert not facts.pairrm_scores and facts.sign_order_fails == fails
    en, zh = halves(repro_card.write_card(facts))
    assert f"These scores break PairRM's sign order in {fails} of 30 rows." in en
    assert f"这些分数在 30 行中有 {fails} 行违反 PairRM 的符号顺序" in zh
    assert f"`score_chosen` ≥ 0 ≥ `score_rejected`: holds in {30 - fails} of 30 rows." in en
    assert "`score_chosen` = −`score_rejected` in rows with two candidates: not applicable: no row gives each of its " \
           "candidates one score (`candidate_scores`, or the `scores` of `repro score`)." in en
    assert "PairRM scores are not ratings" not in en  # the scale of PairRM's scores is not claimed for these
    # the scores of a built run (PairRM's math) break nothing: no such sentence
    assert make_run(tmp_path / "built")["run"] and "sign order in" not in halves(card_for(tmp_path / "built")[1])[0]


def test_02_analyze_on_its_own_writes_the_runs_card_again(run_notebook, demo_run_copy, tmp_path):
    """02_analyze re-run in JupyterLab with other resamples: the card shows the new intervals, as metrics.json does
    (before, it kept the old ones, and nothing said the card was stale)."""
    old = (demo_run_copy / "dataset" / "README.md").read_text()
    run_notebook(ROOT / "notebooks" / "02_analyze.ipynb", tmp_path / "out.ipynb",
                 parameters={"run_dir": str(demo_run_copy), "bootstrap_resamples": 200})
    metrics = json.loads((demo_run_copy / "metrics.json").read_text())
    assert metrics["bootstrap"]["resamples"] == 200
    card = (demo_run_copy / "dataset" / "README.md").read_text()
    lo, hi = (repro_card.fmt(v) for v in metrics["margin"]["mean_ci95"])
    assert card != old and f"{lo} to {hi}" in card
    manifest = json.loads((demo_run_copy / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["notebooks"]["03_card"]["status"] == "done"
    assert manifest["outputs"]["dataset/README.md"]["sha256"] == hashlib.sha256(card.encode()).hexdigest()
    assert not (demo_run_copy / ".repro-run.lock").read_text()  # the folder given back when the notebook ended


def test_a_column_null_in_every_row_is_said_to_be(tmp_path):
    """A run whose source has no reference responses: the card said `reference_response` was "carried over from
    the source" and no more; it now says the column is null in every row (a column with values says nothing)."""
    rows = [{**row, "reference_response": None} for row in seed_rows(6)]
    make_run(tmp_path / "run", rows, metrics=False)
    en, zh = halves(card_for(tmp_path / "run")[1])
    assert table_rows(en, "`reference_response`")[0][-1] == "A reference response to the prompt, carried over from " \
                                                            "the source. Null in every row of this dataset."
    assert "本数据集每一行中均为空。" in zh and "Null in every row" not in table_rows(en, "`prompt`")[0][-1]


def built_with_a_stand_in_policy(root: Path, sample_dir: Path, **values) -> RunDir:
    """A real construction (01_construct's stages, no notebook) of 6 fixture rows: 2 candidates by the stand-in
    policy, ranked with the source's original pair (the fixture has no `reference_response`), in small chunks."""
    values = dict(run_dir=str(root), source=str(sample_dir / "train_prefs.jsonl"), limit=6, generate=True,
                  candidate_columns=["resp0", "resp1"], include_original_pair=True, keep_all_candidates=True,
                  policy_model="builtin:tiny-policy", n_candidates=2, max_new_tokens=8, generate_reference=False,
                  generation_device="cpu", generation_batch_size=2, generation_chunk_size=4,
                  scorer_model="builtin:tiny-pairrm", device="cpu", dtype="fp32", chunk_size=4, source_maxlength=96,
                  candidate_maxlength=64) | values
    ctx = stages.begin(build(ConstructParams, values), generation := build(GenerationParams, values))
    ds = stages.generate(ctx, stages.slice_rows(ctx, stages.load(ctx)), generation)
    cs = stages.candidates(ctx, ds)
    stages.write(ctx, stages.build(ctx, ds, cs, stages.score(ctx, cs)))
    return ctx.run


def test_a_stand_in_policys_banner_says_which_candidates_are_its_own(tmp_path, sample_dir):
    """With include_original_pair the banner said "The candidate responses were generated by builtin:tiny-policy",
    though the source's original chosen/rejected responses were ranked with them (and are often `chosen`)."""
    run = built_with_a_stand_in_policy(tmp_path / "run", sample_dir)
    en, zh = halves(card_for(run.root)[1])
    banner = next(line for line in en.splitlines() if line.startswith("> **Stand-in candidates.**"))
    assert banner == ("> **Stand-in candidates.** The generated candidate responses come from `builtin:tiny-policy`, "
                      "a stand-in policy built offline, not a language model worth imitating. The other candidates "
                      "ranked with them (the source's original `chosen`/`rejected` responses) are the source's own "
                      "texts.")
    assert ("> **替身候选回复。** 生成的候选回复来自 `builtin:tiny-policy`，这是离线构建的替身策略模型，"
            "不是值得模仿的语言模型。与之一同排序的其他候选回复"
            "（源数据原有的 `chosen`/`rejected` 回复）是源数据自己的文本。") in zh
    # (the rows say so too: originals among the chosen responses)
    source = [json.loads(line) for line in (sample_dir / "train_prefs.jsonl").read_text().splitlines()[:6]]
    rows = datasets.Dataset.from_parquet(str(next(run.dataset.rglob("*.parquet")))).to_list()
    originals = {r["chosen"][-1]["content"] for r in source} | {r["rejected"][-1]["content"] for r in source}
    assert any(r["chosen"][-1]["content"] in originals for r in rows)
    # the source's reference_response ranked too (not generated): named with the pair
    with Manifest(run).edit() as data:
        data["parameters"].update(include_reference=True)
    en, zh = halves(card_for(run.root)[1])
    assert ("The other candidates ranked with them (the "
            "source's original `chosen`/`rejected` responses; the source's `reference_response`) are the source's "
            "own texts.") in en
    with Manifest(run).edit() as data:
        data["parameters"].update(include_reference=False)
    # without the original pair every candidate is the policy's: the banner is as it was
    with Manifest(run).edit() as data:
        data["parameters"]["include_original_pair"] = False
    en, zh = halves(card_for(run.root)[1])
    assert ("> **Stand-in candidates.** The candidate responses come from `builtin:tiny-policy`, a stand-in "
            "policy built offline, not a language model worth imitating.\n") in en
    assert ("> **替身候选回复。** 候选回复来自 `builtin:tiny-policy`，这是离线构建的替身策略模型，"
            "不是值得模仿的语言模型。\n") in zh
    # a generated reference_response is stand-in text too: the banner said "Only the generated candidate responses"
    rerun = built_with_a_stand_in_policy(tmp_path / "with_reference", sample_dir, generate_reference=True,
                                         reference_max_new_tokens=8)
    en, zh = halves(card_for(rerun.root)[1])
    assert ("> **Stand-in candidates.** The generated candidate responses and `reference_response` come from "
            "`builtin:tiny-policy`, a stand-in policy built offline, not a language model worth imitating. The other "
            "candidates ranked with them (the source's original `chosen`/`rejected` responses) are the source's own "
            "texts.") in en
    assert "生成的候选回复与 `reference_response` 来自 `builtin:tiny-policy`" in zh


def test_a_reference_response_the_source_lacks_is_not_said_to_be_carried_over(tmp_path, sample_dir):
    """The fixture has no `reference_response`: the seed's layout adds it empty, and the card said it was "carried
    over from the source. Null in every row"."""
    run = built_with_a_stand_in_policy(tmp_path / "run", sample_dir)
    assert "reference_response" not in json.loads((sample_dir / "train_prefs.jsonl").read_text().splitlines()[0])
    en, zh = halves(card_for(run.root)[1])
    assert table_rows(en, "`reference_response`")[0][-1] == (
        "A reference response to the prompt in the seed's schema; the source has no such column, so none was carried "
        "over. Null in every row of this dataset.")
    assert table_rows(zh, "`reference_response`")[0][-1] == (
        "种子数据集结构中提示词的参考回复；源数据没有这一列，因此没有沿用任何内容。本数据集每一行中均为空。")
    assert "carried over from the source" not in en and "沿用自源数据" not in zh


def rebuilt_parameters(command: str) -> dict:
    """The parameters `repro run` resolves for a card's command (its params file from the current folder or project
    root), as the command line gives them."""
    parser = argparse.ArgumentParser()
    configure(parser)
    args = parser.parse_args(shlex.split(command)[2:])  # (after "repro run")
    return resolve_parameters(load_params_file(args.params, args.overrides))


def code_blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)\n```$", text, re.M | re.S)


def test_the_demo_card_gives_the_command_that_rebuilds_its_rows(demo_run):
    """A referee rebuilt the demo from its card, which gave the parameters and `batch_tokens=2048`, `chunk_size=16`
    "(each as `--set name=value`)" but no command; and it said chosen was "the higher-scored of the pair's two
    candidates" of rows that have 3 or 4."""
    en, zh = halves(demo_run / "dataset" / "README.md")
    command = "repro run params/demo.yaml --out runs/rebuild --set cache=false --set batch_tokens=2048 --set chunk_size=16"
    assert code_blocks(en, "bash") == code_blocks(zh, "bash") == [command] and "```yaml" not in en + zh
    git = Manifest(RunDir(demo_run)).read()["environment"]["git"]  # (the checkout's: its origin, where public)
    repro = {lang: repro_card.phrases(lang).repro_is(commit=git["commit"], origin=git.get("origin"))
             for lang in ("en", "zh")}
    assert (f"From a clone of {repro['en']}, this command rebuilds every row afresh (`cache=false`) "
            "into `runs/rebuild`:") in en and f"commit `{git['commit']}`" in repro["en"]
    assert f"在 {repro['zh']}的克隆中，以下命令会重新计算每一行（`cache=false`），写入 `runs/rebuild`：" in zh
    recorded, resolved = Manifest(RunDir(demo_run)).read()["parameters"], rebuilt_parameters(command)
    assert shaping_parameters(resolved) == shaping_parameters(recorded) and resolved["cache"] is False
    assert [resolved[k] for k in ("batch_tokens", "chunk_size")] == [recorded[k] for k in ("batch_tokens", "chunk_size")]
    assert "By construction (chosen is the highest-scored of the row's candidates), no margin is below 0" in en
    assert "按构造（chosen 为该行候选中得分最高者），差值不会小于 0" in zh


@pytest.mark.parametrize("made_by", [("demo_family", None), ("demo", {"mini_index": [2]}), ("demo", None)])
def test_a_member_or_a_renamed_run_is_rebuilt_from_the_shipped_file_and_its_differences(demo_run_copy, made_by):
    """A member of params/demo_family.yaml, one of `repro run params/demo.yaml --set mini_count=4 --grid
    mini_index=2` and `repro run params/demo.yaml --set run_name=renamed` got a block of eight values to save as
    rebuild.yaml (no shipped file is named after `demo_family-mini_1`, `demo-mini_index-2` or `renamed`); now the
    shipped file whose rows they differ from least, with `--set` for each value they differ in."""
    name, grid = made_by
    values = load_params_file(ROOT / "params" / f"{name}.yaml")
    if name == "demo_family" or grid:
        member = plan_family({**values, "mini_count": 4}, default_name=name, grid_args=grid,
                             out=str(demo_run_copy.parent / "family")).members[1 if name == "demo_family" else 0]
        parameters, family, sets = member.resolved, member.record(name), " --set mini_index=" \
            f"{member.resolved['mini_index']} --set mini_count=4"
    else:
        parameters, family, sets = resolve_parameters({**values, "run_name": "renamed"}), None, ""
    with Manifest(RunDir(demo_run_copy)).edit() as data:
        data.update(parameters=parameters, family=family)
    en, zh = halves(card_for(demo_run_copy)[1])
    command = f"repro run params/demo.yaml --out runs/rebuild --set cache=false{sets} --set batch_tokens=2048 " \
              f"--set chunk_size=16"
    assert code_blocks(en, "bash") == code_blocks(zh, "bash") == [command] and "```yaml" not in en + zh
    assert "this command rebuilds every row afresh (`cache=false`) into `runs/rebuild`:" in en
    assert shaping_parameters(rebuilt_parameters(command)) == shaping_parameters(parameters)


@pytest.mark.parametrize("own", ["untracked", "staged", "changed", "staged change", "local source"])
def test_the_rebuild_command_names_no_params_file_a_clone_lacks(demo_run_copy, tmp_path, monkeypatch, own):
    """A member of a params file of the user's own (not committed), or of one changed since its commit, was rebuilt
    with `repro run params/myexp.yaml …`, which a clone of repro lacks; a run whose source is a local file or folder
    (`…/demo`, `…/my_prompts.jsonl`) from a shipped file whose source has the same last name (the built-in demo)."""
    root = tmp_path / "checkout"
    (root / "params").mkdir(parents=True)
    values = {**load_params_file(ROOT / "params" / "demo.yaml"), "mini_count": 4}
    (root / "params" / "demo.yaml").write_text((ROOT / "params" / "demo.yaml").read_text())
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git[:3], "init", "-q"], check=True)
    subprocess.run([*git, "add", "params"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "params"], check=True)
    if own in ("untracked", "staged"):  # (staged: `git add`ed, not committed: a clone lacks it all the same)
        (root / "params" / "myexp.yaml").write_text(yaml.safe_dump(values))
    elif own in ("changed", "staged change"):
        (root / "params" / "demo.yaml").write_text(yaml.safe_dump(values))
    else:
        values["source"] = str(tmp_path / "demo")
        shutil.copytree(ROOT / "src" / "repro" / "data", tmp_path / "demo")
    if own.startswith("staged"):
        subprocess.run([*git, "add", "params"], check=True)
    monkeypatch.setattr(card_facts, "shipped", lambda name: root / name)
    monkeypatch.setattr(manifest_module, "checkout_root", lambda: root)
    parameters = resolve_parameters({**values, "mini_index": 2, "run_name": "myexp-mini_index-2"})
    with Manifest(RunDir(demo_run_copy)).edit() as data:
        data["parameters"] = parameters
    en, _ = halves(card_for(demo_run_copy)[1])
    rounding = "--set batch_tokens=2048 --set chunk_size=16"
    if own in ("untracked", "staged"):  # the committed file it differs least from
        assert code_blocks(en, "bash") == [f"repro run params/demo.yaml --out runs/rebuild --set cache=false "
                                           f"--set mini_index=2 --set mini_count=4 {rounding}"]
    else:
        assert code_blocks(en, "bash") == [f"repro run rebuild.yaml --out runs/rebuild --set cache=false {rounding}"]
        assert "mini_index: 2" in code_blocks(en, "yaml")[0]


def test_a_chat_template_named_by_its_hash_is_left_to_fill_in_the_rebuild_file(demo_run_copy, tmp_path, monkeypatch):
    """A scorer given a chat_template showed in the rebuild block as `(given, sha256 …)`, which `repro run` reads as
    the template itself: the block did not run as it stood, and nothing said so. Now a placeholder, the template's
    sha256 beside it and the sentence before the command say what to put there (the card cannot hold the template:
    its braces read as a template's leftovers)."""
    template = DEBERTA_CHAT_TEMPLATE
    parameters = resolve_parameters({**load_params_file(ROOT / "params" / "demo.yaml"), "scorers": [
        {"name": "rm", "model": "builtin:tiny-reward-deberta", "options": {"chat_template": template}}]})
    with Manifest(RunDir(demo_run_copy)).edit() as data:
        data["parameters"] = parameters
    en, zh = halves(card_for(demo_run_copy)[1])
    [saved], [command] = code_blocks(en, "yaml"), code_blocks(en, "bash")
    assert code_blocks(zh, "yaml") == [saved] and code_blocks(zh, "bash") == [command]
    digest = hashlib.sha256(template.encode()).hexdigest()
    assert f"    chat_template: FILL_IN  # the chat template given, sha256 {digest}" in saved.splitlines()
    assert "(given" not in saved
    assert ("as `rebuild.yaml` in its top folder, each `FILL_IN` in it replaced by the chat template the scorer was "
            "given, written as a JSON string in double quotes (the card gives only its sha256, in the comment beside "
            "it), then run the command") in en
    assert ("保存为其顶层目录下的 `rebuild.yaml`（其中每个 `FILL_IN` 须换成评分模型所用的聊天模板，写成双引号括起的 JSON "
            "字符串：卡片只在其旁的注释中给出它的 sha256），再运行以下命令") in zh
    clone = tmp_path / "clone"  # the block saved as the card says, the template put in place of FILL_IN
    clone.mkdir()
    (clone / "rebuild.yaml").write_text(saved.replace("FILL_IN", json.dumps(template)))
    monkeypatch.setenv("REPRO_HOME", str(clone))
    monkeypatch.chdir(clone)
    assert command.startswith("repro run rebuild.yaml ")
    assert shaping_parameters(rebuilt_parameters(command)) == shaping_parameters(parameters)


def test_the_parameters_give_what_a_byte_identical_rebuild_needs(tmp_path, sample_dir, monkeypatch):
    """The parameters table leaves out how the work ran, yet the batches decide the float rounding: a rebuild from
    the card's values with the default chunks differed in 287 of 900 scores (by up to 3.8e-7), and nothing said
    which values to give; nor did the card name the source file but by its name."""
    run = built_with_a_stand_in_policy(tmp_path / "run", sample_dir)  # batch_tokens left to the device's default
    manifest = json.loads(run.manifest.read_text())
    assert manifest["parameters"]["batch_tokens"] is None and manifest["scorer"]["batch_tokens"] == 2048
    digest = hashlib.sha256((sample_dir / "train_prefs.jsonl").read_bytes()).hexdigest()
    en, zh = (section(half, heading) for half, heading in zip(halves(card_for(run.root)[1]),
                                                              ("### Parameters of this run", "### 本次运行的参数")))
    assert ("The batching decides the float rounding: a byte-identical rebuild needs, besides these values, "
            "`batch_tokens=2048`, `chunk_size=4`, `generation_batch_size=2`, `generation_chunk_size=4`, the source "
            f"file of sha256 `{digest}` and the same device type, precision and package versions (below).") in en
    assert ("分批方式决定浮点舍入：要逐字节重建，除上述参数外还需 `batch_tokens=2048`、`chunk_size=4`、"
            "`generation_batch_size=2`、`generation_chunk_size=4`、sha256 为 "
            f"`{digest}` 的源文件，以及相同的设备类型、精度与软件包版本（见下文）。") in zh
    # no command: no params file of repro's builds these rows, so the card gives the parameters to save as one (its
    # local source by its last name, to put beside it: no path of this machine) and the command that reads it
    command = ("repro run rebuild.yaml --out runs/rebuild --set cache=false --set batch_tokens=2048 --set chunk_size=4 "
               "--set generation_batch_size=2 --set generation_chunk_size=4")
    [saved] = code_blocks(en, "yaml")
    assert code_blocks(en, "bash") == code_blocks(zh, "bash") == [command] and code_blocks(zh, "yaml") == [saved]
    rebuild = next(line for line in en.splitlines() if line.startswith("From a clone of `repro` ("))
    assert ("), save these parameters (those above that are not repro's "
            "defaults) as `rebuild.yaml` in its top folder, put `train_prefs.jsonl` there too (the card names a local "
            "file or folder by its last name), then run the command: it rebuilds every row afresh") in rebuild
    assert "保存为其顶层目录下的 `rebuild.yaml`，并把 `train_prefs.jsonl` 也放在那里" in zh
    assert str(tmp_path) not in en + zh and str(sample_dir) not in en + zh
    clone = tmp_path / "clone"  # a project root: the saved file and the source beside it
    clone.mkdir()
    (clone / "rebuild.yaml").write_text(saved)
    shutil.copy(sample_dir / "train_prefs.jsonl", clone)
    monkeypatch.setenv("REPRO_HOME", str(clone))
    monkeypatch.chdir(clone)
    resolved = rebuilt_parameters(command)
    assert resolved["source"] == str(clone / "train_prefs.jsonl") and resolved["cache"] is False
    assert shaping_parameters(resolved) == shaping_parameters(manifest["parameters"])
    assert [resolved[k] for k in ("batch_tokens", "chunk_size", "generation_batch_size", "generation_chunk_size")] == \
        [2048, 4, 2, 4]
    # not generated, from the demo (no file of its own): the scoring's values alone
    with Manifest(run).edit() as data:
        data["parameters"].update(generate=False, source="demo")
        data["stages"]["load"].pop("content")
        data.pop("generation")
    en = section(halves(card_for(run.root)[1])[0], "### Parameters of this run")
    assert ("a byte-identical rebuild needs, besides these values, `batch_tokens=2048`, `chunk_size=4` and the same "
            "device type") in en and "generation_chunk_size" not in en


def test_a_budget_an_out_of_memory_lowered_is_the_one_the_card_gives(tmp_path, sample_dir, monkeypatch):
    """On an out-of-memory the scorer halves batch_tokens and keeps the lower budget (the manifest's
    `batch_tokens_used`); the card gave the budget asked, `batch_tokens=2048`, at which no prompt was scored."""
    import torch
    from repro.scorers.pairrm import PairRM

    forward, score, calls = PairRM._forward, PairRM.score, {"score": 0, "failed": False}

    def small_gpu(self, batch):  # over 1000 padded tokens at once: out of memory (from the second chunk on, `late`)
        if sum(p.length for p in batch) > 1000 and (calls["score"] > 1 or not late) and not calls["failed"]:
            calls["failed"] = late
            raise torch.OutOfMemoryError("CUDA out of memory (simulated)")
        return forward(self, batch)

    def counted(self, *args, **kwargs):
        calls["score"] += 1
        return score(self, *args, **kwargs)

    monkeypatch.setattr(PairRM, "_forward", small_gpu)
    monkeypatch.setattr(PairRM, "score", counted)
    for late in (False, True):
        calls.update(score=0, failed=False)
        with pytest.warns(RuntimeWarning, match="out of memory"):  # (no row cache: every row scored here)
            run = built_with_a_stand_in_policy(tmp_path / f"run_{late}", sample_dir, cache=False)
        scorer = Manifest(run).read()["scorer"]
        used = {int(b): n for b, n in scorer["batch_tokens_used"].items()}
        assert scorer["batch_tokens"] == 2048 and min(used) < 2048
        en, zh = (section(half, heading) for half, heading in zip(halves(card_for(run.root)[1]),
                                                                  ("### Parameters of this run", "### 本次运行的参数")))
        low = min(used)
        if not late:  # every prompt at the lowered budget: that is the one to give
            assert used == {low: 6} and f"`batch_tokens={low}`, `chunk_size=4`, `generation_batch_size=2`" in en
            assert (f"The scorer started at `batch_tokens` = 2048; an out-of-memory lowered it, and the prompts were "
                    f"scored at {low} (6 prompts).") in en
            assert f"`batch_tokens={low}`、`chunk_size=4`" in zh and f"打分时用的是 {low}（6 个提示词）" in zh
        else:  # the first chunk at 2048, the second lower: no one budget rebuilds both
            assert "besides these values, `chunk_size=4`, `generation_batch_size=2`" in en
            assert (f"the prompts were scored at 2048 (4 prompts), {low} (2 prompts), so no single `batch_tokens` "
                    f"rebuilds them all byte for byte.") in en
            assert f"2048（4 个提示词）、{low}（2 个提示词），因此没有哪一个 `batch_tokens` 能逐字节重建全部分数" in zh
        assert "`batch_tokens=2048`" not in en and "`batch_tokens=2048`" not in zh


def test_rows_from_the_row_cache_are_said_not_to_follow_this_runs_chunks(tmp_path, sample_dir):
    """With `cache: true` a row scored before comes from the row cache, whose key holds the scorer and its
    `batch_tokens` but no chunk: it was batched with another run's rows. The card said a rebuild with this run's
    `chunk_size` gives the same bytes, and nothing of the cache."""
    first = built_with_a_stand_in_policy(tmp_path / "first", sample_dir)  # chunks of 4, generation's of 4
    again = built_with_a_stand_in_policy(tmp_path / "again", sample_dir, chunk_size=2, generation_chunk_size=2)
    recorded = Manifest(again).read()
    assert recorded["scorer"]["cache"]["rows_from_cache"] == recorded["generation"]["cache"]["rows_from_cache"] == 6
    assert Manifest(first).read()["scorer"]["cache"]["rows_from_cache"] == 0
    scores = [datasets.Dataset.from_parquet(str(next(r.dataset.rglob("*.parquet"))))["candidate_scores"]
              for r in (first, again)]
    assert scores[0] == scores[1]  # the first run's values, bit for bit
    en, zh = (section(half, heading) for half, heading in zip(halves(card_for(again.root)[1]),
                                                              ("### Parameters of this run", "### 本次运行的参数")))
    assert "`batch_tokens=2048`, `chunk_size=2`, `generation_batch_size=2`, `generation_chunk_size=2`, the source" in en
    assert ("All 6 rows scored and the candidates of all 6 prompts generated for came from the row cache "
            "(`cache: true`): earlier runs made them with the same settings (batch sizes included) but in chunks of "
            "their own, batched with other rows. A rebuild that makes every row afresh with the values above may "
            "differ from these rows in float rounding; only the same row cache gives them back byte for byte.") in en
    assert ("打分的全部 6 行，以及生成的全部 6 个提示词的候选回复，来自行缓存（`cache: true`）" in zh
            and "只有同一个行缓存才能逐字节还原它们" in zh and "本次在它们旁边" not in zh)  # (every row: none here)
    # nothing from the cache (the first run): no such sentence
    en = section(halves(card_for(first.root)[1])[0], "### Parameters of this run")
    assert "row cache" not in en and "`chunk_size=4`" in en


def files_and_times(root: Path) -> dict[str, tuple[bytes, int]]:
    """Each file under `root`: its bytes and when it was last written (but the lock, which is no output)."""
    return {str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(root.rglob("*"))
            if p.is_file() and p.name != ".repro-run.lock"}


def test_a_comparison_that_fails_for_want_of_its_input_writes_no_card(tmp_path, capsys):
    # 04_compare with a mistyped reference said "The dataset card /home/.../dataset/README.md was written again with
    # what the run holds now." before its error, and wrote the card (the same text) and its record again: a notebook
    # that fails for want of its input writes nothing
    from repro import compare

    make_run(tmp_path / "run")
    card_path = card_for(tmp_path / "run")[1]
    written = files_and_times(tmp_path / "run")
    with pytest.raises(DataError, match="reference '.*nope.jsonl' is neither an existing file"):
        try:
            compare.compare(build(CompareParams, {"run_dir": str(tmp_path / "run"), "reference": "/tmp/nope.jsonl"}))
        finally:  # (as 04_compare's cell)
            assert repro_card.refresh(build(CompareParams, {"run_dir": str(tmp_path / "run")})) == card_path
    assert files_and_times(tmp_path / "run") == written
    assert capsys.readouterr().out == "The dataset card dataset/README.md already says what the run holds.\n"


def test_a_card_whose_input_has_gone_is_left_as_it_was_with_the_reason(tmp_path, capsys):
    """02_analyze's last cell writes the card again from 03_card's recorded parameters; a card_dataset moved away
    since must not fail the analysis that has just been written: the card is left, and the notebook says why."""
    from repro.parameters import AnalyzeParams

    rows = tmp_path / "mine.jsonl"
    rows.write_text("".join(json.dumps({"prompt": f"p{i}", "score_chosen": 1.0 + i, "score_rejected": -i / 2}) + "\n"
                            for i in range(8)))
    card_path = card_for(tmp_path / "run", card_dataset=str(rows))[1]
    with Manifest(RunDir(tmp_path / "run")).edit() as data:  # what 03_card on its own records
        data["parameters"] = {**data.get("parameters", {}), "card_dataset": str(rows)}
    before = card_path.read_bytes()
    # while it is there, the card is written again and the notebook says so (it showed a bare PosixPath(...)); the
    # same card says it is (04_compare refused for an unset reference said "written again"), named as the run names
    # it (dataset/README.md), not by a machine's path
    assert repro_card.refresh(build(AnalyzeParams, {"run_dir": str(tmp_path / "run")})) == card_path
    assert capsys.readouterr().out.endswith("The dataset card dataset/README.md already says what the run holds.\n")
    with Manifest(RunDir(tmp_path / "run")).edit() as data:  # an analysis' new figures: another card
        data["parameters"]["pretty_name"] = "Renamed"
    assert repro_card.refresh(build(AnalyzeParams, {"run_dir": str(tmp_path / "run")})) == card_path
    assert capsys.readouterr().out.endswith("The dataset card dataset/README.md was written again with what the "
                                            "run holds now.\n")
    card_path.write_bytes(before)
    rows.unlink()
    assert repro_card.refresh(build(AnalyzeParams, {"run_dir": str(tmp_path / "run")})) is None
    assert "The card dataset/README.md was not written again: card_dataset " in capsys.readouterr().out
    assert card_path.read_bytes() == before


def test_a_refresh_renders_the_card_once_and_leaves_files_with_the_same_bytes_alone(tmp_path, monkeypatch, capsys):
    """A refresh rendered the card twice when it had changed (once to compare, once to write), and wrote the
    card_dataset's parquet again (the same bytes, a new file) even when nothing had changed: now one rendering, and
    a file whose content is the same is left untouched (same inode, same mtime)."""
    publish = importlib.import_module("repro.card.publish")  # (the module: repro.card.publish is its function)
    rows = tmp_path / "mine.jsonl"
    rows.write_text("".join(json.dumps({"prompt": f"p{i}", "score_chosen": 1.0 + i, "score_rejected": -i / 2}) + "\n"
                            for i in range(8)))
    card_for(tmp_path / "run", card_dataset=str(rows))
    with Manifest(RunDir(tmp_path / "run")).edit() as data:  # what 03_card on its own records
        data["parameters"] = {**data.get("parameters", {}), "card_dataset": str(rows)}
    shards = sorted((tmp_path / "run" / "dataset" / "data").glob("*.parquet"))
    stats_before = [(p.stat().st_ino, p.stat().st_mtime_ns) for p in shards]
    assert repro_card.refresh(build(AnalyzeParams, {"run_dir": str(tmp_path / "run")}))
    assert capsys.readouterr().out.endswith("already says what the run holds.\n")
    assert [(p.stat().st_ino, p.stat().st_mtime_ns) for p in shards] == stats_before
    with Manifest(RunDir(tmp_path / "run")).edit() as data:  # another card
        data["parameters"]["pretty_name"] = "Renamed"
    rendered = []
    monkeypatch.setattr(publish, "build_card", lambda facts: rendered.append(facts) or repro_card.build_card(facts))
    assert repro_card.refresh(build(AnalyzeParams, {"run_dir": str(tmp_path / "run")}))
    assert capsys.readouterr().out.endswith("was written again with what the run holds now.\n")
    assert len(rendered) == 1 and "Renamed" in (tmp_path / "run" / "dataset" / "README.md").read_text()
    assert [(p.stat().st_ino, p.stat().st_mtime_ns) for p in shards] == stats_before


def test_a_drop_is_called_the_published_recipes_only_for_the_published_slice(tmp_path):
    """The published part2 datasets drop 400 of the 21,135 rows of [40000:61135] without saying why: the card says
    so for that slice, and of any other drop only what was done."""
    make_run(tmp_path / "run")  # 2 rows dropped from [0:]
    for half in halves(card_for(tmp_path / "run")[1]):
        assert "2" in half and "published" not in half.replace("unpublished", "") and "已发布" not in half
        assert "`drop_rows`" in half
    manifest_path = tmp_path / "run" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    # nothing dropped, one mini: the slice sentence says what was taken and no step that did nothing
    manifest["parameters"].update(drop_rows=0, limit=None)
    manifest_path.write_text(json.dumps(manifest))
    en, zh = halves(card_for(tmp_path / "run")[1])
    assert re.search(r"Rows \[0:end\] of the source file were taken\.\s", en)
    assert "dropped from the" not in en and "mini 0 of 1" not in en and "n // 1" not in en
    assert "端丢弃" not in zh and "1 个 mini" not in zh
    manifest["parameters"].update(part_start=40000, part_stop=61135, drop_rows=400, drop_from="start", mini_index=1,
                                  mini_count=4)
    manifest_path.write_text(json.dumps(manifest))
    en, zh = halves(card_for(tmp_path / "run")[1])
    assert "400 rows were dropped from the start (`drop_rows`); then mini 1 of 4 was kept (minis count from 0;" in en
    assert "再保留 4 个 mini 中的第 1 个" in zh
    assert "The published part2 datasets drop 400 rows of this part too; their authors do not document why, or " \
           "which." in en
    assert "as the published part2 datasets drop 400 rows of this part without saying why or which" in en
    assert "已发布的 part2 数据集也从这一部分丢弃了 400 行；其作者没有说明原因，也没有说明是哪些行。" in zh
    assert "已发布的 part2 数据集同样从这一部分丢弃了 400 行，其作者未说明原因与具体哪些行" in zh


def test_few_rows_and_p_values_below_the_smallest_float_on_the_card(tmp_path):
    """5 rows: the card's 95% bootstrap intervals are too narrow, and it says so in both languages; 3000 rows far
    apart: its p-values underflow to 0, shown as "< 1e-300", not as a p of 0."""
    from repro.analysis import report as analysis
    from repro.parameters import AnalyzeParams

    rng = np.random.default_rng(4)
    for name, n, shift in (("few", 5, 0.1), ("many", 3000, 5.0)):
        rows = [{"prompt": f"p{i}", "chosen": "w " * (i % 5 + 1), "rejected": "d", "score_chosen": c,
                 "score_rejected": c - shift - abs(d)} for i, (c, d) in enumerate(rng.normal(0, 1, (n, 2)).tolist())]
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        run = tmp_path / name
        p = build(CardParams, {"run_dir": str(run), "card_dataset": str(tmp_path / f"{name}.jsonl")})
        repro_card.gather_facts(p)  # the rows into the run's dataset/, then 02_analyze on them
        analysis.analyze(build(AnalyzeParams, {"run_dir": str(run), "bootstrap_resamples": 100}))
        en, zh = halves(card_for(run, card_dataset=str(tmp_path / f"{name}.jsonl"))[1])
        if name == "few":
            assert "With 5 rows, the 95% bootstrap intervals above are too narrow" in en
            assert "只有 5 行时，上表的 95% 自助法区间偏窄" in zh
        else:
            assert "too narrow" not in en and "偏窄" not in zh
            for half in (en, zh):
                assert half.count("| < 1e-300 |") == 3 and not re.search(r"\| 0 \|\n", half)


def test_a_source_of_one_file_is_not_said_to_have_a_split(tmp_path):
    # "built ... from `uf 1.jsonl` (split `train_prefs`)": a single file has no splits (source_split is ignored);
    # the embedded demo is one file too: its card said "from `demo` (split `train_prefs`)"
    run = make_run(tmp_path / "run")["run"]

    def built_from(source: str, split: str | None) -> tuple[str, str]:
        parameters = {**Manifest(run).read()["parameters"], "source": source}
        Manifest(run).update(parameters=parameters, stages={"load": {"status": "done", "source": source,
                                                                     "split": split}})
        return halves(card_for(run.root)[1])

    en, zh = built_from("someone/uf", "train_prefs")  # a hub dataset's split
    assert "from `someone/uf` (split `train_prefs`)." in en and "基于 `someone/uf`（划分 `train_prefs`）" in zh
    for source, split in (("uf", None), ("demo", "train_prefs")):  # (a demo run's manifest records source_split)
        en, zh = built_from(source, split)
        assert f"from `{source}`. For each prompt" in en and f"由 `repro` 包基于 `{source}` 构建。" in zh, source
        assert "source split" not in en and "源数据划分" not in zh  # the slice, the counts table, the size
        assert "Rows [0:end] of the source file were taken" in en and "取源文件的第 [0:末尾] 行" in zh
        assert "| rows in the source file |" in en and "out of 29 rows in the source file." in en


def _template_names(path: Path) -> set[str]:
    """The words and sentences a language file defines (a name starting with _ is its own helper, as Jinja keeps it)."""
    text = path.read_text(encoding="utf-8")
    names = set(re.findall(r"\{%-?\s*macro\s+(\w+)\(", text)) | set(re.findall(r"\{%-?\s*set\s+(\w+)\s*=", text))
    return {name for name in names if not name.startswith("_")}


def test_each_language_defines_every_sentence_and_every_note_of_the_comparison():
    # a sentence in en.jinja alone left the Chinese half without it; the card's Reproduction notes are rendered only
    # where the language defines the note (a note 04_compare adds and the templates lack would vanish unsaid)
    templates = Path(repro_card.__file__).parent / "templates"
    en, zh = _template_names(templates / "en.jinja"), _template_names(templates / "zh.jinja")
    assert en == zh, {"en only": sorted(en - zh), "zh only": sorted(zh - en)}
    compare_notes = {name for name in _template_names(templates.parent.parent / "analysis" / "templates" /
                                                     "compare.jinja") if name.endswith("_note")}
    # "Scores not compared" is the card's own paragraph (scores_missing), not a note in its list
    assert compare_notes - en == {"scores_note"}
    # each counted in the singular or the plural ("share 1 key value(s)")
    note = repro_card.phrases("en").duplicate_note
    assert "2 of the reference's rows share 1 key value: they" in note([("reference", 2, 1, "prompt_id", [3, 4], "ab")], {})
    assert "; 4 of this dataset's rows share 2 key values:" in note(
        [("reference", 2, 1, "prompt_id", [3, 4], "ab"), ("candidate", 4, 2, "prompt_id", [0, 1], "cd")], {})


def test_candidates_a_stand_in_policy_wrote_are_not_offered_for_training_even_scored_by_a_real_scorer(tmp_path):
    """The banner said the texts are "not a language model worth imitating", while Typical uses recommended DPO on
    them, the tags said `dpo` and How to use gave the DPOTrainer recipe (a real scorer, a stand-in policy)."""
    run = make_run(tmp_path / "run", stand_in=False)["run"]
    with Manifest(run).edit() as data:
        data["parameters"].update(scorer_model="llm-blender/PairRM")
        data["scorer"].update(model="llm-blender/PairRM", stand_in=False)
        data["generation"] = {"policy_model": "builtin:tiny-policy", "stand_in": True, "n_candidates": 2}
    facts, path = card_for(run.root)
    en, zh = halves(path)
    assert not facts.stand_in and "dpo" not in DatasetCard.load(path).data.tags
    assert "Stand-in candidates" in en and "**For inspection only**" in en and "DPOTrainer" not in en
    uses, uses_zh = part(en, "## Typical uses"), part(zh, "## 常用场景")
    assert uses.strip() == ("- Trying `repro` itself: the pipeline, the analysis and the card on responses a stand-in "
                            "policy wrote (not for training: their texts are no language model's).")
    assert "试用 `repro`" in uses_zh and "离线偏好优化" not in uses_zh


def test_prompts_of_an_unknown_budget_are_said_so_and_no_batch_tokens_is_given(tmp_path):
    """Chunks resumed from a work dir an older repro left record no budget (`batch_tokens_unknown`): the card gave
    `batch_tokens` as if every prompt had been scored at the one recorded for the others."""
    make_run(tmp_path / "run")
    for used, lowered in (({"2000": 20}, False), ({"448": 20}, True)):
        with Manifest(RunDir(tmp_path / "run")).edit() as data:
            data["scorer"].update(batch_tokens=2000, prompts=24, batch_tokens_used=used, batch_tokens_unknown=4)
        en, zh = (section(half, heading) for half, heading in zip(halves(card_for(tmp_path / "run")[1]),
                                                                  ("### Parameters of this run", "### 本次运行的参数")))
        assert "`batch_tokens=" not in en and "`batch_tokens=" not in zh and "`chunk_size=" in en
        assert ("The `batch_tokens` of 4 prompts is not known: they were resumed from chunks that an older `repro` "
                "made, which do not record the budget they were scored at, so the values above leave it out.") in en
        assert ("有 4 个提示词的 `batch_tokens` 不得而知：它们续自旧版 `repro` 生成的块，"
                "这些块没有记录打分时所用的预算，因此上述取值未给出它。") in zh
        assert ("an out-of-memory lowered it, and the prompts were scored at 448 (20 prompts)." in en) == lowered
        assert ("打分时用的是 448（20 个提示词）" in zh) == lowered


def test_an_older_repros_resumed_run_states_no_budget_for_the_prompts_it_resumed(tmp_path):
    """A run an older repro resumed records neither `batch_tokens_used` nor its chunks' budgets (only its own call's,
    where an out-of-memory lowered them): its card said "a byte-identical rebuild needs `batch_tokens=2048`", though
    the resumed prompts may have been scored at a lowered budget."""
    make_run(tmp_path / "run")
    old = dict(batch_tokens=2048, prompts=24, prompts_computed=8, chunks_resumed=2, chunk_size=8,
               cache={"rows_from_cache": 4, "rows_computed": 8, "damaged_entries": 0, "key_format": 1})
    for record, unknown in ((old, 12), ({**old, "batch_tokens_used": {"1024": 12}}, 12),
                            ({**old, "batch_tokens_used": {"2048": 24}}, 0),  # (this repro's: every budget recorded)
                            ({**old, "backend": "llm-blender"}, 0), ({**old, "chunks_resumed": 0}, 0)):
        with Manifest(RunDir(tmp_path / "run")).edit() as data:
            data["scorer"] = {**data["scorer"], **record}
        en, zh = (section(half, heading) for half, heading in zip(halves(card_for(tmp_path / "run")[1]),
                                                                  ("### Parameters of this run", "### 本次运行的参数")))
        assert ("`batch_tokens=2048`" in en) == (not unknown) and ("`batch_tokens=2048`" in zh) == (not unknown), en
        assert (f"The `batch_tokens` of {unknown} prompts is not known: they were resumed from chunks that an older "
                f"`repro` made, which do not record the budget they were scored at, so the values above leave it "
                f"out.") in en if unknown else "is not known" not in en
        assert (f"有 {unknown} 个提示词的 `batch_tokens` 不得而知" in zh) == bool(unknown)
        assert ("and the prompts were scored at 1024 (12 prompts)." in en) == ("1024" in str(record))


def test_the_row_cache_sentence_begins_as_a_sentence_and_speaks_of_rows_made_here_only_where_some_were(tmp_path):
    """With only generation rows from the row cache the sentence began in lowercase ("the candidates of 12 of the 12
    prompts generated for came from the row cache"), and with every row from it, it spoke of "the rows made here
    beside them", which did not exist."""
    make_run(tmp_path / "run")
    for cached, made_here in ((12, False), (5, True)):
        with Manifest(RunDir(tmp_path / "run")).edit() as data:
            data["generation"] = {"prompts_generated": 12, "cache": {"rows_from_cache": cached}}
        en, zh = (section(half, heading) for half, heading in zip(halves(card_for(tmp_path / "run")[1]),
                                                                  ("### Parameters of this run", "### 本次运行的参数")))
        of_12 = "all 12" if cached == 12 else f"{cached} of the 12"  # (it said "12 of the 12")
        assert (f" The candidates of {of_12} prompts generated for came from the row cache (`cache: true`): "
                f"earlier runs made them with the same settings (batch sizes included) but in chunks of their own, "
                f"batched with other rows{'; the rows made here beside them were batched without them' * made_here}. "
                f"A rebuild that makes") in en
        assert (("生成的全部 12 个提示词" if cached == 12 else f"生成的 12 个提示词中有 {cached} 个提示词")
                + "的候选回复，来自行缓存（`cache: true`）："
                f"它们由先前的运行以相同设置（包括批大小）生成，但分在那些运行自己的块中、与其他行一起成批计算"
                f"{'；本次在它们旁边计算的行则没有与它们同批' * made_here}。") in zh
        assert ("the rows made here" in en) == made_here and ("本次在它们旁边" in zh) == made_here


def test_rows_from_the_row_cache_of_a_stage_whose_rows_are_not_counted(tmp_path):
    """A scorer record without `prompts` (and a generation one without `prompts_generated`): the card read "5 of the
    unknown rows scored and the candidates of 3 of the unknown prompts generated for came from the row cache ...; the
    rows made here beside them", and "打分的 未知 行中有 5 行", though whether any row was made here is not known."""
    make_run(tmp_path / "run")
    with Manifest(RunDir(tmp_path / "run")).edit() as data:
        data["scorer"].update(batch_tokens=2048, cache={"rows_from_cache": 5})
        data["generation"] = {"cache": {"rows_from_cache": 3}}
    en, zh = (section(half, heading) for half, heading in zip(halves(card_for(tmp_path / "run")[1]),
                                                              ("### Parameters of this run", "### 本次运行的参数")))
    assert (" 5 rows scored and the candidates of 3 prompts generated for came from the row cache (`cache: true`): "
            "earlier runs made them with the same settings (batch sizes included) but in chunks of their own, batched "
            "with other rows. A rebuild that makes") in en
    assert ("打分的行中有 5 行，以及生成的提示词中有 3 个提示词的候选回复，来自行缓存（`cache: true`）：它们由先前的运行以"
            "相同设置（包括批大小）生成，但分在那些运行自己的块中、与其他行一起成批计算。") in zh
    assert "unknown" not in en and "未知" not in zh


def test_the_further_scorers_budgets_and_rows_from_the_row_cache_are_stated_as_the_primarys(tmp_path):
    """The rebuild sentences stated the primary scorer's lowered or unknown budgets and rows from the row cache only:
    a further scorer (`scorers:`) whose budget an out-of-memory lowered, or whose rows came from the cache, went
    unsaid; and the rows the cache gave a resumed run's interrupted call (`resumed_from_cache`) were counted as made
    here, those of an older repro's chunks (`resumed_unknown`) too."""
    make_run(tmp_path / "run")
    with Manifest(RunDir(tmp_path / "run")).edit() as data:
        data["scorer"].update(batch_tokens=2000, prompts=24, cache={"rows_from_cache": 2, "resumed_from_cache": 3})
        data["generation"] = {"prompts_generated": 24, "cache": {"rows_from_cache": 0, "resumed_unknown": 4}}
        rm = {"model": "builtin:tiny-reward-llama", "kind": "sequence_classifier", "prompts": 24, "batch_tokens": 4096}
        data["scorers"] = [
            {"name": "primary", "column": "candidate_scores", "decides_pairs": True, **data["scorer"]},
            {"name": "rm", "column": "candidate_scores_rm", "decides_pairs": False, **rm,
             "batch_tokens_used": {"4096": 8, "2048": 12}, "batch_tokens_unknown": 4,
             "cache": {"rows_from_cache": 6, "resumed_unknown": 8}},
            {"name": "quiet", "column": "candidate_scores_quiet", "decides_pairs": False, **rm,
             "cache": {"rows_from_cache": 0}}]
    en, zh = (section(half, heading) for half, heading in zip(halves(card_for(tmp_path / "run")[1]),
                                                              ("### Parameters of this run", "### 本次运行的参数")))
    assert ("The scorer `rm` started at `batch_tokens` = 4096; an out-of-memory lowered it, and the prompts were "
            "scored at 4096 (8 prompts), 2048 (12 prompts), so no single `batch_tokens` rebuilds them all byte for "
            "byte. The `batch_tokens` of 4 prompts scored by `rm` is not known: they were resumed from chunks that an "
            "older `repro` made, which do not record the budget they were scored at. 5 of the 24 rows scored and 6 of "
            "the 24 rows scored by `rm` came from the row cache (`cache: true`): earlier runs made them") in en
    assert ("Whether `rm`'s scores of 8 prompts came from the row cache is not known: they were resumed from chunks "
            "that an older `repro` made, which do not record it. Whether the candidates of 4 prompts came from the "
            "row cache is not known") in en
    assert "`quiet`" not in en and "The scorer started" not in en and "`batch_tokens=2000`" in en
    assert ("打分器 `rm` 起初用的是 `batch_tokens` = 4096；一次显存不足使其降低，打分时用的是 4096（8 个提示词）、"
            "2048（12 个提示词），因此没有哪一个 `batch_tokens` 能逐字节重建全部分数。有 4 个提示词（`rm` 打分）的 "
            "`batch_tokens` 不得而知：它们续自旧版 `repro` 生成的块，这些块没有记录打分时所用的预算。"
            "打分的 24 行中有 5 行，以及由 `rm` 打分的 24 行中有 6 行，来自行缓存（`cache: true`）") in zh
    assert ("有 8 个提示词的 `rm` 分数是否来自行缓存不得而知：它们续自旧版 `repro` 生成的块，这些块没有记录这一点。"
            "有 4 个提示词的候选回复是否来自行缓存不得而知") in zh and "`quiet`" not in zh

def test_a_dataset_whose_known_recipe_names_a_built_in_stand_in_is_not_offered_for_training(tmp_path):
    """known_recipe `{scorer: builtin:tiny-pairrm}` on rows made elsewhere: the card tagged them `dpo`, recommended
    DPO and "Studying PairRM as a judge", gave the DPOTrainer recipe and no stand-in banner."""
    make_run(tmp_path / "theirs", stand_in=False, manifest=False, metrics=False)  # nothing beside them declares it
    theirs = str(tmp_path / "theirs" / "dataset")
    facts, card_path = card_for(tmp_path / "run", card_dataset=theirs, known_recipe={"scorer": "builtin:tiny-pairrm"})
    assert facts.stand_in and not facts.for_training
    tags = DatasetCard.load(card_path).data.tags
    assert "dpo" not in tags and "stand-in-scores" in tags
    en, zh = halves(card_path)
    assert ("> **Stand-in scores.** `score_chosen` and `score_rejected` come from `builtin:tiny-pairrm`, a stand-in "
            "ranker that this project builds offline (PairRM's architecture, not its weights), as `known_recipe` "
            "declares. They show the pipeline working") in en
    assert ("来自 `builtin:tiny-pairrm`，这是本项目离线构建的替身排序器（采用 PairRM 的结构，但不是其权重）"
            "（据 `known_recipe` 声明）。") in zh
    assert "Studying PairRM" not in en and "Offline preference optimisation" not in part(en, "## Typical uses")
    assert "DPOTrainer" not in part(en, "## How to use") and "DPOTrainer" not in part(zh, "## 使用方法")
    # a reward-model stand-in by name; a built-in name this repro does not know: a stand-in all the same
    for told, said in (("builtin:tiny-reward-llama", "a stand-in reward model that this project builds offline"),
                       ("builtin:tiny-nothing", "come from a stand-in scorer, as `known_recipe` declares.")):
        facts, card_path = card_for(tmp_path / "run", card_dataset=theirs, known_recipe={"scorer": told})
        assert facts.stand_in and said in halves(card_path)[0] and "dpo" not in DatasetCard.load(card_path).data.tags


# ---------------------------------------------------------------------------------------------
# datasets of the field's other shapes, carded as they are (real rows of tests/fixtures/ultrafeedback)
# ---------------------------------------------------------------------------------------------
def write_rows(path: Path, rows: list[dict]) -> str:
    """`rows` as a .jsonl or .parquet file (by `path`'s suffix), as a dataset of another project comes."""
    ds = datasets.Dataset.from_list(rows)
    ds.to_json(path, force_ascii=False) if path.suffix == ".jsonl" else ds.to_parquet(path)
    return str(path)


def test_chosen_rejected_and_candidates_are_described_as_what_they_hold(tmp_path, train_rows):
    """A TRL file of strings, to_trl's conversational rows (chosen: the assistant turn alone) and SPPO rows whose
    generate_i are strings: each column was said to be a `[user prompt, assistant response]` conversation."""
    rows = train_rows[:12]
    text = {"chosen": "The preferred response's text.", "rejected": "The dispreferred response's text."}
    trl = write_rows(tmp_path / "trl.jsonl", [{"prompt": r["prompt"], "chosen": r["chosen"][-1]["content"],
                                               "rejected": r["rejected"][-1]["content"]} for r in rows])
    en, zh = halves(card_for(tmp_path / "trl", card_dataset=trl)[1])
    assert [table_rows(en, f"`{c}`")[0][1:] for c in text] == [["string", said] for said in text.values()]
    assert [table_rows(zh, f"`{c}`")[0][2] for c in text] == ["优选回复的文本。", "待拒回复的文本。"]
    # to_trl's rows without prompt_id: the prompt a [user] turn, chosen and rejected the assistant's turn alone
    conversational = write_rows(tmp_path / "trlconv.parquet", [
        {"prompt": r["chosen"][:1], "chosen": r["chosen"][1:], "rejected": r["rejected"][1:],
         "score_chosen": r["score_chosen"], "score_rejected": r["score_rejected"]} for r in rows])
    en, zh = halves(card_for(tmp_path / "trlconv", card_dataset=conversational)[1])
    assert table_rows(en, "`chosen`")[0][2] == "The preferred conversation: `[assistant response]`."
    assert table_rows(en, "`rejected`")[0][2] == "The dispreferred conversation: `[assistant response]`."
    assert table_rows(zh, "`chosen`")[0][2] == "优选对话：`[助手回复]`。"
    # a system turn first: said as the turns are, in each language
    system = write_rows(tmp_path / "system.parquet", [
        {**{k: r[k] for k in ("prompt", "prompt_id", "score_chosen", "score_rejected")},
         "chosen": [{"content": "Be brief.", "role": "system"}, *r["chosen"]], "rejected": r["rejected"]}
        for r in rows])
    en, zh = halves(card_for(tmp_path / "system", card_dataset=system)[1])
    assert table_rows(en, "`chosen`")[0][2] == (
        "The preferred conversation: `[system prompt, user prompt, assistant response]`.")
    assert table_rows(en, "`rejected`")[0][2] == "The dispreferred conversation: `[user prompt, assistant response]`."
    assert table_rows(zh, "`chosen`")[0][2] == "优选对话：`[系统提示词, 用户提示词, 助手回复]`。"
    # SPPO's columns with its candidates as text
    sppo = write_rows(tmp_path / "sppo.parquet", [
        {"prompt": r["prompt"], "prompt_id": r["prompt_id"], "chosen": r["chosen"], "rejected": r["rejected"],
         "generate_0": r["chosen"][-1]["content"], "generate_1": r["rejected"][-1]["content"],
         "rm_scores": [r["score_chosen"], r["score_rejected"]]} for r in rows])
    en, zh = halves(card_for(tmp_path / "sppo", card_dataset=sppo)[1])
    assert table_rows(en, "`generate_1`")[0][1:] == ["string", "Candidate 1's text (SPPO's `generate_1`)."]
    assert table_rows(zh, "`generate_1`")[0][2] == "第 1 个候选回复的文本（SPPO 的 `generate_1`）。"
    assert table_rows(en, "`chosen`")[0][2] == "The preferred conversation: `[user prompt, assistant response]`."
    # SPPO's own (conversations) as before
    en, _ = halves(card_for(tmp_path / "sppo-own", card_dataset=write_rows(tmp_path / "own.parquet",
                                                                           recipe_rows("sppo").to_list()))[1])
    assert table_rows(en, "`generate_0`")[0][2] == (
        "Candidate 0 as a `[user prompt, assistant response]` conversation (SPPO's `generate_0`).")


def test_scores_under_other_names_are_named_with_the_renaming_that_lets_them_be_analysed(tmp_path, train_rows):
    """Argilla's cleaned layout: the scores as `chosen-rating` / `rejected-rating`. The card said the rows carry no
    scores (their layout keeps only the pair); 02_analyze says which columns it lacks and to rename them."""
    argilla = write_rows(tmp_path / "argilla.parquet", [
        {"prompt": r["prompt"], "chosen": r["chosen"], "chosen-rating": r["score_chosen"], "chosen-model": "gpt-4",
         "rejected": r["rejected"], "rejected-rating": r["score_rejected"]} for r in train_rows[:12]])
    facts, card_path = card_for(tmp_path / "argilla", card_dataset=argilla)
    en, zh = halves(card_path)
    said = ("the rows lack `score_chosen`, `score_rejected`, which `notebooks/02_analyze.ipynb` reads the scores "
            "from; of their columns, these hold numbers: `chosen-rating`, `rejected-rating`. Renaming the ones that "
            "hold the scores to those names lets it analyse the rows.")
    assert f"> - Characteristics (key statistics, tests, length bias): {said}" in en
    assert "keeps only the pair" not in en
    assert ("数据行缺少 `score_chosen`、`score_rejected`，而 `notebooks/02_analyze.ipynb` 从这些列读取分数；数据行中"
            "为数值的列有 `chosen-rating`、`rejected-rating`：将存放分数的列重命名为上述列名，即可分析这些行。") in zh
    # the renaming it names: the analysis reads the rows
    from repro.analysis import report as analysis

    renamed = write_rows(tmp_path / "renamed.parquet", datasets.Dataset.from_parquet(argilla).rename_columns(
        {"chosen-rating": "score_chosen", "rejected-rating": "score_rejected"}).to_list())
    assert analysis.analyze(build(AnalyzeParams, {"run_dir": str(tmp_path / "renamed"), "dataset": renamed,
                                                  "bootstrap_resamples": 100})).metrics["n"] == 12
    # pairs with no column of numbers at all: as before
    trl = write_rows(tmp_path / "trl.jsonl", [{"prompt": r["prompt"], "chosen": r["chosen"][-1]["content"],
                                               "rejected": r["rejected"][-1]["content"]} for r in train_rows[:12]])
    en, _ = halves(card_for(tmp_path / "trl", card_dataset=trl)[1])
    assert "the rows carry no scores to analyse (this layout keeps only the pair)." in en


def h4_folder(root: Path, train_rows: list[dict], test_rows: list[dict]) -> str:
    """H4's layout: data/train_prefs-*.parquet and data/test_prefs-*.parquet."""
    write_split(datasets.Dataset.from_list(train_rows), root, "train_prefs")
    write_split(datasets.Dataset.from_list(test_rows), root, "test_prefs")
    return str(root)


def test_a_folder_of_several_splits_names_those_left_out_and_how_to_add_them(tmp_path, train_rows, test_rows):
    """The card published card_split alone, with no word of the source's other splits."""
    folder = h4_folder(tmp_path / "h4", train_rows[:20], test_rows[:10])
    facts, card_path = card_for(tmp_path / "run", card_dataset=folder)
    en, zh = halves(card_path)
    said = ("`h4` has another split that this dataset leaves out: `test_prefs`. To add it, run "
            "`notebooks/03_card.ipynb` on this run again with `card_split` set to it.")
    assert said in section(en, "### Splits and sizes")
    assert ("`h4` 还有 1 个本数据集未收录的划分：`test_prefs`。如需加入，请将 `card_split` 设为该划分的名称，在本运行上"
            "再次运行 `notebooks/03_card.ipynb`。") in zh
    facts, card_path = card_for(tmp_path / "run", card_dataset=folder, card_split="test_prefs")  # as it says
    assert [(s.name, s.num_examples) for s in facts.splits] == [("test_prefs", 10), ("train_prefs", 20)]
    en, zh = halves(card_path)
    assert "leaves out" not in en and "未收录" not in zh
    # one file has no other split to name
    en, _ = halves(card_for(tmp_path / "file", card_dataset=str(ROOT / "tests" / "fixtures" / "ultrafeedback"
                                                                 / "test_prefs.jsonl"))[1])
    assert "leaves out" not in en
    # a folder of train_prefs.jsonl and test_prefs.jsonl (no data/): it named none, then datasets' test (beside
    # train_prefs: the splits' names mixed); now test_prefs, as the split described is named (not train, which is
    # train_prefs.jsonl, the split described)
    loose = tmp_path / "loose"
    loose.mkdir()
    for name, rows in (("train_prefs", train_rows[:20]), ("test_prefs", test_rows[:10])):
        write_rows(loose / f"{name}.jsonl", rows)
    en, _ = halves(card_for(tmp_path / "loose_run", card_dataset=str(loose))[1])
    assert ("`loose` has another split that this dataset leaves out: `test_prefs`. To add it, run "
            "`notebooks/03_card.ipynb` on this run again with `card_split` set to it.") in \
        section(en, "### Splits and sizes")
    facts, card_path = card_for(tmp_path / "loose_run", card_dataset=str(loose), card_split="test_prefs")  # as it says
    assert [(s.name, s.num_examples) for s in facts.splits] == [("test_prefs", 10), ("train_prefs", 20)]
    assert "leaves out" not in halves(card_path)[0]


def test_an_analysis_of_another_split_says_the_split_the_card_describes_and_what_to_set(tmp_path, train_rows,
                                                                                          test_rows, capsys):
    """02_analyze of test_prefs into a run carded from train_prefs: it printed "metrics.json describes 100 rows ...
    Re-run notebooks/02_analyze.ipynb on this run." (the notebook that had just run), and 03_card failed the same."""
    from repro.analysis import report as analysis

    folder, run = h4_folder(tmp_path / "h4", train_rows[:20], test_rows[:10]), tmp_path / "run"

    def analyse(split: str) -> AnalyzeParams:
        p = build(AnalyzeParams, {"run_dir": str(run), "dataset": folder, "dataset_split": split,
                                  "bootstrap_resamples": 100})
        analysis.analyze(p)
        return p

    analyse("train_prefs")
    card_for(run, card_dataset=folder)
    capsys.readouterr()
    assert repro_card.refresh(analyse("test_prefs")) is None  # (02_analyze's last cell)
    printed = " ".join(capsys.readouterr().out.split())
    said = (f"{run}/metrics.json describes split 'test_prefs' (02_analyze's dataset_split), but the card describes "
            f"split 'train_prefs' (03_card's card_split): run notebooks/02_analyze.ipynb on this run with "
            f"dataset_split 'train_prefs' to describe the card's split again, or notebooks/03_card.ipynb with "
            f"card_split 'test_prefs' to add the split analysed to the card, which then describes it.")
    assert said in printed
    assert "Re-run notebooks/02_analyze.ipynb on this run" not in printed and "bring it up to date" not in printed
    with pytest.raises(DataError) as refused:
        card_for(run, card_dataset=folder)
    assert said in " ".join(str(refused.value).split())
    # either way out it names works: the split added to the card, which describes the split analysed ...
    facts, card_path = card_for(run, card_dataset=folder, card_split="test_prefs")
    assert [s.name for s in facts.splits] == ["test_prefs", "train_prefs"] and facts.metrics["n"] == 10
    assert 'split="test_prefs"' in halves(card_path)[0]
    # ... and the card's split analysed again: the card (its parameters as 03_card last ran) describes it
    assert repro_card.refresh(analyse("train_prefs")) is not None
    facts = repro_card.gather_facts(build(CardParams, {"run_dir": str(run), "card_dataset": folder,
                                                       "card_split": "test_prefs"}))
    assert [s.name for s in facts.splits] == ["train_prefs", "test_prefs"] and facts.metrics["n"] == 20

    # a run built here: its card describes the split 01_construct wrote
    built = make_run(tmp_path / "built", seed_rows(24), metrics=False)["run"]
    Manifest(built).record("dataset", {"split": "train_prefs"})
    write_split(datasets.Dataset.from_list(seed_rows(10), features=SEED_FEATURES), built.dataset, "test_prefs")
    analysis.analyze(build(AnalyzeParams, {"run_dir": str(built.root), "dataset_split": "test_prefs",
                                           "bootstrap_resamples": 100}))
    with pytest.raises(DataError) as refused:
        card_for(built.root)
    assert " ".join(str(refused.value).split()) == (
        f"{built.metrics} describes split 'test_prefs' (02_analyze's dataset_split), but the card describes split "
        f"'train_prefs' (the one 01_construct wrote): run notebooks/02_analyze.ipynb on this run with dataset_split "
        f"'train_prefs' to describe it again.")


def test_prompts_shared_by_several_rows_are_stated_and_prompt_id_not_called_the_key(tmp_path, train_rows):
    """10 rows sharing 5 prompt_ids: the card never said so, and called prompt_id "the key"; 04_compare reports it."""
    rows = train_rows[:20] + train_rows[:5]
    recipe = {"scorer": "GPT-4 (UltraFeedback's ratings)"}  # (a scorer known: "How to use" trains on the pairs)
    facts, card_path = card_for(tmp_path / "run", card_dataset=write_rows(tmp_path / "rows.jsonl", rows),
                                known_recipe=recipe)
    en, zh = halves(card_path)
    assert ("- Repeated prompts: 10 of the 25 rows share their `prompt_id` with another row (5 values occur more "
            "than once): a prompt may have several pairs here.") in part(en, "## Challenges and limitations")
    assert ("Keep `prompt_id` to check overlap with evaluation prompts; it is no key of these rows (10 share "
            "theirs with another row).") in part(en, "## How to use")
    assert "as the key" not in en and "作为键" not in zh
    assert ("重复的提示词：25 行中有 10 行与其他行共用 `prompt_id`（5 个值出现不止一次）：同一提示词在此可能有多个"
            "偏好对。") in zh
    assert "它并非这些行的键（有 10 行与其他行共用同一值）。" in zh
    # no prompt_id: the prompts repeat
    no_ids = write_rows(tmp_path / "no_ids.jsonl", [{k: v for k, v in r.items() if k != "prompt_id"} for r in rows])
    en, _ = halves(card_for(tmp_path / "no-ids", card_dataset=no_ids, known_recipe=recipe)[1])
    assert "10 of the 25 rows share their `prompt` with another row (5 values occur more than once)" in en
    # every prompt once: as before
    en, _ = halves(card_for(tmp_path / "once", card_dataset=write_rows(tmp_path / "once.jsonl", train_rows[:20]),
                            known_recipe=recipe)[1])
    assert "Keep `prompt_id` as the key, to check overlap with evaluation prompts." in en and "Repeated" not in en


def test_prompt_ids_not_all_text_are_compared_by_their_value(tmp_path, train_rows):
    """A prompt_id of mixed types (datasets' Json column: JSON text) was never the prompt's sha256 ("in any of the 23
    rows"), and ids not all text were never checked for repeats: integer ids shared by 4 rows were called the key."""
    rows = [train_rows[0]] * 3 + train_rows[:20]  # rows 0-3 one prompt (and id)
    recipe = {"scorer": "GPT-4 (UltraFeedback's ratings)"}
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text("".join(json.dumps({**r, "prompt_id": 777} if i == 5 else r) + "\n" for i, r in enumerate(rows)))
    en, zh = halves(card_for(tmp_path / "mixed", card_dataset=str(mixed), known_recipe=recipe)[1])
    assert "It equals the sha256 hex digest of the UTF-8 `prompt` in 22 of 23 rows." in en
    assert "在 23 行中有 22 行等于 `prompt`（UTF-8）的 sha256 十六进制摘要。" in zh
    assert "- Repeated prompts: 4 of the 23 rows share their `prompt_id` with another row (1 value occurs" in en
    ints = write_rows(tmp_path / "ints.jsonl", [{**r, "prompt_id": 1000 if i < 4 else i} for i, r in enumerate(rows)])
    en, _ = halves(card_for(tmp_path / "ints", card_dataset=ints, known_recipe=recipe)[1])
    assert "- Repeated prompts: 4 of the 23 rows share their `prompt_id` with another row (1 value occurs" in en
    assert "as the key" not in en and "it is no key of these rows (4 share theirs with another row)" in en
    # no usable id (null in every row): the prompts are compared
    no_ids = write_rows(tmp_path / "no_ids.jsonl", [{**r, "prompt_id": None} for r in rows])
    en, _ = halves(card_for(tmp_path / "no-ids", card_dataset=no_ids, known_recipe=recipe)[1])
    assert "4 of the 23 rows share their `prompt` with another row (1 value occurs more than once)" in en


def test_pairs_of_one_response_twice_are_said_and_left_out_by_the_filter(tmp_path, train_rows):
    """20 of 40 real rows whose `rejected` holds their chosen response: neither metrics.json nor the card said so, and
    "How to use" kept "the 37 of the 40 pairs whose `chosen` scored strictly higher", counting them as usable."""
    rows = json.loads(json.dumps(train_rows[:40]))
    for r in rows[:20]:
        r["rejected"][-1]["content"] = r["chosen"][-1]["content"]
    margins = [r["score_chosen"] - r["score_rejected"] for r in rows[20:]]  # (the pairs of two responses)
    kept, ties = sum(m > 0 for m in margins), sum(m == 0 for m in margins)
    path = write_rows(tmp_path / "rows.jsonl", rows)
    analyze(build(AnalyzeParams, {"run_dir": str(tmp_path / "run"), "dataset": path, "bootstrap_resamples": 100}))
    facts, card_path = card_for(tmp_path / "run", card_dataset=path, known_recipe={"scorer": "gpt-4"})
    assert facts.metrics["same_responses"] == 20
    en, zh = halves(card_path)
    code = 'train = train.filter(lambda row: row["score_margin"] > 0 and row["chosen"] != row["rejected"])'
    assert (f"Ties carry no preference, nor does a pair of one response: `{code}` keeps the {kept} of the 40 pairs "
            f"whose `chosen` scored strictly higher and differs from `rejected`, leaving out {ties} tie and 20 pairs "
            f"of one response.") in part(en, "## How to use")
    assert ("- One response twice: of the 40 pairs, 20 hold the same response as `chosen` and as `rejected`: such a "
            "pair carries no preference; the filter in \"How to use\" leaves them out.") in en
    assert (f"`{code}` 保留 40 对中 `chosen` 得分严格更高且与 `rejected` 不同的 {kept} 对，去掉 {ties} 对平局和 20 对"
            f"同一回复的偏好对。") in zh
    assert ("- 同一回复出现两次：40 对中有 20 对的 `chosen` 与 `rejected` 是同一回复：这样的偏好对不含偏好信息；"
            "“使用方法”中的筛选会去掉它们。") in zh
    train = to_trl(datasets.Dataset.from_list(rows))  # the card's code keeps what it says
    assert len(train.filter(lambda row: row["score_margin"] > 0 and row["chosen"] != row["rejected"])) == kept


def test_a_row_without_a_response_to_measure_is_named_beside_the_length_bias(tmp_path, train_rows):
    """The lengths left out a row whose `rejected` has no assistant turn without a word; the card names it now."""
    rows = json.loads(json.dumps(train_rows[:40]))
    rows[5]["rejected"] = rows[5]["rejected"][:1]
    path = write_rows(tmp_path / "rows.jsonl", rows)
    analyze(build(AnalyzeParams, {"run_dir": str(tmp_path / "run"), "dataset": path, "bootstrap_resamples": 100}))
    en, zh = halves(card_for(tmp_path / "run", card_dataset=path, known_recipe={"scorer": "gpt-4"})[1])
    assert ("1 row is left out of these figures: no response to measure in its `chosen` or `rejected` (the first: "
            "row 5, counted from 0, in `rejected`).") in part(en, "## Challenges and limitations")
    assert "其中未计入 1 行：其 `chosen` 或 `rejected` 中没有可测量的回复（第一个：从 0 计第 5 行的 `rejected`）。" \
        in zh


def test_both_captions_of_the_length_figure_count_the_pairs_it_plots(tmp_path, train_rows):
    """One row's rejected content null: the length figure plots 29 pairs, its English caption (the analysis' title)
    said n = 29, the Chinese n = 30 (metrics.json's n, every pair analysed). Now both say the pairs it plots."""
    rows = json.loads(json.dumps(train_rows[:30]))
    rows[7]["rejected"][-1]["content"] = None
    path = write_rows(tmp_path / "rows.jsonl", rows)
    analyze(build(AnalyzeParams, {"run_dir": str(tmp_path / "run"), "dataset": path, "bootstrap_resamples": 100}))
    en, zh = halves(card_for(tmp_path / "run", card_dataset=path, known_recipe={"scorer": "gpt-4"})[1])
    assert "![Margin vs response length difference (n = 29 pairs)](figures/margin_vs_length.png)" in en
    assert "![差值与回复长度差的关系（n = 29 对）](figures/margin_vs_length.png)" in zh
    assert "![Distribution of the margin (n = 30 pairs)]" in en and "![差值的分布（n = 30 对）]" in zh


def test_a_conversation_column_is_described_by_the_turns_most_rows_have(tmp_path, train_rows):
    """Only row 0's `chosen` starts with a system turn: the card described every row's as `[system prompt, user
    prompt, assistant response]` (the first row's); now the shape most rows have, and how many rows differ."""
    rows = json.loads(json.dumps(train_rows[:20]))
    rows[0]["chosen"] = [{"content": "You answer briefly.", "role": "system"}, *rows[0]["chosen"]]
    en, zh = halves(card_for(tmp_path / "run", card_dataset=write_rows(tmp_path / "rows.jsonl", rows))[1])
    assert table_rows(en, "`chosen`")[0][2] == ("The preferred conversation: `[user prompt, assistant response]` (the "
                                                 "turns of 1 row differ).")
    assert table_rows(en, "`rejected`")[0][2] == "The dispreferred conversation: `[user prompt, assistant response]`."
    assert table_rows(zh, "`chosen`")[0][2] == "优选对话：`[用户提示词, 助手回复]`（有 1 行的轮次与此不同）。"


def test_a_file_name_with_backticks_stays_one_code_span(tmp_path, train_rows):
    """A dataset file named we`ird|na<b>me #1.jsonl: its backtick closed the card's inline code (`we`ird...`), leaving
    the rest of the name as markdown."""
    name = "we`ird|na<b>me #1.jsonl"
    en, zh = halves(card_for(tmp_path / "run", card_dataset=write_rows(tmp_path / name, train_rows[:12]))[1])
    for half, banner in ((en, "This card describes"), (zh, "本卡片描述")):
        line = next(line for line in half.splitlines() if banner in line)
        tokens = MarkdownIt().parseInline(line)[0].children
        assert [t.content for t in tokens if t.type == "code_inline"][0] == name


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_recipe_rows_without_a_pair_are_rows_to_trl_refuses(tmp_path, monkeypatch, train_rows, bad):
    """RLHFlow's rows whose scores hold fewer than two numbers get no pair (NaN scores), which to_trl refuses; the
    card's filter reads the seed's score columns only, so it kept them and offered `train = to_trl(ds)`, which
    failed. Now they are rows to_trl refuses, numbered as it numbers them, with why (an infinite score too, which the
    card called "not both numbers (NaN, ...)")."""
    rows = [{"prompt": [{"content": r["prompt"], "role": "user"}],
             "responses": [r["chosen"][-1]["content"], r["rejected"][-1]["content"]],
             "rewards": [bad, 1.0] if i in (3, 8) else [2.0, 1.0]} for i, r in enumerate(train_rows[:12])]
    path = tmp_path / "rlhflow.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))  # (NaN, Infinity as JSON's, which datasets reads)
    facts, card_path = card_for(tmp_path / "run", card_dataset=str(path), known_recipe={"scorer": "my-org/rm"})
    assert facts.trl_refused == {"first": 3, "shape": "scores", "column": "score_chosen", "rows": 2}
    with pytest.raises(DataError, match=r"^Row 3 \(from 0;.* must be finite numbers"):
        to_trl(datasets.load_dataset("json", data_files=str(path), split="train"))
    en, zh = halves(card_path)
    assert "to_trl(ds)" not in part(en, "## How to use") and not facts.for_training
    assert ("(the first is row 3, counted from 0: the scores of its pair are not both finite numbers (NaN or "
            "infinite, or no pair could be made))") in en
    assert "（第一个是从 0 计第 3 行：其偏好对的分数并非都是有限数值（NaN 或无穷大，或无法组成偏好对））" in zh


def test_rlhflow_pairs_whose_margin_is_not_finite_are_rows_to_trl_refuses(tmp_path, train_rows):
    """RLHFlow's pair table (prompt, chosen, rejected conversations and a `margin`, no pair scores) with a NaN margin:
    to_trl refuses the row, but the card (which checked scores only where the table holds pair scores) listed no
    limitation and offered `train = to_trl(ds)`. Now the card asks to_trl's rule: the row is one it refuses."""
    rows = [{"prompt": [{"content": r["prompt"], "role": "user"}], "chosen": r["chosen"], "rejected": r["rejected"],
             "margin": {3: math.nan, 8: math.inf, 9: None}.get(i, 1.5)} for i, r in enumerate(train_rows[:12])]
    path = tmp_path / "rlhflow_pairs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(DataError, match=r"^Row 3 \(from 0;.*`margin` must be a finite number or null, got nan"):
        to_trl(datasets.load_dataset("json", data_files=str(path), split="train"))
    facts, card_path = card_for(tmp_path / "run", card_dataset=str(path), known_recipe={"scorer": "my-org/rm"})
    assert facts.trl_refused == {"first": 3, "shape": "margin", "column": "margin", "rows": 2}  # (null: no margin)
    en, zh = halves(card_path)
    assert "to_trl(ds)" not in part(en, "## How to use") and not facts.for_training
    assert "(the first is row 3, counted from 0: `margin` is neither a finite number nor null)" in en
    assert "（第一个是从 0 计第 3 行：`margin` 既不是有限数值，也不是空值）" in zh


def test_a_card_split_this_runs_dataset_lacks_is_refused_as_02_analyze_refuses_it(tmp_path):
    """`papermill 03_card.ipynb -p run_dir RUN -p card_split trian_prefs` wrote a card of train_prefs and recorded
    card_split trian_prefs, which the run's next `repro run` then refused as "other parameters"."""
    run = make_run(tmp_path / "run")["run"]
    for recorded in (None, "train_prefs"):  # (a run 01_construct built records its split; one a card copied in: none)
        if recorded:
            Manifest(run).record("dataset", {"split": recorded})
        with pytest.raises(DataError, match=re.escape(
                f"Parameter card_split='trian_prefs': this run's dataset at {run.dataset} has no such split (it has "
                f"['train_prefs']). Did you mean 'train_prefs'? Name one of those")):
            repro_card.gather_facts(build(CardParams, {"run_dir": str(run.root), "card_split": "trian_prefs"}))
        assert "trian_prefs" not in json.dumps(Manifest(run).read())  # (nothing recorded)
    write_split(datasets.Dataset.from_list(seed_rows(3), features=SEED_FEATURES), run.dataset, "test_prefs")
    for split in ("train_prefs", "test_prefs"):  # the split built, and another the run's dataset holds
        assert card_for(run.root, card_split=split)[0].splits[0].name == "train_prefs"


def test_text_from_the_data_never_becomes_html_in_the_card(tmp_path, train_rows):
    """A security review: a dataset whose chat role is ``assistant` <img src=x onerror=...> ` `` closed the backticks
    the card put it in, and a column named "note\\n\\n<script>...</script>\\n\\n---\\n..." put a <script> block and a
    `---` into the card, both live in JupyterLab's preview of 03_card; so did the file's name, `pretty_name` and
    `known_recipe` (the first two in the notebook's `facts` cell too). Now a name is one code span that nothing in it
    ends, other text has its HTML escaped, both on one line."""
    role = "assistant` <img src=x onerror=alert(document.domain)> `"
    column = "note\n\n<script>alert('card')</script>\n\n---\nlicense: evil\n"
    rows = [{**r, "chosen": [r["chosen"][0], {**r["chosen"][1], "role": role}],
             "rejected": [r["rejected"][0], {**r["rejected"][1], "role": role}], column: "x"} for r in train_rows[:12]]
    path = write_rows(tmp_path / "rows <img src=x onerror=alert(2)>.parquet", rows)
    recipe = {"source": "<script>alert(4)</script>", "scorer": "a<img src=x onerror=f()>"}
    facts, card_path = card_for(tmp_path / "run", card_dataset=path, known_recipe=recipe,
                                pretty_name="t\n\n<script>alert(3)</script>\n---")
    body = DatasetCard.load(card_path).text
    assert html_elements(body) == [] and not re.search(r"<(img|script)\b", MarkdownIt().render(body))
    assert html_elements(facts._repr_markdown_()) == []  # (03_card's `facts` cell)
    assert MarkdownIt().render(body).count("<hr />") == 1  # (the one between the English and the Chinese halves)
    for half, user in zip(halves(card_path), ("user prompt", "用户提示词")):  # (the features table's code spans)
        spans = [t.content for line in half.splitlines() if line.startswith("|")
                 for t in MarkdownIt().parseInline(line)[0].children if t.type == "code_inline"]
        assert column.replace("\n", " ") in spans and f"[{user}, {role}]" in spans


def test_text_from_a_run_manifest_never_becomes_html_in_the_card(tmp_path):
    """The same for a run folder someone sent: its manifest's git origin, packages, scorer and parameters, which the
    card printed raw (the parameters in its code block to save as YAML too)."""
    make_run(tmp_path / "run")
    evil = "x` <img src=x onerror=alert(1)> `\n```\n<script>alert(2)</script>\n"  # (``` ended the YAML's block)
    with Manifest(RunDir(tmp_path / "run")).edit() as data:
        data["environment"]["git"] = {"commit": "6c5767ef", "dirty": False, "origin": evil}
        data["environment"]["packages"] = {evil: evil}
        data["scorer"]["model"] = data["scorer"]["device"] = evil
        data["parameters"].update(source=evil, source_split=evil, candidate_columns=[evil, "resp1"])
        # (a re-check: versions it printed as they were, a copied run's record may make any text)
        data["environment"]["python"] = "3.11.7<img src=x onerror=alert(201)> [a link](https://evil.example/1)"
    body = DatasetCard.load(card_for(tmp_path / "run")[1]).text
    assert html_elements(body) == [] and MarkdownIt().render(body).count("<hr />") == 1
    assert body.count("&lt;script&gt;alert(2)&lt;/script&gt;") >= 4  # (the origin and the package, in each half)
    assert "evil.example" in body and "evil.example" not in "".join(  # (shown, never a link nor an image)
        str(t.attrs) for token in MarkdownIt().parse(body) for t in token.children or [] if t.type in ("link_open",
                                                                                                     "image"))
    # text where a number belongs (a count, a row number, a mean): refused where the record is read (repro.records)
    for record, block, key in (("manifest.json", "counts", "source"), ("manifest.json", "parameters", "part_start"),
                               ("metrics.json", "margin", "mean")):
        path = tmp_path / "run" / record
        honest = path.read_text()
        data = json.loads(honest)
        data[block][key] = "<img src=x onerror=alert(202)>"
        path.write_text(json.dumps(data))
        wanted = "a number" if key == "mean" else "a whole number"
        with pytest.raises(DataError, match=re.escape(f'{path} holds "<img src=x onerror=alert(202)>" as its '
                                                      f'{block}["{key}"] where {wanted} belongs')):
            card_for(tmp_path / "run")
        path.write_text(honest)


EVIL = "<img src=x onerror=alert(1)>"


@pytest.fixture(scope="module")
def compared_run(tmp_path_factory) -> Path:
    """A run (make_run's, its metrics with candidate scores) holding what 04_compare writes too: compare.json of its
    rows against a copy of them, both found in a source file of their prompts and one more (its first row)."""
    root = tmp_path_factory.mktemp("compared") / "run"
    rows = seed_rows(24)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(datasets.config, "HF_DATASETS_CACHE", str(root.parent / "hf-cache"))
        make_run(root, rows[1:])
        metrics = json.loads(RunDir(root).metrics.read_text())
        metrics["invariants"]["candidate_scores"] = {"rows": 23, "two_candidate_rows": 23, "sum_to_zero_holds": 23,
                                                     "antisymmetry_holds_among_two_candidate_rows": 23}
        RunDir(root).metrics.write_text(json.dumps(metrics))
        reference = write_rows(root.parent / "reference.jsonl", rows[1:])
        source = write_rows(root.parent / "source.jsonl", [{k: r[k] for k in ("prompt", "prompt_id")} for r in rows])
        compare.compare(build(CompareParams, {"run_dir": str(root), "reference": reference, "compare_source": source,
                                              "bootstrap_resamples": 100}))
    return root


def forged(run: Path, record: str, place: tuple, value) -> Path:
    """`run`'s `record` (a file in it) with `value` at `place` (its keys and indices), as someone may send it."""
    path = run / record
    data = json.loads(path.read_text())
    tree = data
    for key in place[:-1]:
        tree = tree[key]
    tree[place[-1]] = value
    path.write_text(json.dumps(data))
    return path


def live(markdown: str) -> list:
    """The raw HTML that markdown-it (CommonMark and tables, HTML on, as JupyterLab's Markdown) makes of `markdown`,
    and its links and images other than the card's figures (no link refused: JupyterLab's Markdown refuses none)."""
    md = MarkdownIt("commonmark", {"html": True}).enable("table")
    md.validateLink = lambda url: True
    tokens = md.parse(markdown)
    return [t.content or t.attrs for t in [*tokens, *(c for t in tokens for c in t.children or [])]
            if t.type in ("html_block", "html_inline") or t.type in ("link_open", "image")
            and not str(t.attrs.get("href") or t.attrs.get("src")).startswith("figures/")]


def no_number(record: str, *place, wanted: str = "a whole number", value=EVIL) -> tuple:
    """A case of `record` holding `value` at `place` where `wanted` belongs, and what the error says of it."""
    where = "".join(f"[{json.dumps(k)}]" if i else k for i, k in enumerate(place))
    return record, place, value, f"{json.dumps(value)} as its {where} where {wanted} belongs"


RM = {"name": "rm", "column": "candidate_scores_rm", "decides_pairs": False, "kind": "sequence_classifier",
      "model": "builtin:tiny-reward-deberta", "max_length": 512, "rows_truncated": EVIL}


@pytest.mark.parametrize("record, place, value, said", [
    *(no_number("compare.json", *place) for place in (
        ("alignment", "aligned"), ("reference", "rows"), ("coverage", "only_reference"), ("coverage", "only_candidate"),
        ("coverage", "duplicates_reference"), ("coverage", "duplicates_candidate"), ("disagreements", "rows"),
        ("scores", "by_role", "chosen", "n"), ("scores", "by_role", "rejected", "n"), ("scores", "margin", "n"),
        ("pairs", "n"), ("slice", "located"), ("slice", "repeated"), ("slice", "not_in_source"), ("slice", "span", 0),
        ("slice", "span", 1), ("slice", "before_span"), ("slice", "after_span"),
        ("slice", "inside_span_not_in_reference", "count"), ("slice", "hints_reproduce", "rows", 0),
        ("slice", "hints_reproduce", "rows", 1))),
    *(no_number("compare.json", *place, wanted="a number", value="x") for place in (
        ("scores", "scores", "pearson"), ("scores", "scores", "ci95", "pearson", 0),
        ("disagreements", "tolerance"), ("parameters", "disagreement_tolerance"))),
    no_number("compare.json", "pairs", "categories", "same", value="x"),
    no_number("compare.json", "slice", "groups", wanted="a list", value="x"),
    *(("compare.json", ("scores",), {"available": False, "reason": value}, f'{json.dumps(value)} as its scores["reason"] '
       "where text belongs") for value in (None, 7)),
    *(no_number("compare.json", *place, wanted="a mapping", value="x") for place in (
        ("slice", "hints_reproduce"), ("pairs", "categories"), ("pairs", "messages"), ("scores", "scores"),
        ("scores", "by_role"), ("reference", "commits"))),
    ("compare.json", ("disagreements", "not_compared"), {EVIL: "x"},
     f"\"{EVIL}\" as a key of its disagreements[\"not_compared\"] where 'pairs' or 'scores' belongs"),
    no_number("compare.json", "alignment", "matched_by", "prompt_id"),
    ("compare.json", ("alignment", "matched_by"), {EVIL: 1}, f"\"{EVIL}\" as a key of its alignment[\"matched_by\"] "
     "where 'prompt_id', 'prompt_sha256' or 'prompt_normalised' belongs"),
    *(("compare.json", ("note_facts", 0), note, f"{json.dumps(note[i])} as its note_facts[0][{i}] where {wanted} "
       "belongs") for note, i, wanted in ((["stand_in_note", "reference", EVIL], 2, "'reference' or 'candidate'"),
                                          (["scale_note", "x", "logit"], 1, "'rating' or 'logit'"),
                                          (["prompt_note", EVIL, []], 1, "a whole number"))),
    *(no_number("manifest.json", *place) for place in (
        ("scorer", "rows_truncated"), ("stages", "candidates", "candidates_per_row", "2"), ("parameters", "limit"),
        ("parameters", "drop_rows"), ("counts", "dropped_tie"))),
    no_number("manifest.json", "parameters", "min_margin", wanted="a number"),
    ("manifest.json", ("stages", "candidates", "candidates_per_row"), {"[click](javascript:alert(5))": 23},
     '"[click](javascript:alert(5))" as a key of its stages["candidates"]["candidates_per_row"] where a number '
     'belongs'),
    ("manifest.json", ("scorers",), [{"name": "primary", "decides_pairs": True}, RM],
     f'"{EVIL}" as its scorers[1]["rows_truncated"] where a whole number belongs'),
    *(no_number("metrics.json", *place) for place in (
        ("invariants", "sign_order_fails"), ("invariants", "candidate_scores", "rows"),
        ("invariants", "candidate_scores", "antisymmetry_holds_among_two_candidate_rows"), ("n_excluded",),
        ("length", "n"))),
    no_number("metrics.json", "length", "left_out", wanted="a mapping"),
    ("metrics.json", ("length", "left_out"), {"rows": EVIL, "first_row": 0, "column": "chosen"},
     f'"{EVIL}" as its length["left_out"]["rows"] where a whole number belongs'),
    no_number("metrics.json", "scale", "kind", wanted="'constant', 'rating', 'probability', 'logit' or 'unclear'"),
])
def test_a_record_that_holds_no_number_or_word_the_card_prints_stops_the_card_naming_the_place(
        compared_run, tmp_path, record, place, value, said):
    """A security review: a run folder someone sent put live HTML into the card (and 03_card's preview) through the
    numbers it printed as recorded (compare.json's counts, the rows a scorer cut, those that break PairRM's sign
    order), and stopped 03_card with a traceback where its records held text for a number, text for a list or a
    mapping, or a word the card looks up (a side, a scale) that is none of its own, or a reason scores were not
    compared that is no text (null or 7: "TypeError: 'NoneType' object is not subscriptable"). Each now stops where
    the record is read, with one error naming the file and the place."""
    run = Path(shutil.copytree(compared_run, tmp_path / "run"))
    path = forged(run, record, place, value)
    with pytest.raises(DataError, match="^" + re.escape(f"{path} holds {said}, not ")):
        card_for(run)


def without(run: Path, record: str, place: tuple) -> Path:
    """`run`'s `record` (a file in it) with the key at `place` (its keys and indices) left out."""
    path = run / record
    data = json.loads(path.read_text())
    tree = data
    for key in place[:-1]:
        tree = tree[key]
    del tree[place[-1]]
    path.write_text(json.dumps(data))
    return path


PROBABILITY = {"probability": {"rows": 3, "differ": 1, "other_shape": 0, "missing": 0, "max_abs_difference": 0.5}}
# the keys the card reads where another says so: a comparison that says so (compared_run's does not)
READ_WHERE = {("parameters",): (("probabilities",), PROBABILITY),
              ("parameters", "disagreement_tolerance"): (("probabilities",), PROBABILITY),
              ("coverage", "duplicates_candidate"): (("coverage", "duplicates_reference"), 2)}


@pytest.mark.parametrize("place", [
    ("reference",), ("candidate",), ("parameters",), ("alignment",), ("coverage",), ("disagreements",), ("pairs",),
    ("scores",), ("reference", "specs"), ("reference", "split"), ("reference", "rows"), ("candidate", "split"),
    ("parameters", "disagreement_tolerance"), ("alignment", "aligned"), ("coverage", "only_reference"),
    ("coverage", "only_candidate"), ("coverage", "duplicates_candidate"), ("disagreements", "rows"),
    ("disagreements", "tolerance"), ("pairs", "categories"), ("pairs", "categories", "swapped"),
    ("pairs", "n"), ("pairs", "messages", "missing"),
    ("pairs", "margin_sign", "fraction"), ("scores", "scores"), ("scores", "scores", "lin_ccc"),
    ("scores", "scores", "bland_altman", "loa_high"), ("scores", "by_role"), ("scores", "by_role", "rejected"),
    ("scores", "by_role", "chosen", "pearson"), ("scores", "margin"), ("scores", "margin", "n"), ("slice", "span"),
    ("slice", "after_span"), ("slice", "groups"), ("slice", "groups", 0, "name"), ("slice", "groups", 0, "solutions"),
    ("slice", "inside_span_not_in_reference", "count"), ("slice", "hints_reproduce", "exact"),
    ("slice", "hints_reproduce", "parameters")])
def test_a_comparison_that_lacks_a_key_the_card_reads_stops_the_card_naming_it(compared_run, tmp_path, place):
    """compare.json's shape left each key out unchecked, and the card's Reproduction section read it: a record
    without one stopped 03_card with "UndefinedError: 'dict object' has no attribute ..." (each key here, red before
    records required it). 04_compare writes each in every record (the pairs' and scores' figures where it compared
    them, the slice's where it located one); where one lacks it, 03_card now stops naming the file and the key."""
    run = Path(shutil.copytree(compared_run, tmp_path / "run"))
    if place in READ_WHERE:
        forged(run, "compare.json", *READ_WHERE[place])
    path = without(run, "compare.json", place)
    where = "".join(f"[{json.dumps(k)}]" if i else k for i, k in enumerate(place[:-1]))
    with pytest.raises(DataError, match="^" + re.escape(f'{path} holds no "{place[-1]}"' + f" in its {where}" * bool(
            where) + ", not what 04_compare writes: run notebooks/04_compare.ipynb again on this run, or delete the "
            "file.") + "$"):
        card_for(run)


def test_what_a_comparison_holds_only_where_it_compared_them_is_read_only_there(compared_run, tmp_path):
    """The pairs' and scores' figures are required where compare.json says they were compared (`available`), the
    slice's where it located one, the probabilities' where it compared a column: a record of none of them is
    04_compare's too, and the card says what it holds."""
    run = Path(shutil.copytree(compared_run, tmp_path / "run"))
    for block in ("pairs", "scores"):
        forged(run, "compare.json", (block,), {"available": False, "reason": "Not compared."})
    forged(run, "compare.json", ("slice",), {"located": 0, "sentence": "No reference row was found in the source."})
    forged(run, "compare.json", ("probabilities",), {})
    en, zh = halves(card_for(run)[1])
    assert "| rows aligned (of the reference's 23) | 23 |" in en and "Scores were not compared: not compared." in en
    assert "same chosen and rejected" not in en
    assert "Slice: none of the reference's 23 rows was found in the source, so" in en  # (the record names no source)
    without(forged(run, "compare.json", ("probabilities",), PROBABILITY).parent, "compare.json",
            ("probabilities", "probability", "differ"))
    with pytest.raises(DataError, match=re.escape('holds no "differ" in its probabilities["probability"], not ')):
        card_for(run)


def test_a_comparison_an_older_repro_wrote_is_carded(compared_run, tmp_path):
    """repro of two days before (tree 89cba56a) wrote compare.json without each side's nulls of a text column
    (`missing_reference`, `missing_candidate`), which the card reads with a default, and without the `reranked`
    category, which it reads only where a row is reranked: 03_card refused the record ('holds no "missing_reference"
    in its pairs["reference_response"]'). And a fraction of the pairs held as null stopped it with "TypeError:
    unsupported operand type(s) for +: 'int' and 'NoneType'": the card's percentages are now its counts'."""
    run = Path(shutil.copytree(compared_run, tmp_path / "run"))
    path = run / "compare.json"
    old = json.loads(path.read_text())
    for texts in (old["pairs"]["reference_response"], old["pairs"]["messages"]):
        del texts["missing_reference"], texts["missing_candidate"]
    del old["pairs"]["categories"]["reranked"], old["pairs"]["fractions"]["reranked"]
    path.write_text(json.dumps(old))
    en = halves(card_for(run)[1])[0]
    assert "| same chosen and rejected | 23 (100.0 %) |" in en and "| same `messages` | 23 / 23 |" in en
    old["pairs"]["reference_response"].update(equal=21, missing=2)
    old["pairs"]["categories"].update(same=20, swapped=3)
    old["pairs"]["fractions"] = dict.fromkeys(old["pairs"]["fractions"])
    path.write_text(json.dumps(old))
    en = halves(card_for(run)[1])[0]
    assert "| same chosen and rejected | 20 (87.0 %) |\n| swapped pairs | 3 (13.0 %) |" in en
    assert "| `reference_response` missing (null) in the reference / this dataset | unknown / unknown |" in en


def test_a_comparison_lacking_what_the_card_reads_only_where_another_key_says_so_is_carded(compared_run, tmp_path):
    """compare.json's `parameters` (its disagreement tolerance) is read only beside a probability column compared,
    a slice's rows missing inside its span and a group's rows dropped by their count alone: a record without them
    was refused ('holds no "parameters"'), and is carded now."""
    run = Path(shutil.copytree(compared_run, tmp_path / "run"))
    forged(run, "compare.json", ("slice", "groups", 0, "dropped_by_candidate"), {"count": 2, "ranges": [[3, 5]]})
    for place in (("parameters",), ("slice", "inside_span_not_in_reference", "ranges"),
                  ("slice", "groups", 0, "dropped_by_candidate", "ranges")):
        without(run, "compare.json", place)
    en = halves(card_for(run)[1])[0]
    assert "| rows aligned (of the reference's 23) | 23 |" in en and "none missing inside" in en
    assert "less 2 rows this dataset's construction dropped too" in en


@pytest.mark.parametrize("place, value", [
    (("slice", "groups", 0, "solutions", 0, "drop_from"), "end\n\n<script>alert(1)</script>\n"),
    (("slice", "groups", 0, "solutions", 0), {"[l](javascript:alert(1))": 0, EVIL: EVIL}),
    (("slice", "hints_reproduce", "parameters", "[l](javascript:alert(2))"), EVIL),
    (("slice", "hints_limited"), "[l](javascript:alert(3))"),
    (("slice", "groups", 0, "name"), f"[l](javascript:alert(4)) {EVIL}")])
def test_text_from_a_comparison_someone_sent_never_becomes_html_or_a_link_in_the_card(compared_run, tmp_path, place,
                                                                                      value):
    """The slice parameters that reproduce a reference (compare.json's, each `key=value`) went into the card's
    Reproduction section as they were: a key `[l](javascript:alert(1))` became a live link, a value that starts a
    line with `<script>` a raw block. They show as text now, in both languages."""
    run = Path(shutil.copytree(compared_run, tmp_path / "run"))
    honest = json.loads((run / "compare.json").read_text())["slice"]
    assert honest["groups"][0]["solutions"] and not honest["hints_reproduce"]["exact"]  # (each sentence is said)
    forged(run, "compare.json", place, value)
    body = DatasetCard.load(card_for(run)[1]).text
    assert "## Reproduction" in body and live(body) == []


def test_a_name_with_a_bar_stays_in_its_cell_of_the_reproduction_table(compared_run, tmp_path):
    """GFM splits a table row's cells at each `|`, in a code span too: a split named `a|b` (compare.json's
    `reference.split`, `candidate.split`) or a probability column so named cut their row of the Reproduction table
    in three cells."""
    run = Path(shutil.copytree(compared_run, tmp_path / "run"))
    forged(run, "compare.json", ("reference", "split"), "x|y")
    forged(run, "compare.json", ("candidate", "split"), "a|b")
    forged(run, "compare.json", ("probabilities",), {"chosen|probs": {
        "rows": 23, "differ": 0, "other_shape": 0, "missing": 0, "max_abs_difference": 0.0}})
    for half, heading in zip(halves(card_for(run)[1]), ("## Reproduction", "## 复现对比")):
        table = MarkdownIt("commonmark").enable("table").render(part(half, heading))
        for name, names in (("x|y", ["x|y", "a|b"]), ("chosen|probs", ["chosen|probs"])):
            rows = [re.findall(r"<td>(.*?)</td>", row) for row in re.findall(r"<tr>(.*?)</tr>", table, re.S)
                    if re.search(f"(<code>|`){name[0]}", row)]
            assert [(len(cells), re.findall("<code>(.*?)</code>", cells[0])) for cells in rows] == [(2, names)], rows


def test_a_reference_found_nowhere_in_the_source_is_said_in_both_languages(compared_run, tmp_path):
    """04_compare records the slice `{"located": 0, ...}` where none of the reference's rows is in compare_source;
    03_card stopped on it ("UndefinedError: 'dict object' has no attribute 'inside_span_not_in_reference'"), then
    said nothing of it while compare.json's verdict did (red before the card's sentence): it names the source and
    what the rows were aligned by instead, in both languages."""
    run = Path(shutil.copytree(compared_run, tmp_path / "run"))
    source = write_rows(tmp_path / "other.jsonl", [{"prompt": f"Another prompt {i}.", "prompt_id": str(i)}
                                                   for i in range(30)])
    reference = str(compared_run.parent / "reference.jsonl")
    compare.compare(build(CompareParams, {"run_dir": str(run), "reference": reference, "compare_source": source,
                                          "bootstrap_resamples": 100}))
    assert json.loads((run / "compare.json").read_text())["slice"]["located"] == 0
    en, zh = halves(card_for(run)[1])
    assert "| rows aligned (of the reference's 23) | 23 |" in en and "| 对齐的行数（参考数据集共 23 行） | 23 |" in zh
    assert ("Slice: none of the reference's 23 rows was found in the source `local:other.jsonl`, so which slice of it "
            "they are is not known; the rows above were aligned with this dataset's by their prompts instead (23 by "
            "prompt_id).") in en
    assert ("切片：参考数据集的 23 行都不在源数据 `local:other.jsonl` 中，无法得知它们是源数据的哪个切片；"
            "上表的行改为按提示与本数据集的行对齐（按 prompt_id 对齐 23 行）。") in zh


def test_the_templates_put_no_value_between_backticks_of_their_own():
    """`{{ model }}` in a template: a backtick in the value ended the template's code span. Every value goes through
    the `code` filter instead, whose fence nothing in the value ends."""
    for path in (ROOT / "src" / "repro" / "card" / "templates").glob("*.jinja"):
        text = path.read_text(encoding="utf-8")
        assert not re.findall(r"`\{\{[^`]*\}\}`|`\" ~ [^~]* ~ \"`|`%\(|`\[\{", text), path.name


def test_the_check_for_template_leftovers_reads_the_templates_not_the_data(tmp_path, monkeypatch, train_rows):
    """03_card failed on a dataset with a column `mastodon_url`: "still holds template text ['TODO']" ('todo' in the
    card's text, in any case). The check reads what the templates themselves print: {{, {% or TODO/TBD as words."""
    rows = [{**r, "mastodon_url": "x", "{{ TBD }}": "y"} for r in train_rows[:12]]
    p = build(CardParams, {"run_dir": str(tmp_path / "run"), "pretty_name": "TODO {% list %}",
                           "card_dataset": write_rows(tmp_path / "rows.parquet", rows)})
    card_path = repro_card.write_card(repro_card.gather_facts(p))
    assert repro_card.check_card(card_path)["placeholders"] == []
    card_publish = importlib.import_module("repro.card.publish")  # (repro.card.publish is the function)
    templates = shutil.copytree(card_publish.TEMPLATES, tmp_path / "templates")
    text = (templates / "en.jinja").read_text(encoding="utf-8")
    (templates / "en.jinja").write_text(text.replace("Small size", "Small size (TBD: how small)"), encoding="utf-8")
    monkeypatch.setattr(card_publish, "TEMPLATES", templates)
    with pytest.raises(DataError, match=r"hold unfinished text \['TBD'\].*en\.jinja"):
        repro_card.check_card(card_path)
