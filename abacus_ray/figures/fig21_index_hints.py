"""Fig. 21 — index hints.

"LT, ST and ST w/ II with randomised FIRE trained on size-20 addition where every digit carries a
circular index hint" (Zhou et al. 2024). Randomised FIRE draws positions from 0..127 (the official
README example; the paper's value is unknown, docs/official-code.md §11.3). `--hints noncyclic`
gives the variant the official generator lacks.

The paper's point is the contrast with Abacus (Fig. 3: ST w/ II with Abacus, 97.9 % OOD), so the
sweep trains that model beside the trio, on the same data without hints: the claim's positive
control. A trio under 25 % says nothing where the Abacus model is under 25 % too.

Tiny: the depth-2 trio and the Abacus ST w/ II control on size-5 addition, one seed.
"""

from abacus_ray.config.model import PAPER_ARCHS, TINY_ARCHS, standard_ii
from abacus_ray.evaluation.claims import MAX, Arm, Cells, Claim
from abacus_ray.sweep import CPU_SCALE, Flag, Scale, Sweep

# The positive control: Abacus positions on plain addition, as in Fig. 3
ABACUS = {"model.positions": "abacus", "task.index_hints": "none", "model.fire_max_length": 0}
FIRE = {"model.positions": "fire"}

SWEEP = Sweep(
    name="fig21_index_hints",
    caption=__doc__.splitlines()[0],
    base={
        "task.name": "add",
        "task.train_max_len": 20,
        "task.index_hints": "cyclic",
        "model.positions": "fire",
        "model.fire_max_length": 128,
    },
    variants=[*PAPER_ARCHS, {**standard_ii(16), **ABACUS}],
    seeds=3,
    grids=("paper-addition",),
    tiny=Scale(
        overrides={
            **CPU_SCALE,
            "task.train_max_len": 5,
            "model.fire_max_length": 64,
        },
        variants=[*TINY_ARCHS, {**standard_ii(2), **ABACUS}],
        seeds=1,
        grids=("tiny-addition",),
    ),
    flags=(Flag("--hints", "task.index_hints", "index hint style: cyclic or noncyclic"),),
)

CLAIM = Claim(
    "Fig. 21",
    "randomised FIRE with circular index hints stays far from Abacus: < 25 % OOD for each "
    "architecture",
    Cells("OOD", view="ood"),
    paper="OOD: 6.0 / 12.3 / 5.8 % for LT / ST / ST w/ II, 13.8 / 14.6 / 9.9 % without hints",
    threshold=0.25,
    below=True,
    arms=(
        Arm("LT", {**FIRE, "model.recurrences": MAX}),
        Arm("ST", {**FIRE, "model.recurrences": 1, "model.injection": "first"}),
        Arm("ST w/ II", {**FIRE, "model.recurrences": 1, "model.injection": "every"}),
    ),
    control=Arm("Abacus ST w/ II", {"model.positions": "abacus"}),
)
