"""The clients an observation can watch, each started in the lab's client namespace against
the lab's "public resolver" (dnscost's responder on :data:`~dnscost.lab.lab.SERVER_ADDRESS`).

Stub clients (``dnss``, ``unbound-dot``, ``knot-dot``, ``external``) listen on 127.0.0.1:53
in the client namespace and are fed by the resolution loop (:mod:`.resolve`) through the
system resolver; each forwards over its own encrypted transport with its own connection
policy, which is what is observed. Browsers (``chromium``) use their own DoH, forced by
policy, and are driven by a local page whose timers fetch a fresh lab name at each tick."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from dnscost.errors import MachineError, UsageError
from dnscost.lab.lab import SERVER_ADDRESS, Lab
from dnscost.proc import Child

__all__ = [
    "CHROMIUM_FLAGS",
    "CHROMIUM_POLICY_FILE",
    "CLIENTS",
    "FIREFOX_PREFS",
    "STUB_LISTEN",
    "Client",
    "Schedule",
    "UnboundDot",
    "Upstream",
    "chromium_policy",
    "client",
    "nss_trust",
    "package_version",
]

STUB_LISTEN = "127.0.0.1"


@dataclass(frozen=True)
class Schedule:
    """When the driver resolves: one fresh lab name every ``delay_s`` for ``duration_s``."""

    delay_s: float
    duration_s: float
    names: int
    tld: str = "test"

    @property
    def count(self) -> int:
        return int(self.duration_s / self.delay_s - 1e-9) + 1


@dataclass(frozen=True)
class Upstream:
    """The lab's resolver, as clients are pointed at it."""

    ca: Path
    server_name: str = "localhost"
    """A name the server's certificate covers (for clients that authenticate by name)."""
    address: str = SERVER_ADDRESS

    @property
    def doh_url(self) -> str:
        return f"https://{self.address}/dns-query"

    @property
    def dot(self) -> str:
        return f"{self.address}:853"


class Client(ABC):
    """One kind of client: how to start it (:meth:`start`) and what it is."""

    name: ClassVar[str]
    package: ClassVar[str | None] = None
    """The Debian package whose version is recorded."""
    program: ClassVar[str] = ""
    transport: ClassVar[str]
    """What it speaks to the lab's resolver: ``doh`` or ``dot``."""
    stub: ClassVar[bool] = True
    """Fed by the resolution loop through the system resolver."""

    def __init__(self, command: str | None = None) -> None:
        self.command = command

    @abstractmethod
    def argv(self, workdir: Path, upstream: Upstream, schedule: Schedule) -> list[str]:
        """The command that runs the client (files it reads are written here)."""

    def prepare(self, lab: Lab, workdir: Path, upstream: Upstream, schedule: Schedule) -> dict[str, str] | None:
        """Writes what the client needs before it starts; returns its environment (``None``:
        dnscost's own)."""
        return None

    def version(self) -> str | None:
        """The installed version of :attr:`package` (None without one)."""
        return None if self.package is None else package_version(self.package)

    def start(self, lab: Lab, workdir: Path, upstream: Upstream, schedule: Schedule) -> Child:
        """Starts the client in the lab's client namespace and waits until it listens (stubs)."""
        if self.program and shutil.which(self.program) is None:
            raise MachineError(f"{self.name}: {self.program} is not installed (run scripts/setup)")
        env = self.prepare(lab, workdir, upstream, schedule)
        argv = self.argv(workdir, upstream, schedule)
        child = Child(
            self.name, [*lab.exec_prefix("client"), *argv], log=workdir / f"{self.name}.log", cwd=workdir, env=env
        )
        if self.stub:
            child.wait_for(lambda: _listening_udp(lab, 53), 15, f"while starting to listen on {STUB_LISTEN}:53")
        return child


def package_version(package: str) -> str | None:
    """The installed version of the Debian package ``package`` (None: not installed)."""
    r = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", package], capture_output=True, text=True, check=False)
    return r.stdout.strip() or None


def _listening_udp(lab: Lab, port: int) -> bool:
    r = subprocess.run(
        [*lab.exec_prefix("client"), "ss", "-Hlun", f"sport = :{port}"],
        capture_output=True,
        text=True,
        check=False,
    )
    return bool(r.stdout.strip())


class Dnss(Client):
    """Debian's ``dnss``: a DoH stub (Go, HTTP/2 POST), cache off; its connection policy is
    Go's HTTP client's (one connection, closed 30 s after the last query), like
    DNSCrypt-proxy 2.1's."""

    name = "dnss"
    package = "dnss"
    program = "dnss"
    transport = "doh"

    def argv(self, workdir: Path, upstream: Upstream, schedule: Schedule) -> list[str]:
        return [
            "dnss",
            "-enable_dns_to_https",
            "-dns_listen_addr",
            f"{STUB_LISTEN}:53",
            "-https_upstream",
            upstream.doh_url,
            "-https_client_cafile",
            str(upstream.ca),
            "-enable_cache=false",
            "-fallback_upstream",
            f"{upstream.address}:53",
        ]


class UnboundDot(Client):
    """unbound as a DoT forwarder, cache off (``cache-max-ttl: 0``; the lab answers with TTL
    0 anyway). ``.test`` is forwarded (``local-zone: "test." nodefault``: unbound would
    answer it itself, RFC 6761)."""

    name = "unbound-dot"
    package = "unbound"
    program = "unbound"
    transport = "dot"

    def argv(self, workdir: Path, upstream: Upstream, schedule: Schedule) -> list[str]:
        conf = workdir / "unbound.conf"
        conf.write_text(
            "server:\n"
            f"  interface: {STUB_LISTEN}\n  port: 53\n  do-ip6: no\n"
            f'  chroot: ""\n  username: ""\n  directory: "{workdir}"\n  pidfile: ""\n'
            '  use-syslog: no\n  logfile: ""\n  verbosity: 1\n'
            '  module-config: "iterator"\n'
            '  local-zone: "test." nodefault\n'
            f'  tls-cert-bundle: "{upstream.ca}"\n'
            "  cache-max-ttl: 0\n  cache-max-negative-ttl: 0\n  prefetch: no\n"
            "remote-control:\n  control-enable: no\n"
            "forward-zone:\n"
            '  name: "."\n  forward-tls-upstream: yes\n'
            f"  forward-addr: {upstream.address}@853#{upstream.server_name}\n"
        )
        return ["unbound", "-d", "-p", "-c", str(conf)]


class KnotDot(Client):
    """Knot Resolver 5 forwarding everything over DoT (``policy.TLS_FORWARD``), DNSSEC off
    (no trust anchor), a small cache in its working directory."""

    name = "knot-dot"
    package = "knot-resolver"
    program = "kresd"
    transport = "dot"

    def argv(self, workdir: Path, upstream: Upstream, schedule: Schedule) -> list[str]:
        rundir = workdir / "kresd"
        rundir.mkdir(parents=True, exist_ok=True)
        conf = workdir / "kresd.conf"
        conf.write_text(
            f"net.listen('{STUB_LISTEN}', 53, {{ kind = 'dns' }})\n"
            "trust_anchors.remove('.')\n"
            "cache.size = 10 * MB\n"
            "policy.add(policy.all(policy.TLS_FORWARD({{"
            f"'{upstream.address}@853', hostname='{upstream.server_name}', ca_file='{upstream.ca}'"
            "}})))\n"
        )
        return ["kresd", "-n", "-c", str(conf), str(rundir)]


class External(Client):
    """A command the user gives, run in the client namespace; it must listen on
    127.0.0.1:53 (UDP) and forward to the lab's resolver. ``{doh_url}``, ``{dot}``, ``{ca}``,
    ``{server_name}``, ``{address}`` and ``{dir}`` in it are replaced."""

    name = "external"
    transport = "any"

    def argv(self, workdir: Path, upstream: Upstream, schedule: Schedule) -> list[str]:
        if not self.command:
            raise UsageError("observe: --client external needs --command")
        fields = {
            "doh_url": upstream.doh_url,
            "dot": upstream.dot,
            "ca": str(upstream.ca),
            "server_name": upstream.server_name,
            "address": upstream.address,
            "dir": str(workdir),
        }
        try:
            return [part.format(**fields) for part in shlex.split(self.command)]
        except (KeyError, IndexError, ValueError) as e:
            raise UsageError(f"observe: --command: unknown or bad placeholder {e}") from None


DRIVER_PAGE = """<!doctype html>
<meta charset="utf-8"><title>dnscost observe driver</title>
<script>
// One fresh lab name fetched every `delay` ms, `count` times, on a fixed schedule: each fetch
// makes the browser resolve the name (its own DoH); the connection then fails at once (the
// lab has no route to the answer), which is all the page needs.
const p = new URLSearchParams(location.hash.slice(1));
const delay = Number(p.get("delay")), count = Number(p.get("count")), names = Number(p.get("names"));
const width = String(Math.max(names - 1, 0)).length, tld = p.get("tld");
const t0 = performance.now();
function tick(k) {
  if (k >= count) { document.title = "done"; return; }
  const name = "q" + String(k % names).padStart(width, "0") + "." + tld;
  fetch("http://" + name + ":81/", { mode: "no-cors", cache: "no-store" }).catch(() => {});
  setTimeout(() => tick(k + 1), Math.max(0, t0 + (k + 1) * delay - performance.now()));
}
tick(0);
</script>
"""


def _driver_url(workdir: Path, schedule: Schedule) -> str:
    page = workdir / "driver.html"
    page.write_text(DRIVER_PAGE)
    ms = round(schedule.delay_s * 1000, 3)
    return f"file://{page}#delay={ms:g}&count={schedule.count}&names={schedule.names}&tld={schedule.tld}"


def nss_trust(db: Path, ca: Path) -> None:
    """An NSS database at ``db`` that trusts ``ca`` for servers (certutil, libnss3-tools)."""
    if shutil.which("certutil") is None:
        raise MachineError("certutil is not installed (libnss3-tools; run scripts/setup)")
    db.mkdir(parents=True, exist_ok=True)
    for args in (["-N", "--empty-password"], ["-A", "-t", "C,,", "-n", "dnscost-lab", "-i", str(ca)]):
        r = subprocess.run(["certutil", "-d", f"sql:{db}", *args], capture_output=True, text=True, check=False)
        if r.returncode != 0:
            raise MachineError(f"certutil {args[0]} failed: {r.stderr.strip()}")


class Browser(Client):
    """A browser: its own DoH to the lab's resolver, driven by the page (:data:`DRIVER_PAGE`)."""

    transport = "doh"
    stub = False


CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-features=OptimizationHints,Translate,MediaRouter",
    "--disable-background-timer-throttling",
    "--disable-renderer-backgrounding",
    "--disable-backgrounding-occluded-windows",
)
"""Headless (the full browser), as root, background networking turned down as far as flags
allow, timers of a page in the background not throttled; the profile directory is added."""
CHROMIUM_POLICY_FILE = "chromium/policies/managed/dnscost-lab.json"
"""Where Chromium's managed policy goes, under the client namespace's ``/etc``."""


def chromium_policy(doh_url: str | None) -> dict[str, object]:
    """Chromium's managed policy: its DoH forced to ``doh_url`` (secure mode, GET), or off
    (``None``: the system resolver; with any managed policy DoH must be set explicitly, or
    Chromium turns it off itself), and no network-time queries."""
    dns: dict[str, object] = (
        {"DnsOverHttpsMode": "secure", "DnsOverHttpsTemplates": f"{doh_url}{{?dns}}"}
        if doh_url is not None
        else {"DnsOverHttpsMode": "off"}
    )
    return {**dns, "BrowserNetworkTimeQueriesEnabled": False}


class Chromium(Browser):
    """Chromium, headless (the full browser), its DoH forced by a managed policy (secure mode,
    GET to the lab's resolver), the lab's CA trusted through an NSS database under a private
    HOME, background networking turned down as far as flags and policies allow. Driven by a
    local page (:data:`DRIVER_PAGE`). Each resolution asks A and HTTPS (``_81._https.<name>``)."""

    name = "chromium"
    package = "chromium"
    program = "chromium"

    def prepare(self, lab: Lab, workdir: Path, upstream: Upstream, schedule: Schedule) -> dict[str, str] | None:
        home = workdir / "home"
        nss_trust(home / ".pki" / "nssdb", upstream.ca)
        lab.write_etc("client", CHROMIUM_POLICY_FILE, json.dumps(chromium_policy(upstream.doh_url)))
        return {**os.environ, "HOME": str(home)}

    def argv(self, workdir: Path, upstream: Upstream, schedule: Schedule) -> list[str]:
        return ["chromium", *CHROMIUM_FLAGS, f"--user-data-dir={workdir / 'profile'}", _driver_url(workdir, schedule)]


FIREFOX_PREFS = {
    # DoH only (TRR mode 3), to the lab's resolver, no confirmation query.
    "network.trr.mode": 3,
    "network.trr.uri": "{doh_url}",
    "network.trr.custom_uri": "{doh_url}",
    "network.trr.confirmationNS": "skip",
    "doh-rollout.disable-heuristics": True,
    # Background traffic down as far as prefs allow (what remains is counted apart).
    "network.captive-portal-service.enabled": False,
    "network.connectivity-service.enabled": False,
    "browser.safebrowsing.malware.enabled": False,
    "browser.safebrowsing.phishing.enabled": False,
    "browser.safebrowsing.downloads.enabled": False,
    "browser.safebrowsing.update.enabled": False,
    "datareporting.healthreport.uploadEnabled": False,
    "datareporting.policy.dataSubmissionEnabled": False,
    "toolkit.telemetry.enabled": False,
    "app.normandy.enabled": False,
    "app.update.auto": False,
    "app.update.enabled": False,
    "extensions.update.enabled": False,
    "browser.search.update": False,
    "browser.region.update.enabled": False,
    "browser.region.network.url": "",
    "services.settings.server": "http://127.0.0.1:9/",
    "dom.push.connection.enabled": False,
    "browser.shell.checkDefaultBrowser": False,
    "browser.startup.homepage_override.mstone": "ignore",
}


class Firefox(Browser):
    """Firefox ESR, headless, DoH only (TRR mode 3, POST) to the lab's resolver, the lab's CA
    in its profile's NSS database, background services turned off by prefs
    (:data:`FIREFOX_PREFS`). Firefox ESR 153 asks A and AAAA for each name, about three times
    each (the page's connection to the answer fails at once), and HTTPS once."""

    name = "firefox"
    package = "firefox-esr"
    program = "firefox-esr"

    def prepare(self, lab: Lab, workdir: Path, upstream: Upstream, schedule: Schedule) -> dict[str, str] | None:
        profile = workdir / "profile"
        nss_trust(profile, upstream.ca)
        prefs = {k: v.format(doh_url=upstream.doh_url) if isinstance(v, str) else v for k, v in FIREFOX_PREFS.items()}
        lines = [f"user_pref({json.dumps(k)}, {json.dumps(v)});" for k, v in prefs.items()]
        (profile / "user.js").write_text("\n".join(lines) + "\n")
        home = workdir / "home"
        home.mkdir(parents=True, exist_ok=True)
        return {**os.environ, "HOME": str(home)}

    def argv(self, workdir: Path, upstream: Upstream, schedule: Schedule) -> list[str]:
        profile = str(workdir / "profile")
        return ["firefox-esr", "--headless", "--no-remote", "--profile", profile, _driver_url(workdir, schedule)]


CLIENTS: dict[str, type[Client]] = {c.name: c for c in (Dnss, UnboundDot, KnotDot, External, Chromium, Firefox)}


def client(name: str, command: str | None = None) -> Client:
    try:
        return CLIENTS[name](command)
    except KeyError:
        raise UsageError(f"observe: unknown client {name!r} (known: {', '.join(CLIENTS)})") from None
