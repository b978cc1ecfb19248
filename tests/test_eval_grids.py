"""Grids, cell/diagonal specs and regions (docs/official-code.md §3.7-3.8, §7.2-7.7)."""

import pytest

from abacus_ray.evaluation.grids import (
    GRIDS,
    Cell,
    get_grid,
    parse_cells,
    parse_diagonal,
    parse_lengths,
    resolve_grid,
)
from abacus_ray.evaluation.regions import region_of, views_for


def test_paper_grids_have_the_papers_cells():
    add = get_grid("paper-addition")
    assert len(add) == 100 * 100 + 60 and add.task == "add"
    assert (1, 1) in add.pairs and (100, 100) in add.pairs and (160, 160) in add.pairs
    assert (101, 100) not in add.pairs and (161, 161) not in add.pairs
    assert add.pairs[:3] == ((1, 1), (1, 2), (1, 3))  # row-major, first operand = row
    assert get_grid("paper-addition-long").pairs == tuple((n, n) for n in range(200, 1001, 100))
    assert len(get_grid("paper-subtraction")) == 10060 and get_grid("paper-subtraction").task == "sub"
    mul = get_grid("paper-multiplication")
    assert len(mul) == 625 and max(mul.pairs) == (25, 25)
    sort = get_grid("paper-sorting")
    assert len(sort) == 900 and (30, 30) in sort.pairs and (24, 24) in sort.pairs  # no corner left out
    assert len(get_grid("paper-or")) == 1600
    tiny = get_grid("tiny-addition")
    assert len(tiny) == 144 + 8 and (20, 20) in tiny.pairs and (13, 12) not in tiny.pairs
    assert all(len(set(g.pairs)) == len(g.pairs) for g in GRIDS.values())


def test_cell_and_diagonal_specs():
    assert parse_cells("1-3x2-3").pairs == ((1, 2), (1, 3), (2, 2), (2, 3), (3, 2), (3, 3))
    assert parse_cells("5x7").pairs == ((5, 7),)
    assert parse_cells("1-2x1+2x2").pairs == ((1, 1), (2, 1), (2, 2))  # joined, duplicates dropped
    assert parse_cells("1-2X1").task is None
    assert parse_diagonal("101-103").pairs == ((101, 101), (102, 102), (103, 103))
    assert parse_lengths("200-1000:100") == list(range(200, 1001, 100))
    assert parse_lengths("13, 15,20") == [13, 15, 20]


@pytest.mark.parametrize("spec, key", [
    ("", "--cells"), ("1-20", "--cells"), ("1-20x", "--cells"), ("0-3x1", "--cells"), ("5-3x1", "--cells"),
    ("axb", "--cells"), ("1-2x1-2x3", "--cells"), ("-3x1", "--cells"),
])
def test_bad_cell_specs_name_the_option(spec, key):
    with pytest.raises(ValueError, match=f"^{key}: "):
        parse_cells(spec)


@pytest.mark.parametrize("spec", ["", "101-", "160-101", "1-10:0", "x", "1.5", "0"])
def test_bad_diagonal_specs_name_the_option(spec):
    with pytest.raises(ValueError, match="^--diagonal: "):
        parse_diagonal(spec)


def test_grid_resolution_and_task_binding():
    with pytest.raises(ValueError, match="^--grid: unknown grid 'nope'"):
        get_grid("nope")
    with pytest.raises(ValueError, match="^--grid: give only one"):
        resolve_grid(grid="paper-or", cells="1x1")
    assert resolve_grid(default=("tiny-addition",)).name == "tiny-addition"
    custom = parse_cells("1-2x1")
    assert custom.cells("mul") == [Cell("mul", 1, 1), Cell("mul", 2, 1)]
    assert custom.cells("addsub") == [Cell("add", 1, 1), Cell("add", 2, 1), Cell("sub", 1, 1), Cell("sub", 2, 1)]
    assert get_grid("paper-subtraction").cells("addsub")[0] == Cell("sub", 1, 1)
    with pytest.raises(ValueError, match="^grid: 'paper-sorting' holds 'sort' problems"):
        get_grid("paper-sorting").cells("add")


def test_arithmetic_regions_follow_the_training_length():
    assert region_of("add", 20, 20, 20) == "id"
    assert region_of("add", 21, 1, 20) == "ood"  # max(i, j) > n: at least one operand longer
    assert region_of("add", 1, 100, 20) == "ood"
    assert region_of("add", 101, 101, 20) == "ood100plus"
    assert region_of("mul", 15, 15, 15) == "id" and region_of("mul", 16, 2, 15) == "ood"
    counts = {}
    for i, j in get_grid("paper-addition").pairs:
        r = region_of("add", i, j, 20)
        counts[r] = counts.get(r, 0) + 1
    assert counts == {"id": 400, "ood": 9600, "ood100plus": 60}  # docs/official-code.md §7.7
    with pytest.raises(ValueError, match="^n_train: "):
        region_of("add", 1, 1, 0)


def test_sorting_regions_and_table_views():
    cells = get_grid("paper-sorting").pairs
    regions = {(d, m): region_of("sort", d, m, 10, 10) for d, m in cells}
    assert regions[(10, 10)] == "id" and regions[(11, 10)] == "ood_digits"
    assert regions[(10, 11)] == "ood_array" and regions[(11, 11)] == "ood_both"
    views = views_for("sort")
    size = {v: sum(views[v](regions[c], *c) for c in cells) for v in views}
    assert size == {"id": 100, "ood_digits_30": 200, "ood_array_30": 200, "all_ood_30": 800, "all_ood_20": 300}
    assert region_of("sort", 5, 7, 10, 6) == "ood_array"  # array length has its own training size
