"""A claim as JSON: what `sweep.json` records of a sweep file's own `CLAIM` (`SweepDir.spec_of`),
so that `summary` and the dashboard judge a sweep of one's own as they judge a figure's."""

from __future__ import annotations

from typing import Any

from abacus_ray.evaluation.claims import Arm, Cells, Claim, Pick


def claim_to_dict(claim: Claim) -> dict[str, Any]:
    """`claim` as plain JSON values (a `Pick` as {"pick": "max"}); `claim_from_dict` reads it."""

    def arm(a: Arm) -> dict[str, Any]:
        return {"label": a.label, "where": {
            c: ({"pick": v.which} if isinstance(v, Pick) else list(v) if isinstance(v, tuple)
                else v) for c, v in a.where.items()}}

    return {
        "figure": claim.figure, "text": claim.text, "paper": claim.paper,
        "cells": {"label": claim.cells.label, "view": claim.cells.view,
                  "diagonal": claim.cells.diagonal, "lengths": list(claim.cells.lengths),
                  "past_positions": claim.cells.past_positions},
        "pairs": [[arm(a), arm(b)] for a, b in claim.pairs],
        "arms": [arm(a) for a in claim.arms],
        "threshold": claim.threshold, "below": claim.below, "best": claim.best,
        "within": list(claim.within), "score": claim.score,
        "control": arm(claim.control) if claim.control is not None else None,
    }


def claim_from_dict(data: Any) -> Claim:
    """The `Claim` `claim_to_dict` wrote; anything else is a ValueError saying what is wrong."""
    try:
        def arm(d: dict[str, Any]) -> Arm:
            return Arm(str(d["label"]), {
                c: (Pick(v["pick"]) if isinstance(v, dict) else tuple(v) if isinstance(v, list)
                    else v) for c, v in d["where"].items()})

        cells = data["cells"]
        return Claim(
            str(data["figure"]), str(data["text"]),
            Cells(str(cells["label"]), cells["view"], bool(cells["diagonal"]),
                  tuple(cells["lengths"]), bool(cells["past_positions"])),
            paper=str(data["paper"]), pairs=tuple((arm(a), arm(b)) for a, b in data["pairs"]),
            arms=tuple(arm(a) for a in data["arms"]), threshold=data["threshold"],
            below=bool(data["below"]), best=bool(data["best"]), within=tuple(data["within"]),
            score=str(data["score"]),
            control=arm(data["control"]) if data["control"] is not None else None)
    except (KeyError, TypeError, AttributeError) as e:
        raise ValueError(f"not a claim ({type(e).__name__}: {e})") from None
