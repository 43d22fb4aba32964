//! The command line's values in the engine's terms: durations, lifetimes, UDP retries and CPU
//! lists, parsed from their text (each error a sentence naming the text).

use crate::vocabulary::{Lifetime, UdpRetry};

/// Parses `10s`, `1.5s`, `250ms`, `2m`, `1h` or a bare number of seconds into milliseconds.
pub fn parse_duration_ms(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let (num, mult) = if let Some(n) = s.strip_suffix("ms") {
        (n, 1.0)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1e3)
    } else if let Some(n) = s.strip_suffix('m') {
        (n, 60e3)
    } else if let Some(n) = s.strip_suffix('h') {
        (n, 3600e3)
    } else {
        (s, 1e3)
    };
    match num.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok((v * mult).round() as u64),
        _ => Err(format!("{s:?} is not a duration (examples: 10s, 250ms, 2m)")),
    }
}

/// Parses `forever`, a duration (`30s`), a query count (`100q`), or both (`30s,100q`).
pub fn parse_lifetime(s: &str) -> Result<Lifetime, String> {
    let mut l = Lifetime::default();
    if s.trim() == "forever" {
        return Ok(l);
    }
    for part in s.split(',').map(str::trim) {
        if let Some(q) = part.strip_suffix('q') {
            l.queries = Some(q.parse().map_err(|_| format!("{part:?} is not a query count (example: 100q)"))?);
        } else {
            l.duration_ms = Some(parse_duration_ms(part)?);
        }
    }
    Ok(l)
}

/// Parses `--udp-retry`: `TIMEOUT,ATTEMPTS` (a per-try timeout as for the other durations, and
/// the sends in all, e.g. `5s,2` or `500ms,3`), or `glibc` for [`UdpRetry::GLIBC`].
pub fn parse_udp_retry(s: &str) -> Result<UdpRetry, String> {
    let s = s.trim();
    if s == "glibc" {
        return Ok(UdpRetry::GLIBC);
    }
    let bad = || format!("{s:?} is not TIMEOUT,ATTEMPTS (examples: 5s,2, 500ms,3) nor glibc");
    let (timeout, attempts) = s.split_once(',').ok_or_else(bad)?;
    Ok(UdpRetry {
        timeout_ms: parse_duration_ms(timeout).map_err(|_| bad())?,
        attempts: attempts.trim().parse().map_err(|_| bad())?,
    })
}

/// Parses a CPU list such as `1`, `0,2` or `2-5,8`.
pub fn parse_cpus(s: &str) -> Result<Vec<u32>, String> {
    let mut cpus = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let bad = || format!("{part:?} is not a CPU or a range of CPUs");
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u32, u32) = (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
                if a > b || b - a > 4096 {
                    return Err(bad());
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(part.parse().map_err(|_| bad())?),
        }
    }
    Ok(cpus)
}
