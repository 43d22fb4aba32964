"""Figure 3 as the study measured it: every connection of a memory trial carries one query and
then stays idle, and the x of the fit is the number of connections the target held, counted on
its side. Observers: the target's own query counter and its sockets as ``ss`` sees them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import need
from test_load import installed

SPEC = """
name = "memory"
targets = ["dnsdist"]
names = 500
[defaults]
duration = "2s"
warmup = "1s"
baseline = "0.5s"
[[group]]
name = "memory"
kind = "idle"
transports = ["tcp", "doh"]
connections = 120
open_rate = 2000
"""


@pytest.mark.resolver
def test_every_held_connection_carried_one_query(root: None, tmp_path: Path) -> None:
    need(installed("dnsdist"), "dnsdist is not installed")
    (tmp_path / "memory.toml").write_text(SPEC)
    r = subprocess.run(
        [sys.executable, "-m", "dnscost.cli", "run", "memory.toml", "--output", "out", "--no-report"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    trials = [json.loads(p.read_text()) for p in sorted((tmp_path / "out").glob("trials/*/trial.json"))]
    assert len(trials) == 2
    for t in trials:
        before, after = t["counters"]["before"], t["counters"]["after"]
        assert after["queries"] - before["queries"] == 120, t["id"]  # the target counted one per connection
        s = t["summary"]
        assert s["connections_held"] == pytest.approx(120, abs=1), t["id"]  # its own sockets, from ss
        assert s["queries_answered"] == 0  # idle in the measured window
        assert s["user_bytes_per_connection"] > 0 and s["validity"]["valid"], s["validity"]
