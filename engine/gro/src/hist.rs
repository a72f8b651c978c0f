//! Distributions counted on the hot path: a plain increment per value,
//! folded into an HdrHistogram when published (an hdrhistogram record per
//! packet costs more than the work it measures). Recording never allocates.

use hdrhistogram::Histogram;

/// A histogram of `1..=max` with 2 significant digits (1% resolution: plenty
/// for percentiles, and a small counts array keeps merging cheap). No
/// resizing: recording never allocates.
pub fn new_hist(max: u64) -> Histogram<u64> {
    Histogram::new_with_bounds(1, max.max(2), 2).expect("valid histogram bounds")
}

/// Adds `from` into `to` (same bounds) and empties it; an empty `from` is
/// skipped (adding walks the whole counts array).
pub fn move_into(to: &mut Histogram<u64>, from: &mut Histogram<u64>) {
    if !from.is_empty() {
        let _ = to.add(&*from);
        from.reset();
    }
}

/// Small values (`1..N`, larger ones counted as `N - 1`) counted with a plain
/// increment on the hot path and folded into a histogram when published: an
/// hdrhistogram record per packet costs more than the work it measures.
/// Zeros are counted but never folded (a poll that got nothing is no burst).
#[derive(Clone)]
pub struct Counts<const N: usize>([u64; N]);

impl<const N: usize> Default for Counts<N> {
    fn default() -> Self {
        Counts([0; N])
    }
}

impl<const N: usize> Counts<N> {
    /// Counts one value.
    #[inline(always)]
    pub fn record(&mut self, v: usize) {
        self.0[v.min(N - 1)] += 1;
    }

    /// Adds the counts into `h` and starts afresh.
    pub fn drain_into(&mut self, h: &mut Histogram<u64>) {
        for (v, c) in self.0.iter_mut().enumerate().skip(1) {
            if *c > 0 {
                h.saturating_record_n(v as u64, *c);
                *c = 0;
            }
        }
    }
}

/// Wide-ranging values (TSC ticks of a hold time) counted with a plain
/// increment in log-linear buckets (64 per power of two: 1.6% resolution,
/// finer than the 2-digit histograms they fold into) and folded, scaled, into
/// a histogram when published: one record per packet out of GRO must cost a
/// few instructions, not an hdrhistogram record.
#[derive(Clone)]
pub struct LogCounts(Box<[u32; LOG_BUCKETS]>);

/// Sub-buckets per power of two (2^LOG_SUB).
const LOG_SUB: u32 = 6;
/// Values below 2^40 (7 minutes of a 2.5 GHz TSC) get their own bucket;
/// larger ones count in the last.
const LOG_BUCKETS: usize = ((40 - LOG_SUB as usize) + 1) << LOG_SUB;

impl Default for LogCounts {
    fn default() -> Self {
        LogCounts(Box::new([0; LOG_BUCKETS]))
    }
}

impl LogCounts {
    #[inline(always)]
    fn index(v: u64) -> usize {
        let top = 63 - (v | 1).leading_zeros(); // position of the highest bit
        let i = if top < LOG_SUB {
            v as usize
        } else {
            let shift = top - LOG_SUB;
            (((shift + 1) << LOG_SUB) as u64 + ((v >> shift) & ((1 << LOG_SUB) - 1))) as usize
        };
        i.min(LOG_BUCKETS - 1)
    }

    /// The smallest value that lands in bucket `i`, and the bucket's width.
    fn bounds(i: usize) -> (u64, u64) {
        let sub = 1usize << LOG_SUB;
        if i < sub {
            return (i as u64, 1);
        }
        let shift = (i / sub - 1) as u32;
        (((sub + i % sub) as u64) << shift, 1 << shift)
    }

    /// Counts one value.
    #[inline(always)]
    pub fn record(&mut self, v: u64) {
        let c = &mut self.0[Self::index(v)];
        *c = c.saturating_add(1);
    }

    /// Adds the counts into `h`, each bucket at its midpoint times
    /// `scale` (32.32 fixed point), and starts afresh.
    pub fn drain_into(&mut self, h: &mut Histogram<u64>, scale: u64) {
        for (i, c) in self.0.iter_mut().enumerate() {
            if *c > 0 {
                let (lo, w) = Self::bounds(i);
                let mid = lo as u128 + (w / 2) as u128;
                h.saturating_record_n(((mid * scale as u128) >> 32) as u64, *c as u64);
                *c = 0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_counts_bucket_every_value_within_its_resolution() {
        let big = (12..40).flat_map(|p| [(1u64 << p) - 1, 1 << p, (1 << p) + 12345]);
        for v in (0..70_000u64).chain(big) {
            let i = LogCounts::index(v);
            let (lo, w) = LogCounts::bounds(i);
            assert!(
                lo <= v && v < lo + w,
                "{v} in bucket {i} = [{lo}, {})",
                lo + w
            );
            assert!(w == 1 || w * 64 <= lo, "{v}: width {w} at {lo}");
            assert!(LogCounts::index(v + 1) >= i, "buckets rise with values");
        }
        assert_eq!(LogCounts::index(u64::MAX), LOG_BUCKETS - 1);
    }

    #[test]
    fn log_counts_fold_scaled_into_a_histogram() {
        let mut c = LogCounts::default();
        let mut h = new_hist(10_000_000_000);
        for v in 1..=1000u64 {
            c.record(v * 1000); // ticks
        }
        c.drain_into(&mut h, 1 << 31); // half a ns per tick
        assert_eq!(h.len(), 1000);
        let p50 = h.value_at_quantile(0.5) as f64;
        assert!((p50 - 250_000.0).abs() / 250_000.0 < 0.03, "p50 {p50}");
        let mut again = new_hist(10_000_000_000);
        c.drain_into(&mut again, 1 << 32);
        assert!(again.is_empty(), "drained counts start afresh");
    }
    #[test]
    fn counts_fold_into_a_histogram_once() {
        let mut c: Counts<5> = Counts::default();
        for v in [0, 1, 3, 3, 4, 9] {
            c.record(v);
        }
        let mut h = new_hist(100);
        c.drain_into(&mut h);
        assert_eq!(h.len(), 5, "zeros are not folded");
        assert_eq!((h.count_at(3), h.max()), (2, 4), "9 is counted as 4");
        c.drain_into(&mut h);
        assert_eq!(h.len(), 5, "drained: nothing twice");
    }
}
