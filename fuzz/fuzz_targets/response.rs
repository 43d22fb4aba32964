//! Any bytes handed to the generator as an answer: checking them must not panic.
#![no_main]
use dnscost_wire::{parse_response, QueryOptions, QueryTemplate};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let template = QueryTemplate::new("q0001.test", 1, &QueryOptions::default()).expect("static name");
    let _ = parse_response(data, None);
    let _ = parse_response(data, Some(template.question()));
});
