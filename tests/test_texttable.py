"""The one Markdown table formatter (shadertune/core/texttable.py)."""
import pytest
from md_table import cells, is_delimiter

from shadertune.core.texttable import text_table


def test_padded_columns_alignment_row_and_escaped_cells():
    md = text_table(["device", "GFLOP/s", "note"],
                    [["llvmpipe | 4.5 Mesa", "7.25", "two\nlines"], ["gpu", "12000", ""]], "lrl")
    lines = md.splitlines()
    assert len(lines) == 4 and len({len(l) for l in lines}) == 1          # one width: padded
    assert cells(lines[0]) == ["device", "GFLOP/s", "note"]
    assert is_delimiter(lines[1]) and cells(lines[1])[1].endswith(":") and not cells(lines[1])[0].endswith(":")
    assert cells(lines[2]) == ["llvmpipe \\| 4.5 Mesa", "7.25", "two lines"]     # one row, | escaped
    assert lines[3].split("|")[2] == "   12000 "                           # right-aligned number


def test_short_rows_are_padded_and_bad_shapes_refused():
    assert [cells(l) for l in text_table(["a", "b"], [["x"]]).splitlines()][2] == ["x", ""]
    assert text_table(["a"], []).splitlines()[1] == "| --- |"
    with pytest.raises(ValueError, match="3 cells for 2 columns"):
        text_table(["a", "b"], [[1, 2, 3]])
    with pytest.raises(ValueError, match="align"):
        text_table(["a", "b"], [], "lc")
