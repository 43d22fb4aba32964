"""The figures a report leads with, per target, each with its interval over rounds, read from
the derived tables (so from valid trials only).

Figures measured in rounds (:mod:`dnscost.analysis.rounds`) are computed in each round, against
that round's UDP reference or persistent cell, and given as the median with the min and max
over rounds; memory per connection is a fit over idle trials, given with its 95 % t interval.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NotRequired, TypedDict

from dnscost.analysis.consistency import HandshakeRounds
from dnscost.analysis.records import Analysis, Table
from dnscost.analysis.rounds import Spread, round_of, spread
from dnscost.analysis.stats import fit_line
from dnscost.analysis.tables import reference_key
from dnscost.contract import Row

__all__ = [
    "INTERVALS",
    "CollapseFigures",
    "HandshakeFigures",
    "Head",
    "MemoryFigures",
    "PersistentFigures",
    "UdpFigures",
    "headline",
    "headline_rows",
]

PERSISTENT = "forever"
ONE_QUERY = "1q"
INTERVALS = {
    "range": "median [min-max] over rounds",
    "t95": "estimate [95 % t interval]",
}
"""What each figure's interval is (``interval`` column of the ``headline`` table)."""


class UdpFigures(TypedDict):
    """UDP in its rounds' references (spreads over rounds)."""

    cpu_us_per_query: Spread
    capacity_per_core_qps: Spread
    qps: Spread
    j_per_query: Spread


class PersistentFigures(TypedDict):
    """One transport on persistent connections, against its round's UDP."""

    qps: float | None
    share_of_udp: float | None
    share: Spread
    cpu_ratio: Spread
    capacity_per_core_qps: Spread
    energy_ratio: Spread
    source: str


class CollapseFigures(TypedDict):
    """One query per connection against persistent connections, in each round."""

    qps_1q: float | None
    qps_1q_resumed: float | None
    qps_persistent: float | None
    ratio: float | None
    ratio_resumed: float | None
    qps_ratio: Spread
    qps_ratio_resumed: Spread
    cpu_ratio: Spread
    cpu_ratio_resumed: Spread


class HandshakeFigures(TypedDict):
    """Target CPU-µs per handshake (see :func:`_handshake_us`)."""

    full: Spread
    resumed: Spread
    resumed_share: Spread
    zero_rtt: NotRequired[Spread]


class MemoryFigures(TypedDict):
    """Bytes per idle connection (fits over the idle trials) and CPU per connection-second."""

    user_bytes: float | None
    kernel_bytes: float | None
    total_bytes: float | None
    total_low: float | None
    total_high: float | None
    points: int
    cpu_us_per_connection_second: Spread | None


class Head(TypedDict):
    """One target's headline (:func:`headline` says what each field holds)."""

    target: str
    target_version: str | None
    rounds: int
    udp_max_qps: float | None
    udp_saturation_qps: float | None
    udp_reference_qps: float | None
    udp: UdpFigures
    persistent: dict[str, PersistentFigures]
    collapse_1q: dict[str, CollapseFigures]
    handshake_us: dict[str, HandshakeFigures]
    handshake_rounds: dict[str, HandshakeRounds]
    memory_per_connection: dict[str, MemoryFigures]
    energy: list[Row]


def _per_round(rows: list[Row], value: Callable[[Row], float | None]) -> dict[Any, float]:
    """Per round, the value of the first row of that round that has one."""
    out: dict[Any, float] = {}
    for r in rows:
        v = value(r)
        if v is not None and round_of(r) not in out:
            out[round_of(r)] = v
    return out


def _paired(a: dict[Any, float], b: dict[Any, float], f: Callable[[float, float], float | None]) -> Spread:
    return spread(f(a[k], b[k]) for k in a if k in b)


def _ratio(x: float, y: float) -> float | None:
    return x / y if y else None


def _cell(rows: list[Row], transport: str, lifetime: str, *, resumed: bool, early: bool = False) -> list[Row]:
    """The establishment round rows of one transport and lifetime: without resumption, or with
    the highest resumption above zero, without 0-RTT data or (``early``) with the highest share
    of it above zero."""
    rows = [r for r in rows if r["transport"] == transport and r["lifetime"] == lifetime]
    if resumed:
        above = [r for r in rows if (r["resumption"] or 0) > 0]
        top = max((r["resumption"] for r in above), default=None)
        above = [r for r in above if r["resumption"] == top]
        if early:
            sent = [r for r in above if (r["early_data"] or 0) > 0]
            most = max((r["early_data"] for r in sent), default=None)
            return [r for r in sent if r["early_data"] == most]
        return [r for r in above if not r["early_data"]]
    return [r for r in rows if not r["resumption"]]


def _memory_total(points: list[Row], target: str, transport: str) -> Spread | None:
    """User + kernel bytes per connection, fitted on the total (so its interval is the fit's)."""
    pts = [
        p
        for p in points
        if p["target"] == target
        and p["transport"] == transport
        and p["valid"]
        and p["rss_delta_bytes"] is not None
        and p["kernel_delta_bytes"] is not None
    ]
    held = [p["connections_held"] if p["connections_held"] is not None else p["connections"] for p in pts]
    fit = fit_line([float(h or 0) for h in held], [p["rss_delta_bytes"] + p["kernel_delta_bytes"] for p in pts])
    if fit is None:
        return None
    return Spread(fit.slope, fit.ci95_low, fit.ci95_high, len(pts))


def _connection_second_us(trials: list[Row], target: str, transport: str) -> Spread | None:
    """Target CPU-µs per connection-second: OLS slope of the idle trials' CPU per second on the
    connections held open (engine side), with its 95 % t interval."""
    pts = [
        r
        for r in trials
        if r["kind"] == "idle"
        and r["valid"]
        and (r["target"], r["transport"]) == (target, transport)
        and r["target_cpu_us"] is not None
        and r["connection_seconds"] is not None
        and r["measured_s"]
    ]
    fit = fit_line(
        [r["connection_seconds"] / r["measured_s"] for r in pts], [r["target_cpu_us"] / r["measured_s"] for r in pts]
    )
    return Spread(fit.slope, fit.ci95_low, fit.ci95_high, len(pts)) if fit is not None else None


def _handshake_cpu(t: Row | None, per_query: float | None) -> float | None:
    """A one-query trial's target CPU-µs spent on anything but its queries (counted at the
    round's persistent CPU per query): its handshakes, with their connections."""
    if t is None or not t["valid"] or per_query is None:
        return None
    if t["target_cpu_us"] is None or t["queries_answered"] is None:
        return None
    return float(t["target_cpu_us"] - per_query * t["queries_answered"])


def _handshake_us(
    trials: dict[Any, Row], full: list[Row], resumed: list[Row], persistent: dict[Any, float]
) -> tuple[dict[Any, float], dict[Any, float], Spread]:
    """Target CPU-µs per full and per resumed handshake, in each round, and the share of the
    resumption trial's handshakes that resumed.

    Full: the one-query trial without resumption, its CPU less its queries, over its handshakes
    (tcp: connections). Resumed: the same for the trial with resumption on, less its full
    handshakes at that round's full cost, over its resumed handshakes. A server that issues fewer
    tickets than connections reconnect leaves some of those connections a full handshake
    (dnsdist 1.7 leaves about a third), and the engine counts each kind: charging them all to the
    resumed ones would make a resumption look dearer than a full handshake. The costs come per
    round (full, resumed)."""
    full_us: dict[Any, float] = {}
    for r in full:
        t = trials.get(r["id"])
        cpu = _handshake_cpu(t, persistent.get(round_of(r)))
        count = (t["connections_established"] if t["transport"] == "tcp" else t["handshakes_full"]) if t else None
        if cpu is not None and count and round_of(r) not in full_us:
            full_us[round_of(r)] = cpu / count
    resumed_us: dict[Any, float] = {}
    shares = []
    for r in resumed:
        t = trials.get(r["id"])
        cpu = _handshake_cpu(t, persistent.get(round_of(r)))
        if cpu is None or t is None:
            continue
        fulls, resumes = t["handshakes_full"] or 0, t["handshakes_resumed"] or 0
        if resumes + fulls:
            # A server that let none resume has a share of 0 (a build that lost its tickets),
            # and no cost per resumed handshake.
            shares.append(resumes / (resumes + fulls))
        if not resumes or (fulls and round_of(r) not in full_us):
            continue  # its full handshakes have no cost to subtract in this round
        if round_of(r) not in resumed_us:
            resumed_us[round_of(r)] = (cpu - fulls * full_us.get(round_of(r), 0.0)) / t["handshakes_resumed"]
    return full_us, resumed_us, spread(shares)


def _persistent_figures(cell: list[Row], source: str) -> PersistentFigures:
    """A transport's persistent-connection cell against its rounds' UDP references."""
    share = spread(r["qps_share_of_udp"] for r in cell)
    return {
        "qps": spread(r["answered_qps"] for r in cell).median,
        "share_of_udp": share.median,
        "share": share,
        "cpu_ratio": spread(r["cpu_ratio_to_udp"] for r in cell),
        "capacity_per_core_qps": spread(r["capacity_per_core_qps"] for r in cell),
        "energy_ratio": spread(r["energy_ratio_to_udp"] for r in cell),
        "source": source,
    }


def _memory_figures(t: Mapping[str, Table], target: str) -> dict[str, MemoryFigures]:
    """Per transport, memory per idle connection as fitted and as the points give it in total,
    and the CPU an idle connection costs a second."""
    memory: dict[str, MemoryFigures] = {}
    for r in t["memory_fit"].rows:
        if r["target"] != target:
            continue
        total = _memory_total(t["memory_points"].rows, target, r["transport"])
        memory[r["transport"]] = {
            "user_bytes": r["user_bytes_per_connection"],
            "kernel_bytes": r["kernel_bytes_per_connection"],
            "total_bytes": total.median if total else None,
            "total_low": total.low if total else None,
            "total_high": total.high if total else None,
            "points": total.n if total else 0,
            "cpu_us_per_connection_second": _connection_second_us(t["trials"].rows, target, r["transport"]),
        }
    return memory


def headline(a: Analysis) -> list[Head]:
    """Per target, in plan order, a dict with:

    - ``target``, ``target_version``, ``rounds`` (rounds with a valid UDP reference),
      ``udp_max_qps`` (the UDP baseline: open loop, loss below the limit), ``udp_saturation_qps``
      (closed loop, median over rounds) and ``udp_reference_qps`` (the same: shares of UDP divide
      by the closed-loop reference of their own round, never by the open-loop figure);
    - ``udp``: :class:`Spread` over rounds of ``cpu_us_per_query``, ``capacity_per_core_qps``,
      ``qps`` and (RAPL only) ``j_per_query``;
    - ``persistent``: per transport other than UDP, with persistent connections (the
      establishment table at lifetime ``forever``, else the connections table at its smallest
      number of connections): ``qps`` and ``share_of_udp`` (medians), and spreads ``cpu_ratio``
      (CPU per query ÷ UDP's), ``capacity_per_core_qps``, ``share`` (answered qps ÷ UDP's),
      ``energy_ratio`` (RAPL only), and ``source``;
    - ``collapse_1q``: per transport, one query per connection against persistent, in each round:
      ``ratio``/``ratio_resumed`` (answered qps, medians; spreads ``qps_ratio``,
      ``qps_ratio_resumed``), ``cpu_ratio``/``cpu_ratio_resumed`` (CPU per query), and
      ``qps_1q``, ``qps_1q_resumed``, ``qps_persistent``;
    - ``handshake_us``: per transport, spreads ``full`` and ``resumed`` (target CPU-µs per
      handshake), ``resumed_share`` (the share of the resumption trial's handshakes that the
      server let resume), see :func:`_handshake_us`, and for QUIC with 0-RTT trials
      ``zero_rtt`` (per resumed handshake whose client sent its query as 0-RTT data);
    - ``handshake_rounds``: per TLS transport, the same full and resumed costs per round and the
      round rows they come from, for :func:`dnscost.analysis.consistency.handshake_rows`;
    - ``memory_per_connection``: per transport, ``user_bytes``, ``kernel_bytes``, ``total_bytes``
      and the total's 95 % interval ``total_low``, ``total_high`` (fits over the idle trials),
      and ``cpu_us_per_connection_second`` (a :class:`Spread` from the fit's estimate and 95 %
      interval: target CPU-µs per second per idle connection held);
    - ``energy``: the energy table's rows for the target (Table I, kWh per day at 10 000 qps).
    """
    t = a.tables
    baseline = {r["target"]: r for r in t["baseline"].rows}
    trials = {r["id"]: r for r in t["trials"].rows}
    rounds_all = t["rounds"].rows
    targets = list(dict.fromkeys(r["target"] for r in t["trials"].rows if r["target"] is not None))
    out: list[Head] = []
    for target in targets:
        version = next((r["target_version"] for r in t["trials"].rows if r["target"] == target), None)
        mine = [r for r in rounds_all if r["target"] == target]
        est = [r for r in reference_key(mine) if r["analysis"] == "establishment"]
        refs = {r["round"]: r for r in mine if r["id"] == r["reference_id"] and r["valid"]}
        udp: UdpFigures = {
            "cpu_us_per_query": spread(r["cpu_us_per_query"] for r in refs.values()),
            "capacity_per_core_qps": spread(r["capacity_per_core_qps"] for r in refs.values()),
            "qps": spread(r["answered_qps"] for r in refs.values()),
            "j_per_query": spread(r["energy_j_per_query"] for r in refs.values()),
        }
        conns = [r for r in mine if r["analysis"] == "connections" and r["transport"] != "udp"]
        transports = list(dict.fromkeys(r["transport"] for r in est + conns if r["transport"] != "udp"))
        persistent: dict[str, PersistentFigures] = {}
        collapse: dict[str, CollapseFigures] = {}
        handshakes: dict[str, HandshakeFigures] = {}
        handshake_rounds: dict[str, HandshakeRounds] = {}
        for tr in transports:
            cell, source = _cell(est, tr, PERSISTENT, resumed=False), "establishment"
            if not any(r["valid"] for r in cell):
                smallest = min((r["connections"] or 0 for r in conns if r["transport"] == tr), default=None)
                cell = [r for r in conns if r["transport"] == tr and r["connections"] == smallest]
                source = "connections"
            if any(r["valid"] for r in cell):
                persistent[tr] = _persistent_figures(cell, source)
            base_cpu = _per_round(cell, lambda r: r["cpu_us_per_query"])
            base_qps = _per_round(cell, lambda r: r["answered_qps"])
            full, resumed = _cell(est, tr, ONE_QUERY, resumed=False), _cell(est, tr, ONE_QUERY, resumed=True)
            if any(r["valid"] for r in full + resumed):
                qps_ratio = _paired(_per_round(full, lambda r: r["answered_qps"]), base_qps, _ratio)
                qps_ratio_resumed = _paired(_per_round(resumed, lambda r: r["answered_qps"]), base_qps, _ratio)
                collapse[tr] = {
                    "qps_1q": spread(r["answered_qps"] for r in full).median,
                    "qps_1q_resumed": spread(r["answered_qps"] for r in resumed).median,
                    "qps_persistent": spread(base_qps.values()).median,
                    "ratio": qps_ratio.median,
                    "ratio_resumed": qps_ratio_resumed.median,
                    "qps_ratio": qps_ratio,
                    "qps_ratio_resumed": qps_ratio_resumed,
                    "cpu_ratio": _paired(_per_round(full, lambda r: r["cpu_us_per_query"]), base_cpu, _ratio),
                    "cpu_ratio_resumed": _paired(
                        _per_round(resumed, lambda r: r["cpu_us_per_query"]), base_cpu, _ratio
                    ),
                }
                full_us, resumed_us, share = _handshake_us(trials, full, resumed, base_cpu)
                handshakes[tr] = {
                    "full": spread(full_us.values()),
                    "resumed": spread(resumed_us.values()),
                    "resumed_share": share,
                }
                if tr != "tcp":
                    handshake_rounds[tr] = (full_us, resumed_us, full, resumed)
                early = _cell(est, tr, ONE_QUERY, resumed=True, early=True)
                if any(r["valid"] for r in early):
                    handshakes[tr]["zero_rtt"] = spread(_handshake_us(trials, full, early, base_cpu)[1].values())
        saturation = udp["qps"].median
        out.append(
            {
                "target": target,
                "target_version": version,
                "rounds": len(refs),
                "udp_max_qps": baseline.get(target, {}).get("udp_max_qps"),
                "udp_saturation_qps": saturation,
                "udp_reference_qps": saturation,
                "udp": udp,
                "persistent": persistent,
                "collapse_1q": collapse,
                "handshake_us": handshakes,
                "handshake_rounds": handshake_rounds,
                "memory_per_connection": _memory_figures(t, target),
                "energy": [dict(r) for r in reference_key(t["energy"].rows) if r["target"] == target],
            }
        )
    return out


def headline_rows(heads: list[Head]) -> list[Row]:
    """The headline as a flat table: one row per figure, target, transport and profile, with
    its interval (``interval``: a key of :data:`INTERVALS`). What ``dnscost compare`` matches."""
    out: list[Row] = []

    def add(target: str, figure: str, transport: str, profile: str, s: Spread | None, unit: str) -> None:
        if s is None or s.median is None:
            return
        out.append(
            {
                "target": target,
                "figure": figure,
                "transport": transport,
                "profile": profile,
                "value": s.median,
                "low": s.low,
                "high": s.high,
                "n": s.n,
                "interval": "t95" if profile == "idle" else "range",
                "unit": unit,
            }
        )

    for h in heads:
        target, udp = h["target"], h["udp"]
        add(target, "cpu_us_per_query", "udp", "persistent", udp["cpu_us_per_query"], "us")
        add(target, "capacity_per_core_qps", "udp", "persistent", udp["capacity_per_core_qps"], "qps")
        add(target, "answered_qps", "udp", "persistent", udp["qps"], "qps")
        add(target, "j_per_query", "udp", "persistent", udp["j_per_query"], "J")
        for tr, p in sorted(h["persistent"].items()):
            add(target, "cpu_ratio_to_udp", tr, "persistent", p["cpu_ratio"], "ratio")
            add(target, "capacity_per_core_qps", tr, "persistent", p["capacity_per_core_qps"], "qps")
            add(target, "qps_share_of_udp", tr, "persistent", p["share"], "ratio")
            add(target, "energy_ratio_to_udp", tr, "persistent", p["energy_ratio"], "ratio")
        for tr, c in sorted(h["collapse_1q"].items()):
            add(target, "cpu_ratio_to_persistent", tr, "1q", c["cpu_ratio"], "ratio")
            add(target, "cpu_ratio_to_persistent", tr, "1q-resumed", c["cpu_ratio_resumed"], "ratio")
            add(target, "qps_ratio_to_persistent", tr, "1q", c["qps_ratio"], "ratio")
            add(target, "qps_ratio_to_persistent", tr, "1q-resumed", c["qps_ratio_resumed"], "ratio")
        for tr, hs in sorted(h["handshake_us"].items()):
            add(target, "cpu_us_per_handshake", tr, "full", hs["full"], "us")
            add(target, "cpu_us_per_handshake", tr, "resumed", hs["resumed"], "us")
            add(target, "resumed_share", tr, "1q-resumed", hs["resumed_share"], "ratio")
            add(target, "cpu_us_per_handshake", tr, "0-rtt", hs.get("zero_rtt"), "us")
        for tr, m in sorted(h["memory_per_connection"].items()):
            if m["total_bytes"] is not None:
                s = Spread(m["total_bytes"], m["total_low"], m["total_high"], m["points"])
                add(target, "memory_bytes_per_connection", tr, "idle", s, "bytes")
            add(target, "cpu_us_per_connection_second", tr, "idle", m["cpu_us_per_connection_second"], "us")
    return out
