//! Ethernet ports: open (PCI, vdev or id), configure (MTU, queues, rings,
//! offloads masked against what the device offers, RSS), start, observe
//! (link, stats, xstats), stop and close.

#[doc(hidden)]
pub mod gate;
pub mod spec;

use crate::counters::table::counter_table;
use crate::dpdk::eal::{cstring, rte_errno, strerror};
use crate::dpdk::ethdev::{self, bits::*, rte_eth_conf, rte_eth_dev_info, rte_eth_link};
use crate::dpdk::mempool::Mempool;
use crate::setting::Setting;
use anyhow::{bail, Context, Result};
use spec::PortSpec;
use std::ffi::CStr;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;

/// The TX offloads a stage may ask of a port, as DPDK names them.
pub(crate) use crate::dpdk::ethdev::bits::{
    RTE_ETH_TX_OFFLOAD_IPV4_CKSUM, RTE_ETH_TX_OFFLOAD_MULTI_SEGS, RTE_ETH_TX_OFFLOAD_TCP_CKSUM,
    RTE_ETH_TX_OFFLOAD_TCP_TSO,
};

/// What the engine asks of a port.
#[derive(Debug, Clone)]
pub struct PortConf {
    /// RX queues, one pool each.
    pub rx_queues: u16,
    /// TX queues (capped at what the device has).
    pub tx_queues: u16,
    /// Descriptors per RX ring (the device may adjust it).
    pub rx_desc: u16,
    /// Descriptors per TX ring (the device may adjust it).
    pub tx_desc: u16,
    /// None: keep the port's MTU.
    pub mtu: Option<u16>,
    /// Receive every frame, whatever its destination MAC.
    pub promisc: bool,
    /// Ask the NIC to check IPv4/TCP/UDP checksums (when it can).
    pub rx_csum: bool,
    /// Frames may span several mbufs (the data room is smaller than a frame).
    pub scatter: bool,
    /// The source keeps each flow on one queue itself (the embedded
    /// generator), so the port needs no RSS.
    pub source_steers: bool,
    /// TX offloads wanted (masked against what the device offers); chained
    /// mbufs (MULTI_SEGS) are always asked for.
    pub tx_offloads: u64,
}

impl Default for PortConf {
    fn default() -> Self {
        PortConf {
            rx_queues: 1,
            tx_queues: 1,
            rx_desc: 1024,
            tx_desc: 1024,
            mtu: None,
            promisc: true,
            rx_csum: true,
            scatter: false,
            source_steers: false,
            tx_offloads: 0,
        }
    }
}

/// A configured port (stopped until `start`).
#[derive(Debug)]
pub struct Port {
    /// DPDK port id.
    pub id: u16,
    /// The ethdev name (PCI address or vdev name).
    pub name: String,
    /// The PMD's name (`net_ice`, `net_null`...).
    pub driver: String,
    /// NUMA socket of the device (-1: unknown).
    pub socket: i32,
    /// MTU configured, bytes.
    pub mtu: u16,
    /// RX queues configured.
    pub rx_queues: u16,
    /// TX queues configured.
    pub tx_queues: u16,
    /// Descriptors per RX ring, as the device took it.
    pub rx_desc: u16,
    /// Descriptors per TX ring, as the device took it.
    pub tx_desc: u16,
    /// `RTE_ETH_RX_OFFLOAD_*` bits enabled.
    pub rx_offloads: u64,
    /// `RTE_ETH_TX_OFFLOAD_*` bits enabled.
    pub tx_offloads: u64,
    /// RSS hash functions enabled (`RTE_ETH_RSS_*` bits; 0: no RSS).
    pub rss_hf: u64,
    /// What the device could not do as asked, for the start-up banner.
    pub notes: Vec<String>,
    /// Whether it is started: shared with the run's link watch, which
    /// starts again a port that connects to its peer only when started.
    running: Arc<AtomicBool>,
    closed: bool,
}

/// Link state as DPDK reports it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Link {
    /// Whether the link is up.
    pub up: bool,
    /// Link speed, Mbit/s.
    pub speed_mbps: u32,
    /// DPDK's one-line description (`Link up at 100 Gbps FDX Autoneg`).
    pub text: String,
}

counter_table! {
    /// The port's basic counters (`rte_eth_stats`), as the PMD keeps them.
    PortStats, PORT_COUNTERS {
        ipackets Packets "Packets the port received.";
        ibytes Bytes "Bytes the port received (some virtual devices count none).";
        imissed Packets "Packets the NIC dropped for want of an RX descriptor: the poll did not keep up.";
        ierrors Packets "Packets received with errors.";
        rx_nombuf Events "RX mbuf allocations that failed (the pool was empty).";
        opackets Packets "Packets the port transmitted.";
        obytes Bytes "Bytes the port transmitted.";
        oerrors Packets "Packets that failed to transmit.";
    }
}

fn check(ret: i32, what: impl FnOnce() -> String) -> Result<()> {
    if ret < 0 {
        bail!("{}: {}", what(), strerror(-ret));
    }
    Ok(())
}

/// Device information (a plain struct DPDK fills).
#[doc(hidden)]
pub fn dev_info(id: u16) -> Result<rte_eth_dev_info> {
    let mut info = rte_eth_dev_info::default();
    let r = ethdev::dev_info_get(id, &mut info);
    check(r, || format!("port {id}: cannot read device info"))?;
    Ok(info)
}

/// The port's MTU as its device reports it (0: it reports none).
pub fn mtu(id: u16) -> u16 {
    let mut cur = 0u16;
    ethdev::get_mtu(id, &mut cur);
    cur
}

/// The NUMA socket of the port's device (-1: unknown).
pub fn socket(id: u16) -> i32 {
    ethdev::socket_id(id)
}

/// The ethdev name of port `id` (`port<id>` if DPDK has none).
pub fn port_name(id: u16) -> String {
    ethdev::name_by_port(id).unwrap_or_else(|| format!("port{id}"))
}

/// `RTE_ETH_DEV_INTR_LSC` (an `RTE_BIT32` macro, which bindgen leaves out).
const DEV_INTR_LSC: u32 = 1 << 1;

/// Whether the device signals link changes (`RTE_ETH_EVENT_INTR_LSC`).
fn lsc_capable(info: &rte_eth_dev_info) -> bool {
    // SAFETY: dev_info points dev_flags at the device's own flags word,
    // which lives as long as the device; NULL is checked.
    !info.dev_flags.is_null() && unsafe { *info.dev_flags } & DEV_INTR_LSC != 0
}

/// Whether port `id`'s link is up now (no waiting, no text: for the run's
/// link watch, several times a second).
pub fn link_up(id: u16) -> bool {
    let mut l = rte_eth_link::default();
    let r = ethdev::link_get_nowait(id, &mut l);
    r == 0 && l.link_status() != 0
}

/// Starts port `id` again, stopping it first if it is `running` (after a
/// failed start it is not), and keeps `running` true to what it is: a PMD
/// that connects to its peer only when started (a memif client) tries
/// again. The caller makes sure no worker polls the port meanwhile, and
/// that the port is not closed.
pub fn restart(id: u16, running: &AtomicBool) -> Result<()> {
    if running.swap(false, Relaxed) {
        // SAFETY: a started port; nothing polls it (the caller's duty).
        unsafe { ethdev::stop(id) };
    }
    // A failed start leaves the port stopped, which the next restart or
    // the close at teardown handles.
    let r = ethdev::start(id);
    running.store(r == 0, Relaxed);
    check(r, || format!("port {id}: start again"))
}

/// mbufs a driver keeps per RX queue when its port closes, without giving
/// them back to their pool. net_af_xdp (zero copy: the pool's memory is the
/// socket's UMEM) hands the kernel 2048 buffers for its fill ring when a
/// queue is set up, tops them up as it receives, and at close deletes the
/// socket and the UMEM without freeing them; they are then plain memory of
/// the pool, which the teardown's count takes back (`Mempool::audit`).
pub fn kept_at_close(driver: &str) -> u32 {
    match driver {
        "net_af_xdp" => 2048,
        _ => 0,
    }
}

/// Whether a driver frees what it transmitted only inside a later transmit
/// call: net_af_xdp takes its completion ring in `tx_burst` and nowhere
/// else, so what the last bursts sent is still out when the port closes.
fn frees_tx_lazily(driver: &str) -> bool {
    driver == "net_af_xdp"
}

/// Ports DPDK knows of right now.
pub fn count_avail() -> u16 {
    ethdev::count_avail()
}

fn id_by_name(name: &str) -> Option<u16> {
    let c = cstring("port name", name).ok()?;
    ethdev::port_by_name(&c)
}

/// Virtual devices `open` created, removed again when their port closes, so
/// a later run in the same EAL can create them afresh.
static CREATED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// Finds or creates the port a spec names; returns its id.
pub fn open(spec: &PortSpec) -> Result<u16> {
    match spec {
        PortSpec::Id(id) => {
            if !ethdev::is_valid_port(*id) {
                bail!(
                    "port {id}: no such port ({} port(s) exist); name a device instead, e.g. net_null0",
                    count_avail()
                );
            }
            Ok(*id)
        }
        PortSpec::Pci { addr, .. } => {
            // The form EAL names the device by (and its allow list has).
            let full = spec::pci_full(addr);
            id_by_name(&full)
                .or_else(|| id_by_name(addr))
                .with_context(|| {
                    format!(
                    "port {addr}: DPDK did not take this PCI device; bind it to vfio-pci first \
                     (dpdk-devbind.py -b vfio-pci {addr}) and check the EAL lines above"
                )
                })
        }
        PortSpec::Vdev { name, args } => {
            if let Some(id) = id_by_name(name) {
                return Ok(id); // created by the user's own --vdev
            }
            let cname = cstring("device name", name)?;
            let cargs = cstring("device arguments", args)?;
            let r = ethdev::vdev_init(&cname, &cargs);
            if r < 0 {
                let why = if r == -1 {
                    "no such driver, or it refused the arguments".to_string()
                } else {
                    strerror(-r)
                };
                bail!(
                    "port '{spec}': DPDK could not create this virtual device ({why}); check the driver \
                     name and its arguments (e.g. net_null0, net_ring0, net_pcap0,rx_pcap=FILE, \
                     net_memif0,role=server,socket=PATH) and the EAL lines above"
                );
            }
            CREATED
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(name.clone());
            id_by_name(name).with_context(|| {
                format!("port '{spec}': device created but no ethdev port named {name}")
            })
        }
    }
}

/// Text for a set of RX offload bits (the ones grorx uses).
pub fn rx_offload_names(bits: u64) -> String {
    let names = [
        (RTE_ETH_RX_OFFLOAD_IPV4_CKSUM, "ipv4-cksum"),
        (RTE_ETH_RX_OFFLOAD_TCP_CKSUM, "tcp-cksum"),
        (RTE_ETH_RX_OFFLOAD_UDP_CKSUM, "udp-cksum"),
        (RTE_ETH_RX_OFFLOAD_SCATTER, "scatter"),
        (RTE_ETH_RX_OFFLOAD_RSS_HASH, "rss-hash"),
    ];
    let v: Vec<&str> = names
        .iter()
        .filter(|(b, _)| bits & b != 0)
        .map(|(_, n)| *n)
        .collect();
    if v.is_empty() {
        "none".into()
    } else {
        v.join(" ")
    }
}

impl Port {
    /// Configures port `id` with one pool per RX queue (`pools[q]`).
    pub fn configure(id: u16, conf: &PortConf, pools: &[&Mempool]) -> Result<Port> {
        assert_eq!(
            pools.len(),
            conf.rx_queues as usize,
            "one pool per RX queue"
        );
        let info = dev_info(id)?;
        let name = port_name(id);
        let driver = if info.driver_name.is_null() {
            "?".to_string()
        } else {
            // SAFETY: DPDK's static driver name.
            unsafe { CStr::from_ptr(info.driver_name) }
                .to_string_lossy()
                .into_owned()
        };
        let mut notes = Vec::new();
        let mtu = check_limits(id, conf, &info, &name, &driver)?;
        let tx_queues = conf.tx_queues.min(info.max_tx_queues);
        let socket = ethdev::socket_id(id);
        let dc = device_conf(conf, &info, mtu, &driver, &mut notes);
        let r = ethdev::configure(id, conf.rx_queues, tx_queues, &dc.econf);
        check(r, || {
            format!(
                "port {name} ({driver}): configure {} RX / {tx_queues} TX queues",
                conf.rx_queues
            )
        })?;
        let q = Queues {
            id,
            name: &name,
            socket,
            tx_queues,
        };
        let (rx_desc, tx_desc) = q.setup(conf, pools, &mut notes)?;
        Ok(Port {
            id,
            name,
            driver,
            socket,
            mtu,
            rx_queues: conf.rx_queues,
            tx_queues,
            rx_desc,
            tx_desc,
            rx_offloads: dc.rx_offloads,
            tx_offloads: dc.tx_offloads,
            rss_hf: dc.rss_hf,
            notes,
            running: Arc::new(AtomicBool::new(false)),
            closed: false,
        })
    }

    /// Starts the port, promiscuous if asked (a device that cannot be leaves a note).
    pub fn start(&mut self, promisc: bool) -> Result<()> {
        let r = ethdev::start(self.id);
        check(r, || format!("port {}: start", self.name))?;
        self.running.store(true, Relaxed);
        if promisc {
            // Virtual devices may not support it: harmless.
            let r = ethdev::promiscuous_enable(self.id);
            if r < 0 && r != -(libc::ENOTSUP) {
                self.notes
                    .push(format!("promiscuous mode: {}", strerror(-r)));
            }
        }
        Ok(())
    }

    /// The link state now (without waiting for autonegotiation).
    pub fn link(&self) -> Link {
        let mut l = rte_eth_link::default();
        ethdev::link_get_nowait(self.id, &mut l);
        let text = ethdev::link_text(&l);
        Link {
            up: l.link_status() != 0,
            speed_mbps: l.link_speed,
            text,
        }
    }

    /// The port's basic counters now.
    pub fn stats(&self) -> PortStats {
        stats(self.id)
    }

    /// Every extended statistic by name.
    pub fn xstats(&self) -> Vec<(String, u64)> {
        xstats(self.id)
    }

    /// Whether it is started, as a flag whoever starts or stops it again
    /// (`restart`) keeps up to date.
    pub(crate) fn running(&self) -> Arc<AtomicBool> {
        self.running.clone()
    }

    /// Has the driver free what it transmitted, where it frees only inside
    /// a transmit call: empty bursts on every TX queue, a moment apart, so
    /// the kernel completes the last sends. Nothing may transmit on the
    /// port meanwhile (teardown: the workers are gone).
    fn reap_tx(&self) {
        if self.closed || !frees_tx_lazily(&self.driver) {
            return;
        }
        for _ in 0..4 {
            for q in 0..self.tx_queues {
                // SAFETY: a configured port's queue that no one else
                // transmits on (the workers are gone); an empty burst only
                // takes the completion ring.
                unsafe { ethdev::tx_reap(self.id, q) };
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    /// Stops the port (idempotent). mbufs in its RX rings are released at close.
    pub fn stop(&mut self) {
        if self.running.swap(false, Relaxed) {
            // SAFETY: a started port the engine no longer polls: the
            // workers stopped before the run stops its ports.
            unsafe { ethdev::stop(self.id) };
        }
    }

    /// Stops and closes the port: its queues give their mbufs back (but
    /// those [`kept_at_close`] names).
    pub fn close(&mut self) {
        if self.running.load(Relaxed) {
            self.reap_tx();
        }
        self.stop();
        if !self.closed {
            // SAFETY: stopped port; the id is not used afterwards.
            unsafe { ethdev::close(self.id) };
            self.closed = true;
            let mut created = CREATED.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(i) = created.iter().position(|n| *n == self.name) {
                created.swap_remove(i);
                if let Ok(c) = cstring("device name", &self.name) {
                    // SAFETY: a virtual device this process created, whose
                    // port is closed: nothing uses it any more.
                    unsafe { ethdev::vdev_uninit(&c) };
                }
            }
        }
    }

    /// One line for the start-up banner.
    pub fn describe(&self) -> String {
        format!(
            "port {} {} ({}): {}, MTU {}, {} RX queue(s) x {} desc, RX offloads: {}{}",
            self.id,
            self.name,
            self.driver,
            self.link().text,
            self.mtu,
            self.rx_queues,
            self.rx_desc,
            rx_offload_names(self.rx_offloads),
            if self.rss_hf != 0 {
                format!(", RSS 0x{:x}", self.rss_hf)
            } else {
                String::new()
            }
        )
    }
}

/// Refuses what the device cannot do (its queues, its MTU range); returns
/// the MTU to configure: asked for, else what the port has.
fn check_limits(
    id: u16,
    conf: &PortConf,
    info: &rte_eth_dev_info,
    name: &str,
    driver: &str,
) -> Result<u16> {
    if conf.rx_queues == 0 {
        bail!(
            "port {name}: zero RX queues: give 1 or more ({})",
            Setting::Queues
        );
    }
    if conf.rx_queues > info.max_rx_queues {
        bail!(
            "port {name} ({driver}) has at most {} RX queues; asked for {}: lower {}",
            info.max_rx_queues,
            conf.rx_queues,
            Setting::Queues
        );
    }
    let cur_mtu = mtu(id);
    let mtu = conf
        .mtu
        .unwrap_or(if cur_mtu == 0 { 1500 } else { cur_mtu });
    if mtu < info.min_mtu || mtu > info.max_mtu {
        bail!(
            "port {name} ({driver}): MTU {mtu} is outside what it supports ({}..={}): give {} in that range",
            info.min_mtu,
            info.max_mtu,
            Setting::Mtu
        );
    }
    Ok(mtu)
}

/// How a port is configured, and the offloads and RSS it gets.
struct DeviceConf {
    econf: rte_eth_conf,
    rx_offloads: u64,
    tx_offloads: u64,
    rss_hf: u64,
}

/// The device configuration: the MTU, the offloads asked for that the
/// device offers (a note for each it lacks), RSS over several queues, link
/// events where the device signals them.
fn device_conf(
    conf: &PortConf,
    info: &rte_eth_dev_info,
    mtu: u16,
    driver: &str,
    notes: &mut Vec<String>,
) -> DeviceConf {
    let mut econf = rte_eth_conf::default();
    econf.rxmode.mtu = mtu as u32;
    let mut rx_off = rx_offloads(conf, info, notes);
    let mut rss_hf = 0;
    if conf.rx_queues > 1 {
        rss_hf = (RTE_ETH_RSS_IP | RTE_ETH_RSS_TCP) & info.flow_type_rss_offloads;
        if rss_hf == 0 && !conf.source_steers {
            notes.push(format!(
                "WARNING: {driver} cannot hash flows over {} queues (no RSS); a TCP flow may be split \
                 over queues and GRO will merge less",
                conf.rx_queues
            ));
        } else {
            econf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
            econf.rx_adv_conf.rss_conf.rss_hf = rss_hf;
            rx_off |= RTE_ETH_RX_OFFLOAD_RSS_HASH & info.rx_offload_capa;
        }
    }
    econf.rxmode.offloads = rx_off;
    // Link changes as events where the device signals them (the run
    // watches the link either way; an event is just sooner).
    let lsc = lsc_capable(info);
    econf.intr_conf.set_lsc(u32::from(lsc));
    // GRO output is chained: the TX side must take multi-segment mbufs.
    let tx_off = (RTE_ETH_TX_OFFLOAD_MULTI_SEGS | conf.tx_offloads) & info.tx_offload_capa;
    econf.txmode.offloads = tx_off;
    DeviceConf {
        econf,
        rx_offloads: rx_off,
        tx_offloads: tx_off,
        rss_hf,
    }
}

/// The RX checksum and scatter offloads asked for, as far as the device
/// offers them (a note for each it lacks).
fn rx_offloads(conf: &PortConf, info: &rte_eth_dev_info, notes: &mut Vec<String>) -> u64 {
    let mut rx_off = 0u64;
    if conf.rx_csum {
        let want = RTE_ETH_RX_OFFLOAD_IPV4_CKSUM
            | RTE_ETH_RX_OFFLOAD_TCP_CKSUM
            | RTE_ETH_RX_OFFLOAD_UDP_CKSUM;
        rx_off |= want & info.rx_offload_capa;
        if want & info.rx_offload_capa == 0 {
            notes.push(format!(
                "no RX checksum offload: GRO validates checksums in software ({} kernel)",
                crate::csum::Kernel::best().name()
            ));
        }
    }
    if conf.scatter {
        if info.rx_offload_capa & RTE_ETH_RX_OFFLOAD_SCATTER == 0 {
            notes.push("no scatter RX offload: frames larger than one mbuf may be dropped".into());
        } else {
            rx_off |= RTE_ETH_RX_OFFLOAD_SCATTER;
        }
    }
    rx_off
}

/// A configured port's queues, to set up.
struct Queues<'a> {
    id: u16,
    name: &'a str,
    socket: i32,
    tx_queues: u16,
}

impl Queues<'_> {
    /// Sets up the RX queues on their pools and the TX queues, with the
    /// ring sizes the device takes (a note when it changed the RX one);
    /// returns those sizes.
    fn setup(
        &self,
        conf: &PortConf,
        pools: &[&Mempool],
        notes: &mut Vec<String>,
    ) -> Result<(u16, u16)> {
        let Queues {
            id, name, socket, ..
        } = *self;
        let (mut rx_desc, mut tx_desc) = (conf.rx_desc, conf.tx_desc);
        let r = ethdev::adjust_desc(id, &mut rx_desc, &mut tx_desc);
        check(r, || format!("port {name}: ring sizes"))?;
        if rx_desc != conf.rx_desc {
            notes.push(format!(
                "RX ring {} -> {rx_desc} descriptors (device limits)",
                conf.rx_desc
            ));
        }
        for (q, pool) in pools.iter().enumerate() {
            // SAFETY: the pool is valid, and the caller keeps it until the
            // port is closed (the run frees pools after closing ports).
            let r = unsafe {
                ethdev::rx_queue_setup(id, q as u16, rx_desc, socket as u32, pool.as_ptr())
            };
            check(r, || {
                format!("port {name}: RX queue {q} setup ({rx_desc} descriptors)")
            })?;
        }
        for q in 0..self.tx_queues {
            let r = ethdev::tx_queue_setup(id, q, tx_desc, socket as u32);
            check(r, || format!("port {name}: TX queue {q} setup"))?;
        }
        Ok((rx_desc, tx_desc))
    }
}

impl Drop for Port {
    fn drop(&mut self) {
        self.close();
    }
}

/// The basic counters of port `id` now.
pub fn stats(id: u16) -> PortStats {
    let mut s = ethdev::rte_eth_stats::default();
    ethdev::stats_get(id, &mut s);
    PortStats {
        ipackets: s.ipackets,
        ibytes: s.ibytes,
        imissed: s.imissed,
        ierrors: s.ierrors,
        rx_nombuf: s.rx_nombuf,
        opackets: s.opackets,
        obytes: s.obytes,
        oerrors: s.oerrors,
    }
}

/// Every extended statistic of port `id` by name (empty if it has none).
pub fn xstats(id: u16) -> Vec<(String, u64)> {
    ethdev::xstats(id)
}

/// The last rte_errno as text (for calls that return NULL).
pub fn last_error() -> String {
    strerror(rte_errno())
}
