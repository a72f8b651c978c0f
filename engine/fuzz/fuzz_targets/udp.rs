//! UDP GRO under arbitrary datagrams, damage and bursts: see
//! `grorx_fuzz::udp::run`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    grorx_fuzz::udp::run(data);
});
