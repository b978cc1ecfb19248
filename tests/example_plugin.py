"""The repository's example plugin (`examples/alibi.py`, ALiBi) registered in this test process, so
that the parametrised model tests cover a scheme of one's own as they cover the built-in ones.

Imported as a module, not through `--plugin`: the test process then ships no file to the Ray
workers of other tests (`abacus_ray.plugins.files`)."""

import importlib.util
import sys
from pathlib import Path

from abacus_ray.config.model import positions_choices

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "alibi.py"

if "alibi" not in sys.modules:
    _spec = importlib.util.spec_from_file_location("alibi", EXAMPLE)
    _module = importlib.util.module_from_spec(_spec)
    sys.modules["alibi"] = _module
    _spec.loader.exec_module(_module)

ALL_POSITIONS = positions_choices()  # built-in, then alibi and abacus+alibi
assert "alibi" in ALL_POSITIONS and "abacus+alibi" in ALL_POSITIONS
