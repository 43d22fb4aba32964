//! UDP in batches on a connected socket: many datagrams a system call (`sendmmsg`, `recvmmsg`),
//! each still a datagram of its own, on the wire and at the peer. (Segmentation offload,
//! `UDP_SEGMENT`, would hand the kernel one large buffer to split: a capture on the sending host
//! sees it as one packet, and a loopback receiver gets the whole batch queued at once.)
//!
//! Both calls are non-blocking and say `WouldBlock` as `send` and `recv` do, for the caller's
//! event loop (tokio's `try_io`).

use std::io;
use std::mem::MaybeUninit;
use std::os::fd::AsRawFd;

/// The most datagrams one call sends or receives.
pub const BATCH: usize = 64;

/// Room for one received datagram: more than a UDP datagram can carry (65 507 octets over
/// IPv4, 65 527 over IPv6), so that none is cut.
const SLOT: usize = 65_536;

/// What one [`send_batch`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sent {
    /// Datagrams that went, from the first.
    pub went: usize,
    /// Whether the datagram after them failed with an error the kernel did not return.
    /// `sendmmsg` returns an error only when nothing went, and the error it drops is taken from
    /// the socket: an ICMP port unreachable provoked by one datagram of the batch fails the next
    /// (on loopback at once), and is reported nowhere else. Told from a full send buffer (the
    /// other reason for a short count) by the socket having room for more.
    pub lost_error: bool,
}

/// Sends each of `datagrams` (the first [`BATCH`] of them) as a datagram of its own, `prefix`
/// ahead of each (a PROXY v2 header; empty for none), in one `sendmmsg`. Returns how many went
/// ([`Sent`]); an error means none went (`WouldBlock`: the send buffer is full).
pub fn send_batch<'a, S: AsRawFd>(
    sock: &S,
    prefix: &[u8],
    datagrams: impl IntoIterator<Item = &'a [u8]>,
) -> io::Result<Sent> {
    let parts = if prefix.is_empty() { 1 } else { 2 };
    let mut iovs = [[MaybeUninit::<libc::iovec>::uninit(); 2]; BATCH];
    let mut n = 0;
    for (iov, d) in iovs.iter_mut().zip(datagrams) {
        let part = |s: &[u8]| libc::iovec { iov_base: s.as_ptr() as *mut libc::c_void, iov_len: s.len() };
        iov[0].write(part(prefix));
        iov[1].write(part(d));
        n += 1;
    }
    if n == 0 {
        return Ok(Sent { went: 0, lost_error: false });
    }
    let mut msgs = [MaybeUninit::<libc::mmsghdr>::uninit(); BATCH];
    for (m, iov) in msgs.iter_mut().zip(&mut iovs[..n]) {
        // SAFETY: mmsghdr is plain data (integers and pointers), for which all zeroes is a
        // valid value.
        let mut h: libc::mmsghdr = unsafe { std::mem::zeroed() };
        // Without the prefix, the datagram's part alone.
        h.msg_hdr.msg_iov = iov[2 - parts..].as_mut_ptr().cast();
        h.msg_hdr.msg_iovlen = parts as _;
        m.write(h);
    }
    let fd = sock.as_raw_fd();
    // SAFETY: the first `n` headers are initialised, each pointing at `parts` initialised iovecs
    // of `iovs`, which point into `prefix` and the datagrams: all outlive the call, and the
    // kernel only reads them (it writes each header's `msg_len`, within `msgs`). No address:
    // the socket is connected.
    let sent = unsafe { libc::sendmmsg(fd, msgs.as_mut_ptr().cast(), n as libc::c_uint, libc::MSG_DONTWAIT) };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    let went = sent as usize;
    Ok(Sent { went, lost_error: went < n && has_room(fd) })
}

/// Whether the socket's send buffer has room (poll's POLLOUT, without waiting).
fn has_room(fd: std::os::fd::RawFd) -> bool {
    let mut p = libc::pollfd { fd, events: libc::POLLOUT, revents: 0 };
    // SAFETY: poll reads and writes the one pollfd it is given, and does not wait (timeout 0).
    let n = unsafe { libc::poll(&mut p, 1, 0) };
    n == 1 && p.revents & libc::POLLOUT != 0
}

/// Buffers for receiving up to [`BATCH`] datagrams in one `recvmmsg`, each whole (a slot of
/// 64 KiB each: the pages a datagram does not reach are never touched). Not `Send`: one per
/// thread.
pub struct RecvBatch {
    buf: Box<[u8]>,
    iovs: Box<[libc::iovec]>,
    msgs: Box<[libc::mmsghdr]>,
}

impl Default for RecvBatch {
    fn default() -> Self {
        Self::new()
    }
}

impl RecvBatch {
    pub fn new() -> Self {
        let mut buf = vec![0u8; BATCH * SLOT].into_boxed_slice();
        let mut iovs: Box<[libc::iovec]> = buf
            .chunks_exact_mut(SLOT)
            .map(|slot| libc::iovec { iov_base: slot.as_mut_ptr().cast(), iov_len: SLOT })
            .collect();
        let msgs = iovs
            .iter_mut()
            .map(|iov| {
                // SAFETY: as in `send_batch`, all zeroes is a valid mmsghdr.
                let mut h: libc::mmsghdr = unsafe { std::mem::zeroed() };
                h.msg_hdr.msg_iov = iov;
                h.msg_hdr.msg_iovlen = 1;
                h
            })
            .collect();
        // The boxes' contents never move: the pointers stay valid as long as the batch lives.
        RecvBatch { buf, iovs, msgs }
    }

    /// Receives what is queued on `sock`, up to [`BATCH`] datagrams: returns how many came
    /// (`WouldBlock` when none had). Read them with [`RecvBatch::get`].
    pub fn recv<S: AsRawFd>(&mut self, sock: &S) -> io::Result<usize> {
        debug_assert_eq!(self.iovs.len(), self.msgs.len());
        // SAFETY: header i points at iovec i and iovec i at slot i of `buf`, all owned by
        // `self` (boxed, so never moved) and borrowed mutably for the call; the kernel writes
        // at most BATCH headers' `msg_len` and flags, and at most SLOT octets into each slot.
        let n = unsafe {
            libc::recvmmsg(
                sock.as_raw_fd(),
                self.msgs.as_mut_ptr(),
                BATCH as libc::c_uint,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(n as usize)
    }

    /// Datagram `i` of the last [`RecvBatch::recv`] (`i` below what it returned).
    pub fn get(&self, i: usize) -> &[u8] {
        let len = (self.msgs[i].msg_len as usize).min(SLOT);
        &self.buf[i * SLOT..i * SLOT + len]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;

    fn pair() -> (UdpSocket, UdpSocket) {
        let a = UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").unwrap();
        a.connect(b.local_addr().unwrap()).unwrap();
        b.connect(a.local_addr().unwrap()).unwrap();
        b.set_read_timeout(Some(std::time::Duration::from_secs(5))).unwrap();
        (a, b)
    }

    fn recv_one(s: &UdpSocket) -> Vec<u8> {
        let mut buf = [0u8; 70_000];
        let n = s.recv(&mut buf).unwrap();
        buf[..n].to_vec()
    }

    #[test]
    fn each_datagram_of_a_batch_arrives_as_one_datagram_with_its_prefix() {
        let (a, b) = pair();
        let datagrams: Vec<Vec<u8>> = (0..5u8).map(|i| vec![i; 10 + i as usize]).collect();
        let all = Sent { went: 5, lost_error: false };
        assert_eq!(send_batch(&a, &[], datagrams.iter().map(|d| &d[..])).unwrap(), all);
        for d in &datagrams {
            assert_eq!(&recv_one(&b), d);
        }
        assert_eq!(send_batch(&a, b"PX", datagrams.iter().map(|d| &d[..])).unwrap(), all);
        for d in &datagrams {
            assert_eq!(recv_one(&b), [b"PX".as_slice(), d].concat());
        }
        assert_eq!(send_batch(&a, &[], std::iter::empty()).unwrap().went, 0);
    }

    #[test]
    fn at_most_a_batch_goes_in_one_call() {
        let (a, b) = pair();
        let many = vec![[7u8; 3]; BATCH + 5];
        assert_eq!(send_batch(&a, &[], many.iter().map(|d| &d[..])).unwrap(), Sent { went: BATCH, lost_error: false });
        let mut batch = RecvBatch::new();
        assert_eq!(batch.recv(&b).unwrap(), BATCH);
        assert_eq!(batch.get(BATCH - 1), [7u8; 3]);
    }

    #[test]
    fn a_refusal_in_the_middle_of_a_batch_stops_it_and_is_told() {
        let closed = UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = closed.local_addr().unwrap();
        drop(closed);
        let a = UdpSocket::bind("127.0.0.1:0").unwrap();
        a.connect(port).unwrap();
        let d = [[1u8; 4]; 3];
        // The first provokes an ICMP port unreachable, which fails the second.
        assert_eq!(send_batch(&a, &[], d.iter().map(|d| &d[..])).unwrap(), Sent { went: 1, lost_error: true });
    }

    #[test]
    fn a_batch_receives_what_is_queued_whole_in_order() {
        let (a, b) = pair();
        let mut batch = RecvBatch::new();
        let e = batch.recv(&b).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock, "nothing queued");
        let big = vec![9u8; 60_000];
        a.send(&[1, 2, 3]).unwrap();
        a.send(&big).unwrap();
        a.send(&[]).unwrap();
        // Loopback delivers as it sends: all three are queued.
        assert_eq!(batch.recv(&b).unwrap(), 3);
        assert_eq!(batch.get(0), [1, 2, 3]);
        assert_eq!(batch.get(1), &big[..], "a large datagram is not cut");
        assert_eq!(batch.get(2), [] as [u8; 0]);
        assert_eq!(batch.recv(&b).unwrap_err().kind(), io::ErrorKind::WouldBlock);
    }
}
