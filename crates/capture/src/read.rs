//! Reading a pcap or pcapng file (any byte order, micro- or nanosecond times, pcapng's several
//! interfaces and time resolutions) with `pcap-parser`, streaming: each packet goes to a
//! callback with its time in microseconds, its link type and its octets.

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
}

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
    loop {
        match reader.next() {
            Ok((offset, block)) => {
                stalled = false;
                let mut packet = |ts_us: u64, link: u32, data: &[u8]| {
                    counts.packets += 1;
                    if !crate::packet::supported(link) {
                        counts.unsupported_link += 1;
                    }
                    each(ts_us, link, data);
                };
                match block {
                    PcapBlockOwned::LegacyHeader(h) => {
                        legacy =
                            (h.network.0 as u32, if h.is_nanosecond_precision() { 1_000_000_000 } else { 1_000_000 });
                    }
                    PcapBlockOwned::Legacy(b) => {
                        let frac = b.ts_usec as u64 * 1_000_000 / legacy.1;
                        packet(b.ts_sec as u64 * 1_000_000 + frac, legacy.0, b.data);
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
                        let us = (raw / units) * 1_000_000 + (raw % units) * 1_000_000 / units;
                        packet(us.saturating_add_signed(offset_s * 1_000_000), link, epb.packet_data());
                    }
                    PcapBlockOwned::NG(Block::SimplePacket(spb)) => {
                        let link = interfaces.first().map_or(1, |i| i.0);
                        packet(0, link, spb.packet_data());
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
