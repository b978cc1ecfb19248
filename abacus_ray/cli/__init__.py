"""`abacus-ray` command line: argparse subcommands, one module each under `abacus_ray/cli/`.

Every subcommand module exposes `register(subparsers)`, which adds its parser and sets
`func=handler`. Bad input (a `ValueError` from config validation, a missing file) is printed as one
line naming the culprit and exits with status 2; set ABACUS_RAY_DEBUG=1 for the traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

# Subcommand modules in the order `--help` lists them.
COMMANDS = ("describe", "train", "eval", "summary", "dashboard")


class CLIError(Exception):
    """A user-facing error: printed as one line, exit status 2."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="abacus-ray",
        description="Train and evaluate the arithmetic transformers of 'Transformers Can Do Arithmetic "
        "with the Right Embeddings' on a laptop or a Ray cluster.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"abacus_ray.cli.{name}")
        except ModuleNotFoundError as e:  # a layer not built yet must not break the others
            if e.name and e.name.startswith("abacus_ray.cli."):
                continue
            raise
        module.register(sub)
    return parser


def add_config_args(p: argparse.ArgumentParser, default_preset: str = "tiny") -> None:
    """`--preset` and repeated `--set key=value`, shared by every command that builds a config."""
    p.add_argument("--preset", default=default_preset, help=f"named config preset: tiny or paper (default {default_preset})")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override one config value, e.g. --set model.layers=8 (repeatable)")


def config_from_args(args: argparse.Namespace):
    from abacus_ray.config import preset

    return preset(args.preset, args.overrides)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        result = args.func(args)
    except (ValueError, CLIError, FileNotFoundError, NotADirectoryError, PermissionError, IsADirectoryError) as e:
        if os.environ.get("ABACUS_RAY_DEBUG"):
            raise
        msg = " ".join(str(e).split()) or type(e).__name__
        print(f"abacus-ray {args.command}: error: {msg}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"abacus-ray {args.command}: interrupted", file=sys.stderr)
        return 130
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
