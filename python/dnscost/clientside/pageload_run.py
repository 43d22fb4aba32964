"""One page-load run in a lab made by the caller (:mod:`dnscost.clientside.pageload` describes
the experiment and the files): the corpus' pages and zone written, the resolver, the DoT front
and the web server started in the server's namespace, every session in turn
(:mod:`.pageload_session`), then the resolver's view of each session's names and DoT
connections (:mod:`.pageload_check`) recorded in ``pageload.json``."""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

from dnscost import __version__
from dnscost.certs import make_tls
from dnscost.clientside.corpus import host_name, make_corpus, render_page, zone_records
from dnscost.clientside.pageload_analysis import PageloadRecord
from dnscost.clientside.pageload_check import dns_check, dot_connections
from dnscost.clientside.pageload_plan import PageloadSettings, page_url, plan_sessions
from dnscost.clientside.pageload_records import Beacons
from dnscost.clientside.pageload_session import JsonLines, run_session
from dnscost.engine import Responder, connection_log, engine_version, query_log
from dnscost.errors import MachineError
from dnscost.jsonl import read_records
from dnscost.lab.browsers import BROWSERS
from dnscost.lab.clients import Upstream, package_version
from dnscost.lab.lab import ZONE, Lab
from dnscost.lab.stubs import STUBS
from dnscost.proc import Child
from dnscost.results import write_json

__all__ = ["FORMAT", "run_pageloads"]

FORMAT = 1


def run_pageloads(lab: Lab, out: Path, settings: PageloadSettings) -> Path:
    """Runs every session of ``settings`` in ``lab`` (made and removed by the caller; only its
    namespaces' command prefixes, ``/etc`` files and server address are used), writing into
    ``out`` (see :mod:`dnscost.clientside.pageload`). Returns ``pageload.json``."""
    settings.check()
    browser_class = BROWSERS[settings.browser]
    if shutil.which(browser_class.program) is None:
        raise MachineError(f"pageload: {browser_class.program} is not installed (run scripts/setup)")
    for t in settings.transports:
        stub = STUBS.get(t)
        if stub is not None and shutil.which(stub.program) is None:
            raise MachineError(f"pageload: {stub.program} is not installed (run scripts/setup)")
    out.mkdir(parents=True, exist_ok=True)
    address = lab.info.server_address
    tld = settings.corpus.tld
    corpus = make_corpus(settings.corpus, settings.pages, settings.seed)
    sessions = plan_sessions(settings, corpus)

    pages_dir = out / "pages"
    pages_dir.mkdir(exist_ok=True)
    names: list[str] = []
    for s in sessions:
        for i, p in enumerate(s.loads):
            page = corpus.pages[p.page]
            nxt = page_url(s.loads[i + 1], tld) if i + 1 < len(s.loads) else "about:blank"
            html = render_page(page, p.load, nxt, round(settings.page_timeout_s * 1000), tld)
            (pages_dir / f"{p.load}.html").write_text(html)
            names += [host_name(page.index, p.load, h, tld) for h in range(page.hosts)]
    zone = out / "corpus.zone"
    zone.write_text(ZONE.format(address=address) + zone_records(names, address, settings.ttl_s, tld))
    tls = make_tls(out / "tls", addresses=[address])
    upstream = Upstream(ca=tls.ca, address=address)
    browser = browser_class(out, upstream)

    doc: PageloadRecord = {
        "format": FORMAT,
        "dnscost": __version__,
        "engine": engine_version(),
        "settings": settings.as_dict(),
        "browser_version": browser.version(),
        "stub_versions": {t: package_version(STUBS[t].package or "") for t in settings.transports if t in STUBS},
        "server_address": address,
        "sessions": len(sessions),
        "loads": sum(len(s.loads) for s in sessions),
        "names": len(names),
        "corpus": corpus.describe(),
        "started_unix_us": time.time_ns() // 1000,
        "status": "running",
    }
    write_json(out / "pageload.json", doc)

    dot = any(t in STUBS for t in settings.transports)
    listen = [f"udp://{address}:53", f"tcp://{address}:53", f"doh://{address}:443/dns-query"]
    flags = ["--cert", str(tls.cert), "--key", str(tls.key), "--zone", str(zone), "--outside", "nxdomain",
             "--connections-log", str(out / "connections.jsonl"),
             "--queries-log", str(out / "queries.jsonl")]  # fmt: skip
    responder: Responder | None = None
    relay: Child | None = None
    web: Child | None = None
    loads = JsonLines(out / "loads.jsonl")
    session_lines = JsonLines(out / "sessions.jsonl")
    status = "interrupted"
    try:
        responder = Responder(out, listen, extra=flags, exec_prefix=lab.exec_prefix("server"))
        doc["responder_start_unix_us"] = responder.start_unix_us
        if dot:
            relay = _start_dot_relay(lab, out, address, tls.cert, tls.key)
        web = _start_webserver(lab, out, address, pages_dir)
        beacons = Beacons(out / "beacons.jsonl")
        for s in sessions:
            session_lines.write(run_session(lab, out, s, settings, corpus, browser, upstream, beacons, loads))
        status = "done"
    finally:
        if web is not None:
            web.stop()
        if relay is not None:
            relay.stop()
        if responder is not None:
            responder.stop()
        loads.close()
        session_lines.close()
        doc["status"] = status
        doc["ended_unix_us"] = time.time_ns() // 1000
        queries = query_log(out / "queries.jsonl", strict=False)
        checks = dns_check(queries, sessions, corpus)
        doc["dns_check"] = checks
        if dot:
            conns = dot_connections(
                queries,
                connection_log(out / "connections.jsonl", strict=False),
                read_records(out / "dot-connections.jsonl"),
                sessions,
            )
            for check in checks:
                session = check["session"]
                if check["transport"] in STUBS and isinstance(session, int):
                    check["dot_connections"] = conns.get(session, [])
        records = read_records(out / "loads.jsonl")
        doc["loads_ok"] = sum(1 for r in records if r.get("ok"))
        doc["loads_failed"] = sum(1 for r in records if not r.get("ok"))
        write_json(out / "pageload.json", doc)
    return out / "pageload.json"


def _start_webserver(lab: Lab, out: Path, address: str, pages: Path) -> Child:
    ready = out / "webserver.out"
    argv = [sys.executable, "-m", "dnscost.clientside.webserver", "--address", address, "--port", "80",
            "--pages", str(pages), "--beacons", str(out / "beacons.jsonl")]  # fmt: skip
    with ready.open("wb") as stdout:
        child = Child("webserver", [*lab.exec_prefix("server"), *argv], log=out / "webserver.log", stdout=stdout)
    child.wait_for(lambda: '"listening"' in ready.read_text(), 15, "while starting to listen")
    return child


def _start_dot_relay(lab: Lab, out: Path, address: str, cert: Path, key: Path) -> Child:
    """The DoT front (:mod:`.dotrelay`) on ``address``:853, relaying to the responder's tcp."""
    ready = out / "dotrelay.out"
    argv = [sys.executable, "-m", "dnscost.clientside.dotrelay", "--listen", f"{address}:853",
            "--backend", f"{address}:53", "--cert", str(cert), "--key", str(key),
            "--log", str(out / "dot-connections.jsonl")]  # fmt: skip
    with ready.open("wb") as stdout:
        child = Child("dotrelay", [*lab.exec_prefix("server"), *argv], log=out / "dotrelay.log", stdout=stdout)
    child.wait_for(lambda: '"listening"' in ready.read_text(), 15, "while starting to listen")
    return child
