"""The argument tables of docs/reference.md's "Command line", rendered from the parsers' help.

Each command's section (headed by `abacus-ray COMMAND` in backticks) holds one table `| argument |
default | meaning |`, a row per argument in the order `--help` lists them (positionals first).
Every cell comes from the parser:

* argument: the positional's METAVAR (`...` after it where it takes several), or the flag's
  longest option string with its metavar (none for a flag that takes no value or has choices);
* default: `required`; else the parser's default in backticks where it has one; else the words of
  the help's trailing "(default: WORDS)"; else `off` for a flag that takes no value; else `none`;
* meaning: the help as `--help` prints it (`%%` as `%`), without that trailing phrase.

A help names a default only in that form, at its end: the word "default" elsewhere in a help is
refused, and so is a phrase that names another value than the parser's default. `sweep`'s table
is of the flags of a sweep without flags of its own (`fig10_k`), after the `sweep` command's NAME.

    python docs/reference_cli.py          rewrite the tables in docs/reference.md in place
    python docs/reference_cli.py --check  exit status 1, naming each command whose table differs

tests/test_docs_reference.py fails while the page's tables differ from what this renders.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
REFERENCE = REPO / "docs" / "reference.md"
HEADER = ("argument", "default", "meaning")

# The metavar a table shows for a flag whose parser sets none (argparse's own would be the flag's
# name in capitals, `--per-cell PER_CELL`); a flag not named here shows argparse's.
SHORT_METAVARS = {
    "--address": "ADDR", "--budget-hours": "H", "--cells": "SPEC", "--diagonal": "SPEC",
    "--flush-every-cells": "N", "--flush-every-s": "S", "--grid": "G", "--max-trials": "N",
    "--name": "NAME", "--num-cpus": "N", "--out": "DIR", "--per-cell": "N", "--port": "P",
    "--recurrences": "R", "--run-id": "ID", "--seed": "S", "--seeds": "N", "--seq-len": "S",
    "--storage": "DIR", "--token-budget": "N", "--train-max-len": "N",
}
# flags shown without a metavar though they take a value (the meaning names what they take)
NO_METAVAR = {"--preset", "--device"}

DEFAULT_PHRASE = "(default: "


def parsers() -> dict[str, argparse.ArgumentParser]:
    """Every command's parser by its name, in the order `abacus-ray --help` lists them; `sweep`'s is
    a sweep's flags (`fig10_k`'s) after the `sweep` command's NAME."""
    from abacus_ray import figures
    from abacus_ray.cli import build_parser
    from abacus_ray.cli.sweep import build_parser as sweep_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    out = dict(sub.choices)
    name = next(a for a in out["sweep"]._actions if a.metavar == "NAME")
    sweep = sweep_parser(figures.figure("fig10_k"))
    sweep.add_argument(name.dest, metavar=name.metavar, help=name.help)
    out["sweep"] = sweep
    return out


def documented(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The actions a table shows: positionals, then flags, as `--help` orders them."""
    shown = [a for a in parser._actions if not isinstance(a, argparse._HelpAction)
             and a.help != argparse.SUPPRESS and a.nargs != argparse.REMAINDER]
    return ([a for a in shown if not a.option_strings] + [a for a in shown if a.option_strings])


def takes_no_value(action: argparse.Action) -> bool:
    return action.nargs == 0


def required(action: argparse.Action) -> bool:
    return action.required and action.nargs not in ("?", "*")


def literal_default(action: argparse.Action) -> bool:
    """Whether the parser holds the default itself (not None, False, [] or suppressed; 0 is)."""
    none = (action.default is None or action.default is False or action.default == []
            or action.default is argparse.SUPPRESS)
    return not none and not required(action)


def help_text(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    """The help as `--help` prints it: `%(default)s` expanded, `%%` as `%`, on one line."""
    return " ".join(parser._get_formatter()._expand_help(action).split())


def split_default(help: str, where: str) -> tuple[str, str | None]:
    """(the help without its trailing "(default: WORDS)", WORDS or None). Refused: the word
    "default" anywhere else, or a phrase whose parentheses do not close at the help's end."""
    start = help.rfind(DEFAULT_PHRASE)
    if start < 0:
        words = None
    else:
        words, depth, closed = help[start + len(DEFAULT_PHRASE):], 1, None
        for i, c in enumerate(words):  # where the phrase's own "(" closes: the help's end
            depth += (c == "(") - (c == ")")
            if depth == 0:
                closed = i
                break
        if closed != len(words) - 1:
            raise ValueError(f"{where}: its help's {DEFAULT_PHRASE!r}...')' must end the help")
        words, help = words[:-1].strip(), help[:start].rstrip()
    if re.search(r"\bdefault\b", help, flags=re.I):
        raise ValueError(f"{where}: its help names a default other than in a trailing "
                         f"{DEFAULT_PHRASE!r}...')'")
    return help, words


def argument_cell(action: argparse.Action) -> str:
    if not action.option_strings:
        name = action.metavar or action.dest.upper()
        return f"`{name}...`" if action.nargs in ("+", "*") else f"`{name}`"
    flag = max(action.option_strings, key=len)
    if takes_no_value(action) or flag in NO_METAVAR or (action.choices and not action.metavar):
        return f"`{flag}`"
    metavar = action.metavar or SHORT_METAVARS.get(flag) or action.dest.upper()
    return f"`{flag} {metavar}`"


def default_cell(action: argparse.Action, words: str | None, where: str) -> str:
    if required(action):
        return "required"
    if literal_default(action):
        if words is not None and words != str(action.default):
            raise ValueError(f"{where}: its help says default {words!r}, the parser "
                             f"{action.default!r}")
        return f"`{action.default}`"
    if words is not None:
        return markdown(words)
    return "off" if takes_no_value(action) else "none"


def markdown(text: str) -> str:
    """Text as the contents of a table cell: what Markdown would read as a table's column break,
    emphasis, an HTML tag or strikethrough escaped."""
    return re.sub(r"([\\|*<~])", r"\\\1", text)


def rows(command: str, parser: argparse.ArgumentParser) -> list[tuple[str, str, str]]:
    out = []
    for action in documented(parser):
        where = f"abacus-ray {command} {argument_cell(action).strip('`')}"
        meaning, words = split_default(help_text(parser, action), where)
        out.append((argument_cell(action), default_cell(action, words, where), markdown(meaning)))
    return out


def table(command: str, parser: argparse.ArgumentParser | None = None) -> str:
    """`abacus-ray COMMAND`'s table, as the page holds it (no trailing newline)."""
    parser = parser or parsers()[command]
    lines = ["| " + " | ".join(HEADER) + " |", "|---|---|---|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows(command, parser)]
    return "\n".join(lines)


def table_span(text: str, command: str) -> tuple[int, int]:
    """Where `abacus-ray COMMAND`'s argument table lies in the page's text (start, end)."""
    heading = re.search(rf"^### `abacus-ray {re.escape(command)}`\n", text, flags=re.M)
    if heading is None:
        raise ValueError(f"docs/reference.md: no section ### `abacus-ray {command}`")
    end = re.search(r"^#{1,3} ", text[heading.end():], flags=re.M)
    body_end = heading.end() + end.start() if end else len(text)
    head = "| " + " | ".join(HEADER) + " |\n"
    start = text.find(head, heading.end(), body_end)
    if start < 0 or (start > 0 and text[start - 1] != "\n"):
        raise ValueError(f"docs/reference.md: abacus-ray {command}: no table {head.strip()}")
    stop = start  # past the table's last line and its newline
    while stop < body_end and text.startswith("|", stop):
        stop = (text.find("\n", stop) + 1) or len(text) + 1
    return start, stop - 1


def documented_table(text: str, command: str) -> str:
    start, stop = table_span(text, command)
    return text[start:stop]


def rewrite(text: str) -> str:
    """The page with every command's table rendered anew; the rest of it as it was."""
    for command, parser in parsers().items():
        start, stop = table_span(text, command)
        text = text[:start] + table(command, parser) + text[stop:]
    return text


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args not in ([], ["--check"]):
        print("usage: python docs/reference_cli.py [--check]", file=sys.stderr)
        return 2
    from abacus_ray import storage

    page = storage.on_disk(REFERENCE)
    text = storage.read_text(page)
    if args == ["--check"]:
        stale = [c for c, p in parsers().items() if documented_table(text, c) != table(c, p)]
        for command in stale:
            print(f"docs/reference.md: the table of abacus-ray {command} differs from its "
                  "parser's help; run python docs/reference_cli.py", file=sys.stderr)
        return 1 if stale else 0
    new = rewrite(text)
    if new != text:
        storage.write_text(page, new)  # atomically
        print("docs/reference.md: command tables rewritten")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    sys.exit(main())
