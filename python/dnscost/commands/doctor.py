"""``dnscost doctor``: this machine checked (:func:`dnscost.machine.checks`), what is missing
said with its fix; exit 3 when a required item is missing."""

from __future__ import annotations

import argparse

__all__ = ["add_parser", "main"]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sub.add_parser("doctor", help="check this machine and say what is missing")


def main(a: argparse.Namespace) -> int:
    from dnscost.machine import checks

    failed = 0
    for c in checks():
        mark = "ok " if c.ok else ("MISSING" if c.required else "warn")
        print(f"{mark:7} {c.name:24} {c.detail}")
        if not c.ok:
            print(f"{'':7} {'':24} fix: {c.fix}")
            failed += c.required
    print("\nready" if not failed else f"\n{failed} required item(s) missing")
    return 0 if not failed else 3
