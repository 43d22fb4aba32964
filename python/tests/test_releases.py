"""Targets at other Debian releases (``NAME@RELEASE``, in release roots) and own builds
(``NAME@PATH``): one trial per release root, the answer count checked against the target's own
counters, nothing left behind; the names and their errors.

The roots are made once per machine (``dnscost target prepare``, about two minutes per release)
in ``$DNSCOST_ROOTS`` or ``roots/`` at the repository's root, which later runs reuse."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import need
from dnscost.errors import UsageError
from dnscost.jsonl import read_records
from dnscost.proc import _live
from dnscost.targets import served, target_name
from dnscost.targets.knot import kresd_counters, parse_kresd_table
from dnscost.targets.place import MANIFEST, Build, label_of
from dnscost.targets.roots import roots_dir, set_roots_dir
from dnscost.trial import LoadSettings, run_trial

DNSCOST = [sys.executable, "-m", "dnscost.cli"]
ROOTS = Path(os.environ.get("DNSCOST_ROOTS") or Path(__file__).resolve().parents[2] / "roots")


def test_names() -> None:
    assert str(target_name("dnsdist")) == "dnsdist"
    assert target_name("knot-resolver@sid").release == "sid"
    with pytest.raises(UsageError, match=r"unknown Debian release potato \(known: bullseye"):
        target_name("dnsdist@potato")
    with pytest.raises(UsageError, match="Debian does not package coredns"):
        target_name("coredns@trixie")
    with pytest.raises(UsageError, match="does not exist"):
        target_name("unbound@/no/such/build")
    with pytest.raises(UsageError, match="unknown target bind10"):
        target_name("bind10@trixie")
    assert label_of("dnsdist@/opt/dnsdist-2.0/sbin/dnsdist") == "dnsdist@opt_dnsdist-2.0_sbin_dnsdist"
    assert label_of("dnsdist@trixie") == "dnsdist@trixie"


def test_kresd_6_counters_are_nested_tables() -> None:
    """kresd 6 prints stats.list() as nested tables, kresd 5 flat: the same counters from both."""
    flat = "{\n    ['answer.total'] = 906,\n    ['answer.cached'] = 514,\n    ['request.total'] = 910,\n}"
    nested = (
        "{\n    ['answer'] = {\n        ['cached'] = 514,\n        ['total'] = 906,\n    },\n"
        "    ['request'] = {\n        ['internal'] = 4,\n        ['total'] = 910,\n    },\n}"
    )
    assert parse_kresd_table(nested)["request.total"] == 910
    for text in (flat, nested):
        c = kresd_counters(text, "")
        assert (c.answers, c.cache_hits) == (906, 514)
    assert kresd_counters(nested, "").queries == 906  # request.total less request.internal


def test_a_build_says_what_it_serves_and_one_in_a_root_runs_there(tmp_path: Path) -> None:
    """A build's transports come from its binary (dnsdist lists dns-over-quic and dns-over-http3
    among its features when built with quiche); a build inside a release root (what
    ``scripts/build-target`` makes) is found there and its programs run in that root."""
    exe = tmp_path / "plain" / "bin" / "dnsdist"
    exe.parent.mkdir(parents=True)
    exe.write_text(
        "#!/bin/sh\necho 'dnsdist 1.9.16'\necho 'Enabled features: dns-over-tls(openssl) dns-over-https(nghttp2)'\n"
    )
    exe.chmod(0o755)
    assert served(f"dnsdist@{exe.parent.parent}") == ("udp", "tcp", "dot", "doh")
    exe.write_text(exe.read_text().replace("dns-over-tls", "dns-over-quic dns-over-http3 dns-over-tls"))
    assert served(f"dnsdist@{exe}") == ("udp", "tcp", "dot", "doh", "doq", "doh3")
    assert served("dnsdist") == served("dnsdist@trixie") == ("udp", "tcp", "dot", "doh")  # Debian: no quiche
    assert Build.at(exe, "dnsdist").root is None
    root = tmp_path / "roots" / "trixie"
    prefix = root / "opt" / "dnsdist-quic"
    (prefix / "bin").mkdir(parents=True)
    shutil.copy2(exe, prefix / "bin" / "dnsdist")
    (root / MANIFEST).write_text(json.dumps({"release": "trixie", "mirror": "m", "created": "c", "packages": {}}))
    build = Build.at(prefix, "dnsdist")
    assert build.root is not None and build.root.path == root
    assert build.find("dnsdist", "dnsdist", "dnsdist") == "/opt/dnsdist-quic/bin/dnsdist"  # as seen in the root
    assert build.wrap(["dnsdist"])[-2:] == ["--", "dnsdist"]
    assert str(root) in build.wrap(["dnsdist"])
    binary = prefix / "bin" / "dnsdist"
    assert build.describe() == {
        "place": "build",
        "path": str(prefix),
        "binary": str(binary),
        "sha256": hashlib.sha256(binary.read_bytes()).hexdigest(),
        "release": "trixie",
        "root": str(root),
    }


def _one_line(argv: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*DNSCOST, *argv], capture_output=True, text=True, timeout=60, env=env, check=False)


def test_roots_that_are_a_file_are_one_line_and_exit_2(tmp_path: Path) -> None:
    """``--roots FILE`` said "FILE: File exists" (exit 1) once prepare's lock could not be made
    under it: now that the path is not a directory, before anything is made or fetched."""
    file = tmp_path / "tiny.toml"
    file.write_text('name = "tiny"\n')
    says = f"dnscost: {file}: not a directory (release roots live in a directory: --roots, $DNSCOST_ROOTS)"
    for argv in (
        ["target", "prepare", "dnsdist@trixie", "--roots", str(file), "--mirror", "http://127.0.0.1:1/debian"],
        ["target", "list", "--roots", str(file)],
    ):
        r = _one_line(argv)
        assert r.returncode == 2, r.stderr
        assert r.stderr.strip().splitlines() == [says], r.stderr
    assert file.read_text() == 'name = "tiny"\n'


def test_a_missing_root_and_an_unknown_release_are_one_line_and_exit_2(tmp_path: Path) -> None:
    empty = tmp_path / "roots"
    args = ["--transport", "udp", "--duration", "1s", "--output", str(tmp_path / "out")]
    missing = _one_line(["load", "--target", "dnsdist@trixie", "--roots", str(empty), *args])
    assert missing.returncode == 2, missing.stderr
    assert missing.stderr.strip().splitlines() == [
        f"dnscost: dnsdist@trixie: no release root with it in {empty}: "
        f"run dnscost target prepare --roots {empty} dnsdist@trixie"
    ]
    unknown = _one_line(["load", "--target", "dnsdist@potato", *args])
    assert unknown.returncode == 2 and len(unknown.stderr.strip().splitlines()) == 1, unknown.stderr
    assert "unknown Debian release potato" in unknown.stderr
    study = _one_line(["reproduce", "--quick", "--targets", "knot-resolver@hamm", "--output", str(tmp_path / "s")])
    assert study.returncode == 2 and "unknown Debian release hamm" in study.stderr, study.stderr
    assert not (tmp_path / "s").exists()


@pytest.fixture(scope="module")
def roots() -> Path:
    """The release roots of the tests, made once (``dnscost target prepare``)."""
    need(os.geteuid() == 0, "needs root (debootstrap, chroot)")
    need(shutil.which("debootstrap") is not None, "debootstrap is not installed (scripts/setup installs it)")
    names = ["dnsdist@trixie", "bind9@trixie", "knot-resolver@sid", "dnsdist@sid"]
    done = subprocess.run(
        [*DNSCOST, "target", "prepare", "--roots", str(ROOTS), *names],
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    listed = subprocess.run([*DNSCOST, "target", "list", "--roots", str(ROOTS)], capture_output=True, text=True)
    for line in (
        "dnsdist@trixie             1.9.",
        "bind9@trixie               9.20.",
        "knot-resolver@sid          6.",
        "dnsdist@sid                2.",
    ):
        assert line in listed.stdout, listed.stdout
    return ROOTS


def _no_mount_under(path: Path) -> bool:
    return not any(f" {path}" in line for line in Path("/proc/mounts").read_text().splitlines())


@pytest.mark.resolver
@pytest.mark.parametrize(
    ("target", "transport", "version"),
    [("dnsdist@trixie", "doh", "1.9."), ("knot-resolver@sid", "dot", "6."), ("bind9@trixie", "dot", "9.20.")],
)
def test_one_trial_per_release_root(roots: Path, tmp_path: Path, target: str, transport: str, version: str) -> None:
    started_before = set(_live)  # another test's leftovers are its own failure, not this one's
    set_roots_dir(roots)
    try:
        settings = LoadSettings(
            target,
            transport,
            {"rate": 1000, "duration_ms": 2000, "warmup_ms": 500, "connections": 4},
            target_cpus=[0],
            generator_cpus=[1],
            names=2000,
            baseline_s=0.5,
        )
        record = run_trial(settings, tmp_path)
    finally:
        set_roots_dir(None)
    v = record["summary"]["validity"]
    assert record["status"] == "done" and record["target_version"].startswith(version), record["target_version"]
    assert record["target_place"]["place"] == "root" and record["target_place"]["release"] == target.split("@")[1]
    # The target's own counters (read in the root) against the engine's answers.
    assert v["target_answered"] is not None and v["answer_count_agreement"] >= 0.99, v
    assert record["cache_hit_ratio"] is not None and record["cache_hit_ratio"] >= 0.99
    assert (tmp_path / "target").is_dir() and any((tmp_path / "target").glob("*.log"))
    # Nothing left: no process, no mount, no mount point in the root.
    assert set(_live) <= started_before
    assert _no_mount_under(roots)
    assert not (roots / target.split("@")[1] / str(tmp_path).lstrip("/")).exists()
    assert roots_dir() == Path("roots").resolve()  # the setting went back


@pytest.mark.resolver
def test_dnsdist_2_refuses_a_client_over_its_new_session_limit(roots: Path, tmp_path: Path) -> None:
    """dnsdist 2 told to take at most 5 new TLS sessions a second from a client
    (``--new-session-limit 5 --ban 30``): the load's one address opening one-query DoT
    connections without resumption, 50 a second for 3.5 s, is let through for a while and then
    banned (reset at accept): dnsdist's own count of new sessions is the engine's count of full
    handshakes, below half the 175 connections the rate asked for (dnsdist banned after the first
    or the second second in runs here, 24 or 44 new sessions; the engine's slots then back off
    to one attempt a second, so the connections it opened are not the measure), every other
    connection the engine opened failed, and in the run's last two seconds every connection the
    engine opened failed. (The cache fill over DoT, which would trip the limit from one address,
    comes from an address per stream.)"""
    out = tmp_path / "run"
    done = _one_line(
        ["load", "--roots", str(roots), "--target", "dnsdist@sid", "--transport", "dot", "--rate", "50",
         "--connections", "4", "--lifetime", "1q", "--resumption", "0", "--duration", "3s", "--warmup", "500ms",
         "--names", "2000", "--new-session-limit", "5", "--ban", "30", "--output", str(out)]
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    trial = json.loads(next(out.glob("trials/*/trial.json")).read_text())
    assert trial["session_limits"] == {"new_per_s": 5, "ban_s": 30}
    assert "setMaxTLSNewSessionRatePerClient(5)" in next(out.glob("trials/*/target/dnsdist.conf")).read_text()
    before, after = trial["counters"]["before"]["raw"], trial["counters"]["after"]["raw"]
    new = after["frontend.dot.tlsNewSessions"] - before.get("frontend.dot.tlsNewSessions", 0)
    # Over the whole run (warm-up and measured period), as dnsdist's counters were read.
    engine = read_records(next(out.glob("trials/*/engine.jsonl")))
    (total,) = [r["total"] for r in engine if r.get("type") == "summary"]
    assert new == total["handshakes"]["full"], (new, total["handshakes"])
    connections = total["connections"]
    assert new < 50 * 3.5 / 2, (new, connections)
    assert connections["failed"]["connect"] == connections["opened"] - new > 0, (new, connections)
    last = [r["connections"] for r in engine if r.get("type") == "interval"][-3:-1]  # whole seconds
    assert all(c["established"] == 0 and c["failed"].get("connect", 0) == c["opened"] > 0 for c in last), last


@pytest.mark.resolver
def test_own_build_is_a_copied_binary(root: None, tmp_path: Path) -> None:
    """``NAME@PATH``: a copy of the host's dnsdist, run from where it lies; its version read from it."""
    host = shutil.which("dnsdist")
    need(host is not None, "dnsdist is not installed")
    assert host is not None
    build = tmp_path / "build" / "bin"
    build.mkdir(parents=True)
    shutil.copy2(host, build / "dnsdist")
    out = tmp_path / "run"
    done = _one_line(
        ["load", "--target", f"dnsdist@{build / 'dnsdist'}", "--transport", "dot", "--rate", "1000",
         "--duration", "2s", "--warmup", "500ms", "--connections", "4", "--names", "2000", "--output", str(out)]
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    trial = json.loads(next(out.glob("trials/*/trial.json")).read_text())
    copy = build / "dnsdist"
    digest = hashlib.sha256(copy.read_bytes()).hexdigest()
    assert trial["target_place"] == {"place": "build", "path": str(copy), "binary": str(copy), "sha256": digest}
    assert (
        trial["target_version"] == subprocess.run([host, "--version"], capture_output=True, text=True).stdout.split()[1]
    )
    v = trial["summary"]["validity"]
    assert v["answer_count_agreement"] >= 0.99, v
    trial_dir = next(out.glob("trials/*"))
    assert trial_dir.name == f"load-{label_of('dnsdist@' + str(build / 'dnsdist'))}-dot"
    assert f"{build / 'dnsdist'} --supervised" in (trial_dir / "target" / "dnsdist.conf").read_text()


@pytest.fixture(scope="module")
def quic_build(roots: Path) -> Path:
    """dnsdist built with quiche in the trixie root, by ``scripts/build-target dnsdist-quic``
    (about ten minutes from nothing on 2 cores, once: later runs find it in the roots, and make
    it again when the script, its recipe, changed since: its ``recipe`` is the script's SHA-256)."""
    build = roots / "trixie" / "opt" / "dnsdist-quic"
    script = Path(__file__).resolve().parents[2] / "scripts" / "build-target"
    made = build / "dnscost-build.json"
    recipe = hashlib.sha256(script.read_bytes()).hexdigest()
    if not made.is_file() or json.loads(made.read_text()).get("recipe") != recipe:
        done = subprocess.run(
            ["bash", str(script), "dnsdist-quic", "--roots", str(roots)],
            capture_output=True,
            text=True,
            timeout=1800,
            check=False,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert f" done: dnsdist@{build} (its features: dns-over-quic,dns-over-http3;" in done.stdout, done.stdout
    return build


@pytest.mark.resolver
def test_dnsdist_built_with_quiche_serves_doq_and_doh3_in_its_root(quic_build: Path, tmp_path: Path) -> None:
    """The build scripts/build-target makes runs in the trixie root: a DoQ and a DoH/3 trial,
    each answer counted by dnsdist too; its DoH/3 drops a POST whose FIN comes alone, seen from
    aioquic (bench/doh3-post-fin)."""
    from test_quic import doh3_post_fin

    target = f"dnsdist@{quic_build}"
    set_roots_dir(ROOTS)
    try:
        for transport in ("doq", "doh3"):
            settings = LoadSettings(
                target,
                transport,
                {"rate": 1000, "duration_ms": 2000, "warmup_ms": 500, "connections": 4}
                | ({"doh_method": "get"} if transport == "doh3" else {}),
                names=2000,
                baseline_s=0.5,
            )
            record = run_trial(settings, tmp_path / transport)
            v = record["summary"]["validity"]
            assert record["status"] == "done" and record["target_place"]["release"] == "trixie", record
            assert v["target_answered"] is not None and v["answer_count_agreement"] >= 0.99, v
    finally:
        set_roots_dir(None)
    with pytest.raises(UsageError, match=r"over doh3: dnsdist drops a POST .* --doh-method get$"):
        LoadSettings(target, "doh3").validate()
    start = [*DNSCOST, "target", "start", "--roots", str(ROOTS), target, "--transports", "doh3"]
    started = subprocess.Popen([*start, "--dir", str(tmp_path / "s")], stdout=subprocess.PIPE, text=True)
    try:
        assert started.stdout is not None
        lines: list[str] = []
        while not lines or lines[-1] not in ("}\n", ""):  # its JSON ends with a line "}" (EOF: it failed)
            lines.append(started.stdout.readline())
        doc = json.loads("".join(lines))
        port = re.match(r"doh3://[\d.]+:(\d+)", doc["endpoints"]["doh3"])
        assert port is not None, doc["endpoints"]
        got = doh3_post_fin(int(port.group(1)))
    finally:
        started.send_signal(signal.SIGINT)
        started.wait(timeout=30)
    assert got == {"post-fin-with-body": "HTTP 200, NOERROR", "post-fin-alone": "no answer in 1 s",
                   "get": "HTTP 200, NOERROR"}, got  # fmt: skip
