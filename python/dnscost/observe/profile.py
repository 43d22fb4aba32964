"""An observation turned into a client profile (``schemas/client-profile.schema.json``), which
``dnscost-engine generate --profile FILE --clients N`` replays at scale.

From the client's own behaviour only: closes made by the server's policy, or by the end of the
observation (the client stopped), say nothing of the client and are left out. So a profile is
best taken from an observation under a policy that closes nothing (``google``, ``none``).

- ``idle_timeout_ms``: the client closes connections this long after their last query, when at
  least two of its own closes agree (within 10 % and 200 ms);
- ``lifetime.queries``: the client closes right after the N-th query (within 500 ms), N the same
  for all its own closes;
- ``close``: how it closed most often (TLS close_notify or HTTP/2 GOAWAY: ``graceful``);
- ``connections``: the most connections carrying the driver's queries at once;
- ``queries_per_resolution``: the driver's queries per name, rounded;
- ``resumption``: the share of its reconnections (connections carrying the driver's queries
  after the first) whose TLS handshake resumed a session, as the server saw it."""

from __future__ import annotations

import statistics
from collections import Counter

from dnscost.contract import ClientProfile, CloseMode
from dnscost.observe.analysis import Connection, Observed

__all__ = ["extract"]

CLOSES: dict[str, CloseMode] = {"close_notify": "graceful", "goaway": "graceful", "fin": "fin", "rst": "rst"}


def _most_at_once(conns: list[Connection]) -> int:
    events = sorted([(c.opened_s, 1) for c in conns] + [(c.closed_s, -1) for c in conns], key=lambda e: (e[0], e[1]))
    now = best = 0
    for _, step in events:
        now += step
        best = max(best, now)
    return max(best, 1)


def extract(o: Observed) -> ClientProfile:
    """The profile of the client in observation ``o`` (a JSON-ready dict)."""
    meta = o.meta
    conns = [c for c in o.connections if c.lab_queries > 0]
    started = int(meta.get("client_started_unix_us") or 0)
    stopped = int(meta.get("client_stopped_unix_us") or 0)
    end_s = (stopped - started) / 1e6 if stopped and started else float("inf")
    own = [c for c in conns if c.closed_by == "client" and c.closed_s < end_s - 0.5 and c.query_times_s]
    profile: ClientProfile = {
        "name": f"{meta['client']}-{float(meta['delay_s']):g}s-{meta['policy']}",
        "source": (
            f"dnscost observe: {meta['client']} {meta.get('client_version') or ''}".rstrip()
            + f", one resolution every {float(meta['delay_s']):g} s for {float(meta['duration_s']):g} s,"
            f" policy {meta['policy']}; {len(conns)} connections, {len(own)} closed by the client"
        ),
        "transport": meta["transport"] if meta.get("transport") in ("doh", "dot") else _transport(conns),
        "connections": _most_at_once(conns) if conns else 1,
        "query_interval_ms": round(float(meta["delay_s"]) * 1000),
        "queries_per_resolution": max(1, round(meta["summary"]["lab_queries"] / max(meta["summary"]["lab_names"], 1))),
    }
    gaps = [c.closed_s - c.query_times_s[-1] for c in own]
    if len(gaps) >= 2:
        median = statistics.median(gaps)
        if max(gaps) - min(gaps) <= 0.1 * median + 0.2 and median >= 0.5:
            profile["idle_timeout_ms"] = round(median * 1000)
        counts = {c.lab_queries + c.background_queries for c in own}
        if max(gaps) < 0.5 and len(counts) == 1:
            profile["lifetime"] = {"queries": counts.pop()}
    again = [c for c in conns[1:] if c.handshake not in ("", "none")]
    if again:  # resumed, or resumed with 0-RTT data (accepted or not)
        profile["resumption"] = round(sum(c.handshake != "full" for c in again) / len(again), 3)
    closes = Counter(CLOSES[c.close] for c in own if c.close in CLOSES)
    if closes:
        profile["close"] = closes.most_common(1)[0][0]
    return profile


def _transport(conns: list[Connection]) -> str:
    seen = Counter(c.transport for c in conns)
    return seen.most_common(1)[0][0] if seen else "doh"
