"""HTML building blocks with escaping by default.

Run names, sweep names and config values come from users; every string that reaches a page goes
through `html.escape` unless it is wrapped in `Raw` (markup this package wrote itself). Data for the
browser sits in a `<script type="application/json">` block whose `<`, `>` and `&` are written as
JSON unicode escapes, so no value can close the block, and the page script inserts text with
`textContent` only.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable, Sequence
from typing import Any

ASSETS = "assets"


class Raw(str):
    """Markup written by this package: inserted as is."""


def esc(value: Any) -> str:
    if isinstance(value, Raw):
        return str(value)
    return html.escape("" if value is None else str(value), quote=True)


def link(href: str, text: Any) -> Raw:
    return Raw(f'<a href="{esc(href)}">{esc(text)}</a>')


def fmt_pct(v: Any, std: Any = None) -> str:
    """'97.9' or '97.9 ± 0.4'; '—' when missing."""
    if v is None or v != v:
        return "—"
    text = f"{float(v):.1f}"
    if std is not None and std == std:
        text += f" ± {float(std):.1f}"
    return text


def fmt_int(v: Any) -> str:
    if v is None or v != v:
        return "—"
    return f"{int(v):,}"


def fmt_num(v: Any, digits: int = 3) -> str:
    if v is None or v != v:
        return "—"
    return f"{float(v):.{digits}g}"


def table(columns: Sequence[str], rows: Iterable[Sequence[Any]], *, cls: str = "data",
          numeric: Sequence[bool] = ()) -> Raw:
    """A plain table; `numeric[k]` right-aligns column k."""
    num = list(numeric) + [False] * (len(columns) - len(numeric))
    head = "".join(
        f"<th{' class=num' if n else ''}>{esc(c)}</th>" for c, n in zip(columns, num, strict=True)
    )
    body = []
    for row in rows:
        tds = "".join(
            f"<td{' class=num' if n else ''}>{esc(v)}</td>" for v, n in zip(row, num, strict=True)
        )
        body.append(f"<tr>{tds}</tr>")
    return Raw(f'<div class="scroll"><table class="{esc(cls)}"><thead><tr>{head}</tr></thead>'
               f'<tbody>{"".join(body)}</tbody></table></div>')


def json_block(element_id: str, data: Any) -> Raw:
    """Data for the page script; safe inside HTML whatever strings it holds."""
    text = json.dumps(data, separators=(",", ":"), allow_nan=False)
    text = (text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))
    return Raw(f'<script type="application/json" id="{esc(element_id)}">{text}</script>')


def page(title: str, body: str, *, nav: Sequence[tuple[str, str]] = (), data: Any = None,
         scripts: Sequence[str] = ()) -> str:
    """A whole page: shared stylesheet, navigation, body, optional data block
    and scripts from assets/."""
    nav_html = " ".join(str(link(href, text)) for href, text in nav)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{esc(title)}</title>",
        f'<link rel="stylesheet" href="{ASSETS}/dashboard.css">',
        "</head><body>",
        f'<nav class="top">{nav_html}</nav>',
        f"<main>{body}</main>",
    ]
    if data is not None:
        parts.append(str(json_block("dashboard-data", data)))
    parts += [f'<script src="{ASSETS}/{esc(s)}"></script>' for s in scripts]
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
