//! Ethernet ports: open (PCI, vdev or id), configure (MTU, queues, rings,
//! offloads masked against what the device offers, RSS), start, observe
//! (link, stats, xstats), stop and close.

#[doc(hidden)]
pub mod gate;
pub mod spec;

use crate::dpdk::eal::{cstring, rte_errno, strerror};
use crate::dpdk::mempool::Mempool;
use crate::setting::Setting;
use anyhow::{bail, Context, Result};
use dpdk_sys as sys;
use spec::PortSpec;
use std::ffi::{c_char, CStr};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;

/// The TX offloads a stage may ask of a port, as DPDK names them.
pub(crate) use dpdk_sys::{
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

/// The port's basic counters.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct PortStats {
    /// Packets received.
    pub ipackets: u64,
    /// Bytes received.
    pub ibytes: u64,
    /// Packets the NIC dropped for want of an RX descriptor (imissed).
    pub imissed: u64,
    /// Packets received with errors.
    pub ierrors: u64,
    /// RX mbuf allocations that failed (the pool was empty).
    pub rx_nombuf: u64,
    /// Packets transmitted.
    pub opackets: u64,
    /// Bytes transmitted.
    pub obytes: u64,
    /// Packets that failed to transmit.
    pub oerrors: u64,
}

fn check(ret: i32, what: impl FnOnce() -> String) -> Result<()> {
    if ret < 0 {
        bail!("{}: {}", what(), strerror(-ret));
    }
    Ok(())
}

/// Device information (a plain struct DPDK fills).
#[doc(hidden)]
pub fn dev_info(id: u16) -> Result<sys::rte_eth_dev_info> {
    let mut info = sys::rte_eth_dev_info::default();
    // SAFETY: info is a valid out-pointer.
    let r = unsafe { sys::rte_eth_dev_info_get(id, &mut info) };
    check(r, || format!("port {id}: cannot read device info"))?;
    Ok(info)
}

/// The port's MTU as its device reports it (0: it reports none).
pub fn mtu(id: u16) -> u16 {
    let mut cur = 0u16;
    // SAFETY: valid out-pointer.
    unsafe { sys::rte_eth_dev_get_mtu(id, &mut cur) };
    cur
}

/// The NUMA socket of the port's device (-1: unknown).
pub fn socket(id: u16) -> i32 {
    // SAFETY: plain query.
    unsafe { sys::rte_eth_dev_socket_id(id) }
}

/// The ethdev name of port `id` (`port<id>` if DPDK has none).
pub fn port_name(id: u16) -> String {
    let mut buf = [0 as c_char; sys::RTE_ETH_NAME_MAX_LEN as usize];
    // SAFETY: buf has RTE_ETH_NAME_MAX_LEN bytes, as the API requires.
    if unsafe { sys::rte_eth_dev_get_name_by_port(id, buf.as_mut_ptr()) } != 0 {
        return format!("port{id}");
    }
    // SAFETY: on success DPDK wrote a NUL-terminated name into buf.
    unsafe { CStr::from_ptr(buf.as_ptr()) }
        .to_string_lossy()
        .into_owned()
}

/// `RTE_ETH_DEV_INTR_LSC` (an `RTE_BIT32` macro, which bindgen leaves out).
const DEV_INTR_LSC: u32 = 1 << 1;

/// Whether the device signals link changes (`RTE_ETH_EVENT_INTR_LSC`).
fn lsc_capable(info: &sys::rte_eth_dev_info) -> bool {
    // SAFETY: dev_info points dev_flags at the device's own flags word,
    // which lives as long as the device; NULL is checked.
    !info.dev_flags.is_null() && unsafe { *info.dev_flags } & DEV_INTR_LSC != 0
}

/// Whether port `id`'s link is up now (no waiting, no text: for the run's
/// link watch, several times a second).
pub fn link_up(id: u16) -> bool {
    let mut l = sys::rte_eth_link::default();
    // SAFETY: valid out-pointer.
    let r = unsafe { sys::rte_eth_link_get_nowait(id, &mut l) };
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
        unsafe { sys::rte_eth_dev_stop(id) };
    }
    // SAFETY: a configured, stopped port. A failed start leaves it
    // stopped, which the next restart or the close at teardown handles.
    let r = unsafe { sys::rte_eth_dev_start(id) };
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
    // SAFETY: plain query.
    unsafe { sys::rte_eth_dev_count_avail() }
}

fn id_by_name(name: &str) -> Option<u16> {
    let c = cstring("port name", name).ok()?;
    let mut id = 0u16;
    // SAFETY: valid string and out-pointer.
    (unsafe { sys::rte_eth_dev_get_port_by_name(c.as_ptr(), &mut id) } == 0).then_some(id)
}

/// Virtual devices `open` created, removed again when their port closes, so
/// a later run in the same EAL can create them afresh.
static CREATED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// Finds or creates the port a spec names; returns its id.
pub fn open(spec: &PortSpec) -> Result<u16> {
    match spec {
        PortSpec::Id(id) => {
            // SAFETY: plain query.
            if unsafe { sys::rte_eth_dev_is_valid_port(*id) } == 0 {
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
            // SAFETY: valid strings.
            let r = unsafe { sys::rte_vdev_init(cname.as_ptr(), cargs.as_ptr()) };
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
        (sys::RTE_ETH_RX_OFFLOAD_IPV4_CKSUM, "ipv4-cksum"),
        (sys::RTE_ETH_RX_OFFLOAD_TCP_CKSUM, "tcp-cksum"),
        (sys::RTE_ETH_RX_OFFLOAD_UDP_CKSUM, "udp-cksum"),
        (sys::RTE_ETH_RX_OFFLOAD_SCATTER, "scatter"),
        (sys::RTE_ETH_RX_OFFLOAD_RSS_HASH, "rss-hash"),
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
        let tx_queues = conf.tx_queues.min(info.max_tx_queues);
        // SAFETY: plain query.
        let socket = unsafe { sys::rte_eth_dev_socket_id(id) };

        let mut econf = sys::rte_eth_conf::default();
        // MTU: asked for, else what the port has.
        let mut cur_mtu = 0u16;
        // SAFETY: valid out-pointer.
        unsafe { sys::rte_eth_dev_get_mtu(id, &mut cur_mtu) };
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
        econf.rxmode.mtu = mtu as u32;

        // Offloads: only what the device offers.
        let mut rx_off = 0u64;
        if conf.rx_csum {
            let want = sys::RTE_ETH_RX_OFFLOAD_IPV4_CKSUM
                | sys::RTE_ETH_RX_OFFLOAD_TCP_CKSUM
                | sys::RTE_ETH_RX_OFFLOAD_UDP_CKSUM;
            rx_off |= want & info.rx_offload_capa;
            if want & info.rx_offload_capa == 0 {
                notes.push(format!(
                    "no RX checksum offload: GRO validates checksums in software ({} kernel)",
                    crate::csum::Kernel::best().name()
                ));
            }
        }
        if conf.scatter {
            if info.rx_offload_capa & sys::RTE_ETH_RX_OFFLOAD_SCATTER == 0 {
                notes.push(
                    "no scatter RX offload: frames larger than one mbuf may be dropped".into(),
                );
            } else {
                rx_off |= sys::RTE_ETH_RX_OFFLOAD_SCATTER;
            }
        }
        let mut rss_hf = 0;
        if conf.rx_queues > 1 {
            rss_hf = (sys::RTE_ETH_RSS_IP | sys::RTE_ETH_RSS_TCP) & info.flow_type_rss_offloads;
            if rss_hf == 0 && !conf.source_steers {
                notes.push(format!(
                    "WARNING: {driver} cannot hash flows over {} queues (no RSS); a TCP flow may be split \
                     over queues and GRO will merge less",
                    conf.rx_queues
                ));
            } else {
                econf.rxmode.mq_mode = sys::RTE_ETH_MQ_RX_RSS;
                econf.rx_adv_conf.rss_conf.rss_hf = rss_hf;
                rx_off |= sys::RTE_ETH_RX_OFFLOAD_RSS_HASH & info.rx_offload_capa;
            }
        }
        econf.rxmode.offloads = rx_off;
        // Link changes as events where the device signals them (the run
        // watches the link either way; an event is just sooner).
        let lsc = lsc_capable(&info);
        econf.intr_conf.set_lsc(u32::from(lsc));
        // GRO output is chained: the TX side must take multi-segment mbufs.
        let tx_off = (sys::RTE_ETH_TX_OFFLOAD_MULTI_SEGS | conf.tx_offloads) & info.tx_offload_capa;
        econf.txmode.offloads = tx_off;

        // SAFETY: econf is fully initialised.
        let r = unsafe { sys::rte_eth_dev_configure(id, conf.rx_queues, tx_queues, &econf) };
        check(r, || {
            format!(
                "port {name} ({driver}): configure {} RX / {tx_queues} TX queues",
                conf.rx_queues
            )
        })?;

        let (mut rx_desc, mut tx_desc) = (conf.rx_desc, conf.tx_desc);
        // SAFETY: valid out-pointers.
        let r = unsafe { sys::rte_eth_dev_adjust_nb_rx_tx_desc(id, &mut rx_desc, &mut tx_desc) };
        check(r, || format!("port {name}: ring sizes"))?;
        if rx_desc != conf.rx_desc {
            notes.push(format!(
                "RX ring {} -> {rx_desc} descriptors (device limits)",
                conf.rx_desc
            ));
        }
        for (q, pool) in pools.iter().enumerate() {
            // SAFETY: NULL rxconf takes the device default with the port offloads.
            let r = unsafe {
                sys::rte_eth_rx_queue_setup(
                    id,
                    q as u16,
                    rx_desc,
                    socket as u32,
                    std::ptr::null(),
                    pool.as_ptr(),
                )
            };
            check(r, || {
                format!("port {name}: RX queue {q} setup ({rx_desc} descriptors)")
            })?;
        }
        for q in 0..tx_queues {
            // SAFETY: NULL txconf takes the device default with the port offloads.
            let r = unsafe {
                sys::rte_eth_tx_queue_setup(id, q, tx_desc, socket as u32, std::ptr::null())
            };
            check(r, || format!("port {name}: TX queue {q} setup"))?;
        }
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
            rx_offloads: rx_off,
            tx_offloads: tx_off,
            rss_hf,
            notes,
            running: Arc::new(AtomicBool::new(false)),
            closed: false,
        })
    }

    /// Starts the port, promiscuous if asked (a device that cannot be leaves a note).
    pub fn start(&mut self, promisc: bool) -> Result<()> {
        // SAFETY: configured port.
        let r = unsafe { sys::rte_eth_dev_start(self.id) };
        check(r, || format!("port {}: start", self.name))?;
        self.running.store(true, Relaxed);
        if promisc {
            // SAFETY: started port. Virtual devices may not support it: harmless.
            let r = unsafe { sys::rte_eth_promiscuous_enable(self.id) };
            if r < 0 && r != -(libc::ENOTSUP) {
                self.notes
                    .push(format!("promiscuous mode: {}", strerror(-r)));
            }
        }
        Ok(())
    }

    /// The link state now (without waiting for autonegotiation).
    pub fn link(&self) -> Link {
        let mut l = sys::rte_eth_link::default();
        // SAFETY: valid out-pointer.
        unsafe { sys::rte_eth_link_get_nowait(self.id, &mut l) };
        let mut buf = [0 as c_char; 64];
        // SAFETY: buffer and link are valid.
        unsafe { sys::rte_eth_link_to_str(buf.as_mut_ptr(), buf.len(), &l) };
        // SAFETY: buf was zeroed and rte_eth_link_to_str writes at most
        // buf.len() bytes, NUL included, so it ends in a NUL.
        let text = unsafe { CStr::from_ptr(buf.as_ptr()) }
            .to_string_lossy()
            .into_owned();
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
                unsafe { sys::rte_eth_tx_burst(self.id, q, std::ptr::null_mut(), 0) };
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    /// Stops the port (idempotent). mbufs in its RX rings are released at close.
    pub fn stop(&mut self) {
        if self.running.swap(false, Relaxed) {
            // SAFETY: started port.
            unsafe { sys::rte_eth_dev_stop(self.id) };
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
            unsafe { sys::rte_eth_dev_close(self.id) };
            self.closed = true;
            let mut created = CREATED.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(i) = created.iter().position(|n| *n == self.name) {
                created.swap_remove(i);
                if let Ok(c) = cstring("device name", &self.name) {
                    // SAFETY: a virtual device this process created, whose
                    // port is closed: nothing uses it any more.
                    unsafe { sys::rte_vdev_uninit(c.as_ptr()) };
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

impl Drop for Port {
    fn drop(&mut self) {
        self.close();
    }
}

/// The basic counters of port `id` now.
pub fn stats(id: u16) -> PortStats {
    let mut s = sys::rte_eth_stats::default();
    // SAFETY: valid out-pointer.
    unsafe { sys::rte_eth_stats_get(id, &mut s) };
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
    // SAFETY: size queries with NULL buffers, then fills of that size.
    unsafe {
        let n = sys::rte_eth_xstats_get_names(id, std::ptr::null_mut(), 0);
        if n <= 0 {
            return Vec::new();
        }
        let mut names = vec![sys::rte_eth_xstat_name::default(); n as usize];
        let mut vals = vec![sys::rte_eth_xstat::default(); n as usize];
        let a = sys::rte_eth_xstats_get_names(id, names.as_mut_ptr(), n as u32);
        let b = sys::rte_eth_xstats_get(id, vals.as_mut_ptr(), n as u32);
        if a != n || b != n {
            return Vec::new();
        }
        vals.iter()
            .map(|v| {
                let nm = CStr::from_ptr(names[v.id as usize].name.as_ptr())
                    .to_string_lossy()
                    .into_owned();
                (nm, v.value)
            })
            .collect()
    }
}

/// The last rte_errno as text (for calls that return NULL).
pub fn last_error() -> String {
    strerror(rte_errno())
}
