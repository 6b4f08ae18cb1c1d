"""The seed's slicing over row counts: an index part, a drop, then mini k of m, the last taking the remainder
(20735 rows in 4 minis: 5183, 5183, 5183, 5186; `Dataset.shard(contiguous=True)` would not match)."""

from __future__ import annotations

from dataclasses import dataclass

from .errors import DataError
from .parameters import ConstructParams


def mini_bounds(n: int, index: int, count: int) -> tuple[int, int]:
    """[start, stop) of mini `index` of `count` over n rows: n // count rows each, the last takes the rest."""
    start = index * (n // count)
    return start, n if index == count - 1 else start + n // count


@dataclass(frozen=True)
class SlicePlan:
    """Which source rows a run keeps, [start, stop), and how many there were at each step."""

    start: int
    stop: int
    counts: dict[str, int]
    dropped: tuple[int, int]  # [start, stop) of the dropped source rows (empty when none)

    @property
    def indices(self) -> range:
        return range(self.start, self.stop)


def plan_slice(n_rows: int, p: ConstructParams) -> SlicePlan:
    """The source rows `p`'s part [part_start:part_stop], drop, mini and limit keep of n_rows."""
    stop = n_rows if p.part_stop is None else p.part_stop
    if p.part_start >= n_rows or stop > n_rows:
        raise DataError(
            f"The slice part_start={p.part_start}, part_stop={p.part_stop} lies outside the source, which has "
            f"{n_rows} rows. Set part_start/part_stop within 0..{n_rows} (or check the source and split).")
    part = stop - p.part_start
    if p.drop_rows >= part:
        raise DataError(f"drop_rows={p.drop_rows} would drop the whole part of {part} rows; lower it.")
    if p.drop_from == "end":
        kept_start, kept_stop = p.part_start, stop - p.drop_rows
        dropped = (kept_stop, stop)
    else:  # "start" (the schema allows no other)
        kept_start, kept_stop = p.part_start + p.drop_rows, stop
        dropped = (p.part_start, kept_start)
    after_drop = kept_stop - kept_start
    if after_drop < p.mini_count:
        raise DataError(f"{after_drop} rows cannot be cut into mini_count={p.mini_count} minis; lower mini_count.")
    m0, m1 = mini_bounds(after_drop, p.mini_index, p.mini_count)
    start, end = kept_start + m0, kept_start + m1
    if p.limit is not None:
        end = min(end, start + p.limit)
    counts = {"source": n_rows, "part": part, "dropped": p.drop_rows, "after_drop": after_drop,
              "mini": m1 - m0, "sliced": end - start}
    return SlicePlan(start=start, stop=end, counts=counts, dropped=dropped)
