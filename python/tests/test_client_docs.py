"""docs/client.md and docs/pageload.md against the kept client run (docs/client-run): each
table of theirs, and each list of findings with a number in it, is computed again from the
run's records (:mod:`dnscost.clientside.tables`) and must stand in the page verbatim; the kept run
is what ``dnscost keep`` writes of it, byte for byte; ``dnscost client report`` redraws its
report from it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from dnscost.clientside.pageload_analysis import summarise_presets
from dnscost.clientside.report import write_report
from dnscost.clientside.tables import BLOCKS, main, render_blocks
from dnscost.commands.keep import keep_run
from dnscost.report.render import fmt

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "docs" / "client-run"


@pytest.mark.parametrize("page", ["client.md", "pageload.md"])
def test_the_docs_computed_blocks_are_the_kept_runs(page: str) -> None:
    path = ROOT / "docs" / page
    text = path.read_text()
    names = [m for m in BLOCKS if f"<!-- computed: {m} -->" in text]
    assert names, f"docs/{page} has no computed block"
    assert render_blocks(text, RUN) == text, (
        f"docs/{page}: a computed block is not what docs/client-run gives "
        f"(python -m dnscost.clientside.tables docs/client-run --write docs/{page})"
    )


def test_every_block_is_in_a_page() -> None:
    text = "".join((ROOT / "docs" / page).read_text() for page in ("client.md", "pageload.md"))
    assert [m for m in BLOCKS if f"<!-- computed: {m} -->" not in text] == []


def test_a_changed_number_is_caught_and_bad_pages_are_refused(tmp_path: Path) -> None:
    page = tmp_path / "client.md"
    text = (ROOT / "docs" / "client.md").read_text()
    block = text.index("<!-- computed: latency-check -->")
    changed = text[:block] + text[block:].replace(" ok |", " FAIL |", 1)
    page.write_text(changed)
    assert main([str(RUN), "--check", str(page)]) == 1
    assert main([str(RUN), "--write", str(page)]) == 0 and page.read_text() == text
    page.write_text("no block here\n")
    assert main([str(RUN), "--check", str(page)]) == 2
    page.write_text("<!-- computed: nonsense -->\nx\n<!-- end: nonsense -->\n")
    assert main([str(RUN), "--check", str(page)]) == 2


def test_keeping_the_kept_run_again_writes_the_same_bytes(tmp_path: Path) -> None:
    again = tmp_path / "again"
    keep_run(RUN, again)
    kept = sorted(p.relative_to(RUN) for p in RUN.rglob("*") if p.is_file() and p.name != "kept.json")
    assert kept == sorted(p.relative_to(again) for p in again.rglob("*") if p.is_file() and p.name != "kept.json")
    assert any(p.suffix == ".gz" for p in kept)
    for rel in kept:
        assert (RUN / rel).read_bytes() == (again / rel).read_bytes(), rel


def test_the_report_is_redrawn_from_the_kept_run(tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(RUN, run)
    html = write_report(run).read_text()
    for heading in ("The latency check", "Response times through unbound", "Response times through knot-resolver",
                    "Page loads per preset"):  # fmt: skip
        assert heading in html, heading
    # Every page-load cell's medians are the summary's, none missing (they once read a key the
    # summary does not have, and printed a dash in every row).
    summary = summarise_presets(run / "pageload")
    for preset, per in summary["presets"].items():
        for transport, e in per.items():
            load, dns = e["page_load"]["median_ms"], e["dns"]["median_ms"]
            assert load is not None and dns is not None, (preset, transport)
            cells = f'<td class="text">{transport}</td><td class="num">{fmt(load)}</td><td class="num">{fmt(dns)}</td>'
            assert cells in html.replace("\n", ""), (preset, transport, cells)


def _times() -> dict[str, list[dict[str, object]]]:
    from dnscost.clientside.times import rows

    return {d.name: rows(json.loads((d / "times.json").read_text())) for d in sorted((RUN / "times").iterdir())}


def test_the_response_time_prose_holds() -> None:
    """docs/client.md's words on the response times, against the kept run: cold runs cost the
    client's round trip plus the upstream's 20 ms, warm runs the client's alone (within 10 %
    and 3 ms), wherever the resolver answers at once; unbound's tcp and DoT lag its DoH and UDP
    over the longest round trip, knot-resolver's do not."""
    doc = json.loads((RUN / "client.json").read_text())
    rtt = {name: float(p["rtt_ms"]) for name, p in doc["presets"].items()}
    upstream = rtt["upstream"]
    per_target = _times()
    longest = max((p for p in rtt if p != "upstream"), key=rtt.__getitem__)
    for target, rows in per_target.items():
        for r in rows:
            lagging = target == "unbound" and r["transport"] in ("tcp", "dot")
            if lagging or r["median_ms"] is None:
                continue
            want = rtt[str(r["preset"])] + (upstream if r["cache"] == "cold" else 0.0)
            assert abs(float(r["median_ms"]) - want) <= 0.1 * want + 3, (
                target,
                r["preset"],
                r["cache"],
                r["transport"],
            )
    for target, slower in (("unbound", True), ("knot-resolver", False)):
        warm = {r["transport"]: float(r["median_ms"]) for r in per_target[target]
                if r["preset"] == longest and r["cache"] == "warm"}  # fmt: skip
        fast = max(warm["udp"], warm["doh"])
        assert (min(warm["tcp"], warm["dot"]) > 1.3 * fast) is slower, (target, warm)


def test_the_page_load_prose_holds() -> None:
    """docs/pageload.md's "What agrees" sentences, against the kept run's differences."""
    presets = summarise_presets(RUN / "pageload")["presets"]

    def told(preset: str, transport: str) -> str:
        d = presets[preset][transport]["difference"]
        assert d is not None and d["interval_ms"], (preset, transport)
        lo, hi = d["interval_ms"]
        return "dearer" if lo > 0 else "cheaper" if hi < 0 else "apart-not"

    def median(preset: str, transport: str) -> float:
        d = presets[preset][transport]["difference"]
        assert d is not None and d["median_ms"] is not None
        return float(d["median_ms"])

    # DoH: not told apart on native, dearer on lte (by less than their +66), on 3g a dearer
    # median whose interval reaches 0.
    assert told("native", "doh") == "apart-not" and told("lte", "doh") == "dearer"
    assert 0 < median("lte", "doh") < 66
    assert told("3g", "doh") == "apart-not" and median("3g", "doh") > 0
    # The lossy preset: no transport told apart from Do53.
    assert {told("lossy-lte", t) for t in presets["lossy-lte"] if t != "do53"} == {"apart-not"}
    # DoT through Stubby dearer on the long round trips; Nagle off: not told apart on lte,
    # far less on 3g.
    assert told("lte", "dot") == told("3g", "dot") == "dearer"
    assert told("lte", "dot-nodelay") == "apart-not"
    assert median("3g", "dot-nodelay") < median("3g", "dot") / 4
