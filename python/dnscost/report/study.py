"""What the study we reproduce published, as data with its source, for the report's comparison.

The study is Le Louët et al., "Effects of secured DNS transport on resolver performance",
ISCC 2023. Its figures and tables are not retrievable from here: every value below comes from
the project brief's summary of the paper, and says so in ``source``. Nothing here is read off
the paper's plots; a figure the summary gives only in words has ``value=None``.

``iscc2023.toml`` beside this module is a verbatim copy of the project's record of the paper's
and the slides' published numbers (``shared/study/iscc2023.toml``); :func:`published` reads it,
and :func:`wire_one_query` its wire figures. Numbers taken from it are not repeated in code.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

__all__ = [
    "CITATION",
    "FINDINGS",
    "SETUP",
    "SOURCE",
    "WIRE_SOURCE",
    "Finding",
    "Setup",
    "WireFigure",
    "finding",
    "published",
    "wire_one_query",
]

CITATION = (
    "Le Louët et al., \u201cEffects of secured DNS transport on resolver performance\u201d, "
    "IEEE Symposium on Computers and Communications (ISCC), 2023"
)
SOURCE = "project brief summarising the study (the paper's figures were not retrievable here)"


@dataclass(frozen=True)
class Finding:
    """One published result: the claim in words, its value where the summary gives one."""

    key: str
    claim: str
    value: float | None
    unit: str
    source: str = SOURCE


@dataclass(frozen=True)
class Setup:
    """How the study measured."""

    resolvers: tuple[str, ...]
    generator: str
    clients: str
    source: str = SOURCE


FINDINGS: tuple[Finding, ...] = (
    Finding(
        key="doh_persistent_share_of_udp",
        claim="Persistent DoH roughly halves throughput relative to UDP",
        value=0.5,
        unit="share of UDP throughput",
    ),
    Finding(
        key="one_query_collapse",
        claim="One query per connection collapses throughput",
        value=None,
        unit="share of UDP throughput",
    ),
    Finding(
        key="udp_kwh_per_day_at_10k_qps",
        claim="10 000 qps for a day costs 0.05 kWh over UDP",
        value=0.05,
        unit="kWh per day",
    ),
    Finding(
        key="doh_1q_kwh_per_day_at_10k_qps",
        claim="10 000 qps for a day costs almost 10 kWh over DoH with one query per connection",
        value=10.0,
        unit="kWh per day",
    ),
    Finding(
        key="doh_1q_over_udp_energy",
        claim="DoH with one query per connection costs about 200\u00d7 the energy of UDP (10 / 0.05)",
        value=200.0,
        unit="ratio",
    ),
)
"""The study's results we compare with, in report order."""

SETUP = Setup(
    resolvers=("knot-resolver", "dnsdist"),
    generator="a patched flamethrower",
    clients="twenty client machines",
)
"""The study's measurement setup."""


def finding(key: str) -> Finding:
    """The study's finding named ``key`` (KeyError if there is none)."""
    for f in FINDINGS:
        if f.key == key:
            return f
    raise KeyError(key)


WIRE_SOURCE = "the authors' slides, their Figure 1 ladder"
"""Where :func:`wire_one_query`'s figures come from."""


@cache
def published() -> dict[str, Any]:
    """The study's published numbers and statements (``iscc2023.toml``), as parsed TOML."""
    return tomllib.loads(resources.files("dnscost.report").joinpath("iscc2023.toml").read_text(encoding="utf-8"))


@dataclass(frozen=True)
class WireFigure:
    """The slides' count for one query on a new connection, both directions together."""

    transport: str
    messages: int
    bytes: int | None
    """None where the slides give no byte count (UDP)."""
    source: str = WIRE_SOURCE


def wire_one_query() -> dict[str, WireFigure]:
    """The slides' messages and bytes per transport (``[wire_one_query]``), by transport token."""
    table = published().get("wire_one_query", {})
    return {
        transport: WireFigure(transport, int(v["messages"]), int(v["bytes"]) if "bytes" in v else None)
        for transport, v in table.items()
    }
