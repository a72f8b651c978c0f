//! The x86-64 kernels: SSE2 (u64 lanes: no length overflows them) and the
//! AVX kernels (32-bit lanes: `VECTOR_MAX` bytes at most).

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
/// 32-byte load into two halves and an insert). Eight accumulators keep
/// eight adds in flight: where the add is `vpdpwssd` (5 cycles' latency,
/// two a cycle on Intel cores), four would leave most of its throughput
/// unused. A TCP payload starts 66 bytes into a frame, 2
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
        let mut acc = [z; 8];
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
        while i + 256 <= even {
            for (k, a) in acc.iter_mut().enumerate() {
                // SAFETY: i + 32 * k + 32 <= i + 256 <= even <= len, and p + i is
                // 32-byte aligned (i is head plus a multiple of 32).
                *a = add(*a, unsafe {
                    _mm256_load_si256(p.add(i + 32 * k) as *const __m256i)
                });
            }
            i += 256;
            vectors += 8;
        }
        // What is left, under 256 bytes, in steps of 128, 64 and 32 bytes,
        // each into accumulators of its own (fixed ones, so that they stay
        // in registers once the steps are unrolled).
        for (bytes, first) in [(128, 0), (64, 4), (32, 6)] {
            if i + bytes <= even {
                for k in 0..bytes / 32 {
                    // SAFETY: i + 32 * k + 32 <= i + bytes <= even <= len, and
                    // p + i is 32-byte aligned (i is head plus a multiple of 32).
                    acc[first + k] = add(acc[first + k], unsafe {
                        _mm256_load_si256(p.add(i + 32 * k) as *const __m256i)
                    });
                }
                i += bytes;
                vectors += bytes / 32;
            }
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
            acc[7] = add(acc[7], v);
            vectors += 1;
        }
        let t = _mm256_add_epi32(
            _mm256_add_epi32(
                _mm256_add_epi32(acc[0], acc[1]),
                _mm256_add_epi32(acc[2], acc[3]),
            ),
            _mm256_add_epi32(
                _mm256_add_epi32(acc[4], acc[5]),
                _mm256_add_epi32(acc[6], acc[7]),
            ),
        );
        // The eight lanes widened to 64 bits and added, in 256-bit
        // registers: left to itself, the compiler does this in a 512-bit
        // one, which on Intel cores can cost the clock a wait and a lower
        // frequency for a few instructions' gain.
        let wide = _mm256_add_epi64(
            _mm256_cvtepi32_epi64(_mm256_castsi256_si128(t)),
            _mm256_cvtepi32_epi64(_mm256_extracti128_si256::<1>(t)),
        );
        let mut lanes = [0i64; 4];
        // SAFETY: lanes is 32 writable bytes, one unaligned __m256i.
        unsafe { _mm256_storeu_si256(lanes.as_mut_ptr() as *mut __m256i, wide) };
        let signed: i64 = lanes[0] + lanes[1] + lanes[2] + lanes[3];
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
