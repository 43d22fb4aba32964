"""dnscost's exceptions. Each carries one line meant for the user; the CLI prints it (no
traceback) and exits with the class's exit code.

::

    DnscostError              (exit 1)
    ├── UsageError            (exit 2)  bad command line, spec or configuration
    │   └── DamagedLineError              a line of a JSON-lines file written whole is not a record
    ├── MachineError          (exit 3)  something missing on this machine: a binary, a cgroup
    ├── TargetError           (exit 4)  a resolver failed to start, answer or stay alive
    └── EngineError           (exit 5)  dnscost-engine failed
"""

from __future__ import annotations

__all__ = ["DamagedLineError", "DnscostError", "EngineError", "MachineError", "TargetError", "UsageError"]


class DnscostError(Exception):
    """Base of every error dnscost reports to the user."""

    exit_code = 1


class UsageError(DnscostError):
    """The command line, an experiment spec or a configuration is invalid."""

    exit_code = 2


class DamagedLineError(UsageError):
    """A line of a JSON-lines file that should have been written whole is not a JSON object
    (``dnscost.jsonl.read_records(path, strict=True)``); names the file and the line."""

    def __init__(self, path: object, line: int, reason: str) -> None:
        super().__init__(f"{path}: line {line} is not a JSON record ({reason})")
        self.path = path
        self.line = line


class MachineError(DnscostError):
    """This machine lacks something dnscost needs (a binary, a writable cgroup, ...)."""

    exit_code = 3


class TargetError(DnscostError):
    """A target failed to start, to answer its health checks, or died during a trial."""

    exit_code = 4


class EngineError(DnscostError):
    """dnscost-engine failed or produced no usable output."""

    exit_code = 5
