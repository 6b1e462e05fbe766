"""Markdown pipe tables: the one formatter of every table the package prints or writes.

One style: columns padded to their widest cell, so that the table reads as a table in a
terminal and renders as one in Markdown; the delimiter row marks right-aligned columns
with a colon (`---:`).
A cell is made safe for one table row: a | inside it (as in a device key) is escaped
as Markdown has it (\\|) and a line break becomes a space.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence


def _cell(value) -> str:
    return " ".join(str(value).replace("|", "\\|").splitlines())


def text_table(head: Sequence, rows: Iterable[Sequence], align: str | None = None) -> str:
    """The Markdown table of `rows` under `head`. `align`: one letter a column, 'l' (left,
    the default) or 'r' (right: numbers); a row shorter than `head` is padded with
    empty cells, a longer one is an error."""
    n = len(head)
    align = align or "l" * n
    if len(align) != n or set(align) - {"l", "r"}:
        raise ValueError(f"align must be one of 'l' or 'r' for each of the {n} columns, got {align!r}")
    cells = [[_cell(c) for c in head]]
    for r in rows:
        if len(r) > n:
            raise ValueError(f"a row has {len(r)} cells for {n} columns: {list(r)!r:.200}")
        cells.append([_cell(c) for c in r] + [""] * (n - len(r)))
    widths = [max(3, *(len(r[i]) for r in cells)) for i in range(n)]

    def line(r):
        return "| " + " | ".join(c.rjust(w) if a == "r" else c.ljust(w)
                                 for c, w, a in zip(r, widths, align)) + " |"
    rule = "| " + " | ".join("-" * (w - 1) + ":" if a == "r" else "-" * w
                             for w, a in zip(widths, align)) + " |"
    return "\n".join([line(cells[0]), rule, *(line(r) for r in cells[1:])])
