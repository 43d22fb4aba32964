//! What load to generate, decided without I/O and without a clock.
//!
//! [`EngineConfig`] is the engine's input contract (strict JSON, every value bounded);
//! [`Pacer`], [`ConnPolicy`] and [`TokenBucket`] decide when to send, when to close and when
//! to open, from times passed in as nanoseconds since the start of the run.

#![forbid(unsafe_code)]

mod config;
mod pacing;
mod parse;
mod policy;
mod population;
mod profile;
mod queries;
mod rng;
mod vocabulary;

pub use config::{ClientClass, ConfigError, EngineConfig, CPU_SETSIZE};
pub use pacing::{Pacer, TokenBucket};
pub use parse::{parse_cpus, parse_duration_ms, parse_lifetime, parse_udp_retry};
pub use policy::{ConnPolicy, PolicyClose};
pub use population::{MAX_CLASSES, SHARED};
pub use profile::ClientProfile;
pub use queries::{QuerySet, QuerySpecError};
pub use rng::Rng;
pub use vocabulary::{
    parse_cookie, Arrival, ClientNetwork, CloseMode, DohHeaders, DohMethod, Lifetime, Rate, TlsGroup, TlsVersion,
    Transport, UdpRetry,
};

/// Nanoseconds since the start of a run: the only notion of time in this crate.
pub type Nanos = u64;
