"""One observation: a lab, the responder as a public resolver playing a policy, one client
driven at one inter-query delay for a set duration; then everything the lab made removed.

Files in the observation's directory (every number in ``observation.json`` is recomputed
from the three logs by :func:`dnscost.observe.analysis.summarise`):

- ``connections.jsonl``: the responder's per-connection log (open, close, queries, who
  closed and how);
- ``queries.jsonl``: its per-query log (time, connection, name, type, rcode);
- ``resolutions.jsonl``: the driver's resolutions (stub clients);
- ``keylog.txt``: the TLS secrets of every connection, for decrypting a capture;
- ``observation.json``: what was run (client and its version, delay, policy and its flags,
  duration, clock origin) and the summary."""

from __future__ import annotations

import sys
import time
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from dnscost import __version__
from dnscost.certs import make_tls
from dnscost.contract import ObservationCapture, ObservationRecord
from dnscost.engine import Responder, connection_log
from dnscost.errors import MachineError, UsageError
from dnscost.lab.clients import STUB_LISTEN, Schedule, Upstream, client
from dnscost.lab.lab import SERVER_ADDRESS, ZONE, Lab
from dnscost.observe.analysis import load
from dnscost.observe.capture import analyse, reconcile
from dnscost.observe.profile import extract
from dnscost.proc import Child
from dnscost.results import write_json

__all__ = ["ObservationPlan", "load_policies", "observe", "policy_flags", "resummarise"]

NAMES = 100_000
"""Synthetic names the responder serves: fresh names for 30 minutes at 50 ms (36 000)."""

POLICY_KEYS = {"max_queries_per_connection", "idle_timeout", "max_age", "idle_activity", "source"}


def load_policies(extra: Path | None = None) -> dict[str, dict[str, object]]:
    """The shipped policies (``policies.toml``), with those of ``extra`` added or replacing."""
    text = resources.files("dnscost.observe").joinpath("policies.toml").read_text()
    policies: dict[str, dict[str, object]] = tomllib.loads(text)
    if extra is not None:
        try:
            policies.update(tomllib.loads(extra.read_text()))
        except (OSError, tomllib.TOMLDecodeError) as e:
            raise UsageError(f"observe: --policies {extra}: {e}") from None
    for name, p in policies.items():
        unknown = set(p) - POLICY_KEYS
        if unknown:
            raise UsageError(f"observe: policy {name!r}: unknown keys {sorted(unknown)} (known: {sorted(POLICY_KEYS)})")
    return policies


def policy_flags(policy: Mapping[str, object]) -> list[str]:
    """``serve`` flags that play ``policy``."""
    flags = []
    if "max_queries_per_connection" in policy:
        n = policy["max_queries_per_connection"]
        flags += ["--max-queries-per-connection", str(int(n) if isinstance(n, int | float) else n)]
    if "idle_timeout" in policy:
        flags += ["--idle-timeout", str(policy["idle_timeout"])]
    if "max_age" in policy:
        flags += ["--max-connection-age", str(policy["max_age"])]
    if "idle_activity" in policy:
        flags += ["--idle-activity", str(policy["idle_activity"])]
    return flags


@dataclass(frozen=True)
class ObservationPlan:
    client: str
    delay_s: float
    policy: str
    duration_s: float
    out: Path
    command: str | None = None
    capture: bool = False
    """Also capture the lab's packets (whole) at the resolver's side: ``capture.pcap``,
    analysed in ``capture.json`` (and readable by ``dnscost population``)."""


def _resolution_loop(lab: Lab, out: Path, schedule: Schedule) -> Child:
    argv = [sys.executable, "-m", "dnscost.lab.resolve", "--delay", str(schedule.delay_s),
            "--duration", str(schedule.duration_s), "--names", str(schedule.names),
            "--out", str(out / "resolutions.jsonl")]  # fmt: skip
    return Child("resolve", [*lab.exec_prefix("client"), *argv], log=out / "resolve.log")


def _capture(lab: Lab, out: Path) -> Child:
    """tcpdump on the resolver's end of the veth pair, whole packets (``dnscost population``
    reads the TLS records and DNS messages in them), each written at once."""
    log = out / "tcpdump.log"
    argv = ["tcpdump", "-n", "--immediate-mode", "-U", "-s", "0", "-Z", "root", "-i", lab.info.server_device,
            "-w", str(out / "capture.pcap"), "host", SERVER_ADDRESS]  # fmt: skip
    child = Child("tcpdump", [*lab.exec_prefix("server"), *argv], log=log)
    child.wait_for(lambda: "listening on" in log.read_text(errors="replace"), 10, "while starting to capture")
    return child


def observe(plan: ObservationPlan, policies: Mapping[str, dict[str, object]]) -> ObservationRecord:
    """Runs one observation (see the module's documentation); returns observation.json's
    content. Ctrl-C stops it early: what was logged is kept and summarised."""
    if plan.policy not in policies:
        raise UsageError(f"observe: unknown policy {plan.policy!r} (known: {', '.join(policies)})")
    the_client = client(plan.client, plan.command)
    out = plan.out
    out.mkdir(parents=True, exist_ok=True)
    tls = make_tls(out / "tls", addresses=[SERVER_ADDRESS])
    zone = out / "lab.zone"
    zone.write_text(ZONE.format(address=SERVER_ADDRESS))
    policy = policies[plan.policy]
    serve_flags = [
        "--cert",
        str(tls.cert),
        "--key",
        str(tls.key),
        "--zone",
        str(zone),
        "--ttl",
        "0",
        "--outside",
        "nxdomain",
        "--connections-log",
        str(out / "connections.jsonl"),
        "--queries-log",
        str(out / "queries.jsonl"),
        "--keylog",
        str(out / "keylog.txt"),
        *policy_flags(policy),
    ]
    record: ObservationRecord = {
        "dnscost": __version__,
        "client": plan.client,
        "client_version": the_client.version(),
        "command": plan.command,
        "transport": the_client.transport,
        "delay_s": plan.delay_s,
        "policy": plan.policy,
        "policy_settings": policy,
        "serve_flags": policy_flags(policy),
        "duration_s": plan.duration_s,
    }
    lab = Lab.create()
    children: list[Child] = []
    responder: Responder | None = None
    dump: Child | None = None
    interrupted = False
    try:
        if plan.capture:
            dump = _capture(lab, out)
        responder = Responder(
            out,
            [f"doh://{SERVER_ADDRESS}:443/dns-query", f"dot://{SERVER_ADDRESS}:853", f"udp://{SERVER_ADDRESS}:53"],
            synthetic=NAMES,
            extra=serve_flags,
            exec_prefix=lab.exec_prefix("server"),
        )
        record["origin_unix_us"] = responder.start_unix_us
        lab.write_etc("client", "resolv.conf", f"nameserver {STUB_LISTEN}\noptions attempts:1 timeout:5\n")
        upstream = Upstream(ca=tls.ca)
        schedule = Schedule(plan.delay_s, plan.duration_s, NAMES)
        children.append(the_client.start(lab, out, upstream, schedule))
        record["client_started_unix_us"] = time.time_ns() // 1000
        if the_client.stub:
            children.append(_resolution_loop(lab, out, schedule))
        # For the duration, whatever drives the client (what it does after its last query, an
        # idle close, is part of what is observed); a stub's loop may take up to 30 s longer to
        # finish its last resolutions.
        end = time.monotonic() + plan.duration_s
        limit = end + (30 if the_client.stub else 0)
        while (now := time.monotonic()) < limit and (now < end or (the_client.stub and children[-1].alive())):
            if not children[0].alive():
                raise MachineError(f"{plan.client} exited during the observation: {children[0].log_tail()}")
            time.sleep(0.2)
        record["client_stopped_unix_us"] = time.time_ns() // 1000
    except KeyboardInterrupt:
        interrupted = True
    finally:
        for child in reversed(children):
            child.stop()
        if responder is not None:
            responder.stop()
        if dump is not None:
            time.sleep(0.5)  # the last segments of the closes
            dump.stop()
        lab.remove()
    record["interrupted"] = interrupted
    write_json(out / "observation.json", record)
    record = _finish(out)
    if interrupted:
        raise KeyboardInterrupt
    return record


def resummarise(out: Path) -> list[Path]:
    """Recomputes the summary in every ``<client>/<cell>/observation.json`` under ``out``, and
    the cell's ``profile.json``, from the cell's logs. Returns the cells."""
    cells = [p.parent for p in sorted(out.glob("*/*/observation.json"))]
    for cell in cells:
        _finish(cell)
    return cells


def _reconciled_capture(cell: Path, origin_unix_us: int) -> ObservationCapture:
    """Analyses the cell's capture into capture.json (its connections with the resolver, and
    each beside the server's log); returns the counts for observation.json."""
    pcap = cell / "capture.pcap"
    captured = [c for port in (443, 853) for c in analyse(pcap, f"{SERVER_ADDRESS}:{port}")]
    rows = reconcile(captured, connection_log(cell / "connections.jsonl"), origin_unix_us)
    write_json(cell / "capture.json", {"connections": [c.as_dict() for c in captured], "reconciled": rows})
    return {
        "connections": len(captured),
        "matched": sum(1 for r in rows if r["capture_closer"] is not None),
        "closer_agrees": sum(1 for r in rows if r["agree"]),
    }


def _finish(cell: Path) -> ObservationRecord:
    """Writes the cell's summary (into observation.json), its capture's analysis (with
    ``--capture``) and its client profile (profile.json), all from the cell's records.
    Returns observation.json's content."""
    observed = load(cell)
    if (cell / "capture.pcap").exists():
        observed.meta["capture"] = _reconciled_capture(cell, int(observed.meta.get("origin_unix_us") or 0))
    write_json(cell / "observation.json", observed.meta)
    write_json(cell / "profile.json", extract(observed))
    return observed.meta
