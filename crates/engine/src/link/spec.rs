//! The link's command-line values, parsed and validated: an end (`NETNS:DEVICE`) and what a
//! direction does to packets (`delay=35ms,jitter=1ms,loss=1%,rate=12000kbit,queue=1000`). Pure.

use std::net::Ipv4Addr;
use std::path::PathBuf;

/// The longest delay plus jitter a direction may hold a packet for.
pub const MAX_DELAY_NS: u64 = 10_000_000_000;
/// netem's default `limit`.
pub const DEFAULT_QUEUE: u32 = 1000;
const MAX_QUEUE: u32 = 1_000_000;
const MIN_RATE_BPS: f64 = 1e3;
const MAX_RATE_BPS: f64 = 1e11;
/// IFNAMSIZ − 1.
const MAX_DEVICE_LEN: usize = 15;

/// Why an argument of `link` is invalid.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SpecError {
    /// An item of a specification is not `key=value`.
    #[error("{0:?} is not key=value")]
    Item(String),
    /// A key other than delay, jitter, loss, rate and queue.
    #[error("unknown key {0:?} (expected delay, jitter, loss, rate or queue)")]
    UnknownKey(String),
    /// The same key twice in one specification.
    #[error("{0} is given twice")]
    Repeated(&'static str),
    /// A value out of its range or in the wrong form.
    #[error("{key}: {value:?} is not {expected}")]
    Value { key: &'static str, value: String, expected: &'static str },
    /// delay + jitter above [`MAX_DELAY_NS`].
    #[error("delay + jitter is above 10 s")]
    TooLong,
    /// `queue` without `rate`: only the bottleneck has a queue.
    #[error("queue needs rate (only the bottleneck queues)")]
    QueueWithoutRate,
    /// An end that is not `NETNS:DEVICE`.
    #[error("{value:?} is not NETNS:DEVICE: {reason}")]
    End { value: String, reason: &'static str },
    /// `--split` that is not an IPv4 address.
    #[error("{0:?} is not an IPv4 address")]
    Address(String),
    /// Both ends name the same device in the same namespace.
    #[error("--a and --b are the same device")]
    SameDevice,
    /// A split direction's parameters without `--split`.
    #[error("{0} needs --split ADDRESS")]
    SplitWithoutAddress(&'static str),
}

/// What one direction does to the packets it carries. The default carries them untouched.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Impairment {
    /// Propagation delay, after the bottleneck.
    pub delay_ns: u64,
    /// Each packet's delay is `delay` plus a uniform draw in [−jitter, +jitter].
    pub jitter_ns: u64,
    /// Probability that a packet is dropped on arrival (0–1).
    pub loss: f64,
    /// The bottleneck's rate in bits per second; `None`: no bottleneck.
    pub rate_bps: Option<u64>,
    /// Packets the bottleneck holds (being sent or waiting) before it drops the next one.
    pub queue: u32,
}

impl Default for Impairment {
    fn default() -> Self {
        Impairment { delay_ns: 0, jitter_ns: 0, loss: 0.0, rate_bps: None, queue: DEFAULT_QUEUE }
    }
}

impl std::str::FromStr for Impairment {
    type Err = SpecError;

    /// `key=value` items separated by commas, each key at most once; the empty string is the
    /// default (nothing done to packets).
    fn from_str(s: &str) -> Result<Self, SpecError> {
        let mut imp = Impairment::default();
        let mut seen: Vec<&'static str> = Vec::new();
        for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (key, value) = item.split_once('=').ok_or_else(|| SpecError::Item(item.to_string()))?;
            let key: &'static str = match key.trim() {
                "delay" => "delay",
                "jitter" => "jitter",
                "loss" => "loss",
                "rate" => "rate",
                "queue" => "queue",
                other => return Err(SpecError::UnknownKey(other.to_string())),
            };
            if seen.contains(&key) {
                return Err(SpecError::Repeated(key));
            }
            seen.push(key);
            let value = value.trim();
            let bad = |expected| SpecError::Value { key, value: value.to_string(), expected };
            match key {
                "delay" => imp.delay_ns = parse_duration_ns(value).ok_or_else(|| bad(DURATION))?,
                "jitter" => imp.jitter_ns = parse_duration_ns(value).ok_or_else(|| bad(DURATION))?,
                "loss" => imp.loss = parse_probability(value).ok_or_else(|| bad(PROBABILITY))?,
                "rate" => imp.rate_bps = Some(parse_rate_bps(value).ok_or_else(|| bad(RATE))?),
                _ => {
                    imp.queue = value.parse().ok().filter(|q| (1..=MAX_QUEUE).contains(q)).ok_or_else(|| bad(QUEUE))?
                }
            }
        }
        if imp.delay_ns + imp.jitter_ns > MAX_DELAY_NS {
            return Err(SpecError::TooLong);
        }
        if seen.contains(&"queue") && !seen.contains(&"rate") {
            return Err(SpecError::QueueWithoutRate);
        }
        Ok(imp)
    }
}

const DURATION: &str = "a duration ≥ 0 with a unit (35ms, 500us, 1.5s)";
const PROBABILITY: &str = "a probability from 0 to 1 or 0% to 100% (0.01, 1%)";
const RATE: &str = "a rate from 1kbit to 100gbit (12000kbit, 12mbit; bit, kbit, mbit, gbit per second)";
const QUEUE: &str = "a number of packets from 1 to 1000000";

/// `35ms`, `500us`, `1.5s`, `0`: nanoseconds, or `None` when negative, unitless (but 0) or
/// too long.
pub fn parse_duration_ns(s: &str) -> Option<u64> {
    if s == "0" {
        return Some(0);
    }
    let (number, unit_ns) = if let Some(n) = s.strip_suffix("ms") {
        (n, 1e6)
    } else if let Some(n) = s.strip_suffix("us").or_else(|| s.strip_suffix("µs")) {
        (n, 1e3)
    } else if let Some(n) = s.strip_suffix("ns") {
        (n, 1.0)
    } else {
        (s.strip_suffix('s')?, 1e9)
    };
    let ns = number_at_least_zero(number)? * unit_ns;
    (ns <= MAX_DELAY_NS as f64).then_some(ns.round() as u64)
}

/// `1%` or `0.01`: a probability in [0, 1].
fn parse_probability(s: &str) -> Option<f64> {
    let p = match s.strip_suffix('%') {
        Some(percent) => number_at_least_zero(percent)? / 100.0,
        None => number_at_least_zero(s)?,
    };
    (p <= 1.0).then_some(p)
}

/// `12000kbit`, `12mbit`, `1gbit`, `64000bit` (case-insensitive, per second): bits per second.
fn parse_rate_bps(s: &str) -> Option<u64> {
    let lower = s.to_ascii_lowercase();
    let (number, unit) = [("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3), ("bit", 1.0)]
        .into_iter()
        .find_map(|(suffix, unit)| lower.strip_suffix(suffix).map(|n| (n, unit)))?;
    let bps = number_at_least_zero(number)? * unit;
    (MIN_RATE_BPS..=MAX_RATE_BPS).contains(&bps).then_some(bps.round() as u64)
}

fn number_at_least_zero(s: &str) -> Option<f64> {
    // `parse` takes "inf" and "nan"; digits only.
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return None;
    }
    s.parse::<f64>().ok().filter(|v| v.is_finite() && *v >= 0.0)
}

/// One end of the link: a TUN device to create in a network namespace.
#[derive(Debug, Clone, PartialEq)]
pub struct End {
    /// As given on the command line (shown in the ready line and in errors).
    pub label: String,
    /// The namespace's file (`/run/netns/NAME` for a name); `None`: the link's own namespace.
    pub netns: Option<PathBuf>,
    /// The device's name.
    pub device: String,
}

impl std::str::FromStr for End {
    type Err = SpecError;

    /// `NETNS:DEVICE`: NETNS is a name under `/run/netns` (`ip netns add`), an absolute path
    /// to a namespace file (`/proc/PID/ns/net`), or empty for the link's own namespace.
    fn from_str(s: &str) -> Result<Self, SpecError> {
        let bad = |reason| SpecError::End { value: s.to_string(), reason };
        let (netns, device) = s.rsplit_once(':').ok_or_else(|| bad("no ':'"))?;
        if device.is_empty() || device.len() > MAX_DEVICE_LEN {
            return Err(bad("a device name has 1 to 15 characters"));
        }
        if device == "." || device == ".." || !device.bytes().all(|b| b.is_ascii_graphic() && !b"/:%".contains(&b)) {
            return Err(bad("a device name is printable ASCII without '/', ':' or '%'"));
        }
        let netns = if netns.is_empty() {
            None
        } else if netns.starts_with('/') {
            Some(PathBuf::from(netns))
        } else if netns.contains('/') || netns == "." || netns == ".." {
            return Err(bad("a namespace is a name under /run/netns or an absolute path"));
        } else {
            Some(PathBuf::from("/run/netns").join(netns))
        };
        Ok(End { label: s.to_string(), netns, device: device.to_string() })
    }
}

/// `--split`'s address.
pub fn parse_split(s: &str) -> Result<Ipv4Addr, SpecError> {
    s.trim().parse().map_err(|_| SpecError::Address(s.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn imp(s: &str) -> Result<Impairment, SpecError> {
        s.parse()
    }

    #[test]
    fn impairments_parse_with_units() {
        let i = imp("delay=35ms,jitter=500us,loss=1%,rate=12000kbit,queue=50").unwrap();
        assert_eq!(i.delay_ns, 35_000_000);
        assert_eq!(i.jitter_ns, 500_000);
        assert!((i.loss - 0.01).abs() < 1e-12);
        assert_eq!(i.rate_bps, Some(12_000_000));
        assert_eq!(i.queue, 50);
        assert_eq!(imp("").unwrap(), Impairment::default());
        assert_eq!(imp("delay=1.5s").unwrap().delay_ns, 1_500_000_000);
        assert_eq!(imp("delay=0").unwrap().delay_ns, 0);
        assert_eq!(imp("delay=250ns").unwrap().delay_ns, 250);
        assert_eq!(imp(" delay = 2ms , loss=0.2 ").unwrap().loss, 0.2);
        assert_eq!(imp("rate=12Mbit").unwrap().rate_bps, Some(12_000_000));
        assert_eq!(imp("rate=1gbit").unwrap().rate_bps, Some(1_000_000_000));
        assert_eq!(imp("loss=100%").unwrap().loss, 1.0);
        assert_eq!(imp("loss=0").unwrap().loss, 0.0);
    }

    #[test]
    fn bad_impairments_say_what_is_wrong() {
        assert_eq!(imp("colour=red"), Err(SpecError::UnknownKey("colour".into())));
        assert_eq!(imp("delay"), Err(SpecError::Item("delay".into())));
        assert_eq!(imp("delay=1ms,delay=2ms"), Err(SpecError::Repeated("delay")));
        assert_eq!(imp("delay=5s,jitter=5.1s"), Err(SpecError::TooLong));
        assert_eq!(imp("delay=5ms,queue=10"), Err(SpecError::QueueWithoutRate));
        for bad in [
            "delay=-5ms",
            "delay=5",
            "delay=5m",
            "delay=ms",
            "delay=nanms",
            "delay=infs",
            "delay=11s",
            "loss=101%",
            "loss=1.5",
            "loss=-1%",
            "rate=0kbit",
            "rate=12",
            "rate=12kbps",
            "rate=500bit",
            "rate=1mbit,queue=0",
            "rate=1mbit,queue=-1",
            "rate=1mbit,queue=1.5",
        ] {
            let key = bad.rsplit(',').next().unwrap().split('=').next().unwrap();
            assert!(matches!(imp(bad), Err(SpecError::Value { key: k, .. }) if k == key), "{bad}: {:?}", imp(bad));
        }
        let message = imp("delay=-5ms").unwrap_err().to_string();
        assert!(message.starts_with("delay: \"-5ms\" is not a duration"), "{message}");
    }

    #[test]
    fn ends_name_a_namespace_and_a_device() {
        let e: End = "client:tun0".parse().unwrap();
        assert_eq!((e.netns, e.device.as_str()), (Some(PathBuf::from("/run/netns/client")), "tun0"));
        let e: End = "/proc/1/ns/net:t".parse().unwrap();
        assert_eq!(e.netns, Some(PathBuf::from("/proc/1/ns/net")));
        let e: End = ":t".parse().unwrap();
        assert_eq!(e.netns, None);
        for bad in ["tun0", "ns:", "ns:a23456789012345x", "a/b:t", "ns:t/0", "ns:t%d", "..:t", "ns:.."] {
            assert!(matches!(bad.parse::<End>(), Err(SpecError::End { .. })), "{bad}");
        }
        assert_eq!(parse_split("198.18.1.1"), Ok(Ipv4Addr::new(198, 18, 1, 1)));
        assert!(parse_split("::1").is_err());
    }
}
