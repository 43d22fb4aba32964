"""A synthetic web corpus for page loads: pages with the number of requests, the mix of
resource types, their sizes and the number of distinct hostnames of real pages, drawn
(seeded) from published distributions; each page rendered for one load under hostnames of
its own, and the zone that answers them. Pure: no I/O, no clock.

What a page is made of, and where each figure comes from ("our choice" where no source gave
one):

- **Requests per page** (the document included): HTTP Archive, Web Almanac 2024, Page Weight
  chapter, "Distribution of requests by device type" (desktop, October 2024 crawl): 10th
  percentile 24, 25th 42, median 71, 75th 115, 90th 176. A page's count is drawn from these
  quantiles, interpolated linearly in probability and logarithmically in value, between the
  10th and the 90th percentile only (our choice: the corpus holds the middle 80 % of pages, no
  tail).
- **Mix of resource types**: the same chapter's median desktop page loads 24 JavaScript files,
  18 images, 8 stylesheets, 4 fonts and 2 HTML documents of its 71 requests. Of a page's
  subresources, 24/70 are scripts, 8/70 stylesheets, 22/70 images (fonts are served as images
  here, our choice) and the remaining 16/70 "other" (XHR, beacons, JSON, the second HTML
  document; loaded here as small images so that they count in the load event, our choice).
- **Sizes**: the same chapter's median desktop page carries 613 KB of JavaScript, 78 KB of
  CSS, 1 054 KB of images and 131 KB of fonts, and 18 KB of HTML. Each kind's mean size per
  request is its median bytes over its median count (script 25.5 KB, stylesheet 9.75 KB, image
  53.9 KB with the fonts; a derivation of ours, since medians of sums are not sums of
  medians); sizes are log-normal around that mean with sigma 1.0 (our choice), capped at 2 MB.
  "Other" requests average 2 KB (our choice: the chapter gives no figure). The document is
  padded to a log-normal size with mean 18 KB.
- **Distinct hostnames per page**: Böttger et al. (IMC 2019, "An Empirical Study of the Cost
  of DNS-over-HTTPS", Fig. 1) found that about half of the Alexa top 100 000 sites need at
  least 20 DNS queries (distinct names) to fetch every embedded object; the Web Almanac 2024
  Third Parties chapter counts a median of 22 third parties (registrable domains, so at most as
  many hostnames) per page. A page has ``20 * (requests / 71) ** 0.8`` hostnames times a
  log-normal factor of sigma 0.25, at least 1 and at most one per request (the median of 20 is
  Böttger's; the exponent and the spread are our choice: larger pages use more hosts).
- **First party**: half the subresources come from the page's own host (our choice; an HTTP
  Archive discussion, "What is the distribution of 1st party vs 3rd party resources?", 2017,
  found 39 first-party and 24 third-party requests on the median page). Every other host serves
  at least one resource, the rest spread over them by Zipf weights (1/k, our choice).
- **Inclusion chains**: the Web Almanac 2024 Third Parties chapter finds that 34 % of
  third-party inclusion chains are longer than one (a third party that loads another). A third
  of a page's third-party hosts (rounded) are therefore not in the HTML: a script from another
  third-party host inserts their resources when it runs (one level only, our choice).

How a page is laid out (our choice): stylesheets in the head, images in the body, scripts at
the end of the body (parser-blocking, in order); the injected resources are appended to the
document by their script, so they too hold the load event. Plain HTTP/1.1 on port 80 (the
lab's DoH resolver holds 443 on the one server address); see :mod:`.webserver`.

Every load has its own hostnames (``h<host>-l<load>.p<page>.test``) so that no browser, stub
or resolver cache hides a lookup; :func:`zone_records` answers them all with the web server's
address."""

from __future__ import annotations

import itertools
import json
import math
import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from urllib.parse import quote

__all__ = [
    "BEACON_PATH",
    "CONTENT_TYPES",
    "KINDS",
    "REQUESTS_2024_DESKTOP",
    "Corpus",
    "CorpusParams",
    "Kind",
    "Page",
    "Resource",
    "host_name",
    "make_corpus",
    "page_path",
    "quantile",
    "render_page",
    "resource_body",
    "resource_url",
    "zone_records",
]

REQUESTS_2024_DESKTOP: tuple[tuple[float, float], ...] = ((0.10, 24), (0.25, 42), (0.50, 71), (0.75, 115), (0.90, 176))
"""Requests per page (document included) at the 10th, 25th, 50th, 75th and 90th percentile:
Web Almanac 2024, Page Weight, desktop."""


@dataclass(frozen=True)
class Kind:
    """A type of subresource: its share of a page's subresources, its mean size, how it is
    served (``js``, ``css``, ``gif``)."""

    name: str
    share: float
    mean_bytes: int
    ext: str


KINDS: tuple[Kind, ...] = (
    Kind("script", 24 / 70, 25_500, "js"),
    Kind("stylesheet", 8 / 70, 9_750, "css"),
    Kind("image", 22 / 70, 53_900, "gif"),
    Kind("other", 16 / 70, 2_000, "gif"),
)
"""The subresource mix and sizes of the module's documentation."""

CONTENT_TYPES = {"js": "application/javascript", "css": "text/css", "gif": "image/gif"}
"""The served types, by extension."""


@dataclass(frozen=True)
class CorpusParams:
    """The distributions pages are drawn from (defaults: the module's documentation)."""

    requests: tuple[tuple[float, float], ...] = REQUESTS_2024_DESKTOP
    hosts_median: float = 20.0
    """Hostnames of a page with the median number of requests."""
    hosts_exponent: float = 0.8
    hosts_sigma: float = 0.25
    first_party_share: float = 0.5
    indirect_share: float = 1 / 3
    """Share of a page's third-party hosts whose resources a script inserts."""
    size_sigma: float = 1.0
    html_mean_bytes: int = 18_000
    max_bytes: int = 2_000_000
    size_scale: float = 1.0
    """Every size multiplied by this (1: the web's; smaller for quick runs)."""
    kinds: tuple[Kind, ...] = KINDS
    tld: str = "test"

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True)
class Resource:
    index: int
    kind: str
    host: int
    """The host's number in its page (0: the page's own host)."""
    size: int
    """Octets of the body."""
    ext: str
    """How it is served (``js``, ``css``, ``gif``)."""
    via: int | None = None
    """The index of the script that inserts it; None: it is in the HTML."""


@dataclass(frozen=True)
class Page:
    index: int
    hosts: int
    html_bytes: int
    resources: tuple[Resource, ...]

    @property
    def requests(self) -> int:
        """Requests of one load: the document and every subresource."""
        return 1 + len(self.resources)

    def indirect_hosts(self) -> set[int]:
        return {r.host for r in self.resources if r.via is not None}

    def describe(self) -> dict[str, object]:
        kinds: dict[str, int] = {}
        for r in self.resources:
            kinds[r.kind] = kinds.get(r.kind, 0) + 1
        return {
            "page": self.index,
            "requests": self.requests,
            "hosts": self.hosts,
            "indirect_hosts": len(self.indirect_hosts()),
            "bytes": self.html_bytes + sum(r.size for r in self.resources),
            "kinds": kinds,
        }


@dataclass(frozen=True)
class Corpus:
    params: CorpusParams
    seed: int
    pages: tuple[Page, ...] = field(default_factory=tuple)

    def describe(self) -> dict[str, object]:
        """What the corpus is (for the run's record): its parameters and every page's counts."""
        return {"seed": self.seed, "params": self.params.as_dict(), "pages": [p.describe() for p in self.pages]}


def quantile(points: Sequence[tuple[float, float]], u: float) -> float:
    """The value at probability ``u`` of a distribution given by quantile points (probability,
    value), interpolated linearly in probability and logarithmically in value; ``u`` is
    clamped to the points' range."""
    if not points:
        raise ValueError("no quantile points")
    ps = [p for p, _ in points]
    if ps != sorted(ps) or any(v <= 0 for _, v in points):
        raise ValueError("quantile points must rise in probability and hold positive values")
    u = min(max(u, ps[0]), ps[-1])
    for (p0, v0), (p1, v1) in itertools.pairwise(points):
        if u <= p1:
            w = 0.0 if p1 == p0 else (u - p0) / (p1 - p0)
            return math.exp(math.log(v0) + w * (math.log(v1) - math.log(v0)))
    return float(points[-1][1])


def _lognormal(rng: random.Random, mean: float, sigma: float) -> float:
    """A log-normal draw with this mean (not median)."""
    return math.exp(rng.gauss(math.log(mean) - sigma * sigma / 2, sigma))


def _page(rng: random.Random, index: int, p: CorpusParams) -> Page:
    lo, hi = p.requests[0][0], p.requests[-1][0]
    requests = max(1, round(quantile(p.requests, rng.uniform(lo, hi))))
    subresources = requests - 1
    median_requests = quantile(p.requests, 0.5)
    hosts = round(
        p.hosts_median * (requests / median_requests) ** p.hosts_exponent * math.exp(rng.gauss(0, p.hosts_sigma))
    )
    hosts = min(max(hosts, 1), subresources + 1)
    kinds = rng.choices([k.name for k in p.kinds], weights=[k.share for k in p.kinds], k=subresources)
    means = {k.name: k.mean_bytes for k in p.kinds}
    exts = {k.name: k.ext for k in p.kinds}
    sizes = [min(max(round(_lognormal(rng, means[k], p.size_sigma) * p.size_scale), 64), p.max_bytes) for k in kinds]

    # Hosts: the first party takes its share (leaving one resource for every other host); each
    # third-party host one resource, the rest by Zipf weights.
    third = hosts - 1
    first = min(round(p.first_party_share * subresources), subresources - third)
    owners = [0] * first + list(range(1, hosts))
    extra = subresources - len(owners)
    if third and extra:
        owners += rng.choices(range(1, hosts), weights=[1 / k for k in range(1, hosts)], k=extra)
    else:
        owners += [0] * extra
    rng.shuffle(owners)

    # Inclusion chains: some third-party hosts are inserted by a script of a direct one.
    via: dict[int, int] = {}
    candidates = list(range(1, hosts))
    rng.shuffle(candidates)
    n_indirect = round(p.indirect_share * third)
    indirect, direct = set(candidates[:n_indirect]), set(candidates[n_indirect:])
    injectors = [i for i in range(subresources) if kinds[i] == "script" and owners[i] in direct]
    if indirect and injectors:
        chosen = {h: rng.choice(injectors) for h in sorted(indirect)}
        via = {i: chosen[owners[i]] for i in range(subresources) if owners[i] in indirect}
    resources = tuple(
        Resource(i, kinds[i], owners[i], sizes[i], exts[kinds[i]], via.get(i)) for i in range(subresources)
    )
    html = min(max(round(_lognormal(rng, p.html_mean_bytes, p.size_sigma) * p.size_scale), 2048), p.max_bytes)
    return Page(index, hosts, html, resources)


def make_corpus(params: CorpusParams, pages: int, seed: int) -> Corpus:
    """``pages`` pages drawn from ``params`` with ``seed`` (the same arguments, the same corpus)."""
    if pages < 1:
        raise ValueError("a corpus needs at least one page")
    rng = random.Random(seed)
    return Corpus(params, seed, tuple(_page(rng, i, params) for i in range(pages)))


def host_name(page: int, load: int, host: int, tld: str = "test") -> str:
    """The name of a page's host for one load: every load has names never asked before."""
    return f"h{host}-l{load}.p{page}.{tld}"


def page_path(load: int) -> str:
    return f"/l/{load}.html"


def resource_url(page: Page, load: int, r: Resource, tld: str = "test", injected: Sequence[str] = ()) -> str:
    """Where a resource is fetched from: its host for this load, its size (and for a script
    that inserts others, their URLs) in the query, so that the server needs no state."""
    url = f"http://{host_name(page.index, load, r.host, tld)}/r/{load}/{r.index}.{r.ext}?b={r.size}"
    if injected:
        url += "&x=" + quote(json.dumps(list(injected), separators=(",", ":")), safe="")
    return url


BEACON_PATH = "/beacon"

_SCRIPT = """(function () {
  var cfg = %(cfg)s;
  if (performance.setResourceTimingBufferSize) performance.setResourceTimingBufferSize(100000);
  var sent = false;
  function pick(e, keys) { var o = {}; keys.forEach(function (k) { o[k] = e[k]; }); return o; }
  function report(ok, why) {
    if (sent) return;
    sent = true;
    var nav = performance.getEntriesByType("navigation")[0];
    var body = JSON.stringify({
      load: cfg.load, ok: ok, why: why,
      nav: nav ? pick(nav, ["startTime", "domainLookupStart", "domainLookupEnd", "connectStart", "connectEnd",
                            "requestStart", "responseStart", "responseEnd", "domContentLoadedEventEnd",
                            "loadEventStart", "loadEventEnd"]) : null,
      resources: performance.getEntriesByType("resource").map(function (e) {
        return pick(e, ["name", "startTime", "domainLookupStart", "domainLookupEnd", "connectStart", "connectEnd",
                        "requestStart", "responseStart", "responseEnd"]);
      })
    });
    var gone = false;
    function next() { if (!gone) { gone = true; location.replace(cfg.next); } }
    setTimeout(next, cfg.beaconTimeout);
    fetch(cfg.beacon, { method: "POST", body: body, cache: "no-store",
                        headers: { "Content-Type": "application/json" } }).then(next, next);
  }
  addEventListener("load", function () { setTimeout(function () { report(true, null); }, 0); });
  setTimeout(function () { report(false, "timeout"); }, cfg.timeout);
})();"""
"""The page's own script: after the load event (a tick later, so that loadEventEnd is set), or
when its timeout fires first, it POSTs Navigation Timing and every Resource Timing entry to the
beacon, then goes to the session's next URL (also if the beacon does not answer in time)."""


def render_page(page: Page, load: int, next_url: str, timeout_ms: int, tld: str = "test") -> str:
    """The HTML of ``page`` for one load (its own hostnames), going to ``next_url`` once its
    timings are sent, padded to the page's document size."""
    cfg = {"load": load, "next": next_url, "timeout": timeout_ms, "beaconTimeout": 5000, "beacon": BEACON_PATH}
    inserted: dict[int, list[tuple[str, str]]] = {}
    for r in page.resources:
        if r.via is not None:
            inserted.setdefault(r.via, []).append((resource_url(page, load, r, tld), r.kind))
    head, body, scripts = [], [], []
    for r in page.resources:
        if r.via is not None:
            continue
        injected = [f"{kind}:{url}" for url, kind in inserted.get(r.index, [])]
        url = resource_url(page, load, r, tld, injected)
        if r.kind == "stylesheet":
            head.append(f'<link rel="stylesheet" href="{url}">')
        elif r.kind == "script":
            scripts.append(f'<script src="{url}"></script>')
        else:
            body.append(f'<img src="{url}" width="1" height="1" alt="">')
    script = _SCRIPT % {"cfg": json.dumps(cfg)}
    html = (
        '<!doctype html>\n<html><head><meta charset="utf-8">'
        f"<title>page {page.index} load {load}</title>\n<script>{script}</script>\n"
        + "\n".join(head)
        + "\n</head><body>\n"
        + f"<h1>page {page.index}, load {load}</h1>\n"
        + "\n".join(body + scripts)
        + "\n"
    )
    tail = "</body></html>\n"
    pad = page.html_bytes - len(html.encode()) - len(tail) - len("<!---->\n")
    if pad > 0:
        html += "<!--" + "x" * pad + "-->\n"
    return html + tail


_GIF = bytes.fromhex("47494638396101000100800000000000ffffff21f90401000000002c00000000010001000002024401003b")
"""A 1x1 GIF; an image's padding follows its trailer, which decoders ignore."""

_INSERT = """(function () {
  var list = %s;
  list.forEach(function (item) {
    var i = item.indexOf(":"), kind = item.slice(0, i), url = item.slice(i + 1), el;
    if (kind === "script") { el = document.createElement("script"); el.src = url; }
    else if (kind === "stylesheet") { el = document.createElement("link"); el.rel = "stylesheet"; el.href = url; }
    else { el = document.createElement("img"); el.src = url; el.width = 1; el.height = 1; }
    (document.body || document.documentElement).appendChild(el);
  });
})();
"""


def resource_body(ext: str, size: int, injected: Sequence[str] = ()) -> bytes:
    """The body of a resource of ``size`` octets (at least what its content needs): a script
    (inserting ``injected``, each ``kind:url``), a stylesheet or an image, padded with a comment
    or trailing octets."""
    if ext == "gif":
        return _GIF + b"\0" * max(size - len(_GIF), 0)
    if ext not in ("js", "css"):
        raise ValueError(f"unknown resource type {ext!r}")
    head = (_INSERT % json.dumps(list(injected))).encode() if ext == "js" and injected else b""
    pad = max(size - len(head) - 4, 0)
    return head + b"/*" + b"x" * pad + b"*/"


def zone_records(names: Sequence[str], address: str, ttl_s: int, tld: str = "test") -> str:
    """A master-file zone for ``tld`` answering every one of ``names`` with ``address`` (A
    only: the lab is IPv4), TTL ``ttl_s``; other names under ``tld`` do not exist."""
    lines = [
        f"$ORIGIN {tld}.",
        f"@ {ttl_s} IN SOA ns.{tld}. hostmaster.{tld}. 1 3600 600 86400 {ttl_s}",
    ]
    suffix = f".{tld}"
    for name in names:
        if not name.endswith(suffix):
            raise ValueError(f"{name} is not under {tld}")
        lines.append(f"{name[: -len(suffix)]} {ttl_s} IN A {address}")
    return "\n".join(lines) + "\n"
