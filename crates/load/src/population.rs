//! A population: several classes of clients in one run, each with its own transport and
//! connection shape (a capture's classes, `dnscost population`), sharing the run's phases.

use crate::config::{ConfigError, EngineConfig};

/// Fields every class shares with the run: its phases, its CPUs and its files.
pub const SHARED: [&str; 6] = ["classes", "warmup_ms", "duration_ms", "cpus", "output", "connections_log"];

/// At most this many classes in one run (each has a thread of its own at least).
pub const MAX_CLASSES: usize = 64;

impl EngineConfig {
    /// The configuration of each class of the population, resolved and validated: the run's
    /// fields (without its profile), then the class's profile applied, then the class's own
    /// fields (as `generate --profile`'s flags, they override the profile's). A class's
    /// seed is the run's plus its index unless it gives one (classes draw apart); its threads
    /// are the run's, at most one per connection, unless it gives them. Empty without classes.
    pub fn resolve_classes(&self) -> Result<Vec<(String, EngineConfig)>, ConfigError> {
        let invalid = |reason: String| ConfigError::Invalid { field: "classes", reason };
        if self.classes.len() > MAX_CLASSES {
            return Err(invalid(format!("{} classes; at most {MAX_CLASSES}", self.classes.len())));
        }
        let mut base = self.clone();
        base.classes.clear();
        base.profile = None;
        base.clients = None;
        let serde_json::Value::Object(base) = serde_json::to_value(&base).expect("config serialises") else {
            unreachable!("a struct serialises to an object")
        };
        let mut resolved: Vec<(String, EngineConfig)> = Vec::with_capacity(self.classes.len());
        for (i, class) in self.classes.iter().enumerate() {
            let name = &class.name;
            if name.is_empty() || name.len() > 64 || name.chars().any(|c| c.is_control()) {
                return Err(invalid(format!("class {i}: a name of 1 to 64 printable characters, not {name:?}")));
            }
            if resolved.iter().any(|(n, _)| n == name) {
                return Err(invalid(format!("two classes are named {name:?}")));
            }
            if let Some(field) = class.config.keys().find(|k| SHARED.contains(&k.as_str())) {
                return Err(invalid(format!("{name}: {field} is the run's, shared by every class")));
            }
            let mut fields = base.clone();
            fields.insert("seed".into(), (self.seed.wrapping_add(i as u64 + 1)).into());
            fields.extend(class.config.clone());
            let parse = |fields| serde_json::from_value::<EngineConfig>(serde_json::Value::Object(fields));
            let mut c = parse(fields).map_err(|e| invalid(format!("{name}: {e}")))?;
            if c.profile.is_some() {
                // As `generate --profile`'s flags do, the class's own fields override its profile.
                c.apply_profile().map_err(|e| invalid(format!("{name}: {e}")))?;
                let serde_json::Value::Object(mut fields) = serde_json::to_value(&c).expect("config serialises") else {
                    unreachable!("a struct serialises to an object")
                };
                fields.extend(class.config.clone());
                c = parse(fields).map_err(|e| invalid(format!("{name}: {e}")))?;
            }
            if !class.config.contains_key("threads") {
                c.threads = c.threads.min(c.connections).max(1);
            }
            c.validate().map_err(|e| invalid(format!("{name}: {e}")))?;
            resolved.push((name.clone(), c));
        }
        Ok(resolved)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Rate, Transport};

    fn run(classes: serde_json::Value) -> Result<Vec<(String, EngineConfig)>, ConfigError> {
        let c: EngineConfig = serde_json::from_value(serde_json::json!({
            "target": "127.0.0.1:53", "threads": 2, "seed": 7, "duration_ms": 3000, "classes": classes,
        }))
        .map_err(|e| ConfigError::Json(e.to_string()))?;
        c.validate()?;
        c.resolve_classes()
    }

    #[test]
    fn classes_take_the_runs_fields_then_their_own_then_their_profile() {
        let profile = serde_json::json!({"name": "p", "transport": "dot", "query_interval_ms": 500, "connections": 1});
        let classes = run(serde_json::json!([
            {"name": "stub", "config": {"transport": "udp", "connections": 4}},
            {"name": "dot", "config": {"profile": profile, "clients": 10, "insecure": true, "target": "127.0.0.1:853"}},
            {"name": "one", "config": {"transport": "tcp", "rate": 5.0, "connections": 1, "seed": 99}},
            {"name": "fast", "config": {"profile": profile, "clients": 2, "rate": 2500.5, "insecure": true}},
        ]))
        .unwrap();
        let names: Vec<&str> = classes.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["stub", "dot", "one", "fast"]);
        let (stub, dot, one) = (&classes[0].1, &classes[1].1, &classes[2].1);
        assert_eq!((stub.transport, stub.connections, stub.threads, stub.duration_ms), (Transport::Udp, 4, 2, 3000));
        assert_eq!((dot.transport, dot.connections, dot.rate), (Transport::Dot, 10, Rate::Qps(20.0)));
        assert_eq!(dot.target, "127.0.0.1:853");
        // One connection, one thread; the seed given is kept, the others drawn apart.
        assert_eq!((one.threads, one.seed, stub.seed, dot.seed), (1, 99, 8, 9));
        assert!(classes.iter().all(|(_, c)| c.classes.is_empty()));
        // A rate given beside the profile is the class's, finer than the profile's interval.
        assert_eq!((classes[3].1.rate, classes[3].1.connections), (Rate::Qps(2500.5), 2));
    }

    #[test]
    fn a_class_that_cannot_run_is_named() {
        let e = |classes| run(classes).unwrap_err().to_string();
        assert_eq!(
            e(serde_json::json!([{"name": "a", "config": {"duration_ms": 5}}])),
            "classes: a: duration_ms is the run's, shared by every class"
        );
        assert!(e(serde_json::json!([{"name": "a"}, {"name": "a"}])).contains("two classes are named \"a\""));
        assert!(e(serde_json::json!([{"name": "u", "config": {"sni": "x"}}])).contains("u: sni does not apply to udp"));
        assert!(
            e(serde_json::json!([{"name": "t", "config": {"trasport": "tcp"}}])).contains("unknown field `trasport`")
        );
        assert!(e(serde_json::json!([{"name": ""}])).contains("class 0: a name of 1 to 64"));
    }

    #[test]
    fn the_docs_example_resolves() {
        let docs = include_str!("../../../docs/engine.md");
        let block = docs.split("### A population").nth(1).unwrap().split("```json").nth(1).unwrap();
        let config: EngineConfig = serde_json::from_str(block.split("```").next().unwrap()).unwrap();
        config.validate().unwrap();
        let classes = config.resolve_classes().unwrap();
        assert_eq!(classes.len(), 2);
        assert_eq!((classes[1].1.transport, classes[1].1.connections), (Transport::Doh, 200));
    }
}
