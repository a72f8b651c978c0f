//! Ports and their pools: open what `--port` names (or the embedded ring
//! port), size one pool per NUMA socket (or per port, per queue), configure
//! and start the ports; at the end close them and count every mbuf.

use super::options::{PoolScope, RunOptions, CAPTURE_SLOTS, COPY_BREAK, PRIV_SIZE};
use crate::capture::pcap;
use crate::dpdk::eal;
use crate::dpdk::mbuf::RTE_PKTMBUF_HEADROOM;
use crate::dpdk::mempool::{Mempool, PoolParams, PoolUsage};
use crate::dpdk::ring_port::RingPort;
use crate::gen;
use crate::pool_sizing;
use crate::port::{self, Port, PortConf};
use crate::report::Report;
use crate::skb::{self, SkbConf, SkbMode};
use anyhow::{bail, Context, Result};
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
                    .with_context(|| format!("port '{p}'"))?,
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
    /// The TX-only output ports (those of `--to` or `outputs` that are not
    /// RX ports), each with the pool its header mbufs come from.
    pub outputs: Vec<(Port, Arc<Mempool>)>,
    /// Every output's port id, in the order the options name them (RX
    /// ports among them).
    pub out_ids: Vec<u16>,
    /// What was set up, in words (port descriptions, notes), for the caller.
    pub lines: Vec<String>,
}

/// An RX port as it will be configured: its MTU, its pools' data room and
/// its NUMA socket.
struct RxPlan {
    id: u16,
    mtu: u16,
    room: u16,
    socket: i32,
}

impl Ports {
    /// Opens, sizes, configures and starts every port; each gets a TX queue
    /// per worker (`workers`, the lcores that will poll).
    pub fn setup(
        opts: &RunOptions,
        lcore_count: u32,
        workers: u16,
        replays: Replays,
    ) -> Result<Ports> {
        let Replays {
            mut once,
            mut cached,
        } = replays;
        let (ids, ring_port) = open_rx(opts, &mut once, &mut cached)?;
        let out_ids = open_outputs(opts)?;
        let encap = match &opts.stage.forward {
            Some(f) => f.encap,
            // A stage of the caller's may do anything: ask for every TX
            // offload the port has.
            None => crate::forward::Encap::Vxlan(Default::default()),
        };
        let workers = workers.max(1);
        let plans = ids
            .iter()
            .map(|&id| plan_rx(opts, id))
            .collect::<Result<Vec<_>>>()?;
        let (groups, queue_pool) = pool_groups(opts, &plans, &cached);
        let mut ports = Ports {
            slots: Vec::new(),
            pools: Vec::new(),
            head_pools: Vec::new(),
            ring_port,
            payload: None,
            outputs: Vec::new(),
            out_ids,
            lines: Vec::new(),
        };
        ports.create_pools(opts, lcore_count, &groups)?;
        for ((plan, pools), frames) in plans.iter().zip(queue_pool).zip(once) {
            ports.configure_rx(opts, plan, pools, frames, &encap, workers)?;
        }
        for (spec, &id) in opts.output_ports().iter().zip(&ports.out_ids) {
            if !ids.contains(&id) {
                let out =
                    forward_port(opts, spec, id, &encap, lcore_count, workers, plans[0].room)?;
                ports.outputs.push(out);
            }
        }
        if ports.ring_port.is_some() {
            let pool = &ports.pools[ports.slots[0].pools[0]];
            ports.payload = Some(gen::payload(pool, &opts.gen).map_err(anyhow::Error::msg)?);
        }
        ports.start(opts)?;
        Ok(ports)
    }

    /// A pool (and in copy mode a head pool) per group.
    fn create_pools(
        &mut self,
        opts: &RunOptions,
        lcore_count: u32,
        groups: &[PoolGroup],
    ) -> Result<()> {
        for g in groups {
            let (socket, room, _, _) = g.key;
            let n = pool_sizing::element_count(&opts.demand(lcore_count, g.queues, g.extra));
            let cache = pool_sizing::cache_size(opts.pools.cache, n);
            let seq = POOL_SEQ.fetch_add(1, Relaxed);
            self.pools.push(Arc::new(Mempool::create(&PoolParams {
                name: format!("grorx-s{}-{seq}", socket.max(0)),
                elements: n,
                cache,
                priv_size: PRIV_SIZE,
                data_room: room,
                socket,
            })?));
            if opts.skb.mode == SkbMode::Copy {
                self.head_pools.push(Mempool::create(&PoolParams {
                    name: format!("grorx-h{}-{seq}", socket.max(0)),
                    elements: n,
                    cache,
                    priv_size: PRIV_SIZE,
                    data_room: (RTE_PKTMBUF_HEADROOM as u16) + 2 * COPY_BREAK,
                    socket,
                })?);
            }
        }
        Ok(())
    }

    /// Configures an RX port on its queues' pools (`pools`, indexes into
    /// `self.pools`); an output among the RX ports gets its TX offloads.
    fn configure_rx(
        &mut self,
        opts: &RunOptions,
        plan: &RxPlan,
        pools: Vec<usize>,
        pcap_frames: Option<u64>,
        encap: &crate::forward::Encap,
        workers: u16,
    ) -> Result<()> {
        let RxPlan { id, mtu, room, .. } = *plan;
        let segs = pool_sizing::segments_per_frame(mtu as u32, room, RTE_PKTMBUF_HEADROOM);
        let output = self.out_ids.contains(&id);
        let conf = PortConf {
            rx_queues: opts.rx.queues,
            // A TX queue per worker: any queue's stage may transmit on
            // any port without sharing a queue with another lcore.
            tx_queues: workers,
            rx_desc: opts.rx.desc,
            tx_desc: opts.rx.desc,
            mtu: Some(mtu),
            promisc: opts.rx.promisc,
            rx_csum: true,
            scatter: segs > 1,
            source_steers: self.ring_port.is_some(),
            tx_offloads: if output {
                crate::forward::tx_offloads_wanted(encap)
            } else {
                0
            },
        };
        let qp: Vec<&Mempool> = pools.iter().map(|&g| &*self.pools[g]).collect();
        let port = Port::configure(id, &conf, &qp)?;
        if output && port.tx_queues < workers {
            let outputs = opts.output_setting();
            let i = self.out_ids.iter().position(|&o| o == id).unwrap_or(0);
            bail!(
                "{outputs} {}: {}",
                opts.output_ports()[i],
                too_few_tx(&port, workers)
            );
        }
        self.slots.push(PortSlot {
            port,
            pools,
            segments_per_frame: segs,
            pcap_frames,
        });
        Ok(())
    }

    /// Starts the outputs, then the RX ports. A port whose peer is not
    /// there yet is left for the link watch to start, and noted.
    fn start(&mut self, opts: &RunOptions) -> Result<()> {
        for (p, _) in &mut self.outputs {
            let mut note = None;
            if let Err(e) = p.start(false) {
                if !super::link::connects_when_started(opts.output_ports(), p) {
                    return Err(e);
                }
                // As for an RX port below: it waits for its peer, and what
                // would go to it is counted (`forward.link_down`).
                note = Some(format!(
                    "  peer not reachable yet ({e:#}): connecting again every second"
                ));
            }
            self.lines.push(format!("output {}", p.describe()));
            self.lines.extend(note);
        }
        for s in &mut self.slots {
            if let Err(e) = s.port.start(opts.rx.promisc) {
                if !super::link::connects_when_started(&opts.ports, &s.port) {
                    return Err(e);
                }
                // Its peer is not there yet: the run's link watch starts it
                // again every second, as after the peer leaves.
                s.port.notes.push(format!(
                    "peer not reachable yet ({e:#}): connecting again every second"
                ));
            }
            self.lines.push(s.port.describe());
            for n in &s.port.notes {
                self.lines.push(format!("  {n}"));
            }
        }
        Ok(())
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

    /// The run's outputs as RX queue `q` of port `id` sees them, in order:
    /// each port id with the pool its header mbufs come from (a TX-only
    /// port's own, or for an RX port the queue's own pool).
    pub fn outputs_of(&self, id: u16, q: u16) -> Vec<(u16, Arc<Mempool>)> {
        (self.out_ids.iter())
            .map(|&o| match self.outputs.iter().find(|(p, _)| p.id == o) {
                Some((_, pool)) => (o, pool.clone()),
                None => (o, self.pool_of(id, q).clone()),
            })
            .collect()
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
            mode: opts.skb.mode,
            headroom: opts.skb.headroom,
            buf_truesize: skb::truesize_of(&self.pools[g]),
            head_pool: head.map(|p| p.as_ptr()).unwrap_or(std::ptr::null_mut()),
            head_truesize: head.map(skb::truesize_of).unwrap_or(0),
            copy_len: COPY_BREAK,
        }
    }

    /// Closes the ports (their queues give mbufs back), frees what sits in
    /// the embedded rings, counts every pool the run made, then frees the
    /// pools; a pool with mbufs out, or with more back than it has, is kept
    /// rather than freed under someone's feet.
    pub fn teardown(mut self) -> Teardown {
        self.release()
    }

    /// `teardown`, once: later calls find nothing left. Ports close before
    /// their rings and pools go, on every path (`Drop` calls it too).
    fn release(&mut self) -> Teardown {
        // What the drivers keep of each pool when they close.
        let mut kept = vec![0u64; self.pools.len()];
        for s in &self.slots {
            for &g in &s.pools {
                kept[g] += port::kept_at_close(&s.port.driver) as u64;
            }
        }
        for s in &mut self.slots {
            s.port.close();
        }
        for (p, _) in &mut self.outputs {
            p.close();
        }
        let freed = self
            .ring_port
            .as_ref()
            .map(|r| r.drain_and_free())
            .unwrap_or(0);
        self.slots.clear();
        self.ring_port = None;
        let mut pools: Vec<(Arc<Mempool>, &str, u64)> = Vec::new();
        pools.extend(self.pools.drain(..).zip(kept).map(|(p, k)| (p, "rx", k)));
        pools.extend(self.head_pools.drain(..).map(|p| (Arc::new(p), "head", 0)));
        for (port, p) in self.outputs.drain(..) {
            drop(port);
            pools.push((p, "output", 0));
        }
        let counted = pools.into_iter().map(|(p, role, kept)| {
            let u = if Arc::strong_count(&p) == 1 {
                // SAFETY: the ports are closed, the workers gone, and no one
                // else holds the pool: nothing takes from it or frees into it,
                // and the drivers that kept mbufs of it are closed.
                unsafe { p.audit(role, kept) }
            } else {
                p.usage(role)
            };
            (p, u)
        });
        let mut found = Vec::new();
        for (p, u) in counted {
            if u.in_use == 0 && u.freed_twice == 0 {
                // Freed here, or by the stage that still holds it when it goes.
                drop(p);
            } else {
                // Someone may still use its mbufs, or its ring holds an mbuf twice.
                std::mem::forget(p);
            }
            found.push(u);
        }
        Teardown {
            freed,
            pools: found,
        }
    }
}

impl Drop for Ports {
    fn drop(&mut self) {
        self.release();
    }
}

/// What teardown found: mbufs freed from the embedded rings, and every pool's count.
pub(super) struct Teardown {
    pub freed: u64,
    pub pools: Vec<PoolUsage>,
}

impl Teardown {
    /// Each pool that did not get exactly its mbufs back, in words.
    pub fn problems(&self) -> Vec<String> {
        let mut v = Vec::new();
        for u in &self.pools {
            if u.in_use > 0 {
                v.push(format!(
                    "pool {} ({}): {} of {} mbuf(s) not back (leaked); the pool is kept, not freed",
                    u.name, u.role, u.in_use, u.size
                ));
            }
            if u.freed_twice > 0 {
                v.push(format!(
                    "pool {} ({}): {} mbuf(s) back in it twice (a double free); the pool is kept, not freed",
                    u.name, u.role, u.freed_twice
                ));
            }
        }
        v
    }

    /// Puts the counts into the report, and a note per pool that is off.
    pub fn fill(self, r: &mut Report) {
        for u in self.pools.iter().filter(|u| u.taken_back > 0) {
            r.notes.push(format!(
                "pool {} ({}): {} mbuf(s) a driver kept at close (net_af_xdp's fill rings) were taken back",
                u.name, u.role, u.taken_back
            ));
        }
        r.notes.extend(self.problems());
        r.freed_at_teardown = self.freed;
        r.mbufs_leaked = self.pools.iter().map(|u| u.in_use).sum();
        r.mbufs_freed_twice = self.pools.iter().map(|u| u.freed_twice).sum();
        r.pools = self.pools;
    }

    /// A run that failed as it started: its error, and what teardown found
    /// wrong besides.
    pub fn onto_error(self, e: anyhow::Error) -> anyhow::Error {
        let p = self.problems();
        if p.is_empty() {
            e
        } else {
            anyhow::anyhow!("{e:#}; and at teardown: {}", p.join("; "))
        }
    }
}

/// Opens the RX ports (or creates the embedded generator's ring port, with
/// its entries in the replays); refuses none, and one port named twice.
fn open_rx(
    opts: &RunOptions,
    once: &mut Vec<Option<u64>>,
    cached: &mut Vec<u32>,
) -> Result<(Vec<u16>, Option<RingPort>)> {
    let mut ring_port = None;
    let mut ids = Vec::new();
    if opts.uses_generator() {
        let socket = eal::socket_id();
        let rp = RingPort::create(opts.rx.queues, opts.rx.desc as u32, socket)?;
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
            "no port to receive on: name one in {} (e.g. net_null0), or none for the embedded generator",
            crate::setting::Setting::Ports
        );
    }
    // One device under two names (a PCI address in two forms, a vdev and
    // its port id) is only seen once EAL has resolved both.
    let rx_name = |i: usize| match opts.ports.get(i) {
        Some(p) => format!("{} {p}", crate::setting::Setting::Ports),
        None => "the embedded generator".to_string(),
    };
    for (i, id) in ids.iter().enumerate() {
        if let Some(j) = ids[..i].iter().position(|x| x == id) {
            bail!(
                "{} and {} are both port {id}: give each port once",
                rx_name(j),
                rx_name(i)
            );
        }
    }
    Ok((ids, ring_port))
}

/// Opens the output ports, in the order the options name them. An output
/// that is an RX port too is configured once, as an RX port that also
/// transmits; the others are TX-only ports.
fn open_outputs(opts: &RunOptions) -> Result<Vec<u16>> {
    let outputs = opts.output_setting();
    let mut out_ids: Vec<u16> = Vec::new();
    for spec in opts.output_ports() {
        let id = port::open(spec)?;
        if out_ids.contains(&id) {
            bail!("{outputs} {spec} is port {id}, named twice: give each output once");
        }
        out_ids.push(id);
    }
    Ok(out_ids)
}

/// An RX port's MTU (the option, else the port's own, else 1500), data
/// room and socket.
fn plan_rx(opts: &RunOptions, id: u16) -> Result<RxPlan> {
    let cur = port::mtu(id);
    let mtu = opts.rx.mtu.unwrap_or(if cur == 0 { 1500 } else { cur });
    Ok(RxPlan {
        id,
        mtu,
        room: opts.data_room_for(mtu)?,
        socket: port::socket(id),
    })
}

/// Which queues share a pool (by socket and room, and by `--pool-scope`),
/// with what each group's ports keep for themselves; and, per port, the
/// group of each of its queues.
fn pool_groups(
    opts: &RunOptions,
    plans: &[RxPlan],
    cached: &[u32],
) -> (Vec<PoolGroup>, Vec<Vec<usize>>) {
    let mut groups: Vec<PoolGroup> = Vec::new();
    let mut queue_pool: Vec<Vec<usize>> = vec![Vec::new(); plans.len()];
    for (pi, plan) in plans.iter().enumerate() {
        let RxPlan {
            id, room, socket, ..
        } = *plan;
        for q in 0..opts.rx.queues {
            let key = match opts.pools.scope {
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
    if opts.stage.capture.is_some() {
        groups[0].extra += CAPTURE_SLOTS;
    }
    (groups, queue_pool)
}

/// Why a port cannot be an output of a run with `workers` workers.
fn too_few_tx(port: &Port, workers: u16) -> String {
    let hint = match port.driver.as_str() {
        "net_af_packet" => format!(" or qpairs={workers} in its device arguments"),
        "net_af_xdp" => format!(" or queue_count={workers} in its device arguments"),
        _ => String::new(),
    };
    format!(
        "{} ({}) gives {} TX queue(s), and each of the run's {workers} workers needs one of its own \
         (queues are not shared: no locks): give fewer worker cores ({}){hint}",
        port.name,
        port.driver,
        port.tx_queues,
        crate::setting::Setting::Cores
    )
}

/// A forward stage's TX-only port: one TX queue per worker (no sharing),
/// the TX offloads the encapsulation can use, and a pool for header mbufs
/// and software segments.
fn forward_port(
    opts: &RunOptions,
    spec: &crate::port::spec::PortSpec,
    id: u16,
    encap: &crate::forward::Encap,
    lcore_count: u32,
    workers: u16,
    room: u16,
) -> Result<(Port, Arc<Mempool>)> {
    let n = pool_sizing::element_count(&pool_sizing::Demand {
        rx_queues: 1,
        rx_desc: opts.rx.desc as u32,
        tx_queues: workers as u32,
        tx_desc: opts.rx.desc as u32 + 512,
        lcores: lcore_count,
        cache: opts.pools.cache,
        burst: 64,
        held_per_queue: 0,
        extra: 0,
    });
    let socket = port::socket(id);
    let pool = Arc::new(Mempool::create(&PoolParams {
        name: format!("grorx-f{id}-{}", POOL_SEQ.fetch_add(1, Relaxed)),
        elements: n,
        cache: pool_sizing::cache_size(opts.pools.cache, n),
        priv_size: PRIV_SIZE,
        data_room: room,
        socket,
    })?);
    let conf = PortConf {
        rx_queues: 1,
        tx_queues: workers,
        rx_desc: opts.rx.desc,
        tx_desc: opts.rx.desc,
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
            "{} {spec}: {}",
            opts.output_setting(),
            too_few_tx(&port, workers)
        );
    }
    Ok((port, pool))
}
