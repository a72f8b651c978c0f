//! The forward stage on a real EAL (4 KiB pages): GRO-merged packets are
//! forwarded to a loopback port built on one ring (TX enqueues into the ring
//! RX dequeues from, so what was sent is read back, same mbufs, flags and
//! all). Software GSO gives back the original frames byte for byte; VXLAN
//! and virtio-net headers are right and the inner packet intact; headroom 0
//! costs counted misses and the output is still right; TSO hands the packet
//! down with the right flags and lengths; a full TX ring drops and counts;
//! every mbuf goes back to its pool.
//!
//! `cargo test --release --test forward -- --ignored --nocapture` prints the
//! headroom experiment (seed 004): VXLAN forward rate with headroom 128 vs 0.

mod common;

use dpdk_sys::{self as sys, inline as mb};
use grorx::csum;
use grorx::forward::{
    Encap, ForwardConf, ForwardStats, Forwarder, TxOffloads, VxlanConf,
    TX_OFFLOAD_OUTER_IPV4_CKSUM, TX_OFFLOAD_VXLAN_TNL_TSO,
};
use grorx::gro::{Gro, GroBuf, GroConfig, GsoInfo, OutCsum};
use grorx::mbuf::{Burst, Mbuf};
use grorx::mempool::{Mempool, PoolParams};
use grorx::port::{Port, PortConf};
use grorx::skb::{self, Skb, SkbConf, SkbMode, SkbStats};
use grorx::traffic::{
    segment_stream, Addrs, FlowSpec, Segment, TCP_ACK, TCP_CWR, TCP_FIN, TCP_PSH,
};
use grorx::wire::{Fields, Tcp};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

static SEQ: AtomicU32 = AtomicU32::new(0);

fn pool(elements: u32, room: u16) -> Arc<Mempool> {
    cached_pool(elements, room, 0)
}

fn cached_pool(elements: u32, room: u16, cache: u32) -> Arc<Mempool> {
    Arc::new(
        Mempool::create(&PoolParams {
            name: format!("t-fwd-{}", SEQ.fetch_add(1, Ordering::Relaxed)),
            elements,
            cache,
            priv_size: skb::PRIV_SIZE,
            data_room: room,
            socket: -1,
        })
        .unwrap(),
    )
}

/// A port whose TX queue feeds its own RX queue (one ring for both).
struct Loopback {
    port: Option<Port>,
    ring: *mut sys::rte_ring,
    id: u16,
}

impl Loopback {
    fn new(slots: u32, rx_pool: &Mempool) -> Loopback {
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        let rname = std::ffi::CString::new(format!("tfwd_r{n}")).unwrap();
        let pname = std::ffi::CString::new(format!("tfwd_p{n}")).unwrap();
        // SAFETY: valid names; the ring outlives the port (freed in drop).
        let (ring, id) = unsafe {
            let ring = sys::rte_ring_create(rname.as_ptr(), slots, 0, 0);
            assert!(!ring.is_null(), "ring of {slots} slots");
            let rings = [ring];
            let id =
                sys::rte_eth_from_rings(pname.as_ptr(), rings.as_ptr(), 1, rings.as_ptr(), 1, 0);
            assert!(id >= 0, "rte_eth_from_rings");
            (ring, id as u16)
        };
        let mut port = Port::configure(id, &PortConf::default(), &[rx_pool]).unwrap();
        port.start(false).unwrap();
        Loopback {
            port: Some(port),
            ring,
            id,
        }
    }

    /// Everything sent so far, as the RX side gets it.
    fn rx_all(&self) -> Vec<Mbuf> {
        let mut out = Vec::new();
        let mut b: Burst<64> = Burst::new();
        loop {
            let n = b.rx(self.id, 0, 64);
            if n == 0 {
                break;
            }
            for &m in b.as_slice() {
                // SAFETY: the burst hands each received chain over once.
                out.push(unsafe { Mbuf::from_raw(m) }.unwrap());
            }
            b.clear_moved();
        }
        out
    }
}

impl Drop for Loopback {
    fn drop(&mut self) {
        drop(self.rx_all());
        self.port.take();
        // SAFETY: the port using the ring is closed.
        unsafe { sys::rte_ring_free(self.ring) };
    }
}

fn skb_conf(p: &Mempool, headroom: u16) -> SkbConf {
    SkbConf {
        mode: SkbMode::Build,
        headroom,
        buf_truesize: skb::truesize_of(p),
        head_pool: std::ptr::null_mut(),
        head_truesize: 0,
        copy_len: 128,
    }
}

/// A frame as a chain of mbufs holding `room` bytes each.
fn mbuf_of(p: &Mempool, frame: &[u8], room: usize) -> *mut sys::rte_mbuf {
    common::chain(p, frame.chunks(room))
}

/// Frames -> mbufs -> skbs -> GRO: what GRO delivers, in order.
fn merged(p: &Mempool, headroom: u16, frames: &[Vec<u8>], room: usize, cfg: GroConfig) -> Vec<Skb> {
    let sc = skb_conf(p, headroom);
    let mut gro: Gro<Skb> = Gro::new(cfg);
    let mut st = SkbStats::default();
    let mut out = Vec::new();
    for f in frames {
        // SAFETY: a fresh chain from our pool, given to the skb.
        let s = unsafe { Skb::build(mbuf_of(p, f, room), &sc, &mut st) };
        gro.receive(s, 0, &mut |o| out.push(o));
    }
    gro.flush_all(&mut |o| out.push(o));
    out
}

fn forwarder(lo: &Loopback, encap: Encap, offloads: TxOffloads, pool: &Arc<Mempool>) -> Forwarder {
    Forwarder::new(
        ForwardConf {
            port: lo.id,
            queue: 0,
            encap,
            offloads,
            tx_retries: 4,
        },
        pool.clone(),
    )
    .unwrap()
}

fn forward_all(f: &mut Forwarder, skbs: Vec<Skb>) -> ForwardStats {
    for s in skbs {
        f.push(s);
    }
    f.flush();
    *f.stats()
}

/// Checks a chain's bookkeeping and returns its bytes.
fn bytes_of(m: &Mbuf) -> Vec<u8> {
    let b = m.to_vec();
    let mut n = 0;
    let mut s = m.as_ptr();
    while !s.is_null() {
        n += 1;
        // SAFETY: walking a chain we own.
        s = unsafe { mb::next(s) };
    }
    assert_eq!(n, m.nb_segs() as usize, "nb_segs matches the chain");
    assert_eq!(b.len(), m.pkt_len() as usize, "pkt_len matches the data");
    b
}

/// Byte equality, reported as the first offset that differs.
fn same(got: &[u8], want: &[u8], what: &str) {
    if got != want {
        let at = got.iter().zip(want).position(|(a, b)| a != b);
        panic!(
            "{what}: {} vs {} bytes, first difference at {at:?}",
            got.len(),
            want.len()
        );
    }
}

fn verify_tcp(frame: &[u8]) -> Tcp {
    let t = Tcp::parse(frame, frame.len(), true).expect("parses, IPv4 checksum valid");
    let f = Fields::new(frame, t);
    let tcp = &frame[t.l4 as usize..];
    let s = csum::add(f.pseudo_sum(tcp.len() as u32), csum::sum(tcp));
    assert_eq!(s, 0xffff, "TCP checksum");
    t
}

fn tx_flags(m: &Mbuf) -> u64 {
    // SAFETY: field read of an mbuf we own.
    unsafe { mb::ol_flags(m.as_ptr()) & sys::RTE_MBUF_F_TX_OFFLOAD_MASK }
}

/// A stream whose first segment carries CWR and whose last carries FIN.
fn cwr_fin_stream(spec: &FlowSpec, n: usize, mss: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            let payload: Vec<u8> = (0..mss)
                .map(|o| grorx::traffic::pattern_byte(9, (i * mss + o) as u64))
                .collect();
            let mut flags = TCP_ACK;
            if i == 0 {
                flags |= TCP_CWR;
            }
            if i + 1 == n {
                flags |= TCP_FIN;
            }
            spec.frame(
                &Segment {
                    seq: 7 + (i * mss) as u32,
                    ack: 1,
                    flags,
                    ip_id: 100 + i as u16,
                    tsval: 5,
                    tsecr: 6,
                    payload_len: 0,
                },
                &payload,
            )
        })
        .collect()
}

#[test]
fn gro_then_gso_gives_back_the_original_frames() {
    let _e = common::eal();
    let p = pool(4095, 2176);
    let lo = Loopback::new(4096, &p);
    let mut cases = 0;
    for ipv6 in [false, true] {
        for vlans in [vec![], vec![100], vec![10, 20]] {
            for out_csum in [OutCsum::Full, OutCsum::Pseudo] {
                for headroom in [128, 0] {
                    let mut spec = FlowSpec::numbered(1, ipv6);
                    spec.vlans = vlans.clone();
                    // 21 segments, the last short with PSH: 17 + 4 after GRO.
                    let mut frames = segment_stream(&spec, 1, 0xffff_f000, 20 * 1448 + 700, 1448);
                    frames.extend(cwr_fin_stream(&FlowSpec::numbered(2, ipv6), 5, 1000));
                    let cfg = GroConfig {
                        out_csum,
                        ..GroConfig::default()
                    };
                    let skbs = merged(&p, headroom, &frames, 4096, cfg);
                    assert_eq!(
                        skbs.iter().map(|s| s.meta().gso_segs).collect::<Vec<_>>(),
                        vec![17, 4, 5]
                    );
                    let mut f = forwarder(&lo, Encap::None, TxOffloads::Port, &p);
                    let st = forward_all(&mut f, skbs);
                    let out = lo.rx_all();
                    let got: Vec<Vec<u8>> = out.iter().map(bytes_of).collect();
                    assert_eq!(got.len(), frames.len());
                    for (i, (g, w)) in got.iter().zip(&frames).enumerate() {
                        same(g, w, &format!("segment {i} (ipv6 {ipv6}, vlans {vlans:?}, {out_csum:?}, headroom {headroom})"));
                    }
                    for m in &out {
                        assert_eq!(m.nb_segs(), 1, "in place: one buffer per segment");
                        assert_eq!(tx_flags(m), 0, "no TX offload flags left");
                    }
                    assert_eq!(st.gso_packets, 3);
                    assert_eq!(st.gso_segments, 26);
                    assert_eq!(st.copied_segments, 0, "zero-copy");
                    // Encap none needs no more than the frames' own header bytes.
                    assert_eq!(st.headroom_miss, 0);
                    assert_eq!((st.tx_packets, st.tx_dropped, st.tso_packets), (26, 0, 0));
                    let bytes: usize = frames.iter().map(|f| f.len()).sum();
                    assert_eq!(st.tx_bytes, bytes as u64);
                    drop(out);
                    drop(f);
                    assert_eq!(p.in_use(), 0, "every mbuf back");
                    cases += 1;
                }
            }
        }
    }
    assert_eq!(cases, 24);
}

#[test]
fn multi_buffer_frames_come_back_as_chains() {
    let _e = common::eal();
    // 1152 B buffers: a 1514 B frame takes 1024 + 490.
    let p = pool(4095, 1152);
    let big = pool(1023, 2176);
    let lo = Loopback::new(1024, &p);
    let spec = FlowSpec::numbered(3, false);
    let frames = segment_stream(&spec, 3, 1, 12 * 1448, 1448);
    let skbs = merged(&p, 128, &frames, 1024, GroConfig::default());
    assert_eq!(skbs.len(), 2, "8 frames of 2 buffers fill 17 frags: 8 + 4");
    let mut f = forwarder(&lo, Encap::None, TxOffloads::Port, &big);
    let st = forward_all(&mut f, skbs);
    let out = lo.rx_all();
    let got: Vec<Vec<u8>> = out.iter().map(bytes_of).collect();
    assert_eq!(got, frames);
    assert!(out.iter().all(|m| m.nb_segs() == 2));
    assert_eq!((st.gso_segments, st.copied_segments), (12, 0));
    drop(out);
    drop(f);
    assert_eq!(p.in_use() + big.in_use(), 0);
}

#[test]
fn unaligned_chains_are_copied() {
    let _e = common::eal();
    let p = pool(1023, 2176);
    let lo = Loopback::new(1024, &p);
    let spec = FlowSpec::numbered(4, false);
    let want = segment_stream(&spec, 4, 1, 3 * 1448 + 100, 1448);
    // One large segment (as LRO would make), its buffers cut every 1000 B.
    let payload: Vec<u8> = want.iter().flat_map(|f| f[66..].to_vec()).collect();
    let big = spec.frame(
        &Segment {
            seq: 1,
            ack: 1,
            flags: TCP_ACK | TCP_PSH,
            ip_id: 1,
            tsval: 1000,
            tsecr: 500,
            payload_len: 0,
        },
        &payload,
    );
    let sc = skb_conf(&p, 128);
    let mut st = SkbStats::default();
    // SAFETY: a fresh chain we give to the skb.
    let mut s = unsafe { Skb::build(mbuf_of(&p, &big, 1000), &sc, &mut st) };
    s.set_gso(&GsoInfo {
        l2_len: 14,
        l3_len: 20,
        l4_len: 32,
        mss: 1448,
        segs: 4,
        ipv6: false,
        ..GsoInfo::default()
    });
    let mut f = forwarder(&lo, Encap::None, TxOffloads::Software, &p);
    let fs = forward_all(&mut f, vec![s]);
    let got: Vec<Vec<u8>> = lo.rx_all().iter().map(bytes_of).collect();
    assert_eq!(got, want);
    assert_eq!((fs.gso_segments, fs.copied_segments), (4, 4));
    drop(f);
    assert_eq!(p.in_use(), 0);
}

#[test]
fn copy_mode_heads_and_vxlan_without_headroom() {
    let _e = common::eal();
    let p = pool(2047, 2176);
    let heads = pool(511, 128 + 256);
    let lo = Loopback::new(1024, &p);
    let spec = FlowSpec::numbered(11, false);
    let frames = segment_stream(&spec, 11, 9, 10 * 1448, 1448);
    for (encap, headroom) in [
        (Encap::None, 128),
        (Encap::Vxlan(VxlanConf::default()), 128),
        (Encap::Vxlan(VxlanConf::default()), 0),
    ] {
        // Copy mode: a separate head holding exactly the headers.
        let sc = SkbConf {
            mode: SkbMode::Copy,
            head_pool: heads.as_ptr(),
            head_truesize: skb::truesize_of(&heads),
            ..skb_conf(&p, headroom)
        };
        let mut gro: Gro<Skb> = Gro::new(GroConfig::default());
        let mut st = SkbStats::default();
        let mut skbs = Vec::new();
        for f in &frames {
            // SAFETY: a fresh chain from our pool, given to the skb.
            let s = unsafe { Skb::build(mbuf_of(&p, f, 4096), &sc, &mut st) };
            gro.receive(s, 0, &mut |o| skbs.push(o));
        }
        gro.flush_all(&mut |o| skbs.push(o));
        assert_eq!(skbs.len(), 1);
        let mut f = forwarder(&lo, encap, TxOffloads::Port, &p);
        let fs = forward_all(&mut f, skbs);
        let elen = encap.header_len() as usize;
        let got: Vec<Vec<u8>> = lo.rx_all().iter().map(bytes_of).collect();
        assert_eq!(got.len(), frames.len());
        for (g, w) in got.iter().zip(&frames) {
            same(&g[elen..], w, "inner frame");
        }
        assert_eq!(
            (fs.packets_in, fs.gso_segments, fs.copied_segments),
            (1, 10, 0)
        );
        drop(f);
        assert_eq!(p.in_use() + heads.in_use(), 0);
    }
}

#[test]
fn a_missing_tx_queue_is_refused() {
    let _e = common::eal();
    let p = pool(255, 2176);
    let lo = Loopback::new(64, &p);
    let e = Forwarder::new(
        ForwardConf {
            port: lo.id,
            queue: 1,
            ..ForwardConf::default()
        },
        p.clone(),
    )
    .err()
    .expect("queue 1 of a one-queue port");
    assert!(e.to_string().contains("TX queue 1"), "{e}");
}

/// Checks the outer headers of one VXLAN frame `o`; returns the outer IP ID
/// and the UDP source port.
fn check_outer(o: &[u8], v: &VxlanConf) -> (u16, u16) {
    assert_eq!(&o[0..6], &v.dst_mac);
    assert_eq!(&o[6..12], &v.src_mac);
    assert_eq!(&o[12..14], &[0x08, 0x00]);
    let ip = &o[14..34];
    assert_eq!(ip[0], 0x45);
    assert_eq!(u16::from_be_bytes([ip[2], ip[3]]) as usize, o.len() - 14);
    assert_eq!((ip[8], ip[9]), (v.ttl, 17));
    assert_eq!(&ip[12..16], &v.src_ip);
    assert_eq!(&ip[16..20], &v.dst_ip);
    assert_eq!(csum::sum(ip), 0xffff, "outer IPv4 checksum");
    let udp = &o[34..42];
    let sport = u16::from_be_bytes([udp[0], udp[1]]);
    assert!(sport >= 49152);
    assert_eq!(u16::from_be_bytes([udp[2], udp[3]]), 4789);
    assert_eq!(u16::from_be_bytes([udp[4], udp[5]]) as usize, o.len() - 34);
    assert_eq!(&udp[6..8], &[0, 0], "outer UDP checksum 0");
    let vni = v.vni.to_be_bytes();
    assert_eq!(&o[42..50], &[0x08, 0, 0, 0, vni[1], vni[2], vni[3], 0]);
    (u16::from_be_bytes([ip[4], ip[5]]), sport)
}

#[test]
fn vxlan_wraps_each_segment_with_and_without_headroom() {
    let _e = common::eal();
    let p = pool(4095, 2176);
    let lo = Loopback::new(4096, &p);
    let v = VxlanConf {
        vni: 0xabcdef,
        ..VxlanConf::default()
    };
    for ipv6 in [false, true] {
        for headroom in [128u16, 64, 0] {
            let spec = FlowSpec::numbered(5, ipv6);
            let mut frames = segment_stream(&spec, 5, 77, 20 * 1448, 1448);
            // Something GRO lets through untouched (not TCP): wrapped too.
            let mut arp = vec![0xffu8; 6];
            arp.extend_from_slice(&[2, 0, 0, 0, 0, 9, 0x08, 0x06]);
            arp.extend_from_slice(&[0x11; 46]);
            frames.push(arp);
            let skbs = merged(&p, headroom, &frames, 4096, GroConfig::default());
            assert_eq!(skbs.len(), 3);
            let mut f = forwarder(&lo, Encap::Vxlan(v), TxOffloads::Port, &p);
            let st = forward_all(&mut f, skbs);
            let out = lo.rx_all();
            assert_eq!(out.len(), frames.len());
            let mut ids = Vec::new();
            let mut sports = Vec::new();
            for (m, want) in out.iter().zip(&frames) {
                let b = bytes_of(m);
                let (id, sport) = check_outer(&b, &v);
                same(&b[50..], want, "inner frame");
                ids.push(id);
                sports.push(sport);
                if headroom >= 50 {
                    assert_eq!(m.nb_segs(), 1, "prepend in the headroom");
                }
            }
            assert!(
                sports[..20].iter().all(|&s| s == sports[0]),
                "one flow, one port"
            );
            for w in ids.windows(2) {
                assert_eq!(w[1], w[0].wrapping_add(1), "outer IP ID per frame");
            }
            assert_eq!((st.gso_segments, st.copied_segments), (20, 0));
            if headroom >= 50 {
                assert_eq!(st.headroom_miss, 0);
            } else {
                // The heads' prepends (2 merged + 1 passed) and the 18
                // segments that had only their own header bytes in front.
                assert_eq!(st.headroom_miss, 3 + 18);
            }
            drop(out);
            drop(f);
            assert_eq!(p.in_use(), 0, "every mbuf back (headroom {headroom})");
        }
    }
}

#[test]
fn virtio_net_header_describes_the_merged_packet() {
    let _e = common::eal();
    let p = pool(2047, 2176);
    let lo = Loopback::new(1024, &p);
    for ipv6 in [false, true] {
        for headroom in [128u16, 0] {
            let spec = FlowSpec::numbered(6, ipv6);
            let mut frames = segment_stream(&spec, 6, 1000, 20 * 1448, 1448);
            let mut cwr = cwr_fin_stream(&FlowSpec::numbered(7, ipv6), 3, 1448);
            frames.append(&mut cwr);
            // A lone segment: GRO leaves it whole (one segment).
            let lone = segment_stream(&FlowSpec::numbered(8, ipv6), 8, 5, 1448, 1448);
            frames.extend(lone.iter().cloned());
            let skbs = merged(&p, headroom, &frames, 4096, GroConfig::default());
            assert_eq!(
                skbs.iter().map(|s| s.meta().gso_segs).collect::<Vec<_>>(),
                vec![17, 3, 3, 1]
            );
            let mut f = forwarder(&lo, Encap::VirtioNet, TxOffloads::Port, &p);
            let st = forward_all(&mut f, skbs);
            let out = lo.rx_all();
            assert_eq!(out.len(), 4, "merged packets go whole to the peer");
            let (l3, hl) = if ipv6 {
                (40, 14 + 40 + 32)
            } else {
                (20, 14 + 20 + 32)
            };
            let mut payload = Vec::new();
            for (i, m) in out.iter().enumerate() {
                let b = bytes_of(m);
                let (v, pkt) = b.split_at(12);
                let le = |o: usize| u16::from_le_bytes([v[o], v[o + 1]]);
                if i == 3 {
                    assert_eq!(v, &[0u8; 12], "no GSO, checksum complete");
                    assert_eq!(pkt, &lone[0][..]);
                    continue;
                }
                let mut gso = if ipv6 { 4 } else { 1 };
                if i == 2 {
                    gso |= 0x80; // the first segment had CWR: ECN
                }
                assert_eq!((v[0], v[1]), (1, gso), "NEEDS_CSUM, gso_type");
                assert_eq!(le(2), hl as u16, "hdr_len");
                assert_eq!(le(4), 1448, "gso_size");
                assert_eq!((le(6), le(8)), (14 + l3, 16), "csum_start, csum_offset");
                assert_eq!(le(10), 0, "num_buffers");
                // What the peer does with a partial checksum: sum from
                // csum_start, store at csum_start + csum_offset.
                let mut full = pkt.to_vec();
                let cs = le(6) as usize;
                let c = csum::finish(csum::sum(&full[cs..]));
                full[cs + 16..cs + 18].copy_from_slice(&c.to_be_bytes());
                let t = verify_tcp(&full);
                if i < 2 {
                    payload.extend_from_slice(&full[t.payload as usize..]);
                }
            }
            let want: Vec<u8> = frames[..20].iter().flat_map(|f| f[hl..].to_vec()).collect();
            assert_eq!(payload, want, "payload intact");
            assert_eq!(st.virtio_gso_packets, 3);
            assert_eq!(st.gso_segments, 0);
            assert_eq!(st.headroom_miss, if headroom >= 12 { 0 } else { 4 });
            drop(out);
            drop(f);
            assert_eq!(p.in_use(), 0);
        }
    }
}

/// The TX offloads of a port that takes plain TCP segmentation.
const TSO_OFFLOADS: u64 = sys::RTE_ETH_TX_OFFLOAD_TCP_TSO
    | sys::RTE_ETH_TX_OFFLOAD_IPV4_CKSUM
    | sys::RTE_ETH_TX_OFFLOAD_TCP_CKSUM
    | sys::RTE_ETH_TX_OFFLOAD_MULTI_SEGS;

#[test]
fn tso_ports_get_the_whole_packet_with_offload_flags() {
    let _e = common::eal();
    let p = pool(2047, 2176);
    let lo = Loopback::new(1024, &p);
    let tso = TSO_OFFLOADS;
    let tunnel = tso | TX_OFFLOAD_VXLAN_TNL_TSO | TX_OFFLOAD_OUTER_IPV4_CKSUM;
    let v = VxlanConf::default();
    for ipv6 in [false, true] {
        let spec = FlowSpec::numbered(9, ipv6);
        let frames = segment_stream(&spec, 9, 3, 20 * 1448, 1448);
        let l3 = if ipv6 { 40u64 } else { 20 };
        let ipf = if ipv6 {
            sys::RTE_MBUF_F_TX_IPV6
        } else {
            sys::RTE_MBUF_F_TX_IPV4 | sys::RTE_MBUF_F_TX_IP_CKSUM
        };
        for (encap, bits) in [
            (Encap::None, tso),
            (Encap::Vxlan(v), tunnel),
            (Encap::Vxlan(v), tso), // no tunnel TSO: software
        ] {
            let skbs = merged(&p, 128, &frames, 4096, GroConfig::default());
            let mut f = forwarder(&lo, encap, TxOffloads::Given(bits), &p);
            let st = forward_all(&mut f, skbs);
            let out = lo.rx_all();
            let elen = encap.header_len() as usize;
            if bits == tso && elen > 0 {
                assert_eq!((out.len(), st.gso_segments, st.tso_packets), (20, 20, 0));
                assert!(out.iter().all(|m| tx_flags(m) == 0));
                drop(out);
                continue;
            }
            assert_eq!((out.len(), st.tso_packets, st.gso_segments), (2, 2, 0));
            let mut payload = Vec::new();
            for m in &out {
                let b = bytes_of(m);
                let inner = &b[elen..];
                let t = Tcp::parse(inner, inner.len(), false).unwrap();
                let fl = Fields::new(inner, t);
                let l4 = t.l4 as usize;
                assert_eq!(
                    u16::from_be_bytes([inner[l4 + 16], inner[l4 + 17]]),
                    fl.pseudo_sum(0),
                    "TCP checksum: pseudo-header sum without the length"
                );
                if !ipv6 {
                    assert_eq!(&inner[24..26], &[0, 0], "IPv4 checksum left to the NIC");
                }
                payload.extend_from_slice(&inner[t.payload as usize..]);
                // SAFETY: field read of an mbuf we own.
                let word = unsafe { mb::tx_offload(m.as_ptr()) };
                if elen == 0 {
                    assert_eq!(tx_flags(m), sys::RTE_MBUF_F_TX_TCP_SEG | ipf);
                    assert_eq!(word, mb::tx_offload_word(14, l3, 32, 1448));
                } else {
                    assert_eq!(
                        tx_flags(m),
                        sys::RTE_MBUF_F_TX_TCP_SEG
                            | ipf
                            | sys::RTE_MBUF_F_TX_OUTER_IPV4
                            | sys::RTE_MBUF_F_TX_OUTER_IP_CKSUM
                            | sys::RTE_MBUF_F_TX_TUNNEL_VXLAN
                    );
                    let outer = (20u64 << 40) | (14u64 << 49);
                    assert_eq!(word, mb::tx_offload_word(30, l3, 32, 1448) | outer);
                    assert_eq!(&b[24..26], &[0, 0], "outer IPv4 checksum left to the NIC");
                    assert_eq!(u16::from_be_bytes([b[16], b[17]]) as usize, b.len() - 14);
                }
            }
            let hl = spec.header_len();
            let want: Vec<u8> = frames.iter().flat_map(|f| f[hl..].to_vec()).collect();
            assert_eq!(payload, want);
            drop(out);
            drop(f);
            assert_eq!(p.in_use(), 0);
        }
    }
}

#[test]
fn a_full_tx_ring_drops_and_counts() {
    let _e = common::eal();
    let p = pool(2047, 2176);
    // 64 slots: 63 packets fit.
    let lo = Loopback::new(64, &p);
    let mut frames = Vec::new();
    for flow in 0..5 {
        frames.extend(segment_stream(
            &FlowSpec::numbered(flow, false),
            flow,
            0,
            20 * 1448,
            1448,
        ));
    }
    for encap in [Encap::None, Encap::Vxlan(VxlanConf::default())] {
        let skbs = merged(&p, 0, &frames, 4096, GroConfig::default());
        assert_eq!(skbs.len(), 10);
        let mut f = forwarder(&lo, encap, TxOffloads::Port, &p);
        let st = forward_all(&mut f, skbs);
        assert_eq!(st.tx_packets, 63, "{st:?}");
        assert_eq!(st.tx_dropped, 100 - 63, "{st:?}");
        assert_eq!(st.gso_segments, 100);
        let got = lo.rx_all();
        assert_eq!(got.len(), 63);
        drop(got);
        drop(f);
        assert_eq!(p.in_use(), 0, "dropped segments were freed");
    }
}

/// The headroom experiment (seed 004): the same input forwarded with VXLAN,
/// headroom 128 (prepends are pointer moves) vs 0 (every prepend chains a
/// header mbuf), side by side, rounds interleaved, on an EAL worker lcore (a
/// mempool cache, as the engine's workers have). Only the forwarder's work is
/// timed (push + flush into a ring); building the input and draining the
/// ring (freeing) are not.
#[test]
#[ignore]
fn measure_vxlan_headroom() {
    let (eal, _g) = common::eal();
    let hz = eal.tsc_hz() as f64;
    let lcore = eal.worker_lcores()[0];
    let out = eal
        .launch(lcore, move || {
            println!("{}", measure(hz));
            0
        })
        .unwrap();
    assert_eq!(out.wait(), 0);
}

fn measure(hz: f64) -> String {
    use std::fmt::Write;
    let p = cached_pool(8191, 2176, 256);
    let lo = Loopback::new(4096, &p);
    let v = Encap::Vxlan(VxlanConf::default());
    let mut frames = Vec::new();
    for flow in 0..16 {
        frames.extend(segment_stream(
            &FlowSpec::numbered(flow, false),
            flow,
            0,
            16 * 1448,
            1448,
        ));
    }
    let sc128 = skb_conf(&p, 128);
    let sc0 = skb_conf(&p, 0);
    let rounds = 400;
    let mut r = String::new();
    let _ = writeln!(
        r,
        "VXLAN forward on lcore {}, {} TCP frames of 1514 B per batch, {rounds} rounds",
        // SAFETY: rte_lcore_id only reads this thread's lcore id (EAL is up).
        unsafe { sys::rte_lcore_id() },
        frames.len()
    );
    for (what, gro) in [
        ("GRO-merged (16 segs/pkt), software GSO", true),
        ("unmerged 1514 B frames", false),
    ] {
        // Index 0: headroom 128, 1: headroom 0.
        let mut cyc = [0u64; 2];
        let mut segs = [0u64; 2];
        let mut pkts = [0u64; 2];
        let mut ratios = Vec::new();
        // Per round: ns per output segment, for medians (robust to preemption).
        let mut ns: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
        let mut stats = [ForwardStats::default(), ForwardStats::default()];
        for round in 0..rounds {
            let mut rate = [0f64; 2];
            for k in 0..2 {
                let i = (k + round) % 2; // alternate which runs first
                let skbs: Vec<Skb> = if gro {
                    merged(&p, [128, 0][i], &frames, 4096, GroConfig::default())
                } else {
                    let sc = if i == 0 { &sc128 } else { &sc0 };
                    let mut st = SkbStats::default();
                    frames
                        .iter()
                        // SAFETY: fresh chains from our pool, given to the skbs.
                        .map(|f| unsafe { Skb::build(mbuf_of(&p, f, 4096), sc, &mut st) })
                        .collect()
                };
                let n = skbs.len() as u64;
                let mut f = forwarder(&lo, v, TxOffloads::Port, &p);
                let t0 = grorx::eal::tsc();
                for s in skbs {
                    f.push(s);
                }
                f.flush();
                let dt = grorx::eal::tsc() - t0;
                cyc[i] += dt;
                let st = *f.stats();
                assert_eq!(st.tx_dropped, 0);
                segs[i] += st.tx_packets;
                pkts[i] += n;
                rate[i] = st.tx_packets as f64 / dt as f64;
                ns[i].push(dt as f64 / hz * 1e9 / st.tx_packets as f64);
                stats[i].add(&st);
                drop(f);
                drop(lo.rx_all());
            }
            ratios.push(rate[0] / rate[1]);
        }
        ratios.sort_by(|a, b| a.total_cmp(b));
        let q = |v: &[f64], f: f64| v[((v.len() - 1) as f64 * f) as usize];
        let _ = writeln!(r, "  {what}:");
        for (i, hr) in [128, 0].iter().enumerate() {
            ns[i].sort_by(|a, b| a.total_cmp(b));
            let med = q(&ns[i], 0.5);
            let _ = writeln!(
                r,
                "    headroom {hr:>3}: median {med:>6.1} ns/segment ({:>6.2} Mpps out; p10 {:.1}, p90 {:.1} ns), \
                 mean {:.1} ns; {} segments from {} packets, headroom_miss {}, copied {}",
                1e3 / med,
                q(&ns[i], 0.1),
                q(&ns[i], 0.9),
                cyc[i] as f64 / hz * 1e9 / segs[i] as f64,
                segs[i],
                pkts[i],
                stats[i].headroom_miss,
                stats[i].copied_segments
            );
        }
        let _ = writeln!(
            r,
            "    rate headroom 128 / headroom 0, per-round median {:.2}x (p10 {:.2}, p90 {:.2})",
            q(&ratios, 0.5),
            q(&ratios, 0.1),
            q(&ratios, 0.9)
        );
    }
    drop(lo);
    assert_eq!(p.in_use(), 0);
    r
}

#[test]
fn merged_udp_datagrams_are_sent_as_the_datagrams_received() {
    let _e = common::eal();
    let p = pool(2047, 2176);
    let lo = Loopback::new(1024, &p);
    for ipv6 in [false, true] {
        let spec = FlowSpec::numbered(21, ipv6);
        // 7 datagrams of 1200 B, then a shorter one that ends the packet.
        let frames: Vec<Vec<u8>> = (0..8u16)
            .map(|k| {
                let len = if k == 7 { 333 } else { 1200 };
                let payload: Vec<u8> = (0..len).map(|i| (i as u16 ^ (k * 31)) as u8).collect();
                spec.udp_frame(40 + k, &payload, true)
            })
            .collect();
        let cfg = GroConfig {
            udp: true,
            ..GroConfig::default()
        };
        for offloads in [TxOffloads::Software, TxOffloads::Port] {
            let skbs = merged(&p, 128, &frames, 2048, cfg);
            assert_eq!(skbs.len(), 1, "one packet of 8 datagrams");
            assert_eq!(skbs[0].meta().gso_segs, 8);
            let mut f = forwarder(&lo, Encap::None, offloads, &p);
            let st = forward_all(&mut f, skbs);
            let got: Vec<Vec<u8>> = lo.rx_all().iter().map(bytes_of).collect();
            assert_eq!(got, frames, "ipv6 {ipv6}");
            assert_eq!((st.gso_packets, st.gso_segments), (1, 8));
            drop(f);
            assert_eq!(p.in_use(), 0);
        }
    }
}

#[test]
fn segments_merged_in_a_tunnel_are_sent_as_the_segments_received() {
    use grorx::traffic::TunnelSpec;
    let _e = common::eal();
    let p = pool(4095, 2176);
    let lo = Loopback::new(4096, &p);
    let geneve_opts = vec![0x01, 0x02, 0x80, 0x01, 1, 2, 3, 4];
    let mut tagged = TunnelSpec::vxlan(2, false);
    tagged.outer.vlans = vec![30];
    tagged.outer.df = true;
    let tunnels = [
        TunnelSpec::vxlan(1, false),
        TunnelSpec {
            udp_csum: true,
            ..TunnelSpec::vxlan(1, true)
        },
        TunnelSpec {
            udp_csum: true,
            ..TunnelSpec::geneve(1, false, geneve_opts)
        },
        tagged,
    ];
    let encaps = [
        Encap::None,
        Encap::VirtioNet,
        Encap::Vxlan(VxlanConf::default()),
    ];
    for (ti, tun) in tunnels.iter().enumerate() {
        for inner_v6 in [false, true] {
            let spec = FlowSpec::numbered(3, inner_v6);
            // 21 segments, the last short with PSH: 17 + 4 after GRO. With
            // DF outside, the outer ID stays fixed; else it counts up.
            let fixed = tun.outer.df;
            let frames: Vec<Vec<u8>> = segment_stream(&spec, 3, 5000, 20 * 1400 + 600, 1400)
                .iter()
                .enumerate()
                .map(|(k, f)| tun.encapsulate(f, if fixed { 77 } else { 900 + k as u16 }))
                .collect();
            for encap in &encaps {
                for offloads in [TxOffloads::Software, TxOffloads::Port] {
                    let what = format!("tunnel {ti}, inner v6 {inner_v6}, {encap:?}, {offloads:?}");
                    let skbs = merged(&p, 128, &frames, 4096, GroConfig::default());
                    let segs: Vec<u16> = skbs.iter().map(|s| s.meta().gso_segs).collect();
                    assert_eq!(segs, vec![17, 4], "{what}");
                    let mut f = forwarder(&lo, *encap, offloads, &p);
                    let st = forward_all(&mut f, skbs);
                    let got: Vec<Vec<u8>> = lo.rx_all().iter().map(bytes_of).collect();
                    assert_eq!(got.len(), frames.len(), "{what}");
                    let elen = encap.header_len() as usize;
                    for (i, (g, w)) in got.iter().zip(&frames).enumerate() {
                        same(&g[elen..], w, &format!("{what}: segment {i}"));
                    }
                    assert_eq!(
                        (st.gso_packets, st.gso_segments, st.tso_packets),
                        (2, 21, 0),
                        "{what}"
                    );
                    drop(f);
                    assert_eq!(p.in_use(), 0, "{what}: every mbuf back");
                }
            }
        }
    }
}

#[test]
fn a_big_tcp_packet_leaves_in_tso_pieces_within_64k_where_the_port_takes_tso() {
    let _e = common::eal();
    let p = pool(2047, 2176);
    let lo = Loopback::new(1024, &p);
    let tso = TSO_OFFLOADS;
    let cfg = GroConfig {
        max_size: 262_144,
        max_frags: 512,
        ..GroConfig::default()
    };
    let (segs, mss, per) = (180usize, 1448usize, 45usize);
    for ipv6 in [false, true] {
        let mut spec = FlowSpec::numbered(9, ipv6);
        // Every address byte non-zero, so that a write into one shows.
        let bytes: Vec<&mut u8> = match &mut spec.addrs {
            Addrs::V4 { src, dst } => src.iter_mut().chain(dst.iter_mut()).collect(),
            Addrs::V6 { src, dst } => src.iter_mut().chain(dst.iter_mut()).collect(),
        };
        bytes.into_iter().for_each(|b| *b |= 0x11);
        let frames = segment_stream(&spec, 9, 3, segs * mss, mss);
        let want: Vec<u8> = frames
            .iter()
            .flat_map(|f| f[f.len() - mss..].to_vec())
            .collect();
        for (bits, pieces) in [(tso, segs.div_ceil(per)), (0, segs)] {
            let skbs = merged(&p, 128, &frames, 4096, cfg);
            assert_eq!(skbs.len(), 1, "one BIG packet");
            assert!(skbs[0].len() > 65_535);
            let mut f = forwarder(&lo, Encap::None, TxOffloads::Given(bits), &p);
            let st = forward_all(&mut f, skbs);
            let out = lo.rx_all();
            assert_eq!(out.len(), pieces);
            assert_eq!(st.gso_packets, 1, "cut in software");
            if bits == 0 {
                assert_eq!((st.tso_packets, st.gso_segments), (0, segs as u64));
                drop(out);
                continue;
            }
            assert_eq!((st.tso_packets, st.gso_segments), (pieces as u64, 0));
            let mut payload = Vec::new();
            for (j, m) in out.iter().enumerate() {
                let b = bytes_of(m);
                assert!(b.len() - 14 <= 65_535, "each piece within 64 KiB");
                let t = Tcp::parse(&b, b.len(), false).expect("a valid TCP packet");
                let (l3, l4) = (t.l3 as usize, t.l4 as usize);
                let last = j + 1 == pieces;
                let n = if last { segs - j * per } else { per };
                assert_eq!(b.len() - t.payload as usize, n * mss);
                let seq = u32::from_be_bytes(b[l4 + 4..l4 + 8].try_into().unwrap());
                assert_eq!(seq, 3 + (j * per * mss) as u32, "piece {j}'s sequence");
                assert_eq!(
                    b[l4 + 13] & TCP_PSH != 0,
                    last,
                    "PSH on the last piece only"
                );
                let fl = Fields::new(&b, t);
                let head = Fields::new(&frames[0], t);
                assert_eq!(fl.addrs(), head.addrs(), "piece {j}'s addresses");
                assert_eq!(
                    u16::from_be_bytes([b[l4 + 16], b[l4 + 17]]),
                    fl.pseudo_sum(0),
                    "TCP checksum: pseudo-header sum without the length"
                );
                if ipv6 {
                    assert_eq!(b[l3 + 6], 6, "no jumbo header: TCP follows IPv6");
                    let plen = u16::from_be_bytes([b[l3 + 4], b[l3 + 5]]) as usize;
                    assert_eq!(plen, b.len() - l4);
                } else {
                    let tot = u16::from_be_bytes([b[l3 + 2], b[l3 + 3]]) as usize;
                    assert_eq!(tot, b.len() - l3);
                    let id = u16::from_be_bytes([b[l3 + 4], b[l3 + 5]]);
                    assert_eq!(
                        id as usize,
                        1 + j * per,
                        "the IP ID of the piece's first segment"
                    );
                    assert_eq!(
                        &b[l3 + 10..l3 + 12],
                        &[0, 0],
                        "IPv4 checksum left to the NIC"
                    );
                }
                let ipf = if ipv6 {
                    sys::RTE_MBUF_F_TX_IPV6
                } else {
                    sys::RTE_MBUF_F_TX_IPV4 | sys::RTE_MBUF_F_TX_IP_CKSUM
                };
                assert_eq!(tx_flags(m), sys::RTE_MBUF_F_TX_TCP_SEG | ipf);
                // SAFETY: field read of an mbuf we own.
                let word = unsafe { mb::tx_offload(m.as_ptr()) };
                assert_eq!(
                    word,
                    mb::tx_offload_word(14, (l4 - l3) as u64, 32, mss as u64)
                );
                payload.extend_from_slice(&b[t.payload as usize..]);
            }
            assert_eq!(payload, want, "the payload, whole and in order");
            drop(out);
            drop(f);
            assert_eq!(p.in_use(), 0, "every mbuf back");
        }
    }
}
