//! A client profile: how one real client uses DNS connections (extracted from an observation
//! by `dnscost observe`), replayed at scale by `generate --profile FILE --clients N`.

use crate::config::{CloseMode, ConfigError, DohMethod, EngineConfig, Lifetime, Rate, Transport};
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

impl ClientProfile {
    /// Sets `config` to replay `clients` such clients: their connections, their aggregate
    /// query rate (open loop), and each connection's idle timeout, lifetime and close.
    pub fn apply(&self, config: &mut EngineConfig, clients: u32) -> Result<(), ConfigError> {
        let invalid = |field: &'static str, reason: String| ConfigError::Invalid { field, reason };
        if clients == 0 {
            return Err(invalid("clients", "must be at least 1".into()));
        }
        if self.query_interval_ms == 0 || self.connections == 0 || self.queries_per_resolution == 0 {
            return Err(invalid(
                "profile",
                format!("{}: query_interval_ms, connections and queries_per_resolution must be positive", self.name),
            ));
        }
        config.transport = self.transport;
        config.connections = clients.checked_mul(self.connections).ok_or_else(|| {
            invalid("clients", format!("{clients} clients of {} connections are too many", self.connections))
        })?;
        let per_client = f64::from(self.queries_per_resolution) * 1000.0 / self.query_interval_ms as f64;
        config.rate = Rate::Qps(per_client * f64::from(clients));
        config.idle_timeout_ms = self.idle_timeout_ms;
        if let Some(l) = self.lifetime {
            config.lifetime = l;
        }
        if self.close.is_some() {
            config.close = self.close;
        }
        if self.doh_method.is_some() {
            config.doh_method = self.doh_method;
        }
        if let Some(r) = self.resumption {
            if !(0.0..=1.0).contains(&r) {
                return Err(invalid("profile", format!("{}: resumption {r} is not a share in 0..=1", self.name)));
            }
            config.resumption = Some(r);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_profile_scales_to_many_clients() {
        let p: ClientProfile = serde_json::from_str(
            r#"{"name":"dnss-60s","transport":"doh","query_interval_ms":60000,"idle_timeout_ms":30000,
                "close":"graceful","queries_per_resolution":2}"#,
        )
        .unwrap();
        let mut c = EngineConfig::default();
        p.apply(&mut c, 1000).unwrap();
        assert_eq!((c.transport, c.connections, c.idle_timeout_ms), (Transport::Doh, 1000, Some(30000)));
        match c.rate {
            Rate::Qps(q) => assert!((q - 2000.0 * 1000.0 / 60000.0).abs() < 1e-9, "{q}"),
            r => panic!("{r:?}"),
        }
        assert!(p.apply(&mut c, 0).is_err());
        // In the configuration itself, applied once or twice alike.
        let mut d = EngineConfig { profile: Some(p.clone()), clients: Some(1000), ..EngineConfig::default() };
        d.apply_profile().unwrap();
        let once = d.clone();
        d.apply_profile().unwrap();
        assert_eq!((d.connections, d.idle_timeout_ms), (1000, Some(30000)));
        assert_eq!(d, once);
        let orphan = EngineConfig { clients: Some(3), target: "127.0.0.1:53".into(), ..EngineConfig::default() };
        assert!(orphan.validate().is_err(), "clients without a profile");
        assert!(serde_json::from_str::<ClientProfile>(
            r#"{"name":"x","transport":"doh","query_interval_ms":1,"nope":1}"#
        )
        .is_err());
    }
}
