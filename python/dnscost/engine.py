"""Driving ``dnscost-engine`` across the process boundary: a JSON configuration in, JSON lines
out. The engine validates its configuration itself (strictly); its one-line errors come back
as :class:`~dnscost.errors.UsageError`.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dnscost.errors import EngineError, MachineError, UsageError
from dnscost.proc import Child

__all__ = ["Endpoint", "Responder", "engine_path", "engine_version", "generate", "read_records"]

TRANSPORTS = ("udp", "tcp", "dot", "doh")


def engine_path() -> Path:
    """``$DNSCOST_ENGINE``, else ``dnscost-engine`` beside this Python (the virtual environment
    scripts/setup made), else on ``PATH``, else the build tree of a source checkout."""
    env = os.environ.get("DNSCOST_ENGINE")
    candidates = [Path(env)] if env else []
    candidates.append(Path(sys.prefix) / "bin" / "dnscost-engine")
    found = shutil.which("dnscost-engine")
    if found:
        candidates.append(Path(found))
    candidates.append(Path(__file__).resolve().parents[2] / "target" / "release" / "dnscost-engine")
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return c
    raise MachineError("dnscost-engine not found: run scripts/setup, or set DNSCOST_ENGINE")


def engine_version() -> str:
    out = subprocess.run([str(engine_path()), "--version"], capture_output=True, text=True, check=False)
    return out.stdout.strip()


@dataclass(frozen=True)
class Endpoint:
    """Where a target listens for one transport."""

    transport: str
    host: str
    port: int
    path: str | None = None

    @property
    def address(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    def url(self) -> str:
        return f"{self.transport}://{self.address}{self.path or ''}"


def read_records(path: Path) -> list[dict[str, Any]]:
    """The JSON lines of an engine output file (lines cut short by a crash are skipped)."""
    records = []
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return []
    for line in lines:
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return records


class Responder:
    """``dnscost-engine serve``: the authoritative upstream that resolvers fill their caches
    from, and the zero-dependency target."""

    def __init__(
        self,
        workdir: Path,
        listen: Sequence[str],
        *,
        cpus: Sequence[int] | None = None,
        synthetic: int = 10_000,
        tld: str = "test",
        extra: Sequence[str] = (),
        name: str = "responder",
        cgroup_procs: Sequence[Path] = (),
    ) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.ca = workdir / f"{name}-ca.pem"
        self._listen_file = workdir / f"{name}.listening"
        argv = [str(engine_path()), "serve", "--synthetic", str(synthetic), "--tld", tld]
        for url in listen:
            argv += ["--listen", url]
        if any(u.startswith(("dot:", "doh:")) for u in listen) and "--cert" not in extra:
            argv += ["--ca-out", str(self.ca)]
        if cpus:
            argv += ["--cpus", ",".join(map(str, cpus)), "--threads", str(len(cpus))]
        argv += list(extra)
        self._out = self._listen_file.open("wb")
        self.child = Child(
            name, argv, log=workdir / f"{name}.log", cpus=cpus, cgroup_procs=cgroup_procs, stdout=self._out
        )
        expected = len(listen)
        self.child.wait_for(lambda: len(self._listening()) >= expected, 10, "while binding its listeners")
        self.endpoints = {e.transport: e for e in self._listening()}

    def _listening(self) -> list[Endpoint]:
        out = []
        for line in self._listen_file.read_text().splitlines():
            try:
                r = json.loads(line)
            except json.JSONDecodeError:
                continue
            if r.get("type") == "listening":
                host, _, port = r["address"].rpartition(":")
                out.append(Endpoint(r["transport"], host.strip("[]"), int(port), r.get("path")))
        return out

    def stop(self) -> None:
        self.child.stop()
        self._out.close()


def generate(
    config: dict[str, Any],
    workdir: Path,
    *,
    cpus: Sequence[int] | None = None,
    name: str = "engine",
    watchdog: Callable[[], None] | None = None,
    started: Callable[[int], None] | None = None,
) -> list[dict[str, Any]]:
    """Runs one ``generate`` with ``config`` (the engine's JSON configuration; its output and
    connections-log paths are set here), pinned to ``cpus``. Returns its records. Ctrl-C is
    passed on to the engine, which drains and still writes its summary. ``watchdog`` is called
    every 200 ms while the engine runs; if it raises, the engine is stopped the same way (its
    records are kept on disk) and the exception propagates. ``started`` gets the engine's PID."""
    workdir.mkdir(parents=True, exist_ok=True)
    config = dict(config)
    config.setdefault("output", str(workdir / f"{name}.jsonl"))
    if cpus:
        config.setdefault("cpus", list(cpus))
        config.setdefault("threads", min(len(cpus), int(config.get("connections", 1))))
    path = workdir / f"{name}-config.json"
    path.write_text(json.dumps(config, indent=2) + "\n")
    child = Child(
        name, [str(engine_path()), "generate", "--config", str(path), "--quiet"], log=workdir / f"{name}.log", cpus=cpus
    )
    try:
        code = child.popen.wait()
    except KeyboardInterrupt:
        child.popen.send_signal(signal.SIGINT)
        child.popen.wait()
        raise
    finally:
        child.stop()
    if code != 0:
        message = child.log_tail(1).removeprefix("dnscost-engine: ")
        if code == 2:
            raise UsageError(message)
        raise EngineError(f"dnscost-engine exited with code {code}: {message}")
    records = read_records(Path(config["output"]))
    if not records or records[-1].get("type") != "summary":
        raise EngineError(f"dnscost-engine wrote no summary: {child.log_tail()}")
    return records
