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
from typing import Any

__all__ = ["CITATION", "SOURCE", "WIRE_SOURCE", "WireFigure", "published", "wire_one_query"]

CITATION = (
    "Le Lou\u00ebt et al., \u201cEffects of secured DNS transport on resolver performance\u201d, "
    "IEEE Symposium on Computers and Communications (ISCC), 2023"
)
SOURCE = "iscc2023.toml: every number of the paper's text and Table I and of the authors' slides"
"""Where every figure of the study that dnscost shows comes from."""


WIRE_SOURCE = "the authors' slides, their Figure 1 ladder"
"""Where :func:`wire_one_query`'s figures come from."""


@cache
def published() -> dict[str, Any]:
    """The study's published numbers and statements (``iscc2023.toml``), as parsed TOML."""
    return tomllib.loads(resources.files("dnscost").joinpath("iscc2023.toml").read_text(encoding="utf-8"))


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
