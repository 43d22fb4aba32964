"""Emulated networks: named presets (``presets.toml``, each with its source, or the user's own).

A preset describes the client's access link: a round-trip time (half of it added in each
direction), jitter, random loss in each direction, and rate limits up (client to server) and
down. :meth:`Preset.link` gives one direction's parameters in the form of
``dnscost-engine link`` (the user-space link emulator that joins a lab's namespaces when it is
shaped: this machine's kernel, like many VM kernels, has no ``netem``)."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, TypedDict

from dnscost.errors import UsageError
from dnscost.lab.fields import fields, number, read_toml

__all__ = ["Preset", "load_presets", "parse_preset"]

_FIELDS = {"label", "rtt_ms", "jitter_ms", "loss_pct", "down_kbps", "up_kbps", "source"}


@dataclass(frozen=True)
class Preset:
    """One emulated link (see the module's documentation)."""

    name: str
    label: str
    source: str
    rtt_ms: float
    jitter_ms: float = 0.0
    loss_pct: float = 0.0
    down_kbps: float | None = None
    up_kbps: float | None = None

    @property
    def shaped(self) -> bool:
        return bool(self.rtt_ms or self.jitter_ms or self.loss_pct or self.down_kbps or self.up_kbps)

    def link(self, direction: str) -> str:
        """One direction's parameters, ``up`` (client to server) or ``down``, as
        ``dnscost-engine link`` takes them (``delay=35ms,loss=1%,rate=12000kbit``)."""
        if direction not in ("up", "down"):
            raise ValueError(direction)
        parts = [f"delay={self.rtt_ms * 500:g}us"]
        if self.jitter_ms:
            parts.append(f"jitter={self.jitter_ms * 1000:g}us")
        if self.loss_pct:
            parts.append(f"loss={self.loss_pct:g}%")
        rate = self.up_kbps if direction == "up" else self.down_kbps
        if rate:
            parts.append(f"rate={rate:g}kbit")
        return ",".join(parts)

    def to_dict(self) -> PresetRecord:
        return PresetRecord(
            name=self.name,
            label=self.label,
            source=self.source,
            rtt_ms=self.rtt_ms,
            jitter_ms=self.jitter_ms,
            loss_pct=self.loss_pct,
            down_kbps=self.down_kbps,
            up_kbps=self.up_kbps,
        )


class PresetRecord(TypedDict):
    """A :class:`Preset` as client.json and times.json keep it."""

    name: str
    label: str
    source: str
    rtt_ms: float
    jitter_ms: float
    loss_pct: float
    down_kbps: float | None
    up_kbps: float | None


def _number(name: str, table: dict[str, object], key: str, lo: float, hi: float, *, optional: bool) -> float | None:
    if key not in table:
        if optional:
            return None
        raise UsageError(f"preset {name}: {key} is missing")
    return float(number(f"preset {name}: {key}", table[key], lo, hi))


def parse_preset(name: str, table: Any) -> Preset:
    """One preset from its TOML table; errors name the preset and the field."""
    if not isinstance(table, dict):
        raise UsageError(f"preset {name}: must be a table")
    fields(f"preset {name}", table, _FIELDS)
    for key in ("label", "source"):
        if not isinstance(table.get(key), str) or not table[key].strip():
            raise UsageError(f"preset {name}: {key} must be a non-empty string (every preset names its source)")
    rtt = _number(name, table, "rtt_ms", 0, 10_000, optional=False)
    jitter = _number(name, table, "jitter_ms", 0, 10_000, optional=True) or 0.0
    loss = _number(name, table, "loss_pct", 0, 50, optional=True) or 0.0
    down = _number(name, table, "down_kbps", 8, 100_000_000, optional=True)
    up = _number(name, table, "up_kbps", 8, 100_000_000, optional=True)
    assert rtt is not None
    if jitter > rtt / 2:
        raise UsageError(f"preset {name}: jitter_ms ({jitter:g}) exceeds each direction's delay ({rtt / 2:g} ms)")
    return Preset(name, table["label"], table["source"], rtt, jitter, loss, down, up)


def load_presets(extra: Path | None = None) -> dict[str, Preset]:
    """The shipped presets, with those of ``extra`` (a TOML file of the same form) added or
    replacing them by name."""
    text = resources.files("dnscost.lab").joinpath("presets.toml").read_text()
    tables = tomllib.loads(text)
    if extra is not None:
        tables.update(read_toml(extra, "presets"))
    return {name: parse_preset(name, t) for name, t in tables.items()}
