"""Page loads over an emulated link (root): two pages loaded by Chromium through Do53 and
through Stubby (DoT), one round, in a lab joined by a 20 ms link (``run_pageload_presets``).
Every load completes; the DoT session's names reach the resolver over the DoT front only, on
one connection that Stubby reused for every load, with queries in flight together; the
outputs are written and the lab is gone. Then Stubby's idle close: a connection with no query
for 10 s is closed by Stubby itself."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import need
from dnscost.certs import make_tls
from dnscost.clientside.corpus import CorpusParams
from dnscost.clientside.pageload import run_pageload_presets
from dnscost.clientside.pageload_analysis import read_loads, summarise_presets
from dnscost.clientside.pageload_plan import PageloadSettings
from dnscost.clientside.pageload_run import _start_dot_relay
from dnscost.engine import Responder
from dnscost.lab.clients import Schedule, Upstream
from dnscost.lab.lab import Lab
from dnscost.lab.presets import Preset
from dnscost.lab.stubs import StubbyDot
from dnscost.network import ip

LINK = Preset("rtt-20", "20 ms RTT", "a test's link", rtt_ms=20)


def _mine() -> list[str]:
    prefix = f"dnscost-lab-{os.getpid()}-"
    netns = [line.split()[0] for line in ip("netns", "list").splitlines() if line.split()]
    etc = [d.name for d in Path("/etc/netns").iterdir()] if Path("/etc/netns").is_dir() else []
    return [n for n in netns + etc if n.startswith(prefix)]


@pytest.mark.root
def test_page_loads_over_an_emulated_link_through_stubby(root: None, tmp_path: Path) -> None:
    need(shutil.which("chromium") is not None, "chromium missing (scripts/setup installs it)")
    need(shutil.which("stubby") is not None, "stubby missing (scripts/setup installs it)")
    settings = PageloadSettings(
        pages=2, rounds=1, transports=("do53", "dot"), seed=3, page_timeout_s=20,
        corpus=replace(CorpusParams(), size_scale=0.25),
    )  # fmt: skip
    out = tmp_path / "pl"
    meta = json.loads(run_pageload_presets(out, [LINK], settings).read_text())
    assert meta["status"] == "done" and meta["presets"]["rtt-20"]["status"] == "done", meta
    link = meta["presets"]["rtt-20"]["link"]
    assert link["a_to_b"]["delay_min_us"] >= 10_000 and link["b_to_a"]["delay_min_us"] >= 10_000  # it was shaped

    run = out / "rtt-20"
    records = read_loads(run / "loads.jsonl")
    assert len(records) == 2 * (1 + 2) and all(r["preset"] == "rtt-20" for r in records)
    bad = [(r["transport"], r["load"], r["failure"]) for r in records if not r["ok"]]
    assert not bad, bad

    doc = json.loads((run / "pageload.json").read_text())
    check = {c["transport"]: c for c in doc["dns_check"]}
    assert check["do53"]["queries"] and set(check["do53"]["queries"]) == {"udp"}, check
    # DoT: every name asked, only through the front (tcp to the resolver), on one connection
    # that carried every load's queries (reused), several of them in flight together.
    dot = check["dot"]
    assert dot["names_asked"] == dot["names_expected"] > 0 and set(dot["queries"]) == {"tcp"}, dot
    (conn,) = dot["dot_connections"]
    assert conn["session_queries"] == dot["queries"]["tcp"] and conn["front_connection"] is not None, conn
    assert conn["max_burst"] >= 2, conn
    loads = {r["load"] for r in records if r["transport"] == "dot"}
    assert len(loads) == 3  # the warm-up and both pages, all on that connection

    summary = summarise_presets(out)
    assert summary["presets"]["rtt-20"]["dot"]["difference"]["pairs"] == 2  # type: ignore[index]
    assert (out / "summary.json").exists() and (out / "table.md").exists()
    assert [Path(f).name for f in summary["figures"]] == ["pageload-cdf.svg", "pageload-cdf.png"]
    assert not _mine()


@pytest.mark.root
def test_stubby_reuses_its_connection_and_closes_it_after_ten_seconds_idle(root: None, tmp_path: Path) -> None:
    need(shutil.which("stubby") is not None, "stubby missing (scripts/setup installs it)")
    need(shutil.which("kdig") is not None, "kdig missing (knot-dnsutils)")
    lab = Lab.create(LINK, workdir=tmp_path / "lab")
    children = []
    try:
        a = lab.info.server_address
        tls = make_tls(tmp_path / "tls", addresses=[a])
        log, queries = tmp_path / "connections.jsonl", tmp_path / "queries.jsonl"
        responder = Responder(
            tmp_path, [f"tcp://{a}:53"], extra=["--outside", "nxdomain", "--connections-log", str(log),
            "--queries-log", str(queries)], exec_prefix=lab.exec_prefix("server"),
        )  # fmt: skip
        children.append(responder.child)
        children.append(_start_dot_relay(lab, tmp_path, a, tls.cert, tls.key))
        children.append(StubbyDot(10_000).start(lab, tmp_path, Upstream(ca=tls.ca), Schedule(1.0, 1.0, 1)))
        for name in ("q1.test", "q2.test"):
            r = subprocess.run([*lab.exec_prefix("client"), "kdig", "+timeout=3", "@127.0.0.1", name],
                               capture_output=True, text=True, check=False)  # fmt: skip
            assert "->>HEADER<<-" in r.stdout, r.stdout + r.stderr
            time.sleep(1)
        front = tmp_path / "dot-connections.jsonl"
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not (front.exists() and front.read_text().strip()):
            time.sleep(0.2)
        records = [json.loads(line) for line in front.read_text().splitlines()] if front.exists() else []
        # One connection for both queries, closed by Stubby while it still ran, 10 s after the last.
        assert len(records) == 1 and records[0]["queries"] == 2 and records[0]["closed_by"] == "client", records
        assert children[-1].alive()
    finally:
        for c in reversed(children):
            c.stop()
        lab.remove()
    (conn,) = [json.loads(line) for line in log.read_text().splitlines()]
    assert conn["transport"] == "tcp" and conn["queries"] == 2 and conn["closed_by"] == "client", conn
    last = max(json.loads(line)["t_us"] for line in queries.read_text().splitlines())
    assert conn["closed_us"] - last >= 10_000_000, (conn, last)  # not before its idle timeout
    assert not _mine()
