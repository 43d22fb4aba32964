"""Small helpers the target adapters share: finding binaries, reading versions, limits, and
talking to a server's statistics endpoint. Nothing here starts a long-lived process."""

from __future__ import annotations

import contextlib
import os
import re
import resource
import secrets
import shutil
import subprocess
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
    "http_get",
    "int_items",
    "lua_str",
    "remove_link",
    "socket_dir",
    "sum_of",
    "version_of",
]

IDLE_TIMEOUT_S = 120
"""How long every target keeps an idle client connection open. Servers' defaults (2 s for
dnsdist and pdns-recursor, 10 s for knot-resolver, 30 s for unbound and bind9) would cut the
idle connections that memory experiments hold; clients that want shorter lives set them."""

LISTEN_BACKLOG = 4096
"""Listen queue asked for where a server lets us choose (the kernel caps it at
``net.core.somaxconn``)."""

_SBIN = ("/usr/local/sbin", "/usr/sbin", "/sbin")


def find_binary(binary: str, target: str, package: str | None) -> str:
    """The path of ``binary`` (``PATH``, then the sbin directories a non-root ``PATH`` may
    lack), or a one-line :class:`MachineError` naming the Debian package to install."""
    path = os.pathsep.join([os.environ.get("PATH", ""), *_SBIN])
    found = shutil.which(binary, path=path)
    if found is None:
        hint = f"install the Debian package {package} (scripts/setup)" if package else "run scripts/setup"
        raise MachineError(f"{target}: {binary} not found: {hint}")
    return found


def version_of(argv: list[str], pattern: str, target: str) -> str:
    """Runs ``argv`` (a ``--version`` style command) and returns the first group of ``pattern``
    found in its output, or its first line when the pattern does not match."""
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=False)
    except FileNotFoundError as e:
        raise MachineError(f"{target}: {argv[0]} not found") from e
    except subprocess.TimeoutExpired as e:
        raise TargetError(f"{target}: {' '.join(argv)} did not finish") from e
    text = out.stdout + "\n" + out.stderr
    m = re.search(pattern, text)
    if m:
        return m.group(1)
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    if not first:
        raise TargetError(f"{target}: {' '.join(argv)} printed no version")
    return first


def fd_limit() -> int:
    """The open-files limit a child inherits (the soft limit; servers that raise theirs can
    go no higher than the hard one, which on the reference VM is the same 20 000)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return hard if soft == resource.RLIM_INFINITY else soft


def socket_dir(directory: Path, room: int = 40) -> tuple[Path, Path | None]:
    """A path to ``directory`` short enough for unix sockets in it (a socket's path is limited
    to 107 bytes; ``room`` is what the server appends). That is ``directory`` itself when it is
    short enough, else a symlink to it in the temporary directory, returned also as the second
    element so that the caller removes it (the sockets themselves stay in ``directory``)."""
    directory = directory.resolve()
    if len(os.fsencode(directory)) + room <= 107:
        return directory, None
    for _ in range(100):
        link = Path(tempfile.gettempdir(), f"dnscost-{secrets.token_hex(4)}")
        try:
            link.symlink_to(directory, target_is_directory=True)
        except FileExistsError:
            continue
        if len(os.fsencode(link)) + room > 107:
            link.unlink()
            raise UsageError(f"no short path for the control sockets of {directory}: set TMPDIR to a short directory")
        return link, link
    raise MachineError(f"cannot make a symlink to {directory} in {tempfile.gettempdir()}")


def remove_link(link: Path | None) -> None:
    if link is not None:
        with contextlib.suppress(FileNotFoundError):
            link.unlink()


def http_get(url: str, target: str, headers: Mapping[str, str] | None = None, timeout: float = 3.0) -> str:
    """GET ``url`` (a statistics endpoint on the target's address)."""
    request = urllib.request.Request(url, headers=dict(headers or {}))
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            body: bytes = response.read()
    except (urllib.error.URLError, OSError) as e:
        raise TargetError(f"{target}: cannot read counters from {url}: {e}") from e
    return body.decode("utf-8", errors="replace")


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
