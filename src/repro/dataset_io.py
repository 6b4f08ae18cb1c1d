"""The output schema (the seed's columns, order and types) and writing a split in the layout `push_to_hub` writes."""

from __future__ import annotations

import filecmp
import hashlib
import json
import os
from pathlib import Path
from typing import Any, Sequence

import datasets
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from datasets import Features, List, Value
from datasets.arrow_writer import get_writer_batch_size_from_data_size, get_writer_batch_size_from_features
from datasets.utils.py_utils import convert_file_size_to_int

from .errors import DataError
from .paths import DATA_DIR, SHARD_RE, SPLIT, shard_name

MESSAGE_LIST = List({"content": Value("string"), "role": Value("string")})

SEED_FEATURES = Features({  # the seed dataset's columns, in its order (one source of truth for the output's shape)
    "prompt": Value("string"),
    "prompt_id": Value("string"),
    "messages": MESSAGE_LIST,
    "score_chosen": Value("float64"),
    "score_rejected": Value("float64"),
    "reference_response": Value("string"),
    "chosen": MESSAGE_LIST,
    "rejected": MESSAGE_LIST,
})
SEED_COLUMNS = list(SEED_FEATURES)


def conversation(prompt: str, response: str) -> list[dict[str, str]]:
    """A single-turn conversation in the seed's message format."""
    return [{"content": prompt, "role": "user"}, {"content": response, "role": "assistant"}]


def response_text(value: Any) -> str | None:
    """A response as text: the string itself, or the last assistant message of a conversation; else None."""
    if isinstance(value, str):
        return value
    turns = value if isinstance(value, list) else []
    return next((m.get("content") for m in reversed(turns) if isinstance(m, dict) and m.get("role") == "assistant"),
                None)


def response_texts(column: pa.ChunkedArray | pa.Array) -> pa.Array | None:
    """Each row's text, or a conversation's last `assistant` message (null if none); None for a column neither text nor
    {content, role} messages; of a mixed column (datasets' Json), each row as what it holds (else null)."""
    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if isinstance(arr.type, pa.JsonType):  # (a text as an assistant turn)
        values = [[{"content": v, "role": "assistant"}] if isinstance(v, str) else v if isinstance(v, list) else None
                  for v in column_values(arr)]
        try:
            return response_texts(pa.array(values))
        except (pa.ArrowInvalid, pa.ArrowTypeError):  # lists of other things than {content, role} messages
            return None
    if pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type):
        return arr
    if not (pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type)):
        return None
    item = arr.type.value_type
    if not pa.types.is_struct(item) or item.get_field_index("content") < 0 or item.get_field_index("role") < 0:
        return None
    messages = arr.flatten()
    parents = pc.list_parent_indices(arr).to_numpy()
    is_assistant = pc.fill_null(pc.equal(messages.field("role"), "assistant"), False).to_numpy(zero_copy_only=False)
    positions = np.flatnonzero(is_assistant)
    owner = parents[positions]
    last = np.r_[owner[1:] != owner[:-1], True] if owner.size else np.zeros(0, dtype=bool)
    take = np.full(len(arr), -1, dtype=np.int64)
    take[owner[last]] = positions[last]
    return messages.field("content").take(pa.array(take, mask=take < 0))


def same_responses(table: pa.Table) -> np.ndarray:
    """Each row: its chosen and rejected responses (`response_texts`) are one text (False where either has none)."""
    texts = [response_texts(table.column(c)) if c in table.column_names else None for c in ("chosen", "rejected")]
    if any(t is None for t in texts):
        return np.zeros(table.num_rows, bool)
    return pc.fill_null(pc.equal(*texts), False).to_numpy(zero_copy_only=False)


def prompt_text(row: dict[str, Any]) -> str | None:
    """A row's prompt as text: `prompt` itself, or the first user turn of a conversation in `prompt` (RLHFlow's,
    TRL's conversational rows) or else in `chosen` (SPPO's score-only rows); else None."""
    if isinstance(prompt := row.get("prompt"), str):
        return prompt
    for column in ("prompt", "chosen"):
        turns = row.get(column)
        for turn in turns if isinstance(turns, list) else []:
            if isinstance(turn, dict) and turn.get("role") == "user":
                return turn.get("content")
    return None


def prompt_id_of(prompt: str) -> str:
    """sha256 hex digest of the UTF-8 prompt (the rule HuggingFaceH4/ultrafeedback_binarized uses)."""
    return hashlib.sha256(prompt.encode("utf-8")).hexdigest()


def row_prompt_id(row: dict[str, Any], prompt: str | None) -> str | None:
    """`prompt_id` (as text), else `prompt_id_of(prompt)`; None for neither (a blank or non-text prompt has no id)."""
    if (given := row.get("prompt_id")) not in (None, ""):
        return str(given)
    return prompt_id_of(prompt) if isinstance(prompt, str) and prompt.strip() else None


def output_features(keep_all_candidates: bool = False, more_scorers: Sequence[str] = ()) -> Features:
    """Seed features, or with all candidates and scores (Snorkel, SPPO), candidate_scores_<name> of `more_scorers`."""
    if not keep_all_candidates:
        return SEED_FEATURES.copy()
    more = {f"candidate_scores_{name}": List(Value("float64")) for name in more_scorers}
    return Features({**SEED_FEATURES, "candidates": List(Value("string")), "candidate_scores": List(Value("float64")),
                     **more})


def split_files(dataset_dir: str | Path) -> dict[str, list[Path]]:
    """The parquet shards under `data/`, by split, checked to be complete (`{split}-{i:05d}-of-{n:05d}.parquet`)."""
    by_split: dict[str, list[Path]] = {}
    for path in sorted((Path(dataset_dir) / DATA_DIR).glob("*.parquet")):
        if m := SHARD_RE.match(path.name):
            by_split.setdefault(m["split"], []).append(path)
    for split, paths in by_split.items():
        names = [p.name for p in paths]  # sorted by index: all name the same count, zero-padded
        if names != [shard_name(split, i, len(paths)) for i in range(len(paths))]:
            raise DataError(
                f"Split {split!r} in {dataset_dir}/{DATA_DIR} has an incomplete or mixed set of shards {names}; "
                f"re-write the split (repro.dataset_io.write_split) so it has {split}-00000-of-0000N ... shards.")
    return by_split


def write_split(ds: datasets.Dataset, dataset_dir: str | Path, split: str = SPLIT) -> dict[str, Any]:
    """Write `ds` as `data/{split}-{i:05d}-of-{n:05d}.parquet`, sharded and row-grouped as `push_to_hub` does; the
    split's facts as it records them (`num_bytes`: in-memory Arrow size; `download_size`: parquet bytes) and files."""
    data_dir = Path(dataset_dir) / DATA_DIR
    data_dir.mkdir(parents=True, exist_ok=True)
    ds = ds.flatten_indices() if ds._indices is not None else ds
    nbytes = ds._estimate_nbytes()
    num_shards = int(nbytes / convert_file_size_to_int(datasets.config.MAX_SHARD_SIZE)) + 1
    batch_size = (get_writer_batch_size_from_features(ds.features)
                  or get_writer_batch_size_from_data_size(len(ds), nbytes))
    files = [data_dir / shard_name(split, index, num_shards) for index in range(num_shards)]
    for index, path in enumerate(files):
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        ds.shard(num_shards=num_shards, index=index, contiguous=True).to_parquet(str(tmp), batch_size=batch_size)
        if path.is_file() and filecmp.cmp(tmp, path, shallow=False):
            tmp.unlink()  # the same bytes: the shard is left as it was (its time and inode with it)
        else:
            os.replace(tmp, path)
    for old in set(data_dir.glob(f"{split}-*.parquet")) - set(files):
        old.unlink()
    return {"split": split, "num_bytes": nbytes, "num_examples": len(ds),
            "download_size": sum(f.stat().st_size for f in files), "files": [str(f) for f in files]}


# the paired scores of a preference dataset, as numbers (02_analyze reads them, 03_card checks metrics against them)
SCORE_COLUMNS = ("score_chosen", "score_rejected")
# what `repro score` adds to each row it writes: the candidates scored, each one's score (higher is better) and rank
RESCORED_COLUMNS = ("candidates", "scores", "ranks")
NONFINITE = "{} is NaN, infinite or missing"  # a row's exclusion reason (metrics.json's `excluded_reasons`)


def score_array(table: pa.Table, column: str, where: str, parameter: str = "dataset") -> np.ndarray:
    """One score column as float64 (missing: NaN); a DataError naming `parameter` (the dataset's) unless numeric."""
    col = table.column(column)
    kind = col.type
    if pa.types.is_null(kind):
        return np.full(len(col), np.nan)
    if pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_decimal(kind):
        return pc.cast(col, pa.float64()).to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
    values, mixed = column_values(col), isinstance(kind, pa.JsonType)
    bad = next(((i, v) for i, v in enumerate(values)
                if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)))), None)
    # (a number written as text, "7.5", is stored as 7.5 in such a column: which row held it cannot be told)
    detail = f"; row {bad[0]} holds {bad[1]!r}" if bad else \
        "; some rows hold their score as text, such as \"7.5\" in quotes" if mixed else ""
    raise DataError(
        f"{where}: column {column!r} must hold numbers (float64 scores), but it holds "
        f"{'values of mixed types' if mixed else f'{kind} values'}{detail}. Convert the column to numbers (missing "
        f"scores as null) or point `{parameter}` at a preference dataset whose {column} is numeric.")


def column_values(column: pa.ChunkedArray | pa.Array) -> list[Any]:
    """A column's values as Python's, datasets' Json feature (mixed types stored as JSON text) decoded."""
    values = column.to_pylist()
    return [None if v is None else json.loads(v) for v in values] if isinstance(column.type, pa.JsonType) else values


def scores_digest(table: pa.Table) -> str:
    """hexdigest[:16] of the score columns as float64 (missing: NaN): 03_card refuses a metrics.json of other scores."""
    digest = hashlib.sha256()
    for column in SCORE_COLUMNS:
        digest.update(score_array(table, column, "scores_digest").tobytes())
    return digest.hexdigest()[:16]
