//! Read buffers lent by the thread: a connection reads into one only while it has bytes to
//! hold, and gives it back once it holds none, so that an idle connection holds no buffer (the
//! load engine keeps a million connections in memory it can count). Buffers come zeroed once,
//! when made, and keep their length: taking one back costs no allocation and no zeroing.

use std::cell::RefCell;

/// Buffers kept for reuse per thread, at most: more are freed when given back.
const KEPT: usize = 64;
/// Largest buffer kept for reuse; larger ones (a connection that grew its buffer for a big
/// frame) are freed when given back.
const KEPT_LEN: usize = 128 * 1024;

thread_local! {
    static SPARE: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
}

/// A buffer of at least `len` octets (initialised; its contents are whatever the last reader
/// left).
pub fn take(len: usize) -> Vec<u8> {
    let mut buf = SPARE.with(|s| s.borrow_mut().pop()).unwrap_or_default();
    if buf.len() < len {
        buf.resize(len, 0);
    }
    buf
}

/// Gives `buf` back for the thread's next reader.
pub fn give(buf: Vec<u8>) {
    if buf.is_empty() || buf.len() > KEPT_LEN {
        return;
    }
    SPARE.with(|s| {
        let mut s = s.borrow_mut();
        if s.len() < KEPT {
            s.push(buf);
        }
    });
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_buffer_given_back_is_taken_again_without_allocating() {
        let a = super::take(1000);
        assert!(a.len() >= 1000);
        let at = a.as_ptr();
        super::give(a);
        let b = super::take(500);
        assert_eq!(b.as_ptr(), at, "the same buffer");
        assert!(b.len() >= 1000, "its length kept");
        let c = super::take(4000);
        assert!(c.len() >= 4000 && c.as_ptr() != at, "none left: a new one");
        super::give(vec![0; super::KEPT_LEN + 1]);
        assert!(super::take(1).len() < super::KEPT_LEN, "a big one is not kept");
    }
}
