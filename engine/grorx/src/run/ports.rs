//! Ports and their pools: open what `--port` names (or the embedded ring
//! port), size one pool per NUMA socket (or per port, per queue), configure
//! and start the ports; at the end close them and count every mbuf.

use super::options::{PoolScope, RunOptions, CAPTURE_SLOTS, COPY_BREAK, PRIV_SIZE};
use crate::gen;
use crate::mempool::{Mempool, PoolParams};
use crate::pcap;
use crate::pool_sizing;
use crate::port::{self, Port, PortConf};
use crate::ring_port::RingPort;
use crate::skb::{self, SkbConf, SkbMode};
use anyhow::{bail, Context, Result};
use dpdk_sys as sys;
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
use std::sync::Arc;

static POOL_SEQ: AtomicU32 = AtomicU32::new(0);

/// What the pcap ports of a run hold: a one-shot replay ends when every frame
/// arrived; an infinite one keeps its whole file in mbufs (net_pcap's
/// infinite_rx), which its pool must hold. Read before EAL starts, so a bad
/// file is refused early.
pub(super) struct Replays {
    /// Per `--port`: frames of a one-shot replay.
    pub once: Vec<Option<u64>>,
    /// Per `--port`: mbufs the port keeps for itself.
    pub cached: Vec<u32>,
}

pub(super) fn pcap_replays(opts: &RunOptions) -> Result<Replays> {
    let mut r = Replays {
        once: Vec::new(),
        cached: Vec::new(),
    };
    for p in &opts.ports {
        let file = p
            .arg("rx_pcap")
            .filter(|_| p.dev_name().is_some_and(|n| n.starts_with("net_pcap")));
        let frames = match file {
            Some(f) => Some(
                pcap::count_frames(std::path::Path::new(f))
                    .with_context(|| format!("--port '{p}'"))?,
            ),
            None => None,
        };
        let once = p.pcap_replay_once().is_some();
        r.once.push(frames.filter(|_| once));
        r.cached
            .push(if once { 0 } else { frames.unwrap_or(0) as u32 });
    }
    Ok(r)
}

/// A configured port and the pool of each of its RX queues (an index into
/// `Ports::pools`).
pub(super) struct PortSlot {
    pub port: Port,
    pub pools: Vec<usize>,
    pub segments_per_frame: u32,
    /// Frames a one-shot pcap replay holds.
    pub pcap_frames: Option<u64>,
}

/// Queues that share one pool: same socket and data room (and the same port
/// or queue, by `--pool-scope`).
struct PoolGroup {
    key: (i32, u16, u16, u16),
    queues: u32,
    /// mbufs a port of the group keeps for itself, and the capture ring.
    extra: u32,
}

/// The ports of a run, their pools, and the embedded source's port. Ports
/// close before their rings and pools are freed (`teardown`).
pub(super) struct Ports {
    pub slots: Vec<PortSlot>,
    pub pools: Vec<Arc<Mempool>>,
    /// Copy mode's separate heads, one per pool.
    pub head_pools: Vec<Mempool>,
    pub ring_port: Option<RingPort>,
    /// The generator's payload and its sum.
    pub payload: Option<(Vec<u8>, u16)>,
    /// The forward stage's TX ports (`--to`, in order), each with the pool
    /// its header mbufs come from.
    pub outputs: Vec<(Port, Arc<Mempool>)>,
    /// What was set up, in words (port descriptions, notes), for the caller.
    pub lines: Vec<String>,
}

impl Ports {
    /// Opens, sizes, configures and starts every port.
    pub fn setup(opts: &RunOptions, lcore_count: u32, replays: Replays) -> Result<Ports> {
        let Replays {
            mut once,
            mut cached,
        } = replays;
        let mut ring_port = None;
        let mut ids = Vec::new();
        if opts.uses_generator() {
            // SAFETY: plain query of the calling thread's socket.
            let socket = unsafe { sys::rte_socket_id() } as i32;
            let rp = RingPort::create(opts.queues, opts.rx_desc as u32, socket)?;
            ids.push(rp.port_id);
            once.push(None);
            cached.push(0);
            ring_port = Some(rp);
        } else {
            for p in &opts.ports {
                ids.push(port::open(p)?);
            }
        }
        if ids.is_empty() || port::count_avail() == 0 {
            bail!(
                "no port to receive on: name one with --port (e.g. --port net_null0) or run without --port for the embedded generator"
            );
        }

        // Each port's MTU, data room and socket; then the pool groups.
        let total_queues = (ids.len() as u32 * opts.queues as u32).min(u16::MAX as u32) as u16;
        let mut plans = Vec::new();
        for &id in &ids {
            let mut cur = 0u16;
            // SAFETY: valid out-pointer.
            unsafe { sys::rte_eth_dev_get_mtu(id, &mut cur) };
            let mtu = opts.mtu.unwrap_or(if cur == 0 { 1500 } else { cur });
            let room = opts.data_room_for(mtu)?;
            // SAFETY: plain query.
            let socket = unsafe { sys::rte_eth_dev_socket_id(id) };
            plans.push((id, mtu, room, socket));
        }
        let mut groups: Vec<PoolGroup> = Vec::new();
        let mut queue_pool: Vec<Vec<usize>> = vec![Vec::new(); ids.len()];
        for (pi, &(id, _, room, socket)) in plans.iter().enumerate() {
            for q in 0..opts.queues {
                let key = match opts.pool_scope {
                    PoolScope::Socket => (socket, room, u16::MAX, u16::MAX),
                    PoolScope::Port => (socket, room, id, u16::MAX),
                    PoolScope::Queue => (socket, room, id, q),
                };
                let g = match groups.iter().position(|g| g.key == key) {
                    Some(g) => g,
                    None => {
                        groups.push(PoolGroup {
                            key,
                            queues: 0,
                            extra: 0,
                        });
                        groups.len() - 1
                    }
                };
                groups[g].queues += 1;
                if q == 0 {
                    groups[g].extra += cached[pi];
                }
                queue_pool[pi].push(g);
            }
        }
        if opts.capture.is_some() {
            groups[0].extra += CAPTURE_SLOTS;
        }
        let mut ports = Ports {
            slots: Vec::new(),
            pools: Vec::new(),
            head_pools: Vec::new(),
            ring_port,
            payload: None,
            outputs: Vec::new(),
            lines: Vec::new(),
        };
        for g in &groups {
            let (socket, room, _, _) = g.key;
            let n = pool_sizing::element_count(&opts.demand(lcore_count, g.queues, g.extra));
            let cache = pool_sizing::cache_size(opts.pool_cache, n);
            let seq = POOL_SEQ.fetch_add(1, Relaxed);
            ports.pools.push(Arc::new(Mempool::create(&PoolParams {
                name: format!("grorx-s{}-{seq}", socket.max(0)),
                elements: n,
                cache,
                priv_size: PRIV_SIZE,
                data_room: room,
                socket,
            })?));
            if opts.skb_mode == SkbMode::Copy {
                ports.head_pools.push(Mempool::create(&PoolParams {
                    name: format!("grorx-h{}-{seq}", socket.max(0)),
                    elements: n,
                    cache,
                    priv_size: PRIV_SIZE,
                    data_room: (sys::RTE_PKTMBUF_HEADROOM as u16) + 2 * COPY_BREAK,
                    socket,
                })?);
            }
        }
        for (pi, &(id, mtu, room, _)) in plans.iter().enumerate() {
            let segs = pool_sizing::segments_per_frame(mtu as u32, room, sys::RTE_PKTMBUF_HEADROOM);
            let conf = PortConf {
                rx_queues: opts.queues,
                // A TX queue per RX queue of the run: any queue's stage may
                // transmit on any port without sharing a queue.
                tx_queues: total_queues,
                rx_desc: opts.rx_desc,
                tx_desc: opts.rx_desc,
                mtu: Some(mtu),
                promisc: opts.promisc,
                rx_csum: true,
                scatter: segs > 1,
                source_steers: ports.ring_port.is_some(),
                tx_offloads: 0,
            };
            let qp: Vec<&Mempool> = queue_pool[pi].iter().map(|&g| &*ports.pools[g]).collect();
            let port = Port::configure(id, &conf, &qp)?;
            ports.slots.push(PortSlot {
                port,
                pools: queue_pool[pi].clone(),
                segments_per_frame: segs,
                pcap_frames: once[pi],
            });
        }
        // The forward stage encapsulates as asked; a stage of the caller's
        // may do anything: ask for every TX offload the port has.
        let encap = match &opts.forward {
            Some(f) => f.encap,
            None => crate::forward::Encap::Vxlan(Default::default()),
        };
        for spec in opts.output_ports() {
            let out = forward_port(opts, spec, &encap, lcore_count, total_queues, plans[0].2)?;
            ports.outputs.push(out);
        }
        if ports.ring_port.is_some() {
            let pool = &ports.pools[ports.slots[0].pools[0]];
            ports.payload = Some(gen::payload(pool, &opts.gen).map_err(anyhow::Error::msg)?);
        }
        for (p, _) in &mut ports.outputs {
            p.start(false)?;
            ports.lines.push(format!("output {}", p.describe()));
        }
        for s in &mut ports.slots {
            s.port.start(opts.promisc)?;
            ports.lines.push(s.port.describe());
            for n in &s.port.notes {
                ports.lines.push(format!("  {n}"));
            }
        }
        Ok(ports)
    }

    /// Every RX queue, port by port.
    pub fn queues(&self) -> Vec<(u16, u16)> {
        self.slots
            .iter()
            .flat_map(|s| (0..s.port.rx_queues).map(move |q| (s.port.id, q)))
            .collect()
    }

    /// The position of RX port `id` among the run's ports (`--port` order).
    pub fn rx_index(&self, id: u16) -> usize {
        self.slots.iter().position(|s| s.port.id == id).unwrap_or(0)
    }

    /// The pool queue `q` of port `id` receives into.
    pub fn pool_of(&self, id: u16, q: u16) -> &Arc<Mempool> {
        let s = self
            .slots
            .iter()
            .find(|s| s.port.id == id)
            .expect("a queue of a known port");
        &self.pools[s.pools[q as usize]]
    }

    /// How the skbs of queue `q` of port `id` are built.
    pub fn skb_conf(&self, opts: &RunOptions, id: u16, q: u16) -> SkbConf {
        let s = self
            .slots
            .iter()
            .find(|s| s.port.id == id)
            .expect("a queue of a known port");
        let g = s.pools[q as usize];
        let head = self.head_pools.get(g);
        SkbConf {
            mode: opts.skb_mode,
            headroom: opts.headroom,
            buf_truesize: skb::truesize_of(&self.pools[g]),
            head_pool: head.map(|p| p.as_ptr()).unwrap_or(std::ptr::null_mut()),
            head_truesize: head.map(skb::truesize_of).unwrap_or(0),
            copy_len: COPY_BREAK,
        }
    }

    /// Closes the ports (their queues give mbufs back), frees what sits in
    /// the embedded rings, counts what is still out of the pools, then frees
    /// the pools; a pool with mbufs out is kept rather than freed under
    /// someone's feet. Returns (freed from rings, leaked).
    pub fn teardown(mut self) -> (u64, u64) {
        for s in &mut self.slots {
            s.port.close();
        }
        let mut fwd_pools = Vec::new();
        for (mut p, pool) in self.outputs.drain(..) {
            p.close();
            fwd_pools.push(pool);
        }
        let freed = self
            .ring_port
            .as_ref()
            .map(|r| r.drain_and_free())
            .unwrap_or(0);
        let leaked: u64 = self
            .pools
            .iter()
            .map(|p| &**p)
            .chain(&self.head_pools)
            .map(|p| p.in_use() as u64)
            .sum();
        drop(self.slots);
        drop(self.ring_port);
        // A pool a stage still holds (it outlived its run) is not freed.
        let shared = |p: Arc<Mempool>| Arc::try_unwrap(p).ok();
        for p in self
            .pools
            .into_iter()
            .filter_map(shared)
            .chain(self.head_pools)
            .chain(fwd_pools.into_iter().filter_map(shared))
        {
            if p.in_use() == 0 {
                drop(p);
            } else {
                std::mem::forget(p);
            }
        }
        (freed, leaked)
    }
}

/// A forward stage's TX port: one TX queue per RX queue of the run (no
/// sharing), the TX offloads the encapsulation can use, and a pool for
/// header mbufs and software segments.
fn forward_port(
    opts: &RunOptions,
    spec: &crate::port_spec::PortSpec,
    encap: &crate::forward::Encap,
    lcore_count: u32,
    queues: u16,
    room: u16,
) -> Result<(Port, Arc<Mempool>)> {
    let id = port::open(spec)?;
    let workers = queues.max(1);
    let n = pool_sizing::element_count(&pool_sizing::Demand {
        rx_queues: 1,
        rx_desc: opts.rx_desc as u32,
        tx_queues: workers as u32,
        tx_desc: opts.rx_desc as u32 + 512,
        lcores: lcore_count,
        cache: opts.pool_cache,
        burst: 64,
        held_per_queue: 0,
        extra: 0,
    });
    // SAFETY: plain query.
    let socket = unsafe { sys::rte_eth_dev_socket_id(id) };
    let pool = Arc::new(Mempool::create(&PoolParams {
        name: format!("grorx-f{id}-{}", POOL_SEQ.fetch_add(1, Relaxed)),
        elements: n,
        cache: pool_sizing::cache_size(opts.pool_cache, n),
        priv_size: PRIV_SIZE,
        data_room: room,
        socket,
    })?);
    let conf = PortConf {
        rx_queues: 1,
        tx_queues: workers,
        rx_desc: opts.rx_desc,
        tx_desc: opts.rx_desc,
        mtu: None,
        promisc: false,
        rx_csum: false,
        scatter: false,
        source_steers: true,
        tx_offloads: crate::forward::tx_offloads_wanted(encap),
    };
    let port = Port::configure(id, &conf, &[&pool])?;
    if port.tx_queues < workers {
        bail!(
            "--to {spec}: the port has {} TX queue(s), the run needs one per RX queue ({workers}): \
             give fewer --queues",
            port.tx_queues
        );
    }
    Ok((port, pool))
}
