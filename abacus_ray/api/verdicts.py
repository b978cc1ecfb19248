"""The verdicts of results: each sweep's figure claim (or its own `CLAIM`) judged on its cells,
a neutral comparison of any swept key, and the Markdown table of a storage root's sweeps.

`abacus-ray summary` prints what this computes; `abacus_ray.api.verdict(...)` and
`abacus_ray.api.claims_table(...)` return it. The rules that decide a verdict are the claims
module's (`abacus_ray/evaluation/claims.py`); this module finds which claim a directory answers
and at which scale it ran.
"""

from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING

import pyarrow as pa

from abacus_ray import figures, storage
from abacus_ray.config import PRESETS, preset
from abacus_ray.evaluation.claim_record import claim_from_dict
from abacus_ray.evaluation.claims import Claim, Verdict, judge, per_seed
from abacus_ray.evaluation.locate import read_each, results_dirs
from abacus_ray.evaluation.results import part_files, read_cells_table
from abacus_ray.storage import Location
from abacus_ray.sweep_dir import SweepDir

if TYPE_CHECKING:
    import pandas as pd

FIG10 = "fig10_k"


def read_results(results: Location) -> tuple[pd.DataFrame, list[tuple[Location, pd.DataFrame]]]:
    """Every cell row under RESULTS as one DataFrame, and each results directory (one, or a storage
    root's several sweeps') with its own rows."""
    def read(d: Location) -> pa.Table:
        sweep = SweepDir.holding(d)
        if sweep is not None and storage.exists(sweep.spec):
            sweep.read_spec()  # a damaged sweep.json is refused here, with its results
        return read_cells_table(d)

    # a root that holds no results is named itself
    tables = read_each(results_dirs(results, flag=""), read, "summary")
    per_dir = [(d, t.to_pandas()) for d, t in tables]
    if len(per_dir) == 1:
        return per_dir[0][1], per_dir
    return pa.concat_tables(
        [t for _, t in tables], promote_options="permissive"
    ).to_pandas(), per_dir


def without_seed(name: object) -> object:
    """A run's name without its `seed=N` part: the name its seeds share."""
    return re.sub(r"_?seed=\d+", "", name) if isinstance(name, str) else name


def claim_for(sweep: str | None, cells: pd.DataFrame) -> Claim | None:
    """The claim that a sweep's rows answer: the claim of the figure named `sweep`, else of the
    sweep the rows name (`name` = NAME/trial), else the claim its `sweep.json` records (a sweep
    file's own `CLAIM`); None where nothing claims them."""
    names = [sweep] if sweep else []
    if "name" in cells.columns:
        names += sorted({str(n).split("/")[0] for n in cells["name"].dropna()})
    found = next((c for c in map(figures.claim, names) if c is not None), None)
    if found is not None or "results_dir" not in cells.columns or cells.empty:
        return found
    return recorded_claim(cells["results_dir"].iloc[0])


def recorded_claim(results: Location) -> Claim | None:
    """The claim the `sweep.json` of `results`' sweep records, if any."""
    sweep = SweepDir.holding(results)
    if sweep is None or not storage.is_file(sweep.spec):
        return None
    data = sweep.read_spec().get("claim")
    if data is None:
        return None
    try:
        return claim_from_dict(data)
    except ValueError as e:
        raise ValueError(f"{sweep.spec}: its claim: {e}") from None


def verdict(results: Location, cells: pd.DataFrame) -> Verdict | None:
    """The verdict of the figure claim that `results` answer, or None where no figure claims them;
    judged at the scale the sweep ran at (a paper-scale threshold binds only there)."""
    sweep = SweepDir.holding(results)
    claim = claim_for(sweep.name if sweep is not None else None, cells) or recorded_claim(results)
    if claim is None:
        return None
    return judge(claim, cells, paper_scale=_paper_scale(results, cells))


def comparison(cells: pd.DataFrame, key: str) -> str:
    """`--compare KEY`: one line per value of `key`, with its models' pooled ID and OOD rates."""
    from abacus_ray.evaluation.claims import Cells, in_cells, rate

    if key not in cells.columns:
        raise ValueError(f"--compare: {key!r} is not a column of these results")
    lines = [f"{key}: ID and OOD exact match pooled over each value's models (95 % Wilson)"]
    for value, rows in cells.groupby(key, sort=True, dropna=False):
        parts = [f"{key} = {value}: {rows['model_id'].nunique()} model(s)"]
        for label, view in (("ID", "id"), ("OOD", "ood")):
            picked = in_cells(rows, Cells(label, view=view))
            if picked.empty:
                parts.append(f"{label} -")
                continue
            r = rate(picked, label, "exact")
            spread = (f", seeds {100 * min(r.seeds):.1f}-{100 * max(r.seeds):.1f} %"
                      if r.seeds else "")
            parts.append(r.text() + spread)
        lines.append("; ".join(parts))
    return "\n".join(lines)


def offsets_verdict(results: Location, cells: pd.DataFrame) -> Verdict:
    """Fig. 10's comparison of the largest offset k against the smallest: Fig. 10's own verdict
    (with the paper's value) where the rows are its sweep's, else the same comparison in neutral
    words: another experiment (a k sweep on subtraction) is not the paper's size-20 addition."""
    claim = figures.claim(FIG10)
    sweep = SweepDir.holding(results)
    if claim_for(sweep.name if sweep is not None else None, cells) != claim:
        claim = dataclasses.replace(claim, figure="offsets k", paper="")
    return judge(claim, cells, paper_scale=_paper_scale(results, cells))


def _paper_scale(results: Location, cells: pd.DataFrame) -> bool:
    return scale_of(_sweep_spec(results), cells) == "paper"


def seed_verdicts(results: Location, cells: pd.DataFrame, found: Verdict) -> str:
    """Each training seed's verdict alone (`seed 0: shown, ...` and how many differ from the
    pooled one), or "-" for one seed."""
    seeds = per_seed(found.claim, cells, paper_scale=_paper_scale(results, cells))
    if not seeds:
        return "-"
    flips = sum(v != found.verdict for _, v in seeds)
    return (", ".join(f"seed {s}: {v}" for s, v in seeds)
            + f" ({flips} of {len(seeds)} unlike the pooled verdict)")


def sweep_conclusion(results: Location) -> str | None:
    """The `Conclusion:` line of a sweep's results directory (None: no results yet, or no claim)."""
    if not part_files(results):
        return None
    found = verdict(results, read_cells_table(results).to_pandas())
    return found.line() if found is not None else None


def _sweep_spec(results: Location) -> dict | None:
    sweep = SweepDir.holding(results)
    if sweep is None or not storage.exists(sweep.spec):
        return None
    return sweep.read_spec()


def scale_of(spec: dict | None, cells: pd.DataFrame) -> str:
    """The preset a sweep ran at: its `sweep.json`'s, else the preset whose
    model width the rows have."""
    if spec and spec.get("preset"):
        return str(spec["preset"])
    widths = set(cells["model.hidden"].dropna()) if "model.hidden" in cells.columns else set()
    named = [p for p in PRESETS if widths == {preset(p).model.hidden}]
    return named[0] if named else "custom" if widths else "-"


def claims_table(per_dir: list[tuple[Location, pd.DataFrame]]) -> str:
    """A Markdown table, one row per sweep: what its figure claims, what the paper reports and what
    its results decide."""
    lines = [
        "| sweep | figure | claim | paper | verdict | evidence | per seed | scale | trials |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for results, cells in per_dir:
        spec = _sweep_spec(results)
        sweep = SweepDir.holding(results)
        name = sweep.name if sweep is not None else str(results)
        found = verdict(results, cells)
        models = cells["model_id"].nunique()
        trials = (
            f"{models}/{len(spec['trials'])}" if spec and spec.get("trials") else str(models)
        )
        row = (
            [name, found.claim.figure, found.claim.text, found.claim.paper or "-"]
            + [found.verdict, found.evidence, seed_verdicts(results, cells, found)]
            if found
            else [name, "-", "no figure claims this sweep", "-", "-", "-", "-"]
        ) + [scale_of(spec, cells), trials]
        lines.append(_row(row))
    lines += [_row(row) for row in across_rows(per_dir)]
    return "\n".join(lines)


def _row(cells: list) -> str:
    return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"


def across_rows(per_dir: list[tuple[Location, pd.DataFrame]]) -> list[list[str]]:
    """The claims-table rows of claims that span sweeps (`figures.across`), each judged on its
    sweeps' rows together where all of them are present."""
    import pandas as pd

    by_name = {}
    for results, cells in per_dir:
        sweep = SweepDir.holding(results)
        if sweep is not None:
            by_name[sweep.name] = (results, cells)
    rows = []
    for name, (results, cells) in sorted(by_name.items()):
        spans = figures.across(name)
        if spans is None or any(s not in by_name for s in spans.sweeps):
            continue
        both = pd.concat([cells, *(by_name[s][1] for s in spans.sweeps)], ignore_index=True)
        found = judge(spans.claim, both, paper_scale=_paper_scale(results, cells))
        c = found.claim
        rows.append([" + ".join([name, *spans.sweeps]), c.figure, c.text, c.paper or "-",
                     found.verdict, found.evidence, seed_verdicts(results, both, found),
                     scale_of(_sweep_spec(results), cells), str(both["model_id"].nunique())])
    return rows


def cells_of(results: str) -> pd.DataFrame:
    """Every cell row under `results` (a results directory, a sweep root or a storage root: a path
    or a URI) as one DataFrame."""
    return read_results(storage.probe(results, "RESULTS", write=False))[0]


def verdict_of(results: str) -> Verdict | None:
    """The verdict of the claim one sweep's results answer (its figure's, or its sweep file's
    own `CLAIM`), judged at the scale it ran at; None where nothing claims them."""
    loc = storage.probe(results, "RESULTS", write=False)
    _, per_dir = read_results(loc)
    if len(per_dir) > 1:
        raise ValueError(f"RESULTS: {loc} holds {len(per_dir)} sweeps' results; give one sweep's, "
                         "or read them all with claims_table")
    return verdict(*per_dir[0])


def claims_of(root: str) -> str:
    """The Markdown table of every sweep under `root` (and every claim that spans two of them):
    claim, paper, verdict, evidence, per seed, scale, trials."""
    return claims_table(read_results(storage.probe(root, "RESULTS", write=False))[1])
