//! Reading a pcap or pcapng file (any byte order, micro- or nanosecond times, pcapng's several
//! interfaces and time resolutions) with `pcap-parser`, streaming: each packet goes to a
//! callback with its time in microseconds, its link type and its octets.
//!
//! Packets come in the file's order, which must be their time order within
//! [`REORDER_MAX_US`]: a capture taken on several CPUs or interfaces puts a packet a little
//! before one stamped earlier, and that is read as it is; a clock that goes back further (a
//! clock stepped during the capture, files joined out of order, a damaged time) would make
//! durations negative and gaps absurd, and is refused at the packet where it goes back.

use std::io::Read;

use pcap_parser::pcapng::Block;
use pcap_parser::traits::PcapNGPacketBlock;
use pcap_parser::{create_reader, PcapBlockOwned, PcapError};

/// Why a capture could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("not a pcap or pcapng file")]
    NotACapture,
    #[error("empty file")]
    Empty,
    #[error("cut short after {packets} packets (its last block is incomplete)")]
    Truncated { packets: u64 },
    #[error("malformed after {packets} packets ({what})")]
    Malformed { packets: u64, what: String },
    #[error("unreadable: {0}")]
    Io(String),
    #[error(
        "its clock goes back {:.3} s at packet {packet} (packets more than {} s out of time order: \
         sort them by time first, e.g. with reordercap)",
        *back_us as f64 / 1e6,
        REORDER_MAX_US / 1_000_000
    )]
    Backwards { packet: u64, back_us: u64 },
}

/// How much earlier than the latest packet before it a packet may be stamped, and be read as
/// it comes (see the module).
pub const REORDER_MAX_US: u64 = 2_000_000;

/// What was read.
#[derive(Debug, Default, Clone, Copy)]
pub struct ReadCounts {
    pub packets: u64,
    /// Packets of a link type [`crate::packet::parse`] does not read.
    pub unsupported_link: u64,
}

/// Reads every packet of `input`, handing `(time_us, link_type, octets)` to `each`.
pub fn read(input: impl Read + Send, mut each: impl FnMut(u64, u32, &[u8])) -> Result<ReadCounts, ReadError> {
    let mut reader = match create_reader(1 << 20, input) {
        Ok(r) => r,
        Err(PcapError::Eof) => return Err(ReadError::Empty),
        Err(PcapError::ReadError) => return Err(ReadError::Io("read failed".into())),
        Err(_) => return Err(ReadError::NotACapture),
    };
    let mut counts = ReadCounts::default();
    // pcap: one link type and resolution; pcapng: per interface (link type, units per second).
    let mut legacy = (1u32, 1_000_000u64);
    let mut interfaces: Vec<(u32, u64, i64)> = Vec::new();
    let mut stalled = false;
    // The latest time read so far.
    let mut latest = 0u64;
    loop {
        match reader.next() {
            Ok((offset, block)) => {
                stalled = false;
                // A simple packet (pcapng) has no time: the latest read stands for it.
                let mut packet = |ts_us: Option<u64>, link: u32, data: &[u8]| {
                    let ts_us = ts_us.unwrap_or(latest);
                    counts.packets += 1;
                    if ts_us.saturating_add(REORDER_MAX_US) < latest {
                        return Err(ReadError::Backwards { packet: counts.packets, back_us: latest - ts_us });
                    }
                    latest = latest.max(ts_us);
                    if !crate::packet::supported(link) {
                        counts.unsupported_link += 1;
                    }
                    each(ts_us, link, data);
                    Ok(())
                };
                match block {
                    PcapBlockOwned::LegacyHeader(h) => {
                        legacy =
                            (h.network.0 as u32, if h.is_nanosecond_precision() { 1_000_000_000 } else { 1_000_000 });
                    }
                    PcapBlockOwned::Legacy(b) => {
                        let frac = b.ts_usec as u64 * 1_000_000 / legacy.1;
                        packet(Some(b.ts_sec as u64 * 1_000_000 + frac), legacy.0, b.data)?;
                    }
                    PcapBlockOwned::NG(Block::SectionHeader(_)) => interfaces.clear(),
                    PcapBlockOwned::NG(Block::InterfaceDescription(idb)) => {
                        interfaces.push((
                            idb.linktype.0 as u32,
                            idb.ts_resolution().unwrap_or(1_000_000),
                            idb.ts_offset(),
                        ));
                    }
                    PcapBlockOwned::NG(Block::EnhancedPacket(epb)) => {
                        let Some(&(link, units, offset_s)) = interfaces.get(epb.if_id as usize) else {
                            return Err(ReadError::Malformed {
                                packets: counts.packets,
                                what: format!("a packet of interface {} not described", epb.if_id),
                            });
                        };
                        let raw = ((epb.ts_high as u64) << 32) | epb.ts_low as u64;
                        // Saturating: a damaged resolution or offset gives an absurd time, not
                        // a wrapped one.
                        let units = units.max(1);
                        let us = (raw / units)
                            .saturating_mul(1_000_000)
                            .saturating_add(((raw % units) as u128 * 1_000_000 / units as u128) as u64);
                        let offset_us = offset_s.saturating_mul(1_000_000);
                        packet(Some(us.saturating_add_signed(offset_us)), link, epb.packet_data())?;
                    }
                    PcapBlockOwned::NG(Block::SimplePacket(spb)) => {
                        let link = interfaces.first().map_or(1, |i| i.0);
                        packet(None, link, spb.packet_data())?;
                    }
                    PcapBlockOwned::NG(_) => {}
                }
                reader.consume(offset);
            }
            Err(PcapError::Eof) => return Ok(counts),
            Err(PcapError::Incomplete(_)) => {
                if stalled && reader.reader_exhausted() {
                    return Err(ReadError::Truncated { packets: counts.packets });
                }
                stalled = true;
                reader.refill().map_err(|e| ReadError::Io(format!("{e:?}")))?;
            }
            Err(PcapError::UnexpectedEof) => return Err(ReadError::Truncated { packets: counts.packets }),
            Err(PcapError::BufferTooSmall) => {
                if !reader.grow(64 << 20) {
                    return Err(ReadError::Malformed {
                        packets: counts.packets,
                        what: "a block larger than 64 MiB".into(),
                    });
                }
            }
            Err(e) => {
                return Err(ReadError::Malformed {
                    packets: counts.packets,
                    what: format!("{e:?}").chars().take(80).collect(),
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pcap (raw IP) of empty packets at these times (seconds, microseconds).
    fn pcap(times: &[(u32, u32)]) -> Vec<u8> {
        let mut out = Vec::new();
        for v in [0xa1b2_c3d4u32, 0x0004_0002, 0, 0, 65535, 101] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        for &(s, us) in times {
            for v in [s, us, 0, 0] {
                out.extend_from_slice(&v.to_le_bytes());
            }
        }
        out
    }

    #[test]
    fn a_clock_that_goes_back_is_refused_at_the_packet_where_it_does() {
        let times = [(100, 0), (50, 0), (u32::MAX, 0), (0, 0), (1, 0), (2, 0)];
        let mut seen = Vec::new();
        let e = read(&pcap(&times)[..], |ts, _, _| seen.push(ts)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "its clock goes back 50.000 s at packet 2 (packets more than 2 s out of time order: sort them by \
             time first, e.g. with reordercap)"
        );
        assert_eq!(seen, [100_000_000]);
        // Forward to 2106, then back.
        let e = read(&pcap(&[(0, 0), (1, 0), (u32::MAX, 0), (2, 0)])[..], |_, _, _| {}).unwrap_err();
        assert!(matches!(e, ReadError::Backwards { packet: 4, .. }), "{e}");
    }

    #[test]
    fn packets_a_little_out_of_time_order_are_read_as_they_come() {
        let mut seen = Vec::new();
        let counts =
            read(&pcap(&[(10, 0), (9, 500_000), (8, 100_000), (12, 0)])[..], |ts, _, _| seen.push(ts)).unwrap();
        assert_eq!(counts.packets, 4);
        assert_eq!(seen, [10_000_000, 9_500_000, 8_100_000, 12_000_000]);
    }
}
