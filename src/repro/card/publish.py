"""The card as a file: YAML through `datasets`/`huggingface_hub` objects (datasets 5.2's metadata helpers, pinned;
tests/golden guards the YAML), the body from the templates; then write, check, preview and publish it."""

from __future__ import annotations

import contextlib
import filecmp
import functools
import glob
import json
import math
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

import datasets
import jinja2
from datasets import Features
from datasets.info import DatasetInfo, DatasetInfosDict
from datasets.splits import SplitDict, SplitInfo
from datasets.utils.metadata import MetadataConfigs
import huggingface_hub  # (its client and token read at the upload: what a test, a mirror's set-up or a login replaces)
from huggingface_hub import DatasetCard, DatasetCardData

from ..analysis import p_value
from ..dataset_io import split_files
from ..errors import DataError, ReproError, rendering
from ..exporters import FORMATS
from ..formats import REQUIRED_COLUMNS, TESTED_TRL_VERSION, TRL_FEATURES
from ..manifest import NOT_FROM_CHECKOUT, Manifest
from ..parameters import RECIPE_FACTS, TIE_RULES, CardParams, build, code_span, fence, one_line, table_cell
from ..paths import DATA_DIR, FIGURES_DIR, RunDir, reads_as_hub_id, without_folders
from ..revisions import publish_blocker
from ..subject import STAND_IN_TAGS
from .facts import (CONFIG_NAME, LENGTH_BIAS_P, LENGTH_BIAS_RHO, LENGTH_BIAS_ROWS, LENGTH_BIAS_SHARE,
                    REBUILD_FILE, REBUILD_OUT, SCORE_BLOCKS, SEED_REPO, SMALL_ROWS, CardFacts, SplitFacts,
                    gather_facts, public_value, shaping_parameters)

TEMPLATES = Path(__file__).parent / "templates"
# an error inside the templates, as a ReproError naming the template and its line, and what to do
card_rendering = functools.partial(rendering, "The card's", (
    "If the run's records (manifest.json, metrics.json, compare.json) were edited or cut short, run the notebooks "
    f"again to write them anew; if not, this is a bug in repro.card ({TEMPLATES})."))
LANGUAGES = ("en", "zh")  # the body's halves, in this order; each has templates/<lang>.jinja
# what a template leaves unfinished: the hub template's words, Jinja it did not run, TODO or TBD as words
PLACEHOLDER_RE = re.compile(r"More Information needed|需补充更多信息|\{\{|\{%|\b(?:TODO|TBD)\b", re.I)
BIBTEX_ENTRY_RE = re.compile(r"^@\w+\{(?P<key>[^,\s]+),.*?^\}$", re.M | re.S)  # citations.bib's entries, by key
FIGURE_LINK_RE = re.compile(r"!\[(?P<alt>[^\]]*)\]\((?P<src>" + FIGURES_DIR + r"/[^)\s]+\.png)\)")


def size_category(n: int) -> str:
    """The hub's `size_categories` label for n examples."""
    bounds = [(1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M"),
              (10_000_000, "1M<n<10M"), (100_000_000, "10M<n<100M"), (1_000_000_000, "100M<n<1B")]
    return next((label for bound, label in bounds if n < bound), "n>1B")


def card_data(features: Features, splits: list[SplitFacts], **metadata: Any) -> DatasetCardData:
    """Card metadata as push_to_hub writes it (dataset_info, configs) plus `metadata` (license, tags, ...)."""
    data = DatasetCardData(**{k: v for k, v in metadata.items() if v is not None})
    # the same steps as datasets.arrow_dataset._get_updated_dataset_card on a first push
    sizes = {"download_size": sum(s.download_size for s in splits), "dataset_size": sum(s.num_bytes for s in splits)}
    info = DatasetInfo(config_name=CONFIG_NAME, features=features, splits=SplitDict(), **sizes)
    for split in splits:
        info.splits.add(SplitInfo(name=split.name, num_bytes=split.num_bytes, num_examples=split.num_examples))
    info.size_in_bytes = info.download_size + info.dataset_size
    DatasetInfosDict({CONFIG_NAME: info}).to_dataset_card_data(data)
    configs = {"data_files": [{"split": s.name, "path": f"{DATA_DIR}/{s.name}-*"} for s in splits]}
    MetadataConfigs({CONFIG_NAME: configs}).to_dataset_card_data(data)
    return data


def facts_card_data(facts: CardFacts) -> DatasetCardData:
    """The card metadata for a run: the data's own YAML plus licence, language, size, task and tags."""
    preference = facts.has_columns("prompt", "chosen", "rejected")
    tags = ["preference", *(["dpo"] * facts.for_training), "rlhf"] if preference else []
    if facts.built_here or facts.stand_in:  # what the data is known to be: its scorer's, its source's (or declared)
        scores = {"stand_in": STAND_IN_TAGS["scorer"], "pairrm": "pairrm"}.get(facts.scorer_kind, "reward-model-scores")
        tags += [scores, *(["ultrafeedback"] if facts.source_kind == "ultrafeedback" and not facts.stand_in else [])]
    tags += [STAND_IN_TAGS["generation"]] * bool(facts.generation.get("stand_in"))
    source = (facts.parameters if facts.built_here else facts.known_recipe).get("source")
    return card_data(facts.features, facts.splits, language=facts.language or None, license=facts.license,
                     size_categories=[size_category(sum(s.num_examples for s in facts.splits))],  # every split
                     source_datasets=[f"extended|{source}"] if reads_as_hub_id(source) else None,
                     task_categories=["text-generation"] if preference else None, pretty_name=facts.title,
                     tags=tags or None)


def fmt(value: Any, unknown: str = "unknown") -> str:
    """A value as the card prints it (floats to 6 significant digits; None = `unknown`, in the card's language)."""
    if value is None:
        return unknown
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return "NaN" if math.isnan(value) else f"{value:.6g}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(fmt(v, unknown) for v in value) + "]"
    if isinstance(value, dict):  # nested braces spaced apart, as cards have written them
        return re.sub(r"([{}])(?=\1)", r"\1 ", json.dumps(value, ensure_ascii=False))
    return str(value)


def code_block(text: Any, language: str) -> str:
    """`text` as a fenced markdown code block in `language`, which no line of it ends."""
    return f"{fence(str(text), 3)}{language}\n{text}\n{fence(str(text), 3)}"


def _environment(lang: str) -> jinja2.Environment:
    """Templates with `t` = `lang`'s sentences (templates/<lang>.jinja), filters; rebuilt when a file changes."""
    return _environment_of(lang, TEMPLATES, tuple((f.name, f.stat().st_mtime_ns, f.stat().st_size)
                                                  for f in sorted(TEMPLATES.iterdir())))


@functools.lru_cache(maxsize=len(LANGUAGES))  # (compiling both languages took 0.6 s, a card rendered 0.01 s)
def _environment_of(lang: str, templates: Path, stamp: tuple) -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(templates), undefined=jinja2.StrictUndefined,
                             trim_blocks=True, lstrip_blocks=True, autoescape=False)
    env.globals.update(config_name=CONFIG_NAME, data_dir=DATA_DIR, figures_dir=FIGURES_DIR,
                       seed_repo=SEED_REPO, score_blocks=SCORE_BLOCKS, required_columns=REQUIRED_COLUMNS,
                       trl_version=TESTED_TRL_VERSION, length_bias_rho=LENGTH_BIAS_RHO, length_bias_p=LENGTH_BIAS_P,
                       length_bias_share=LENGTH_BIAS_SHARE, length_bias_rows=LENGTH_BIAS_ROWS, small_rows=SMALL_ROWS,
                       recipe_facts=RECIPE_FACTS, our_tie_rules={rule: key for key, rule in TIE_RULES.items()},
                       trl_features=TRL_FEATURES, shaping_parameters=shaping_parameters, rebuild_file=REBUILD_FILE,
                       rebuild_out=REBUILD_OUT, not_from_checkout=NOT_FROM_CHECKOUT,
                       format_sources={name: f.source for name, f in FORMATS.items()},
                       citations={m["key"]: m[0] for m in BIBTEX_ENTRY_RE.finditer(
                           (templates / "citations.bib").read_text(encoding="utf-8"))})
    env.filters.update(
        json=json.dumps, code=code_span, text=one_line, block=code_block, public=public_value, cell=table_cell,
        v=lambda value: one_line(fmt(value, words.unknown)),  # (a record's value: a copied run's may be any text)
        metric=lambda value: words.undefined if value is None else one_line(fmt(value, words.unknown)),  # null: NaN/inf
        p=lambda value: p_value(value, ".6g"))
    words = env.globals["t"] = env.get_template(f"{lang}.jinja").module  # (after globals, filters: its macros use them)
    return env


def phrases(lang: str) -> Any:
    """The sentences of one language (templates/<lang>.jinja): its words as attributes, its sentences as macros."""
    with card_rendering():
        return _environment(lang).globals["t"]


def _tidy(text: str) -> str:
    # blocks are separated by one blank line whatever the template's conditionals left between them
    return re.sub(r"\n{3,}", "\n\n", text).strip("\n")


def render_section(facts: CardFacts, name: str, lang: str) -> str:
    """One section of the body (a macro of templates/sections.jinja: "selfcheck", "reproduction", ...)."""
    with card_rendering():
        sections = _environment(lang).get_template("sections.jinja").make_module({"facts": facts})
        return _tidy(str(getattr(sections, name)()))


def render_body(facts: CardFacts) -> str:
    """The card's Markdown body: every section in English, then the same sections in Chinese."""
    with card_rendering():
        halves = [_tidy(_environment(lang).get_template("card.md.jinja").render(facts=facts)) for lang in LANGUAGES]
    return "\n" + "\n\n---\n\n".join(halves) + "\n"


def build_card(facts: CardFacts) -> DatasetCard:
    """The card (YAML + body) as a `huggingface_hub.DatasetCard`; home and cwd paths by last name (`public_text`)."""
    text = f"---\n{facts_card_data(facts).to_yaml()}\n---\n{render_body(facts)}"
    return DatasetCard(without_folders(text, Path.home(), Path.home().resolve(), Path.cwd()))


def write_card(facts: CardFacts, refreshed: bool = False, card: DatasetCard | None = None) -> Path:
    """Copy the figures to dataset/figures/, write dataset/README.md (`card` if built), record both (`refreshed`)."""
    run = facts.run
    figures_dir = run.card_figures
    if figures_dir.exists():
        shutil.rmtree(figures_dir)  # the folder is the card's own: stale figures must not be published
    if facts.figures:
        figures_dir.mkdir(parents=True)
    copies = [Path(shutil.copy2(png, figures_dir / png.name)) for png, _ in facts.figures]
    manifest = Manifest(run)
    notebook = contextlib.nullcontext() if refreshed else manifest.notebook(facts.parameters_given, "03_card")
    with notebook, manifest.stage("card", resumable=False) as info:
        (card or build_card(facts)).save(run.card)
        info.update(card=str(run.card), figures=len(copies), left_out=[s for s, _ in facts.left_out],
                    stand_in=facts.stand_in, built_here=facts.built_here)
    manifest.add_outputs(run.card, *copies)
    return run.card


def _written_already(facts: CardFacts, card: DatasetCard) -> bool:
    """Whether the run's dataset/ holds `card` and the figures `write_card` would write (a refresh then writes none)."""
    figures = facts.run.card_figures
    return facts.run.card.read_bytes() == str(card).encode() and sorted(
        p.name for p in figures.glob("*")) == sorted(png.name for png, _ in facts.figures) and all(
        filecmp.cmp(png, figures / png.name, shallow=False) for png, _ in facts.figures)


def refresh(p: Any) -> Path | None:
    """Rewrite `p`'s run's card with its recorded card parameters; None (said why) if no 03_card yet or input gone."""
    run = RunDir(p.run_root)
    if not run.card.is_file():
        return None
    recorded = Manifest(run).read().get("parameters") or {}
    values = {k: v for k, v in recorded.items() if k in CardParams.model_fields}
    values.update(run_dir=str(run.root), run_name=p.run_name)
    try:
        facts = gather_facts(build(CardParams, values, where=f"the parameters recorded in {run.manifest}"))
        if _written_already(facts, card := build_card(facts)):
            print(f"The dataset card {run.relative(run.card)} already says what the run holds.")  # (none written)
        else:
            write_card(facts, refreshed=True, card=card)
            print(f"The dataset card {run.relative(run.card)} was written again with what the run holds now.")
        return run.card
    except ReproError as exc:  # (03_card's input moved away since): the notebook's own work stands
        then = "" if "notebooks/03_card.ipynb" in str(exc) else " Run notebooks/03_card.ipynb to bring it up to date."
        print(f"The card {run.relative(run.card)} was not written again: {exc}{then}")
        return None
    finally:
        run.release(kernel=True)  # a notebook on its own has ended: the folder its card claimed is given back


def check_card(card_path: str | Path) -> dict[str, Any]:
    """Load the card with huggingface_hub and the data with datasets (through the card's configs); compare."""
    card_path = Path(card_path)
    card = DatasetCard.load(card_path)
    info = DatasetInfosDict.from_dataset_card_data(card.data)[CONFIG_NAME]
    configs = MetadataConfigs.from_dataset_card_data(card.data)
    report: dict[str, Any] = {"card": str(card_path), "configs": dict(configs), "splits": {}}
    # as a Hub user loads it; in a folder whose path datasets reads as a pattern (run[1]), the configs' files escaped
    folder = glob.escape(str(card_path.parent))
    files = {f["split"]: f"{folder}/{f['path']}" for f in configs[CONFIG_NAME]["data_files"]} \
        if folder != str(card_path.parent) else None
    with tempfile.TemporaryDirectory() as cache:  # a check: no Arrow copy kept (02_analyze's is sources')
        for split in info.splits.values():
            ds = datasets.load_dataset(str(card_path.parent), split=split.name, data_files=files, cache_dir=cache)
            if ds.features != info.features or len(ds) != split.num_examples:
                raise DataError(
                    f"{card_path} says split {split.name!r} has {split.num_examples} rows with features "
                    f"{info.features}, but load_dataset gives {len(ds)} rows with {ds.features}; re-run this notebook.")
            report["splits"][split.name] = {"num_examples": len(ds), "num_bytes": split.num_bytes}
    leftovers = {f.name: found for f in sorted(TEMPLATES.iterdir()) if (found := placeholders(template_text(f)))}
    report.update(features=list(info.features), placeholders=[p for found in leftovers.values() for p in found])
    if leftovers:
        raise DataError(f"{card_path} was written from templates that hold unfinished text {report['placeholders']} "
                        f"({', '.join(leftovers)} in {TEMPLATES}); this is a bug in repro.card.")
    return report


def placeholders(text: str) -> list[str]:
    """Template leftovers in `text` (unfilled braces, TODO, "More Information needed", ...), each once."""
    return list(dict.fromkeys(m[0] for m in PLACEHOLDER_RE.finditer(text)))


def template_text(path: Path) -> str:
    """A template's literal text and strings (all citations.bib), not its data: a `mastodon_url` column is no TODO."""
    text = path.read_text(encoding="utf-8")
    return text if path.suffix != ".jinja" else "\n".join(
        value for _, kind, value in jinja2.Environment().lex(text) if kind in ("data", "string"))


def preview_markdown(card_path: str | Path) -> str:
    """The card body, figure links relative to the notebook shown (executed 03_card under `repro run`, else the cwd)."""
    card_path = Path(card_path).resolve()
    run = RunDir(card_path.parent.parent)
    entry = (Manifest(run).read().get("notebooks") or {}).get("03_card") or {}
    folder = (run.root / entry["executed"]).parent if entry.get("status") == "running" and entry.get("executed") \
        else Path.cwd()

    def relink(match: re.Match) -> str:
        png = card_path.parent / match["src"]
        if not png.is_file():
            return match[0]
        return f"![{match['alt']}]({Path(os.path.relpath(png, folder.resolve())).as_posix()})"

    return FIGURE_LINK_RE.sub(relink, DatasetCard.load(card_path).text)


def preview(card_path: str | Path):
    """The card's body as rendered Markdown with its figures shown (the card file keeps its hub-relative links)."""
    from IPython.display import Markdown  # (IPython off 03_card's path and `repro run`'s: a notebook's preview only)

    return Markdown(preview_markdown(card_path))


class PublishError(ReproError):
    """The dataset folder could not be published (offline, no token, or the hub refused it)."""


def publish(params: "CardParams") -> str | None:
    """Upload the run's dataset folder to `hub_repo_id` when `push_to_hub` is true; returns the URL."""
    run = RunDir(params.run_root)
    if not params.push_to_hub:
        if run.manifest.is_file():  # an earlier upload's record is not this run's
            with Manifest(run).edit() as data:
                (data.get("stages") or {}).pop("publish", None)
        print(f"push_to_hub is false: nothing uploaded. {run.dataset} is ready to publish as it stands.")
        return None
    if not run.card.exists():
        raise PublishError(f"{run.card} does not exist: write the card (repro.card.write_card) before publishing.")
    manifest = Manifest(run)  # the upload is 03_card's work: a failed one fails the run's record too
    with manifest.notebook(params.model_dump(), "03_card"), manifest.stage("publish", resumable=False) as info:
        if why := publish_blocker():
            raise PublishError(f"push_to_hub is true but {why}, or set push_to_hub: false. Nothing was uploaded.")
        api = huggingface_hub.HfApi(token=huggingface_hub.get_token())
        try:
            user = api.whoami()  # checks token and network before anything is created or uploaded
        except Exception as exc:  # the hub raises many types (HTTP, connection, offline); the user needs one message
            raise PublishError(f"The Hugging Face hub did not accept the token or could not be reached "
                               f"({type(exc).__name__}: {str(exc)[:300]}); nothing was uploaded.") from None
        repo = api.create_repo(params.hub_repo_id, repo_type="dataset", exist_ok=True)
        api.upload_folder(folder_path=str(run.dataset), repo_id=params.hub_repo_id, repo_type="dataset",
                          allow_patterns=[run.card.name, f"{DATA_DIR}/*.parquet", f"{FIGURES_DIR}/*.png"],
                          # an earlier push's shards of these splits, as datasets' push_to_hub deletes them
                          delete_patterns=[f"{DATA_DIR}/{split}-*.parquet" for split in split_files(run.dataset)],
                          commit_message=f"Upload dataset and card from repro run {run.root.name}")
        url = str(getattr(repo, "url", f"https://huggingface.co/datasets/{params.hub_repo_id}"))
        info.update(repo_id=params.hub_repo_id, url=url)
    print(f"Published to {url} as {user.get('name', 'unknown user')}.")
    return url
