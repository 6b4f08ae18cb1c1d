"""Every notebook's parameters: a flat schema per section, YAML with `--set` and `include:`, unknown names refused."""

from __future__ import annotations

import ast
import datetime
import html
import inspect
import json
import re
import shlex
import sys
from pathlib import Path
from typing import Annotated, Any, ClassVar, Collection, Iterable, Literal, Mapping

import yaml
from huggingface_hub.errors import HFValidationError
from huggingface_hub.utils import validate_repo_id
from pydantic import (AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, TypeAdapter, ValidationError,
                      field_validator, model_validator)
from typing_extensions import TypedDict  # (pydantic takes typing's only from Python 3.12)

from .errors import ParameterError, Refused, ReproError, counted, did_you_mean
from .paths import (DEMO, SPLIT, SPLIT_NAME, RunDir, cache_root, dataset_run_name, find_params, project_root,
                    resolve_user_path, row_cache_dir, run_dir_of, run_manifest_of, utf8_text)


# PairRM's token limits as llm-blender/PairRM ships them (RankerConfig), prompt and candidate: the one place naming them
PAIRRM_LIMITS = {"source_maxlength": 1224, "candidate_maxlength": 412}


def _not_a_bool(value: Any) -> Any:
    if isinstance(value, bool):  # YAML reads yes, no, on and off as booleans; pydantic would take them as 1 and 0
        raise ValueError("must be a number, not true or false (YAML reads yes, no, on and off as those)")
    return value


# ranges checked by pydantic where the value enters; `build` words them as "must be >= 1"
Integer = Annotated[int, BeforeValidator(_not_a_bool)]  # `limit: yes` was a run of one row
Count = Annotated[Integer, Field(ge=1)]
Index = Annotated[Integer, Field(ge=0)]
NonNegative = Annotated[float, BeforeValidator(_not_a_bool), Field(ge=0)]
Resamples = Annotated[Integer, Field(ge=100)]  # fewer and a 95% interval means nothing
# the percentile bootstrap of 02_analyze's, 04_compare's and 05_family's intervals: how many resamples, their seed
BootstrapResamples = Annotated[Resamples, Field(default=1000)]
BootstrapSeed = Annotated[Integer, Field(default=0)]
TokenLimit = Annotated[Integer, Field(ge=3)]  # [CLS], the prefix token and [SEP]
# the path rule (repro.paths): a relative path means the project root, wherever the notebook's kernel runs
UserPath = Annotated[str, AfterValidator(resolve_user_path)]  # a path, or "demo", "builtin:*", a hub id
LocalPath = Annotated[str, AfterValidator(lambda v: resolve_user_path(v, may_be_id=False))]
# a dataset left blank (papermill's -p dataset "", a field cleared) is not given, as null (02-04: this run's own)
Blank = BeforeValidator(lambda v: None if isinstance(v, str) and not v.strip() else v)  # ("", "  ": unset)
DatasetPath = Annotated[UserPath | None, Blank]
# the built-in random stand-ins (repro.scorers builds them offline; what they output is noise): name -> what is built
BUILTIN_SCORERS = {"builtin:tiny-pairrm": "pairrm", "builtin:tiny-reward-llama": "llama",
                   "builtin:tiny-reward-deberta": "deberta"}
BUILTIN_POLICIES = {"builtin:tiny-policy": "tiny", "builtin:tiny-policy-1b": "1b"}
# Bump when what a stand-in builder (repro.scorers.tiny, tiny_policy) writes changes, so cached copies are rebuilt.
STAND_IN_VERSION = 1


def builtin_folder(spec: str) -> Path:
    """Where the built-in stand-in `spec` is built once ($REPRO_CACHE, else ~/.cache/repro), and, built, only read."""
    return cache_root() / f"{spec.removeprefix('builtin:')}-v{STAND_IN_VERSION}"


def _builtin_among(names: Collection[str]) -> AfterValidator:
    """A model parameter's check: a `builtin:` name is one of `names` (a misspelt one fails here, before any work)."""
    def check(value: str | None) -> str | None:
        if value and value.startswith("builtin:") and value not in names:
            raise ValueError(f"not a built-in stand-in.{did_you_mean(value, names)} The built-ins are "
                             f"{', '.join(names)}")
        return value
    return AfterValidator(check)


ScorerPath = Annotated[UserPath, _builtin_among(BUILTIN_SCORERS)]
PolicyPath = Annotated[UserPath, _builtin_among(BUILTIN_POLICIES)]


def _device(value: str) -> str:
    name = value.strip().lower()
    if not re.fullmatch(r"auto|cpu|mps|cuda(:\d+)?", name):
        raise ValueError("must be one of auto, cpu, cuda, cuda:N or mps")
    return name


Device = Annotated[str, AfterValidator(_device)]  # (repro.scorers.common.resolve_device reads it so, then the GPU)
# a precision: repro's names, or torch's (float16, torch.float16, half, ...) read as them
DTYPE_ALIASES = {"float32": "fp32", "float": "fp32", "float16": "fp16", "half": "fp16", "bfloat16": "bf16"}
Dtype = Annotated[Literal["auto", "fp32", "fp16", "bf16"], BeforeValidator(
    lambda v: DTYPE_ALIASES.get(n := v.strip().lower().removeprefix("torch."), n) if isinstance(v, str) else v)]


def _folder_name(name: str) -> str:
    if name in ("", ".", "..") or "/" in name or "\\" in name:
        raise ValueError("must be one folder's name (the run goes to runs/<run_name>): not empty, no / or \\, not . "
                         "or ..; a path goes in run_dir")
    return name


RunName = Annotated[str, AfterValidator(_folder_name)]


def _split_name(name: str) -> str:
    if not re.fullmatch(SPLIT_NAME, name):
        example = "_".join(re.findall(r"[^\W_]+", name)) or SPLIT  # (its words: train-prefs, train_prefs)
        raise ValueError(f"must be a split name datasets accepts (^{SPLIT_NAME}$: letters, digits and _, parts joined "
                         f"by '.'), e.g. {example!r}")
    if name.lower() == "all":  # (datasets' builder refuses a split so named, after the run)
        raise ValueError(f"must not be {name!r}, datasets' word for all splits together: name the split e.g. {SPLIT!r}")
    return name


SplitName = Annotated[str, AfterValidator(_split_name)]  # a split a run writes: data/<split>-*.parquet


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)
    section: ClassVar[str] = ""
    subject: ClassVar[str | None] = None  # the parameter naming the dataset this notebook describes, if any

    run_name: RunName = "demo"
    # default: runs/<run_name>, or the run of the dataset given (of no run: runs/<its name>)
    run_dir: LocalPath | None = None

    @property
    def run_root(self) -> Path:
        """run_dir; else the run of the dataset described (one of no run: a run of its own), else runs/<run_name>."""
        if self.run_dir:
            return Path(self.run_dir)
        return run_dir_of(getattr(self, self.subject) if self.subject else None, self.run_name)

    @field_validator("run_dir")
    @classmethod
    def _a_run_not_a_folder_in_it(cls, value: str | None) -> str | None:
        path = Path(value or ".")  # the folders JupyterLab's file browser shows inside a run
        if value and (run := next((r for r in map(RunDir, path.parents[:2])
                                   if path in r.folders() and r.manifest.is_file()), None)) is not None:
            raise ValueError(f"is the {run.relative(path)}/ folder of the run {run.root}, not a run directory: give "
                             f"run_dir {run.root}")
        return value

    @model_validator(mode="after")
    def _named_as_its_folder(self):
        """Without run_dir, a notebook on a dataset writes its run, named as it; a run's own dataset (the run,
        dataset/, dataset/data/, a file) is recorded as its own: None (unassigned: that validates again)."""
        given = getattr(self, self.subject) if self.subject else None
        manifest = run_manifest_of(given) if given is not None and Path(given).is_absolute() else None
        if manifest is not None and (not self.run_dir or Path(self.run_dir).resolve() == manifest.parent.resolve()):
            run = manifest.parent
            self.__dict__.update({self.subject: None, "run_dir": str(run), "run_name": run.name})
        elif not self.run_dir and given is not None:
            self.__dict__["run_name"] = self.run_root.name
        return self

    def _repr_markdown_(self) -> str:
        """A notebook's `p` cell: the run directory, then each value, with its default where it differs."""
        notebook = next(nb for nb, sections in NOTEBOOK_SECTIONS.items() if self.section in sections)
        rows = []
        for name, field in type(self).model_fields.items():
            value, default = getattr(self, name), field.get_default(call_default_factory=True)
            note = "" if value == default else f" (default {table_cell(code_span(repr(default)))})"
            if name not in _Params.model_fields:
                rows.append(f"| `{name}` | {table_cell(code_span(repr(value)))}{note} |")
        return (f"**Parameters** of {notebook}, run directory {code_span(self.run_root)}:\n\n| parameter | value |\n"
                "|---|---|\n" + "\n".join(rows))


def table_cell(text: Any) -> str:
    """Text in a Markdown table's cell: a | escaped, line breaks as spaces."""
    return str(text).replace("|", "\\|").replace("\n", " ")


LINE_BREAK_RE = re.compile(r"\r\n?|\n")  # (CommonMark's line endings)
CODE_SPAN_RE = re.compile(r"(?<![`\\])(`+)(?!`).*?(?<!`)\1(?!`)")  # (a run of backticks to one as long; \` opens none)
EMPHASIS_RE = re.compile(r"\*|_+")  # (what may open or close emphasis: `_escaped_emphasis` says which)
# a backslash CommonMark reads as an escape (before ASCII punctuation), or one at the end (which would escape what
# the prose puts after it); by `spans`, as one_line's: one before a backtick is left an escape in text that keeps its
# own code spans (a backtick as text)
BACKSLASH_RE = {spans: re.compile(r"\\(?=[!-/:-@\[-_{-~" + "`" * (not spans) + r"]|\Z)") for spans in (False, True)}
# what `plain_text` reads as text: an escape (its character), an entity, bold's marks
MARKED_RE = re.compile(r"\\([!-/:-@\[-`{-~])|&(#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]*);|\*\*")


def _escaped_emphasis(match: re.Match) -> str:
    """A `*`, or a run of `_` but one inside a word (CommonMark: `mini_1` is no emphasis), backslash-escaped."""
    text, start, end = match.string, match.start(), match.end()
    inside = match[0][0] == "_" and text[start - 1:start].isalnum() and text[end:end + 1].isalnum()
    return match[0] if inside else re.sub(r"[*_]", r"\\\g<0>", match[0])


class Shown(str):
    """Text `one_line` escaped, which keeps what it shows (`raw`): a code span of it shows that."""
    raw: str


def one_line(text: Any, spans: bool = False, markdown: bool = False) -> str:
    """Text from the data, the user or a record in Markdown's prose (the card's, a notebook's): its HTML (<, >, &),
    links and images (`](`), `$` (two enclose math to JupyterLab and the Hub), emphasis (`*`, `_` but inside a word)
    and backticks (which would pair with a code span's after it; `spans`: left to make its own, where no value's span
    follows, and `\\`` a backtick as text) shown as text, its backslashes too (`a\\*b`, `c:\\`), on one line.
    `markdown`: a paragraph of Markdown a record holds (a member's verdict), its bold, entities, escapes and code spans
    kept, its HTML (a `<` that starts a tag), links (`](`, a definition's `]:`) and `$` shown as text."""
    if isinstance(text, Shown):
        return text
    def escaped(part: str) -> str:
        if markdown:  # (a `$` after an escaped backslash, `\\$`, is no escaped one)
            return re.sub(r"<(?=[a-zA-Z/!?])|(?<!\\)((?:\\\\)*)\$", lambda m: "&lt;" if m[0] == "<" else m[1] + "\\$",
                          part).replace("](", "]\\(").replace("]:", "]\\:")
        part = BACKSLASH_RE[spans].sub(r"\\\\", part)  # (before the entities: `\&amp;` would show `&amp;`)
        part = EMPHASIS_RE.sub(_escaped_emphasis, html.escape(part, quote=False))
        part = part.replace("](", "]\\(").replace("$", "\\$")
        return part if spans else part.replace("`", "&#96;")
    raw, pieces, last = str(text), [], 0
    for span in CODE_SPAN_RE.finditer(raw) if spans or markdown else ():  # (its own spans show what they hold as it is)
        pieces += [escaped(raw[last:span.start()]), span[0]]
        last = span.end()
    shown = Shown(LINE_BREAK_RE.sub(" ", "".join(pieces) + escaped(raw[last:])))
    shown.raw = str(text)
    return shown


def plain_text(markdown: str) -> str:
    """A Markdown line as `one_line`, `code_span` and bold write it, as plain text (a table cell, HTML): code spans'
    text, escapes and entities resolved, no `**`."""
    def unescaped(part: str) -> str:
        return MARKED_RE.sub(lambda m: m[1] or ("" if m[0] == "**" else html.unescape(m[0])), part)
    pieces, last = [], 0
    for span in CODE_SPAN_RE.finditer(markdown):  # (its text as it is, less a space each side of a spaced one)
        shown = span[0][len(span[1]):-len(span[1])]
        pieces += [unescaped(markdown[last:span.start()]),
                   shown[1:-1] if shown[:1] == shown[-1:] == " " and shown.strip(" ") else shown]
        last = span.end()
    return "".join(pieces) + unescaped(markdown[last:])


def fence(text: str, least: int = 1) -> str:
    """A code fence of more backticks (at least `least`) than any run of them in `text`, so none of them ends it."""
    return "`" * max(least, max(map(len, re.findall("`+", text)), default=0) + 1)


def code_span(name: Any) -> str:
    """`name` as one-line inline code in a `fence` (spaced if it starts/ends with a backtick): shown as is, HTML too."""
    name = LINE_BREAK_RE.sub(" ", str(getattr(name, "raw", name)))
    space, ticks = " " * (name[:1] == "`" or name[-1:] == "`"), fence(name)
    return f"{ticks}{space}{name}{space}{ticks}"


# 01_construct: the pair selection rules (repro.construct.selection; the random ones need selection_seed) and the
# output formats (repro.exporters: the seed's, and those of the field's published recipes)
SelectionRule = Literal["best_worst", "best_random", "random_pair", "best_second", "best_worst_length_penalised"]
RANDOM_RULES = ("best_random", "random_pair")
# lowest_tie -> the tie rule as the manifest records it, for the card
TIE_RULES = {"last": "chosen = first highest score, rejected = last lowest score",
             "first": "chosen = first highest score, rejected = first lowest score"}
OutputFormat = Literal["seed", "sppo", "snorkel", "rlhflow", "selm"]
ScorerKind = Literal["auto", "pairrm", "sequence_classifier"]  # auto: read from the checkpoint (repro.scorers)
ScorerBackend = Literal["repro", "llm-blender"]  # PairRM's: the engine, or llm-blender's own code
ALL_CANDIDATE_FORMATS = ("sppo", "snorkel", "rlhflow")  # those that publish every candidate and its score


TO_FILL = "FILL_IN"  # the card's rebuild file holds it where the reader puts the chat template it names by its hash


def _filled(template: str) -> str:
    if template.strip() == TO_FILL:
        raise ValueError(f"is still {TO_FILL}, as the card's rebuild file gives it: put the chat template the scorer "
                         "was given there (the card's comment beside it gives its sha256)")
    return template


class ScorerOptions(TypedDict, total=False):
    """A scorer's load options, typed where they enter (load_scorer says which apply to its kind)."""

    __pydantic_config__ = ConfigDict(extra="forbid")  # type: ignore[misc]
    chat_template: Annotated[str, AfterValidator(_filled)]  # sequence classifiers: a Jinja template over `messages`
    trust_remote_code: bool
    output_index: Index  # which output of a multi-output reward model is the reward
    max_length: Count  # tokens per conversation
    source_maxlength: TokenLimit  # PairRM's limits (default: the run's)
    candidate_maxlength: TokenLimit
    fast_attention: bool  # PairRM's engine: false for transformers' attention (slower)
    batch_size: Count  # backend llm-blender: Blender.rank's
    restore_normalizer: bool


class ScorerSpec(BaseModel):
    """One more scorer of a run (an item of `scorers:`): its scores go to the column `candidate_scores_<name>`."""

    model_config = ConfigDict(extra="forbid")

    name: Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]{0,39}$")]  # the column and work/scoring/<name>/
    model: ScorerPath  # hub id, local dir, or a built-in stand-in (builtin:tiny-pairrm, builtin:tiny-reward-llama, ...)
    kind: ScorerKind = "auto"
    options: ScorerOptions = {}
    backend: ScorerBackend = "repro"
    dtype: Dtype = "auto"
    batch_tokens: Count | None = None  # default: the run's batch_tokens (kept last, in the order cards show)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if v == "primary":
            raise ValueError("must be another name, not 'primary' (the run's own scorer's)")
        return v


class ConstructParams(_Params):
    """Parameters of notebooks/01_construct.ipynb."""

    section: ClassVar[str] = "construct"

    source: Annotated[UserPath, Field(min_length=1)] = "demo"  # "demo", a hub dataset id, or a local file or folder
    source_split: str = SPLIT
    source_revision: str | None = None  # a hub dataset's commit (or tag/branch), passed to every load; recorded
    # slicing: index part [part_start:part_stop] -> drop `drop_rows` -> mini `mini_index` of `mini_count`
    part_start: Index = 0
    part_stop: Integer | None = None
    drop_rows: Index = 0
    drop_from: Literal["end", "start"] = "end"  # or 'start': where drop_rows are taken from
    mini_index: Index = 0
    mini_count: Count = 1
    limit: Count | None = None  # keep only the first N rows of the mini (quick tries)
    candidate_columns: list[str] = ["resp0", "resp1"]  # the source's response columns ranked
    include_reference: bool = False  # also rank `reference_response`
    include_original_pair: bool = False  # also rank the source's chosen/rejected assistant texts
    # first_scored_only: first, ranked but never paired nor listed (SPPO's published 7 rm_scores for 5 generate_i)
    original_pair_position: Literal["last", "first", "first_scored_only"] = "last"
    # rows with < 2 distinct texts (surrounding whitespace aside); keep: 2 or more of one text are a pair, chosen =
    # rejected, as SPPO's compute_prob.py keeps them (best_worst rules only)
    too_few_candidates: Literal["drop", "error", "keep"] = "drop"
    # an empty/whitespace text: "drop": not a candidate; "rank": ranked like any text (SPPO, SELM, RLHFlow)
    empty_candidates: Literal["error", "drop", "rank"] = "error"
    duplicate_prompt_ids: Literal["error", "keep_first"] = "error"  # or 'keep_first'
    # a hub id, a local folder, or "builtin:tiny-pairrm" (a stand-in)
    scorer_model: Annotated[ScorerPath, Field(min_length=1)] = "llm-blender/PairRM"
    scorer_backend: ScorerBackend = "repro"  # PairRM's: repro's engine, or 'llm-blender' (its own code)
    device: Device = "auto"  # auto, cpu, cuda, cuda:N or mps
    dtype: Dtype = "auto"  # auto: fp16 on CUDA (as llm-blender), fp32 on CPU
    batch_tokens: Count | None = None  # token budget per forward batch; None: 16384 on a GPU, 2048 on a CPU
    chunk_size: Count = 256  # prompts per resumable chunk
    num_processes: Count = 1  # >1: torchrun workers on this node
    source_maxlength: TokenLimit | None = None  # None: the checkpoint's own (llm-blender's RankerConfig), else 1224
    candidate_maxlength: TokenLimit | None = None  # likewise, else 412
    scorer_kind: ScorerKind = "auto"  # auto: read from the checkpoint; or 'pairrm', 'sequence_classifier'
    scorer_options: ScorerOptions = {}  # load options, by kind: repro.parameters.ScorerOptions lists them
    scorers: list[ScorerSpec] = []  # more scorers, scores in candidate_scores_<name>; scorer_model decides the pairs
    scorer_revision: str | None = None  # the scorer's hub commit, passed to its load; recorded
    # chat_template: SPPO's rank.py, apply_chat_template([user: prompt, assistant: "None"]).split("None")[0]
    scorer_prompt: Literal["raw", "chat_template"] = "raw"
    # hub id or folder of the tokenizer whose template is used; policy_model's hub id is read at policy_revision
    scorer_prompt_tokenizer: PolicyPath | None = None
    selection: SelectionRule = "best_worst"  # which two scored candidates become chosen / rejected
    selection_seed: Integer | None = None  # needed by best_random / random_pair (the draw depends on it and prompt_id)
    length_penalty: NonNegative = 0.0  # best_worst_length_penalised: score - length_penalty * characters
    min_margin: NonNegative = 0.0  # pairs with score_chosen - score_rejected below it are left out
    ties: Literal["keep", "drop"] = "keep"  # equal scores: keep the pair (seed), or leave the row out (RLHFlow)
    # candidates tied for the lowest score: rejected is the last (seed) or the first (np.argmin: SPPO, RLHFlow, SELM)
    lowest_tie: Literal["last", "first"] = "last"
    # 'source': the source's `messages` column as it is; 'chosen': the chosen conversation
    messages: Literal["chosen", "source"] = "chosen"
    keep_all_candidates: bool = False  # extra columns `candidates`, `candidate_scores`
    output_format: OutputFormat = "seed"  # the columns and split names of: seed | sppo | snorkel | rlhflow | selm
    output_split: SplitName | None = None  # default: the format's own split name (with `iteration`)
    iteration: Count = 1  # the round of an iterative recipe: split names, the manifest's lineage
    # a source split built as a test split; the source_split itself: a sample of the train rows
    test_split: str | None = None
    test_rows: Count | None = None  # the first N test rows (a seeded sample with test_seed); null: all; capped by limit
    test_seed: Integer | None = None  # draw the test rows at random with this seed instead of taking the first ones
    generate: bool = False  # generate the candidates (and optionally the reference) with policy_model first
    cache: bool = True  # the row cache (repro.cache): rows generated or scored before are reused; false: all made here
    cache_dir: LocalPath | None = None  # None: $REPRO_ROW_CACHE, else $REPRO_CACHE, else cache/ in the project root

    @property
    def row_cache(self) -> Path | None:
        """The row cache folder this run uses, or None with `cache: false`."""
        return row_cache_dir(self.cache_dir) if self.cache else None

    def templated_twice(self, kinds: Iterable[str | None]) -> str | None:
        """With scorer_prompt: chat_template, the refusal naming the sequence classifiers among the scorers (`kinds`:
        scorer_model's, then each `scorers` entry's; None: not known), which template it twice; else None."""
        if self.scorer_prompt != "chat_template":
            return None
        whose = [f"scorer_model {self.scorer_model!r}",
                 *(f"scorers entry {s.name!r} ({s.model!r})" for s in self.scorers)]
        if not (twice := [who for who, kind in zip(whose, kinds) if kind == "sequence_classifier"]):
            return None
        return (f"scorer_prompt is 'chat_template', but {' and '.join(twice)} "
                f"{'is a sequence classifier' if len(twice) == 1 else 'are sequence classifiers'}, which puts the "
                f"prompt in its own chat template: the user turn would already hold scorer_prompt_tokenizer's chat "
                f"template, templated twice. Set scorer_prompt: raw (a sequence classifier applies its own chat "
                f"template; chat_template is SPPO's prompt for PairRM)")

    @field_validator("candidate_columns")
    @classmethod
    def _columns(cls, v: list[str]) -> list[str]:
        if len(set(v)) != len(v):
            raise ValueError(f"names {sorted({c for c in v if v.count(c) > 1})} more than once")
        return v

    @model_validator(mode="after")
    def _check(self):
        if self.mini_index >= self.mini_count:
            raise ValueError(f"mini_index={self.mini_index} must be < mini_count={self.mini_count} (minis count "
                             f"from 0)")
        if self.part_stop is not None and self.part_stop <= self.part_start:
            raise ValueError(f"part_stop={self.part_stop} must be > part_start={self.part_start}")
        if self.scorer_prompt == "chat_template" and not self.scorer_prompt_tokenizer:
            raise ValueError("scorer_prompt is 'chat_template' but scorer_prompt_tokenizer is not set: name the "
                             "tokenizer whose chat template the scorer's prompts go through (SPPO: the policy's, e.g. "
                             "mistralai/Mistral-7B-Instruct-v0.2), or set scorer_prompt: raw")
        if why := self.templated_twice([self.scorer_kind, *(s.kind for s in self.scorers)]):
            raise ValueError(why)
        if self.selection in RANDOM_RULES and self.selection_seed is None:
            raise ValueError(f"selection {self.selection!r} draws candidates at random: set selection_seed (an "
                             f"integer) so that the pairs can be drawn again")
        if self.too_few_candidates == "keep" and self.selection in ("best_second", *RANDOM_RULES):
            raise ValueError(f"too_few_candidates: keep pairs a text with itself, which selection {self.selection!r} "
                             f"never does (it pairs two different texts): use best_worst, or too_few_candidates: drop")
        if self.output_format in ALL_CANDIDATE_FORMATS and not self.keep_all_candidates:
            raise ValueError(f"output_format {self.output_format!r} publishes every candidate and its score: set "
                             f"keep_all_candidates: true")
        if self.test_split is None and (self.test_rows, self.test_seed) != (None, None):
            raise ValueError("test_rows / test_seed are set but test_split is not: name the source split of the test "
                             "prompts (e.g. test_prefs), or remove them")
        if self.test_split not in (None, self.source_split) and (self.source == DEMO or Path(self.source).is_file()):
            raise ValueError(
                f"test_split={self.test_split!r}, but source {self.source!r} is a single file with no splits: its "
                f"test rows would repeat the train rows. Use a folder with data/{self.test_split}-*.parquet beside the "
                f"train split, set test_split: {self.source_split} (a seeded sample of the built rows), or set "
                f"test_split: null and test_rows: null (no test split)")
        if self.test_split == self.source_split and self.test_rows is None:
            raise ValueError(f"test_split {self.test_split!r} is the source split, so the test rows are a sample of "
                             f"the built train rows (SPPO's way): set test_rows (SPPO: 500) and test_seed")
        if self.original_pair_position == "first_scored_only" and not self.include_original_pair:
            raise ValueError("original_pair_position 'first_scored_only' ranks the source's chosen/rejected with the "
                             "candidates: set include_original_pair: true, or another position")
        names = [s.name for s in self.scorers]
        if len(set(names)) != len(names):
            raise ValueError(f"scorers: every name must be different, got {names}")
        if self.scorers and not self.keep_all_candidates:
            raise ValueError(f"scorers ({', '.join(names)}) keep their scores in candidate_scores_<name> columns "
                             f"beside `candidates`: set keep_all_candidates: true")
        pair = (self.source_maxlength or PAIRRM_LIMITS["source_maxlength"]) + \
            2 * (self.candidate_maxlength or PAIRRM_LIMITS["candidate_maxlength"])
        if self.batch_tokens is not None and self.batch_tokens < pair:
            raise ValueError(f"batch_tokens={self.batch_tokens} cannot hold one pair of maximal length ({pair} "
                             f"tokens): raise it")
        return self


# the scorers' token budget when none is given (a run, `repro score`, `repro bench`, a scorer's `score`): large on a
# GPU; on a CPU a larger batch buys no parallelism, only padding (1.6x slower at 16384: benchmarks/RESULTS.md), and
# 2048 holds one PairRM pass of maximal length (1224 + 2 x 412)
BATCH_TOKENS = {"cuda": 16384, "cpu": 2048}


def default_batch_tokens(device_type: str) -> int:
    """The token budget per forward batch on a device of this type (cuda, cpu, mps: as a CPU)."""
    return BATCH_TOKENS["cuda" if device_type == "cuda" else "cpu"]


class GenerationParams(_Params):
    """Parameters of the generation stage (used by 01_construct when `generate` is true)."""

    section: ClassVar[str] = "generation"

    policy_model: PolicyPath | None = None  # hub id or local dir of a causal LM; "builtin:tiny-policy": noise stand-in
    policy_revision: str | None = None  # the policy's hub commit, passed to every load; recorded
    generation_backend: Literal["transformers", "vllm"] = "transformers"  # or 'vllm'
    generate_reference: bool = True  # greedy `reference_response` (temperature 0)
    reference_max_new_tokens: Count = 1024
    n_candidates: Index = 2  # columns resp0 .. resp{n-1}
    temperature: NonNegative = 0.7  # 0: greedy
    top_p: Annotated[float, BeforeValidator(_not_a_bool), Field(gt=0, le=1)] = 1.0
    max_new_tokens: Count = 1024
    generation_seed: Integer = 0
    # a seed per candidate (SPPO: 0, 50, ..., 200): vLLM samples candidate k of every prompt with candidate_seeds[k];
    # Transformers draws it as the first candidate of a run with generation_seed = candidate_seeds[k]
    candidate_seeds: list[Integer] | None = None
    # vLLM: per_prompt asks for a prompt's n_candidates samples in ONE request seeded with generation_seed (RLHFlow's
    # gen_hf.py: n=8, seed 42); Transformers samples as ever
    vllm_requests: Literal["per_candidate", "per_prompt"] = "per_candidate"
    use_chat_template: bool = True  # false: the prompt text is fed as it is (models without a template)
    strip_responses: bool = True  # false: each text as decoded, its leading space kept (SPPO's, RLHFlow's code)
    max_prompt_tokens: Count | None = None  # default: the model's context minus the longest max_new_tokens
    long_prompts: Literal["truncate_left", "skip"] = "truncate_left"  # skip: such rows are left out and counted
    generation_batch_size: Count = 16  # sequences per transformers `generate` call
    generation_chunk_size: Count = 64  # prompts per resumable chunk (vLLM: make it large, e.g. 2048)
    generation_device: Device = "auto"  # auto: cuda:LOCAL_RANK if a GPU is there, else cpu
    generation_dtype: Dtype = "auto"  # auto: bf16 on CUDA, fp32 on CPU
    generation_num_processes: Count = 1  # > 1: torchrun workers on this node (one per GPU), same output as 1

    @model_validator(mode="after")
    def _check_sampling(self):
        if self.candidate_seeds is not None and len(self.candidate_seeds) != self.n_candidates:
            raise ValueError(f"candidate_seeds has {counted(len(self.candidate_seeds), 'seed')} but n_candidates is "
                             f"{self.n_candidates}: give one seed per candidate, or null")
        if self.vllm_requests == "per_prompt" and self.candidate_seeds is not None:
            raise ValueError("vllm_requests: per_prompt seeds each prompt's request with generation_seed, and "
                             "candidate_seeds seeds each candidate: set one of them")
        return self


# the facts of a dataset's making that a card can state (known_recipe's keys), in the card's order
RECIPE_FACTS = ("source", "slice", "dropped", "candidates", "scorer", "precision", "selection", "tie_rule")


def _recipe_keys(v: Any) -> Any:
    unknown = sorted(set(v) - set(RECIPE_FACTS)) if isinstance(v, dict) else []
    if unknown:
        raise ValueError(f"unknown fact{'s' * (len(unknown) > 1)} {', '.join(map(repr, unknown))}."
                         f"{did_you_mean(unknown[0], RECIPE_FACTS)}"
                         f" known_recipe takes {list(RECIPE_FACTS)}")
    return v


KnownRecipe = Annotated[str | dict[str, str] | None, AfterValidator(_recipe_keys)]  # what is told of a making


class AnalyzeParams(_Params):
    """Parameters of notebooks/02_analyze.ipynb."""

    section: ClassVar[str] = "analyze"
    subject: ClassVar[str | None] = "dataset"

    # None: this run's dataset; or a run dir, a .jsonl/.parquet file, a saved dataset, a hub id
    dataset: DatasetPath = None
    # the split read from `dataset`; with dataset None: the split 01_construct wrote, or another split of the run
    # named here
    dataset_split: str = SPLIT
    bootstrap_resamples: BootstrapResamples  # for mean_ci95 / median_ci95
    bootstrap_seed: BootstrapSeed
    # True: rows with NaN/inf/missing scores are left out and counted in n_excluded; False: they are an error
    exclude_nonfinite: bool = False
    # for a dataset not built here, as 03_card takes it: its scorer says whose scores these are (the scale)
    known_recipe: KnownRecipe = None


class CardParams(_Params):
    """Parameters of notebooks/03_card.ipynb."""

    section: ClassVar[str] = "card"
    subject: ClassVar[str | None] = "card_dataset"

    # None: this run's dataset; else a dataset NOT built here (hub id, local folder or file)
    card_dataset: DatasetPath = None
    card_split: SplitName = SPLIT  # the split read from card_dataset (and written as this run's)
    pretty_name: str | None = None
    hub_repo_id: str | None = None  # owner/name where the dataset is (or will be) published
    # None: mit if built here from demo or UltraFeedback's hub rows (card.facts.ULTRAFEEDBACK), no policy's outputs
    license: str | None = None
    # None: ["en"] for a dataset built here; not stated for one that was not (the card is in English and Chinese)
    language: Annotated[list[str], BeforeValidator(lambda v: [v] if isinstance(v, str) else v)] | None = None
    # for card_dataset: text, or {source, slice, dropped, candidates, scorer, precision, selection, tie_rule}
    known_recipe: KnownRecipe = None
    push_to_hub: bool = False

    @field_validator("hub_repo_id")
    @classmethod
    def _a_repository_id(cls, v: str | None) -> str | None:
        if v is not None and "/" not in v:  # (the hub takes a name alone: the uploader's own repository)
            raise ValueError(f"names no owner: give owner/name (your hub user or organisation, e.g. your-name/{v}): "
                             f"the card's load_dataset and the upload need it")
        try:  # the hub's own rule, checked offline, before the card names it and an upload tries it
            return v if v is None else validate_repo_id(v) or v
        except HFValidationError:
            raise ValueError("not a hub repository id: give owner/name (letters, digits, -, _ and ., neither "
                             "starting nor ending with - or ., no -- or .., at most 96 characters)") from None

    @field_validator("license")
    @classmethod
    def _as_the_hub_writes_it(cls, v: str | None) -> str | None:
        if v is not None and v != v.lower():  # every identifier of the Hub's licence list is lower case
            raise ValueError(f"the Hub's licence identifiers are lower case: did you mean {v.lower()!r}? (the list: "
                             f"https://huggingface.co/docs/hub/repositories-licenses)")
        return v

    @model_validator(mode="after")
    def _publish_needs_repo(self):
        if self.push_to_hub and not self.hub_repo_id:
            raise ValueError("push_to_hub is true but hub_repo_id is not set: name the repository (owner/name)")
        return self


class CompareParams(_Params):
    """Parameters of notebooks/04_compare.ipynb."""

    section: ClassVar[str] = "compare"
    subject: ClassVar[str | None] = "candidate"

    # the published dataset: a hub id, a local file or folder, a run directory; or a list (several minis of a family)
    reference: Annotated[str | list[str] | None, Blank] = None
    reference_split: str = SPLIT
    candidate: DatasetPath = None  # None: this run's dataset
    candidate_split: str = SPLIT
    # the dataset both were sliced from (enables slice inference); not `source`, which names 01_construct's input
    compare_source: DatasetPath = None
    compare_source_split: str = SPLIT
    # fraction of same-text scores within each |difference|
    score_tolerances: Annotated[list[NonNegative], Field(min_length=1)] = [1e-6, 1e-3, 1e-2, 0.1]
    disagreement_tolerance: NonNegative = 1e-3  # a score of the same text further apart than this is a disagreement
    near_tie: NonNegative = 0.05  # |margin| below this is a near-tie (a small score change flips the pair)
    max_mini_count: Count = 8  # slice inference tries 1..max_mini_count minis
    bootstrap_resamples: BootstrapResamples  # rows resampled, for the intervals
    bootstrap_seed: BootstrapSeed

    @field_validator("reference")
    @classmethod
    def _references(cls, v):
        if v == []:
            raise ValueError("is an empty list: name at least one dataset")
        return [resolve_user_path(r) for r in v] if isinstance(v, list) else resolve_user_path(v)


class FamilyViewParams(_Params):
    """Parameters of notebooks/05_family.ipynb: run_dir is the family's folder (runs/<family>/), holding its members."""

    section: ClassVar[str] = "family_view"

    # run_dir: the family's folder, the --out of its `repro run`: set it, e.g. 'runs/demo_family' (the default,
    # runs/<run_name>, is runs/demo: the demo's run, not a family)
    run_dir: LocalPath | None = None
    bootstrap_resamples: BootstrapResamples  # percentile-bootstrap resamples for each member's mean margin interval
    bootstrap_seed: BootstrapSeed


SCHEMAS: dict[str, type[_Params]] = {schema.section: schema for schema in (
    ConstructParams, GenerationParams, AnalyzeParams, CardParams, CompareParams, FamilyViewParams)}
# which parameter sections each notebook reads (the rest of a params file is not passed to it)
NOTEBOOK_SECTIONS = {"01_construct": ("construct", "generation"), "02_analyze": ("analyze",), "03_card": ("card",),
                     "04_compare": ("compare",), "05_family": ("family_view",)}
# keys only `repro run` reads (a `repro selfcheck` report, a grid of runs, params files this one overrides)
RUN_KEYS = {"notebooks", "selfcheck", "family", "include"}
DEFAULT_NOTEBOOKS = ["01_construct", "02_analyze", "03_card"]
FAMILY_NOTEBOOK = "05_family"  # a family's folder runs only this one (its members hold the runs)


# the parameters a blank sets as null (`Blank`): a run that recorded one blank has them null
BLANK_FIELDS = {name for schema in SCHEMAS.values() for name, field in schema.model_fields.items()
                if Blank in field.metadata}


def notebook_fields(*notebooks: str) -> set[str]:
    """The parameter names the named notebooks read (one not in NOTEBOOK_SECTIONS: every section's)."""
    sections = [s for nb in notebooks for s in NOTEBOOK_SECTIONS.get(Path(nb).stem, SCHEMAS)]
    return set().union(*(SCHEMAS[s].model_fields for s in sections))


def unused_generation(*parameters: Mapping[str, Any]) -> set[str]:
    """Generation's parameters where none of `parameters` generates (they shape nothing then), else none."""
    return set() if any(p.get("generate") for p in parameters) else set(GenerationParams.model_fields)


# the parameters that act only where another has one of some values (beside generation's: where generate is true)
ACTS_ONLY_WITH = {"length_penalty": ("selection", ("best_worst_length_penalised",)),
                  "selection_seed": ("selection", RANDOM_RULES),
                  "scorer_prompt_tokenizer": ("scorer_prompt", ("chat_template",)), "cache_dir": ("cache", (True,)),
                  "reference_max_new_tokens": ("generate_reference", (True,)),
                  "vllm_requests": ("generation_backend", ("vllm",))}


def idle_parameters(*runs: Mapping[str, Any]) -> dict[str, str]:
    """{parameter: the value it acts only with} of those idle in every one of `runs` (a run's or members' values)."""
    idle = {key: f"{other}: {' or '.join(json.dumps(v) if isinstance(v, bool) else v for v in values)}"
            for key, (other, values) in ACTS_ONLY_WITH.items() if all(run.get(other) not in values for run in runs)}
    return {**idle, **dict.fromkeys(unused_generation(*runs) - set(_Params.model_fields), "generate: true")}


def differing(a: Mapping[str, Any], b: Mapping[str, Any], keys: Iterable[str]) -> dict[str, tuple[Any, Any]]:
    """{key: (a's, b's)} of `keys` differing where acting (not idle in both: `idle_parameters`); blank is null."""
    def value(run: Mapping[str, Any], key: str) -> Any:
        return Blank.func(run.get(key)) if key in BLANK_FIELDS else run.get(key)
    idle = idle_parameters(a, b)
    return {k: (a.get(k), b.get(k)) for k in sorted(set(keys) - idle.keys()) if value(a, k) != value(b, k)}


def all_fields() -> set[str]:
    """Every parameter name any notebook accepts."""
    return set(RUN_KEYS).union(*(schema.model_fields for schema in SCHEMAS.values()))


def copy_hint(name: str) -> str:
    """How to get a copy of `name` where the project lacks one (a wheel's user has none in their folder), else ""."""
    return "" if (project_root() / name).exists() else "; `repro notebooks DIR` copies it into DIR"


def _refuse_unknown(given: Mapping[str, str]) -> None:
    """Refuse every key no notebook accepts at once (`given`: key -> where), each with the nearest known name."""
    known = all_fields()
    if unknown := [f"Unknown parameter '{key}' in {where}.{did_you_mean(key, sorted(known))}"
                   for key, where in given.items() if key not in known]:
        raise ParameterError(f"{' '.join(unknown)} Known parameters are the fields of repro.parameters' schemas, each "
                             f"with its default in its notebook's parameters cell (notebooks/"
                             f"{copy_hint('notebooks')}); remove or rename {'them' if unknown[1:] else 'it'}.")


RANGE_WORDS = {"greater_than_equal": "must be >= {ge}", "greater_than": "must be > {gt}",
               "less_than_equal": "must be <= {le}", "too_short": "must hold at least {items}",
               "string_pattern_mismatch": "must match {pattern} (lower-case letters, digits and _)",
               "string_too_short": "must not be empty", "extra_forbidden": "unknown name: check its spelling"}
SET_ADVICE = "\nFix the value in the params file or with --set KEY=VALUE."


def build(schema: type[_Params], values: dict[str, Any], where: str = "the parameters",
          set_keys: Mapping[str, str] = {}, advice: str = SET_ADVICE,
          quote: str = 'YAML reads it as {what}; quote it in the file ({key}: "...", as you wrote it)',
          origins: Mapping[str, str] = {}) -> _Params:
    """Validate and cast `values` (other notebooks' keys ignored, unknown ones refused); `set_keys`: --set's, each with
    its value as typed; `quote`: how to give text read as a number; `origins`: where other keys were given."""
    _refuse_unknown(dict.fromkeys(values, where))
    try:
        return schema(**{k: v for k, v in values.items() if k in schema.model_fields})
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            loc = ".".join(str(x) for x in err["loc"]) or "(parameters)"
            key = str(err["loc"][0]) if err["loc"] else ""
            loc += " (from --set)" if key in set_keys else f" (from {origins[key]})" if key in origins else ""
            # the value once, here: field checks do not quote it (model-level checks get the whole dict, and say it)
            got = "" if isinstance(err.get("input"), dict) else f" (got {err.get('input')!r})"
            msg, kind = rule_words(err), err["type"]
            if kind == "extra_forbidden":  # a scorer option, else a scorers: item's key
                msg += "." + did_you_mean(str(err["loc"][-1]), ScorerOptions.__annotations__ if str(
                    err["loc"][-2]).endswith("options") else ScorerSpec.model_fields)
            if kind == "string_type" and isinstance(err["input"], (bool, int, float, datetime.date)):  # `001` is 1
                what = ("true or false" if isinstance(err["input"], bool) else
                        "a date" if isinstance(err["input"], datetime.date) else "a number")
                typed = set_keys.get(key, "").strip()
                got += ": " + (quote.format(key=key, what=what) if key not in set_keys else
                               f"YAML reads {typed} as {what}; quote it: '--set {key}=\"{typed}\"'"
                               if isinstance(values[key], (bool, int, float)) else
                               f"YAML reads it as {what}; quote it in '--set {key}={typed}'")
            lines.append(f"  - {loc}: {msg}{got}")
        raise ParameterError(f"Invalid {schema.section} parameters in {where}:\n" + "\n".join(lines) + advice) from None


def rule_words(err: Mapping[str, Any]) -> str:
    """What one of pydantic's errors says the value must be: "must be >= 1", ..., else pydantic's own message."""
    kind = "string_too_short" if err["type"] == "too_short" and err.get("input") == "" else err["type"]
    ctx = err.get("ctx", {})  # (a list's least length: `items`, a count of them)
    return RANGE_WORDS[kind].format(**ctx, items=counted(ctx.get("min_length", 0), "item")) \
        if kind in RANGE_WORDS else err["msg"].removeprefix("Value error, ")  # (pydantic's, on our checks)


def check_value(annotation: Any, value: Any, name: str = "", error: type[Exception] = ParameterError) -> Any:
    """`value` by the schema's rule for `annotation` (an argparse type, an API argument), else `error` naming `name`."""
    try:
        return TypeAdapter(annotation).validate_python(value)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(map(str, [name, *err["loc"]] if name else err["loc"]))
        raise error(f"{where}: " * bool(where) + f"{rule_words(err)} (got {err['input']!r}).") from None


def validate_all(values: dict[str, Any], where: str = "the parameters", set_keys: Mapping[str, str] = {},
                 advice: str = SET_ADVICE) -> dict[str, _Params]:
    """A whole params file validated against every schema: one object per section."""
    sections = {name: build(schema, values, where, set_keys, advice) for name, schema in SCHEMAS.items()}
    check_generated_columns(sections["construct"], sections["generation"])
    return sections


NO_POLICY = ("policy_model is not set, but the generation stage needs a policy: give a hub id (e.g. "
             "HuggingFaceH4/mistral-7b-sft-beta), a local model directory, or 'builtin:tiny-policy' for the offline "
             "noise stand-in; or turn `generate` off and take candidates from the source's columns.")


def check_generated_columns(construct: ConstructParams, generation: GenerationParams) -> None:
    """With `generate`, the ranked candidates are exactly the generated resp0..resp{n-1} (a source's own would rank
    as generated; one left out, generated in vain), made by a policy; checked before the source is read."""
    if not construct.generate:
        return
    made = [f"resp{k}" for k in range(generation.n_candidates)]
    if not made and not generation.generate_reference:
        raise ParameterError("generate is true, but n_candidates is 0 and generate_reference is false: nothing to "
                             "generate. Set n_candidates, or generate: false.")
    ranked = len(made) + construct.include_reference + 2 * construct.include_original_pair
    if ranked < 2:
        raise ParameterError(
            f"generate is true, but {counted(ranked, 'candidate')} would be ranked (n_candidates="
            f"{generation.n_candidates}; include_reference {str(construct.include_reference).lower()}, "
            f"include_original_pair {str(construct.include_original_pair).lower()}): a pair needs two. Set "
            f"n_candidates: 2 (or more), or include_reference / include_original_pair: true.")
    if sorted(construct.candidate_columns) != sorted(made):
        raise ParameterError(
            f"candidate_columns {construct.candidate_columns}: with generate: true the candidates are the "
            f"n_candidates={generation.n_candidates} generated ones ({', '.join(made) or 'none'}): set "
            f"candidate_columns: [{', '.join(made)}] (or n_candidates to the number of columns). To rank a source's "
            f"own responses, set generate: false.")
    if not generation.policy_model:
        raise ParameterError(NO_POLICY)


def resolve_parameters(values: dict[str, Any]) -> dict[str, Any]:
    """Every parameter of every section with defaults filled in (what the manifest records and papermill injects)."""
    resolved = {k: v for params in validate_all(values).values() for k, v in params.model_dump().items()}
    resolved["notebooks"] = [Path(n).stem for n in values.get("notebooks", DEFAULT_NOTEBOOKS)]
    return resolved


_IPYTHON_NAMES = {"In", "Out", "exit", "quit", "get_ipython", "open"}
_LITERAL_TYPES = (str, int, float, bool, type(None), list, dict, tuple)
_SEEN = "_repro_parameter_names"  # names present at a notebook's first validation
_HOOKED = "_repro_stale_after_failures"  # set once the kernel's post_run_cell hook is registered
_FAILED = "_repro_parameters_cell_failed"  # the parameters cell did not run to its end when it last ran
PARAMETERS_HEADER = "# Parameters of notebooks/"  # the first line of every notebook's parameters cell


def cell_names(namespace: dict[str, Any], injected: bool = False) -> set[str] | None:
    """Names the parameters cell (and papermill's injected one; `injected`: its only) last assigned, from IPython's
    input history; None without it."""
    history = namespace.get("In")
    starts = [i for i, cell in enumerate(history or ()) if str(cell).startswith(PARAMETERS_HEADER)]
    if not isinstance(history, list) or not starts:
        return None
    names: set[str] = set()
    for cell in history[starts[-1]:]:
        if str(cell).startswith("# Parameters") and not (injected and str(cell).startswith(PARAMETERS_HEADER)):
            try:
                tree = ast.parse(cell)
            except SyntaxError as exc:
                raise ParameterError(f"The parameters cell does not parse (line {exc.lineno}: {exc.msg}): fix it and "
                                     f"run it again; nothing was written.") from None
            names |= {target.id for node in tree.body if isinstance(node, ast.Assign)
                      for target in node.targets if isinstance(target, ast.Name)}
    return names


class Stale:
    """What a notebook name held when one of its cells failed (the parameters cell, or a stage): JupyterLab's Run All
    may still run later cells, which would write with objects of the earlier run; any use of one says so instead."""

    def __init__(self, name: str, interrupted: bool = False):
        self._name, self._why = name, "was interrupted" if interrupted else "above failed"

    def _refuse(self, *args: Any) -> Any:
        fix = ("run the notebook again (Run All), which goes on from what was kept" if self._why == "was interrupted"
               else "fix it and run the notebook again")
        raise ParameterError(f"`{self._name}` is from before a cell {self._why}: {fix} (this cell did nothing).")

    __len__ = __iter__ = __getitem__ = _refuse

    def __getattr__(self, attribute: str) -> Any:
        if attribute.startswith("_"):  # what IPython's display and copy ask: simply absent
            raise AttributeError(attribute)
        self._refuse()

    def __repr__(self) -> str:
        return f"<{self._name}: from before a cell {self._why}; run the notebook again>"


def make_stale(namespace: dict[str, Any], interrupted: bool = False) -> None:
    """Set a notebook's objects (not parameters, modules, functions) `Stale` (`interrupted`: a cell was, not failed)."""
    keep = all_fields()
    for key, value in list(namespace.items()):
        if not (key.startswith("_") or key in _IPYTHON_NAMES or key in keep or isinstance(value, Stale)
                or inspect.ismodule(value) or callable(value)):
            namespace[key] = Stale(key, interrupted)


def _stale_after_failures(namespace: dict[str, Any]) -> None:
    """In an IPython kernel, once: a cell failing with repro's error (not `Refused`) or an interrupt, or a parameters
    cell failing at all, makes the notebook's objects `Stale` (parameters refused until that cell runs to its end)."""
    shell = namespace.get("get_ipython", lambda: None)()
    if shell is None or namespace.get(_HOOKED):
        return

    def after(result: Any) -> None:
        failed = result.error_before_exec or result.error_in_exec
        if str(getattr(result.info, "raw_cell", "")).startswith(PARAMETERS_HEADER):
            namespace[_FAILED] = failed is not None
        if isinstance(result.error_in_exec, (ReproError, KeyboardInterrupt)) and not isinstance(
                result.error_in_exec, Refused) or namespace.get(_FAILED):
            make_stale(namespace, isinstance(result.error_in_exec, KeyboardInterrupt))

    def unset(shell: Any, etype: type, value: NameError, tb: Any, tb_offset: int | None = None) -> None:
        """A name a failed cell never set (Run All, or the cells below it run by hand): one line, not a traceback."""
        if any(isinstance(v, Stale) for v in namespace.values()):
            value._render_traceback_ = lambda: [f"\x1b[0;31mNameError\x1b[0m: `{value.name}` is not set: a cell above "
                                                f"failed before it set it (see its error); fix it and run the "
                                                f"notebook again."]
        shell.showtraceback((etype, value, tb), tb_offset=tb_offset)

    shell.events.register("post_run_cell", after)
    if getattr(shell, "custom_exceptions", None) == ():  # (an IPython shell with no handler of its own)
        shell.set_custom_exc((NameError,), unset)
    namespace[_HOOKED] = True


def validate_namespace(section: str, namespace: dict[str, Any]) -> _Params:
    """Validate a notebook's parameters from its globals (literal values only): the names its parameters cell last
    assigned, else those present at the first validation; on failure the notebook's other objects become `Stale`."""
    _stale_after_failures(namespace)
    first = namespace.get(_SEEN) is None
    try:
        names = cell_names(namespace)
        if namespace.get(_FAILED):
            raise ParameterError("The parameters cell failed when it last ran (see its error): fix it and run it "
                                 "again; nothing was written.")
        if names is not None and (unset := sorted(names - set(namespace))):
            raise ParameterError(f"The parameters cell stopped before it set {unset[0]} (see its error): fix it and "
                                 f"run it again; nothing was written.")
        seen = namespace.get(_SEEN) if names is None else names
        values = {key: value for key, value in namespace.items()
                  if not key.startswith("_") and key not in _IPYTHON_NAMES and isinstance(value, _LITERAL_TYPES)
                  and (seen is None or key in seen)}
        notebook = next(name for name, sections in NOTEBOOK_SECTIONS.items() if section in sections)
        papermill = cell_names(namespace, injected=True) or set()  # (None: where each came from cannot be told)
        params = build(SCHEMAS[section], values, where=f"notebook {notebook}'s parameters",
                       origins={key: "papermill's -p/-y/-f" if key in papermill else "the parameters cell"
                                for key in names or ()},
                       advice="\nFix the value where it was given: the notebook's parameters cell, or papermill's -p "
                              "KEY VALUE (a list: -y 'KEY: [a, b]'), which overrides the cell.",
                       quote="the parameters cell or papermill's -p read it as {what}; quote it in the cell, or pass "
                             "it with -r {key} VALUE (as typed)")
    except ParameterError:
        make_stale(namespace)
        raise
    if first:
        namespace[_SEEN] = set(namespace)
        if params.subject and (given := getattr(params, params.subject)) is not None and not params.run_dir:
            named = dataset_run_name(given)  # (another: the run an older repro named so, run_dir_of)
            older = f", named by an older repro: a new run would be runs/{named}" * (params.run_root.name != named)
            print(f"run directory: {params.run_root} (the one of {params.subject}={given!r}{older}; set run_dir to "
                  f"choose another)")
    return params


def read_value(raw: str) -> Any:
    """A CLI VALUE as YAML (3, true, null, [a, b], {k: v}, "x"), but as typed where YAML would silently change it:
    cut at ' #' (`runs/exp #3`; `3 # x`: 3), unbracketed maps/lists (`a: b.jsonl`, `- x`), dates, times, bad YAML."""
    raw = raw.strip()
    try:
        node = yaml.compose(raw, Loader=yaml.SafeLoader)
        if isinstance(node, yaml.ScalarNode) and node.tag == "tag:yaml.org,2002:timestamp":
            return node.value  # (its text, without a comment after it)
        if node is None or (isinstance(node, yaml.CollectionNode) and not node.flow_style) or (
                node.end_mark.index < len(raw) and isinstance(node, yaml.ScalarNode) and node.style is None
                and node.tag == "tag:yaml.org,2002:str"):
            return raw
        return yaml.safe_load(raw)
    except yaml.YAMLError:
        return raw


def set_option(key: str, value: Any) -> str:
    """`--set KEY=VALUE` read_value reads as `value` (as typed if it can, else JSON, no \\u), shell-quoted if needed."""
    typed = value if isinstance(value, str) and read_value(value) == value else json.dumps(value, ensure_ascii=False)
    return f"--set {shlex.quote(f'{key}={typed}')}"


def parse_set(items: list[str], keys: dict[str, str] | None = None) -> dict[str, Any]:
    """`--set KEY=VALUE` items, values by read_value; unknown keys refused, or added to `keys` ({key: where})."""
    out: dict[str, Any] = {}
    given: dict[str, str] = {}
    for item in items:
        if "=" not in item:
            raise ParameterError(f"--set expects KEY=VALUE, got {item!r}; for example --set mini_index=1")
        key, raw = item.split("=", 1)
        once(given, key.strip(), f"--set {item}", "keep one")
        out[key.strip()] = read_value(raw)
    if keys is None:  # each named where the user typed it, not as if in the file
        _refuse_unknown(given)
    else:
        keys.update(given)
    return out


def once(given: dict[str, str], key: str, item: str, fix: str) -> None:
    """Record command-line `item` for `key`, refusing a key set twice (the last would win without a word)."""
    if key in given:
        raise ParameterError(f"{item}: {key} is set twice on the command line ({given[key]} before): {fix}.")
    given[key] = item


class _OnceLoader(yaml.SafeLoader):
    """YAML's safe loader, refusing a mapping that gives a key twice (YAML keeps the last value without a word)."""

    def construct_mapping(self, node, deep=False):
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *anchor`: its keys are the mapping's to override
                continue
            key = self.construct_object(key_node, deep=True)
            if not isinstance(key, str):  # YAML reads no, yes, on, off as booleans, 1 as a number, {x} as a mapping
                raise ParameterError(f"has the key {key!r} on line {key_node.start_mark.line + 1} "
                                     f"({type(key).__name__}, as YAML reads it), not a name: quote it or fix the line.")
            if key in seen:
                lines = sorted({seen[key], key_node.start_mark.line + 1})
                raise ParameterError(f"sets {key!r} twice (line{'s' if len(lines) > 1 else ''} "
                                     f"{' and '.join(map(str, lines))}): keep one.")
            seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep)


def read_params_yaml(path: Path, chain: tuple[Path, ...] = (), keys: dict[str, str] | None = None
                     ) -> tuple[dict[str, Any], dict[str, Any]]:
    """A params file's values after its `include:` files' (from its folder, in order); unknown keys refused at once
    (or put in `keys`, {key: file}, for the caller to refuse)."""
    text = utf8_text(path, "Params file")
    try:
        values = yaml.load(text, Loader=_OnceLoader)
    except yaml.YAMLError as exc:
        raise ParameterError(f"Params file {path} is not valid YAML: {exc}") from None
    except ParameterError as exc:
        raise ParameterError(f"Params file {path} {exc}") from None
    if values is None or values == {}:
        raise ParameterError(f"Params file {path} is empty: it sets no parameter, and a run of every default ranks "
                             f"two of the demo's candidates per prompt with PairRM from the hub. Start from "
                             f"params/demo.yaml (`repro run demo` runs it{copy_hint('params/demo.yaml')}) and change "
                             f"what you need.")
    if not isinstance(values, dict):
        raise ParameterError(f"Params file {path} must be a mapping of parameter names to values.")
    given = {} if keys is None else keys
    given.update({key: str(path) for key in values if key not in given})  # named in the file that holds it
    names = values.pop("include", None) or []
    names = [names] if isinstance(names, str) else names
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise ParameterError(f"'include' in {path} must be a params file's path (from {path.parent}) or a list of "
                             f"them, got {names!r}.")
    chain, merged = (*chain, path.resolve()), {}
    for name in names:
        other = (path.parent / Path(name).expanduser()).resolve()
        if other in chain:
            raise ParameterError(f"'include: {name}' in {path} makes a cycle ({' -> '.join(str(p) for p in chain)} "
                                 f"-> {other}): remove one of these includes.")
        if not other.is_file():
            what = "is a folder" if other.is_dir() else "does not exist"
            where = "" if Path(name).expanduser().is_absolute() else f" (a relative one is read from {path.parent})"
            raise ParameterError(f"'include: {name}' in {path}: {other} {what}; give the path of a params file{where}.")
        included, own = read_params_yaml(other, chain, given)
        merged.update({**included, **own})
    if keys is None:
        _refuse_unknown(given)
    return merged, values


def load_params_file(path: str | Path, overrides: list[str] | None = None, grid: bool = False,
                     family_keys: dict[str, bool] | None = None) -> dict[str, Any]:
    """A params file (with `include:`s) and `--set` overrides, merged, each key validated; a family's (`family:`, or
    `grid`) keys acting only with another's value go to `family_keys` (key -> from --set) for say_idle."""
    path = find_params(path)  # a folder or a missing file: the error `repro run` gives
    keys: dict[str, str] = {}  # every key given, where: the unknown ones of the files and --set refused at once
    included, own = read_params_yaml(path, keys=keys)
    set_values = parse_set(overrides or [], keys)
    _refuse_unknown(keys)
    typed = {key.strip(): raw for key, raw in (item.split("=", 1) for item in overrides or [])}
    if "include" in typed:  # the file's includes are read before --set applies: it would be ignored
        raise ParameterError(f"--set include={typed['include']}: include: goes in a params file (its files are read "
                             f"before --set applies): add 'include: {typed['include'].strip()}' to {path}, or give "
                             f"the values you need with --set.")
    values = {**included, **own, **set_values}
    nbs = values.get("notebooks", DEFAULT_NOTEBOOKS)
    given = f"--set notebooks={typed['notebooks']}: notebooks" if "notebooks" in typed else f"'notebooks' in {path}"
    if not isinstance(nbs, list) or not all(isinstance(n, str) for n in nbs) or not nbs:
        names = ", ".join(map(str, nbs if isinstance(nbs, list) else [nbs] if isinstance(nbs, str) else [])) or \
            ", ".join(DEFAULT_NOTEBOOKS)
        raise ParameterError(f"{given} must be a non-empty list of notebook names, got {nbs!r}: give " +
                             (f"'--set notebooks=[{names}]'." if "notebooks" in typed else f"notebooks: [{names}]."))
    stems = [Path(n).stem for n in nbs]
    if twice := next((n for k, n in enumerate(stems) if n in stems[:k]), None):
        raise ParameterError(f"{given} lists {twice} twice: list each notebook once (they run in that order).")
    sections = validate_all(values, where=str(path), set_keys=typed)
    # said, not refused: a mistake (a notebook left out, a rule not chosen) or a key kept for another run (a shared
    # base's are not named); a family's members may set what its keys act with
    family = grid or "family" in values
    used = notebook_fields(*nbs, *[FAMILY_NOTEBOOK] * family) | RUN_KEYS
    given = {**own, **set_values}
    _say_unused(path, {key: f"read by {' and '.join(nb for nb in NOTEBOOK_SECTIONS if key in notebook_fields(nb))}"
                       for key in given if key not in used}, set_values,
                f"the run's notebooks are {', '.join(nbs)} (add the one that reads {{them}} to notebooks, or remove "
                "{them})")
    given = {key: key in set_values for key in given if key in used}
    if not family:
        say_idle(path, given, {k: v for p in sections.values() for k, v in p})
    elif family_keys is not None:
        family_keys.update(given)
    return values


def say_idle(path: Path, given: Mapping[str, bool], *runs: Mapping[str, Any]) -> None:
    """A stderr line: `given` keys (key -> from --set) idle in all `runs` (a run's or members'; any use counts)."""
    idle = idle_parameters(*runs)
    _say_unused(path, {key: f"acts only with {idle[key]}" for key in given if key in idle},
                [key for key in given if given[key]], "set the value named beside {them}, or remove {them}")


def _say_unused(path: Path, why: dict[str, str], set_values: Collection[str], fix: str) -> None:
    """One line on stderr naming the keys of `why` (key -> why it is not used), `fix` saying what to do ({them})."""
    if why:
        them = "it" if len(why) == 1 else "them"
        print(f"repro run: {path}: " + ", ".join(f"{key} ({reason}{'; from --set' * (key in set_values)})"
                                                 for key, reason in why.items())
              + f" {'is' if them == 'it' else 'are'} set but not used: {fix.replace('{them}', them)}.", file=sys.stderr)
