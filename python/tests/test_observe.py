"""The observation lab: a real stub (glibc's resolver, through the client namespace's own
resolv.conf) asks the responder in the server namespace across the veth pair, the server's
queries log sees it, the client cannot reach anything else, and the lab leaves nothing behind,
also when the process that made it was killed."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from dnscost.engine import engine_path
from dnscost.network import _ip
from dnscost.observe.lab import ETC_NETNS, Lab, remove_leftovers


def _namespaces() -> set[str]:
    return {line.split()[0] for line in _ip("netns", "list").splitlines() if line.split()}


def test_a_stub_in_the_client_namespace_reaches_only_the_lab_server(root: None, tmp_path: Path) -> None:
    lab = Lab.create()
    i = lab.info
    try:
        assert {i.client_netns, i.server_netns} <= _namespaces()
        queries = tmp_path / "queries.jsonl"
        server = subprocess.Popen(
            [*lab.exec_prefix("server"), str(engine_path()), "serve", "--listen", f"udp://{i.server_address}:53",
             "--synthetic", "1000", "--outside", "nxdomain", "--queries-log", str(queries)],
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            assert server.stdout is not None
            assert json.loads(server.stdout.readline())["type"] == "listening"
            lab.write_etc("client", "resolv.conf", f"nameserver {i.server_address}\n")
            got = subprocess.run(
                [*lab.exec_prefix("client"), "getent", "ahostsv4", "q042.test"],
                capture_output=True, text=True, timeout=20, check=True,
            )  # fmt: skip
            assert got.stdout.split()[0] == "198.18.0.42", got.stdout
            # Nothing outside the pair is reachable from the client: no default route.
            reach = subprocess.run(
                [*lab.exec_prefix("client"), sys.executable, "-c",
                 "import socket; socket.create_connection(('192.0.2.1', 80), timeout=2)"],
                capture_output=True, text=True, timeout=20, check=False,
            )  # fmt: skip
            assert reach.returncode != 0 and "unreachable" in reach.stderr, reach.stderr
        finally:
            server.terminate()
            server.wait(timeout=20)
        logged = [json.loads(line) for line in queries.read_text().splitlines()]
        asked = {(q["qname"], q["qtype"], q["rcode"], q["peer_address"].split(":")[0]) for q in logged}
        assert ("q042.test.", "A", "noerror", i.client_address) in asked, logged
        assert all(q["transport"] == "udp" and q["connection"] is None for q in logged)
    finally:
        lab.remove()
    assert not {i.client_netns, i.server_netns} & _namespaces()
    assert not (ETC_NETNS / i.client_netns).exists()


def test_leftovers_of_a_killed_process_are_removed(root: None) -> None:
    """A lab whose maker was killed (its PID gone) is removed by the next lab's creation."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    time.sleep(0.1)
    name = f"dnscost-lab-{dead.pid}-1-c"
    _ip("netns", "add", name)
    (ETC_NETNS / name).mkdir(parents=True, exist_ok=True)
    (ETC_NETNS / name / "resolv.conf").write_text("nameserver 198.18.0.1\n")
    assert name in remove_leftovers()
    assert name not in _namespaces() and not (ETC_NETNS / name).exists()
