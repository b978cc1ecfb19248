"""`abacus-ray` command line: argparse subcommands, one module each under `abacus_ray/cli/`.

The one entry point: `describe`, `train`, `eval`, `eval-all`, `import-official`, `sweep`, `plan`,
`summary`, `dashboard`, `reproduce`; the `make` targets call it, and the sweep scripts
(`python sweeps/NAME.py`) run their sweep through `cli.sweep.main` under the same error path
(`guarded`), so every command shares one parser class and one error contract.

Every subcommand module exposes `register(subparsers)`, which adds its parser and sets
`func=handler`. Bad input (a `ValueError` from config validation, a missing file) is printed as one
line naming the culprit and exits with status 2; set ABACUS_RAY_DEBUG=1 for the traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import resource
import sys
from collections.abc import Callable
from pathlib import Path
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

from abacus_ray import plugins, storage  # noqa: E402 - after the check above, as everything that loads torch
from abacus_ray.config import ExperimentConfig, preset  # noqa: E402
from abacus_ray.config.dicts import parse_set  # noqa: E402
from abacus_ray.text import one_line, shorten  # noqa: E402

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
    return one_line(str(e)) or type(e).__name__


def leave_working_dir(directory: Path) -> None:
    """Make `directory` (ours, absolute) the working directory of a long-running driver.

    Under `ray job submit` the driver starts in the job's unpacked `working_dir`, which Ray owns and
    may delete while the job runs (seen on several nodes sharing one temp dir); code that calls
    `os.getcwd()` later (Tune's result listing does) would then fail. Modules are imported by then.
    """
    directory.mkdir(parents=True, exist_ok=True)
    os.chdir(directory)


# Open files Ray's processes need (sockets, pipes, logs of every worker): under `ulimit -n 64` the
# embedded Ray's node died mid-evaluation, at the common default of 1,024 it runs
MIN_OPEN_FILES = 1024


def check_open_files() -> None:
    """Enough open files for Ray: a soft limit below `MIN_OPEN_FILES` is raised toward the hard one
    (which any process may do, and Ray's processes inherit), and a hard limit below it is one
    line naming `ulimit -n`, before anything starts."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= MIN_OPEN_FILES:
        return
    if hard != resource.RLIM_INFINITY and hard < MIN_OPEN_FILES:
        raise CLIError(f"ulimit -n: this process may open {hard:,} files at most; Ray's processes "
                       f"need {MIN_OPEN_FILES:,}: raise the limit (ulimit -n {MIN_OPEN_FILES}) and "
                       "run again")
    resource.setrlimit(resource.RLIMIT_NOFILE, (MIN_OPEN_FILES, hard))


def check_cluster(address: str | None) -> None:
    """A cluster address (`--address`, else $RAY_ADDRESS) this process can join: a token to present
    and a head that answers on its port within seconds (`cluster.runtime.check_address`), before
    anything is read or created; and enough open files for Ray's processes."""
    from abacus_ray.cluster.runtime import check_address  # imports no Ray: environment and a port

    check_open_files()
    if address is not None:
        check_address(address, "--address")
    elif os.environ.get("RAY_ADDRESS"):
        check_address(os.environ["RAY_ADDRESS"], "--address (from RAY_ADDRESS)")


def join_cluster(address: str | None, *, num_cpus: int | None = None) -> None:
    """Connect to the cluster at `address` (else $RAY_ADDRESS), or start the embedded Ray: a head
    that refuses the token (Ray retries, then raises) is one line naming --address."""
    from abacus_ray.cluster import runtime  # heavy: Ray, only for a command that really runs

    joining = address or os.environ.get("RAY_ADDRESS")
    if not joining or joining == "local":
        runtime.init(address, num_cpus=num_cpus)
        return
    flag = "--address" if address else "--address (from RAY_ADDRESS)"
    try:
        runtime.init(address)
    except Exception as e:  # Ray's own exceptions: ConnectionError, RuntimeError, ...
        raise ValueError(f"{flag}: cannot join the Ray cluster at {joining} "
                         f"({one_line(str(e), 160)}); is RAY_AUTH_TOKEN (or RAY_AUTH_TOKEN_PATH's "
                         "file) the cluster's token?") from None


def check_readable(targets: list[str], flag: str) -> list[storage.Location]:
    """Refuse, in one line and in seconds, an input URI (a checkpoint, a run directory) that cannot
    be read: an unknown scheme, credentials in it, an unreachable endpoint, no such bucket. Local
    paths are checked where they are read. Returns them resolved, for the command to pass on."""
    return [storage.probe(target, flag, write=False) for target in targets]


def check_device(name: str, flag: str = "--device") -> str:
    """`auto` (CUDA if available, else CPU) or a torch device string this machine has."""
    import torch  # heavy: loaded by the commands that take --device, not at `abacus-ray --help`

    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        device = torch.device(name)
    except (RuntimeError, ValueError):
        raise CLIError(f"{flag}: {name!r} is not a device (auto, cpu, cuda, cuda:N)") from None
    if device.type not in ("cpu", "cuda"):
        raise CLIError(f"{flag}: {name!r} is not a device (auto, cpu, cuda, cuda:N)")
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise CLIError(f"{flag}: {name} requested but CUDA is not available")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise CLIError(f"{flag}: {name} requested but this machine has "
                           f"{torch.cuda.device_count()} CUDA device(s)")
    return name


def check_num_cpus(n: int | None, flag: str = "--num-cpus") -> int | None:
    """CPUs for an embedded local Ray: at least 1, at most 8 per core of this machine (Ray would
    start a worker process for every CPU it is told of once enough trials or
    evaluators are queued)."""
    if n is None:
        return None
    bound = 8 * (os.cpu_count() or 1)
    if not 1 <= n <= bound:
        raise CLIError(f"{flag}: must be in 1..{bound:,} (8 per core of this machine), got {n:,}")
    return n


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
        help=f"named config preset: tiny or paper (default {default_preset})",
    )
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override one config value, e.g. --set model.layers=8 (repeatable)")
    add_plugin_flag(p)


def add_plugin_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--plugin", dest="plugins", action="append", default=[],
                   metavar="MODULE_OR_FILE",
                   help="import a plugin that registers a position scheme or an offset draw of "
                        "one's own (a module name, or a .py file; repeatable); the config records "
                        "it, e.g. --plugin examples/alibi.py --set model.positions=alibi")


def plugin_overrides(args: argparse.Namespace) -> dict[str, str]:
    """`--plugin` items imported now, as the `plugins` override that records them (none given:
    nothing, the preset's or checkpoint's own list stays)."""
    names = [plugins.load(given) for given in getattr(args, "plugins", None) or []]
    return {"plugins": ",".join(dict.fromkeys(names))} if names else {}


def add_threads_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--threads", type=int, default=None, metavar="N",
                   help="torch CPU threads (default: the CPUs this process may use, its affinity "
                        "cut to its cgroup quota); the count changes how a CPU sums floats, so "
                        "a sweep trial's model is trained again with its own (meta.json's "
                        "threads; a sweep's workers run 1 per whole CPU they hold)")


def config_from_args(args: argparse.Namespace) -> ExperimentConfig:
    """The command's config, built once from `--plugin`, `--preset` (or `--config`) and `--set`."""
    overrides = {**plugin_overrides(args), **dict(parse_set(s) for s in args.overrides)}
    given = getattr(args, "config", None)
    if given is None:
        return preset(args.preset, overrides)
    loc = storage.resolve(given)
    if storage.is_dir(loc):  # a checkpoint directory: its own config
        loc = loc / "config.json"
    try:
        data = storage.read_json(loc)
    except FileNotFoundError:
        raise CLIError(f"--config {given}: no such config file or checkpoint") from None
    try:
        return ExperimentConfig.from_dict(data).with_overrides(overrides)
    except ValueError as e:
        raise CLIError(f"--config {given}: {e}") from None


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
