"""A page-load run's DNS as the resolver saw it (:mod:`dnscost.clientside.pageload` describes
the experiment): each session's names and the transports they came over (:func:`dns_check`),
and each DoT session's connections, joined with the DoT front's view of them
(:func:`dot_connections`). Pure."""

from __future__ import annotations

import itertools
import re
from collections import Counter, defaultdict
from collections.abc import Sequence

from dnscost.clientside.corpus import Corpus
from dnscost.clientside.pageload_plan import Session
from dnscost.contract import ConnectionRecord, QueryRecord

__all__ = ["BURST_GAP_US", "dns_check", "dot_connections"]


_LAB_NAME = re.compile(r"(?:^|\.)(h\d+-l(\d+)\.p\d+\.[a-z0-9-]+)\.?$")


def dns_check(queries: Sequence[QueryRecord], sessions: Sequence[Session], corpus: Corpus) -> list[dict[str, object]]:
    """Each session's names as the resolver saw them: how many of its hostnames were asked,
    and its queries by the transport they came over. Pure."""
    session_of = {p.load: s.number for s in sessions for p in s.loads}
    asked: dict[int, set[str]] = defaultdict(set)
    by_transport: dict[int, Counter[str]] = defaultdict(Counter)
    for q in queries:
        name = (q.get("qname") or "").lower()
        m = _LAB_NAME.search(name)
        if not m or int(m.group(2)) not in session_of:
            continue
        s = session_of[int(m.group(2))]
        by_transport[s][q["transport"]] += 1
        asked[s].add(m.group(1))
    out = []
    for session in sessions:
        n = session.number
        expected = sum(corpus.pages[p.page].hosts for p in session.loads)
        out.append({"session": n, "transport": session.transport, "names_expected": expected,
                    "names_asked": len(asked[n]), "queries": dict(sorted(by_transport[n].items()))})  # fmt: skip
    return out


BURST_GAP_US = 1000
"""Queries on one connection that reach the resolver less than this apart are one burst: they
were in flight together (the link's round trip is longer)."""


def dot_connections(
    queries: Sequence[QueryRecord],
    responder_connections: Sequence[ConnectionRecord],
    front_connections: Sequence[dict[str, object]],
    sessions: Sequence[Session],
) -> dict[int, list[dict[str, object]]]:
    """Each session's DoT connections, as the resolver and the DoT front saw them: the front's
    connection (the stub's), the resolver's tcp connection it was relayed on (joined by the
    front's local address), how many queries it carried (all, and this session's names), the
    first and last (resolver's clock, µs), its bursts (:data:`BURST_GAP_US`: the largest and
    how many), how long it was idle before it closed and who closed it. Pure."""
    session_of = {p.load: s.number for s in sessions for p in s.loads}
    front_by_backend = {str(c.get("backend_address")): c for c in front_connections}
    responder_by_id = {c["id"]: c for c in responder_connections if c["transport"] == "tcp"}
    times: dict[int, list[int]] = defaultdict(list)
    mine: dict[int, Counter[int]] = defaultdict(Counter)
    for q in queries:
        conn = q.get("connection")
        if q["transport"] != "tcp" or conn is None:
            continue
        times[conn].append(q["t_us"])
        m = _LAB_NAME.search((q.get("qname") or "").lower())
        if m and int(m.group(2)) in session_of:
            mine[session_of[int(m.group(2))]][conn] += 1
    out: dict[int, list[dict[str, object]]] = {}
    for session, counts in mine.items():
        rows = []
        for conn in sorted(counts):
            ts = sorted(times[conn])
            bursts = [1]
            for a, b in itertools.pairwise(ts):
                if b - a < BURST_GAP_US:
                    bursts[-1] += 1
                else:
                    bursts.append(1)
            resp = responder_by_id.get(conn)
            front = front_by_backend.get(resp["peer_address"], {}) if resp is not None else {}
            closed = resp["closed_us"] if resp is not None else None
            rows.append({
                "connection": conn,
                "front_connection": front.get("id"),
                "queries": len(ts),
                "session_queries": counts[conn],
                "first_query_us": ts[0],
                "last_query_us": ts[-1],
                "bursts": len(bursts),
                "max_burst": max(bursts),
                "idle_before_close_ms": round((closed - ts[-1]) / 1000, 1) if closed is not None else None,
                "closed_by": front.get("closed_by"),
                "close": front.get("close"),
                "front_median_us": front.get("relay_median_us"),
            })  # fmt: skip
        out[session] = rows
    return out
