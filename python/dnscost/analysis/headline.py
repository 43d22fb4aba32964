"""The figures a report leads with, per target, read from the derived tables (so from valid
trials only)."""

from __future__ import annotations

from typing import Any

from dnscost.analysis.records import Analysis
from dnscost.analysis.tables import reference_key

__all__ = ["headline"]

PERSISTENT = "forever"
ONE_QUERY = "1q"


def _pick(rows: list[dict[str, Any]], *, resumed: bool) -> dict[str, Any] | None:
    """Among rows differing only in resumption: the lowest (full handshakes) or the highest
    above zero (resumed) with a median, None when there is none."""
    rows = [r for r in rows if r["qps_median"] is not None]
    if resumed:
        rows = [r for r in rows if (r["resumption"] or 0) > 0]
    if not rows:
        return None
    key = lambda r: r["resumption"] or 0.0  # noqa: E731
    return max(rows, key=key) if resumed else min(rows, key=key)


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def headline(a: Analysis) -> list[dict[str, Any]]:
    """Per target, in plan order, a dict with:

    - ``target``, ``target_version``, ``udp_max_qps`` (the UDP baseline: open loop, loss below
      the limit), ``udp_saturation_qps`` (closed loop) and ``udp_reference_qps`` (what shares of
      UDP divide by: saturation when measured, else the baseline);
    - ``persistent``: per transport other than UDP, ``{qps, share_of_udp, source}`` with
      persistent connections: the establishment table at lifetime ``forever`` (no resumption),
      else the connections table at its smallest number of connections;
    - ``collapse_1q``: per transport, ``{qps_1q, qps_persistent, ratio, qps_1q_resumed,
      ratio_resumed}``: throughput at one query per connection over persistent throughput;
    - ``memory_per_connection``: per transport, ``{user_bytes, kernel_bytes, total_bytes}``
      (slopes of the memory fit);
    - ``energy``: the energy table's rows for the target (Table I, kWh per day at 10 000 qps).
    """
    t = a.tables
    baseline = {r["target"]: r for r in t["baseline"].rows}
    targets = list(dict.fromkeys(r["target"] for r in t["trials"].rows if r["target"] is not None))
    out = []
    for target in targets:
        version = next((r["target_version"] for r in t["trials"].rows if r["target"] == target), None)
        udp = baseline.get(target, {}).get("udp_reference_qps")
        est = [r for r in reference_key(t["establishment"].rows) if r["target"] == target]
        conns = [r for r in t["connections"].rows if r["target"] == target and r["qps_median"] is not None]
        transports = list(dict.fromkeys(r["transport"] for r in est + conns if r["transport"] != "udp"))
        persistent: dict[str, dict[str, Any]] = {}
        collapse: dict[str, dict[str, Any]] = {}
        for tr in transports:
            forever = _pick([r for r in est if r["transport"] == tr and r["lifetime"] == PERSISTENT], resumed=False)
            qps: float | None = None
            source: str | None = None
            if forever is not None:
                qps, source = forever["qps_median"], "establishment"
            else:
                by_n = sorted((r for r in conns if r["transport"] == tr), key=lambda r: r["connections"] or 0)
                qps, source = (by_n[0]["qps_median"], "connections") if by_n else (None, None)
            if qps is not None:
                persistent[tr] = {"qps": qps, "share_of_udp": _ratio(qps, udp), "source": source}
            one = [r for r in est if r["transport"] == tr and r["lifetime"] == ONE_QUERY]
            full, resumed = _pick(one, resumed=False), _pick(one, resumed=True)
            if full is not None or resumed is not None:
                q1 = full["qps_median"] if full else None
                q1r = resumed["qps_median"] if resumed else None
                collapse[tr] = {
                    "qps_1q": q1,
                    "qps_persistent": qps,
                    "ratio": _ratio(q1, qps),
                    "qps_1q_resumed": q1r,
                    "ratio_resumed": _ratio(q1r, qps),
                }
        memory = {
            r["transport"]: {
                "user_bytes": r["user_bytes_per_connection"],
                "kernel_bytes": r["kernel_bytes_per_connection"],
                "total_bytes": (
                    r["user_bytes_per_connection"] + r["kernel_bytes_per_connection"]
                    if r["user_bytes_per_connection"] is not None and r["kernel_bytes_per_connection"] is not None
                    else None
                ),
            }
            for r in t["memory_fit"].rows
            if r["target"] == target
        }
        out.append(
            {
                "target": target,
                "target_version": version,
                "udp_max_qps": baseline.get(target, {}).get("udp_max_qps"),
                "udp_saturation_qps": baseline.get(target, {}).get("udp_saturation_qps"),
                "udp_reference_qps": udp,
                "persistent": persistent,
                "collapse_1q": collapse,
                "memory_per_connection": memory,
                "energy": [dict(r) for r in reference_key(t["energy"].rows) if r["target"] == target],
            }
        )
    return out
