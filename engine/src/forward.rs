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

use crate::csum;
use crate::gro::GroBuf;
use crate::mempool::Mempool;
use crate::skb::{self, Skb, SkbMeta, SkbStats};
use anyhow::{bail, Context, Result};
use dpdk_sys::{self as sys, inline as mb};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

/// TX offload bits dpdk-sys does not name (`RTE_BIT64` in rte_ethdev.h, 22.11).
pub const TX_OFFLOAD_OUTER_IPV4_CKSUM: u64 = 1 << 7;
pub const TX_OFFLOAD_VXLAN_TNL_TSO: u64 = 1 << 9;

/// `struct virtio_net_hdr_mrg_rxbuf`.
pub const VIRTIO_NET_HDR_LEN: u16 = 12;
pub const VIRTIO_NET_HDR_F_NEEDS_CSUM: u8 = 1;
pub const VIRTIO_NET_HDR_GSO_NONE: u8 = 0;
pub const VIRTIO_NET_HDR_GSO_TCPV4: u8 = 1;
pub const VIRTIO_NET_HDR_GSO_TCPV6: u8 = 4;
pub const VIRTIO_NET_HDR_GSO_ECN: u8 = 0x80;

/// Outer Ethernet + IPv4 + UDP + VXLAN.
pub const VXLAN_ENCAP_LEN: u16 = 50;
pub const VXLAN_UDP_PORT: u16 = 4789;

const TCP_FIN: u8 = 0x01;
const TCP_PSH: u8 = 0x08;
const TCP_CWR: u8 = 0x80;

/// Longest header stack a segment carries (encap + L2 + L3 + L4).
const MAX_HDR: usize = 256;
/// Packets waiting for `rte_eth_tx_burst`.
const PENDING: usize = 256;
/// Transmit once this many are pending.
const TX_BURST: usize = 64;
/// mbufs a copied segment may span.
const MAX_COPY_SEGS: usize = 48;

/// The outer headers of `Encap::Vxlan`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VxlanConf {
    /// 24-bit VXLAN network identifier.
    pub vni: u32,
    pub src_mac: [u8; 6],
    pub dst_mac: [u8; 6],
    pub src_ip: [u8; 4],
    pub dst_ip: [u8; 4],
    /// Outer UDP source port; 0: derived from the inner flow (RFC 7348
    /// entropy, 49152..=65535), so one flow keeps one underlay path.
    pub src_port: u16,
    pub dst_port: u16,
    pub ttl: u8,
}

impl Default for VxlanConf {
    fn default() -> Self {
        VxlanConf {
            vni: 1,
            src_mac: [0x02, 0, 0, 0, 0, 0x0a],
            dst_mac: [0x02, 0, 0, 0, 0, 0x0b],
            src_ip: [192, 0, 2, 1],
            dst_ip: [192, 0, 2, 2],
            src_port: 0,
            dst_port: VXLAN_UDP_PORT,
            ttl: 64,
        }
    }
}

/// What is prepended to every packet forwarded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Encap {
    #[default]
    None,
    /// A 12 B virtio_net_hdr_mrg_rxbuf (little endian, as virtio 1.0 and
    /// legacy x86 peers read it). A merged packet is not segmented: the header
    /// carries its GSO layout (gso_type, gso_size, hdr_len) and a partial
    /// checksum (NEEDS_CSUM, csum_start, csum_offset; the TCP checksum field
    /// holds the pseudo-header sum with the length, as Linux's
    /// CHECKSUM_PARTIAL); the peer segments. `num_buffers` is left 0 (the
    /// receiving device fills it).
    VirtioNet,
    Vxlan(VxlanConf),
}

impl Encap {
    /// Bytes prepended.
    pub fn header_len(&self) -> u16 {
        match self {
            Encap::None => 0,
            Encap::VirtioNet => VIRTIO_NET_HDR_LEN,
            Encap::Vxlan(_) => VXLAN_ENCAP_LEN,
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Encap::None => "none",
            Encap::VirtioNet => "virtio",
            Encap::Vxlan(_) => "vxlan",
        }
    }

    /// The CLI form: `none`, `virtio` or `vxlan` (with `vni`, the other
    /// outer fields at their defaults).
    pub fn parse(kind: &str, vni: u32) -> Result<Encap, String> {
        match kind {
            "none" => Ok(Encap::None),
            "virtio" | "virtio-net" => Ok(Encap::VirtioNet),
            "vxlan" => {
                if vni > 0x00ff_ffff {
                    return Err(format!("--vni {vni} is out of range: give 0..=16777215"));
                }
                Ok(Encap::Vxlan(VxlanConf {
                    vni,
                    ..VxlanConf::default()
                }))
            }
            _ => Err(format!(
                "--encap {kind}: unknown encapsulation; give none, virtio or vxlan"
            )),
        }
    }
}

/// Which TX offloads the forwarder may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TxOffloads {
    /// What the port was configured with (`rte_eth_dev_conf_get`).
    #[default]
    Port,
    /// None: software segmentation always.
    Software,
    /// These `RTE_ETH_TX_OFFLOAD_*` bits (tests; a port configured elsewhere).
    Given(u64),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ForwardConf {
    pub port: u16,
    pub queue: u16,
    pub encap: Encap,
    pub offloads: TxOffloads,
    /// `rte_eth_tx_burst` calls that take nothing before the rest of a batch
    /// is dropped.
    pub tx_retries: u32,
}

impl Default for ForwardConf {
    fn default() -> Self {
        ForwardConf {
            port: 0,
            queue: 0,
            encap: Encap::None,
            offloads: TxOffloads::Port,
            tx_retries: 8,
        }
    }
}

/// The TX offloads a forward port should be configured with (mask them with
/// `dev_info.tx_offload_capa`, as for every offload).
pub fn tx_offloads_wanted(encap: &Encap) -> u64 {
    let mut w = sys::RTE_ETH_TX_OFFLOAD_MULTI_SEGS
        | sys::RTE_ETH_TX_OFFLOAD_TCP_TSO
        | sys::RTE_ETH_TX_OFFLOAD_IPV4_CKSUM
        | sys::RTE_ETH_TX_OFFLOAD_TCP_CKSUM;
    if let Encap::Vxlan(_) = encap {
        w |= TX_OFFLOAD_VXLAN_TNL_TSO | TX_OFFLOAD_OUTER_IPV4_CKSUM;
    }
    w
}

/// What segmentation the TX port does, from its offload bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TxCaps {
    pub tso_v4: bool,
    pub tso_v6: bool,
    /// VXLAN tunnel TSO (with the outer IPv4 checksum the NIC must redo).
    pub vxlan_tso_v4: bool,
    pub vxlan_tso_v6: bool,
    /// Buffers one TSO packet may span (0: no limit known).
    pub max_segs: u16,
}

impl TxCaps {
    pub fn from_offloads(bits: u64, max_segs: u16) -> TxCaps {
        let has = |b: u64| bits & b == b;
        let v4csum = has(sys::RTE_ETH_TX_OFFLOAD_IPV4_CKSUM);
        let tso = has(sys::RTE_ETH_TX_OFFLOAD_TCP_TSO);
        let tnl = has(TX_OFFLOAD_VXLAN_TNL_TSO | TX_OFFLOAD_OUTER_IPV4_CKSUM);
        TxCaps {
            tso_v4: tso && v4csum,
            tso_v6: tso,
            vxlan_tso_v4: tnl && v4csum,
            vxlan_tso_v6: tnl,
            max_segs,
        }
    }
}

/// The forwarder's counters (single writer: its lcore).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct ForwardStats {
    /// Packets handed to `push`.
    pub packets_in: u64,
    /// Packets (segments, TSO packets) the PMD took, and their bytes.
    pub tx_packets: u64,
    pub tx_bytes: u64,
    /// Packets the PMD did not take after the retries: freed.
    pub tx_dropped: u64,
    /// Prepends (and software segments) that did not fit the headroom: a
    /// header mbuf was chained in front.
    pub headroom_miss: u64,
    /// Merged packets segmented in software, and the segments made.
    pub gso_packets: u64,
    pub gso_segments: u64,
    /// Software segments whose payload was copied (unaligned chains).
    pub copied_segments: u64,
    /// Merged packets handed to the port with RTE_MBUF_F_TX_TCP_SEG.
    pub tso_packets: u64,
    /// Merged packets handed whole to a virtio peer (gso_type set).
    pub virtio_gso_packets: u64,
    /// Packets (or segments) dropped: no mbuf for a header or a copy.
    pub no_mbuf: u64,
    /// Packets dropped: rte_eth_tx_prepare refused them.
    pub prepare_failed: u64,
    /// Merged packets dropped: their layout cannot be segmented.
    pub malformed: u64,
}

impl ForwardStats {
    const N: usize = 13;

    fn to_array(self) -> [u64; Self::N] {
        [
            self.packets_in,
            self.tx_packets,
            self.tx_bytes,
            self.tx_dropped,
            self.headroom_miss,
            self.gso_packets,
            self.gso_segments,
            self.copied_segments,
            self.tso_packets,
            self.virtio_gso_packets,
            self.no_mbuf,
            self.prepare_failed,
            self.malformed,
        ]
    }

    fn from_array(a: [u64; Self::N]) -> ForwardStats {
        ForwardStats {
            packets_in: a[0],
            tx_packets: a[1],
            tx_bytes: a[2],
            tx_dropped: a[3],
            headroom_miss: a[4],
            gso_packets: a[5],
            gso_segments: a[6],
            copied_segments: a[7],
            tso_packets: a[8],
            virtio_gso_packets: a[9],
            no_mbuf: a[10],
            prepare_failed: a[11],
            malformed: a[12],
        }
    }

    /// Sums another forwarder's counters into these.
    pub fn add(&mut self, o: &ForwardStats) {
        let mut a = self.to_array();
        for (x, y) in a.iter_mut().zip(o.to_array()) {
            *x += y;
        }
        *self = ForwardStats::from_array(a);
    }
}

/// `ForwardStats` shared with the stats thread: single-writer atomics,
/// published with plain stores.
#[derive(Debug, Default)]
pub struct ForwardCounters([AtomicU64; ForwardStats::N]);

impl ForwardCounters {
    pub fn publish(&self, s: &ForwardStats) {
        for (c, v) in self.0.iter().zip(s.to_array()) {
            c.store(v, Relaxed);
        }
    }

    pub fn load(&self) -> ForwardStats {
        let mut a = [0u64; ForwardStats::N];
        for (v, c) in a.iter_mut().zip(&self.0) {
            *v = c.load(Relaxed);
        }
        ForwardStats::from_array(a)
    }
}

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
    ipv6: bool,
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

/// A read position in an mbuf chain the forwarder owns from `m` on.
struct Cursor {
    m: *mut sys::rte_mbuf,
    off: usize,
}

/// The TX stage of one worker for one output queue.
pub struct Forwarder {
    port: u16,
    queue: u16,
    encap: Encap,
    /// The outer headers of Encap::Vxlan with the constant fields filled.
    outer: [u8; VXLAN_ENCAP_LEN as usize],
    outer_id: u16,
    caps: TxCaps,
    retries: u32,
    /// Header mbufs (headroom misses) and copied segments come from here.
    pool: Arc<Mempool>,
    pending: [*mut sys::rte_mbuf; PENDING],
    n: usize,
    pending_bytes: u64,
    /// The pending batch carries offload requests: run rte_eth_tx_prepare.
    needs_prepare: bool,
    stats: ForwardStats,
    skb_stats: SkbStats,
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
        if (pool.data_room() as usize) < sys::RTE_PKTMBUF_HEADROOM as usize + MAX_HDR {
            bail!(
                "forward pool {}: data room {} is too small for headers (need {})",
                pool.name(),
                pool.data_room(),
                sys::RTE_PKTMBUF_HEADROOM as usize + MAX_HDR
            );
        }
        let bits = match conf.offloads {
            TxOffloads::Software => 0,
            TxOffloads::Given(b) => b,
            TxOffloads::Port => {
                let mut c = sys::rte_eth_conf::default();
                // SAFETY: valid port id (dev_info worked) and out-pointer.
                let r = unsafe { sys::rte_eth_dev_conf_get(conf.port, &mut c) };
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
            port: conf.port,
            queue: conf.queue,
            encap: conf.encap,
            outer,
            outer_id: 0,
            caps: TxCaps::from_offloads(bits, max_segs),
            retries: conf.tx_retries,
            pool,
            pending: [std::ptr::null_mut(); PENDING],
            n: 0,
            pending_bytes: 0,
            needs_prepare: false,
            stats: ForwardStats::default(),
            skb_stats: SkbStats::default(),
        })
    }

    pub fn stats(&self) -> &ForwardStats {
        &self.stats
    }

    pub fn caps(&self) -> TxCaps {
        self.caps
    }

    pub fn encap(&self) -> &Encap {
        &self.encap
    }

    /// Packets waiting for the next `flush`.
    pub fn pending(&self) -> usize {
        self.n
    }

    /// Takes one packet GRO delivered: encapsulates, segments, and queues it
    /// for transmission (sent when a batch fills, or at `flush`).
    #[inline]
    pub fn push(&mut self, skb: Skb) {
        self.stats.packets_in += 1;
        let meta = *skb.meta();
        let merged = meta.gso_segs > 1
            && meta.gso_size > 0
            && meta.l3_len >= 20
            && meta.l4_len >= 20
            && (meta.l2_len + meta.l3_len + meta.l4_len) as usize + VXLAN_ENCAP_LEN as usize
                <= MAX_HDR;
        if !merged {
            self.push_single(skb, &meta);
        } else {
            self.push_merged(skb, &meta);
        }
        if self.n >= TX_BURST {
            self.transmit();
        }
    }

    /// Transmits everything pending (call once per poll, after the pushes).
    #[inline]
    pub fn flush(&mut self) {
        self.transmit();
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

    /// A merged TCP packet: encapsulate, then TSO, software GSO or (virtio)
    /// the GSO layout in the header.
    fn push_merged(&mut self, mut skb: Skb, meta: &SkbMeta) {
        let head = skb.head();
        let l2 = meta.l2_len as usize;
        let ipv6 = match head.get(l2) {
            Some(b) if b >> 4 == 6 => true,
            Some(b) if b >> 4 == 4 => false,
            _ => {
                self.stats.malformed += 1;
                return drop(skb);
            }
        };
        let lay = Layout {
            elen: self.encap.header_len() as usize,
            l2,
            l3: meta.l3_len as usize,
            l4: meta.l4_len as usize,
            mss: meta.gso_size as usize,
            ipv6,
        };
        let sport = match &self.encap {
            Encap::Vxlan(v) => vxlan_sport(v, skb.as_ptr(), head, meta),
            _ => 0,
        };
        // Room a software segment may take in front of its payload: the bytes
        // its frame's headers occupied plus the headroom setting (of the
        // RTE_PKTMBUF_HEADROOM every received buffer has in front).
        let reserve = (sys::RTE_PKTMBUF_HEADROOM as usize).saturating_sub(meta.headroom as usize);
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
                return sys::rte_pktmbuf_free(m);
            }
            match self.encap {
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

    /// Hands a merged packet whole to a virtio peer: the header says how to
    /// segment it, the TCP checksum is partial (pseudo-header with length).
    unsafe fn virtio_gso(&mut self, m: *mut sys::rte_mbuf, h: &mut [u8; MAX_HDR], lay: &Layout) {
        let hl = lay.hdr_len();
        let tcp = lay.tcp();
        let tcp_len = mb::pkt_len(m) as usize - tcp;
        let inner_hdr = (lay.l2 + lay.l3 + lay.l4) as u16;
        let mut gso_type = if lay.ipv6 {
            VIRTIO_NET_HDR_GSO_TCPV6
        } else {
            VIRTIO_NET_HDR_GSO_TCPV4
        };
        if h[tcp + 13] & TCP_CWR != 0 {
            gso_type |= VIRTIO_NET_HDR_GSO_ECN;
        }
        let v = &mut h[..VIRTIO_NET_HDR_LEN as usize];
        v[0] = VIRTIO_NET_HDR_F_NEEDS_CSUM;
        v[1] = gso_type;
        v[2..4].copy_from_slice(&inner_hdr.to_le_bytes());
        v[4..6].copy_from_slice(&(lay.mss as u16).to_le_bytes());
        v[6..8].copy_from_slice(&((lay.l2 + lay.l3) as u16).to_le_bytes());
        v[8..10].copy_from_slice(&16u16.to_le_bytes());
        v[10..12].copy_from_slice(&0u16.to_le_bytes());
        let p = pseudo(h, lay, tcp_len);
        h[tcp + 16..tcp + 18].copy_from_slice(&p.to_be_bytes());
        scatter(m, 0, &h[..hl]);
        clear_tx_flags(m);
        self.stats.virtio_gso_packets += 1;
        self.queue(m);
    }

    /// Hands a merged packet to the port's TSO (DPDK's contract: TCP
    /// checksum = pseudo-header sum without the length, IPv4 checksum 0).
    unsafe fn tso(
        &mut self,
        m: *mut sys::rte_mbuf,
        h: &mut [u8; MAX_HDR],
        lay: &Layout,
        sport: u16,
    ) {
        let hl = lay.hdr_len();
        let (ip, tcp) = (lay.ip(), lay.tcp());
        let mut flags = sys::RTE_MBUF_F_TX_TCP_SEG;
        if lay.ipv6 {
            flags |= sys::RTE_MBUF_F_TX_IPV6;
        } else {
            flags |= sys::RTE_MBUF_F_TX_IPV4 | sys::RTE_MBUF_F_TX_IP_CKSUM;
            h[ip + 10..ip + 12].copy_from_slice(&[0, 0]);
        }
        let p = pseudo(h, lay, 0);
        h[tcp + 16..tcp + 18].copy_from_slice(&p.to_be_bytes());
        let mut word =
            mb::tx_offload_word(lay.l2 as u64, lay.l3 as u64, lay.l4 as u64, lay.mss as u64);
        if lay.elen > 0 {
            let id = self.next_outer_id();
            let total = mb::pkt_len(m) as usize;
            write_outer(&mut h[..lay.elen], &self.outer, total, id, sport, false);
            flags |= sys::RTE_MBUF_F_TX_OUTER_IPV4
                | sys::RTE_MBUF_F_TX_OUTER_IP_CKSUM
                | sys::RTE_MBUF_F_TX_TUNNEL_VXLAN;
            // Tunnel layout: l2_len = outer UDP + VXLAN + inner L2.
            word = mb::tx_offload_word(
                16 + lay.l2 as u64,
                lay.l3 as u64,
                lay.l4 as u64,
                lay.mss as u64,
            ) | outer_lens_word(20, 14);
        }
        scatter(m, 0, &h[..hl]);
        (*m).ol_flags = ((*m).ol_flags & !sys::RTE_MBUF_F_TX_OFFLOAD_MASK) | flags;
        (*m).__bindgen_anon_3.tx_offload = word;
        self.stats.tso_packets += 1;
        self.needs_prepare = true;
        self.queue(m);
    }

    /// Software GSO: the merged chain `m` (headers `tmpl`) back into
    /// MSS-sized segments, in place where the chain allows.
    unsafe fn gso(
        &mut self,
        m: *mut sys::rte_mbuf,
        tmpl: &[u8; MAX_HDR],
        lay: &Layout,
        sport: u16,
        reserve: usize,
    ) {
        let hl = lay.hdr_len();
        let payload = mb::pkt_len(m) as usize - hl;
        let mss = lay.mss;
        let nseg = payload.div_ceil(mss);
        self.stats.gso_packets += 1;
        let mut hdr = [0u8; MAX_HDR];
        // Segment 0 keeps the head (and whatever prepend chained in front).
        let len0 = mss.min(payload);
        let (x, cnt, acc) = walk(m, hl + len0);
        let mut cur;
        if acc == hl + len0 && !x.is_null() {
            cur = Cursor {
                m: (*x).next,
                off: 0,
            };
            (*x).next = std::ptr::null_mut();
            (*m).nb_segs = cnt;
            (*m).pkt_len = (hl + len0) as u32;
            let ps = chain_sum(m, hl, len0);
            self.seg_header(&mut hdr, tmpl, lay, 0, len0, nseg == 1, ps, sport);
            scatter(m, 0, &hdr[..hl]);
            clear_tx_flags(m);
            self.stats.gso_segments += 1;
            self.queue(m);
        } else {
            cur = Cursor { m, off: hl };
            if !self.copy_segment(&mut cur, tmpl, lay, 0, len0, nseg == 1, sport) {
                return free_cursor(&mut cur);
            }
        }
        for k in 1..nseg {
            let seglen = mss.min(payload - k * mss);
            let last = k + 1 == nseg;
            normalize(&mut cur);
            if cur.m.is_null() {
                self.stats.malformed += 1;
                return;
            }
            if cur.off == 0 {
                let (x, cnt, acc) = walk(cur.m, seglen);
                if acc == seglen && !x.is_null() {
                    let first = cur.m;
                    cur.m = (*x).next;
                    (*x).next = std::ptr::null_mut();
                    let ps = chain_sum(first, 0, seglen);
                    self.seg_header(&mut hdr, tmpl, lay, k, seglen, last, ps, sport);
                    self.emit_aligned(first, cnt, &hdr[..hl], seglen, reserve);
                    continue;
                }
            }
            if !self.copy_segment(&mut cur, tmpl, lay, k, seglen, last, sport) {
                return free_cursor(&mut cur);
            }
        }
        free_cursor(&mut cur);
    }

    /// A segment whose payload is exactly the chain `first` (`cnt` buffers):
    /// headers written in front of it (a pointer move) or, when the room is
    /// short, in a header mbuf chained in front (a headroom miss).
    unsafe fn emit_aligned(
        &mut self,
        first: *mut sys::rte_mbuf,
        cnt: u16,
        hdr: &[u8],
        seglen: usize,
        reserve: usize,
    ) {
        let hl = hdr.len();
        const NOT_DIRECT: u64 = sys::RTE_MBUF_F_INDIRECT | sys::RTE_MBUF_F_EXTERNAL;
        let writable = mb::refcnt(first) == 1 && mb::ol_flags(first) & NOT_DIRECT == 0;
        let room = if writable {
            (mb::headroom(first) as usize).saturating_sub(reserve)
        } else {
            0
        };
        let seg = if room >= hl {
            (*first).data_off -= hl as u16;
            (*first).data_len += hl as u16;
            std::ptr::copy_nonoverlapping(hdr.as_ptr(), mb::mtod(first), hl);
            (*first).nb_segs = cnt;
            (*first).pkt_len = (hl + seglen) as u32;
            clear_tx_flags(first);
            first
        } else {
            self.stats.headroom_miss += 1;
            let h = sys::rte_pktmbuf_alloc(self.pool.as_ptr());
            if h.is_null() {
                self.stats.no_mbuf += 1;
                return sys::rte_pktmbuf_free(first);
            }
            std::ptr::copy_nonoverlapping(hdr.as_ptr(), mb::mtod(h), hl);
            (*h).data_len = hl as u16;
            (*h).pkt_len = (hl + seglen) as u32;
            (*h).nb_segs = cnt + 1;
            (*h).next = first;
            (*h).port = (*first).port;
            h
        };
        self.stats.gso_segments += 1;
        self.queue(seg);
    }

    /// A segment copied from the cursor into fresh mbufs (a chain whose
    /// payload does not fall on buffer boundaries). False if the chain ran
    /// short (the rest is dropped, counted malformed).
    #[allow(clippy::too_many_arguments)]
    unsafe fn copy_segment(
        &mut self,
        cur: &mut Cursor,
        tmpl: &[u8; MAX_HDR],
        lay: &Layout,
        k: usize,
        seglen: usize,
        last: bool,
        sport: u16,
    ) -> bool {
        let hl = lay.hdr_len();
        let cap = (self.pool.data_room() as usize) - sys::RTE_PKTMBUF_HEADROOM as usize;
        let need = (hl + seglen).div_ceil(cap);
        let mut d = [std::ptr::null_mut::<sys::rte_mbuf>(); MAX_COPY_SEGS];
        let ok = need <= MAX_COPY_SEGS
            && sys::rte_pktmbuf_alloc_bulk(self.pool.as_ptr(), d.as_mut_ptr(), need as u32) == 0;
        if !ok {
            self.stats.no_mbuf += 1;
            // Skip the segment's payload.
            return take(cur, seglen, |_| {}) == seglen;
        }
        let d = &mut d[..need];
        (*d[0]).data_len = hl as u16;
        let (mut i, mut sum) = (0usize, Sum::default());
        let got = take(cur, seglen, |mut piece: &[u8]| {
            sum.add(piece);
            while !piece.is_empty() {
                let dm = d[i];
                let room = mb::tailroom(dm) as usize;
                if room == 0 {
                    i += 1;
                    continue;
                }
                let n = room.min(piece.len());
                std::ptr::copy_nonoverlapping(
                    piece.as_ptr(),
                    mb::mtod(dm).add(mb::data_len(dm) as usize),
                    n,
                );
                (*dm).data_len += n as u16;
                piece = &piece[n..];
            }
        });
        if got < seglen {
            sys::rte_pktmbuf_free_bulk(d.as_mut_ptr(), need as u32);
            self.stats.malformed += 1;
            return false;
        }
        for j in 1..need {
            (*d[j - 1]).next = d[j];
        }
        let h = d[0];
        (*h).nb_segs = need as u16;
        (*h).pkt_len = (hl + seglen) as u32;
        let mut hdr = [0u8; MAX_HDR];
        self.seg_header(&mut hdr, tmpl, lay, k, seglen, last, sum.s, sport);
        std::ptr::copy_nonoverlapping(hdr.as_ptr(), mb::mtod(h), hl);
        self.stats.gso_segments += 1;
        self.stats.copied_segments += 1;
        self.queue(h);
        true
    }

    /// Segment `k`'s headers from the merged packet's (`tmpl`), for a payload
    /// of `seglen` bytes whose one's-complement sum is `psum`.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    fn seg_header(
        &mut self,
        out: &mut [u8; MAX_HDR],
        tmpl: &[u8; MAX_HDR],
        lay: &Layout,
        k: usize,
        seglen: usize,
        last: bool,
        psum: u16,
        sport: u16,
    ) {
        let hl = lay.hdr_len();
        out[..hl].copy_from_slice(&tmpl[..hl]);
        if lay.elen == VXLAN_ENCAP_LEN as usize {
            let id = self.next_outer_id();
            write_outer(
                &mut out[..lay.elen],
                &self.outer,
                hl + seglen,
                id,
                sport,
                true,
            );
        }
        let (ip, tcp, l3) = (lay.ip(), lay.tcp(), lay.l3);
        let tcp_len = lay.l4 + seglen;
        if lay.ipv6 {
            let plen = (l3 - 40 + tcp_len) as u16;
            out[ip + 4..ip + 6].copy_from_slice(&plen.to_be_bytes());
        } else {
            let id0 = u16::from_be_bytes([tmpl[ip + 4], tmpl[ip + 5]]);
            out[ip + 2..ip + 4].copy_from_slice(&((l3 + tcp_len) as u16).to_be_bytes());
            out[ip + 4..ip + 6].copy_from_slice(&id0.wrapping_add(k as u16).to_be_bytes());
            out[ip + 10..ip + 12].copy_from_slice(&[0, 0]);
            let c = csum::ipv4_header(&out[ip..ip + l3]);
            out[ip + 10..ip + 12].copy_from_slice(&c.to_be_bytes());
        }
        let seq0 = u32::from_be_bytes([tmpl[tcp + 4], tmpl[tcp + 5], tmpl[tcp + 6], tmpl[tcp + 7]]);
        let seq = seq0.wrapping_add((k * lay.mss) as u32);
        out[tcp + 4..tcp + 8].copy_from_slice(&seq.to_be_bytes());
        let mut f = tmpl[tcp + 13];
        if k > 0 {
            f &= !TCP_CWR;
        }
        if !last {
            f &= !(TCP_PSH | TCP_FIN);
        }
        out[tcp + 13] = f;
        out[tcp + 16..tcp + 18].copy_from_slice(&[0, 0]);
        let s = csum::add(
            csum::add(
                pseudo(out, lay, tcp_len),
                csum::sum(&out[tcp..tcp + lay.l4]),
            ),
            psum,
        );
        out[tcp + 16..tcp + 18].copy_from_slice(&csum::finish(s).to_be_bytes());
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
    fn queue(&mut self, m: *mut sys::rte_mbuf) {
        if self.n == PENDING {
            self.transmit();
        }
        // SAFETY: field read of a chain we own.
        self.pending_bytes += unsafe { mb::pkt_len(m) } as u64;
        self.pending[self.n] = m;
        self.n += 1;
    }

    /// Sends the batch: bounded retries, the rest freed and counted.
    fn transmit(&mut self) {
        let mut n = self.n;
        if n == 0 {
            return;
        }
        let mut lost_bytes = 0u64;
        // SAFETY: pending[..n] are chains we own until the PMD takes them.
        unsafe {
            if self.needs_prepare {
                let mut start = 0;
                while start < n {
                    let k = sys::rte_eth_tx_prepare(
                        self.port,
                        self.queue,
                        self.pending.as_mut_ptr().add(start),
                        (n - start) as u16,
                    ) as usize;
                    if start + k >= n {
                        break;
                    }
                    // pending[start + k] is one the driver cannot send.
                    let bad = start + k;
                    lost_bytes += mb::pkt_len(self.pending[bad]) as u64;
                    sys::rte_pktmbuf_free(self.pending[bad]);
                    self.pending.copy_within(bad + 1..n, bad);
                    n -= 1;
                    self.stats.prepare_failed += 1;
                    start = bad;
                }
            }
            let mut done = 0usize;
            let mut idle = 0u32;
            while done < n {
                let k = sys::rte_eth_tx_burst(
                    self.port,
                    self.queue,
                    self.pending.as_mut_ptr().add(done),
                    (n - done) as u16,
                ) as usize;
                done += k;
                if k == 0 {
                    idle += 1;
                    if idle > self.retries {
                        break;
                    }
                    std::hint::spin_loop();
                }
            }
            if done < n {
                for &m in &self.pending[done..n] {
                    lost_bytes += mb::pkt_len(m) as u64;
                }
                sys::rte_pktmbuf_free_bulk(self.pending.as_mut_ptr().add(done), (n - done) as u32);
                self.stats.tx_dropped += (n - done) as u64;
            }
            self.stats.tx_packets += done as u64;
        }
        self.stats.tx_bytes += self.pending_bytes - lost_bytes;
        self.n = 0;
        self.pending_bytes = 0;
        self.needs_prepare = false;
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        self.transmit();
    }
}

/// The outer headers with every constant field filled.
fn outer_template(v: &VxlanConf) -> [u8; VXLAN_ENCAP_LEN as usize] {
    let mut o = [0u8; VXLAN_ENCAP_LEN as usize];
    o[0..6].copy_from_slice(&v.dst_mac);
    o[6..12].copy_from_slice(&v.src_mac);
    o[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let ip = &mut o[14..34];
    ip[0] = 0x45;
    ip[8] = v.ttl;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&v.src_ip);
    ip[16..20].copy_from_slice(&v.dst_ip);
    let udp = &mut o[34..42];
    udp[0..2].copy_from_slice(&v.src_port.to_be_bytes());
    udp[2..4].copy_from_slice(&v.dst_port.to_be_bytes());
    let vx = &mut o[42..50];
    vx[0] = 0x08; // I flag: the VNI is valid
    vx[4..7].copy_from_slice(&v.vni.to_be_bytes()[1..4]);
    o
}

/// Writes the outer headers for a frame of `total` bytes (outer included).
/// The outer UDP checksum is 0 (allowed over IPv4); the IPv4 header checksum
/// is computed unless the NIC does it (`ip_csum` false: left 0).
#[inline]
fn write_outer(dst: &mut [u8], tmpl: &[u8; 50], total: usize, id: u16, sport: u16, ip_csum: bool) {
    let dst = &mut dst[..50];
    dst.copy_from_slice(tmpl);
    let ip_len = (total - 14).min(0xffff) as u16;
    let udp_len = (total - 34).min(0xffff) as u16;
    dst[16..18].copy_from_slice(&ip_len.to_be_bytes());
    dst[18..20].copy_from_slice(&id.to_be_bytes());
    if ip_csum {
        let c = csum::ipv4_header(&dst[14..34]);
        dst[24..26].copy_from_slice(&c.to_be_bytes());
    }
    if sport != 0 {
        dst[34..36].copy_from_slice(&sport.to_be_bytes());
    }
    dst[38..40].copy_from_slice(&udp_len.to_be_bytes());
}

/// `outer_l3_len` and `outer_l2_len` in the tx_offload word (bits 40 and 49).
#[inline(always)]
const fn outer_lens_word(outer_l3: u64, outer_l2: u64) -> u64 {
    (outer_l3 & 0x1ff) << 40 | (outer_l2 & 0x7f) << 49
}

/// The outer UDP source port: configured, or from the inner flow (the RX
/// RSS hash when the NIC gave one, else the addresses and ports).
fn vxlan_sport(v: &VxlanConf, m: *mut sys::rte_mbuf, head: &[u8], meta: &SkbMeta) -> u16 {
    if v.src_port != 0 {
        return v.src_port;
    }
    // SAFETY: field reads of a live mbuf we own.
    let h = unsafe {
        if mb::ol_flags(m) & sys::RTE_MBUF_F_RX_RSS_HASH as u64 != 0 {
            mb::rss_hash(m)
        } else {
            flow_hash(head, meta)
        }
    };
    49152 | (h ^ (h >> 16)) as u16 & 0x3fff
}

/// FNV-1a over the inner flow's addresses and ports (or its MAC addresses
/// when it is not IP).
fn flow_hash(head: &[u8], meta: &SkbMeta) -> u32 {
    let fnv = |h: u32, b: &[u8]| {
        b.iter()
            .fold(h, |h, &x| (h ^ x as u32).wrapping_mul(0x0100_0193))
    };
    let mut h = 0x811c_9dc5u32;
    let mut l3 = meta.l2_len as usize;
    if meta.l3_len == 0 {
        // Not parsed by GRO: find L3 past the VLAN tags.
        l3 = 12;
        while let Some(t) = head.get(l3..l3 + 2) {
            if t == [0x81, 0x00] || t == [0x88, 0xa8] {
                l3 += 4;
            } else {
                break;
            }
        }
        l3 += 2;
    }
    let et = head
        .get(l3 - 2..l3)
        .map(|t| u16::from_be_bytes([t[0], t[1]]));
    let (addrs, proto, l4) = match et {
        Some(0x0800) if head.len() >= l3 + 20 => {
            let ip = &head[l3..l3 + 20];
            let frag = u16::from_be_bytes([ip[6], ip[7]]) & 0x3fff;
            let l4 = if frag == 0 {
                l3 + (ip[0] & 0x0f) as usize * 4
            } else {
                0
            };
            (&ip[12..20], ip[9], l4)
        }
        Some(0x86dd) if head.len() >= l3 + 40 => (&head[l3 + 8..l3 + 40], head[l3 + 6], l3 + 40),
        _ => return fnv(h, head.get(..12).unwrap_or(head)),
    };
    h = fnv(h, addrs);
    if l4 != 0 && (proto == 6 || proto == 17) {
        if let Some(p) = head.get(l4..l4 + 4) {
            h = fnv(h, p);
        }
    }
    h
}

/// The TCP pseudo-header sum for a TCP length (addresses from `h`).
#[inline]
fn pseudo(h: &[u8], lay: &Layout, tcp_len: usize) -> u16 {
    let ip = lay.ip();
    if lay.ipv6 {
        let a: &[u8; 16] = h[ip + 8..ip + 24].try_into().unwrap();
        let b: &[u8; 16] = h[ip + 24..ip + 40].try_into().unwrap();
        csum::pseudo_v6(a, b, 6, tcp_len as u32)
    } else {
        let a: [u8; 4] = h[ip + 12..ip + 16].try_into().unwrap();
        let b: [u8; 4] = h[ip + 16..ip + 20].try_into().unwrap();
        csum::pseudo_v4(a, b, 6, tcp_len as u16)
    }
}

/// A running one's-complement sum over pieces of any length.
#[derive(Default)]
struct Sum {
    s: u16,
    odd: bool,
}

impl Sum {
    #[inline(always)]
    fn add(&mut self, piece: &[u8]) {
        let cs = csum::sum(piece);
        self.s = csum::add(self.s, if self.odd { cs.swap_bytes() } else { cs });
        self.odd ^= piece.len() & 1 == 1;
    }
}

#[inline(always)]
unsafe fn clear_tx_flags(m: *mut sys::rte_mbuf) {
    (*m).ol_flags &= !sys::RTE_MBUF_F_TX_OFFLOAD_MASK;
}

/// Walks from `m` until `len` bytes are covered: the mbuf reached, the
/// mbufs walked, the bytes they hold (null and less than `len` if short).
#[inline(always)]
unsafe fn walk(m: *mut sys::rte_mbuf, len: usize) -> (*mut sys::rte_mbuf, u16, usize) {
    let (mut x, mut cnt, mut acc) = (m, 0u16, 0usize);
    while !x.is_null() {
        acc += mb::data_len(x) as usize;
        cnt += 1;
        if acc >= len {
            return (x, cnt, acc);
        }
        x = mb::next(x);
    }
    (x, cnt, acc)
}

/// Calls `f` on the bytes `[off, off + len)` of a chain, chunk by chunk.
#[inline(always)]
unsafe fn for_chunks(
    mut m: *mut sys::rte_mbuf,
    mut off: usize,
    mut len: usize,
    mut f: impl FnMut(*mut u8, usize),
) -> bool {
    while !m.is_null() && len > 0 {
        let dl = mb::data_len(m) as usize;
        if off >= dl {
            off -= dl;
        } else {
            let n = (dl - off).min(len);
            f(mb::mtod(m).add(off), n);
            len -= n;
            off = 0;
        }
        m = mb::next(m);
    }
    len == 0
}

/// Copies `out.len()` bytes from chain offset `off`.
unsafe fn gather(m: *mut sys::rte_mbuf, off: usize, out: &mut [u8]) -> bool {
    let mut at = 0;
    for_chunks(m, off, out.len(), |p, n| {
        std::ptr::copy_nonoverlapping(p, out.as_mut_ptr().add(at), n);
        at += n;
    })
}

/// Writes `src` at chain offset `off`.
unsafe fn scatter(m: *mut sys::rte_mbuf, off: usize, src: &[u8]) -> bool {
    let mut at = 0;
    for_chunks(m, off, src.len(), |p, n| {
        std::ptr::copy_nonoverlapping(src.as_ptr().add(at), p, n);
        at += n;
    })
}

/// One's-complement sum of `[off, off + len)` of a chain.
unsafe fn chain_sum(m: *mut sys::rte_mbuf, off: usize, len: usize) -> u16 {
    let mut s = Sum::default();
    for_chunks(m, off, len, |p, n| s.add(std::slice::from_raw_parts(p, n)));
    s.s
}

/// Moves the cursor past exhausted mbufs (freeing them).
#[inline(always)]
unsafe fn normalize(cur: &mut Cursor) {
    while !cur.m.is_null() && cur.off >= mb::data_len(cur.m) as usize {
        cur.off -= mb::data_len(cur.m) as usize;
        let next = mb::next(cur.m);
        (*cur.m).next = std::ptr::null_mut();
        sys::rte_pktmbuf_free_seg(cur.m);
        cur.m = next;
    }
}

/// Reads `len` bytes at the cursor, freeing the mbufs it finishes; returns
/// the bytes read (less if the chain ends).
unsafe fn take(cur: &mut Cursor, len: usize, mut f: impl FnMut(&[u8])) -> usize {
    let mut got = 0;
    while got < len {
        normalize(cur);
        if cur.m.is_null() {
            break;
        }
        let dl = mb::data_len(cur.m) as usize;
        let n = (dl - cur.off).min(len - got);
        f(std::slice::from_raw_parts(mb::mtod(cur.m).add(cur.off), n));
        cur.off += n;
        got += n;
    }
    normalize(cur);
    got
}

/// Frees what is left of the chain.
unsafe fn free_cursor(cur: &mut Cursor) {
    if !cur.m.is_null() {
        sys::rte_pktmbuf_free(cur.m);
        cur.m = std::ptr::null_mut();
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
        let c = TxCaps::from_offloads(sys::RTE_ETH_TX_OFFLOAD_TCP_TSO, 0);
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
