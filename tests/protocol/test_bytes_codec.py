import struct

import numpy as np
import pytest

from conveyor.errors import InvalidInput
from conveyor.protocol import bytes_codec

CASES = [
    [],
    [b""],
    [b"", b"", b""],
    [b"abc", b"", b"\xff\xfe\x00"],
    [b"x" * 1000, b"y"],
]


@pytest.mark.parametrize("elements", CASES)
def test_round_trip(elements: list[bytes]) -> None:
    array = np.array(elements, dtype=object)
    data = bytes_codec.encode(array)
    assert len(data) == bytes_codec.encoded_size(array) == sum(4 + len(e) for e in elements)
    decoded = bytes_codec.decode(data, len(elements))
    assert decoded.dtype == object
    assert decoded.tolist() == elements


def test_str_and_numpy_strings_encode_as_utf8() -> None:
    assert bytes_codec.encode(np.array(["é", "a"])) == b"\x02\x00\x00\x00\xc3\xa9\x01\x00\x00\x00a"
    assert bytes_codec.encode(np.array([b"ab"], dtype="S2")) == b"\x02\x00\x00\x00ab"


def test_decode_within_a_larger_buffer() -> None:
    payload = bytes_codec.encode(np.array([b"hi", b""], dtype=object))
    buffer = b"JUNK" + payload + b"MORE"
    decoded = bytes_codec.decode(buffer, 2, offset=4, size=len(payload))
    assert decoded.tolist() == [b"hi", b""]


@pytest.mark.parametrize(
    ("data", "count", "message"),
    [
        (struct.pack("<I", 10) + b"abc", 1, "length prefix says 10 bytes but only 3 remain"),
        (struct.pack("<I", 2**32 - 1), 1, "length prefix says 4294967295"),
        (b"\x01\x00", 1, "length prefix at byte 0 runs past the end"),
        (struct.pack("<I", 1) + b"a", 2, "holds 1 elements but the shape needs 2"),
        (struct.pack("<I", 1) + b"ab", 1, "1 bytes left over"),
        (struct.pack("<I", 1) + b"ab", None, "length prefix at byte 5 runs past the end"),
    ],
)
def test_decode_rejects_bad_lengths(data: bytes, count: int | None, message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        bytes_codec.decode(data, count)


def test_decode_rejects_a_window_outside_the_buffer() -> None:
    with pytest.raises(InvalidInput, match="outside"):
        bytes_codec.decode(b"abcd", 1, offset=2, size=10)


def test_encode_refuses_non_bytes() -> None:
    with pytest.raises(InvalidInput, match="must be bytes or str"):
        bytes_codec.encode(np.array([1, 2], dtype=object))
