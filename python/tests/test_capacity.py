"""The capacity planner (``dnscost plan``) on a tiny stored run with known costs: its cores,
memory and kWh equal the hand computation, within the intervals it states; a term the run does
not identify gives "not identified", never a number; bad mixes are refused with one line and
exit 2; it runs on real stored runs (the quick fixture, and the full study's tables)."""

from __future__ import annotations

import csv
import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from dnscost.analysis.capacity import (
    NOT_IDENTIFIED,
    STANDARD_MIXES,
    WHAT_IF_QPS,
    Mix,
    parse_mix,
    plan,
    run_model,
    what_if_rows,
)
from dnscost.cli import main
from dnscost.commands.plan import load_tables
from dnscost.errors import UsageError
from dnscost.spec import load_profile

FIXTURES = Path(__file__).parent / "fixtures"
STUDY_TABLES = Path(__file__).parents[2] / "docs" / "study-run"

COST = {
    "udp": {"query": 4.0},
    "dot": {"query": 8.0, "full_handshake": 900.0, "resumed_handshake": 250.0, "connection_second": 1.0},
}
"""The tiny run's target CPU-µs per query, full handshake, resumed handshake, connection-second."""
USER_BYTES, KERNEL_BYTES = 20_000.0, 5_000.0
"""dot's user and kernel bytes per connection held."""
BASE_RSS, BASE_KERNEL = 50e6, 1e6
"""The target idle with its cache filled."""
J_PER_CPU_US = 2e-6
"""Joules above idle per CPU-µs (the CPU power model's kind: a constant)."""
ONE_QUERY_HOLD_S = 0.002
"""How long a one-query dot connection stays open."""
SECONDS = 10.0


def _summary(
    q: float, full: float, resumed: float, conn_s: float, cpu: float, held: float, noise: tuple[float, float]
) -> dict[str, Any]:
    return {
        "measured_s": SECONDS,
        "answered_qps": q / SECONDS,
        "offered_qps": q / SECONDS,
        "queries_answered": q,
        "connections_established": full + resumed,
        "handshakes_full": full,
        "handshakes_resumed": resumed,
        "connection_seconds": conn_s,
        "connections_held": held,
        "target_cpu_us": cpu,
        "energy_marginal_j": cpu * J_PER_CPU_US,
        "energy_source": "model",
        "meter": {
            "rss_bytes_mean": BASE_RSS + USER_BYTES * held + noise[0],
            "cgroup_kernel_bytes_mean": BASE_KERNEL + KERNEL_BYTES * held + noise[1],
        },
        "baseline_meter": {"rss_bytes_mean": BASE_RSS, "cgroup_kernel_bytes_mean": BASE_KERNEL},
        "validity": {"flags": [], "valid": True},
    }


def write_run(run_dir: Path, *, handshakes: bool = True, idle: bool = True, noise: float = 0.01) -> None:
    """A stored run of one target (``tiny`` when every cost-model trial is there, ``blind``
    when the handshake or idle trials are left out): udp queries at six rates; dot idle
    connections held at four counts, queries on 10 persistent connections at three rates, and
    one query per connection at three connection rates with resumption off and on (a resuming
    client's first connection is full); two repetitions; CPU times are :data:`COST` applied to
    the counts times 1 + ``noise`` x a seeded normal draw, and the idle trials' memory is
    :data:`USER_BYTES` and :data:`KERNEL_BYTES` per connection plus seeded noise."""
    rng = np.random.default_rng(14)
    target = "tiny" if handshakes and idle else "blind"
    trials: list[dict[str, Any]] = []

    def add(kind: str, transport: str, lifetime: str, q: float, full: float, resumed: float, conn_s: float) -> None:
        c = COST[transport]
        cpu = (
            c["query"] * q
            + c.get("full_handshake", 0.0) * full
            + c.get("resumed_handshake", 0.0) * resumed
            + c.get("connection_second", 0.0) * conn_s
        ) * (1 + noise * rng.normal())
        held = conn_s / SECONDS if kind == "idle" else 0.0
        memory = (rng.normal(0, 200_000), rng.normal(0, 20_000)) if kind == "idle" else (0.0, 0.0)
        tid = f"{kind}-{target}-{transport}-{len(trials)}"
        trials.append(
            {
                "id": tid,
                "group": "memory" if kind == "idle" else "cost",
                "kind": kind,
                "target": target,
                "transport": transport,
                "params": {"connections": 10, "lifetime": lifetime, "resumption": 0.0, "rate": q / SECONDS},
                "rep": 0,
                "status": "done",
                "target_version": "1.0",
                "summary": _summary(q, full, resumed, conn_s, cpu, held, memory),
            }
        )

    for _ in range(2):
        for qps in (1000, 2000, 4000, 6000, 8000, 10000):
            add("load", "udp", "forever", qps * SECONDS, 0, 0, 0)
        if idle:
            for n in (1000, 2000, 4000, 8000):
                add("idle", "dot", "forever", 0, 0, 0, n * SECONDS)
        for qps in (2000, 5000, 10000):
            add("load", "dot", "forever", qps * SECONDS, 0, 0, 10 * SECONDS)
        if handshakes:
            for rate in (200, 600, 1000):
                n = rate * SECONDS
                add("load", "dot", "1q", n, n, 0, n * ONE_QUERY_HOLD_S)
                add("load", "dot", "1q", n, 0.1 * n, 0.9 * n, n * ONE_QUERY_HOLD_S)
    plan_entries = [{k: t[k] for k in ("id", "group", "kind", "target", "transport", "params", "rep")} for t in trials]
    run = {
        "format_version": 2,
        "experiment": "tiny",
        "run_id": target,
        "status": "done",
        "plan": plan_entries,
        "trials": {t["id"]: {"status": "done"} for t in trials},
        "versions": {target: "1.0"},
        "machine": {},
    }
    run_dir.mkdir(parents=True)
    (run_dir / "run.json").write_text(json.dumps(run))
    for t in trials:
        d = run_dir / "trials" / t["id"]
        d.mkdir(parents=True)
        (d / "trial.json").write_text(json.dumps(t))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("plan") / "tiny"
    write_run(run_dir)
    return run_dir


@pytest.fixture(scope="module")
def blind(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("plan") / "blind"
    write_run(run_dir, handshakes=False)
    return run_dir


def profiles(name: str) -> dict[str, Any]:
    return load_profile(name, Path.cwd())


def hand(qps: float, peak: float, udp: float, dot: float, resumption: float) -> dict[str, float]:
    """The plan of udp=``udp``, dot:1s:resumption=R=``dot`` (10 qps per connection, renewed
    every second) worked by hand from :data:`COST`."""
    top = qps * peak
    dot_qps = dot * top
    held = dot_qps / 10.0
    handshakes = held / 1.0
    c = COST["dot"]
    cpu = (
        udp * top * COST["udp"]["query"]
        + dot_qps * c["query"]
        + handshakes * (1 - resumption) * c["full_handshake"]
        + handshakes * resumption * c["resumed_handshake"]
        + held * c["connection_second"]
    )
    return {
        "cpu_us_per_s": cpu,
        "cores": math.ceil(cpu / 1e6),
        "memory_bytes": BASE_RSS + BASE_KERNEL + held * (USER_BYTES + KERNEL_BYTES),
        "kwh_per_day": cpu / peak * J_PER_CPU_US * 86_400 / 3.6e6,
        "connections_held": held,
    }


def test_the_plan_equals_the_hand_computation_within_its_intervals(tiny: Path) -> None:
    trials, points, _ = load_tables(tiny)
    mix = parse_mix("udp=0.6,dot:1s:resumption=0.5=0.4", 50_000, 1.5, profiles)
    (t,) = plan(mix, run_model(trials, points)).targets
    want = hand(50_000, 1.5, 0.6, 0.4, 0.5)
    assert want["cores"] == 3  # 2.4 cores of CPU at 75 000 qps
    assert t.target == "tiny" and t.version == "1.0"
    assert t.connections_held == pytest.approx(want["connections_held"])
    for name, got in (
        ("cpu_us_per_s", t.cpu_us_per_s),
        ("memory_bytes", t.memory_bytes),
        ("kwh_per_day", t.energy_kwh_per_day),
    ):
        assert got.status == "identified" and got.value is not None and got.low is not None and got.high is not None
        assert got.value == pytest.approx(want[name], rel=0.02), name
        assert got.low <= want[name] <= got.high, name
        assert got.low < got.high, name  # an interval, not a point
    assert t.cores.value == want["cores"] and t.cores.low is not None and t.cores.high is not None
    assert t.cores.low <= want["cores"] <= t.cores.high
    # A few resamples lack the trials that separate a term: the interval is over the others, and says so.
    assert 900 < t.resamples < 1000
    # Its load trials record no busy share and its idle trials are too few for intervals: every share
    # is priced at saturation, and it says so.
    assert t.notes == [
        "at their cost at saturation (the load model does not price them): udp (udp: no load fit); "
        "dot:1s:resumption=0.5 (dot: its load fit has 8 trials, too few for an interval)",
        f"CPU interval over the {t.resamples} of 1000 resamples that identify every term the mix needs",
    ]
    udp, dot = t.shares
    assert (udp.qps, udp.connections_held, udp.handshakes_full_per_s) == (45_000, 0, 0)
    assert dot.handshakes_full_per_s == pytest.approx(1500) and dot.handshakes_resumed_per_s == pytest.approx(1500)


def test_one_query_per_connection_is_held_as_long_as_the_run_measured(tiny: Path) -> None:
    trials, points, _ = load_tables(tiny)
    (t,) = plan(parse_mix("dot:1q=1", 1000, 1.0, profiles), run_model(trials, points)).targets
    held = 1000 * ONE_QUERY_HOLD_S
    want = 1000 * (COST["dot"]["query"] + COST["dot"]["full_handshake"]) + held * COST["dot"]["connection_second"]
    assert t.connections_held == pytest.approx(held)
    assert t.cpu_us_per_s.value == pytest.approx(want, rel=0.02)
    assert t.memory_bytes.value == pytest.approx(BASE_RSS + BASE_KERNEL + held * (USER_BYTES + KERNEL_BYTES), rel=1e-3)


def test_the_command_prints_the_plan_and_its_json(tiny: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["plan", str(tiny), "--qps", "50000", "--peak", "1.5", "--mix", "udp=0.6,dot:1s:resumption=0.5=0.4"]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "75 000 qps" in text and "tiny 1.0" in text and "not identified" not in text
    assert main([*args, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    want = hand(50_000, 1.5, 0.6, 0.4, 0.5)
    (t,) = doc["targets"]
    assert t["cores"]["value"] == want["cores"]
    assert t["memory_bytes"]["value"] == pytest.approx(want["memory_bytes"], rel=1e-3)
    assert t["energy_kwh_per_day"]["low"] <= want["kwh_per_day"] <= t["energy_kwh_per_day"]["high"]
    assert doc["mix"]["peak_qps"] == 75_000 and [s["label"] for s in doc["mix"]["shares"]] == [
        "udp",
        "dot:1s:resumption=0.5",
    ]


def test_a_mix_file_gives_the_same_plan(tiny: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    mix = tmp_path / "mix.toml"
    mix.write_text(
        'qps = 10000\npeak = 1.5\n[[share]]\ntransport = "udp"\nshare = 0.6\n'
        '[[share]]\ntransport = "dot"\nlifetime = "1s"\nresumption = 0.5\nshare = 0.4\n'
    )
    assert main(["plan", str(tiny), "--mix-file", str(mix), "--qps", "50000", "--json"]) == 0
    from_file = json.loads(capsys.readouterr().out)
    assert (
        main(
            [
                "plan",
                str(tiny),
                "--qps",
                "50000",
                "--peak",
                "1.5",
                "--mix",
                "udp=60%,dot:1s:resumption=0.5=40%",
                "--json",
            ]
        )
        == 0
    )
    from_line = json.loads(capsys.readouterr().out)
    assert from_file["targets"][0]["cpu_us_per_s"] == from_line["targets"][0]["cpu_us_per_s"]
    assert from_file["mix"]["qps"] == 50_000  # --qps overrides the file's


def test_a_term_the_run_does_not_identify_gives_not_identified(blind: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trials, points, _ = load_tables(blind)
    model = run_model(trials, points)
    (t,) = plan(parse_mix("udp=0.6,dot:1s=0.4", 50_000, 1.5, profiles), model).targets
    for e in (t.cpu_us_per_s, t.cores, t.energy_kwh_per_day):
        assert (e.value, e.low, e.high, e.status) == (None, None, None, NOT_IDENTIFIED)
    assert t.cpu_us_per_s.reason == "dot full_handshake: no valid trial counts it"
    assert t.memory_bytes.value == pytest.approx(hand(50_000, 1.5, 0.6, 0.4, 0.0)["memory_bytes"], rel=0.02)
    # What the run does identify is still planned: persistent dot needs no handshake.
    (p,) = plan(parse_mix("udp=0.6,dot:persistent=0.4", 50_000, 1.5, profiles), model).targets
    assert p.cpu_us_per_s.value is not None and p.cores.value is not None
    (u,) = plan(parse_mix("udp=1", 50_000, 1.5, profiles), model).targets
    assert u.memory_bytes.value == pytest.approx(BASE_RSS + BASE_KERNEL) and u.memory_bytes.low is None
    # Nor does a transport the run never measured get a number.
    (q,) = plan(parse_mix("doq=1", 1000, 1.0, profiles), model).targets
    assert q.cpu_us_per_s.value is None and q.cpu_us_per_s.reason == "doq: no valid trial of it in this run"
    assert (
        q.memory_bytes.value is None
        and q.memory_bytes.reason == "doq: no idle trials measured its memory per connection"
    )
    assert main(["plan", str(blind), "--qps", "50000", "--mix", "udp=0.6,dot:1s=0.4"]) == 0
    out = capsys.readouterr().out
    assert "blind: CPU not identified: dot full_handshake: no valid trial counts it" in out
    row = next(line for line in out.splitlines() if line.startswith("blind 1.0"))
    assert row.count("not identified") == 3  # cores, CPU and energy; memory and connections are planned


@pytest.mark.parametrize(
    ("mix", "qps", "peak", "message"),
    [
        ("udp=0.7,doh=0.2", "1000", None, "--mix: share: the shares sum to 0.9, not 1"),
        ("udp=0.5,udp=0.5,dot=0.1", "1000", None, "--mix: share: the shares sum to 1.1, not 1"),
        ("smtp:1s=1", "1000", None, "--mix: share 1 (smtp:1s=1): transport: 'smtp' is not one of"),
        ("no-such-client=1", "1000", None, "--mix: share 1: profile: no shipped profile 'no-such-client'"),
        ("udp", "1000", None, "--mix: share 1 (udp): give it as SHAPE=SHARE"),
        ("dot:lifetime=1s", "1000", None, "--mix: share 1 (dot:lifetime=1s): share: '1s' is not a number"),
        ("udp=0,dot=1", "1000", None, "--mix: share 1: share: expected above 0 and at most 1, got 0"),
        ("udp:1s=1", "1000", None, "--mix: share 1: lifetime: udp has no connections"),
        ("tcp:1s:resumption=0.5=1", "1000", None, "--mix: share 1: resumption: tcp has no TLS to resume"),
        ("dot:resumption=0.5=1", "1000", None, "--mix: share 1: resumption: a connection that lives forever"),
        ("dot:resumption=2:1s=1", "1000", None, "--mix: share 1: resumption: expected 0 to 1, got 2"),
        ("dot:soon=1", "1000", None, "--mix: share 1: lifetime: 'soon' is not a lifetime"),
        ("dot:colour=red=1", "1000", None, "--mix: share 1 (dot:colour=red=1): unknown option 'colour'"),
        ("doh:qps_per_connection=0=1", "1000", None, "--mix: share 1: qps_per_connection: expected above 0"),
        ("dot:profile=chromium-1s-google=1", "1000", None, "transport: profile 'chromium-1s-google' is doh, not dot"),
        ("udp=1", "-5", None, "--mix: qps: expected above 0, got -5"),
        ("udp=1", "1000", "0.5", "--mix: peak: expected at least 1"),
        ("udp=1", None, None, "--mix: qps: missing"),
    ],
)
def test_bad_mixes_are_refused_with_one_line_and_exit_2(
    tiny: Path, capsys: pytest.CaptureFixture[str], mix: str, qps: str | None, peak: str | None, message: str
) -> None:
    args = ["plan", str(tiny), "--mix", mix]
    args += ["--qps", qps] if qps is not None else []
    args += ["--peak", peak] if peak is not None else []
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("dnscost: ") and message in err and err.count("\n") == 1, err


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("qps = 1000\ncolour = 1\n", "unknown field 'colour' (known: qps, peak, share)"),
        ("qps = 1000\n[[share]]\ntransport = 'udp'\nshare = 1\nlifetime = '1s'\n", "share 1: lifetime: udp has no"),
        (
            "qps = 1000\n[[share]]\nprofile = 'chromium-1s-google'\nlifetime = '1s'\nshare = 1\n",
            "a profile sets its own",
        ),
        ("qps = 1000\n[[share]]\ntransport = 'dot'\nshare = 1\nwindow = 3\n", "share 1: unknown field 'window'"),
        ("qps = 1000\n[[share]]\ntransport = 'dot'\n", "share 1: share: missing"),
        ("qps = 'lots'\n[[share]]\ntransport = 'udp'\nshare = 1\n", "qps: expected a number, got 'lots'"),
        ("qps = 1000\nshare = 3\n", "share: expected [[share]] tables"),
        ("qps = 1000\n[[share]\n", "not valid TOML"),
    ],
)
def test_bad_mix_files_are_refused_with_one_line_and_exit_2(
    tiny: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, message: str
) -> None:
    path = tmp_path / "mix.toml"
    path.write_text(text)
    assert main(["plan", str(tiny), "--mix-file", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"dnscost: {path}") and message in err and err.count("\n") == 1, err


def test_not_a_run_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(tmp_path), "--qps", "1000", "--mix", "udp=1"]) == 2
    assert "neither a run directory (run.json) nor a run's tables" in capsys.readouterr().err


def test_client_profiles_become_handshakes_and_connections_per_query() -> None:
    def shape(name: str) -> tuple[str, float, float, float | None]:
        (s,) = parse_mix(f"{name}=1", 1000, 1.0, profiles).shares
        return s.shape.transport, s.shape.handshakes_per_query, s.shape.resumed_share, s.shape.connection_s_per_query

    # Chromium keeps one connection and resolves every second, two queries each time.
    assert shape("chromium-1s-google") == ("doh", 0.0, 1.0, 0.5)
    # Firefox: six queries a second on one kept connection.
    assert shape("firefox-1s-google") == pytest.approx(("doh", 0.0, 1.0, 1 / 6))
    # dnss: a query a minute on a connection it closes 30 s idle: a full handshake per query.
    assert shape("dnss-60s-google") == pytest.approx(("doh", 1.0, 0.0, 30.001))
    # A client renewing a kept connection every 100 queries.
    custom = {"name": "c", "transport": "dot", "query_interval_ms": 100, "lifetime": {"queries": 100}}
    (s,) = parse_mix("c=1", 1000, 1.0, lambda _: custom).shares
    assert (s.shape.handshakes_per_query, s.shape.connection_s_per_query) == pytest.approx((0.01, 0.1))


def test_the_what_if_table_covers_every_standard_mix_and_rate(tiny: Path) -> None:
    trials, points, _ = load_tables(tiny)
    rows = what_if_rows(run_model(trials, points), profiles)
    assert [(r["mix"], r["qps"]) for r in rows] == [(m, q) for m, _ in STANDARD_MIXES for q in WHAT_IF_QPS]
    by = {(r["mix"], r["qps"]): r for r in rows}
    udp = by[("udp=1", 50_000)]
    assert udp["cpu_us_per_s"] == pytest.approx(50_000 * COST["udp"]["query"], rel=0.02)
    assert udp["cores"] == 1 and udp["memory_bytes"] == pytest.approx(BASE_RSS + BASE_KERNEL)
    dot = by[("dot:1s=1", 10_000)]
    assert dot["cpu_us_per_s"] == pytest.approx(hand(10_000, 1.0, 0.0, 1.0, 0.0)["cpu_us_per_s"], rel=0.02)
    assert dot["cores_low"] <= dot["cores"] <= dot["cores_high"]
    # The tiny run has no doh: the browser mixes say so, with no number.
    browsers = by[("udp=0.7,chromium-1s-google=0.3", 10_000)]
    assert browsers["cores"] is None and browsers["cores_reason"] == "doh: no valid trial of it in this run"


def test_the_report_has_the_what_if_table(tiny: Path, tmp_path: Path) -> None:
    import shutil

    from dnscost.report import write_report

    run = tmp_path / "run"
    shutil.copytree(tiny, run)
    html = write_report(run).read_text()
    assert 'id="what-if"' in html and "dot:1s=1" in html and "doh: no valid trial of it in this run" in html
    md = (run / "study.md").read_text()
    assert "## What if: capacity for standard mixes" in md and "| udp=1 |" in md


def test_on_the_quick_runs_stored_records(capsys: pytest.CaptureFixture[str]) -> None:
    """A real quick run (the analysis fixture, 2-core VM): its cost model leaves DoT's full
    handshake not identified, so a mix of 1 s DoT connections is not planned, and browsers'
    persistent DoH is."""
    run = FIXTURES / "runs" / "quick"
    assert main(["plan", str(run), "--qps", "50000", "--peak", "1.5", "--mix", "udp=0.7,dot:1s=0.3", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [t["target"] for t in doc["targets"]] == ["dnsdist", "knot-resolver"]
    for t in doc["targets"]:
        assert t["cores"]["value"] is None and "dot full_handshake" in t["cpu_us_per_s"]["reason"]
    assert main(["plan", str(run), "--qps", "50000", "--mix", "udp=0.7,chromium-1s-google=0.3", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    for t in doc["targets"]:
        assert t["cores"]["value"] >= 1 and t["memory_bytes"]["value"] > 0 and t["energy_kwh_per_day"]["value"] > 0


def test_on_the_full_studys_tables() -> None:
    """docs/study-run, a kept run: the planner refits the cost model from it to the same terms
    as its stored cost_model table, and plans every standard mix. From its stored tables: they
    are the analysis of its records byte for byte (test_study_run), analysed once a session there."""
    trials, points, _ = load_tables(STUDY_TABLES / "tables")
    model = run_model(trials, points)
    with (STUDY_TABLES / "tables" / "cost_model.csv").open() as f:
        stored = {(r["target"], r["transport"], r["term"]): r for r in csv.DictReader(f)}
    for tm in model.targets:
        for transport, fit in tm.fits.items():
            for term, estimate in zip(fit.terms, fit.estimates, strict=True):
                row = stored[(tm.target, transport, term)]
                assert estimate == pytest.approx(float(row["us"])) if row["us"] else estimate is None
                if fit.boot is None:  # too few trials to resample: no interval stored either
                    assert not row["ci95_low"]
                    continue
                k = fit.terms.index(term)
                assert fit.boot.low[k] == pytest.approx(float(row["ci95_low"]))
    rows = what_if_rows(model, profiles)
    assert len(rows) == len(STANDARD_MIXES) * len(WHAT_IF_QPS) * len(model.targets)  # dnsdist, knot, coredns, builtin
    study = [r for r in rows if r["target"] in ("dnsdist", "knot-resolver")]  # the targets with memory trials
    assert len(study) == len(rows) // 2
    assert all(r["cores"] is not None and r["memory_bytes"] is not None and r["kwh_per_day"] for r in study)


def test_mix_fields_are_checked_without_the_command() -> None:
    with pytest.raises(UsageError, match=r"share: the shares sum to 0\.5, not 1"):
        parse_mix("udp=0.5", 1000, 1.0, profiles)
    m = parse_mix("udp=0.25,dot:30s=0.75", 1000, 2.0, profiles)
    assert isinstance(m, Mix) and m.peak_qps == 2000
    assert m.shares[1].shape.handshakes_per_query == pytest.approx(1 / 300)


def test_the_docs_plans_are_what_the_planner_prints(capsys: pytest.CaptureFixture[str]) -> None:
    """README.md's and docs/capacity.md's `dnscost plan docs/study-run` lines are the planner's
    output for the kept run, line for line."""
    root = STUDY_TABLES.parents[1]
    for mix, docs in (
        ("udp=0.7,chromium-1s-google=0.3", ("README.md", "docs/capacity.md")),
        ("udp=0.7,dnss-60s-google=0.3", ("docs/capacity.md",)),
    ):
        # Its stored tables, which are the analysis of its records byte for byte (test_study_run):
        # planning from the run directory would analyse its 684 trials again for each mix.
        assert main(["plan", str(STUDY_TABLES / "tables"), "--qps", "50000", "--peak", "1.5", "--mix", mix]) == 0
        lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith(("dnsdist", "knot-resolver"))]
        assert len(lines) >= 2
        for doc in docs:
            text = (root / doc).read_text(encoding="utf-8")
            # The README shows the targets' rows; docs/capacity.md every line about them.
            shown = [line for line in lines if doc != "README.md" or re.match(r"(dnsdist|knot-resolver) \d", line)]
            missing = [line for line in shown if line not in text]
            assert not missing, f"{doc}: {missing}"


def test_the_docs_hand_check_is_the_tables_arithmetic() -> None:
    """docs/capacity.md checks dnsdist's worked example "by hand against the run's tables": each
    figure of that check, recomputed here from the stored load model, cost model and memory fit
    (not from the planner), stands in the page as printed."""
    from dnscost.meter.energy import CpuPowerModel

    def terms(table: str) -> dict[tuple[str, str], float]:
        with (STUDY_TABLES / "tables" / table).open() as f:
            return {
                (r["transport"], r["term"]): float(r["us"])
                for r in csv.DictReader(f)
                if r["target"] == "dnsdist" and r["us"]
            }

    b, a = terms("load_model.csv"), terms("cost_model.csv")
    with (STUDY_TABLES / "tables" / "memory_fit.csv").open() as f:
        mem = next(r for r in csv.DictReader(f) if (r["target"], r["transport"]) == ("dnsdist", "doh"))
    page = " ".join((Path(__file__).parents[2] / "docs" / "capacity.md").read_text().split())

    times = "\N{MULTIPLICATION SIGN}"

    def n(v: float) -> str:
        return f"{round(v):,}".replace(",", " ")

    peak, udp_q, doh_q, clients = 75_000, 52_500, 22_500, 11_250  # 70 % / 30 %; Chromium: 2 queries a second
    udp = udp_q * b[("udp", "query")]
    doh = doh_q * b[("doh", "query")] + clients * b[("doh", "connection_second")]
    udp_wake = udp_q * b[("udp", "query_wake")] + doh_q * b[("doh", "query_wake")]
    assert b[("doh", "query_wake")] == 0.0
    # A wake-up after a long idle period: DoH's long_wake times the share of idle periods
    # longer than 200 µs when every event (a query each here) arrives independently on two cores.
    long_wake = b[("doh", "long_wake")]
    gap_peak, gap_mean = (math.exp(-rate / 2 * 200e-6) for rate in (peak, peak / 1.5))
    wake = udp_wake + doh_q * long_wake * gap_peak
    busy, cores = udp + doh, 2e6
    cpu = (wake + busy) / (1 + wake / cores)
    wake_mean = udp_wake / 1.5 + doh_q / 1.5 * long_wake * gap_mean
    mean = (wake_mean + busy / 1.5) / (1 + wake_mean / cores)
    constant = udp_q * a[("udp", "query")] + doh_q * a[("doh", "query")] + clients * a[("doh", "connection_second")]
    user, kernel = float(mem["user_bytes_per_connection"]), float(mem["kernel_bytes_per_connection"])
    watts = (CpuPowerModel().p_max_w_per_vcpu - CpuPowerModel().p_idle_w_per_vcpu) * mean * 1e-6
    expected = [
        f"{udp_q:,} over UDP and {doh_q:,} over DoH".replace(",", " "),
        f"UDP {n(udp_q)} {times} {b[('udp', 'query')]:.3f} µs = {n(udp)} CPU-µs/s",
        f"DoH {n(doh_q)} {times} {b[('doh', 'query')]:.3f} µs + {n(clients)} connection-seconds {times} "
        f"{b[('doh', 'connection_second')]:.4f} µs = {n(doh)} CPU-µs/s",
        f"`B` = {n(busy)} CPU-µs/s",
        f"UDP {n(udp_q)} {times} {b[('udp', 'query_wake')]:.3f} µs = {n(udp_wake)} CPU-µs/s",
        f"`bounded` at {long_wake:.2f} µs",
        f"so {n(doh_q)} {times} {long_wake:.2f} µs {times} {gap_peak * 1e4:.2f} {times} 10⁻⁴ = "
        f"{n(doh_q * long_wake * gap_peak)} CPU-µs/s",
        f"`A` = {n(wake)} CPU-µs/s",
        f"(exp(\N{MINUS SIGN}25 000 {times} 200 µs) = {gap_mean * 1e3:.2f} {times} 10⁻³) make DoH's long wake-ups "
        f"{n(doh_q / 1.5 * long_wake * gap_mean)} CPU-µs/s",
        f"= {n(cpu)} CPU-µs/s, which is {cpu / 1e6:.2f} cores, dnsdist busy {cpu / cores:.1%}".replace("%", " %"),
        f"The wake-ups add {cpu / busy - 1:.1%}".replace("%", " %"),
        f"says {n(constant)}: UDP {n(udp_q)} {times} {a[('udp', 'query')]:.3f} µs",
        f"{n(user)} user bytes + {n(kernel)} kernel bytes per connection",
        f"{n(clients)} connections {times} {n(user + kernel)} bytes = {clients * (user + kernel) / 1e6:.1f} MB",
        f"{n(mean)} CPU-µs/s (dnsdist busy {mean / cores:.1%}: the wake-ups add {mean / (busy / 1.5) - 1:.1%})".replace(
            "%", " %"
        ),
        f"= {watts:.2f} W. Over a day, that is {watts * 24 / 1000:.4f} kWh",
    ]
    assert peak == udp_q + doh_q
    missing = [e for e in expected if e not in page]
    assert not missing, missing


OPERATOR = Path(__file__).parents[2] / "python" / "dnscost" / "experiments" / "populations" / "operator.toml"


def _planned(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    # Its stored tables (what dnscost report wrote of its records: test_study_run.py), read as
    # they are: planning from the run directory analyses its 684 trials again each time.
    assert main(["plan", str(STUDY_TABLES / "tables"), "--population", str(OPERATOR), "--json", *args]) == 0
    doc = json.loads(capsys.readouterr().out)
    return {t["target"]: t for t in doc["targets"]} | {"mix": doc["mix"]}


def test_a_population_is_planned_at_the_load_it_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """The shipped operator population at 2 000 qps on the full study's run: its classes are the
    shares (their parts of the queries as a replay sends them), the QUIC classes, which the run
    did not measure on dnsdist, are left out and said so; the CPU is the load model's, at a
    busy share that is that CPU over one core; moving half the Do53 clients to DoH costs more;
    spreading the same load over 4 cores costs more CPU (every query more likely to wake the
    target), and 8 more still."""
    low = _planned(capsys, "--qps", "2000")
    shares = {s["label"]: s["share"] for s in low["mix"]["shares"]}
    assert sum(shares.values()) == pytest.approx(1.0) and len(shares) == 7
    dnsdist = low["dnsdist"]
    cpu = dnsdist["cpu_us_per_s"]
    assert cpu["status"] == "identified" and cpu["low"] <= cpu["value"] <= cpu["high"]
    assert dnsdist["cores_serving"] == 1 and dnsdist["busy_share"] == pytest.approx(cpu["value"] / 1e6)
    assert any(
        n.startswith("left out, their transports not measured on it in this run: doq-") for n in dnsdist["notes"]
    )
    assert [s["label"] for s in dnsdist["shares"]] == [k for k in shares if not k.startswith(("doq", "doh3"))]
    moved = _planned(capsys, "--qps", "2000", "--move", "udp-rate-1e0:0.5=doh:persistent")["dnsdist"]
    assert moved["cpu_us_per_s"]["value"] > cpu["value"]
    assert "udp-rate-1e0:0.5=doh:persistent" in [s["label"] for s in moved["shares"]]
    four = _planned(capsys, "--qps", "2000", "--cores", "4")["dnsdist"]
    eight = _planned(capsys, "--qps", "2000", "--cores", "8")["dnsdist"]
    assert cpu["value"] < four["cpu_us_per_s"]["value"] < eight["cpu_us_per_s"]["value"]
    assert four["busy_share"] == pytest.approx(four["cpu_us_per_s"]["value"] / 4e6)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--move", "nosuch:0.5=doh"], "--move nosuch:0.5=doh: no class 'nosuch' in "),
        (["--move", "udp-rate-1e0:2=doh"], "fraction: expected above 0 and at most 1, got 2"),
        (["--move", "udp-rate-1e0=doh"], "give it as CLASS:FRACTION=SHAPE"),
        (["--move", "udp-rate-1e0:0.5=carrier-pigeon"], "no shipped profile 'carrier-pigeon'"),
    ],
)
def test_bad_population_plans_are_refused_with_one_line_and_exit_2(
    args: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["plan", str(STUDY_TABLES / "tables"), "--population", str(OPERATOR), "--qps", "2000", *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("dnscost: ") and says in err[0], err


def test_cores_are_a_count(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["plan", str(STUDY_TABLES), "--population", str(OPERATOR), "--qps", "2000", "--cores", "0"])
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and err[-1] == "dnscost plan: error: argument --cores: 0 is not 1 to 4096 cores", err


def test_a_move_needs_a_population(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(STUDY_TABLES), "--qps", "2000", "--mix", "udp=1", "--move", "udp:0.5=doh"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["dnscost: --move: moves a population's class (give --population)"], err
