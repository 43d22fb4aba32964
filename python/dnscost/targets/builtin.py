"""``dnscost-engine serve`` itself as the target: authoritative for the synthetic names, no
upstream and no dependency. It keeps no counters of its own (its per-connection log is written
as connections close), so :meth:`Builtin.counters` reports none."""

from __future__ import annotations

from pathlib import Path

from dnscost.engine import Endpoint, engine_path, engine_version
from dnscost.targets.base import Counters, Target, free_port
from dnscost.transports import TLS_TRANSPORTS, TRANSPORTS

__all__ = ["Builtin"]


class Builtin(Target):
    """The reference responder: one runtime thread per CPU, each pinned to its CPU, every
    transport on its own free port, TLS from the run's certificate. Its defaults already suit
    connection experiments: no idle timeout, no limit on queries per connection or on
    connection age, a listen queue of 4 096; the connections log records each connection's
    life (``connections.jsonl`` in the trial directory). Several processes (``processes``)
    share every port (``serve --share-ports``), each with its own log
    (``connections.I.jsonl``)."""

    name = "builtin"
    package = None
    binary = "dnscost-engine"
    transports = TRANSPORTS
    keeps_counters = False
    splits = True

    @classmethod
    def locate(cls) -> str:
        return str(engine_path())

    def configure(self) -> list[str]:
        exe = self.locate()
        argv = [exe, "serve", "--synthetic", str(self.synthetic), "--tld", self.tld.rstrip(".")]
        argv += ["--outside", "answer"] if self.forwarded == "." else []
        dns_port = free_port()
        for t in self.wanted:
            port = dns_port if t in ("udp", "tcp") else free_port()
            path = "/dns-query" if t in ("doh", "doh3") else None
            self.endpoints[t] = Endpoint(t, self.host, port, path)
            argv += ["--listen", f"{t}://{self.host}:{port}{path or ''}"]
        if set(TLS_TRANSPORTS) & set(self.wanted):
            argv += ["--cert", str(self.tls.cert), "--key", str(self.tls.key)]
        if self.cpus:
            argv += ["--threads", str(len(self.cpus)), "--cpus", ",".join(map(str, self.cpus))]
        if self.processes > 1:
            argv.append("--share-ports")
        argv += ["--connections-log", str(self._log(0))]
        return argv

    def _log(self, i: int) -> Path:
        return self.workdir / ("connections.jsonl" if self.processes == 1 else f"connections.{i}.jsonl")

    def instance(self, argv: list[str], i: int) -> list[str]:
        return [*argv[:-1], str(self._log(i))]

    def version(self) -> str:
        return engine_version().removeprefix("dnscost-engine").strip()

    def counters(self) -> Counters:
        return Counters()
