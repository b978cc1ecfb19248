"""Fig. 10's view (`abacus-ray summary --fig10`): rows in k order with intervals and where the trained
positions end, then Fig. 10's claim decided by the claims mechanism, which compares only where 95 %
intervals separate. Made-up cell rows."""

from __future__ import annotations

import hashlib

import pytest

from abacus_ray import figures
from abacus_ray.cli import main as cli_main
from abacus_ray.config import preset
from abacus_ray.evaluation.aggregate import wilson_interval
from abacus_ray.evaluation.claims import NOT_SHOWN, SHOWN, judge
from abacus_ray.evaluation.offset_reach import format_offset_table, offset_table, positions_end
from abacus_ray.evaluation.regions import region_of
from abacus_ray.evaluation.results import config_columns, read_cells, write_cells
from abacus_ray.storage import on_disk

PER_CELL = 300


def _rows(k: int, correct: dict[int, int], per_cell: int = PER_CELL) -> list[dict]:
    """One model with offset k on size-5 addition: the 1..5 square at 99 %, then `correct` per diagonal length."""
    cfg = preset("tiny", [f"model.max_k={k}", f"name=fig10_k/max_k={k}"])
    model_id = hashlib.sha256(f"k{k}".encode()).hexdigest()
    cells = [(i, j, round(0.99 * per_cell)) for i in range(1, 6) for j in range(1, 6)]
    cells += [(n, n, c) for n, c in correct.items()]
    return [{"model_id": model_id, "run_id": f"fig10_k/max_k={k}", "checkpoint": None, "task": "add", "i": i, "j": j,
             "region": region_of("add", i, j, 5), "n_train": 5, "n": per_cell, "n_correct": c,
             "accuracy": c / per_cell, "n_first_correct": c, "per_cell": per_cell, "eval_seed": 0,
             "engine": "teacher", "recurrences": 1, "require_eos": True, "scoring": "exact", "precision": "fp32",
             "seconds": 0.01, "device": "cpu", "evaluated_at": "2026-01-01T00:00:00+00:00", **config_columns(cfg)}
            for i, j, c in cells]


def _cells(tmp_path, window_k6=(60, 30, 15), k12_window=(20, 10, 5), k12_rest=3):
    lengths = range(6, 31)
    k3 = {n: (150 if n < 9 else 0) for n in lengths}  # 0 from 9 = 5 + 3 + 1
    k6 = {n: (200 if n < 9 else dict(zip((9, 10, 11), window_k6, strict=True)).get(n, 0)) for n in lengths}
    k12 = {n: (200 if n < 9 else dict(zip((9, 10, 11), k12_window, strict=True)).get(n, k12_rest if n < 18 else 0))
           for n in lengths}
    # written out of k order: the table sorts by k, not by model id or file order
    write_cells(on_disk(tmp_path / "results"), _rows(12, k12) + _rows(3, k3) + _rows(6, k6))
    return read_cells(on_disk(tmp_path / "results"))


def test_rows_are_in_k_order_with_intervals_and_the_trained_positions_end(tmp_path):
    cells = _cells(tmp_path)
    table = offset_table(cells)
    assert table["k"].tolist() == [3, 6, 12]
    assert table["end"].tolist() == [positions_end(5, k) for k in (3, 6, 12)] == [9, 12, 18]
    assert table["zero_from"].tolist() == [9, 12, 18]
    k3_id = cells[(cells["model.max_k"] == 3) & (cells["region"] == "id")]
    p, lo, hi = table["id"].iloc[0]
    assert p == pytest.approx(k3_id["n_correct"].sum() / k3_id["n"].sum())
    assert (lo, hi) == pytest.approx(wilson_interval(int(k3_id["n_correct"].sum()), int(k3_id["n"].sum())))
    text = format_offset_table(table).splitlines()
    assert "trained positions end" in text[0] and "ID % [95 % CI]" in text[0]
    assert [line.split()[0] for line in text[1:]] == ["3", "6", "12"]


def test_fig10s_claim_compares_the_largest_and_smallest_k_between_their_trained_positions(tmp_path):
    cells = _cells(tmp_path)
    v = judge(figures.claim("fig10_k"), cells)
    assert v.verdict == SHOWN and "\n" not in v.line()
    # the lengths k = 3 has no trained rows for and k = 12 has: 9 = 5 + 3 + 1 to 17, 300 problems each
    assert "at 9-17 digits, past k = 3's trained positions, before k = 12's" in v.evidence
    assert f"largest k (max_k = 12) (ID 99.0 %) 2.0 % [1.5, 2.6] (53/{9 * PER_CELL:,})" in v.evidence
    assert f"smallest k (max_k = 3) (ID 99.0 %) 0.0 % [0.0, 0.1] (0/{9 * PER_CELL:,})" in v.evidence


def test_a_difference_inside_the_intervals_is_not_claimed(tmp_path):
    cells = _cells(tmp_path, k12_window=(1, 0, 0), k12_rest=0)  # 1 of 2,700: no different from k = 3's 0
    v = judge(figures.claim("fig10_k"), cells)
    assert v.verdict == NOT_SHOWN and "0.0 % [0.0, 0.2] (1/2,700)" in v.evidence and "overlap" in v.evidence


def test_summary_fig10_prints_the_table_then_the_conclusion(tmp_path, capsys):
    _cells(tmp_path)
    assert cli_main(["summary", str(tmp_path / "results"), "--fig10"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert "trained positions end" in out[0] and out[-1].startswith("Conclusion (Fig. 10): ") and len(out) == 5
    assert ": shown — i = j: at 9-17 digits" in out[-1]


def test_fig10_view_refuses_models_other_than_abacus(tmp_path, capsys):
    rows = _rows(3, {6: 10})
    for r in rows:
        r["model.positions"] = "fire"
    write_cells(on_disk(tmp_path / "results"), rows)
    assert cli_main(["summary", str(tmp_path / "results"), "--fig10"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "compares Abacus offsets only" in err
