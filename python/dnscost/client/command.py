"""``dnscost client``: what clients pay, per transport, under emulated networks.

dnscost client check [--rtt 20ms,50ms] [--transports udp,tcp,dot,doh,doq,doh3]
dnscost client presets [--presets FILE]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from dnscost.errors import UsageError

__all__ = ["add_parser", "main"]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from dnscost.client.latency import LISTEN

    c = sub.add_parser("client", help="what clients pay per transport, under emulated networks")
    csub = c.add_subparsers(dest="action", required=True)
    ch = csub.add_parser(
        "check", help="the latency check: response times over a clean link are the protocols' round trips"
    )
    ch.add_argument("--rtt", default="20ms,50ms", help="round-trip times of the clean links (default 20ms,50ms)")
    ch.add_argument("--transports", default=",".join(LISTEN), help=f"default {','.join(LISTEN)}")
    ch.add_argument("--queries", type=int, default=10, help="measured queries per case (default 10)")
    ch.add_argument("--output", type=Path, help="directory (default results/client/<run-id>)")
    pr = csub.add_parser("presets", help="the network presets, their parameters and sources")
    pr.add_argument("--presets", type=Path, help="a TOML file of more presets (see client/presets.toml)")


def _durations_ms(text: str, what: str) -> list[float]:
    from dnscost.cli import parse_duration_ms

    try:
        values = [parse_duration_ms(d) for d in text.split(",") if d.strip()]
    except argparse.ArgumentTypeError as e:
        raise UsageError(f"client: {what}: {e}") from None
    if not values or min(values) <= 0:
        raise UsageError(f"client: {what} needs positive durations")
    return [float(v) for v in values]


def main(a: argparse.Namespace) -> int:
    if a.action == "presets":
        from dnscost.client.presets import load_presets

        for p in load_presets(a.presets).values():
            rates = f"{p.down_kbps or 0:g}/{p.up_kbps or 0:g} kbit/s" if (p.down_kbps or p.up_kbps) else "no rate limit"
            print(f"{p.name:<10} {p.rtt_ms:>6g} ms RTT  ±{p.jitter_ms:g} ms  {p.loss_pct:g} % loss  {rates}")
            print(f"{'':<10} {p.source}")
        return 0
    from dnscost.client.latency import run_check, table
    from dnscost.results import new_run_id

    rtts = _durations_ms(a.rtt, "--rtt")
    if a.queries < 3:
        raise UsageError("client check: --queries must be at least 3")
    transports = [t.strip() for t in a.transports.split(",") if t.strip()]
    out = a.output or Path("results", "client", new_run_id()).resolve()
    print(f"client check: {len(rtts)} round-trip times, transports {','.join(transports)} -> {out}", flush=True)
    rows = run_check(out, rtts, transports, queries=a.queries)
    print(table(rows))
    failed = [r for r in rows if not r["ok"]]
    print(
        f"client check: {len(rows) - len(failed)} of {len(rows)} cases within ±5 % + slack; wrote {out / 'check.json'}"
    )
    return 1 if failed else 0
