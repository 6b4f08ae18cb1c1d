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
from .formats import REQUIRED_COLUMNS, TESTED_TRL_VERSION, TRL_FEATURES
from .manifest import Manifest
from .parameters import RECIPE_FACTS
from .paths import RunDir, public_name
from .sources import load_source
from .subject import claim

if TYPE_CHECKING:
    from .parameters import CardParams

CONFIG_NAME = "default"
DATA_DIR = "data"
FIGURES_DIR = "figures"
SHARD_RE = re.compile(r"^(?P<split>\w+)-(?P<index>\d{5})-of-(?P<count>\d{5})\.parquet$")
SEED_REPO = "YYYYYYibo/ultrafeedback_binarized_dataset_offline_pairrm_part2_mini_1"
# what a card of a dataset built here states when `license` / `language` are not given: its sources' (UltraFeedback,
# H4's binarisation and PairRM are MIT; the rows are English); a dataset not built here gets neither unless given
BUILT_LICENSE = "mit"
BUILT_LANGUAGE = ["en"]
# the score columns the analysis notebook describes (issue 4), in the card table's column order
SCORE_BLOCKS = ("score_chosen", "score_rejected", "margin")
# the tie rule repro.construct records (stated in each language rather than quoted)
TIE_RULE = "chosen = first highest score, rejected = last lowest score"
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
    license: str | None  # None: not stated (a dataset not built here whose licence was not given)
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
    claim(run, params.card_dataset, "card_dataset")
    manifest = Manifest(run).read()
    card_dataset = _foreign_dataset(params, run)
    built_here = card_dataset is None and bool(manifest.get("counts") or manifest.get("scorer"))
    if card_dataset is not None:  # (claim refused a run directory that describes another dataset)
        write_split(load_source(card_dataset, params.card_split, "card_dataset", "card_split"), run.dataset, params.card_split)
    if built_here and params.known_recipe:
        raise ParameterError(
            "known_recipe is for datasets this project did not build, but this run's manifest already records how "
            "its dataset was made; remove known_recipe (or set card_dataset to the other dataset).")
    features, splits, ds = _read_splits(run.dataset)
    facts = CardFacts(
        run=run, title=_title(params, run), features=features, splits=splits, built_here=built_here,
        license=params.license or (BUILT_LICENSE if built_here else None),
        language=list(params.language or (BUILT_LANGUAGE if built_here else [])), hub_repo_id=params.hub_repo_id,
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


def public_value(value: Any) -> Any:
    """A value as the published card may show it: a local path becomes its last name (no machine path, no user)."""
    if isinstance(value, (list, tuple)):
        return type(value)(public_value(v) for v in value)
    if isinstance(value, dict):  # e.g. one entry of `scorers`
        return {k: public_value(v) for k, v in value.items()}
    if not isinstance(value, str) or _hub_id(value) or "\n" in value:
        return value
    return public_name(value)


# parameters that decide how the work runs, not what the data holds (scores do not depend on them beyond
# float rounding; chunks and processes give byte-identical rows), nor where the run lives
NOT_SHAPING = frozenset({"run_name", "run_dir", "batch_tokens", "chunk_size", "num_processes",
                         "generation_batch_size", "generation_chunk_size", "generation_num_processes"})


def shaping_parameters(parameters: dict[str, Any]) -> dict[str, Any]:
    """The parameters that shaped the dataset: construction ones, generation ones only when it generated."""
    from .parameters import ConstructParams, GenerationParams

    schemas = [ConstructParams] + ([GenerationParams] if parameters.get("generate") else [])
    fields = {k for schema in schemas for k in schema.model_fields} - NOT_SHAPING
    return {k: public_value(_without_templates(v)) for k, v in parameters.items() if k in fields}


def _without_templates(value: Any) -> Any:
    """A chat template (Jinja text) named by its hash: the card's table shows no template source."""
    if isinstance(value, dict):
        return {k: (f"(given, sha256 {hashlib.sha256(str(v).encode()).hexdigest()[:12]})" if k == "chat_template"
                    else _without_templates(v)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_without_templates(v) for v in value)
    return value


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
    if isinstance(value, dict):  # nested braces spaced apart: "}}" would read as a template leftover
        return re.sub(r"([{}])(?=\1)", r"\1 ", json.dumps(value, ensure_ascii=False))
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


def _limits_origin(scorer: dict[str, Any], lang: str) -> str:
    """Where PairRM's token limits came from (the manifest's `limits_from`), as a sentence; "" if unrecorded."""
    origins = scorer.get("limits_from") or {}
    if not origins:
        return ""
    words = {"en": {"explicit": "given explicitly", "checkpoint config": "the checkpoint's own config",
                    "default": "PairRM's defaults (its config names none)"},
             "zh": {"explicit": "由参数显式指定", "checkpoint config": "取自检查点自身的配置",
                    "default": "PairRM 的默认值（其配置未给出）"}}[lang if lang == "zh" else "en"]
    kinds = {origins.get("source_maxlength"), origins.get("candidate_maxlength")}
    if len(kinds) == 1:
        what = words.get(kinds.pop(), "?")
        return f" 两个长度上限{what}。" if lang == "zh" else f" Both limits: {what}."
    src, cand = (words.get(origins.get(k), "?") for k in ("source_maxlength", "candidate_maxlength"))
    if lang == "zh":
        return f" 提示词上限{src}，候选上限{cand}。"
    return f" Prompt limit: {src}; candidate limit: {cand}."


def _scorer_model(facts: CardFacts, lang: str) -> str:
    model = public_value(facts.scorer.get("model") or facts.parameters.get("scorer_model"))
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
        model = public_value(facts.scorer.get("model") or facts.parameters.get("scorer_model"))
        out.append(t["stand_in_banner"].format(model=fmt(model, lang)))
    if facts.generation.get("stand_in"):
        out.append(t["generation_banner"].format(model=fmt(public_value(facts.generation.get("policy_model")), lang)))
    if not facts.built_here:
        out.append(t["foreign_banner"].format(dataset=public_value(facts.card_dataset)))
    if facts.left_out:
        # named relative to the run directory: the card never holds this machine's paths
        items = "\n".join(t["left_out_item"].format(section=t["left_" + s], reason=t["why_" + r].format(
            metrics=facts.run.metrics.name, figures=facts.run.figures.name + "/")) for s, r in facts.left_out)
        out.append(t["left_out_head"] + "\n" + items)
    return out


def _section_summary(facts: CardFacts, lang: str) -> list[str]:
    t = PHRASES[lang]
    splits = ", ".join(t["split_rows"].format(split=s.name, n=s.num_examples) for s in facts.splits)
    if facts.built_here:
        p = facts.parameters
        text = t["summary_built"].format(
            splits=splits, source=public_value(p.get("source", t["unknown"])), source_split=p.get("source_split", t["unknown"]),
            candidates=_candidates_text(facts, lang), scorer=_scorer_model(facts, lang))
    else:
        text = t["summary_foreign"].format(splits=splits, dataset=public_value(facts.card_dataset))
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
        text += " " + t["generated_by"].format(model=public_value(p.get("policy_model")) or t["unknown"])
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
            model=fmt(public_value(g.get("policy_model")), lang), n=fmt(g.get("n_candidates"), lang),
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
    scoring += _limits_origin(s, lang)
    scoring += _scorers_decided(facts, lang)
    per_row = (facts.stages.get("candidates") or {}).get("candidates_per_row")
    if per_row:
        scoring += " " + t["candidates_per_row"].format(
            counts=t["list_sep"].join(t["k_candidates"].format(k=k, rows=v) for k, v in per_row.items()))
    tie_rule = (facts.stages.get("pairs") or {}).get("tie_rule")
    selection = t["selection"].format(few=fmt(p.get("too_few_candidates"), lang))
    if tie_rule == TIE_RULE:
        tie_rule = t["tie_rule_ours"]
    selection += " " + (t["tie_rule"].format(rule=tie_rule) if tie_rule else t["tie_rule_unrecorded"])
    counts = _table(t["counts_header"], [[f"`{k}`", fmt(v, lang), t.get("count_" + k, "")]
                                         for k, v in facts.counts.items()])
    # parameter values as a params file spells them (None is `null` there: "not set", not "unknown")
    params = _table(t["kv_header"], [[f"`{k}`", f"`{'null' if v is None else fmt(v, lang)}`"]
                                     for k, v in sorted(shaping_parameters(facts.parameters).items())])
    env = facts.environment
    git = env.get("git") or {}
    packages = ", ".join(f"{k} {v}" for k, v in (env.get("packages") or {}).items() if v)
    environment = t["environment"].format(
        python=fmt(env.get("python"), lang), packages=packages or t["unknown"], commit=fmt(git.get("commit"), lang),
        dirty=fmt(git.get("dirty"), lang))
    return out + [t["h_scoring"], scoring, t["h_selection"], selection, t["h_counts"], counts,
                  t["h_parameters"], params, t["h_environment"], environment, *selfcheck_lines(facts, lang)]


def selfcheck_lines(facts: CardFacts, lang: str) -> list[str]:
    """The `repro selfcheck` the run cites (manifest `selfcheck`): heading and one paragraph; [] without one."""
    check = Manifest(facts.run).read().get("selfcheck") if facts.built_here else None
    if not check:
        return []
    versions = ", ".join(f"{k} {v}" for k, v in (check.get("versions") or {}).items() if v)
    not_run = ", ".join(f"`{n}`" for n in check.get("not_run") or [])
    gpu = f" ({check['gpu']})" if check.get("gpu") else ""
    facts_ = dict(when=fmt(check.get("when"), lang), device=f"`{check.get('device')}`{gpu}", dtype=check.get("dtype"),
                  model=check.get("model"), versions=versions, not_run=not_run)
    if lang == "zh":
        verdict = {"PASS": "通过", "INCOMPLETE": "不完整", "FAIL": "失败"}.get(check.get("verdict"), check.get("verdict"))
        text = ("本次运行引用的自检（`repro selfcheck`，{when}）结论为 **{verdict}**：设备 {device}，运行精度 `{dtype}`，"
                "模型 `{model}`；{versions}。").format(verdict=verdict, **facts_)
        text += "未运行的检查：{not_run}。".format(**facts_) if not_run else ""
        text += "" if check.get("same_versions_as_run", True) else "自检时的软件包版本与本次运行不同。"
        return ["### 自检", text]
    text = ("The run cites a self-check (`repro selfcheck`, {when}): **{verdict}** on {device}, run precision `{dtype}`, "
            "model `{model}`; {versions}.").format(verdict=check.get("verdict"), **facts_)
    text += " Checks not run: {not_run}.".format(**facts_) if not_run else ""
    text += "" if check.get("same_versions_as_run", True) else " It ran with other package versions than this run."
    return ["### Self-check", text]


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
        what = "（本地模型）" if lang == "zh" else " (a local checkpoint)"
        return f"`{Path(spec).name}`{what}" if local else f"`{spec}`"

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


def _get(tree: Any, *keys: str) -> Any:
    for key in keys:
        tree = tree.get(key) if isinstance(tree, dict) else None
    return tree


def _section_characteristics(facts: CardFacts, lang: str) -> list[str]:
    t = PHRASES[lang]
    m = facts.metrics
    if m is None:
        return []
    out = [t["h_characteristics"], t["metrics_intro"].format(n=fmt(m.get("n"), lang), excluded=excluded_count(m))]
    reasons = m.get("n_excluded") if isinstance(m.get("n_excluded"), dict) else m.get("excluded_reasons")
    if reasons:
        out.append(t["excluded_reasons"].format(reasons=fmt(reasons, lang)))
    sentences = _statistics_sentences(m, lang)
    if sentences:
        out.append(t["sentence_sep"].join(sentences))
    rows = statistics_rows(m, lang)
    if rows:
        out += [t["h_statistics"], _table([t["statistic"]] + [f"`{b}`" for b in SCORE_BLOCKS], rows)]
    checks = _checks(m, lang)
    if checks:
        out += [t["h_checks"], "\n".join(f"- {c}" for c in checks)]
    out += _agreement_lines(m, lang)
    out += [f"![{_caption(name, caption, m, lang)}]({FIGURES_DIR}/{png.name})" for png, caption in facts.figures
            for name in [png.stem]]
    return out


def _statistics_sentences(m: dict[str, Any], lang: str) -> list[str]:
    """The headline in words: means, the margin's interval and signs (the numbers are in the table below)."""
    t = PHRASES[lang]
    out = []
    means = [_get(m, b, "mean") for b in SCORE_BLOCKS]
    ci = _get(m, "margin", "mean_ci95")
    if all(isinstance(v, (int, float)) for v in means):
        out.append(t["say_means"].format(chosen=fmt(means[0], lang), rejected=fmt(means[1], lang),
                                         margin=fmt(means[2], lang)))
        if isinstance(ci, (list, tuple)) and len(ci) == 2 and None not in ci:
            out[-1] = out[-1][:-1] + t["say_ci"].format(lo=fmt(ci[0], lang), hi=fmt(ci[1], lang))
    counts = _get(m, "margin_sign", "counts")
    if isinstance(counts, dict) and all(isinstance(counts.get(k), int) for k in ("positive", "zero", "negative")):
        out.append(t["say_signs"].format(**{k: counts[k] for k in ("positive", "zero", "negative")}))
    return out


def statistics_rows(m: dict[str, Any], lang: str = "en") -> list[list[str]]:
    """The card's one statistics table: location and interval per score, then the margin's tests and effects."""
    t = PHRASES[lang]
    rows = []
    for stat in ("mean", "median", "mean_ci95", "median_ci95"):
        values = [_get(m, b, stat) for b in SCORE_BLOCKS]
        if any(v is not None for v in values):
            rows.append([t["stat_" + stat]] + [_metric(v, lang) for v in values])

    def margin_row(key: str, value: Any) -> None:
        if value is not None:
            rows.append([t[key], "", "", value if isinstance(value, str) else _metric(value, lang)])

    for test in ("wilcoxon", "paired_t", "sign_test"):
        margin_row("stat_p_" + test, _get(m, "tests", test, "pvalue"))
    for effect in ("cohens_dz", "rank_biserial"):
        if isinstance(m.get("effect_size"), dict) and effect in m["effect_size"]:
            rows.append([t["stat_" + effect], "", "", _metric(m["effect_size"][effect], lang)])
    ties = m.get("ties", _get(m, "margin_sign", "counts", "zero"))
    if isinstance(ties, int) and isinstance(m.get("n"), int) and m["n"]:
        margin_row("stat_ties", f"{ties} ({fmt(100 * ties / m['n'], lang)}%)")
    for unit, (rho, p) in _length_rhos(m.get("length")).items():
        text = fmt(rho, lang) + (f" (p = {fmt(p, lang)})" if p is not None else "")
        margin_row("stat_length", t["labelled"].format(label=t.get("unit_" + unit, unit), value=text) if unit else text)
    return rows


def _checks(m: dict[str, Any], lang: str) -> list[str]:
    """PairRM's invariants, each holding in k of n rows, or "not applicable" with the reason."""
    t = PHRASES[lang]
    inv, n = m.get("invariants"), m.get("n")
    if not isinstance(inv, dict) or not isinstance(n, int):
        return []
    kind = _get(m, "scale", "kind")
    if inv.get("expected_to_hold") is False:
        why = t["na_not_pairrm"].format(kind=t.get("scale_kind_" + str(kind), kind))
        return [_check(t, c, t["not_applicable"].format(why=why)) for c in ("sign", "antisymmetry", "sum")]
    out = []
    if isinstance(inv.get("sign_order_fails"), int):
        out.append(_check(t, "sign", t["holds"].format(k=n - inv["sign_order_fails"], n=n)))
    cand = inv.get("candidate_scores") if isinstance(inv.get("candidate_scores"), dict) else None
    if cand is not None and isinstance(cand.get("two_candidate_rows"), int):
        two = cand["two_candidate_rows"]
        if two == 0:
            per_row = cand.get("candidates_per_row") or {}
            why = t["na_no_two"].format(lo=fmt(per_row.get("min"), lang), hi=fmt(per_row.get("max"), lang))
            out.append(_check(t, "antisymmetry", t["not_applicable"].format(why=why)))
        else:
            out.append(_check(t, "antisymmetry", t["holds"].format(
                k=cand.get("antisymmetry_holds_among_two_candidate_rows"), n=two)))
    elif isinstance(inv.get("antisymmetry_holds"), int):
        out.append(_check(t, "antisymmetry", t["holds"].format(k=inv["antisymmetry_holds"], n=n)))
    if cand is not None and isinstance(cand.get("sum_to_zero_holds"), int):
        out.append(_check(t, "sum", t["holds"].format(k=cand["sum_to_zero_holds"], n=cand.get("rows", n))))
        if isinstance(cand.get("chosen_is_best_and_rejected_is_worst"), int):
            out.append(_check(t, "best", t["holds"].format(
                k=cand["chosen_is_best_and_rejected_is_worst"], n=cand.get("rows", n))))
    else:
        out.append(_check(t, "sum", t["not_applicable"].format(why=t["na_no_candidate_scores"])))
    if isinstance(inv.get("inversions"), int):
        out.append(t["check_inversions"].format(k=inv["inversions"]))
    return out


def _check(t: dict[str, Any], check: str, result: str) -> str:
    return t["labelled"].format(label=t["check_" + check], value=result)


def _caption(name: str, caption: str, m: dict[str, Any], lang: str) -> str:
    """A figure's caption: the analysis' own title in English, the same title in Chinese."""
    template = PHRASES[lang].get("fig_" + name)
    if lang == "en" or template is None:
        return caption
    return template.format(n=fmt(m.get("n"), lang))


def scale_sentence(scale: Any, lang: str) -> str | None:
    """What the analysis read of the scores' scale, in the card's language (its own sentence as a fallback)."""
    t = PHRASES[lang]
    if isinstance(scale, dict) and scale.get("kind") in ("rating", "logit", "unclear"):
        return t["scale_" + scale["kind"]].format(
            step=fmt(scale.get("grid_step"), lang), lo=fmt(scale.get("min"), lang), hi=fmt(scale.get("max"), lang),
            distinct=fmt(scale.get("distinct_values"), lang),
            fraction=fmt(100 * scale["grid_fraction"], lang) + "%" if isinstance(scale.get("grid_fraction"), (int, float))
            else t["unknown"])
    if isinstance(scale, str):
        return scale
    return next((v for _, v in _flatten(scale) if isinstance(v, str) and len(v.split()) > 3), None) if scale else None


def _agreement_lines(metrics: dict[str, Any], lang: str) -> list[str]:
    """The agreement between scorers (metrics.json's `agreement` block, present with several scorers), or nothing."""
    block = metrics.get("agreement")
    if not isinstance(block, dict) or not block.get("pairs"):
        return []
    primary = block.get("primary")
    if lang == "zh":
        heading, header = "### 评分模型之间的一致性", ["评分模型对", "比较的行数", "chosen 相同", "rejected 相同",
                                               "每个提示的 Kendall τ 均值（中位数）", "τ 无定义的行", "差值的 Pearson / Spearman"]
        intro = (f"`chosen` / `rejected` 由主评分模型 `{primary}` 选出；其余评分模型对每个候选回答的打分保存在 "
                 f"`candidate_scores_<名称>` 列中（候选顺序相同）。差值 = 每个评分模型的最高分 − 最低分。"
                 if primary else "选出 `chosen` / `rejected` 的评分模型不在比较之列。")
    else:
        heading, header = "### Agreement between scorers", ["scorers", "rows compared", "same chosen", "same rejected",
                                                            "Kendall τ per prompt, mean (median)", "τ undefined",
                                                            "margin Pearson / Spearman"]
        intro = (f"`chosen` / `rejected` were picked by the primary scorer `{primary}`; the other scorers' scores of "
                 f"every candidate are in `candidate_scores_<name>` (same candidate order). Margin = each scorer's "
                 f"best − worst candidate score." if primary else
                 "The scorer that picked `chosen` / `rejected` is not among those compared.")
    rows = []
    for pair in block["pairs"]:
        tau, margins = pair["kendall_tau"], pair["margin_correlation"]
        rows.append([
            " vs ".join(f"`{s}`" for s in pair["scorers"]), fmt(pair["rows"], lang),
            f"{fmt(pair['same_chosen']['count'], lang)} ({_metric(pair['same_chosen']['fraction'], lang)})",
            f"{fmt(pair['same_rejected']['count'], lang)} ({_metric(pair['same_rejected']['fraction'], lang)})",
            f"{_metric(tau['mean'], lang)} ({_metric(tau['median'], lang)})", fmt(tau["undefined"], lang),
            " / ".join(_metric((margins.get(k) or {}).get("statistic"), lang) for k in ("pearson", "spearman"))])
    return [heading, intro, _table(header, rows)]


def _metric(value: Any, lang: str) -> str:
    # the analysis writes NaN/inf (a statistic of constant data, say) as null: "undefined", not "unknown"
    return PHRASES[lang]["undefined"] if value is None else fmt(value, lang)


# "How to use" speaks its own phrases (kept here, beside the code that quotes them)
USE_PHRASES: dict[str, dict[str, str]] = {
    "en": {
        "h_use": "## How to use",
        "code_local": "# a local copy of this folder (README.md + data/), from the folder that holds it",
        "trl": ("**With TRL's `DPOTrainer`** (tested with TRL {trl}): the columns as stored are not a format "
                "`DPOTrainer` reads. Beside the conversational `chosen` / `rejected`, the string `prompt` makes TRL "
                "{trl} stop with a `TypeError` or an `AttributeError`. Convert the rows to TRL's conversational "
                "preference format first: `prompt` = the user turn, `chosen` / `rejected` = the assistant turn "
                "only, keeping `prompt_id`, `score_chosen`, `score_rejected` and adding `margin` = "
                "`score_chosen` − `score_rejected`. With this project's package `repro` installed:"),
        "code_model": "# model, tokenizer, args: your policy, its tokenizer (with a chat template), a trl.DPOConfig",
        "trl_plain": "Or the same conversion with `datasets` alone:",
        "trl_then": ("Then `trainer.train()`. Keeping only `chosen` and `rejected` (TRL's implicit-prompt format, "
                     "`repro.formats.to_trl_implicit`) trains too: TRL then takes their common first turn as the "
                     "prompt."),
        "filter_count": ("Ties carry no preference: `train = train.filter(lambda row: row[\"margin\"] > 0)` keeps "
                         "the {kept} of the {n} pairs whose `chosen` scored strictly higher."),
        "filter": ("Ties carry no preference: `train = train.filter(lambda row: row[\"margin\"] > 0)` keeps the "
                   "pairs whose `chosen` scored strictly higher; the margin can also weight the pairs."),
        "keys": ("Keep `prompt_id` as the key, to check overlap with evaluation prompts. For PPO, train a reward "
                 "model on the pairs first, then use the prompts for rollouts."),
        "other_pairs": ("The dataset has `prompt`, `chosen` and `rejected` but not every column of this project's "
                        "schema; check its format against TRL's dataset formats before training with `DPOTrainer`."),
    },
    "zh": {
        "h_use": "## 使用方法",
        "code_local": "# 本文件夹（README.md + data/）的本地副本，在其上一级文件夹中运行",
        "trl": ("**配合 TRL 的 `DPOTrainer` 使用**（已在 TRL {trl} 上测试）：按存储原样的列不是 `DPOTrainer` "
                "可读取的格式。`chosen` / `rejected` 为对话式，而 `prompt` 为字符串，TRL {trl} 会因此报出 "
                "`TypeError` 或 `AttributeError` 而中止。请先把各行转换为 TRL 的对话式偏好格式：`prompt` 为用户轮次，"
                "`chosen` / `rejected` 仅为助手轮次；保留 `prompt_id`、`score_chosen`、`score_rejected`，并新增 "
                "`margin` = `score_chosen` − `score_rejected`。已安装本项目的 `repro` 包时："),
        "code_model": "# model、tokenizer、args：你的策略模型、其分词器（需带对话模板）、一个 trl.DPOConfig",
        "trl_plain": "或者只用 `datasets` 完成同样的转换：",
        "trl_then": ("然后调用 `trainer.train()`。只保留 `chosen` 与 `rejected`（TRL 的隐式提示词格式，"
                     "`repro.formats.to_trl_implicit`）同样可以训练：TRL 会把两者共同的第一个轮次当作提示词。"),
        "filter_count": ("平局不含偏好信息：`train = train.filter(lambda row: row[\"margin\"] > 0)` 保留 {n} 对中 "
                         "`chosen` 得分严格更高的 {kept} 对。"),
        "filter": ("平局不含偏好信息：`train = train.filter(lambda row: row[\"margin\"] > 0)` 只保留 `chosen` "
                   "得分严格更高的偏好对；差值也可用于为偏好对加权。"),
        "keys": "请以 `prompt_id` 作为键，以检查与评测提示词的重叠。用于 PPO 时，先在这些偏好对上训练奖励模型，再用提示词进行采样。",
        "other_pairs": ("该数据集有 `prompt`、`chosen` 与 `rejected` 列，但缺少本项目模式中的部分列；用 `DPOTrainer` "
                        "训练前，请对照 TRL 的数据集格式检查其格式。"),
    },
}


def _strict_preferences(facts: CardFacts) -> int | None:
    """Pairs with margin > 0, from metrics.json, when the analysis covered every row (else None)."""
    metrics = facts.metrics or {}
    counts = (metrics.get("margin_sign") or {}).get("counts") or {}
    if metrics.get("n") == facts.num_examples and isinstance(counts.get("positive"), int):
        return counts["positive"]
    return None


def _section_use(facts: CardFacts, lang: str) -> list[str]:
    t = USE_PHRASES[lang]
    split = facts.splits[0].name
    # a published card names its hub id; otherwise the folder's own name: never this machine's path
    # (not ".": datasets 5.2 cannot name a dataset loaded from ".")
    where = f'"{facts.hub_repo_id or facts.run.dataset.name}"'
    load = ["```python", "from datasets import load_dataset", ""]
    load += [] if facts.hub_repo_id else [t["code_local"]]
    load += [f"ds = load_dataset({where}, split=\"{split}\")", "```"]
    out = [t["h_use"], "\n".join(load)]
    columns = list(facts.features)
    if not set(REQUIRED_COLUMNS) <= set(columns):
        out.append(t["other_pairs"] if {"prompt", "chosen", "rejected"} <= set(columns)
                   else PHRASES[lang]["use_no_pairs"])
        return out
    drop = [c for c in columns if c not in TRL_FEATURES]
    out += [t["trl"].format(trl=TESTED_TRL_VERSION), "\n".join([
        "```python", "from repro.formats import to_trl", "from trl import DPOTrainer", "",
        "train = to_trl(ds)", t["code_model"],
        "trainer = DPOTrainer(model=model, args=args, train_dataset=train, processing_class=tokenizer)", "```"])]
    out += [t["trl_plain"], "\n".join([
        "```python", "train = ds.map(",
        '    lambda row: {"prompt": row["chosen"][:-1], "chosen": row["chosen"][-1:], '
        '"rejected": row["rejected"][-1:],',
        '                 "margin": row["score_chosen"] - row["score_rejected"]},',
        f"    remove_columns={json.dumps(drop)})" if drop else ")", "```"])]
    kept = _strict_preferences(facts)
    out += [t["trl_then"], t["filter"] if kept is None else t["filter_count"].format(kept=kept, n=facts.num_examples),
            t["keys"]]
    return out


def _section_background(facts: CardFacts, lang: str) -> list[str]:
    t = PHRASES[lang]
    if not facts.built_here:
        return []  # nothing is known of a foreign dataset's background beyond what the card states above
    seed_like = {"prompt", "chosen", "rejected", "score_chosen", "score_rejected"} <= set(facts.features)
    return [t["h_background"], t["background"].format(seed=SEED_REPO) if seed_like else t["background_other"]]


def _section_limitations(facts: CardFacts, lang: str) -> list[str]:
    t = PHRASES[lang]
    items = []
    if facts.stand_in:
        items.append(t["lim_stand_in"])
    if not facts.built_here:
        items.append(t["lim_foreign"])
    if _pairrm_scored(facts):
        items.append(t["lim_scale_pairrm"])
    sentence = scale_sentence((facts.metrics or {}).get("scale"), lang)
    if sentence:
        items.append(t["lim_scale_metrics"].format(sentence=sentence))
    length = (facts.metrics or {}).get("length")
    rhos = _length_rhos(length)
    if facts.metrics is None:
        items.append(t["lim_length_unmeasured"])
    elif not rhos:
        reason = length.get("reason") if isinstance(length, dict) and lang == "en" else None
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
    if not preference:
        return [t["h_uses"], t["use_no_pairs"]]
    return [t["h_uses"], t["uses"] + (t["uses_pairrm"] if _pairrm_scored(facts) else "")]


def _pairrm_scored(facts: CardFacts) -> bool:
    """Whether the card may say PairRM ranked the data: built here, or so said by `known_recipe`."""
    return facts.built_here or "pairrm" in str(facts.known_recipe.get("scorer", "")).lower()


def _section_citation(facts: CardFacts, lang: str) -> list[str]:
    t = PHRASES[lang]
    if facts.built_here:
        return [t["h_citation"], t["licences"].format(license=facts.license), CITATIONS]
    licence = t["licence_given"].format(license=facts.license) if facts.license else t["licence_not_stated"]
    source = facts.known_recipe.get("source")
    sources = t["sources_given"].format(source=public_value(source)) if source else t["sources_unknown"]
    return [t["h_licence_foreign"], f"{licence} {sources}"]


def _section_reproduction(facts: CardFacts, lang: str) -> list[str]:
    """The "Reproduction" section, from the run's compare.json (nothing when the run has none)."""
    from .compare import reproduction_section  # here: compare loads the plotting stack, needed only for this section

    return reproduction_section(facts.run, lang)


SECTIONS: tuple[Callable[[CardFacts, str], list[str]], ...] = (
    _section_top, _section_summary, _section_info, _section_built, _section_characteristics, _section_reproduction,
    _section_use,
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


FIGURE_LINK_RE = re.compile(r"!\[(?P<alt>[^\]]*)\]\((?P<src>" + FIGURES_DIR + r"/[^)\s]+\.png)\)")


def preview_markdown(card_path: str | Path, notebook_dir: str | Path | None = None) -> str:
    """The card's body with its figure links made relative to `notebook_dir`, the folder of the notebook that shows
    it (default: `notebook_folder`), so that a notebook shows the figures without carrying megabytes of images."""
    card_path = Path(card_path).resolve()
    folder = Path(notebook_dir) if notebook_dir is not None else notebook_folder(card_path)

    def relink(match: re.Match) -> str:
        png = card_path.parent / match["src"]
        if not png.is_file():
            return match[0]
        return f"![{match['alt']}]({Path(os.path.relpath(png, folder.resolve())).as_posix()})"

    return FIGURE_LINK_RE.sub(relink, DatasetCard.load(card_path).text)


def notebook_folder(card_path: str | Path) -> Path:
    """Where the notebook showing a run's card lives: the run's notebooks/ while `repro run` executes 03_card there,
    else the kernel's working folder (JupyterLab starts a kernel in the notebook's folder; plain papermill in the
    folder it was started from, where its output notebook usually goes)."""
    run = RunDir.of(Path(card_path).resolve().parent.parent)
    entry = (Manifest(run).read().get("notebooks") or {}).get("03_card") or {}
    if entry.get("status") == "running" and entry.get("executed"):
        return (run.root / entry["executed"]).parent
    return Path.cwd()


def preview(card_path: str | Path):
    """The card's body as rendered Markdown with its figures shown (the card file keeps its hub-relative links)."""
    from IPython.display import Markdown

    return Markdown(preview_markdown(card_path))


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
        "h_checks": "### Checks of PairRM's invariants (reported, not enforced)",
        "check_sign": "`score_chosen` ≥ 0 ≥ `score_rejected`",
        "check_antisymmetry": "`score_chosen` = −`score_rejected` in rows with two candidates",
        "check_sum": "a row's candidate scores sum to 0",
        "check_best": "`chosen` is the best candidate and `rejected` the worst",
        "check_inversions": "Inversions (`score_chosen` < `score_rejected`): {k} rows.",
        "holds": "holds in {k} of {n} rows.",
        "labelled": "{label}: {value}",
        "sentence_sep": " ",
        "not_applicable": "not applicable: {why}.",
        "na_not_pairrm": "the scores are {kind}, not PairRM scores",
        "na_no_two": "no row has exactly two candidates (rows have {lo} to {hi})",
        "na_no_candidate_scores": "the dataset has no `candidate_scores` column",
        "scale_kind_rating": "ratings",
        "scale_kind_unclear": "on an unclear scale",
        "scale_rating": ("the scores are ratings on a grid of {step} from {lo} to {hi} ({distinct} distinct values), "
                         "not PairRM logits: ties are common and PairRM's invariants do not apply."),
        "scale_logit": ("the scores are real-valued, as PairRM's logits are ({distinct} distinct values from {lo} to "
                        "{hi}, off any rating grid): ties should be rare and PairRM's invariants should hold."),
        "scale_unclear": ("unclear: {fraction} of the values lie on a grid of {step}, from {lo} to {hi}; read the "
                          "statistics as unitless."),
        "say_means": "`score_chosen` averages {chosen}, `score_rejected` {rejected}, the margin {margin}.",
        "say_ci": " (95% bootstrap interval {lo} to {hi}).",
        "say_signs": "The margin is positive in {positive} rows, zero (a tie) in {zero} and negative in {negative}.",
        "stat_mean": "mean",
        "stat_median": "median",
        "stat_mean_ci95": "95% interval of the mean",
        "stat_median_ci95": "95% interval of the median",
        "stat_p_wilcoxon": "Wilcoxon signed-rank p (margin ≠ 0)",
        "stat_p_paired_t": "paired t-test p",
        "stat_p_sign_test": "sign test p",
        "stat_cohens_dz": "effect size: Cohen's d_z",
        "stat_rank_biserial": "effect size: rank-biserial r",
        "stat_ties": "ties (margin = 0)",
        "stat_length": "length bias: Spearman ρ(margin, length difference)",
        "tie_rule_ours": "chosen = the first candidate with the highest score, rejected = the last with the lowest",
        "fig_score_distributions": "Distribution of scores (n = {n} pairs)",
        "fig_score_ecdf": "ECDF of scores (n = {n} pairs)",
        "fig_chosen_vs_rejected": "Chosen vs rejected score (n = {n} pairs)",
        "fig_margin_distribution": "Distribution of the margin (n = {n} pairs)",
        "fig_margin_vs_length": "Margin vs response length difference (n = {n} pairs)",
        "fig_score_violin": "Scores of chosen and rejected (n = {n} pairs)",
        "fig_scorer_agreement": "Agreement between scorers (n = {n} pairs)",
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
        "h_parameters": ("### Parameters of this run\n\nThe parameters that shaped the data, as recorded in the manifest "
                         "(defaults filled in where the params file set none; generation settings only when "
                         "candidates were generated). How the work was run (batch sizes, chunks, processes) and "
                         "where is left out."),
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
                          "analysed, {excluded} excluded. `margin` = `score_chosen` − `score_rejected`. The full detail (spread, "
                          "quartiles, skewness, correlations, lengths) is in that file; the essentials follow."),
        "h_statistics": "### Key statistics",
        "statistic": "statistic",
        "excluded_reasons": "Excluded rows and reasons: {reasons}.",
        "use_no_pairs": "The dataset lacks `prompt`/`chosen`/`rejected`: it cannot be used for DPO as it stands.",
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
                 "- Training or evaluating reward models on the pairs, with the margin as a soft label."),
        "uses_pairrm": ("\n- Studying PairRM as a judge: its agreement with GPT-4 ratings, its length bias, its ties.\n"
                        "- A first round for iterative recipes (SELM, SPPO) that generate and rank again each round."),
        "h_licence_foreign": "## Licence",
        "licence_given": "This dataset is released under `{license}` (as given to this card).",
        "licence_not_stated": ("The licence of this dataset is not stated: none was given to this card (set the "
                               "`license` parameter once it is known)."),
        "sources_given": "Its source, as given in `known_recipe`: {source}.",
        "sources_unknown": "Its sources are not known to this project.",
        "h_citation": "## Citation and licences",
        "licences": (
            "This dataset is released under `{license}`. Its sources: UltraFeedback (`openbmb/UltraFeedback`, MIT), "
            "`HuggingFaceH4/ultrafeedback_binarized` (MIT) and the scorer PairRM (`llm-blender/PairRM`, MIT). "
            "Please cite them:"),
    },
    "zh": {
        "h_checks": "### PairRM 不变量检查（仅报告，不作强制）",
        "check_sign": "`score_chosen` ≥ 0 ≥ `score_rejected`",
        "check_antisymmetry": "两个候选的行中 `score_chosen` = −`score_rejected`",
        "check_sum": "每行候选得分之和为 0",
        "check_best": "`chosen` 为最佳候选且 `rejected` 为最差候选",
        "check_inversions": "倒置（`score_chosen` < `score_rejected`）：{k} 行。",
        "holds": "在 {n} 行中有 {k} 行成立。",
        "labelled": "{label}：{value}",
        "sentence_sep": "",
        "not_applicable": "不适用：{why}。",
        "na_not_pairrm": "这些分数是{kind}，不是 PairRM 分数",
        "na_no_two": "没有恰好两个候选的行（每行有 {lo} 到 {hi} 个候选）",
        "na_no_candidate_scores": "数据集没有 `candidate_scores` 列",
        "scale_kind_rating": "评分",
        "scale_kind_unclear": "尺度不明的数值",
        "scale_rating": ("分数是以 {step} 为间隔、从 {lo} 到 {hi} 的评分（{distinct} 个不同取值），不是 PairRM 的 logit："
                         "平局常见，PairRM 的不变量不适用。"),
        "scale_logit": ("分数是实数，与 PairRM 的 logit 相同（{distinct} 个不同取值，从 {lo} 到 {hi}，不在任何评分网格上）："
                        "平局应当罕见，PairRM 的不变量应当成立。"),
        "scale_unclear": "尺度不明：{fraction} 的取值落在间隔为 {step} 的网格上，范围从 {lo} 到 {hi}；请把统计量视为无单位。",
        "say_means": "`score_chosen` 的均值为 {chosen}，`score_rejected` 为 {rejected}，差值为 {margin}。",
        "say_ci": "（95% 自助法区间为 {lo} 到 {hi}）。",
        "say_signs": "差值为正的有 {positive} 行，为零（平局）的有 {zero} 行，为负的有 {negative} 行。",
        "stat_mean": "均值",
        "stat_median": "中位数",
        "stat_mean_ci95": "均值的 95% 区间",
        "stat_median_ci95": "中位数的 95% 区间",
        "stat_p_wilcoxon": "Wilcoxon 符号秩检验 p（差值 ≠ 0）",
        "stat_p_paired_t": "配对 t 检验 p",
        "stat_p_sign_test": "符号检验 p",
        "stat_cohens_dz": "效应量：Cohen's d_z",
        "stat_rank_biserial": "效应量：秩双列相关 r",
        "stat_ties": "平局（差值 = 0）",
        "stat_length": "长度偏差：Spearman ρ（差值，长度差）",
        "tie_rule_ours": "chosen 为得分最高的第一个候选，rejected 为得分最低的最后一个候选",
        "fig_score_distributions": "分数分布（n = {n} 对）",
        "fig_score_ecdf": "分数的经验累积分布（n = {n} 对）",
        "fig_chosen_vs_rejected": "chosen 与 rejected 的分数对比（n = {n} 对）",
        "fig_margin_distribution": "差值的分布（n = {n} 对）",
        "fig_margin_vs_length": "差值与回复长度差的关系（n = {n} 对）",
        "fig_score_violin": "chosen 与 rejected 的分数小提琴图（n = {n} 对）",
        "fig_scorer_agreement": "评分模型之间的一致性（n = {n} 对）",
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
        "h_parameters": ("### 本次运行的参数\n\n决定数据内容的参数，取自运行清单（manifest）（参数文件未设置的以默认值补全；"
                         "只有生成了候选回复时才列出生成参数）。运行方式（批大小、分块、进程数）与运行位置不列出。"),
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
                          "排除 {excluded} 行。`margin` = `score_chosen` − `score_rejected`。完整细节（离散程度、四分位数、偏度、"
                          "相关性、长度）见该文件；以下为要点。"),
        "h_statistics": "### 关键统计量",
        "statistic": "统计量",
        "excluded_reasons": "被排除的行及原因：{reasons}。",
        "use_no_pairs": "该数据集缺少 `prompt`/`chosen`/`rejected` 列，不能直接用于 DPO。",
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
                 "- 在偏好对上训练或评估奖励模型，以差值作为软标签。"),
        "uses_pairrm": ("\n- 研究 PairRM 作为评判者的表现：与 GPT-4 评分的一致性、长度偏差、平局。\n"
                        "- 作为迭代式配方（SELM、SPPO）的第一轮，之后每轮重新生成并排序。"),
        "h_licence_foreign": "## 许可",
        "licence_given": "本数据集以 `{license}` 许可发布（由本卡片的参数给出）。",
        "licence_not_stated": "本数据集的许可未说明：本卡片未获得许可信息（得知后请设置 `license` 参数）。",
        "sources_given": "其来源（由 `known_recipe` 给出）：{source}。",
        "sources_unknown": "本项目不了解其来源。",
        "h_citation": "## 引用与许可",
        "licences": (
            "本数据集以 `{license}` 许可发布。其来源：UltraFeedback（`openbmb/UltraFeedback`，MIT）、"
            "`HuggingFaceH4/ultrafeedback_binarized`（MIT）以及评分器 PairRM（`llm-blender/PairRM`，MIT）。请引用："),
    },
}
assert PHRASES["en"].keys() == PHRASES["zh"].keys(), "the two languages must say the same things"
