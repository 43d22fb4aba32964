"""`dnscost client`: network presets (parsing, validation, the link parameters they give), the
latency check's cases and verdicts, and the check itself over emulated links (root)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from dnscost.clientside.latency import CASES, Case, engine_config, judge
from dnscost.errors import UsageError
from dnscost.lab.presets import Preset, load_presets, parse_preset

GOOD = {"label": "x", "source": "a paper", "rtt_ms": 40}


def test_shipped_presets_name_their_sources_and_parse() -> None:
    presets = load_presets()
    assert {"native", "cable", "lte", "lossy-lte", "slow-4g", "3g", "upstream"} <= set(presets)
    assert all(p.source for p in presets.values())
    lte = presets["lossy-lte"]
    assert (lte.rtt_ms, lte.loss_pct, lte.down_kbps, lte.up_kbps) == (70, 1.0, 12000, 12000)
    assert "dnscost's choice" in lte.source  # not passed off as Hounsel's


def test_link_parameters_split_the_round_trip_and_take_each_directions_rate() -> None:
    p = load_presets()["slow-4g"]
    assert p.link("up") == "delay=75000us,rate=750kbit"
    assert p.link("down") == "delay=75000us,rate=1600kbit"
    q = parse_preset("q", {**GOOD, "jitter_ms": 2, "loss_pct": 0.5})
    assert q.link("up") == "delay=20000us,jitter=2000us,loss=0.5%"
    assert not load_presets()["native"].shaped


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"label": "x", "rtt_ms": 40}, "source must be a non-empty string"),
        ({**GOOD, "rtt_ms": -1}, "rtt_ms must be a number in [0, 10000]"),
        ({**GOOD, "rtt_ms": "40"}, "rtt_ms must be a number"),
        ({**GOOD, "loss_pct": 60}, "loss_pct must be a number in [0, 50]"),
        ({**GOOD, "down_kbps": 0}, "down_kbps must be a number in [8,"),
        ({**GOOD, "jitter_ms": 30}, "jitter_ms (30) exceeds each direction's delay (20 ms)"),
        ({**GOOD, "latency": 3}, "unknown field 'latency'"),
        ({"label": "x", "source": "s"}, "rtt_ms is missing"),
    ],
)
def test_bad_presets_are_refused_naming_the_field(table: dict[str, object], message: str) -> None:
    with pytest.raises(UsageError, match=r"^preset p: ") as e:
        parse_preset("p", table)
    assert message in str(e.value)


def test_user_presets_add_and_replace(tmp_path: Path) -> None:
    f = tmp_path / "mine.toml"
    f.write_text('[sat]\nlabel = "GEO"\nsource = "mine"\nrtt_ms = 600\n[lte]\nlabel = "l"\nsource = "m"\nrtt_ms = 1\n')
    presets = load_presets(f)
    assert presets["sat"].rtt_ms == 600 and presets["lte"].rtt_ms == 1 and "cable" in presets
    f.write_text("[sat\n")
    with pytest.raises(UsageError, match=r"^presets: .*mine\.toml"):
        load_presets(f)
    with pytest.raises(UsageError, match="cannot read"):
        load_presets(tmp_path / "absent.toml")


def test_presets_command_lists_them_and_bad_files_exit_2(tmp_path: Path) -> None:
    from dnscost.cli import main

    assert main(["client", "presets"]) == 0
    bad = tmp_path / "bad.toml"
    bad.write_text('[x]\nlabel = "x"\nrtt_ms = 5\n')
    assert main(["client", "presets", "--presets", str(bad)]) == 2


def _summary(p50_us: int, *, answered: int = 10, opened: int = 10, full: int = 0, resumed: int = 0, zrtt: int = 0):  # type: ignore[no-untyped-def]
    return {
        "measured": {
            "latency": {"p50_us": p50_us, "min_us": p50_us - 100, "p90_us": p50_us + 100},
            "queries": {"answered": answered, "timed_out": 0},
            "connections": {"opened": opened},
            "handshakes": {"full": full, "resumed": resumed, "zero_rtt_accepted": zrtt, "zero_rtt_rejected": 0},
        }
    }


def test_verdicts_allow_five_percent_and_the_slack_and_check_the_shape() -> None:
    dot = Case("dot", "full", 3)
    # 3 x 50 ms = 150 ms, allowed 7.5 + 2 ms either side.
    assert judge(dot, 50, _summary(159_000, full=10))["ok"]
    assert not judge(dot, 50, _summary(160_000, full=10))["ok"]
    assert not judge(dot, 50, _summary(140_000, full=10))["ok"]
    # A baseline of 1 ms (the ends' work over a link of no delay) moves the expected time.
    row = judge(dot, 50, _summary(160_000, full=10), baseline_ms=1.0)
    assert row["ok"] and row["expected_ms"] == 151.0
    # The ends' work may overlap the link's delay: below round trips x RTT + baseline is fine,
    # down to round trips x RTT (less the allowance); a round trip short is not.
    doq = Case("doq", "full", 2)
    assert judge(doq, 20, _summary(42_367, full=10), baseline_ms=7.3)["ok"]
    assert judge(doq, 20, _summary(36_100, full=10), baseline_ms=7.3)["ok"]
    assert not judge(doq, 20, _summary(35_900, full=10), baseline_ms=7.3)["ok"]
    assert not judge(doq, 20, _summary(21_000 + 7_300, full=10), baseline_ms=7.3)["ok"]
    assert not judge(doq, 20, _summary(51_400, full=10), baseline_ms=7.3)["ok"]
    row = judge(dot, 50, _summary(150_000, resumed=10))  # resumed where full was asked
    assert not row["ok"] and not row["shape_ok"]
    reused = Case("tcp", "reused", 1)
    assert judge(reused, 20, _summary(20_500, opened=0))["ok"]
    assert not judge(reused, 20, _summary(20_500, opened=3))["ok"]  # it reconnected
    zero = Case("doq", "0rtt", 1)
    assert judge(zero, 20, _summary(21_000, resumed=10, zrtt=10))["ok"]
    assert not judge(zero, 20, _summary(21_000, resumed=10, zrtt=2))["ok"]


def test_every_case_config_is_one_the_engine_accepts(tmp_path: Path) -> None:
    from dnscost.engine import check_config

    for case in CASES:
        config = engine_config(case, 20, 10, tmp_path / "ca.pem")
        config.pop("ca_file", None)
        check_config(config, f"{case.transport}-{case.shape}")
        if case.shape not in ("reused", "new"):
            assert config["idle_timeout_ms"] < 1000 / config["rate"] - 3 * 20  # closed before the next query


@pytest.mark.load_timing
@pytest.mark.root
def test_latency_check_at_two_rtts_over_the_emulated_link(root: None, tmp_path: Path) -> None:
    """The issue's CI test: UDP, TCP, DoT, DoH and DoQ at two round-trip times; every case
    within ±5 % + slack of its round trips, and the labs gone afterwards."""
    from dnscost.clientside.latency import run_check, table

    rows = run_check(tmp_path, [20, 50], ["udp", "tcp", "dot", "doh", "doq"], queries=8)
    failed = [r for r in rows if not r["ok"]]
    # The whole table and each failing row's counts, so a failure on CI says which bound it broke.
    why = [
        {
            k: r[k]
            for k in (
                "transport",
                "shape",
                "rtt_ms",
                "shape_ok",
                "answered",
                "timed_out",
                "connections_opened",
                "handshakes",
            )
        }
        for r in failed
    ]
    assert not failed, f"{table(rows)}\n{why}"
    assert len(rows) == 3 * len([c for c in CASES if c.transport in ("udp", "tcp", "dot", "doh", "doq")])
    assert [r["rtt_ms"] for r in rows][:: len(rows) // 3] == [0, 20, 50]  # the baselines first
    # The link itself saw the delay asked for (an observer other than the engine).
    import json

    doc = json.loads((tmp_path / "check.json").read_text())
    assert set(doc["link"]) == {"rtt-0ms", "rtt-20ms", "rtt-50ms"}
    for name, rtt in (("rtt-20ms", 20), ("rtt-50ms", 50)):
        for direction in ("a_to_b", "b_to_a"):
            applied = doc["link"][name][direction]
            assert rtt / 2 * 1000 <= applied["delay_min_us"] <= applied["delay_mean_us"] < rtt / 2 * 1000 + 1000
    assert all(v is not None for v in doc["link"].values())
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    assert f"dnscost-lab-{os.getpid()}-" not in netns  # this process's labs (another's may run)


def test_presets_are_distinct_objects() -> None:
    a = Preset("a", "l", "s", 10.0)
    assert a.to_dict()["rtt_ms"] == 10.0


def test_client_specs_parse_and_bad_ones_name_the_field(tmp_path: Path) -> None:
    from dnscost.clientside.spec import load_spec, parse_spec

    shipped = Path(__file__).parents[1] / "dnscost" / "experiments"
    for name in ("client.toml", "client-quick.toml"):
        spec = load_spec(shipped / name)
        assert spec.check and spec.times and spec.pageload
        assert set(spec.presets) >= {p.name for p in spec.times.presets} | {"upstream"}
        assert spec.to_dict()["times"]["upstream"] == "upstream"
    for doc, message in [
        ({}, "give at least one of"),
        ({"times": {"presets": ["mars"]}}, "times.presets: unknown preset 'mars'"),
        ({"times": {"presets": ["lte"], "qps": 0}}, "times.qps must be a number in [0.1, 100]"),
        ({"times": {"presets": ["lte"], "targets": ["bind"]}}, "times.targets: unknown 'bind'"),
        ({"check": {"rtt_ms": [0]}}, "check.rtt_ms must be a number in [1, 2000]"),
        ({"check": {"transports": ["udp", "udp"]}}, "check.transports names an entry twice"),
        ({"pageload": {"presets": ["lte"], "browser": "lynx"}}, "pageload.browser: unknown 'lynx'"),
        ({"pageload": {"presets": ["lte"], "pages": 2.5}}, "pageload.pages must be an integer"),
        ({"check": {}, "extra": 1}, "client spec: unknown field 'extra'"),
    ]:
        with pytest.raises(UsageError) as e:
            parse_spec(doc)
        assert message in str(e.value), (doc, str(e.value))
    bad = tmp_path / "bad.toml"
    bad.write_text("[check\n")
    from dnscost.cli import main

    assert main(["client", "run", str(bad), "--output", str(tmp_path / "out")]) == 2
    assert not (tmp_path / "out").exists()  # refused before anything ran


@pytest.mark.load_timing
@pytest.mark.root
@pytest.mark.resolver
@pytest.mark.parametrize("transports", [("udp", "dot"), ("dot",)])
def test_response_times_cold_cross_both_links_and_warm_one(
    root: None, tmp_path: Path, transports: tuple[str, ...]
) -> None:
    """Through unbound in the lab: a cold query costs the client's RTT plus the upstream's, a
    warm one the client's alone, on every transport; unbound's own counters say which was which.
    Without udp, the warm cache is filled over the first transport asked."""
    import shutil

    from conftest import need

    need(shutil.which("unbound") is not None, "needs unbound")
    from dnscost.clientside.times import TimesSettings, run_times

    lan = Preset("lan", "20 ms", "test", 20.0)
    up = Preset("up", "30 ms", "test", 30.0)
    # Not tcp: unbound does not set TCP_NODELAY on tcp and DoT connections, and its tcp answers
    # often wait for the client's delayed acknowledgement (up to 40 ms; docs/client.md). At 4
    # qps, DoT's queries rarely overlap, so its answers do not wait.
    settings = TimesSettings("unbound", transports, qps=4, queries=10, caches=("cold", "warm"))
    rows = run_times(tmp_path, [lan], up, settings)
    assert {(r["cache"], r["transport"]) for r in rows} == {(c, t) for c in ("cold", "warm") for t in transports}
    for r in rows:
        assert r["answered"] == r["offered"] > 0, r
        # DoT's first query opens the connection (3 round trips): the median is past it. The
        # margin is what the resolver and a busy VM add (a cold DoT median once took 58.9 ms of
        # 50); a round trip missing or added on either link is 20 or 30 ms.
        expected = 20 + (30 if r["cache"] == "cold" else 0)
        assert expected <= r["p50_ms"] < expected + 10, r
        assert r["cache_hit_ratio"] == (0.0 if r["cache"] == "cold" else 1.0), r
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    assert f"dnscost-lab-{os.getpid()}-" not in netns  # this process's labs (another's may run)
