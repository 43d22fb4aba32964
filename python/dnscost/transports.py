"""The DNS transports dnscost measures, named once: the token every spec, table and engine
configuration uses, the name the docs and figures print, which ones run over TLS or over
datagrams, and the certificate key types the TLS ones are measured with (``dnscost.certs``
makes them). Imports nothing, so every layer can use it (the analysis too, which must not
import ``certs``: it runs openssl)."""

from __future__ import annotations

from enum import StrEnum

__all__ = [
    "DATAGRAM_TRANSPORTS",
    "DEFAULT_KEY_TYPE",
    "KEY_TYPES",
    "POPULATION",
    "QUIC_TRANSPORTS",
    "STREAM_TRANSPORTS",
    "TLS_TRANSPORTS",
    "TRANSPORTS",
    "Transport",
    "display_name",
]


POPULATION = "population"
"""The transport of a trial that replays a population: each of its classes has its own."""


class Transport(StrEnum):
    """A transport, as its token (``Transport("doh") == "doh"``)."""

    UDP = "udp"
    TCP = "tcp"
    DOT = "dot"
    DOH = "doh"
    DOQ = "doq"
    DOH3 = "doh3"

    @property
    def display(self) -> str:
        """How the docs and figures write it: ``DoT``, ``DoH/3``."""
        return _DISPLAY[self]


_DISPLAY = {
    Transport.UDP: "UDP",
    Transport.TCP: "TCP",
    Transport.DOT: "DoT",
    Transport.DOH: "DoH",
    Transport.DOQ: "DoQ",
    Transport.DOH3: "DoH/3",
}

TRANSPORTS: tuple[str, ...] = tuple(t.value for t in Transport)
"""Every transport's token, in the order tables and figures list them."""
TLS_TRANSPORTS: tuple[str, ...] = ("dot", "doh", "doq", "doh3")
DATAGRAM_TRANSPORTS: tuple[str, ...] = ("udp", "doq", "doh3")
"""The transports over UDP datagrams (QUIC's included)."""
QUIC_TRANSPORTS: tuple[str, ...] = ("doq", "doh3")
"""The transports over QUIC: a server holds them all on one UDP socket."""
STREAM_TRANSPORTS: tuple[str, ...] = ("tcp", "dot", "doh")
"""The transports over TCP connections, which the kernel counts (``Tcp: PassiveOpens``)."""


KEY_TYPES: tuple[str, ...] = ("ecdsa-p256", "rsa-2048", "ed25519")
"""Certificate key types (CA and server alike), an experiment axis: a full handshake costs the
server mostly the certificate's signature."""
DEFAULT_KEY_TYPE = "ecdsa-p256"
"""The key type of the figures, the headline and the cost model (most DoT and DoH deployments')."""


def display_name(token: str) -> str:
    """``Transport(token).display``, or the token itself when it names no transport (a client
    profile's label)."""
    try:
        return Transport(token).display
    except ValueError:
        return token
