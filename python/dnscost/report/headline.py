"""The headline figures of a run as console lines (``dnscost report`` and ``dnscost run`` print
them): per target, each figure with its interval over rounds, then what the consistency checks
found. The figures themselves are :func:`dnscost.analysis.headline`'s."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TypeVar

from dnscost.analysis.headline import HandshakeFigures, Head
from dnscost.analysis.rounds import Spread, spread
from dnscost.analysis.stats import median
from dnscost.analysis.tables import REFERENCE_QPS
from dnscost.contract import Row
from dnscost.transports import DEFAULT_KEY_TYPE, TRANSPORTS, display_name

__all__ = ["answers", "format_headline", "format_population"]


def _fmt(v: float | None, unit: str = "", digits: int = 1) -> str:
    return "n/a" if v is None else f"{v:,.{digits}f}{unit}"


def _iv(s: Spread | None, digits: int = 2, scale: float = 1.0, unit: str = "") -> str:
    """A figure over rounds as ``median [min-max]`` (one value alone when min = max)."""
    if s is None or s.median is None:
        return "n/a"
    mid = f"{s.median * scale:,.{digits}f}{unit}"
    if s.low is None or s.high is None or s.n < 2:
        return mid
    return f"{mid} [{s.low * scale:,.{digits}f}-{s.high * scale:,.{digits}f}]"


def _flag_share(s: Spread | None) -> str:
    """A share of UDP; one above 1 (a connected transport answering more than UDP in its own
    round) is marked, since it contradicts every measurement so far."""
    text = _iv(s)
    return text + " (!)" if s is not None and s.median is not None and s.median > 1 else text


def _nonnegative(v: Spread) -> str:
    """A fitted cost that cannot be negative: its slope and 95 % interval, or, when the interval
    reaches 0 or below, only its upper bound (the data cannot tell it from no cost at all)."""
    if v.median is None:
        return "n/a"
    if v.low is None or v.high is None:
        return f"{v.median:,.2f}"
    if v.low <= 0:
        return f"below {max(v.high, 0):,.2f} (not distinguishable from 0)"
    return f"{v.median:,.2f} [{v.low:,.2f}-{v.high:,.2f}]"


def _flag_resumed(full: Spread | None, resumed: Spread | None) -> str:
    """A resumed handshake's cost; one whose median is above the full handshake's is marked,
    since a resumption skips the certificate and its signature: noise or a bug until shown
    otherwise, not a result."""
    text = _iv(resumed, 0)
    dearer = (
        full is not None
        and resumed is not None
        and full.median is not None
        and resumed.median is not None
        and resumed.median > full.median
    )
    return text + " (!)" if dearer else text


def _resumed_share(handshakes: HandshakeFigures) -> str:
    """Said when the server let fewer than 95 % of the resumption trial's reconnections resume
    (dnsdist 1.7 issues no new ticket on a resumed handshake: two of three resume)."""
    share = handshakes.get("resumed_share")
    if share is None or share.median is None or share.median >= 0.95:
        return ""
    return f" ({share.median:.0%} of reconnections resumed)"


F = TypeVar("F")


def _each(table: Mapping[str, F], show: Callable[[F], str]) -> str:
    return ", ".join(f"{t} {show(v)}" for t, v in sorted(table.items())) or "n/a"


def format_headline(rows: Sequence[Head], contradictions: Sequence[Row] = (), clients: Sequence[Row] = ()) -> list[str]:
    """Per target: CPU per query (the primary figure, with capacity per core), measured qps,
    ratios to UDP and to persistent connections, handshake costs, memory per connection, real
    clients replayed (the ``clients`` table), each with its interval; then the contradictions
    the consistency checks found."""
    lines = []
    rounds = max((r["rounds"] for r in rows), default=0)
    marked = dearer = False
    for r in rows:
        udp = r["udp"]
        persistent, collapse = r["persistent"], r["collapse_1q"]

        shares = _each(persistent, lambda v: _flag_share(v["share"]))
        marked = marked or "(!)" in shares
        memory = ", ".join(
            f"{t} {_fmt(v['total_bytes'] / 1024 if v['total_bytes'] is not None else None, ' KiB')}"
            + (
                f" [{low / 1024:,.1f}-{high / 1024:,.1f}]"
                if (low := v["total_low"]) is not None and (high := v["total_high"]) is not None
                else ""
            )
            for t, v in sorted(r["memory_per_connection"].items())
        )
        hs = r["handshake_us"]
        handshakes = ", ".join(
            f"{t} {_iv(v['full'], 0)} / {_flag_resumed(v['full'], v['resumed'])}{_resumed_share(v)}"
            + (f" / 0-RTT {_flag_resumed(v['full'], v['zero_rtt'])}" if v.get("zero_rtt") else "")
            for t, v in sorted(hs.items())
            if t != "tcp"
        )
        dearer = dearer or "(!)" in handshakes
        if "tcp" in hs:
            handshakes = ", ".join(x for x in (handshakes, f"tcp {_iv(hs['tcp']['full'], 0)}") if x)
        idle_cpu = ", ".join(
            f"{t} {_nonnegative(idle)}"
            for t, v in sorted(r["memory_per_connection"].items())
            if (idle := v["cpu_us_per_connection_second"]) is not None
        )
        lines += [
            f"{r['target']} {r['target_version'] or ''}: UDP {_iv(udp['cpu_us_per_query'])} CPU-µs/query = "
            f"{_iv(udp['capacity_per_core_qps'], 0, 1e-3, 'k')} qps per core; measured "
            f"{_iv(udp['qps'], 0, 1e-3, 'k')} qps at saturation, "
            f"{_fmt(r['udp_max_qps'], ' qps', 0)} with loss below 1 % (open loop)",
            f"  persistent, CPU per query ÷ UDP's          {_each(persistent, lambda v: _iv(v['cpu_ratio']))}",
            f"  persistent, measured qps share of UDP      {shares}",
            f"  1 query/connection, CPU per query ÷ persistent  {_each(collapse, lambda v: _iv(v['cpu_ratio'], 1))}",
            f"  1 query/connection, qps share of persistent     {_each(collapse, lambda v: _iv(v['qps_ratio'], 3))}",
            f"  CPU-µs per handshake, full / resumed       {handshakes or 'n/a'}",
            f"  memory per idle connection                 {memory or 'n/a'}",
            f"  CPU-µs per idle connection-second          {idle_cpu or 'n/a'}",
        ]
        if udp["j_per_query"].median is not None:
            lines.append(
                f"  energy per query ÷ UDP's (RAPL)           {_each(persistent, lambda v: _iv(v['energy_ratio']))}"
            )
        replayed = [c for c in clients if c["target"] == r["target"]]
        if replayed:
            ratios = ", ".join(
                f"{c['profile']} "
                + _iv(
                    Spread(
                        c["cpu_ratio_to_udp"], c["cpu_ratio_to_udp_min"], c["cpu_ratio_to_udp_max"], c["valid_reps"]
                    ),
                    1,
                )
                + ("" if (c["rate_qps"] or 0) >= 0.99 * REFERENCE_QPS else f" (at {c['rate_qps']:,.0f} qps)")
                for c in replayed
            )
            lines.append(f"  real clients, CPU per query ÷ UDP's        {ratios}")
    lines.append(
        f"intervals: median [min-max] over {rounds} round{'s' if rounds != 1 else ''}, each ratio within its round; "
        "memory and idle CPU: fitted slope [95 % t interval]"
    )
    if marked:
        lines.append("(!) a share of UDP above 1: a connected transport answered more than UDP in its round")
    if dearer:
        lines.append(
            "(!) a resumed handshake measured dearer than a full one: a resumption skips the certificate and "
            "its signature, so this is noise or a bug until shown otherwise; do not publish it"
        )
    for c in contradictions:
        lines.append(
            f"inconsistent: {c['cell']} against {c['against']}: {c['what']}, "
            f"{c['value']:.2f} [{c['low']:.2f}-{c['high']:.2f}] ({c['flag']})"
        )
    return lines


def format_population(rows: Sequence[Row]) -> list[str]:
    """The ``population`` table in words, per target and rate over its rounds: the target's CPU
    per answered query measured (median [min-max]), the cost model's prediction (its interval's
    ends, median over rounds), and in how many rounds the measured time lay within, above or
    below the prediction's interval. Trials that asked the capture's own names are told apart,
    with the target's cache hits beside the capture's repeats."""
    groups: dict[tuple[object, object, object], list[Row]] = {}
    for r in rows:
        key = (r["target"], round(float(r["rate_qps"] or 0), -2), r.get("names") or "synthetic")
        groups.setdefault(key, []).append(r)
    if not groups:
        return []
    lines = ["the cost model on trial: a population replayed, every class at once (population table)"]
    for (target, rate, names), mine in sorted(
        groups.items(), key=lambda g: (str(g[0][0]), float(str(g[0][1])), str(g[0][2]))
    ):
        per = [
            (float(r["measured_cpu_us"]) / float(r["queries_answered"]), r)
            for r in mine
            if r["valid"] and r["measured_cpu_us"] is not None and r["queries_answered"]
        ]
        if not per:
            lines.append(f"  {target} at {rate:,.0f} qps: no valid trial")
            continue
        measured = spread(m for m, _ in per)
        q = {id(r): float(r["queries_answered"]) for _, r in per}
        lows = [float(r["predicted_low_us"]) / q[id(r)] for _, r in per if r["predicted_low_us"] is not None]
        highs = [float(r["predicted_high_us"]) / q[id(r)] for _, r in per if r["predicted_high_us"] is not None]
        verdicts = [r["verdict"] for _, r in per if r["verdict"]]
        version = mine[0].get("target_version") or ""
        low, high = median(lows), median(highs)
        ratio = (
            f", measured ÷ predicted {measured.median / high:.2f}-{measured.median / low:.2f}"
            if low and high and measured.median is not None
            else ""
        )
        predicted = (
            f"{low or 0:,.1f}-{high or 0:,.1f}{ratio}"
            + (
                " (bounded: a term not identified enters from 0)"
                if any(r["status"] == "bounded" for _, r in per)
                else ""
            )
            if lows and highs
            else f"not identified ({mine[0]['reason']})"
        )
        words = {"within": "within the prediction", "above": "above it (under-predicted)", "below": "below it"}
        counts = ", ".join(f"{words[v]} in {verdicts.count(v)}" for v in words if v in verdicts)
        label = f"{target} {version} at {rate:,.0f} qps" + (", the capture's names" if names == "capture" else "")
        lines.append(
            f"  {label}: measured {_iv(measured, 1)} CPU-µs/query, "
            f"predicted {predicted}; measured {counts or 'not compared'} of {len(per)} rounds"
        )
    return lines + _format_names(rows)


def _format_names(rows: Sequence[Row]) -> list[str]:
    """The trials that asked a capture's own names, per target and rate over their rounds: the
    share of the queries its cache answered (its counters), the share the upstream was asked
    for (its own log: the misses), and the share a cache keeping every answer would have
    answered of the names the engine asked (the names file's first lines) and of the whole
    capture's."""
    groups: dict[tuple[object, object], list[Row]] = {}
    for r in rows:
        if r.get("names") == "capture" and r["valid"]:
            groups.setdefault((r["target"], round(float(r["rate_qps"] or 0), -2)), []).append(r)
    if not groups:
        return []
    lines = ["the capture's own names through the target, its cache beside the capture's repeats (population table)"]
    for (target, rate), mine in sorted(groups.items(), key=lambda g: (str(g[0][0]), float(str(g[0][1])))):

        def pct(values: Iterable[float | None]) -> str:
            return _iv(spread(None if v is None else 100 * v for v in values), 1)

        upstream = [
            float(r["upstream_queries"]) / float(r["target_answered"])
            if r.get("upstream_queries") is not None and r.get("target_answered")
            else None
            for r in mine
        ]
        capture = mine[0].get("capture_repeat_share")
        lines.append(
            f"  {target} {mine[0].get('target_version') or ''} at {rate:,.0f} qps: its cache answered "
            f"{pct(r['cache_hit_ratio'] for r in mine)} % (its counters), the upstream was asked for "
            f"{pct(upstream)} % (its log); a cache keeping every answer: "
            f"{pct(r['replayed_repeat_share'] for r in mine)} % of the names asked, "
            f"{'n/a' if capture is None else f'{100 * float(capture):.1f}'} % of the whole capture's; "
            f"{len(mine)} rounds"
        )
    return lines


def _num(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _between(s: Spread, digits: int, scale: float = 1.0) -> str:
    """``median`` and, over two rounds or more, ``(min to max over N rounds)``."""
    assert s.median is not None
    mid = f"{s.median * scale:,.{digits}f}"
    if s.low is None or s.high is None or s.n < 2:
        return mid
    return f"{mid} ({s.low * scale:,.{digits}f} to {s.high * scale:,.{digits}f} over {s.n} rounds)"


def _in_order(table: Mapping[str, F]) -> list[tuple[str, F]]:
    return sorted(table.items(), key=lambda kv: TRANSPORTS.index(kv[0]) if kv[0] in TRANSPORTS else len(TRANSPORTS))


def answers(head: Head) -> list[str]:
    """What a target's headline answers, in words, one sentence a question (each number the
    headline's, with its spread over rounds; each cost at saturation, where it was measured):
    what a query costs over each transport against UDP on persistent connections, what a new
    connection costs (in CPU-µs and in UDP queries)
    and what resumption saves of it, what an idle connection holds, and what a day at 10 000
    queries a second costs by the study's method. A question the run has no valid figure for is
    left out; a resumed handshake measured dearer than a full one is said to be no result."""
    name = f"{head['target']} {head['target_version'] or ''}".strip()
    udp = head["udp"]["cpu_us_per_query"]
    out: list[str] = []
    ratios = [
        f"{display_name(t)} {_between(v['cpu_ratio'], 1)} times"
        for t, v in _in_order(head["persistent"])
        if v["cpu_ratio"].median is not None
    ]
    if udp.median is not None and ratios:
        out.append(
            f"On {name}, at saturation, a UDP query costs the resolver {_between(udp, 2)} CPU-µs; over a "
            f"connection kept open, a query costs {', '.join(ratios)} as much."
        )
    for t, h in _in_order(head["handshake_us"]):
        full, resumed = h["full"], h["resumed"]
        if full.median is None:
            continue
        what = f"A new {display_name(t)} connection costs {_between(full, 0)} CPU-µs at saturation"
        if udp.median:
            what += f", as much as {full.median / udp.median:,.0f} UDP queries"
        if t != "tcp" and resumed.median is not None:
            if resumed.median > full.median:
                what += (
                    f"; a resumed one measured {resumed.median:,.0f}, dearer than a full one, which a resumption "
                    "cannot be: no result"
                )
            else:
                saved = 1 - resumed.median / full.median
                what += f"; a resumed one {_between(resumed, 0)}, {100 * saved:.0f} % less"
        out.append(what + ".")
    memory = [
        f"{display_name(t)} {total / 1024:,.1f} KiB"
        for t, m in _in_order(head["memory_per_connection"])
        if (total := _num(m["total_bytes"])) is not None
    ]
    if memory:
        out.append(f"An idle connection holds {', '.join(memory)} of the resolver's memory (user and kernel).")
    day = {
        (str(e.get("transport")), str(e.get("lifetime") or "forever")): kwh
        for e in head["energy"]
        if not e.get("resumption")
        and not e.get("early_data")
        and e.get("cert_key") in (None, "", DEFAULT_KEY_TYPE)
        and (kwh := _num(e.get("kwh_per_day_at_10k_qps"))) is not None
    }
    if ("udp", "forever") in day:
        others = [
            f"{display_name(t)} {day[(t, 'forever')]:,.3f}"
            + (f" ({day[(t, '1q')]:,.3f} with a connection a query)" if (t, "1q") in day else "")
            for t in TRANSPORTS
            if t != "udp" and (t, "forever") in day
        ]
        out.append(
            f"A day at 10 000 queries a second costs {day[('udp', 'forever')]:,.3f} kWh above idle over UDP"
            + (f", over connections kept open {', '.join(others)}" if others else "")
            + " (the study's method: the energy of a query at saturation, 864 million times; a resolver below "
            "saturation pays more a query)."
        )
    return out
