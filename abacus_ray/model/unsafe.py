"""Files that would run code when loaded: how to tell, and the one sentence that refuses them.

A torch file is a pickle (inside a zip archive, or bare in the legacy and raw forms), and a pickle
is a small program: it may name any Python callable (`posix.system`, `builtins.exec`) for the loader
to call. `torch.load(weights_only=True)` refuses every callable outside its list of tensor builders,
but its error calls such a file "weights only load failed" and advises retrying with the unsafe
loader, cut mid-sentence by whoever shortens it. A user told a file is "damaged", and shown that
advice, may well load it unsafely. So a refused file is read here without running it (`pickletools`
only walks the opcodes): when it names a callable a weights-only load will not run, `unsafe_file` is
the message, the same words on every path that loads or imports checkpoints. Nothing here suggests
the unsafe load.
"""

from __future__ import annotations

import functools
import io
import pickletools
import zipfile
from pathlib import Path

# the legacy torch format: magic, protocol, system info, the object, its storage keys
MAX_PICKLES = 5
MAX_SCANNED_BYTES = 64 << 20  # a pickle's opcodes, not its tensor data, live in the first bytes
_STRINGS = {"SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE", "SHORT_BINSTRING",
            "BINSTRING", "STRING"}
_PUTS, _GETS = {"PUT", "BINPUT", "LONG_BINPUT"}, {"GET", "BINGET", "LONG_BINGET"}
# protocol 0-2 names, as pickle maps them
_PY2_MODULES = {"__builtin__": "builtins", "copy_reg": "copyreg"}


def unsafe_file(path: str | Path, callable_name: str) -> str:
    """The one wording for a file that holds code: the file, what it would call, and that nothing
    ran."""
    return (f"{path}: holds code that a weights-only load will not run "
            f"(it would call {callable_name}); refused, nothing in it was run")


@functools.cache
def _tensor_builders() -> frozenset[str]:
    """The callables torch's weights-only loader builds tensors with (its own list where torch has
    one)."""
    try:
        # optional: a private torch module, not in every version
        from torch._weights_only_unpickler import _get_allowed_globals

        return frozenset(_get_allowed_globals())
    except (ImportError, AttributeError):  # another torch: the names torch.save writes for tensors
        return frozenset({"collections.OrderedDict", "torch._utils._rebuild_tensor_v2",
                          "torch._utils._rebuild_parameter", "torch.FloatStorage",
                          "torch.LongStorage", "torch.ByteStorage", "torch.IntStorage"})


def _globals_of_one(stream: io.BufferedIOBase) -> list[str]:
    """The callables one pickle on `stream` names, in order; ValueError if not a whole pickle."""
    names: list[str] = []
    memo: dict[int, object] = {}

    def named(module: object, name: object) -> str:
        return f"{_PY2_MODULES.get(str(module), module)}.{name}"

    strings: list[object] = []
    last: object = None
    for op, arg, _ in pickletools.genops(stream):
        value = None
        if op.name in ("GLOBAL", "INST"):
            names.append(named(*str(arg).split(" ", 1)))
        elif op.name == "STACK_GLOBAL" and len(strings) >= 2:
            names.append(named(strings[-2], strings[-1]))
        elif op.name in _STRINGS:
            value = arg if isinstance(arg, str) else bytes(arg).decode("latin-1")
        elif op.name == "MEMOIZE":
            memo[len(memo)] = last
        elif op.name in _PUTS:
            memo[int(arg)] = last
        elif op.name in _GETS:
            value = memo.get(int(arg))
        if isinstance(value, str):
            strings.append(value)
        last = value if op.name not in ("MEMOIZE", *_PUTS) else last
    return names


def named_callables(path: str | Path) -> list[str]:
    """Every callable the pickles of a torch file (zip, legacy or raw pickle) name, without running
    any; empty for a file that holds no whole pickle (truncated, garbage, not a pickle)."""
    path = Path(path)
    try:
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as archive:
                member = next((n for n in archive.namelist() if n.endswith("data.pkl")), None)
                if member is None or archive.getinfo(member).file_size > MAX_SCANNED_BYTES:
                    return []
                data = archive.read(member)
        else:
            with open(path, "rb") as fh:
                data = fh.read(MAX_SCANNED_BYTES)
    except (OSError, zipfile.BadZipFile, ValueError):
        return []
    stream = io.BytesIO(data)
    names: list[str] = []
    for _ in range(MAX_PICKLES):
        if stream.tell() >= len(data):
            break
        try:
            names += _globals_of_one(stream)
        except Exception:  # any failure on untrusted bytes: not a whole pickle
            break  # (the legacy format's raw tensor bytes follow its pickles)
    return names


def code_it_names(path: str | Path) -> str | None:
    """A callable `path` names that a weights-only load will not run, or None: the first outside
    torch if any (`posix.system` says more than torch's own unpickling helpers it may name before
    it)."""
    builders = _tensor_builders()
    refused = [n for n in named_callables(path) if n not in builders]
    return next((n for n in refused if not n.startswith("torch.")), refused[0] if refused else None)
