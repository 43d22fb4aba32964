"""Consistency checks: results that contradict physics (``docs/results.md``, "Consistency"). The
flags are defined in :mod:`dnscost.validity`.

On single trials, from their own counts (an invalidity, :data:`dnscost.validity.ANALYSIS_FLAGS`):

- ``not-persistent``: a trial with persistent connections that establishes more than
  :data:`dnscost.validity.MAX_NEW_CONNECTIONS` of its connections in its window
  (:func:`flag_not_persistent`); it is left out of every persistent cell.

Across cells (the trials stay valid; the two cells are named):

- ``inconsistent-lifetime``: connections that live shorter cannot cost less CPU per query than
  connections that live longer (every reconnection adds work), same target, transport,
  resumption and key type; every lifetime is compared with every longer one (one query, 1 s,
  30 s, persistent: all six ordered pairs).
- ``inconsistent-resumption``: a resumed handshake cannot cost more than a full one: with more
  resumption, CPU per query cannot rise (same target, transport, lifetime, key type), nor with
  0-RTT beside the same resumption (the same resumed handshake carrying the first query: not
  a law, a server may do more to accept early data, but flagged for a reader to weigh); and
  the CPU per resumed handshake cannot exceed the CPU per full one (:func:`handshake_rows`,
  from the headline's per-round handshake costs). Checked in the establishment cells and,
  rate by rate, in the cost model's one-query cells (``cost_handshakes``).
- ``inconsistent-layering``: a transport cannot cost more CPU per query than one that carries
  the same queries over it plus more: plain TCP than DoT or DoH (TCP plus TLS; same target,
  lifetime and connections, every key), DoT than DoH (TLS plus HTTP/2) and DoQ than DoH/3
  (QUIC plus HTTP/3), each with the same key, resumption and 0-RTT.
- ``inconsistent-handshakes``: a TLS or QUIC connection cannot be established without a
  handshake: connections the engine established in the window with neither a full nor a
  resumed handshake counted, more than :data:`dnscost.validity.MAX_NEW_CONNECTIONS` of them in
  every round (its handshake counts, and the cost model's terms fitted on them, are short).
- ``inconsistent-memory``: memory per connection (user + kernel above the idle baseline, ÷ the
  connections held) cannot fall as connections grow.
- ``negative-memory``: a connection cannot cost negative memory: the user or kernel bytes per
  connection fitted over the idle trials (the ``memory_fit`` table's slopes) with its whole
  95 % interval below zero.
- ``memory-below-kernel``: the memory a connection costs (user + kernel, fitted over the idle
  trials) cannot be below what the kernel itself counts in the target's TCP socket buffers per
  connection (cgroup ``memory.kmem.tcp``/``sock``, fitted the same way).

Paired checks divide CPU per query of two cells in the same round. A pair contradicts physics
when its whole interval lies beyond the bound: the min and max of its per-round ratios (so the
contradiction holds in every round), a single round ± ``ONE_ROUND_SPREAD``. Each is a row of
the ``consistency`` table naming both cells, with its median, interval and ``margin``: how far
the interval lies beyond the bound (``low`` - 1 for a ratio; bytes for ``negative-memory`` and
``memory-below-kernel``; a share of the connections for ``inconsistent-handshakes``).
Pure: rows in, rows out.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from dnscost.analysis.rounds import round_of
from dnscost.analysis.stats import fit_line
from dnscost.contract import Row
from dnscost.transports import DEFAULT_KEY_TYPE, STREAM_TRANSPORTS, TLS_TRANSPORTS
from dnscost.validity import KERNEL_ACCEPT_NOISE, MAX_NEW_CONNECTIONS, MIN_ONE_QUERY_OPENS, ONE_ROUND_SPREAD

__all__ = [
    "CONSISTENCY_COLUMNS",
    "NOT_ONE_QUERY",
    "NOT_PERSISTENT",
    "apply_flags",
    "consistency_rows",
    "flag_not_one_query",
    "flag_not_persistent",
    "handshake_rows",
    "lifetime_order",
]


NOT_PERSISTENT = "not-persistent"
"""The flag of a persistent trial that reconnects in its window (:func:`flag_not_persistent`)."""
NOT_ONE_QUERY = "not-one-query"
"""The flag of a one-query trial that opened no connection for its queries (:func:`flag_not_one_query`)."""

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
    "margin",
    "rounds",
    "interval",
    "cell_trials",
    "against_trials",
]
"""Columns of the ``consistency`` table: one row per contradiction found."""

LAYERED = {"tcp": ("dot", "doh"), "dot": ("doh",), "doq": ("doh3",)}
"""A transport, and the transports that carry its queries over it plus more."""
LAYER = {"tcp": "TLS", "dot": "HTTP/2", "doq": "HTTP/3"}
"""What the transports of :data:`LAYERED` add to a transport's."""


def lifetime_order(lifetime: Any) -> tuple[int, float]:
    """Sorts lifetimes from the shortest: query counts (``1q``), then durations (``1s``,
    ``30s``), then ``forever``. A lifetime bounded both ways sorts by its query count."""
    from dnscost.spec import lifetime_fields  # the spec imports the cluster, which imports the analysis

    if lifetime in (None, "forever"):
        return (2, math.inf)
    try:
        life = lifetime_fields(str(lifetime))
    except ValueError:
        return (3, math.inf)
    if life["queries"] is not None:
        return (0, float(life["queries"]))
    return (1, float(life["duration_ms"] or 0))


def flag_not_one_query(trial_rows: Iterable[Row]) -> list[str]:
    """Marks every finished trial of one query per connection (lifetime ``1q``, any transport
    but UDP) that established fewer than ``MIN_ONE_QUERY_OPENS`` connections per query it
    answered in its window ``not-one-query`` and invalid (rows changed in place); returns their
    ids. A cell of one-query connections must pay for a connection per query: when the
    connections opened before the window carry its queries, it measured none."""
    flagged = []
    for r in trial_rows:
        if r.get("transport") in (None, "udp") or r.get("lifetime") != "1q" or r.get("status") != "done":
            continue
        answered, opened = r.get("queries_answered"), r.get("connections_established")
        if not answered or opened is None or opened >= MIN_ONE_QUERY_OPENS * answered:
            continue
        flags = [f for f in str(r.get("flags") or "").split(";") if f]
        if NOT_ONE_QUERY not in flags:
            r["flags"] = ";".join([*flags, NOT_ONE_QUERY])
        r["valid"] = False
        flagged.append(str(r["id"]))
    return flagged


def flag_not_persistent(trial_rows: Iterable[Row]) -> list[str]:
    """Marks every finished trial with persistent connections (lifetime ``forever``, any
    transport but UDP) that established more than ``MAX_NEW_CONNECTIONS`` of its connections in
    its window ``not-persistent`` and invalid (rows of the ``trials`` table, changed in place);
    returns their ids. A cell of persistent connections must not pay for handshakes. Two
    observers count: the engine (``connections_established``) and, over TCP, the kernel
    (``kernel_passive_opens``, the connections the target's network namespace accepted in the
    window, less ``KERNEL_ACCEPT_NOISE`` for what others there accepted)."""
    flagged = []
    for r in trial_rows:
        if r.get("transport") in (None, "udp") or r.get("lifetime") != "forever":
            continue  # a replay of real clients (no lifetime) opens connections as its shape says
        asked, opened, accepted = r.get("connections"), r.get("connections_established"), r.get("kernel_passive_opens")
        if r.get("status") != "done" or not asked:
            continue
        limit = MAX_NEW_CONNECTIONS * asked
        by_engine = opened is not None and opened > limit
        by_kernel = (
            r["transport"] in STREAM_TRANSPORTS and accepted is not None and accepted - KERNEL_ACCEPT_NOISE > limit
        )
        if not (by_engine or by_kernel):
            continue
        flags = [f for f in str(r.get("flags") or "").split(";") if f]
        if NOT_PERSISTENT not in flags:
            r["flags"] = ";".join([*flags, NOT_PERSISTENT])
        r["valid"] = False
        flagged.append(str(r["id"]))
    return flagged


def _median(values: list[float]) -> float:
    s = sorted(values)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def _interval(ratios: list[float]) -> tuple[float, float, float, str]:
    """Median of the per-round ratios and their min and max (a single round: ±
    ``ONE_ROUND_SPREAD``)."""
    value = _median(ratios)
    if len(ratios) == 1:
        return (
            value,
            value * (1 - ONE_ROUND_SPREAD),
            value * (1 + ONE_ROUND_SPREAD),
            f"single round ±{ONE_ROUND_SPREAD:.0%}",
        )
    return value, min(ratios), max(ratios), f"min, max over {len(ratios)} rounds"


def _name(r: Row, *, connections: bool = False) -> str:
    parts = [str(r["target"]), str(r["transport"])]
    parts.append(f"{r['connections']} connections" if connections else str(r["lifetime"]))
    if r.get("rate") not in (None, "max"):  # a trial row below saturation (the rounds table has no rate)
        parts.append(f"at {r['rate']} qps")
    if r["resumption"]:
        parts.append(f"resumption {r['resumption']:g}")
    if r.get("early_data"):
        parts.append(f"0-RTT {r['early_data']:g}")
    if r.get("cert_key") not in (None, DEFAULT_KEY_TYPE) and r["transport"] not in ("udp", "tcp"):
        parts.append(str(r["cert_key"]))
    return " ".join(parts)


def _per_round(cell: list[Row]) -> dict[Any, float]:
    out: dict[Any, float] = {}
    for r in cell:
        if r["valid"] and r["cpu_us_per_query"] is not None and round_of(r) not in out:
            out[round_of(r)] = float(r["cpu_us_per_query"])
    return out


def _row(
    flag: str, what: str, cell: str, against: str, ratios: list[float], cheap: list[Row], dear: list[Row]
) -> Row | None:
    """A contradiction when the interval of ``ratios`` (each must be at most 1) lies above 1."""
    if not ratios:
        return None
    value, low, high, interval = _interval(ratios)
    if low <= 1.0:
        return None
    return {
        "target": cheap[0]["target"],
        "transport": cheap[0]["transport"],
        "flag": flag,
        "cell": cell,
        "against": against,
        "what": what,
        "value": value,
        "low": low,
        "high": high,
        "margin": low - 1.0,
        "rounds": len(ratios),
        "interval": interval,
        "cell_trials": ";".join(str(r["id"]) for r in cheap),
        "against_trials": ";".join(str(r["id"]) for r in dear),
    }


def _paired(flag: str, what: str, cheap: list[Row], dear: list[Row], *, connections: bool = False) -> Row | None:
    """A contradiction when ``cheap`` (the cell that must cost at most as much per query)
    costs more than ``dear`` per query in every round (the interval of their per-round ratio
    above 1)."""
    a, b = _per_round(cheap), _per_round(dear)
    ratios = [a[k] / b[k] for k in a if k in b and b[k] > 0]
    return _row(
        flag,
        what,
        _name(cheap[0], connections=connections),
        _name(dear[0], connections=connections),
        ratios,
        cheap,
        dear,
    )


def _cells(rounds: Sequence[Row], analysis: str) -> dict[tuple[Any, ...], list[Row]]:
    """The rows of ``analysis`` by cell: (target, transport, key, 0-RTT, point, resumption),
    the point a lifetime (``establishment``), a connection count (``connections``) or a
    lifetime and a rate (``cost_handshakes``, from the ``trials`` table's rows)."""
    cells: dict[tuple[Any, ...], list[Row]] = {}
    for r in rounds:
        if r.get("analysis") == analysis and r["transport"] != "udp":
            point = {"establishment": r["lifetime"], "cost_handshakes": (r["lifetime"], r.get("rate"))}
            key = (
                r["target"],
                r["transport"],
                r["cert_key"] if r["transport"] != "tcp" else None,
                r["early_data"] or 0.0,
                point.get(analysis, r["connections"]),
                r["resumption"] or 0.0,
            )
            cells.setdefault(key, []).append(r)
    return cells


def _lifetime_and_resumption(cells: dict[tuple[Any, ...], list[Row]], *, lifetimes: bool = True) -> list[Row]:
    """Lifetime pairs (unless not ``lifetimes``: cells whose point is not a lifetime alone) and
    resumption pairs (more resumption; 0-RTT beside the same resumption) among ``cells``."""
    out = []
    for key, cell in cells.items():
        early, lifetime, resumption = key[3], key[4], key[5]
        for other_key, other in cells.items():
            if other_key[:3] != key[:3]:
                continue
            o_early, o_lifetime, o_resumption = other_key[3], other_key[4], other_key[5]
            # lifetime: this one shorter, same resumption and 0-RTT (a persistent cell has none)
            if (
                lifetimes
                and lifetime_order(lifetime) < lifetime_order(o_lifetime)
                and ((o_resumption, o_early) == (resumption, early) or o_lifetime == "forever")
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
            # 0-RTT: the same resumed handshakes, the first query sent in them, must not cost more
            if o_lifetime == lifetime and lifetime != "forever" and o_resumption == resumption > 0 and o_early > early:
                what = "CPU per query, more 0-RTT ÷ less (same resumption): above 1"
                found = _paired("inconsistent-resumption", what, other, cell)
                if found is not None:
                    out.append(found)
    return out


def _layering(cells: dict[tuple[Any, ...], list[Row]], *, connections: bool) -> list[Row]:
    """A transport against those of :data:`LAYERED` that carry it plus more, at the same
    target and lifetime (or connections), with the same resumption and 0-RTT, and the same
    key (plain TCP has none: it meets every key): it must not cost more per query."""
    out = []
    for key, cell in cells.items():
        target, transport, cert_key, early, point, resumption = key
        if transport not in LAYERED:
            continue
        for other_key, other in cells.items():
            o_target, o_transport, o_cert_key, o_early, o_point, o_resumption = other_key
            if (o_target, o_point) != (target, point) or o_transport not in LAYERED[transport]:
                continue
            if (o_early, o_resumption) != (early, resumption) or cert_key not in (None, o_cert_key):
                continue
            what = f"CPU per query, {transport} ÷ {o_transport} (which carries it plus {LAYER[transport]}): above 1"
            found = _paired("inconsistent-layering", what, cell, other, connections=connections)
            if found is not None:
                out.append(found)
    return out


def _sum(a: float | None, b: float | None) -> float | None:
    return a + b if a is not None and b is not None else None


def _held(p: Row) -> float | None:
    held = p.get("connections_held")
    held = held if held is not None else p.get("connections")
    return float(held) if isinstance(held, int | float) and held else None


def _idle_trials(trial_rows: Sequence[Row], target: Any, transport: Any, connections: Any = None) -> str:
    return ";".join(
        str(r["id"])
        for r in trial_rows
        if r["kind"] == "idle"
        and (r["target"], r["transport"]) == (target, transport)
        and (connections is None or r["connections"] == connections)
    )


def _memory_falling(points: Sequence[Row], trial_rows: Sequence[Row]) -> list[Row]:
    """Memory per connection at fewer connections ÷ at more, for every pair of valid points of
    a target and transport: above 1 means it fell as connections grew. One trial per point, so
    each point is taken ± ``ONE_ROUND_SPREAD``: a contradiction when the ratio's interval lies
    above 1."""
    out = []
    keys = dict.fromkeys((p["target"], p["transport"]) for p in points)
    s = ONE_ROUND_SPREAD
    for target, transport in keys:
        per: list[tuple[float, Row, float]] = []
        for p in points:
            if (p["target"], p["transport"]) != (target, transport) or not p["valid"]:
                continue
            total, held = _sum(p["rss_delta_bytes"], p["kernel_delta_bytes"]), _held(p)
            if total is not None and held:
                per.append((held, p, total / held))
        per.sort(key=lambda x: x[0])
        for i, (held_a, a, bytes_a) in enumerate(per):
            for held_b, b, bytes_b in per[i + 1 :]:
                if held_b <= held_a or bytes_b <= 0:
                    continue
                value = bytes_a / bytes_b
                low, high = value * (1 - s) / (1 + s), value * (1 + s) / (1 - s)
                if low <= 1.0:
                    continue
                out.append(
                    {
                        "target": target,
                        "transport": transport,
                        "flag": "inconsistent-memory",
                        "cell": f"{target} {transport} memory per connection at {held_a:.0f} "
                        f"({bytes_a / 1024:.1f} KiB)",
                        "against": f"{target} {transport} memory per connection at {held_b:.0f} "
                        f"({bytes_b / 1024:.1f} KiB)",
                        "what": "memory per connection (user + kernel), fewer connections ÷ more: above 1",
                        "value": value,
                        "low": low,
                        "high": high,
                        "margin": low - 1.0,
                        "rounds": 1,
                        "interval": f"each point ±{s:.0%} (one trial per point)",
                        "cell_trials": _idle_trials(trial_rows, target, transport, a["connections"]),
                        "against_trials": _idle_trials(trial_rows, target, transport, b["connections"]),
                    }
                )
    return out


def _memory_negative(points: Sequence[Row], trial_rows: Sequence[Row]) -> list[Row]:
    """The user and the kernel fits of :func:`dnscost.analysis.tables.memory_fit_rows` (the
    same valid points, the same slopes), when a slope's whole 95 % interval lies below zero."""
    out = []
    for target, transport in dict.fromkeys((p["target"], p["transport"]) for p in points):
        pts = [p for p in points if (p["target"], p["transport"]) == (target, transport) and p["valid"]]
        for name, column in (("user", "rss_delta_bytes"), ("kernel", "kernel_delta_bytes")):
            use = [(held, p[column]) for p in pts if (held := _held(p)) is not None and p[column] is not None]
            fit = fit_line([h for h, _ in use], [v for _, v in use])
            if fit is None or fit.ci95_high is None or fit.ci95_low is None or fit.ci95_high >= 0:
                continue
            trials = _idle_trials(trial_rows, target, transport)
            r2 = f"R² {fit.r2:.2f}, " if fit.r2 is not None else ""
            out.append(
                {
                    "target": target,
                    "transport": transport,
                    "flag": "negative-memory",
                    "cell": f"{target} {transport} {name} memory per connection",
                    "against": "zero",
                    "what": f"{name} memory per connection (bytes, fitted): below zero",
                    "value": fit.slope,
                    "low": fit.ci95_low,
                    "high": fit.ci95_high,
                    "margin": -fit.ci95_high,
                    "rounds": len(use),
                    "interval": f"95 % t interval of the fit ({r2}{len(use)} points); margin in bytes",
                    "cell_trials": trials,
                    "against_trials": "",
                }
            )
    return out


def _memory_below_kernel(points: Sequence[Row], trial_rows: Sequence[Row]) -> list[Row]:
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
            trials = _idle_trials(trial_rows, target, transport)
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
                    "margin": socket.ci95_low - total.ci95_high,
                    "rounds": len(pts),
                    "interval": f"95 % t intervals of both fits (socket buffers {socket.slope:.0f} B, "
                    f"{socket.ci95_low:.0f}..{socket.ci95_high:.0f}); margin in bytes",
                    "cell_trials": trials,
                    "against_trials": trials,
                }
            )
    return out


def _handshakes_uncounted(trial_rows: Sequence[Row]) -> list[Row]:
    """Per cell of valid TLS and QUIC load trials (one group, one configuration), the share of
    the connections established in the window with no handshake counted, full or resumed
    (1 - handshakes ÷ connections, each trial a round): a contradiction when its min over the
    rounds lies above ``MAX_NEW_CONNECTIONS``. Trials that counted no handshake kind at all (a
    record without the counts) are left out."""
    cells: dict[tuple[Any, ...], list[tuple[Row, float]]] = {}
    for r in trial_rows:
        opened, full, resumed = r.get("connections_established"), r.get("handshakes_full"), r.get("handshakes_resumed")
        if r.get("kind") != "load" or r.get("transport") not in TLS_TRANSPORTS or not r.get("valid") or not opened:
            continue
        if full is None and resumed is None:
            continue
        key = tuple(r.get(k) for k in ("group", "target", "transport", "cert_key", "early_data", "lifetime"))
        key += tuple(r.get(k) for k in ("resumption", "connections", "rate"))
        cells.setdefault(key, []).append((r, 1.0 - ((full or 0) + (resumed or 0)) / float(opened)))
    out = []
    for cell in cells.values():
        shares = [share for _, share in cell]
        low = min(shares)
        if low <= MAX_NEW_CONNECTIONS:
            continue
        first = cell[0][0]
        rows = [r for r, _ in cell]
        out.append(
            {
                "target": first["target"],
                "transport": first["transport"],
                "flag": "inconsistent-handshakes",
                "cell": _name(first, connections=first.get("analysis") == "connections"),
                "against": "its handshakes counted (full + resumed)",
                "what": "connections established with no handshake counted, share of those established",
                "value": _median(shares),
                "low": low,
                "high": max(shares),
                "margin": low - MAX_NEW_CONNECTIONS,
                "rounds": len(shares),
                "interval": f"min, max over {len(shares)} rounds; bound {MAX_NEW_CONNECTIONS:.0%}",
                "cell_trials": ";".join(str(r["id"]) for r in rows),
                "against_trials": "",
            }
        )
    return out


def consistency_rows(rounds: Sequence[Row], memory_points: Sequence[Row], trial_rows: Sequence[Row]) -> list[Row]:
    """Every contradiction in the run: the ``rounds`` table's establishment cells (lifetime,
    resumption, layering) and connections cells (layering), the cost model's one-query cells
    of ``trial_rows`` rate by rate (resumption, layering), their handshake counts (every TLS
    and QUIC load cell), and the ``memory_points`` table (memory per connection against
    connections held and against socket buffers; the flag goes to the idle trials of
    ``trial_rows``)."""
    establishment = _cells(rounds, "establishment")
    connections = _cells(rounds, "connections")
    handshakes = _cells(trial_rows, "cost_handshakes")
    return (
        _lifetime_and_resumption(establishment)
        + _layering(establishment, connections=False)
        + _layering(connections, connections=True)
        + _lifetime_and_resumption(handshakes, lifetimes=False)
        + _layering(handshakes, connections=False)
        + _handshakes_uncounted(trial_rows)
        + _memory_falling(memory_points, trial_rows)
        + _memory_negative(memory_points, trial_rows)
        + _memory_below_kernel(memory_points, trial_rows)
    )


HandshakeRounds = tuple[dict[Any, float], dict[Any, float], list[Row], list[Row]]
"""Per round, CPU-µs per full and per resumed handshake, and the round rows they come from."""


def handshake_rows(rounds: Mapping[str, Mapping[str, HandshakeRounds]]) -> list[Row]:
    """A resumed handshake dearer than a full one: per target and transport, the headline's
    per-round CPU per resumed handshake ÷ per full one (``rounds``: the headline's
    ``handshake_rounds`` per target, see :func:`dnscost.analysis.headline.headline`), when its
    interval lies above 1."""
    out = []
    for target, per_transport in rounds.items():
        for transport, (full, resumed, full_rows, resumed_rows) in sorted(per_transport.items()):
            ratios = [resumed[k] / full[k] for k in resumed if k in full and full[k] > 0]
            found = _row(
                "inconsistent-resumption",
                "CPU per handshake, resumed ÷ full: above 1",
                f"{target} {transport} 1q resumed handshake",
                f"{target} {transport} 1q full handshake",
                ratios,
                resumed_rows or [{"target": target, "transport": transport, "id": ""}],
                full_rows,
            )
            if found is not None:
                out.append(found)
    return out


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
