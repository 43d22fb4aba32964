"""``dnscost load --population``: a population replayed in one trial, every class at once over
its transport, each counted apart by the engine and held, per transport, to the resolver's own
counters (knot-resolver's ``request.<transport>``, dnsdist's frontends)."""

from __future__ import annotations

import json
import subprocess
import tomllib
from pathlib import Path

import pytest
from dnscost.engine import engine_path
from dnscost.errors import UsageError
from dnscost.population import replay_of

POPULATION = {
    "class": [
        {
            "name": "stub",
            "clients": 10,
            "rate_qps": 2.0,
            "profile": {"name": "s", "transport": "udp", "query_interval_ms": 500},
        },
        {
            "name": "browser",
            "clients": 3,
            "rate_qps": 0.5,
            "profile": {"name": "b", "transport": "doh", "query_interval_ms": 2000, "lifetime": {"queries": 5}},
        },
        {
            "name": "quic",
            "clients": 1,
            "rate_qps": 1.0,
            "profile": {"name": "q", "transport": "doq", "query_interval_ms": 1000},
        },
    ]
}


def _with(**first: object) -> dict[str, object]:
    """:data:`POPULATION` with these fields of its first class (``stub``) replaced."""
    return {"class": [{**POPULATION["class"][0], **first}, *POPULATION["class"][1:]]}


def _shares(*shares: float | None) -> dict[str, object]:
    """:data:`POPULATION` with these shares (None: none given)."""
    return {
        "class": [
            {**k, **({"share": x} if x is not None else {})} for k, x in zip(POPULATION["class"], shares, strict=True)
        ]
    }


def test_shares_as_dnscost_population_writes_them_are_accepted() -> None:
    assert len(replay_of(_shares(0.571429, 0.285714, 0.142857), "p.toml").classes) == 3
    assert len(replay_of(_shares(0.333333, 0.333333, 0.333333), "p.toml").classes) == 3
    assert len(replay_of(_shares(0.9, None, 0.1), "p.toml").classes) == 3


def test_a_replay_scales_clients_and_rate_and_keeps_the_shares() -> None:
    r = replay_of(POPULATION, "p.toml")
    assert r.rate_qps == 10 * 2.0 + 3 * 0.5 + 1.0
    assert [k["config"]["clients"] for k in r.classes] == [10, 3, 1]
    assert r.transports() == ["udp", "doh", "doq"]
    big = replay_of(POPULATION, "p.toml", rate=225.0)  # ten times the capture's 22.5 qps
    assert big.scale == 10.0
    assert [(k["config"]["clients"], k["config"]["rate"]) for k in big.classes] == [
        (100, 200.0),
        (30, 15.0),
        (10, 10.0),
    ]
    small = replay_of(POPULATION, "p.toml", scale=0.1)
    assert [k["config"]["clients"] for k in small.classes] == [1, 1, 1]  # at least one client each
    assert [k["config"]["rate"] for k in small.classes] == [2.0, 0.15, 0.1]  # the shares of queries kept
    served = replay_of(POPULATION, "p.toml", rate=43.0, served=["udp", "tcp", "dot", "doh"])
    assert ([k["name"] for k in served.classes], served.left_out) == (["stub", "browser"], ["quic"])
    assert served.rate_qps == 43.0  # the rate asked for, over the classes replayed


@pytest.mark.parametrize(
    ("doc", "kwargs", "says"),
    [
        ({}, {}, "p.toml: no [[class]] table (is it a population.toml of dnscost population?)"),
        (
            {"class": [{"name": "a", "clients": 0, "rate_qps": 1, "profile": {"transport": "udp"}}]},
            {},
            "p.toml: class a: clients",
        ),
        ({"class": [{"name": "a", "clients": 1, "rate_qps": 1}]}, {}, "p.toml: class 1: needs a name and a profile"),
        # What dnscost population could not have written, named by class and field (before:
        # nan and inf were "classes: expected value"; the rest ran).
        (
            _with(rate_qps=float("nan")),
            {},
            "p.toml: class stub: rate_qps = nan is not a rate (a finite number, 0 or more)",
        ),
        (
            _with(rate_qps=float("inf")),
            {},
            "p.toml: class stub: rate_qps = inf is not a rate (a finite number, 0 or more)",
        ),
        (_with(rate_qps=True), {}, "p.toml: class stub: rate_qps = true is not a rate"),
        (_with(clients=True), {}, "p.toml: class stub: clients = true is not a count of clients (1 or more)"),
        (_with(share=-0.5), {}, "p.toml: class stub: share = -0.5 is not a share of the queries (0 to 1)"),
        (_with(share=float("nan")), {}, "p.toml: class stub: share = nan is not a share"),
        (
            _shares(1.0, 1.0, 1.0),
            {},
            "p.toml: the classes' shares sum to 3: a population's shares of its queries sum to 1",
        ),
        (_shares(0.5, 0.2, 0.1), {}, "p.toml: the classes' shares sum to 0.8: a population's shares"),
        (_shares(0.7, 0.6, None), {}, "p.toml: the classes' shares sum to 1.3:"),
        (_with(name="a\nb", clients=0), {}, 'p.toml: class "a\\nb": clients = 0 is not a count'),
        (POPULATION, {"scale": 2.0, "rate": 10.0}, "give either a scale or a rate"),
        (POPULATION, {"scale": 0.0}, "scale: 0.0 is out of range"),
    ],
)
def test_a_population_that_cannot_be_replayed_is_one_error(
    doc: dict[str, object], kwargs: dict[str, float], says: str
) -> None:
    with pytest.raises(UsageError) as e:
        replay_of(doc, "p.toml", **kwargs)
    assert str(e.value).startswith(says), e.value


def _dnscost(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    exe = Path(str(engine_path())).with_name("dnscost")
    return subprocess.run([str(exe), *args], capture_output=True, text=True, cwd=cwd, timeout=300, check=False)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--population", "missing.toml"], "{dir}/missing.toml: No such file or directory"),
        (["--population", "bad.toml"], "{dir}/bad.toml: Expected '=' after a key"),
        (["--transport", "udp", "--scale", "2"], "--scale, --served-only and --capture-names need --population"),
        (
            ["--population", "p.toml", "--served-only", "--capture-names"],
            "{dir}/p.toml: no names file (dnscost population",
        ),
        (["--population", "p.toml", "--connections", "5"], "--connections: each class of a population has its own"),
        (["--population", "p.toml", "--rate", "max"], "--rate max: with --population"),
        (["--population", "nan.toml"], "{dir}/nan.toml: class stub: rate_qps = nan is not a rate"),
        (["--population", "bool.toml"], "{dir}/bool.toml: class stub: clients = true is not a count of clients"),
        (["--population", "p.toml"], "knot-resolver does not serve doq (it serves udp, tcp, dot, doh): --served-only"),
    ],
)
def test_bad_population_input_is_one_line_and_exit_2(tmp_path: Path, args: list[str], says: str) -> None:
    (tmp_path / "bad.toml").write_text("not toml at all\n")
    (tmp_path / "p.toml").write_text(_toml(POPULATION))
    (tmp_path / "nan.toml").write_text(_toml(POPULATION).replace("rate_qps = 2.0", "rate_qps = nan", 1))
    (tmp_path / "bool.toml").write_text(_toml(POPULATION).replace("clients = 10", "clients = true", 1))
    r = _dnscost("load", "--target", "knot-resolver", *args, cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    # The path as dnscost made it absolute (cli.PATH_ARGS), once.
    says = says.replace("{dir}", str(tmp_path.resolve()))
    assert r.stderr.startswith(f"dnscost: {says}") and len(r.stderr.strip().splitlines()) == 1, r.stderr


def _toml(doc: dict[str, list[dict[str, object]]]) -> str:
    """A population document as TOML (what ``dnscost population`` writes, in short)."""
    out = []
    for k in doc["class"]:
        out.append("[[class]]")
        for key, v in k.items():
            out.append(f"{key} = {json.dumps(v).replace(':', ' =') if isinstance(v, dict) else json.dumps(v)}")
    return "\n".join(out) + "\n"


@pytest.mark.load_timing
@pytest.mark.parametrize("target", ["knot-resolver", "dnsdist"])
def test_a_capture_replays_as_one_mixed_trial_that_the_resolver_counts_alike(tmp_path: Path, target: str) -> None:
    """A synthetic operator capture's population (every transport, seven classes) replayed
    against a real resolver: the classes over its transports run at once, the others named as
    left out; each class is counted apart at its own rate, and each transport's answers are
    what the resolver itself counted on it. Every class asks the capture's own names (outside
    the synthetic TLD): the resolver forwards them, the upstream answers each, and the
    resolver's own count of its cache's answers is set beside the capture's repeats."""
    from dnscost.capturegen import OPERATOR_MIX, write_capture

    pcap, pop, names = tmp_path / "operator.pcap", tmp_path / "pop" / "population.toml", tmp_path / "names.txt"
    write_capture(pcap, list(OPERATOR_MIX))
    pop.parent.mkdir()
    made = _dnscost("population", str(pcap), "-o", str(pop), "--names", str(names), cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    doc = tomllib.loads(pop.read_text())
    classes = doc["class"]
    assert doc["names"]["file"] == "../names.txt"  # found from the population's directory
    out = tmp_path / "run"
    r = _dnscost(
        "load", "--target", target, "--population", str(pop), "--served-only", "--scale", "2", "--capture-names",
        "--duration", "3", "--warmup", "1", "--names", "2000", "--output", str(out), cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr + r.stdout
    assert "left out (transport not served): doq-several-none, doh3-few-none" in r.stderr
    trial = json.loads(next(out.glob("trials/*/trial.json")).read_text())
    s = trial["summary"]
    served = [k for k in classes if k["transport"] in ("udp", "tcp", "dot", "doh")]
    assert [k["name"] for k in s["classes"]] == [k["name"] for k in served]
    assert s["validity"]["flags"] == [], s["validity"]
    # The resolver's own counters, per transport, against the engine's answers of its classes.
    for t, a in s["transports"].items():
        assert a["target_queries"] is not None and a["target_queries"] > 0, (t, a)
        assert a["agreement"] >= 0.99, (t, a)
    # Each class at its own rate (twice the capture's), so the shares of the capture's
    # queries hold among the classes replayed.
    total = sum(k["share"] for k in served)
    answered = sum(k["queries_answered"] for k in s["classes"])
    for k, c in zip(served, s["classes"], strict=True):
        assert abs(c["answered_qps"] - c["rate_qps"]) <= 0.1 * c["rate_qps"], c
        assert abs(c["queries_answered"] / answered - k["share"] / total) <= 0.03, (k["name"], c)
        assert c["clients"] == 2 * k["clients"]
    by_name = {c["name"]: c for c in s["classes"]}
    assert by_name["dot-persistent"]["connections_opened"] == 0  # opened in the warm-up, kept
    assert by_name["doh-several-client"]["handshakes_resumed"] > 0  # its profile resumes
    assert by_name["tcp-one-client"]["connections_opened"] > 0
    # The capture's names, every one answered with an address (REFUSED had the resolver not
    # forwarded them, or the upstream not answered them).
    assert trial["engine_config"]["queries_file"] == str(names)
    records = [json.loads(x) for x in next(out.glob("trials/*/engine.jsonl")).read_text().splitlines()]
    assert set(records[-1]["total"]["queries"]["rcodes"]) == {"noerror"}, records[-1]["total"]["queries"]
    assert trial["population"]["names"] == str(names)
    assert trial["population"]["repeat_share"] == doc["names"]["repeat_share"]
    # The resolver's own counters: its cache answered the names asked again, not the first asks.
    hits = s["validity"]["cache_hit_ratio"]
    assert hits is not None and 0.2 < hits < 0.99, hits
    assert f"the target's cache answered {100 * hits:.1f} %" in r.stdout, r.stdout
    # The upstream's own log, an observer other than the target: what it was asked is what the
    # cache missed.
    upstream, asked = trial["upstream_queries"], s["validity"]["target_answered"]
    assert abs(upstream / asked - (1 - hits)) <= 0.01, (upstream, asked, hits)
    # The engine asked the names file's first lines in its order: counted here from the file.
    replayed = trial["names_replayed"]
    lines = names.read_text().splitlines()
    assert replayed["distinct"] == len(set(lines[: replayed["queries"]])), replayed
    if target == "knot-resolver":
        # One cache for every transport, keeping every answer: each distinct name missed once,
        # so the capture's repeats, in its order, were the cache's hits.
        assert abs(upstream - replayed["distinct"]) <= 10, (upstream, replayed)
    else:
        # dnsdist's packet cache keeps answers to queries over UDP and over TCP apart: a name
        # asked over both is missed once on each (the upstream is asked over each).
        assert replayed["distinct"] < upstream < 2 * replayed["distinct"], (upstream, replayed)


def test_the_docs_verdict_on_the_cost_model_is_the_kept_runs() -> None:
    """docs/population.md's figures for the cost model on trial are what the analysis of the
    kept run (docs/population-run, population-check.toml) prints, recomputed here from its
    raw records."""
    from dnscost.analysis import analyze
    from dnscost.report.headline import format_population

    repo = Path(__file__).parents[2]
    doc = (repo / "docs" / "population.md").read_text()
    rest = doc[doc.index("## The cost model on trial") :]
    start = rest.index("```text\n") + len("```text\n")
    block = rest[start : rest.index("```", start)]
    a = analyze(repo / "docs" / "population-run")
    rows = a.tables["population"].rows
    assert block == "\n".join(format_population(rows)) + "\n"
    # The prose after it: at 2 000 qps, above even the upper end of the bound, every round,
    # both targets; and every prediction bounded (TCP's connection term not identified).
    low = [r for r in rows if abs(r["rate_qps"] - 2000) < 1]
    assert len(low) == 6 and {r["target"] for r in low} == {"dnsdist", "knot-resolver"}
    assert all(r["valid"] and r["verdict"] == "above" for r in low), low
    assert {r["status"] for r in rows} == {"bounded"} and all("tcp full_handshake" in r["reason"] for r in rows)


def test_the_docs_account_of_the_capture_names_is_the_kept_runs() -> None:
    """docs/population.md's figures for a capture's names replayed through a target are what
    the analysis of the kept run (docs/population-names-run, population-names.toml) prints,
    recomputed here from its raw records, and its prose is held to the same rows."""
    from dnscost.analysis import analyze
    from dnscost.report.headline import format_population

    repo = Path(__file__).parents[2]
    doc = (repo / "docs" / "population.md").read_text()
    rest = doc[doc.index("## The operator's names") :]
    start = rest.index("```text\n") + len("```text\n")
    block = rest[start : rest.index("```", start)]
    rows = analyze(repo / "docs" / "population-names-run").tables["population"].rows
    printed = format_population(rows)
    assert block == "\n".join(printed[printed.index(block.splitlines()[0]) :]) + "\n"
    assert len(rows) == 6 and all(r["valid"] and r["names"] == "capture" for r in rows), rows
    names = (repo / "experiments" / "populations" / "operator-names.txt").read_text().splitlines()
    for r in rows:
        cache, ideal = 100 * r["cache_hit_ratio"], 100 * r["replayed_repeat_share"]
        upstream = 100 * r["upstream_queries"] / r["target_answered"]
        asked = r["target_answered"] / len(names)
        # "the replay asked 90 % of the file" ... "the first 5 900 or so lines"; both below the
        # whole capture's repeats.
        assert 0.88 <= asked <= 0.91 and ideal < 100 * r["capture_repeat_share"] == pytest.approx(66.4, abs=0.05)
        if r["target"] == "knot-resolver":  # "within half a point"
            assert abs(cache - ideal) <= 0.5 and abs(upstream - (100 - ideal)) <= 0.5, r
        else:  # "about 6 points less", "about 6 points more"
            assert 5 <= ideal - cache <= 7 and 5 <= upstream - (100 - ideal) <= 7, r
