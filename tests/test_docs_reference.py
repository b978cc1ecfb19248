"""docs/reference.md against what it documents, so that the page cannot drift from the code.

Each command's table against its argparse parser: the very table `docs/reference_cli.py` renders
from the parsers' help, and independently every argument, its default and its choices; the
config-key tables against the config dataclasses, the presets table against the presets, the grids
against the named grids, the sweeps against the figures and the Makefile's aliases, and the make
targets and variables against the Makefile; every `make X` the other pages give is a target. No
Ray, no training: the pages are read and the parsers are built.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import importlib.util
import re
from pathlib import Path
from typing import Any

import pytest

from abacus_ray import figures
from abacus_ray.cli.sweep import build_parser as sweep_parser
from abacus_ray.config import EvalConfig, ExperimentConfig, preset
from abacus_ray.config.cluster import PLACEMENTS, TRAINERS
from abacus_ray.config.evaluation import ENGINES, HINT_SCORINGS
from abacus_ray.config.model import INIT_STATES, INJECTIONS, K_DRAWS, NORMS, POSITIONS
from abacus_ray.config.task import HINTS, TASKS
from abacus_ray.config.train import PRECISIONS, REDUCTIONS, WORKER_DRAWS
from abacus_ray.evaluation.grids import GRIDS

REPO = Path(__file__).resolve().parents[1]
REFERENCE = (REPO / "docs" / "reference.md").read_text()
MAKEFILE = (REPO / "Makefile").read_text()
_spec = importlib.util.spec_from_file_location("reference_cli", REPO / "docs" / "reference_cli.py")
reference_cli = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(reference_cli)


# --- reading the page ----------------------------------------------------------------------------

def section(title: str) -> str:
    """The body under the heading `title` (any level), up to the next heading of the same or a
    higher level."""
    text = REFERENCE
    m = re.search(rf"^(#+) {re.escape(title)}\n", text, flags=re.M)
    assert m, f"docs/reference.md: no heading {title!r}"
    level = len(m.group(1))
    end = re.search(rf"^#{{1,{level}}} ", text[m.end():], flags=re.M)
    return text[m.end(): m.end() + end.start() if end else len(text)]


def tables(body: str) -> list[tuple[list[str], list[list[str]]]]:
    """Every Markdown table in `body`: its header cells and its rows' cells."""
    out: list[tuple[list[str], list[list[str]]]] = []
    block: list[list[str]] = []
    for line in [*body.splitlines(), ""]:
        if line.startswith("|"):  # `\|` is a `|` inside a cell
            block.append([c.strip() for c in re.split(r"(?<!\\)\|", line.strip()[1:-1])])
        elif block:
            out.append((block[0], block[2:]))
            block = []
    return out


def rows_under(body: str, header: list[str]) -> list[list[str]]:
    found = [rows for head, rows in tables(body) if head == header]
    assert found, f"no table with header {header} in this part of docs/reference.md"
    return [row for rows in found for row in rows]


def ticks(cell: str) -> list[str]:
    return re.findall(r"`([^`]*)`", cell)


def value(text: str) -> Any:
    """A documented value: `unset`, `true`/`false`, a number, or a literal in backticks."""
    text = text.strip()
    if text == "unset":
        return None
    if text in ("true", "false"):
        return text == "true"
    if len(text) > 1 and text[0] == text[-1] == "`":
        inner = text[1:-1]
        try:
            return ast.literal_eval(inner)
        except (ValueError, SyntaxError):
            return inner
    return float(text.replace(",", ""))


def values(cell: str, n: int) -> list[Any]:
    """`n` values of one cell, separated by ', ' outside backticks."""
    parts = [cell] if n == 1 else re.split(r",\s+(?=(?:[^`]*`[^`]*`)*[^`]*$)", cell)
    assert len(parts) == n, f"{cell!r}: expected {n} values"
    return [value(p) for p in parts]


def same(documented: Any, actual: Any) -> bool:
    if isinstance(actual, bool) or actual is None or isinstance(documented, bool):
        return documented is actual
    if isinstance(actual, (int, float)) and isinstance(documented, (int, float)):
        return float(documented) == float(actual)
    return documented == actual


# --- the command line ----------------------------------------------------------------------------

def arguments(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """A parser's arguments by the name the reference uses: `--long-flag`, or a positional's
    METAVAR."""
    out = {}
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        if action.option_strings:
            out[max(action.option_strings, key=len)] = action
        else:
            out[action.metavar or action.dest.upper()] = action
    return out


def commands() -> dict[str, argparse.ArgumentParser]:
    """Every command's parser; `sweep NAME [flags]`'s is the flags of a sweep without flags of its
    own, after NAME (the sweeps' own flags are checked below)."""
    return reference_cli.parsers()


def documented_arguments(command: str) -> dict[str, list[str]]:
    """The rows of `abacus-ray COMMAND`'s argument table, by the one argument each row names."""
    rows = rows_under(section(f"`abacus-ray {command}`"), ["argument", "default", "meaning"])
    out = {}
    for row in rows:
        names = [t.split()[0].removesuffix("...") for t in ticks(row[0])]
        assert len(names) == 1, f"abacus-ray {command}: a row names one argument, got {row[0]!r}"
        out[names[0]] = row
    return out


@pytest.mark.parametrize("command", sorted(commands()))
def test_every_command_table_is_what_its_parsers_help_renders(command):
    """The table is `--help`'s text, argument by argument: a help changed without the page
    rewritten (`python docs/reference_cli.py`) fails here."""
    documented = reference_cli.documented_table(REFERENCE, command)
    assert documented == reference_cli.table(command, commands()[command]), (
        f"docs/reference.md: the table of abacus-ray {command} is not its parser's help; run "
        "python docs/reference_cli.py")


@pytest.mark.parametrize("help_text", [
    "problems per cell (default 100)",
    "problems per cell (default: 100), at most 10",
    "teacher (one forward per cell, default), kv",
    "problems per cell (default: the checkpoint's (eval.per_cell)",
])
def test_a_default_not_stated_in_the_one_trailing_form_is_refused(help_text):
    with pytest.raises(ValueError, match="default"):
        reference_cli.split_default(help_text, "abacus-ray eval --per-cell")


def test_a_help_whose_default_is_not_the_parsers_is_refused():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=8765, help="a port (default: 8080)")
    with pytest.raises(ValueError, match="8080"):
        reference_cli.table("x", parser)


def test_eval_defaults_to_the_first_checkpoints_eval_settings():
    """Every `eval` option named as an `eval.*` key is unset in the parser and its help names that
    key as its default (`api.runs.eval_settings` takes the first checkpoint's), never a number."""
    parser = commands()["eval"]
    keys = {f.name for f in dataclasses.fields(EvalConfig)}
    options = [a for a in parser._actions if a.dest in keys]
    assert len(options) == 8
    for action in options:
        _, words = reference_cli.split_default(reference_cli.help_text(parser, action), "")
        assert action.default is None, action.dest
        assert words == f"the first checkpoint's eval.{action.dest}" or words.startswith(
            f"the first checkpoint's eval.{action.dest};"), action.dest


def test_every_command_description_is_whole_sentences():
    """A description cut at a line break (the first line of a docstring) ends mid-sentence."""
    for command, parser in commands().items():
        if command != "sweep":  # a sweep's parser describes the sweep (its caption)
            assert parser.description.rstrip().endswith("."), command


@pytest.mark.parametrize("command", sorted(commands()))
def test_every_argument_of_every_command_is_documented_with_its_default(command):
    actual = arguments(commands()[command])
    documented = documented_arguments(command)
    assert sorted(documented) == sorted(actual), f"abacus-ray {command}: the reference's arguments"
    for name, action in actual.items():
        default_cell = documented[name][1]
        literal = re.match(r"`([^`]*)`", default_cell)
        where = f"abacus-ray {command} {name}: default {default_cell!r}"
        if action.required and action.nargs not in ("?", "*"):
            assert default_cell == "required", where
        elif action.default is None or action.default is False or action.default in (
                [], argparse.SUPPRESS):  # None, False by identity: 0 is a literal
            assert literal is None, f"{where}, but the parser has none (say what applies, in words)"
        else:
            assert literal, f"{where}, parser {action.default!r}"
            assert same(value(literal.group(0)), action.default), f"{where}, not {action.default}"
        row = " ".join(documented[name])
        for choice in action.choices or ():
            named = re.search(rf"(?<![\w-]){re.escape(choice)}(?![\w-])", row)
            assert named, f"abacus-ray {command} {name}: choice {choice!r} not in the row"


def test_every_sweeps_own_flags_are_documented():
    body = section("`abacus-ray sweep`")
    base = set(arguments(sweep_parser(figures.figure("fig10_k"))))
    for name in figures.names():
        own = set(arguments(sweep_parser(figures.figure(name)))) - base
        for flag in own:
            assert re.search(rf"`{flag}\b", body), f"{name}'s {flag}"
        if own:
            assert f"`{name}`" in body, f"{name} adds {sorted(own)}"


def test_eval_help_lists_every_named_grid():
    grid = arguments(commands()["eval"])["--grid"]
    assert [g for g in GRIDS if g not in grid.help] == []


# --- config keys, presets, grids -----------------------------------------------------------------

def config_values(config: Any, prefix: str = "") -> dict[str, Any]:
    out = {}
    for f in dataclasses.fields(config):
        v = getattr(config, f.name)
        if dataclasses.is_dataclass(v):
            out.update(config_values(v, f"{prefix}{f.name}."))
        else:
            out[f"{prefix}{f.name}"] = v
    return out


# the choices a config key takes, where a fixed list holds them
KEY_CHOICES = {
    "task.name": TASKS, "task.index_hints": HINTS, "model.positions": POSITIONS,
    "model.injection": INJECTIONS, "model.norm": NORMS, "model.init_state": INIT_STATES,
    "model.k_draw": K_DRAWS, "train.precision": PRECISIONS, "train.loss_reduction": REDUCTIONS,
    "train.worker_draws": WORKER_DRAWS, "eval.precision": PRECISIONS, "eval.engine": ENGINES,
    "eval.hint_scoring": HINT_SCORINGS, "cluster.trainer": TRAINERS,
    "cluster.placement": PLACEMENTS,
}


def test_every_config_key_with_fixed_choices_names_each_of_them():
    rows = {ticks(row[0])[0]: row for row in rows_under(section("Config keys"),
                                                        ["key", "default", "meaning"])}
    missing = {key: [c for c in choices if c not in ticks(rows[key][2])]
               for key, choices in KEY_CHOICES.items()}
    assert {k: v for k, v in missing.items() if v} == {}


def test_every_config_key_is_documented_with_its_default():
    actual = config_values(ExperimentConfig())
    documented = {}
    for row in rows_under(section("Config keys"), ["key", "default", "meaning"]):
        keys = ticks(row[0])
        documented.update(zip(keys, values(row[1], len(keys)), strict=True))
    assert sorted(documented) == sorted(actual)
    wrong = {k: (documented[k], v) for k, v in actual.items() if not same(documented[k], v)}
    assert wrong == {}, "key: (documented, actual)"


def test_the_presets_table_holds_every_value_a_preset_changes():
    paper, tiny = config_values(preset("paper")), config_values(preset("tiny"))
    documented = {}
    for row in rows_under(section("Presets"), ["key", "`paper`", "`tiny`"]):
        for key in ticks(row[0]):
            documented[key] = (value(row[1]), value(row[2]))
    default = config_values(ExperimentConfig())
    changed = {k for k in default if not (paper[k] == tiny[k] == default[k])}
    assert sorted(changed - set(documented)) == []
    wrong = {k: v for k, v in documented.items()
             if not (same(v[0], paper[k]) and same(v[1], tiny[k]))}
    assert wrong == {}, "key: (documented paper, documented tiny)"


def test_the_tiny_fig10_facts():
    trial = figures.figure("fig10_k").expand("tiny")[0].config
    steps, batch = f"{trial.train.max_steps:,}", str(trial.train.global_batch)
    readme = (REPO / "README.md").read_text()
    for page, text in (("docs/reference.md", REFERENCE), ("README.md", readme)):
        claims = re.findall(r"Fig\. 10[^.]*?([\d,]+) steps of (\d+)", text)
        assert claims, page
        assert set(claims) == {(steps, batch)}, page


TASK_SIGNS = {"+": "add", "-": "sub", "x": "mul", "sort": "sort", "OR": "or", "the model's": None}


def test_every_named_grid_is_documented_with_its_task():
    documented = {ticks(row[0])[0]: TASK_SIGNS[row[2]] for row in
                  rows_under(section("Grids"), ["name", "cells", "task"])}
    assert documented == {name: grid.task for name, grid in GRIDS.items()}


# --- sweeps and the Makefile ---------------------------------------------------------------------

def make_targets() -> set[str]:
    rules = set(re.findall(r"^([a-z][\w-]*):", MAKEFILE, flags=re.M))
    return rules | set(make_figures())


def make_figures() -> list[str]:
    m = re.search(r"^FIGURES\s*:=((?:.*\\\n)*.*)$", MAKEFILE, flags=re.M)
    return m.group(1).replace("\\", " ").split()


def make_aliases() -> dict[str, str]:
    return dict(re.findall(r"^([a-z][\w-]*): ([a-z]\w*)\s*(?:#.*)?$", MAKEFILE, flags=re.M))


def test_every_sweep_and_its_make_alias_are_documented():
    rows = rows_under(section("Sweeps"), ["sweep", "make alias", "what"])
    documented = {ticks(r[0])[0]: ticks(r[1])[0] for r in rows}
    assert sorted(documented) == sorted(figures.names()) == sorted(make_figures())
    aliases = {a: f for a, f in make_aliases().items() if f in documented}
    assert {v: k for k, v in documented.items()} == aliases


def test_every_make_target_and_variable_is_documented():
    body = section("Make targets")
    documented = set()
    for row in rows_under(body, ["target", "what"]):
        for tick in ticks(row[0]):
            words = tick.removeprefix("make ").split()
            documented |= {w for w in words if re.fullmatch(r"[a-z][\w-]*", w)}
    sweeps = set(make_figures()) | set(make_aliases())
    assert sorted(documented - make_targets()) == []
    assert sorted(make_targets() - sweeps - documented) == []
    variables = set(re.findall(r"^([A-Z_]+)\s*\?=", MAKEFILE, flags=re.M))
    variables |= set(re.findall(r"\$\((?:if|or) \$\(([A-Z_]+)\)", MAKEFILE))
    assert sorted(v for v in variables if not re.search(rf"`(make [^`]*)?\b{v}\b", body)) == []


@pytest.mark.parametrize("page", ["README.md", "docs/guide.md", "docs/reference.md",
                                  "docs/performance.md", "docs/results.md"])
def test_every_make_command_the_docs_give_is_a_target(page):
    text = (REPO / page).read_text()
    named = set(re.findall(r"(?:`|^\s*)make ([a-z][\w-]*)", text, flags=re.M))
    assert sorted(named - make_targets()) == []


def test_every_environment_variable_of_the_project_is_documented():
    """Ours (`ABACUS_*`) wherever they are read, and the AWS variables the storage code reads
    itself (`AWS_ENDPOINT_URL_S3` before `AWS_ENDPOINT_URL`, the region's two)."""
    read = set()
    for folder in ("abacus_ray", "dashboards", "tests"):
        for path in (REPO / folder).rglob("*.py"):
            read |= set(re.findall(r"[\"'](ABACUS_[A-Z_]+)[\"']", path.read_text()))
    for path in (REPO / "abacus_ray").rglob("*.py"):
        read |= set(re.findall(r"[\"'](AWS_[A-Z0-9_]+)[\"']", path.read_text()))
    rows = rows_under(section("Environment variables"), ["variable", "read by", "meaning"])
    documented = {t for row in rows for t in ticks(row[0])}
    assert read and sorted(read - documented) == []
