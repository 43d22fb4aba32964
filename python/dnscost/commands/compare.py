"""``dnscost compare``: two runs metric by metric, with their uncertainty (:mod:`dnscost.compare`)."""

from __future__ import annotations

import argparse
import json
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


def main(a: argparse.Namespace) -> int:
    from dnscost.compare import compare

    c = compare(a.run_a, a.run_b, force=a.force)
    if a.json:
        doc = {
            "run_a": str(c.run_a),
            "run_b": str(c.run_b),
            "machine_differences": c.machine_differences,
            "target_differences": c.target_differences,
            "notes": c.notes,
            "rows": [r.as_dict() for r in c.rows],
        }
        print(json.dumps(doc, indent=1))
    else:
        print(c.render())
    return 0
