"""Everything the pages are made from, computed once per build from the labelled cell rows.

`entries` has one row per entry (model x eval settings) with its config, labels and counts; `groups`
one row per seed group; `means` the region means per entry; `spreads` the seed-group statistics of
exact-match accuracy and of first-answer-token accuracy (sorting's "min. elem. only").
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from dashboards.bars import entry_means, group_spreads, group_views
from dashboards.data import condition_columns
from dashboards.models import ModelInfo, model_infos

# Condition columns shown under their own selector (the paper's axes); other
# varying ones form "variant".
DIM_COLUMNS = {
    "model.positions": "positions",
    "model.max_k": "k",
    "task.train_max_len": "train_len",
}
ARCH_COLUMNS = ("model.layers", "model.recurrences", "model.injection")
EVAL_COLUMNS = ("per_cell", "eval_seed", "require_eos", "scoring")


@dataclass
class SiteData:
    cells: pd.DataFrame
    entries: pd.DataFrame
    groups: pd.DataFrame
    means: pd.DataFrame
    spreads: dict[str, dict[int, dict[str, dict]]]
    infos: dict[str, ModelInfo]

    @classmethod
    def from_cells(cls, cells: pd.DataFrame) -> SiteData:
        means = entry_means(cells)
        spreads = {"accuracy": group_views(group_spreads(means)),
                   "first_accuracy": group_views(group_spreads(means, "first_accuracy"))}
        counts = cells.groupby("entry").agg(cells_n=("i", "size"), problems_n=("n", "sum"),
                                            last_evaluated=("evaluated_at", "max"))
        entries = cells.drop_duplicates("entry").set_index("entry").join(counts).reset_index()
        entries = entries.drop(
            columns=[
                "i",
                "j",
                "region",
                "n",
                "n_correct",
                "accuracy",
                "n_first_correct",
                "seconds",
                "evaluated_at",
            ],
            errors="ignore",
        ).sort_values("entry")
        groups = entries.drop_duplicates("group").sort_values("group").reset_index(drop=True)
        return cls(cells=cells, entries=entries.reset_index(drop=True), groups=groups, means=means,
                   spreads=spreads, infos=model_infos(cells))

    def sweep(self, name: str) -> SiteData:
        """The same data restricted to one sweep (model infos are shared)."""
        cells = self.cells[self.cells["sweep"] == name]
        keep_e, keep_g = set(cells["entry"]), set(cells["group"])
        return SiteData(
            cells=cells,
            entries=self.entries[self.entries["entry"].isin(keep_e)].reset_index(drop=True),
            groups=self.groups[self.groups["group"].isin(keep_g)].reset_index(drop=True),
            means=self.means[self.means["entry"].isin(keep_e)],
            spreads={
                m: {g: v for g, v in s.items() if g in keep_g} for m, s in self.spreads.items()
            },
            infos=self.infos,
        )

    def varying(self, columns=None) -> list[str]:
        """Condition columns whose value differs between the entries (the sweep's axes)."""
        cols = condition_columns(self.entries) if columns is None else columns
        return [c for c in cols if c in self.entries.columns
                and self.entries[c].astype(str).nunique(dropna=False) > 1]

    def variant_columns(self) -> list[str]:
        """Varying condition columns not covered by a named selector (e.g. train.throttle).

        A column that the named selectors already determine (the tiny preset derives
        `model.abacus_table` from k) adds no condition and is left out.
        """
        named = [c for c in (*DIM_COLUMNS, *ARCH_COLUMNS, "task.name") if c in self.entries.columns]
        keys = (self.entries[named].astype(str).agg("\u0001".join, axis=1) if named
                else pd.Series("", index=self.entries.index))
        out = []
        for c in self.varying():
            if c in named:
                continue
            if self.entries[c].astype(str).groupby(keys).nunique().max() > 1:
                out.append(c)
        return out
