"""tasks layer: the paper's problems as text and as token batches (docs/official-code.md §1-3).

`generate` makes the problems of one (i, j) cell, `eval_problems` the fixed problems of an eval
cell, `TrainStream` the stratified, resumable, shardable training batches; every one is a pure
function of its arguments. Token ids come from `get_tokenizer` (ids as in the official code).
"""

from abacus_ray.config.task import TASKS, TaskConfig
from abacus_ray.tasks.evalsets import eval_problems, eval_set
from abacus_ray.tasks.formats import Problem
from abacus_ray.tasks.problems import generate
from abacus_ray.tasks.stream import Batch, TrainStream, encode_problems
from abacus_ray.tasks.tokenizer import Tokenizer, get_tokenizer

__all__ = ["TASKS", "TaskConfig", "Problem", "generate", "eval_problems", "eval_set", "Batch",
           "TrainStream", "encode_problems", "Tokenizer", "get_tokenizer"]
