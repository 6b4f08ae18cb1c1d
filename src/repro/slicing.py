"""The seed's slicing over row counts: an index part, a drop, then mini k of m, the last taking the remainder
(20735 rows in 4 minis: 5183, 5183, 5183, 5186; `Dataset.shard(contiguous=True)` would not match)."""

from __future__ import annotations

from dataclasses import dataclass

from .errors import DataError


def mini_bounds(n: int, index: int, count: int) -> tuple[int, int]:
    """[start, stop) of mini `index` (0 <= index < count: the schema's check) over n rows: each n // count rows, the
    last takes the rest."""
    size = n // count
    start = index * size
    stop = n if index == count - 1 else start + size
    return start, stop


@dataclass(frozen=True)
class SlicePlan:
    """Which source rows a run keeps, and how many there were at each step."""

    start: int  # first kept source row
    stop: int  # one past the last kept source row
    counts: dict[str, int]
    dropped: tuple[int, int]  # [start, stop) of the dropped source rows (empty when none)

    @property
    def indices(self) -> range:
        return range(self.start, self.stop)


def plan_slice(n_rows: int, *, part_start: int = 0, part_stop: int | None = None, drop_rows: int = 0,
               drop_from: str = "end", mini_index: int = 0, mini_count: int = 1,
               limit: int | None = None) -> SlicePlan:
    """Compute the kept source rows for a part [part_start:part_stop], a drop, a mini and an optional limit."""
    stop = n_rows if part_stop is None else part_stop
    if part_start >= n_rows or stop > n_rows:
        raise DataError(
            f"The slice part_start={part_start}, part_stop={part_stop} lies outside the source, which has "
            f"{n_rows} rows. Set part_start/part_stop within 0..{n_rows} (or check the source and split).")
    part = stop - part_start
    if drop_rows >= part:
        raise DataError(f"drop_rows={drop_rows} would drop the whole part of {part} rows; lower it.")
    if drop_from == "end":
        kept_start, kept_stop = part_start, stop - drop_rows
        dropped = (kept_stop, stop)
    else:  # "start" (the schema allows no other)
        kept_start, kept_stop = part_start + drop_rows, stop
        dropped = (part_start, kept_start)
    after_drop = kept_stop - kept_start
    if after_drop < mini_count:
        raise DataError(f"{after_drop} rows cannot be cut into mini_count={mini_count} minis; lower mini_count.")
    m0, m1 = mini_bounds(after_drop, mini_index, mini_count)
    start, end = kept_start + m0, kept_start + m1
    if limit is not None:
        end = min(end, start + limit)
    counts = {"source": n_rows, "part": part, "dropped": drop_rows, "after_drop": after_drop,
              "mini": m1 - m0, "sliced": end - start}
    return SlicePlan(start=start, stop=end, counts=counts, dropped=dropped)
