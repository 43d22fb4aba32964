"""What the study we reproduce published (Le Louët et al., "Effects of secured DNS transport on
resolver performance", ISCC 2023): data that the analysis (Table I's kWh, the wire figures) and
the report (the study point by point) both read, so it belongs to neither.

``iscc2023.toml`` beside this module is a verbatim copy of the project's record of the paper's
and the slides' published numbers (``shared/study/iscc2023.toml``); :func:`published` reads it,
and :func:`wire_one_query` its wire figures. Numbers taken from it are not repeated in code.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import NotRequired, TypedDict, cast

from dnscost.contract import document_problem

__all__ = [
    "CITATION",
    "SOURCE",
    "WIRE_SOURCE",
    "Published",
    "StudyUdp",
    "WireCount",
    "WireFigure",
    "published",
    "wire_one_query",
]


class StudySetup(TypedDict):
    resolvers: list[str]
    resolver_cores: int
    server: str
    client_machines: int
    generator: str
    names: int
    doh_method: str
    energy_method: str


class StudyUdp(TypedDict):
    """One resolver's UDP baseline (section V-B)."""

    answered_qps: int
    sent_qps: int


class Statements(TypedDict):
    statements: list[str]


class MemorySection(Statements):
    dnsdist_idle_buffer_release: NotRequired[str]


class EstablishmentSection(Statements):
    connections: int


class ClientsSection(Statements):
    software: list[str]
    resolvers: list[str]
    inter_query_delays_ms: list[int]
    run_minutes: int
    metrics: list[str]


class WireCount(TypedDict):
    messages: int
    bytes: NotRequired[int]
    encrypted_dns_bytes: NotRequired[int]


class Published(TypedDict):
    """``iscc2023.toml``: each section as the file has it."""

    setup: StudySetup
    baseline_udp: dict[str, StudyUdp | str]
    """Per resolver (``knot_resolver``, ``dnsdist``), and the ``bottleneck`` in words."""
    memory: MemorySection
    persistent: Statements
    establishment: EstablishmentSection
    table1_kwh: dict[str, dict[str, float | dict[str, float]]]
    """Table I's kWh per day at 10 000 qps: per resolver (``knot_resolver``, ``dnsdist``),
    per transport, UDP's alone and the others' per profile (``one_query``, ``cx1000_per_s``,
    ``cx33_per_s``)."""
    table1_statements: Statements
    clients: ClientsSection
    wire_one_query: dict[str, WireCount]
    """Per transport token."""


CITATION = (
    "Le Lou\u00ebt et al., \u201cEffects of secured DNS transport on resolver performance\u201d, "
    "IEEE Symposium on Computers and Communications (ISCC), 2023"
)
SOURCE = "iscc2023.toml: every number of the paper's text and Table I and of the authors' slides"
"""Where every figure of the study that dnscost shows comes from."""


WIRE_SOURCE = "the authors' slides, their Figure 1 ladder"
"""Where :func:`wire_one_query`'s figures come from."""


@cache
def published() -> Published:
    """The study's published numbers and statements (``iscc2023.toml``), checked against
    :class:`Published` once read."""
    doc = tomllib.loads(resources.files("dnscost").joinpath("iscc2023.toml").read_text(encoding="utf-8"))
    problem = document_problem(doc, Published)
    if problem is not None:
        raise ValueError(f"iscc2023.toml: {problem}")
    return cast(Published, doc)


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
    return {
        transport: WireFigure(transport, v["messages"], v.get("bytes"))
        for transport, v in published()["wire_one_query"].items()
    }
