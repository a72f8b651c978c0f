//! The forward stage (NFV datapath): packets GRO delivered are encapsulated
//! by prepending headers in their headroom, segmented for the TX port (TSO
//! when the port does it, software GSO when it does not) and transmitted in
//! bulk on one TX queue. One `Forwarder` per worker lcore per output queue:
//! nothing is shared, nothing is locked.
//!
//! - Encapsulation (`Encap`): none, a 12 B `virtio_net_hdr_mrg_rxbuf` that
//!   describes the GSO layout to a vhost-user/tap peer (the merged packet is
//!   handed over whole: the peer segments), or VXLAN (50 B of outer Ethernet,
//!   IPv4, UDP and VXLAN headers). The prepend is `Skb::prepend`: a pointer
//!   move within the headroom setting, else a chained header mbuf, counted as
//!   a headroom miss (the needed_headroom lesson, seed 004).
//! - Segmentation of a merged TCP packet (`gso_segs > 1`): with TSO on the TX
//!   port (VXLAN: tunnel TSO and outer IPv4 checksum), the packet goes down
//!   whole with `RTE_MBUF_F_TX_TCP_SEG` and its lengths. Without, software GSO
//!   cuts it back into MSS-sized segments with correct headers (IP ID
//!   incrementing, sequence numbers, CWR only on the first, PSH/FIN only on
//!   the last, IPv4 and TCP checksums; VXLAN: outer lengths, ID, checksum).
//! - Software GSO is zero-copy and allocation-free where the chain allows,
//!   which after GRO is the rule: every buffer GRO appended holds exactly one
//!   original segment's payload, with the bytes its own headers occupied
//!   still in front of it. A segment is then that buffer (or run of buffers)
//!   with the headers written back in front (a pointer move, like a prepend),
//!   and the head keeps the first segment. No indirect mbufs, no reference
//!   counts, no payload copy. When the room in front is short (the headroom
//!   setting is smaller than the encapsulation needs), a header mbuf is
//!   chained in front instead and counted as a headroom miss. Only a payload
//!   that does not start and end on buffer boundaries (no GRO output does
//!   that) is copied into fresh mbufs (`copied_segments`).
//! - Transmit: `rte_eth_tx_burst` in batches; what the PMD does not take after
//!   `tx_retries` attempts without progress is freed and counted
//!   (`tx_dropped`); there is no unbounded spin on a full ring.
//!
//! Here: the `Forwarder` (push, encapsulate, transmit); `conf` (encaps, TX
//! offloads and what they allow), `stats`, `gso` (TSO, software GSO, virtio),
//! `vxlan` (outer headers), `chain` (walking and summing mbuf chains).

use crate::csum;
use crate::dpdk::ethdev;
use crate::dpdk::mbuf::{self, field as mb, flags::*, rte_mbuf, RTE_PKTMBUF_HEADROOM};
use crate::dpdk::mempool::Mempool;
use crate::dpdk::tx::TxBatch;
use crate::gro::GroBuf;
use crate::port::gate::TxGate;
use crate::skb::{self, Skb, SkbMeta, SkbStats};
use crate::wire::{TCP_CWR, TCP_FIN, TCP_PSH};
use anyhow::{bail, Context, Result};
use std::sync::Arc;

mod big;
mod chain;
mod conf;
mod gso;
mod stats;
mod vxlan;

use chain::*;
pub use conf::*;
pub use stats::*;
use vxlan::*;

/// Longest header stack a segment carries (encap + L2 + L3 + L4).
const MAX_HDR: usize = 256;
/// Packets waiting for `rte_eth_tx_burst`.
const PENDING: usize = 256;
/// Transmit once this many are pending.
const TX_BURST: usize = 64;
/// mbufs a copied segment may span.
const MAX_COPY_SEGS: usize = 48;

/// Where the headers of a merged packet are, encapsulation included.
#[derive(Debug, Clone, Copy)]
struct Layout {
    /// Encapsulation bytes in front of the inner frame.
    elen: usize,
    /// Inner L2 (Ethernet + tags), L3 and L4 header lengths.
    l2: usize,
    l3: usize,
    l4: usize,
    mss: usize,
    /// Segments each packet out carries: 1 when software makes the
    /// segments; more when it cuts a BIG TCP packet into pieces the port's
    /// TSO takes (each within 64 KiB).
    per: usize,
    ipv6: bool,
    /// UDP datagrams merged (`l4` is the UDP header), else TCP segments.
    udp: bool,
    /// Segments received inside a tunnel (VXLAN, Geneve): its outer
    /// headers, which `l2` then spans up to the inner IP header.
    outer: Option<OuterLayout>,
}

/// Where a received tunnel's outer headers are, from the start of the frame
/// (after the forwarder's own encapsulation).
#[derive(Debug, Clone, Copy)]
struct OuterLayout {
    l3: usize,
    l4: usize,
    ipv6: bool,
    /// The outer IPv4 ID stays the same from segment to segment.
    id_fixed: bool,
}

impl Layout {
    #[inline(always)]
    fn ip(&self) -> usize {
        self.elen + self.l2
    }
    #[inline(always)]
    fn tcp(&self) -> usize {
        self.ip() + self.l3
    }
    #[inline(always)]
    fn hdr_len(&self) -> usize {
        self.tcp() + self.l4
    }
}

/// The TX stage of one worker for one output queue.
pub struct Forwarder {
    encap: Encap,
    /// The outer headers of Encap::Vxlan with the constant fields filled.
    outer: [u8; VXLAN_ENCAP_LEN as usize],
    outer_id: u16,
    caps: TxCaps,
    retries: u32,
    /// Header mbufs (headroom misses) and copied segments come from here.
    pool: Arc<Mempool>,
    pending: TxBatch<PENDING>,
    /// The pending batch carries offload requests: run rte_eth_tx_prepare.
    needs_prepare: bool,
    stats: ForwardStats,
    skb_stats: SkbStats,
    /// The run's word for the port, when it has one (see `crate::port::gate`).
    gate: Option<TxGate>,
}

// SAFETY: the forwarder owns the mbufs it holds; it is built on one thread
// and then used by the one lcore that transmits on its queue.
unsafe impl Send for Forwarder {}

impl Forwarder {
    /// A forwarder transmitting on `conf.port` queue `conf.queue` (configured
    /// and started by the caller), taking header mbufs and copies from `pool`
    /// (which must outlive the port: mbufs of it sit in the TX ring).
    pub fn new(conf: ForwardConf, pool: Arc<Mempool>) -> Result<Forwarder> {
        let info = crate::port::dev_info(conf.port)
            .with_context(|| format!("forward port {}", conf.port))?;
        if conf.queue >= info.nb_tx_queues {
            bail!(
                "forward port {}: TX queue {} does not exist ({} configured): configure one TX \
                 queue per forwarding worker",
                conf.port,
                conf.queue,
                info.nb_tx_queues
            );
        }
        if pool.priv_size() < skb::PRIV_SIZE {
            bail!(
                "forward pool {}: private area {} < {} (header mbufs carry the skb)",
                pool.name(),
                pool.priv_size(),
                skb::PRIV_SIZE
            );
        }
        if (pool.data_room() as usize) < RTE_PKTMBUF_HEADROOM as usize + MAX_HDR {
            bail!(
                "forward pool {}: data room {} is too small for headers (need {})",
                pool.name(),
                pool.data_room(),
                RTE_PKTMBUF_HEADROOM as usize + MAX_HDR
            );
        }
        let bits = match conf.offloads {
            TxOffloads::Software => 0,
            TxOffloads::Given(b) => b,
            TxOffloads::Port => {
                let mut c = ethdev::rte_eth_conf::default();
                let r = ethdev::dev_conf_get(conf.port, &mut c);
                if r != 0 {
                    bail!("forward port {}: cannot read its configuration", conf.port);
                }
                c.txmode.offloads
            }
        };
        let lim = info.tx_desc_lim;
        let max_segs = match (lim.nb_seg_max, lim.nb_mtu_seg_max) {
            (0, x) | (x, 0) => x,
            (a, b) => a.min(b),
        };
        let mut outer = [0u8; VXLAN_ENCAP_LEN as usize];
        if let Encap::Vxlan(v) = &conf.encap {
            if v.vni > 0x00ff_ffff {
                bail!("VXLAN VNI {} does not fit 24 bits", v.vni);
            }
            outer = outer_template(v);
        }
        Ok(Forwarder {
            encap: conf.encap,
            outer,
            outer_id: 0,
            caps: TxCaps::from_offloads(bits, max_segs),
            retries: conf.tx_retries,
            pool,
            pending: TxBatch::new(conf.port, conf.queue),
            needs_prepare: false,
            stats: ForwardStats::default(),
            skb_stats: SkbStats::default(),
            gate: None,
        })
    }

    /// The forwarder's counters so far.
    pub fn stats(&self) -> &ForwardStats {
        &self.stats
    }

    /// What the TX port segments itself, as the forwarder found it.
    pub fn caps(&self) -> TxCaps {
        self.caps
    }

    /// What the forwarder prepends.
    pub fn encap(&self) -> &Encap {
        &self.encap
    }

    /// Packets waiting for the next `flush`.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Takes one packet GRO delivered: encapsulates, segments, and queues it
    /// for transmission (sent when a batch fills, or at `flush`).
    #[inline]
    pub fn push(&mut self, skb: Skb) {
        self.stats.packets_in += 1;
        let meta = *skb.meta();
        let udp = meta.flags & skb::SKB_GSO_UDP != 0;
        let outer = meta.outer_l2_len as usize + meta.outer_l3_len as usize;
        let merged = meta.gso_segs > 1
            && meta.gso_size > 0
            && meta.l3_len >= 20
            && (meta.l4_len >= 20 || udp && meta.l4_len == 8)
            && outer
                + (meta.l2_len + meta.l3_len + meta.l4_len) as usize
                + VXLAN_ENCAP_LEN as usize
                <= MAX_HDR;
        if !merged {
            self.push_single(skb, &meta);
        } else {
            self.push_merged(skb, &meta);
        }
        if self.pending.len() >= TX_BURST {
            self.transmit(false);
        }
    }

    /// Transmits everything pending (call once per poll, after the pushes).
    /// While the port is closed to transmits (see [`crate::port::gate`]) what is
    /// pending waits.
    #[inline]
    pub fn flush(&mut self) {
        self.transmit(false);
    }

    /// The last flush: what cannot be sent now is freed and counted.
    pub fn finish(&mut self) {
        self.transmit(true);
    }

    /// Transmits only while `gate` is open: while it is closed packets
    /// wait, and a full batch is freed (`ForwardStats::link_down`).
    pub(crate) fn gated(mut self, gate: TxGate) -> Forwarder {
        self.gate = Some(gate);
        self
    }

    /// A packet that needs no segmentation: prepend and queue.
    #[inline]
    fn push_single(&mut self, mut skb: Skb, meta: &SkbMeta) {
        let elen = self.encap.header_len();
        if elen > 0 {
            let total = skb.len() + elen as usize;
            let sport = match &self.encap {
                Encap::Vxlan(v) => vxlan_sport(v, skb.as_ptr(), skb.head(), meta),
                _ => 0,
            };
            let id = self.next_outer_id();
            let outer = &self.outer;
            let Some(b) = skb.prepend(elen, &self.pool, &mut self.skb_stats) else {
                self.stats.no_mbuf += 1;
                self.sync_miss();
                return drop(skb);
            };
            match &self.encap {
                Encap::VirtioNet => b.fill(0),
                Encap::Vxlan(_) => write_outer(b, outer, total, id, sport, true),
                Encap::None => {}
            }
            self.sync_miss();
        }
        let m = skb.into_mbuf();
        // SAFETY: we own m.
        unsafe { clear_tx_flags(m) };
        self.queue(m);
    }

    /// A merged packet: encapsulate, then (TCP) TSO, software GSO or
    /// (virtio) the GSO layout in the header; (UDP) software segmentation.
    fn push_merged(&mut self, mut skb: Skb, meta: &SkbMeta) {
        let (ol2, ol3) = (meta.outer_l2_len as usize, meta.outer_l3_len as usize);
        let l2 = ol2 + ol3 + meta.l2_len as usize;
        // A BIG TCP packet (past 64 KiB) leaves in TSO pieces or segments of
        // software's making, its IPv6 jumbo header taken out first.
        let big = skb.len() - l2 > big::IP_MAX as usize;
        let mut l3 = meta.l3_len as usize;
        if big && ol3 == 0 {
            l3 -= big::strip_jumbo(&mut skb, l2);
        }
        let head = skb.head();
        let version = |at: usize| match head.get(at) {
            Some(b) if b >> 4 == 6 => Some(true),
            Some(b) if b >> 4 == 4 => Some(false),
            _ => None,
        };
        let (Some(ipv6), Some(outer_ipv6)) = (
            version(l2),
            if ol3 > 0 { version(ol2) } else { Some(false) },
        ) else {
            self.stats.malformed += 1;
            return drop(skb);
        };
        let outer = (ol3 > 0).then_some(OuterLayout {
            l3: ol2,
            l4: ol2 + ol3,
            ipv6: outer_ipv6,
            id_fixed: meta.flags & skb::SKB_GSO_OUTER_FIXEDID != 0,
        });
        let lay = Layout {
            elen: self.encap.header_len() as usize,
            l2,
            l3,
            l4: meta.l4_len as usize,
            mss: meta.gso_size as usize,
            per: 1,
            ipv6,
            udp: meta.flags & skb::SKB_GSO_UDP != 0,
            outer,
        };
        let sport = match &self.encap {
            Encap::Vxlan(v) => vxlan_sport(v, skb.as_ptr(), head, meta),
            _ => 0,
        };
        // Room a software segment may take in front of its payload: the bytes
        // its frame's headers occupied plus the headroom setting (of the
        // RTE_PKTMBUF_HEADROOM every received buffer has in front).
        let reserve = (RTE_PKTMBUF_HEADROOM as usize).saturating_sub(meta.headroom as usize);
        if lay.elen > 0 {
            let ok = skb
                .prepend(lay.elen as u16, &self.pool, &mut self.skb_stats)
                .is_some();
            self.sync_miss();
            if !ok {
                self.stats.no_mbuf += 1;
                return drop(skb);
            }
        }
        let m = skb.into_mbuf();
        let hl = lay.hdr_len();
        let mut h = [0u8; MAX_HDR];
        // SAFETY: we own the chain m; the helpers stay within its data.
        unsafe {
            if mb::pkt_len(m) as usize <= hl || !gather(m, lay.elen, &mut h[lay.elen..hl]) {
                self.stats.malformed += 1;
                return mbuf::free(m);
            }
            match self.encap {
                // Datagrams go back to datagrams in software, whatever the
                // port or peer offers; so do segments received in a tunnel.
                _ if lay.udp || lay.outer.is_some() => self.gso(m, &h, &lay, sport, reserve),
                // A BIG TCP packet: in TSO pieces within 64 KiB where the
                // port takes TSO, else in segments.
                Encap::None if big => {
                    let lay = Layout {
                        per: self.tso_piece(&lay),
                        ..lay
                    };
                    self.gso(m, &h, &lay, sport, reserve)
                }
                _ if big => self.gso(m, &h, &lay, sport, reserve),
                Encap::VirtioNet => self.virtio_gso(m, &mut h, &lay),
                Encap::None | Encap::Vxlan(_) => {
                    let vx = lay.elen > 0;
                    let can = match (vx, ipv6) {
                        (false, false) => self.caps.tso_v4,
                        (false, true) => self.caps.tso_v6,
                        (true, false) => self.caps.vxlan_tso_v4,
                        (true, true) => self.caps.vxlan_tso_v6,
                    };
                    if can && (self.caps.max_segs == 0 || mb::nb_segs(m) <= self.caps.max_segs) {
                        self.tso(m, &mut h, &lay, sport);
                    } else {
                        self.gso(m, &h, &lay, sport, reserve);
                    }
                }
            }
        }
    }

    /// Segments in each TSO piece of a BIG TCP packet going out without
    /// encapsulation: as many as keep a piece's IP length within 65535, its
    /// buffers within what the port takes (a segment's own buffer and one
    /// for the headers) and a copied piece within `MAX_COPY_SEGS`; 1
    /// (software segments) when the port has no TSO for the packet's IP
    /// version.
    fn tso_piece(&self, lay: &Layout) -> usize {
        let can = if lay.ipv6 {
            self.caps.tso_v6
        } else {
            self.caps.tso_v4
        };
        if !can || lay.mss == 0 {
            return 1;
        }
        let per = (big::IP_MAX as usize - lay.l3 - lay.l4) / lay.mss;
        let per = match self.caps.max_segs {
            0 => per,
            m => per.min((m as usize).saturating_sub(1)),
        };
        // A piece copied (a chain not cut at segment boundaries) must fit
        // the buffers a copy may take.
        let cap = (self.pool.data_room() as usize).saturating_sub(RTE_PKTMBUF_HEADROOM as usize);
        let copyable = (MAX_COPY_SEGS * cap).saturating_sub(lay.hdr_len()) / lay.mss;
        per.min(copyable).max(1)
    }

    #[inline(always)]
    fn next_outer_id(&mut self) -> u16 {
        let id = self.outer_id;
        self.outer_id = id.wrapping_add(1);
        id
    }

    #[inline(always)]
    fn sync_miss(&mut self) {
        self.stats.headroom_miss += self.skb_stats.headroom_miss;
        self.skb_stats.headroom_miss = 0;
    }

    /// Adds a packet to the batch (transmitting first if the batch is full).
    #[inline(always)]
    fn queue(&mut self, m: *mut rte_mbuf) {
        if self.pending.is_full() {
            self.transmit(true);
        }
        // SAFETY: a chain we own; the batch takes it.
        unsafe { self.pending.push(m) };
    }

    /// Sends the batch: bounded retries, the rest freed and counted. With
    /// the port closed, the batch waits unless it must be emptied
    /// (`must_empty`: it is full, or this is the end), then it is freed.
    fn transmit(&mut self, must_empty: bool) {
        if self.pending.is_empty() {
            return;
        }
        if self.gate.as_ref().is_some_and(|g| !g.open()) {
            if must_empty {
                self.stats.link_down += self.pending.free();
                self.needs_prepare = false;
            }
            return;
        }
        if self.needs_prepare {
            self.stats.prepare_failed += self.pending.prepare();
            self.needs_prepare = false;
        }
        let sent = self.pending.send(self.retries);
        self.stats.tx_packets += sent.packets;
        self.stats.tx_bytes += sent.bytes;
        self.stats.tx_dropped += sent.dropped;
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        self.transmit(true);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encap_parse() {
        assert_eq!(Encap::parse("none", 0), Ok(Encap::None));
        assert_eq!(Encap::parse("virtio", 0), Ok(Encap::VirtioNet));
        match Encap::parse("vxlan", 42).unwrap() {
            Encap::Vxlan(v) => assert_eq!(v.vni, 42),
            e => panic!("{e:?}"),
        }
        assert!(Encap::parse("vxlan", 1 << 24).is_err());
        assert!(Encap::parse("gre", 0).is_err());
        assert_eq!(Encap::parse("vxlan", 1).unwrap().header_len(), 50);
        assert_eq!(Encap::VirtioNet.header_len(), 12);
    }

    #[test]
    fn outer_headers() {
        let v = VxlanConf {
            vni: 0x123456,
            ..VxlanConf::default()
        };
        let t = outer_template(&v);
        let mut o = [0u8; 50];
        write_outer(&mut o, &t, 1564, 7, 50000, true);
        assert_eq!(&o[12..14], &[0x08, 0x00]);
        assert_eq!(u16::from_be_bytes([o[16], o[17]]), 1550);
        assert_eq!(u16::from_be_bytes([o[18], o[19]]), 7);
        assert_eq!(csum::sum(&o[14..34]), 0xffff, "outer IPv4 checksum");
        assert_eq!(u16::from_be_bytes([o[34], o[35]]), 50000);
        assert_eq!(u16::from_be_bytes([o[36], o[37]]), 4789);
        assert_eq!(u16::from_be_bytes([o[38], o[39]]), 1530);
        assert_eq!(&o[40..42], &[0, 0], "outer UDP checksum 0");
        assert_eq!(&o[42..50], &[0x08, 0, 0, 0, 0x12, 0x34, 0x56, 0]);
    }

    #[test]
    fn caps_need_every_bit() {
        let c = TxCaps::from_offloads(ethdev::bits::RTE_ETH_TX_OFFLOAD_TCP_TSO, 0);
        assert!(!c.tso_v4 && c.tso_v6 && !c.vxlan_tso_v4);
        let all = tx_offloads_wanted(&Encap::Vxlan(VxlanConf::default()));
        let c = TxCaps::from_offloads(all, 0);
        assert!(c.tso_v4 && c.tso_v6 && c.vxlan_tso_v4 && c.vxlan_tso_v6);
        let c = TxCaps::from_offloads(all & !TX_OFFLOAD_OUTER_IPV4_CKSUM, 0);
        assert!(c.tso_v4 && !c.vxlan_tso_v4);
    }

    #[test]
    fn outer_lens_in_the_offload_word() {
        // outer_l3_len:9 at bit 40, outer_l2_len:7 at bit 49 (x86-64 bit-fields).
        assert_eq!(outer_lens_word(20, 14) >> 40 & 0x1ff, 20);
        assert_eq!(outer_lens_word(20, 14) >> 49 & 0x7f, 14);
    }

    #[test]
    fn stats_round_trip() {
        let s = ForwardStats {
            packets_in: 1,
            tx_packets: 2,
            malformed: 13,
            link_down: 14,
            ..Default::default()
        };
        let c = ForwardCounters::default();
        c.publish(&s);
        assert_eq!(c.load(), s);
        let mut t = s;
        t.add(&s);
        assert_eq!(t.tx_packets, 4);
    }
}
