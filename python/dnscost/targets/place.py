"""Where a target's binaries come from: the host's packages (a bare ``NAME``), a release root of
another Debian release (``NAME@RELEASE``, :mod:`dnscost.targets.roots`), or a developer's own
build (``NAME@PATH``: a binary or an install prefix).

A :class:`Place` finds a program and turns a command line into one that runs it there. A root's
commands run under ``chroot`` in a mount namespace of their own, in the host's network
namespace, with the host directories the configuration names (the trial directory, the TLS
files, a short socket directory) bound at the same paths inside the root: the adapters write one
configuration for every place, and everything the target writes lands in the trial directory.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from dnscost.contract import TargetPlace
from dnscost.errors import MachineError, UsageError
from dnscost.targets._util import find_binary

__all__ = [
    "BUILD_MARKER",
    "MANIFEST",
    "RELEASES",
    "Build",
    "Host",
    "Manifest",
    "Place",
    "Root",
    "TargetName",
    "file_digest",
    "label_of",
    "read_manifest",
]

MANIFEST = "dnscost-root.json"
"""The file in a release root that says what it holds (written last by ``dnscost target prepare``)."""

BUILD_MARKER = "dnscost-build.json"
"""The file in the prefix of a build ``scripts/build-target`` installed into a release root
(``ROOT/opt/NAME``): the target, its source and how it was configured."""

_BIN_DIRS = ("usr/sbin", "usr/bin", "sbin", "bin", "usr/local/sbin", "usr/local/bin")

# unshare (no --fork) and sh (exec) keep the PID, so the process dnscost pins, puts in a cgroup,
# meters and stops is the server itself. The mount namespace is private: nothing bound here is
# seen by the host, and it goes with the last process in it.
_CHROOT_SCRIPT = """set -e
root=$1; shift
while [ "$1" != "--" ]; do mount --bind "$1" "$root$1"; shift; done
shift
mount -t proc proc "$root/proc"
mount --rbind /dev "$root/dev"
mount --rbind /sys "$root/sys"
exec chroot "$root" "$@"
"""


class Place:
    """Where a target's programs are, and how to run them there: the host (the base class
    itself: programs from ``PATH`` and the sbin directories), a :class:`Root` or a
    :class:`Build`."""

    def find(self, binary: str, target: str, package: str | None) -> str:
        """The path of ``binary`` as the target's process sees it, or a one-line
        :class:`MachineError` saying how to get it."""
        return find_binary(binary, target, package)

    def wrap(self, argv: Sequence[str], shared: Sequence[Path] = ()) -> list[str]:
        """``argv`` made to run in this place, with the host directories ``shared`` visible at
        their own paths."""
        return list(argv)

    def cleanup(self) -> None:
        """Removes what :meth:`wrap` left in the place, once its processes are gone."""

    def describe(self) -> TargetPlace:
        """Where the binaries came from, for run.json and trial.json."""
        return {"place": "host"}


Host = Place
"""The host's own packages."""


@dataclass
class Root(Place):
    """A release root made by ``dnscost target prepare`` (``path`` holds the Debian release)."""

    path: Path
    release: str
    made: list[Path] = field(default_factory=list)
    """Mount points :meth:`wrap` made inside the root, removed by :meth:`cleanup`."""

    def find(self, binary: str, target: str, package: str | None) -> str:
        for d in _BIN_DIRS:
            candidate = self.path / d / binary
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return "/" + d + "/" + binary
        raise MachineError(
            f"{target}@{self.release}: {binary} is not in the root {self.path}: "
            f"run dnscost target prepare {target}@{self.release}"
        )

    def wrap(self, argv: Sequence[str], shared: Sequence[Path] = ()) -> list[str]:
        unshare = shutil.which("unshare")
        if unshare is None:
            raise MachineError("unshare not found: install the Debian package util-linux")
        binds = _outermost(shared)
        for p in binds:
            inner = self.path / str(p).lstrip("/")
            missing = [d for d in (inner, *inner.parents) if d.is_relative_to(self.path) and not d.exists()]
            inner.mkdir(parents=True, exist_ok=True)
            self.made.extend(reversed(missing))
        return [unshare, "--mount", "--propagation", "private", "/bin/sh", "-c", _CHROOT_SCRIPT, "dnscost-root",
                str(self.path), *map(str, binds), "--", *argv]  # fmt: skip

    def cleanup(self) -> None:
        for d in reversed(self.made):  # the deepest first
            with contextlib.suppress(OSError):  # not empty: the target wrote outside what was shared
                d.rmdir()
        self.made.clear()

    def describe(self) -> TargetPlace:
        manifest = read_manifest(self.path)
        return {
            "place": "root",
            "release": self.release,
            "root": str(self.path),
            "mirror": manifest.mirror if manifest else None,
            "packages": manifest.packages if manifest else {},
        }


@dataclass(frozen=True)
class Manifest:
    """What a root holds, as ``dnscost-root.json`` records it."""

    release: str
    mirror: str
    created: str
    packages: dict[str, str]
    """Installed target packages and their versions (``dpkg-query``)."""


def read_manifest(root: Path) -> Manifest | None:
    """The manifest of ``root`` (None when the root is missing or unfinished)."""
    try:
        doc = json.loads((root / MANIFEST).read_text())
    except (OSError, json.JSONDecodeError):
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("packages"), dict):
        return None
    return Manifest(
        str(doc.get("release")),
        str(doc.get("mirror")),
        str(doc.get("created")),
        {str(k): str(v) for k, v in doc["packages"].items()},
    )


@dataclass(frozen=True)
class Build(Place):
    """A developer's own build: ``path`` is the server's binary (whatever its name), or an
    install prefix holding it as ``server`` in ``sbin/``, ``bin/`` or the prefix itself. The
    server is taken from there and nowhere else: a path that holds no executable server is
    refused in one line, never stood in for by the host's package. Helper programs
    (``unbound-control``, ``rec_control``) are taken beside it, else from the host, and
    :meth:`describe` says which. A build inside a release root (``scripts/build-target``
    installs one there, linked against that release's libraries) runs in that root (:meth:`at`
    finds it)."""

    path: Path
    server: str
    """The server's binary name (the adapter's ``binary``): what a prefix holds."""
    root: Root | None = None
    """The release root the build lies in, if any: its programs run there under ``chroot``."""
    helpers: dict[str, str] = field(default_factory=dict, compare=False)
    """The helper programs found so far, each as the build's processes see it."""

    @classmethod
    def at(cls, path: Path, server: str) -> Build:
        """The build at ``path`` of the server binary ``server``, in the release root that
        holds it if one does."""
        for d in path.parents:
            manifest = read_manifest(d)
            if manifest is not None:
                return cls(path, server, Root(d, manifest.release))
        return cls(path, server)

    def _dirs(self) -> list[Path]:
        if self.path.is_file():
            return [self.path.parent]
        return [self.path / "sbin", self.path / "bin", self.path]

    def _seen(self, p: Path) -> str:
        """``p`` as the build's processes see it (inside its root, if it has one)."""
        return "/" + str(p.relative_to(self.root.path)) if self.root is not None else str(p)

    def server_path(self, target: str) -> Path:
        """The server's binary on the host: ``path`` itself when it is a file, else the first
        executable ``server`` in the prefix; a one-line :class:`UsageError` naming what ``path``
        is otherwise."""
        token = f"{target}@{self.path}"
        if self.path.is_file():
            if not os.access(self.path, os.X_OK):
                raise UsageError(
                    f"{token}: {self.path} is not executable (give the server's binary or its install prefix)"
                )
            return self.path
        if not self.path.is_dir():
            raise UsageError(f"{token}: {self.path} is neither a file nor a directory")
        for d in self._dirs():
            candidate = d / self.server
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return candidate
        raise UsageError(f"{token}: no executable {self.server} in {self.path} (nor in its sbin/ or bin/)")

    def find(self, binary: str, target: str, package: str | None) -> str:
        if binary == self.server:
            return self._seen(self.server_path(target))
        for d in self._dirs():
            candidate = d / binary
            if candidate.is_file() and os.access(candidate, os.X_OK):
                found = self._seen(candidate)
                break
        else:
            # A helper the build does not carry: its root's, else the host's (same protocol, mostly).
            found = (
                self.root.find(binary, target, package)
                if self.root is not None
                else find_binary(binary, target, package)
            )
        self.helpers[binary] = found
        return found

    def wrap(self, argv: Sequence[str], shared: Sequence[Path] = ()) -> list[str]:
        return self.root.wrap(argv, shared) if self.root is not None else list(argv)

    def cleanup(self) -> None:
        if self.root is not None:
            self.root.cleanup()

    def describe(self) -> TargetPlace:
        doc: TargetPlace = {"place": "build", "path": str(self.path)}
        with contextlib.suppress(UsageError, OSError):
            server = self.server_path(self.server)
            doc["binary"] = str(server)
            doc["sha256"] = file_digest(server)
        if self.helpers:
            doc["helpers"] = dict(sorted(self.helpers.items()))
        if self.root is not None:
            doc["release"] = self.root.release
            doc["root"] = str(self.root.path)
        return doc


def file_digest(path: Path) -> str:
    """The SHA-256 of the file at ``path``, hexadecimal: a build's identity by content."""
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _outermost(paths: Sequence[Path]) -> list[Path]:
    """``paths`` resolved, without those inside another one (binding the outer one shows them)."""
    resolved = sorted({Path(os.path.realpath(p)) for p in paths}, key=lambda p: len(p.parts))
    out: list[Path] = []
    for p in resolved:
        if not any(p == q or q in p.parents for q in out):
            out.append(p)
    return out


RELEASES = ("bullseye", "bookworm", "trixie", "forky", "sid")
"""The Debian releases a root can be made of (codenames; ``sid`` is unstable)."""

_LABEL = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True)
class TargetName:
    """A target as the user names it: ``dnsdist`` (the host's package), ``dnsdist@trixie`` (a
    release root) or ``dnsdist@/opt/dnsdist`` (an own build)."""

    base: str
    """The adapter: a key of :data:`dnscost.targets.TARGETS`."""
    release: str | None = None
    build: Path | None = None

    @classmethod
    def parse(cls, text: str, known: Sequence[str], packaged: Sequence[str]) -> TargetName:
        """``text`` checked against the adapters ``known`` (``packaged``: those a Debian release
        carries); one-line :class:`UsageError` otherwise."""
        base, at, where = text.partition("@")
        if base not in known:
            raise UsageError(f"unknown target {base} (known: {', '.join(known)})")
        if not at:
            return cls(base)
        if not where:
            raise UsageError(f"{text}: give a Debian release or a path after @ (e.g. {base}@trixie)")
        if "/" in where or where.startswith("."):
            path = Path(where).expanduser().resolve()
            if not path.exists():
                raise UsageError(f"{text}: {path} does not exist (give the server's binary or its install prefix)")
            return cls(base, build=path)
        if where not in RELEASES:
            raise UsageError(f"{text}: unknown Debian release {where} (known: {', '.join(RELEASES)})")
        if base not in packaged:
            raise UsageError(f"{text}: Debian does not package {base} (release roots hold {', '.join(packaged)})")
        return cls(base, release=where)

    def __str__(self) -> str:
        if self.release:
            return f"{self.base}@{self.release}"
        if self.build:
            return f"{self.base}@{self.build}"
        return self.base

    @property
    def label(self) -> str:
        """The name in trial names and directories (:func:`label_of`)."""
        return label_of(str(self))


def label_of(token: str) -> str:
    """A target's name as trial names and directories carry it: the name itself, with a build's
    path made file-safe (``dnsdist@/opt/dnsdist/sbin/dnsdist``: ``dnsdist@opt_dnsdist_sbin_dnsdist``)."""
    base, at, where = token.partition("@")
    if at and ("/" in where or where.startswith(".")):
        return f"{base}@{_LABEL.sub('_', where.strip('/'))}"
    return token
