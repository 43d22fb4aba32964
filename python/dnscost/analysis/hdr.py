"""The engine's latency histograms (``hdr``: HdrHistogram's V2 encoding, deflate-compressed,
base64) read back into (value, count) pairs, so that a whole distribution (a CDF) is recomputed
from the raw records. Pure."""

from __future__ import annotations

import base64
import math
import struct
import zlib

__all__ = ["cdf", "decode", "quantile"]

_COMPRESSED = (0x1C849304, 0x1C849314)  # without and with the word-size nibble (Rust's crate sets it)
_ENCODING = (0x1C849303, 0x1C849313)


def _varints(data: bytes, start: int, end: int) -> list[int]:
    """ZigZag LEB128 64-bit integers (HdrHistogram's counts encoding)."""
    out = []
    i = start
    while i < end:
        shift = value = 0
        while True:
            b = data[i]
            i += 1
            value |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80 or shift >= 63:
                if shift >= 63 and b >= 0x80:  # the ninth byte carries 8 bits
                    b = data[i]
                    i += 1
                    value |= b << 56
                break
        out.append((value >> 1) ^ -(value & 1))
    return out


def decode(encoded: str) -> list[tuple[int, int]]:
    """The histogram's non-empty buckets as (value, count), values ascending (each value is its
    bucket's lowest equivalent value, as HdrHistogram reports)."""
    raw = base64.b64decode(encoded)
    cookie, length = struct.unpack(">ii", raw[:8])
    if cookie not in _COMPRESSED:
        raise ValueError(f"not a compressed V2 HdrHistogram (cookie {cookie:#x})")
    payload = zlib.decompress(raw[8 : 8 + length])
    cookie, counts_len, _offset, digits, lowest, _highest, _ratio = struct.unpack(">iiiiqqd", payload[:40])
    if cookie not in _ENCODING:
        raise ValueError(f"not a V2 HdrHistogram encoding (cookie {cookie:#x})")
    largest_single_unit = 2 * 10**digits
    sub_bucket_count = 2 ** math.ceil(math.log2(largest_single_unit))
    half = sub_bucket_count // 2
    half_magnitude = int(math.log2(sub_bucket_count)) - 1
    unit_magnitude = math.floor(math.log2(max(lowest, 1)))
    out = []
    index = 0
    for v in _varints(payload, 40, 40 + counts_len):
        if v < 0:
            index += -v
            continue
        if v:
            bucket = (index >> half_magnitude) - 1
            sub = (index & (half - 1)) + half
            if bucket < 0:
                sub -= half
                bucket = 0
            out.append((sub << (bucket + unit_magnitude), v))
        index += 1
    return out


def quantile(buckets: list[tuple[int, int]], q: float) -> int:
    """The value at quantile ``q`` (0..1) of decoded buckets."""
    total = sum(c for _, c in buckets)
    if total == 0:
        raise ValueError("empty histogram")
    rank = max(1, math.ceil(q * total))
    seen = 0
    for value, count in buckets:
        seen += count
        if seen >= rank:
            return value
    return buckets[-1][0]


def cdf(buckets: list[tuple[int, int]]) -> list[tuple[int, float]]:
    """(value, share of values at or below it) for every non-empty bucket."""
    total = sum(c for _, c in buckets)
    out, seen = [], 0
    for value, count in buckets:
        seen += count
        out.append((value, seen / total))
    return out
