"""Bad input is refused: one line on stderr naming the culprit, exit status 2, no traceback, nothing written.

Fuzzed with hypothesis (bounded, derandomized, no deadline): `abacus-ray` flags, config dicts and
`--set` overrides, grid specs, problem strings and generator arguments, evaluation lengths beyond the
Abacus table, truncated / random / wrong-architecture checkpoints, unwritable output directories,
empty or foreign results directories, and the sweep files' and `evaluate_all`'s flags, which must be
refused before Ray starts. Commands run in-process (`abacus_ray.cli.main(argv)`, `sweep.main`).

Every refused case is tallied by category; the totals are printed in pytest's terminal summary and
written to `<basetemp>/bad_input_tally.json` (test_untrusted.py adds its cases to the same tally).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib.util
import io
import json
import math
import os
import re
import shutil
import sys
import tempfile
import typing
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from abacus_ray.cli import main
from abacus_ray.config import ExperimentConfig, preset
from abacus_ray.evaluation import grids as grids_mod
from abacus_ray.evaluation.grids import grid_from_string, parse_cells, parse_diagonal
from abacus_ray.model import ArithmeticTransformer
from abacus_ray.tasks import eval_problems, generate, get_tokenizer
from abacus_ray.tasks.config import TASKS
from abacus_ray.tasks.stream import encode_problems
from abacus_ray.tasks.tokenizer import SORT_LABELS
from abacus_ray.training.checkpoint import save_checkpoint

REPO = Path(__file__).resolve().parents[1]
FUZZ = settings(max_examples=40, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
SMALL = settings(FUZZ, max_examples=15)

# --- the tally -------------------------------------------------------------------------------------

TALLY: Counter[str] = Counter()


def tally(category: str, n: int = 1) -> None:
    TALLY[category] += n


class _TallyReport:
    """Prints the tally at the end of the session (pytest's terminal summary, whatever `-s` says)."""

    def pytest_terminal_summary(self, terminalreporter):
        if not TALLY:
            return
        terminalreporter.write_sep("-", f"bad input: {sum(TALLY.values())} cases tried, each refused (one line "
                                        "naming the culprit, exit 2, nothing written) or, on dashboards, escaped")
        for category, n in sorted(TALLY.items()):
            terminalreporter.write_line(f"  {n:6d}  {category}")


@pytest.fixture(scope="session", autouse=True)
def bad_input_tally(request, tmp_path_factory):
    name = "abacus-ray-bad-input-tally"
    if not request.config.pluginmanager.has_plugin(name):
        request.config.pluginmanager.register(_TallyReport(), name)
    yield TALLY
    (tmp_path_factory.getbasetemp() / "bad_input_tally.json").write_text(
        json.dumps({"total": sum(TALLY.values()), **dict(sorted(TALLY.items()))}, indent=2))


# --- running commands ------------------------------------------------------------------------------

def run(argv: Sequence[str], fn: Callable = main) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = fn(list(argv))
    return code, out.getvalue(), err.getvalue()


def snapshot(*roots: Path) -> set:
    """Every path under `roots`, with size and mtime for files (directory mtimes may move: probes)."""
    seen = set()
    for root in roots:
        for p in Path(root).rglob("*"):
            st_ = p.lstat()
            seen.add((str(p), p.is_dir()) if p.is_dir() else (str(p), st_.st_size, st_.st_mtime_ns))
    return seen


def assert_refused(argv: Sequence[str], culprits: str | Sequence[str], category: str, *, roots: Sequence[Path] = (),
                   fn: Callable = main, prefixes: Sequence[str] = ("abacus-ray",)) -> str:
    """Run `argv`; exit 2, exactly one stderr line `PREFIX...: error: CULPRIT...`, no file changed."""
    culprits = (culprits,) if isinstance(culprits, str) else tuple(culprits)
    before = snapshot(*roots)
    code, out, err = run(argv, fn)
    lines = err.splitlines()
    assert code == 2, (argv, code, err)
    assert len(lines) == 1, (argv, err)
    assert "Traceback" not in err and out == "", (argv, out, err)
    head, sep, message = lines[0].partition(": error: ")
    assert sep and head.startswith(tuple(prefixes)), (argv, lines[0])
    assert message.startswith(culprits), (argv, message, culprits)
    assert snapshot(*roots) == before, argv
    tally(category)
    return message


# --- fixtures ----------------------------------------------------------------------------------------

SMALL_MODEL = ["model.hidden=16", "model.intermediate=32", "model.heads=2", "model.layers=1", "eval.per_cell=3"]


def _save(path: Path, overrides: list[str]) -> Path:
    cfg = preset("tiny", overrides)
    torch.manual_seed(0)
    save_checkpoint(path, ArithmeticTransformer(cfg.model, cfg.vocab_size), cfg,
                    {"step": 1, "samples": 64, "device_hours": 0.0, "micro_index": 1, "tokens": 100,
                     "optimizer": {"state": {}, "param_groups": []}})
    return path


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("bad-input")


@pytest.fixture(scope="module")
def ckpt(work) -> Path:
    """A tiny addition checkpoint with a 128-row Abacus table."""
    return _save(work / "add-ckpt", [*SMALL_MODEL, "model.abacus_table=128"])


@pytest.fixture(scope="module")
def mul_ckpt(work) -> Path:
    """A tiny multiplication checkpoint with a 40-row Abacus table (k <= 15, size-5 training)."""
    return _save(work / "mul-ckpt", [*SMALL_MODEL, "task.name=mul", "model.abacus_table=40"])


@pytest.fixture(scope="module")
def unwritable(tmp_path_factory) -> Path | None:
    """A directory nobody can create anything in: chmod 555 for a normal user; for root (which ignores
    modes) a kernel filesystem that refuses new entries, else None."""
    if os.geteuid() != 0:
        d = tmp_path_factory.mktemp("read-only")
        d.chmod(0o555)
        yield d
        d.chmod(0o755)
        return
    for candidate in ("/sys/fs", "/proc/self"):
        try:
            os.rmdir(tempfile.mkdtemp(dir=candidate))
        except OSError:
            yield Path(candidate)
            return
    yield None


def fresh_dir(work: Path) -> Path:
    return Path(tempfile.mkdtemp(dir=work))


# --- 1. CLI flags ------------------------------------------------------------------------------------

def _parses(value: str, kind: type) -> bool:
    try:
        kind(value)
    except (ValueError, OverflowError):
        return False
    return True


FLAG_CASES = [  # (argv before the flag, flag, argparse type or choices)
    ("eval", "--per-cell", int), ("eval", "--seed", int), ("eval", "--recurrences", int),
    ("eval", "--token-budget", int), ("eval", "--flush-every-cells", int), ("eval", "--flush-every-s", float),
    ("eval", "--engine", ("teacher", "kv", "naive")), ("eval", "--precision", ("auto", "fp32", "bf16", "fp16")),
    ("describe", "--seq-len", int), ("dashboard", "--port", int),
]


def _base_argv(command: str, ckpt: Path, out: Path) -> list[str]:
    return {"eval": ["eval", str(ckpt), "--out", str(out), "--cells", "1x1", "--quiet"],
            "describe": ["describe"], "dashboard": ["dashboard", str(out)]}[command]


@FUZZ
@given(case=st.sampled_from(FLAG_CASES), value=st.text(max_size=12))
def test_typed_flags_refuse_values_of_the_wrong_type(case, value, ckpt, work):
    command, flag, kind = case
    if isinstance(kind, tuple):
        if value in kind:
            return
    elif _parses(value, kind):
        return
    out = work / "never-written"
    assert_refused([*_base_argv(command, ckpt, out), f"{flag}={value}"], flag, "CLI flags: wrong type / choice",
                   roots=[work])
    assert not out.exists()


INT64 = 2**63


@FUZZ
@given(case=st.sampled_from([
    ("--per-cell", st.integers(max_value=0), "eval.per_cell"),
    ("--recurrences", st.integers(max_value=0), "eval.recurrences"),
    ("--token-budget", st.integers(max_value=-1), "eval.token_budget"),
    ("--flush-every-cells", st.integers(max_value=0), "flush_every_cells"),
    ("--flush-every-s", st.floats(max_value=0) | st.just(math.nan), "flush_every_s"),
    ("--per-cell", st.integers(min_value=INT64), "eval.per_cell"),
    ("--seed", st.integers(min_value=INT64) | st.integers(max_value=-INT64 - 1), "eval.seed"),
    ("--device", st.sampled_from(["garbage", "cuda:99", "meta", "tpu", ":0", "cpu:-1x"]), "--device"),
]), data=st.data())
def test_eval_flags_refuse_out_of_range_values(case, data, ckpt, work):
    flag, values, culprit = case
    value = data.draw(values)
    if flag == "--device" and value.startswith("cuda") and torch.cuda.device_count() > 99:
        return
    out = work / "never-written"
    assert_refused(["eval", str(ckpt), "--out", str(out), "--cells", "1x1", "--quiet", f"{flag}={value}"], culprit,
                   "CLI flags: out of range", roots=[work])
    assert not out.exists()


_OPTION = st.from_regex(r"--zz[a-z-]{0,10}", fullmatch=True)


@FUZZ
@given(command=st.sampled_from(["describe", "eval", "summary", "dashboard", "train"]), option=_OPTION,
       name=st.text(min_size=1, max_size=12).filter(
           lambda s: s not in ("describe", "train", "eval", "summary", "dashboard") and not s.startswith("-")))
def test_unknown_options_and_commands(command, option, name, work):
    args = {"describe": [], "eval": ["x", "--out", "y"], "summary": ["x"], "dashboard": ["x"], "train": ["--out", "y"]}
    assert_refused([command, *args[command], option], option, "CLI flags: unknown option / command", roots=[work])
    assert_refused([name], "COMMAND", "CLI flags: unknown option / command", roots=[work])


@pytest.mark.parametrize("argv, culprit", [
    ([], "COMMAND"),
    (["eval"], "CHECKPOINT"),
    (["eval", "ck"], "--out"),
    (["eval", "ck", "--out", "o", "--grid", "tiny-addition", "--cells", "1x1"], "--cells"),
    (["train"], "--out"),
    (["summary"], "RESULTS"),
    (["describe", "--preset", "huge"], "--preset"),
    (["describe", "--seq-len", "0"], "--seq-len"),
    (["describe", "--seq-len"], "--seq-len"),
    (["train", "--out", "{work}/t", "--device", "tpu"], "--device"),
    (["train", "--out", "{work}/t", "--resume"], "--resume"),
    (["summary", "{ckpt}", "--label", "nosuch"], ("--label", "{ckpt}")),
])
def test_missing_and_conflicting_arguments(argv, culprit, ckpt, work):
    fill = {"work": work, "ckpt": ckpt}
    argv = [a.format(**fill) for a in argv]
    culprits = (culprit,) if isinstance(culprit, str) else culprit
    assert_refused(argv, [c.format(**fill) for c in culprits], "CLI flags: missing / conflicting", roots=[work])


def test_help_is_not_an_error():
    code, out, err = run(["eval", "--help"])
    assert code == 0 and "--cells" in out and err == ""


# --- 2. config dicts ---------------------------------------------------------------------------------

def _field_types(cls: type = ExperimentConfig, prefix: str = "") -> dict[str, typing.Any]:
    out = {}
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        if dataclasses.is_dataclass(tp):
            out.update(_field_types(tp, f"{prefix}{f.name}."))
        else:
            out[f"{prefix}{f.name}"] = tp
    return out


FIELDS = _field_types()
SECTIONS = sorted({k.rsplit(".", 1)[0] for k in FIELDS if "." in k})
NONE_WORDS = ("none", "null", "")
BOOL_WORDS = ("true", "1", "yes", "on", "false", "0", "no", "off")
_containers = st.lists(st.integers(), max_size=3) | st.dictionaries(st.text(max_size=3), st.integers(), max_size=2)


def _optional(tp) -> tuple[typing.Any, bool]:
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    return (args[0], True) if type(None) in typing.get_args(tp) else (tp, False)


def _int_text_ok(s: str) -> bool:
    try:
        int(s.strip().replace("_", ""))
    except ValueError:
        return False
    return True


def _float_text_ok(s: str) -> bool:
    try:
        return math.isfinite(float(s.strip()))
    except ValueError:
        return False


def wrong_type_values(tp) -> st.SearchStrategy:
    """JSON-like values `coerce` must refuse for a field annotated `tp`."""
    inner, optional = _optional(tp)
    none = st.nothing() if optional else st.none()
    text = st.text(max_size=12)
    if optional:
        text = text.filter(lambda s: s.strip().lower() not in NONE_WORDS)
    if inner is int:
        return (text.filter(lambda s: not _int_text_ok(s)) | none | st.booleans() | _containers
                | st.floats().filter(lambda f: not (math.isfinite(f) and f.is_integer()))
                | st.integers(min_value=INT64) | st.integers(max_value=-INT64 - 1))
    if inner is float:
        return (text.filter(lambda s: not _float_text_ok(s)) | none | st.booleans() | _containers
                | st.sampled_from([math.nan, math.inf, -math.inf, 10**400]))
    if inner is str:
        return st.integers() | st.floats() | st.booleans() | _containers | st.none()
    if inner is bool:
        return (text.filter(lambda s: s.strip().lower() not in BOOL_WORDS) | st.integers().filter(lambda i: i not in (0, 1))
                | st.floats() | _containers | st.none())
    if typing.get_origin(inner) is tuple:
        return st.integers() | st.floats() | st.booleans() | st.none() | st.lists(st.integers(), min_size=1, max_size=3)
    raise AssertionError(f"no strategy for {tp}")


def _set(d: dict, key: str, value) -> dict:
    node = d
    *parts, last = key.split(".")
    for p in parts:
        node = node[p]
    node[last] = value
    return d


def refused_config(data: dict, culprit: str, category: str) -> str:
    with pytest.raises(ValueError) as e:
        ExperimentConfig.from_dict(data)
    message = str(e.value)
    assert message.startswith(culprit) and "\n" not in message, (message, culprit)
    assert len(message) < 400, message
    tally(category)
    return message


@FUZZ
@given(data=st.data(), key=st.sampled_from(sorted(FIELDS)))
def test_config_dicts_refuse_wrong_types(data, key):
    value = data.draw(wrong_type_values(FIELDS[key]), label=key)
    refused_config(_set(preset("tiny").to_dict(), key, value), key, "config dicts: wrong type")


_identifier = st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True)


@FUZZ
@given(section=st.sampled_from(["", *SECTIONS]), name=_identifier, junk=st.integers() | st.text(max_size=5) | st.none())
def test_config_dicts_refuse_unknown_keys_and_non_mappings(section, name, junk):
    d = preset("tiny").to_dict()
    key = f"{section}.{name}" if section else name
    if key in FIELDS or key in SECTIONS:
        return
    (d[section] if section else d)[name] = junk
    refused_config(d, key, "config dicts: unknown key")
    if section:
        refused_config(_set(preset("tiny").to_dict(), section, junk), section, "config dicts: section not a mapping")


def test_config_that_is_not_a_mapping():
    for value in ([1], "x", 3, None):
        refused_config(value, "ExperimentConfig", "config dicts: not a mapping")


def _not_in(choices) -> st.SearchStrategy:
    return st.text(max_size=10).filter(lambda s: s not in choices)


NEGATIVE = st.floats(max_value=0, exclude_max=True, allow_nan=False, allow_infinity=False)
OUT_OF_RANGE = [  # (key, values, culprit): tiny preset, one key changed
    *[(f"model.{k}", st.integers(max_value=0), f"model.{k}")
      for k in ("layers", "recurrences", "hidden", "intermediate", "heads", "abacus_table")],
    ("model.heads", st.integers(1, 10**6).filter(lambda h: 128 % h), "model.heads"),
    ("model.intermediate", st.integers(1, 10**6).filter(lambda n: n % 2), "model.intermediate"),
    ("model.max_k", st.integers(max_value=-1), "model.max_k"),
    ("model.max_k", st.integers(min_value=250, max_value=INT64 - 100), "model.abacus_table"),  # 256 rows
    ("model.abacus_table", st.integers(1, 21), "model.abacus_table"),
    ("model.init_std", NEGATIVE, "model.init_std"),
    ("model.fire_max_length", st.integers(max_value=-1), "model.fire_max_length"),
    ("model.eval_recurrences", st.integers(max_value=0), "model.eval_recurrences"),
    *[(f"model.{k}", _not_in(c), f"model.{k}") for k, c in (
        ("positions", ("abacus", "fire", "rope", "nope", "learned", "abacus+fire", "abacus+rope")),
        ("injection", ("none", "first", "every")), ("norm", ("post", "pre")), ("init_state", ("noise", "zeros")))],
    ("task.name", _not_in(TASKS), "task.name"),
    ("task.train_max_len", st.integers(max_value=0), "task.train_max_len"),
    ("task.train_max_len", st.integers(min_value=240, max_value=INT64 - 100), "model.abacus_table"),
    ("task.train_max_array", st.integers(max_value=0), "task.train_max_array"),
    ("task.pad_p", NEGATIVE | st.floats(min_value=1, allow_infinity=False), "task.pad_p"),
    ("task.index_hints", _not_in(("none", "cyclic", "noncyclic")), "task.index_hints"),
    ("train.budget_hours", st.floats(max_value=0, allow_infinity=False), "train.budget_hours"),
    ("train.max_steps", st.integers(max_value=0), "train.max_steps"),
    ("train.max_samples", st.integers(max_value=0), "train.max_samples"),
    ("train.lr", st.floats(max_value=0, allow_infinity=False), "train.lr"),
    ("train.warmup", NEGATIVE | st.floats(min_value=0.91, allow_infinity=False), "train.warmup"),  # + cooldown 0.1
    ("train.cooldown", NEGATIVE | st.floats(min_value=0.91, allow_infinity=False), "train.warmup"),
    ("train.micro_batch", st.integers(max_value=0), "train.micro_batch"),
    ("train.global_batch", st.integers(max_value=63), "train.global_batch"),
    ("train.batch_ramp", NEGATIVE | st.floats(min_value=1, exclude_min=True, allow_infinity=False), "train.batch_ramp"),
    ("train.grad_clip", NEGATIVE, "train.grad_clip"),
    ("train.precision", _not_in(("auto", "fp32", "bf16", "fp16")), "train.precision"),
    ("train.alpha", NEGATIVE | st.floats(min_value=1, exclude_min=True, allow_infinity=False), "train.alpha"),
    ("train.max_backprop", st.integers(max_value=0), "train.max_backprop"),
    ("train.loss_reduction", _not_in(("mean", "none")), "train.loss_reduction"),
    ("train.report_every_s", st.floats(max_value=0, allow_infinity=False), "train.report_every_s"),
    ("train.checkpoint_every_min", st.floats(max_value=0, allow_infinity=False), "train.checkpoint_every_min"),
    ("eval.per_cell", st.integers(max_value=0), "eval.per_cell"),
    ("eval.engine", _not_in(("teacher", "kv", "naive")), "eval.engine"),
    ("eval.recurrences", st.integers(max_value=0), "eval.recurrences"),
    ("eval.precision", _not_in(("auto", "fp32", "bf16", "fp16")), "eval.precision"),
    ("eval.token_budget", st.integers(max_value=-1), "eval.token_budget"),
    ("cluster.workers", st.integers(max_value=0), "cluster.workers"),
    ("cluster.cpus_per_worker", st.floats(max_value=0, allow_infinity=False), "cluster.cpus_per_worker"),
    ("cluster.gpus_per_worker", st.floats(max_value=0, allow_infinity=False), "cluster.gpus_per_worker"),
    ("cluster.trainer", _not_in(("torch", "function")), "cluster.trainer"),
    ("seed", st.integers(max_value=-1) | st.integers(min_value=2**32), "seed"),
]


@FUZZ
@given(case=st.sampled_from(OUT_OF_RANGE), data=st.data())
def test_config_dicts_refuse_out_of_range_values(case, data):
    key, values, culprit = case
    value = data.draw(values, label=key)
    refused_config(_set(preset("tiny").to_dict(), key, value), culprit, "config dicts: out of range")


@pytest.mark.parametrize("overrides, culprit", [
    ({"task.name": "mul", "task.index_hints": "cyclic"}, "task.index_hints"),
    ({"cluster.trainer": "function", "cluster.workers": 2}, "cluster.trainer"),
    ({"model.positions": "rope", "model.heads": 128}, "model.heads"),
    ({"task.index_hints": "noncyclic", "task.name": "sort"}, "task.index_hints"),
])
def test_config_dicts_refuse_impossible_combinations(overrides, culprit):
    d = preset("tiny").to_dict()
    for k, v in overrides.items():
        _set(d, k, v)
    refused_config(d, culprit, "config dicts: impossible combination")


# --- 3. --set overrides --------------------------------------------------------------------------------

def _text_value(value) -> str:
    return value if isinstance(value, str) else json.dumps(value) if isinstance(value, (list, dict)) else str(value)


SET_ITEMS = st.one_of(
    st.text(max_size=15).filter(lambda s: "=" not in s).map(lambda s: (s, "--set")),
    st.text(max_size=8).map(lambda v: (f"={v}", "--set")),
    st.from_regex(r"[ \t]*=.*", fullmatch=True).map(lambda s: (s, "--set")),
    st.tuples(st.sampled_from(SECTIONS), st.text(max_size=5).filter(lambda v: "\n" not in v)).map(
        lambda kv: (f"{kv[0]}={kv[1]}", kv[0])),
    st.from_regex(r"[a-z_]{1,8}(\.[a-z_]{1,8}){0,2}", fullmatch=True).filter(
        lambda k: k not in FIELDS and k not in SECTIONS).map(lambda k: (f"{k}=1", k)),
    st.sampled_from(sorted(FIELDS)).flatmap(lambda k: wrong_type_values(FIELDS[k]).filter(
        lambda v: isinstance(v, str) or not isinstance(v, (bool, type(None), list, dict))).map(
        lambda v, k=k: (f"{k}={_text_value(v)}", k))),
    st.sampled_from(OUT_OF_RANGE).flatmap(lambda c: c[1].map(lambda v, c=c: (f"{c[0]}={_text_value(v)}", c[2]))),
)


def _refused_set_item(item: str) -> bool:
    try:
        preset("tiny", [item])
    except ValueError:
        return True
    return False


@FUZZ
@given(item=SET_ITEMS)
def test_set_overrides_are_refused_through_the_cli(item, work):
    text, culprit = item
    if not _refused_set_item(text):  # e.g. a wrong-type float text that happens to parse
        return
    assert_refused(["describe", "--set", "model.layers=2", f"--set={text}"], culprit, "--set overrides", roots=[work])


# --- 4. grid specs ----------------------------------------------------------------------------------

_spec_chars = st.text(alphabet="0123456789-x+:, cellsdiagon", max_size=14)
GRID_TEXT = _spec_chars | st.text(max_size=14) | st.builds(lambda k, s: f"{k}:{s}", st.sampled_from(["cells", "diagonal",
                                                                                                     "grid", ""]), _spec_chars)
GRID_CULPRITS = ("--grid", "--cells", "--diagonal")


@settings(FUZZ, max_examples=200)
@given(text=GRID_TEXT, parser=st.sampled_from([grid_from_string, parse_cells, parse_diagonal]))
def test_grid_specs_parse_or_refuse_naming_the_flag(text, parser):
    try:
        grid = parser(text)
    except ValueError as e:
        assert str(e).startswith(GRID_CULPRITS) and "\n" not in str(e) and len(str(e)) < 400, str(e)
        tally("grid specs (parser)")
        return
    assert 1 <= len(grid.pairs) <= grids_mod.MAX_CELLS
    assert all(1 <= i <= grids_mod.MAX_LENGTH and 1 <= j <= grids_mod.MAX_LENGTH for i, j in grid.pairs)


@FUZZ
@given(text=GRID_TEXT, flag=st.sampled_from(["--grid", "--cells", "--diagonal"]))
def test_grid_specs_are_refused_through_the_cli(text, flag, ckpt, work):
    parser = {"--grid": grid_from_string, "--cells": parse_cells, "--diagonal": parse_diagonal}[flag]
    try:
        parser(text)
        return  # a valid spec: the CLI would evaluate it
    except ValueError:
        pass
    out = work / "never-written"
    assert_refused(["eval", str(ckpt), "--out", str(out), "--quiet", f"{flag}={text}"], GRID_CULPRITS,
                   "grid specs (CLI)", roots=[work])
    assert not out.exists()


@pytest.mark.parametrize("spec", ["1-99999999999", "1-100001", "1-1000x1-1001", "1-700x1-700+1-800x1-800",
                                  "9" * 19, "1-5:0", "7-3", "0", "1x", "x1", "1x1x1", "cells:", "diagonal:1-",
                                  "1-9,,3", "nope:1x1", "１-３"])
def test_grid_specs_that_would_explode_or_are_empty(spec):
    parsers = [grid_from_string, parse_cells, parse_diagonal]
    for parser in parsers:
        with pytest.raises(ValueError, match=r"^--(grid|cells|diagonal): "):
            parser(spec)
    tally("grid specs (parser)", len(parsers))


# --- 5. problem strings and generator arguments ------------------------------------------------------------

@FUZZ
@given(text=st.text(max_size=20), name=st.sampled_from(["pad", "index", "sort"]))
def test_problem_text_outside_the_vocabulary_is_refused(text, name):
    tok = get_tokenizer(name)
    vocab = set(tok.chars) | {" "}
    if set(text) <= vocab:
        assert tok.decode(tok.encode(text)) == text.replace(" ", "")
        return
    bad = next(c for c in text if c not in vocab)
    with pytest.raises(ValueError, match=r"^character "):
        tok.encode(text)
    from abacus_ray.tasks import Problem

    with pytest.raises(ValueError, match=rf"^problems: character {re.escape(repr(bad))}"):
        encode_problems([Problem("12=", "21"), Problem(text + "=", "1")], tok)
    tally("problem strings: foreign characters", 2)


GEN_CASES = [  # (kwargs over a valid add cell, culprit)
    (st.builds(dict, task=_not_in(TASKS)), "task"),
    (st.builds(dict, i=st.integers(max_value=0) | st.floats() | st.text(max_size=3) | st.booleans()), "i"),
    (st.builds(dict, j=st.integers(max_value=0) | st.floats() | st.none()), "j"),
    (st.builds(dict, count=st.integers(max_value=0) | st.floats() | st.text(max_size=3)), "count"),
    (st.builds(dict, seed=st.floats() | st.text(max_size=3) | st.none() | st.booleans()), "seed"),
    (st.builds(dict, index_hints=_not_in(("none", "cyclic", "noncyclic"))), "index_hints"),
    (st.builds(dict, pad_p=NEGATIVE | st.floats(min_value=1) | st.just(math.nan) | st.text(max_size=3)), "pad_p"),
    (st.builds(dict, hint_start=st.integers(max_value=-1) | st.integers(min_value=102), index_hints=st.just("cyclic")),
     "hint_start"),
    (st.builds(dict, task=st.sampled_from(["mul", "sort", "or"]), index_hints=st.just("cyclic")), "index_hints"),
    (st.builds(dict, task=st.just("sort"), j=st.integers(len(SORT_LABELS) + 1, 10**6)), "j"),
    (st.builds(dict, i=st.integers(102, 10**5), index_hints=st.just("noncyclic")), ("i", "j")),
]


@FUZZ
@given(case=st.sampled_from(GEN_CASES), data=st.data(), through=st.sampled_from(["generate", "eval_problems"]))
def test_problem_generators_refuse_bad_arguments(case, data, through):
    strategy, culprit = case
    kwargs = {"task": "add", "i": 3, "j": 4, "count": 5, "seed": 0} | data.draw(strategy)
    positional = [kwargs.pop(k) for k in ("task", "i", "j", "count", "seed")]
    fn = generate if through == "generate" else eval_problems
    with pytest.raises(ValueError) as e:
        fn(*positional, **kwargs)
    culprits = (culprit,) if isinstance(culprit, str) else culprit
    assert str(e.value).startswith(tuple(f"{c}:" for c in culprits)), str(e.value)
    tally("problem generator arguments")


def test_unknown_eval_set_variant():
    with pytest.raises(ValueError, match=r"^colour: unknown eval-set variant"):
        eval_problems("add", 2, 2, 3, 0, colour="red")
    tally("problem generator arguments")


# --- 6. evaluation lengths beyond the Abacus table -----------------------------------------------------

@FUZZ
@given(n=st.integers(127, grids_mod.MAX_LENGTH), flag=st.sampled_from(["--diagonal", "--cells"]))
def test_addition_lengths_beyond_the_abacus_table(n, flag, ckpt, work):
    spec = str(n) if flag == "--diagonal" else f"1-3x{n}"
    out = work / "never-written"
    message = assert_refused(["eval", str(ckpt), "--out", str(out), "--quiet", flag, spec], "model.abacus_table",
                             "eval lengths beyond the Abacus table", roots=[work])
    assert "has 128" in message
    assert not out.exists()


@FUZZ
@given(i=st.integers(1, 3000), j=st.integers(1, 3000))
def test_multiplication_lengths_beyond_the_abacus_table(i, j, mul_ckpt, work):
    if i + j + 1 <= 40:  # fits: i + j digits in the product, plus row 0
        return
    out = work / "never-written"
    assert_refused(["eval", str(mul_ckpt), "--out", str(out), "--quiet", "--cells", f"{i}x{j}"], "model.abacus_table",
                   "eval lengths beyond the Abacus table", roots=[work])


@pytest.mark.parametrize("grid", ["paper-addition", "paper-addition-long", "diagonal:101-160"])
def test_named_grids_beyond_the_abacus_table(grid, ckpt, work):
    assert_refused(["eval", str(ckpt), "--out", str(work / "never-written"), "--quiet", "--grid", grid],
                   "model.abacus_table", "eval lengths beyond the Abacus table", roots=[work])


# --- 7. truncated, random and wrong-architecture checkpoints -------------------------------------------------

def corrupted_copy(ckpt: Path, work: Path, name: str, content: bytes | None) -> Path:
    """A copy of `ckpt` in a fresh directory with file `name` replaced (None: removed)."""
    target = fresh_dir(work) / "ck"
    shutil.copytree(ckpt, target)
    (target / name).unlink()
    if content is not None:
        (target / name).write_bytes(content)
    return target


def assert_checkpoint_refused(target: Path, work: Path, category: str, file: str | None = None) -> str:
    out = target.parent / "results"
    culprit = str(target / file) if file else str(target)
    message = assert_refused(["eval", str(target), "--out", str(out), "--quiet", "--cells", "1x1"], culprit, category,
                             roots=[target.parent])
    assert not out.exists()
    shutil.rmtree(target.parent)
    return message


@FUZZ
@given(data=st.data(), name=st.sampled_from(["model.pt", "config.json", "meta.json"]))
def test_truncated_checkpoint_files(data, name, ckpt, work):
    full = (ckpt / name).read_bytes()
    cut = data.draw(st.integers(0, len(full) - 1), label="cut")
    target = corrupted_copy(ckpt, work, name, full[:cut])
    assert_checkpoint_refused(target, work, "checkpoints: truncated", name)


def _json_object(b: bytes) -> bool:
    try:
        return isinstance(json.loads(b), dict)
    except (ValueError, UnicodeDecodeError):
        return False


@FUZZ
@given(content=st.binary(max_size=3000), name=st.sampled_from(["model.pt", "config.json", "meta.json"]))
def test_random_bytes_checkpoint_files(content, name, ckpt, work):
    if name != "model.pt" and _json_object(content):  # e.g. b"{}": a valid (default) config or meta
        return
    target = corrupted_copy(ckpt, work, name, content)
    assert_checkpoint_refused(target, work, "checkpoints: random bytes", name)


# config.json edits that describe another model than the weights hold (1 x 16, 2 heads, table 128); hidden
# 2**20 would need terabytes: refused before any allocation (shapes compared on the meta device first)
ARCH_CHANGES = {
    "model.layers": st.integers(2, 64),
    "model.hidden": st.sampled_from([2, 8, 32, 1024, 2**20]),
    "model.intermediate": st.sampled_from([2, 16, 64, 2**22]),
    "model.positions": st.sampled_from(["fire", "nope", "rope", "learned", "abacus+fire"]),
    "model.abacus_table": st.integers(22, 10**6).filter(lambda n: n != 128),
    "task.name": st.just("sort"),
    "task.index_hints": st.sampled_from(["cyclic", "noncyclic"]),
}


@FUZZ
@given(key=st.sampled_from(sorted(ARCH_CHANGES)), data=st.data())
def test_wrong_architecture_checkpoints(key, data, ckpt, work):
    cfg = json.loads((ckpt / "config.json").read_text())
    _set(cfg, key, data.draw(ARCH_CHANGES[key], label=key))
    target = corrupted_copy(ckpt, work, "config.json", json.dumps(cfg).encode())
    message = assert_checkpoint_refused(target, work, "checkpoints: wrong architecture", "model.pt")
    assert "weights" in message


def test_checkpoint_files_missing_swapped_or_not_a_checkpoint(ckpt, mul_ckpt, work):
    for name in ("model.pt", "config.json"):
        assert_checkpoint_refused(corrupted_copy(ckpt, work, name, None), work, "checkpoints: missing / swapped", name)
    # weights of another model (a multiplication model with a smaller table; then the same model, nudged)
    assert_checkpoint_refused(corrupted_copy(ckpt, work, "model.pt", (mul_ckpt / "model.pt").read_bytes()), work,
                              "checkpoints: missing / swapped", "model.pt")
    weights = torch.load(ckpt / "model.pt", weights_only=True)
    weights["decoder.weight"] = weights["decoder.weight"] + 1e-3
    buffer = io.BytesIO()
    torch.save(weights, buffer)
    message = assert_checkpoint_refused(corrupted_copy(ckpt, work, "model.pt", buffer.getvalue()), work,
                                        "checkpoints: missing / swapped", "model.pt")
    assert "does not match meta.json" in message
    # no meta.json: not a checkpoint; an empty directory; a file
    assert_checkpoint_refused(corrupted_copy(ckpt, work, "meta.json", None), work, "checkpoints: missing / swapped")
    empty = fresh_dir(work) / "ck"
    empty.mkdir()
    assert_checkpoint_refused(empty, work, "checkpoints: missing / swapped")
    plain = fresh_dir(work) / "ck"
    plain.write_text("not a checkpoint")
    assert_checkpoint_refused(plain, work, "checkpoints: missing / swapped")


def test_one_bad_checkpoint_among_several_writes_nothing(ckpt, work):
    bad = corrupted_copy(ckpt, work, "model.pt", b"\x80\x02garbage")
    out = bad.parent / "results"
    assert_refused(["eval", str(ckpt), str(bad), "--out", str(out), "--quiet", "--cells", "1x1"],
                   str(bad / "model.pt"), "checkpoints: missing / swapped", roots=[bad.parent, ckpt])
    assert not out.exists()


@pytest.mark.filterwarnings("ignore:Detected pickle protocol")
@FUZZ
@given(content=st.binary(max_size=2000), truncate=st.booleans())
def test_resume_refuses_a_bad_training_state(content, truncate, ckpt, work):
    run_dir = fresh_dir(work) / "run"
    shutil.copytree(ckpt, run_dir / "step-000000001")
    state = run_dir / "step-000000001" / "train_state.pt"
    if truncate:
        full = state.read_bytes()
        content = full[: len(content) % len(full)]
    state.write_bytes(content)
    assert_refused(["train", "--out", str(run_dir), "--resume", "--device", "cpu"], str(state),
                   "checkpoints: bad training state", roots=[run_dir.parent])
    shutil.rmtree(run_dir.parent)


def test_resume_refuses_a_training_state_without_its_counters(ckpt, work):
    run_dir = fresh_dir(work) / "run"
    shutil.copytree(ckpt, run_dir / "step-000000001")
    state = run_dir / "step-000000001" / "train_state.pt"
    for content in ({}, {"step": 1}, [1, 2], torch.zeros(3)):
        torch.save(content, state)
        assert_refused(["train", "--out", str(run_dir), "--resume", "--device", "cpu"], str(state),
                       "checkpoints: bad training state", roots=[run_dir.parent])


# --- 8. unwritable output directories --------------------------------------------------------------------

def _out_path(kind: str, work: Path, unwritable: Path | None) -> Path:
    if kind == "under-a-file":
        f = fresh_dir(work) / "a-file"
        f.write_text("x")
        return f / "out"
    if kind == "is-a-file":
        f = fresh_dir(work) / "a-file"
        f.write_text("x")
        return f
    if unwritable is None:
        pytest.skip("no unwritable directory on this machine (root, and no read-only kernel filesystem)")
    return unwritable / "abacus-ray-out"


@pytest.fixture(scope="module")
def results_dir(work) -> Path:
    from dashboards.sample import synthetic_results

    return synthetic_results(work / "results-ok" / "results", [("s/run", [])], [(1, 1), (2, 2)], per_cell=4)


@pytest.mark.parametrize("kind", ["under-a-file", "is-a-file", "read-only"])
@pytest.mark.parametrize("command", ["eval", "train", "dashboard"])
def test_unwritable_output_directories(command, kind, ckpt, results_dir, work, unwritable):
    out = _out_path(kind, work, unwritable)
    argv = {"eval": ["eval", str(ckpt), "--out", str(out), "--cells", "1x1", "--quiet"],
            "train": ["train", "--out", str(out), "--set", "train.max_steps=1", "--device", "cpu"],
            "dashboard": ["dashboard", str(results_dir), "--out", str(out)]}[command]
    assert_refused(argv, "--out", "unwritable output directory", roots=[work])
    assert kind == "is-a-file" or not out.exists()


# --- 9. empty and foreign results directories ---------------------------------------------------------------

# Columns every abacus-ray results part holds (the results key, region and counts): without one, a part is foreign.
REQUIRED = ("model_id", "task", "i", "j", "per_cell", "eval_seed", "recurrences", "require_eos", "region", "n",
            "n_correct", "accuracy")


def _parquet(path: Path, columns: dict) -> None:
    pq.write_table(pa.table(columns), path)


FOREIGN_KINDS = ["missing", "file", "empty", "junk", "random-part", "foreign-parquet", "future-schema", "part-is-a-dir"]


def make_foreign(root: Path, kind: str, data) -> Path:
    d = root / "results"
    if kind == "missing":
        return d
    if kind == "file":
        d.write_bytes(data.draw(st.binary(max_size=100)))
        return d
    d.mkdir()
    if kind == "junk":
        for name in data.draw(st.lists(st.from_regex(r"[a-z]{1,8}\.(txt|json|csv|pt)", fullmatch=True), min_size=1,
                                       max_size=3, unique=True)):
            (d / name).write_bytes(data.draw(st.binary(max_size=100)))
    elif kind == "random-part":
        (d / "part-0.parquet").write_bytes(data.draw(st.binary(max_size=500)))
    elif kind == "foreign-parquet":
        wanted = ["schema_version", *REQUIRED]
        keep = data.draw(st.lists(st.sampled_from(wanted), unique=True, max_size=len(wanted) - 1))
        extra = data.draw(st.lists(st.from_regex(r"[a-z]{1,6}", fullmatch=True).filter(lambda c: c not in wanted),
                                   unique=True, max_size=3))
        cols = {c: pa.array([1], pa.int32() if c == "schema_version" else pa.int64()) for c in keep + extra}
        _parquet(d / "part-0.parquet", cols or {"x": [1]})
    elif kind == "future-schema":
        v = data.draw(st.integers(2, 2**31 - 1))
        _parquet(d / "part-0.parquet", {"schema_version": pa.array([v], pa.int32()),
                                        **{c: pa.array([1]) for c in REQUIRED}})
    elif kind == "part-is-a-dir":
        (d / "part-0.parquet").mkdir()
    return d


@FUZZ
@given(kind=st.sampled_from(FOREIGN_KINDS), data=st.data(),
       command=st.sampled_from(["summary", "dashboard", "eval --out"]))
def test_empty_and_foreign_results_directories(kind, data, command, ckpt, work):
    root = fresh_dir(work)
    d = make_foreign(root, kind, data)
    if command == "summary":
        argv = ["summary", str(d)]
    elif command == "dashboard":
        argv = ["dashboard", str(d), "--out", str(root / "site")]
    else:
        if kind in ("missing", "empty", "junk"):  # a fine place for new results
            return
        argv = ["eval", str(ckpt), "--out", str(d), "--cells", "1x1", "--quiet"]
    assert_refused(argv, (str(d), "RESULTS", "--out"), "empty / foreign results directories", roots=[root])
    assert not (root / "site").exists()
    shutil.rmtree(root)


@pytest.mark.parametrize("missing", REQUIRED)
def test_results_part_without_a_required_column(missing, ckpt, work):
    root = fresh_dir(work)
    d = root / "results"
    d.mkdir()
    _parquet(d / "part-0.parquet", {"schema_version": pa.array([1], pa.int32()),
                                    **{c: pa.array([1]) for c in REQUIRED if c != missing}})
    for argv in (["summary", str(d)], ["dashboard", str(d), "--out", str(root / "site")],
                 ["eval", str(ckpt), "--out", str(d), "--cells", "1x1", "--quiet"]):
        message = assert_refused(argv, str(d), "empty / foreign results directories", roots=[root])
        assert f"(no {missing} column)" in message


# --- 10. sweep files and evaluate_all: refused before Ray starts -------------------------------------------

@functools.cache
def load_sweep(name: str):
    path = REPO / "sweeps" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"sweep_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.SWEEP


@pytest.fixture
def no_ray(monkeypatch):
    """Any attempt to start or join Ray fails the test loudly."""
    from abacus_ray.cluster import runtime

    def refuse(*args, **kwargs):
        raise AssertionError("Ray was started for bad input")

    monkeypatch.setattr(runtime, "init", refuse)
    yield
    ray = sys.modules.get("ray")
    assert ray is None or not ray.is_initialized()


def _grid_refused(text: str) -> bool:
    try:
        grid_from_string(text)
    except ValueError:
        return True
    return False


SWEEP_FLAGS = st.one_of(
    SET_ITEMS.filter(lambda item: _refused_set_item(item[0])).map(lambda item: ([f"--set={item[0]}"], item[1])),
    st.integers(max_value=0).map(lambda n: ([f"--seeds={n}"], "--seeds")),
    st.text(max_size=6).filter(lambda s: not _int_text_ok(s)).map(lambda s: ([f"--seeds={s}"], "--seeds")),
    GRID_TEXT.filter(_grid_refused).map(lambda s: ([f"--grid={s}"], GRID_CULPRITS)),
    (st.floats(max_value=0, allow_infinity=False) | st.sampled_from([math.nan, math.inf])).map(
        lambda h: ([f"--budget-hours={h}"], "train.budget_hours")),
    st.text(max_size=6).filter(lambda s: not _parses(s, float)).map(lambda s: ([f"--budget-hours={s}"], "--budget-hours")),
    st.integers(max_value=0).map(lambda n: ([f"--per-cell={n}"], "eval.per_cell")),
    st.integers(max_value=0).map(lambda n: ([f"--max-trials={n}"], "--max-trials")),
    st.integers(max_value=0).map(lambda n: ([f"--num-cpus={n}"], "--num-cpus")),
    _not_in(("tiny", "paper")).map(lambda s: ([f"--preset={s}"], "--preset")),
    _OPTION.map(lambda s: ([s], s)),
)


@FUZZ
@given(flags=SWEEP_FLAGS)
def test_sweep_flags_are_refused_before_ray_starts(flags, no_ray, work):
    argv, culprit = flags
    sweep = load_sweep("fig10_k")
    storage = work / "sweep-storage"
    assert_refused(["--storage", str(storage), *argv], culprit, "sweep flags (before Ray)",
                   fn=lambda a: _sweep_main(sweep, a),
                   prefixes=("fig10_k", "sweeps/fig10_k.py"), roots=[work])
    assert not storage.exists()


def _sweep_main(sweep, argv):
    from abacus_ray.cluster.sweep import main as sweep_main

    return sweep_main(sweep, argv)


@pytest.mark.parametrize("argv, culprit", [
    (["--positions", "alibi"], "model.positions"),
    (["--positions", " , "], "--positions"),
    (["--positions", "abacus,fire", "--seeds", "-2"], "--seeds"),
    (["--storage", "{file}/sub"], "--storage"),
    (["--storage", "{file}"], "--storage"),
])
def test_figure_flags_and_storage_are_refused_before_ray_starts(argv, culprit, no_ray, work):
    f = fresh_dir(work) / "a-file"
    f.write_text("x")
    argv = [a.format(file=f) for a in argv]
    if "--storage" not in argv:
        argv += ["--storage", str(work / "sweep-storage")]
    sweep = load_sweep("fig3_embeddings")
    assert_refused(argv, culprit, "sweep flags (before Ray)", fn=lambda a: _sweep_main(sweep, a),
                   prefixes=("fig3_embeddings", "sweeps/fig3_embeddings.py"), roots=[work])


def _evaluate_all(argv):
    from abacus_ray.cluster.evaluate_all import main as evaluate_all_main

    return evaluate_all_main(argv)


@pytest.mark.parametrize("argv, culprit", [
    (["{missing}"], "RESULTS"),
    (["{empty}"], "RESULTS"),
    (["{file}"], "RESULTS"),
    (["{runs}", "--grid", "diagonal:0"], "--diagonal"),
    (["{runs}", "--grid", "nope"], "--grid"),
    (["{runs}", "--grid", "diagonal:200"], "model.abacus_table"),
    (["{runs}", "--per-cell", "0"], "eval.per_cell"),
    (["{runs}", "--per-cell", "x"], "--per-cell"),
    (["{runs}", "--num-cpus", "0"], "--num-cpus"),
    (["{runs}", "--out", "{file}"], "--out"),
    (["{runs}", "--out", "{file}/sub"], "--out"),
    (["{runs}", "--out", "{foreign}"], "{foreign}"),
    (["{runs}", "--bogus"], "--bogus"),
])
def test_evaluate_all_refuses_bad_input_before_ray_starts(argv, culprit, ckpt, no_ray, work):
    root = fresh_dir(work)
    (root / "empty").mkdir()
    (root / "a-file").write_text("x")
    shutil.copytree(ckpt, root / "runs" / "run-a" / "step-000000001")
    foreign = root / "foreign"
    foreign.mkdir()
    (foreign / "part-0.parquet").write_bytes(b"PAR1 not really")
    fill = {"missing": root / "missing", "empty": root / "empty", "file": root / "a-file", "runs": root / "runs",
            "foreign": foreign}
    argv = [a.format(**fill) for a in argv]
    assert_refused(argv, culprit.format(**fill), "evaluate_all flags (before Ray)", fn=_evaluate_all,
                   prefixes=("evaluate_all", "python -m abacus_ray.cluster.evaluate_all"), roots=[root])
    assert not (root / "runs" / "results").exists()
