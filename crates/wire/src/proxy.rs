//! The PROXY protocol's version 2 header (HAProxy's `proxy-protocol.txt`, §2.2), as a client
//! behind a proxy arrives at a server that accepts it: ahead of each datagram, or at the start
//! of a connection. Only the `PROXY` command with the addresses and ports, no TLVs.

use std::net::{IpAddr, SocketAddr};

/// The twelve octets every version 2 header starts with.
pub const PROXY_V2_SIGNATURE: [u8; 12] = [0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A];

/// The header saying that `client` sent this to `server`, over a stream (TCP) or datagrams
/// (UDP). None when the two addresses are not of one family (the header has one for both).
pub fn proxy_v2_header(stream: bool, client: SocketAddr, server: SocketAddr) -> Option<Vec<u8>> {
    // Version 2, command PROXY; then the family (1: IPv4, 2: IPv6) and the protocol (1: stream,
    // 2: datagram).
    let protocol = if stream { 0x1 } else { 0x2 };
    let mut out = Vec::with_capacity(16 + 36);
    out.extend_from_slice(&PROXY_V2_SIGNATURE);
    out.push(0x21);
    match (client.ip(), server.ip()) {
        (IpAddr::V4(c), IpAddr::V4(s)) => {
            out.push(0x10 | protocol);
            out.extend_from_slice(&12u16.to_be_bytes());
            out.extend_from_slice(&c.octets());
            out.extend_from_slice(&s.octets());
        }
        (IpAddr::V6(c), IpAddr::V6(s)) => {
            out.push(0x20 | protocol);
            out.extend_from_slice(&36u16.to_be_bytes());
            out.extend_from_slice(&c.octets());
            out.extend_from_slice(&s.octets());
        }
        _ => return None,
    }
    out.extend_from_slice(&client.port().to_be_bytes());
    out.extend_from_slice(&server.port().to_be_bytes());
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ipv4_stream_header_is_the_specs_layout() {
        let h = proxy_v2_header(true, "10.1.2.3:40000".parse().unwrap(), "127.0.0.1:853".parse().unwrap()).unwrap();
        // The spec's §2.2: signature, ver_cmd 0x21, fam 0x11 (TCP over IPv4), length 12, then
        // source and destination address, source and destination port, in network order.
        let mut want = b"\r\n\r\n\0\r\nQUIT\n".to_vec();
        want.extend_from_slice(&[0x21, 0x11, 0, 12, 10, 1, 2, 3, 127, 0, 0, 1, 0x9C, 0x40, 0x03, 0x55]);
        assert_eq!(h, want);
    }

    #[test]
    fn an_ipv6_datagram_header_carries_36_octets_of_addresses() {
        let h = proxy_v2_header(false, "[fd00::7]:5353".parse().unwrap(), "[::1]:53".parse().unwrap()).unwrap();
        assert_eq!(h.len(), 16 + 36);
        assert_eq!(&h[12..16], &[0x21, 0x22, 0, 36]);
        assert_eq!(h[16..32], "fd00::7".parse::<std::net::Ipv6Addr>().unwrap().octets());
        assert_eq!(h[32..48], std::net::Ipv6Addr::LOCALHOST.octets());
        assert_eq!(&h[48..], &[0x14, 0xE9, 0, 53]);
    }

    #[test]
    fn addresses_of_two_families_make_no_header() {
        assert_eq!(proxy_v2_header(true, "10.0.0.1:1".parse().unwrap(), "[::1]:53".parse().unwrap()), None);
    }
}
