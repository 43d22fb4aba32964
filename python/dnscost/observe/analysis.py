"""What an observation shows, computed from its raw records only (the responder's connection
and query logs, the resolution loop's lines): per connection its open and close times,
duration, the lab's queries and the background ones it carried, who closed it and how; and
the observation's summary. No I/O besides reading the files given.

Lab queries are those for the names the driver asked for (``q<digits>.<tld>``, and a
browser's HTTPS query for it, ``_<port>._https.q<digits>.<tld>``); every other name (a
browser's or a resolver's own traffic) is background, counted apart."""

from __future__ import annotations

import re
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from dnscost.contract import ConnectionRecord, ObservationRecord, ObservationSummary, QueryRecord, Row
from dnscost.engine import connection_log, query_log
from dnscost.jsonl import read_records
from dnscost.results import read_document

__all__ = [
    "Connection", "Observed", "connections", "is_lab_name", "lab_name_of", "load", "summarise",
    "summary_line",
]  # fmt: skip


def lab_name_of(qname: str, tld: str = "test") -> str | None:
    """The driver's name that ``qname`` asks about (``q00042.test``), if any."""
    m = re.fullmatch(rf"(?:_\d+\._https\.)?(q\d+\.{re.escape(tld)})\.?", qname.lower())
    return m.group(1) if m else None


def is_lab_name(qname: str, tld: str = "test") -> bool:
    return lab_name_of(qname, tld) is not None


@dataclass(frozen=True)
class Connection:
    """One connection as the server saw it; times in seconds from the observation's start."""

    id: int
    transport: str
    opened_s: float
    closed_s: float
    lab_queries: int
    background_queries: int
    closed_by: str
    close: str
    query_times_s: tuple[float, ...]
    """When each lab query arrived."""
    names: frozenset[str] = frozenset()
    """The driver's names the lab queries asked about."""
    handshake: str = ""
    """The TLS handshake as the server saw it (``full``, ``resumed``, ``zero_rtt_accepted`` or
    ``zero_rtt_rejected``; ``none`` or empty without TLS)."""

    @property
    def duration_s(self) -> float:
        return self.closed_s - self.opened_s


def connections(
    conn_records: Sequence[ConnectionRecord],
    query_records: Sequence[QueryRecord],
    origin_us: int = 0,
    tld: str = "test",
) -> list[Connection]:
    """The server's connections, with their queries (matched by transport and connection id);
    times relative to ``origin_us`` (on the server's clock)."""
    lab: dict[tuple[str, int], list[float]] = {}
    names: dict[tuple[str, int], set[str]] = {}
    background: Counter[tuple[str, int]] = Counter()
    for q in query_records:
        if (connection := q.get("connection")) is None:
            continue
        key = (q["transport"], connection)
        name = lab_name_of(q.get("qname") or "", tld)
        if name is not None:
            lab.setdefault(key, []).append((q["t_us"] - origin_us) / 1e6)
            names.setdefault(key, set()).add(name)
        else:
            background[key] += 1
    out = []
    for c in conn_records:
        if c["role"] != "server":
            continue
        key = (c["transport"], c["id"])
        times = tuple(sorted(lab.get(key, [])))
        out.append(
            Connection(
                id=int(c["id"]),
                transport=c["transport"],
                opened_s=(c["opened_us"] - origin_us) / 1e6,
                closed_s=(c["closed_us"] - origin_us) / 1e6,
                lab_queries=len(times),
                background_queries=background[key],
                closed_by=c.get("closed_by") or "unknown",
                close=c.get("close") or "unknown",
                query_times_s=times,
                names=frozenset(names.get(key, ())),
                handshake=c.get("handshake") or "",
            )
        )
    out.sort(key=lambda c: (c.opened_s, c.id))
    return out


def _spread(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def summarise(conns: list[Connection], resolutions: Sequence[Mapping[str, object]] | None) -> ObservationSummary:
    """The observation's summary; ``resolutions`` None: none were timed (no resolution loop)."""
    used = [c for c in conns if c.lab_queries or c.background_queries]
    times = sorted(float(ms) for r in resolutions or [] if r.get("ok") and isinstance(ms := r.get("ms"), int | float))
    p99 = times[min(len(times) - 1, int(0.99 * len(times)))] if times else float("nan")
    return ObservationSummary(
        connections=len(used),
        idle_connections=len(conns) - len(used),
        duration_s=_spread([c.duration_s for c in used]),
        lab_queries_per_connection=_spread([float(c.lab_queries) for c in used]),
        lab_queries=sum(c.lab_queries for c in conns),
        lab_names=len(frozenset().union(*(c.names for c in conns))),
        background_queries=sum(c.background_queries for c in conns),
        closes=dict(Counter(f"{c.closed_by} {c.close}" for c in conns)),
        resolutions=None if resolutions is None else len(resolutions),
        resolutions_failed=None if resolutions is None else sum(1 for r in resolutions if not r.get("ok")),
        resolution_ms={"median": statistics.median(times), "p99": p99} if times else {},
    )


@dataclass(frozen=True)
class Observed:
    """One observation read back from its directory."""

    path: Path
    meta: ObservationRecord
    connections: list[Connection]

    @property
    def delay_s(self) -> float:
        return float(self.meta["delay_s"])

    @property
    def policy(self) -> str:
        return str(self.meta["policy"])


def load(cell: Path) -> Observed:
    """An observation's records, times counted from when its client started."""
    meta = read_document(cell / "observation.json", ObservationRecord)
    origin = int(meta.get("origin_unix_us") or 0)
    started = int(meta.get("client_started_unix_us") or origin)
    conns = connections(
        connection_log(cell / "connections.jsonl"),
        query_log(cell / "queries.jsonl"),
        origin_us=started - origin,
    )
    timed = cell / "resolutions.jsonl"
    meta["summary"] = summarise(conns, read_records(timed, strict=True) if timed.exists() else None)
    return Observed(cell, meta, conns)


def summary_line(s: ObservationSummary) -> str:
    """An observation's summary in one line, as ``dnscost observe`` prints it."""
    closes = ", ".join(f"{k} {v}" for k, v in sorted(s["closes"].items()))
    timed = (
        "resolutions not timed"
        if s.get("resolutions") is None
        else f"{s['resolutions']} resolutions ({s['resolutions_failed']} failed)"
    )
    return (
        f"{s['connections']} connections ({s['idle_connections']} without queries), "
        f"{s['lab_queries']} lab queries ({s['lab_names']} names) + {s['background_queries']} background, "
        f"{timed}; closed: {closes}"
    )


COLUMNS = [
    "client", "client_version", "delay_s", "policy", "duration_s", "connections", "idle_connections",
    "duration_median_s", "duration_max_s", "lab_queries_per_connection_median", "lab_names", "lab_queries",
    "background_queries", "closed_by_client", "closed_by_server", "closes",
]  # fmt: skip


def table(observed: list[Observed]) -> list[Row]:
    """One row per observation (the columns of :data:`COLUMNS`)."""
    rows = []
    for o in sorted(observed, key=lambda o: (o.meta["client"], o.delay_s, o.policy)):
        s = o.meta["summary"]
        closes = s["closes"]
        rows.append(
            {
                "client": o.meta["client"],
                "client_version": o.meta.get("client_version"),
                "delay_s": o.delay_s,
                "policy": o.policy,
                "duration_s": o.meta.get("duration_s"),
                "connections": s["connections"],
                "idle_connections": s["idle_connections"],
                "duration_median_s": s["duration_s"].get("median"),
                "duration_max_s": s["duration_s"].get("max"),
                "lab_queries_per_connection_median": s["lab_queries_per_connection"].get("median"),
                "lab_names": s["lab_names"],
                "lab_queries": s["lab_queries"],
                "background_queries": s["background_queries"],
                "closed_by_client": sum(v for k, v in closes.items() if k.startswith("client ")),
                "closed_by_server": sum(v for k, v in closes.items() if k.startswith("server ")),
                "closes": "; ".join(f"{k} {v}" for k, v in sorted(closes.items())),
            }
        )
    return rows
