"""The browsers of the page loads (:mod:`dnscost.clientside.pageload`), as a session starts
one in the lab's client namespace: a fresh profile, the run's CA trusted, its DNS set for the
session's set-up (its own DoH for ``doh``, the system resolver otherwise), on a URL it then
follows by itself. They share observe's flags, policy and prefs (:mod:`.clients`)."""

from __future__ import annotations

import json
import os
from abc import ABC, abstractmethod
from pathlib import Path

from dnscost.lab.clients import (
    CHROMIUM_FLAGS,
    CHROMIUM_POLICY_FILE,
    FIREFOX_PREFS,
    Upstream,
    chromium_policy,
    nss_trust,
    package_version,
)
from dnscost.lab.lab import Lab
from dnscost.proc import Child

__all__ = ["BROWSERS", "PAGELOAD_FIREFOX_PREFS", "PageBrowser", "PageChromium", "PageFirefox"]


class PageBrowser(ABC):
    """A browser as a session starts it: a fresh profile, its DNS set for the transport."""

    name: str
    package: str
    program: str

    def __init__(self, run_dir: Path, upstream: Upstream) -> None:
        self.run_dir = run_dir
        self.upstream = upstream

    def version(self) -> str | None:
        """The installed version of the browser's Debian package."""
        return package_version(self.package)

    @abstractmethod
    def start(self, lab: Lab, workdir: Path, transport: str, url: str) -> Child:
        """Starts the browser in the lab's client namespace on ``url``, its profile in
        ``workdir``, its DNS set for ``transport`` (a page-load set-up)."""


class PageChromium(PageBrowser):
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


class PageFirefox(PageBrowser):
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


BROWSERS: dict[str, type[PageBrowser]] = {"chromium": PageChromium, "firefox": PageFirefox}
"""The browsers a page-load run may take, by the name its ``--browser`` option gives."""
