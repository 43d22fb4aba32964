"""Consistency checks across cells: results that contradict physics beyond their intervals
(``docs/results.md``, "Consistency"). The flags are defined in :mod:`dnscost.validity`.

- ``inconsistent-lifetime``: connections that live shorter cannot cost less CPU per query than
  connections that live longer (every reconnection adds work), same target, transport,
  resumption and key type; every lifetime is compared with every longer one.
- ``inconsistent-resumption``: a resumed handshake cannot cost more than a full one: with more
  resumption, CPU per query cannot rise (same target, transport, lifetime, key type).
- ``memory-below-kernel``: the memory a connection costs (user + kernel, fitted over the idle
  trials) cannot be below what the kernel itself counts in the target's TCP socket buffers per
  connection (cgroup ``memory.kmem.tcp``/``sock``, fitted the same way).

Paired checks divide CPU per query of two cells in the same round. Pure: rows in, rows out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from dnscost.analysis.rounds import round_of
from dnscost.analysis.stats import fit_line, t_quantile
from dnscost.validity import ONE_ROUND_SPREAD

__all__ = ["CONSISTENCY_COLUMNS", "apply_flags", "consistency_rows", "lifetime_order"]

Row = dict[str, Any]

CONSISTENCY_COLUMNS = [
    "target",
    "transport",
    "flag",
    "cell",
    "against",
    "what",
    "value",
    "low",
    "high",
    "rounds",
    "interval",
    "cell_trials",
    "against_trials",
]
"""Columns of the ``consistency`` table: one row per contradiction found."""


def lifetime_order(lifetime: Any) -> tuple[int, float]:
    """Sorts lifetimes from the shortest: query counts (``1q``), then durations (``1s``,
    ``30s``), then ``forever``. A lifetime bounded both ways sorts by its query count."""
    from dnscost.spec import lifetime_fields

    if lifetime in (None, "forever"):
        return (2, math.inf)
    try:
        life = lifetime_fields(str(lifetime))
    except ValueError:
        return (3, math.inf)
    if life["queries"] is not None:
        return (0, float(life["queries"]))
    return (1, float(life["duration_ms"] or 0))


def _interval(ratios: list[float]) -> tuple[float, float, float, str]:
    """Mean of the per-round ratios and its interval (see :mod:`dnscost.validity`)."""
    n = len(ratios)
    mean = sum(ratios) / n
    if n == 1:
        return (
            mean,
            mean * (1 - ONE_ROUND_SPREAD),
            mean * (1 + ONE_ROUND_SPREAD),
            f"single round ±{ONE_ROUND_SPREAD:.0%}",
        )
    sd = math.sqrt(sum((r - mean) ** 2 for r in ratios) / (n - 1))
    half = t_quantile(0.975, n - 1) * sd / math.sqrt(n)
    return mean, mean - half, mean + half, "95 % t interval over rounds"


def _name(r: Row) -> str:
    from dnscost.certs import DEFAULT_KEY_TYPE

    parts = [str(r["target"]), str(r["transport"]), str(r["lifetime"])]
    if r["resumption"]:
        parts.append(f"resumption {r['resumption']:g}")
    if r.get("early_data"):
        parts.append(f"0-RTT {r['early_data']:g}")
    if r.get("cert_key") not in (None, DEFAULT_KEY_TYPE):
        parts.append(str(r["cert_key"]))
    return " ".join(parts)


def _per_round(cell: list[Row]) -> dict[Any, float]:
    out: dict[Any, float] = {}
    for r in cell:
        if r["valid"] and r["cpu_us_per_query"] is not None and round_of(r) not in out:
            out[round_of(r)] = float(r["cpu_us_per_query"])
    return out


def _paired(flag: str, what: str, cheap: list[Row], dear: list[Row]) -> Row | None:
    """A contradiction when ``cheap`` (the cell that must cost at most as much per query)
    costs more than ``dear`` beyond the interval of their per-round ratio."""
    a, b = _per_round(cheap), _per_round(dear)
    ratios = [a[k] / b[k] for k in a if k in b and b[k] > 0]
    if not ratios:
        return None
    value, low, high, interval = _interval(ratios)
    if low <= 1.0:
        return None
    return {
        "target": cheap[0]["target"],
        "transport": cheap[0]["transport"],
        "flag": flag,
        "cell": _name(cheap[0]),
        "against": _name(dear[0]),
        "what": what,
        "value": value,
        "low": low,
        "high": high,
        "rounds": len(ratios),
        "interval": interval,
        "cell_trials": ";".join(str(r["id"]) for r in cheap),
        "against_trials": ";".join(str(r["id"]) for r in dear),
    }


def _cells(rounds: Sequence[Row]) -> dict[tuple[Any, ...], list[Row]]:
    cells: dict[tuple[Any, ...], list[Row]] = {}
    for r in rounds:
        if r["analysis"] == "establishment" and r["transport"] != "udp":
            key = (
                r["target"],
                r["transport"],
                r["cert_key"],
                r["early_data"] or 0.0,
                r["lifetime"],
                r["resumption"] or 0.0,
            )
            cells.setdefault(key, []).append(r)
    return cells


def _memory(points: Sequence[Row], trial_rows: Sequence[Row]) -> list[Row]:
    out = []
    keys = dict.fromkeys((p["target"], p["transport"]) for p in points)
    for target, transport in keys:
        pts = [p for p in points if (p["target"], p["transport"]) == (target, transport) and p["valid"]]
        fits = {}
        for name, value in (
            ("total", lambda p: _sum(p["rss_delta_bytes"], p["kernel_delta_bytes"])),
            ("socket", lambda p: p["tcp_delta_bytes"]),
        ):
            use = [(p, v) for p in pts if (v := value(p)) is not None]
            held = [
                float(p["connections_held"] if p["connections_held"] is not None else p["connections"]) for p, _ in use
            ]
            fits[name] = fit_line(held, [v for _, v in use])
        total, socket = fits["total"], fits["socket"]
        if total is None or socket is None or total.ci95_high is None or socket.ci95_low is None:
            continue
        if total.ci95_high < socket.ci95_low:
            trials = ";".join(
                str(r["id"])
                for r in trial_rows
                if r["kind"] == "idle" and (r["target"], r["transport"]) == (target, transport)
            )
            out.append(
                {
                    "target": target,
                    "transport": transport,
                    "flag": "memory-below-kernel",
                    "cell": f"{target} {transport} memory per connection",
                    "against": f"{target} {transport} TCP socket buffers per connection",
                    "what": "memory per connection (bytes) below the kernel's socket buffers",
                    "value": total.slope,
                    "low": total.ci95_low,
                    "high": total.ci95_high,
                    "rounds": len(pts),
                    "interval": f"95 % t intervals of both fits (socket buffers {socket.slope:.0f} B, "
                    f"{socket.ci95_low:.0f}..{socket.ci95_high:.0f})",
                    "cell_trials": trials,
                    "against_trials": trials,
                }
            )
    return out


def _sum(a: float | None, b: float | None) -> float | None:
    return a + b if a is not None and b is not None else None


def consistency_rows(rounds: Sequence[Row], memory_points: Sequence[Row], trial_rows: Sequence[Row]) -> list[Row]:
    """Every contradiction in the run: the ``rounds`` table's establishment cells (lifetime and
    resumption) and the ``memory_points`` table (memory against socket buffers; the flag goes
    to the idle trials of ``trial_rows``)."""
    cells = _cells(rounds)
    out = []
    for key, cell in cells.items():
        early, lifetime, resumption = key[3], key[4], key[5]
        for other_key, other in cells.items():
            if other_key[:3] != key[:3]:
                continue
            o_early, o_lifetime, o_resumption = other_key[3], other_key[4], other_key[5]
            # lifetime: this one shorter, same resumption and 0-RTT (a persistent cell has none)
            if lifetime_order(lifetime) < lifetime_order(o_lifetime) and (
                (o_resumption, o_early) == (resumption, early) or o_lifetime == "forever"
            ):
                what = "CPU per query, longer lifetime ÷ shorter: above 1"
                found = _paired("inconsistent-lifetime", what, other, cell)
                if found is not None:
                    out.append(found)
            # resumption: more resumed handshakes must not cost more per query (0-RTT or not,
            # against none resumed; else with the same 0-RTT share)
            if (
                o_lifetime == lifetime
                and lifetime != "forever"
                and o_resumption > resumption
                and (o_early == early or resumption == 0)
            ):
                what = "CPU per query, more resumption ÷ less: above 1"
                found = _paired("inconsistent-resumption", what, other, cell)
                if found is not None:
                    out.append(found)
    return out + _memory(memory_points, trial_rows)


def apply_flags(trial_rows: list[Row], found: Sequence[Row]) -> None:
    """Adds each contradiction's flag to the ``flags`` of every trial of both its cells
    (``valid`` is left as it was)."""
    by_id = {r["id"]: r for r in trial_rows}
    for c in found:
        for tid in {*str(c["cell_trials"]).split(";"), *str(c["against_trials"]).split(";")}:
            r = by_id.get(tid)
            if r is None:
                continue
            flags = [f for f in str(r.get("flags") or "").split(";") if f]
            if c["flag"] not in flags:
                r["flags"] = ";".join([*flags, c["flag"]])
