"""The synthetic web corpus of the page loads: drawn from its documented distributions, the
same for the same seed, every page well formed (hosts, inclusion chains), rendered with its
load's own names, its resources made from their URLs, and the zone the responder serves;
and the page-load plan and records built from it (pure parts of dnscost.clientside.pageload)."""

from __future__ import annotations

import html.parser
import json
import re
import shutil
import statistics
from collections import Counter
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

import pytest
from conftest import need
from dnscost.clientside.corpus import (
    KINDS,
    REQUESTS_2024_DESKTOP,
    CorpusParams,
    Page,
    host_name,
    make_corpus,
    quantile,
    render_page,
    resource_body,
    resource_url,
    zone_records,
)
from dnscost.clientside.pageload_check import dns_check
from dnscost.clientside.pageload_plan import PageloadSettings, plan_sessions
from dnscost.clientside.pageload_records import SessionLabels, load_record
from dnscost.engine import Responder


def test_quantiles_interpolate_in_log_space_and_clamp() -> None:
    pts = REQUESTS_2024_DESKTOP
    for p, v in pts:
        assert quantile(pts, p) == pytest.approx(v)
    assert quantile(pts, 0.375) == pytest.approx((42 * 71) ** 0.5)  # halfway: the geometric mean
    assert quantile(pts, 0.0) == pytest.approx(24) and quantile(pts, 1.0) == pytest.approx(176)
    with pytest.raises(ValueError):
        quantile([(0.5, 1), (0.1, 2)], 0.3)
    with pytest.raises(ValueError):
        quantile([(0.1, 0), (0.5, 2)], 0.3)


def test_a_seed_gives_one_corpus() -> None:
    a, b = make_corpus(CorpusParams(), 30, 7), make_corpus(CorpusParams(), 30, 7)
    assert a == b
    assert make_corpus(CorpusParams(), 30, 8).pages != a.pages
    with pytest.raises(ValueError):
        make_corpus(CorpusParams(), 0, 1)


def test_pages_follow_the_documented_distributions() -> None:
    corpus = make_corpus(CorpusParams(), 3000, 1)
    requests = [p.requests for p in corpus.pages]
    hosts = [p.hosts for p in corpus.pages]
    # The middle 80 % of the Web Almanac's pages, the median at 71.
    assert min(requests) >= 24 and max(requests) <= 176
    assert statistics.median(requests) == pytest.approx(71, rel=0.08)
    # The sample's quartiles are the distribution's quantiles at 0.1 + 0.8 * (0.25, 0.75).
    q1, _, q3 = statistics.quantiles(requests, n=4)
    assert q1 == pytest.approx(quantile(REQUESTS_2024_DESKTOP, 0.3), rel=0.05)
    assert q3 == pytest.approx(quantile(REQUESTS_2024_DESKTOP, 0.7), rel=0.05)
    # About 20 hostnames at the median, more on larger pages.
    assert statistics.median(hosts) == pytest.approx(20, rel=0.12)
    small = [p.hosts for p in corpus.pages if p.requests < 40]
    large = [p.hosts for p in corpus.pages if p.requests > 120]
    assert statistics.median(small) < statistics.median(large)
    # The mix of types and each type's mean size.
    resources = [r for p in corpus.pages for r in p.resources]
    counts = Counter(r.kind for r in resources)
    for k in KINDS:
        assert counts[k.name] / len(resources) == pytest.approx(k.share, abs=0.01), k.name
        sizes = [r.size for r in resources if r.kind == k.name]
        assert statistics.mean(sizes) == pytest.approx(k.mean_bytes, rel=0.1), k.name
        assert {r.ext for r in resources if r.kind == k.name} == {k.ext}
    # Half the subresources from the page's own host; a third of third-party hosts inserted.
    assert sum(r.host == 0 for r in resources) / len(resources) == pytest.approx(0.5, abs=0.03)
    third = sum(p.hosts - 1 for p in corpus.pages)
    assert sum(len(p.indirect_hosts()) for p in corpus.pages) / third == pytest.approx(1 / 3, abs=0.04)


def _check_page(p: Page) -> None:
    assert 1 <= p.hosts <= p.requests
    assert [r.index for r in p.resources] == list(range(len(p.resources)))
    owners = Counter(r.host for r in p.resources)
    assert set(range(1, p.hosts)) <= set(owners), "every third-party host serves something"
    assert all(0 <= h < p.hosts for h in owners)
    indirect = p.indirect_hosts()
    assert 0 not in indirect
    for r in p.resources:
        if r.host in indirect:
            assert r.via is not None, "an inserted host is never in the HTML too"
            injector = p.resources[r.via]
            assert injector.kind == "script" and injector.via is None
            assert injector.host not in indirect and injector.host != 0
        else:
            assert r.via is None
    assert all(64 <= r.size <= 2_000_000 for r in p.resources)


def test_every_page_is_well_formed() -> None:
    for p in make_corpus(CorpusParams(), 500, 3).pages:
        _check_page(p)
    small = make_corpus(CorpusParams(size_scale=0.1), 50, 3)
    big = make_corpus(CorpusParams(), 50, 3)
    for s, b in zip(small.pages, big.pages, strict=True):
        assert [r.host for r in s.resources] == [r.host for r in b.resources]
        assert sum(r.size for r in s.resources) < 0.2 * sum(r.size for r in b.resources)


class _Refs(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.urls: list[tuple[str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        url = a.get("src") or (a.get("href") if tag == "link" else None)
        if url:
            self.urls.append((tag, url))


def test_a_page_is_rendered_with_its_load_s_own_names() -> None:
    corpus = make_corpus(CorpusParams(), 40, 5)
    page = next(p for p in corpus.pages if p.indirect_hosts())
    text = render_page(page, 17, "http://next.example/l/18.html", 30_000)
    assert len(text.encode()) == pytest.approx(page.html_bytes, abs=16)
    assert '"load": 17' in text and '"next": "http://next.example/l/18.html"' in text
    parser = _Refs()
    parser.feed(text)
    direct = [r for r in page.resources if r.via is None]
    assert len(parser.urls) == len(direct)
    hosts = {urlsplit(u).hostname for _, u in parser.urls}
    assert hosts <= {host_name(page.index, 17, h) for h in range(page.hosts)}
    assert not any(host_name(page.index, 17, h) in hosts for h in page.indirect_hosts())
    # The inserted resources ride in their script's URL, and its body inserts them.
    inserted = []
    for tag, url in parser.urls:
        q = parse_qs(urlsplit(url).query)
        if "x" in q:
            assert tag == "script"
            listed = json.loads(q["x"][0])
            inserted += listed
            body = resource_body("js", int(q["b"][0]), listed).decode()
            assert all(json.dumps(item)[1:-1] in body for item in listed)
    expected = [f"{r.kind}:{resource_url(page, 17, r)}" for r in page.resources if r.via is not None]
    assert sorted(inserted) == sorted(expected)
    # Every resource of the load has a URL of this load.
    for r in page.resources:
        assert re.fullmatch(rf"http://h{r.host}-l17\.p{page.index}\.test/r/17/{r.index}\.{r.ext}\?b={r.size}",
                            resource_url(page, 17, r))  # fmt: skip
    assert unquote(resource_url(page, 17, page.resources[0], injected=["image:http://a/b"])).endswith(
        'x=["image:http://a/b"]'
    )


def test_resources_are_made_from_their_urls() -> None:
    gif = resource_body("gif", 5000)
    assert gif.startswith(b"GIF89a") and len(gif) == 5000
    assert len(resource_body("gif", 10)) > 10  # never less than the image itself
    css = resource_body("css", 3000)
    assert len(css) == 3000 and css.startswith(b"/*") and css.endswith(b"*/")
    js = resource_body("js", 40_000, ["script:http://h2-l1.p0.test/r/1/5.js?b=100"])
    assert len(js) == 40_000 and b"createElement" in js and js.endswith(b"*/")
    with pytest.raises(ValueError):
        resource_body("exe", 10)


def test_the_zone_answers_every_name_of_every_load(tmp_path: Path) -> None:
    names = [host_name(p, load, h) for p, load, h in ((0, 0, 0), (0, 0, 1), (3, 17, 12))]
    text = zone_records(names, "198.18.0.1", 300)
    assert text.splitlines()[0] == "$ORIGIN test."
    assert "h12-l17.p3 300 IN A 198.18.0.1" in text.splitlines()
    with pytest.raises(ValueError):
        zone_records(["www.example.com"], "198.18.0.1", 300)
    # dnscost-engine serve reads it: the names resolve, a name of another load does not.
    need(shutil.which("kdig") is not None, "needs kdig (knot-dnsutils)")
    zone = tmp_path / "corpus.zone"
    zone.write_text(text)
    r = Responder(tmp_path, ["udp://127.0.0.1:0"], extra=["--zone", str(zone)])
    try:
        port = r.endpoints["udp"].port
        import subprocess

        def ask(name: str) -> str:
            out = subprocess.run(["kdig", "@127.0.0.1", "-p", str(port), name, "A"], capture_output=True, text=True,
                                 timeout=10, check=True).stdout  # fmt: skip
            return out

        got = ask("h12-l17.p3.test")
        assert "NOERROR" in got and "198.18.0.1" in got and "300" in got
        assert "NXDOMAIN" in ask("h12-l18.p3.test")
    finally:
        r.stop()


def test_the_plan_interleaves_transports_over_the_same_pages() -> None:
    settings = PageloadSettings(pages=5, rounds=4, transports=("do53", "dot", "doh"), seed=3, loads_per_page=2)
    corpus = make_corpus(settings.corpus, settings.pages, settings.seed)
    sessions = plan_sessions(settings, corpus)
    assert sessions == plan_sessions(settings, corpus)
    assert len(sessions) == 12
    loads = [p for s in sessions for p in s.loads]
    assert [p.load for p in loads] == list(range(len(loads)))  # every load its own names
    orders = set()
    for r in range(4):
        mine = [s for s in sessions if s.round == r]
        assert sorted(s.transport for s in mine) == ["do53", "doh", "dot"]
        orders.add(tuple(s.transport for s in mine))
        pages = {tuple(p.page for p in s.loads[1:]) for s in mine}
        assert len(pages) == 1, "the same pages in the same order for every transport of a round"
        (order,) = pages
        assert sorted(order) == sorted(list(range(5)) * 2)
    assert len(orders) > 1, "the transports' order is shuffled"
    smallest = min(corpus.pages, key=lambda p: p.requests).index
    for s in sessions:
        assert s.loads[0].warmup and s.loads[0].page == smallest and s.loads[0].index == 0
        assert not any(p.warmup for p in s.loads[1:])
        assert [p.index for p in s.loads] == list(range(len(s.loads)))


def _entry(url: str, start: float, dns: tuple[float, float] | None, end: float) -> dict[str, object]:
    a, b = dns or (0, 0)
    return {"name": url, "startTime": start, "domainLookupStart": a, "domainLookupEnd": b, "connectStart": b,
            "connectEnd": b + 0.5 if dns else 0, "requestStart": b + 1 if dns else 0,
            "responseStart": b + 2 if dns else 0, "responseEnd": end}  # fmt: skip


def test_a_load_record_reads_the_page_s_report() -> None:
    corpus = make_corpus(CorpusParams(), 3, 1)
    page = corpus.pages[0]
    from dnscost.clientside.pageload_plan import PlannedLoad

    planned = PlannedLoad(load=9, page=0, index=2, warmup=False)
    common = SessionLabels(preset="lte", browser="chromium", round=1, transport="doh", session=4)
    nav = {"startTime": 0, "domainLookupStart": 1.5, "domainLookupEnd": 4.0, "responseStart": 6.0,
           "domContentLoadedEventEnd": 80.25, "loadEventEnd": 123.4567}  # fmt: skip
    entries = []
    for r in page.resources:
        url = resource_url(page, 9, r)
        entries.append(_entry(url, 10, (10.0, 12.0 + r.host) if r.host else (10.0, 10.0), 50))
    entries.append(_entry(resource_url(page, 9, page.resources[-1]), 11, (11.0, 30.0), 60))  # a second lookup
    rec = load_record(common, planned, page, {"load": 9, "ok": True, "why": None, "nav": nav, "resources": entries})
    assert rec["ok"] and rec["failure"] is None
    assert rec["page_load_us"] == 123457 and rec["dns_us"] == 2500 and rec["dom_content_loaded_us"] == 80250
    assert rec["preset"] == "lte" and rec["load"] == 9 and rec["index"] == 2 and not rec["warmup"]
    assert rec["resources_timed"] == len(page.resources) + 1 and rec["resources_fetched"] == len(page.resources)
    assert rec["hosts_looked_up"] == page.hosts
    last = host_name(0, 9, page.resources[-1].host)
    assert rec["lookups_us"][last] == 19000  # the longest of the host's lookups
    assert rec["lookups_us"][host_name(0, 9, 0)] == 2500  # the navigation's, not its resources' 0
    assert rec["lookups_us"][host_name(0, 9, 1)] == 3000
    # A resource that failed (zeroed entry): the load event came, but the load is incomplete.
    entries[0] = _entry(entries[0]["name"], 10, None, 20)  # type: ignore[arg-type]
    rec = load_record(common, planned, page, {"load": 9, "ok": True, "nav": nav, "resources": entries})
    assert not rec["ok"] and rec["failure"] == "incomplete" and rec["page_load_us"] == 123457
    # The page's own timeout, and no report at all.
    rec = load_record(common, planned, page, {"load": 9, "ok": False, "why": "timeout", "nav": nav, "resources": []})
    assert not rec["ok"] and rec["failure"] == "timeout"
    rec = load_record(common, planned, page, None, "no beacon")
    assert not rec["ok"] and rec["failure"] == "no beacon" and rec["page_load_us"] is None and rec["resources"] == []


def test_the_dns_check_counts_each_session_s_names_by_transport() -> None:
    settings = PageloadSettings(pages=2, rounds=1, transports=("do53", "doh"))
    corpus = make_corpus(settings.corpus, 2, 1)
    sessions = plan_sessions(settings, corpus)
    queries = []
    for s in sessions:
        for p in s.loads:
            for h in range(corpus.pages[p.page].hosts):
                name = host_name(p.page, p.load, h) + "."
                t = "udp" if s.transport == "do53" else "doh"
                queries += [
                    {"qname": name, "qtype": "A", "transport": t},
                    {"qname": name, "qtype": "HTTPS", "transport": t},
                ]
    queries.append({"qname": "_80._https." + host_name(0, 0, 0) + ".", "qtype": "HTTPS", "transport": "udp"})
    queries.append({"qname": "accounts.google.com.", "qtype": "A", "transport": "udp"})
    got = {c["transport"]: c for c in dns_check(queries, sessions, corpus)}
    for c in got.values():
        assert c["names_asked"] == c["names_expected"] > 0
    first = sessions[0].transport
    wire = "udp" if first == "do53" else "doh"
    assert sum(got[first]["queries"].values()) == 2 * got[first]["names_expected"] + 1
    assert set(got[first]["queries"]) == {wire} | ({"udp"} if wire == "doh" else set())
