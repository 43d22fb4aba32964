//! One captured frame's IP, TCP or UDP headers, parsed by hand: Ethernet (with VLAN tags),
//! Linux cooked (SLL, SLL2), BSD loopback and raw IP link layers; IPv4 and IPv6 (extension
//! headers skipped). A frame cut short by the capture's snap length still yields its headers
//! and the payload length its IP header declares (`payload_len`), beside the octets kept.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The link types read (values of the pcap LINKTYPE registry).
pub const LINK_NULL: u32 = 0;
pub const LINK_ETHERNET: u32 = 1;
pub const LINK_RAW: u32 = 101;
pub const LINK_LOOP: u32 = 108;
pub const LINK_SLL: u32 = 113;
pub const LINK_IPV4: u32 = 228;
pub const LINK_IPV6: u32 = 229;
pub const LINK_SLL2: u32 = 276;

/// Whether a link type is one [`parse`] reads.
pub fn supported(link: u32) -> bool {
    matches!(link, LINK_NULL | LINK_ETHERNET | LINK_RAW | LINK_LOOP | LINK_SLL | LINK_IPV4 | LINK_IPV6 | LINK_SLL2)
}

/// TCP flag bits.
pub const FIN: u8 = 0x01;
pub const SYN: u8 = 0x02;
pub const RST: u8 = 0x04;
pub const ACK: u8 = 0x10;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Segment {
    Tcp { seq: u32, flags: u8 },
    Udp,
}

/// A TCP segment or UDP datagram.
#[derive(Debug, Clone, Copy)]
pub struct Packet<'a> {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub sport: u16,
    pub dport: u16,
    pub segment: Segment,
    /// The payload octets captured (fewer than `payload_len` when the frame was cut short).
    pub payload: &'a [u8],
    /// The payload's length by the headers.
    pub payload_len: usize,
}

impl Packet<'_> {
    /// Whether the capture kept the whole payload.
    pub fn whole(&self) -> bool {
        self.payload.len() >= self.payload_len
    }
}

fn u16_at(b: &[u8], i: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(i)?, *b.get(i + 1)?]))
}

/// The TCP or UDP packet in a frame of link type `link`; None for anything else (ARP, ICMP,
/// fragments after the first, headers cut short).
pub fn parse(link: u32, frame: &[u8]) -> Option<Packet<'_>> {
    let (ethertype, ip) = match link {
        LINK_ETHERNET => {
            let mut at = 12;
            let mut ethertype = u16_at(frame, at)?;
            while ethertype == 0x8100 || ethertype == 0x88a8 {
                at += 4;
                ethertype = u16_at(frame, at)?;
            }
            (ethertype, frame.get(at + 2..)?)
        }
        LINK_SLL => (u16_at(frame, 14)?, frame.get(16..)?),
        LINK_SLL2 => (u16_at(frame, 0)?, frame.get(20..)?),
        LINK_NULL | LINK_LOOP => {
            let family = frame.get(..4)?;
            // The family is in the capturing host's byte order (NULL) or network order (LOOP).
            let v = if family[0] == 0 && family[1] == 0 {
                family[2] as u32 * 256 + family[3] as u32
            } else {
                family[0] as u32
            };
            (if v == 2 { 0x0800 } else { 0x86dd }, frame.get(4..)?)
        }
        LINK_RAW | LINK_IPV4 | LINK_IPV6 => (if frame.first()? >> 4 == 4 { 0x0800 } else { 0x86dd }, frame),
        _ => return None,
    };
    match ethertype {
        0x0800 => ipv4(ip),
        0x86dd => ipv6(ip),
        _ => None,
    }
}

fn ipv4(b: &[u8]) -> Option<Packet<'_>> {
    if b.first()? >> 4 != 4 {
        return None;
    }
    let ihl = (b[0] & 0x0f) as usize * 4;
    let total = u16_at(b, 2)? as usize;
    let fragment = u16_at(b, 6)?;
    if fragment & 0x1fff != 0 || ihl < 20 || total < ihl {
        return None; // a later fragment: no transport header
    }
    let src = Ipv4Addr::from(<[u8; 4]>::try_from(b.get(12..16)?).ok()?);
    let dst = Ipv4Addr::from(<[u8; 4]>::try_from(b.get(16..20)?).ok()?);
    transport(b[9], src.into(), dst.into(), b.get(ihl..)?, total - ihl)
}

fn ipv6(b: &[u8]) -> Option<Packet<'_>> {
    if b.first()? >> 4 != 6 {
        return None;
    }
    let mut len = u16_at(b, 4)? as usize;
    let mut next = *b.get(6)?;
    let src = Ipv6Addr::from(<[u8; 16]>::try_from(b.get(8..24)?).ok()?);
    let dst = Ipv6Addr::from(<[u8; 16]>::try_from(b.get(24..40)?).ok()?);
    let mut at = 40;
    // Hop-by-hop, routing, destination options: skipped; a fragment header: only a first one.
    loop {
        match next {
            0 | 43 | 60 => {
                let ext = (*b.get(at + 1)? as usize + 1) * 8;
                next = *b.get(at)?;
                at += ext;
                len = len.checked_sub(ext)?;
            }
            44 => {
                if u16_at(b, at + 2)? & 0xfff8 != 0 {
                    return None;
                }
                next = *b.get(at)?;
                at += 8;
                len = len.checked_sub(8)?;
            }
            _ => break,
        }
    }
    transport(next, src.into(), dst.into(), b.get(at..)?, len)
}

fn transport<'a>(proto: u8, src: IpAddr, dst: IpAddr, b: &'a [u8], len: usize) -> Option<Packet<'a>> {
    let (segment, header) = match proto {
        6 => {
            let seq = u32::from_be_bytes(<[u8; 4]>::try_from(b.get(4..8)?).ok()?);
            (Segment::Tcp { seq, flags: *b.get(13)? }, (*b.get(12)? >> 4) as usize * 4)
        }
        17 => (Segment::Udp, 8),
        _ => return None,
    };
    // UDP says its own length; TCP's payload is what the IP header leaves after its header.
    let declared = if segment == Segment::Udp { u16_at(b, 4)? as usize } else { len };
    let payload_len = declared.checked_sub(header)?;
    let payload = b.get(header..).unwrap_or(&[]);
    let payload = &payload[..payload.len().min(payload_len)];
    Some(Packet { src, dst, sport: u16_at(b, 0)?, dport: u16_at(b, 2)?, segment, payload, payload_len })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn udp(dport: u16, payload: &[u8]) -> Vec<u8> {
        let mut v = 40000u16.to_be_bytes().to_vec();
        v.extend(dport.to_be_bytes());
        v.extend(((8 + payload.len()) as u16).to_be_bytes());
        v.extend([0, 0]);
        v.extend(payload);
        v
    }

    fn ipv6(next: u8, payload: &[u8]) -> Vec<u8> {
        let mut v = vec![0x60, 0, 0, 0];
        v.extend((payload.len() as u16).to_be_bytes());
        v.extend([next, 64]);
        v.extend([0u8; 15]);
        v.push(1); // ::1
        v.extend([0u8; 15]);
        v.push(2); // ::2
        v.extend(payload);
        v
    }

    #[test]
    fn ipv6_behind_a_vlan_tag_and_an_extension_header() {
        // A hop-by-hop header (8 octets) before UDP.
        let mut ext = vec![17, 0, 0, 0, 0, 0, 0, 0];
        ext.extend(udp(53, b"hello"));
        let mut frame = vec![0u8; 12];
        frame.extend([0x81, 0x00, 0, 7, 0x86, 0xdd]);
        frame.extend(ipv6(0, &ext));
        let p = parse(LINK_ETHERNET, &frame).unwrap();
        assert_eq!((p.dst.to_string().as_str(), p.dport, p.payload, p.payload_len), ("::2", 53, &b"hello"[..], 5));
        assert!(p.whole() && p.segment == Segment::Udp);
    }

    #[test]
    fn linux_cooked_v2_and_a_payload_cut_short() {
        let mut frame = vec![0x08, 0x00];
        frame.extend([0u8; 18]);
        let mut ip = vec![0x45, 0, 0, 0, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 53];
        let l4 = udp(53, &[7u8; 100]);
        ip[2..4].copy_from_slice(&((20 + l4.len()) as u16).to_be_bytes());
        ip.extend(&l4[..30]); // the capture kept 22 of the 100 payload octets
        frame.extend(ip);
        let p = parse(LINK_SLL2, &frame).unwrap();
        assert_eq!((p.src.to_string().as_str(), p.payload.len(), p.payload_len), ("10.0.0.1", 22, 100));
        assert!(!p.whole());
        // A later fragment has no transport header: none.
        frame[20 + 6] = 0x00;
        frame[20 + 7] = 0x10;
        assert!(parse(LINK_SLL2, &frame).is_none());
    }
}
