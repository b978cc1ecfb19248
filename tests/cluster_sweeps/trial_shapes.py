"""Trial variants from resource shapes, for the scheduling sweeps run on the test clusters."""


def one_model_each(kinds: list[tuple[dict, int]]) -> list[dict]:
    """`n` variants of each `(shape, n)`, in order, each with a learning rate of its own: equal configs
    would train equal weights, and equal weights share one model id (one row per cell, not one per trial)."""
    variants: list[dict] = []
    for shape, n in kinds:
        for _ in range(n):
            variants.append({**shape, "train.lr": round(1e-3 - 2e-5 * len(variants), 6)})
    return variants
