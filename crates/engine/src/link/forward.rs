//! One direction of the link: a thread that reads packets from one TUN device, has the
//! direction's shaper decide each one's fate, holds the ones it delivers until their time and
//! then writes them to the other device. It sleeps in `ppoll` until a packet arrives or its
//! timerfd, armed at the next packet's time (no slack), fires, so it never spins; packets wait
//! in FIFOs (a path never reorders) in buffers taken from a pool, so the steady state
//! allocates nothing.

use super::shaper::{Shaper, Verdict};
use super::sys;
use dnscost_load::Rng;
use serde::Serialize;
use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, Read, Write};
use std::net::Ipv4Addr;

/// Any IP packet fits.
const READ_BUFFER: usize = 65_536;
/// Packets read in a row before due packets are written.
const READ_BATCH: usize = 64;

/// What one path did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    packets_read: u64,
    bytes_read: u64,
    packets_delivered: u64,
    bytes_delivered: u64,
    packets_dropped_loss: u64,
    bytes_dropped_loss: u64,
    packets_dropped_queue: u64,
    bytes_dropped_queue: u64,
    write_errors: u64,
    packets_pending_at_exit: u64,
    delay_min_ns: u64,
    delay_max_ns: u64,
    delay_sum_ns: u64,
}

impl Counts {
    fn delivered(&mut self, len: usize, delay_ns: u64) {
        self.delay_min_ns = if self.packets_delivered == 0 { delay_ns } else { self.delay_min_ns.min(delay_ns) };
        self.delay_max_ns = self.delay_max_ns.max(delay_ns);
        self.delay_sum_ns += delay_ns;
        self.packets_delivered += 1;
        self.bytes_delivered += len as u64;
    }

    /// Both paths' counts together.
    pub fn merge(&self, other: &Counts) -> Counts {
        let min = match (self.packets_delivered, other.packets_delivered) {
            (0, _) => other.delay_min_ns,
            (_, 0) => self.delay_min_ns,
            _ => self.delay_min_ns.min(other.delay_min_ns),
        };
        Counts {
            packets_read: self.packets_read + other.packets_read,
            bytes_read: self.bytes_read + other.bytes_read,
            packets_delivered: self.packets_delivered + other.packets_delivered,
            bytes_delivered: self.bytes_delivered + other.bytes_delivered,
            packets_dropped_loss: self.packets_dropped_loss + other.packets_dropped_loss,
            bytes_dropped_loss: self.bytes_dropped_loss + other.bytes_dropped_loss,
            packets_dropped_queue: self.packets_dropped_queue + other.packets_dropped_queue,
            bytes_dropped_queue: self.bytes_dropped_queue + other.bytes_dropped_queue,
            write_errors: self.write_errors + other.write_errors,
            packets_pending_at_exit: self.packets_pending_at_exit + other.packets_pending_at_exit,
            delay_min_ns: min,
            delay_max_ns: self.delay_max_ns.max(other.delay_max_ns),
            delay_sum_ns: self.delay_sum_ns + other.delay_sum_ns,
        }
    }

    /// The counts as the stats line shows them, with the delay each delivered packet was
    /// held, from its read to its write, in µs (none when nothing was delivered).
    pub fn report(&self) -> CountsReport {
        let delivered = self.packets_delivered;
        let us = |ns: u64| (delivered > 0).then(|| (ns + 500) / 1000);
        CountsReport {
            packets_read: self.packets_read,
            bytes_read: self.bytes_read,
            packets_delivered: self.packets_delivered,
            bytes_delivered: self.bytes_delivered,
            packets_dropped_loss: self.packets_dropped_loss,
            bytes_dropped_loss: self.bytes_dropped_loss,
            packets_dropped_queue: self.packets_dropped_queue,
            bytes_dropped_queue: self.bytes_dropped_queue,
            write_errors: self.write_errors,
            packets_pending_at_exit: self.packets_pending_at_exit,
            delay_min_us: us(self.delay_min_ns),
            delay_mean_us: us(self.delay_sum_ns.checked_div(delivered).unwrap_or(0)),
            delay_max_us: us(self.delay_max_ns),
        }
    }
}

/// [`Counts`] as the stats line shows them.
#[derive(Debug, Serialize)]
pub struct CountsReport {
    packets_read: u64,
    bytes_read: u64,
    packets_delivered: u64,
    bytes_delivered: u64,
    packets_dropped_loss: u64,
    bytes_dropped_loss: u64,
    packets_dropped_queue: u64,
    bytes_dropped_queue: u64,
    write_errors: u64,
    packets_pending_at_exit: u64,
    delay_min_us: Option<u64>,
    delay_mean_us: Option<u64>,
    delay_max_us: Option<u64>,
}

/// A packet held until its time.
struct Held {
    packet: Vec<u8>,
    read_ns: u64,
    at_ns: u64,
}

/// One path of a direction: its shaper, its draws, the packets it holds, its counts.
pub struct Path {
    shaper: Shaper,
    rng: Rng,
    held: VecDeque<Held>,
    counts: Counts,
}

impl Path {
    pub fn new(shaper: Shaper, rng: Rng) -> Path {
        Path { shaper, rng, held: VecDeque::new(), counts: Counts::default() }
    }

    /// Writes every held packet that is due (on CLOCK_MONOTONIC, the timerfd's clock); returns
    /// when the next one is.
    fn deliver_due(&mut self, output: &File, pool: &mut Vec<Vec<u8>>) -> Option<u64> {
        while let Some(next) = self.held.front() {
            let now = sys::monotonic_ns();
            if next.at_ns > now {
                return Some(next.at_ns);
            }
            let Held { packet, read_ns, .. } = self.held.pop_front().expect("a front");
            match (&*output).write(&packet) {
                Ok(_) => self.counts.delivered(packet.len(), now - read_ns),
                // The other device is down, or refused the packet: what a real link's
                // receiver would drop.
                Err(_) => self.counts.write_errors += 1,
            }
            pool.push(packet);
        }
        None
    }

    fn offer(&mut self, packet: &[u8], now_ns: u64, pool: &mut Vec<Vec<u8>>) {
        let len = packet.len();
        self.counts.packets_read += 1;
        self.counts.bytes_read += len as u64;
        match self.shaper.offer(now_ns, len, &mut self.rng) {
            Verdict::Lost => {
                self.counts.packets_dropped_loss += 1;
                self.counts.bytes_dropped_loss += len as u64;
            }
            Verdict::QueueFull => {
                self.counts.packets_dropped_queue += 1;
                self.counts.bytes_dropped_queue += len as u64;
            }
            Verdict::Deliver(at_ns) => {
                let mut buffer = pool.pop().unwrap_or_default();
                buffer.clear();
                buffer.extend_from_slice(packet);
                self.held.push_back(Held { packet: buffer, read_ns: now_ns, at_ns });
            }
        }
    }

    fn finish(mut self) -> Counts {
        self.counts.packets_pending_at_exit = self.held.len() as u64;
        self.counts
    }
}

/// A direction: its main path, and the split path taken by IPv4 packets from or to the split
/// address.
pub struct Direction {
    pub main: Path,
    pub split: Option<(Ipv4Addr, Path)>,
}

impl Direction {
    fn path_for(&mut self, packet: &[u8]) -> &mut Path {
        match &mut self.split {
            Some((address, split)) if touches(packet, *address) => split,
            _ => &mut self.main,
        }
    }
}

/// Whether an IPv4 packet's source or destination is `address`.
fn touches(packet: &[u8], address: Ipv4Addr) -> bool {
    let a = address.octets();
    packet.len() >= 20 && packet[0] >> 4 == 4 && (packet[12..16] == a || packet[16..20] == a)
}

/// What a direction did, and the error that stopped it early if one did.
pub struct Outcome {
    pub main: Counts,
    pub split: Option<Counts>,
    pub error: Option<io::Error>,
}

/// Carries packets from `input` to `output` until `stop` becomes readable or a system call
/// fails.
pub fn run(mut direction: Direction, input: &File, output: &File, stop: &File) -> Outcome {
    let mut scratch = vec![0u8; READ_BUFFER];
    let mut pool: Vec<Vec<u8>> = Vec::new();
    let error = match sys::TimerFd::new() {
        Err(e) => Some(e),
        Ok(timer) => {
            let mut armed = None;
            loop {
                let mut next = direction.main.deliver_due(output, &mut pool);
                if let Some((_, split)) = &mut direction.split {
                    next = match (next, split.deliver_due(output, &mut pool)) {
                        (Some(a), Some(b)) => Some(a.min(b)),
                        (a, b) => a.or(b),
                    };
                }
                // Set only when it changes: once fired, the timer's packet is delivered, so
                // the next time differs.
                if next != armed {
                    if let Err(e) = timer.set(next) {
                        break Some(e);
                    }
                    armed = next;
                }
                let [readable, stopped, _] = match sys::wait_readable([input, stop, timer.file()]) {
                    Ok(ready) => ready,
                    Err(e) => break Some(e),
                };
                if stopped {
                    break None;
                }
                if readable {
                    if let Err(e) = read_batch(&mut direction, input, &mut scratch, &mut pool) {
                        break Some(e);
                    }
                }
            }
        }
    };
    Outcome { main: direction.main.finish(), split: direction.split.map(|(_, p)| p.finish()), error }
}

/// Reads what is waiting, up to [`READ_BATCH`] packets.
fn read_batch(direction: &mut Direction, input: &File, scratch: &mut [u8], pool: &mut Vec<Vec<u8>>) -> io::Result<()> {
    for _ in 0..READ_BATCH {
        let len = match (&*input).read(scratch) {
            Ok(0) => return Ok(()),
            Ok(len) => len,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let now = sys::monotonic_ns();
        let packet = &scratch[..len];
        direction.path_for(packet).offer(packet, now, pool);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_takes_packets_from_or_to_its_address() {
        let mut packet = [0u8; 28];
        packet[0] = 0x45;
        packet[12..16].copy_from_slice(&[198, 18, 0, 2]);
        packet[16..20].copy_from_slice(&[198, 18, 1, 1]);
        assert!(touches(&packet, Ipv4Addr::new(198, 18, 1, 1)));
        assert!(touches(&packet, Ipv4Addr::new(198, 18, 0, 2)));
        assert!(!touches(&packet, Ipv4Addr::new(198, 18, 0, 1)));
        assert!(!touches(&packet[..19], Ipv4Addr::new(198, 18, 1, 1)));
        packet[0] = 0x60;
        assert!(!touches(&packet, Ipv4Addr::new(198, 18, 1, 1)));
    }

    #[test]
    fn counts_merge_and_report_their_delays() {
        let mut a = Counts::default();
        a.delivered(100, 10_000);
        a.delivered(100, 30_000);
        let b = Counts::default();
        let m = a.merge(&b);
        assert_eq!(m.packets_delivered, 2);
        assert_eq!((m.delay_min_ns, m.delay_max_ns), (10_000, 30_000));
        let json = serde_json::to_value(m.report()).unwrap();
        assert_eq!(json["delay_min_us"], 10);
        assert_eq!(json["delay_mean_us"], 20);
        assert_eq!(json["delay_max_us"], 30);
        assert_eq!(json["bytes_delivered"], 200);
        assert!(serde_json::to_value(b.report()).unwrap()["delay_min_us"].is_null());
        assert_eq!(b.merge(&a).delay_min_ns, 10_000);
    }
}
