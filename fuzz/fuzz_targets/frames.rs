//! Any byte stream, split anywhere: the decoder returns frames or an error, never panics, and
//! never returns more octets than it was given.
#![no_main]
use dnscost_wire::FrameDecoder;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&split, stream)) = data.split_first() else { return };
    let chunk = usize::from(split).max(1);
    let mut decoder = FrameDecoder::new(512);
    let mut returned = 0usize;
    for mut piece in stream.chunks(chunk) {
        while !piece.is_empty() {
            // Never empty: an empty read buffer would read as the end of the stream.
            let spare = decoder.spare();
            assert!(!spare.is_empty());
            let n = piece.len().min(spare.len());
            spare[..n].copy_from_slice(&piece[..n]);
            decoder.advance(n);
            piece = &piece[n..];
            while let Some(frame) = decoder.next_frame() {
                match frame {
                    Ok(f) => returned += f.len() + 2,
                    Err(_) => return,
                }
            }
        }
    }
    assert!(returned <= stream.len());
});
