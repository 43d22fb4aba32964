"""The table of docs/metering.md ("Where the kernel's work lands") from runs of
bench/network/network.toml, one per --network set-up:

    .venv/bin/python bench/network/table.py RUN_DIR...

Per set-up, target and trial kind: the median over repetitions (and the range) of the target's
CPU per query (per full handshake for one query per connection), the generator's (the
engine's own CPU over its answered queries, or new connections), the softirq time of the
target's and the generator's cores per query (/proc/stat: all work on the core), and the
inter-processor interrupts that brought steered packets to the target's core, per query
(softnet_stat ``received_rps``)."""

from __future__ import annotations

import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

TARGET_CPU, GENERATOR_CPU = "0", "1"


def rows(run_dir: Path) -> list[dict[str, Any]]:
    run = json.loads((run_dir / "run.json").read_text())
    network = run["spec"]["network"]
    out = []
    for trial in sorted((run_dir / "trials").glob("*/trial.json")):
        r = json.loads(trial.read_text())
        if r.get("status") != "done":
            continue
        s = r["summary"]
        handshake = r["group"] == "handshake"
        unit = s["connections_established"] if handshake else s["queries_answered"]
        cores = s["meter"]["cores"]
        ipis = r.get("softnet", {}).get(TARGET_CPU, {}).get("received_rps", 0)
        out.append(
            {
                "network": network,
                "target": r["target"],
                "what": f"{r['transport']} {'handshake' if handshake else 'query'}",
                "target_us": s["target_cpu_us"] / unit,
                "generator_us": s["engine_cpu_us"] / unit,
                "target_softirq_us": cores[TARGET_CPU]["softirq_us"] / unit,
                "generator_softirq_us": cores[GENERATOR_CPU]["softirq_us"] / unit,
                "ipis": ipis / unit,
                "qps": s["answered_qps"],
                "valid": s["validity"]["valid"],
            }
        )
    return out


def cell(values: list[float], digits: int = 1) -> str:
    m = statistics.median(values)
    if len(values) == 1:
        return f"{m:.{digits}f}"
    return f"{m:.{digits}f} ({min(values):.{digits}f} to {max(values):.{digits}f})"


def main(dirs: list[str]) -> None:
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    order = {"loopback": 0, "veth": 1, "veth-rps": 2}
    for d in dirs:
        for row in rows(Path(d)):
            groups[(row["target"], row["what"], row["network"])].append(row)
    print(
        "| target | unit | network | target CPU-µs | generator CPU-µs | softirq-µs on target core"
        " | softirq-µs on generator core | RPS interrupts to target core | answered qps | valid |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for key in sorted(groups, key=lambda k: (k[0], k[1].endswith("handshake"), k[1], order[k[2]])):
        rs = groups[key]
        print(
            f"| {key[0]} | {key[1]} | {key[2]} | {cell([r['target_us'] for r in rs])} "
            f"| {cell([r['generator_us'] for r in rs])} | {cell([r['target_softirq_us'] for r in rs], 2)} "
            f"| {cell([r['generator_softirq_us'] for r in rs], 2)} "
            f"| {cell([r['ipis'] for r in rs], 2)} | {cell([r['qps'] for r in rs], 0)} "
            f"| {sum(r['valid'] for r in rs)}/{len(rs)} |"
        )
    print()
    print("Ratios to loopback (medians):")
    print()
    print("| target | unit | target CPU veth | target CPU veth-rps | generator CPU veth | generator CPU veth-rps |")
    print("|---|---|---|---|---|---|")
    units = sorted({k[:2] for k in groups}, key=lambda k: (k[0], k[1].endswith("handshake"), k[1]))
    for target, what in units:

        def med(network: str, field: str, target: str = target, what: str = what) -> float | None:
            rs = groups.get((target, what, network))
            return statistics.median(r[field] for r in rs) if rs else None

        cells = []
        for field in ("target_us", "generator_us"):
            base = med("loopback", field)
            for network in ("veth", "veth-rps"):
                v = med(network, field)
                cells.append("n/a" if base is None or v is None else f"{v / base:.2f}")
        print(f"| {target} | {what} | {' | '.join(cells)} |")


if __name__ == "__main__":
    main(sys.argv[1:])
