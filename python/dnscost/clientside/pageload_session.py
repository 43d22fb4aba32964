"""One session of a page-load run (:mod:`dnscost.clientside.pageload` describes the
experiment): the client namespace's DNS set for its transport (a stub started for DoT), the
browser started on a local page where it settles, then its loads followed by their pages'
reports until every load is recorded, given up, or the browser exits."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from dnscost.clientside.corpus import Corpus
from dnscost.clientside.pageload_plan import PageloadSettings, PlannedLoad, Session, page_url
from dnscost.clientside.pageload_records import Beacons, SessionLabels, load_record
from dnscost.errors import DnscostError
from dnscost.lab.browsers import PageBrowser
from dnscost.lab.clients import STUB_LISTEN, Schedule, Upstream
from dnscost.lab.lab import Lab
from dnscost.lab.stubs import STUBS
from dnscost.proc import Child

__all__ = ["GRACE_S", "START_ALLOWANCE_S", "START_PAGE", "JsonLines", "run_session"]

START_ALLOWANCE_S = 30.0
"""How long a browser may take to start before its first page's timeout begins."""
GRACE_S = 10.0
"""How long past a page's own timeout the session waits for its report."""

_NO_SCHEDULE = Schedule(delay_s=1.0, duration_s=1.0, names=1)

START_PAGE = """<!doctype html>
<meta charset="utf-8"><title>dnscost page loads: settling</title>
<script>setTimeout(function () { location.replace(%(url)s); }, %(ms)d);</script>
"""
"""Where a session's browser starts: a local page that waits before the warm-up load. Chromium
reports a change of the network 0.7 to 3.6 s after it starts (its address tracker's first
dump, then the connection type), closes its DoH sessions and empties its host cache: a load
then would fail its lookups or time a start-up, not a transport."""


def _set_dns(lab: Lab, workdir: Path, transport: str, upstream: Upstream, settings: PageloadSettings) -> Child | None:
    """Points the client namespace's system resolver where ``transport`` needs it; for
    ``dot`` and ``dot-unbound``, starts the stub. (For ``doh`` the browser uses its own DoH; its resolv.conf
    names the server so that any leak would show as udp queries.)"""
    stub = STUBS.get(transport)
    if stub is not None:
        lab.write_etc("client", "resolv.conf", f"nameserver {STUB_LISTEN}\n")
        return stub(settings.stub_idle_timeout_ms).start(lab, workdir, upstream, _NO_SCHEDULE)
    lab.write_etc("client", "resolv.conf", f"nameserver {lab.info.server_address}\n")
    return None


class JsonLines:
    """A JSON-lines file appended to, a document a line, each line written as it comes."""

    def __init__(self, path: Path) -> None:
        self.file: IO[str] = path.open("a", buffering=1)

    def write(self, doc: Mapping[str, Any]) -> None:
        """Appends ``doc`` as one line."""
        self.file.write(json.dumps(doc, separators=(",", ":")) + "\n")

    def close(self) -> None:
        """Closes the file."""
        self.file.close()


def run_session(
    lab: Lab,
    out: Path,
    session: Session,
    settings: PageloadSettings,
    corpus: Corpus,
    browser: PageBrowser,
    upstream: Upstream,
    beacons: Beacons,
    loads: JsonLines,
) -> dict[str, object]:
    """One session (see :mod:`dnscost.clientside.pageload`); returns its line for sessions.jsonl."""
    workdir = out / "sessions" / f"{session.number:03d}-r{session.round}-{session.transport}"
    workdir.mkdir(parents=True, exist_ok=True)
    tld = settings.corpus.tld
    labels = SessionLabels(settings.preset, settings.browser, session.round, session.transport, session.number, tld)
    started = time.time_ns() // 1000
    pending = {p.load: p for p in session.loads}
    counts: Counter[str] = Counter()

    def write(planned: PlannedLoad, beacon: dict[str, object] | None, failure: str | None = None) -> None:
        rec = load_record(labels, planned, corpus.pages[planned.page], beacon, failure)
        rec["received_unix_us"] = time.time_ns() // 1000
        loads.write(rec)
        counts["ok" if rec["ok"] else "failed"] += 1
        pending.pop(planned.load, None)

    children: list[Child] = []
    failure: str | None = None
    try:
        stub = _set_dns(lab, workdir, session.transport, upstream, settings)
        if stub is not None:
            children.append(stub)
        start = workdir / "start.html"
        start.write_text(
            START_PAGE % {"url": json.dumps(page_url(session.loads[0], tld)), "ms": round(settings.settle_s * 1000)}
        )
        child = browser.start(lab, workdir, session.transport, start.as_uri())
        children.append(child)
        deadline = time.monotonic() + settings.settle_s + START_ALLOWANCE_S + settings.page_timeout_s + GRACE_S
        while pending:
            for doc in beacons.read():
                planned = pending.get(doc["beacon"].get("load"))
                if planned is None:
                    continue  # a late report of a load already given up
                for earlier in sorted((p for p in pending.values() if p.index < planned.index), key=lambda p: p.index):
                    write(earlier, None, "no beacon")
                write(planned, doc["beacon"])
                deadline = time.monotonic() + settings.page_timeout_s + GRACE_S
            if not pending:
                break
            if not child.alive():
                failure = "browser exited"
                break
            if time.monotonic() > deadline:
                failure = "no beacon"
                break
            time.sleep(0.05)
    except DnscostError as e:
        failure = f"session failed: {e}"
        raise
    finally:
        for p in sorted(pending.values(), key=lambda p: p.index):
            write(p, None, failure or "interrupted")
        for c in reversed(children):
            c.stop()
    return {
        "session": session.number,
        "round": session.round,
        "transport": session.transport,
        "browser": settings.browser,
        "preset": settings.preset,
        "loads": len(session.loads),
        "ok": counts["ok"],
        "failed": counts["failed"],
        "failure": failure,
        "first_load": session.loads[0].load,
        "last_load": session.loads[-1].load,
        "started_unix_us": started,
        "ended_unix_us": time.time_ns() // 1000,
    }
