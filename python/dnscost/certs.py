"""A certificate authority made for one run, and a server certificate it signed for
localhost, 127.0.0.1, ::1 and the addresses it is given (ECDSA P-256, like most DoT and DoH
deployments), with openssl."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from dnscost.errors import MachineError

__all__ = ["TlsFiles", "make_tls"]


@dataclass(frozen=True)
class TlsFiles:
    ca: Path
    cert: Path
    """The server certificate followed by the CA (a chain)."""
    key: Path
    leaf: Path
    """The server certificate alone."""


def _openssl(args: list[str], cwd: Path) -> None:
    try:
        r = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, check=False)
    except FileNotFoundError as e:
        raise MachineError("openssl not found (run scripts/setup)") from e
    if r.returncode != 0:
        raise MachineError(f"openssl {args[0]} failed: {r.stderr.strip().splitlines()[-1:]}")


def make_tls(directory: Path, days: int = 30, addresses: Sequence[str] = ()) -> TlsFiles:
    """Writes ca.pem, server.pem (chain), server-leaf.pem and server.key into ``directory``.
    The certificate also covers ``addresses`` (a target's address in its own namespace)."""
    directory.mkdir(parents=True, exist_ok=True)
    ext = directory / "server.ext"
    names = ["DNS:localhost", "IP:127.0.0.1", "IP:::1", *(f"IP:{a}" for a in addresses if a != "127.0.0.1")]
    ext.write_text(
        "basicConstraints=critical,CA:FALSE\n"
        "keyUsage=critical,digitalSignature\n"
        "extendedKeyUsage=serverAuth\n"
        f"subjectAltName={','.join(names)}\n"
    )
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
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
        directory / "ca.pem", directory / "server.pem", directory / "server.key", directory / "server-leaf.pem"
    )
