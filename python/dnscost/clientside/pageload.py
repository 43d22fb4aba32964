"""Page loads with a real browser through each DNS transport: the synthetic corpus
(:mod:`.corpus`) served in the lab's server namespace (:mod:`.webserver`), loaded by Chromium
or Firefox in the client namespace, its names answered by ``dnscost-engine serve`` over

- ``do53``: the system resolver (the client namespace's ``resolv.conf`` points at the server,
  glibc's defaults: timeout 5 s, 2 attempts), the browser's DoH off;
- ``dot``: Stubby (getdns) in the client namespace as a stub on 127.0.0.1:53, as Hounsel et
  al. used it: one upstream, TLS authenticated by name against the run's CA, no DNSSEC, no
  round robin, its connection reused and closed after 10 s idle (``idle_timeout: 10000``, its
  default); no cache. ``resolv.conf`` points at it;
- ``dot-unbound``: unbound in its place (one thread, ``tcp-reuse-timeout: 10000``), to show
  what the stub changes. Its cache is left on: ``cache-max-ttl: 0`` would rewrite every
  answer's TTL to 0 on its way to the browser, which would then resolve a host again for each
  connection, a cost no cacheless stub adds; the cache never answers a page's name, since
  every load asks names never asked before, and the run checks it (each session's names asked
  upstream, ``dns_check`` in ``pageload.json``);

- ``dot-nodelay``: a diagnostic, Stubby with ``TCP_NODELAY`` forced on its TLS connection by an
  ``LD_PRELOAD`` shim (:class:`StubbyNoDelay`): neither stub sets it, so a query written while
  an earlier one is unacknowledged waits for that acknowledgement (Nagle's algorithm), about a
  round trip; this measures what that costs;

  The stubs reach the lab's DoT through :mod:`.dotrelay`, a front on the server's port 853
  that writes every answer in a TLS record of its own (getdns reads one answer per read event,
  and the responder writes the answers ready at once in one record: Stubby would hold all but
  the first until the next packet); each DoT connection reaches the responder as one tcp
  connection of its own;
- ``doh``: the browser's own DoH to ``https://<server>/dns-query`` (Chromium: managed policy,
  secure mode; Firefox: TRR mode 3).

A run is made of rounds; in each round every transport once, in an order shuffled with the
run's seed, each a *session*: the browser started with a fresh profile on a local page where it
rests ``settle_s`` (:data:`START_PAGE`), a warm-up load (recorded, flagged, left out of the
analysis: the DoH or DoT connection then exists, as in a browser that has been running), then
every page once (or
``loads_per_page`` times) in the round's order, each load under names of its own. A page
sends its timings to the web server and goes on to the next URL by itself; a load that does
not reach its load event within ``page_timeout_s`` is reported as failed by the page, and a
session that stops reporting is ended (its remaining loads recorded as failed).

Files in the output directory:

- ``loads.jsonl``: one line per load, written as it comes (:func:`load_record`);
- ``sessions.jsonl``: one line per session;
- ``pageload.json``: the settings resolved, versions, the corpus, the plan's counts, and after
  the run each session's names as the resolver saw them and each DoT session's connections
  (``dns_check``);
- ``beacons.jsonl`` (the pages' raw reports), ``queries.jsonl`` and ``connections.jsonl``
  (the resolver's logs), ``dot-connections.jsonl`` (the DoT front's log of the stubs'
  connections), ``corpus.zone``, ``pages/``, ``sessions/<n>/`` (browser and stub logs).

:func:`run_pageload_presets` runs the whole experiment once per network preset, each in a lab
of its own joined by the preset's emulated link, into ``<out>/<preset>/`` (the files above),
with ``<out>/presets.json`` listing them and, from
:func:`~dnscost.clientside.pageload_analysis.write_outputs`, ``<out>/summary.json``,
``<out>/table.md`` and ``<out>/figures/``."""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time
from abc import ABC, abstractmethod
from collections import Counter, defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import IO, Any, cast
from urllib.parse import urlsplit

from dnscost import __version__
from dnscost.certs import make_tls
from dnscost.clientside.corpus import (
    Corpus,
    CorpusParams,
    Page,
    host_name,
    make_corpus,
    page_path,
    render_page,
    zone_records,
)
from dnscost.clientside.pageload_analysis import LoadRecord, PageloadRecord, PresetEntry, PresetsRecord, ResourceTiming
from dnscost.clientside.presets import Preset
from dnscost.contract import ConnectionRecord, QueryRecord
from dnscost.engine import Responder, connection_log, engine_version, query_log
from dnscost.errors import DnscostError, MachineError, UsageError
from dnscost.jsonl import parse_lines, read_records, split_lines
from dnscost.observe.clients import (
    CHROMIUM_FLAGS,
    CHROMIUM_POLICY_FILE,
    FIREFOX_PREFS,
    STUB_LISTEN,
    Client,
    Schedule,
    UnboundDot,
    Upstream,
    chromium_policy,
    nss_trust,
)
from dnscost.observe.lab import Lab
from dnscost.observe.observation import ZONE
from dnscost.proc import Child
from dnscost.results import write_json

__all__ = [
    "BROWSERS",
    "DEFAULT_SETUPS",
    "SETUPS",
    "STUBS",
    "PageloadSettings",
    "PlannedLoad",
    "Session",
    "SessionLabels",
    "StubbyDot",
    "StubbyNoDelay",
    "UnboundStub",
    "dns_check",
    "dot_connections",
    "load_record",
    "main",
    "plan_sessions",
    "run_in_new_lab",
    "run_pageload_presets",
    "run_pageloads",
]

SETUPS = ("do53", "dot", "dot-unbound", "dot-nodelay", "doh")
"""Every resolver set-up a run may take (how the browser's host reaches the resolver; the
``--transports`` option and a spec's ``pageload.transports`` name them): ``dot`` is Stubby,
``dot-unbound`` unbound, ``dot-nodelay`` Stubby with Nagle's algorithm off, a diagnostic (see the
module's documentation)."""
DEFAULT_SETUPS = ("do53", "dot", "doh")
BROWSERS = ("chromium", "firefox")
START_ALLOWANCE_S = 30.0
"""How long a browser may take to start before its first page's timeout begins."""
GRACE_S = 10.0
"""How long past a page's own timeout the session waits for its report."""
FORMAT = 1


@dataclass(frozen=True)
class PageloadSettings:
    """One run's settings (see the module's documentation)."""

    pages: int = 10
    rounds: int = 3
    transports: tuple[str, ...] = DEFAULT_SETUPS
    browser: str = "chromium"
    seed: int = 1
    loads_per_page: int = 1
    preset: str = "none"
    """A label for the lab's network (the caller's preset); recorded, not applied here."""
    page_timeout_s: float = 30.0
    settle_s: float = 6.0
    """How long a started browser rests on a local page before its first load."""
    stub_idle_timeout_ms: int = 10_000
    ttl_s: int = 300
    """TTL of the corpus' answers."""
    corpus: CorpusParams = field(default_factory=CorpusParams)

    def check(self) -> None:
        """Raises :class:`UsageError` naming the first bad setting."""
        if self.pages < 1 or self.rounds < 1 or self.loads_per_page < 1:
            raise UsageError("pageload: pages, rounds and loads per page must be at least 1")
        if not self.transports or len(set(self.transports)) != len(self.transports):
            raise UsageError("pageload: give each transport once")
        unknown = set(self.transports) - set(SETUPS)
        if unknown:
            raise UsageError(f"pageload: unknown transports {sorted(unknown)} (known: {', '.join(SETUPS)})")
        if self.browser not in BROWSERS:
            raise UsageError(f"pageload: unknown browser {self.browser!r} (known: {', '.join(BROWSERS)})")
        if self.page_timeout_s <= 0 or self.settle_s < 0 or self.stub_idle_timeout_ms < 0 or self.ttl_s < 0:
            raise UsageError("pageload: timeouts and the TTL must be positive")
        if not 0 < self.corpus.size_scale <= 10:
            raise UsageError("pageload: the size scale must be in (0, 10]")

    def as_dict(self) -> dict[str, object]:
        d = asdict(self)
        d["transports"] = list(self.transports)
        return d


@dataclass(frozen=True)
class PlannedLoad:
    load: int
    """The load's number in the run: its hostnames are its own."""
    page: int
    index: int
    """Its place in its session (0: the warm-up)."""
    warmup: bool


@dataclass(frozen=True)
class Session:
    number: int
    round: int
    transport: str
    loads: tuple[PlannedLoad, ...]


def plan_sessions(settings: PageloadSettings, corpus: Corpus) -> list[Session]:
    """The run's sessions, in order: rounds; in each, every transport once in a shuffled order
    over the same pages in the round's shuffled order; each session's first load a warm-up
    of the corpus' smallest page. Every load gets the next number. Pure."""
    rng = random.Random(f"dnscost-pageload-plan:{settings.seed}")
    warm = min(corpus.pages, key=lambda p: (p.requests, p.index)).index
    sessions: list[Session] = []
    number = 0
    for r in range(settings.rounds):
        order = list(settings.transports)
        rng.shuffle(order)
        pages = list(range(len(corpus.pages)))
        rng.shuffle(pages)
        for transport in order:
            loads = [PlannedLoad(number, warm, 0, True)]
            number += 1
            for _ in range(settings.loads_per_page):
                for p in pages:
                    loads.append(PlannedLoad(number, p, len(loads), False))
                    number += 1
            sessions.append(Session(len(sessions), r, transport, tuple(loads)))
    return sessions


@dataclass(frozen=True)
class SessionLabels:
    """What every load record of a session carries."""

    preset: str
    browser: str
    round: int
    transport: str
    session: int
    tld: str = "test"


def _url(load: PlannedLoad, tld: str) -> str:
    return f"http://{host_name(load.page, load.load, 0, tld)}{page_path(load.load)}"


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


class _Beacons:
    """Reads the beacons file's new complete lines."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0

    def read(self) -> Iterator[dict[str, Any]]:
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


def _package_version(package: str) -> str | None:
    r = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", package], capture_output=True, text=True, check=False)
    return r.stdout.strip() or None


class _Browser(ABC):
    """A browser as a session starts it: a fresh profile, its DNS set for the transport."""

    name: str
    package: str
    program: str

    def __init__(self, run_dir: Path, upstream: Upstream) -> None:
        self.run_dir = run_dir
        self.upstream = upstream

    def version(self) -> str | None:
        return _package_version(self.package)

    @abstractmethod
    def start(self, lab: Lab, workdir: Path, transport: str, url: str) -> Child: ...


class _Chromium(_Browser):
    """Chromium with observe's flags and policy (:data:`CHROMIUM_FLAGS`,
    :func:`chromium_policy`), DoH secure for ``doh`` and off otherwise; no automatic upgrade
    of the corpus' http:// URLs to https:// (which would knock on the resolver's port 443
    first), and no network prediction (``NetworkPredictionOptions: 2``: the predictor would
    resolve and connect the next page's host as the navigation starts, and the page's own
    lookup would then be missing from its Navigation Timing)."""

    name, package, program = "chromium", "chromium", "chromium"

    def _home(self) -> Path:
        home = self.run_dir / "chromium-home"
        if not (home / ".pki" / "nssdb").is_dir():
            nss_trust(home / ".pki" / "nssdb", self.upstream.ca)
        return home

    def start(self, lab: Lab, workdir: Path, transport: str, url: str) -> Child:
        policy = {
            **chromium_policy(self.upstream.doh_url if transport == "doh" else None),
            "HttpsUpgradesEnabled": False,
            "HttpsOnlyMode": "disallowed",
            "NetworkPredictionOptions": 2,
        }
        lab.write_etc("client", CHROMIUM_POLICY_FILE, json.dumps(policy))
        argv = ["chromium", *CHROMIUM_FLAGS, f"--user-data-dir={workdir / 'profile'}", url]
        env = {**os.environ, "HOME": str(self._home())}
        return Child(
            "chromium", [*lab.exec_prefix("client"), *argv], log=workdir / "chromium.log", cwd=workdir, env=env
        )


PAGELOAD_FIREFOX_PREFS: dict[str, object] = {
    "dom.security.https_first": False,
    "dom.security.https_first_schemeless": False,
    "dom.security.https_only_mode": False,
    "network.dns.disablePrefetch": True,
    "network.predictor.enabled": False,
    "network.prefetch-next": False,
    "network.http.speculative-parallel-limit": 0,
    "privacy.reduceTimerPrecision": False,
}
"""On top of observe's :data:`FIREFOX_PREFS`: no HTTPS-first upgrade of the corpus' http://
URLs, no DNS prefetch or speculative connection (what is timed is what the page fetches), and
timings not rounded to the millisecond."""


class _Firefox(_Browser):
    """Firefox ESR with observe's prefs (:data:`FIREFOX_PREFS`: TRR mode 3 to the lab's
    resolver for ``doh``; mode 5, TRR off, otherwise) and :data:`PAGELOAD_FIREFOX_PREFS`."""

    name, package, program = "firefox", "firefox-esr", "firefox-esr"

    def start(self, lab: Lab, workdir: Path, transport: str, url: str) -> Child:
        profile = workdir / "profile"
        nss_trust(profile, self.upstream.ca)
        prefs = {
            k: v.format(doh_url=self.upstream.doh_url) if isinstance(v, str) else v for k, v in FIREFOX_PREFS.items()
        }
        prefs.update(PAGELOAD_FIREFOX_PREFS)
        if transport != "doh":
            prefs["network.trr.mode"] = 5
        (profile / "user.js").write_text(
            "".join(f"user_pref({json.dumps(k)}, {json.dumps(v)});\n" for k, v in prefs.items())
        )
        home = workdir / "home"
        home.mkdir(parents=True, exist_ok=True)
        argv = ["firefox-esr", "--headless", "--no-remote", "--profile", str(profile), url]
        env = {**os.environ, "HOME": str(home)}
        return Child("firefox", [*lab.exec_prefix("client"), *argv], log=workdir / "firefox.log", cwd=workdir, env=env)


_BROWSERS: dict[str, type[_Browser]] = {"chromium": _Chromium, "firefox": _Firefox}


class StubbyDot(Client):
    """Stubby (getdns) as the DoT stub, the one Hounsel et al. used (they state Stubby and its
    10 s idle timeout; the rest is Stubby's shipped configuration or our choice): strict TLS to
    one upstream (the lab's DoT, authenticated by name against the run's CA), round robin off,
    no DNSSEC, its connection closed after ``idle_timeout_ms`` without queries (Stubby's
    default, 10 s), EDNS padding to 128 octets and a private client subnet as shipped. It has
    no cache, and like unbound it leaves Nagle's algorithm on (no ``TCP_NODELAY``): a query
    written while an earlier one is unacknowledged waits for that acknowledgement, about a
    round trip. Log level 6 (info): each connection's open and close, with its responses, in
    ``stubby.log``."""

    name = "stubby"
    package = "stubby"
    program = "stubby"
    transport = "dot"

    def __init__(self, idle_timeout_ms: int) -> None:
        super().__init__()
        self.idle_timeout_ms = idle_timeout_ms

    def argv(self, workdir: Path, upstream: Upstream, schedule: Schedule) -> list[str]:
        conf = workdir / "stubby.yml"
        conf.write_text(
            "resolution_type: GETDNS_RESOLUTION_STUB\n"
            "dns_transport_list:\n  - GETDNS_TRANSPORT_TLS\n"
            "tls_authentication: GETDNS_AUTHENTICATION_REQUIRED\n"
            "tls_query_padding_blocksize: 128\n"
            "edns_client_subnet_private: 1\n"
            "round_robin_upstreams: 0\n"
            f"idle_timeout: {self.idle_timeout_ms}\n"
            f"tls_ca_file: {json.dumps(str(upstream.ca))}\n"
            f"appdata_dir: {json.dumps(str(workdir))}\n"
            f"listen_addresses:\n  - {STUB_LISTEN}@53\n"
            "upstream_recursive_servers:\n"
            f"  - address_data: {upstream.address}\n"
            "    tls_port: 853\n"
            f"    tls_auth_name: {json.dumps(upstream.server_name)}\n"
        )
        return ["stubby", "-C", str(conf), "-v", "6"]


class UnboundStub(UnboundDot):
    """unbound as the second DoT stub (``dot-unbound``; see the module's documentation)."""

    name = "unbound"

    def __init__(self, idle_timeout_ms: int) -> None:
        super().__init__()
        self.idle_timeout_ms = idle_timeout_ms

    def argv(self, workdir: Path, upstream: Upstream, schedule: Schedule) -> list[str]:
        conf = workdir / "unbound.conf"
        conf.write_text(
            "server:\n"
            f"  interface: {STUB_LISTEN}\n  port: 53\n  do-ip6: no\n  num-threads: 1\n"
            f'  chroot: ""\n  username: ""\n  directory: "{workdir}"\n  pidfile: ""\n'
            '  use-syslog: no\n  logfile: ""\n  verbosity: 1\n'
            '  module-config: "iterator"\n'
            '  local-zone: "test." nodefault\n'
            f'  tls-cert-bundle: "{upstream.ca}"\n'
            f"  tcp-reuse-timeout: {self.idle_timeout_ms}\n  prefetch: no\n"
            "remote-control:\n  control-enable: no\n"
            "forward-zone:\n"
            '  name: "."\n  forward-tls-upstream: yes\n'
            f"  forward-addr: {upstream.address}@853#{upstream.server_name}\n"
        )
        return ["unbound", "-d", "-p", "-c", str(conf)]


NODELAY_SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
/* dnscost: TCP_NODELAY on every TCP socket the program connects (Nagle's algorithm off). */
int connect(int fd, const struct sockaddr *addr, socklen_t len) {
    static int (*real)(int, const struct sockaddr *, socklen_t);
    int type = 0, one = 1;
    socklen_t size = sizeof type;
    if (!real)
        real = (int (*)(int, const struct sockaddr *, socklen_t))dlsym(RTLD_NEXT, "connect");
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &size) == 0 && type == SOCK_STREAM &&
        (addr->sa_family == AF_INET || addr->sa_family == AF_INET6))
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return real(fd, addr, len);
}
"""
"""The ``LD_PRELOAD`` shim of :class:`StubbyNoDelay`, compiled with ``cc`` into the session's
directory."""


class StubbyNoDelay(StubbyDot):
    """A diagnostic: :class:`StubbyDot` with Nagle's algorithm off on its TLS connection
    (``TCP_NODELAY`` set by :data:`NODELAY_SHIM` when it connects), to measure what Nagle's
    algorithm costs DoT; Stubby itself never sets it."""

    def prepare(self, lab: Lab, workdir: Path, upstream: Upstream, schedule: Schedule) -> dict[str, str] | None:
        if shutil.which("cc") is None:
            raise MachineError("pageload: dot-nodelay needs a C compiler, cc (build-essential; run scripts/setup)")
        source, shim = workdir / "nodelay.c", workdir / "nodelay.so"
        source.write_text(NODELAY_SHIM)
        r = subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-o", str(shim), str(source), "-ldl"],
                           capture_output=True, text=True, check=False)  # fmt: skip
        if r.returncode != 0:
            raise MachineError(f"pageload: cannot build the TCP_NODELAY shim: {r.stderr.strip()[-300:]}")
        return {**os.environ, "LD_PRELOAD": str(shim)}


STUBS: dict[str, type[StubbyDot] | type[UnboundStub]] = {
    "dot": StubbyDot,
    "dot-unbound": UnboundStub,
    "dot-nodelay": StubbyNoDelay,
}
"""The DoT transports and the stub each starts in the client namespace."""


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


class _Writer:
    def __init__(self, path: Path) -> None:
        self.file: IO[str] = path.open("a", buffering=1)

    def write(self, doc: Mapping[str, Any]) -> None:
        self.file.write(json.dumps(doc, separators=(",", ":")) + "\n")

    def close(self) -> None:
        self.file.close()


def _run_session(
    lab: Lab,
    out: Path,
    session: Session,
    settings: PageloadSettings,
    corpus: Corpus,
    browser: _Browser,
    upstream: Upstream,
    beacons: _Beacons,
    loads: _Writer,
) -> dict[str, object]:
    """One session (see the module's documentation); returns its line for sessions.jsonl."""
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
            START_PAGE % {"url": json.dumps(_url(session.loads[0], tld)), "ms": round(settings.settle_s * 1000)}
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


_LAB_NAME = re.compile(r"(?:^|\.)(h\d+-l(\d+)\.p\d+\.[a-z0-9-]+)\.?$")


def dns_check(queries: Sequence[QueryRecord], sessions: Sequence[Session], corpus: Corpus) -> list[dict[str, object]]:
    """Each session's names as the resolver saw them: how many of its hostnames were asked,
    and its queries by the transport they came over. Pure."""
    session_of = {p.load: s.number for s in sessions for p in s.loads}
    asked: dict[int, set[str]] = defaultdict(set)
    by_transport: dict[int, Counter[str]] = defaultdict(Counter)
    for q in queries:
        name = (q.get("qname") or "").lower()
        m = _LAB_NAME.search(name)
        if not m or int(m.group(2)) not in session_of:
            continue
        s = session_of[int(m.group(2))]
        by_transport[s][q["transport"]] += 1
        asked[s].add(m.group(1))
    out = []
    for session in sessions:
        n = session.number
        expected = sum(corpus.pages[p.page].hosts for p in session.loads)
        out.append({"session": n, "transport": session.transport, "names_expected": expected,
                    "names_asked": len(asked[n]), "queries": dict(sorted(by_transport[n].items()))})  # fmt: skip
    return out


BURST_GAP_US = 1000
"""Queries on one connection that reach the resolver less than this apart are one burst: they
were in flight together (the link's round trip is longer)."""


def dot_connections(
    queries: Sequence[QueryRecord],
    responder_connections: Sequence[ConnectionRecord],
    front_connections: Sequence[dict[str, object]],
    sessions: Sequence[Session],
) -> dict[int, list[dict[str, object]]]:
    """Each session's DoT connections, as the resolver and the DoT front saw them: the front's
    connection (the stub's), the resolver's tcp connection it was relayed on (joined by the
    front's local address), how many queries it carried (all, and this session's names), the
    first and last (resolver's clock, µs), its bursts (:data:`BURST_GAP_US`: the largest and
    how many), how long it was idle before it closed and who closed it. Pure."""
    session_of = {p.load: s.number for s in sessions for p in s.loads}
    front_by_backend = {str(c.get("backend_address")): c for c in front_connections}
    responder_by_id = {c["id"]: c for c in responder_connections if c["transport"] == "tcp"}
    times: dict[int, list[int]] = defaultdict(list)
    mine: dict[int, Counter[int]] = defaultdict(Counter)
    for q in queries:
        conn = q.get("connection")
        if q["transport"] != "tcp" or conn is None:
            continue
        times[conn].append(q["t_us"])
        m = _LAB_NAME.search((q.get("qname") or "").lower())
        if m and int(m.group(2)) in session_of:
            mine[session_of[int(m.group(2))]][conn] += 1
    out: dict[int, list[dict[str, object]]] = {}
    for session, counts in mine.items():
        rows = []
        for conn in sorted(counts):
            ts = sorted(times[conn])
            bursts = [1]
            for a, b in itertools.pairwise(ts):
                if b - a < BURST_GAP_US:
                    bursts[-1] += 1
                else:
                    bursts.append(1)
            resp = responder_by_id.get(conn)
            front = front_by_backend.get(resp["peer_address"], {}) if resp is not None else {}
            closed = resp["closed_us"] if resp is not None else None
            rows.append({
                "connection": conn,
                "front_connection": front.get("id"),
                "queries": len(ts),
                "session_queries": counts[conn],
                "first_query_us": ts[0],
                "last_query_us": ts[-1],
                "bursts": len(bursts),
                "max_burst": max(bursts),
                "idle_before_close_ms": round((closed - ts[-1]) / 1000, 1) if closed is not None else None,
                "closed_by": front.get("closed_by"),
                "close": front.get("close"),
                "front_median_us": front.get("relay_median_us"),
            })  # fmt: skip
        out[session] = rows
    return out


def run_pageloads(lab: Lab, out: Path, settings: PageloadSettings) -> Path:
    """Runs every session of ``settings`` in ``lab`` (made and removed by the caller; only its
    namespaces' command prefixes, ``/etc`` files and server address are used), writing into
    ``out`` (see the module's documentation). Returns ``pageload.json``."""
    settings.check()
    browser_class = _BROWSERS[settings.browser]
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
            nxt = _url(s.loads[i + 1], tld) if i + 1 < len(s.loads) else "about:blank"
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
        "stub_versions": {t: _package_version(STUBS[t].package or "") for t in settings.transports if t in STUBS},
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
    loads = _Writer(out / "loads.jsonl")
    session_lines = _Writer(out / "sessions.jsonl")
    status = "interrupted"
    try:
        responder = Responder(out, listen, extra=flags, exec_prefix=lab.exec_prefix("server"))
        doc["responder_start_unix_us"] = responder.start_unix_us
        if dot:
            relay = _start_dot_relay(lab, out, address, tls.cert, tls.key)
        web = _start_webserver(lab, out, address, pages_dir)
        beacons = _Beacons(out / "beacons.jsonl")
        for s in sessions:
            session_lines.write(_run_session(lab, out, s, settings, corpus, browser, upstream, beacons, loads))
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


def run_in_new_lab(out: Path, settings: PageloadSettings) -> Path:
    """:func:`run_pageloads` in a plain lab made for it, removed afterwards (also on Ctrl-C)."""
    lab = Lab.create()
    try:
        return run_pageloads(lab, out, settings)
    finally:
        lab.remove()


PRESETS_FORMAT = 1


def run_pageload_presets(out: Path, presets: Sequence[Preset], settings: PageloadSettings) -> Path:
    """:func:`run_pageloads` once per preset, in that order, each in a lab of its own joined by
    the preset's emulated link (a plain veth pair for a preset without shaping), into
    ``out/<preset>/``; every record carries the preset's name (``settings.preset`` is replaced).
    ``out/presets.json`` lists the presets (their parameters, directory, status, and the link's
    counters once its lab is gone), rewritten as each ends; a preset whose run fails is recorded
    (``status: failed``, ``error``) and the next one runs. Then the analysis
    (:func:`~dnscost.clientside.pageload_analysis.write_outputs`): ``summary.json``, ``table.md``,
    ``figures/``. Returns ``presets.json``."""
    from dnscost.clientside.pageload_analysis import write_outputs

    settings.check()
    names = [p.name for p in presets]
    if not names:
        raise UsageError("pageload: give at least one preset")
    if len(set(names)) != len(names):
        raise UsageError("pageload: give each preset once")
    out.mkdir(parents=True, exist_ok=True)
    doc: PresetsRecord = {
        "format": PRESETS_FORMAT,
        "dnscost": __version__,
        "settings": {k: v for k, v in settings.as_dict().items() if k != "preset"},
        "presets": {p.name: cast(PresetEntry, {**p.to_dict(), "dir": p.name, "status": "pending"}) for p in presets},
        "started_unix_us": time.time_ns() // 1000,
        "status": "running",
    }
    write_json(out / "presets.json", doc)
    status = "interrupted"
    try:
        for preset in presets:
            entry = doc["presets"][preset.name]
            entry["status"] = "running"
            entry["started_unix_us"] = time.time_ns() // 1000
            write_json(out / "presets.json", doc)
            run_dir = out / preset.name
            lab = Lab.create(preset if preset.shaped else None, workdir=run_dir / "lab")
            try:
                run_pageloads(lab, run_dir, replace(settings, preset=preset.name))
                entry["status"] = "done"
            except DnscostError as e:
                entry["status"], entry["error"] = "failed", str(e)
            finally:
                if entry["status"] == "running":
                    entry["status"] = "interrupted"
                lab.remove()
                entry["link"] = lab.link_stats()
                entry["ended_unix_us"] = time.time_ns() // 1000
                write_json(out / "presets.json", doc)
        status = "done"
    finally:
        doc["status"] = status
        doc["ended_unix_us"] = time.time_ns() // 1000
        write_json(out / "presets.json", doc)
    write_outputs(out)
    return out / "presets.json"


def main(argv: list[str] | None = None) -> int:
    """``python -m dnscost.clientside.pageload``: a run in a plain lab, or with ``--presets`` one
    per network preset (:func:`run_pageload_presets`), for manual runs."""
    parser = argparse.ArgumentParser(prog="python -m dnscost.clientside.pageload", description=__doc__.splitlines()[0])
    d = PageloadSettings()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--pages", type=int, default=d.pages)
    parser.add_argument("--rounds", type=int, default=d.rounds)
    parser.add_argument("--transports", default=",".join(d.transports), help=f"comma-separated, of {','.join(SETUPS)}")
    parser.add_argument("--browser", default=d.browser, choices=BROWSERS)
    parser.add_argument("--seed", type=int, default=d.seed)
    parser.add_argument("--loads-per-page", type=int, default=d.loads_per_page)
    parser.add_argument("--preset", default=d.preset, help="the label recorded for a plain lab's network")
    parser.add_argument(
        "--presets", help="comma-separated network presets (dnscost client presets), one lab each, e.g. lte,3g"
    )
    parser.add_argument("--presets-file", type=Path, help="a TOML file of more presets")
    parser.add_argument("--page-timeout", type=float, default=d.page_timeout_s, help="seconds")
    parser.add_argument("--size-scale", type=float, default=1.0, help="every corpus size multiplied by this")
    args = parser.parse_args(argv)
    settings = PageloadSettings(
        pages=args.pages,
        rounds=args.rounds,
        transports=tuple(t for t in args.transports.split(",") if t),
        browser=args.browser,
        seed=args.seed,
        loads_per_page=args.loads_per_page,
        preset=args.preset,
        page_timeout_s=args.page_timeout,
        corpus=replace(CorpusParams(), size_scale=args.size_scale),
    )
    try:
        if args.presets:
            from dnscost.clientside.pageload_analysis import presets_table, summarise_presets
            from dnscost.clientside.presets import load_presets

            known = load_presets(args.presets_file)
            chosen = [t.strip() for t in args.presets.split(",") if t.strip()]
            unknown = [n for n in chosen if n not in known]
            if unknown:
                raise UsageError(f"pageload: unknown presets {unknown} (known: {', '.join(known)})")
            out = args.out.absolute()
            run_pageload_presets(out, [known[n] for n in chosen], settings)
            print(presets_table(summarise_presets(out)))
            return 0
        path = run_in_new_lab(args.out.absolute(), settings)
    except DnscostError as e:
        print(f"pageload: {e}", file=sys.stderr)
        return e.exit_code
    from dnscost.clientside.pageload_analysis import summarise_run

    print(json.dumps(summarise_run(path.parent), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
