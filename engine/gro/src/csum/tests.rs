//! Every kernel against the plain sum, on every length and alignment;
//! the chained, pseudo-header and tunnel sums against sums of the whole.

use super::*;

#[test]
fn a_chained_sum_is_the_sum_of_the_whole_however_it_is_cut() {
    let data: Vec<u8> = (0..301u32).map(|i| (i * 7 + 3) as u8).collect();
    for cuts in [
        vec![1usize],
        vec![3, 4],
        vec![150],
        vec![1, 1, 1, 299 - 3],
        vec![7, 64, 129],
    ] {
        let mut c = Chained::default();
        let mut at = 0;
        for n in cuts {
            c.add(&data[at..at + n]);
            at += n;
        }
        c.add(&data[at..]);
        assert_eq!(c.value(), sum(&data));
    }
}

#[test]
fn the_pseudo_header_sum_is_the_sum_of_its_bytes() {
    let a = [10, 0, 0, 1, 10, 0, 0, 2];
    let mut bytes = a.to_vec();
    bytes.extend_from_slice(&[0, 6, 0x05, 0xdc]);
    assert_eq!(pseudo(&a, 6, 1500), sum(&bytes));
    assert_eq!(
        pseudo_v4([10, 0, 0, 1], [10, 0, 0, 2], 6, 1500),
        sum(&bytes)
    );
}

#[test]
fn the_best_kernel_and_a_width_limit_pick_the_fastest_within_them() {
    // Process-wide, as DPDK's setting: every kernel gives the same sums,
    // so tests running beside this one see no difference. One test, so
    // that the first choice is read before any limit is set.
    let best = Kernel::best();
    assert!(best.available());
    assert_eq!(Some(&best), kernels().last(), "the widest this CPU runs");
    assert_eq!(Kernel::best(), best, "cached, the same");
    assert_eq!(Kernel::limit(128), Kernel::Portable);
    assert_eq!(Kernel::best(), Kernel::Portable);
    assert_eq!(Kernel::limit(64), Kernel::Portable, "nothing narrower");
    assert!(Kernel::limit(256).bits() <= 256);
    assert_eq!(Kernel::limit(u16::MAX), best);
    assert_eq!(Kernel::best(), best);
}

/// The textbook definition: big-endian words, carry folded per step.
fn reference(data: &[u8]) -> u16 {
    let mut s: u32 = 0;
    for c in data.chunks(2) {
        let w = if c.len() == 2 {
            u16::from_be_bytes([c[0], c[1]])
        } else {
            (c[0] as u16) << 8
        };
        s += w as u32;
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

#[test]
fn matches_reference_on_all_lengths() {
    let data: Vec<u8> = (0..300u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    for len in 0..data.len() {
        for off in 0..3.min(data.len() - len + 1) {
            let d = &data[off..off + len];
            assert_eq!(sum(d), reference(d), "len {len} off {off}");
        }
    }
}

#[test]
fn a_header_sum_is_the_sum_on_every_length_and_all_ones() {
    let mixed: Vec<u8> = (0..100u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 11) as u8)
        .collect();
    let ones = [0xffu8; 100];
    for data in [&mixed[..], &ones[..]] {
        for len in 0..data.len() {
            let d = &data[..len];
            assert_eq!(sum_header(d), reference(d), "len {len}");
        }
    }
}

/// The kernels this CPU runs (the portable one everywhere).
fn kernels() -> Vec<Kernel> {
    Kernel::ALL.into_iter().filter(|k| k.available()).collect()
}

#[test]
fn every_kernel_gives_the_reference_sum() {
    let data: Vec<u8> = (0..4000u32)
        .map(|i| (i.wrapping_mul(40503) >> 7) as u8)
        .collect();
    for k in kernels() {
        for len in [0, 1, 63, 64, 65, 100, 1448, 1449, 3999] {
            let d = &data[..len];
            assert_eq!(sum_by(k, d), Some(reference(d)), "{} len {len}", k.name());
        }
    }
    assert_eq!(fold(sum_wide(&data)), fold(sum_small(&data)));
}

#[test]
fn every_alignment_and_length_near_vector_edges() {
    // The vector kernels mask a head up to the first 32-byte
    // boundary and a tail after the last, and take what is left after
    // their main loop in smaller steps: every start address modulo 64,
    // odd and even, against lengths around multiples of 32 and every
    // remainder of their 256-byte main loop.
    let data: Vec<u8> = (0..4096u32)
        .map(|i| (i.wrapping_mul(2246822519) >> 11) as u8)
        .collect();
    let base = (data.as_ptr() as usize).wrapping_neg() & 63;
    let lens = (60..200)
        .chain(470..730)
        .chain([1447, 1448, 1449, 1460, 2000, 2047]);
    for len in lens {
        for a in 0..64 {
            let d = &data[base + a..base + a + len];
            let want = reference(d);
            assert_eq!(sum(d), want, "address mod 64 {a}, len {len}");
            for k in kernels() {
                assert_eq!(sum_by(k, d), Some(want), "{} at {a}, len {len}", k.name());
            }
        }
    }
}

#[test]
fn all_ones_and_large() {
    // The lanes' headroom: a 64 KiB packet of all ones or all zeros (the
    // most a word adds, and the least), and data past VECTOR_MAX, on
    // every kernel.
    let ones = vec![0xffu8; 65536];
    let zeros = vec![0u8; 65536];
    let d: Vec<u8> = (0..65535u32).map(|i| (i * 7) as u8).collect();
    let past = vec![0xffu8; 4 * VECTOR_MAX + 3];
    for d in [&ones, &zeros, &d, &past] {
        assert_eq!(sum(d), reference(d));
        for k in kernels() {
            assert_eq!(sum_by(k, d), Some(reference(d)), "{}", k.name());
        }
    }
}

#[test]
fn rfc1071_example() {
    // RFC 1071 section 3: 00 01 f2 03 f4 f5 f6 f7 sums to ddf2.
    assert_eq!(
        sum(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7]),
        0xddf2
    );
}

#[test]
fn ipv4_header_known_value() {
    // A real header (Wikipedia's example): checksum 0xb861.
    let mut h = [
        0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8, 0x00,
        0x01, 0xc0, 0xa8, 0x00, 0xc7,
    ];
    assert_eq!(ipv4_header(&h), 0xb861);
    h[10..12].copy_from_slice(&0xb861u16.to_be_bytes());
    assert_eq!(sum(&h), 0xffff, "a valid header sums to all ones");
}

#[test]
fn incremental_update_matches_recompute() {
    let mut h = [
        0x45u8, 0, 0, 60, 0x12, 0x34, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
    ];
    let c0 = ipv4_header(&h);
    // Change the total length 60 -> 1500 and update incrementally.
    let old = u16::from_be_bytes([h[2], h[3]]);
    h[2..4].copy_from_slice(&1500u16.to_be_bytes());
    let inc = finish(replace(!c0, old, 1500));
    assert_eq!(inc, ipv4_header(&h));
}

#[test]
fn a_header_sum_without_one_field_gives_the_checksum_for_any_value_of_it() {
    let mut h = [
        0x45u8, 0, 0, 60, 0x12, 0x34, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
    ];
    let c0 = ipv4_header(&h);
    h[10..12].copy_from_slice(&c0.to_be_bytes());
    // The ID (bytes 4..6) and the total length (2..4), each in turn.
    for at in [4, 2] {
        let mut h = h;
        let old = u16::from_be_bytes([h[at], h[at + 1]]);
        let without = ipv4_sum_without(sum(&h), old, c0);
        assert_eq!(ipv4_checksum_with(without, old), c0);
        for value in [0u16, 1, 0x1234, 0xfffe, 0xffff] {
            h[at..at + 2].copy_from_slice(&value.to_be_bytes());
            h[10..12].fill(0);
            assert_eq!(ipv4_checksum_with(without, value), ipv4_header(&h));
        }
    }
}

#[test]
fn sums_concatenate_at_even_offsets() {
    let a = [1u8, 2, 3, 4, 5, 6];
    let b = [7u8, 8, 9];
    let mut ab = a.to_vec();
    ab.extend_from_slice(&b);
    assert_eq!(add(sum(&a), sum(&b)), sum(&ab));
}

#[test]
fn folding_and_adding_keep_the_end_around_carry() {
    // The textbook fold (halves added until nothing carries) against
    // `fold` and `add`, at the edges of each half and on a spread of
    // values: both give the same 16 bits, 0 only for 0.
    fn textbook(mut s: u64) -> u16 {
        while s >> 16 != 0 {
            s = (s & 0xffff) + (s >> 16);
        }
        s as u16
    }
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut vals = vec![
        0,
        1,
        0xffff,
        0x1_0000,
        0xffff_ffff,
        0x1_0000_0000,
        u64::MAX,
        u64::MAX - 1,
    ];
    vals.extend((0..64).map(|i| 1u64 << i));
    vals.extend((0..64).map(|i| (1u64 << i) - 1));
    for _ in 0..100_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        vals.push(x);
        vals.push(x >> (x & 63));
    }
    for &v in &vals {
        assert_eq!(fold(v), textbook(v), "fold {v:#x}");
        let (a, b) = (v as u16, (v >> 16) as u16);
        assert_eq!(
            add(a, b),
            textbook(a as u64 + b as u64),
            "add {a:#x} {b:#x}"
        );
    }
}
