"""Frozen-dataclass configs <-> plain dicts <-> `--set key=value` overrides.

Ray Tune's `param_space` is a dict and every checkpoint stores its config as JSON, so each config
round-trips through a nested dict of plain values. Unknown keys and badly typed values fail with a
`ValueError` that names the dotted key (e.g. `model.heads`), which the CLI prints as one line.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import types
import typing
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from abacus_ray import plugins

T = TypeVar("T")
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

# Keys under their former names, still read from the configs older runs wrote (a sweep.json, a
# checkpoint's config, a sweep file or `--set`): old dotted key -> today's.
RENAMED: dict[str, str] = {
    "eval.probe_lengths": "eval.validation_lengths",
    "eval.probe_every": "eval.validation_every",
    "eval.probe_per_cell": "eval.validation_per_cell",
}


def renamed(flat: dict[str, Any]) -> dict[str, Any]:
    """A flat `section.key` dict with former key names replaced by today's (`RENAMED`); a key
    given under both names is refused."""
    out: dict[str, Any] = {}
    for key, value in flat.items():
        new = RENAMED.get(key, key)
        if new in out:
            raise ValueError(f"{key}: given twice, also as {new} (its current name)")
        out[new] = value
    return out


@functools.cache
def _field_types(cls: type) -> dict[str, Any]:
    """The resolved annotations of a config class (cached: resolving them dominates building a
    config)."""
    return typing.get_type_hints(cls)


def _is_config(tp: Any) -> bool:
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


def _optional_inner(tp: Any) -> Any | None:
    """`X` for `X | None` / `Optional[X]`, else None."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1 and len(typing.get_args(tp)) == 2:
            return args[0]
    return None


def shown(value: Any, limit: int = 60) -> str:
    """`repr(value)`, cut to `limit` characters: an error line stays short whatever was passed."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 5]}...{text[-2:]} ({len(text)} chars)"


# what `--set key=...` takes for JSON's null in an optional field (the reference writes `unset`)
UNSET_WORDS = ("unset", "none", "null", "")


def coerce(key: str, tp: Any, value: Any) -> Any:
    """Convert `value` (from JSON or a `--set` string) to the field type `tp`, or raise naming
    `key`."""
    inner = _optional_inner(tp)
    if inner is not None:
        if value is None or (isinstance(value, str)
                             and value.strip().lower() in UNSET_WORDS):
            return None
        if inner is bool and isinstance(value, str) and value.strip().lower() == "auto":
            return None  # an optional switch's unset value is its automatic choice
        return coerce(key, inner, value)
    if tp is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ("true", "1", "yes", "on"):
            return True
        if isinstance(value, str) and value.strip().lower() in ("false", "0", "no", "off"):
            return False
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        raise ValueError(f"{key}: expected true/false, got {shown(value)}")
    if tp is int:
        if isinstance(value, bool):
            raise ValueError(f"{key}: expected an integer, got {shown(value)}")
        number = None
        if isinstance(value, int):
            number = value
        elif isinstance(value, float) and value.is_integer():
            number = int(value)
        elif isinstance(value, str):
            try:
                number = int(value.strip().replace("_", ""))
            except ValueError:
                pass
        if number is None:
            raise ValueError(f"{key}: expected an integer, got {shown(value)}")
        # results store every config value in an int64 column
        if not INT64_MIN <= number <= INT64_MAX:
            raise ValueError(f"{key}: {shown(value)} is outside the 64-bit integer range")
        return number
    if tp is float:
        if isinstance(value, bool):
            raise ValueError(f"{key}: expected a number, got {value!r}")
        number = None
        if isinstance(value, (int, float)):
            try:
                number = float(value)
            except OverflowError:  # an int beyond the float range
                number = math.inf
        elif isinstance(value, str):
            try:
                number = float(value.strip())
            except ValueError:
                pass
        if number is not None and not math.isfinite(number):
            raise ValueError(f"{key}: expected a finite number, got {shown(value)}")
        if number is not None:
            return number
        raise ValueError(f"{key}: expected a number, got {shown(value)}")
    if tp is str:
        if isinstance(value, str):
            return value
        raise ValueError(f"{key}: expected a string, got {shown(value)}")
    if typing.get_origin(tp) is tuple:
        (item_tp, *_rest) = typing.get_args(tp)
        if isinstance(value, str):
            value = ([v for v in value.replace(";", ",").split(",") if v.strip()]
                     if value.strip() else [])
        if not isinstance(value, (list, tuple)):
            raise ValueError(f"{key}: expected a list, got {shown(value)}")
        return tuple(coerce(f"{key}[{n}]", item_tp, v) for n, v in enumerate(value))
    if _is_config(tp):
        if isinstance(value, tp):
            return value
        if not isinstance(value, dict):
            raise ValueError(f"{key}: expected a mapping, got {shown(value)}")
        return from_dict(tp, value, prefix=key)
    raise TypeError(f"{key}: unsupported config field type {tp!r}")


def from_dict(cls: type[T], data: dict[str, Any], prefix: str = "") -> T:
    """Build config `cls` from a nested dict; missing keys keep their defaults, unknown keys
    raise."""
    if not isinstance(data, dict):
        raise ValueError(f"{prefix or cls.__name__}: expected a mapping, got {type(data).__name__}")
    if prefix and any(f"{prefix}.{name}" in RENAMED for name in data):
        data = {k.rpartition(".")[2]: v for k, v in
                renamed({f"{prefix}.{name}": v for name, v in data.items()}).items()}
    types_ = _field_types(cls)
    names = {f.name for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(data) - names)
    if unknown:
        key = f"{prefix}.{unknown[0]}" if prefix else unknown[0]
        raise ValueError(f"{key}: unknown config key (known: {', '.join(sorted(names))})")
    kwargs = {}
    if not prefix and "plugins" in names and "plugins" in data:  # before the model's choices
        kwargs["plugins"] = coerce("plugins", types_["plugins"], data["plugins"])
        plugins.ensure(kwargs["plugins"])
    for name, value in data.items():
        key = f"{prefix}.{name}" if prefix else name
        kwargs[name] = coerce(key, types_[name], value)
    return cls(**kwargs)


def to_dict(cfg: Any) -> dict[str, Any]:
    """Nested dict of plain JSON values (tuples become lists)."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(cfg):
        if not f.init:
            continue
        v = getattr(cfg, f.name)
        if dataclasses.is_dataclass(v):
            v = to_dict(v)
        elif isinstance(v, tuple):
            v = list(v)
        out[f.name] = v
    return out


def flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """`{"model": {"layers": 2}}` -> `{"model.layers": 2}`."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}.{k}" if prefix else k
        if isinstance(v, dict):
            out.update(flatten(v, key))
        else:
            out[key] = v
    return out


def unflatten(flat: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, v in flat.items():
        parts = key.split(".")
        node = out
        for p in parts[:-1]:
            node = node.setdefault(p, {})
            if not isinstance(node, dict):
                raise ValueError(f"{key}: {p!r} is not a config section")
        node[parts[-1]] = v
    return out


def parse_set(item: str) -> tuple[str, str]:
    """`"model.layers=8"` -> `("model.layers", "8")`."""
    key, sep, value = item.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ValueError(f"--set {shown(item)}: expected key=value, e.g. model.layers=8")
    return key, value.strip()


def overrides_dict(given: Mapping[str, Any] | Sequence[str]) -> dict[str, Any]:
    """Overrides as a dict: a mapping of dotted keys, or `KEY=VALUE` texts (`--set`)."""
    return dict(given) if isinstance(given, Mapping) else dict(parse_set(s) for s in given)


def with_overrides(cfg: T, overrides: Mapping[str, Any] | Sequence[str] | None) -> T:
    """A copy of `cfg` with dotted-key overrides applied (values may be strings from the CLI).

    The result is rebuilt through `from_dict`, so every validation runs again.
    """
    if not overrides:
        return cfg
    overrides = overrides_dict(overrides)
    flat = flatten(to_dict(cfg))
    sections = {k.rsplit(".", 1)[0] for k in flat if "." in k}
    for key, value in renamed(overrides).items():
        if key not in flat:
            section = key.rsplit(".", 1)[0] if "." in key else ""
            if key in sections:
                raise ValueError(f"{key}: is a config section, set one of its keys "
                                 f"(e.g. {key}.<name>=...)")
            if section and section not in sections and section != key:
                raise ValueError(f"{key}: unknown config section {section!r}")
            raise ValueError(f"{key}: unknown config key")
        flat[key] = value
    return from_dict(type(cfg), unflatten(flat))


def to_json(cfg: Any) -> str:
    return json.dumps(to_dict(cfg), indent=2, sort_keys=True)


def check(condition: bool, key: str, message: str) -> None:
    """Raise `ValueError("key: message")` unless `condition` holds (used in `__post_init__`)."""
    if not condition:
        raise ValueError(f"{key}: {message}")


# control and format characters, line and paragraph separators
CONTROL_CATEGORIES = ("Cc", "Cf", "Zl", "Zp")


def check_text(value: str, key: str) -> str:
    """Refuse a name holding a control character (a newline, a tab, an escape, a direction
    override): it would split or garble every table, log line and dashboard it lands in."""
    bad = next((c for c in value if unicodedata.category(c) in CONTROL_CATEGORIES), None)
    if bad is not None:
        raise ValueError(f"{key}: {shown(value)} holds the control character U+{ord(bad):04X}; "
                         "a name is one line of printable characters")
    return value


def check_choice(value: Any, key: str, choices: tuple) -> None:
    if value not in choices:
        raise ValueError(f"{key}: {shown(value)} is not one of {', '.join(map(str, choices))}")
