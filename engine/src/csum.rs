//! The Internet checksum (RFC 1071), fast enough to verify every TCP payload
//! while it is still in cache.
//!
//! Sums are kept as `u32` one's-complement partial sums of big-endian 16-bit
//! words ("network order"), folded to 16 bits only where the checksum is
//! written. Bytes are summed as little-endian u32 words in wide accumulators
//! (which the compiler vectorises) and byte-swapped once at the end: the
//! one's-complement sum is byte-order independent (RFC 1071, section 2(B)).

/// Folds a wide sum to 16 bits (one's complement).
#[inline(always)]
pub fn fold(mut s: u64) -> u16 {
    s = (s & 0xffff_ffff) + (s >> 32);
    s = (s & 0xffff_ffff) + (s >> 32);
    s = (s & 0xffff) + (s >> 16);
    s = (s & 0xffff) + (s >> 16);
    s as u16
}

/// One's-complement sum of `data` as big-endian 16-bit words (odd tail padded
/// with zero), folded to 16 bits.
#[inline]
pub fn sum(data: &[u8]) -> u16 {
    let s = fold(sum_native(data));
    if cfg!(target_endian = "little") {
        s.swap_bytes()
    } else {
        s
    }
}

/// Sum of native-endian u32 words into u64 lanes; the caller folds.
#[inline]
fn sum_native(data: &[u8]) -> u64 {
    let mut acc = [0u64; 8];
    let mut chunks = data.chunks_exact(32);
    for c in &mut chunks {
        for (i, w) in c.chunks_exact(4).enumerate() {
            acc[i] += u32::from_ne_bytes([w[0], w[1], w[2], w[3]]) as u64;
        }
    }
    let mut s: u64 = acc.iter().sum();
    let rest = chunks.remainder();
    let mut words = rest.chunks_exact(4);
    for w in &mut words {
        s += u32::from_ne_bytes([w[0], w[1], w[2], w[3]]) as u64;
    }
    let tail = words.remainder();
    let mut last = [0u8; 4];
    last[..tail.len()].copy_from_slice(tail);
    s + u32::from_ne_bytes(last) as u64
}

/// One's-complement addition of two 16-bit partial sums.
#[inline(always)]
pub fn add(a: u16, b: u16) -> u16 {
    let s = a as u32 + b as u32;
    ((s & 0xffff) + (s >> 16)) as u16
}

/// One's-complement subtraction (for incremental updates, RFC 1624).
#[inline(always)]
pub fn sub(a: u16, b: u16) -> u16 {
    add(a, !b)
}

/// The checksum field value for a region whose sum (with the field zeroed) is `s`.
#[inline(always)]
pub fn finish(s: u16) -> u16 {
    !s
}

/// Sum of the IPv4 pseudo-header (addresses, protocol, L4 length).
#[inline(always)]
pub fn pseudo_v4(src: [u8; 4], dst: [u8; 4], proto: u8, l4_len: u16) -> u16 {
    let mut s = 0u32;
    s += u16::from_be_bytes([src[0], src[1]]) as u32 + u16::from_be_bytes([src[2], src[3]]) as u32;
    s += u16::from_be_bytes([dst[0], dst[1]]) as u32 + u16::from_be_bytes([dst[2], dst[3]]) as u32;
    s += proto as u32 + l4_len as u32;
    fold(s as u64)
}

/// Sum of the IPv6 pseudo-header.
#[inline(always)]
pub fn pseudo_v6(src: &[u8; 16], dst: &[u8; 16], proto: u8, l4_len: u32) -> u16 {
    let mut s = sum(src) as u64 + sum(dst) as u64;
    s += (l4_len >> 16) as u64 + (l4_len & 0xffff) as u64 + proto as u64;
    fold(s)
}

/// The IPv4 header checksum of `hdr` (its checksum field must be zero or is
/// included: verifying a header means `sum(hdr) == 0xffff`).
#[inline(always)]
pub fn ipv4_header(hdr: &[u8]) -> u16 {
    finish(sum(hdr))
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn all_ones_and_large() {
        let d = vec![0xffu8; 65536];
        assert_eq!(sum(&d), reference(&d));
        let d: Vec<u8> = (0..65535u32).map(|i| (i * 7) as u8).collect();
        assert_eq!(sum(&d), reference(&d));
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
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
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
        let inc = finish(add(sub(!c0, old), 1500));
        assert_eq!(inc, ipv4_header(&h));
    }

    #[test]
    fn sums_concatenate_at_even_offsets() {
        let a = [1u8, 2, 3, 4, 5, 6];
        let b = [7u8, 8, 9];
        let mut ab = a.to_vec();
        ab.extend_from_slice(&b);
        assert_eq!(add(sum(&a), sum(&b)), sum(&ab));
    }
}
