//! A batch of mbufs for one TX queue, and the one transmit loop every stage
//! uses: `rte_eth_tx_burst` once per batch, a full ring retried a bounded
//! number of times, what it still refuses freed and counted (never an
//! unbounded spin, never a silent loss).

use dpdk_sys::{self as sys, inline as mb};

/// What one [`TxBatch::send`] did with the batch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sent {
    /// Packets the port took.
    pub packets: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Packets the port refused after the retries: freed.
    pub dropped: u64,
}

/// Up to `N` packets owned on their way to TX queue `queue` of `port`.
pub struct TxBatch<const N: usize> {
    port: u16,
    queue: u16,
    pkts: [*mut sys::rte_mbuf; N],
    len: usize,
    /// The bytes of `pkts[..len]`.
    bytes: u64,
}

// SAFETY: the batch owns the mbufs it holds (no Clone); an mbuf may move
// between lcores, and only the owner of the batch transmits from it.
unsafe impl<const N: usize> Send for TxBatch<N> {}

impl<const N: usize> TxBatch<N> {
    /// An empty batch for TX queue `queue` of `port`.
    pub const fn new(port: u16, queue: u16) -> Self {
        TxBatch {
            port,
            queue,
            pkts: [std::ptr::null_mut(); N],
            len: 0,
            bytes: 0,
        }
    }

    /// The port and queue this batch goes to.
    pub fn id(&self) -> (u16, u16) {
        (self.port, self.queue)
    }

    /// Packets held.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len
    }

    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline(always)]
    pub fn is_full(&self) -> bool {
        self.len == N
    }

    /// Adds a packet (the batch must not be full: panics if it is).
    ///
    /// # Safety
    /// `m` is a valid mbuf chain head the caller owns and gives to the batch.
    #[inline(always)]
    pub unsafe fn push(&mut self, m: *mut sys::rte_mbuf) {
        // SAFETY: the caller gives us a valid chain head; a field read.
        self.bytes += unsafe { mb::pkt_len(m) } as u64;
        self.pkts[self.len] = m;
        self.len += 1;
    }

    /// Runs `rte_eth_tx_prepare` over the batch: a packet the driver cannot
    /// send is freed and taken out. Returns how many were.
    pub fn prepare(&mut self) -> u64 {
        let mut failed = 0;
        let mut start = 0;
        while start < self.len {
            // SAFETY: pkts[start..len] are chains the batch owns; prepare
            // checks (and may fix up) their headers, taking none of them.
            let k = unsafe {
                sys::rte_eth_tx_prepare(
                    self.port,
                    self.queue,
                    self.pkts.as_mut_ptr().add(start),
                    (self.len - start) as u16,
                )
            } as usize;
            if start + k >= self.len {
                break;
            }
            // pkts[start + k] is one the driver cannot send.
            let bad = start + k;
            // SAFETY: pkts[bad] is a chain the batch owns; it leaves the
            // batch here and nobody uses it again.
            unsafe {
                self.bytes -= mb::pkt_len(self.pkts[bad]) as u64;
                sys::rte_pktmbuf_free(self.pkts[bad]);
            }
            self.pkts.copy_within(bad + 1..self.len, bad);
            self.len -= 1;
            failed += 1;
            start = bad;
        }
        failed
    }

    /// Transmits the batch and empties it: `rte_eth_tx_burst` until the
    /// port took every packet or, after a call that took nothing, `retries`
    /// more such calls (over the whole batch) took nothing either; what is
    /// left then is freed and counted as dropped.
    pub fn send(&mut self, retries: u32) -> Sent {
        let n = self.len;
        let (mut done, mut idle) = (0usize, 0u32);
        while done < n {
            // SAFETY: pkts[done..n] are chains the batch owns; the PMD takes
            // the first k of them.
            let k = unsafe {
                sys::rte_eth_tx_burst(
                    self.port,
                    self.queue,
                    self.pkts.as_mut_ptr().add(done),
                    (n - done) as u16,
                )
            } as usize;
            done += k;
            if k == 0 {
                idle += 1;
                if idle > retries {
                    break;
                }
                std::hint::spin_loop();
            }
        }
        let mut lost = 0u64;
        if done < n {
            // SAFETY: the PMD did not take pkts[done..n]: the batch still
            // owns them, reads their lengths and frees them once.
            unsafe {
                for &m in &self.pkts[done..n] {
                    lost += mb::pkt_len(m) as u64;
                }
                sys::rte_pktmbuf_free_bulk(self.pkts.as_mut_ptr().add(done), (n - done) as u32);
            }
        }
        let sent = Sent {
            packets: done as u64,
            bytes: self.bytes - lost,
            dropped: (n - done) as u64,
        };
        self.len = 0;
        self.bytes = 0;
        sent
    }

    /// Frees the batch unsent (the port is closed to transmits); returns
    /// how many packets were freed.
    pub fn free(&mut self) -> u64 {
        let n = self.len;
        if n > 0 {
            // SAFETY: pkts[..n] are chains the batch owns, never handed to
            // the PMD; freed once, then forgotten.
            unsafe { sys::rte_pktmbuf_free_bulk(self.pkts.as_mut_ptr(), n as u32) };
        }
        self.len = 0;
        self.bytes = 0;
        n as u64
    }
}

impl<const N: usize> Drop for TxBatch<N> {
    fn drop(&mut self) {
        // The owner sends or counts what it holds before it goes; this is
        // only so that nothing leaks if it did not.
        self.free();
    }
}
