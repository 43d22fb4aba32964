"""The docs check: numbers and verdicts that sentences of the docs state, recomputed from the
stored tables (``docs/study-run/tables``) or from the figures beside them, so that a sentence and
its table cannot drift apart. Each test fails when the sentence says something the data does
not. Sentences are matched with their line breaks folded into spaces."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from dnscost.report.docpage import render_page

ROOT = Path(__file__).parents[2]
DASH = "\u2013"


def _f(value: object) -> float:
    assert isinstance(value, int | float), value
    return float(value)


def _text(name: str) -> str:
    return re.sub(r"\s+", " ", (ROOT / "docs" / name).read_text(encoding="utf-8"))


def _says(doc: str, sentence: str) -> None:
    assert sentence in _text(doc), f"docs/{doc} should say: {sentence!r}"


def test_the_study_page_is_what_its_run_gives() -> None:
    """docs/study.md is rendered from docs/study.md.j2 with the kept run's tables: every number
    read from them, every verdict it states required of them (``require``), so a sentence and its
    table cannot drift apart (render it again with ``python -m dnscost.report.docpage
    docs/study.md.j2 docs/study-run docs/study.md``)."""
    page = render_page(ROOT / "docs" / "study.md.j2", ROOT / "docs" / "study-run")
    assert page == (ROOT / "docs" / "study.md").read_text(encoding="utf-8")


def test_observe_dnss_cores_and_energy() -> None:
    """observe.md: the dnss cost per query, the cores 10 000 qps need and the kWh a day."""
    text = _text("observe.md")
    m = re.search(r"At (\d+) CPU-µs a query one core serves about ([\d ]+) such queries a second, so 10 000 qps "
                  r"takes ([\d.]+) cores and about ([\d.]+) kWh a day", text)  # fmt: skip
    assert m, "observe.md: the dnss sentence"
    us, per_core, cores, kwh = float(m[1]), float(m[2].replace(" ", "")), float(m[3]), float(m[4])
    assert per_core == pytest.approx(1e6 / us, abs=10)
    assert cores == pytest.approx(us * 10_000 / 1e6, abs=0.05)
    watts = 3.5 - 0.74  # the CPU-time model's busy minus idle watts per core (docs/metering.md)
    assert kwh == pytest.approx(cores * watts * 24 / 1000, abs=0.05)
    assert f"| dnss, 60 s | 10 000 | 167 | 1 000 | {us:.0f} [" in (ROOT / "docs" / "observe.md").read_text()


def test_every_resumed_handshake_dearer_than_full_is_marked() -> None:
    """A sample headline in the docs with a resumed handshake dearer than a full one carries the
    headline's (!) mark, as the CLI prints it."""
    checked = 0
    for doc in ("experiments.md", "study.md", "../README.md"):
        for line in (ROOT / "docs" / doc).read_text(encoding="utf-8").splitlines():
            if "CPU-µs per handshake, full / resumed" not in line:
                continue
            for m in re.finditer(r"(\w+) ([\d.]+)(?: \[[^\]]*\])? / ([\d.]+)(?: \[[^\]]*\])?( \(!\))?", line):
                checked += 1
                if float(m[3]) > float(m[2]):
                    assert m[4], f"{doc}: {m[1]} resumed {m[3]} > full {m[2]} without (!)"
    assert checked >= 2


def test_knot_rsa_open_phase_fixed() -> None:
    """The open-phase fix's figures, from its kept run (docs/findings/knot-rsa-open-phase)."""
    import gzip
    import json

    trial = ROOT / "docs" / "findings" / "knot-rsa-open-phase" / "trials" / "load-knot-resolver-dot"
    record = json.loads((trial / "trial.json").read_text())
    extended, s = record["warmup_extended"], record["summary"]
    lines = gzip.decompress((trial / "engine.jsonl.gz").read_bytes()).decode().splitlines()
    engine = json.loads(lines[-1])
    assert engine["total"]["connections"]["opened"] == record["engine_config"]["connections"] == 1000
    assert engine["total"]["connections"]["failed"] == {}  # no handshake given up
    kernel = s["meter"]["counters"]["tcp_passive_opens"]
    assert s["validity"]["valid"]
    _says(
        "findings/knot-rsa-open-phase.md",
        f"every connection open at {extended['first']['opened_ms'] / 1000:.2f} s, measured again with a "
        f"{extended['warmup_ms'] / 1000:.1f} s warm-up, and then {s['connections_established']} connections "
        f"established in the window by the engine's count and {kernel:.0f} accepted by the kernel's",
    )
    _says("findings/knot-rsa-open-phase.md", f"a valid trial at {s['target_cpu_us_per_query']:.1f} CPU-µs per query")


def test_knot_tcp_finding() -> None:
    """docs/findings/knot-tcp.md's tables, from its kept runs and perf stat files."""
    import json

    root = ROOT / "docs" / "findings" / "knot-tcp"
    text = _text("findings/knot-tcp.md")

    def cpu(name: str) -> float:
        (trial,) = (root / name / "trials").iterdir()
        s = json.loads((trial / "trial.json").read_text())["summary"]
        assert s["validity"]["valid"], name
        return _f(s["target_cpu_us_per_query"])

    for label, v in (("5.6.0 (bookworm)", ""), ("5.7.5 (trixie)", "-trixie"), ("6.5.0 (sid)", "-sid")):
        tcp = [cpu(f"cmp-{r}-knot-resolver{v}-tcp") for r in (1, 2)]
        dot = [cpu(f"cmp-{r}-knot-resolver{v}-dot") for r in (1, 2)]
        ratio = [t / d for t, d in zip(tcp, dot, strict=True)]
        row = " | ".join(", ".join(f"{x:.2f}" for x in xs) for xs in (tcp, dot, ratio))
        assert f"| {label} | {row} |" in text, (label, row)
        assert (min(ratio) > 1) == (v == ""), ratio  # only 5.6.0's TCP is dearer than its DoT

    def per_query(name: str) -> dict[str, float]:
        counts = {
            m.group(2): int(m.group(1).replace(",", ""))
            for m in re.finditer(r"^\s+([\d,]+)\s+(\S+)", (root / f"perf-stat-{name}.txt").read_text(), re.M)
        }
        seconds = float(re.findall(r"([\d.]+) seconds", (root / f"perf-stat-{name}.txt").read_text())[0])
        load = (root / f"perf-stat-{name}.load.txt").read_text()
        qps = float(re.search(r"([\d,]+) qps", load).group(1).replace(",", ""))  # type: ignore[union-attr]
        return {k: c / (qps * seconds) for k, c in counts.items()}

    stats = {
        "5.6.0 TCP": "knot-resolver-tcp",
        "5.6.0 DoT": "knot-resolver-dot",
        "5.7.5 TCP": "knot-resolver-trixie-tcp",
        "5.7.5 DoT": "knot-resolver-trixie-dot",
    }
    per = {}
    for label, name in stats.items():
        q = per[label] = per_query(name)
        ctl = q.get("syscalls:sys_enter_epoll_ctl", 0.0)
        writes = q.get("syscalls:sys_enter_write", 0.0) + q.get("syscalls:sys_enter_writev", 0.0)
        row = f"| {label} | {q['page-faults']:.2f} | {f'{ctl:.2f}' if ctl else '0'} | "
        row += f"{q['syscalls:sys_enter_read']:.2f} | {writes:.2f} |"
        assert row in text, row
    # docs/study.md's summary of the table, its counts rounded to words.
    words = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five"}
    tcp = per["5.6.0 TCP"]
    faults, ctl = round(tcp["page-faults"]), round(tcp["syscalls:sys_enter_epoll_ctl"])
    _says(
        "study.md",
        f"the kernel counts about {words[faults]} page faults and {words[ctl]} `epoll_ctl` per TCP query in 5.6.0, "
        "none on its DoT or on 5.7.5's TCP",
    )
    for label in ("5.6.0 DoT", "5.7.5 TCP"):
        q = per[label]
        assert round(q["page-faults"], 2) == 0 and not q.get("syscalls:sys_enter_epoll_ctl"), (label, q)


def doh3_stream_limit_rows() -> list[str]:
    """docs/findings/doh3-stream-limit.md's table, from its kept runs: per in-flight, answered
    qps (min, median, max of 3), answers counted by the engine and by CoreDNS's prometheus
    counters (summed), queries timed out, the median share of sent queries that waited for
    stream credit, the median p50 latency, and how many trials were valid."""
    import gzip
    import json
    from statistics import median

    root = ROOT / "docs" / "findings" / "doh3-stream-limit"
    rows = []
    for n in (500, 1000, 2000):
        qps, engine, target, timed_out, waited, p50, valid = [], 0, 0, 0, [], [], 0
        for r in (1, 2, 3):
            trial = root / f"if{n}-r{r}" / "trials" / "load-coredns-doh3"
            s = json.loads((trial / "trial.json").read_text())["summary"]
            last = gzip.decompress((trial / "engine.jsonl.gz").read_bytes()).decode().splitlines()[-1]
            q = json.loads(last)["measured"]["queries"]
            qps.append(_f(s["answered_qps"]))
            engine += s["validity"]["engine_answered"]
            target += s["validity"]["target_answered"]
            timed_out += q["timed_out"]
            waited.append(q.get("stream_waits", 0) / q["sent"])
            p50.append(s["latency_us"]["p50_us"] / 1000)
            valid += bool(s["validity"]["valid"])
        low, mid, high = sorted(qps)
        rows.append(
            f"| {n:,} | {mid:,.0f} ({low:,.0f} to {high:,.0f}) | {engine:,} | {target:,} | {timed_out} "
            f"| {100 * median(waited):.0f} % | {median(p50):.0f} | {valid} of 3 |"
        )
    return rows


def test_doh3_stream_limit_finding() -> None:
    """docs/findings/doh3-stream-limit.md: the table and that CoreDNS counted every answer."""
    text = (ROOT / "docs" / "findings" / "doh3-stream-limit.md").read_text(encoding="utf-8")
    for row in doh3_stream_limit_rows():
        assert row in text, row
        cells = row.split(" | ")
        assert cells[2] == cells[3] and cells[4] == "0", row  # engine = CoreDNS, none timed out
    # "the median latency grows with the queries outstanding ... the rate does not fall: its
    # median at 2 000 in flight lies within the range at 500"
    rows = [r.split(" | ") for r in doh3_stream_limit_rows()]
    p50 = [float(r[6]) for r in rows]
    assert p50 == sorted(p50), p50

    def qps(cell: str) -> tuple[float, ...]:
        return tuple(float(x.replace(",", "")) for x in re.findall(r"[\d,]+", cell))

    mid_2000 = qps(rows[2][1])[0]
    _, low_500, high_500 = qps(rows[0][1])
    assert low_500 <= mid_2000 <= high_500, (rows[0][1], rows[2][1])


def test_the_reference_first_burst_loss_is_the_kernels() -> None:
    """docs/results.md's loss row: closed-loop UDP references of 16 sockets x 64 queries lost
    the same few hundred queries of their first burst whatever the target, the engine's timed
    out queries equal to the kernel's ``RcvbufErrors`` in the bed's namespace (the meter's first
    to last sample), and none where dnsdist sets a larger receive buffer; the range is what the
    row states, recomputed from ``docs/versions-run``."""
    from dnscost.jsonl import read_records

    lost: dict[str, list[int]] = {}
    for trial in sorted((ROOT / "docs" / "versions-run" / "trials").glob("reference-*-udp-r*")):
        engine = read_records(trial / "engine.jsonl", strict=True)  # or its .gz, as kept
        fast = [r for r in read_records(trial / "meter.jsonl", strict=True) if r.get("type") == "fast"]
        timed_out = engine[-1]["total"]["queries"]["timed_out"]
        dropped = fast[-1]["udp"]["RcvbufErrors"] - fast[0]["udp"]["RcvbufErrors"]
        assert timed_out == dropped, trial.name  # every lost query was dropped by the kernel
        lost.setdefault(trial.name.removeprefix("reference-").rsplit("-udp-", 1)[0], []).append(timed_out)
    assert len(lost) >= 9 and all(len(v) >= 3 for v in lost.values()), lost
    larger_buffer = {"dnsdist@sid", "dnsdist@trixie"}
    assert all(v == [0] * len(v) for k, v in lost.items() if k in larger_buffer), lost
    burst = sorted(n for k, v in lost.items() if k not in larger_buffer for n in v)
    assert burst[0] > 0 and burst[-1] - burst[0] <= 0.01 * burst[-1], burst  # the same whatever the target
    _says("results.md", f"every closed-loop UDP reference of `docs/versions-run` lost {burst[0]}{DASH}{burst[-1]}")
    _says("results.md", f"to dnsdist 1.7.3: {max(lost['dnsdist'])} timed out")


def _thousands(n: float) -> str:
    return f"{n:,.0f}".replace(",", " ")


def test_the_scale_page_is_what_its_records_say() -> None:
    """docs/scale.md's table of the 100 000-connection trial, and its engine-memory table, each
    cell recomputed from the stored records (``docs/scale/many-connections.json``,
    ``docs/scale/engine-memory.txt``)."""
    trials = {t["transport"]: t for t in json.loads((ROOT / "docs/scale/many-connections.json").read_text())["trials"]}
    dot, doh = trials["dot"], trials["doh"]
    kib, mib, gib = 1024, 2**20, 2**30

    def row(label: str, f: Callable[[dict[str, Any]], str]) -> None:
        cells = " | ".join(f(t) for t in (dot, doh))
        _says("scale.md", f"| {label} | {cells} |")

    row("connections held at once (the engines' count)", lambda t: _thousands(t["held_engines"]))
    row(
        "connections established / failed",
        lambda t: f"{_thousands(t['established'])} / {sum(t['connections_failed'].values())}",
    )
    row(
        "queries answered / failed / timed out",
        lambda t: f"{_thousands(t['answered'])} / {t['failed']} / {t['timed_out']}",
    )
    row("the 8 engines' resident sets (sum)", lambda t: f"{sum(t['engine_rss_bytes']) / mib:.0f} MiB")
    row("the 8 servers' resident sets (sum)", lambda t: f"{_thousands(sum(t['server_rss_bytes']) / mib)} MiB")
    row(
        "the kernel's slab, above the baseline",
        lambda t: f"{(t['kernel_held']['slab_bytes'] - t['kernel_before']['slab_bytes']) / gib:.2f} GiB",
    )
    row("per connection: engine (above its start)", lambda t: f"{t['engine_bytes_per_connection'] / kib:.2f} KiB")
    row("per connection: `serve` (above its start)", lambda t: f"{t['server_bytes_per_connection'] / kib:.1f} KiB")
    row(
        "per connection: kernel, both ends (slab and TCP buffer pages above the baseline)",
        lambda t: f"{t['kernel_bytes_per_connection'] / kib:.1f} KiB",
    )
    for t in (dot, doh):
        assert t["held_engines"] == t["connections_asked"] == t["established"]
        # The kernel's own count: two sockets per connection, both ends on this machine.
        assert abs(t["kernel_tcp_inuse"] - 2 * t["held_engines"]) <= 100
    text = (ROOT / "docs/scale/engine-memory.txt").read_text()
    for transport in ("tcp", "dot", "doh"):
        slopes = sorted(float(m) for m in re.findall(rf"^# {transport} rep \d+: .*slope ([\d.]+) KiB/conn", text, re.M))
        _says("scale.md", f"| {transport} | {slopes[0]:.2f} / {slopes[1]:.2f} / {slopes[2]:.2f} |")
