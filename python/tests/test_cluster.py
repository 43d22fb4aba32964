"""Multi-host trials on Dask (dnscost.cluster): the split of a configuration, the merge of the
workers' records (on two engine runs recorded in fixtures/cluster/), HDR histograms encoded
again, the settings' one-line errors, and, as root, two-worker trials in namespace hosts against
builtin and dnsdist whose merged answers equal the target's own count."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest
from conftest import need
from dnscost.analysis import hdr
from dnscost.cluster import ClusterSettings, merge_records, split_config
from dnscost.errors import EngineError, UsageError

CLUSTER_FIXTURES = Path(__file__).parent / "fixtures" / "cluster"


def _records(k: int) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (CLUSTER_FIXTURES / f"worker-{k}.jsonl").read_text().splitlines()]


def test_split_gives_every_connection_its_own_rate() -> None:
    config = {"transport": "udp", "connections": 10, "rate": 3000.0, "open_rate": 100, "seed": 7, "threads": 1}
    shares = split_config(config, 3)
    assert [s["connections"] for s in shares] == [4, 3, 3]
    assert [s["rate"] for s in shares] == pytest.approx([1200.0, 900.0, 900.0])
    assert sum(s["open_rate"] for s in shares) == pytest.approx(100)
    assert [s.get("seed") for s in shares] == [7, 8, 9]
    assert all("threads" not in s for s in shares)
    assert [s["rate"] for s in split_config({"connections": 4, "rate": "max"}, 2)] == ["max", "max"]


@pytest.mark.parametrize(
    ("config", "workers", "says"),
    [
        ({"connections": 1, "rate": 10.0}, 2, "cannot be split"),
        ({"connections": 4, "sources": ["192.0.2.1"]}, 2, "sources"),
        ({"connections": 4, "profile": {}, "clients": 4}, 2, "profiles"),
    ],
)
def test_split_refuses_with_one_line(config: dict[str, Any], workers: int, says: str) -> None:
    with pytest.raises(UsageError, match=says):
        split_config(config, workers)


def test_a_population_splits_class_by_class() -> None:
    """A population's classes each split as one configuration is: a replay by its clients, the
    others by connections, rates with them; a class smaller than the cluster on its first
    workers; files and phases the run's; the shares' classes add up to the population's."""
    profile = {"name": "p", "transport": "dot", "query_interval_ms": 100}
    config = {
        "target": "127.0.0.1:53",
        "duration_ms": 2000,
        "seed": 7,
        "threads": 2,
        "classes": [
            {"name": "stub", "config": {"transport": "udp", "connections": 4, "rate": 400.0}},
            {"name": "dot", "config": {"profile": profile, "clients": 5, "rate": 50.0, "ca_file": "ca.pem"}},
            {"name": "one", "config": {"transport": "doq", "connections": 1, "rate": 20.0}},
        ],
    }
    shares = split_config(config, 2)
    assert [[c["name"] for c in s["classes"]] for s in shares] == [["stub", "dot", "one"], ["stub", "dot"]]
    assert [[c["config"].get("clients", c["config"].get("connections")) for c in s["classes"]] for s in shares] == [
        [2, 3, 1],
        [2, 2],
    ]
    assert [[c["config"]["rate"] for c in s["classes"]] for s in shares] == [[200.0, 30.0, 20.0], [200.0, 20.0]]
    assert all(s["duration_ms"] == 2000 and "threads" not in s for s in shares)
    assert [s.get("seed") for s in shares] == [7, 8]
    assert shares[1]["classes"][1]["config"]["ca_file"] == "ca.pem"
    with pytest.raises(UsageError, match="largest class has 5 clients or connections cannot be split over 6"):
        split_config(config, 6)


def test_hdr_encoding_round_trips() -> None:
    for k in (0, 1):
        encoded = _records(k)[-1]["measured"]["latency"]["hdr"]
        layout, buckets = hdr.decode_with_layout(encoded)
        assert buckets
        assert hdr.decode_with_layout(hdr.encode(layout, buckets)) == (layout, buckets)


def test_merge_of_one_worker_is_that_worker() -> None:
    """The percentiles recomputed from a merged histogram are the engine's own."""
    records = _records(0)
    merged = merge_records([records], records[0]["config"])
    mine, theirs = merged[-1]["measured"], records[-1]["measured"]
    for key in ("count", "min_us", "p50_us", "p90_us", "p99_us", "p999_us", "max_us"):
        assert mine["latency"][key] == theirs["latency"][key], key
    assert mine["latency"]["mean_us"] == pytest.approx(theirs["latency"]["mean_us"], abs=0.2)
    assert mine["queries"] == theirs["queries"]
    assert merged[-1]["measure_end_ms"] - merged[-1]["measure_start_ms"] == (
        records[-1]["measure_end_ms"] - records[-1]["measure_start_ms"]
    )


def test_merge_sums_counters_and_histograms() -> None:
    a, b = _records(0), _records(1)
    config = {**a[0]["config"], "connections": 8, "rate": 6000.0}
    merged = merge_records([a, b], config)
    s = merged[-1]
    assert merged[0]["config"] == config
    for key in ("offered", "answered", "sent"):
        assert s["measured"]["queries"][key] == a[-1]["measured"]["queries"][key] + b[-1]["measured"]["queries"][key]
    assert (
        s["total"]["traffic"]["bytes_sent"]
        == a[-1]["total"]["traffic"]["bytes_sent"] + b[-1]["total"]["traffic"]["bytes_sent"]
    )
    assert s["answered_qps"] == pytest.approx(a[-1]["answered_qps"] + b[-1]["answered_qps"])
    lat = s["measured"]["latency"]
    assert lat["count"] == a[-1]["measured"]["latency"]["count"] + b[-1]["measured"]["latency"]["count"]
    assert sum(c for _, c in hdr.decode(lat["hdr"])) == lat["count"]
    low = min(a[-1]["measured"]["latency"]["p50_us"], b[-1]["measured"]["latency"]["p50_us"])
    high = max(a[-1]["measured"]["latency"]["p50_us"], b[-1]["measured"]["latency"]["p50_us"])
    assert low <= lat["p50_us"] <= high
    assert lat["max_us"] == max(a[-1]["measured"]["latency"]["max_us"], b[-1]["measured"]["latency"]["max_us"])
    assert s["accounting"]["balanced"] is True
    assert len([r for r in merged if r["type"] == "interval"]) == min(
        len([r for r in x if r["type"] == "interval"]) for x in (a, b)
    )
    # One worker behind: the merged trial is behind.
    behind = [*b[:-1], {**b[-1], "generator_kept_up": False}]
    assert merge_records([a, behind], config)[-1]["generator_kept_up"] is False
    assert merge_records([a, b], config)[-1]["generator_kept_up"] is (
        a[-1]["generator_kept_up"] and b[-1]["generator_kept_up"]
    )


def test_merge_refuses_workers_that_started_apart() -> None:
    a, b = _records(0), _records(1)
    late = [{**b[0], "started_unix_ms": a[0]["started_unix_ms"] + 5000}, *b[1:]]
    with pytest.raises(EngineError, match="apart"):
        merge_records([a, late], a[0]["config"], max_skew_ms=1000)
    with pytest.raises(EngineError, match="no start or no summary"):
        merge_records([a, b[:-1]], a[0]["config"])


@pytest.mark.parametrize(
    ("settings", "says"),
    [
        (ClusterSettings("tcp://127.0.0.1:8786", "/tmp", "127.0.0.1"), "TLS only"),
        (ClusterSettings("tls://127.0.0.1:8786", None, "127.0.0.1"), "--cluster-tls"),
        (ClusterSettings("tls://127.0.0.1:8786", "/tmp", None), "--cluster-target-address"),
        (ClusterSettings("netns:0"), "at least one host"),
        (ClusterSettings("netns:2", "/tmp"), "makes its own"),
        (ClusterSettings("tls://127.0.0.1", "/tmp", "127.0.0.1"), r"tls://127\.0\.0\.1: no port"),
        (ClusterSettings("tls://[::1]", "/tmp", "127.0.0.1"), "no port"),
        (ClusterSettings("tls://127.0.0.1:99999", "/tmp", "127.0.0.1"), "port 99999 is out of range 1..65535"),
        (ClusterSettings("tls://127.0.0.1:0", "/tmp", "127.0.0.1"), "port 0 is out of range"),
        (ClusterSettings("tls://127.0.0.1:8786/x", "/tmp", "127.0.0.1"), "not an address"),
        (ClusterSettings("tls://:8786", "/tmp", "127.0.0.1"), "not an address"),
    ],
)
def test_settings_refuse_with_one_line(settings: ClusterSettings, says: str) -> None:
    with pytest.raises(UsageError, match=says):
        settings.validate()


@pytest.mark.parametrize("address", ["tls://sched.example:8786", "tls://192.0.2.1:1", "tls://[2001:db8::1]:65535"])
def test_scheduler_addresses_with_a_port_are_taken(address: str) -> None:
    ClusterSettings(address, "/tmp", "127.0.0.1").validate()


@pytest.mark.parametrize(("address", "says"), [("tls://127.0.0.1", "no port"), ("tls://127.0.0.1:99999", "99999")])
def test_load_refuses_a_scheduler_address_before_anything_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], address: str, says: str
) -> None:
    """No connection is tried (it took 21 s and ended in a traceback): one line, exit code 2,
    no run directory."""
    from dnscost.cli import main

    out = tmp_path / "o"
    argv = ["load", "--target", "builtin", "--transport", "udp", "--cluster", address, "--cluster-tls", str(tmp_path)]
    assert main([*argv, "--cluster-target-address", "127.0.0.1", "--output", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"dnscost: --cluster {address}: ") and says in err, err
    assert not out.exists()


def test_unreachable_scheduler_is_a_usage_error(tmp_path: Path) -> None:
    from dnscost.certs import make_cluster_tls
    from dnscost.cluster import open_cluster
    from dnscost.targets.base import free_port

    need(shutil.which("openssl") is not None, "needs openssl")
    make_cluster_tls(tmp_path / "tls")
    settings = ClusterSettings(f"tls://127.0.0.1:{free_port()}", str(tmp_path / "tls"), "127.0.0.1")
    with pytest.raises(UsageError, match="not reachable"):
        open_cluster(settings, tmp_path)
    with pytest.raises(UsageError, match="not found"):
        open_cluster(ClusterSettings(settings.address, str(tmp_path / "none"), "127.0.0.1"), tmp_path)


def _builtin_answers(log: Path, sources: set[str]) -> int:
    """Answers the builtin target's connections log counts to connections from ``sources``."""
    total = 0
    for line in log.read_text().splitlines():
        r = json.loads(line)
        if r["peer_address"].rpartition(":")[0].strip("[]") in sources:
            total += int(r["answers"])
    return total


@pytest.mark.load_timing
@pytest.mark.root
@pytest.mark.parametrize(
    ("target", "transports"),
    [("builtin", ("dot",)), pytest.param("dnsdist", ("udp", "dot"), marks=pytest.mark.resolver)],
)
def test_two_namespace_hosts_answers_equal_the_targets(
    root: None, tmp_path: Path, target: str, transports: tuple[str, ...]
) -> None:
    """Two workers, each in a namespace host of its own, load one target for two seconds; the
    merged answers equal the target's own count (dnsdist's counters; the builtin responder's
    connections log, which counts every answer of every connection)."""
    import os

    from dnscost.cluster import open_cluster
    from dnscost.trial import LoadSettings, run_trial

    need(target == "builtin" or shutil.which(target) is not None, f"needs {target}")
    need(len(os.sched_getaffinity(0)) >= 2, "needs two CPUs")
    cluster = open_cluster(ClusterSettings("netns:2"), tmp_path / "cluster", cpus=[1])
    try:
        assert len(cluster.workers) == 2
        sources = {a for w in cluster.workers for a in w["sources"]}
        assert len({w["sources"][0] for w in cluster.workers}) == 2
        for transport in transports:
            trial_dir = tmp_path / f"{target}-{transport}"
            engine = {"connections": 4, "rate": 2000.0, "warmup_ms": 500, "duration_ms": 2000, "threads": 1}
            record = run_trial(LoadSettings(target, transport, engine, [0], [1], names=1000), trial_dir, cluster)
            assert record["status"] == "done"
            workers = record["cluster"]["workers"]
            assert [w["connections"] for w in workers] == [2, 2]
            assert [w["rate"] for w in workers] == [1000.0, 1000.0]
            assert {w["host"] for w in workers} == {w["host"] for w in cluster.workers}
            assert record["cluster"]["start_skew_ms"] <= record["cluster"]["max_skew_ms"]
            v = record["summary"]["validity"]
            own = [json.loads((trial_dir / w["dir"] / "engine.jsonl").read_text().splitlines()[-1]) for w in workers]
            assert all(o["total"]["queries"]["answered"] > 0 for o in own)
            assert v["engine_answered"] == sum(o["total"]["queries"]["answered"] for o in own)
            if target == "builtin":
                assert _builtin_answers(trial_dir / "target" / "connections.jsonl", sources) == v["engine_answered"]
            else:
                assert v["target_answered"] == v["engine_answered"]
            assert v["generator_kept_up"], v
            assert math.isclose(record["summary"]["answered_qps"], 2000, rel_tol=0.05)
        if target == "builtin":
            _population_over_the_cluster(tmp_path / "population", cluster, sources)
    finally:
        cluster.close()


def _population_over_the_cluster(trial_dir: Path, cluster: Any, sources: set[str]) -> None:
    """A population of three classes (UDP, DoT clients of a profile, one DoQ connection) split
    over the same two workers: the DoQ class on the first only, the others halved; the merged
    classes each at their rate, and the connected classes' answers the responder's own count."""
    from dnscost.population import Replay
    from dnscost.transports import POPULATION
    from dnscost.trial import LoadSettings, run_trial

    profile = {"name": "p", "transport": "dot", "query_interval_ms": 100}
    classes: list[Any] = [
        {"name": "stub", "config": {"transport": "udp", "connections": 4, "rate": 400.0}},
        {"name": "dot", "config": {"transport": "dot", "profile": profile, "clients": 4, "rate": 40.0}},
        {"name": "quic", "config": {"transport": "doq", "connections": 1, "rate": 20.0}},
    ]
    engine = {"warmup_ms": 500, "duration_ms": 2000}
    settings = LoadSettings(
        "builtin", POPULATION, engine, [0], [1], names=1000, population=Replay("test", 1.0, classes, 460.0)
    )
    record = run_trial(settings, trial_dir, cluster)
    assert record["status"] == "done"
    workers = record["cluster"]["workers"]
    assert [w["connections"] for w in workers] == [2 + 2 + 1, 2 + 2]
    assert [w["rate"] for w in workers] == [200.0 + 20.0 + 20.0, 200.0 + 20.0]
    s = record["summary"]
    rates = {"stub": 400.0, "dot": 40.0, "quic": 20.0}
    assert [c["name"] for c in s["classes"]] == list(rates)
    for c in s["classes"]:
        assert math.isclose(c["answered_qps"], rates[c["name"]], rel_tol=0.05), c
        assert c["clients"] == (4 if c["name"] == "dot" else None) and c["rate_qps"] == rates[c["name"]], c
    assert sum(c["queries_answered_total"] for c in s["classes"]) == s["validity"]["engine_answered"]
    # The responder logs every connection it served (not UDP's datagrams): the DoT and DoQ
    # classes' answers, counted on its side.
    connected = sum(c["queries_answered_total"] for c in s["classes"] if c["transport"] != "udp")
    assert _builtin_answers(trial_dir / "target" / "connections.jsonl", sources) == connected


SPEC = """
name = "c"
targets = ["builtin"]
[[group]]
name = "load"
transports = ["udp"]
connections = 4
rate = 1000
duration = "2s"
"""


def test_spec_cluster_table(tmp_path: Path) -> None:
    from dnscost.spec import parse_spec

    origin = str(tmp_path / "c.toml")
    assert parse_spec(SPEC, origin).cluster is None
    spec = parse_spec(SPEC + '[cluster]\naddress = "netns:2"\n', origin)
    assert spec.cluster == ClusterSettings("netns:2")
    assert spec.to_dict()["cluster"]["address"] == "netns:2"
    remote = '[cluster]\naddress = "tls://192.0.2.1:8786"\ntls = "tls"\ntarget_address = "192.0.2.2"\n'
    assert parse_spec(SPEC + remote, origin).cluster == ClusterSettings(
        "tls://192.0.2.1:8786", str(tmp_path / "tls"), "192.0.2.2"
    )
    with pytest.raises(UsageError, match="cluster: workers: unknown field"):
        parse_spec(SPEC + '[cluster]\naddress = "netns:2"\nworkers = 2\n', origin)
    with pytest.raises(UsageError, match=r"cluster: .*--cluster-tls"):
        parse_spec(SPEC + '[cluster]\naddress = "tls://192.0.2.1:8786"\n', origin)


def test_cli_refuses_a_cluster_with_another_network(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from dnscost.cli import main

    spec = tmp_path / "c.toml"
    spec.write_text(SPEC)
    assert main(["run", str(spec), "--cluster", "netns:2", "--network", "veth", "--output", str(tmp_path / "r")]) == 2
    assert "--network veth is not possible" in capsys.readouterr().err
    assert main(["run", str(spec), "--cluster-tls", str(tmp_path)]) == 2
    assert "go with --cluster" in capsys.readouterr().err


def test_a_plan_that_cannot_be_split_fails_before_the_first_trial(tmp_path: Path) -> None:
    from dnscost.plan import expand
    from dnscost.runner import check_split
    from dnscost.spec import parse_spec

    spec = parse_spec(SPEC, str(tmp_path / "c.toml"))
    plan = expand(spec)
    check_split(spec, plan, 2, [0], [1])
    with pytest.raises(UsageError, match=rf"{plan[0].id}: 4 connections cannot be split over 8"):
        check_split(spec, plan, 8, [0], [1])
