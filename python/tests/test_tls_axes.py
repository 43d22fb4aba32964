"""The certificate key type and the key-exchange group are experiment axes: a spec sweeps them,
each trial records them, and the target really serves a certificate of that key type (seen by
Python's own TLS client, which verifies it against the run's CA)."""

from __future__ import annotations

import socket
import ssl
import subprocess
from pathlib import Path

import pytest
from conftest import need
from dnscost import trial
from dnscost.plan import engine_knobs, expand
from dnscost.spec import parse_spec
from dnscost.transports import KEY_TYPES
from test_load import installed

SPEC = """
name = "keys"
targets = ["builtin"]
[[group]]
name = "establishment"
transports = ["udp", "tcp", "dot", "doh"]
lifetime = "1q"
cert_key = ["ecdsa-p256", "rsa-2048"]
tls_group = ["x25519", "secp256r1"]
"""


def test_key_type_and_group_are_swept_for_tls_only() -> None:
    plan = expand(parse_spec(SPEC))
    ids = sorted(t.id for t in plan)
    assert "establishment-builtin-dot-rsa-2048-secp256r1-r0" in ids
    cells = [t for t in plan if t.group != "reference"]  # the round's UDP reference aside
    assert sum(t.transport == "tcp" for t in cells) == 1 and sum(t.transport == "udp" for t in cells) == 1
    assert sum(t.transport == "doh" for t in plan) == 4
    keys = [t.params["cert_key"] for t in plan if t.params["cert_key"]]
    assert keys == sorted(keys), "trials of one key type run together"
    dot = next(t for t in plan if t.id == "establishment-builtin-dot-rsa-2048-secp256r1-r0")
    assert engine_knobs(dot)["tls_group"] == "secp256r1"
    assert "tls_group" not in engine_knobs(next(t for t in plan if t.transport == "tcp"))


def _served_key(host: str, port: int, ca: Path) -> str:
    ctx = ssl.create_default_context(cafile=str(ca))
    with (
        socket.create_connection((host, port), timeout=5) as raw,
        ctx.wrap_socket(raw, server_hostname="localhost") as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    text = subprocess.run(
        ["openssl", "x509", "-inform", "DER", "-noout", "-text"], input=der, capture_output=True, check=True
    ).stdout.decode()
    line = next(line for line in text.splitlines() if "Public Key Algorithm" in line)
    return line.split(":", 1)[1].strip()


ALGORITHM = {"ecdsa-p256": "id-ecPublicKey", "rsa-2048": "rsaEncryption", "ed25519": "ED25519"}


@pytest.mark.resolver
@pytest.mark.parametrize("target", ["builtin", "dnsdist"])
@pytest.mark.parametrize("key", KEY_TYPES)
def test_the_target_serves_the_key_type_asked_for(root: None, tmp_path: Path, target: str, key: str) -> None:
    need(installed(target), f"{target} is not installed")
    bed = trial.Testbed.create(
        target, tmp_path, target_cpus=[0], upstream_cpus=[1], names=100, tld="test", transports=["dot"], cert_key=key
    )
    try:
        bed.target.start()
        ep = bed.target.endpoints["dot"]
        assert _served_key(ep.host, ep.port, bed.tls.ca) == ALGORITHM[key]
    finally:
        bed.stop()
