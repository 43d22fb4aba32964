"""A certificate authority made for one run, and a server certificate it signed for
localhost, 127.0.0.1, ::1 and the addresses it is given, with openssl. The key type is an
experiment axis: a full handshake costs the server mostly the certificate's signature, and
ECDSA P-256 (the default, like most DoT and DoH deployments) signs several times faster than
RSA-2048."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from dnscost.errors import MachineError
from dnscost.transports import DEFAULT_KEY_TYPE, KEY_TYPES

__all__ = ["TlsFiles", "make_cluster_tls", "make_tls"]

_NEWKEY = {
    "ecdsa-p256": ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"],
    "rsa-2048": ["-newkey", "rsa:2048"],
    "ed25519": ["-newkey", "ed25519"],
}
assert tuple(_NEWKEY) == KEY_TYPES, "every key type named in dnscost.transports is made here"


@dataclass(frozen=True)
class TlsFiles:
    ca: Path
    cert: Path
    """The server certificate followed by the CA (a chain)."""
    key: Path
    leaf: Path
    """The server certificate alone."""
    key_type: str = DEFAULT_KEY_TYPE


def _openssl(args: list[str], cwd: Path) -> None:
    try:
        r = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, check=False, timeout=60)
    except FileNotFoundError as e:
        raise MachineError("openssl not found (run scripts/setup)") from e
    except subprocess.TimeoutExpired as e:
        raise MachineError(f"openssl {args[0]} did not finish within 60 s") from e
    if r.returncode != 0:
        raise MachineError(f"openssl {args[0]} failed: {r.stderr.strip().splitlines()[-1:]}")


def make_tls(
    directory: Path, days: int = 30, addresses: Sequence[str] = (), key_type: str = DEFAULT_KEY_TYPE
) -> TlsFiles:
    """Writes ca.pem, server.pem (chain), server-leaf.pem and server.key into ``directory``,
    with keys of ``key_type`` (one of :data:`KEY_TYPES`). The certificate also covers
    ``addresses`` (a target's address in its own namespace)."""
    if key_type not in _NEWKEY:
        raise ValueError(f"unknown key type {key_type!r} (known: {', '.join(KEY_TYPES)})")
    directory.mkdir(parents=True, exist_ok=True)
    ext = directory / "server.ext"
    names = ["DNS:localhost", "IP:127.0.0.1", "IP:::1", *(f"IP:{a}" for a in addresses if a != "127.0.0.1")]
    ext.write_text(
        "basicConstraints=critical,CA:FALSE\n"
        "keyUsage=critical,digitalSignature\n"
        "extendedKeyUsage=serverAuth\n"
        f"subjectAltName={','.join(names)}\n"
    )
    ec = [*_NEWKEY[key_type], "-nodes"]
    _openssl(
        [
            "req",
            "-x509",
            *ec,
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
            "-days",
            str(days),
            "-subj",
            "/CN=dnscost run CA",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
        ],
        directory,
    )
    _openssl(["req", *ec, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost"], directory)
    _openssl(
        [
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "server-leaf.pem",
            "-days",
            str(days),
            "-extfile",
            "server.ext",
        ],
        directory,
    )
    leaf = (directory / "server-leaf.pem").read_text()
    (directory / "server.pem").write_text(leaf + (directory / "ca.pem").read_text())
    (directory / "server.key").chmod(0o644)  # resolvers may drop privileges before reading it
    return TlsFiles(
        directory / "ca.pem",
        directory / "server.pem",
        directory / "server.key",
        directory / "server-leaf.pem",
        key_type,
    )


def make_cluster_tls(directory: Path, days: int = 30) -> tuple[Path, Path, Path]:
    """A CA of its own and one certificate it signed, for a Dask cluster's TLS: ``ca.pem``,
    ``cluster.pem`` and ``cluster.key`` in ``directory`` (returned in that order). The scheduler,
    the workers and the orchestrator all present that certificate (server and client use) and
    accept only peers whose certificate the CA signed; Dask does not check host names, so one
    identity serves every host. ``ca.key`` stays in ``directory``: keep it to sign no more."""
    directory.mkdir(parents=True, exist_ok=True)
    ec = [*_NEWKEY[DEFAULT_KEY_TYPE], "-nodes"]
    _openssl(
        ["req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", str(days), "-subj",
         "/CN=dnscost cluster CA", "-addext", "basicConstraints=critical,CA:TRUE"],
        directory,
    )  # fmt: skip
    ext = directory / "cluster.ext"
    ext.write_text(
        "basicConstraints=critical,CA:FALSE\n"
        "keyUsage=critical,digitalSignature\n"
        "extendedKeyUsage=serverAuth,clientAuth\n"
        "subjectAltName=DNS:dnscost-cluster\n"
    )
    _openssl(["req", *ec, "-keyout", "cluster.key", "-out", "cluster.csr", "-subj", "/CN=dnscost-cluster"], directory)
    _openssl(
        ["x509", "-req", "-in", "cluster.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-out",
         "cluster.pem", "-days", str(days), "-extfile", "cluster.ext"],
        directory,
    )  # fmt: skip
    (directory / "cluster.key").chmod(0o600)
    (directory / "ca.key").chmod(0o600)
    return directory / "ca.pem", directory / "cluster.pem", directory / "cluster.key"
