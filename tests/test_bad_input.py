"""Bad input is refused (1/3): `abacus-ray` flags, config dicts and `--set` overrides, fuzzed with
hypothesis (bounded, derandomized). Each case: one stderr line naming the culprit, exit 2, nothing
written; every case is tallied (`refusal.py`) and the totals print at the end of the session.
"""

from __future__ import annotations

import dataclasses
import json
import math
import typing
from pathlib import Path

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from refusal import FUZZ, assert_refused, run, tally

from abacus_ray.config import ExperimentConfig, preset
from abacus_ray.config.task import TASKS

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
    ("--seed", st.integers(min_value=INT64) | st.integers(max_value=-1), "eval.seed"),
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
    (["eval", "{ckpt}", "--out", "{work}/o", "--cells", "1x1", "--seed", "-1"], "eval.seed: must be >= 0"),
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
    ("task.train_max_len", st.integers(min_value=240, max_value=INT64 - 100), ("model.abacus_table", "task.train_max_len")),
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


@pytest.mark.slow  # Ray's own start-up and refusal: 10-70 s on a loaded 2-core machine
def test_an_embedded_ray_that_cannot_start_is_one_line_and_nothing_written(tmp_path):
    """Ray itself refuses to start (an object store under its minimum): one line, exit 2, before
    the storage is touched; a start that only timed out is tried once more first."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "ABACUS_RAY_OBJECT_STORE_MB": "1"}
    env.pop("RAY_ADDRESS", None)
    done = subprocess.run([sys.executable, "-m", "abacus_ray.cli", "sweep", "fig10_k", "--no-eval",
                           "--storage", str(tmp_path / "store")], capture_output=True, text=True,
                          env=env, timeout=300)
    (line,) = done.stderr.strip().splitlines()
    assert done.returncode == 2 and "the embedded local Ray did not start (" in line, done.stderr
    assert "minimum" in line and not (tmp_path / "store").exists()
