"""Small helpers the target adapters share: finding binaries, reading versions, limits, and
talking to a server's statistics endpoint. Nothing here starts a long-lived process."""

from __future__ import annotations

import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from pathlib import Path

from dnscost.errors import MachineError, TargetError, UsageError

__all__ = [
    "IDLE_TIMEOUT_S",
    "LISTEN_BACKLOG",
    "fd_limit",
    "find_binary",
    "host_network",
    "http_get",
    "int_items",
    "lua_str",
    "remove_socket_dir",
    "socket_dir",
    "sum_of",
    "version_of",
    "version_said",
]

IDLE_TIMEOUT_S = 600
"""How long every target keeps an idle client connection open. Servers' defaults (2 s for
dnsdist and pdns-recursor, 10 s for knot-resolver, 30 s for unbound and bind9) would cut the
idle connections that memory experiments hold; clients that want shorter lives set them.
100 000 connections opened at 1 000 a second are held up to 150 s before the measured period:
at 120 s, knot-resolver closed 34 873 of them before it began."""

LISTEN_BACKLOG = 4096
"""Listen queue asked for where a server lets us choose (the kernel caps it at
``net.core.somaxconn``)."""

_SBIN = ("/usr/local/sbin", "/usr/sbin", "/sbin")


def find_binary(binary: str, target: str, package: str | None) -> str:
    """The path of ``binary`` (beside this Python, where scripts/setup installs what it builds,
    then ``PATH``, then the sbin directories a non-root ``PATH`` may lack), or a one-line
    :class:`MachineError` naming the Debian package to install."""
    path = os.pathsep.join([str(Path(sys.prefix) / "bin"), os.environ.get("PATH", ""), *_SBIN])
    found = shutil.which(binary, path=path)
    if found is None:
        hint = f"install the Debian package {package} (scripts/setup)" if package else "run scripts/setup"
        raise MachineError(f"{target}: {binary} not found: {hint}")
    return found


def version_said(argv: list[str], pattern: str, target: str) -> tuple[str | None, str]:
    """Runs ``argv`` (a ``--version`` style command): the first group of ``pattern`` in its
    output (None when it is not there), and the first line it printed."""
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=False, stdin=subprocess.DEVNULL)
    except FileNotFoundError as e:
        raise MachineError(f"{target}: {argv[0]} not found") from e
    except subprocess.TimeoutExpired as e:
        raise TargetError(f"{target}: {' '.join(argv)} did not finish") from e
    text = out.stdout + "\n" + out.stderr
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    m = re.search(pattern, text)
    return (m.group(1) if m else None), first


def version_of(argv: list[str], pattern: str, target: str) -> str:
    """Runs ``argv`` (a ``--version`` style command) and returns the first group of ``pattern``
    found in its output, or its first line when the pattern does not match."""
    version, first = version_said(argv, pattern, target)
    if version is not None:
        return version
    if not first:
        raise TargetError(f"{target}: {' '.join(argv)} printed no version")
    return first


FD_LIMIT_CAP = 65_536
"""Servers size tables from the open-files limit; dnscost raises that limit to the kernel's
ceiling (about a million), far beyond what one loopback address can connect (its ephemeral
ports), so configurations take at most this."""


def fd_limit() -> int:
    """The open-files limit a child inherits (the soft limit), at most :data:`FD_LIMIT_CAP`."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return min(FD_LIMIT_CAP, hard if soft == resource.RLIM_INFINITY else soft)


def socket_dir(directory: Path, room: int = 40) -> tuple[Path, Path | None]:
    """A directory short enough for unix sockets (a socket's path is limited to 107 bytes;
    ``room`` is what the server appends): ``directory`` itself when it is short enough, else a
    new directory in the temporary directory, returned also as the second element so that the
    caller removes it (:func:`remove_socket_dir`). Not a symlink: servers such as kresd resolve
    one and bind to the long path behind it."""
    directory = directory.resolve()
    if len(os.fsencode(directory)) + room <= 107:
        return directory, None
    try:
        short = Path(tempfile.mkdtemp(prefix="dnscost-"))
    except OSError as e:
        raise MachineError(f"cannot make a directory in {tempfile.gettempdir()}: {e}") from e
    if len(os.fsencode(short)) + room > 107:
        short.rmdir()
        raise UsageError(f"no short path for the control sockets of {directory}: set TMPDIR to a short directory")
    return short, short


def remove_socket_dir(short: Path | None) -> None:
    """Removes a directory :func:`socket_dir` made (once its server has stopped)."""
    if short is not None:
        shutil.rmtree(short, ignore_errors=True)


def http_get(url: str, target: str, headers: Mapping[str, str] | None = None, timeout: float = 3.0) -> str:
    """GET ``url`` (a statistics endpoint on the target's address)."""
    request = urllib.request.Request(url, headers=dict(headers or {}))
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            body: bytes = response.read()
    except (urllib.error.URLError, OSError) as e:
        raise TargetError(f"{target}: cannot read counters from {url}: {e}") from e
    return body.decode("utf-8", errors="replace")


def host_network(address: str) -> str:
    """The network of the one host ``address``: ``/32`` for IPv4, ``/128`` for IPv6."""
    return f"{address}/{128 if ':' in address else 32}"


def lua_str(text: str | Path) -> str:
    """A Lua string literal."""
    s = str(text)
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def int_items(items: Iterable[tuple[str, object]], prefix: str = "") -> dict[str, int]:
    """The integer-valued items (floats and strings are not counters; booleans are skipped)."""
    out: dict[str, int] = {}
    for key, value in items:
        if isinstance(value, int) and not isinstance(value, bool):
            out[prefix + key] = value
    return out


def sum_of(raw: Mapping[str, int], keys: Iterable[str]) -> int | None:
    """The sum of ``keys`` present in ``raw``; ``None`` when none is."""
    values = [raw[k] for k in keys if k in raw]
    return sum(values) if values else None
