"""``dnscost population CAPTURE -o population.toml``: a capture of a resolver's clients read by
``dnscost-engine capture`` and turned into a population of client classes
(:mod:`dnscost.population`; docs/population.md)."""

from __future__ import annotations

import argparse
import dataclasses
import ipaddress
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import cast

from dnscost.contract import CaptureRecord, FlowRecord
from dnscost.errors import UsageError

__all__ = ["add_parser", "main"]


def _prefix(text: str) -> tuple[int, int]:
    v4, _, v6 = text.partition("/")
    try:
        bits = (int(v4), int(v6 or 64))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not IPV4_BITS[/IPV6_BITS], e.g. 24/56") from None
    if not (0 <= bits[0] <= 32 and 0 <= bits[1] <= 128):
        raise argparse.ArgumentTypeError(f"{text!r}: IPv4 bits are 0..32, IPv6 bits 0..128")
    return bits


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("population", help="a capture of a resolver's clients as classes of clients to replay")
    p.add_argument("capture", type=Path, help="pcap or pcapng taken at the resolver's client side")
    p.add_argument("-o", "--output", type=Path, required=True, help="the population (TOML) to write")
    p.add_argument(
        "--server", action="append", default=[], help="the resolver's address (repeatable; default: any on a DNS port)"
    )
    p.add_argument(
        "--prefix", type=_prefix, help="group clients by prefix, IPV4_BITS[/IPV6_BITS] (default: one per address)"
    )
    p.add_argument("--flows", type=Path, help="also keep the capture's flows (JSON lines) here")
    p.add_argument("--names", type=Path, help="also write the Do53 queries' names here (the engine's --queries format)")
    p.add_argument(
        "--keylog",
        type=Path,
        help="an NSS key log (SSLKEYLOGFILE) of the capture's TLS connections: DoT and DoH queries counted exactly",
    )


def _read_flows(cmd: list[str], keep: Path | None) -> tuple[list[FlowRecord], CaptureRecord]:
    """The engine's flows and its closing ``capture`` line, read as they come (a large
    capture's output is not held whole as text too); each line also written to ``keep`` when
    given (:func:`~dnscost.results.open_atomic`: a failed read leaves no file, and a device is
    written through, never replaced). A failing engine is its last line on stderr, as a
    :class:`UsageError`."""
    import contextlib
    import tempfile

    from dnscost.results import open_atomic

    flows: list[FlowRecord] = []
    last: str | None = None
    with (
        tempfile.TemporaryFile("w+") as err,
        open_atomic(keep) if keep is not None else contextlib.nullcontext() as saved,
    ):
        with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True) as proc:
            assert proc.stdout is not None
            for line in proc.stdout:
                if last is not None:
                    flows.append(json.loads(last))
                last = line
                if saved is not None:
                    saved.write(line)
        if proc.returncode != 0 or last is None:
            err.seek(0)
            why = err.read().strip()
            reason = why.splitlines()[-1] if why else f"exit {proc.returncode}"
            raise UsageError(reason.removeprefix("dnscost-engine: "))
    return flows, cast(CaptureRecord, json.loads(last))


def main(a: argparse.Namespace) -> int:
    from dnscost.engine import engine_path
    from dnscost.population import name_stats, population, population_toml
    from dnscost.results import write_atomic

    if not a.capture.is_file():
        raise UsageError(f"{a.capture}: no such file")
    for server in a.server:
        try:
            ipaddress.ip_address(server)
        except ValueError:
            raise UsageError(f"--server {server}: not an IP address") from None
    cmd = [str(engine_path()), "capture", str(a.capture), *(x for s in a.server for x in ("--server", s))]
    cmd += ["--names", str(a.names)] if a.names is not None else []
    cmd += ["--keylog", str(a.keylog)] if a.keylog is not None else []
    flows, capture = _read_flows(cmd, a.flows)
    names = None
    if a.names is not None:
        with a.names.open() as f:
            names = name_stats(f)
        # Where a replay finds it: relative to the population's directory.
        names = dataclasses.replace(names, file=os.path.relpath(a.names.resolve(), a.output.resolve().parent))
    p = population(flows, capture, a.prefix, names)
    if not p.queries:
        raise UsageError(f"{a.capture}: no DNS query in its {capture['dns_packets']} packets on DNS ports")
    if p.duration_s <= 0:
        raise UsageError(f"{a.capture}: its {p.queries} queries are all at one instant: no rate can be read from it")
    write_atomic(a.output, population_toml(p, str(a.capture)))
    print(
        f"{a.capture}: {capture['packets']} packets, {capture['flows']} flows, {p.clients} clients, "
        f"{p.queries} queries over {p.duration_s:.1f} s (read in {capture['read_s']:.2f} s)",
        file=sys.stderr,
    )
    if names is not None:
        print(
            f"{a.names}: {names.queries} Do53 queries, {names.distinct} distinct names and types, "
            f"{names.repeat_share:.3f} asked before"
            + (f"; {left} left out (no question that reads as a name)" if (left := capture["names_left_out"]) else ""),
            file=sys.stderr,
        )
    print(f"{'class':<28} {'clients':>7} {'share':>6} {'q/conn':>7} {'life s':>7} {'idle s':>7} {'resume':>6}")
    for k in p.classes:

        def f(v: float | None, d: int = 1) -> str:
            return "-" if v is None else f"{v:.{d}f}"

        print(
            f"{k.name:<28} {k.clients:>7} {k.share:>6.3f} {f(k.queries_per_connection):>7} {f(k.lifetime_s):>7} "
            f"{f(k.idle_timeout_s):>7} {f(k.resumption, 2):>6}"
        )
    print(f"population: {a.output}")
    return 0
