"""Plain-text tables for the command lines: a Markdown pipe table, columns padded
(a | inside a cell, as in a device key, is escaped as Markdown has it)."""
from __future__ import annotations


def text_table(head: list[str], rows: list[list]) -> str:
    cells = [[str(c).replace("|", "\\|") for c in r] for r in [head, *rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(head))]

    def line(r):
        return "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |"
    return "\n".join([line(cells[0]), "|" + "|".join("-" * (w + 2) for w in widths) + "|"] +
                     [line(r) for r in cells[1:]])
