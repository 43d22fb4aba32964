"""``dnscost target list|start|prepare``: the targets at every place they can run (the host's
packages, Debian release roots, an own build), one started for manual use, and release roots
made on demand (:mod:`dnscost.targets.roots`).

dnscost target list [--roots DIR]
dnscost target prepare NAME@RELEASE [...] [--roots DIR] [--mirror URL]
dnscost target start NAME[@RELEASE|@PATH] [--transports ...] [--roots DIR]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from dnscost.argtypes import cpu_list
from dnscost.errors import DnscostError, MachineError, UsageError
from dnscost.targets import PACKAGED, TARGETS, Target, served, target_name
from dnscost.targets.place import BUILD_MARKER, RELEASES, Build, Host, Place, Root, label_of
from dnscost.targets.roots import package_of, prepare, read_manifest, roots_dir
from dnscost.transports import DEFAULT_KEY_TYPE, KEY_TYPES

__all__ = ["LISTED_RELEASES", "add_parser", "add_roots_option", "list_rows", "main"]

LISTED_RELEASES = ("trixie", "sid")
"""Releases ``target list`` shows even before their roots exist (Debian's stable after the
host's bookworm, and unstable); any other release is shown once it has a root."""


def add_roots_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--roots",
        type=Path,
        help="directory of the release roots (default: $DNSCOST_ROOTS, else roots/ in the current directory)",
    )


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    t = sub.add_parser("target", help="list the targets, make release roots, start a target for manual use")
    tsub = t.add_subparsers(dest="action", required=True)
    ls = tsub.add_parser("list", help="every target at every release and build place: version, transports, status")
    add_roots_option(ls)
    pr = tsub.add_parser("prepare", help="make the Debian release root a NAME@RELEASE target runs in (once)")
    pr.add_argument("names", nargs="+", metavar="NAME@RELEASE", help="e.g. dnsdist@trixie knot-resolver@sid")
    pr.add_argument("--mirror", help="Debian mirror URL (default: the one the host's apt uses)")
    add_roots_option(pr)
    ts = tsub.add_parser("start", help="start a target (cache filled) and keep it running until Ctrl-C")
    ts.add_argument("name", help="NAME, NAME@RELEASE or NAME@PATH (dnscost target list shows them)")
    ts.add_argument("--transports", help="comma-separated subset of what the target serves")
    ts.add_argument("--target-cpus", type=cpu_list, default=[0])
    ts.add_argument("--upstream-cpus", type=cpu_list, default=[1])
    ts.add_argument("--names", type=int, default=10_000, help="synthetic names under --tld")
    ts.add_argument("--tld", default="test")
    ts.add_argument("--dir", type=Path, help="working directory (default: a new one under results/targets)")
    ts.add_argument("--no-fill", action="store_true", help="do not pre-fill the cache")
    ts.add_argument("--cert-key", choices=KEY_TYPES, default=DEFAULT_KEY_TYPE, help="the target's certificate key")
    add_roots_option(ts)


def main(a: argparse.Namespace) -> int:
    if a.action == "list":
        for row in list_rows():
            print(f"{row[0]:26} {row[1]:12} {row[2]:24} {row[3]}")
        return 0
    if a.action == "prepare":
        return cmd_prepare(a.names, a.mirror)
    return cmd_start(a)


def list_rows() -> list[tuple[str, str, str, str]]:
    """One row per target and place: name, version, transports, status (installed, or how to get it)."""
    rows = [("target", "version", "transports", "status")]
    for name, cls in TARGETS.items():
        try:
            cls.locate()
            version, status = _version(cls, None), "installed"
        except DnscostError:
            version, status = "-", f"apt-get install {cls.package}" if cls.package else "bash scripts/setup"
        rows.append((name, version, ",".join(cls.transports), status))
    prepared = {p.name for p in roots_dir().iterdir() if read_manifest(p)} if roots_dir().is_dir() else set()
    for release in [r for r in RELEASES if r in LISTED_RELEASES or r in prepared]:
        manifest = read_manifest(roots_dir() / release)
        for name in PACKAGED:
            cls = TARGETS[name]
            token = f"{name}@{release}"
            pkg = package_of(name, release, cls.package or name)
            if manifest is None or pkg not in manifest.packages:
                rows.append((token, "-", ",".join(cls.transports), f"dnscost target prepare {token}"))
                continue
            version = _version(cls, Root(roots_dir() / release, release))
            rows.append((token, version, ",".join(cls.transports), f"root {roots_dir() / release} ({pkg})"))
    # Builds scripts/build-target installed into a root (each with a dnscost-build.json).
    for marker in sorted(roots_dir().glob(f"*/opt/*/{BUILD_MARKER}")) if roots_dir().is_dir() else []:
        name = str(json.loads(marker.read_text()).get("target", ""))
        if name not in TARGETS:
            continue
        token = f"{name}@{marker.parent}"
        place = Build.at(marker.parent, TARGETS[name].binary)
        try:
            transports = ",".join(TARGETS[name].served_in(place))
        except DnscostError as e:
            transports = f"? ({e})"
        rows.append((token, _version(TARGETS[name], place), transports, f"build in the {marker.parts[-4]} root"))
    return rows


def _version(cls: type[Target], place: Place | None) -> str:
    try:
        return cls.version_in(place or Host())
    except DnscostError as e:
        return f"? ({e})"


def cmd_prepare(names: list[str], mirror: str | None) -> int:
    parsed = [target_name(n) for n in names]
    for n in parsed:
        if n.release is None:
            raise UsageError(f"{n}: prepare makes release roots: name one as NAME@RELEASE (e.g. {n.base}@trixie)")
    for n in parsed:
        start = time.monotonic()
        cls = TARGETS[n.base]
        manifest = prepare(n, cls.package or n.base, mirror=mirror)
        pkg = package_of(n.base, n.release or "", cls.package or n.base)
        root = Root(roots_dir() / (n.release or ""), n.release or "")
        try:
            version = cls.version_in(root)
        except DnscostError as e:
            raise MachineError(f"{n}: installed ({pkg} {manifest.packages[pkg]}) but does not run: {e}") from e
        took = time.monotonic() - start
        print(f"{n}: {cls.name} {version} ({pkg} {manifest.packages[pkg]}) in {root.path} ({took:.0f} s)")
    return 0


def cmd_start(a: argparse.Namespace) -> int:
    """Starts a target as a trial's bed is started (``trial.start_bed``: its network, cache
    filled and checked on its counters) and keeps it until Ctrl-C."""
    from dnscost.results import new_run_id
    from dnscost.trial import LoadSettings, start_bed

    workdir = a.dir or Path("results", "targets", f"{new_run_id()}-{label_of(a.name)}").resolve()
    transports = a.transports.split(",") if a.transports else None
    first = transports[0] if transports else served(a.name)[0]
    settings = LoadSettings(
        target=a.name,
        transport=first,  # the bed serves every one of `transports`; a trial's settings name one
        target_cpus=a.target_cpus,
        generator_cpus=a.upstream_cpus,
        names=a.names,
        tld=a.tld,
        fill=not a.no_fill,
        cert_key=a.cert_key,
    )
    settings.validate_bed()
    bed, info = start_bed(settings, workdir, transports=transports)
    target = bed.target
    try:
        print(
            json.dumps(
                {
                    "target": target.token,
                    "version": info["target_version"],
                    "place": info["target_place"],
                    "pid": info["target_pid"],
                    "endpoints": info["endpoints"],
                    "ca": str(bed.tls.ca),
                    "names": f"q{'0' * len(str(a.names - 1))}.{a.tld} .. q{a.names - 1}.{a.tld}",
                    "cache_hit_ratio": info.get("cache_hit_ratio"),
                    "workdir": str(workdir),
                },
                indent=2,
            ),
            flush=True,
        )
        print(f"{target.token} is running; Ctrl-C stops it", file=sys.stderr, flush=True)
        while target.child is not None and target.child.alive():  # a stopped target is waited for
            time.sleep(0.5)
        target.check_alive()
    except KeyboardInterrupt:
        pass
    finally:
        bed.stop()
    return 0
