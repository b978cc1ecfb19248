"""`abacus-ray` command line: argparse subcommands, one module each under `abacus_ray/cli/`.

The one entry point: `describe`, `train`, `eval`, `eval-all`, `import-official`, `sweep`, `plan`,
`summary`, `dashboard`, `reproduce`; the `make` targets call it, and the sweep scripts
(`python sweeps/NAME.py`) run their sweep through `cli.sweep.main` under the same error path
(`guarded`), so every command shares one parser class and one error contract.

Every subcommand module exposes `register(subparsers)`, which adds its parser and sets
`func=handler`; a handler turns the parsed flags into one call of the Python API
(`abacus_ray.api`: train, evaluate, sweep, evaluate_all, the verdicts) and prints what it returns.
`reproduce` runs the paper's sweeps one after another, each as `sweep` runs it. Bad input (a
`ValueError` from config validation, a missing file) is printed as one line naming the culprit and
exits with status 2; set ABACUS_RAY_DEBUG=1 for the traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import sys
from collections.abc import Callable
from typing import NoReturn


def _refuse_a_deleted_working_dir() -> None:
    """Every entry point (`abacus-ray`, `python sweeps/NAME.py`) imports this package first, before
    torch: torch's oneMKL loader dies with a fatal error in a working directory that was deleted
    (the shell still stands in it), so that case is one line and exit 2 here instead."""
    try:
        os.getcwd()
    except FileNotFoundError:
        sys.stderr.write("abacus-ray: error: the working directory no longer exists (deleted "
                         "while this shell stood in it); cd to a directory that does\n")
        raise SystemExit(2) from None


_refuse_a_deleted_working_dir()

from abacus_ray import plugins  # noqa: E402 - after the check above, as everything that loads torch
from abacus_ray.api.checks import read_config  # noqa: E402
from abacus_ray.config import ExperimentConfig, preset  # noqa: E402
from abacus_ray.config.dicts import parse_set  # noqa: E402
from abacus_ray.text import one_line, reason, shorten  # noqa: E402

# Subcommand modules in the order `--help` lists them (`eval_all` registers `eval-all`).
COMMANDS = ("describe", "train", "eval", "eval_all", "import_official", "sweep", "plan", "summary",
            "dashboard", "reproduce")


class CLIError(ValueError):
    """A user-facing error: printed as one line, exit status 2."""


# characters of one argument (Linux's PATH_MAX): longer is refused, naming its flag
MAX_ARGUMENT = 4096


def _culprit_first(message: str) -> str:
    """argparse's messages reworded so that the offending argument comes first."""
    message = one_line(message)
    m = re.fullmatch(r"unrecognized arguments: (.*)", message)
    if m:
        return f"{m.group(1)}: unrecognized argument(s)"
    m = re.fullmatch(r"the following arguments are required: (.*)", message)
    if m:
        return f"{m.group(1)}: required"
    return message.removeprefix("argument ")


class ArgumentParser(argparse.ArgumentParser):
    """argparse with the project's error contract: one line `PROG: error:
    CULPRIT: ...`, exit status 2.

    Stock argparse prints the whole usage block first, which buries the culprit (and breaks callers
    that read one line). Subparsers inherit the class.
    """

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {_culprit_first(message)} (see --help)\n")

    def parse_known_args(self, args=None, namespace=None):
        """argparse's parse, then every string argument bounded by `MAX_ARGUMENT`
        (refused naming its flag)."""
        parsed, extras = super().parse_known_args(args, namespace)
        for action in self._actions:
            # parsed again by the parser they are for (a sweep's)
            if action.nargs == argparse.REMAINDER:
                continue
            values = getattr(parsed, action.dest, None)
            for value in values if isinstance(values, list) else [values]:
                if isinstance(value, str) and len(value) > MAX_ARGUMENT:
                    name = (
                        action.option_strings[-1]
                        if action.option_strings
                        else action.metavar or action.dest
                    )
                    self.error(f"{name}: {len(value):,} characters, more than {MAX_ARGUMENT:,} "
                               f"(starting {shorten(value, 60)})")
        return parsed, extras


def parse_args(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace | int:
    """The parsed arguments, or the exit status argparse chose: 0 after --help, 2 after a usage
    error (already printed as one line by `ArgumentParser.error`)."""
    try:
        return parser.parse_args(argv)
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else 0 if e.code is None else 2


def error_text(e: BaseException) -> str:
    """One line naming the culprit: OS errors as `PATH: reason` rather than
    `[Errno N] reason: 'PATH'`.

    Our own OS errors (`FileNotFoundError(f"{path}: no such ...")`) carry their path in the message
    and are printed as they are. A system error that carries no path (`os.getcwd()` after the
    working directory was deleted) says so, with the working directory when that is what no longer
    exists.
    """
    if isinstance(e, OSError) and e.filename is not None and e.strerror:
        return one_line(f"{e.filename}: {e.strerror}")
    if isinstance(e, OSError) and e.strerror:
        try:
            os.getcwd()
            cwd = ""
        except OSError:
            cwd = (f"; the working directory {os.environ.get('PWD', '')!r} no longer "
                   "exists").replace(" ''", "")
        return one_line(f"{e.strerror}{cwd}")
    return reason(e, None)


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(
        prog="abacus-ray",
        description="Train and evaluate the arithmetic transformers of 'Transformers Can Do "
        "Arithmetic with the Right Embeddings' on a laptop or a Ray cluster.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        importlib.import_module(f"abacus_ray.cli.{name}").register(sub)
    return parser


def add_config_args(p: argparse.ArgumentParser, default_preset: str = "tiny") -> None:
    """`--preset` and repeated `--set key=value`, shared by every command that builds a config."""
    p.add_argument(
        "--preset",
        default=default_preset,
        help="the preset: tiny or paper (default: %(default)s)",
    )
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override one config value, repeatable, e.g. --set model.layers=8")
    add_plugin_flag(p)


# what `--plugin` does beyond the import, as its help says it (`eval` and `sweep` say their own)
PLUGIN_RECORDED = ("the config records it (plugins), e.g. --plugin examples/alibi.py "
                   "--set model.positions=alibi")


def add_plugin_flag(p: argparse.ArgumentParser, then: str = PLUGIN_RECORDED) -> None:
    p.add_argument("--plugin", dest="plugins", action="append", default=[],
                   metavar="MODULE_OR_FILE",
                   help="import a plugin that registers a position scheme, an offset draw or a "
                        f"task of one's own (a module name, or a .py file; repeatable); {then}")


def plugin_overrides(args: argparse.Namespace) -> dict[str, str]:
    """`--plugin` items imported now, as the `plugins` override that records them (none given:
    nothing, the preset's or checkpoint's own list stays)."""
    names = [plugins.load(given) for given in getattr(args, "plugins", None) or []]
    return {"plugins": ",".join(dict.fromkeys(names))} if names else {}


def add_threads_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--threads", type=int, default=None, metavar="N",
                   help="torch CPU threads, at most the CPUs this process may use (more is "
                        "refused); the count changes how a CPU sums floats, so a sweep trial's "
                        "model is trained again, the same model_id, with the trial's own count "
                        "(meta.json's threads; a sweep's workers run 1 per whole CPU they hold) "
                        "(default: the CPUs this process may use, its CPU affinity cut to its "
                        "cgroup quota, that other work leaves idle at start, at least 1; a "
                        "resumed run: its checkpoint's count)")


def config_from_args(args: argparse.Namespace) -> ExperimentConfig:
    """The command's config, built once from `--plugin`, `--preset` (or `--config`) and `--set`."""
    overrides = {**plugin_overrides(args), **dict(parse_set(s) for s in args.overrides)}
    given = getattr(args, "config", None)
    return preset(args.preset, overrides) if given is None else read_config(given, overrides)


def guarded(command: str, run: Callable[[], int | None]) -> int:
    """Run one command under the error contract: bad input (a ValueError, a missing file) is one
    line `abacus-ray COMMAND: error: ...` and exit status 2 (ABACUS_RAY_DEBUG=1: the
    traceback); Ctrl-C is 130."""
    try:
        result = run()
    except (ValueError, CLIError, OSError) as e:
        if os.environ.get("ABACUS_RAY_DEBUG"):
            raise
        print(f"abacus-ray {command}: error: {error_text(e)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"abacus-ray {command}: interrupted", file=sys.stderr)
        return 130
    return int(result or 0)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parse_args(parser, argv)
    if isinstance(args, int):
        return args
    return guarded(args.command, lambda: args.func(args))


if __name__ == "__main__":
    sys.exit(main())
