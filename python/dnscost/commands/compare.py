"""``dnscost compare``: two runs metric by metric, with their uncertainty (:mod:`dnscost.compare`)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

__all__ = ["add_parser", "main"]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    cmp = sub.add_parser("compare", help="differences between two runs, with their uncertainty")
    cmp.add_argument("run_a", type=Path)
    cmp.add_argument("run_b", type=Path)
    cmp.add_argument(
        "--force", action="store_true", help="compare runs from different machines or --network set-ups anyway"
    )
    cmp.add_argument("--json", action="store_true", help="one JSON document (every row, rel_diff included)")
    cmp.add_argument(
        "--fail-on",
        action="append",
        default=[],
        metavar="GATE",
        help="METRIC>+X%% or METRIC<-X%% (repeatable): exit 1 when a cell of METRIC moved beyond X %% "
        "and the difference is significant (docs/results.md, 'Comparing two runs')",
    )


def main(a: argparse.Namespace) -> int:
    from dnscost.compare import Gate, compare, gate

    gates = [Gate.parse(text) for text in a.fail_on]  # before the analysis: a typo costs nothing
    c = compare(a.run_a, a.run_b, force=a.force)
    verdict = gate(c, gates) if gates else None
    if a.json:
        doc: dict[str, object] = {
            "run_a": str(c.run_a),
            "run_b": str(c.run_b),
            "machine_differences": c.machine_differences,
            "target_differences": c.target_differences,
            "notes": c.notes,
            "rows": [r.as_dict() for r in c.rows],
        }
        if verdict is not None:
            doc["gate"] = {"failures": verdict.failures, "judged": verdict.judged, "unjudged": verdict.unjudged}
        print(json.dumps(doc, indent=1))
    else:
        print(c.render())
    if verdict is None:
        return 0
    for line in verdict.failures:
        print(line, file=sys.stderr)
    print(verdict.summary(), file=sys.stderr)
    return 1 if verdict.failures else 0
