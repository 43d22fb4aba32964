"""dnscost's exceptions. Each carries one line meant for the user; the CLI prints it (no
traceback) and exits with the class's exit code.

::

    DnscostError              (exit 1)
    ├── UsageError            (exit 2)  bad command line, spec or configuration
    ├── MachineError          (exit 3)  something missing on this machine: a binary, a cgroup
    ├── TargetError           (exit 4)  a resolver failed to start, answer or stay alive
    └── EngineError           (exit 5)  dnscost-engine failed
"""

from __future__ import annotations

__all__ = ["DnscostError", "EngineError", "MachineError", "TargetError", "UsageError"]


class DnscostError(Exception):
    """Base of every error dnscost reports to the user."""

    exit_code = 1


class UsageError(DnscostError):
    """The command line, an experiment spec or a configuration is invalid."""

    exit_code = 2


class MachineError(DnscostError):
    """This machine lacks something dnscost needs (a binary, a writable cgroup, ...)."""

    exit_code = 3


class TargetError(DnscostError):
    """A target failed to start, to answer its health checks, or died during a trial."""

    exit_code = 4


class EngineError(DnscostError):
    """dnscost-engine failed or produced no usable output."""

    exit_code = 5
