"""Release roots: a minimal Debian system of another release, with targets installed and no
service started, in which a target runs under ``chroot`` (:class:`dnscost.targets.place.Root`).

``dnscost target prepare NAME@RELEASE`` makes the root of RELEASE once (``debootstrap
--variant=minbase`` from the Debian mirror the host's apt uses) and installs NAME's package into
it; more targets of the same release go into the same root. Each root keeps a manifest,
``dnscost-root.json``: the release, the mirror, and every package installed with its version.
Roots live in one directory: ``--roots DIR``, else ``$DNSCOST_ROOTS``, else ``roots/`` beside
``results/`` (the current directory).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from dnscost.errors import MachineError, UsageError
from dnscost.results import write_json
from dnscost.targets.place import MANIFEST, Manifest, Root, TargetName, read_manifest

__all__ = [
    "MANIFEST",
    "Manifest",
    "host_mirror",
    "package_of",
    "prepare",
    "read_manifest",
    "root_of",
    "roots_dir",
    "set_roots_dir",
]

_PACKAGE_OF: dict[tuple[str, str], str] = {("knot-resolver", "sid"): "knot-resolver6"}
"""Where a release packages a target under another name than the host's: knot-resolver 6 is
``knot-resolver6`` in sid (trixie's ``knot-resolver`` is 5.7)."""

_roots: Path | None = None


def set_roots_dir(path: Path | None) -> None:
    """Sets, once per command, where roots live (``--roots`` or ``$DNSCOST_ROOTS``, read by the CLI)."""
    global _roots
    _roots = path.resolve() if path is not None else None


def roots_dir() -> Path:
    """Where roots live: as set by :func:`set_roots_dir`, else ``roots/`` in the current directory.
    One that exists and is not a directory is one line (:class:`UsageError`)."""
    path = _roots if _roots is not None else Path("roots").resolve()
    if path.exists() and not path.is_dir():
        raise UsageError(f"{path}: not a directory (release roots live in a directory: --roots, $DNSCOST_ROOTS)")
    return path


def package_of(base: str, release: str, default: str) -> str:
    """The Debian package that holds target ``base`` in ``release``."""
    return _PACKAGE_OF.get((base, release), default)


def root_of(name: TargetName, package: str) -> Root:
    """The root a release target runs in, or one line naming the command that makes it."""
    assert name.release is not None
    path = roots_dir() / name.release
    manifest = read_manifest(path)
    if manifest is None or package_of(name.base, name.release, package) not in manifest.packages:
        where = "" if _roots is None else f" --roots {roots_dir()}"
        raise UsageError(f"{name}: no release root with it in {roots_dir()}: run dnscost target prepare{where} {name}")
    return Root(path, name.release)


_URI = re.compile(r"^\s*URIs:\s*(\S+)", re.M | re.I)
_LIST = re.compile(r"^\s*deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s+\S+", re.M)


def host_mirror() -> str:
    """The Debian mirror the host's apt uses (the first one that is not the security archive):
    ``$DNSCOST_DEBIAN_MIRROR`` when set."""
    override = os.environ.get("DNSCOST_DEBIAN_MIRROR")
    if override:
        return override
    texts = []
    for path in [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]:
        if path.suffix in (".list", ".sources") or path.name == "sources.list":
            with contextlib.suppress(OSError):
                texts.append(path.read_text())
    for text in texts:
        for uri in [*_URI.findall(text), *_LIST.findall(text)]:
            if "security" not in uri and uri.startswith(("http://", "https://", "file:")):
                return str(uri)
    raise MachineError("no Debian mirror in /etc/apt/sources.list*: set DNSCOST_DEBIAN_MIRROR")


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def _run(argv: list[str], what: str, log: Path) -> None:
    with log.open("a") as out:
        out.write(f"$ {' '.join(argv)}\n")
        out.flush()
        done = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, check=False)
    if done.returncode != 0:
        tail = log.read_text(errors="replace").strip().splitlines()[-1:] or [""]
        raise MachineError(f"{what} failed (code {done.returncode}): {tail[0]} (log: {log})")


_NO_SERVICES = "#!/bin/sh\n# dnscost: no service starts in a release root\nexit 101\n"

# A snapshot mirror's Release files expire; their signatures still hold.
_APT = ["apt-get", "-q", "-o", "Acquire::Check-Valid-Until=false", "-o", "Dpkg::Use-Pty=0"]


def prepare(name: TargetName, package: str, *, mirror: str | None = None, log: bool = True) -> Manifest:
    """Makes the root of ``name.release`` if it is missing and installs ``package`` into it (for
    ``name.base``, under this release's package name). Idempotent; one ``prepare`` per release at
    a time (a lock). Returns the root's manifest."""
    assert name.release is not None
    release, pkg = name.release, package_of(name.base, name.release, package)
    roots = roots_dir()
    if shutil.which("debootstrap") is None:
        raise MachineError("debootstrap not found: apt-get install debootstrap (scripts/setup installs it)")
    path = roots / release
    with _locked(roots / f".{release}.lock"):
        manifest = read_manifest(path)
        if manifest is not None and pkg in manifest.packages:
            return manifest
        logfile = roots / f"{release}.log"
        source = mirror or (manifest.mirror if manifest else host_mirror())
        if manifest is None:
            fresh = roots / f".{release}.new"
            shutil.rmtree(fresh, ignore_errors=True)
            _run(["debootstrap", "--variant=minbase", release, str(fresh), source], f"debootstrap {release}", logfile)
            policy = fresh / "usr/sbin/policy-rc.d"
            policy.write_text(_NO_SERVICES)
            policy.chmod(0o755)
            shutil.rmtree(path, ignore_errors=True)
            fresh.rename(path)
            manifest = Manifest(release, source, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), {})
        root = Root(path, release)
        env = ["env", "DEBIAN_FRONTEND=noninteractive", "LC_ALL=C"]
        _run(root.wrap([*env, *_APT, "update"]), f"apt-get update in the {release} root", logfile)
        install = [*env, *_APT, "install", "-y", "--no-install-recommends", pkg]
        _run(root.wrap(install), f"installing {pkg} in the {release} root", logfile)
        _run(root.wrap([*_APT, "clean"]), f"apt-get clean in the {release} root", logfile)
        got = subprocess.run(
            root.wrap(["dpkg-query", "-W", "-f", "${Version}", pkg]), capture_output=True, text=True, check=False
        )
        if got.returncode != 0 or not got.stdout.strip():
            raise MachineError(f"{pkg} is not installed in the {release} root after apt-get install (log: {logfile})")
        manifest = Manifest(
            manifest.release, manifest.mirror, manifest.created, {**manifest.packages, pkg: got.stdout.strip()}
        )
        write_json(path / MANIFEST, manifest.__dict__)
        return manifest
