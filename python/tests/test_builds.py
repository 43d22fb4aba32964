"""``NAME@PATH`` measures exactly PATH (issue 57, R2).

A text file, a non-executable copy, another resolver's binary or ``/bin/true`` named as a build
is refused in one line with exit 2 before any target starts, never stood in for by the host's
package; a real build renamed as a developer names it is taken, and its trial records the
binary it ran (SHA-256 compared with the file's own). The gate refuses to compare a binary with
itself unless told it is a control."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import need
from dnscost.engine import engine_path

REPO = Path(__file__).parents[2]
LOAD = ["--transport", "udp", "--duration", "1s", "--rate", "100"]


def _dnscost(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    exe = Path(str(engine_path())).with_name("dnscost")
    return subprocess.run([str(exe), *args], capture_output=True, text=True, cwd=cwd, timeout=120, check=False)


def _host(binary: str) -> Path:
    found = shutil.which(binary, path=os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"]))
    need(found is not None, f"{binary} is not installed (scripts/setup installs it)")
    assert found is not None
    return Path(found)


def _refused(r: subprocess.CompletedProcess[str], says: str) -> None:
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert len(lines) == 1 and says in lines[0], lines
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize(
    ("case", "target", "says"),
    [
        ("text", "dnsdist", "is not executable"),
        ("text-x", "dnsdist", "is not dnsdist (its binary does not carry 'dnsdist '"),
        ("noexec-copy", "dnsdist", "is not executable"),
        ("unbound", "dnsdist", "is not dnsdist (its binary does not carry 'dnsdist '"),
        ("kresd", "unbound", "is not unbound (its binary does not carry 'unbound'"),
        ("true", "dnsdist", "is not dnsdist"),
        ("wrapper-of-unbound", "dnsdist", "is not dnsdist: --version printed"),
        ("emptydir", "dnsdist", "no executable dnsdist in"),
    ],
)
def test_a_path_that_is_not_the_named_server_is_refused_before_anything_starts(
    tmp_path: Path, case: str, target: str, says: str
) -> None:
    """The campaign's reproductions (R2), each refused in one line, exit 2, with no run
    directory measured: before, each ran the host's package and labelled it PATH."""
    path = tmp_path / case
    if case.startswith("text"):
        path.write_text("[experiment]\nname = 'not a server'\n")
        if case == "text-x":
            path.chmod(0o755)
    elif case == "noexec-copy":
        path.mkdir()
        path = path / "dnsdist"
        shutil.copyfile(_host("dnsdist"), path)
        path.chmod(0o644)
    elif case in ("unbound", "kresd", "true"):
        path = _host(case)
    elif case == "wrapper-of-unbound":
        path.write_text(f'#!/bin/sh\nexec {_host("unbound")} "$@"\n')
        path.chmod(0o755)
    else:
        path.mkdir()
    out = tmp_path / "out"
    r = _dnscost("load", "--target", f"{target}@{path}", *LOAD, "--output", str(out), cwd=tmp_path)
    _refused(r, says)
    assert not (out / "trials").exists()


def test_target_start_refuses_a_build_that_is_not_the_server(tmp_path: Path) -> None:
    r = _dnscost("target", "start", f"dnsdist@{_host('true')}", cwd=tmp_path)
    _refused(r, "is not dnsdist")


def test_a_renamed_build_is_measured_and_recorded_with_its_digest(tmp_path: Path) -> None:
    """A copy of the host's dnsdist named as a developer names a build (``dnsdist-head``) is
    the binary measured: trial.json's ``target_place`` names it, with the SHA-256 of the file
    (computed here, not by dnscost), and the answers come from it."""
    need(os.geteuid() == 0, "needs root (cgroups)")
    head = tmp_path / "opt" / "dnsdist-head"
    head.parent.mkdir()
    shutil.copy2(_host("dnsdist"), head)
    out = tmp_path / "out"
    r = _dnscost("load", "--target", f"dnsdist@{head}", *LOAD, "--output", str(out), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    import json

    (trial,) = list((out / "trials").glob("*/trial.json"))
    place = json.loads(trial.read_text())["target_place"]
    assert place["place"] == "build" and place["binary"] == str(head)
    assert place["sha256"] == hashlib.sha256(head.read_bytes()).hexdigest()


def test_helpers_a_build_lacks_come_from_the_host_and_are_recorded(tmp_path: Path) -> None:
    from dnscost.targets import build_of, target_name

    prefix = tmp_path / "unbound-build"
    (prefix / "sbin").mkdir(parents=True)
    shutil.copy2(_host("unbound"), prefix / "sbin" / "unbound")
    build = build_of(target_name(f"unbound@{prefix}"))
    assert build.find("unbound", "unbound", "unbound") == str(prefix / "sbin" / "unbound")
    control = build.find("unbound-control", "unbound", "unbound")
    assert control == str(_host("unbound-control"))
    assert build.describe()["helpers"] == {"unbound-control": control}


def test_the_gate_refuses_one_binary_twice_unless_told_it_is_a_control(tmp_path: Path) -> None:
    """Two copies of one binary (byte for byte) as BASE and HEAD: exit 2 in one line before
    anything is measured; with ``--control`` the same pair gets past that check (to the next
    one: here a spec that does not exist)."""
    a, b = tmp_path / "a" / "kresd", tmp_path / "b" / "kresd"
    for p in (a, b):
        p.parent.mkdir()
        shutil.copy2(_host("kresd"), p)
    gate = ["bash", str(REPO / "scripts" / "gate"), f"knot-resolver@{a}", f"knot-resolver@{b}"]
    r = subprocess.run([*gate, "--out", str(tmp_path / "g")], capture_output=True, text=True, timeout=120, check=False)
    _refused(r, "gate: BASE and HEAD run the same binary")
    assert not (tmp_path / "g").exists()
    missing = tmp_path / "missing.toml"
    r = subprocess.run(
        [*gate, "--control", "--spec", str(missing), "--out", str(tmp_path / "g")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert r.returncode == 2 and "same binary" not in r.stderr and str(missing) in r.stderr, r.stderr
