//! The open connections of a server, so that a shutdown can end every one of them.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use tokio::sync::oneshot;

/// Open connections, so that a shutdown can end each of them.
#[derive(Debug, Default)]
pub struct Registry {
    inner: Mutex<RegistryInner>,
    next_id: AtomicU64,
    live: AtomicU64,
}

#[derive(Debug, Default)]
struct RegistryInner {
    closed: bool,
    /// Signals of the connections not told to end yet.
    open: HashMap<u64, oneshot::Sender<()>>,
}

impl Registry {
    /// A new connection's id, and the signal that tells it to end; `None` once shutting down.
    pub fn register(&self) -> (u64, Option<oneshot::Receiver<()>>) {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if inner.closed {
            return (id, None);
        }
        let (tx, rx) = oneshot::channel();
        inner.open.insert(id, tx);
        self.live.fetch_add(1, Ordering::AcqRel);
        (id, Some(rx))
    }

    /// Called by a connection once its record is written.
    pub fn unregister(&self, id: u64) {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).open.remove(&id);
        self.live.fetch_sub(1, Ordering::AcqRel);
    }

    /// Refuses new connections and tells every open one to end.
    pub fn close_all(&self) {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.closed = true;
        for (_, tx) in inner.open.drain() {
            let _ = tx.send(());
        }
    }

    /// Connections registered and not yet unregistered.
    pub fn live(&self) -> u64 {
        self.live.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_ends_open_connections_and_refuses_new_ones() {
        let r = Registry::default();
        let (a, rx_a) = r.register();
        let (b, rx_b) = r.register();
        assert_ne!(a, b);
        let (mut rx_a, mut rx_b) = (rx_a.unwrap(), rx_b.unwrap());
        r.unregister(b);
        assert_eq!(r.live(), 1);
        r.close_all();
        assert!(rx_a.try_recv().is_ok());
        assert!(rx_b.try_recv().is_err());
        assert!(r.register().1.is_none());
    }
}
