//! The Internet checksum (RFC 1071), fast enough to verify every TCP payload
//! while it is still in cache.
//!
//! Sums are kept as `u32` one's-complement partial sums of big-endian 16-bit
//! words ("network order"), folded to 16 bits only where the checksum is
//! written. Bytes are summed in native order, in wide accumulators (by vector
//! kernels, `Kernel`, from 64 bytes on), and byte-swapped once at the end:
//! the one's-complement sum is byte-order independent (RFC 1071, 2(B)).

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
    network(sum_native(data))
}

/// A native-order wide sum folded to 16 bits, in network order.
#[inline(always)]
fn network(s: u64) -> u16 {
    let s = fold(s);
    if cfg!(target_endian = "little") {
        s.swap_bytes()
    } else {
        s
    }
}

/// Sum of native-endian u32 words into u64 lanes; the caller folds.
#[inline(always)]
fn sum_native(data: &[u8]) -> u64 {
    if data.len() < 64 {
        return sum_small(data);
    }
    // SAFETY: best() is available, and data holds 64 bytes or more.
    unsafe { sum_wide_by(Kernel::best(), data) }
}

/// The vector kernel a sum of 64 bytes or more runs on. Every kernel gives
/// the same sum; `Kernel::best` picks the fastest the CPU has. (Above
/// `VECTOR_MAX` bytes, far above any packet, the 32-bit lanes of the AVX
/// kernels could overflow: the portable one sums such data.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kernel {
    /// SSE2 on x86-64 (which every x86-64 CPU has), plain word adds elsewhere.
    Portable = 0,
    /// 32-byte vectors, multiply-added into 32-bit lanes (AVX2).
    Avx2 = 1,
    /// The same vectors, multiply-added and accumulated by one instruction
    /// (AVX-512 VNNI on 256-bit registers: no 512-bit frequency penalty).
    Avx512Vnni = 2,
}

/// Bytes the AVX kernels sum at most (their lanes stay below 2^31).
const VECTOR_MAX: usize = 1 << 19;

// A kernel's discriminant is its place in `Kernel::ALL` (`best` keeps it).
const _: () = {
    let mut i = 0;
    while i < Kernel::ALL.len() {
        assert!(Kernel::ALL[i] as usize == i);
        i += 1;
    }
};

/// `Kernel::best`'s choice: 0 before it is made, else 1 + the kernel's
/// place in `Kernel::ALL`.
static BEST: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

impl Kernel {
    /// Every kernel, slowest first.
    pub const ALL: [Kernel; 3] = [Kernel::Portable, Kernel::Avx2, Kernel::Avx512Vnni];

    /// Does this CPU run this kernel?
    pub fn available(self) -> bool {
        match self {
            Kernel::Portable => true,
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2 => std::arch::is_x86_feature_detected!("avx2"),
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx512Vnni => {
                std::arch::is_x86_feature_detected!("avx2")
                    && std::arch::is_x86_feature_detected!("avx512vnni")
                    && std::arch::is_x86_feature_detected!("avx512vl")
            }
            #[cfg(not(target_arch = "x86_64"))]
            _ => false,
        }
    }

    /// The fastest kernel this CPU runs (detected once, then cached).
    #[inline(always)]
    pub fn best() -> Kernel {
        match BEST.load(std::sync::atomic::Ordering::Relaxed) {
            0 => Kernel::detect(),
            2 => Kernel::Avx2,
            3 => Kernel::Avx512Vnni,
            _ => Kernel::Portable,
        }
    }

    /// The first call of `best`: out of line, so its feature tests are not
    /// copied into every sum.
    #[cold]
    #[inline(never)]
    fn detect() -> Kernel {
        Kernel::limit(u16::MAX)
    }

    /// The width of its vectors, in bits.
    pub fn bits(self) -> u16 {
        match self {
            Kernel::Portable => 128,
            Kernel::Avx2 | Kernel::Avx512Vnni => 256,
        }
    }

    /// From now on `best` (and so `sum`) is the fastest kernel this CPU
    /// runs whose vectors are at most `max_bits` wide (the portable one if
    /// none is): how DPDK's `--force-max-simd-bitwidth` reaches checksums.
    /// For the whole process, as DPDK's setting is; returns the choice.
    pub fn limit(max_bits: u16) -> Kernel {
        let k = *Kernel::ALL
            .iter()
            .rfind(|k| k.available() && k.bits() <= max_bits)
            .unwrap_or(&Kernel::Portable);
        BEST.store(1 + k as u8, std::sync::atomic::Ordering::Relaxed);
        k
    }

    /// What reports call it.
    pub fn name(self) -> &'static str {
        match self {
            Kernel::Portable => "portable",
            Kernel::Avx2 => "avx2",
            Kernel::Avx512Vnni => "avx512-vnni",
        }
    }
}

/// `sum(data)` computed by kernel `k`, or None when this CPU lacks it: for
/// benchmarks and tests that hold the kernels to each other.
pub fn sum_by(k: Kernel, data: &[u8]) -> Option<u16> {
    if !k.available() {
        return None;
    }
    Some(network(if data.len() < 64 {
        sum_small(data)
    } else {
        // SAFETY: k is available (checked above), and data holds 64 bytes
        // or more.
        unsafe { sum_wide_by(k, data) }
    }))
}

/// The wide sum by kernel `k`.
///
/// # Safety
///
/// The CPU runs `k` (`Kernel::available`), and `data` holds 64 bytes or more.
#[inline(always)]
unsafe fn sum_wide_by(k: Kernel, data: &[u8]) -> u64 {
    debug_assert!(data.len() >= 64 && k.available());
    #[cfg(target_arch = "x86_64")]
    if data.len() <= VECTOR_MAX {
        match k {
            // SAFETY: the CPU has AVX2 (the kernel is available, by our
            // contract), and data holds at least 64 bytes, more than
            // sum_avx2 needs at any alignment.
            Kernel::Avx2 => return unsafe { simd::sum_avx2(data) },
            // SAFETY: the CPU has AVX2, AVX-512 VNNI and VL (the kernel is
            // available, by our contract), and data holds at least 64
            // bytes, as for sum_avx2.
            Kernel::Avx512Vnni => return unsafe { simd::sum_vnni(data) },
            Kernel::Portable => {}
        }
    }
    sum_wide(data)
}

/// Headers and short payloads: plain word adds, no vector set-up.
#[inline(always)]
fn sum_small(data: &[u8]) -> u64 {
    let mut s = 0u64;
    let mut words = data.chunks_exact(4);
    for w in &mut words {
        s += u32::from_ne_bytes([w[0], w[1], w[2], w[3]]) as u64;
    }
    // Byte by byte (at most 3): a copy of a variable length would be a
    // call to memcpy for every header summed.
    let mut last = [0u8; 4];
    for (d, b) in last.iter_mut().zip(words.remainder()) {
        *d = *b;
    }
    s + u32::from_ne_bytes(last) as u64
}

/// Payloads, portable: eight u64 lanes of u32 words.
#[inline(always)]
fn sum_wide(data: &[u8]) -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: SSE2 is part of x86-64.
        unsafe { simd::sum_sse2(data) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let mut acc = [0u64; 8];
        let mut chunks = data.chunks_exact(32);
        for c in &mut chunks {
            for (i, w) in c.chunks_exact(4).enumerate() {
                acc[i] += u32::from_ne_bytes([w[0], w[1], w[2], w[3]]) as u64;
            }
        }
        acc.iter().sum::<u64>() + sum_small(chunks.remainder())
    }
}

/// The x86-64 kernels: SSE2 (u64 lanes: no length overflows them) and the
/// AVX kernels (32-bit lanes: `VECTOR_MAX` bytes at most).
#[cfg(target_arch = "x86_64")]
mod simd {
    use core::arch::x86_64::*;

    /// SSE2: u32 words zero-extended into u64 lanes (unpack with zero, add),
    /// 32 bytes a step in four accumulators so adds overlap, the tail summed
    /// as words.
    ///
    /// # Safety
    ///
    /// The CPU supports SSE2 (every x86-64 CPU does).
    #[target_feature(enable = "sse2")]
    pub unsafe fn sum_sse2(data: &[u8]) -> u64 {
        let z = _mm_setzero_si128();
        let (mut a, mut b, mut c, mut d) = (z, z, z, z);
        let p = data.as_ptr();
        let n = data.len() / 32;
        for i in 0..n {
            // SAFETY: i < len / 32, so both unaligned 16-byte loads, ending at
            // i * 32 + 32 <= len, lie inside data.
            let (v, w) = unsafe {
                (
                    _mm_loadu_si128(p.add(i * 32) as *const __m128i),
                    _mm_loadu_si128(p.add(i * 32 + 16) as *const __m128i),
                )
            };
            a = _mm_add_epi64(a, _mm_unpacklo_epi32(v, z));
            b = _mm_add_epi64(b, _mm_unpackhi_epi32(v, z));
            c = _mm_add_epi64(c, _mm_unpacklo_epi32(w, z));
            d = _mm_add_epi64(d, _mm_unpackhi_epi32(w, z));
        }
        let t = _mm_add_epi64(_mm_add_epi64(a, b), _mm_add_epi64(c, d));
        let mut lanes = [0u64; 2];
        // SAFETY: lanes is 16 writable bytes, one unaligned __m128i.
        unsafe { _mm_storeu_si128(lanes.as_mut_ptr() as *mut __m128i, t) };
        lanes[0] + lanes[1] + super::sum_small(&data[n * 32..])
    }

    /// The vector sum, written once for the kernels that differ only in
    /// `$step`: how a vector of biased words is added into an accumulator.
    ///
    /// Each 16-bit word is biased by 0x8000 (so it reads as a signed value)
    /// and adjacent pairs are multiply-added by one into 32-bit lanes: one
    /// instruction does the widening and half the adds. The bias comes back
    /// out at the end (a word masked to zero then adds nothing). A vector
    /// adds at most 65536 in magnitude to a lane, and the accumulators are
    /// added in 32 bits at the end: `VECTOR_MAX` bytes (2^14 vectors and a
    /// partial one at each end) keep every lane far below 2^31.
    ///
    /// Whole vectors only, no scalar loops: the bytes before the first
    /// 32-byte boundary are one load with the rest masked off, the bytes
    /// after the last are one load that ends at the data's end with the
    /// front masked off. The loads in between are aligned, so they fold
    /// into the xor (for this target the compiler splits an unaligned
    /// 32-byte load into two halves and an insert); four accumulators keep
    /// four adds in flight. A TCP payload starts 66 bytes into a frame, 2
    /// past a cache line, so the head and tail are nearly always partial.
    macro_rules! vector_sum {
        ($(#[$doc:meta])* $name:ident, $features:literal, $step:expr) => {
        $(#[$doc])*
        #[target_feature(enable = $features)]
        pub unsafe fn $name(data: &[u8]) -> u64 {
            let p = data.as_ptr();
            let len = data.len();
            debug_assert!(len >= 32);
            if p as usize & 1 == 1 {
                // Words start on odd addresses: sum from one byte later and
                // swap (the same sum one position over is a byte rotation).
                // SAFETY: the features per our contract; data[1..] starts at
                // an even address and, by our contract, holds at least 32 bytes.
                let rest = super::fold(unsafe { $name(&data[1..]) });
                return u16::from_ne_bytes([data[0], 0]) as u64 + rest.swap_bytes() as u64;
            }
            // Every load below starts an even number of bytes past p, so words
            // pair up as in the data; an odd length's last byte is a word alone.
            let even = len & !1;
            let bias = _mm256_set1_epi16(0x8000u16 as i16);
            let step = $step;
            let add = |acc: __m256i, v: __m256i| step(acc, _mm256_xor_si256(v, bias));
            let z = _mm256_setzero_si256();
            let mut acc = [z; 4];
            let mut vectors = 0;
            let head = (p as usize).wrapping_neg() & 31;
            if head != 0 {
                // Bytes [0, head) only.
                // SAFETY: head < 32, as mask requires; the 32 bytes at p lie inside
                // data (len >= 32) and the CPU has AVX2, both by our contract.
                let v = unsafe {
                    _mm256_andnot_si256(mask(head), _mm256_lddqu_si256(p as *const __m256i))
                };
                acc[0] = add(acc[0], v);
                vectors += 1;
            }
            let mut i = head;
            while i + 128 <= even {
                for (k, a) in acc.iter_mut().enumerate() {
                    // SAFETY: i + 32 * k + 32 <= i + 128 <= even <= len, and p + i is
                    // 32-byte aligned (i is head plus a multiple of 32).
                    *a = add(*a, unsafe {
                        _mm256_load_si256(p.add(i + 32 * k) as *const __m256i)
                    });
                }
                i += 128;
                vectors += 4;
            }
            while i + 32 <= even {
                // SAFETY: i + 32 <= even <= len, and p + i is 32-byte aligned (i is
                // head plus a multiple of 32).
                acc[1] = add(acc[1], unsafe {
                    _mm256_load_si256(p.add(i) as *const __m256i)
                });
                i += 32;
                vectors += 1;
            }
            if i < even {
                // The 32 bytes that end at `even`, of which [i, even) are new.
                // SAFETY: 0 < even - i < 32, so the skip is below 32 as mask
                // requires; even >= 32 (len >= 32 by our contract), so the 32
                // bytes ending at even lie inside data; AVX2 by our contract.
                let v = unsafe {
                    _mm256_and_si256(
                        mask(32 - (even - i)),
                        _mm256_lddqu_si256(p.add(even - 32) as *const __m256i),
                    )
                };
                acc[2] = add(acc[2], v);
                vectors += 1;
            }
            let t = _mm256_add_epi32(
                _mm256_add_epi32(acc[0], acc[1]),
                _mm256_add_epi32(acc[2], acc[3]),
            );
            let mut lanes = [0i32; 8];
            // SAFETY: lanes is 32 writable bytes, one unaligned __m256i.
            unsafe { _mm256_storeu_si256(lanes.as_mut_ptr() as *mut __m256i, t) };
            let signed: i64 = lanes.iter().map(|&x| x as i64).sum();
            // Each of the 16 words of every vector was lowered by 0x8000.
            let mut s = (signed + vectors as i64 * 16 * 0x8000) as u64;
            if len & 1 == 1 {
                s += u16::from_ne_bytes([data[len - 1], 0]) as u64;
            }
            s
        }
        };
    }

    vector_sum!(
        /// AVX2: `vpmaddwd` multiply-adds by one, `vpaddd` accumulates.
        ///
        /// # Safety
        ///
        /// The CPU supports AVX2, and `data.len() >= 32`, or `>= 33` if
        /// `data` starts at an odd address (callers pass 64 or more; 63
        /// after an odd start): every load reads 32 bytes inside `data`.
        sum_avx2,
        "avx2",
        |acc: __m256i, w: __m256i| _mm256_add_epi32(acc, _mm256_madd_epi16(w, _mm256_set1_epi16(1)))
    );

    vector_sum!(
        /// AVX-512 VNNI on 256-bit registers: `vpdpwssd` multiply-adds by
        /// one into the accumulator, one instruction for two.
        ///
        /// # Safety
        ///
        /// The CPU supports AVX2, AVX-512 VNNI and AVX-512 VL, and
        /// `data.len() >= 32`, or `>= 33` if `data` starts at an odd address
        /// (callers pass 64 or more; 63 after an odd start): every load
        /// reads 32 bytes inside `data`.
        sum_vnni,
        "avx2,avx512vnni,avx512vl",
        |acc: __m256i, w: __m256i| _mm256_dpwssd_epi32(acc, w, _mm256_set1_epi16(1))
    );

    /// Bytes [0, skip) 0x00, the rest 0xff (`skip <= 32`): a window into a
    /// constant.
    ///
    /// # Safety
    ///
    /// `skip <= 32`, and the CPU supports AVX2.
    #[inline(always)]
    unsafe fn mask(skip: usize) -> __m256i {
        static W: [u8; 64] = {
            let mut w = [0u8; 64];
            let mut i = 32;
            while i < 64 {
                w[i] = 0xff;
                i += 1;
            }
            w
        };
        // SAFETY: the caller guarantees skip <= 32, so the 32 bytes from
        // 32 - skip end within W's 64; and AVX2.
        unsafe { _mm256_loadu_si256(W.as_ptr().add(32 - skip) as *const __m256i) }
    }
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

/// Sum of the pseudo-header (RFC 9293, RFC 8200): the source and destination
/// addresses as they follow each other in the IP header (8 bytes for IPv4,
/// 32 for IPv6), the protocol and the L4 length. Every pseudo-header sum
/// grorx makes comes from here.
#[inline(always)]
pub fn pseudo(addrs: &[u8], proto: u8, l4_len: u32) -> u16 {
    fold(pseudo_with_len(pseudo_base(addrs, proto), l4_len))
}

/// The part of the pseudo-header sum a flow's segments share: addresses
/// and protocol.
#[inline(always)]
pub fn pseudo_base(addrs: &[u8], proto: u8) -> u16 {
    fold(sum(addrs) as u64 + proto as u64)
}

/// A pseudo-header sum from its shared part and an L4 length, unfolded
/// (to add more to before folding).
#[inline(always)]
pub fn pseudo_with_len(base: u16, l4_len: u32) -> u64 {
    base as u64 + (l4_len >> 16) as u64 + (l4_len & 0xffff) as u64
}

/// The IPv4 pseudo-header sum (see [`pseudo`]).
#[inline(always)]
pub fn pseudo_v4(src: [u8; 4], dst: [u8; 4], proto: u8, l4_len: u16) -> u16 {
    let mut a = [0u8; 8];
    a[..4].copy_from_slice(&src);
    a[4..].copy_from_slice(&dst);
    pseudo(&a, proto, l4_len as u32)
}

/// The IPv6 pseudo-header sum (see [`pseudo`]).
#[inline(always)]
pub fn pseudo_v6(src: &[u8; 16], dst: &[u8; 16], proto: u8, l4_len: u32) -> u16 {
    let mut a = [0u8; 32];
    a[..16].copy_from_slice(src);
    a[16..].copy_from_slice(dst);
    pseudo(&a, proto, l4_len)
}

/// A one's-complement sum over pieces of any length, in order (the pieces
/// of a chained packet): a piece that starts at an odd offset of the whole
/// has its sum byte-swapped into place. The one place that rule is written.
#[derive(Debug, Default, Clone, Copy)]
pub struct Chained {
    s: u16,
    odd: bool,
}

impl Chained {
    /// Adds the next piece.
    #[inline(always)]
    pub fn add(&mut self, piece: &[u8]) {
        let cs = sum(piece);
        self.s = add(self.s, if self.odd { cs.swap_bytes() } else { cs });
        self.odd ^= piece.len() & 1 == 1;
    }

    /// The sum of the pieces so far, folded.
    #[inline(always)]
    pub fn value(&self) -> u16 {
        self.s
    }
}

/// The outer UDP checksum of a tunnel datagram whose inner TCP checksum is
/// final, without summing the inner segment: a segment with a right
/// checksum sums to its negated pseudo-header (`inner_pseudo`, with its
/// length), so the datagram's sum is that of its pseudo-header
/// (`outer_pseudo`, with the UDP length) and of the bytes from the UDP
/// header (checksum field zero) to the inner TCP header (`headers`). A
/// computed 0 is written 0xffff (0 means none).
#[inline]
pub fn tunnel_udp(outer_pseudo: u16, headers: u16, inner_pseudo: u16) -> u16 {
    match finish(add(add(outer_pseudo, headers), !inner_pseudo)) {
        0 => 0xffff,
        c => c,
    }
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
    fn a_width_limit_picks_the_fastest_kernel_within_it() {
        // Process-wide, as DPDK's setting: every kernel gives the same sums,
        // so tests running beside this one see no difference. The first
        // choice is made first, so it cannot land after a limit below.
        Kernel::best();
        let widest = *Kernel::ALL.iter().rfind(|k| k.available()).unwrap();
        assert_eq!(Kernel::limit(128), Kernel::Portable);
        assert_eq!(Kernel::best(), Kernel::Portable);
        assert_eq!(Kernel::limit(64), Kernel::Portable, "nothing narrower");
        assert_eq!(Kernel::limit(u16::MAX), widest);
        assert_eq!(Kernel::best(), widest);
        assert!(Kernel::limit(256).bits() <= 256);
        Kernel::limit(u16::MAX);
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
    fn the_best_kernel_is_the_last_this_cpu_runs() {
        let best = Kernel::best();
        assert!(best.available());
        assert_eq!(Some(&best), kernels().last());
        assert_eq!(Kernel::best(), best, "cached, the same");
    }

    #[test]
    fn every_alignment_and_length_near_vector_edges() {
        // The vector kernels mask a head up to the first 32-byte boundary
        // and a tail after the last: every start address modulo 64, odd
        // and even, against lengths around multiples of 32.
        let data: Vec<u8> = (0..4096u32)
            .map(|i| (i.wrapping_mul(2246822519) >> 11) as u8)
            .collect();
        let base = (data.as_ptr() as usize).wrapping_neg() & 63;
        let lens = (60..200).chain([1447, 1448, 1449, 1460, 2000, 2047]);
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
