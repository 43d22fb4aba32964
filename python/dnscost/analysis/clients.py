"""Real clients replayed (the ``clients`` analysis): per target and client profile (how a real
browser or stub used its connections, as ``dnscost observe`` saw it), what the target spent per
query while many such clients queried it, and the energy of a day at 10 000 qps from them, to set
beside Table I's synthetic profiles.

Each trial replays ``clients`` clients of one profile, open loop at the rate they make together
(``rate_qps``). Its CPU per query is the target's CPU over the measured window divided by the
queries answered; a profile whose clients query rarely keeps many idle connections per query,
and that cost is in it. ``clients_at_10k_qps`` says how many such clients make 10 000 qps, the
load Table I's energy is for; a replay run below that rate (``rate_qps`` under 10 000: the
connections it would take exceed the group's ``max_connections``) batches less in the target, so
its CPU per query is an upper bound of the cost at 10 000 qps. Figures are medians over rounds
with the min and max; the ratio to UDP divides by the round's UDP reference
(:mod:`dnscost.analysis.rounds`). Pure: rows of the ``trials`` and ``rounds`` tables in."""

from __future__ import annotations

from dnscost.analysis.rounds import spread
from dnscost.analysis.stats import median
from dnscost.analysis.tables import (
    JOULES_PER_KWH,
    REFERENCE_QPS,
    SECONDS_PER_DAY,
    TRANSPORT_ORDER,
    energy_per_query,
    group_by,
)
from dnscost.contract import Row

__all__ = ["clients_rows"]


def _handshakes_per_1k(r: Row) -> float | None:
    hs = sum(r.get(k) or 0 for k in ("handshakes_full", "handshakes_resumed"))
    q = r.get("queries_answered")
    return 1000.0 * hs / q if q else None


def clients_rows(rows: list[Row], rounds: list[Row]) -> list[Row]:
    """One row per target, profile and client count replayed (the ``clients`` table)."""
    ratio = {r["id"]: r.get("cpu_ratio_to_udp") for r in rounds}
    mine = [r for r in rows if r.get("analysis") == "clients" and r.get("profile")]
    out = []
    for (target, transport, profile, clients), g in group_by(
        mine, lambda r: (r["target"], r["transport"], r["profile"], r["clients"])
    ).items():
        valid = [r for r in g if r["valid"]]
        cpu = spread(r["cpu_us_per_query"] for r in valid)
        ratios = spread(ratio.get(r["id"]) for r in valid)
        energy = median([e for r in valid if (e := energy_per_query(r)) is not None])
        rate = median([float(r["rate"]) for r in g if r.get("rate") not in (None, "")])
        sources = sorted({str(r["energy_source"]) for r in valid if r["energy_source"] is not None})
        out.append(
            {
                "target": target,
                "transport": transport,
                "profile": profile,
                "clients": clients,
                "connections": g[0]["connections"],
                "rate_qps": rate,
                # To three significant digits: the rate replayed is rounded to the millisecond.
                "clients_at_10k_qps": round(float(f"{clients * REFERENCE_QPS / rate:.3g}")) if rate else None,
                "reps": len(g),
                "valid_reps": len(valid),
                "answered_qps": median([r["answered_qps"] for r in valid if r["answered_qps"] is not None]),
                # The shape replayed, whatever the target's core did: every trial that ran.
                "handshakes_per_1k_queries": median([h for r in g if (h := _handshakes_per_1k(r)) is not None]),
                "cpu_us_per_query": cpu.median,
                "cpu_us_per_query_min": cpu.low,
                "cpu_us_per_query_max": cpu.high,
                "cpu_ratio_to_udp": ratios.median,
                "cpu_ratio_to_udp_min": ratios.low,
                "cpu_ratio_to_udp_max": ratios.high,
                "energy_j_per_query": energy,
                "kwh_per_day_at_10k_qps": (
                    energy * REFERENCE_QPS * SECONDS_PER_DAY / JOULES_PER_KWH if energy is not None else None
                ),
                "energy_source": "+".join(sources) if sources else None,
            }
        )
    out.sort(key=lambda r: (r["target"], TRANSPORT_ORDER.get(r["transport"], 9), r["profile"], r["clients"]))
    return out
