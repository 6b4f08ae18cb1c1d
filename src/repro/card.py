"""The dataset card: YAML built through `datasets`/`huggingface_hub` objects, a bilingual body from the run's facts.

The card is `runs/<name>/dataset/README.md`, beside `data/` (the layout `push_to_hub` writes) and
`figures/` (copies of the run's PNG figures), so the folder can be published as it stands.

- `gather_facts(params)` reads what the card states: the data (features, splits, sizes as `push_to_hub`
  computes them), the manifest (parameters, counts, scorer, environment), `metrics.json` and figures;
- `card_data(...)` builds the YAML front matter exactly as `push_to_hub` does (`DatasetInfo`, `SplitInfo`,
  `DatasetInfosDict.to_dataset_card_data`, `MetadataConfigs.to_dataset_card_data`, `DatasetCardData`);
- `render_body(facts)` writes the English body, then the same content in Chinese (as the seed card);
- `write_card`, `check_card`, `preview` and `publish` are the notebook's remaining cells.

Relies on datasets 5.2's metadata helpers (pinned in pyproject.toml; tests/golden guards the YAML).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import datasets
from datasets import Features
from datasets.info import DatasetInfo, DatasetInfosDict
from datasets.splits import SplitDict, SplitInfo
from datasets.utils.metadata import MetadataConfigs
from huggingface_hub import DatasetCard, DatasetCardData

from .dataset_io import SEED_FEATURES, write_split
from .errors import DataError, ParameterError, ReproError
from .manifest import Manifest
from .parameters import RECIPE_FACTS
from .paths import RunDir
from .sources import load_source

if TYPE_CHECKING:
    from .parameters import CardParams

CONFIG_NAME = "default"
DATA_DIR = "data"
FIGURES_DIR = "figures"
SHARD_RE = re.compile(r"^(?P<split>\w+)-(?P<index>\d{5})-of-(?P<count>\d{5})\.parquet$")
SEED_REPO = "YYYYYYibo/ultrafeedback_binarized_dataset_offline_pairrm_part2_mini_1"
# the statistics the analysis notebook writes for each score column (issue 4), in the card's row order
SCORE_BLOCKS = ("score_chosen", "score_rejected", "margin")
STATISTICS = ("mean", "std", "median", "q25", "q75", "min", "max", "skewness", "kurtosis", "mean_ci95", "median_ci95")
# analysis results shown as "metric | value" tables, in this order, under these headings
METRIC_GROUPS = ("margin_sign", "tests", "effect_size", "correlation", "length", "invariants", "scale", "bootstrap")
# |Spearman rho| below this is called negligible (the usual rule of thumb for rank correlations)
LENGTH_BIAS_RHO = 0.1
LENGTH_BIAS_P = 0.05


# ---------------------------------------------------------------------------------------------
# facts
# ---------------------------------------------------------------------------------------------
@dataclass
class SplitFacts:
    """One split as `push_to_hub` records it."""

    name: str
    num_bytes: int  # in-memory Arrow size (`Dataset._estimate_nbytes()`)
    num_examples: int
    download_size: int  # bytes of the parquet files
    files: list[str] = field(default_factory=list)  # relative to the dataset folder


@dataclass
class CardFacts:
    """Everything the card states, gathered from the run (or the dataset and `known_recipe`)."""

    run: RunDir
    title: str
    features: Features
    splits: list[SplitFacts]
    built_here: bool
    license: str
    language: list[str]
    hub_repo_id: str | None = None
    card_dataset: str | None = None  # the foreign dataset's spec, when not built here
    parameters: dict[str, Any] = field(default_factory=dict)
    counts: dict[str, Any] = field(default_factory=dict)
    scorer: dict[str, Any] = field(default_factory=dict)
    generation: dict[str, Any] = field(default_factory=dict)  # present when candidates were generated here
    stages: dict[str, Any] = field(default_factory=dict)
    environment: dict[str, Any] = field(default_factory=dict)
    known_recipe: dict[str, str] = field(default_factory=dict)
    recipe_note: str | None = None  # known_recipe given as free text
    metrics: dict[str, Any] | None = None
    figures: list[tuple[Path, str]] = field(default_factory=list)  # (PNG in the run's figures/, caption)
    left_out: list[tuple[str, str]] = field(default_factory=list)  # (section key, reason key) pairs
    prompt_id_sha256_rows: int | None = None  # rows whose prompt_id is sha256(prompt)

    @property
    def num_examples(self) -> int:
        return sum(s.num_examples for s in self.splits)

    @property
    def stand_in(self) -> bool:
        model = str(self.scorer.get("model") or self.parameters.get("scorer_model") or "")
        return bool(self.scorer.get("stand_in")) or model.startswith("builtin:")

    def _repr_markdown_(self) -> str:
        splits = ", ".join(f"`{s.name}` {s.num_examples} rows" for s in self.splits)
        made = "built by this run" if self.built_here else f"not built here ({self.card_dataset})"
        left = "; ".join(PHRASES["en"]["left_" + s] for s, _ in self.left_out) or "none"
        return (f"**{self.title}**: {splits}; {made}; scorer stand-in: {self.stand_in}; "
                f"metrics: {'yes' if self.metrics else 'no'}; figures: {len(self.figures)}; left out: {left}")


def gather_facts(params: "CardParams") -> CardFacts:
    """Read the data, manifest, metrics and figures of a run (copying in a foreign `card_dataset` first)."""
    run = RunDir.of(params.run_root)
    manifest = Manifest(run).read()
    card_dataset = _foreign_dataset(params, run)
    built_here = card_dataset is None and bool(manifest.get("counts") or manifest.get("scorer"))
    if card_dataset is not None:
        if manifest.get("counts") or manifest.get("scorer"):
            raise ParameterError(
                f"card_dataset={card_dataset!r} but run_dir {str(run.root)!r} holds a dataset this project built "
                f"(its manifest has counts and a scorer); writing the other dataset there would replace it. "
                f"Give a fresh run_dir for card_dataset.")
        write_split(load_source(card_dataset, params.card_split), run.dataset, params.card_split)
    if built_here and params.known_recipe:
        raise ParameterError(
            "known_recipe is for datasets this project did not build, but this run's manifest already records how "
            "its dataset was made; remove known_recipe (or set card_dataset to the other dataset).")
    features, splits, ds = _read_splits(run.dataset)
    facts = CardFacts(
        run=run, title=_title(params, run), features=features, splits=splits, built_here=built_here,
        license=params.license, language=list(params.language), hub_repo_id=params.hub_repo_id,
        card_dataset=card_dataset if card_dataset is not None else (None if built_here else str(run.dataset)),
    )
    if built_here:
        facts.parameters = effective_parameters(manifest.get("parameters") or {})
        facts.counts = dict(manifest.get("counts") or {})
        facts.scorer = dict(manifest.get("scorer") or {})
        facts.generation = dict(manifest.get("generation") or {})
        facts.stages = dict(manifest.get("stages") or {})
        facts.environment = dict(manifest.get("environment") or {})
        _check_counts(facts)
    elif isinstance(params.known_recipe, dict):
        facts.known_recipe = dict(params.known_recipe)
    elif params.known_recipe:
        facts.recipe_note = params.known_recipe
    facts.metrics = _read_metrics(run, facts)
    if facts.metrics is None:
        facts.left_out.append(("characteristics", "no_metrics"))
    facts.figures = _figures(run, facts.metrics)
    if not facts.figures:
        facts.left_out.append(("figures", "no_figures"))
    if "prompt" in ds.column_names and "prompt_id" in ds.column_names:
        facts.prompt_id_sha256_rows = sum(
            hashlib.sha256(p.encode("utf-8")).hexdigest() == i for p, i in zip(ds["prompt"], ds["prompt_id"]))
    return facts


def _foreign_dataset(params: "CardParams", run: RunDir) -> str | None:
    if params.card_dataset is None:
        return None
    path = Path(os.path.expanduser(params.card_dataset))
    if path.exists() and path.resolve() in (run.root.resolve(), run.dataset.resolve()):
        return None  # the run's own dataset, named explicitly
    return params.card_dataset


def _title(params: "CardParams", run: RunDir) -> str:
    if params.pretty_name:
        return params.pretty_name
    if params.hub_repo_id:
        return params.hub_repo_id.split("/")[-1]
    return run.root.resolve().name


def split_files(dataset_dir: str | Path) -> dict[str, list[Path]]:
    """The parquet shards under `data/`, by split, checked to be complete (`{split}-{i:05d}-of-{n:05d}.parquet`)."""
    by_split: dict[str, list[tuple[int, int, Path]]] = {}
    for path in sorted((Path(dataset_dir) / DATA_DIR).glob("*.parquet")):
        m = SHARD_RE.match(path.name)
        if m:
            by_split.setdefault(m["split"], []).append((int(m["index"]), int(m["count"]), path))
    out = {}
    for split, shards in by_split.items():
        counts = {c for _, c, _ in shards}
        if len(counts) != 1 or sorted(i for i, _, _ in shards) != list(range(counts.pop())):
            names = [p.name for _, _, p in shards]
            raise DataError(
                f"Split {split!r} in {dataset_dir}/{DATA_DIR} has an incomplete or mixed set of shards {names}; "
                f"re-write the split (repro.dataset_io.write_split) so it has {split}-00000-of-0000N ... shards.")
        out[split] = [p for _, _, p in sorted(shards)]
    return out


def _read_splits(dataset_dir: Path) -> tuple[Features, list[SplitFacts], datasets.Dataset]:
    files = split_files(dataset_dir)
    if not files:
        raise DataError(
            f"No dataset at {dataset_dir}: expected {DATA_DIR}/<split>-00000-of-00001.parquet there. Run "
            f"notebooks/01_construct.ipynb for this run first, or set card_dataset to the dataset to describe.")
    features, splits, first = None, [], None
    for split, paths in files.items():
        # loaded through the datasets builder (Arrow cache), as a user loads data before push_to_hub:
        # its _estimate_nbytes() is the num_bytes push_to_hub records (a bare pyarrow read differs slightly)
        ds = datasets.Dataset.from_parquet([str(p) for p in paths])
        if features is not None and ds.features != features:
            raise DataError(f"Split {split!r} in {dataset_dir} has features {ds.features}, other splits have "
                            f"{features}; one card (one config) needs the same features in every split.")
        features, first = ds.features, first or ds
        splits.append(SplitFacts(
            name=split, num_bytes=ds._estimate_nbytes(), num_examples=len(ds),
            download_size=sum(p.stat().st_size for p in paths),
            files=[str(p.relative_to(dataset_dir)) for p in paths]))
    return features, splits, first


def _figures(run: RunDir, metrics: dict[str, Any] | None) -> list[tuple[Path, str]]:
    """(PNG, caption) of the run's figures: in metrics.json's order with its titles, else every PNG by name."""
    listed = (metrics or {}).get("figures")
    if isinstance(listed, dict):
        out = [(run.root / f["png"], str(f.get("title") or name)) for name, f in listed.items()
               if isinstance(f, dict) and f.get("png") and (run.root / f["png"]).is_file()]
        if out:
            return out
    pngs = sorted(run.figures.glob("*.png")) if run.figures.is_dir() else []
    return [(png, png.stem.replace("_", " ")) for png in pngs]


def effective_parameters(recorded: dict[str, Any]) -> dict[str, Any]:
    """The run's parameters with construction defaults filled in (a params file names only what it changes)."""
    from .parameters import ConstructParams, GenerationParams

    schemas = [ConstructParams] + ([GenerationParams] if recorded.get("generate") else [])
    defaults = {k: f.default for schema in schemas for k, f in schema.model_fields.items()
                if k not in ("run_name", "run_dir")}
    return {**defaults, **recorded}


def _check_counts(facts: CardFacts) -> None:
    kept = facts.counts.get("kept")
    if isinstance(kept, int) and kept != facts.num_examples:
        raise DataError(
            f"The manifest of {facts.run.root} says {kept} rows were kept, but {facts.run.dataset} holds "
            f"{facts.num_examples}; the data changed after construction. Re-run notebooks/01_construct.ipynb.")


def excluded_count(metrics: dict[str, Any]) -> int:
    """Rows the analysis left out (`n_excluded` as a number, a {reason: count} map, or a list of rows)."""
    value = metrics.get("n_excluded", 0)
    if isinstance(value, dict):
        if isinstance(value.get("count"), int):
            return value["count"]
        return sum(v for v in value.values() if isinstance(v, int) and not isinstance(v, bool))
    if isinstance(value, list):
        return len(value)
    return int(value or 0)


def _read_metrics(run: RunDir, facts: CardFacts) -> dict[str, Any] | None:
    if not run.metrics.exists():
        return None
    try:
        metrics = json.loads(run.metrics.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise DataError(f"{run.metrics} is not valid JSON ({exc}); re-run notebooks/02_analyze.ipynb for this run "
                        f"or delete the file to get a card without the statistics.") from None
    n = metrics.get("n")
    if isinstance(n, int) and n + excluded_count(metrics) != facts.num_examples:
        raise DataError(
            f"{run.metrics} describes {n} rows (+{excluded_count(metrics)} excluded) but the dataset has "
            f"{facts.num_examples}: the metrics belong to other data. Re-run notebooks/02_analyze.ipynb on this run.")
    return metrics


# ---------------------------------------------------------------------------------------------
# YAML front matter, through the libraries' objects
# ---------------------------------------------------------------------------------------------
def size_category(n: int) -> str:
    """The hub's `size_categories` label for n examples."""
    bounds = [(1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M"),
              (10_000_000, "1M<n<10M"), (100_000_000, "10M<n<100M"), (1_000_000_000, "100M<n<1B")]
    return next((label for bound, label in bounds if n < bound), "n>1B")


def card_data(features: Features, splits: list[SplitFacts], **metadata: Any) -> DatasetCardData:
    """Card metadata as push_to_hub writes it (dataset_info, configs) plus `metadata` (license, tags, ...)."""
    data = DatasetCardData(**{k: v for k, v in metadata.items() if v is not None})
    # the same steps as datasets.arrow_dataset._get_updated_dataset_card on a first push
    info = DatasetInfo(config_name=CONFIG_NAME, features=features, splits=SplitDict(), download_size=0,
                       dataset_size=0)
    for split in splits:
        info.splits.add(SplitInfo(name=split.name, num_bytes=split.num_bytes, num_examples=split.num_examples))
        info.download_size += split.download_size
        info.dataset_size += split.num_bytes
    info.size_in_bytes = info.download_size + info.dataset_size
    DatasetInfosDict({CONFIG_NAME: info}).to_dataset_card_data(data)
    configs = {"data_files": [{"split": s.name, "path": f"{DATA_DIR}/{s.name}-*"} for s in splits]}
    MetadataConfigs({CONFIG_NAME: configs}).to_dataset_card_data(data)
    return data


def _hub_id(spec: str | None) -> str | None:
    if not spec:
        return None
    parts = spec.split("/")
    return spec if len(parts) == 2 and all(parts) and not spec.startswith((".", "/", "~")) else None


def facts_card_data(facts: CardFacts) -> DatasetCardData:
    """The card metadata for a run: the data's own YAML plus licence, language, size, task and tags."""
    columns = set(facts.features)
    preference = {"prompt", "chosen", "rejected"} <= columns
    tags = ["preference", "dpo", "rlhf"] if preference else []
    if facts.built_here:
        tags += ["pairrm", "ultrafeedback"] if not facts.stand_in else ["stand-in-scores"]
        source = _hub_id(facts.parameters.get("source"))
    else:
        source = _hub_id(facts.known_recipe.get("source"))
    return card_data(
        facts.features, facts.splits,
        language=facts.language or None,
        license=facts.license,
        size_categories=[size_category(facts.num_examples)],
        source_datasets=[f"extended|{source}"] if source else None,
        task_categories=["text-generation"] if preference else None,
        pretty_name=facts.title,
        tags=tags or None,
    )


# ---------------------------------------------------------------------------------------------
# body: English, then the same content in Chinese
# ---------------------------------------------------------------------------------------------
def fmt(value: Any, lang: str = "en") -> str:
    """A number or value as the card prints it (floats to 6 significant digits; None = unknown)."""
    if value is None:
        return PHRASES[lang]["unknown"]
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return "NaN" if math.isnan(value) else f"{value:.6g}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(fmt(v, lang) for v in value) + "]"
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _table(header: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _flatten(value: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """Leaves of nested metrics as (dotted path, value); short numeric lists (intervals) stay whole."""
    if isinstance(value, dict):
        out = []
        for k, v in value.items():
            out += _flatten(v, f"{prefix}.{k}" if prefix else str(k))
        return out
    return [(prefix, value)]


def _length_rhos(length: Any) -> dict[str, tuple[float, float | None]]:
    """(Spearman rho, p-value) of margin vs length difference by unit (`length.margin_vs_length_difference`)."""
    by_unit = length.get("margin_vs_length_difference") if isinstance(length, dict) else None
    if isinstance(by_unit, dict):
        return {unit: (v["spearman"], v.get("pvalue")) for unit, v in by_unit.items()
                if isinstance(v, dict) and isinstance(v.get("spearman"), (int, float))}
    rho = _find_number(length, "spearman")  # another analysis' layout: the first Spearman rho under `length`
    return {} if rho is None else {"": (rho, None)}


def _find_number(tree: Any, must: str, avoid: tuple[str, ...] = ("pvalue", "p_value", "ci")) -> float | None:
    """The first number in `tree` whose path contains `must` and none of `avoid` (metrics sub-keys vary)."""
    for path, value in _flatten(tree):
        low = path.lower()
        if (must in low and not any(a in low.split(".")[-1] for a in avoid)
                and isinstance(value, (int, float)) and not isinstance(value, bool)):
            return value
    return None


def _type_text(feature: Any, lang: str) -> str:
    """A feature's type in words: `string`, `float64`, `list of {content: string, role: string}`, ..."""
    t = PHRASES[lang]
    if isinstance(feature, datasets.Value):
        return feature.dtype
    if isinstance(feature, dict):
        return "{" + ", ".join(f"{k}: {_type_text(v, lang)}" for k, v in feature.items()) + "}"
    if isinstance(feature, datasets.ClassLabel):
        return t["type_classlabel"].format(names=", ".join(feature.names))
    inner = getattr(feature, "feature", None)
    if inner is not None:
        return t["type_list"].format(inner=_type_text(inner, lang))
    return type(feature).__name__


def _column_description(facts: CardFacts, name: str, lang: str) -> str:
    t = PHRASES[lang]
    text = t.get("col_" + name, t["col_other"])
    if name == "prompt_id" and facts.prompt_id_sha256_rows is not None:
        text += " " + t["col_prompt_id_check"].format(k=facts.prompt_id_sha256_rows, n=facts.num_examples)
    if name == "messages" and facts.built_here:
        text += " " + t["col_messages_" + str(facts.parameters.get("messages", "chosen"))]
    if name in ("score_chosen", "score_rejected") and facts.built_here:
        text += " " + t["col_scores_by"].format(model=_scorer_model(facts, lang))
    return text


def _scorer_model(facts: CardFacts, lang: str) -> str:
    model = facts.scorer.get("model") or facts.parameters.get("scorer_model")
    text = f"`{model}`" if model else PHRASES[lang]["unknown"]
    return text + (PHRASES[lang]["stand_in_mark"] if facts.stand_in else "")


def _schema_vs_seed(facts: CardFacts, lang: str) -> str:
    t = PHRASES[lang]
    if facts.features == SEED_FEATURES and list(facts.features) == list(SEED_FEATURES):
        return t["schema_same"]
    columns = list(facts.features)
    extra = [c for c in columns if c not in SEED_FEATURES]
    if columns[:len(SEED_FEATURES)] == list(SEED_FEATURES) and all(
            facts.features[c] == SEED_FEATURES[c] for c in SEED_FEATURES):
        return t["schema_seed_plus"].format(extra=t["list_sep"].join(f"`{c}`" for c in extra))
    missing = [c for c in SEED_FEATURES if c not in facts.features]
    changed = [c for c in SEED_FEATURES if c in facts.features and facts.features[c] != SEED_FEATURES[c]]
    parts = [t["schema_" + name].format(columns=t["list_sep"].join(f"`{c}`" for c in cols))
             for name, cols in (("missing", missing), ("extra", extra), ("changed", changed)) if cols]
    return t["schema_differs"].format(parts=t["list_sep"].join(parts) or t["schema_order"])


def _section_top(facts: CardFacts, lang: str) -> list[str]:
    t = PHRASES[lang]
    out = [t["title"].format(title=facts.title)]
    if facts.stand_in:
        model = facts.scorer.get("model") or facts.parameters.get("scorer_model")
        out.append(t["stand_in_banner"].format(model=fmt(model, lang)))
    if facts.generation.get("stand_in"):
        out.append(t["generation_banner"].format(model=fmt(facts.generation.get("policy_model"), lang)))
    if not facts.built_here:
        out.append(t["foreign_banner"].format(dataset=facts.card_dataset))
    if facts.left_out:
        items = "\n".join(t["left_out_item"].format(section=t["left_" + s], reason=t["why_" + r].format(
            metrics=facts.run.metrics, figures=facts.run.figures)) for s, r in facts.left_out)
        out.append(t["left_out_head"] + "\n" + items)
    return out


def _section_summary(facts: CardFacts, lang: str) -> list[str]:
    t = PHRASES[lang]
    splits = ", ".join(t["split_rows"].format(split=s.name, n=s.num_examples) for s in facts.splits)
    if facts.built_here:
        p = facts.parameters
        text = t["summary_built"].format(
            splits=splits, source=p.get("source", t["unknown"]), source_split=p.get("source_split", t["unknown"]),
            candidates=_candidates_text(facts, lang), scorer=_scorer_model(facts, lang))
    else:
        text = t["summary_foreign"].format(splits=splits, dataset=facts.card_dataset)
    return [t["h_summary"], text]


def _candidates_text(facts: CardFacts, lang: str) -> str:
    t, p = PHRASES[lang], facts.parameters
    parts = [f"`{c}`" for c in p.get("candidate_columns", [])]
    if p.get("include_reference"):
        parts.append("`reference_response`")
    if p.get("include_original_pair"):
        parts.append(t["original_pair"])
    text = t["list_sep"].join(parts) if parts else t["unknown"]
    if p.get("generate"):
        text += " " + t["generated_by"].format(model=p.get("policy_model") or t["unknown"])
    return text


def _section_info(facts: CardFacts, lang: str) -> list[str]:
    t = PHRASES[lang]
    features = _table(t["features_header"], [[f"`{name}`", _type_text(feature, lang), _column_description(
        facts, name, lang)] for name, feature in facts.features.items()])
    splits = _table(t["splits_header"], [[f"`{s.name}`", s.num_examples, s.num_bytes, s.download_size,
                                          ", ".join(f"`{f}`" for f in s.files)] for s in facts.splits])
    download = sum(s.download_size for s in facts.splits)
    size = sum(s.num_bytes for s in facts.splits)
    configs = "\n".join(t["config_line"].format(config=CONFIG_NAME, split=s.name, path=f"{DATA_DIR}/{s.name}-*")
                        for s in facts.splits)
    return [t["h_info"], t["h_features"], features, _schema_vs_seed(facts, lang), t["h_splits"], splits,
            t["sizes"].format(download=download, size=size), t["h_configs"], configs]


def _section_built(facts: CardFacts, lang: str) -> list[str]:
    t = PHRASES[lang]
    if not facts.built_here:
        return _section_recipe(facts, lang)
    p = facts.parameters
    slice_text = t["slice"].format(
        start=fmt(p.get("part_start"), lang), stop=fmt(p.get("part_stop"), lang) if p.get("part_stop") is not None
        else t["to_end"], drop=fmt(p.get("drop_rows"), lang), drop_from=t.get(f"drop_from_{p.get('drop_from')}", t["unknown"]),
        mini=fmt(p.get("mini_index"), lang), minis=fmt(p.get("mini_count"), lang))
    if p.get("limit"):
        slice_text += " " + t["limit"].format(limit=p["limit"])
    if p.get("drop_rows"):
        slice_text += " " + t["drop_cause"]
    out = [t["h_built"], t["h_source"], slice_text]
    if facts.generation:
        g = facts.generation
        text = t["generation"].format(
            model=fmt(g.get("policy_model"), lang), n=fmt(g.get("n_candidates"), lang),
            temperature=fmt(g.get("temperature"), lang), top_p=fmt(g.get("top_p"), lang),
            max_new_tokens=fmt(g.get("max_new_tokens"), lang), seed=fmt(g.get("generation_seed"), lang),
            reference=t["generation_reference"] if g.get("generate_reference") else "")
        out += [t["h_generation"], text + (" " + t["generation_stand_in"] if g.get("stand_in") else "")]
    s = facts.scorer
    scoring = t["scoring"].format(
        candidates=_candidates_text(facts, lang), scorer=_scorer_model(facts, lang),
        backend=fmt(s.get("backend", p.get("scorer_backend")), lang), dtype=fmt(s.get("dtype", p.get("dtype")), lang),
        device=fmt(s.get("device", p.get("device")), lang),
        source_max=fmt(s.get("source_maxlength", p.get("source_maxlength")), lang),
        candidate_max=fmt(s.get("candidate_maxlength", p.get("candidate_maxlength")), lang))
    scoring += _scorers_decided(facts, lang)
    per_row = (facts.stages.get("candidates") or {}).get("candidates_per_row")
    if per_row:
        scoring += " " + t["candidates_per_row"].format(
            counts=t["list_sep"].join(t["k_candidates"].format(k=k, rows=v) for k, v in per_row.items()))
    tie_rule = (facts.stages.get("pairs") or {}).get("tie_rule")
    selection = t["selection"].format(few=fmt(p.get("too_few_candidates"), lang))
    selection += " " + (t["tie_rule"].format(rule=tie_rule) if tie_rule else t["tie_rule_unrecorded"])
    counts = _table(t["counts_header"], [[f"`{k}`", fmt(v, lang), t.get("count_" + k, "")]
                                         for k, v in facts.counts.items()])
    # parameter values as a params file spells them (None is `null` there: "not set", not "unknown")
    params = _table(t["kv_header"], [[f"`{k}`", f"`{'null' if v is None else fmt(v, lang)}`"]
                                     for k, v in sorted(facts.parameters.items())])
    env = facts.environment
    git = env.get("git") or {}
    packages = ", ".join(f"{k} {v}" for k, v in (env.get("packages") or {}).items() if v)
    environment = t["environment"].format(
        python=fmt(env.get("python"), lang), packages=packages or t["unknown"], commit=fmt(git.get("commit"), lang),
        dirty=fmt(git.get("dirty"), lang))
    return out + [t["h_scoring"], scoring, t["h_selection"], selection, t["h_counts"], counts,
                  t["h_parameters"], params, t["h_environment"], environment]


def _scorers_decided(facts: CardFacts, lang: str) -> str:
    """With several scorers (`scorers:`) or a sequence classifier: which one decided, what the others' columns
    hold, and what a sequence classifier's scores mean; "" for a run scored by PairRM alone."""
    from .scorers.common import looks_like_path

    scorers = Manifest(facts.run).read().get("scorers") or [{"name": "primary", "column": "candidate_scores",
                                                               "decides_pairs": True, **facts.scorer}]
    if len(scorers) < 2 and all(s.get("kind", "pairrm") == "pairrm" for s in scorers):
        return ""

    def model(s: dict[str, Any]) -> str:  # a local folder by its name only: no machine path is published
        spec = str(s.get("model") or "?")
        local = looks_like_path(spec) and not spec.startswith("builtin:")
        return f"`{Path(spec).name}` (a local checkpoint)" if local else f"`{spec}`"

    kinds = {"pairrm": "PairRM", "sequence_classifier": "sequence classifier"}
    decided = next(s for s in scorers if s.get("decides_pairs"))
    others = [s for s in scorers if not s.get("decides_pairs")]
    logits = any(s.get("kind") == "sequence_classifier" for s in scorers)
    if lang == "zh":
        text = f" `chosen`/`rejected` 由主评分模型 {model(decided)}（{kinds.get(decided.get('kind', 'pairrm'))}）决定。"
        if others:
            text += " 另外保存了以下评分模型对每个候选的分数（不参与选择）：" + "；".join(
                f"`{s['name']}`：{model(s)}（列 `{s['column']}`）" for s in others) + "。"
        if logits:
            text += " 序列分类奖励模型的分数是模型的 logit：同一提示的各候选分数之和不为零，尺度也与 PairRM 不同。"
        return text
    text = (f" `chosen`/`rejected` were decided by the primary scorer {model(decided)} "
            f"({kinds.get(decided.get('kind', 'pairrm'))}).")
    if others:
        text += " Every candidate was also scored by " + "; ".join(
            f"`{s['name']}`: {model(s)} (column `{s['column']}`)" for s in others) + "; these scores did not decide."
    if logits:
        text += (" A sequence classifier's scores are the model's logits: they do not sum to zero over a prompt's "
                 "candidates, and their scale differs from PairRM's.")
    return text


def _section_recipe(facts: CardFacts, lang: str) -> list[str]:
    t = PHRASES[lang]
    rows = [[t["recipe_" + k], facts.known_recipe.get(k) or t["unknown"]] for k in RECIPE_FACTS]
    out = [t["h_built"], t["recipe_intro"], _table(t["recipe_header"], rows)]
    if facts.recipe_note:
        out.append(t["recipe_note"].format(note=facts.recipe_note))
    return out


def _section_characteristics(facts: CardFacts, lang: str) -> list[str]:
    t = PHRASES[lang]
    m = facts.metrics
    if m is None:
        return []
    out = [t["h_characteristics"], t["metrics_intro"].format(n=fmt(m.get("n"), lang), excluded=excluded_count(m))]
    blocks = [b for b in SCORE_BLOCKS if isinstance(m.get(b), dict)]
    if blocks:
        rows = [[f"`{stat}`"] + [_metric(m[b].get(stat), lang) for b in blocks] for stat in STATISTICS]
        out += [t["h_statistics"], _table([t["statistic"]] + [f"`{b}`" for b in blocks], rows)]
    reasons = m.get("n_excluded") if isinstance(m.get("n_excluded"), dict) else m.get("excluded_reasons")
    if reasons:
        out.append(t["excluded_reasons"].format(reasons=fmt(reasons, lang)))
    for group in METRIC_GROUPS:
        rows = [[f"`{k or group}`", _metric(v, lang)] for k, v in _flatten(m.get(group)) if _short(v)]
        if rows:
            out += [t["h_group"].format(group=t["group_" + group]), _table(t["metric_header"], rows)]
    out += [f"![{caption}]({FIGURES_DIR}/{png.name})" for png, caption in facts.figures]
    return out


def _short(value: Any) -> bool:
    """Whether a metrics leaf belongs in a table: numbers, flags and short labels, not explanatory prose."""
    return value != {} and not (isinstance(value, str) and len(value.split()) > 2)


def _metric(value: Any, lang: str) -> str:
    # the analysis writes NaN/inf (a statistic of constant data, say) as null: "undefined", not "unknown"
    return PHRASES[lang]["undefined"] if value is None else fmt(value, lang)


def _section_use(facts: CardFacts, lang: str) -> list[str]:
    t = PHRASES[lang]
    split = facts.splits[0].name
    code = ["```python", "from datasets import load_dataset", ""]
    if facts.hub_repo_id:
        code += [t["code_hub"], f'ds = load_dataset("{facts.hub_repo_id}", split="{split}")']
    code += [t["code_local"], f'ds = load_dataset("{facts.run.dataset}", split="{split}")', "```"]
    columns = set(facts.features)
    out = [t["h_use"], "\n".join(code)]
    out.append(t["use_dpo"] if {"prompt", "chosen", "rejected"} <= columns else t["use_no_pairs"])
    if {"score_chosen", "score_rejected"} <= columns:
        out.append(t["use_scores"])
    return out


def _section_background(facts: CardFacts, lang: str) -> list[str]:
    t = PHRASES[lang]
    seed_like = {"prompt", "chosen", "rejected", "score_chosen", "score_rejected"} <= set(facts.features)
    return [t["h_background"], t["background"].format(seed=SEED_REPO) if seed_like else t["background_other"]]


def _section_limitations(facts: CardFacts, lang: str) -> list[str]:
    t = PHRASES[lang]
    items = []
    if facts.stand_in:
        items.append(t["lim_stand_in"])
    if not facts.built_here:
        items.append(t["lim_foreign"])
    if facts.built_here or "pairrm" in str(facts.known_recipe.get("scorer", "")).lower():
        items.append(t["lim_scale_pairrm"])
    scale = (facts.metrics or {}).get("scale")
    sentence = scale if isinstance(scale, str) else next(
        (v for _, v in _flatten(scale) if isinstance(v, str) and len(v.split()) > 3), None) if scale else None
    if sentence:
        items.append(t["lim_scale_metrics"].format(sentence=sentence))
    length = (facts.metrics or {}).get("length")
    rhos = _length_rhos(length)
    if facts.metrics is None:
        items.append(t["lim_length_unmeasured"])
    elif not rhos:
        reason = length.get("reason") if isinstance(length, dict) else None
        items.append(t["lim_length_absent"].format(reason=f" ({reason})" if reason else ""))
    else:
        # a bias is called only when a unit's rho is both large enough and significant (p unknown: rho alone)
        marked = [rho for rho, p in rhos.values() if abs(rho) >= LENGTH_BIAS_RHO and (p is None or p < LENGTH_BIAS_P)]
        rho = max(marked, key=abs) if marked else 0.0
        kind = "none" if not marked else ("longer" if rho > 0 else "shorter")
        values = t["list_sep"].join(
            fmt(r, lang) + " (" + t["list_sep"].join(([t.get("unit_" + u, u)] if u else []) + (
                [f"p = {fmt(p, lang)}"] if p is not None else [])) + ")" for u, (r, p) in rhos.items())
        items.append(t["lim_length"].format(rho=values.replace(" ()", ""), verdict=t["length_" + kind].format(
            threshold=fmt(LENGTH_BIAS_RHO, lang), p=fmt(LENGTH_BIAS_P, lang))))
    source_rows = facts.counts.get("source")
    if isinstance(source_rows, int) and source_rows:
        items.append(t["lim_size_of"].format(n=facts.num_examples, source=source_rows))
    else:
        items.append(t["lim_size"].format(n=facts.num_examples))
    if facts.built_here and facts.parameters.get("drop_rows"):
        items.append(t["lim_drop"].format(drop=facts.parameters["drop_rows"]))
    return [t["h_limitations"], "\n".join(f"- {i}" for i in items)]


def _section_uses(facts: CardFacts, lang: str) -> list[str]:
    t = PHRASES[lang]
    preference = {"prompt", "chosen", "rejected"} <= set(facts.features)
    return [t["h_uses"], t["uses"] if preference else t["use_no_pairs"]]


def _section_citation(facts: CardFacts, lang: str) -> list[str]:
    t = PHRASES[lang]
    return [t["h_citation"], t["licences"].format(license=facts.license), CITATIONS]


SECTIONS: tuple[Callable[[CardFacts, str], list[str]], ...] = (
    _section_top, _section_summary, _section_info, _section_built, _section_characteristics, _section_use,
    _section_background, _section_limitations, _section_uses, _section_citation)


def render_body(facts: CardFacts) -> str:
    """The card's Markdown body: every section in English, then the same sections in Chinese."""
    halves = ["\n\n".join(block for section in SECTIONS for block in section(facts, lang)) for lang in ("en", "zh")]
    return "\n" + "\n\n---\n\n".join(halves) + "\n"


def build_card(facts: CardFacts) -> DatasetCard:
    """The whole card (YAML front matter + body) as a `huggingface_hub.DatasetCard`."""
    return DatasetCard(f"---\n{facts_card_data(facts).to_yaml()}\n---\n{render_body(facts)}")


def write_card(facts: CardFacts) -> Path:
    """Copy the figures into dataset/figures/, write dataset/README.md, and record both in the manifest."""
    run = facts.run
    figures_dir = run.dataset / FIGURES_DIR
    if figures_dir.exists():
        shutil.rmtree(figures_dir)  # the folder is the card's own: stale figures must not be published
    copies = []
    for png, _ in facts.figures:
        figures_dir.mkdir(parents=True, exist_ok=True)
        copies.append(Path(shutil.copy2(png, figures_dir / png.name)))
    manifest = Manifest(run)
    with manifest.stage("card") as info:
        build_card(facts).save(run.card)
        info.update(card=str(run.card), figures=len(copies), left_out=[s for s, _ in facts.left_out],
                    stand_in=facts.stand_in, built_here=facts.built_here)
    manifest.add_outputs(run.card, *copies)
    return run.card


# ---------------------------------------------------------------------------------------------
# checks, preview, publishing
# ---------------------------------------------------------------------------------------------
def check_card(card_path: str | Path) -> dict[str, Any]:
    """Load the card with huggingface_hub and the data with datasets (through the card's configs); compare."""
    card_path = Path(card_path)
    card = DatasetCard.load(card_path)
    info = DatasetInfosDict.from_dataset_card_data(card.data)[CONFIG_NAME]
    configs = MetadataConfigs.from_dataset_card_data(card.data)
    report: dict[str, Any] = {"card": str(card_path), "configs": dict(configs), "splits": {}}
    for split in info.splits.values():
        ds = datasets.load_dataset(str(card_path.parent), split=split.name)
        if ds.features != info.features or len(ds) != split.num_examples:
            raise DataError(
                f"{card_path} says split {split.name!r} has {split.num_examples} rows with features "
                f"{info.features}, but load_dataset gives {len(ds)} rows with {ds.features}; re-run this notebook.")
        report["splits"][split.name] = {"num_examples": len(ds), "num_bytes": split.num_bytes}
    report["features"] = list(info.features)
    report["placeholders"] = placeholders(card.text)
    if report["placeholders"]:
        raise DataError(f"{card_path} still holds template text {report['placeholders']}; this is a bug in repro.card.")
    return report


PLACEHOLDERS = ("More Information needed", "需补充更多信息", "{{", "}}", "TODO", "TBD")


def placeholders(text: str) -> list[str]:
    """Template leftovers found in card text ("More Information needed", unfilled braces, ...)."""
    low = text.lower()
    return [p for p in PLACEHOLDERS if p.lower() in low]


def preview(card_path: str | Path):
    """The card's body as rendered Markdown (for the notebook)."""
    from IPython.display import Markdown

    return Markdown(DatasetCard.load(Path(card_path)).text)


def _offline() -> bool:
    from huggingface_hub import constants

    env = any(os.environ.get(v, "").upper() in ("1", "ON", "YES", "TRUE") for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))
    return env or constants.is_offline_mode()


class PublishError(ReproError):
    """The dataset folder could not be published (offline, no token, or the hub refused it)."""


def publish(params: "CardParams") -> str | None:
    """Upload the run's dataset folder to `hub_repo_id` when `push_to_hub` is true; returns the URL."""
    run = RunDir.of(params.run_root)
    if not params.push_to_hub:
        print(f"push_to_hub is false: nothing uploaded. {run.dataset} is ready to publish as it stands.")
        return None
    if not run.card.exists():
        raise PublishError(f"{run.card} does not exist: write the card (repro.card.write_card) before publishing.")
    if _offline():
        raise PublishError(
            f"push_to_hub is true but the Hugging Face hub is switched off (HF_HUB_OFFLINE is set); nothing was "
            f"uploaded. Unset HF_HUB_OFFLINE on a machine with network, or set push_to_hub: false.")
    from huggingface_hub import HfApi, get_token

    token = get_token()
    if not token:
        raise PublishError(
            "push_to_hub is true but no Hugging Face token was found (HF_TOKEN or `hf auth login`); nothing was "
            "uploaded. Log in with `hf auth login` (a token with write access), or set push_to_hub: false.")
    api = HfApi(token=token)
    try:
        user = api.whoami()  # checks token and network before anything is created or uploaded
    except Exception as exc:  # the hub raises many types (HTTP, connection, offline); the user needs one message
        raise PublishError(f"The Hugging Face hub did not accept the token or could not be reached "
                           f"({type(exc).__name__}: {str(exc)[:300]}); nothing was uploaded.") from None
    repo = api.create_repo(params.hub_repo_id, repo_type="dataset", exist_ok=True)
    api.upload_folder(folder_path=str(run.dataset), repo_id=params.hub_repo_id, repo_type="dataset",
                      allow_patterns=["README.md", f"{DATA_DIR}/*.parquet", f"{FIGURES_DIR}/*.png"],
                      commit_message=f"Upload dataset and card from repro run {run.root.name}")
    url = str(getattr(repo, "url", f"https://huggingface.co/datasets/{params.hub_repo_id}"))
    print(f"Published to {url} as {user.get('name', 'unknown user')}.")
    return url


# ---------------------------------------------------------------------------------------------
# phrasebook: the card's sentences in English and Chinese, same keys, same placeholders
# ---------------------------------------------------------------------------------------------
CITATIONS = """```bibtex
@article{cui2023ultrafeedback,
  title   = {UltraFeedback: Boosting Language Models with High-quality Feedback},
  author  = {Cui, Ganqu and Yuan, Lifan and Ding, Ning and Yao, Guanming and Zhu, Wei and Ni, Yuan and Xie, Guotong and Liu, Zhiyuan and Sun, Maosong},
  journal = {arXiv preprint arXiv:2310.01377},
  year    = {2023}
}
@article{tunstall2023zephyr,
  title   = {Zephyr: Direct Distillation of LM Alignment},
  author  = {Tunstall, Lewis and Beeching, Edward and Lambert, Nathan and Rajani, Nazneen and Rasul, Kashif and Belkada, Younes and Huang, Shengyi and von Werra, Leandro and Fourrier, Cl{\\'e}mentine and Habib, Nathan and others},
  journal = {arXiv preprint arXiv:2310.16944},
  year    = {2023}
}
@inproceedings{jiang2023llmblender,
  title     = {LLM-Blender: Ensembling Large Language Models with Pairwise Ranking and Generative Fusion},
  author    = {Jiang, Dongfu and Ren, Xiang and Lin, Bill Yuchen},
  booktitle = {Proceedings of the 61st Annual Meeting of the Association for Computational Linguistics (ACL 2023)},
  year      = {2023},
  note      = {arXiv:2306.02561}
}
```"""

PHRASES: dict[str, dict[str, Any]] = {
    "en": {
        "unknown": "unknown",
        "undefined": "undefined",
        "unit_chars": "characters",
        "unit_tokens": "whitespace tokens",
        "generation_banner": ("> **Stand-in candidates.** The candidate responses were generated by `{model}`, a "
                              "stand-in policy built offline, not a language model worth imitating."),
        "h_generation": "### Generated candidates",
        "generation": ("Candidates were generated here by `{model}`: {n} per prompt, temperature {temperature}, top_p "
                       "{top_p}, at most {max_new_tokens} new tokens, seed {seed}.{reference}"),
        "generation_reference": " `reference_response` was generated too, greedily (temperature 0).",
        "generation_stand_in": "The policy is a stand-in: its texts are noise.",
        "candidates_per_row": "Candidates per row: {counts}.",
        "k_candidates": "{k} candidates in {rows} rows",
        "count_part": "rows in the index part",
        "count_after_drop": "rows left after `drop_rows`",
        "count_generated": "rows after generation",
        "count_with_candidates": "rows with at least two distinct candidates",
        "count_dropped_too_few_candidates": "rows dropped: fewer than two distinct candidates",
        "count_dropped_duplicate_prompt_id": "rows dropped: a `prompt_id` seen before",
        "group_bootstrap": "Bootstrap intervals",
        "stand_in_mark": " (a stand-in, not PairRM)",
        "title": '# Dataset Card for "{title}"',
        "stand_in_banner": (
            "> **Stand-in scores.** `score_chosen` and `score_rejected` come from `{model}`, a stand-in ranker that "
            "this project builds offline (PairRM's architecture, not its weights). They show the pipeline working and "
            "say nothing about the quality of the responses: do not train on them."),
        "foreign_banner": (
            "> **Not built by this project.** This card describes `{dataset}`. What the data shows is stated; what is "
            "known of its making comes only from the `known_recipe` parameter, and everything else is said to be "
            "unknown."),
        "left_out_head": "> **Sections left out of this card:**",
        "left_out_item": "> - {section}: {reason}",
        "left_characteristics": "Characteristics (key statistics, tests, length bias)",
        "left_figures": "Figures",
        "why_no_metrics": ("`metrics.json` was not found (`{metrics}`); run `notebooks/02_analyze.ipynb` on this run, "
                           "then this notebook again."),
        "why_no_figures": "no PNG figures were found in `{figures}`; `notebooks/02_analyze.ipynb` writes them.",
        "h_summary": "## Summary",
        "split_rows": "{n} rows in split `{split}`",
        "summary_built": (
            "A preference dataset of {splits}, built by the `repro` package from `{source}` (split "
            "`{source_split}`). For each prompt the candidates {candidates} were scored with {scorer}; the "
            "highest-scoring candidate is `chosen`, the lowest-scoring `rejected`, and their scores are "
            "`score_chosen` and `score_rejected`."),
        "summary_foreign": "A dataset of {splits}, read from `{dataset}`. This project did not build it.",
        "original_pair": "the source's original `chosen`/`rejected` responses",
        "list_sep": ", ",
        "generated_by": "(generated first by `{model}`)",
        "type_list": "list of {inner}",
        "type_classlabel": "class label ({names})",
        "h_info": "## Dataset info",
        "h_features": "### Features",
        "features_header": ["column", "type", "description"],
        "col_prompt": "The user's instruction or question.",
        "col_prompt_id": "Identifier of the prompt.",
        "col_prompt_id_check": "It equals the sha256 hex digest of the UTF-8 `prompt` in {k} of {n} rows.",
        "col_messages": "A conversation as `{content, role}` turns.",
        "col_messages_chosen": "Here: the chosen conversation.",
        "col_messages_source": "Here: the source's `messages`, kept as they were.",
        "col_score_chosen": "Score of the chosen response.",
        "col_score_rejected": "Score of the rejected response.",
        "col_scores_by": "Scored by {model}.",
        "col_reference_response": "A reference response to the prompt, carried over from the source.",
        "col_chosen": "The preferred conversation: `[user prompt, assistant response]`.",
        "col_rejected": "The dispreferred conversation: `[user prompt, assistant response]`.",
        "col_candidates": "Every candidate response that was scored.",
        "col_candidate_scores": "The score of each candidate, in the order of `candidates`.",
        "col_other": "Not a column of the seed dataset's schema; no description is known.",
        "schema_same": f"The columns, their order and types are those of the seed dataset `{SEED_REPO}`.",
        "schema_seed_plus": "The seed dataset's columns, in its order and types, followed by {extra}.",
        "schema_differs": "The columns differ from the seed dataset's schema: {parts}.",
        "schema_missing": "missing {columns}",
        "schema_extra": "not in the seed {columns}",
        "schema_changed": "with another type {columns}",
        "schema_order": "same columns in another order",
        "h_splits": "### Splits and sizes",
        "splits_header": ["split", "num_examples", "num_bytes", "download_size", "files"],
        "sizes": ("- `download_size`: {download} bytes (the parquet files)\n- `dataset_size`: {size} bytes (the "
                  "in-memory Arrow size, as `push_to_hub` records it)"),
        "h_configs": "### Configs",
        "config_line": "- config `{config}`: split `{split}` from `{path}`",
        "h_built": "## How it was built",
        "h_source": "### Source and slice",
        "slice": ("Rows [{start}:{stop}] of the source split were taken; then {drop} rows were dropped from the "
                  "{drop_from} (`drop_rows`); then mini {mini} of {minis} was kept (minis count from 0; each is "
                  "n // {minis} rows and the last takes the remainder)."),
        "to_end": "end",
        "drop_from_end": "end",
        "drop_from_start": "start",
        "limit": "Only the first {limit} rows of the mini were kept (`limit`).",
        "drop_cause": "The published recipe drops rows in the same way; its authors do not document why.",
        "h_scoring": "### Candidates and scoring",
        "scoring": ("Candidates per prompt: {candidates}. Scorer: {scorer}, backend `{backend}`, precision "
                    "`{dtype}`, device `{device}`, at most {source_max} prompt tokens and {candidate_max} tokens "
                    "per candidate. PairRM compares every ordered pair of candidates; a candidate's "
                    "score is the mean of its pairwise logit differences against all candidates of the prompt."),
        "h_selection": "### Selection",
        "selection": ("`chosen` is the candidate with the highest score and `rejected` the one with the lowest. "
                      "Rows with fewer than two distinct candidates: `{few}` (`too_few_candidates`)."),
        "tie_rule": "Ties: {rule}.",
        "tie_rule_unrecorded": "The tie rule of this run is not recorded in its manifest.",
        "kv_header": ["parameter", "value"],
        "h_counts": "### Counts at each stage",
        "counts_header": ["stage", "rows", "meaning"],
        "count_source": "rows in the source split",
        "count_sliced": "rows in the mini (after `limit`)",
        "count_dropped": "rows dropped by `drop_rows`",
        "count_scored": "rows scored",
        "count_kept": "rows written to the dataset",
        "h_parameters": "### Parameters of this run\n\nAs recorded in the manifest; defaults filled in for construction parameters the params file did not set.",
        "h_environment": "### Environment",
        "environment": "Python {python}; packages: {packages}; git commit `{commit}` (uncommitted changes: {dirty}).",
        "recipe_intro": "This project did not build the dataset. What is known of its making (`known_recipe`):",
        "recipe_header": ["fact", "as known"],
        "recipe_source": "source dataset",
        "recipe_slice": "slice",
        "recipe_dropped": "rows dropped and why",
        "recipe_candidates": "candidates",
        "recipe_scorer": "scorer model",
        "recipe_precision": "scorer precision",
        "recipe_selection": "selection rule",
        "recipe_tie_rule": "tie rule",
        "recipe_note": "Notes given with the dataset: {note}",
        "h_characteristics": "## Characteristics",
        "metrics_intro": ("From this run's `metrics.json` (written by `notebooks/02_analyze.ipynb`): n = {n} rows "
                          "analysed, {excluded} excluded. `margin` = `score_chosen` − `score_rejected`."),
        "h_statistics": "### Key statistics",
        "statistic": "statistic",
        "excluded_reasons": "Excluded rows and reasons: {reasons}.",
        "h_group": "### {group}",
        "metric_header": ["metric", "value"],
        "h_use": "## How to use",
        "code_hub": "# from the hub",
        "code_local": "# from a local copy of this folder",
        "use_dpo": ("For DPO (for example TRL's `DPOTrainer`), `prompt` with `chosen` and `rejected` is the "
                    "conversational preference format: `chosen` and `rejected` are `[user prompt, assistant "
                    "response]`. Keep `prompt_id` as the key, to check overlap with evaluation prompts. For PPO, "
                    "train a reward model on the pairs first, then use the prompts for rollouts."),
        "use_no_pairs": "The dataset lacks `prompt`/`chosen`/`rejected`: it cannot be used for DPO as it stands.",
        "use_scores": ("The margin `score_chosen` − `score_rejected` can weight the pairs or filter out "
                       "near-ties."),
        "h_background": "## Background",
        "background": (
            "The seed dataset `{seed}` belongs to a family built on UltraFeedback (Cui et al., 2023): "
            "prompts with completions from several models, rated by GPT-4. `HuggingFaceH4/ultrafeedback_binarized` "
            "turned them into pairs (split `train_prefs`, 61135 rows; its `score_chosen`/`score_rejected` are "
            "GPT-4 ratings on a 1–10 scale). `ZHLiu627/ultrafeedback_binarized_with_response_full` added "
            "`reference_response`, a greedy response of a policy model. The seed then ranked newly generated "
            "candidate responses with PairRM (LLM-Blender, Jiang et al., 2023), kept the best as `chosen` and the "
            "worst as `rejected`, and cut the result into parts and minis: an offline variant of the iterative "
            "recipes of SELM and SPPO. This project (`repro`) rebuilds that recipe from parameters and records "
            "every step in a manifest."),
        "background_other": ("The dataset's columns are not those of the UltraFeedback/PairRM family this project "
                             "rebuilds; its background is unknown beyond what is stated above."),
        "h_limitations": "## Challenges and limitations",
        "lim_stand_in": ("Stand-in scorer: the scores come from a stand-in ranker built offline, not from PairRM; "
                         "they carry no information about quality."),
        "lim_foreign": ("This project did not build the dataset: facts about its making are only those given in "
                        "`known_recipe`; the rest is unknown."),
        "lim_scale_pairrm": (
            "Scale of the scores: PairRM scores are not ratings. A candidate's score is the mean of its pairwise "
            "logit differences against the prompt's candidates, so a prompt's scores sum to 0 (with two candidates, "
            "`score_chosen` = −`score_rejected`) and scores of different prompts are not on a common scale. Do not "
            "compare them with the GPT-4 ratings (1–10) of H4's `score_*` columns."),
        "lim_scale_metrics": "Scale, as the analysis reads it: {sentence}",
        "lim_length_unmeasured": "Length bias: not measured (no `metrics.json`).",
        "lim_length_absent": "Length bias: `metrics.json` reports no correlation of the margin with length{reason}.",
        "lim_length": ("Length bias: the Spearman correlation between the margin and the length difference "
                       "(chosen − rejected) is ρ = {rho}; {verdict}."),
        "length_none": "no clear length bias (none reaches |ρ| ≥ {threshold} with p < {p})",
        "length_longer": ("the margin grows as the chosen response gets longer (|ρ| ≥ {threshold}, p < {p}): "
                          "the scores favour longer responses"),
        "length_shorter": ("the margin grows as the chosen response gets shorter (|ρ| ≥ {threshold}, p < {p}): "
                           "the scores favour shorter responses"),
        "lim_size_of": "Small size: {n} rows, out of {source} rows in the source split.",
        "lim_size": "Small size: {n} rows.",
        "lim_drop": ("{drop} rows were dropped by position (`drop_rows`), as in the published recipe whose authors "
                     "do not say why; the dropped rows need not be a random sample."),
        "h_uses": "## Typical uses",
        "uses": ("- Offline preference optimisation (DPO and its variants) on `prompt`/`chosen`/`rejected`.\n"
                 "- Training or evaluating reward models on the pairs, with the margin as a soft label.\n"
                 "- Studying PairRM as a judge: its agreement with GPT-4 ratings, its length bias, its ties.\n"
                 "- A first round for iterative recipes (SELM, SPPO) that generate and rank again each round."),
        "h_citation": "## Citation and licences",
        "licences": (
            "This dataset is released under `{license}`. Its sources: UltraFeedback (`openbmb/UltraFeedback`, MIT), "
            "`HuggingFaceH4/ultrafeedback_binarized` (MIT) and the scorer PairRM (`llm-blender/PairRM`, MIT). "
            "Please cite them:"),
        "group_margin_sign": "Sign of the margin",
        "group_tests": "Tests (chosen vs rejected)",
        "group_effect_size": "Effect size",
        "group_correlation": "Correlation of score_chosen and score_rejected",
        "group_length": "Response length",
        "group_invariants": "PairRM invariants (reported, not asserted)",
        "group_scale": "Scale",
    },
    "zh": {
        "unknown": "未知",
        "undefined": "无定义",
        "unit_chars": "字符",
        "unit_tokens": "空白分词",
        "generation_banner": "> **替身候选回复。** 候选回复由 `{model}` 生成，这是离线构建的替身策略模型，不是值得模仿的语言模型。",
        "h_generation": "### 生成的候选回复",
        "generation": ("候选回复由 `{model}` 在本项目中生成：每个提示词 {n} 个，temperature {temperature}，top_p {top_p}，"
                       "最多 {max_new_tokens} 个新 token，随机种子 {seed}。{reference}"),
        "generation_reference": "`reference_response` 也由其以贪心方式（temperature 0）生成。",
        "generation_stand_in": "该策略模型是替身：其文本是噪声。",
        "candidates_per_row": "每行的候选数：{counts}。",
        "k_candidates": "{rows} 行有 {k} 个候选",
        "count_part": "索引区段内的行数",
        "count_after_drop": "执行 `drop_rows` 后剩余的行数",
        "count_generated": "生成之后的行数",
        "count_with_candidates": "至少有两个不同候选的行数",
        "count_dropped_too_few_candidates": "被丢弃：不足两个不同候选",
        "count_dropped_duplicate_prompt_id": "被丢弃：`prompt_id` 重复",
        "group_bootstrap": "自助法（bootstrap）区间",
        "stand_in_mark": "（替身评分器，并非 PairRM）",
        "title": "# 「{title}」数据集卡片",
        "stand_in_banner": (
            "> **替身分数。** `score_chosen` 与 `score_rejected` 来自 `{model}`，这是本项目离线构建的替身排序器"
            "（采用 PairRM 的结构，但不是其权重）。这些分数只说明流程可以运行，不反映回复质量：请勿用于训练。"),
        "foreign_banner": (
            "> **并非由本项目构建。** 本卡片描述 `{dataset}`。从数据本身可见的事实均已写明；关于其构建过程，"
            "只采用 `known_recipe` 参数给出的信息，其余一律标为未知。"),
        "left_out_head": "> **本卡片省略的章节：**",
        "left_out_item": "> - {section}：{reason}",
        "left_characteristics": "数据特点（关键统计量、检验、长度偏差）",
        "left_figures": "图表",
        "why_no_metrics": "未找到 `metrics.json`（`{metrics}`）；请先对本次运行执行 `notebooks/02_analyze.ipynb`，再重新运行本笔记本。",
        "why_no_figures": "在 `{figures}` 中未找到 PNG 图；这些图由 `notebooks/02_analyze.ipynb` 生成。",
        "h_summary": "## 数据集概述",
        "split_rows": "`{split}` 划分 {n} 行",
        "summary_built": (
            "一个偏好数据集（{splits}），由 `repro` 包基于 `{source}`（划分 `{source_split}`）构建。对每个提示词，"
            "候选回复 {candidates} 由 {scorer} 打分；得分最高的候选为 `chosen`，最低的为 `rejected`，"
            "二者的分数分别为 `score_chosen` 和 `score_rejected`。"),
        "summary_foreign": "一个数据集（{splits}），读取自 `{dataset}`。本项目并未构建它。",
        "original_pair": "源数据原有的 `chosen`/`rejected` 回复",
        "list_sep": "、",
        "generated_by": "（先由 `{model}` 生成）",
        "type_list": "列表，元素为 {inner}",
        "type_classlabel": "类别标签（{names}）",
        "h_info": "## 数据集信息",
        "h_features": "### 特征字段",
        "features_header": ["列", "类型", "说明"],
        "col_prompt": "用户的指令或问题。",
        "col_prompt_id": "提示词的标识符。",
        "col_prompt_id_check": "在 {n} 行中有 {k} 行等于 `prompt`（UTF-8）的 sha256 十六进制摘要。",
        "col_messages": "以 `{content, role}` 轮次表示的对话。",
        "col_messages_chosen": "此处为被选中的对话。",
        "col_messages_source": "此处保留源数据的 `messages`。",
        "col_score_chosen": "优选回复的得分。",
        "col_score_rejected": "待拒回复的得分。",
        "col_scores_by": "打分模型：{model}。",
        "col_reference_response": "提示词的参考回复，沿用自源数据。",
        "col_chosen": "优选对话：`[用户提示词, 助手回复]`。",
        "col_rejected": "待拒对话：`[用户提示词, 助手回复]`。",
        "col_candidates": "参与打分的全部候选回复。",
        "col_candidate_scores": "每个候选回复的得分，顺序与 `candidates` 一致。",
        "col_other": "不属于种子数据集的字段；无已知说明。",
        "schema_same": f"各列及其顺序和类型与种子数据集 `{SEED_REPO}` 完全一致。",
        "schema_seed_plus": "依次为种子数据集的各列（顺序与类型相同），其后为 {extra}。",
        "schema_differs": "各列与种子数据集的结构不同：{parts}。",
        "schema_missing": "缺少 {columns}",
        "schema_extra": "种子数据集没有的列 {columns}",
        "schema_changed": "类型不同的列 {columns}",
        "schema_order": "列相同但顺序不同",
        "h_splits": "### 数据划分与存储信息",
        "splits_header": ["划分", "num_examples", "num_bytes", "download_size", "文件"],
        "sizes": ("- `download_size`：{download} 字节（parquet 文件）\n- `dataset_size`：{size} 字节"
                  "（内存中的 Arrow 大小，与 `push_to_hub` 记录的一致）"),
        "h_configs": "### 配置项",
        "config_line": "- 配置 `{config}`：划分 `{split}` 取自 `{path}`",
        "h_built": "## 构建方式",
        "h_source": "### 数据来源与切片",
        "slice": ("取源数据划分的第 [{start}:{stop}] 行；然后从{drop_from}端丢弃 {drop} 行（`drop_rows`）；"
                  "再保留 {minis} 个 mini 中的第 {mini} 个（从 0 计数；每个 mini 含 n // {minis} 行，最后一个包含余数）。"),
        "to_end": "末尾",
        "drop_from_end": "末",
        "drop_from_start": "首",
        "limit": "只保留该 mini 的前 {limit} 行（`limit`）。",
        "drop_cause": "已发布的配方也以同样方式丢弃行；其作者没有说明原因。",
        "h_scoring": "### 候选回复与打分",
        "scoring": ("每个提示词的候选回复：{candidates}。评分器：{scorer}，后端 `{backend}`，精度 `{dtype}`，"
                    "设备 `{device}`，提示词最多 {source_max} 个 token，每个候选最多 {candidate_max} 个 token。PairRM 对每一对有序候选进行比较；某候选的得分是它与该提示词全部候选的"
                    "成对 logit 差的平均值。"),
        "h_selection": "### 选择规则",
        "selection": "`chosen` 为得分最高的候选，`rejected` 为得分最低的候选。不足两个不同候选的行：`{few}`（`too_few_candidates`）。",
        "tie_rule": "平局处理：{rule}。",
        "tie_rule_unrecorded": "本次运行的清单（manifest）未记录平局处理规则。",
        "kv_header": ["参数", "取值"],
        "h_counts": "### 各阶段行数",
        "counts_header": ["阶段", "行数", "含义"],
        "count_source": "源数据划分的行数",
        "count_sliced": "mini 中的行数（执行 `limit` 之后）",
        "count_dropped": "被 `drop_rows` 丢弃的行数",
        "count_scored": "完成打分的行数",
        "count_kept": "写入数据集的行数",
        "h_parameters": "### 本次运行的参数\n\n取自运行清单（manifest）；参数文件未设置的构建参数以默认值补全。",
        "h_environment": "### 运行环境",
        "environment": "Python {python}；软件包：{packages}；git 提交 `{commit}`（存在未提交的修改：{dirty}）。",
        "recipe_intro": "本项目并未构建该数据集。关于其构建过程的已知信息（`known_recipe`）：",
        "recipe_header": ["事实", "已知信息"],
        "recipe_source": "源数据集",
        "recipe_slice": "切片",
        "recipe_dropped": "丢弃的行及原因",
        "recipe_candidates": "候选回复",
        "recipe_scorer": "评分模型",
        "recipe_precision": "评分精度",
        "recipe_selection": "选择规则",
        "recipe_tie_rule": "平局处理",
        "recipe_note": "随数据集给出的说明：{note}",
        "h_characteristics": "## 数据特点",
        "metrics_intro": ("数据来自本次运行的 `metrics.json`（由 `notebooks/02_analyze.ipynb` 生成）：分析了 n = {n} 行，"
                          "排除 {excluded} 行。`margin` = `score_chosen` − `score_rejected`。"),
        "h_statistics": "### 关键统计量",
        "statistic": "统计量",
        "excluded_reasons": "被排除的行及原因：{reasons}。",
        "h_group": "### {group}",
        "metric_header": ["指标", "取值"],
        "h_use": "## 使用方法",
        "code_hub": "# 从 Hub 加载",
        "code_local": "# 从本文件夹的本地副本加载",
        "use_dpo": ("用于 DPO（例如 TRL 的 `DPOTrainer`）时，`prompt` 与 `chosen`、`rejected` 构成对话式偏好格式："
                    "`chosen` 和 `rejected` 均为 `[用户提示词, 助手回复]`。请以 `prompt_id` 作为键，以检查与评测提示词的重叠。"
                    "用于 PPO 时，先在这些偏好对上训练奖励模型，再用提示词进行采样。"),
        "use_no_pairs": "该数据集缺少 `prompt`/`chosen`/`rejected` 列，不能直接用于 DPO。",
        "use_scores": "差值 `score_chosen` − `score_rejected` 可用于为偏好对加权，或过滤几乎打平的样本。",
        "h_background": "## 背景概述",
        "background": (
            "种子数据集 `{seed}` 属于基于 UltraFeedback（Cui 等，2023）的一个数据集家族：多个模型对提示词给出回复，"
            "并由 GPT-4 评分。`HuggingFaceH4/ultrafeedback_binarized` 将其转为偏好对（`train_prefs` 划分，61135 行；"
            "其 `score_chosen`/`score_rejected` 是 1–10 分制的 GPT-4 评分）。"
            "`ZHLiu627/ultrafeedback_binarized_with_response_full` 增加了 `reference_response`，即某个策略模型的贪心解码回复。"
            "种子数据集随后用 PairRM（LLM-Blender，Jiang 等，2023）对新生成的候选回复排序，最好的作为 `chosen`，"
            "最差的作为 `rejected`，再把结果切分为若干部分（part）和 mini：这是 SELM 与 SPPO 迭代式配方的离线版本。"
            "本项目（`repro`）依据参数重建该配方，并在清单（manifest）中记录每一步。"),
        "background_other": "该数据集的列不属于本项目所重建的 UltraFeedback/PairRM 数据集家族；除上文所述之外，其背景未知。",
        "h_limitations": "## 当前挑战与局限",
        "lim_stand_in": "替身评分器：分数来自离线构建的替身排序器，而非 PairRM；不包含任何质量信息。",
        "lim_foreign": "本项目并未构建该数据集：关于其构建过程，只有 `known_recipe` 给出的信息，其余均为未知。",
        "lim_scale_pairrm": (
            "分数的尺度：PairRM 分数不是评分。某候选的得分是它与该提示词各候选的成对 logit 差的平均值，"
            "因此同一提示词的各候选得分之和为 0（只有两个候选时，`score_chosen` = −`score_rejected`），"
            "不同提示词的分数也不在同一尺度上。请勿将其与 H4 的 `score_*` 列中的 GPT-4 评分（1–10）相比较。"),
        "lim_scale_metrics": "分析给出的尺度判断：{sentence}",
        "lim_length_unmeasured": "长度偏差：未测量（没有 `metrics.json`）。",
        "lim_length_absent": "长度偏差：`metrics.json` 未报告差值与长度的相关性{reason}。",
        "lim_length": "长度偏差：差值与长度差（chosen − rejected）的 Spearman 相关系数为 ρ = {rho}；{verdict}。",
        "length_none": "没有明显的长度偏差（没有一个同时达到 |ρ| ≥ {threshold} 且 p < {p}）",
        "length_longer": "优选回复越长，差值越大（|ρ| ≥ {threshold}，p < {p}）：分数偏向较长的回复",
        "length_shorter": "优选回复越短，差值越大（|ρ| ≥ {threshold}，p < {p}）：分数偏向较短的回复",
        "lim_size_of": "规模较小：{n} 行，源数据划分共 {source} 行。",
        "lim_size": "规模较小：{n} 行。",
        "lim_drop": "按位置丢弃了 {drop} 行（`drop_rows`），与已发布的配方相同，其作者未说明原因；被丢弃的行未必是随机样本。",
        "h_uses": "## 常用场景",
        "uses": ("- 在 `prompt`/`chosen`/`rejected` 上进行离线偏好优化（DPO 及其变体）。\n"
                 "- 在偏好对上训练或评估奖励模型，以差值作为软标签。\n"
                 "- 研究 PairRM 作为评判者的表现：与 GPT-4 评分的一致性、长度偏差、平局。\n"
                 "- 作为迭代式配方（SELM、SPPO）的第一轮，之后每轮重新生成并排序。"),
        "h_citation": "## 引用与许可",
        "licences": (
            "本数据集以 `{license}` 许可发布。其来源：UltraFeedback（`openbmb/UltraFeedback`，MIT）、"
            "`HuggingFaceH4/ultrafeedback_binarized`（MIT）以及评分器 PairRM（`llm-blender/PairRM`，MIT）。请引用："),
        "group_margin_sign": "差值的符号",
        "group_tests": "检验（chosen 对比 rejected）",
        "group_effect_size": "效应量",
        "group_correlation": "score_chosen 与 score_rejected 的相关性",
        "group_length": "回复长度",
        "group_invariants": "PairRM 不变量（仅报告，不作断言）",
        "group_scale": "尺度",
    },
}
assert PHRASES["en"].keys() == PHRASES["zh"].keys(), "the two languages must say the same things"
