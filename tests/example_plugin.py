"""The repository's example plugins (`examples/alibi.py`, ALiBi; `examples/add3.py`, three-operand
addition) registered in this test process, so that the parametrised model and task tests cover a
scheme and a task of one's own as they cover the built-in ones.

Imported as modules, not through `--plugin`: the test process then ships no file to the Ray
workers of other tests (`abacus_ray.plugins.files`)."""

import importlib.util
import sys
from pathlib import Path

from abacus_ray.config.model import positions_choices
from abacus_ray.config.task import task_names

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

for _name in ("alibi", "add3"):
    if _name not in sys.modules:
        _spec = importlib.util.spec_from_file_location(_name, EXAMPLES / f"{_name}.py")
        _module = importlib.util.module_from_spec(_spec)
        sys.modules[_name] = _module
        _spec.loader.exec_module(_module)

ALL_POSITIONS = positions_choices()  # built-in, then alibi and abacus+alibi
assert "alibi" in ALL_POSITIONS and "abacus+alibi" in ALL_POSITIONS
ALL_TASKS = task_names()  # built-in, then add3
assert "add3" in ALL_TASKS
