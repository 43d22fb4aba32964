"""Driving ``dnscost-engine`` across the process boundary: a JSON configuration in, JSON lines
out. The engine validates its configuration itself (strictly); its one-line errors come back
as :class:`~dnscost.errors.UsageError`.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from dnscost.contract import (
    ConnectionRecord,
    EngineConfig,
    EngineRecord,
    IntervalRecord,
    QueryRecord,
    StartRecord,
    SummaryRecord,
)
from dnscost.errors import EngineError, MachineError, UsageError
from dnscost.jsonl import read_records
from dnscost.proc import Child
from dnscost.results import write_json
from dnscost.transports import TLS_TRANSPORTS

__all__ = [
    "Endpoint",
    "Responder",
    "check_config",
    "engine_path",
    "engine_records",
    "engine_version",
    "generate",
    "start_of",
    "summary_of",
]


def engine_path() -> Path:
    """``$DNSCOST_ENGINE``, else ``dnscost-engine`` beside this Python (the virtual environment
    scripts/setup made), else on ``PATH``, else the build tree of a source checkout."""
    env = os.environ.get("DNSCOST_ENGINE")
    if env:
        if Path(env).is_file() and os.access(env, os.X_OK):
            return Path(env)
        raise MachineError(f"DNSCOST_ENGINE={env} is not an executable file")
    candidates = []
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
    out = subprocess.run([str(engine_path()), "--version"], capture_output=True, text=True, check=False, timeout=30)
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
        exec_prefix: Sequence[str] = (),
        queries_log: bool = False,
    ) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.queries_log = workdir / f"{name}-queries.jsonl" if queries_log else None
        """Where it logs every query it answers (one JSON line each), when asked to."""
        self.ca = workdir / f"{name}-ca.pem"
        self._listen_file = workdir / f"{name}.listening"
        argv = [*exec_prefix, str(engine_path()), "serve", "--synthetic", str(synthetic), "--tld", tld]
        for url in listen:
            argv += ["--listen", url]
        if any(u.startswith(("dot:", "doh:")) for u in listen) and "--cert" not in extra:
            argv += ["--ca-out", str(self.ca)]
        if cpus:
            argv += ["--cpus", ",".join(map(str, cpus)), "--threads", str(len(cpus))]
        argv += list(extra)
        argv += ["--queries-log", str(self.queries_log)] if self.queries_log is not None else []
        self._out = self._listen_file.open("wb")
        self.child = Child(
            name, argv, log=workdir / f"{name}.log", cpus=cpus, cgroup_procs=cgroup_procs, stdout=self._out
        )
        expected = len(listen)
        self.child.wait_for(lambda: len(self._listening()) >= expected, 10, "while binding its listeners")
        self.endpoints = {e.transport: e for e in self._listening()}
        self.start_unix_us: int | None = next(
            (r.get("start_unix_us") for r in self._records() if r.get("type") == "listening"), None
        )

    def _records(self) -> list[dict[str, Any]]:
        return read_records(self._listen_file)

    def _listening(self) -> list[Endpoint]:
        out = []
        for r in self._records():
            if r.get("type") == "listening":
                host, _, port = r["address"].rpartition(":")
                out.append(Endpoint(r["transport"], host.strip("[]"), int(port), r.get("path")))
        return out

    def asked(self, since_unix_s: float, until_unix_s: float, outside: str) -> int:
        """The queries of its log read between the two wall-clock times for names outside the
        zone ``outside`` (``test.``: health checks and probes left out) but the root (a
        resolver's own priming). The log is written in batches at least once a second: wait
        that long after ``until`` before asking."""
        if self.queries_log is None or self.start_unix_us is None:
            raise EngineError(f"{self.child.name}: keeps no queries log")
        zone = outside.strip(".").lower()
        since_us, until_us = since_unix_s * 1e6 - self.start_unix_us, until_unix_s * 1e6 - self.start_unix_us
        n = 0
        for r in read_records(self.queries_log):
            name = str(r.get("qname") or "").rstrip(".").lower()
            ours = name and name != zone and not name.endswith("." + zone)
            if ours and since_us <= r.get("t_us", -1) <= until_us:
                n += 1
        return n

    def stop(self) -> None:
        self.child.stop()
        self._out.close()


def check_config(config: EngineConfig, where: str, names: Mapping[str, str] | None = None) -> None:
    """Has the engine validate ``config`` (``generate --check``: nothing is sent), before any
    target starts. The target's address is not known yet: a placeholder stands in for it.
    A bad setting raises :class:`UsageError` naming ``where`` and the field, as ``names`` calls
    it (a flag, a file's field) when it has it, else by the field's own name."""
    import tempfile

    doc = {"target": "127.0.0.1:53", **config}
    if doc.get("transport") in TLS_TRANSPORTS and "ca_file" not in doc:
        doc["insecure"] = True
    # One top-level field per line: the line of a parse error names its field.
    text = json.dumps(doc, indent=1)
    with tempfile.NamedTemporaryFile("w", suffix=".json", prefix="dnscost-check-") as f:
        f.write(text)
        f.flush()
        out = subprocess.run(
            [str(engine_path()), "generate", "--config", f.name, "--check", "--quiet"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    if out.returncode != 0:
        lines = (out.stderr.strip() or out.stdout.strip() or f"exit code {out.returncode}").splitlines()
        message = lines[-1].removeprefix("dnscost-engine: ").replace(f.name, "configuration")
        raise UsageError(f"{where}: {_name_field(message, text, names or {})}")


_INVALID = re.compile(r"invalid configuration: ([a-z_][a-z0-9_.]*)(: | does not apply to )(.*)$")
_PARSE = re.compile(r"configuration: (.*) at line (\d+) column \d+$")
_TOP_FIELD = re.compile(r' "([a-z_][a-z0-9_]*)": ')


def _name_field(message: str, text: str, names: Mapping[str, str]) -> str:
    """The engine's ``message`` about the configuration ``text`` (JSON, one top-level field per
    line) with its field named as ``names`` calls it: ``FIELD: what is wrong``. A parse error
    names no field, only a line: the top-level field on that line or above it. A message
    naming no field is returned as it is."""
    if m := _INVALID.match(message):
        field, joint, detail = m.groups()
    elif m := _PARSE.match(message):
        detail, line = m.group(1), int(m.group(2))
        fields = [f.group(1) for f in map(_TOP_FIELD.match, text.splitlines()[:line]) if f is not None]
        if not fields:
            return message
        field, joint = fields[-1], ": "
    else:
        return message
    top, _, rest = field.partition(".")
    name = names.get(top, top) + (f".{rest}" if rest else "")
    return f"{name}{joint}{detail}"


def generate(
    config: EngineConfig,
    workdir: Path,
    *,
    cpus: Sequence[int] | None = None,
    name: str = "engine",
    watchdog: Callable[[], None] | None = None,
    started: Callable[[int], None] | None = None,
    exec_prefix: Sequence[str] = (),
) -> list[EngineRecord]:
    """Runs one ``generate`` with ``config`` (the engine's JSON configuration; its output and
    connections-log paths are set here), pinned to ``cpus``, behind ``exec_prefix`` (e.g. a
    lab namespace's ``ip netns exec``). Returns its records. Ctrl-C is
    passed on to the engine, which drains and still writes its summary. ``watchdog`` is called
    every 200 ms while the engine runs; if it raises, the engine is stopped the same way (its
    records are kept on disk) and the exception propagates. ``started`` gets the engine's PID.
    The wait is bounded: an engine still running well past its schedule is stopped and the
    trial fails with :class:`EngineError`."""
    workdir.mkdir(parents=True, exist_ok=True)
    config = config.copy()
    output = config.get("output") or str(workdir / f"{name}.jsonl")
    config["output"] = output
    if cpus:
        config.setdefault("cpus", list(cpus))
        config.setdefault("threads", min(len(cpus), int(config.get("connections", 1))))
    path = workdir / f"{name}-config.json"
    write_json(path, config)
    child = Child(
        name,
        [*exec_prefix, str(engine_path()), "generate", "--config", str(path), "--quiet"],
        log=workdir / f"{name}.log",
        cpus=cpus,
    )
    timeout_s = float(config.get("timeout_ms", 2000)) / 1000
    if retry := config.get("udp_retry"):  # it replaces timeout_ms: a query's tries in all
        timeout_s = float(retry["timeout_ms"]) * int(retry["attempts"]) / 1000
    limit_s = (
        float(config.get("warmup_ms", 0)) / 1000 + float(config.get("duration_ms", 10_000)) / 1000 + 2 * timeout_s + 30
    )
    try:
        if started is not None:
            started(child.pid)
        code = _wait(child, limit_s, timeout_s, watchdog)
    except BaseException:
        _drain(child, timeout_s)
        raise
    finally:
        child.stop()
    if code is None:
        raise EngineError(f"dnscost-engine did not finish within {limit_s:.0f} s and was stopped: {child.log_tail()}")
    if code != 0:
        if code == 2:
            raise UsageError(child.log_tail(1).removeprefix("dnscost-engine: "))
        # "exited with code 4: no query was answered: …", "killed by signal 9 (SIGKILL)"
        raise EngineError(f"dnscost-engine {child.last_words(first_error=False)}")
    records = engine_records(Path(output))
    if not records or records[-1]["type"] != "summary":
        raise EngineError(f"dnscost-engine wrote no summary: {child.log_tail()}")
    return records


_RECORD_KEYS = {cls.__annotations__["type"].__args__[0]: cls.__required_keys__
                for cls in (StartRecord, IntervalRecord, SummaryRecord)}  # fmt: skip


def engine_records(path: Path) -> list[EngineRecord]:
    """The records of an engine's output (``generate``'s JSON lines, or ``<path>.gz`` beside it),
    typed: each must be of a type the engine writes and hold that type's fields (their own
    types are the engine's, which ``python/tests/test_contract.py`` holds to its schema). A
    line cut short by a crash is skipped, as :func:`~dnscost.jsonl.read_records` does; any
    other record is an :class:`EngineError` naming the file and line."""
    records = read_records(path)
    for n, r in enumerate(records, 1):
        required = _RECORD_KEYS.get(r.get("type"))
        if required is None:
            raise EngineError(f"{path}: record {n} is not the engine's (type {r.get('type')!r})")
        if missing := sorted(required - r.keys()):
            raise EngineError(f"{path}: record {n} ({r['type']}) lacks {', '.join(missing)}")
    return cast(list[EngineRecord], records)


def connection_log(path: Path, *, strict: bool = True) -> list[ConnectionRecord]:
    """A connections log (``serve --connections-log``, ``generate``'s ``connections_log``),
    typed: every record a connection holding that type's required fields, else an
    :class:`EngineError` naming the file and the record. ``strict`` as
    :func:`~dnscost.jsonl.read_records` says (False: a line cut short by a crash is skipped)."""
    return cast(list[ConnectionRecord], _log(path, "connection", ConnectionRecord.__required_keys__, strict))


def query_log(path: Path, *, strict: bool = True) -> list[QueryRecord]:
    """A queries log (``serve --queries-log``), typed as :func:`connection_log` says."""
    return cast(list[QueryRecord], _log(path, "query", QueryRecord.__required_keys__, strict))


def _log(path: Path, kind: str, required: frozenset[str], strict: bool) -> list[dict[str, object]]:
    records = read_records(path, strict=strict)
    for n, r in enumerate(records, 1):
        if r.get("type") != kind:
            raise EngineError(f"{path}: record {n} is not a {kind} (type {r.get('type')!r})")
        if missing := sorted(required - r.keys()):
            raise EngineError(f"{path}: record {n} ({kind}) lacks {', '.join(missing)}")
    return records


def start_of(records: Sequence[EngineRecord]) -> StartRecord:
    """The run's start record (its first)."""
    first = records[0] if records else None
    if first is None or first["type"] != "start":
        raise EngineError("the engine's records do not begin with its start record")
    return first


def summary_of(records: Sequence[EngineRecord]) -> SummaryRecord:
    """The run's summary record (its last)."""
    last = records[-1] if records else None
    if last is None or last["type"] != "summary":
        raise EngineError("the engine's records do not end with its summary")
    return last


def _wait(child: Child, limit_s: float, timeout_s: float, watchdog: Callable[[], None] | None) -> int | None:
    """The engine's exit code, calling ``watchdog`` every 200 ms; None when it outlived
    ``limit_s`` (it is then asked to drain, and killed if it does not)."""
    deadline = time.monotonic() + limit_s
    while True:
        try:
            return child.popen.wait(0.2)
        except subprocess.TimeoutExpired:
            pass
        if watchdog is not None:
            watchdog()
        if time.monotonic() > deadline:
            _drain(child, timeout_s)
            return None


def _drain(child: Child, timeout_s: float) -> None:
    """SIGINT (the engine drains and writes its summary), then a bounded wait; Child.stop
    kills it after that."""
    if child.alive():
        child.popen.send_signal(signal.SIGINT)
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.popen.wait(timeout_s + 5)
