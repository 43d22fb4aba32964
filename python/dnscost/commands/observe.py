"""``dnscost observe``: how a real client uses DNS connections, watched in a lab of namespaces
(:mod:`dnscost.observe`); or a packet capture's connections (``--pcap``), or an earlier
observation's summaries and figures again (``--from``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from dnscost.argtypes import parse_duration_ms
from dnscost.errors import UsageError

__all__ = ["add_parser", "main"]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    ob = sub.add_parser("observe", help="watch how a real client uses DNS connections, in a lab of namespaces")
    ob.add_argument("--client", help="chromium, firefox, dnss, unbound-dot, knot-dot, or external (with --command)")
    ob.add_argument("--delay", default="50ms,1s,60s", help="times between resolutions (default 50ms,1s,60s)")
    ob.add_argument("--policy", default="google,cloudflare,quad9", help="the resolver's policies (default: three)")
    ob.add_argument("--duration", type=parse_duration_ms, help="per observation (default 30m; --quick: 2m)")
    ob.add_argument("--quick", action="store_true", help="two minutes per observation")
    ob.add_argument(
        "--command", dest="external_command", help="--client external: the stub to run (listens on 127.0.0.1:53)"
    )
    ob.add_argument("--policies", type=Path, help="a TOML file of more policies (see observe/policies.toml)")
    ob.add_argument("--output", type=Path, help="directory (default results/observe/<run-id>)")
    ob.add_argument("--capture", action="store_true", help="also capture packets at the resolver (capture.pcap)")
    ob.add_argument("--pcap", type=Path, help="observe nothing: analyse this capture's connections with --server")
    ob.add_argument("--server", help="--pcap: the resolver's ADDRESS:PORT")
    ob.add_argument(
        "--from",
        dest="from_dir",
        type=Path,
        metavar="DIR",
        help="observe nothing: recompute DIR's summaries and figures",
    )


def _observe_pcap(a: argparse.Namespace) -> int:
    """``observe --pcap FILE --server ADDR:PORT``: a capture's connections, as a table and
    (with --output) ``capture.json``."""
    from collections import Counter

    from dnscost.observe.capture import analyse
    from dnscost.results import write_json

    if not a.server:
        raise UsageError("observe: --pcap needs --server ADDRESS:PORT")
    captured = analyse(a.pcap, a.server)
    print(f"{'client':<24} {'proto':<5} {'opened':>10} {'seconds':>9} {'closer':<7} {'how':<8} {'octets in/out':>15}")
    t0 = min((c.opened_unix_s for c in captured), default=0.0)
    for c in captured:
        octets = f"{c.octets_from_client}/{c.octets_from_server}"
        print(
            f"{c.client:<24} {c.transport:<5} {c.opened_unix_s - t0:>10.3f} {c.closed_unix_s - c.opened_unix_s:>9.3f} "
            f"{c.closer:<7} {c.how:<8} {octets:>15}"
        )
    closes = Counter(f"{c.closer} {c.how}" for c in captured)
    print(f"{len(captured)} connections; closed: " + ", ".join(f"{k} {v}" for k, v in sorted(closes.items())))
    if a.output:
        a.output.mkdir(parents=True, exist_ok=True)
        path = a.output / "capture.json"
        write_json(path, {"connections": [c.as_dict() for c in captured]})
        print(f"observe: wrote {path}")
    return 0


def main(a: argparse.Namespace) -> int:
    from dnscost.observe.analysis import summary_line
    from dnscost.observe.observation import ObservationPlan, load_policies, observe, resummarise
    from dnscost.observe.report import write_all
    from dnscost.results import new_run_id

    if a.pcap is not None:
        return _observe_pcap(a)
    if a.from_dir is not None:
        cells = resummarise(a.from_dir)
        if not cells:
            raise UsageError(f"observe: --from {a.from_dir}: no observation.json under <client>/<cell>/")
        for path in write_all(a.from_dir):
            print(f"observe: wrote {path}")
        return 0
    if not a.client:
        raise UsageError("observe: give --client (or --from DIR)")

    try:
        delays = [parse_duration_ms(d) / 1000 for d in a.delay.split(",") if d.strip()]
    except argparse.ArgumentTypeError as e:
        raise UsageError(f"observe: --delay: {e}") from None
    if not delays or min(delays) <= 0:
        raise UsageError("observe: --delay needs positive durations")
    policies = load_policies(a.policies)
    chosen = [p.strip() for p in a.policy.split(",") if p.strip()]
    unknown = [p for p in chosen if p not in policies]
    if unknown:
        raise UsageError(f"observe: unknown policy {unknown[0]!r} (known: {', '.join(policies)})")
    if a.duration is not None and a.duration <= 0:
        # 0 used to fall through to the 30-minute default.
        raise UsageError("observe: --duration needs a positive duration (default 30m; --quick: 2m)")
    duration_s = (a.duration / 1000) if a.duration is not None else (120.0 if a.quick else 1800.0)
    out = a.output or Path("results", "observe", new_run_id()).resolve()
    for delay in delays:
        for policy in chosen:
            cell = out / a.client / f"{delay:g}s-{policy}"
            print(f"observe: {a.client}, one query every {delay:g} s, {policy}, {duration_s:g} s -> {cell}", flush=True)
            plan = ObservationPlan(a.client, delay, policy, duration_s, cell, a.external_command, a.capture)
            print(f"  {summary_line(observe(plan, policies)['summary'])}", flush=True)
    for path in write_all(out):
        print(f"observe: wrote {path}")
    return 0
