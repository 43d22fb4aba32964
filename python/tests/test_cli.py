from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import IN_CI
from dnscost.cli import build_parser, engine_settings, parse_duration_ms, parse_lifetime, parse_rate
from dnscost.engine import generate


def test_durations_and_lifetimes_read_like_the_engine() -> None:
    assert [parse_duration_ms(x) for x in ("1.5s", "250ms", "2m", "3", "1h")] == [1500, 250, 120_000, 3000, 3_600_000]
    with pytest.raises(argparse.ArgumentTypeError):
        parse_duration_ms("soon")
    assert parse_lifetime("forever") == {"duration_ms": None, "queries": None}
    assert parse_lifetime("30s,100q") == {"duration_ms": 30_000, "queries": 100}
    assert parse_rate("max") == "max" and parse_rate("2000") == 2000.0


def test_load_flags_become_engine_fields() -> None:
    a = build_parser().parse_args(
        [
            "load",
            "--target",
            "dnsdist",
            "--transport",
            "dot",
            "--connections",
            "100",
            "--lifetime",
            "1q",
            "--resumption",
            "0.5",
            "--rate",
            "max",
            "--duration",
            "5s",
        ]
    )
    config = engine_settings(a)
    assert config == {
        "connections": 100,
        "lifetime": {"duration_ms": None, "queries": 1},
        "resumption": 0.5,
        "rate": "max",
        "duration_ms": 5000,
        "warmup_ms": 2000,
    }


def test_doctor_reports_a_ready_machine() -> None:
    r = subprocess.run(
        [sys.executable, "-m", "dnscost.cli", "doctor"], capture_output=True, text=True, timeout=60, check=False
    )
    assert "dnscost-engine" in r.stdout and "cgroups" in r.stdout
    if IN_CI:
        assert r.returncode == 0 and r.stdout.rstrip().endswith("ready"), r.stdout


def test_target_start_serves_until_interrupted(root: None, tmp_path: Path) -> None:
    p = subprocess.Popen(
        [sys.executable, "-m", "dnscost.cli", "target", "start", "builtin", "--names", "100", "--dir", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert p.stdout is not None
        lines = []
        while not lines or lines[-1] != "}":
            line = p.stdout.readline()
            assert line, p.stderr.read() if p.stderr else ""
            lines.append(line.rstrip("\n"))
        info = json.loads("\n".join(lines))
        assert set(info["endpoints"]) == {"udp", "tcp", "dot", "doh", "doq", "doh3"}
        dot = info["endpoints"]["dot"].removeprefix("dot://")
        records = generate(
            {
                "transport": "dot",
                "target": dot,
                "ca_file": info["ca"],
                "sni": "localhost",
                "synthetic": 100,
                "rate": 100,
                "duration_ms": 500,
            },
            tmp_path / "probe",
        )
        assert records[-1]["total"]["queries"]["answered"] >= 45
    finally:
        p.send_signal(signal.SIGINT)
        p.wait(30)
    assert p.returncode == 0
    assert not Path(f"/proc/{info['pid']}").exists()
