//! Any bytes handed to the responder as a query: parsing and answering must not panic, and
//! an answer is always a well-formed response to it.
#![no_main]
use dnscost_wire::{parse_query, parse_response, Framing, ResponseBuilder};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(q) = parse_query(data) {
        let mut out = Vec::new();
        let mut b = ResponseBuilder::new(data, &q, 0, &mut out);
        b.answer(1, 60, &[192, 0, 2, 1]);
        let n = b.finish(Framing::Datagram);
        assert_eq!(n, out.len());
        let r = parse_response(&out, Some(&data[q.question.clone()])).expect("our answer parses");
        assert_eq!(r.id, q.id);
    }
});
