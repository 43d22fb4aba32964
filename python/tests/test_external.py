"""``--target external``: a server the test starts itself (``dnscost-engine serve``, the
"operator's server"), loaded by ``dnscost load`` and metered by its PID or by a cgroup the test
makes; its CPU checked against an observer other than the meter; never stopped by dnscost.
Bad input: one line, exit 2, nothing measured."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import need
from dnscost.cgroup import Cgroup
from dnscost.engine import engine_path

DNSCOST = [sys.executable, "-m", "dnscost.cli"]
HZ = os.sysconf("SC_CLK_TCK")


@dataclass
class Server:
    proc: subprocess.Popen[bytes]
    urls: dict[str, str]
    ca: Path
    log: Path
    """The server's own connections log (written as it ends: :func:`served`)."""


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    need(os.geteuid() == 0, "root (cgroups)")
    need(len(os.sched_getaffinity(0)) >= 2, "two CPUs")
    listen = tmp_path / "listening.jsonl"
    ca, log = tmp_path / "ca.pem", tmp_path / "serve-connections.jsonl"
    with listen.open("wb") as out:
        proc = subprocess.Popen(
            [str(engine_path()), "serve", "--synthetic", "1000", "--tld", "test", "--ca-out", str(ca)]
            + ["--connections-log", str(log)]
            + [a for t in ("udp", "dot") for a in ("--listen", f"{t}://127.0.0.1:0")],
            stdout=out,
            stderr=subprocess.DEVNULL,
            preexec_fn=lambda: os.sched_setaffinity(0, {0}),
        )
    try:
        deadline = time.monotonic() + 10
        records: list[dict[str, str]] = []
        while len(records) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
            records = [json.loads(line) for line in listen.read_text().splitlines() if '"listening"' in line]
        assert len(records) == 2, "serve did not bind"
        # The schemes operators use: tls:// is dot.
        schemes = {"udp": "udp", "dot": "tls"}
        yield Server(proc, {r["transport"]: f"{schemes[r['transport']]}://{r['address']}" for r in records}, ca, log)
    finally:
        proc.kill()  # by the PID the test holds
        proc.wait()


def cpu_us(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) * 1_000_000 // HZ


class Observer:
    """``/proc/PID/stat`` read every 20 ms with the wall clock: the test's own view."""

    def __init__(self, pid: int) -> None:
        self.pid, self.samples, self._stop = pid, list[tuple[float, int]](), threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            self.samples.append((time.time() * 1000, cpu_us(self.pid)))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def delta(self, t0_ms: float, t1_ms: float) -> int:
        def at(t: float) -> int:
            return next(c for ts, c in self.samples if ts >= t)

        return at(t1_ms) - at(t0_ms)


def load(out: Path, server: Server, *meter: str, transport: str = "dot") -> subprocess.CompletedProcess[str]:
    argv = [
        *DNSCOST,
        "load",
        "--target",
        "external",
        "--transport",
        transport,
        *(a for u in server.urls.values() for a in ("--external-endpoint", u)),
        "--external-ca",
        str(server.ca),
        "--external-version",
        "serve (the test's)",
        *meter,
        "--names",
        "1000",
        "--duration",
        "2s",
        "--warmup",
        "500ms",
        "--rate",
        "20000",
        "--connections",
        "4",
        "--target-cpus",
        "0",
        "--generator-cpus",
        "1",
        "--output",
        str(out),
    ]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)


def check_trial(out: Path, server: Server, observer: Observer) -> dict[str, object]:
    trial = json.loads((out / "trials" / "load-external-dot" / "trial.json").read_text())
    assert trial["status"] == "done"
    summary, ext = trial["summary"], trial["external"]
    assert summary["queries_answered"] > 10_000
    assert ext["endpoints"] == [u.replace("tls://", "dot://") for u in server.urls.values()]
    assert ext["version"] == trial["target_version"] == "serve (the test's)"
    validity = summary["validity"]
    assert validity["target_answered"] is None and validity["answer_count_agreement"] is None
    assert validity["unchecked"] == ["answer-count", "cache-hits"]
    assert "no-counters" not in validity["flags"] and "answer-mismatch" not in validity["flags"]
    # The meter's CPU against the test's own reading of /proc/PID/stat over the same window.
    metered = summary["target_cpu_us"]
    start = trial["summary_context"]["sampler_start_unix_ms"]
    seen = observer.delta(start + summary["meter"]["t0_ms"], start + summary["meter"]["t1_ms"])
    assert metered > 0 and seen > 0
    assert abs(metered - seen) <= 0.15 * seen + 60_000, (metered, seen)
    assert server.proc.poll() is None, "dnscost stopped the operator's server"
    run = json.loads((out / "run.json").read_text())
    assert run["spec"]["settings"]["external"]["endpoints"] == ext["endpoints"]
    return trial


def served(server: Server, trial_dir: Path) -> list[dict[str, Any]]:
    """The server's own record of the trial's connections (matched on the engine's source
    addresses), once it has ended: it writes its log as it goes and flushes it on SIGTERM."""
    server.proc.terminate()  # by the PID the test holds
    server.proc.wait(timeout=10)
    ours = {json.loads(line)["local_address"] for line in (trial_dir / "engine-connections.jsonl").open()}
    records = [json.loads(line) for line in server.log.read_text().splitlines()]
    mine = [c for c in records if c["peer_address"] in ours]
    assert ours and len(mine) == len(ours), (len(ours), len(mine))
    return mine


def test_external_by_pid(server: Server, tmp_path: Path) -> None:
    observer = Observer(server.proc.pid)
    r = load(tmp_path / "run", server, "--external-pid", str(server.proc.pid))
    observer.stop()
    assert r.returncode == 0, r.stderr
    assert "not checked     answer-count, cache-hits" in r.stdout
    trial = check_trial(tmp_path / "run", server, observer)
    assert trial["target_pid"] == server.proc.pid
    assert trial["summary"]["meter"]["cpu_source"] == "proc"  # type: ignore[index]
    # The answers the engine counted against those the server says it sent (the cross-check an
    # external target's counters cannot give): every one, less any the engine gave up waiting for.
    trial_dir = tmp_path / "run" / "trials" / "load-external-dot"
    total = json.loads((trial_dir / "engine.jsonl").read_text().splitlines()[-1])["total"]["queries"]
    answers = sum(c["answers"] for c in served(server, trial_dir))
    assert total["answered"] <= answers <= total["answered"] + total["timed_out"], (total, answers)


def test_external_by_cgroup(server: Server, tmp_path: Path) -> None:
    cg = Cgroup.create(f"dnscost-test-external-{os.getpid()}")
    try:
        cg.attach(server.proc.pid)
        path = cg.dirs["cpuacct"] if cg.version == 1 else cg.dirs["unified"]
        observer = Observer(server.proc.pid)
        r = load(tmp_path / "run", server, "--external-cgroup", str(path))
        observer.stop()
        assert r.returncode == 0, r.stderr
        trial = check_trial(tmp_path / "run", server, observer)
        assert trial["external"]["cgroup"] == str(path)  # type: ignore[index]
        assert trial["summary"]["meter"]["cpu_source"] == "cgroup"  # type: ignore[index]
        assert trial["summary"]["meter"]["cgroup_cpu_total_us"] > 0  # type: ignore[index]
    finally:
        server.proc.kill()
        server.proc.wait()
        cg.remove()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--external-endpoint", "gopher://127.0.0.1:53", "--external-pid", "1"], "unknown scheme 'gopher'"),
        (["--external-pid", "1"], "needs at least one --external-endpoint"),
        (["--external-endpoint", "udp://127.0.0.1:53", "--external-pid", "999999999"], "no such process"),
        (
            ["--external-endpoint", "udp://127.0.0.1:53", "--external-pid", "1", "--external-cgroup", "/sys/fs/cgroup"],
            "either --external-pid or --external-cgroup",
        ),
        (["--external-endpoint", "dot://127.0.0.1:853", "--external-pid", "1"], "--external-ca"),
    ],
)
def test_external_bad_input(args: list[str], message: str, tmp_path: Path) -> None:
    out = tmp_path / "run"
    argv = [*DNSCOST, "load", "--target", "external", "--transport", "udp", *args, "--output", str(out)]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], r.stderr
    assert not out.exists()  # nothing measured


SPEC = """
name = "external-spec"
targets = ["dnsdist"]
names = 1000
[defaults]
duration = "1s"
warmup = "300ms"
baseline = "300ms"
[[group]]
name = "establishment"
transports = ["udp", "dot", "doh"]
connections = 4
rate = 20000
cert_key = ["ecdsa-p256", "rsa-2048"]
"""
"""A spec written for dnscost's own targets: ``--target external`` replaces them; the doh cells
(no endpoint) and the RSA cells (the certificate is the operator's) are left out."""

IDLE = """
[[group]]
name = "memory"
kind = "idle"
transports = ["dot"]
connections = 10
open_rate = 2000
"""


def run_spec(tmp_path: Path, spec: str, *args: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "spec.toml").write_text(spec)
    argv = [*DNSCOST, "run", "spec.toml", "--output", "out", "--target-cpus", "0", "--generator-cpus", "1", *args]
    return subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=240, check=False)


def check_run(out: Path, server: Server, observer: Observer) -> dict[str, dict[str, Any]]:
    """Every trial done on the operator's server, its CPU against the test's own reading."""
    run = json.loads((out / "run.json").read_text())
    ext = run["spec"]["external"]
    assert ext["endpoints"] == [u.replace("tls://", "dot://") for u in server.urls.values()]
    trials = {p.parent.name: json.loads(p.read_text()) for p in out.glob("trials/*/trial.json")}
    assert all(t["status"] == "done" for t in trials.values()), {k: t.get("error") for k, t in trials.items()}
    assert not [k for k in trials if "doh" in k or "rsa" in k]
    for tid, t in trials.items():
        assert t["external"] == {**ext, **({"affinity": [0]} if ext["pid"] else {})}, tid
        summary = t["summary"]
        if t["kind"] == "idle":
            assert summary["validity"]["unchecked"] == ["answer-count", "fresh-target"], tid
            continue
        assert summary["queries_answered"] > 5_000, tid
        assert summary["validity"]["unchecked"] == ["answer-count", "cache-hits"], tid
        start = t["summary_context"]["sampler_start_unix_ms"]
        seen = observer.delta(start + summary["meter"]["t0_ms"], start + summary["meter"]["t1_ms"])
        assert abs(summary["target_cpu_us"] - seen) <= 0.15 * seen + 60_000, (tid, summary["target_cpu_us"], seen)
    assert server.proc.poll() is None, "dnscost stopped the operator's server"
    return trials


def test_external_spec_by_pid(server: Server, tmp_path: Path) -> None:
    """Every kind of trial of a spec against the operator's server, metered by its PID, and the
    report made: the load cells it served and an idle trial (flagged: no fresh target)."""
    observer = Observer(server.proc.pid)
    endpoints = [a for u in server.urls.values() for a in ("--external-endpoint", u)]
    meter = ["--external-pid", str(server.proc.pid), "--external-ca", str(server.ca)]
    r = run_spec(tmp_path, SPEC + IDLE, "--target", "external", *endpoints, *meter)
    observer.stop()
    assert r.returncode == 0, r.stderr
    assert "external: no endpoint for doh: their trials are left out" in r.stderr
    trials = check_run(tmp_path / "out", server, observer)
    assert sorted(trials) == [
        "establishment-external-dot-ecdsa-p256-r0",
        "establishment-external-udp-r0",
        "memory-external-dot-r0",
    ]
    assert (tmp_path / "out" / "report.html").is_file()


def test_external_spec_by_cgroup(server: Server, tmp_path: Path) -> None:
    """The spec's own [external] table, metered by a cgroup the test made."""
    cg = Cgroup.create(f"dnscost-test-external-spec-{os.getpid()}")
    try:
        cg.attach(server.proc.pid)
        path = cg.dirs["cpuacct"] if cg.version == 1 else cg.dirs["unified"]
        table = f"""
[external]
endpoints = {json.dumps(list(server.urls.values()))}
cgroup = "{path}"
ca = "{server.ca}"
version = "serve (the test's)"
"""
        spec = SPEC.replace('targets = ["dnsdist"]', 'targets = ["external"]').replace('"udp", "dot", "doh"', '"dot"')
        observer = Observer(server.proc.pid)
        r = run_spec(tmp_path, spec + table, "--no-report")
        observer.stop()
        assert r.returncode == 0, r.stderr
        trials = check_run(tmp_path / "out", server, observer)
        assert sorted(trials) == ["establishment-external-dot-ecdsa-p256-r0"]
        for t in trials.values():
            assert t["summary"]["meter"]["cpu_source"] == "cgroup"
            assert t["target_version"] == "serve (the test's)"
    finally:
        server.proc.kill()
        server.proc.wait()
        cg.remove()


@pytest.mark.parametrize(
    ("spec", "args", "message"),
    [
        (SPEC, ["--external-endpoint", "udp://127.0.0.1:53", "--external-pid", "1"], "add --target external"),
        (SPEC, ["--target", "external"], "target external needs --external-endpoint URL"),
        (SPEC + '[external]\nendpoints = ["udp://127.0.0.1:53"]\npid = 1\nport = 3\n', [], "external: port: unknown"),
        (SPEC + '[external]\nendpoints = ["tls://127.0.0.1:853"]\npid = 1\n', [], "external: --target external over"),
    ],
)
def test_external_spec_bad_input(spec: str, args: list[str], message: str, tmp_path: Path) -> None:
    r = run_spec(tmp_path, spec, *args)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], r.stderr
    assert not (tmp_path / "out").exists()  # nothing measured


def probe_load(tmp_path: Path, url: str, *args: str) -> subprocess.CompletedProcess[str]:
    transport = {"tls": "dot"}.get(url.split(":")[0], url.split(":")[0])
    argv = [*DNSCOST, "load", "--target", "external", "--transport", transport, "--external-endpoint", url, *args]
    argv += ["--external-pid", str(os.getpid()), "--rate", "100", "--duration", "1s", "--output", str(tmp_path / "o")]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)


def test_external_probe_says_why(server: Server, tmp_path: Path) -> None:
    """A definite cause (an untrusted certificate, nothing listening) ends the probe at once in
    one line naming it; only a server that is there and mute is waited for."""
    other = tmp_path / "other-ca.pem"
    key = ["-nodes", "-keyout", str(tmp_path / "other.key"), "-out", str(other), "-subj", "/CN=other", "-days", "2"]
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", *key],
        capture_output=True,
        check=True,
    )
    closed = free_udp_tcp_port()
    cases = [
        (server.urls["dot"], ["--external-ca", str(other)], "(tls): invalid peer certificate: UnknownIssuer"),
        (f"tcp://127.0.0.1:{closed}", [], "(refused): Connection refused"),
        (f"udp://127.0.0.1:{closed}", [], f"nothing listens on UDP port {closed} (ICMP port unreachable)"),
        (f"doq://127.0.0.1:{closed}", ["--external-ca", str(server.ca)], "(ICMP port unreachable)"),
    ]
    for url, args, cause in cases:
        r = probe_load(tmp_path, url, *args)
        lines = r.stderr.strip().splitlines()
        assert r.returncode != 0 and len(lines) == 1, r.stderr
        assert cause in lines[0] and "within" not in lines[0], lines[0]
    # A UDP socket that reads and never answers: reachable, so waited for, then the reason.
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as mute:
        mute.bind(("127.0.0.1", 0))
        r = probe_load(tmp_path, f"udp://127.0.0.1:{mute.getsockname()[1]}")
    lines = r.stderr.strip().splitlines()
    assert r.returncode != 0 and len(lines) == 1, r.stderr
    assert "within 15 s: 1 queries timed out: the target did not answer (it must answer" in lines[0], lines[0]


def free_udp_tcp_port() -> int:
    """A port nothing listens on, over TCP or UDP (bound and released: the kernel will not
    hand it out again at once)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_external_cpu_below_the_tick_is_unresolved(server: Server, tmp_path: Path) -> None:
    """At 100 qps the server spends less than /proc's few ticks in the window (the test's own
    reading of /proc/PID/stat says so): the trial is flagged, not recorded as costing 0."""
    observer = Observer(server.proc.pid)
    argv = [*DNSCOST, "load", "--target", "external", "--transport", "udp", "--external-endpoint", server.urls["udp"]]
    argv += ["--external-pid", str(server.proc.pid), "--names", "1000", "--rate", "100", "--duration", "1s"]
    argv += ["--target-cpus", "0", "--generator-cpus", "1", "--output", str(tmp_path / "run")]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    observer.stop()
    assert r.returncode == 0, r.stderr
    trial = json.loads((tmp_path / "run" / "trials" / "load-external-udp" / "trial.json").read_text())
    summary = trial["summary"]
    start = trial["summary_context"]["sampler_start_unix_ms"]
    seen = observer.delta(start + summary["meter"]["t0_ms"], start + summary["meter"]["t1_ms"])
    assert summary["meter"]["cpu_source"] == "proc"
    assert seen < 5 * 1_000_000 // HZ, seen  # the premise: a few ticks at most
    assert "cpu-unresolved" in summary["validity"]["flags"] and not summary["validity"]["valid"]
    assert summary["energy_marginal_j"] is None
    assert any(line.split()[:1] == ["INVALID"] and "cpu-unresolved" in line for line in r.stdout.splitlines())
    (cpu,) = [line for line in r.stdout.splitlines() if line.strip().startswith("target CPU")]
    assert "below the meter's resolution" in cpu and "µs/query" not in cpu, cpu
