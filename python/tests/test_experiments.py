"""Experiment specs (validation), their expansion into trials, and running them: progress,
results written as trials finish, and --resume after an interruption."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from dnscost.errors import UsageError
from dnscost.plan import engine_knobs, expand
from dnscost.spec import load_spec, parse_spec

EXPERIMENTS = Path(__file__).parents[1] / "dnscost" / "experiments"

GOOD = """
name = "t"
targets = ["builtin"]
repetitions = 2
[defaults]
duration = "1s"
[[group]]
name = "establishment"
transports = ["udp", "tcp", "dot"]
connections = 20
lifetime = ["forever", "1q", "30s"]
resumption = [0.0, 1.0]
"""


def test_shipped_specs_are_valid() -> None:
    client = {"client.toml", "client-quick.toml"}  # dnscost client run's (test_client.py)
    for path in sorted(EXPERIMENTS.glob("*.toml")):
        if path.name in client:
            with pytest.raises(UsageError, match=r"a client spec .* run it with dnscost client run"):
                load_spec(path)
            continue
        if path.name == "dnsdist-quic.toml" and not Path("roots/trixie/opt/dnsdist-quic").exists():
            # It names a build scripts/build-target makes on demand (ten minutes: not in CI),
            # relative to the directory it is run from (the repository's root).
            with pytest.raises(UsageError, match=r"roots/trixie/opt/dnsdist-quic does not exist"):
                load_spec(path)
            continue
        spec = load_spec(path)
        assert expand(spec), path
    assert {p.name for p in EXPERIMENTS.glob("*.toml")} >= {"study.toml", "study-quick.toml"}


@pytest.mark.parametrize("name", ["model-check.toml", "model-probe.toml", "model-unseen.toml"])
def test_the_model_check_fits_the_model_as_model_toml_does_and_spaces_its_replays_as_the_ladders(name: str) -> None:
    """experiments/model-check.toml and model-probe.toml are experiments/model.toml's groups,
    then populations: a change to one spec's fitting groups that another does not follow fails
    here."""
    model, check = load_spec(EXPERIMENTS / "model.toml"), load_spec(EXPERIMENTS / name)
    assert check.groups[: len(model.groups)] == model.groups
    replays = [g for g in check.groups[len(model.groups) :]]
    assert replays and all("population" in g.settings for g in replays)
    ladders = [g for g in model.groups if "capacity_of" in g.settings]
    spacing = {(g.settings.get("arrival"), g.settings.get("pacing_resolution_us")) for g in ladders + replays}
    assert spacing == {("poisson", 50)}
    for t in expand(check):
        if t.transport == "population":
            assert engine_knobs(t)["arrival"] == "poisson"


def test_expansion_normalises_and_dedups() -> None:
    plan = expand(parse_spec(GOOD))
    ids = [t.id for t in plan]
    assert len(ids) == len(set(ids))
    by_transport = {
        tr: sorted({t.id.rsplit("-r", 1)[0] for t in plan if t.transport == tr and t.group != "reference"})
        for tr in ("udp", "tcp", "dot")
    }
    # udp: lifetime and resumption mean nothing; tcp: resumption means nothing; dot: resumption
    # only matters for connections that end.
    assert by_transport["udp"] == ["establishment-builtin-udp"]
    assert by_transport["tcp"] == [f"establishment-builtin-tcp-l{x}" for x in ("1q", "30s", "forever")]
    assert len(by_transport["dot"]) == 5
    assert "establishment-builtin-dot-lforever-res0" in by_transport["dot"]
    assert len(plan) == 2 * (1 + 3 + 5 + 1)  # and a UDP reference per round
    # A 30 s lifetime does not stretch the measured period: the engine staggers first lifetimes,
    # so renewals run at connections / lifetime from the start of the window.
    long = next(t for t in plan if t.params["lifetime"] == "30s")
    forever = next(t for t in plan if t.params["lifetime"] == "forever" and t.transport == long.transport)
    assert long.params["duration_s"] == forever.params["duration_s"] < 30
    one_q = next(t for t in plan if t.transport == "dot" and t.params["lifetime"] == "1q" and t.params["resumption"])
    knobs = engine_knobs(one_q)
    assert knobs["lifetime"] == {"duration_ms": None, "queries": 1} and knobs["resumption"] == 1.0
    udp = engine_knobs(next(t for t in plan if t.transport == "udp"))
    assert "lifetime" not in udp and "resumption" not in udp and "open_rate" not in udp


def test_order_is_seeded() -> None:
    a = [t.id for t in expand(parse_spec(GOOD))]
    assert a == [t.id for t in expand(parse_spec(GOOD))]
    b = [t.id for t in expand(parse_spec(GOOD.replace('name = "t"', 'name = "t"\nseed = 7')))]
    assert sorted(a) == sorted(b) and a != b


def test_targets_that_lack_a_transport_skip_it() -> None:
    spec = parse_spec(GOOD.replace('["builtin"]', '["pdns-recursor"]'))
    assert {t.transport for t in expand(spec)} == {"udp", "tcp"}


def test_doh_headers_are_swept_for_doh_only() -> None:
    spec = GOOD.replace('"udp", "tcp", "dot"]', '"tcp", "doh"]\ndoh_headers = ["minimal", "browser"]')
    plan = expand(parse_spec(spec))
    doh = [t for t in plan if t.transport == "doh"]
    headers = [engine_knobs(t)["doh_headers"] for t in doh]
    assert headers.count("minimal") == headers.count("browser") == len(doh) // 2 > 0
    assert all(("-browser-" in t.id) == (engine_knobs(t)["doh_headers"] == "browser") for t in doh)
    assert all("doh_headers" not in engine_knobs(t) for t in plan if t.transport == "tcp")
    with pytest.raises(UsageError, match="doh_headers: expected one of"):
        parse_spec(spec.replace('["minimal", "browser"]', '["chrome"]'))


QUIC = """
name = "q"
targets = ["dnsdist"]
[defaults]
duration = "1s"
[[group]]
name = "establishment"
transports = ["udp", "dot"]
lifetime = ["forever", "1q"]
[[group]]
name = "quic_establishment"
analysis = "establishment"
targets = ["coredns", "builtin"]
transports = ["udp", "dot", "doq", "doh3"]
lifetime = ["forever", "1q"]
resumption = [0.0, 1.0]
early_data = [0.0, 1.0]
"""


def test_a_group_runs_on_its_own_targets_and_feeds_the_analysis_it_names() -> None:
    plan = expand(parse_spec(QUIC))
    cells = {(t.target, t.group, t.transport) for t in plan if t.group != "reference"}
    # The spec's targets run the groups without targets of their own; the others run on theirs.
    assert {c for c in cells if c[0] == "dnsdist"} == {("dnsdist", "establishment", x) for x in ("udp", "dot")}
    assert {(t, g) for t, g, _ in cells} == {
        ("dnsdist", "establishment"),
        ("coredns", "quic_establishment"),
        ("builtin", "quic_establishment"),
    }
    assert {t.target for t in plan if t.group == "reference"} == {"dnsdist", "coredns", "builtin"}
    assert {t.to_dict()["analysis"] for t in plan if t.group == "quic_establishment"} == {"establishment"}
    # 0-RTT is QUIC's, and only for resumed connections: dot has 3 cells, doq and doh3 4 each.
    quic = [t for t in plan if t.target == "coredns" and t.group == "quic_establishment"]
    count = {x: sum(1 for t in quic if t.transport == x) for x in ("udp", "dot", "doq", "doh3")}
    assert count == {"udp": 1, "dot": 3, "doq": 4, "doh3": 4}
    early = [t for t in quic if engine_knobs(t).get("early_data")]
    assert {(t.transport, t.params["lifetime"], t.params["resumption"]) for t in early} == {
        ("doq", "1q", 1.0),
        ("doh3", "1q", 1.0),
    }
    assert all(engine_knobs(t)["early_data"] == 1.0 and "-e1-" in t.id for t in early)
    # --targets narrows every group: the spec's targets are replaced, a group's own kept among them.
    only = parse_spec(QUIC).only(("coredns",))
    assert {t.target for t in expand(only)} == {"coredns"}
    assert {t.group for t in expand(only)} == {"establishment", "quic_establishment", "reference"}
    assert expand(parse_spec(QUIC).only(("unbound",))) and all(
        t.group != "quic_establishment" for t in expand(parse_spec(QUIC).only(("unbound",)))
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (('analysis = "establishment"', 'analysis = "latency"'), "analysis: expected one of"),
        (('targets = ["coredns", "builtin"]', 'targets = ["coredns", "quad9"]'), "targets: unknown target quad9"),
        (("early_data = [0.0, 1.0]", "early_data = 1.5"), "early_data: expected a number in 0..=1"),
    ],
)
def test_bad_group_targets_analysis_and_early_data_name_the_field(change: tuple[str, str], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        parse_spec(QUIC.replace(*change), "spec.toml")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("repetitions = 2", "repetitions = 0"), "repetitions: expected an integer in 1..=1000"),
        (("connections = 20", "connections = [20, -1]"), 'group "establishment": connections: expected an integer'),
        (('lifetime = ["forever"', 'lifetime = ["sometimes"'), "lifetime: expected forever"),
        (('transports = ["udp", "tcp", "dot"]', 'transports = ["udp", "smoke"]'), "transports: expected one of"),
        (('duration = "1s"', 'duration = "1 fortnight"'), "defaults: duration:"),
        (('duration = "1s"', 'duraton = "1s"'), "defaults: duraton: unknown field"),
        (('targets = ["builtin"]', 'targets = ["bind10"]'), "targets: unknown target bind10"),
        (('name = "establishment"', 'name = "Establishment!"'), "name: use lower-case"),
        (("resumption = [0.0, 1.0]", "resumption = 2"), "resumption: expected a number in 0..=1"),
        (('name = "t"', 'name = "t"\nanalyses = ["vibes"]'), "analyses: expected one of"),
        (("[[group]]", "[[grop]]"), "grop: unknown field"),
        (("[[group]]", "[group"), "not valid TOML"),
    ],
)
def test_bad_specs_name_the_field(change: tuple[str, str], message: str) -> None:
    assert change[0] in GOOD
    with pytest.raises(UsageError) as e:
        parse_spec(GOOD.replace(*change, 1), "spec.toml")
    assert message in str(e.value) and str(e.value).startswith("spec.toml: ")
    assert "\n" not in str(e.value)


def test_search_and_idle_groups_check_their_transports() -> None:
    search = 'name = "s"\ntargets = ["builtin"]\n[[group]]\nname = "b"\nkind = "search"\ntransports = ["tcp"]\n'
    with pytest.raises(UsageError, match="search group measures the UDP baseline"):
        parse_spec(search)
    idle = search.replace('"search"', '"idle"').replace('["tcp"]', '["udp", "tcp"]')
    with pytest.raises(UsageError, match="udp has none"):
        parse_spec(idle)


def _dnscost(*args: str, **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dnscost.cli", *args], capture_output=True, text=True, timeout=600, check=False, **kw
    )  # type: ignore[call-overload,no-any-return]


def test_run_rejects_a_bad_spec_in_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(GOOD.replace("connections = 20", 'connections = "many"'))
    r = _dnscost("run", str(bad), "--output", str(tmp_path / "out"))
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "connections" in r.stderr
    assert not (tmp_path / "out").exists()
    r = _dnscost("run", str(tmp_path / "missing.toml"))
    assert r.returncode == 2 and "missing.toml" in r.stderr


TINY = """
name = "tiny"
targets = ["builtin"]
names = 500
[defaults]
duration = "1s"
warmup = "0.3s"
baseline = "0.2s"
[[group]]
name = "establishment"
transports = ["udp", "tcp", "dot"]
connections = 8
lifetime = ["forever", "1q"]
rate = 2000
"""


def test_interrupted_run_resumes_without_redoing_trials(tmp_path: Path) -> None:
    """Interrupt a run (SIGINT) after its first trial, then --resume: finished trials are kept
    as they were, the rest run, and the run ends complete."""
    spec = tmp_path / "tiny.toml"
    spec.write_text(TINY)
    out = tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, "-m", "dnscost.cli", "run", str(spec), "--output", str(out), "--no-report"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    done: list[str] = []
    while time.monotonic() < deadline and not done:
        time.sleep(0.2)
        try:
            trials = json.loads((out / "run.json").read_text())["trials"]
        except (OSError, json.JSONDecodeError):
            continue
        done = [k for k, v in trials.items() if v["status"] == "done"]
    assert done, "no trial finished in time"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    run = json.loads((out / "run.json").read_text())
    assert run["status"] == "interrupted"
    assert f"--resume {out}" in err
    plan = [t["id"] for t in run["plan"]]
    finished = {k for k, v in run["trials"].items() if v["status"] == "done"}
    assert finished and len(finished) < len(plan)
    stamps = {k: (out / "trials" / k / "trial.json").stat().st_mtime_ns for k in finished}
    for k in finished:  # results written as produced
        assert json.loads((out / "trials" / k / "trial.json").read_text())["summary"]["queries_answered"] > 0

    r = _dnscost("run", "--resume", str(out), "--no-report")
    assert r.returncode == 0, r.stderr
    run = json.loads((out / "run.json").read_text())
    assert run["status"] == "done"
    assert all(run["trials"][k]["status"] == "done" for k in plan)
    assert {k: (out / "trials" / k / "trial.json").stat().st_mtime_ns for k in finished} == stamps
    assert f"{len(plan)} of {len(plan)} trials done" in r.stderr
    # Raw data kept, the per-connection logs gzipped.
    for k in plan:
        d = out / "trials" / k
        assert (d / "engine.jsonl").stat().st_size and (d / "meter.jsonl").stat().st_size
        assert (d / "engine-connections.jsonl.gz").exists() and not (d / "engine-connections.jsonl").exists()


def test_resume_refuses_what_is_not_a_run(tmp_path: Path) -> None:
    r = _dnscost("run", "--resume", str(tmp_path))
    assert r.returncode == 2 and "run.json" in r.stderr


@pytest.fixture(autouse=True)
def _cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


PROFILES = """
name = "p"
targets = ["dnsdist"]
[[group]]
name = "clients_1s"
profile = ["chromium-1s-google", "stub.json"]
rate = 10000
max_connections = 4000
in_flight = 16
"""

STUB = {"name": "stub", "transport": "dot", "query_interval_ms": 60000, "idle_timeout_ms": 30000, "resumption": 0.5}


def test_a_group_of_profiles_replays_clients_at_a_rate(tmp_path: Path) -> None:
    """A group of profiles: each trial replays as many clients of one profile as make the
    group's rate (within max_connections), over the profile's transport; the engine gets the
    profile itself; clients that keep their connections open them before the measured period."""
    (tmp_path / "stub.json").write_text(json.dumps(STUB))
    (tmp_path / "p.toml").write_text(PROFILES)
    spec = load_spec(tmp_path / "p.toml")
    plan = expand(spec)
    by_profile = {t.params["profile"]["name"]: t for t in plan if t.group == "clients_1s"}
    chromium, stub = by_profile["chromium-1s-google"], by_profile["stub"]
    assert (chromium.transport, stub.transport) == ("doh", "dot")
    assert chromium.analysis == stub.analysis == "clients"
    per_client = chromium.params["profile"]["queries_per_resolution"]  # one resolution a second
    assert chromium.params["clients"] == min(round(10000 / per_client), 4000)
    assert chromium.params["rate"] == chromium.params["clients"] * per_client
    # One query a minute each: 10 000 qps would take 600 000 clients; 4 000 connections allowed.
    assert (stub.params["clients"], stub.params["connections"], stub.params["rate"]) == (4000, 4000, 66.667)
    assert stub.params["resumption"] == 0.5 and stub.id == "clients_1s-dnsdist-dot-stub-r0"
    knobs = engine_knobs(stub)
    assert knobs["profile"] == STUB and knobs["clients"] == 4000 and "open_first" not in knobs
    assert "rate" not in knobs and "lifetime" not in knobs  # the engine takes them from the profile
    assert engine_knobs(chromium)["open_first"] is True  # Chromium keeps its connection
    # Each round that loads the target holds a UDP reference, though every trial is open loop.
    assert [t.transport for t in plan if t.group == "reference"] == ["udp"]
    # The profiles are recorded with the spec.
    assert spec.to_dict()["groups"][0]["settings"]["profiles"]["stub.json"] == STUB


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("rate = 10000", "rate = 10000\nclients = 5"), "give clients (how many clients to replay) or rate"),
        (("rate = 10000", ""), "give clients (how many clients to replay) or rate"),
        (("rate = 10000", 'rate = "max"'), "rate: the clients' queries per second together"),
        (("in_flight = 16", 'transports = ["doh"]'), "transports: a group of profiles takes it from each profile"),
        (("in_flight = 16", "connections = 10"), "connections: a group of profiles takes it"),
        (('"chromium-1s-google"', '"chrome-99"'), "no shipped profile 'chrome-99' (shipped: "),
        (('"stub.json"', '"nowhere.json"'), "nowhere.json: No such file"),
        (('profile = ["chromium-1s-google", "stub.json"]', 'transports = ["doh"]'), "clients: is about the clients"),
    ],
)
def test_bad_groups_of_profiles_name_the_field(tmp_path: Path, change: tuple[str, str], message: str) -> None:
    (tmp_path / "stub.json").write_text(json.dumps(STUB))
    text = PROFILES.replace(*change)
    if "rate = 10000" in change[0] and "clients" not in change[1] and "rate" not in change[1]:
        text = text.replace("max_connections = 4000\n", "")
    if "profile = [" in change[0]:
        text = text.replace("rate = 10000", "clients = 3").replace("max_connections = 4000\n", "")
    (tmp_path / "p.toml").write_text(text)
    with pytest.raises(UsageError, match=re.escape(message)):
        load_spec(tmp_path / "p.toml")


@pytest.mark.parametrize(
    ("stub", "message"),
    [
        ({**STUB, "idle_ms": 5}, "unknown field 'idle_ms' in a client profile (known: name, source,"),
        ({k: v for k, v in STUB.items() if k != "query_interval_ms"}, "query_interval_ms is missing"),
        ({**STUB, "close": "slam"}, "close is 'slam', not one of 'graceful', 'fin', 'rst', 'silent'"),
        ({**STUB, "lifetime": {"queries": "20"}}, "lifetime.queries is a string, not"),
    ],
)
def test_a_profile_file_not_of_the_engines_shape_is_named(tmp_path: Path, stub: object, message: str) -> None:
    """A profile file is read against the engine's profile (``contract.ClientProfile``, held to
    ``schemas/client-profile.schema.json``): a field the engine does not know, one missing, or
    one of the wrong kind fails the spec in one line naming the file and the field, not the
    engine mid-run."""
    (tmp_path / "stub.json").write_text(json.dumps(stub))
    (tmp_path / "p.toml").write_text(PROFILES)
    with pytest.raises(UsageError, match=re.escape(message)) as e:
        load_spec(tmp_path / "p.toml")
    assert "stub.json" in str(e.value) and "\n" not in str(e.value)


def test_groups_select_part_of_a_spec() -> None:
    """``--groups``: the spec with those groups only; an unknown group, or a share of capacity
    without its saturation group, is one line."""
    spec = load_spec(Path(__file__).parents[2] / "python" / "dnscost" / "experiments" / "study-quick.toml")
    part = spec.only_groups(("latency", "establishment"))
    assert [g.name for g in part.groups] == ["establishment", "latency"]
    assert {t.group for t in expand(part)} == {"establishment", "latency", "reference"}
    with pytest.raises(UsageError, match=r"no group 'nosuch' \(groups: baseline, memory, "):
        spec.only_groups(("nosuch",))
    with pytest.raises(UsageError, match="group 'latency' is a share of 'establishment': select that group too"):
        spec.only_groups(("latency",))


POPULATION = """
name = "p"
targets = ["dnsdist", "coredns"]
[[group]]
name = "population"
population = "populations/operator.toml"
rate = [2000, 8000]
repetitions = 2
duration = "2s"
"""


def test_a_population_group_replays_every_class_at_once_per_rate_and_round() -> None:
    """A population group: one trial per rate and round over the pseudo-transport
    ``population``; each trial's replay is the population at its rate over the transports its
    target serves (the others left out by name, the rate over those replayed); the population is
    recorded with the spec, its trials read by the population analysis, not fitted."""
    from dnscost.plan import population_replay

    spec = parse_spec(POPULATION, str(EXPERIMENTS / "p.toml"))
    plan = [t for t in expand(spec) if t.group == "population"]
    assert sorted(t.id for t in plan if t.target == "dnsdist") == [
        f"population-dnsdist-population-q{q}-r{r}" for q in (2000, 8000) for r in (0, 1)
    ]
    assert {t.transport for t in plan} == {"population"} and {t.analysis for t in plan} == {"population"}
    recorded = spec.to_dict()["groups"][0]["settings"]["population"]
    assert recorded["source"] == "populations/operator.toml" and len(recorded["classes"]) == 7
    one = next(t for t in plan if t.target == "dnsdist" and t.params["rate"] == 8000)
    assert engine_knobs(one) == {"duration_ms": 2000, "warmup_ms": 2000, "timeout_ms": 2000}
    dnsdist = population_replay(spec, one, ("udp", "tcp", "dot", "doh"))
    assert dnsdist.left_out == ["doq-several-none", "doh3-few-none"] and dnsdist.rate_qps == pytest.approx(
        8000, rel=1e-3
    )
    coredns = population_replay(spec, one, ("udp", "tcp", "dot", "doh", "doq", "doh3"))
    assert coredns.left_out == [] and len(coredns.classes) == 7
    # Without a rate: the capture's own.
    own = parse_spec(POPULATION.replace("rate = [2000, 8000]\n", ""), str(EXPERIMENTS / "p.toml"))
    (t,) = [t for t in expand(own) if t.group == "population" and t.target == "dnsdist" and t.rep == 0]
    assert population_replay(own, t, ("udp",)).rate_qps == pytest.approx(300 * 0.814243, rel=1e-3)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (('population = "populations/operator.toml"', 'population = "nowhere.toml"'), "population: No such file"),
        (("rate = [2000, 8000]", 'rate = "max"'), "rate: the whole population's queries per second"),
        (("rate = [2000, 8000]", "rate = 2000\nconnections = 5"), "connections: a population's classes set it"),
        (("rate = [2000, 8000]", 'rate = 2000\ntransports = ["udp"]'), "transports: a population's classes set it"),
        (('name = "population"', 'name = "population"\nkind = "idle"'), "population is replayed by a load group"),
    ],
)
def test_bad_population_groups_name_the_field(change: tuple[str, str], message: str) -> None:
    with pytest.raises(UsageError, match=re.escape(message)):
        parse_spec(POPULATION.replace(*change), str(EXPERIMENTS / "p.toml"))


def test_a_class_alone_is_replayed_as_the_whole_replays_it() -> None:
    """experiments/model-probe.toml's class groups send one class each, with the clients and
    the rate the whole population's trial gives that class on the same target; a class over a
    transport the target does not serve gets no trial there."""
    from dnscost.plan import population_replay

    spec = load_spec(EXPERIMENTS / "model-probe.toml")
    served = {"dnsdist": ("doh", "dot", "tcp", "udp"), "knot-resolver": ("doh", "dot", "tcp", "udp")}
    for target, transports in served.items():
        trials = [t for t in expand(spec) if t.transport == "population" and t.target == target and t.rep == 0]
        whole = next(t for t in trials if t.group == "population_operator")
        by_name = {c["name"]: c["config"] for c in population_replay(spec, whole, transports).classes}
        alone = [t for t in trials if t.group.startswith("class_")]
        assert {t.group for t in alone} == {"class_" + n.replace("-", "_") for n in by_name}, target
        for t in alone:
            [c] = population_replay(spec, t, transports).classes
            assert c["config"] == by_name[c["name"]], (target, c["name"])


@pytest.mark.parametrize(
    ("classes", "says"),
    [
        ('["nope"]', "nope: no such class in"),
        ('"udp-rate-1e0"', "a list of the population's class names"),
        ("[]", "a list"),
    ],
)
def test_population_classes_that_name_no_class_are_one_line(tmp_path: Path, classes: str, says: str) -> None:
    """A group's ``population_classes`` must name classes of its population: anything else is
    refused when the spec is read, naming the field."""
    source = EXPERIMENTS / "populations" / "operator.toml"
    (tmp_path / "operator.toml").write_text(source.read_text(encoding="utf-8"), encoding="utf-8")
    spec = tmp_path / "s.toml"
    spec.write_text(
        'name = "s"\ntargets = ["builtin"]\n[[group]]\nname = "p"\npopulation = "operator.toml"\n'
        f"population_classes = {classes}\nrate = 1000\n",
        encoding="utf-8",
    )
    with pytest.raises(UsageError) as e:
        load_spec(spec)
    assert "population_classes" in str(e.value) and says in str(e.value) and "\n" not in str(e.value)
