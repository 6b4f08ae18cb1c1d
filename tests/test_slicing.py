import datasets
import pytest

from repro.errors import DataError, ParameterError
from repro.parameters import ConstructParams, build
from repro.slicing import mini_bounds, plan_slice


def test_part2_minis_match_the_published_sizes():
    sizes = [mini_bounds(20735, k, 4) for k in range(4)]
    assert [b - a for a, b in sizes] == [5183, 5183, 5183, 5186]
    assert sizes[1] == (5183, 10366)
    # contiguous and covering
    assert sizes[0][0] == 0 and sizes[-1][1] == 20735
    assert all(sizes[i][1] == sizes[i + 1][0] for i in range(3))


def test_part1_mini_2_size():
    a, b = mini_bounds(19600, 2, 4)
    assert b - a == 4900


def test_recipe_plan_on_a_synthetic_61135_row_table():
    table = datasets.Dataset.from_dict({"i": list(range(61135))})
    plan = plan_slice(len(table), ConstructParams(part_start=40000, part_stop=61135, drop_rows=400, mini_index=1,
                                                           mini_count=4))
    assert plan.counts == {"source": 61135, "part": 21135, "dropped": 400, "after_drop": 20735,
                           "mini": 5183, "sliced": 5183}
    rows = table.select(plan.indices)
    assert len(rows) == 5183
    assert rows[0]["i"] == 40000 + 5183 and rows[-1]["i"] == 40000 + 10366 - 1
    assert plan.dropped == (60735, 61135)
    last = plan_slice(len(table), ConstructParams(part_start=40000, part_stop=61135, drop_rows=400, mini_index=3,
                                                           mini_count=4))
    assert last.counts["sliced"] == 5186 and last.stop == 60735


def test_shard_contiguous_would_not_match():
    table = datasets.Dataset.from_dict({"i": list(range(20735))})
    assert [len(table.shard(4, k, contiguous=True)) for k in range(4)] == [5184, 5184, 5184, 5183]


def test_drop_from_start_and_limit():
    plan = plan_slice(100, ConstructParams(drop_rows=10, drop_from="start", limit=5))
    assert (plan.start, plan.stop) == (10, 15)
    assert plan.counts["sliced"] == 5 and plan.counts["after_drop"] == 90


@pytest.mark.parametrize("kwargs, needle", [
    ({"part_start": 0, "part_stop": 200}, "part_stop"),
    ({"part_start": 150}, "part_start"),
    ({"drop_rows": 100}, "drop_rows"),
    ({"mini_count": 200}, "mini_count"),
])
def test_slices_outside_the_data_are_clear_errors(kwargs, needle):
    with pytest.raises(DataError, match=needle):
        plan_slice(100, ConstructParams(**kwargs))


@pytest.mark.parametrize("kwargs, needle", [
    ({"mini_index": 4, "mini_count": 4}, "mini_index"),
    ({"limit": 0}, "limit"),
    ({"drop_from": "middle"}, "drop_from"),
])
def test_slice_parameters_are_checked_once_where_they_enter(kwargs, needle):
    # the schema checks them (plan_slice takes them as given)
    with pytest.raises(ParameterError, match=needle):
        build(ConstructParams, kwargs)
