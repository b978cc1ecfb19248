"""Table 2 — sorting across architectures.

"Abacus+FIRE models, ST 8 x 1, ST w/ II 8 x 1 and LT 1 x 8, trained on up to 10 x 10 sorting; exact
string match and min. element only accuracy on the 30 x 30 grid." The min.-element score is the
`n_first_correct` column of the results.

Tiny: 2-deep architectures on up to 3 x 3 sorting, 1..6 square, one seed.
"""

from abacus_ray.config.model import looped, standard, standard_ii
from abacus_ray.evaluation.claims import MAX, Arm, Cells, Claim
from abacus_ray.sweep import CPU_SCALE, Scale, Sweep

SWEEP = Sweep(
    name="table2_sorting_arch",
    caption=__doc__.splitlines()[0],
    base={
        "task.name": "sort",
        "task.train_max_len": 10,
        "task.train_max_array": 10,
        "train.micro_batch": 32,
        "model.positions": "abacus+fire",
    },
    variants=[standard(8), standard_ii(8), looped(1, 8)],
    seeds=3,
    grids=("paper-sorting",),
    tiny=Scale(
        overrides={
            **CPU_SCALE,
            "task.train_max_len": 3,
            "task.train_max_array": 3,
            "train.micro_batch": 64,
        },
        variants=[standard(2), standard_ii(2), looped(1, 2)],
        seeds=1,
        grids=("cells:1-6x1-6",),
    ),
)

CLAIM = Claim(
    "Table 2",
    "the looped transformer finds the minimum element past the training sizes more often than the "
    "standard one",
    Cells("all OOD 30 x 30, first element", view="all_ood_30"),
    paper=(
        "all OOD 30 x 30, min. element: LT 68.51 %, ST 49.73 %; exact match: ST 4.48 %, LT 2.60 %"
    ),
    score="first",
    pairs=(
        (
            Arm("LT", {"model.recurrences": MAX}),
            Arm("ST", {"model.recurrences": 1, "model.injection": "first"}),
        ),
    ),
)
