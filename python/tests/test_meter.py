"""Tests of dnscost.meter: every parser on captured files, the cgroup readers on captured (v1)
and hand-made (v2) directories, RAPL on a fake powercap tree, the summary on synthetic
samples, and live runs of the sampler and of ss on 127.0.0.1."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import need
from dnscost.cgroup import Cgroup, tasks_percpu_file
from dnscost.errors import MachineError
from dnscost.jsonl import read_records
from dnscost.meter import (
    CpuPowerModel,
    RaplReader,
    Sampler,
    parse_ss,
    procfs,
    ss_sockets,
    summarize,
)
from dnscost.meter.sockets import ss_filter

FIXTURES = Path(__file__).parent / "fixtures" / "meter"
KIB = 1024


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


# --- procfs parsers ----------------------------------------------------------------------


def test_pid_stat() -> None:
    st = procfs.parse_pid_stat(fixture("proc_pid_stat.txt"), clk_tck=100)
    assert (st.pid, st.comm, st.state, st.ppid) == (13051, "python3", "R", 13047)
    assert (st.utime_us, st.stime_us) == (210_000, 150_000)  # 21 and 15 ticks at USER_HZ 100
    assert st.threads == 4
    assert st.starttime_ticks == 334632


def test_pid_stat_command_name_with_spaces_and_parentheses() -> None:
    fields = ["S", "1"] + ["0"] * 9 + ["250", "50"] + ["0"] * 4 + ["7", "0", "99"]
    st = procfs.parse_pid_stat("42 (a) b (c) " + " ".join(fields), clk_tck=250)
    assert (st.pid, st.comm, st.ppid, st.threads, st.starttime_ticks) == (42, "a) b (c", 1, 7, 99)
    assert (st.utime_us, st.stime_us) == (1_000_000, 200_000)


def test_task_status_and_schedstat() -> None:
    """A thread's own context switches and schedstat (captured from one thread: its runs are
    its switches in and out, 371 = 239 + 132)."""
    t = procfs.parse_task_sched(fixture("proc_pid_task_status.txt"), fixture("proc_pid_task_schedstat.txt"))
    assert (t.voluntary, t.involuntary, t.runs, t.run_delay_us) == (239, 132, 371, 210_920)
    assert t + t == procfs.TaskSched(478, 264, 742, 421_840)
    # a kernel without schedstat: switches only
    assert procfs.parse_task_sched(fixture("proc_pid_task_status.txt"), None) == procfs.TaskSched(239, 132, 0, 0)
    with pytest.raises(ValueError, match="voluntary_ctxt_switches"):
        procfs.parse_task_sched("Name:\tx\n", "1 2 3\n")


def test_softirqs_per_cpu() -> None:
    net = procfs.parse_softirqs(fixture("proc_softirqs.txt"), ["NET_RX", "NET_TX"])
    assert net == {"NET_TX": {0: 4, 1: 1}, "NET_RX": {0: 3_666_266, 1: 3_222_046}}
    assert procfs.parse_softirqs(fixture("proc_softirqs.txt"))["TIMER"] == {0: 33_600, 1: 38_688}
    # CPU numbers are the header's (an offline CPU has no column)
    assert procfs.parse_softirqs("     CPU0   CPU2\n NET_RX:  5  7\n") == {"NET_RX": {0: 5, 2: 7}}


def test_smaps_rollup() -> None:
    sm = procfs.parse_smaps_rollup(fixture("proc_pid_smaps_rollup.txt"))
    assert sm.rss_bytes == 14612 * KIB
    assert sm.pss_bytes == 12606 * KIB
    assert sm.uss_bytes == (4552 + 7748) * KIB  # Private_Clean + Private_Dirty
    assert sm.swap_bytes == 0
    assert (sm + sm).rss_bytes == 2 * sm.rss_bytes


def test_proc_stat_per_core() -> None:
    cores = procfs.parse_proc_stat(fixture("proc_stat.txt"), clk_tck=100)
    assert sorted(cores) == [0, 1]  # the aggregate "cpu" line is not a core
    c0 = cores[0]
    assert (c0.user_us, c0.nice_us, c0.system_us, c0.idle_us) == (1_446_080_000, 0, 146_100_000, 1_691_810_000)
    assert (c0.iowait_us, c0.irq_us, c0.softirq_us, c0.steal_us) == (3_340_000, 0, 29_490_000, 9_900_000)
    assert c0.busy_us == c0.user_us + c0.system_us + c0.softirq_us


def test_proc_stat_without_steal() -> None:
    cores = procfs.parse_proc_stat("cpu  1 2 3 4 5 6 7\ncpu3 1 2 3 4 5 6 7\n", clk_tck=100)
    assert list(cores) == [3] and cores[3].steal_us == 0 and cores[3].softirq_us == 70_000


def test_net_snmp() -> None:
    counters = procfs.parse_net_counters(fixture("proc_net_snmp.txt"))
    assert counters["Udp"]["InDatagrams"] == 5185459
    assert counters["Udp"]["RcvbufErrors"] == 0
    assert counters["Tcp"]["MaxConn"] == -1
    udp = procfs.select_counters(counters, "Udp", procfs.UDP_KEYS)
    assert set(udp) == set(procfs.UDP_KEYS)
    assert procfs.select_counters(counters, "Udp", ["NoSuchCounter"]) == {}


def test_net_netstat() -> None:
    counters = procfs.parse_net_counters(fixture("proc_net_netstat.txt"))
    assert {"TcpExt", "IpExt"} <= set(counters)
    tcpext = procfs.select_counters(counters, "TcpExt", procfs.TCPEXT_KEYS)
    assert {"ListenOverflows", "ListenDrops", "TCPBacklogDrop"} <= set(tcpext)
    assert set(procfs.parse_net_counters(fixture("proc_net_netstat.txt"), ["TcpExt"])) == {"TcpExt"}


def test_meminfo() -> None:
    mem = procfs.parse_meminfo(fixture("proc_meminfo.txt"))
    assert mem["Slab"] == 215456 * KIB
    assert mem["SReclaimable"] + mem["SUnreclaim"] == mem["Slab"]
    assert procfs.parse_meminfo(fixture("proc_meminfo.txt"), ["Slab"]) == {"Slab": 215456 * KIB}


def test_sockstat() -> None:
    s = procfs.parse_sockstat(fixture("proc_net_sockstat.txt"), page_size=4096)
    assert (s.sockets_used, s.tcp_inuse, s.tcp_orphan, s.tcp_tw, s.tcp_alloc) == (43, 15, 0, 37, 15)
    assert s.tcp_mem_bytes == 309 * 4096
    assert (s.udp_inuse, s.udp_mem_bytes) == (8, 23 * 4096)


def _fake_proc(root: Path, parents: dict[int, int]) -> None:
    for pid, ppid in parents.items():
        (root / str(pid)).mkdir()
        (root / str(pid) / "stat").write_text(f"{pid} (x y) S {ppid} 0 0 0 -1 0 0 0 0 0 1 1 0 0 20 0 1 0 5\n")
    (root / "self").mkdir()  # not a PID: ignored


def test_process_tree(tmp_path: Path) -> None:
    _fake_proc(tmp_path, {1: 0, 10: 1, 11: 10, 12: 11, 13: 10, 20: 1})
    assert procfs.process_tree([10], proc=tmp_path) == [10, 11, 12, 13]
    assert procfs.process_tree([12, 20], proc=tmp_path) == [12, 20]
    assert procfs.process_tree([99], proc=tmp_path) == []


def test_process_tree_live() -> None:
    child = subprocess.Popen(["sh", "-c", "sleep 30 & wait"])
    try:
        deadline = time.monotonic() + 5
        tree: list[int] = []
        while len(tree) < 2 and time.monotonic() < deadline:
            tree = procfs.process_tree([child.pid])
            time.sleep(0.01)
        assert tree[0] == child.pid and len(tree) == 2
        assert procfs.read_pid_stat(tree[1]) is not None
    finally:
        for pid in procfs.process_tree([child.pid])[1:]:
            os.kill(pid, 9)
        child.kill()
        child.wait()
    assert procfs.read_pid_stat(child.pid) is None  # reaped: gone, not an error


def test_thread_ids_of_this_process() -> None:
    assert os.getpid() in procfs.thread_ids(os.getpid())
    assert procfs.thread_ids(2**22 + 1) == []


# --- cgroups (dnscost.cgroup on metering's fixtures) -------------------------------------


def test_cgroup_v1_captured() -> None:
    cg = Cgroup(1, {"cpuacct": FIXTURES / "cgroup_v1" / "cpuacct", "memory": FIXTURES / "cgroup_v1" / "memory"})
    cpu = cg.cpu()
    assert (cpu.user_us, cpu.system_us) == (175_963, 155_836)
    mem = cg.memory()
    assert mem.usage_bytes == 8536064
    assert mem.anon_bytes == 7667712
    assert mem.kernel_bytes == 516096
    assert mem.tcp_bytes == 204800  # 50 connection pairs with 3000 bytes in flight each
    assert mem.slab_bytes is None


def test_cgroup_v2_hand_made(tmp_path: Path) -> None:
    shutil.copytree(FIXTURES / "cgroup_v2", tmp_path, dirs_exist_ok=True)
    cg = Cgroup(version=2, dirs={"unified": tmp_path})
    cpu = cg.cpu()
    assert (cpu.user_us, cpu.system_us, cpu.total_us) == (750_000, 500_000, 1_250_000)
    mem = cg.memory()
    assert (mem.usage_bytes, mem.anon_bytes, mem.kernel_bytes) == (10485760, 5242880, 2621440)
    assert (mem.tcp_bytes, mem.slab_bytes) == (1310720, 1179648)


# --- ss ----------------------------------------------------------------------------------


def test_parse_ss_captured() -> None:
    mem = parse_ss(fixture("ss_tuamnH.txt"))
    assert mem.sockets == 4
    assert mem.sockets_with_skmem == 3  # FIN-WAIT-2 has no skmem
    assert mem.states == {"UNCONN": 1, "LISTEN": 1, "FIN-WAIT-2": 1, "ESTAB": 1}
    assert mem.protocols == {"udp": 1, "tcp": 3}
    assert (mem.r_bytes, mem.f_bytes, mem.t_bytes, mem.w_bytes) == (832 + 837, 3264 + 3259, 0, 0)
    assert mem.buffer_bytes == 2 * 4096  # one page charged for each socket holding data
    assert mem.to_dict()["buffer_bytes"] == 8192


def test_parse_ss_one_protocol_and_unusual_layouts() -> None:
    text = (
        "ESTAB 0 0 127.0.0.1:853 127.0.0.1:40000\n"
        "\t skmem:(r0,rb131072,t0,tb46080,f4096,w2048,o40,bl0,d3)\n"
        "TIME-WAIT 0 0 127.0.0.1:853 127.0.0.1:40002\n"
        "ESTAB 0 0 127.0.0.1:853 127.0.0.1:40004\t skmem:(r10,t20,w5,bl7,zz1)\n"
    )
    mem = parse_ss(text, "tcp")
    assert mem.protocols == {"tcp": 3}
    assert mem.states == {"ESTAB": 2, "TIME-WAIT": 1}
    assert (mem.r_bytes, mem.t_bytes, mem.f_bytes, mem.w_bytes, mem.o_bytes, mem.bl_bytes, mem.drops) == (
        10,
        20,
        4096,
        2053,
        40,
        7,
        3,
    )
    assert parse_ss("").sockets == 0


def test_ss_filter() -> None:
    assert ss_filter([853, 53, 53]) == "( sport = :53 or sport = :853 )"
    with pytest.raises(ValueError):
        ss_filter([])


def test_ss_live_on_loopback() -> None:
    need(shutil.which("ss") is not None, "ss (iproute2) not installed")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    port = listener.getsockname()[1]
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    socks: list[socket.socket] = [listener, udp]
    try:
        udp.bind(("127.0.0.1", port))
        sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        socks.append(sender)
        sender.sendto(b"q" * 40, ("127.0.0.1", port))  # left unread
        for _ in range(3):
            c = socket.create_connection(("127.0.0.1", port))
            s, _ = listener.accept()
            c.sendall(b"x" * 100)  # left unread on the accepted side
            socks += [c, s]
        time.sleep(0.05)
        run = ss_sockets([port])
        mem = run.memory
        assert mem.protocols == {"udp": 1, "tcp": 4}  # the clients' sockets have ephemeral ports
        assert mem.states == {"UNCONN": 1, "LISTEN": 1, "ESTAB": 3}
        assert mem.r_bytes > 3 * 100 and mem.buffer_bytes % 4096 == 0
        assert run.wall_us > 0 and run.cpu_us >= 0
        assert ss_sockets([port], udp=False).memory.protocols == {"tcp": 4}
    finally:
        for s in socks:
            s.close()


# --- energy ------------------------------------------------------------------------------


def _zone(root: Path, zone: str, name: str, energy_uj: int, max_uj: int = 10_000) -> Path:
    d = root / zone
    d.mkdir()
    (d / "name").write_text(name + "\n")
    (d / "energy_uj").write_text(f"{energy_uj}\n")
    (d / "max_energy_range_uj").write_text(f"{max_uj}\n")
    return d


def test_rapl_fake_powercap_with_wraparound(tmp_path: Path) -> None:
    (tmp_path / "intel-rapl").mkdir()  # the control type: not a zone
    p0 = _zone(tmp_path, "intel-rapl:0", "package-0", 1_000)
    core = _zone(tmp_path, "intel-rapl:0:0", "core", 100)
    p1 = _zone(tmp_path, "intel-rapl:1", "package-1", 5_000, max_uj=1_000_000)
    _zone(tmp_path, "intel-rapl:2", "psys", 0)
    _zone(tmp_path, "intel-rapl-mmio:0", "package-0", 777)  # same package as intel-rapl:0

    rapl = RaplReader(tmp_path)
    assert sorted(d.key for d in rapl.domains) == ["package-0", "package-0/core", "package-1", "psys"]
    assert sorted(d.key for d in rapl.domains if d.package) == ["package-0", "package-1"]
    assert rapl.available()
    assert rapl.read().energy_j == 0.0

    (p0 / "energy_uj").write_text("9000\n")
    (p1 / "energy_uj").write_text("6000\n")
    (core / "energy_uj").write_text("600\n")
    r = rapl.read()
    assert r.energy_j == pytest.approx((8_000 + 1_000) / 1e6)
    assert r.domains_j["package-0/core"] == pytest.approx(500 / 1e6)

    (p0 / "energy_uj").write_text("500\n")  # wrapped: 9000 -> 10000 -> 0 -> 500
    r = rapl.read()
    assert r.domains_j["package-0"] == pytest.approx((8_000 + 1_001 + 500) / 1e6)
    assert r.energy_j == pytest.approx(r.domains_j["package-0"] + r.domains_j["package-1"])
    assert rapl.describe()["source"] == "rapl"


def test_rapl_absent_or_unreadable(tmp_path: Path) -> None:
    assert RaplReader(tmp_path / "missing").domains == []
    assert not RaplReader(tmp_path / "missing").available()
    d = _zone(tmp_path, "intel-rapl:0", "package-0", 1)
    (d / "energy_uj").write_text("not a number\n")
    assert not RaplReader(tmp_path).available()


def test_cpu_power_model() -> None:
    m = CpuPowerModel()
    assert (m.p_idle_w_per_vcpu, m.p_max_w_per_vcpu, m.include_idle) == (0.74, 3.5, True)
    # 2 CPU-seconds over 10 s on one held vCPU: 2 * (3.5 - 0.74) + 1 * 10 * 0.74
    assert m.energy_j(2_000_000, 10.0, 1) == pytest.approx(5.52 + 7.4)
    assert CpuPowerModel(include_idle=False).energy_j(2_000_000, 10.0, 1) == pytest.approx(5.52)
    assert CpuPowerModel(1.0, 5.0).energy_j(1_000_000, 2.0, 2) == pytest.approx(4.0 + 4.0)
    d = m.describe()
    assert d["source"] == "model" and "Cloud Carbon Footprint" in str(d["reference"])
    assert (d["p_idle_w_per_vcpu"], d["p_max_w_per_vcpu"]) == (0.74, 3.5)


# --- summary -----------------------------------------------------------------------------


def _synthetic() -> list[dict[str, Any]]:
    """1 s of samples: the target uses 50 % of a core in user time and 10 % in system time,
    RSS grows linearly from 100 to 200 MB, 7 UDP receive-buffer drops per 100 ms, 2 W."""
    records: list[dict[str, Any]] = [{"type": "header", "format": 1}]
    for t in range(0, 1001, 100):
        records.append(
            {
                "type": "fast",
                "t_ms": t,
                "target": {
                    "cgroup_cpu_total_us": 1_000_000 + 610 * t,
                    "cgroup_cpu_user_us": 1_000_000 + 500 * t,
                    "cgroup_cpu_system_us": 100 * t,
                    "proc_cpu_user_us": 400 * t,
                    "proc_cpu_system_us": 100 * t,
                    "cgroup_tcp_bytes": 4096 * (t // 100),
                    "threads": 2,
                },
                "generator": {"cpu_user_us": 300 * t, "cpu_system_us": 0},
                "cores": [
                    {"cpu": 0, "user_us": 600 * t, "softirq_us": 50 * t, "idle_us": 0},
                    {"cpu": 1, "user_us": 300 * t, "softirq_us": 0, "idle_us": 700 * t},
                ],
                "udp": {"RcvbufErrors": 7 * (t // 100), "InDatagrams": 1000 * t},
                "tcp": {"CurrEstab": 5, "ActiveOpens": 0},
                "tcpext": {"ListenOverflows": 0, "TCPBacklogDrop": t // 100},
                "energy_j": 2.0 * t / 1000,
                "energy_model_j": 1.0 * t / 1000,
                "energy_source": "model",
            }
        )
    for t in (0, 500, 1000):
        records.append({"type": "slow", "t_ms": t, "target": {"rss_bytes": 100_000_000 + 100_000 * t}})
    records.append({"type": "end"})
    return records


def test_summary_whole_window() -> None:
    s = summarize(_synthetic(), 0, 1000)
    assert s["cpu_source"] == "cgroup"
    assert (s["cpu_user_us"], s["cpu_system_us"], s["cgroup_cpu_total_us"]) == (500_000, 100_000, 610_000)
    assert s["cpu_us"] == 610_000  # the exact total, not the tick-sampled user + system
    assert (s["proc_cpu_user_us"], s["proc_cpu_system_us"]) == (400_000, 100_000)
    assert s["generator_cpu_user_us"] == 300_000
    assert s["cores"]["0"]["softirq_us"] == 50_000 and s["cores"]["0"]["busy_us"] == 650_000
    assert s["cores"]["1"]["idle_us"] == 700_000
    assert s["counters"]["udp_in_datagrams"] == 1_000_000
    assert s["counters"]["udp_rcvbuf_errors"] == 70
    assert s["counters"]["tcpext_tcp_backlog_drop"] == 10
    assert "tcp_curr_estab" not in s["counters"]  # a gauge: a level, not a delta
    assert s["tcp_curr_estab_mean"] == 5
    assert s["rss_bytes_mean"] == pytest.approx(150_000_000)
    assert s["rss_bytes_max"] == 200_000_000
    assert s["tcp_bytes_max"] == 40960
    assert s["cgroup_usage_bytes_mean"] is None  # not sampled
    assert (s["energy_j"], s["energy_source"], s["energy_model_j"]) == (pytest.approx(2.0), "model", pytest.approx(1.0))
    assert (s["samples_fast"], s["samples_slow"], s["extrapolated"]) == (11, 3, False)


def test_summary_interpolates_window_edges() -> None:
    s = summarize(_synthetic(), 250, 750)
    assert s["cpu_user_us"] == pytest.approx(250_000)  # between samples: interpolated
    assert s["energy_j"] == pytest.approx(1.0)
    # Levels: the one slow sample inside the window, not a value interpolated to its edges.
    assert s["rss_bytes_mean"] == pytest.approx(150_000_000)
    assert s["rss_bytes_max"] == pytest.approx(150_000_000)
    assert s["duration_s"] == 0.5 and not s["extrapolated"]
    assert s["cores"]["0"]["user_us"] == 300_000
    assert json.loads(json.dumps(s)) == s  # JSON-ready as trial.json stores it


def test_a_level_that_stepped_before_the_window_is_not_diluted() -> None:
    """300 connections opened between two 1 Hz samples: a window that starts just after the
    step sees 300, not a mean pulled down by interpolating from the sample before it."""
    records = [
        {"type": "slow", "t_ms": t, "sockets": {"sockets": level}}
        for t, level in ((0, 4), (1000, 304), (2000, 304), (3000, 304))
    ]
    s = summarize(records, 900, 3100)
    assert s["sockets_mean"] == pytest.approx(304)
    # A window with no sample inside is still interpolated (and flagged when extrapolated).
    assert summarize(records, 400, 600)["sockets_mean"] == pytest.approx(154)


def test_summary_outside_samples_is_flagged_and_clamped() -> None:
    s = summarize(_synthetic(), 900, 1500)
    assert s["extrapolated"]
    assert s["cpu_user_us"] == pytest.approx(50_000)  # only 900..1000 was sampled
    with pytest.raises(ValueError):
        summarize(_synthetic(), 10, 5)
    empty = summarize([], 0, 1000)
    assert empty["cpu_source"] is None and empty["cpu_user_us"] is None and empty["energy_j"] is None
    assert empty["cpu_us"] is None


# --- the sampler, live -------------------------------------------------------------------


def _burn(seconds: float) -> None:
    end = time.process_time() + seconds
    x = 0
    while time.process_time() < end:
        x += 1


def test_sampler_live_on_this_process(tmp_path: Path) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    out = tmp_path / "meter.jsonl"
    shutil.copytree(FIXTURES / "cgroup_v2", tmp_path / "cg")
    sampler = Sampler(
        out,
        start_monotonic=time.monotonic(),
        target_cgroup=Cgroup(version=2, dirs={"unified": tmp_path / "cg"}),
        target_pids=lambda: [os.getpid()],
        target_ports=[listener.getsockname()[1]],
        target_cpus=[0],
        generator_pids=lambda: [],
        interval_s=0.05,
        socket_interval_s=0.2,
        energy=CpuPowerModel(),
    )
    try:
        sampler.start()
        _burn(0.5)
        # Five fast samples and two slow ones at least (a second at most past the burn: on a
        # busy machine the sampler's 50 ms may stretch), readable while sampling: every line
        # is flushed.
        deadline = time.monotonic() + 1.0
        while True:
            partial = read_records(out)
            kinds = [r["type"] for r in partial]
            if (kinds.count("fast") >= 5 and kinds.count("slow") >= 2) or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert partial[0]["type"] == "header" and any(r["type"] == "fast" for r in partial)
    finally:
        end = sampler.stop()
        listener.close()

    lines = out.read_text().splitlines()
    records = [json.loads(line) for line in lines]  # every line parses
    assert records[0]["type"] == "header" and records[0]["format"] == 1
    assert records[0]["energy"]["source"] == "model"
    assert records[-1] == {**end, "type": "end"}
    assert end["errors"] == 0, end["first_error"]
    fast = [r for r in records if r["type"] == "fast"]
    slow = [r for r in records if r["type"] == "slow"]
    assert len(fast) >= 5 and len(slow) >= 2
    assert [r["t_ms"] for r in fast] == sorted(r["t_ms"] for r in fast)
    grown = fast[-1]["target"]["proc_cpu_user_us"] - fast[0]["target"]["proc_cpu_user_us"]
    assert grown > 0
    assert fast[-1]["energy_model_j"] > 0 and fast[-1]["energy_source"] == "model"
    assert len(fast[0]["cores"]) == os.cpu_count()
    if tasks_percpu_file() is not None:  # v1 cpuacct: every core's tasks' run time, growing
        assert all("tasks_us" in c for c in fast[0]["cores"])
        assert sum(c["tasks_us"] for c in fast[-1]["cores"]) > sum(c["tasks_us"] for c in fast[0]["cores"])
    assert slow[-1]["target"]["rss_bytes"] > 0 and slow[-1]["target"]["uss_bytes"] > 0
    assert slow[-1]["sockets"]["states"] == {"LISTEN": 1}

    s = summarize(records, fast[0]["t_ms"], fast[-1]["t_ms"])
    assert s["cpu_source"] == "cgroup" and s["cpu_us"] == 0  # the fake cgroup does not move
    assert fast[0]["target"]["cgroup_cpu_total_us"] == 1_250_000  # usage_usec of cpu.stat
    assert s["proc_cpu_user_us"] is not None and s["proc_cpu_user_us"] > 0
    assert s["rss_bytes_mean"] is not None and s["rss_bytes_mean"] > 0


def test_sampler_sums_wake_ups_over_threads_and_keeps_an_exited_thread_s(tmp_path: Path) -> None:
    """The target's context switches are summed over its threads: a thread that blocked 100
    times (its own status says how often) and exited while sampled still counts after it is
    gone (the sum never falls), and the per-core NET_RX and NET_TX counts are sampled."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    own: dict[str, int] = {}

    def sleeper() -> None:
        for _ in range(100):
            time.sleep(0.002)
        status = Path("/proc/thread-self/status").read_text()
        own["voluntary"] = procfs.parse_task_sched(status, None).voluntary

    sampler = Sampler(
        tmp_path / "m.jsonl",
        start_monotonic=time.monotonic(),
        target_cgroup=None,
        target_pids=lambda: [os.getpid(), child.pid],
        target_ports=[],
        target_cpus=[0],
        generator_pids=list,
        interval_s=0.05,
        socket_interval_s=0.05,
        energy=CpuPowerModel(),
    )
    try:
        with sampler:
            thread = threading.Thread(target=sleeper)
            thread.start()
            time.sleep(0.15)  # listed by the slow thread, read by the fast one
            thread.join()
            time.sleep(0.15)  # and sampled again once it is gone
    finally:
        child.kill()
        child.wait()
    records = read_records(tmp_path / "m.jsonl")
    assert records[-1]["errors"] == 0, records[-1]["first_error"]
    fast = [r["target"] for r in records if r["type"] == "fast"]
    voluntary = [t["voluntary_ctxt_switches"] for t in fast]
    assert voluntary == sorted(voluntary)  # an exited thread's switches stay counted
    assert voluntary[-1] - voluntary[0] >= own["voluntary"] * 0.5, (voluntary, own)
    runs = [t["sched_runs"] for t in fast]
    assert runs == sorted(runs) and runs[-1] >= voluntary[-1]  # each run follows a switch
    cores = [r["cores"] for r in records if r["type"] == "fast"][-1]
    assert all(c["net_rx_softirqs"] >= 0 and c["net_tx_softirqs"] >= 0 for c in cores)
    times = [r["t_ms"] for r in records if r["type"] == "fast"]
    s = summarize(records, times[0], times[-1])
    assert s["voluntary_ctxt_switches"] is not None and s["voluntary_ctxt_switches"] > 0


def test_sampler_with_rapl_and_without_cgroup(tmp_path: Path) -> None:
    p0 = _zone(tmp_path, "intel-rapl:0", "package-0", 0, max_uj=1_000_000)
    sampler = Sampler(
        tmp_path / "m.jsonl",
        start_monotonic=time.monotonic(),
        target_cgroup=None,
        target_pids=lambda: [os.getpid()],
        target_ports=[],
        target_cpus=[],
        generator_pids=lambda: [os.getpid()],
        interval_s=0.05,
        energy=RaplReader(tmp_path),
    )
    with sampler:
        time.sleep(0.12)
        (p0 / "energy_uj").write_text("250000\n")
        time.sleep(0.12)
    records = read_records(tmp_path / "m.jsonl")
    fast = [r for r in records if r["type"] == "fast"]
    assert records[0]["energy_source"] == "rapl" and records[0]["energy_model"]["source"] == "model"
    assert fast[-1]["energy_source"] == "rapl" and fast[-1]["energy_j"] == pytest.approx(0.25)
    assert "cgroup_cpu_user_us" not in fast[0]["target"]
    assert all("sockets" not in r for r in records if r["type"] == "slow")  # no ports, no ss
    s = summarize(records, fast[0]["t_ms"], fast[-1]["t_ms"])
    assert s["cpu_source"] == "proc" and s["cgroup_cpu_total_us"] is None
    assert s["cpu_us"] == s["proc_cpu_user_us"] + s["proc_cpu_system_us"]  # type: ignore[operator]
    with pytest.raises(MachineError):
        Sampler(
            tmp_path / "x.jsonl",
            start_monotonic=0.0,
            target_cgroup=None,
            target_pids=list,
            target_ports=[],
            target_cpus=[],
            generator_pids=list,
            energy=RaplReader(tmp_path / "none"),
        )


def test_read_records_skips_a_line_cut_short(tmp_path: Path) -> None:
    p = tmp_path / "m.jsonl"
    p.write_text('{"type":"header"}\n{"type":"fast","t_ms":0}\n{"type":"fa')
    assert [r["type"] for r in read_records(p)] == ["header", "fast"]
    assert read_records(tmp_path / "missing.jsonl") == []


@pytest.mark.parametrize(("damage", "reason"), [('{"type":"fa', "Unterminated string"), ("[1]", "an array")])
def test_read_records_strict_names_the_file_and_line_of_a_damaged_line(
    tmp_path: Path, damage: str, reason: str
) -> None:
    """A file written whole (an observation's) is read with ``strict``: a line that is not a
    record is an error naming the file and the line, not a record skipped; blank lines are not."""
    from dnscost.errors import DamagedLineError, UsageError

    p = tmp_path / "connections.jsonl"
    p.write_text('{"type":"header"}\n\n' + damage + '\n{"type":"fast"}\n')
    with pytest.raises(
        DamagedLineError, match=rf"^{re.escape(str(p))}: line 3 is not a JSON record \({reason}"
    ) as caught:
        read_records(p, strict=True)
    assert isinstance(caught.value, UsageError) and caught.value.line == 3
    assert [r["type"] for r in read_records(p)] == ["header", "fast"]
    p.write_text('{"type":"header"}\n\n{"type":"fast"}\n')
    assert [r["type"] for r in read_records(p, strict=True)] == ["header", "fast"]


def test_every_reader_sees_the_same_lines_numbered_as_the_file_numbers_them(tmp_path: Path) -> None:
    """``parse_lines`` is the one parse of JSON lines: the ledger of a run (what a resume stops),
    ``read_records`` and the report's check of a finished trial all see a cut line the same way,
    numbered as an editor numbers it (blank lines counted, not returned)."""
    from dnscost.jsonl import parse_lines, read_lines
    from dnscost.proc import Ledger

    p = tmp_path / "children.jsonl"
    p.write_text('{"pid": 1}\n\n[2]\n{"pid": 3}\n{"pid": ')
    lines = parse_lines(read_lines(p))
    assert [(line.number, line.record, line.problem) for line in lines] == [
        (1, {"pid": 1}, None),
        (3, None, "an array"),
        (4, {"pid": 3}, None),
        (5, None, "Expecting value"),
    ]
    assert Ledger(p).entries() == [{"pid": 1}, {"pid": 3}] == read_records(p)


def test_a_record_holding_a_line_separator_is_one_record(tmp_path: Path) -> None:
    """JSON (serde_json's too) leaves U+2028, U+2029 and U+0085 unescaped in strings: a line ends
    at a newline only, in a plain file and in a kept one's gzip alike."""
    import gzip
    import json

    text = "".join(json.dumps({"n": k, "ua": f"a\u2028b\u0085c\u2029{k}"}, ensure_ascii=False) + "\n" for k in range(2))
    p = tmp_path / "engine.jsonl"
    p.write_text(text)
    assert [r["ua"] for r in read_records(p, strict=True)] == ["a\u2028b\u0085c\u20290", "a\u2028b\u0085c\u20291"]
    p.unlink()
    p.with_name("engine.jsonl.gz").write_bytes(gzip.compress(text.encode()))
    assert [r["n"] for r in read_records(p, strict=True)] == [0, 1]


def test_sampler_survives_a_target_that_exits(tmp_path: Path) -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    v1 = {"cpuacct": FIXTURES / "cgroup_v1" / "cpuacct", "memory": FIXTURES / "cgroup_v1" / "memory"}
    sampler = Sampler(
        tmp_path / "m.jsonl",
        start_monotonic=time.monotonic(),
        target_cgroup=Cgroup(1, v1),
        target_pids=lambda: [child.pid],
        target_ports=[],
        target_cpus=[0],
        generator_pids=list,
        interval_s=0.05,
        energy=CpuPowerModel(),
    )
    with sampler:
        time.sleep(0.12)
    end = read_records(tmp_path / "m.jsonl")[-1]
    assert end["type"] == "end" and end["errors"] == 0 and end["fast"] >= 2
    fast = [r for r in read_records(tmp_path / "m.jsonl") if r["type"] == "fast"]
    assert fast[0]["target"]["processes"] == 0
    cg = fast[0]["target"]
    assert (cg["cgroup_cpu_total_us"], cg["cgroup_cpu_user_us"], cg["cgroup_tcp_bytes"]) == (334_262, 175_963, 204_800)


def test_open_files_reread_and_bound_to_their_process(tmp_path: Path) -> None:
    files = procfs.OpenFiles()
    f = tmp_path / "counter"
    f.write_text("1\n")
    assert files.read(str(f)) == "1\n"
    f.write_text("22\n")  # same inode, new content: re-read from offset 0
    assert files.read(str(f)) == "22\n"
    for size in (65_536, 200_000):  # past one read's worth: read on to the end
        f.write_text("x" * size)
        assert files.read(str(f)) == "x" * size
    child = subprocess.Popen(["sleep", "30"])
    try:
        text = files.read(f"/proc/{child.pid}/stat")
        assert text is not None and procfs.parse_pid_stat(text).pid == child.pid
    finally:
        child.kill()
        child.wait()
    assert files.read(f"/proc/{child.pid}/stat") is None  # its process is gone
    assert files.read(str(tmp_path / "missing")) is None
    files.retain([str(f)])
    files.close()


def test_a_socket_walk_longer_than_the_period_is_dated_at_its_end() -> None:
    """``ss`` walks the kernel's table over its run: a walk due inside the window that outlasted
    the sampler's period (it counted connections closing after the window) is left out; one
    shorter than the period is dated when it was due, as before."""

    def slow(t: int, sockets: int, wall_ms: int) -> dict[str, object]:
        return {"type": "slow", "t_ms": t, "sockets": {"sockets": sockets}, "ss_wall_us": wall_ms * 1000}

    header = {"type": "header", "socket_interval_ms": 1000}
    records = [header, slow(1000, 100_032, 700), slow(2000, 100_032, 1100), slow(2900, 64_055, 6100)]
    s = summarize(records, 900, 3000)
    assert s["sockets_mean"] == 100_032 and s["sockets_max"] == 100_032
    # Without the header's period (a meter file before it was recorded), every walk is dated when due.
    s = summarize(records[1:], 900, 3000)
    assert s["sockets_max"] == 100_032 and s["sockets_mean"] < 100_032
