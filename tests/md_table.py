"""Reading the Markdown tables the tools print (shadertune/core/texttable.py): each table
line as its list of cells, stripped of their padding, an escaped \\| kept as it is."""
import re


def cells(line: str) -> list[str]:
    return [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


def is_delimiter(line: str) -> bool:
    return bool(re.fullmatch(r"\|( *:?-+:? *\|)+", line.strip()))


def table_lines(md: str) -> list[list[str]]:
    """Every row of every table in `md`, headers included, delimiter rows left out."""
    return [cells(l) for l in md.splitlines() if l.startswith("|") and not is_delimiter(l)]
