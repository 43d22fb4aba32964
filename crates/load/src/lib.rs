//! What load to generate, decided without I/O and without a clock.
//!
//! [`EngineConfig`] is the engine's input contract (strict JSON, every value bounded);
//! [`Pacer`], [`ConnPolicy`] and [`TokenBucket`] decide when to send, when to close and when
//! to open, from times passed in as nanoseconds since the start of the run.

#![forbid(unsafe_code)]

mod config;
mod pacing;
mod policy;
mod profile;
mod queries;
mod rng;

pub use config::{
    parse_cpus, parse_duration_ms, parse_lifetime, parse_udp_retry, Arrival, CloseMode, ConfigError, DohHeaders,
    DohMethod, EngineConfig, Lifetime, Rate, TlsGroup, TlsVersion, Transport, UdpRetry, CPU_SETSIZE,
};
pub use pacing::{Pacer, TokenBucket};
pub use policy::{ConnPolicy, PolicyClose};
pub use profile::ClientProfile;
pub use queries::{QuerySet, QuerySpecError};
pub use rng::Rng;

/// Nanoseconds since the start of a run: the only notion of time in this crate.
pub type Nanos = u64;
