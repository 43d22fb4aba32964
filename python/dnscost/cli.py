"""The ``dnscost`` command: the parser, built by asking each command of
:mod:`dnscost.commands` to add its own; every path made absolute; the command run, and its
errors mapped to exit codes. User mistakes print one line and exit non-zero, without a
traceback.

Environment variables read here and nowhere else: ``DNSCOST_ENGINE`` (path of
``dnscost-engine``, see :func:`dnscost.engine.engine_path`), ``DNSCOST_ROOTS`` (where release
roots live, :mod:`dnscost.targets.roots`; ``--roots`` overrides it).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path
from typing import Protocol

from dnscost import __version__
from dnscost.commands import (
    client,
    cluster,
    compare,
    doctor,
    keep,
    load,
    observe,
    plan,
    population,
    report,
    run,
    target,
)
from dnscost.errors import DnscostError

__all__ = ["main"]


class Command(Protocol):
    """A command module: it adds its subparser(s) and runs a parsed command line."""

    def add_parser(self, sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None: ...

    def main(self, a: argparse.Namespace) -> int: ...


COMMANDS: dict[str, Command] = {
    "doctor": doctor,
    "target": target,
    "load": load,
    "run": run,
    "reproduce": run,
    "report": report,
    "observe": observe,
    "population": population,
    "client": client,
    "plan": plan,
    "cluster": cluster,
    "keep": keep,
    "compare": compare,
}
"""Each subcommand's module, in the order ``dnscost --help`` lists them."""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="dnscost", description="Measure what DNS transports cost resolvers.")
    p.add_argument("--version", action="version", version=f"dnscost {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    for command in dict.fromkeys(COMMANDS.values()):
        command.add_parser(sub)
    return p


def _interrupt(*_: object) -> None:
    raise KeyboardInterrupt


PATH_ARGS = (
    "output", "spec", "resume", "engine_config", "dir", "run_dir", "run_a", "run_b", "policies", "from_dir", "pcap",
    "capture", "flows", "names", "presets", "mix_file", "population", "external_cgroup", "cluster_tls", "roots", "dest",
)  # fmt: skip
"""Every path a user gives: made absolute once, here, so that no later step (a resolver
started in its own working directory, say) depends on where dnscost was started."""


def absolute_paths(args: argparse.Namespace) -> argparse.Namespace:
    for name in PATH_ARGS:
        value = getattr(args, name, None)
        if isinstance(value, Path):
            setattr(args, name, value.expanduser().resolve())
    return args


def main(argv: list[str] | None = None) -> int:
    args = absolute_paths(build_parser().parse_args(argv))
    from dnscost.targets.roots import set_roots_dir

    roots = getattr(args, "roots", None) or os.environ.get("DNSCOST_ROOTS")
    set_roots_dir(Path(roots) if roots else None)
    # SIGTERM ends a run like Ctrl-C: children are stopped and measured data kept. SIGINT is
    # taken explicitly: a process started from a script's background job inherits it ignored.
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, _interrupt)
    try:
        return COMMANDS[args.command].main(args)
    except DnscostError as e:
        print(f"dnscost: {e}", file=sys.stderr)
        return e.exit_code
    except OSError as e:
        # An unwritable disk or directory met mid-way: one line; what was written stays.
        where = f"{e.filename}: " if e.filename else ""
        print(f"dnscost: {where}{e.strerror or e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("dnscost: interrupted; measured data kept", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
