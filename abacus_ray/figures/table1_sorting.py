"""Table 1 — sorting with FIRE, Abacus and Abacus+FIRE.

"Exact string match accuracy of ST 8 x 1 models trained on arrays of up to 10 numbers of up to 10
digits, evaluated on the 30 x 30 grid (max digits x array length): OOD in number length, OOD in
array length, all OOD." Micro-batch 32 as in the official sorting shell
(docs/official-code.md §6.5).

Tiny: ST 2 x 1 on up to 3 numbers of up to 3 digits, 1..6 square, one seed.
"""

from abacus_ray.config.model import standard
from abacus_ray.evaluation.claims import Cells, Claim, embedding
from abacus_ray.sweep import CPU_SCALE, Scale, Sweep

SWEEP = Sweep(
    name="table1_sorting",
    caption=__doc__.splitlines()[0],
    base={
        "task.name": "sort",
        "task.train_max_len": 10,
        "task.train_max_array": 10,
        "train.micro_batch": 32,
        **standard(8),
    },
    axes={"model.positions": ["fire", "abacus", "abacus+fire"]},
    seeds=3,
    grids=("paper-sorting",),
    tiny=Scale(
        overrides={
            **CPU_SCALE,
            "task.train_max_len": 3,
            "task.train_max_array": 3,
            "train.micro_batch": 64,
            **standard(2),
        },
        seeds=1,
        grids=("cells:1-6x1-6",),
    ),
)

CLAIM = Claim(
    "Table 1",
    "Abacus sorts arrays of longer numbers than FIRE",
    Cells("OOD in number length", view="ood_digits_30"),
    paper="OOD in number length to 30: Abacus 68.63 %, FIRE 55.32 %",
    pairs=((embedding("abacus"), embedding("fire")),),
)
