"""The engine's latency histograms (``hdr``: HdrHistogram's V2 encoding, deflate-compressed,
base64) read back into (value, count) pairs, so that a whole distribution (a CDF) is recomputed
from the raw records. Pure."""

from __future__ import annotations

import base64
import functools
import math
import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Layout", "cdf", "decode", "decode_with_layout", "encode", "highest_equivalent", "merge", "quantile"]

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


@dataclass(frozen=True)
class Layout:
    """A histogram's bucket layout (its V2 header): histograms merge only within one layout."""

    digits: int
    lowest: int
    highest: int

    # Computed once a layout (a merge asks millions of times: docs/scale-run's cluster trials).
    @functools.cached_property
    def half_magnitude(self) -> int:
        return int(math.log2(self._sub_bucket_count)) - 1

    @functools.cached_property
    def unit_magnitude(self) -> int:
        return math.floor(math.log2(max(self.lowest, 1)))

    @functools.cached_property
    def _sub_bucket_count(self) -> int:
        return int(2 ** math.ceil(math.log2(2 * 10**self.digits)))


def decode(encoded: str) -> list[tuple[int, int]]:
    """The histogram's non-empty buckets as (value, count), values ascending (each value is its
    bucket's lowest equivalent value, as HdrHistogram reports)."""
    return decode_with_layout(encoded)[1]


def decode_with_layout(encoded: str) -> tuple[Layout, list[tuple[int, int]]]:
    """:func:`decode`, with the histogram's :class:`Layout`."""
    raw = base64.b64decode(encoded)
    cookie, length = struct.unpack(">ii", raw[:8])
    if cookie not in _COMPRESSED:
        raise ValueError(f"not a compressed V2 HdrHistogram (cookie {cookie:#x})")
    payload = zlib.decompress(raw[8 : 8 + length])
    cookie, counts_len, _offset, digits, lowest, highest, _ratio = struct.unpack(">iiiiqqd", payload[:40])
    if cookie not in _ENCODING:
        raise ValueError(f"not a V2 HdrHistogram encoding (cookie {cookie:#x})")
    layout = Layout(digits, lowest, highest)
    half = 2**layout.half_magnitude
    half_magnitude, unit_magnitude = layout.half_magnitude, layout.unit_magnitude
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
    return layout, out


def _bucket(layout: Layout, value: int) -> tuple[int, int]:
    """(bucket, sub-bucket) of ``value``, as HdrHistogram indexes it."""
    units = value >> layout.unit_magnitude
    bucket = max(0, units.bit_length() - (layout.half_magnitude + 1))
    return bucket, units >> bucket


def _index(layout: Layout, value: int) -> int:
    bucket, sub = _bucket(layout, value)
    half = 2**layout.half_magnitude
    return sub if bucket == 0 and sub < half else ((bucket + 1) << layout.half_magnitude) + (sub - half)


def highest_equivalent(layout: Layout, value: int) -> int:
    """The highest value counted in the same bucket as ``value`` (what HdrHistogram's
    ``value_at_quantile`` and ``max`` report)."""
    bucket, sub = _bucket(layout, value)
    shift = bucket + layout.unit_magnitude
    return ((sub << shift) + (1 << shift)) - 1


def _zigzag(n: int) -> bytes:
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        b = z & 0x7F
        z >>= 7
        if z:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def encode(layout: Layout, buckets: Sequence[tuple[int, int]]) -> str:
    """Buckets (lowest equivalent value, count) of ``layout`` in the V2 deflate encoding, base64:
    what :func:`decode_with_layout` reads back (runs of empty buckets as negative counts)."""
    counts: dict[int, int] = {}
    for value, count in buckets:
        i = _index(layout, value)
        counts[i] = counts.get(i, 0) + count
    body = bytearray()
    index = 0
    for i in sorted(counts):
        if i > index:
            body += _zigzag(-(i - index))
        body += _zigzag(counts[i])
        index = i + 1
    header = struct.pack(">iiiiqqd", _ENCODING[1], len(body), 0, layout.digits, layout.lowest, layout.highest, 1.0)
    compressed = zlib.compress(header + bytes(body))
    return base64.b64encode(struct.pack(">ii", _COMPRESSED[1], len(compressed)) + compressed).decode()


def merge(encoded: Sequence[str]) -> tuple[Layout, list[tuple[int, int]]]:
    """The sum of histograms of one layout: its layout and (value, count) buckets, values
    ascending. Raises ValueError on histograms of different layouts."""
    layouts = set()
    counts: dict[int, int] = {}
    for e in encoded:
        layout, buckets = decode_with_layout(e)
        layouts.add(layout)
        for value, count in buckets:
            counts[value] = counts.get(value, 0) + count
    if len(layouts) != 1:
        raise ValueError(f"cannot merge histograms of {len(layouts)} layouts")
    return layouts.pop(), sorted(counts.items())


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
