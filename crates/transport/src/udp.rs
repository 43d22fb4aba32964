//! UDP in batches: many datagrams per system call on a connected socket. Sending uses UDP
//! segmentation offload (equal-length datagrams written as one buffer, `UDP_SEGMENT`, Linux ≥
//! 4.18), receiving `recvmmsg`. The peer sees ordinary datagrams either way: the kernel splits
//! a segmented send before delivery (or the device does), and a receiver that did not ask for
//! `UDP_GRO` gets one datagram per read.
//!
//! The calls are non-blocking and return `WouldBlock` as `send` and `recv` do, for the caller's
//! event loop (tokio's `try_io`).

use std::io;
use std::os::fd::{AsRawFd, RawFd};

/// The most datagrams one segmented send may carry (the kernel's `UDP_MAX_SEGMENTS`, 64 before
/// Linux 6.10, 128 since).
pub const MAX_SEGMENTS: usize = 64;

/// Sends `buf` as datagrams of `segment` octets each (the last may be shorter) in one call.
/// Returns the octets sent (all of `buf`: a segmented send is whole or fails). `EIO` or
/// `EINVAL` mean the socket or device cannot segment (see [`segments_supported`]).
pub fn send_segments<S: AsRawFd>(sock: &S, buf: &[u8], segment: u16) -> io::Result<usize> {
    send_with_segment(sock.as_raw_fd(), buf, segment)
}

fn send_with_segment(fd: RawFd, buf: &[u8], segment: u16) -> io::Result<usize> {
    const SPACE: usize = 32; // CMSG_SPACE(sizeof(u16)) is 24 on 64-bit Linux; room to spare
    let mut control = [0u8; SPACE];
    let mut iov = libc::iovec { iov_base: buf.as_ptr() as *mut libc::c_void, iov_len: buf.len() };
    // SAFETY: msghdr is plain data; every pointer set below points into `iov`, `control` or
    // `buf`, which outlive the sendmsg call; the control message is written within `control`
    // (CMSG_SPACE of a u16 fits in SPACE), as CMSG_FIRSTHDR and CMSG_DATA lay it out.
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = libc::CMSG_SPACE(std::mem::size_of::<u16>() as u32) as _;
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_UDP;
        (*cmsg).cmsg_type = libc::UDP_SEGMENT;
        (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<u16>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<u16>(), segment);
        let n = libc::sendmsg(fd, &msg, 0);
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(n as usize)
    }
}

/// Whether this kernel segments UDP sends on `sock` (asked once, with the socket option).
pub fn segments_supported<S: AsRawFd>(sock: &S) -> bool {
    let one: libc::c_int = 0;
    // SAFETY: setsockopt reads an int from a valid pointer. Setting UDP_SEGMENT to 0 changes
    // nothing (the per-call control message decides) and fails where it is unknown.
    unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_UDP,
            libc::UDP_SEGMENT,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        ) == 0
    }
}

/// The most datagrams one [`RecvBatch::recv`] takes.
pub const MAX_BATCH: usize = 64;

/// Buffers for receiving up to `count` (at most [`MAX_BATCH`]) datagrams of at most `size`
/// octets in one `recvmmsg`.
pub struct RecvBatch {
    size: usize,
    buf: Vec<u8>,
    lens: Vec<usize>,
    truncated: Vec<bool>,
}

impl RecvBatch {
    pub fn new(count: usize, size: usize) -> Self {
        let count = count.clamp(1, MAX_BATCH);
        RecvBatch { size, buf: vec![0; count * size], lens: Vec::with_capacity(count), truncated: Vec::new() }
    }

    /// How many datagrams one call takes at most.
    pub fn capacity(&self) -> usize {
        self.buf.len() / self.size
    }

    /// Receives what is queued, up to the batch's count: returns how many datagrams arrived
    /// (`WouldBlock` when none had). Read them with [`RecvBatch::get`].
    pub fn recv<S: AsRawFd>(&mut self, sock: &S) -> io::Result<usize> {
        let count = self.capacity();
        // SAFETY: iovec and mmsghdr are plain data; header i points at iovec i and iovec i at
        // chunk i of `self.buf`, all of which outlive the call; recvmmsg writes at most `count`
        // headers and at most each chunk's length into it.
        unsafe {
            let mut iovs: [libc::iovec; MAX_BATCH] = std::mem::zeroed();
            let mut msgs: [libc::mmsghdr; MAX_BATCH] = std::mem::zeroed();
            for (i, chunk) in self.buf.chunks_exact_mut(self.size).take(count).enumerate() {
                iovs[i] = libc::iovec { iov_base: chunk.as_mut_ptr().cast(), iov_len: chunk.len() };
                msgs[i].msg_hdr.msg_iov = &mut iovs[i];
                msgs[i].msg_hdr.msg_iovlen = 1;
            }
            let n = libc::recvmmsg(
                sock.as_raw_fd(),
                msgs.as_mut_ptr(),
                count as libc::c_uint,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            );
            if n < 0 {
                return Err(io::Error::last_os_error());
            }
            self.lens.clear();
            self.truncated.clear();
            for m in &msgs[..n as usize] {
                self.lens.push(m.msg_len as usize);
                self.truncated.push(m.msg_hdr.msg_flags & libc::MSG_TRUNC != 0);
            }
            Ok(n as usize)
        }
    }

    /// Datagram `i` of the last [`RecvBatch::recv`], and whether it was longer than the buffer
    /// (cut to it).
    pub fn get(&self, i: usize) -> (&[u8], bool) {
        let start = i * self.size;
        (&self.buf[start..start + self.lens[i].min(self.size)], self.truncated[i])
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
        (a, b)
    }

    #[test]
    fn a_segmented_send_arrives_as_separate_datagrams() {
        let (a, b) = pair();
        assert!(segments_supported(&a));
        let mut buf = Vec::new();
        for i in 0..5u8 {
            buf.extend_from_slice(&[i; 40]);
        }
        buf.extend_from_slice(&[9; 12]); // the last may be shorter
        assert_eq!(send_segments(&a, &buf, 40).unwrap(), buf.len());
        let mut got = Vec::new();
        let mut one = [0u8; 100];
        b.set_read_timeout(Some(std::time::Duration::from_secs(1))).unwrap();
        for _ in 0..6 {
            let n = b.recv(&mut one).unwrap();
            got.push(one[..n].to_vec());
        }
        assert_eq!(got.len(), 6);
        assert!(got[..5].iter().enumerate().all(|(i, d)| d == &[i as u8; 40]));
        assert_eq!(got[5], [9; 12]);
    }

    #[test]
    fn a_batch_receives_what_is_queued_and_flags_what_was_cut() {
        let (a, b) = pair();
        let mut batch = RecvBatch::new(4, 64);
        b.set_nonblocking(true).unwrap();
        assert_eq!(batch.recv(&b).unwrap_err().kind(), io::ErrorKind::WouldBlock);
        for i in 0..5u8 {
            a.send(&[i; 10]).unwrap();
        }
        a.send(&[7; 100]).unwrap();
        assert_eq!(batch.recv(&b).unwrap(), 4);
        assert!((0..4).all(|i| batch.get(i) == (&[i as u8; 10][..], false)));
        assert_eq!(batch.recv(&b).unwrap(), 2);
        assert_eq!(batch.get(0), (&[4u8; 10][..], false));
        assert_eq!(batch.get(1), (&[7u8; 64][..], true));
    }
}
