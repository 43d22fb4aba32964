"""docs/gate.md against its kept runs (docs/gate/): the two gates' output is what `dnscost
compare` prints again from them, with the exit codes the page says, and the stolen-time table
is what the runs' trials give (the kernel's steal time, as the meter recorded it)."""

from __future__ import annotations

import re
import statistics
from pathlib import Path

import pytest
from dnscost.analysis.load import load_run
from dnscost.cli import main

GATE = Path(__file__).parents[2] / "docs" / "gate"
PAGE = GATE.parent / "gate.md"
DEFAULTS = [
    "cpu_us_per_query>+10%",
    "cpu_us_per_handshake>+10%",
    "memory_bytes_per_connection>+10%",
    "resumed_share<-10%",
]
BINS = ((0.0, 0.10, "below 10 %"), (0.10, 0.25, "10 to 25 %"), (0.25, 1.01, "25 % or more"))
ONE_BINARY = ("equal/base", "equal/head", "no-tickets/base")


def _gate(name: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """``dnscost compare`` of a gate's two kept runs with the default gates: exit code, stderr."""
    args = [a for g in DEFAULTS for a in ("--fail-on", g)]
    capsys.readouterr()
    rc = main(["compare", str(GATE / name / "base"), str(GATE / name / "head"), *args])
    return rc, capsys.readouterr().err.strip()


def test_the_scripts_defaults_are_the_pages() -> None:
    script = (GATE.parents[1] / "scripts" / "gate").read_text()
    assert re.findall(r"--fail-on '([^']+)'", script.split("gates=(", 2)[2]) == DEFAULTS


@pytest.mark.parametrize(("name", "code"), [("equal", 0), ("no-tickets", 1)])
def test_each_gate_prints_what_the_page_shows(name: str, code: int, capsys: pytest.CaptureFixture[str]) -> None:
    rc, err = _gate(name, capsys)
    assert rc == code
    assert f"```text\n{err}\n```" in PAGE.read_text()
    if name == "no-tickets":  # the regression made: no ticket, so nothing resumed
        assert "resumed_share [headline] knot-resolver dot 1q-resumed: 1 -> 0" in err


def steal_table() -> list[str]:
    """The page's table: every load trial of the runs of one binary, its CPU per query and
    answered qps over its cell's median, by the share of the target's core stolen."""
    cells: dict[str, list[tuple[float, float, float]]] = {}
    for run in ONE_BINARY:
        _, trials = load_run(GATE / run)
        for t in trials:
            s = t.get("summary") or {}
            if t.get("kind") != "load" or s.get("target_cpu_us_per_query") is None:
                continue
            cell = re.sub(r"@[^-]+(-[^-]+)?-(udp|tcp|dot|doh)", r"-\2", str(t["id"]).rsplit("-r", 1)[0])
            stolen = s["validity"]["target_stolen_share"]
            cells.setdefault(cell, []).append((stolen, s["target_cpu_us_per_query"], s["answered_qps"]))
    ratios: dict[str, list[tuple[float, float]]] = {label: [] for *_, label in BINS}
    for trials in cells.values():
        cpu, qps = statistics.median(x[1] for x in trials), statistics.median(x[2] for x in trials)
        for stolen, c, q in trials:
            label = next(label for low, high, label in BINS if low <= stolen < high)
            ratios[label].append((c / cpu, q / qps))

    def spread(values: list[float]) -> str:
        return f"{statistics.median(values):.2f} [{min(values):.2f}-{max(values):.2f}]"

    return [
        f"| {label} | {len(v)} | {spread([c for c, _ in v])} | {spread([q for _, q in v])} |"
        for label, v in ratios.items()
    ]


def test_the_stolen_time_table_is_what_the_runs_give() -> None:
    rows = steal_table()
    assert "\n".join(rows) in PAGE.read_text()
    # What the page says of it: the more stolen, the dearer and the slower.
    medians = [[float(x.split()[0]) for x in row.split("|")[3:5]] for row in rows]
    assert medians[0][0] < medians[1][0] < medians[2][0] and medians[0][1] > medians[1][1] > medians[2][1]


def test_the_first_equal_gates_udp_was_stolen() -> None:
    """The page's account of the equal gate's base: five UDP trials with 42.5 to 50.6 % of the
    target's core stolen, slower and dearer than every UDP trial of the same binary as equal."""
    udp = {}
    for side in ("base", "head"):
        _, trials = load_run(GATE / "equal" / side)
        udp[side] = [t["summary"] for t in trials if t["transport"] == "udp"]
    stolen = [s for s in udp["base"] if s["validity"]["target_stolen_share"] >= 0.25]
    assert len(stolen) == 5 and all("cores-stolen" in s["validity"]["flags"] for s in stolen)
    shares = sorted(s["validity"]["target_stolen_share"] for s in stolen)
    assert (f"{shares[0]:.1%}", f"{shares[-1]:.1%}") == ("42.5%", "50.6%")
    qps = sorted(s["answered_qps"] for s in stolen)
    cpu = sorted(s["target_cpu_us_per_query"] for s in stolen)
    head_qps = sorted(s["answered_qps"] for s in udp["head"])
    head_cpu = sorted(s["target_cpu_us_per_query"] for s in udp["head"])
    text = " ".join(PAGE.read_text().split())
    assert f"answering {qps[0]:,.0f} to {qps[-1]:,.0f} qps".replace(",", " ") in text
    assert f"answered {head_qps[0]:,.0f} to {head_qps[-1]:,.0f}".replace(",", " ") in text
    assert f"at {cpu[0]:.2f} to {cpu[-1]:.2f} CPU-µs per query against {head_cpu[0]:.2f} to {head_cpu[-1]:.2f}" in text
    assert qps[-1] < head_qps[0] and cpu[0] > head_cpu[-1]


def test_each_builds_run_took_what_the_page_says() -> None:
    import json

    seconds = [
        (doc["finished_unix_ms"] - doc["created_unix_ms"]) / 1000
        for doc in (json.loads(p.read_text()) for p in sorted(GATE.glob("*/*/run.json")))
    ]
    assert len(seconds) == 4
    text = " ".join(PAGE.read_text().split())
    assert f"Each build's run took {min(seconds):.0f} to {max(seconds):.0f} s here" in text
    assert max(seconds) < 120 and "under 2 minutes per build here" in text
