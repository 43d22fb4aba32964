"""`dnscost load` end to end: every target Debian provides (and builtin), every transport it
serves: start, fill, two seconds of load, stop; then the faults."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import need
from dnscost.contract import ClientClass
from dnscost.errors import MachineError
from dnscost.population import Replay
from dnscost.proc import _live
from dnscost.targets import TARGETS
from dnscost.targets import coredns as coredns_module
from dnscost.transports import POPULATION
from dnscost.trial import LoadSettings, run_trial

DNSCOST = [sys.executable, "-m", "dnscost.cli"]


def installed(name: str) -> bool:
    try:
        TARGETS[name].locate()
    except MachineError:
        return False
    return True


def pids_of_children() -> list[int]:
    """Processes whose parent is this test process."""
    me, out = os.getpid(), []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == me and fields[0] != "Z":
            out.append(int(stat.parent.name))
    return out


@pytest.mark.resolver
@pytest.mark.parametrize("target", list(TARGETS))
def test_every_transport_of_a_target_in_one_trial(root: None, tmp_path: Path, target: str) -> None:
    """One trial per target loads every transport it serves at once (a population of one class
    per transport, each at 250 qps over 4 connections): one bed, started and filled once. The
    trial is complete (CPU, memory, energy, cache, answers against the target's own count), and
    each transport answered its whole rate without loss, as the target itself counted it where it
    counts per transport."""
    need(installed(target), f"{target} is not installed")
    transports = TARGETS[target].transports
    classes: list[ClientClass] = [
        {"name": t, "config": {"transport": t, "connections": 4, "rate": 250.0}} for t in transports
    ]
    settings = LoadSettings(
        target,
        POPULATION,
        {"duration_ms": 2000, "warmup_ms": 500},
        target_cpus=[0],
        generator_cpus=[1],
        names=2000,
        baseline_s=0.5,
        population=Replay("one class per transport", 1.0, classes, 250.0 * len(classes)),
    )
    record = run_trial(settings, tmp_path)
    s, v = record["summary"], record["summary"]["validity"]
    assert record["status"] == "done"
    assert v["accounting_balanced"] and v["loss"] is not None and v["loss"] < 0.01, v
    assert s["target_cpu_us_per_query"] > 0
    assert s["meter"]["rss_bytes_mean"] > 0 and s["meter"]["cgroup_usage_bytes_mean"] > 0
    assert s["energy_j"] is not None and s["energy_source"] in ("rapl", "model")
    if target != "builtin":
        assert record["cache_hit_ratio"] is None or record["cache_hit_ratio"] >= 0.99, record["cache_hit_ratio"]
    if v["target_answered"] is not None:
        assert v["answer_count_agreement"] >= 0.99, v
    # Every transport, counted apart: its whole rate answered, and where the target counts per
    # transport, as many queries as the engine answered.
    assert [c["transport"] for c in s["classes"]] == list(transports)
    for c in s["classes"]:
        assert abs(c["answered_qps"] - 250.0) <= 0.02 * 250.0, c
        assert c["queries_answered"] >= 0.99 * c["queries_offered"], c
    agreement = s["transports"]
    counted = [t for t, a in agreement.items() if a["target_queries"] is not None]
    assert counted == (list(transports) if TARGETS[target].transport_counters else []), agreement
    assert all(agreement[t]["agreement"] >= 0.99 for t in counted), agreement
    on_disk = json.loads((tmp_path / "trial.json").read_text())
    assert on_disk["status"] == "done" and on_disk["summary"]["answered_qps"] == s["answered_qps"]
    assert not _live and not pids_of_children()


@pytest.mark.resolver
@pytest.mark.parametrize("target", ["unbound", "pdns-recursor", "coredns", "bind9", "builtin"])
def test_a_captures_own_names_are_forwarded_and_answered(root: None, tmp_path: Path, target: str) -> None:
    """A trial asking a capture's own names (outside the synthetic TLD) through each resolver
    whose forwarding is configured by dnscost (knot-resolver and dnsdist are in
    test_population_replay): every name answered NOERROR, the upstream asked for the names (its
    own log), and the cache answering the names asked again."""
    need(installed(target), f"{target} is not installed")
    names = Path(__file__).parents[1] / "dnscost" / "experiments" / "populations" / "operator-names.txt"
    classes: list[ClientClass] = [{"name": "stub", "config": {"transport": "udp", "connections": 4, "rate": 1000.0}}]
    settings = LoadSettings(
        target,
        POPULATION,
        {"duration_ms": 1500, "warmup_ms": 500},
        target_cpus=[0],
        generator_cpus=[1],
        baseline_s=0.2,
        population=Replay("capture", 1.0, classes, 1000.0, names=str(names), repeat_share=0.66, names_queries=6600),
    )
    record = run_trial(settings, tmp_path)
    assert record["status"] == "done", record.get("error")
    summary = json.loads((tmp_path / "engine.jsonl").read_text().splitlines()[-1])
    queries = summary["total"]["queries"]
    assert set(queries["rcodes"]) == {"noerror"} and queries["answered"] > 1500, queries
    replayed = record["names_replayed"]
    if target == "builtin":  # answers itself: no upstream, no cache
        assert "upstream_queries" not in record
        return
    # The upstream (its own log) asked once per name the cache did not hold, and no more: no
    # priming or minimisation queries of the resolver's own (pdns-recursor forwarding every name
    # as to an authoritative server asked for the root's NS on every query).
    upstream, v = record["upstream_queries"], record["summary"]["validity"]
    assert 0.99 * replayed["distinct"] - 10 <= upstream <= 1.01 * replayed["distinct"] + 10, (upstream, replayed)
    if v["cache_hit_ratio"] is not None:  # and the resolver's own count of its hits agrees
        assert abs((1 - v["cache_hit_ratio"]) - upstream / v["target_answered"]) <= 0.02, (upstream, v)


def _listen_overflows() -> int:
    """The kernel's ListenOverflows of this namespace, as nstat reads it."""
    out = subprocess.run(["nstat", "-asz", "TcpExtListenOverflows"], capture_output=True, text=True, check=True)
    return int(out.stdout.split("TcpExtListenOverflows")[1].split()[0])


@pytest.mark.resolver
def test_a_one_query_closed_loop_fits_the_target_s_accept_queue(root: None, tmp_path: Path) -> None:
    """kresd 5.6 listens with a backlog of 128 (fixed at build time): 1000 slots reconnecting
    at once would overflow it. The trial reads the queue from the kernel, runs that many slots,
    and the kernel (nstat, read by the test) drops no connection attempt."""
    need(installed("knot-resolver"), "knot-resolver is not installed")
    settings = LoadSettings(
        "knot-resolver",
        "dot",
        {"rate": "max", "duration_ms": 2000, "warmup_ms": 500, "timeout_ms": 2000, "connections": 1000,
         "lifetime": {"duration_ms": None, "queries": 1}},
        target_cpus=[0],
        generator_cpus=[1],
        names=2000,
        baseline_s=0.5,
    )  # fmt: skip
    before = _listen_overflows()
    record = run_trial(settings, tmp_path)
    dropped = _listen_overflows() - before
    somaxconn = int(Path("/proc/sys/net/core/somaxconn").read_text())
    assert record["listen_backlog"]["dot"] == min(128, somaxconn)
    assert record["engine_config"]["connections"] == record["listen_backlog"]["dot"]
    v = record["summary"]["validity"]
    opened = record["summary"]["wire"]["connections_established"]
    assert opened > 1000 and dropped <= 0.01 * opened, (dropped, opened)
    assert v["listen_overflows"] is not None and v["listen_overflows"] <= dropped
    assert "listen-overflow" not in v["flags"] and "loss" not in v["flags"], v


@pytest.mark.resolver
def test_a_one_query_doq_closed_loop_fits_quic_go_s_accept_queue(root: None, tmp_path: Path) -> None:
    """CoreDNS's QUIC stack queues at most 32 handshaken connections and refuses the next
    one after its handshake. 200 slots of one-query DoQ connections against a saturated
    CoreDNS had 7-15 % refused; the trial runs 32, and the engine's connection log (the
    peer's CONNECTION_REFUSED) shows none refused."""
    need(installed("coredns"), "coredns is not installed")
    settings = LoadSettings(
        "coredns",
        "doq",
        {"rate": "max", "duration_ms": 2000, "warmup_ms": 500, "timeout_ms": 2000, "connections": 200,
         "lifetime": {"duration_ms": None, "queries": 1}, "open_rate": 50000},
        target_cpus=[0],
        generator_cpus=[1],
        names=2000,
        baseline_s=0.5,
    )  # fmt: skip
    record = run_trial(settings, tmp_path)
    assert record["listen_backlog"]["doq"] == 32
    assert record["engine_config"]["connections"] == 32
    log = (tmp_path / "engine-connections.jsonl").read_text()
    conns = [json.loads(line) for line in log.splitlines()]
    refused = [c for c in conns if "refused" in (c["error"] or "")]
    assert len(conns) > 1000 and not refused, (len(conns), refused[:3])
    v = record["summary"]["validity"]
    assert v["target_saturated"] and "loss" not in v["flags"], v


def test_load_command_writes_a_run(root: None, tmp_path: Path) -> None:
    out = tmp_path / "run"
    r = subprocess.run(
        [
            *DNSCOST,
            "load",
            "--target",
            "builtin",
            "--transport",
            "udp",
            "--rate",
            "500",
            "--duration",
            "1s",
            "--warmup",
            "0",
            "--names",
            "100",
            "--output",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    assert "qps answered" in r.stdout and "µs/query" in r.stdout
    run = json.loads((out / "run.json").read_text())
    assert run["format_version"] == 2 and run["status"] == "done"
    assert run["machine"]["cpus"] >= 2 and run["versions"]["dnscost-engine"].startswith("dnscost-engine")
    assert run["trials"] == {"load-builtin-udp": {"status": "done"}}
    trial = json.loads((out / "trials" / "load-builtin-udp" / "trial.json").read_text())
    assert trial["settings"]["engine"]["rate"] == 500.0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--target", "nope", "--transport", "udp"], "unknown target nope"),
        (["--target", "pdns-recursor", "--transport", "dot"], "pdns-recursor does not serve dot"),
        (["--target", "builtin", "--transport", "udp", "--target-cpus", "1", "--generator-cpus", "1"], "overlap"),
        (["--target", "builtin", "--transport", "udp", "--lifetime", "1q"], "lifetime does not apply to udp"),
    ],
)
def test_bad_input_is_one_line(root: None, tmp_path: Path, args: list[str], message: str) -> None:
    r = subprocess.run(
        [*DNSCOST, "load", *args, "--duration", "1s", "--output", str(tmp_path / "o")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("dnscost: ") and message in r.stderr, r.stderr


def test_missing_binary_is_a_machine_error(root: None, tmp_path: Path) -> None:
    env = {**os.environ, "PATH": "/nonexistent"}
    code = (
        "import sys\nfrom dnscost.targets.dnsdist import Dnsdist\nDnsdist.binary='/nonexistent/dnsdist'\n"
        "from dnscost.cli import main\nsys.exit(main(sys.argv[1:]))"
    )
    r = subprocess.run(
        [
            sys.executable,
            "-c",
            code,
            "load",
            "--target",
            "dnsdist",
            "--transport",
            "udp",
            "--output",
            str(tmp_path / "o"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert r.returncode == 3, r.stderr
    assert r.stderr.count("\n") == 1 and "not found" in r.stderr, r.stderr


def test_a_target_dying_mid_trial_keeps_what_was_measured(root: None, tmp_path: Path) -> None:
    out = tmp_path / "run"
    p = subprocess.Popen(
        [
            *DNSCOST,
            "load",
            "--target",
            "builtin",
            "--transport",
            "tcp",
            "--rate",
            "500",
            "--duration",
            "20s",
            "--warmup",
            "0",
            "--names",
            "100",
            "--output",
            str(out),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    trial = None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        trials = list(out.glob("trials/*/engine.jsonl"))
        if trials and trials[0].stat().st_size > 2000:
            trial = trials[0].parent
            break
        time.sleep(0.2)
    assert trial is not None, "the trial never started"
    pid = json.loads((trial / "trial.json").read_text())["target_pid"]
    os.kill(pid, signal.SIGKILL)  # the target, which this test's child started
    _, err = p.communicate(timeout=60)
    assert p.returncode == 4, err
    assert err.count("\n") == 1 and "builtin" in err, err
    record = json.loads((trial / "trial.json").read_text())
    assert record["status"] == "failed"
    assert (trial / "meter.jsonl").stat().st_size > 0
    assert any(json.loads(line)["type"] == "interval" for line in (trial / "engine.jsonl").read_text().splitlines())
    assert json.loads((out / "run.json").read_text())["status"] == "failed"


def test_a_port_already_taken_is_a_clear_error(tmp_path: Path) -> None:
    import socket

    from dnscost.engine import Responder
    from dnscost.errors import TargetError

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        with pytest.raises(TargetError, match=r"cannot listen on udp://127\.0\.0\.1"):
            Responder(tmp_path, [f"udp://127.0.0.1:{port}"])


@pytest.mark.resolver
@pytest.mark.parametrize("transport", ["doh3", "doq", "doh"])
@pytest.mark.parametrize("limit", [1, 10, 100])
def test_in_flight_above_coredns_stream_limit_is_answered(
    root: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, transport: str, limit: int
) -> None:
    """CoreDNS lets ``limit`` streams open per connection (its Corefile's max_streams, for
    HTTP/2 and QUIC); the engine keeps twice that in flight on one connection. Every query
    waits for stream credit instead of being lost: none times out, some waited, and CoreDNS's
    own counters (its prometheus plugin) count exactly the answers the engine counted. One
    query above the limit once stalled a whole DoH/3 connection (0 answered); and CoreDNS
    gives HTTP/3 clients as many unidirectional streams as bidirectional ones, so at limit 1
    a client that waited for credit for QPACK's optional streams never sent a request."""
    need(installed("coredns"), "coredns is not installed")
    monkeypatch.setattr(coredns_module, "STREAMS", limit)
    settings = LoadSettings(
        "coredns",
        transport,
        {"rate": "max", "duration_ms": 1500, "warmup_ms": 500, "timeout_ms": 2000, "connections": 1,
         "in_flight": 2 * limit},
        names=200,
        baseline_s=0.2,
    )  # fmt: skip
    record = run_trial(settings, tmp_path)
    assert f"max_streams {limit} " in (tmp_path / "target" / "Corefile").read_text()
    total = json.loads((tmp_path / "engine.jsonl").read_text().splitlines()[-1])["total"]["queries"]
    assert total["answered"] > 20 * limit and total["timed_out"] == 0, total
    assert total["stream_waits"] > 0, total
    v = record["summary"]["validity"]
    assert v["target_answered"] == v["engine_answered"] > 0, v
