//! A client profile: how one real client uses DNS connections (extracted from an observation
//! by `dnscost observe`), replayed at scale by `generate --profile FILE --clients N`.

use crate::vocabulary::{CloseMode, DohMethod, Lifetime, Transport};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One client's connection behaviour, in the engine's own terms. What could not be derived
/// from the observation is absent (the engine's default applies).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClientProfile {
    /// What the profile is of, e.g. `dnss-60s-google`.
    pub name: String,
    /// Where it comes from (the observation, its client version, delay and policy).
    #[serde(default)]
    pub source: String,
    pub transport: Transport,
    /// Connections one client keeps for its queries at a time.
    #[serde(default = "one")]
    pub connections: u32,
    /// Time between one client's resolutions, in milliseconds.
    pub query_interval_ms: u64,
    /// DNS queries per resolution (a browser asks A and HTTPS, or A and AAAA several times).
    #[serde(default = "one")]
    pub queries_per_resolution: u32,
    /// The client closes a connection idle for this long (none seen: absent).
    #[serde(default)]
    pub idle_timeout_ms: Option<u64>,
    /// The client ends a connection after this long or this many queries (none seen: absent).
    #[serde(default)]
    pub lifetime: Option<Lifetime>,
    /// How the client closes.
    #[serde(default)]
    pub close: Option<CloseMode>,
    #[serde(default)]
    pub doh_method: Option<DohMethod>,
    /// The share of the client's reconnections that resumed their TLS session (none seen:
    /// absent).
    #[serde(default)]
    pub resumption: Option<f64>,
}

fn one() -> u32 {
    1
}
