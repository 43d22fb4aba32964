//! Socket set-up the standard library does not offer.

use socket2::{Domain, Protocol, SockRef, Socket, Type};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

/// Opens a TCP connection to `target`, from `source` when given, with Nagle off. A source
/// address is bound without a port (IP_BIND_ADDRESS_NO_PORT): the port is chosen at connect,
/// where a port held by a connection to another peer, or in TIME_WAIT, can be reused. (A port
/// chosen at bind must be free of every binding, and connections in TIME_WAIT exhaust the
/// range within seconds at one query per connection.)
pub async fn tcp_connect(target: SocketAddr, source: Option<IpAddr>) -> io::Result<tokio::net::TcpStream> {
    let socket = match target {
        SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
        SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
    };
    if let Some(ip) = source {
        bind_address_no_port(&socket)?;
        socket.bind(SocketAddr::new(ip, 0))?;
    }
    socket.set_nodelay(true)?;
    socket.connect(target).await
}

fn bind_address_no_port<S: std::os::fd::AsRawFd>(s: &S) -> io::Result<()> {
    let one: libc::c_int = 1;
    // SAFETY: setsockopt reads an int from a valid pointer of the size given.
    let rc = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_IP,
            libc::IP_BIND_ADDRESS_NO_PORT,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A UDP socket bound to `source` (or the wildcard) and connected to `target`.
pub fn udp_connect(target: SocketAddr, source: Option<IpAddr>, buffer: usize) -> io::Result<tokio::net::UdpSocket> {
    let socket = Socket::new(Domain::for_address(target), Type::DGRAM, Some(Protocol::UDP))?;
    let _ = socket.set_recv_buffer_size(buffer);
    let _ = socket.set_send_buffer_size(buffer);
    let local = match (source, target) {
        (Some(ip), _) => SocketAddr::new(ip, 0),
        (None, SocketAddr::V4(_)) => SocketAddr::new(IpAddr::from([0, 0, 0, 0]), 0),
        (None, SocketAddr::V6(_)) => SocketAddr::new(IpAddr::from([0u16; 8]), 0),
    };
    socket.bind(&local.into())?;
    socket.connect(&target.into())?;
    socket.set_nonblocking(true)?;
    tokio::net::UdpSocket::from_std(socket.into())
}

/// A UDP socket bound to `addr`; with `share_port`, sharing the port with others
/// (SO_REUSEPORT) so that several threads can each own one. A port-0 bind that shares may be
/// given a port another process's sharing socket holds (the kernel then splits the datagrams
/// between them): bind such sockets to the address [`free_udp_port`] gives.
pub fn udp_listen(addr: SocketAddr, buffer: usize, share_port: bool) -> io::Result<tokio::net::UdpSocket> {
    let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    if share_port {
        socket.set_reuse_port(true)?;
    }
    let _ = socket.set_recv_buffer_size(buffer);
    let _ = socket.set_send_buffer_size(buffer);
    socket.bind(&addr.into())?;
    socket.set_nonblocking(true)?;
    tokio::net::UdpSocket::from_std(socket.into())
}

/// `addr`, or for port 0 a port nobody holds: a plain bind, which fails with "address in use"
/// if any socket holds the port (sharing or not), and is given by the kernel a port no socket
/// holds. The socket is closed again, so that port-sharing sockets can be bound to the address.
pub fn free_udp_port(addr: SocketAddr) -> io::Result<SocketAddr> {
    std::net::UdpSocket::bind(addr)?.local_addr()
}

/// A TCP listener on `addr` with a deep accept queue; with `share_port`, sharing the port with
/// other listeners that share it (SO_REUSEPORT: the kernel spreads connections over them).
pub fn tcp_listen(addr: SocketAddr, backlog: i32, share_port: bool) -> io::Result<tokio::net::TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    if share_port {
        socket.set_reuse_port(true)?;
    }
    socket.bind(&addr.into())?;
    socket.listen(backlog)?;
    socket.set_nonblocking(true)?;
    tokio::net::TcpListener::from_std(socket.into())
}

/// Makes the next close of `s` send RST instead of FIN (SO_LINGER with a zero timeout).
pub fn set_reset_on_close<S: std::os::fd::AsFd>(s: &S) -> io::Result<()> {
    SockRef::from(s).set_linger(Some(Duration::ZERO))
}

/// Sends FIN now (shuts down the write side), whatever sits above the socket.
pub fn shutdown_write<S: std::os::fd::AsFd>(s: &S) -> io::Result<()> {
    SockRef::from(s).shutdown(std::net::Shutdown::Write)
}

/// What the kernel counted for one TCP connection.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TcpCounts {
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub segments_sent: u64,
    pub segments_received: u64,
}

impl TcpCounts {
    /// The counts since `earlier`.
    pub fn since(&self, earlier: &TcpCounts) -> TcpCounts {
        TcpCounts {
            bytes_sent: self.bytes_sent.saturating_sub(earlier.bytes_sent),
            bytes_received: self.bytes_received.saturating_sub(earlier.bytes_received),
            segments_sent: self.segments_sent.saturating_sub(earlier.segments_sent),
            segments_received: self.segments_received.saturating_sub(earlier.segments_received),
        }
    }
}

/// Reads TCP_INFO: payload bytes (acknowledged, received) and segments, TLS included.
pub fn tcp_counts<S: std::os::fd::AsRawFd>(s: &S) -> Option<TcpCounts> {
    // struct tcp_info up to tcpi_segs_in (Linux >= 4.2); offsets from include/uapi/linux/tcp.h.
    let mut buf = [0u8; 232];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: buf is valid for `len` bytes and getsockopt writes at most `len`.
    let rc = unsafe {
        libc::getsockopt(s.as_raw_fd(), libc::IPPROTO_TCP, libc::TCP_INFO, buf.as_mut_ptr().cast(), &mut len)
    };
    if rc != 0 || len < 144 {
        return None;
    }
    let u64_at = |o: usize| u64::from_ne_bytes(buf[o..o + 8].try_into().unwrap());
    let u32_at = |o: usize| u32::from_ne_bytes(buf[o..o + 4].try_into().unwrap()) as u64;
    Some(TcpCounts {
        bytes_sent: u64_at(120),        // tcpi_bytes_acked
        bytes_received: u64_at(128),    // tcpi_bytes_received
        segments_sent: u32_at(136),     // tcpi_segs_out
        segments_received: u32_at(140), // tcpi_segs_in
    })
}

/// How many CPUs a `cpu_set_t` can name.
const CPU_SETSIZE: usize = 8 * std::mem::size_of::<libc::cpu_set_t>();

/// Pins the calling thread to `cpu` (an error, not a panic, for a CPU a set cannot hold).
pub fn pin_thread(cpu: u32) -> io::Result<()> {
    if cpu as usize >= CPU_SETSIZE {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("CPU {cpu} is not below {CPU_SETSIZE}")));
    }
    // SAFETY: cpu_set_t is plain data; `cpu` is below its size (checked above, so CPU_SET does
    // not panic); sched_setaffinity reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu as usize, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The CPUs this process may run on (its affinity mask): a CPU outside it does not exist or
/// is not allowed, and pinning to it fails.
pub fn allowed_cpus() -> io::Result<Vec<u32>> {
    // SAFETY: cpu_set_t is plain data; sched_getaffinity fills it; CPU_ISSET reads indexes
    // below its size.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok((0..CPU_SETSIZE).filter(|&c| libc::CPU_ISSET(c, &set)).map(|c| c as u32).collect())
    }
}

/// This process's open-files limit (RLIMIT_NOFILE): (soft, hard), `None` for unlimited.
pub fn open_files_limit() -> io::Result<(Option<u64>, Option<u64>)> {
    let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes into the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let finite = |v: libc::rlim_t| (v != libc::RLIM_INFINITY).then_some(v);
    Ok((finite(r.rlim_cur), finite(r.rlim_max)))
}

/// CPU time of this process so far: (user, system) in microseconds.
pub fn process_cpu_us() -> (u64, u64) {
    cpu_us(libc::RUSAGE_SELF)
}

/// The process's resident set in octets (`/proc/self/statm`'s second field; 0 if unreadable).
pub fn resident_bytes() -> u64 {
    let pages = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    pages * u64::try_from(page).unwrap_or(4096)
}

/// User and system CPU time of the calling thread, in µs (a population's class is counted
/// by its own threads').
pub fn thread_cpu_us() -> (u64, u64) {
    cpu_us(libc::RUSAGE_THREAD)
}

fn cpu_us(who: libc::c_int) -> (u64, u64) {
    // SAFETY: getrusage fills the struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(who, &mut ru) };
    let us = |tv: libc::timeval| tv.tv_sec as u64 * 1_000_000 + tv.tv_usec as u64;
    (us(ru.ru_utime), us(ru.ru_stime))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "current_thread")]
    async fn tcp_info_counts_payload() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let l = tcp_listen("127.0.0.1:0".parse().unwrap(), 16, false).unwrap();
        let addr = l.local_addr().unwrap();
        let (c, s) = tokio::join!(tcp_connect(addr, Some("127.0.0.1".parse().unwrap())), l.accept());
        let (mut c, (mut s, _)) = (c.unwrap(), s.unwrap());
        c.write_all(&[1; 1000]).await.unwrap();
        let mut buf = [0; 1000];
        s.read_exact(&mut buf).await.unwrap();
        s.write_all(&[2; 10]).await.unwrap();
        c.read_exact(&mut buf[..10]).await.unwrap();
        let counts = tcp_counts(&c).unwrap();
        assert_eq!(counts.bytes_received, 10);
        assert!(counts.segments_sent >= 2 && counts.segments_received >= 2, "{counts:?}");
        assert_eq!(counts.since(&counts), TcpCounts::default());
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_source_address_leaves_the_port_to_connect() {
        let l = tcp_listen("127.0.0.1:0".parse().unwrap(), 16, false).unwrap();
        let addr = l.local_addr().unwrap();
        let (c, s) = tokio::join!(tcp_connect(addr, Some("127.0.0.2".parse().unwrap())), l.accept());
        let (c, (_, peer)) = (c.unwrap(), s.unwrap());
        assert_eq!(peer.ip(), "127.0.0.2".parse::<IpAddr>().unwrap());
        let mut v: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: getsockopt writes at most `len` bytes into `v`.
        let rc = unsafe {
            libc::getsockopt(
                std::os::fd::AsRawFd::as_raw_fd(&c),
                libc::IPPROTO_IP,
                libc::IP_BIND_ADDRESS_NO_PORT,
                (&mut v as *mut libc::c_int).cast(),
                &mut len,
            )
        };
        assert_eq!((rc, v), (0, 1));
    }

    #[test]
    fn cpus_outside_a_set_are_errors_not_panics() {
        let allowed = allowed_cpus().unwrap();
        assert!(!allowed.is_empty());
        assert!(pin_thread(5000).is_err());
        assert!(pin_thread(CPU_SETSIZE as u32).is_err());
        std::thread::spawn(move || pin_thread(allowed[0]).unwrap()).join().unwrap();
    }

    #[test]
    fn cpu_time_is_read() {
        let start = std::time::Instant::now();
        let mut x = 0u64;
        while start.elapsed() < std::time::Duration::from_millis(50) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let (user, system) = process_cpu_us();
        assert!(user + system >= 10_000, "{user} {system}");
    }
}
