"""The page loads' DoT front: TLS on the lab's port 853, each connection relayed frame by frame
over a TCP connection of its own to the responder (``tcp`` on port 53), each answer written to
the client in a TLS record of its own.

Why it exists: Stubby's getdns (1.6.0, and 1.7.3 as published) reads one DNS message per
read event on a TLS connection (``upstream_read_cb`` → ``stub_tls_read``, one ``SSL_read``,
no ``SSL_pending``). The responder writes every answer that is ready at once in one write, so
several pipelined answers share one TLS record; getdns decrypts the record, takes the first
answer and leaves the others in OpenSSL's buffer until the next packet arrives on the
connection (measured: of four queries sent together over a 70 ms link, one answered at once,
the others only when the client's retries brought packets 3 s later). Public resolvers differ
(systemd-resolved had the same bug with Cloudflare's DoT, systemd PR 22132); one record per
answer is what a resolver that answers each query as it completes does. The responder has no
option for it, so this front gives it.

The responder still answers and logs every query (its queries log: transport ``tcp``, the
connection id of the front's connection for that client); one front connection per client
connection, opened when the client's handshake is done and closed when the client closes, so
the responder's connections log shows each DoT connection's life (from its handshake on) and
this module's log (``--log``) holds the client's side: peer, times, queries, who closed, and
the time each answer spent in the front.

Run as ``python -m dnscost.clientside.dotrelay --listen ADDR:PORT --cert FILE --key FILE
--backend ADDR:PORT --log FILE``; it prints one ``{"type":"listening",...}`` line, then runs
until SIGTERM or SIGINT."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import ssl
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

__all__ = ["main"]


def _now_us(start_ns: int) -> int:
    return (time.monotonic_ns() - start_ns) // 1000


@dataclass
class _Conn:
    id: int
    peer: str
    established_us: int
    backend: str = ""
    queries: int = 0
    answers: int = 0
    sent_at: dict[int, int] = field(default_factory=dict)
    """DNS ID → when its query was read (µs), until its answer is written."""
    residence_us: list[int] = field(default_factory=list)


class _Relay:
    def __init__(self, backend: tuple[str, int], log: IO[str]) -> None:
        self.backend = backend
        self.log = log
        self.start_ns = time.monotonic_ns()
        self.start_unix_us = time.time_ns() // 1000
        self.next_id = 0
        self.tasks: set[asyncio.Task[None]] = set()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self.tasks.add(task)
        peer = writer.get_extra_info("peername")
        conn = _Conn(self.next_id, f"{peer[0]}:{peer[1]}" if peer else "", _now_us(self.start_ns))
        self.next_id += 1
        closed_by, close = "client", "fin"
        try:
            b_reader, b_writer = await asyncio.open_connection(*self.backend)
        except OSError as e:
            self._write(conn, "relay", f"backend: {e}")
            writer.close()
            return
        local = b_writer.get_extra_info("sockname")
        conn.backend = f"{local[0]}:{local[1]}" if local else ""
        up = asyncio.ensure_future(self._up(conn, reader, b_writer))
        down = asyncio.ensure_future(self._down(conn, b_reader, writer))
        try:
            done, _ = await asyncio.wait({up, down}, return_when=asyncio.FIRST_COMPLETED)
            if down in done and up not in done:
                closed_by, close = "server", "backend"
            elif up in done and up.exception() is not None:
                close = f"error: {up.exception()}"
        except asyncio.CancelledError:
            closed_by, close = "server", "end"
        finally:
            for t in (up, down):
                t.cancel()
            for w in (b_writer, writer):
                w.close()
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(w.wait_closed(), 1)
            self._write(conn, closed_by, close)
            if task is not None:
                self.tasks.discard(task)

    async def _up(self, conn: _Conn, reader: asyncio.StreamReader, backend: asyncio.StreamWriter) -> None:
        """The client's queries to the backend, frame by frame, until the client ends."""
        while True:
            try:
                head = await reader.readexactly(2)
                body = await reader.readexactly(int.from_bytes(head, "big"))
            except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
                return
            if len(body) >= 2:
                conn.sent_at[int.from_bytes(body[:2], "big")] = _now_us(self.start_ns)
            conn.queries += 1
            backend.write(head + body)
            await backend.drain()

    async def _down(self, conn: _Conn, backend: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """The backend's answers to the client, each in a TLS record of its own."""
        while True:
            try:
                head = await backend.readexactly(2)
                body = await backend.readexactly(int.from_bytes(head, "big"))
            except (asyncio.IncompleteReadError, ConnectionError):
                return
            writer.write(head + body)  # one write, one TLS record
            conn.answers += 1
            if len(body) >= 2:
                sent = conn.sent_at.pop(int.from_bytes(body[:2], "big"), None)
                if sent is not None:
                    conn.residence_us.append(_now_us(self.start_ns) - sent)
            await writer.drain()

    def _write(self, conn: _Conn, closed_by: str, close: str) -> None:
        r = conn.residence_us
        doc: dict[str, object] = {
            "type": "connection",
            "id": conn.id,
            "peer_address": conn.peer,
            "backend_address": conn.backend,
            "established_us": conn.established_us,
            "closed_us": _now_us(self.start_ns),
            "queries": conn.queries,
            "answers": conn.answers,
            "closed_by": closed_by,
            "close": close,
            "relay_median_us": round(statistics.median(r)) if r else None,
            "relay_max_us": max(r) if r else None,
        }
        self.log.write(json.dumps(doc, separators=(",", ":")) + "\n")
        self.log.flush()


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected ADDR:PORT, not {text!r}")
    return host, int(port)


async def _serve(args: argparse.Namespace) -> None:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(args.cert, args.key)
    with args.log.open("a", buffering=1) as log:
        relay = _Relay(args.backend, log)
        host, port = args.listen
        server = await asyncio.start_server(relay.handle, host, port, ssl=context, ssl_handshake_timeout=10)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        ready = {"type": "listening", "address": f"{host}:{port}", "start_unix_us": relay.start_unix_us}
        print(json.dumps(ready), flush=True)
        await stop.wait()
        server.close()
        for t in list(relay.tasks):
            t.cancel()
        if relay.tasks:
            await asyncio.wait(relay.tasks, timeout=2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dnscost.clientside.dotrelay", description=__doc__.splitlines()[0])
    parser.add_argument("--listen", type=_address, required=True)
    parser.add_argument("--backend", type=_address, required=True)
    parser.add_argument("--cert", type=Path, required=True)
    parser.add_argument("--key", type=Path, required=True)
    parser.add_argument("--log", type=Path, required=True)
    args = parser.parse_args(argv)
    asyncio.run(_serve(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
