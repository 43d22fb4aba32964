//! A fine timer for one generator thread. tokio's timer wheel has a resolution of one
//! millisecond, which would add up to a millisecond of pacing delay to every open-loop query
//! (and so to its latency, measured from the intended send time). One `timerfd` per thread,
//! armed at the earliest deadline of a heap, wakes the tasks waiting on it. Deadlines are
//! rounded up to a grid (the configured pacing resolution), so that one wake serves every send
//! due in the same slot. Each wake costs the thread a sleep and a wake-up (tens of µs of system
//! time on a virtual machine), so a fine grid is kept for low rates.

use std::cell::{Cell, RefCell};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::future::Future;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use tokio::io::unix::AsyncFd;

/// The timer of one thread. Deadlines are nanoseconds since the start of the run.
pub struct Timer {
    fd: AsyncFd<OwnedFd>,
    /// CLOCK_MONOTONIC time of the run's start, in nanoseconds.
    start_mono: u64,
    start: std::time::Instant,
    heap: RefCell<BinaryHeap<Reverse<(u64, u64)>>>,
    wakers: RefCell<HashMap<u64, Waker>>,
    next_id: Cell<u64>,
    armed: Cell<u64>,
    grid_ns: u64,
}

fn monotonic_ns() -> u64 {
    // SAFETY: clock_gettime fills the timespec it is given.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

impl Timer {
    /// A timer for a run that started at `start`. Must be called inside a tokio runtime.
    pub fn new(start: std::time::Instant, grid_ns: u64) -> std::io::Result<Rc<Self>> {
        // SAFETY: timerfd_create returns a new descriptor or -1.
        let raw = unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_NONBLOCK | libc::TFD_CLOEXEC) };
        if raw < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `raw` is a new descriptor that we own from here on; the AsyncFd owns it and
        // nothing else closes it while it is registered.
        let fd = unsafe { AsyncFd::register(OwnedFd::from_raw_fd(raw)) }.map_err(|e| e.into_parts().1)?;
        let start_mono = monotonic_ns().saturating_sub(start.elapsed().as_nanos() as u64);
        Ok(Rc::new(Timer {
            fd,
            start_mono,
            start,
            heap: RefCell::new(BinaryHeap::new()),
            wakers: RefCell::new(HashMap::new()),
            next_id: Cell::new(0),
            armed: Cell::new(u64::MAX),
            grid_ns: grid_ns.max(1),
        }))
    }

    fn now(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    /// `deadline` rounded up to the grid: when a wait for it ends.
    fn grid(&self, deadline: u64) -> u64 {
        deadline.div_ceil(self.grid_ns).saturating_mul(self.grid_ns)
    }

    fn arm(&self, deadline: u64) {
        let at = self.grid(deadline);
        self.armed.set(at);
        let abs = self.start_mono + at;
        let spec = libc::itimerspec {
            it_interval: libc::timespec { tv_sec: 0, tv_nsec: 0 },
            it_value: libc::timespec { tv_sec: (abs / 1_000_000_000) as _, tv_nsec: (abs % 1_000_000_000) as _ },
        };
        // SAFETY: arms our own timerfd with a valid itimerspec.
        let rc =
            unsafe { libc::timerfd_settime(self.fd.as_raw_fd(), libc::TFD_TIMER_ABSTIME, &spec, std::ptr::null_mut()) };
        // A timer that is not armed would leave every paced wait asleep: stop the thread (its
        // runtime ends, the run's summary is still written) rather than hang.
        assert!(rc == 0, "timerfd_settime: {}", std::io::Error::last_os_error());
    }

    /// Waits until run time `deadline` (nanoseconds since start), or until [`Timer::wake_all`].
    pub fn sleep_until(self: &Rc<Self>, deadline: u64) -> Sleep {
        Sleep { timer: self.clone(), deadline, id: NONE }
    }

    /// Ends every wait, due or not: the run's state changed, and each waiter looks at it (and
    /// waits again if it has nothing to do). Their heap entries are skipped when they come up.
    pub fn wake_all(&self) {
        let woken: Vec<Waker> = self.wakers.borrow_mut().drain().map(|(_, w)| w).collect();
        woken.into_iter().for_each(Waker::wake);
    }

    /// Wakes due waiters and re-arms; runs for the life of the thread's runtime.
    pub async fn drive(self: Rc<Self>) {
        loop {
            let Ok(mut guard) = self.fd.readable().await else { return };
            let mut expirations = [0u8; 8];
            // SAFETY: reads at most 8 bytes into our buffer from our own descriptor.
            unsafe { libc::read(self.fd.as_raw_fd(), expirations.as_mut_ptr().cast(), 8) };
            guard.clear_ready();
            self.armed.set(u64::MAX);
            let now = self.now();
            let mut heap = self.heap.borrow_mut();
            let mut wakers = self.wakers.borrow_mut();
            while let Some(&Reverse((deadline, id))) = heap.peek() {
                if !wakers.contains_key(&id) {
                    heap.pop();
                } else if deadline <= now {
                    heap.pop();
                    if let Some(w) = wakers.remove(&id) {
                        w.wake();
                    }
                } else {
                    self.arm(deadline);
                    break;
                }
            }
        }
    }
}

/// No entry yet (IDs count up from 0 and never reach it).
const NONE: u64 = u64::MAX;

/// A wait on the thread's [`Timer`].
pub struct Sleep {
    timer: Rc<Timer>,
    deadline: u64,
    /// Its entry's ID once registered, else [`NONE`].
    id: u64,
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let now = self.timer.now();
        if now >= self.deadline {
            return Poll::Ready(());
        }
        let timer = self.timer.clone();
        if self.id != NONE {
            return match timer.wakers.borrow_mut().get_mut(&self.id) {
                Some(w) => {
                    w.clone_from(cx.waker());
                    Poll::Pending
                }
                // Woken before its deadline: by `wake_all` (the timer's own wake comes on the
                // grid, at or past the deadline).
                None => Poll::Ready(()),
            };
        }
        let id = timer.next_id.get();
        timer.next_id.set(id + 1);
        timer.wakers.borrow_mut().insert(id, cx.waker().clone());
        self.id = id;
        if self.deadline == u64::MAX {
            // Never due: woken only by `wake_all`.
            return Poll::Pending;
        }
        {
            let mut heap = timer.heap.borrow_mut();
            let live = timer.wakers.borrow();
            // Dropped sleeps leave entries behind; keep them from piling up.
            if heap.len() > 1024 + 4 * live.len() {
                heap.retain(|Reverse((_, id))| live.contains_key(id));
            }
            heap.push(Reverse((self.deadline, id)));
        }
        if timer.grid(self.deadline) < timer.armed.get() {
            timer.arm(self.deadline);
        }
        Poll::Pending
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        if self.id != NONE {
            let id = self.id;
            // The heap entry is skipped when it comes up.
            self.timer.wakers.borrow_mut().remove(&id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wakes_never_early_and_in_deadline_order() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let local = tokio::task::LocalSet::new();
        local.block_on(&rt, async {
            let timer = Timer::new(std::time::Instant::now(), 50_000).unwrap();
            tokio::task::spawn_local(timer.clone().drive());
            let order = Rc::new(RefCell::new(Vec::new()));
            let mut tasks = Vec::new();
            for (i, ms) in [(0, 30u64), (1, 10), (2, 20)] {
                let (timer, order) = (timer.clone(), order.clone());
                tasks.push(tokio::task::spawn_local(async move {
                    let deadline = ms * 1_000_000;
                    timer.sleep_until(deadline).await;
                    order.borrow_mut().push((i, deadline, timer.now()));
                }));
            }
            // A dropped sleep never wakes anyone.
            drop(timer.sleep_until(5_000_000));
            for t in tasks {
                t.await.unwrap();
            }
            let order = order.borrow();
            assert_eq!(order.iter().map(|(i, _, _)| *i).collect::<Vec<_>>(), vec![1, 2, 0]);
            // How late a wake is depends on the machine; that it is never early does not.
            for (i, deadline, woke) in order.iter() {
                assert!(woke >= deadline, "sleep {i} woke at {woke} ns, before its deadline {deadline} ns");
            }
            assert!(timer.wakers.borrow().is_empty());
        });
    }

    #[test]
    fn wake_all_ends_every_wait_due_or_not() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let local = tokio::task::LocalSet::new();
        local.block_on(&rt, async {
            let timer = Timer::new(std::time::Instant::now(), 50_000).unwrap();
            tokio::task::spawn_local(timer.clone().drive());
            // Never due, and due in an hour.
            let ended = Rc::new(Cell::new(0));
            let tasks: Vec<_> = [u64::MAX, 3_600_000_000_000]
                .into_iter()
                .map(|deadline| {
                    let (timer, ended) = (timer.clone(), ended.clone());
                    tokio::task::spawn_local(async move {
                        timer.sleep_until(deadline).await;
                        ended.set(ended.get() + 1);
                    })
                })
                .collect();
            for _ in 0..3 {
                tokio::task::yield_now().await;
            }
            assert_eq!((ended.get(), timer.wakers.borrow().len()), (0, 2), "both wait");
            timer.wake_all();
            for t in tasks {
                t.await.unwrap();
            }
            assert_eq!((ended.get(), timer.wakers.borrow().len()), (2, 0), "both ended");
        });
    }

    #[test]
    fn deadlines_round_up_to_the_grid() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let _guard = rt.enter();
        let timer = Timer::new(std::time::Instant::now(), 50_000).unwrap();
        assert_eq!(timer.grid(0), 0);
        assert_eq!(timer.grid(1), 50_000);
        assert_eq!(timer.grid(50_000), 50_000);
        assert_eq!(timer.grid(50_001), 100_000);
        assert_eq!(timer.grid(u64::MAX), u64::MAX, "never stays never");
    }
}
