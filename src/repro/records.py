"""The records repro reads back from a run folder, in the shape repro writes them (what its readers take for granted):
a record someone else wrote, or one damaged by hand, stops where it is read, with one error naming its file and the
place in it, not with a traceback from the code that reads it later."""

import json
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, BeforeValidator, Discriminator, Field, Tag, TypeAdapter, ValidationError
from typing_extensions import NotRequired, Required, TypedDict, is_typeddict

from .errors import DataError, counted
from .parameters import SCHEMAS

Number = float | None  # (a NaN or an infinity is written null)
Mapping = dict[str, Any]
DIGITS = r"^\d+$"
Digits = Annotated[str, Field(pattern=DIGITS)]
HELD = {"dict": "a mapping", "list": "a list"}
WANTED = {"dict_type": "a mapping", "list_type": "a list", "string_type": "text", "int_type": "a whole number",
          "float_type": "a number", "bool_type": "true or false", "tuple_type": "a list"}
SIZES = {"too_long": "at most {max_length}", "too_short": "at least {min_length}"}  # (a list's items)


def json_type(annotation: Any) -> Any:
    """The JSON type of a parameter's `annotation`: without its checks (a path recorded need not exist now), a model
    a mapping."""
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Annotated:
        return json_type(args[0])
    if origin in (list, dict):
        return origin[tuple(map(json_type, args))]
    if origin is Literal:  # (a value an older repro took, since gone, is a parameter changed, not a damaged record)
        return Union[tuple({type(a) for a in args})]
    if origin is not None:  # (a union)
        return Union[tuple(map(json_type, args))]
    return dict if is_typeddict(annotation) or isinstance(annotation, type) and issubclass(annotation, BaseModel) \
        else annotation


def shape(title: str, total: bool = False, /, **fields: Any) -> Any:
    """A mapping of these `fields` (keys to their types), any of them left out unless `total`, others not read."""
    return TypedDict(title, fields, total=total)  # type: ignore[operator]


def when(key: str, title: str, held: dict[Any, dict[str, Any]], /, **fields: Any) -> Any:
    """A mapping of these `fields` that also holds, where its `key` holds one of `held`'s values (True: any true value,
    as its readers test it), the keys `held` gives that value: read only then (a block compared, a slice located, the
    facts of a cause; a key of `fields` too: its type there where not)."""
    def tag(value: Any) -> str:  # (no key of the mapping: `wrong` names the keys the error's place holds)
        found = value.get(key) if isinstance(value, dict) else None
        found = bool(found) if True in held else found
        return f"{key}: {found}" if isinstance(found, (bool, str)) and found in held else ""
    return Annotated[Union[(*(Annotated[shape(title, **{**fields, **{k: Required[v] for k, v in keys.items()}}),
                                        Tag(f"{key}: {value}")] for value, keys in held.items()),
                            Annotated[shape(title, **fields), Tag("")])], Discriminator(tag)]


def lenient(annotation: Any) -> Any:
    """`annotation` (a record's shape) with any key of its mappings left out: the types of what a reader reads that
    requires none of the keys another does (05_family reads a comparison's verdict, the card its figures)."""
    origin, args = get_origin(annotation), get_args(annotation)
    if is_typeddict(annotation):
        return shape(annotation.__name__, **{k: lenient(get_args(v)[0] if get_origin(v) in (Required, NotRequired)
                                                        else v) for k, v in annotation.__annotations__.items()})
    if origin is Annotated:
        return Annotated[(lenient(args[0]), *annotation.__metadata__)]
    if origin in (list, dict, tuple):
        return origin[tuple(map(lenient, args))]
    return Union[tuple(map(lenient, args))] if origin in (Union, UnionType) else annotation  # (a Literal: as it is)


def row(*items: Any) -> Any:
    """A JSON list of these `items`, in this order (read as a tuple: strict validation takes a list for none)."""
    return Annotated[tuple[items], BeforeValidator(lambda v: tuple(v) if isinstance(v, list) else v)]


# the parameters a run records (its own and each notebook's), each of the type its schema gives it
Parameters = shape("Parameters", **{k: json_type(field.annotation) for schema in SCHEMAS.values()
                                    for k, field in schema.model_fields.items()})
Notebook = shape("Notebook", status=str | None, error=str | None, executed=str | None, parameters=Parameters | None)
Family = TypedDict("Family", {"member": str, "name": str, "index": NotRequired[int], "grid": NotRequired[Mapping]})
# a stage's row cache: its counts, the damaged entries' names (cache.CacheCounts.as_dict)
Cache = shape("Cache", damaged=list[str], **dict.fromkeys(("rows_from_cache", "rows_computed", "damaged_entries",
                                                          "resumed_from_cache", "resumed_unknown", "key_format"), int))
# each stage's fields, generation's record, the scorer's and each further scorer's (`scorers`): the names differ
Stage = shape("Stage", error=str | None, status=str, code=str | None, cache=Cache, batch_tokens_used=dict[Digits, int],
              candidates_per_row=dict[Digits, int], tie_rule=str | None, limits_from=dict[str, str | None],
              stand_in=bool, decides_pairs=bool, batch_tokens=int | None,
              **dict.fromkeys(("model", "policy_model", "kind", "name", "column"), str),
              **dict.fromkeys(("backend", "device", "dtype"), str | None),
              **dict.fromkeys(("source_maxlength", "candidate_maxlength", "max_length"), int | None),
              **dict.fromkeys(("prompts", "prompts_computed", "prompts_resumed", "prompts_generated", "chunks_resumed",
                               "batch_tokens_unknown", "rows_truncated"), int))
Manifest = shape(
    "Manifest", status=str | None, project=str | None, parameters=Parameters, notebooks=dict[str, Notebook],
    outputs=dict[str, shape("Output", True, sha256=str, bytes=int)], family=Family | None,
    stages=dict[str, Stage], counts=dict[str, int | None], generation=Stage | None, scorer=Stage | None,
    scorers=list[Stage],
    subject=shape("Subject", True, dataset=str | None), dataset=shape("Dataset", split=str),
    environment=shape("Environment", packages=dict[str, str | None], git=Mapping,
                      lock=shape("Lock", sha256=str | None)),
    members=list[str] | dict[str, Mapping], family_name=str | None)

Test = shape("Test", statistic=Number, pvalue=Number, spearman=Number, positive=int, negative=int)
Interval = row(Number, Number) | None  # (a 95% interval: none of too few rows)
Block = shape("Block", mean_ci95=Interval, median_ci95=Interval, **dict.fromkeys(  # (a score's or the margin's)
    ("mean", "std", "median", "q25", "q75", "min", "max", "skewness", "kurtosis"), Number))
Count = shape("Count", True, count=int, fraction=Number)
# metrics.json: the keys the card reads without a default required (02_analyze writes each in every record: a
# length's facts of why it was not measured where that is their `cause`)
Metrics = shape(
    "Metrics", n=Required[int], n_excluded=int, excluded_reasons=dict[str, int], score_chosen=Block,
    score_rejected=Block, margin=Block, dataset=shape("Analysed", split=str, scores_sha256=str), scorer=Stage | None,
    margin_sign=shape("MarginSign", counts=dict[str, int], fractions=dict[str, Number]), ties=int,
    tests=dict[str, Test], effect_size=dict[str, Number],
    correlation=dict[str, Test], bootstrap=Mapping,
    agreement=shape("Agreement", primary=str | None, pairs=list[shape(  # (several scorers': each pair of them)
        "ScorerPair", True, scorers=row(str, str), rows=int, same_chosen=Count, same_rejected=Count,
        kendall_tau=shape("Tau", True, mean=Number, median=Number, undefined=int),
        margin_correlation=shape("Margins", pearson=Test, spearman=Test))]),
    invariants=shape("Invariants", expected_to_hold=bool, selection=str, **dict.fromkeys(
        ("sign_order_fails", "antisymmetry_holds", "inversions"), int), candidate_scores=shape(
        "CandidateScores", candidates_per_row=shape("PerRow", min=int, max=int), **dict.fromkeys(
            ("rows", "sum_to_zero_holds", "two_candidate_rows", "antisymmetry_holds_among_two_candidate_rows",
             "chosen_is_best_and_rejected_is_worst"), int)) | None),
    length=when("cause", "Length", {"no_column": dict(columns=list[str]), "not_text": dict(column=str, type=str)},
                n=int, reason=str,
                margin_vs_length_difference=dict[str, shape("Rho", True, spearman=Number, pvalue=Number)],
                chosen_longer_test=dict[str, shape("SignTest", True, positive=int, negative=int, pvalue=Number)],
                left_out=shape("LeftOut", True, rows=int, first_row=int, column=str)),
    scale=shape("Scale", True, kind=Literal["constant", "rating", "probability", "logit", "unclear"],
                grid_step=Number, grid_fraction=float, distinct_values=int, min=Number, max=Number),  # detect_scale
    figures=dict[str, shape("Figure", png=str, title=str)])
# compare.json: what the card reads of it (its counts, numbers, the words it looks up: a side, a scale), the keys it
# reads without a default required (04_compare writes each in every record: `when` the key that says so is true)
Side = Literal["reference", "candidate"]
Columns = list[Literal["chosen", "rejected", "score_chosen", "score_rejected"]]  # (those a side lacks, or cannot read)
Rows = shape("Rows", True, count=int, ranges=list[list[int]])  # (source rows)
Counted = shape("Counted", True, count=int)  # (source rows the card counts, their ranges unread)
NULLS = ("missing_reference", "missing_candidate")  # (a text column's nulls, by side)
Texts = shape("Texts", True, **dict.fromkeys(("equal", "different", "missing"), int),
              **dict.fromkeys(NULLS, NotRequired[int]))  # (the card reads its nulls with a default, a note's without)
Intervals = dict[str, list[Number] | None]  # (95% intervals, by statistic)
Statistics = shape("Statistics", True, bland_altman=shape("BlandAltman", True, **dict.fromkeys(
    ("mean_difference", "loa_low", "loa_high"), Number)), ci95=NotRequired[Intervals],
                   **dict.fromkeys(("pearson", "spearman", "lin_ccc", "max_abs_difference"), Number))
NOTES = {  # the notes the card words (note_facts: [note, *its facts]), the types of their facts it reads
    "duplicate_note": (list[row(Side, int, int, Any, Any, Any)], dict[Side, int]), "prompt_note": (int, Any),
    "stand_in_note": (Side, Side), "scale_note": (Literal["rating", "logit"],) * 2, "columns_note": (dict[Side, Any],),
    "ranked_note": (int, list[int], list[int]), "ties_note": (int, Any),
    "missing_note": (Any, shape("Nulls", True, **dict.fromkeys(NULLS, int)), int),
    "few_rows_note": (dict[Literal["scores", "margin", "chosen", "rejected"], int], int),
    "splits_note": (shape("Splits", True, **dict.fromkeys(get_args(Side), Any)), dict[Side, Any]),
    "pairs_note": (Any, list[row(Side, Columns, Columns, dict[str, Any])] | None)}
CompareNote = Annotated[Union[(*(Annotated[row(Literal[k], *facts), Tag(k)] for k, facts in NOTES.items()),
                               Annotated[list, Tag("")])],  # (another note: one the card does not word)
                        Discriminator(lambda v: next((k for k in NOTES if isinstance(v, list) and v[:1] == [k]), ""))]
PAIR_CATEGORIES = ("same", "swapped", "same_chosen_only", "same_rejected_only", "one_shared_other_role", "different")
Pairs = when("available", "Pairs", {True: dict(  # (their percentages: of their counts, not the fractions recorded)
    n=int, categories=shape("Categories", **dict.fromkeys(PAIR_CATEGORIES, Required[int]), reranked=int))},
             margin_sign=shape("Signs", True, fraction=Number) | None, reference_response=Texts | None,
             messages=Texts | None)
Role = shape("Role", True, n=int, pearson=Number)
Scores = when("available", "Scores", {True: dict(
    scores=Statistics, margin=shape("Margin", n=Required[int], pearson=Number, ci95=Intervals),
    by_role=shape("ByRole", True, chosen=Role, rejected=Role))},
              lacking=list[row(Side, Columns, Any, dict[str, Any])], reason=str,
              **dict.fromkeys(("values", "excluded_nonfinite", "nonfinite_on_both_sides"), int))
Slice = when("located", "Slice", {True: dict(
    span=list[int], inside_span_not_in_reference=Counted, groups=list[shape(
        "Group", name=Required[str], solutions=Required[list[Mapping]], not_in_source=int, repeated=int,
        dropped_by_candidate=Counted)], **dict.fromkeys(("before_span", "after_span"), int))},
             hints_reproduce=shape("Hints", True, parameters=Mapping, exact=bool, rows=list[int] | None,
                                   dropped=NotRequired[Rows]),
             source=str, **dict.fromkeys(("located", "repeated", "not_in_source"), int))
Tolerance = shape("Tolerance", True, disagreement_tolerance=Number)  # (read beside a probability column compared)
Compare = when(
    "probabilities", "Compare", {True: dict(parameters=Tolerance)}, parameters=lenient(Tolerance), verdict=str,
    note_facts=list[CompareNote], slice=Slice | None,
    reference=Required[shape("Reference", True, specs=list[str], split=str, rows=int,
                             commits=NotRequired[dict[str, str]])],
    candidate=Required[shape("Candidate", split=Required[str], specs=list[str], rows=int, commits=dict[str, str])],
    alignment=Required[shape("Alignment", True, aligned=int, matched_by=NotRequired[dict[Literal[
        "prompt_id", "prompt_sha256", "prompt_normalised"], int]])],
    coverage=Required[shape("Coverage", True, **dict.fromkeys(("only_reference", "only_candidate",
                                                               "duplicates_reference", "duplicates_candidate"), int))],
    disagreements=Required[shape("Disagreements", True, rows=int, tolerance=Number,
                                 not_compared=NotRequired[dict[Literal["pairs", "scores"], Any]])],
    pairs=Required[Pairs], scores=Required[Scores],
    probabilities=dict[str, shape("Probabilities", True, max_abs_difference=Number, **dict.fromkeys(
        ("differ", "rows", "other_shape", "missing"), int), **dict.fromkeys(("other_candidates", "other_order"),
                                                                           NotRequired[int]))] | None)
Selfcheck = TypedDict("Selfcheck", {
    "tool": Literal["repro selfcheck"], "when": NotRequired[str], "models": NotRequired[dict[str, Mapping]],
    "settings": NotRequired[Mapping], "environment": NotRequired[shape("Checked", packages=dict[str, str | None])],
    "checks": NotRequired[list[shape("Check", True, name=str, status=str)]]})
# a family's family.json (05_family): each member's last status
FamilyView = shape("FamilyView", True, members=list[shape("Seen", True, member=str, status=str)])
# work/<stage>/fingerprint.json (jobs.prepare_work_dir): its digest names a set-aside folder (hex: never a path)
Fingerprint = TypedDict("Fingerprint", {"digest": Annotated[str, Field(pattern="^[0-9a-f]+$")],
                                        "fingerprint": NotRequired[shape("Stored", work=Mapping)]})
# a chunk's note (jobs.run_chunked_with_stats): rows from the row cache, prompts per budget (an older repro's: those)
Budgets = dict[Digits, int]
ChunkNote = TypedDict("ChunkNote", {"rows_from_cache": int, "made_with": NotRequired[Budgets]})
# repro_stand_in.json (paths.STAND_IN_MARKER) beside the files `repro score` wrote: each one's scorer, as a run's
# manifest records it (subject.mark_scorer); a stand-in model's folder holds one of no `files`, of what built it
StandInMarker = shape("StandInMarker", files=dict[str, Stage])
MANIFEST, CARD_METRICS, CARD_COMPARE = TypeAdapter(Manifest), TypeAdapter(Metrics), TypeAdapter(Compare)
METRICS, COMPARE = TypeAdapter(lenient(Metrics)), TypeAdapter(lenient(Compare))  # (05_family's: no key required)
SELFCHECK, FAMILY_VIEW = TypeAdapter(Selfcheck), TypeAdapter(FamilyView)
FINGERPRINT, NOTE = TypeAdapter(Fingerprint), TypeAdapter(ChunkNote | Budgets)
STAND_IN = TypeAdapter(StandInMarker)


def redo(notebook: str, on: str = "this run", then: str = "") -> str:
    """What a record not in the shape `notebook` writes it in is, what to do (`then`: what deleting it leaves out)."""
    return f"not what {notebook} writes: run notebooks/{notebook}.ipynb again on {on}, or delete the file{then}."


METRICS_FIX, COMPARE_FIX = redo("02_analyze", then=" (a card then leaves the statistics out)"), redo("04_compare")
STAND_IN_FIX = ("not what `repro score` writes: delete it and score its files again (`repro score --force`), else a "
                "card names no scorer of them.")


def read_record(path: Path, shape: TypeAdapter, fix: str, missing: Any = None) -> Any:
    """The JSON record at `path` (`missing` where there is none), where it has the `shape` repro writes it in; else a
    DataError naming the file and saying `fix`."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, NotADirectoryError):
        return missing
    except ValueError as exc:  # (not JSON, not UTF-8)
        raise DataError(f"{path} is not JSON ({exc}), {fix}") from None
    return checked(path, data, shape, fix)


def holds(shape: TypeAdapter, data: Any) -> bool:
    """Whether `data` has the `shape` repro writes its record in (where a damaged one is not an error: set aside)."""
    return shape.validator.isinstance_python(data, strict=True)


def checked(path: Path, data: Any, shape: TypeAdapter, fix: str) -> Any:
    """`data`, read from the record `path`, where it has the `shape` repro writes it in; else a DataError naming the
    file and a place in it that is not so (`wrong`), then saying `fix` (what the record is not, what to do)."""
    try:
        shape.validate_python(data, strict=True)
    except ValidationError as exc:
        raise DataError(f"{path} {wrong(data, exc.errors())}, {fix}") from None
    return data


def wrong(data: Any, errors: list[dict[str, Any]]) -> str:
    """What pydantic's `errors` say of `data`, of the first that goes furthest into it (a union's members each have
    one): the value held, where (JSON keys: control characters escaped), what belongs there."""
    def place(err: dict[str, Any]) -> tuple[list[Any], Any]:
        keys, value = [], data
        for part in err["loc"]:  # (pydantic names the member of a union tried too)
            if isinstance(value, dict) and part in value or isinstance(value, list) and isinstance(part, int) and \
                    part < len(value):
                keys.append(part)
                value = value[part]
        return keys, value
    (keys, value), err = max(((place(err), err) for err in errors), key=lambda found: len(found[0][0]))
    if key := err["loc"][-1:] == ("[key]",):  # a key of the mapping held there
        keys, value = keys[:-1], keys[-1]
    where = "".join(f"[{json.dumps(k)}]" if i else str(k) if str(k).isidentifier() else json.dumps(k)
                    for i, k in enumerate(keys))
    size = SIZES.get(err["type"], "").format(**err.get("ctx", {}))
    if err["type"] == "missing" and isinstance(err["loc"][-1], int):  # a list's item (a row's)
        size = f"at least {err['loc'][-1] + 1}"
    elif err["type"] == "missing":
        return f"holds no {json.dumps(err['loc'][-1])}" + f" in its {where}" * bool(where)
    shown = json.dumps(value)
    held = counted(len(value), "item") if size else HELD.get(type(value).__name__) or (
        shown if len(shown) <= 40 else f"{shown[:37]}...")
    wanted = size or WANTED.get(err["type"]) or err["msg"].removeprefix("Input should be ")
    if err["type"] == "string_pattern_mismatch":
        wanted = "a number" if err["ctx"]["pattern"] == DIGITS else "text of the form repro writes"
    return f"holds {held}" + f" as {'a key of ' * key}its {where}" * bool(where) + f" where {wanted} belong" + \
        "s" * (not size)
