"""`dnscost load` when the engine runs out of file descriptors: the engine's line naming its
open-files limit, and a failed trial with a non-zero exit, never "0 qps answered" with exit 0."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

from dnscost.engine import engine_path

DNSCOST = [sys.executable, "-m", "dnscost.cli"]


def test_an_engine_out_of_file_descriptors_fails_the_load_and_names_the_limit(root: None, tmp_path: Path) -> None:
    # The engine's generate runs with an open-files limit of 256, soft and hard (lowering needs
    # no privilege, so it holds whatever dnscost raised its own to); its serve (builtin) does not.
    engine = tmp_path / "engine"
    engine.write_text(
        f'#!/bin/sh\nif [ "$1" = generate ]; then ulimit -n 256; fi\nexec {shlex.quote(str(engine_path()))} "$@"\n'
    )
    engine.chmod(0o755)
    out = tmp_path / "o"
    r = subprocess.run(
        [
            *DNSCOST,
            "load",
            "--target",
            "builtin",
            "--transport",
            "tcp",
            "--connections",
            "600",
            "--rate",
            "300",
            "--warmup",
            "0",
            "--duration",
            "1s",
            "--output",
            str(out),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "DNSCOST_ENGINE": str(engine)},
        timeout=120,
        check=False,
    )
    assert r.returncode != 0, r.stdout + r.stderr
    assert "qps answered" not in r.stdout, r.stdout
    line = r.stderr.strip().splitlines()[-1]
    assert line.startswith("dnscost: "), r.stderr
    for words in ("(open_files)", "open-files limit 256 (hard 256)", "600 connections"):
        assert words in line, r.stderr
    assert "--cluster netns:N" in line and not line.endswith("…"), r.stderr
    # The run says the trial failed, and why; the engine's records are kept.
    doc = json.loads((out / "run.json").read_text())
    assert doc["status"] == "failed", doc
    trial = doc["trials"]["load-builtin-tcp"]
    assert trial["status"] == "failed" and "(open_files)" in trial.get("error", json.dumps(trial)), trial
    summary = json.loads((out / "trials" / "load-builtin-tcp" / "engine.jsonl").read_text().splitlines()[-1])
    assert summary["type"] == "summary"
    assert summary["total"]["connections"]["failed"]["open_files"] > 0, summary


def _refused(*args: str) -> str:
    r = subprocess.run(
        [*DNSCOST, "load", "--transport", "dot", "--duration", "1s", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert r.returncode == 2 and not r.stdout, r.stdout + r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dnscost: "), r.stderr
    return lines[0]


def test_more_connections_than_processes_hold_are_refused_in_one_line(tmp_path: Path) -> None:
    """Before anything starts: a target that runs as one process cannot pass one process's
    descriptors, one that splits is told how many processes it needs, and one engine's share
    past them asks for more cluster engines (the limits are this machine's)."""
    from dnscost.machine import FD_HEADROOM, connections_per_process

    each = connections_per_process()
    over = each + 1
    out = ["--output", str(tmp_path / "never")]
    line = _refused("--target", "bind9", "--connections", str(over), *out)
    assert f"bind9 runs as one process, which holds at most {each} connections" in line, line
    assert f"open-files limit {each + FD_HEADROOM}" in line and f"{over} cannot be measured" in line, line
    line = _refused("--target", "bind9", "--target-processes", "2", "--connections", "10", *out)
    assert "bind9 runs as one process (dnscost cannot split it)" in line, line
    line = _refused("--target", "knot-resolver", "--connections", str(5 * each), *out)
    assert f"{5 * each} connections need 5 processes here" in line and "--target-processes 5" in line, line
    line = _refused("--target", "knot-resolver", "--target-processes", "5", "--connections", str(5 * each), *out)
    assert f"one engine holds at most {each} here" in line and "--cluster netns:5 or more" in line, line
    assert not (tmp_path / "never").exists()
