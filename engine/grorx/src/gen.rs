//! The embedded traffic generator: realistic TCP bulk flows, produced on an
//! lcore of their own into the rings of a `RingPort`.
//!
//! Each flow is one direction of a TCP connection: MSS-sized segments of a
//! byte stream, sequence numbers advancing by the payload, IP ID counting up,
//! the timestamps option with a millisecond TSval clock (so consecutive
//! segments share TSval, as real senders' do), PSH every N segments if asked,
//! valid IPv4 and TCP checksums. Flows are interleaved `interleave` segments
//! at a time, and flow f goes to queue f % queues, as RSS would keep a flow
//! on one queue.
//!
//! Cost: per packet the generator copies a header template, patches sequence,
//! IP ID, TSval and the checksums incrementally (RFC 1624), and writes the
//! payload from a template, as a NIC's DMA writes every byte (so the
//! receiving core finds it in the shared cache, not in DRAM). No FFI call per
//! packet: alloc and enqueue are per burst.

use crate::csum;
use crate::dpdk::eal::tsc;
use crate::dpdk::mbuf::{field as mb, flags, rte_mbuf, Burst, RTE_PKTMBUF_HEADROOM};
use crate::dpdk::mempool::Mempool;
use crate::dpdk::ring_port::{PoolPtr, RingPtr};
use crate::setting::{Setting, SettingError};
use crate::traffic::{self, FlowSpec, Segment};
use crate::wire::field::{self, ipv4, tcp};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

/// What the embedded generator sends (`RunOptions::gen`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GenConfig {
    /// TCP flows; flow f goes to queue f % queues.
    pub flows: u32,
    /// TCP payload bytes per segment (1..=9000).
    pub mss: u16,
    /// Packets per second in total; 0 = as fast as the rings take them.
    pub rate_pps: u64,
    /// IPv6 instead of IPv4.
    pub ipv6: bool,
    /// 802.1Q tag on every frame.
    pub vlan: Option<u16>,
    /// PSH on every Nth segment of a flow; 0 = never.
    pub psh_every: u32,
    /// Segments of one flow in a row before the next flow's.
    pub interleave: u32,
    /// Stop after this many packets; 0 = never.
    pub count: u64,
    /// mbufs allocated and enqueued at a time (1..=[`MAX_BURST`]).
    pub burst: u16,
    /// UDP datagrams of `mss` payload bytes (IPv4 IDs counting up) instead
    /// of TCP segments (`psh_every` unused).
    pub udp: bool,
    /// Flag every frame's checksums good (the IPv4 header's, and the TCP
    /// or UDP one), as a NIC with RX checksum offload flags frames it
    /// checked: what GRO verifying checksums then costs.
    pub nic_csum: bool,
}

impl Default for GenConfig {
    fn default() -> Self {
        GenConfig {
            flows: 4,
            mss: 1448,
            rate_pps: 0,
            ipv6: false,
            vlan: None,
            psh_every: 0,
            interleave: 8,
            count: 0,
            burst: 32,
            udp: false,
            nic_csum: false,
        }
    }
}

/// The most flows the generator keeps (distinct addresses run to 2^24).
pub const MAX_FLOWS: u32 = 1 << 20;

impl GenConfig {
    /// Checks every setting's range; the error names the setting.
    pub fn validate(&self) -> Result<(), SettingError> {
        if self.flows == 0 || self.flows > MAX_FLOWS {
            return Err(SettingError::new(
                Setting::GenFlows,
                self.flows,
                format!(
                    "out of range: give 1..={MAX_FLOWS} (each flow's state takes about {} B)",
                    std::mem::size_of::<Flow>()
                ),
            ));
        }
        if self.mss == 0 || self.mss > 9000 {
            return Err(SettingError::new(
                Setting::GenMss,
                self.mss,
                "out of range: give 1..=9000",
            ));
        }
        if self.interleave == 0 {
            return Err(SettingError::new(
                Setting::GenInterleave,
                0,
                "give 1 or more",
            ));
        }
        if self.burst == 0 || self.burst as usize > MAX_BURST {
            return Err(SettingError::new(
                Setting::GenBurst,
                self.burst,
                format!("out of range: give 1..={MAX_BURST}"),
            ));
        }
        if let Some(v) = self.vlan {
            if v == 0 || v > 4094 {
                return Err(SettingError::new(
                    Setting::GenVlan,
                    v,
                    "a VLAN id is 1..=4094",
                ));
            }
        }
        Ok(())
    }

    /// The headers of flow `flow` (addresses, ports, VLAN tag).
    pub fn spec(&self, flow: u32) -> FlowSpec {
        let mut s = FlowSpec::numbered(flow, self.ipv6);
        s.vlans = self.vlan.into_iter().collect();
        s
    }

    /// Bytes of headers in front of every payload.
    pub fn header_len(&self) -> usize {
        if self.udp {
            self.spec(0).udp_header_len()
        } else {
            self.spec(0).header_len()
        }
    }

    /// One frame's length on the wire (without FCS).
    pub fn frame_len(&self) -> usize {
        self.header_len() + self.mss as usize
    }
}

/// Largest generator burst.
pub const MAX_BURST: usize = 64;

/// Counters the generator publishes (single writer).
#[derive(Default)]
#[repr(C, align(64))]
pub struct GenStats {
    /// Frames enqueued to the RX rings.
    pub sent: AtomicU64,
    /// Bytes of those frames.
    pub bytes: AtomicU64,
    /// Times a ring had no room (the generator waits: nothing is dropped).
    pub ring_full: AtomicU64,
    /// Bursts the pool could not supply (tried again on the next pass).
    pub alloc_fail: AtomicU64,
    /// TSC cycles spent producing (for the source's own cost per packet).
    pub busy_cycles: AtomicU64,
    /// Set when the generator's loop has ended (stopped, or its count sent).
    pub done: AtomicBool,
}

/// The offset of the payload in a freshly allocated mbuf's buffer.
fn payload_offset(cfg: &GenConfig) -> usize {
    RTE_PKTMBUF_HEADROOM as usize + cfg.header_len()
}

/// Checks that a whole generated frame fits one mbuf of `data_room` bytes.
pub fn fits(cfg: &GenConfig, data_room: u16) -> Result<(), String> {
    let need = payload_offset(cfg) + cfg.mss as usize;
    if need > data_room as usize {
        return Err(format!(
            "generator frames ({} B + {} B headroom) do not fit the pool's {} B data room: \
             lower {} or raise {}",
            cfg.frame_len(),
            RTE_PKTMBUF_HEADROOM,
            data_room,
            Setting::GenMss,
            Setting::Mtu
        ));
    }
    Ok(())
}

/// The payload every segment carries, and its one's-complement sum; checks
/// the pool holds a whole frame per mbuf.
pub fn payload(pool: &Mempool, cfg: &GenConfig) -> Result<(Vec<u8>, u16), String> {
    fits(cfg, pool.data_room())?;
    let payload: Vec<u8> = (0..cfg.mss as u64)
        .map(|i| traffic::pattern_byte(0, i))
        .collect();
    let sum = csum::sum(&payload);
    Ok((payload, sum))
}

/// One flow's header template and the state that changes per segment.
struct Flow {
    hdr: [u8; 128],
    hdr_len: usize,
    /// Offsets of the fields patched per packet.
    ip_id_at: Option<usize>,
    ip_csum_at: Option<usize>,
    seq_at: usize,
    flags_at: usize,
    tsval_at: Option<usize>,
    tcp_csum_at: usize,
    /// Template checksums' sums (computed with seq = id = tsval = 0).
    ip_sum: u16,
    tcp_sum: u16,
    seq: u32,
    ip_id: u16,
    segs: u32,
    queue: usize,
    /// A UDP flow: no TCP fields to patch.
    udp: bool,
}

impl Flow {
    fn new(cfg: &GenConfig, i: u32, queue: usize, payload_sum: u16) -> Flow {
        if cfg.udp {
            return Self::udp(cfg, i, queue, payload_sum);
        }
        let spec = cfg.spec(i);
        let hdr_len = spec.header_len();
        let mut hdr = [0u8; 128];
        let seg = Segment {
            seq: 0,
            ack: 0x1000_0000 ^ i,
            flags: traffic::TCP_ACK,
            ip_id: 0,
            tsval: 0,
            tsecr: 0x0100_0000 ^ i,
            payload_len: cfg.mss,
        };
        spec.write_headers(&mut hdr, &seg, payload_sum);
        let l3 = spec.l2_len();
        let l4 = l3 + spec.l3_len();
        let v4 = !cfg.ipv6;
        let tcp_csum_at = l4 + tcp::CHECKSUM.start;
        let ip_csum_at = v4.then_some(l3 + ipv4::CHECKSUM.start);
        Flow {
            ip_sum: if v4 {
                !field::read16(&hdr, l3, ipv4::CHECKSUM)
            } else {
                0
            },
            tcp_sum: !field::read16(&hdr, l4, tcp::CHECKSUM),
            hdr,
            hdr_len,
            ip_id_at: v4.then_some(l3 + ipv4::ID.start),
            ip_csum_at,
            seq_at: l4 + tcp::SEQ.start,
            flags_at: l4 + tcp::FLAGS,
            // The timestamps option as the generator writes it: NOP, NOP,
            // kind 8, length 10, then TSval.
            tsval_at: spec.timestamps.then_some(l4 + tcp::MIN_LEN + 4),
            tcp_csum_at,
            seq: 0x1000u32.wrapping_mul(i + 1),
            ip_id: 0,
            segs: 0,
            queue,
            udp: false,
        }
    }

    /// A UDP flow: only the IPv4 ID (and so the IP checksum) changes per
    /// datagram; the UDP checksum does not cover it.
    fn udp(cfg: &GenConfig, i: u32, queue: usize, payload_sum: u16) -> Flow {
        let spec = cfg.spec(i);
        let hdr_len = spec.udp_header_len();
        let mut hdr = [0u8; 128];
        spec.write_udp_headers(&mut hdr, 0, cfg.mss as usize, Some(payload_sum));
        let l3 = spec.l2_len();
        let v4 = !cfg.ipv6;
        Flow {
            ip_sum: if v4 {
                !field::read16(&hdr, l3, ipv4::CHECKSUM)
            } else {
                0
            },
            tcp_sum: 0,
            hdr,
            hdr_len,
            ip_id_at: v4.then_some(l3 + ipv4::ID.start),
            ip_csum_at: v4.then_some(l3 + ipv4::CHECKSUM.start),
            seq_at: 0,
            flags_at: 0,
            tsval_at: None,
            tcp_csum_at: 0,
            seq: 0,
            ip_id: 0,
            segs: 0,
            queue,
            udp: true,
        }
    }

    /// Writes the next segment's headers at `dst`.
    ///
    /// # Safety
    /// `dst` has room for `hdr_len` bytes.
    #[inline(always)]
    unsafe fn emit(&mut self, dst: *mut u8, tsval: u32, psh_every: u32, mss: u16) {
        // SAFETY: the caller guarantees `dst` has room for hdr_len bytes; every
        // offset written (IP id and checksum, seq, flags, tsval, TCP checksum)
        // lies inside those headers, as `new` placed them.
        unsafe {
            std::ptr::copy_nonoverlapping(self.hdr.as_ptr(), dst, self.hdr_len);
            let put16 = |at: usize, v: u16| {
                std::ptr::copy_nonoverlapping(v.to_be_bytes().as_ptr(), dst.add(at), 2)
            };
            let put32 = |at: usize, v: u32| {
                std::ptr::copy_nonoverlapping(v.to_be_bytes().as_ptr(), dst.add(at), 4)
            };
            if let (Some(id_at), Some(c_at)) = (self.ip_id_at, self.ip_csum_at) {
                put16(id_at, self.ip_id);
                put16(c_at, csum::finish(csum::add(self.ip_sum, self.ip_id)));
            }
            if self.udp {
                self.ip_id = self.ip_id.wrapping_add(1);
                return;
            }
            put32(self.seq_at, self.seq);
            let mut s = csum::add(self.tcp_sum, (self.seq >> 16) as u16);
            s = csum::add(s, self.seq as u16);
            if let Some(ts_at) = self.tsval_at {
                put32(ts_at, tsval);
                s = csum::add(s, (tsval >> 16) as u16);
                s = csum::add(s, tsval as u16);
            }
            self.segs = self.segs.wrapping_add(1);
            if psh_every != 0 && self.segs.is_multiple_of(psh_every) {
                *dst.add(self.flags_at) |= traffic::TCP_PSH;
                s = csum::add(s, traffic::TCP_PSH as u16);
            }
            put16(self.tcp_csum_at, csum::finish(s));
            self.seq = self.seq.wrapping_add(mss as u32);
            self.ip_id = self.ip_id.wrapping_add(1);
        }
    }
}

/// The RX flags every frame carries: none, or (`nic_csum`) what a NIC
/// that checked its checksums sets.
fn rx_flags(cfg: &GenConfig) -> u64 {
    if !cfg.nic_csum {
        0
    } else if cfg.ipv6 {
        // IPv6 has no header checksum: NICs leave that flag unknown.
        flags::RTE_MBUF_F_RX_L4_CKSUM_GOOD as u64
    } else {
        (flags::RTE_MBUF_F_RX_IP_CKSUM_GOOD | flags::RTE_MBUF_F_RX_L4_CKSUM_GOOD) as u64
    }
}

/// What the generator's lcore needs.
#[doc(hidden)]
pub struct GenJob {
    pub cfg: GenConfig,
    /// The RX ring of each queue of the embedded port.
    pub rings: Vec<RingPtr>,
    pub pool: PoolPtr,
    /// The payload of every segment, and its sum (see `payload`).
    pub payload: Vec<u8>,
    pub payload_sum: u16,
    pub stats: Arc<GenStats>,
    pub stop: Arc<AtomicBool>,
    pub tsc_hz: u64,
}

/// What a generated frame is made of, the same for every flow.
struct Frame<'a> {
    payload: &'a [u8],
    hdr_len: usize,
    len: u32,
    ol_flags: u64,
}

/// The generator's counts, published to `GenStats` after every pass.
#[derive(Default)]
struct Tally {
    sent: u64,
    bytes: u64,
    full: u64,
    nomem: u64,
    busy: u64,
}

impl Tally {
    fn publish(&self, stats: &GenStats) {
        stats.sent.store(self.sent, Relaxed);
        stats.bytes.store(self.bytes, Relaxed);
        stats.ring_full.store(self.full, Relaxed);
        stats.alloc_fail.store(self.nomem, Relaxed);
        stats.busy_cycles.store(self.busy, Relaxed);
    }
}

/// The generator's loop; runs on its own lcore until `stop` or `cfg.count`.
#[doc(hidden)]
pub fn run(job: GenJob) -> i32 {
    let GenJob {
        cfg,
        rings,
        pool,
        payload,
        payload_sum,
        stats,
        stop,
        tsc_hz,
    } = job;
    let nq = rings.len();
    let mut flows: Vec<Flow> = (0..cfg.flows)
        .map(|i| Flow::new(&cfg, i, i as usize % nq, payload_sum))
        .collect();
    // Each queue walks its own flows: `interleave` segments from one, then the next.
    let per_queue: Vec<Vec<usize>> = (0..nq)
        .map(|q| (0..flows.len()).filter(|&f| flows[f].queue == q).collect())
        .collect();
    let mut cursor = vec![(0usize, 0u32); nq]; // (flow index in per_queue, segments taken)
    let mut pending: Vec<Burst<MAX_BURST>> = (0..nq).map(|_| Burst::new()).collect();
    let frame = Frame {
        payload: &payload,
        hdr_len: cfg.header_len(),
        len: cfg.frame_len() as u32,
        ol_flags: rx_flags(&cfg),
    };
    let ms = (tsc_hz / 1000).max(1);
    let t0 = tsc();
    let mut t = Tally::default();

    while !stop.load(Relaxed) {
        if cfg.count != 0 && t.sent >= cfg.count && pending.iter().all(|b| b.is_empty()) {
            break;
        }
        let start = tsc();
        let mut produced = 0u64;
        for q in 0..nq {
            if per_queue[q].is_empty() {
                continue;
            }
            let b = &mut pending[q];
            if b.is_empty() {
                let want = budget(&cfg, t.sent, start - t0, tsc_hz);
                if want == 0 {
                    continue;
                }
                // SAFETY: the engine's pool for this port, alive for the run.
                if !unsafe { b.alloc(pool.0, want as usize) } {
                    t.nomem += 1;
                    continue;
                }
                let tsval = (start / ms) as u32;
                for &m in b.as_slice() {
                    let f = next_flow(&mut flows, &per_queue[q], &mut cursor[q], cfg.interleave);
                    // SAFETY: a fresh mbuf from a pool whose data room holds
                    // a whole frame (checked in `payload`).
                    unsafe { write_frame(m, f, &frame, tsval, &cfg) };
                }
                t.sent += b.len() as u64;
                t.bytes += b.len() as u64 * frame.len as u64;
                produced += b.len() as u64;
            }
            // SAFETY: the ring of RX queue q, alive until the port closes.
            if unsafe { b.enqueue(rings[q].0) } == 0 || !b.is_empty() {
                t.full += 1;
            }
        }
        if produced > 0 {
            t.busy += tsc() - start;
        }
        t.publish(&stats);
    }
    // Packets built but never enqueued are freed (Burst's Drop) and not counted as sent.
    let unsent: u64 = pending.iter().map(|b| b.len() as u64).sum();
    stats.sent.store(t.sent - unsent, Relaxed);
    stats
        .bytes
        .store(t.bytes - unsent * frame.len as u64, Relaxed);
    stats.done.store(true, Relaxed);
    0
}

/// How many frames a queue may make now: a burst, within what is left of
/// `cfg.count` and of what the rate allows `elapsed` TSC ticks in.
fn budget(cfg: &GenConfig, sent: u64, elapsed: u64, tsc_hz: u64) -> u64 {
    let mut want = cfg.burst as u64;
    if cfg.count != 0 {
        want = want.min(cfg.count - sent);
    }
    if cfg.rate_pps != 0 {
        let allowed = (elapsed as u128 * cfg.rate_pps as u128 / tsc_hz as u128) as u64;
        want = want.min(allowed.saturating_sub(sent));
    }
    want
}

/// The flow a queue's next frame belongs to: `interleave` segments from
/// one of its flows (`order`), then the next (`cursor`: where it is).
#[inline(always)]
fn next_flow<'a>(
    flows: &'a mut [Flow],
    order: &[usize],
    cursor: &mut (usize, u32),
    interleave: u32,
) -> &'a mut Flow {
    let (fi, taken) = cursor;
    let f = order[*fi];
    *taken += 1;
    if *taken == interleave {
        *taken = 0;
        *fi = (*fi + 1) % order.len();
    }
    &mut flows[f]
}

/// Writes the flow's next segment into `m`: its headers, the payload, the
/// lengths and the RX flags.
///
/// # Safety
/// `m` is a fresh mbuf the caller owns whose data room holds a whole frame.
#[inline(always)]
unsafe fn write_frame(
    m: *mut rte_mbuf,
    f: &mut Flow,
    frame: &Frame<'_>,
    tsval: u32,
    cfg: &GenConfig,
) {
    debug_assert_eq!(f.hdr_len, frame.hdr_len);
    // SAFETY: the frame fits m's data room (the caller's promise), so the
    // headers and the payload after them are inside its buffer.
    unsafe {
        let d = mb::mtod(m);
        f.emit(d, tsval, cfg.psh_every, cfg.mss);
        std::ptr::copy_nonoverlapping(
            frame.payload.as_ptr(),
            d.add(frame.hdr_len),
            frame.payload.len(),
        );
        (*m).data_len = frame.len as u16;
        (*m).pkt_len = frame.len;
        (*m).ol_flags = frame.ol_flags;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The incremental header updates must equal a full recompute.
    #[test]
    fn emitted_headers_match_full_build() {
        for ipv6 in [false, true] {
            for vlan in [None, Some(7)] {
                let cfg = GenConfig {
                    ipv6,
                    vlan,
                    psh_every: 3,
                    ..Default::default()
                };
                let payload: Vec<u8> = (0..cfg.mss as u64)
                    .map(|i| traffic::pattern_byte(0, i))
                    .collect();
                let psum = csum::sum(&payload);
                let mut f = Flow::new(&cfg, 5, 0, psum);
                let spec = cfg.spec(5);
                for k in 0..7u32 {
                    let mut got = [0u8; 128];
                    let (seq, id) = (f.seq, f.ip_id);
                    let tsval = 0xdead_0000 + k * 977;
                    // SAFETY: got's 128 bytes hold the flow's headers (hdr_len).
                    unsafe { f.emit(got.as_mut_ptr(), tsval, cfg.psh_every, cfg.mss) };
                    let seg = Segment {
                        seq,
                        ack: 0x1000_0000 ^ 5,
                        flags: traffic::TCP_ACK
                            | if (k + 1) % 3 == 0 {
                                traffic::TCP_PSH
                            } else {
                                0
                            },
                        ip_id: if ipv6 { 0 } else { id },
                        tsval,
                        tsecr: 0x0100_0000 ^ 5,
                        payload_len: cfg.mss,
                    };
                    let want = spec.frame(&seg, &payload);
                    assert_eq!(
                        &got[..f.hdr_len],
                        &want[..f.hdr_len],
                        "ipv6 {ipv6} vlan {vlan:?} k {k}"
                    );
                }
            }
        }
    }

    /// UDP datagrams: the ID (and IP checksum) patched per datagram equal a
    /// full build.
    #[test]
    fn emitted_udp_headers_match_full_build() {
        for ipv6 in [false, true] {
            let cfg = GenConfig {
                ipv6,
                udp: true,
                mss: 1200,
                ..Default::default()
            };
            let payload: Vec<u8> = (0..cfg.mss as u64)
                .map(|i| traffic::pattern_byte(0, i))
                .collect();
            let mut f = Flow::new(&cfg, 3, 0, csum::sum(&payload));
            assert_eq!(f.hdr_len, cfg.header_len());
            for k in 0..5u16 {
                let mut got = [0u8; 128];
                // SAFETY: got's 128 bytes hold the flow's headers (hdr_len).
                unsafe { f.emit(got.as_mut_ptr(), 0, 0, cfg.mss) };
                let want = cfg
                    .spec(3)
                    .udp_frame(if ipv6 { 0 } else { k }, &payload, true);
                assert_eq!(&got[..f.hdr_len], &want[..f.hdr_len], "ipv6 {ipv6} k {k}");
            }
        }
    }

    #[test]
    fn nic_csum_frames_read_as_checked_by_the_nic() {
        use crate::skb::hints_of;
        use grorx_gro::{CsumHint::*, RxHints};
        let flags = |ipv6, nic_csum| {
            hints_of(rx_flags(&GenConfig {
                ipv6,
                nic_csum,
                ..Default::default()
            }))
        };
        assert_eq!(flags(false, false), RxHints::default());
        assert_eq!(flags(true, false), RxHints::default());
        assert_eq!(flags(false, true), RxHints { ip: Good, l4: Good });
        assert_eq!(
            flags(true, true),
            RxHints {
                ip: Unknown,
                l4: Good
            }
        );
    }

    #[test]
    fn config_checks() {
        assert!(GenConfig::default().validate().is_ok());
        assert!(GenConfig {
            flows: 0,
            ..Default::default()
        }
        .validate()
        .is_err());
        assert!(GenConfig {
            vlan: Some(4095),
            ..Default::default()
        }
        .validate()
        .is_err());
        assert!(GenConfig {
            mss: 0,
            ..Default::default()
        }
        .validate()
        .is_err());
        assert_eq!(GenConfig::default().frame_len(), 1514);
    }
}
