"""``--network``: the set-ups are made and removed, a short trial runs in each against builtin
and dnsdist, and with steering the target's side receives its packets on its own cores."""

from __future__ import annotations

import collections
import ctypes
import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import need
from dnscost.errors import UsageError
from dnscost.network import NETWORKS, Network, check_network, cpu_mask, read_softnet, softnet_delta
from dnscost.proc import _live
from dnscost.trial import LoadSettings, run_trial
from test_load import installed, pids_of_children

TARGET_CPUS, GENERATOR_CPUS = [0], [1]
SO_INCOMING_CPU = getattr(socket, "SO_INCOMING_CPU", 49)
CLONE_NEWNET = 0x40000000


def test_cpu_mask() -> None:
    assert cpu_mask([0]) == "1"
    assert cpu_mask([1, 0]) == "3"
    assert cpu_mask([4]) == "10"
    assert cpu_mask([32, 1]) == "1,00000002"
    with pytest.raises(ValueError):
        cpu_mask([])


def test_read_softnet(tmp_path: Path) -> None:
    path = tmp_path / "softnet_stat"
    zeros = " ".join(["00000000"] * 6)
    path.write_text(
        f"0000000a 00000000 00000001 {zeros} 00000003 00000000 00000000 00000000 00000000 00000000\n"
        f"00000100 00000000 00000000 {zeros} 00000000 00000000 00000000 00000001 00000000 00000000\n"
    )
    before = read_softnet(path)
    assert before[0].processed == 10 and before[0].received_rps == 3
    assert before[1].processed == 256
    path.write_text(path.read_text().replace("0000000a", "0000000f"))
    assert softnet_delta(before, read_softnet(path))["0"] == {"processed": 5, "received_rps": 0}


def test_unknown_network_is_one_line() -> None:
    with pytest.raises(UsageError, match="unknown network"):
        check_network("wifi")


def namespaces() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def links() -> set[str]:
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=True).stdout
    return {line.split(":")[1].strip().split("@")[0] for line in out.splitlines()}


def made_by_me(names: set[str]) -> set[str]:
    pid = str(os.getpid())
    return {n for n in names if n.startswith((f"dnscost-{pid}-", f"dc{pid}-"))}


@pytest.fixture
def clean() -> Iterator[None]:
    """Fails the test if it leaves a namespace, a link or a process behind (of its own: earlier
    tests' leftovers are theirs)."""
    children, pids = set(_live), set(pids_of_children())
    yield
    assert not made_by_me(namespaces() | links())
    assert not set(_live) - children and not set(pids_of_children()) - pids


CASES = [(n, t, tr) for n in NETWORKS for t, tr in (("builtin", "udp"), ("builtin", "tcp"), ("dnsdist", "dot"))]


@pytest.mark.resolver
@pytest.mark.parametrize(("network", "target", "transport"), CASES, ids=[f"{a}-{b}-{c}" for a, b, c in CASES])
def test_trial_on_each_network(
    root: None, clean: None, tmp_path: Path, network: str, target: str, transport: str
) -> None:
    need(installed(target), f"{target} is not installed")
    need(len(os.sched_getaffinity(0)) >= 2, "needs two CPUs")
    # Over TCP, one query per connection from 64 slots: every source address is used twice.
    engine = {"connections": 64, "lifetime": {"queries": 1}} if transport == "tcp" else {"connections": 2}
    settings = LoadSettings(
        target,
        transport,
        {"rate": 1000, "duration_ms": 1000, "warmup_ms": 300, **engine},
        target_cpus=TARGET_CPUS,
        generator_cpus=GENERATOR_CPUS,
        names=500,
        fill=False,  # no pre-fill (seconds per bed): misses still reach the upstream across the set-up
        baseline_s=0.3,
        network=network,
    )
    record = run_trial(settings, tmp_path)
    s, v, net = record["summary"], record["summary"]["validity"], record["network"]
    assert record["status"] == "done" and record["settings"]["network"] == network
    assert v["accounting_balanced"] and v["loss"] is not None and v["loss"] < 0.01, v
    assert s["target_cpu_us_per_query"] > 0
    assert net["kind"] == network
    address = "127.0.0.1" if network == "loopback" else net["target_address"]
    assert all(f"://{address}:" in url for url in record["endpoints"].values()), record["endpoints"]
    if network != "loopback":
        assert net["netns"] and net["target_address"].startswith("198.1")
    # The connections come from the set-up's 32 source addresses, as the target saw them.
    assert len(set(net["sources"])) == 32 and record["engine_config"]["sources"] == list(net["sources"])
    if transport == "tcp":
        served = [json.loads(line) for line in (tmp_path / "target" / "connections.jsonl").read_text().splitlines()]
        peers = collections.Counter(r["peer_address"].rsplit(":", 1)[0] for r in served if "peer_address" in r)
        engine = sum(peers[a] for a in net["sources"])
        assert engine >= 1000 and min(peers[a] for a in net["sources"]) >= engine // 40, peers  # evenly
        assert sum(peers.values()) - engine <= 5, peers  # besides: the readiness checks
    # The sampler ran ss where the target is: it saw the target's sockets.
    slow = [r for r in map(json.loads, (tmp_path / "meter.jsonl").read_text().splitlines()) if r["type"] == "slow"]
    assert any(r["sockets"]["sockets"] > 0 for r in slow), slow
    steered = network == "veth-rps"
    assert net["rps_cpus"] == (
        {net["target_device"]: cpu_mask(TARGET_CPUS), net["generator_device"]: cpu_mask(GENERATOR_CPUS)}
        if steered
        else ({} if network == "loopback" else {net["target_device"]: "0", net["generator_device"]: "0"})
    )
    if steered:
        # Queries reached the target's core by inter-processor interrupts (RPS).
        assert sum(record["softnet"][str(c)]["received_rps"] for c in TARGET_CPUS) > 0, record["softnet"]


def socket_in(netns: str, address: str) -> socket.socket:
    """A UDP socket bound in ``netns`` (setns on this thread, then back)."""
    libc = ctypes.CDLL(None, use_errno=True)
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    fd = os.open(f"/run/netns/{netns}", os.O_RDONLY)
    try:
        assert libc.setns(fd, CLONE_NEWNET) == 0, os.strerror(ctypes.get_errno())
        try:
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.bind((address, 0))
        finally:
            assert libc.setns(own, CLONE_NEWNET) == 0, os.strerror(ctypes.get_errno())
    finally:
        os.close(fd)
        os.close(own)
    return s


def receive_cores(net: Network, packets: int) -> tuple[collections.Counter[int], dict[str, dict[str, int]]]:
    """Sends ``packets`` datagrams from the generator's core to a socket on the target's side,
    one at a time, and counts the core that received each (``SO_INCOMING_CPU``: the core whose
    softirq delivered it into the socket), with the per-core softnet counts around it."""
    receiver = socket_in(str(net.info.netns), net.info.target_address)
    sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    cores: collections.Counter[int] = collections.Counter()
    affinity = os.sched_getaffinity(0)
    try:
        sender.bind((net.info.generator_address, 0))
        receiver.connect(sender.getsockname())  # the kernel records the incoming core of connected sockets
        receiver.settimeout(5)
        os.sched_setaffinity(0, GENERATOR_CPUS)
        before = read_softnet()
        for _ in range(packets):
            sender.sendto(b"q", receiver.getsockname())
            receiver.recv(16)
            cores[receiver.getsockopt(socket.SOL_SOCKET, SO_INCOMING_CPU)] += 1
        delta = softnet_delta(before, read_softnet())
    finally:
        os.sched_setaffinity(0, affinity)
        sender.close()
        receiver.close()
    return cores, delta


def test_steering_moves_receive_to_the_target_cores(root: None, clean: None) -> None:
    need(len(os.sched_getaffinity(0)) >= 2, "needs two CPUs")
    packets = 2000
    share: dict[str, float] = {}
    for kind in ("veth", "veth-rps"):
        net = Network.create(kind, target_cpus=TARGET_CPUS, generator_cpus=GENERATOR_CPUS)
        try:
            assert net.info.netns in namespaces()
            cores, softnet = receive_cores(net, packets)
        finally:
            net.remove()
        assert sum(cores.values()) == packets
        share[kind] = sum(cores[c] for c in TARGET_CPUS) / packets
        if kind == "veth-rps":
            # Counted by the kernel per core: at least every steered packet was processed on
            # the target's cores (other traffic on the machine can only add to it).
            assert sum(softnet[str(c)]["processed"] for c in TARGET_CPUS) >= packets * share[kind], softnet
    # Without steering the sender's (generator's) core receives; with it, the target's.
    assert share["veth-rps"] >= 0.9 and share["veth"] <= 0.1, share


def test_leftovers_of_a_dead_process_are_removed(root: None) -> None:
    from dnscost.network import remove_leftovers

    # A namespace named as a dnscost process that no longer runs would make (PID 4194303 is
    # above any PID this machine hands out by default).
    dead = "dnscost-4194303-1"
    subprocess.run(["ip", "netns", "add", dead], check=True)
    try:
        assert dead in remove_leftovers()
    finally:
        subprocess.run(["ip", "netns", "del", dead], capture_output=True, check=False)
    assert dead not in namespaces()


SPEC = """
name = "net"
targets = ["builtin"]
network = "veth"
[defaults]
duration = "1s"
warmup = "0.2s"
baseline = "0.2s"
[[group]]
name = "q"
transports = ["doh"]
connections = 2
rate = 500
"""


def test_spec_network_key() -> None:
    from dnscost.spec import parse_spec

    assert parse_spec(SPEC).network == "veth"
    assert parse_spec(SPEC.replace('network = "veth"\n', "")).network is None
    with pytest.raises(UsageError, match="network: expected one of loopback, veth, veth-rps"):
        parse_spec(SPEC.replace('"veth"', '"wifi"'), "spec.toml")


def dnscost(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dnscost.cli", *args], capture_output=True, text=True, timeout=120, check=False
    )


def test_run_takes_the_spec_network_and_the_flag_overrides_it(root: None, clean: None, tmp_path: Path) -> None:
    """``dnscost run`` records the set-up it used in run.json and every trial; ``--network``
    overrides the spec's; ``dnscost load --network`` records it in its settings."""
    spec = tmp_path / "net.toml"
    spec.write_text(SPEC)
    for flag, expected in (([], "veth"), (["--network", "veth-rps"], "veth-rps")):
        out = tmp_path / f"run-{expected}"
        r = dnscost("run", str(spec), *flag, "--output", str(out), "--no-report", "--target-cpus", "0")
        assert r.returncode == 0, r.stderr
        run = json.loads((out / "run.json").read_text())
        assert run["spec"]["network"] == expected and run["status"] == "done"
        (trial,) = (out / "trials").glob("*/trial.json")
        assert json.loads(trial.read_text())["network"]["kind"] == expected
    r = dnscost("run", "--resume", str(tmp_path / "run-veth"), "--network", "loopback", "--no-report")
    assert r.returncode == 2 and "made with --network veth, not loopback" in r.stderr, r.stderr
    out = tmp_path / "load"
    r = dnscost(
        "load", "--target", "builtin", "--transport", "udp", "--rate", "500", "--duration", "1s",
        "--warmup", "0", "--names", "100", "--network", "veth", "--output", str(out),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert json.loads((out / "run.json").read_text())["spec"]["settings"]["network"] == "veth"
    r = dnscost("load", "--target", "builtin", "--transport", "udp", "--network", "wifi", "--output", str(out))
    assert r.returncode == 2 and "invalid choice: 'wifi'" in r.stderr


LISTEN_PROBE = """
import json, socket, subprocess, time
from dnscost.meter.sockets import listen_backlogs

subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(1)  # never accepted: the queue holds two, the kernel drops the rest
port = listener.getsockname()[1]
clients = []
for _ in range(20):
    c = socket.socket()
    c.setblocking(False)
    c.connect_ex(("127.0.0.1", port))
    clients.append(c)
time.sleep(0.3)
nstat = subprocess.run(["nstat", "-asz", "TcpExtListenOverflows"], capture_output=True, text=True, check=True)
netstat = open("/proc/net/netstat").read()
print(json.dumps({"nstat": nstat.stdout, "netstat": netstat, "port": port,
                  "backlogs": {str(k): v for k, v in listen_backlogs([port]).items()}}))
"""


def test_a_listener_s_accept_queue_and_its_overflows_are_read(root: None) -> None:
    """In a namespace of its own: a listener with a backlog of 1 that never accepts, 20
    connection attempts. ``listen_backlogs`` reads the backlog as set; the kernel's drops show
    in ``/proc/net/netstat`` as the meter parses it (``tcpext``), as nstat reads them."""
    from dnscost.meter import procfs

    need(subprocess.run(["which", "nstat"], capture_output=True).returncode == 0, "nstat (iproute2) is missing")
    out = subprocess.run(
        ["unshare", "--net", sys.executable, "-c", LISTEN_PROBE], capture_output=True, text=True, timeout=30
    )
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["backlogs"] == {str(got["port"]): 1}
    parsed = procfs.parse_net_counters(got["netstat"], ["TcpExt"])
    overflows = procfs.select_counters(parsed, "TcpExt", procfs.TCPEXT_KEYS)["ListenOverflows"]
    nstat = {line.split()[0]: int(line.split()[1]) for line in got["nstat"].splitlines() if line[:1] != "#"}
    assert overflows >= 10 and nstat["TcpExtListenOverflows"] <= overflows <= nstat["TcpExtListenOverflows"] + 20
