from __future__ import annotations

import argparse
import subprocess
import sys

import pytest
from conftest import IN_CI
from dnscost.cli import build_parser, engine_settings, parse_duration_ms, parse_lifetime, parse_rate


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
