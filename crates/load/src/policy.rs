//! When a client closes a connection: after its lifetime (time or queries) or when idle.

use crate::{Lifetime, Nanos};

/// Why the client's policy ends a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PolicyClose {
    /// The lifetime in time or queries is used up and every query is resolved.
    Lifetime,
    /// Nothing was outstanding for the idle timeout.
    Idle,
}

/// The client-side life of one connection, from its establishment.
#[derive(Debug, Clone)]
pub struct ConnPolicy {
    lifetime: Lifetime,
    idle_ns: Option<Nanos>,
    established: Nanos,
    sent: u64,
    last_activity: Nanos,
}

impl ConnPolicy {
    pub fn new(lifetime: Lifetime, idle_timeout_ms: Option<u64>, established: Nanos) -> Self {
        ConnPolicy {
            lifetime,
            idle_ns: idle_timeout_ms.map(|ms| ms * 1_000_000),
            established,
            sent: 0,
            last_activity: established,
        }
    }

    /// Whether another query may be sent on this connection at `now`.
    #[inline]
    pub fn may_send(&self, now: Nanos) -> bool {
        self.lifetime.queries.is_none_or(|q| self.sent < q)
            && self.lifetime.duration_ms.is_none_or(|d| now < self.established + d * 1_000_000)
    }

    /// Records a query sent at `now`.
    #[inline]
    pub fn on_send(&mut self, now: Nanos) {
        self.sent += 1;
        self.last_activity = now;
    }

    /// Records an answer (or a timeout) at `now`.
    #[inline]
    pub fn on_resolved(&mut self, now: Nanos) {
        self.last_activity = self.last_activity.max(now);
    }

    /// Queries sent on this connection.
    pub fn sent(&self) -> u64 {
        self.sent
    }

    /// Whether the connection should close at `now`, given `in_flight` unresolved queries.
    pub fn close_now(&self, now: Nanos, in_flight: usize) -> Option<PolicyClose> {
        if in_flight > 0 {
            return None;
        }
        if !self.may_send(now) {
            return Some(PolicyClose::Lifetime);
        }
        match self.idle_ns {
            Some(idle) if now >= self.last_activity + idle => Some(PolicyClose::Idle),
            _ => None,
        }
    }

    /// The next time the policy may change its mind if nothing else happens.
    pub fn deadline(&self) -> Option<Nanos> {
        let life = self.lifetime.duration_ms.map(|d| self.established + d * 1_000_000);
        let idle = self.idle_ns.map(|i| self.last_activity + i);
        match (life, idle) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Nanos = 1_000_000;

    #[test]
    fn forever_never_closes() {
        let p = ConnPolicy::new(Lifetime::default(), None, 0);
        assert!(p.may_send(u64::MAX / 2));
        assert_eq!(p.close_now(u64::MAX / 2, 0), None);
        assert_eq!(p.deadline(), None);
    }

    #[test]
    fn one_query_per_connection_closes_after_the_answer() {
        let mut p = ConnPolicy::new(Lifetime { duration_ms: None, queries: Some(1) }, None, 0);
        assert!(p.may_send(0));
        p.on_send(1);
        assert!(!p.may_send(1));
        assert_eq!(p.close_now(2, 1), None, "waits for the answer");
        p.on_resolved(3);
        assert_eq!(p.close_now(3, 0), Some(PolicyClose::Lifetime));
    }

    #[test]
    fn time_lifetime_counts_from_establishment() {
        let p = ConnPolicy::new(Lifetime { duration_ms: Some(1000), queries: None }, None, 500 * MS);
        assert!(p.may_send(1499 * MS));
        assert!(!p.may_send(1500 * MS));
        assert_eq!(p.deadline(), Some(1500 * MS));
        assert_eq!(p.close_now(1500 * MS, 3), None);
        assert_eq!(p.close_now(1500 * MS, 0), Some(PolicyClose::Lifetime));
    }

    #[test]
    fn idle_timeout_restarts_on_activity() {
        let mut p = ConnPolicy::new(Lifetime::default(), Some(100), 0);
        assert_eq!(p.deadline(), Some(100 * MS));
        p.on_send(50 * MS);
        p.on_resolved(60 * MS);
        assert_eq!(p.close_now(120 * MS, 0), None);
        assert_eq!(p.deadline(), Some(160 * MS));
        assert_eq!(p.close_now(160 * MS, 0), Some(PolicyClose::Idle));
    }

    #[test]
    fn both_limits_apply_whichever_comes_first() {
        let mut p = ConnPolicy::new(Lifetime { duration_ms: Some(1000), queries: Some(2) }, None, 0);
        p.on_send(1);
        p.on_send(2);
        assert_eq!(p.close_now(3, 0), Some(PolicyClose::Lifetime));
        assert_eq!(p.sent(), 2);
    }
}
