"""Verdicts where a user reads them: `abacus-ray summary`'s Conclusion line and storage-root table
(per-seed verdicts, claims across sweeps, a sweep file's own CLAIM, `--compare`, `--fig10`), the
dashboard's Claims table and the reach over seeds, on made-up results written as sweeps write them.
The claims themselves: tests/test_claims.py."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest
from test_claims import VERSUS, _expanded_columns, _model, _offsets, _ood, _table

from abacus_ray import figures
from abacus_ray.cli import main as cli_main
from abacus_ray.config import preset
from abacus_ray.evaluation.claims import NOT_SHOWN, SHOWN, select
from abacus_ray.evaluation.results import config_columns, write_cells
from abacus_ray.storage import on_disk


def _write_fig10_sweep(root, k12_window: int = 75, preset_name: str = "tiny",
                       figure: str = "fig10_k"):
    """A Fig. 10 sweep root as a sweep leaves it (sweep.json, results/), with made-up rows whose run
    names begin with `figure`."""
    rows = []
    for r in _offsets(k12_window).to_dict("records"):
        k = r["model.max_k"]
        cfg = preset("tiny", [f"model.max_k={k}", f"name={figure}/max_k={k}"])
        rows.append(
            {k: v for k, v in r.items() if not k.startswith(("model.", "task.", "name", "seed"))}
            | {
                "run_id": cfg.name,
                "require_eos": True,
                "scoring": "exact",
                "engine": "teacher",
                "precision": "fp32",
                "seconds": 0.01,
                "device": "cpu",
                "evaluated_at": "2026-01-01T00:00:00+00:00",
                **config_columns(cfg),
            }
        )
    root.mkdir(parents=True)
    (root / "sweep.json").write_text(json.dumps({"preset": preset_name, "trials": [{}, {}]}))
    write_cells(on_disk(root / "results"), rows)
    return root


def test_summary_of_a_sweep_root_ends_with_its_conclusion(tmp_path, capsys):
    root = _write_fig10_sweep(tmp_path / "fig10_k")
    for argv in ([str(root)], [str(root / "results"), "--seeds"], [str(root), "--fig10"]):
        assert cli_main(["summary", *argv]) == 0
        last = capsys.readouterr().out.strip().splitlines()[-1]
        assert (
            last.startswith("Conclusion (Fig. 10): ")
            and ": shown — i = j: at 7-17 digits" in last
        ), argv


def test_summary_of_a_storage_root_prints_one_row_per_sweep(tmp_path, capsys):
    _write_fig10_sweep(tmp_path / "fig10_k")
    other = _write_fig10_sweep(tmp_path / "mine", k12_window=0, preset_name="paper")
    assert cli_main(["summary", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    table = (
        out[out.index("| sweep | figure | claim | paper | verdict | evidence | per seed | scale | trials |") :]
        .strip()
        .splitlines()
    )
    rows = {r.split(" | ")[0].strip("| "): r.split(" | ") for r in table[2:]}
    assert len(table) == 4 and set(rows) == {"fig10_k", "mine"}
    assert rows["fig10_k"][1:2] == ["Fig. 10"] and rows["fig10_k"][4] == SHOWN
    # the paper's value sits beside ours, out of the claim's words
    fig10 = figures.claim("fig10_k")
    assert rows["fig10_k"][2:4] == [fig10.text, fig10.paper] and fig10.paper
    assert "0.0 % [0.0, 0.1] (0/3,300)" in rows["fig10_k"][5] and rows["fig10_k"][6:] == [
        "-",
        "tiny",
        "2/2 |",
    ]
    # a sweep root of another name is judged by the figure its rows name (fig10_k/...), at its own
    # scale
    assert (
        rows["mine"][1] == "Fig. 10" and rows["mine"][4] == NOT_SHOWN and rows["mine"][7] == "paper"
    )
    assert (other / "sweep.json").exists() and "Conclusion (" not in out


def test_a_storage_root_of_one_sweep_gets_the_table_too(tmp_path, capsys):
    _write_fig10_sweep(tmp_path / "fig10_k")
    assert cli_main(["summary", str(tmp_path)]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("| fig10_k | Fig. 10 | ") and last.endswith(" | - | tiny | 2/2 |")


@pytest.mark.slow  # over a second: out of the fast tier
def test_the_dashboard_index_lists_each_sweeps_verdict_linked_to_its_page(tmp_path, capsys):
    from dashboards.build import build_site

    _write_fig10_sweep(tmp_path / "fig10_k")
    _write_fig10_sweep(tmp_path / "fig11_large_k", k12_window=0, figure="fig11_large_k")
    assert cli_main(["dashboard", str(tmp_path), "--out", str(tmp_path / "site")]) == 0
    html = (tmp_path / "site" / "index.html").read_text()
    claims = html[html.index("<h2>Claims</h2>") : html.index("<h2>Sweeps</h2>")]
    rows = re.findall(r"<tr>(.*?)</tr>", claims)[1:]  # after the header
    assert len(rows) == 2
    assert 'href="sweep-fig10_k.html"' in rows[0]
    assert "<td>Fig. 10</td><td>a larger Abacus" in rows[0]
    assert re.findall(r"<th>(.*?)</th>", claims) == [
        "Sweep", "Figure", "Claim", "Paper", "Verdict", "Ours"
    ]
    paper = figures.claim("fig10_k").paper
    assert f"n + k + 1 digits</td><td>{paper}</td><td>shown</td>" in rows[0]
    assert "(825/3,300)" in rows[0]
    assert 'href="sweep-fig11_large_k.html"' in rows[1] and "<td>Fig. 11</td>" in rows[1]
    assert "<td>not shown at this scale</td>" in rows[1]
    plain = build_site(on_disk(tmp_path), tmp_path / "plain").read_text()  # no claim finder: no section
    assert "<h2>Claims</h2>" not in plain and "<h2>Sweeps</h2>" in plain


def test_a_reach_is_reported_over_seeds_never_as_the_best_seed(tmp_path, capsys):
    from abacus_ray.evaluation.aggregate import reach_over_seeds

    def seed(s: int, reach: int) -> list[dict]:
        diag = {(n, n): (95 if n <= reach else 10) for n in range(1, 13)}
        rows = _model(diag, seed=s, **{"model.positions": "abacus"})
        return [r | {"name": f"fig/base_seed={s}"} for r in rows]

    rows = _table(seed(0, 9), seed(1, 6), seed(2, 11))
    spread = reach_over_seeds(rows.assign(name=rows["name"].str.replace(r"_seed=\d", "", regex=True)),
                              ["name"])
    assert spread[["reach_min", "reach_median", "reach_max", "runs"]].values.tolist() == [[6, 9, 11, 3]]
    _write_fig10_sweep(tmp_path / "fig10_k")
    assert cli_main(["summary", str(tmp_path / "fig10_k"), "--seeds", "--diagonal"]) == 0
    out = capsys.readouterr().out
    assert "reach_min  reach_median  reach_max  runs" in out


def test_each_seeds_verdict_alone_shows_how_often_it_flips():
    from abacus_ray.evaluation.claims import per_seed

    rows = _table(*(_model(_ood(c), seed=s, **{"model.positions": "abacus"})
                    for s, c in enumerate((60, 40, 3))),
                  *(_model(_ood(2), seed=s, **{"model.positions": "fire"}) for s in range(3)))
    assert per_seed(VERSUS, rows) == [(0, SHOWN), (1, SHOWN), (2, NOT_SHOWN)]
    assert per_seed(VERSUS, rows[rows["seed"] == 0]) == []  # one seed: nothing to flip


@pytest.mark.parametrize("name", [n for n in figures.names() if figures.across(n) is not None])
def test_a_claim_across_sweeps_selects_from_its_sweeps_together(name):
    spans = figures.across(name)
    for preset_name in ("tiny", "paper"):
        trials = pd.concat([_expanded_columns(n, preset_name) for n in (name, *spans.sweeps)])
        for a, b in spans.claim.pairs:
            rows_a, rows_b = select(trials, a)[0], select(trials, b)[0]
            assert not rows_a.empty and not rows_b.empty, (name, preset_name, a.label, b.label)
            # matched: the two arms differ in what they select and nothing else but the run's name
            keep = [c for c in trials.columns if c not in ("name", *a.where, *b.where)]
            for _, group in trials.groupby(list(spans.claim.within)):
                left, right = select(group, a)[0][keep], select(group, b)[0][keep]
                assert left.reset_index(drop=True).equals(right.reset_index(drop=True)), name


def _write_sweep(root, name: str, ood: dict[str, int]) -> None:
    """Sweep `name`'s tiny Abacus trials with made-up rows: `ood[architecture]` of 100 right in each
    OOD cell, all ID cells right."""
    from abacus_ray.config.model import architecture_name

    rows = []
    for t in figures.figure(name).expand("tiny"):
        m = t.config.model
        if m.positions != "abacus":
            continue
        c = ood[architecture_name(m.recurrences, m.injection)]
        for r in _model(_ood(c), **{"name": t.config.name}, seed=t.config.seed):
            rows.append({k: v for k, v in r.items() if not k.startswith(("model.", "task."))}
                        | {"run_id": t.config.name, "require_eos": True, "scoring": "exact",
                           "engine": "teacher", "precision": "fp32", "seconds": 0.01,
                           "device": "cpu", "evaluated_at": "2026-01-01T00:00:00+00:00",
                           **config_columns(t.config)})
    (root / name).mkdir(parents=True)
    (root / name / "sweep.json").write_text(json.dumps({"preset": "tiny", "trials": [{}] * 9}))
    write_cells(on_disk(root / name / "results"), rows)


def test_fig16_is_read_against_fig3s_masked_runs_where_both_ran(tmp_path, capsys):
    _write_sweep(tmp_path, "fig16_no_mask", {"ST": 10, "ST w/ II": 20, "LT": 5})
    assert cli_main(["summary", str(tmp_path)]) == 0
    assert "fig16_no_mask + fig3_embeddings" not in capsys.readouterr().out  # Fig. 3 not run yet
    _write_sweep(tmp_path, "fig3_embeddings", {"ST": 40, "ST w/ II": 50, "LT": 30})
    assert cli_main(["summary", str(tmp_path)]) == 0
    row = next(r for r in capsys.readouterr().out.splitlines()
               if r.startswith("| fig16_no_mask + fig3_embeddings | Fig. 16 | "))
    cells = row.split(" | ")
    assert cells[4] == SHOWN, row
    assert "recurrences = 1, injection = every: masked (Fig. 3) (ID 100.0 %) 50.0 %" in cells[5]
    assert "vs unmasked (ID 100.0 %) 20.0 %" in cells[5]


def test_summary_fig10_of_another_experiment_speaks_no_words_of_the_papers(tmp_path, capsys):
    root = _write_fig10_sweep(tmp_path / "my_k_sweep", figure="my_k_sweep")
    assert cli_main(["summary", str(root), "--fig10"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("Conclusion (offsets k): a larger Abacus offset k solves lengths past")
    assert ": shown — " in last and "(paper:" not in last and "size-20" not in last
    fig10 = _write_fig10_sweep(tmp_path / "fig10_k")
    assert cli_main(["summary", str(fig10), "--fig10"]) == 0
    assert "(paper: read from the plot" in capsys.readouterr().out.strip().splitlines()[-1]


OWN_SWEEP = '''
from abacus_ray.evaluation.claims import MAX, MIN, Arm, Cells, Claim
from abacus_ray.sweep import Sweep

SWEEP = Sweep(name="my_k_sweep", caption="k = 1 against k = 12", base={}, seeds=1,
              axes={"model.max_k": [1, 12]})
CLAIM = Claim("My claim", "a larger k reaches further", Cells("i = j", past_positions=True),
              pairs=((Arm("largest k", {"model.max_k": MAX}),
                      Arm("smallest k", {"model.max_k": MIN})),))
'''


def test_a_sweep_files_own_claim_is_judged_as_a_figures(tmp_path, capsys):
    """A CLAIM beside a sweep file's SWEEP: shown in its dry run, recorded in sweep.json, and judged
    by summary and the dashboard (it used to be ignored)."""
    from abacus_ray.evaluation.claim_record import claim_from_dict

    path = tmp_path / "my_k_sweep.py"
    path.write_text(OWN_SWEEP)
    assert cli_main(["sweep", str(path), "--preset", "tiny", "--dry-run",
                     "--storage", str(tmp_path / "runs")]) == 0
    recorded = json.loads(capsys.readouterr().out)["claim"]
    assert claim_from_dict(recorded).figure == "My claim"
    root = _write_fig10_sweep(tmp_path / "runs" / "my_k_sweep", figure="my_k_sweep")
    record = json.loads((root / "sweep.json").read_text()) | {"claim": recorded}
    (root / "sweep.json").write_text(json.dumps(record))
    assert cli_main(["summary", str(root)]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("Conclusion (My claim): a larger k reaches further: shown — i = j: ")
    assert cli_main(["dashboard", str(tmp_path / "runs"), "--out", str(tmp_path / "site")]) == 0
    html = (tmp_path / "site" / "index.html").read_text()
    assert "<td>My claim</td><td>a larger k reaches further</td>" in html


def test_every_figures_claim_survives_its_json():
    from abacus_ray.evaluation.claim_record import claim_from_dict, claim_to_dict

    for name in figures.names():
        claim = figures.claim(name)
        assert claim_from_dict(json.loads(json.dumps(claim_to_dict(claim)))) == claim, name
    with pytest.raises(ValueError, match="^not a claim"):
        claim_from_dict({"figure": "x"})


def test_summary_compare_gives_any_swept_key_with_intervals_and_no_verdict(tmp_path, capsys):
    root = _write_fig10_sweep(tmp_path / "my_k_sweep", figure="my_k_sweep")
    assert cli_main(["summary", str(root), "--compare", "model.max_k"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert out[1].startswith("model.max_k = 1: 1 model(s); ID 99.0 % [")
    assert out[2].startswith("model.max_k = 12: 1 model(s); ID 99.0 % [") and "OOD " in out[2]
    assert not any(line.startswith("Conclusion") for line in out)
    assert cli_main(["summary", str(root), "--compare", "model.nope"]) == 2
