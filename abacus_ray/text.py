"""Text a message repeats from outside: the one home of cutting it to a readable length.

A refusal names its culprit in one line, and the culprit may be anything a user or a library
handed us: a 100 KB path, a parser's multi-line error, a library's exception with a stack of
context in its message. Every message that quotes such text goes through here, so no line grows
without bound and every cut looks the same (an ellipsis where something was cut).
"""

from __future__ import annotations

MAX_ECHO = 200  # characters of one value (a path, a URI, a number) that a refusal repeats
ELLIPSIS = "\u2026"


def shorten(text: str, limit: int = MAX_ECHO) -> str:
    """`text`, or its first `limit` characters and an ellipsis."""
    return text if len(text) <= limit else f"{text[:limit]}{ELLIPSIS}"


def one_line(message: str, limit: int | None = None) -> str:
    """`message` on one line (runs of whitespace, newlines included, become one space), each word
    cut to `MAX_ECHO` characters, and the whole to `limit` where one is given."""
    line = " ".join(shorten(word) for word in str(message).split())
    return line if limit is None else shorten(line, limit)


def reason(error: BaseException, limit: int | None = MAX_ECHO) -> str:
    """Why `error` happened, in one line of at most `limit` characters (None: each word cut, the
    line not): its message, else (an exception raised without one) its type's name."""
    return one_line(str(error), limit) or type(error).__name__
