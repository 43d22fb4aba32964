"""The command line's value types: each parses one option's text or raises
:class:`argparse.ArgumentTypeError` (argparse turns it into one line naming the option). Shared
by every command's parser."""

from __future__ import annotations

import argparse

from dnscost.contract import Lifetime
from dnscost.proc import parse_cpus
from dnscost.spec import duration_s, lifetime_fields

__all__ = ["cpu_list", "parse_duration_ms", "parse_lifetime", "parse_rate"]


def parse_duration_ms(text: str) -> int:
    """``10s``, ``250ms``, ``2m``, ``1h`` or bare seconds, in milliseconds (as the engine)."""
    try:
        return round(duration_s(text) * 1000)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def parse_lifetime(text: str) -> Lifetime:
    """``forever``, ``30s``, ``100q`` or ``30s,100q`` (as the engine)."""
    try:
        return lifetime_fields(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def parse_rate(text: str) -> str | float:
    """``max``, ``once`` or queries per second (as the engine)."""
    if text in ("max", "once"):
        return text
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is neither max, once nor queries per second") from None


def cpu_list(text: str) -> list[int]:
    """``0``, ``0,2``, ``0-3`` (as the kernel writes CPU lists)."""
    try:
        return parse_cpus(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
