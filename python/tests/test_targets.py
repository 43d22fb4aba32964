"""Target adapters: counter parsers on output captured from the real tools, the configurations
they write, their errors, and, for every target installed, a full life: start on one CPU with
an upstream on another, health on every transport, counters against the engine's, cgroup,
stop. Tests that start a resolver are marked ``resolver`` (and skipped outside CI when its
package is missing)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from conftest import need
from dnscost.certs import TlsFiles, make_tls
from dnscost.contract import EngineConfig, EngineRecord
from dnscost.engine import Endpoint, Responder, engine_path, generate, summary_of
from dnscost.errors import EngineError, MachineError, TargetError, UsageError
from dnscost.jsonl import read_records
from dnscost.targets import TARGETS, make_target
from dnscost.targets._util import find_binary
from dnscost.targets.base import Counters, Target, TicketKeys, free_port
from dnscost.targets.bind9 import parse_bind_stats
from dnscost.targets.coredns import Coredns, parse_prometheus
from dnscost.targets.dnsdist import parse_dnsdist_stats
from dnscost.targets.knot import kresd_counters, parse_kresd_table
from dnscost.targets.pdns import parse_rec_control
from dnscost.targets.unbound import incoming_num_tcp, parse_unbound_stats
from dnscost.transports import TLS_TRANSPORTS, TRANSPORTS
from dnscost.trial import LoadSettings, fill_cache, run_trial

NAMES = 1000
RESOLVERS = [n for n in TARGETS if n != "builtin"]
FAKE_UPSTREAM = Endpoint("udp", "127.0.0.1", 5399)


def _cpus() -> tuple[int, int]:
    """The target's CPU and the generator's (the upstream shares the generator's)."""
    cpus = sorted(os.sched_getaffinity(0))
    return cpus[0], cpus[1] if len(cpus) > 1 else cpus[0]


def _counters(cls_name: str, fixture: Path) -> Counters:
    return {
        "dnsdist": lambda: parse_dnsdist_stats((fixture / "dnsdist-jsonstat.json").read_text()),
        "knot-resolver": lambda: kresd_counters(
            (fixture / "kresd-stats-list.txt").read_text(), (fixture / "kresd-worker-stats.txt").read_text()
        ),
        "unbound": lambda: parse_unbound_stats((fixture / "unbound-stats-noreset.txt").read_text()),
        "bind9": lambda: parse_bind_stats((fixture / "bind9-json-v1-server.json").read_text()),
        "pdns-recursor": lambda: parse_rec_control((fixture / "rec-control-get-all.txt").read_text()),
        "coredns": lambda: parse_prometheus((fixture / "coredns-metrics.txt").read_text()),
    }[cls_name]()


# --- parsers, on text captured from the real tools after udp, tcp, dot and doh bursts --------


@pytest.mark.parametrize(
    ("name", "queries", "answers", "hits", "misses", "raw_key"),
    [
        ("dnsdist", 7409, 7409, 5421, 1988, "frontend-noerror"),
        ("knot-resolver", 13686, 13686, 12686, 1000, "request.doh"),
        ("unbound", 8891, 8891, 7891, 1000, "num.query.https"),
        ("bind9", 5321, 5321, 4321, 1000, "nsstats.QryTCP"),
        ("pdns-recursor", 4736, 4736, 2736, 2000, "tcp-questions"),
        (
            "coredns",
            11245,
            11245,
            10235,
            1000,
            'coredns_dns_responses_total{plugin="",rcode="REFUSED",server="dns://127.0.0.1:13431",view="",zone="dropped"}',
        ),
    ],
)
def test_counter_parsers_on_captured_output(
    fixtures: Path, name: str, queries: int, answers: int, hits: int, misses: int, raw_key: str
) -> None:
    c = _counters(name, fixtures / "targets")
    assert (c.queries, c.answers, c.cache_hits, c.cache_misses) == (queries, answers, hits, misses)
    assert raw_key in c.raw and all(isinstance(v, int) for v in c.raw.values())


def test_parsers_skip_what_is_not_a_counter(fixtures: Path) -> None:
    d = parse_dnsdist_stats((fixtures / "targets/dnsdist-jsonstat.json").read_text())
    assert "latency-avg100" not in d.raw and "server-policy" not in d.raw  # a float, a string
    k = parse_kresd_table("{\n    ['usertime'] = 0.276381,\n    ['queries'] = 12,\n}")
    assert k == {"queries": 12}
    worker = kresd_counters("", (fixtures / "targets/kresd-worker-stats.txt").read_text())
    assert worker.queries is None and worker.raw["worker.queries"] == 13686
    assert parse_unbound_stats("") == Counters()
    assert parse_rec_control("questions\t5\nbogus line here\n").queries == 5
    with pytest.raises(TargetError):
        parse_bind_stats("<statistics/>")
    with pytest.raises(TargetError):
        parse_dnsdist_stats("[]")


def test_prometheus_parser_reads_coredns_counters_only(fixtures: Path) -> None:
    """The capture (CoreDNS 1.15.0 after udp, tcp, dot and doh bursts and ten queries outside
    the TLD) holds Go's own metrics, histograms and floats written as ``5.825576e+06``: only
    CoreDNS's integer counters and gauges are kept, labels sorted, per server block."""
    c = parse_prometheus((fixtures / "targets/coredns-metrics.txt").read_text())
    assert c.raw['coredns_cache_misses_total{server="dns://127.0.0.1:13431",view="",zones="test.,test.,test."}'] == 1000
    assert (
        c.raw[
            'coredns_cache_hits_total{server="tls://127.0.0.1:30925",type="success",view="",zones="test.,test.,test."}'
        ]
        == 3411
    )
    assert c.raw['coredns_build_info{goversion="go1.26.8",revision="",version="1.15.0"}'] == 1
    assert all(k.startswith("coredns_") and "_bucket" not in k for k in c.raw)
    assert not any(k.startswith("coredns_dns_request_duration_seconds") for k in c.raw)  # a histogram
    text = "\n".join(
        [
            "# TYPE coredns_build_info gauge",
            'coredns_build_info{version="1.15.0",goversion="go1.26.8"} 1',
            "# TYPE coredns_dns_requests_total counter",
            'coredns_dns_requests_total{zone="test.",server="dns://:53",proto="udp"} 1.5e+06',
            'coredns_dns_requests_total{server="tls://:853",proto="tcp",zone="a \\"b\\" }"} 7 1700000000000',
            "# TYPE coredns_dns_responses_total counter",
            'coredns_dns_responses_total{rcode="NOERROR"} 2.5',
            "coredns_dns_responses_total{rcode=NOERROR} 3",
            "# TYPE go_goroutines gauge",
            "go_goroutines 12",
        ]
    )
    c = parse_prometheus(text)
    assert c.queries == 1_500_007 and c.raw == {
        'coredns_build_info{goversion="go1.26.8",version="1.15.0"}': 1,
        'coredns_dns_requests_total{proto="udp",server="dns://:53",zone="test."}': 1_500_000,
        'coredns_dns_requests_total{proto="tcp",server="tls://:853",zone="a \\"b\\" }"}': 7,
    }
    # CoreDNS exports a labelled counter once it has counted: absent from its output means 0,
    # absent from anything else means unknown.
    assert (c.answers, c.cache_hits, c.cache_misses) == (0, 0, 0)
    assert parse_prometheus("") == Counters()
    assert parse_prometheus("# TYPE go_goroutines gauge\ngo_goroutines 12\n") == Counters()


def test_unbound_incoming_tcp_fits_the_open_files_limit() -> None:
    # Measured with unbound 1.17.1 and three interfaces under a limit of 20 000: it starts with
    # at most 6 653 (one thread) or 3 322 (two threads) and refuses beyond.
    assert incoming_num_tcp(20_000, 1, 3) == 6554
    assert incoming_num_tcp(20_000, 2, 3) == 3232
    assert incoming_num_tcp(1_048_576, 1, 1) == 16384
    assert incoming_num_tcp(256, 4, 3) == 10


# --- registry, configurations, errors (no resolver needed) -----------------------------------


def test_registry() -> None:
    assert list(TARGETS) == ["dnsdist", "knot-resolver", "unbound", "bind9", "pdns-recursor", "builtin", "coredns"]
    for name, cls in TARGETS.items():
        assert cls.name == name and cls.binary and set(cls.transports) <= set(TRANSPORTS)
    assert TARGETS["pdns-recursor"].transports == ("udp", "tcp")


def _tls(tmp_path: Path) -> TlsFiles:
    d = tmp_path / "tls"
    return TlsFiles(d / "ca.pem", d / "server.pem", d / "server.key", d / "server-leaf.pem")


def test_unknown_target_and_unsupported_transport(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"^unknown target nsd \(known: dnsdist, knot-resolver, .*builtin, coredns\)$"):
        make_target("nsd", tmp_path, cpus=[0], tls=_tls(tmp_path), upstream=FAKE_UPSTREAM)
    with pytest.raises(UsageError, match=r"^pdns-recursor does not serve dot \(it serves udp, tcp\)$"):
        make_target("pdns-recursor", tmp_path, cpus=[0], tls=_tls(tmp_path), upstream=FAKE_UPSTREAM, transports=["dot"])


@pytest.mark.parametrize(
    ("name", "hint"),
    [("unbound", "install the Debian package unbound (scripts/setup)"), ("coredns", "run scripts/setup")],
)
def test_missing_binary_is_one_clear_line(
    name: str, hint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cls = TARGETS[name]
    monkeypatch.setattr(cls, "binary", f"dnscost-no-such-{name}")
    t = make_target(name, tmp_path / "t", cpus=[0], tls=_tls(tmp_path), upstream=FAKE_UPSTREAM)
    with pytest.raises(MachineError) as e:
        t.start()
    assert str(e.value) == f"{name}: dnscost-no-such-{name} not found: {hint}"
    assert t.cgroup is None and t.child is None
    with pytest.raises(MachineError, match=rf"^{name}: dnscost-no-such-{name} not found"):
        t.version()
    with pytest.raises(MachineError, match=rf"^{name}: dnscost-no-such-{name} not found"):
        cls.locate()


@pytest.mark.parametrize("name", RESOLVERS)
def test_configurations_keep_everything_local(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The settings that keep traffic on loopback and lift the connection limits."""
    fake = tmp_path / "bin" / "server"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'Version 1.0 --with-libnghttp2'\n")
    fake.chmod(0o755)
    monkeypatch.setattr("dnscost.targets.place.find_binary", lambda *_: str(fake))
    t = make_target(name, tmp_path, cpus=[0, 1], tls=_tls(tmp_path), upstream=FAKE_UPSTREAM)
    argv = t.configure()
    assert set(t.endpoints) == set(TARGETS[name].transports)
    assert all(e.host == "127.0.0.1" and e.port > 0 for e in t.endpoints.values())
    assert t.endpoints["udp"].port == t.endpoints["tcp"].port
    text = "\n".join(p.read_text() for p in tmp_path.iterdir() if p.is_file())
    assert argv[0] == str(fake) and any(str(tmp_path) in a for a in argv)
    expected = {
        "dnsdist": [
            'setSecurityPollSuffix("")',
            'address="127.0.0.1:5399"',
            "setTCPRecvTimeout(600)",
            "setMaxTCPClientThreads(2)",
            "reusePort=true",
            "tcpListenQueueSize=4096",
        ],
        "knot-resolver": [
            "modules.unload('priming')",
            "trust_anchors.remove('.')",
            'policy.FORWARD("127.0.0.1@5399")',
            "net.tcp_in_idle(600000)",
            "net.tcp_pipeline(65535)",
        ],
        "unbound": [
            "forward-addr: 127.0.0.1@5399",
            "do-not-query-localhost: no",
            'local-zone: "." refuse',
            'module-config: "iterator"',
            "incoming-num-tcp:",
            "num-threads: 2",
            "control-use-cert: no",
        ],
        "bind9": [
            "forward only;",
            "forwarders { 127.0.0.1 port 5399; };",
            "dnssec-validation no;",
            "controls { };",
            "tcp-idle-timeout 1200;",
            "listen-on port",
            "tls dnscost http dnscost",
        ],
        "pdns-recursor": [
            "forward-zones=test.=127.0.0.1:5399",
            "security-poll-suffix=\n",
            "hint-file=no",
            "dnssec=off",
            "threads=2",
            "client-tcp-timeout=600",
        ],
        "coredns": [
            "bind 127.0.0.1",
            "forward . 127.0.0.1:5399",
            "\nhttps://test.:",  # first in its block: see test_coredns_lifts_its_connection_caps
            " dns://test.:",
            "\nquic://test.:",
            "\nhttps3://test.:",
            "multisocket 2",
            "success 1048576",
            "idle 600s",
            "https {\n        max_connections 0",
            "quic {\n        max_connections 0",
            "https3 {\n        max_connections 0",
            "worker_pool_size 65536",
        ],
    }[name]
    for setting in expected:
        assert setting in text, setting
    assert "port 53;" not in text and ':53"' not in text and "@53\n" not in text


# --- real servers -------------------------------------------------------------------------


def _need_target(name: str) -> None:
    need(os.geteuid() == 0, "needs root (cgroups)")
    try:
        engine_path()
    except MachineError as e:
        need(False, str(e))
    if name != "builtin":
        cls = TARGETS[name]
        try:
            find_binary(cls.binary, cls.name, cls.package)
        except MachineError as e:
            need(False, str(e))


@pytest.fixture
def upstream(tmp_path: Path) -> Iterator[Responder]:
    """``dnscost-engine serve`` for the TLD on the generator's CPU, udp and tcp on one port."""
    _, gen = _cpus()
    port = free_port()
    r = Responder(
        tmp_path / "upstream",
        [f"udp://127.0.0.1:{port}", f"tcp://127.0.0.1:{port}"],
        cpus=[gen],
        synthetic=NAMES,
        tld="test",
        name="upstream",
    )
    yield r
    r.stop()


def _burst(
    target: Target, transport: str, workdir: Path, cpu: int, name: str = "burst", **knobs: object
) -> dict[str, int]:
    """One second of 1 000 qps from the engine over ``transport``, with the engine ``knobs``
    given; its count of queries."""
    ep = target.endpoints[transport]
    config: dict[str, object] = {
        "transport": transport,
        "target": ep.address,
        "rate": 1000,
        "duration_ms": 1000,
        "synthetic": NAMES,
        "tld": "test",
        "timeout_ms": 2000,
        **knobs,
    }
    if transport in TLS_TRANSPORTS:
        config.update(ca_file=str(target.tls.ca), sni="localhost")
    if transport in ("doh", "doh3") and ep.path:
        config["doh_path"] = ep.path
    records = generate(config, workdir, cpus=[cpu], name=f"{name}-{transport}")
    queries: dict[str, int] = records[-1]["total"]["queries"]
    return queries


def _close(server: int | None, engine: int) -> bool:
    return server is not None and abs(server - engine) <= max(2, engine // 100)


@pytest.mark.resolver
@pytest.mark.parametrize("name", list(TARGETS))
def test_target_life(name: str, tmp_path: Path, upstream: Responder) -> None:
    _need_target(name)
    cpu, gen = _cpus()
    tls = make_tls(tmp_path / "tls")
    target = make_target(
        name,
        tmp_path / name,
        cpus=[cpu],
        tls=tls,
        upstream=None if name == "builtin" else upstream.endpoints["udp"],
        synthetic=NAMES,
    )
    try:
        started = time.monotonic()
        target.start()  # health: a name answered NOERROR on every transport
        assert set(target.endpoints) == set(target.transports)
        assert re.match(r"^\d+\.\d+", target.version())
        assert target.child is not None and target.cgroup is not None
        pid, dirs = target.child.pid, list(target.cgroup.dirs.values())
        assert pid in target.cgroup.pids()
        assert os.sched_getaffinity(pid) == {cpu}
        for transport in target.transports:
            before = target.counters()
            sent = _burst(target, transport, tmp_path / "engine", gen)
            after = target.counters()
            target.check_alive()
            # Most of the schedule goes (a stall of the shared VM once left 114 of 1 000 due at
            # the window's end unsent, which the engine counts so); the server answers all sent.
            assert sent["sent"] >= 500 and sent["answered"] == sent["sent"], (transport, sent)
            if name == "builtin":
                assert after == Counters()
                continue
            assert before.queries is not None and after.queries is not None
            assert _close(after.queries - before.queries, sent["sent"]), (transport, before, after, sent)
            assert before.answers is not None and after.answers is not None
            assert _close(after.answers - before.answers, sent["answered"]), (transport, before, after, sent)
        if name != "builtin":
            # The cache stays warm: with policy.STUB, kresd re-asked the upstream every 6 s or so.
            time.sleep(max(0.0, started + 8 - time.monotonic()))
            before = target.counters()
            sent = _burst(target, "udp", tmp_path / "engine", gen)
            after = target.counters()
            assert before.cache_misses is not None and after.cache_misses is not None
            assert after.cache_misses - before.cache_misses <= sent["sent"] // 100, (before, after)
            assert after.cache_hits and after.cache_hits + after.cache_misses >= NAMES
    finally:
        target.stop()
    assert not target.alive() and target.cgroup is None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert not any(d.exists() for d in dirs)
    target.stop()  # twice is harmless


PROXYING = [n for n, cls in TARGETS.items() if cls.proxy_v2_transports]


@pytest.mark.resolver
@pytest.mark.parametrize("name", PROXYING)
def test_a_target_told_to_take_proxy_v2_headers_answers_the_queries_behind_them(
    name: str, tmp_path: Path, upstream: Responder
) -> None:
    """Started to take PROXY v2 headers from the load's address, on every transport it takes
    them over: its health probe (every transport) and a burst on each carry the engine's
    headers and are answered, as the target counts them; dnsdist, which then drops a query
    from that address without one, counts the header of each such query as invalid (its own
    ``proxy-protocol-invalid``) and answers none: it reads the header, it does not skip it."""
    _need_target(name)
    cpu, gen = _cpus()
    cls = TARGETS[name]
    target = make_target(
        name,
        tmp_path / name,
        cpus=[cpu],
        tls=make_tls(tmp_path / "tls"),
        upstream=upstream.endpoints["udp"],
        transports=cls.proxy_v2_transports,
        synthetic=NAMES,
    )
    # Every transport it serves: it does not take headers over all of them.
    everything = make_target(name, tmp_path / "all", cpus=[cpu], tls=target.tls, upstream=upstream.endpoints["udp"])
    with pytest.raises(UsageError, match="does not take PROXY v2 headers over"):
        everything.accept_proxy_v2("10.0.0.0/16", ["127.0.0.1"])
    target.accept_proxy_v2("10.0.0.0/16", ["127.0.0.1"])
    try:
        target.start()  # every probe behind a header
        for transport in cls.proxy_v2_transports:
            before = target.counters()
            sent = _burst(target, transport, tmp_path / "engine", gen, proxy_v2="10.0.0.0/16")
            after = target.counters()
            assert sent["sent"] >= 500 and sent["answered"] == sent["sent"], (transport, sent)
            assert before.answers is not None and after.answers is not None
            assert _close(after.answers - before.answers, sent["answered"]), (transport, before, after, sent)
        if name == "dnsdist":
            before = target.counters()
            with pytest.raises(EngineError, match="no query was answered"):
                _burst(target, "udp", tmp_path / "engine", gen, name="bare")
            after = target.counters()
            assert after.answers == before.answers, (before, after)
            assert after.raw["proxy-protocol-invalid"] > before.raw["proxy-protocol-invalid"], (before, after)
    finally:
        target.stop()


def _counted(before: Counters, after: Counters, key: str) -> int:
    """How much the target's counter ``key`` rose (a counter it leaves out while 0 is 0)."""
    return int(after.raw.get(key, 0)) - int(before.raw.get(key, 0))


@pytest.mark.resolver
def test_pdns_recursor_told_to_act_on_client_subnet_sends_it_to_its_upstream(
    tmp_path: Path, upstream: Responder
) -> None:
    """pdns-recursor started to act on the queries' EDNS Client Subnet (``client_subnet``)
    sends the option on to its upstream with every query it sends there for names it has not
    cached, as its own count of queries sent with one (``ecs-queries``) says; started as
    dnscost starts it otherwise, it sends none for the same queries."""
    _need_target("pdns-recursor")
    cpu, gen = _cpus()
    sent_with: dict[bool, tuple[int, int]] = {}
    for acts in (True, False):
        target = make_target(
            "pdns-recursor",
            tmp_path / f"pdns-{acts}",
            cpus=[cpu],
            tls=make_tls(tmp_path / "tls"),
            upstream=upstream.endpoints["udp"],
            synthetic=NAMES,
        )
        target.client_subnet = acts
        with target:
            before = target.counters()
            # Names it has not cached (q0000.test ..., not the fill's q000.test ...): asked upstream.
            knobs = {"client_subnet": "198.51.100.0/24", "synthetic": NAMES * 10}
            sent = _burst(target, "udp", tmp_path / f"engine-{acts}", gen, **knobs)
            after = target.counters()
        assert sent["answered"] == sent["sent"] >= 500, sent
        sent_with[acts] = (_counted(before, after, "ecs-queries"), _counted(before, after, "all-outqueries"))
    (ecs, out), (ecs_untold, out_untold) = sent_with[True], sent_with[False]
    assert out >= 100 and out_untold >= 100, sent_with  # names it has not cached: asked upstream
    assert ecs == out, sent_with
    assert ecs_untold == 0, sent_with


@pytest.mark.resolver
def test_a_trial_sending_client_subnet_configures_the_target_that_acts_on_it(tmp_path: Path) -> None:
    """A trial whose engine sends ECS starts pdns-recursor acting on it (its configuration file
    says so) and records it; the same trial without the option leaves it out of both."""
    _need_target("pdns-recursor")
    for ecs in (True, False):
        engine: dict[str, object] = {"rate": 1000, "duration_ms": 1000, "warmup_ms": 200}
        if ecs:
            engine["client_subnet"] = "198.51.100.0/24"
        record = run_trial(
            LoadSettings("pdns-recursor", "udp", engine, names=NAMES, baseline_s=0.5), tmp_path / str(ecs)
        )
        assert record["status"] == "done", record.get("error")
        assert record.get("client_subnet") == ("acted on" if ecs else None), record.get("client_subnet")
        (conf,) = (tmp_path / str(ecs)).glob("**/recursor.conf")
        assert ("use-incoming-edns-subnet=yes" in conf.read_text()) == ecs


def _learn_cookie(target: Target, client: bytes) -> bytes:
    """The server cookie ``target`` gives the client cookie ``client`` from 127.0.0.1, as
    dnspython (an independent client) learns it."""
    import dns.edns
    import dns.message
    import dns.query

    ep = target.endpoints["udp"]
    query = dns.message.make_query("q0.test", "A", use_edns=0)
    query.use_edns(0, options=[dns.edns.GenericOption(dns.edns.OptionType.COOKIE, client)])
    answer = dns.query.udp(query, ep.host, port=ep.port, timeout=5, source="127.0.0.1")
    (cookie,) = [o.to_wire() for o in answer.options if o.otype == dns.edns.OptionType.COOKIE]
    assert cookie[:8] == client and len(cookie) == 24, cookie.hex()  # RFC 9018: version 1, 16 octets
    return cookie[8:]


@pytest.mark.resolver
def test_bind9_makes_server_cookies_for_client_cookies_and_knows_its_own_after_a_restart(
    tmp_path: Path, upstream: Responder
) -> None:
    """bind9 answers the engine's client cookie alone with a new server cookie each time
    (``CookieNew``), knows the server cookie it gave dnspython for that client cookie when the
    engine sends both (``CookieMatch``), also in a named started again (one ``cookie-secret``),
    and knows a server cookie changed in one octet for another's (``CookieNoMatch``): its own
    counters say so of every query."""
    _need_target("bind9")
    cpu, gen = _cpus()
    client = bytes.fromhex("5ca1ab1e0ddba115")

    def started(name: str) -> Target:
        return make_target(
            "bind9", tmp_path / name, cpus=[cpu], tls=make_tls(tmp_path / "tls"),
            upstream=upstream.endpoints["udp"], transports=["udp"], synthetic=NAMES,
        )  # fmt: skip

    with started("first") as target:
        server = _learn_cookie(target, client)
        forged = server[:-1] + bytes([server[-1] ^ 1])
        for cookie, counter in (
            (client, "CookieNew"),
            (client + server, "CookieMatch"),
            (client + forged, "CookieNoMatch"),
        ):
            before = target.counters()
            sent = _burst(target, "udp", tmp_path / "engine", gen, name=counter, cookie=cookie.hex())
            after = target.counters()
            assert sent["answered"] == sent["sent"] >= 500, (counter, sent)
            assert _close(_counted(before, after, "nsstats.CookieIn"), sent["sent"]), (counter, before, after, sent)
            assert _close(_counted(before, after, f"nsstats.{counter}"), sent["sent"]), (counter, before, after, sent)
    with started("again") as target:
        before = target.counters()
        sent = _burst(target, "udp", tmp_path / "engine", gen, name="again", cookie=(client + server).hex())
        after = target.counters()
        assert _close(_counted(before, after, "nsstats.CookieMatch"), sent["sent"]), (before, after, sent)


SPLITTING = [n for n, cls in TARGETS.items() if cls.splits]


def _holders(port: int) -> dict[int, int]:
    """Per PID, the established TCP connections on local ``port``, as the kernel lists them
    (``ss``: an observer other than the server and the engine)."""
    out = subprocess.run(
        ["ss", "-Htnp", "state", "established", f"( sport = :{port} )"], capture_output=True, text=True, check=True
    ).stdout
    held: dict[int, int] = {}
    for pid in re.findall(r"pid=(\d+)", out):
        held[int(pid)] = held.get(int(pid), 0) + 1
    return held


def test_the_targets_that_split_are_those_that_share_their_ports() -> None:
    assert sorted(SPLITTING) == ["builtin", "dnsdist", "knot-resolver", "pdns-recursor", "unbound"]


@pytest.mark.resolver
@pytest.mark.parametrize("name", SPLITTING)
def test_several_processes_share_the_ports_and_the_connections(name: str, tmp_path: Path, upstream: Responder) -> None:
    """Three processes of one target: each listens on every TCP port, in the target's cgroup;
    300 connections are spread over all three (the kernel's count); the counters summed over
    the processes are the engine's queries; the cache is warm in every process."""
    _need_target(name)
    cpu, gen = _cpus()
    # Over DoT where it serves it (pdns-recursor serves plain DNS only: over TCP).
    stream = "dot" if "dot" in TARGETS[name].transports else "tcp"
    transports = sorted({"udp", "tcp", stream})
    target = make_target(
        name,
        tmp_path / name,
        cpus=[cpu],
        tls=make_tls(tmp_path / "tls"),
        upstream=None if name == "builtin" else upstream.endpoints["udp"],
        transports=transports,
        synthetic=NAMES,
        processes=3,
    )
    try:
        target.start()
        pids = [c.pid for c in target.children]
        assert len(set(pids)) == 3 and target.cgroup is not None and set(pids) <= set(target.cgroup.pids())
        for transport in sorted({"tcp", stream}):
            listening = subprocess.run(
                ["ss", "-Htlnp", f"( sport = :{target.endpoints[transport].port} )"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            assert {int(p) for p in re.findall(r"pid=(\d+)", listening)} == set(pids), listening
        if name != "builtin":
            fill_cache(target, tmp_path / "fill", [gen], NAMES, transports)
        before = target.counters()
        ep = target.endpoints[stream]
        config: dict[str, object] = {
            "transport": stream,
            "target": ep.address,
            "connections": 300,
            "open_first": True,
            "open_rate": 3000,
            "rate": 600,
            "warmup_ms": 500,
            "duration_ms": 3000,
            "synthetic": NAMES,
            "tld": "test",
            "timeout_ms": 2000,
            **target.client_tls(stream),
        }
        with ThreadPoolExecutor(1) as pool:
            running = pool.submit(generate, config, tmp_path / "engine", cpus=[gen], name="spread")
            time.sleep(2.5)  # every connection open (300 at 3 000 a second), the load running
            held = _holders(ep.port)
            records = running.result(timeout=60)
        after = target.counters()
        target.check_alive()
        assert set(held) == set(pids) and sum(held.values()) >= 300, held
        assert min(held.values()) >= 40, held  # each of three: about 100 (binomial, 300 draws)
        queries = records[-1]["total"]["queries"]
        assert queries["answered"] == queries["sent"] > 1000, queries
        if name == "builtin":
            logs = sorted((tmp_path / name).glob("connections.*.jsonl"))
            assert [p.name for p in logs] == [f"connections.{i}.jsonl" for i in range(3)]
        else:
            assert after.queries is not None and before.queries is not None
            assert _close(after.queries - before.queries, queries["sent"]), (before, after, queries)
            assert after.cache_misses is not None and before.cache_misses is not None
            assert after.cache_misses - before.cache_misses <= queries["sent"] // 100, (before, after)
    finally:
        target.stop()
    assert not any(os.path.exists(f"/proc/{p}") for p in pids)
    if name == "builtin":  # each process wrote its own log as it stopped
        assert sum(len(read_records(p)) for p in (tmp_path / name).glob("connections.*.jsonl")) >= 300


def test_a_target_that_cannot_split_says_so(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="runs as one process"):
        make_target("bind9", tmp_path, cpus=[0], tls=make_tls(tmp_path / "tls"), upstream=FAKE_UPSTREAM, processes=2)


@pytest.mark.resolver
def test_coredns_lifts_its_connection_caps(tmp_path: Path, upstream: Responder) -> None:
    """CoreDNS 1.15 serves at most 200 DoH, DoQ or DoH/3 connections each unless told
    otherwise, and applies a server block's ``https`` settings to the block's first key only:
    300 connections at once are all served on each. Go gets as many threads as CoreDNS has
    CPUs."""
    _need_target("coredns")
    cpu, gen = _cpus()
    target = make_target(
        "coredns",
        tmp_path / "coredns",
        cpus=[cpu],
        tls=make_tls(tmp_path / "tls"),
        upstream=upstream.endpoints["udp"],
        synthetic=NAMES,
        transports=["doh", "doq", "doh3"],
    )
    assert isinstance(target, Coredns)
    try:
        target.start()
        assert set(target.endpoints) == {"doh", "doq", "doh3"}
        assert target.child is not None
        assert b"GOMAXPROCS=1" in Path(f"/proc/{target.child.pid}/environ").read_bytes().split(b"\0")
        for transport in ("doh", "doq", "doh3"):
            ep = target.endpoints[transport]
            config: dict[str, object] = {
                "transport": transport,
                "target": ep.address,
                "ca_file": str(target.tls.ca),
                "sni": "localhost",
                "connections": 300,
                "rate": 300,
                "duration_ms": 2000,
                "synthetic": NAMES,
                "tld": "test",
                "timeout_ms": 1000,
            }
            if ep.path:
                config["doh_path"] = ep.path
            if transport in ("doq", "doh3"):
                # quic-go refuses a connection whose handshake ends while its accept queue (32)
                # is full (CONNECTION_REFUSED): open at a pace CoreDNS accepts, all before the
                # measured period.
                config.update(open_rate=150, open_first=True, warmup_ms=2500)
            config["connections_log"] = str(tmp_path / f"conns-{transport}.jsonl")
            records = generate(config, tmp_path / "engine", cpus=[gen], name=f"caps-{transport}")
            summary = records[-1]
            total, measured = summary["total"], summary["measured"]
            assert total["connections"]["established"] == 300 and not total["connections"]["failed"], (
                transport,
                json.dumps(total["connections"]),
                [c for c in read_records(tmp_path / f"conns-{transport}.jsonl") if c.get("error")][:3],
            )
            # Every query sent answered (one due as the run stops may go unsent); the measured
            # window offers 2 s at 300 qps, give or take the one a pacing tick puts on its edge,
            # and answers them, less those still in flight at its end, plus those in flight at
            # its start (the CI here once saw 602: answers of the warm-up's last queries).
            assert total["queries"]["answered"] == total["queries"]["sent"], total["queries"]
            q = measured["queries"]
            assert abs(q["offered"] - 600) <= 1, measured
            warm = [r for r in records if r["type"] == "interval" and r["phase"] == "warmup"]
            before = warm[-1]["queries"]["in_flight"] if warm else 0
            assert q["answered"] == before + q["offered"] - q["in_flight"], (before, q)
    finally:
        target.stop()


def test_a_cache_fill_short_of_its_names_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fill whose tries all fall short (here: no loss allowed at all, so never enough) fails in
    one line naming its records, after sending every name each try; a fill of a target that
    answers nothing (its port closed) fails in one line at once, and so does one of a target
    that is gone, said gone."""
    import dnscost.trial

    monkeypatch.setattr(dnscost.trial, "FILL_ATTEMPTS", 2)
    monkeypatch.setattr(dnscost.trial, "FILL_LOST", -1.0)
    cpu, gen = _cpus()
    target = make_target(
        "builtin",
        tmp_path / "builtin",
        cpus=[cpu],
        tls=_tls(tmp_path),
        upstream=None,
        transports=["udp"],
        synthetic=1000,
    )
    target.start()
    try:
        with pytest.raises(TargetError) as e:
            fill_cache(target, tmp_path / "fill", [gen], 1000, ["udp"])
        served = target.endpoints
        target.endpoints = {"udp": Endpoint("udp", "127.0.0.1", free_port())}  # nothing listens there
        with pytest.raises(TargetError) as deaf:
            fill_cache(target, tmp_path / "deaf", [gen], 1000, ["udp"])
        target.endpoints = served
    finally:
        target.stop()
    message = str(e.value)
    assert re.fullmatch(
        rf"builtin: the cache fill over udp sent \d+ queries for 1000 names and lost 0 \(timed out or failed\) "
        rf"in 2 tries \({re.escape(str(tmp_path / 'fill' / 'fill-udp'))}\.jsonl\)",
        message,
    ), message
    for records in ("fill-udp.jsonl", "fill-udp-1.jsonl"):  # each try asked every name, in a closed loop
        q = summary_of(read_records(tmp_path / "fill" / records))["total"]["queries"]
        assert q["sent"] >= 1000 + 256 and q["answered"] >= 1000, q
    assert "\n" not in str(deaf.value), str(deaf.value)
    assert str(deaf.value).startswith("builtin: the cache fill over udp failed: dnscost-engine exited with code 4"), (
        deaf.value
    )
    with pytest.raises(TargetError) as e:
        fill_cache(target, tmp_path / "dead", [gen], 1000, ["udp"])
    assert str(e.value) == "builtin died: exited with code 0", e.value  # as it does when stopped


@pytest.mark.resolver
def test_a_target_killed_during_its_cache_fill_is_said_dead(
    tmp_path: Path, upstream: Responder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """dnsdist killed (SIGKILL) once its fill's engine has started read as a failed fill ("the
    cache fill over udp failed: ... Connection refused"): it is said dead, with its signal, as a
    target killed while measured is."""
    import dnscost.trial

    _need_target("dnsdist")
    cpu, gen = _cpus()
    target = make_target(
        "dnsdist",
        tmp_path / "dnsdist",
        cpus=[cpu],
        tls=_tls(tmp_path),
        upstream=upstream.endpoints["udp"],
        transports=["udp"],
        synthetic=NAMES,
    )
    real = dnscost.trial.generate

    def killing_the_target(config: EngineConfig, workdir: Path, **kw: Any) -> list[EngineRecord]:
        child = target.child
        assert child is not None
        return real(config, workdir, **kw, started=lambda _: os.kill(child.pid, signal.SIGKILL))

    target.start()
    try:
        monkeypatch.setattr(dnscost.trial, "generate", killing_the_target)
        with pytest.raises(TargetError) as e:
            fill_cache(target, tmp_path / "fill", [gen], NAMES, ["udp"])
    finally:
        target.stop()
    assert str(e.value) == "dnsdist died: killed by signal 9 (SIGKILL)", e.value


@pytest.mark.resolver
def test_failed_start_leaves_nothing(tmp_path: Path) -> None:
    """A server that exits at once: TargetError with its log, no process, no cgroup."""
    _need_target("unbound")
    cpu, _ = _cpus()

    class Broken(TARGETS["unbound"]):  # type: ignore[misc,valid-type]
        def configure(self) -> list[str]:
            argv: list[str] = super().configure()
            (self.workdir / "unbound.conf").write_text("server:\n    no-such-option: yes\n")
            return argv

    t = Broken(tmp_path, cpus=[cpu], tls=make_tls(tmp_path / "tls"), upstream=FAKE_UPSTREAM)
    # The cause (unbound's first error line), not its closing "fatal error: Could not read config file".
    cause = r"\S*unbound.conf:2: error: unknown keyword 'no-such-option'"
    with pytest.raises(TargetError, match=rf"^unbound ended on udp: exited with code 1: {cause}$"):
        t.start(health_timeout=5)
    assert t.cgroup is None and t.child is not None and not t.child.alive()


@pytest.mark.resolver
@pytest.mark.parametrize("name", RESOLVERS)
def test_nothing_leaves_loopback(name: str, tmp_path: Path, upstream: Responder) -> None:
    """Under strace, the server sends only to loopback: no root priming, no security poll, no
    trust-anchor update, also when asked for names outside the TLD and for the root."""
    _need_target(name)
    if shutil.which("strace") is None:
        pytest.skip("strace is not installed")
    cpu, gen = _cpus()
    target = make_target(
        name,
        tmp_path / name,
        cpus=[cpu],
        tls=make_tls(tmp_path / "tls"),
        upstream=upstream.endpoints["udp"],
        synthetic=NAMES,
        transports=["udp"],
    )
    target.workdir.mkdir(parents=True)
    argv = target.configure()
    trace = tmp_path / "strace.txt"
    queries = tmp_path / "queries.txt"
    queries.write_text("q0001.test A\nexample.com A\n. NS\n. DNSKEY\nwww.example.net AAAA\n")
    with (tmp_path / "server.log").open("wb") as log:
        proc = subprocess.Popen(
            ["strace", "-f", "-qq", "-e", "trace=connect,sendto,sendmsg,sendmmsg", "-o", str(trace), *argv],
            cwd=target.workdir,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 60  # under strace -f, on a loaded 2-core VM: 20 s was once short
        while not target.answers("udp"):
            assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "server.log").read_text()
            time.sleep(0.2)
        generate(
            {
                "transport": "udp",
                "target": target.endpoints["udp"].address,
                "rate": 20,
                "duration_ms": 1000,
                "queries_file": str(queries),
                "timeout_ms": 1500,
            },
            tmp_path,
            cpus=[gen],
            name="outside",
        )
        time.sleep(1)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        target.stop()  # removes what configure() made (a socket symlink), started nothing here
    text = trace.read_text()
    v4 = set(re.findall(r'sin_addr=inet_addr\("([^"]+)"\)', text))
    v6 = set(re.findall(r'inet_pton\(AF_INET6, "([^"]+)"', text))
    assert v4 <= {"127.0.0.1"} and not v6, (v4, v6)
    assert f"sin_port=htons({upstream.endpoints['udp'].port})" in text  # it did use the upstream


def test_port_taken_after_its_choice_is_chosen_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A port another process binds between free_port() and the server's own bind (the
    generator's outgoing connections did this in CI) costs a retry, not a failed trial."""
    import dnscost.targets.builtin as builtin

    taken = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    taken.bind(("127.0.0.1", 0))
    port = taken.getsockname()[1]
    real = builtin.free_port
    offered = iter([port])
    monkeypatch.setattr(builtin, "free_port", lambda: next(offered, None) or real())
    target = make_target(
        "builtin", tmp_path / "b", cpus=[_cpus()[0]], tls=make_tls(tmp_path / "tls"), upstream=None, transports=["udp"]
    )
    try:
        target.start()
        assert target.endpoints["udp"].port != port
        assert "Address already in use" in (tmp_path / "b" / "builtin.log").read_text()
    finally:
        target.stop()
        taken.close()


def test_free_ports_are_below_the_ephemeral_range() -> None:
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    ports = {free_port() for _ in range(20)}
    assert len(ports) > 1 and all(p < low for p in ports), (low, ports)


def _s_client(address: tuple[str, int], *, sess_in: Path | None, sess_out: Path) -> tuple[bool, int]:
    """One TLS 1.3 connection by OpenSSL's own client (an observer other than the engine):
    whether it resumed, and how many session tickets the server sent it. The connection stays
    open 0.3 s, so that the tickets sent after the handshake arrive."""
    argv = ["openssl", "s_client", "-connect", f"{address[0]}:{address[1]}", "-tls1_3", "-msg"]
    argv += ["-sess_out", str(sess_out), *(["-sess_in", str(sess_in)] if sess_in else [])]
    pipe = subprocess.PIPE
    with subprocess.Popen(argv, stdin=pipe, stdout=pipe, stderr=subprocess.DEVNULL, text=True) as p:
        time.sleep(0.3)
        out, _ = p.communicate(timeout=10)
    (verdict,) = re.findall(r"^(New|Reused), TLSv1\.3", out, re.M)
    return verdict == "Reused", len(re.findall(r"^<<< .*NewSessionTicket", out, re.M))


def _delta(target: Target, before: Counters, transport: str, name: str) -> int:
    """How much dnsdist's counter ``name`` of ``transport`` grew since ``before``."""
    key = f"frontend.{transport}.{name}"
    return target.counters().raw[key] - before.raw.get(key, 0)


@pytest.mark.resolver
def test_dnsdist_told_to_keep_one_ticket_key_refuses_the_tickets_of_the_key_before(
    tmp_path: Path, upstream: Responder
) -> None:
    """dnsdist making a new session-ticket key every second, over DoT and DoH.

    OpenSSL's own client first: a full handshake gets two tickets, a resumption none (dnsdist
    asks OpenSSL for no new ticket unless the offered one was sealed with an older key, and
    then for one: its ``tlsInactiveTicketKey``), and two seconds later the same ticket is
    refused with one key kept (its ``tlsUnknownTicketKey``; the handshake is full) and renewed
    with five.

    Then the engine, reconnecting every 5 queries and resuming. Kept 1 (as GnuTLS keeps), it
    refuses tickets sealed before a rotation and those handshakes are full; kept 5 (its
    default), it refuses none and decrypts them with the older key. Its count of new sessions
    is the engine's of full handshakes and its count of resumptions the engine's resumed ones.
    And every ticket is used once: the engine, like every TLS 1.3 client that follows RFC 8446
    (C.4), offers a ticket once, so the tickets dnsdist issued (two per full handshake, one per
    renewal) are the tickets offered (resumptions, and refused ones) and a few left unused at
    the end, which is why about a third of the reconnections make a full handshake with five
    keys kept as with one (docs/ticket-keys.md)."""
    _need_target("dnsdist")
    need(shutil.which("openssl") is not None, "needs openssl's s_client")
    cpu, gen = _cpus()
    tls = make_tls(tmp_path / "tls")
    seen: dict[tuple[str, int], dict[str, int]] = {}
    for kept in (1, 5):
        target = make_target(
            "dnsdist",
            tmp_path / f"kept{kept}",
            cpus=[cpu],
            tls=tls,
            upstream=upstream.endpoints["udp"],
            transports=("udp", "dot", "doh"),
            synthetic=NAMES,
        )
        target.rotate_ticket_keys(TicketKeys(rotation_s=1, kept=kept))
        with target:
            conf = (target.workdir / "dnsdist.conf").read_text()
            assert conf.count(f"ticketsKeysRotationDelay=1, numberOfTicketsKeys={kept}") == 2  # dot and doh

            dot = (target.endpoints["dot"].host, target.endpoints["dot"].port)
            first, again = tmp_path / f"first{kept}.pem", tmp_path / f"again{kept}.pem"
            # A full handshake, then a resumption at once with its ticket: what dnsdist counts
            # of the ticket's key says what the client gets (a rotation may fall between the two).
            plain = 0
            for _ in range(10):
                assert _s_client(dot, sess_in=None, sess_out=first) == (False, 2)
                before = target.counters()
                got = _s_client(dot, sess_in=first, sess_out=again)
                unknown = _delta(target, before, "dot", "tlsUnknownTicketKey")
                inactive = _delta(target, before, "dot", "tlsInactiveTicketKey")
                assert got == ((False, 2) if unknown else (True, inactive)), (got, unknown, inactive)
                plain += got == (True, 0)
                if plain == 2:
                    break
            assert plain == 2  # sealed with the newest key: resumed, and no new ticket
            # A 1 s rotation does not set the tickets' lifetime: OpenSSL's 7 200 s, as the
            # client stored it from the ticket's lifetime hint.
            stored = subprocess.run(["openssl", "sess_id", "-in", str(first), "-noout", "-text"], capture_output=True)
            assert re.search(rb"Timeout\s*:\s*7200 \(sec\)", stored.stdout), stored.stdout
            time.sleep(2.2)  # a rotation at least: the ticket's key is no longer the newest
            before = target.counters()
            resumed, tickets = _s_client(dot, sess_in=first, sess_out=again)
            if kept == 1:
                assert (resumed, tickets, _delta(target, before, "dot", "tlsUnknownTicketKey")) == (False, 2, 1)
            else:
                assert (resumed, tickets, _delta(target, before, "dot", "tlsInactiveTicketKey")) == (True, 1, 1)

            for transport in ("dot", "doh"):
                before = target.counters()
                ep = target.endpoints[transport]
                config: dict[str, object] = {
                    "transport": transport,
                    "target": ep.address,
                    "rate": 200,
                    "duration_ms": 6000,
                    "connections": 4,
                    "lifetime": {"duration_ms": None, "queries": 5},
                    "resumption": 1.0,
                    "synthetic": NAMES,
                    "tld": "test",
                    "timeout_ms": 2000,
                    "ca_file": str(tls.ca),
                    "sni": "localhost",
                    **({"doh_path": ep.path} if ep.path else {}),
                }
                records = generate(config, tmp_path / f"engine-{kept}", cpus=[gen], name=f"stek-{transport}")
                counted = {
                    c: _delta(target, before, transport, c)
                    for c in ("tlsNewSessions", "tlsResumptions", "tlsUnknownTicketKey", "tlsInactiveTicketKey")
                }
                handshakes = records[-1]["total"]["handshakes"]
                counted |= {"full": handshakes["full"], "resumed": handshakes["resumed"]}
                seen[(transport, kept)] = counted
                assert counted["tlsNewSessions"] == counted["full"], counted
                assert counted["tlsResumptions"] == counted["resumed"], counted
                assert counted["resumed"] > 100, counted  # about 240 connections, the first 4 full
                # Every ticket issued offered once, or still held at the end (a few per slot).
                issued = 2 * counted["full"] + counted["tlsInactiveTicketKey"]
                offered = counted["resumed"] + counted["tlsUnknownTicketKey"]
                assert 0 <= issued - offered <= 2 * 4 + 2, counted
    for transport in ("dot", "doh"):
        one, five = seen[(transport, 1)], seen[(transport, 5)]
        # One key: tickets sealed before a rotation refused, none decrypted with an older key.
        assert one["tlsUnknownTicketKey"] >= 1 and one["tlsInactiveTicketKey"] == 0, one
        # Five: none refused for its key, some decrypted with an older one.
        assert five["tlsUnknownTicketKey"] == 0 and five["tlsInactiveTicketKey"] >= 1, five


def test_ticket_keys_for_a_target_or_load_without_them_are_one_line() -> None:
    from dnscost.targets.base import check_ticket_keys

    check_ticket_keys("dnsdist", ("dot", "doh"), ["dot"])
    with pytest.raises(UsageError, match=r"^dnsdist: session-ticket keys are rotated over dot, doh only, not udp$"):
        check_ticket_keys("dnsdist", ("dot", "doh"), ["udp", "dot"])
    with pytest.raises(UsageError, match=r"^unbound: dnscost cannot have it rotate its session-ticket keys"):
        check_ticket_keys("unbound", (), ["dot"])
    with pytest.raises(UsageError, match=r"whole number of seconds"):
        TicketKeys(rotation_s=0.5)
    with pytest.raises(UsageError, match=r"^ticket keys kept: 0 is out of range 1..=64$"):
        TicketKeys(rotation_s=10, kept=0)


def test_session_limits_for_a_target_load_or_release_without_them_are_one_line(tmp_path: Path) -> None:
    from dnscost.targets.base import SessionLimits, check_session_limits

    check_session_limits("dnsdist", ("dot", "doh"), ["doh"])
    with pytest.raises(UsageError, match=r"^dnsdist: new TLS sessions are limited over dot, doh only, not tcp$"):
        check_session_limits("dnsdist", ("dot", "doh"), ["tcp"])
    with pytest.raises(UsageError, match=r"^knot-resolver: dnscost cannot give it a per-client new-session limit"):
        check_session_limits("knot-resolver", (), ["dot"])
    with pytest.raises(UsageError, match=r"^new-session limit: 0 a second is out of range"):
        SessionLimits(0)
    with pytest.raises(UsageError, match=r"^ban: 0 s is out of range"):
        SessionLimits(10, ban_s=0)
    # Debian 12's dnsdist (1.7) has no such limit: refused when it is configured, before it starts.
    need(shutil.which("dnsdist") is not None, "needs dnsdist")
    tls = make_tls(tmp_path / "tls")
    target = make_target("dnsdist", tmp_path / "d", cpus=[0], tls=tls, upstream=FAKE_UPSTREAM, transports=("dot",))
    target.limit_sessions(SessionLimits(10))
    need(target.major_version() < 2, "the host's dnsdist has the limit")
    with pytest.raises(UsageError, match=r"^dnsdist 1\.\S+ has no per-client new-session limit"):
        target.configure()


def test_proxy_v2_headers_to_a_target_that_cannot_take_them_are_one_line() -> None:
    from dnscost.trial import check_proxy_v2

    check_proxy_v2("dnsdist", ["udp", "tcp"])
    line = "dnsdist does not take PROXY v2 headers over dot as dnscost configures it (it does over udp, tcp)"
    with pytest.raises(UsageError, match=f"^{re.escape(line)}$"):
        check_proxy_v2("dnsdist", ["udp", "dot"])
    with pytest.raises(UsageError, match=r"^unbound does not take .* over udp .*\(it takes none over any transport\)$"):
        check_proxy_v2("unbound", ["udp"])
