//! The Internet checksum (RFC 1071), fast enough to verify every TCP payload
//! while it is still in cache.
//!
//! Sums are kept as `u32` one's-complement partial sums of big-endian 16-bit
//! words ("network order"), folded to 16 bits only where the checksum is
//! written. Bytes are summed in native order, in wide accumulators (by vector
//! kernels, `Kernel`, from 64 bytes on), and byte-swapped once at the end:
//! the one's-complement sum is byte-order independent (RFC 1071, 2(B)).

/// Folds a wide sum to 16 bits (one's complement): its halves added with
/// the carry wrapped around, twice (an add and an add-with-carry each). 0
/// stays 0; any other multiple of 0xffff gives 0xffff.
#[inline(always)]
pub fn fold(s: u64) -> u16 {
    let (w, c) = (s as u32).overflowing_add((s >> 32) as u32);
    // No second carry: a carry leaves w at most 0xffff_fffe.
    let w = w + c as u32;
    let (h, c) = (w as u16).overflowing_add((w >> 16) as u16);
    h + c as u16
}

/// One's-complement sum of `data` as big-endian 16-bit words (odd tail padded
/// with zero), folded to 16 bits.
#[inline]
pub fn sum(data: &[u8]) -> u16 {
    network(sum_native(data))
}

/// `sum` of a header whose length is a multiple of 4 below 64 bytes (an
/// IPv4 or a TCP header's, addresses): 32-bit words added into a u64 that
/// cannot overflow, with no tail to pad; the commonest lengths (IPv4
/// addresses, an option-less header, TCP with timestamps or IPv6
/// addresses) with a fixed count, so with no loop. Any other length goes
/// to `sum`.
#[inline(always)]
pub fn sum_header(data: &[u8]) -> u16 {
    let s = if let Ok(w) = <&[u8; 8]>::try_from(data) {
        words(w)
    } else if let Ok(w) = <&[u8; 20]>::try_from(data) {
        words(w)
    } else if let Ok(w) = <&[u8; 32]>::try_from(data) {
        words(w)
    } else if !data.len().is_multiple_of(4) || data.len() >= 64 {
        return sum(data);
    } else {
        words(data)
    };
    network(s)
}

/// The native 32-bit words of `w` added (its length a multiple of 4; for
/// one known when compiled, no loop is left): 8 bytes a load, their two
/// halves added, a last 4 on their own.
#[inline(always)]
fn words(w: &[u8]) -> u64 {
    let mut s = 0u64;
    let mut pairs = w.chunks_exact(8);
    for x in &mut pairs {
        let x = u64::from_ne_bytes(x.try_into().unwrap());
        s += (x & 0xffff_ffff) + (x >> 32);
    }
    if let Some(x) = pairs.remainder().first_chunk::<4>() {
        s += u32::from_ne_bytes(*x) as u64;
    }
    s
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

/// Headers and short payloads: plain word adds, no vector set-up. Native
/// u64 words are added with each carry wrapped around (the sum modulo
/// 2^64 - 1, a multiple of 0xffff, so `fold` reads it as it would the plain
/// sum), then folded to 33 bits, so that callers may add it to other sums.
#[inline(always)]
fn sum_small(data: &[u8]) -> u64 {
    let mut s = 0u64;
    let mut words = data.chunks_exact(8);
    for w in &mut words {
        let (r, c) = s.overflowing_add(u64::from_ne_bytes(w.try_into().unwrap()));
        s = r + c as u64;
    }
    // The tail (at most 7 bytes) zero-padded, byte by byte: a copy of a
    // variable length would be a call to memcpy for every header summed.
    let mut last = [0u8; 8];
    for (d, b) in last.iter_mut().zip(words.remainder()) {
        *d = *b;
    }
    let (r, c) = s.overflowing_add(u64::from_ne_bytes(last));
    let s = r + c as u64;
    (s & 0xffff_ffff) + (s >> 32)
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

/// The x86-64 kernels.
#[cfg(target_arch = "x86_64")]
mod simd;

/// One's-complement addition of two 16-bit partial sums (the carry
/// wrapped around: an add and an add-with-carry).
#[inline(always)]
pub fn add(a: u16, b: u16) -> u16 {
    let (s, c) = a.overflowing_add(b);
    // No second carry: a carry leaves s at most 0xfffe.
    s + c as u16
}

/// One's-complement subtraction (for incremental updates, RFC 1624).
#[inline(always)]
pub fn sub(a: u16, b: u16) -> u16 {
    add(a, !b)
}

/// The sum `s` of a region in which one 16-bit field that held `old`
/// holds `new` (an incremental update, RFC 1624).
#[inline(always)]
pub fn replace(s: u16, old: u16, new: u16) -> u16 {
    add(sub(s, old), new)
}

/// The checksum field value for a region whose sum (with the field zeroed) is `s`.
#[inline(always)]
pub fn finish(s: u16) -> u16 {
    !s
}

/// What a header whose checksum is right sums to, its checksum field
/// included; a segment's pseudo-header, TCP or UDP header and payload
/// sum to it too. Never 0: such bytes are never all zero.
pub const VALID: u16 = 0xffff;

/// The sum of an IPv4 header (`hdr`) without one of its 16-bit fields,
/// holding `value`, and without its checksum, holding `checksum`: what the
/// checksum of a header that differs from it in that field alone follows
/// from (`ipv4_checksum_with`), such as a later segment's, whose ID differs,
/// or a merged packet's, whose length does.
#[inline(always)]
pub fn ipv4_sum_without(hdr: u16, value: u16, checksum: u16) -> u16 {
    sub(sub(hdr, value), checksum)
}

/// The checksum an IPv4 header carries whose sum without one field and its
/// checksum is `without` (`ipv4_sum_without`) and whose field holds `value`.
/// A segment that merges must carry it: a header that fails its own
/// checksum is never merged into one whose checksum is then made valid.
#[inline(always)]
pub fn ipv4_checksum_with(without: u16, value: u16) -> u16 {
    finish(add(without, value))
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
    fold(sum_header(addrs) as u64 + proto as u64)
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
mod tests;
