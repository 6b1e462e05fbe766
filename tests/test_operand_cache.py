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


def test_arrays_count_their_bytes_not_their_rows():
    np = pytest.importorskip("numpy")
    c = OperandCache(max_bytes=1000)
    c["a"] = np.zeros((10, 10), np.float32)     # 400 bytes (its len() is 10)
    c["b"] = np.zeros((10, 10), np.float32)
    assert c.bytes == 800
    c["c"] = np.zeros((10, 10), np.float32)     # 1200 > 1000: a goes
    assert "a" not in c and c.bytes == 800
