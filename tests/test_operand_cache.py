import pytest

from shadertune.search.operands import OperandCache


def test_least_recently_used_goes_first_within_the_byte_bound():
    c = OperandCache(max_bytes=10)
    c["a"] = b"1234"
    c["b"] = b"1234"
    assert c.get("a") == b"1234"                # a is now the most recent
    c["c"] = b"1234"                            # 12 > 10: b goes
    assert "b" not in c and "a" in c and "c" in c and c.bytes == 8
    c["big"] = b"x" * 11                        # never fits: not kept, nothing evicted
    assert "big" not in c and len(c) == 2
    c["a"] = b"12"                              # replacing counts the new size only
    assert c.bytes == 6
    assert c.get("zz") is None and c.hits == 1 and c.misses == 1


def test_a_negative_bound_is_refused():
    with pytest.raises(ValueError, match="max_bytes"):
        OperandCache(-1)
