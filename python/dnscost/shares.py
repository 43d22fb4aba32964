"""Shares of capacity: a load written as ``"50%"`` of what the same cell's saturation trial
answered in the same round (``docs/experiments.md``, "Latency below saturation" and "Cost
curves"), and the analysis a ladder of them feeds. Words both the spec and the analysis use,
so they belong to neither."""

from __future__ import annotations

import re

__all__ = ["CURVE", "load_share"]

CURVE = "curve"
"""The analysis of a ladder: a ``capacity_of`` group at several shares of capacity, whose trials
with their saturation trials make the cost curves (CPU per query against load)."""

_SHARE = re.compile(r"([0-9]*\.?[0-9]+)%")


def load_share(rate: object) -> float | None:
    """The share of capacity a rate such as ``"50%"`` names (0.5), or None when ``rate`` is not
    one (``"max"``, a number, anything else). A share runs open loop at that share of the
    answered rate of the same group's saturation (``"max"``) trial of the same cell and round."""
    m = _SHARE.fullmatch(rate.strip()) if isinstance(rate, str) else None
    if m is None or not 0 < float(m.group(1)) < 100:
        return None
    return float(m.group(1)) / 100
