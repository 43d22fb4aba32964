"""A page load's record, from the report its page sent (:mod:`dnscost.clientside.pageload`
describes the experiment): the reports read from the web server's ``beacons.jsonl`` as they
come (:class:`Beacons`), each load's times and counts from its report (:func:`load_record`)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from dnscost.clientside.corpus import Page, host_name
from dnscost.clientside.pageload_analysis import LoadRecord, ResourceTiming
from dnscost.clientside.pageload_plan import PlannedLoad
from dnscost.jsonl import parse_lines, split_lines

__all__ = ["Beacons", "SessionLabels", "load_record"]


@dataclass(frozen=True)
class SessionLabels:
    """What every load record of a session carries."""

    preset: str
    browser: str
    round: int
    transport: str
    session: int
    tld: str = "test"


def _us(ms: Any) -> int | None:
    return round(float(ms) * 1000) if isinstance(ms, int | float) else None


def _span_us(entry: dict[str, object], start: str, end: str) -> int | None:
    """``end - start`` in µs, None when the entry has no such times (a zero start: the browser
    withheld them)."""
    a, b = entry.get(start), entry.get(end)
    if not isinstance(a, int | float) or not isinstance(b, int | float) or a <= 0:
        return None
    return round((b - a) * 1000)


_RESOURCE_PATH = re.compile(r"/r/(\d+)/(\d+)\.\w+")


def load_record(
    labels: SessionLabels, planned: PlannedLoad, page: Page, beacon: dict[str, Any] | None, failure: str | None = None
) -> LoadRecord:
    """One load's record from its page's report (``beacon``; None: no report came, and
    ``failure`` says why). Times are integer microseconds, relative to the navigation's
    start for ``*_at_us``:

    - ``page_load_us``: loadEventEnd - startTime of the navigation (None without a load
      event);
    - ``dns_us``: the page's own lookup (domainLookupEnd - domainLookupStart);
    - ``lookups_us``: per hostname of the load, its lookup (the longest DNS time among its
      entries, the navigation's for the page's own host);
    - ``resources``: each Resource Timing entry's host, start, DNS, connect and end.

    ``ok`` is a load that reached its load event with every resource fetched (its response
    started: ``resources_fetched`` counts the page's resources that were); ``failure`` is
    ``timeout`` (the page's own timer fired first), ``incomplete`` (load event, but some
    resource failed, e.g. its lookup; its ``page_load_us`` is kept), ``no beacon`` or
    ``browser exited`` (nothing came)."""
    tld = labels.tld
    own = host_name(page.index, planned.load, 0, tld)
    names = {host_name(page.index, planned.load, h, tld) for h in range(page.hosts)}
    rec: LoadRecord = {
        "preset": labels.preset,
        "browser": labels.browser,
        "round": labels.round,
        "transport": labels.transport,
        "session": labels.session,
        "page": planned.page,
        "load": planned.load,
        "index": planned.index,
        "warmup": planned.warmup,
        "ok": False,
        "failure": failure,
        "page_load_us": None,
        "dom_content_loaded_us": None,
        "response_start_at_us": None,
        "dns_us": None,
        "resources_expected": len(page.resources),
        "resources_timed": 0,
        "resources_fetched": 0,
        "hosts_expected": page.hosts,
        "hosts_looked_up": 0,
        "lookups_us": {},
        "resources": [],
    }
    if beacon is None:
        return rec
    nav = beacon.get("nav") or {}
    start = float(nav.get("startTime") or 0)
    load_end = nav.get("loadEventEnd")
    loaded = bool(beacon.get("ok")) and isinstance(load_end, int | float) and load_end > 0
    lookups: dict[str, int] = {}
    nav_dns = _span_us(nav, "domainLookupStart", "domainLookupEnd")
    if nav_dns is not None:
        lookups[own] = nav_dns
    resources: list[ResourceTiming] = []
    fetched: set[int] = set()
    for e in beacon.get("resources") or []:
        url = urlsplit(str(e.get("name", "")))
        host = url.hostname or ""
        dns = _span_us(e, "domainLookupStart", "domainLookupEnd")
        resources.append({
            "host": host,
            "start_at_us": _us(e.get("startTime")),
            "dns_us": dns,
            "connect_us": _span_us(e, "connectStart", "connectEnd"),
            "end_at_us": _us(e.get("responseEnd")),
        })  # fmt: skip
        if dns is not None and host in names:
            lookups[host] = max(lookups.get(host, 0), dns)
        response = e.get("responseStart")
        mine = _RESOURCE_PATH.fullmatch(url.path)
        if mine and int(mine.group(1)) == planned.load and isinstance(response, int | float) and response > 0:
            fetched.add(int(mine.group(2)))
    ok = loaded and len(fetched) >= len(page.resources)
    rec["ok"] = ok
    rec["failure"] = None if ok else "incomplete" if loaded else str(beacon.get("why") or "no load event")
    rec["page_load_us"] = _us(float(load_end) - start) if loaded and isinstance(load_end, int | float) else None
    rec["dom_content_loaded_us"] = _us(nav.get("domContentLoadedEventEnd"))
    rec["response_start_at_us"] = _us(nav.get("responseStart"))
    rec["dns_us"] = nav_dns
    rec["resources_timed"] = len(resources)
    rec["resources_fetched"] = len(fetched)
    rec["hosts_looked_up"] = len(lookups)
    rec["lookups_us"] = lookups
    rec["resources"] = resources
    return rec


class Beacons:
    """Reads the beacons file's new complete lines."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0

    def read(self) -> Iterator[dict[str, Any]]:
        """The reports written since the last call (each a line with a ``beacon`` object)."""
        try:
            with self.path.open("rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return
        # The file is still being written: it is read from an offset, and an unfinished last
        # line is left for the next call.
        end = data.rfind(b"\n") + 1
        self.offset += end
        for line in parse_lines(split_lines(data[:end].decode(errors="replace"))):
            if line.record is not None and isinstance(line.record.get("beacon"), dict):
                yield line.record
