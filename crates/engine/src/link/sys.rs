//! The link's system calls, the only unsafe code of `link`: a TUN device made in a network
//! namespace, `ppoll`, a timerfd for precise wake-ups, the monotonic clock, an eventfd to stop
//! on, and SIGINT and SIGTERM taken synchronously.

use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::time::Duration;

fn check(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// Moves the calling thread (only it) into the network namespace `netns`.
pub fn enter_netns(netns: &File) -> io::Result<()> {
    // SAFETY: setns on a descriptor we own; for CLONE_NEWNET it changes the calling thread only.
    check(unsafe { libc::setns(netns.as_raw_fd(), libc::CLONE_NEWNET) }).map(drop)
}

/// Whether the calling thread's network namespace has a device called `name`.
pub fn device_exists(name: &str) -> bool {
    let Ok(name) = CString::new(name) else { return false };
    // SAFETY: a NUL-terminated string that outlives the call.
    unsafe { libc::if_nametoindex(name.as_ptr()) != 0 }
}

/// Creates the TUN device `name` (layer 3, no packet-information header) in the calling
/// thread's network namespace, and returns its descriptor, non-blocking. The device is not
/// persistent: it goes when the descriptor is closed.
pub fn create_tun(name: &str) -> io::Result<File> {
    let file = OpenOptions::new().read(true).write(true).custom_flags(libc::O_NONBLOCK).open("/dev/net/tun")?;
    // SAFETY: ifreq is plain data, for which all zeroes is a valid value.
    let mut request: libc::ifreq = unsafe { std::mem::zeroed() };
    // The caller checked the name's length (≤ 15 octets), so the last octet stays NUL.
    for (dst, src) in request.ifr_name.iter_mut().zip(name.bytes()) {
        *dst = src as libc::c_char;
    }
    request.ifr_ifru.ifru_flags = (libc::IFF_TUN | libc::IFF_NO_PI) as libc::c_short;
    // SAFETY: TUNSETIFF reads and writes one ifreq, which `request` is.
    check(unsafe { libc::ioctl(file.as_raw_fd(), libc::TUNSETIFF, &mut request) })?;
    Ok(file)
}

/// Waits until one of `files` is readable; returns which are (none after a signal).
pub fn wait_readable<const N: usize>(files: [&File; N]) -> io::Result<[bool; N]> {
    let mut fds = files.map(|f| libc::pollfd { fd: f.as_raw_fd(), events: libc::POLLIN, revents: 0 });
    // SAFETY: N valid pollfd entries; no timeout, no signal mask.
    match check(unsafe { libc::ppoll(fds.as_mut_ptr(), N as libc::nfds_t, std::ptr::null(), std::ptr::null()) }) {
        Ok(_) => Ok(fds.map(|fd| fd.revents != 0)),
        Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok([false; N]),
        Err(e) => Err(e),
    }
}

/// CLOCK_MONOTONIC in nanoseconds.
pub fn monotonic_ns() -> u64 {
    // SAFETY: timespec is plain data; clock_gettime fills it.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: a valid clock and timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// A timerfd on CLOCK_MONOTONIC: readable once the time it is armed at has come. Its hrtimer
/// has no slack (unlike a `ppoll` timeout, which the kernel lets run late by 0.1 % of its
/// length, 10 µs for 10 ms, or by the thread's timer slack, 50 µs by default).
pub struct TimerFd(File);

impl TimerFd {
    pub fn new() -> io::Result<TimerFd> {
        // SAFETY: no pointers; the descriptor returned is ours alone.
        let fd = check(unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_NONBLOCK | libc::TFD_CLOEXEC) })?;
        // SAFETY: `fd` was just opened and nothing else owns it.
        Ok(TimerFd(unsafe { File::from_raw_fd(fd) }))
    }

    /// Arms the timer at `at_ns` (CLOCK_MONOTONIC), or disarms it; either way it is no longer
    /// readable until it fires again.
    pub fn set(&self, at_ns: Option<u64>) -> io::Result<()> {
        let zero = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // A time in the past (or 0) would disarm: 1 ns fires at once.
        let value = at_ns.map_or(zero, |at| {
            let at = at.max(1);
            libc::timespec {
                tv_sec: (at / 1_000_000_000) as libc::time_t,
                tv_nsec: (at % 1_000_000_000) as libc::c_long,
            }
        });
        let spec = libc::itimerspec { it_interval: zero, it_value: value };
        // SAFETY: our timerfd and a valid itimerspec; the old value is not asked for.
        check(unsafe {
            libc::timerfd_settime(self.0.as_raw_fd(), libc::TFD_TIMER_ABSTIME, &spec, std::ptr::null_mut())
        })
        .map(drop)
    }

    pub fn file(&self) -> &File {
        &self.0
    }
}

/// A non-blocking eventfd: once written, it stays readable (nobody reads it).
pub fn eventfd() -> io::Result<File> {
    // SAFETY: no pointers; the descriptor returned is ours alone.
    let fd = check(unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) })?;
    // SAFETY: `fd` was just opened and nothing else owns it.
    Ok(unsafe { File::from_raw_fd(fd) })
}

/// SIGINT and SIGTERM, blocked so that only [`Signals::wait`] takes them.
pub struct Signals(libc::sigset_t);

impl Signals {
    /// Blocks SIGINT and SIGTERM in the calling thread and in the threads it starts later.
    pub fn block() -> io::Result<Signals> {
        // SAFETY: sigset_t is plain data; sigemptyset initialises it before use.
        let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: `set` is a valid sigset_t; the signal numbers are valid.
        unsafe {
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGINT);
            libc::sigaddset(&mut set, libc::SIGTERM);
        }
        // SAFETY: a valid set, no old set asked for.
        let rc = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
        if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc));
        }
        Ok(Signals(set))
    }

    /// Waits up to `timeout` for SIGINT or SIGTERM; returns whether one came.
    pub fn wait(&self, timeout: Duration) -> bool {
        let timeout = libc::timespec {
            tv_sec: timeout.as_secs() as libc::time_t,
            tv_nsec: timeout.subsec_nanos() as libc::c_long,
        };
        // SAFETY: a valid set and timespec; no siginfo asked for.
        unsafe { libc::sigtimedwait(&self.0, std::ptr::null_mut(), &timeout) > 0 }
    }
}

/// Puts the calling thread, and the threads it starts later, under SCHED_FIFO at priority 1:
/// above every ordinary thread, below the kernel's own real-time threads.
pub fn realtime() -> io::Result<()> {
    let param = libc::sched_param { sched_priority: 1 };
    // SAFETY: pid 0 is the calling thread; a valid sched_param.
    check(unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) }).map(drop)
}
