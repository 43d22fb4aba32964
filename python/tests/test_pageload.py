"""A short page-load run with a real browser: three pages of the synthetic corpus, loaded by
Chromium (and by Firefox, the same code path) through Do53 and through the browser's own DoH,
one round, in a plain lab. Every load
completes with its timings, each session's names reach the resolver over its transport only
(the resolver's own query log), and the lab is gone afterwards."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import need
from dnscost.clientside.corpus import CorpusParams, host_name
from dnscost.clientside.pageload import run_in_new_lab
from dnscost.clientside.pageload_analysis import compare, read_loads
from dnscost.clientside.pageload_plan import PageloadSettings
from dnscost.network import ip


def _namespaces() -> set[str]:
    return {line.split()[0] for line in ip("netns", "list").splitlines() if line.split()}


@pytest.mark.root
@pytest.mark.parametrize("browser", ["chromium", "firefox"])
def test_a_short_page_load_run_completes_and_leaves_nothing(root: None, tmp_path: Path, browser: str) -> None:
    program = "chromium" if browser == "chromium" else "firefox-esr"
    need(shutil.which(program) is not None, f"{program} missing (scripts/setup installs it)")
    need(shutil.which("certutil") is not None, "certutil missing (libnss3-tools)")
    settings = PageloadSettings(
        pages=3, rounds=1, transports=("do53", "doh"), seed=2, page_timeout_s=20, browser=browser,
        preset="plain", corpus=replace(CorpusParams(), size_scale=0.25),
    )  # fmt: skip
    out = tmp_path / "run"
    doc = json.loads(run_in_new_lab(out, settings).read_text())
    assert doc["status"] == "done" and doc["settings"]["preset"] == "plain" and doc["browser_version"]

    records = read_loads(out / "loads.jsonl")
    assert len(records) == doc["loads"] == 2 * (1 + 3), records
    bad = [(r["transport"], r["load"], r["failure"]) for r in records if not r["ok"]]
    assert not bad, bad
    for r in records:
        assert r["page_load_us"] > 0 and r["dom_content_loaded_us"] > 0, r
        assert r["resources_fetched"] == r["resources_expected"] > 0
        # A lookup time for every hostname of the load, the page's own one included.
        names = {host_name(r["page"], r["load"], h) for h in range(r["hosts_expected"])}
        assert set(r["lookups_us"]) == names and r["dns_us"] is not None, r["lookups_us"]
        assert min(r["lookups_us"].values()) >= 0 and max(r["lookups_us"].values()) > 0, r["lookups_us"]
    assert [r["warmup"] for r in records] == [True, False, False, False] * 2

    # The DNS path: each session's names asked once each, over its own transport only.
    check = {c["transport"]: c for c in doc["dns_check"]}
    assert check["doh"]["queries"] and set(check["doh"]["queries"]) == {"doh"}, check
    assert check["do53"]["queries"] and set(check["do53"]["queries"]) == {"udp"}, check
    for c in check.values():
        assert c["names_asked"] == c["names_expected"], c
    queries = [json.loads(line) for line in (out / "queries.jsonl").read_text().splitlines()]
    doh_names = {host_name(r["page"], r["load"], 0) + "." for r in records if r["transport"] == "doh"}
    assert {q["transport"] for q in queries if q["qname"] in doh_names} == {"doh"}

    # The analysis pairs the three pages.
    summary = compare(records)["presets"]["plain"]
    assert summary["doh"]["difference"]["pairs"] == 3 and summary["do53"]["page_load"]["n"] == 3

    # The lab is gone: no namespace or /etc/netns directory of this process is left.
    mine = f"dnscost-lab-{os.getpid()}-"
    assert not [ns for ns in _namespaces() if ns.startswith(mine)]
    assert not [
        d for d in (Path("/etc/netns").iterdir() if Path("/etc/netns").is_dir() else []) if d.name.startswith(mine)
    ]
