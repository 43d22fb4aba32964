"""The corpus' web server, run as a child process in the lab's server namespace
(``python -m dnscost.clientside.webserver``): plain HTTP/1.1 with keep-alive on one address, for
any Host.

- ``GET /l/<load>.html``: a page rendered for one load (a file in ``--pages``);
- ``GET /r/<load>/<index>.<ext>?b=<octets>[&x=<inserted>]``: a resource made from its URL
  (:func:`~dnscost.clientside.corpus.resource_body`), so that any size on any host needs no file;
- ``POST /beacon``: a page's timings, appended as one JSON line to ``--beacons`` (with the
  time it arrived and the Host it came to) and flushed at once.

Every response carries ``Cache-Control: no-store`` and ``Timing-Allow-Origin: *`` (without it
a cross-origin resource's Resource Timing entry has no DNS or connect times). Plain HTTP, not
HTTPS: the lab's one server address has its port 443 taken by the DoH resolver, and real
sites' HTTP/2 over TLS would put a TLS handshake on each host's first connection that this
corpus does not have; the DNS share of a load is therefore larger here than on the web.

When it listens it writes ``{"type": "listening", ...}`` on standard output."""

from __future__ import annotations

import argparse
import json
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs

from dnscost.clientside.corpus import BEACON_PATH, CONTENT_TYPES, resource_body

__all__ = ["main", "serve"]

_PAGE = re.compile(r"/l/(\d+)\.html$")
_RESOURCE = re.compile(r"/r/\d+/\d+\.(\w+)$")
MAX_BEACON = 16 << 20


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256

    def __init__(self, address: tuple[str, int], pages: Path, beacons: Path) -> None:
        super().__init__(address, _Handler)
        self.pages = pages
        self.beacons = beacons.open("a", buffering=1)
        self.lock = threading.Lock()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "dnscost-corpus"
    server: _Server

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _send(self, status: int, content_type: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("Timing-Allow-Origin", "*")
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        path, _, query = self.path.partition("?")
        page = _PAGE.match(path)
        if page:
            try:
                body = (self.server.pages / f"{page.group(1)}.html").read_bytes()
            except OSError:
                self._send(404, "text/plain", b"no such page\n")
                return
            self._send(200, "text/html; charset=utf-8", body)
            return
        resource = _RESOURCE.match(path)
        if resource and resource.group(1) in CONTENT_TYPES:
            q = parse_qs(query)
            try:
                size = int(q.get("b", ["0"])[0])
                injected = json.loads(q["x"][0]) if "x" in q else []
            except (ValueError, json.JSONDecodeError):
                self._send(400, "text/plain", b"bad resource\n")
                return
            ext = resource.group(1)
            self._send(200, CONTENT_TYPES[ext], resource_body(ext, min(size, 64 << 20), injected))
            return
        self._send(404, "text/plain", b"not found\n")

    def do_POST(self) -> None:
        if self.path != BEACON_PATH:
            self._send(404, "text/plain", b"not found\n")
            return
        length = int(self.headers.get("Content-Length") or 0)
        if not 0 < length <= MAX_BEACON:
            self._send(400, "text/plain", b"bad beacon\n")
            return
        data = self.rfile.read(length)
        try:
            beacon = json.loads(data)
        except json.JSONDecodeError:
            self._send(400, "text/plain", b"bad beacon\n")
            return
        line = json.dumps({"received_unix_us": time.time_ns() // 1000, "host": self.headers.get("Host"),
                           "beacon": beacon}, separators=(",", ":"))  # fmt: skip
        with self.server.lock:
            self.server.beacons.write(line + "\n")
        self._send(200, "application/json", b"{}")


def serve(address: str, port: int, pages: Path, beacons: Path) -> None:
    """Serves until killed."""
    server = _Server((address, port), pages, beacons)
    print(json.dumps({"type": "listening", "address": f"{address}:{server.server_address[1]}"}), flush=True)
    server.serve_forever()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dnscost.clientside.webserver", description=__doc__.splitlines()[0])
    parser.add_argument("--address", required=True)
    parser.add_argument("--port", type=int, default=80)
    parser.add_argument("--pages", type=Path, required=True, help="directory of <load>.html files")
    parser.add_argument("--beacons", type=Path, required=True, help="JSON lines file the beacons are appended to")
    args = parser.parse_args(argv)
    serve(args.address, args.port, args.pages, args.beacons)
    return 0


if __name__ == "__main__":
    sys.exit(main())
