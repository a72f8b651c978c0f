//! Ethernet devices: DPDK's ethdev calls the engine makes outside the data
//! path (the port wrapper in `crate::port`, the link watch's callbacks).

use dpdk_sys as sys;
use std::ffi::{c_int, c_void};

/// The event an ethdev callback is told of.
pub use dpdk_sys::rte_eth_event_type;

/// A callback DPDK calls on a port's event, on its interrupt thread.
pub type EventFn = unsafe extern "C" fn(u16, rte_eth_event_type, *mut c_void, *mut c_void) -> c_int;

/// Registers `cb(port, event, arg, _)` for `port`'s link-state-change
/// events. Returns 0, or a negative errno.
///
/// # Safety
/// `arg` stays valid for `cb` until [`lsc_unregister`] with the same
/// `cb` and `arg` has returned 0.
pub unsafe fn lsc_register(port: u16, cb: EventFn, arg: *mut c_void) -> i32 {
    // SAFETY: the caller keeps arg alive for cb (its promise).
    unsafe { sys::rte_eth_dev_callback_register(port, sys::RTE_ETH_EVENT_INTR_LSC, Some(cb), arg) }
}

/// Unregisters what [`lsc_register`] registered with the same `cb` and
/// `arg`. Returns 0, `-EAGAIN` while the callback is running (try again),
/// or another negative errno.
///
/// # Safety
/// Not called from `cb` itself.
pub unsafe fn lsc_unregister(port: u16, cb: EventFn, arg: *mut c_void) -> i32 {
    // SAFETY: a plain unregister; the caller is not the callback.
    unsafe {
        sys::rte_eth_dev_callback_unregister(port, sys::RTE_ETH_EVENT_INTR_LSC, Some(cb), arg)
    }
}

/// What DPDK tells of a device, how a port is configured, its link and its
/// counters: plain structs DPDK fills.
pub use dpdk_sys::{
    rte_eth_conf, rte_eth_dev_info, rte_eth_link, rte_eth_stats, rte_eth_xstat, rte_eth_xstat_name,
};

/// The offload, RSS and multi-queue bits the engine asks of a port.
pub mod bits {
    pub use dpdk_sys::{
        RTE_ETH_MQ_RX_RSS, RTE_ETH_RSS_IP, RTE_ETH_RSS_TCP, RTE_ETH_RX_OFFLOAD_IPV4_CKSUM,
        RTE_ETH_RX_OFFLOAD_RSS_HASH, RTE_ETH_RX_OFFLOAD_SCATTER, RTE_ETH_RX_OFFLOAD_TCP_CKSUM,
        RTE_ETH_RX_OFFLOAD_UDP_CKSUM, RTE_ETH_TX_OFFLOAD_IPV4_CKSUM, RTE_ETH_TX_OFFLOAD_MULTI_SEGS,
        RTE_ETH_TX_OFFLOAD_TCP_CKSUM, RTE_ETH_TX_OFFLOAD_TCP_TSO,
    };
}

/// The longest ethdev name, NUL included.
pub const NAME_MAX_LEN: usize = sys::RTE_ETH_NAME_MAX_LEN as usize;

// The calls below take a port id, which DPDK checks (an unknown one gets
// -ENODEV or a zero answer), and Rust references for what they fill: they
// are safe. Those that can pull a port from under a worker (stop, close,
// a device's removal) or take a raw pool are `unsafe fn`.

/// `rte_eth_dev_info_get`: 0, or a negative errno.
pub fn dev_info_get(id: u16, info: &mut rte_eth_dev_info) -> i32 {
    // SAFETY: info is a valid out-pointer.
    unsafe { sys::rte_eth_dev_info_get(id, info) }
}

/// `rte_eth_dev_conf_get`: 0, or a negative errno.
pub fn dev_conf_get(id: u16, conf: &mut rte_eth_conf) -> i32 {
    // SAFETY: conf is a valid out-pointer.
    unsafe { sys::rte_eth_dev_conf_get(id, conf) }
}

/// `rte_eth_dev_get_mtu`: 0, or a negative errno (`mtu` left as it was).
pub fn get_mtu(id: u16, mtu: &mut u16) -> i32 {
    // SAFETY: mtu is a valid out-pointer.
    unsafe { sys::rte_eth_dev_get_mtu(id, mtu) }
}

/// `rte_eth_dev_socket_id`: the device's NUMA socket (-1: unknown).
pub fn socket_id(id: u16) -> i32 {
    // SAFETY: a plain query.
    unsafe { sys::rte_eth_dev_socket_id(id) }
}

/// The ethdev name of port `id`, if DPDK has one.
pub fn name_by_port(id: u16) -> Option<String> {
    let mut buf = [0 as std::ffi::c_char; NAME_MAX_LEN];
    // SAFETY: buf has RTE_ETH_NAME_MAX_LEN bytes, as the API requires.
    if unsafe { sys::rte_eth_dev_get_name_by_port(id, buf.as_mut_ptr()) } != 0 {
        return None;
    }
    // SAFETY: on success DPDK wrote a NUL-terminated name into buf.
    let name = unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) };
    Some(name.to_string_lossy().into_owned())
}

/// The id of the port named `name`, if there is one.
pub fn port_by_name(name: &std::ffi::CStr) -> Option<u16> {
    let mut id = 0u16;
    // SAFETY: a NUL-terminated string and a valid out-pointer.
    (unsafe { sys::rte_eth_dev_get_port_by_name(name.as_ptr(), &mut id) } == 0).then_some(id)
}

/// Whether `id` is a port DPDK knows.
pub fn is_valid_port(id: u16) -> bool {
    // SAFETY: a plain query.
    unsafe { sys::rte_eth_dev_is_valid_port(id) != 0 }
}

/// Ports DPDK knows of right now.
pub fn count_avail() -> u16 {
    // SAFETY: a plain query.
    unsafe { sys::rte_eth_dev_count_avail() }
}

/// `rte_eth_link_get_nowait`: 0, or a negative errno.
pub fn link_get_nowait(id: u16, link: &mut rte_eth_link) -> i32 {
    // SAFETY: link is a valid out-pointer.
    unsafe { sys::rte_eth_link_get_nowait(id, link) }
}

/// DPDK's one-line description of a link (`Link up at 100 Gbps FDX ...`).
pub fn link_text(link: &rte_eth_link) -> String {
    let mut buf = [0 as std::ffi::c_char; 64];
    // SAFETY: buffer and link are valid.
    unsafe { sys::rte_eth_link_to_str(buf.as_mut_ptr(), buf.len(), link) };
    // SAFETY: buf was zeroed and rte_eth_link_to_str writes at most
    // buf.len() bytes, NUL included, so it ends in a NUL.
    unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) }
        .to_string_lossy()
        .into_owned()
}

/// `rte_vdev_init`: creates a virtual device. 0, or a negative errno (-1:
/// no such driver, or it refused the arguments).
pub fn vdev_init(name: &std::ffi::CStr, args: &std::ffi::CStr) -> i32 {
    // SAFETY: NUL-terminated strings.
    unsafe { sys::rte_vdev_init(name.as_ptr(), args.as_ptr()) }
}

/// `rte_vdev_uninit`: removes a virtual device.
///
/// # Safety
/// The device's port is closed: nothing uses it any more.
pub unsafe fn vdev_uninit(name: &std::ffi::CStr) -> i32 {
    // SAFETY: a NUL-terminated string; the device is unused (the caller's
    // promise).
    unsafe { sys::rte_vdev_uninit(name.as_ptr()) }
}

/// `rte_eth_dev_configure`: 0, or a negative errno (a started port
/// refuses).
pub fn configure(id: u16, rx_queues: u16, tx_queues: u16, conf: &rte_eth_conf) -> i32 {
    // SAFETY: conf is a valid, initialised struct.
    unsafe { sys::rte_eth_dev_configure(id, rx_queues, tx_queues, conf) }
}

/// `rte_eth_dev_adjust_nb_rx_tx_desc`: the ring sizes the device takes.
pub fn adjust_desc(id: u16, rx_desc: &mut u16, tx_desc: &mut u16) -> i32 {
    // SAFETY: valid out-pointers.
    unsafe { sys::rte_eth_dev_adjust_nb_rx_tx_desc(id, rx_desc, tx_desc) }
}

/// `rte_eth_rx_queue_setup` with the device's default RX configuration
/// (and the port's offloads).
///
/// # Safety
/// `pool` is a valid mbuf pool that outlives the port.
pub unsafe fn rx_queue_setup(
    id: u16,
    queue: u16,
    desc: u16,
    socket: u32,
    pool: *mut super::mbuf::rte_mempool,
) -> i32 {
    // SAFETY: NULL rxconf takes the device default; the pool is valid and
    // outlives the port (the caller's promise).
    unsafe { sys::rte_eth_rx_queue_setup(id, queue, desc, socket, std::ptr::null(), pool) }
}

/// `rte_eth_tx_queue_setup` with the device's default TX configuration
/// (and the port's offloads).
pub fn tx_queue_setup(id: u16, queue: u16, desc: u16, socket: u32) -> i32 {
    // SAFETY: NULL txconf takes the device default.
    unsafe { sys::rte_eth_tx_queue_setup(id, queue, desc, socket, std::ptr::null()) }
}

/// `rte_eth_dev_start`: 0, or a negative errno.
pub fn start(id: u16) -> i32 {
    // SAFETY: starting a configured port hands nothing over; an unknown
    // or unconfigured one is refused.
    unsafe { sys::rte_eth_dev_start(id) }
}

/// `rte_eth_promiscuous_enable`: 0, or a negative errno (-ENOTSUP).
pub fn promiscuous_enable(id: u16) -> i32 {
    // SAFETY: a plain request.
    unsafe { sys::rte_eth_promiscuous_enable(id) }
}

/// `rte_eth_dev_stop`.
///
/// # Safety
/// No lcore is inside, or will enter, an RX or TX burst on the port until
/// it is started again.
pub unsafe fn stop(id: u16) -> i32 {
    // SAFETY: nothing polls the port (the caller's promise).
    unsafe { sys::rte_eth_dev_stop(id) }
}

/// `rte_eth_dev_close`: the port's queues give their mbufs back.
///
/// # Safety
/// The port is stopped, and its id is not used afterwards.
pub unsafe fn close(id: u16) -> i32 {
    // SAFETY: a stopped port nobody uses again (the caller's promise).
    unsafe { sys::rte_eth_dev_close(id) }
}

/// An empty transmit burst: a driver that frees what it sent only inside
/// a transmit call takes its completions.
///
/// # Safety
/// Nobody else transmits on the queue meanwhile.
pub unsafe fn tx_reap(id: u16, queue: u16) {
    // SAFETY: an empty burst hands nothing over; the queue is ours (the
    // caller's promise).
    unsafe { sys::rte_eth_tx_burst(id, queue, std::ptr::null_mut(), 0) };
}

/// `rte_eth_stats_get`: 0, or a negative errno.
pub fn stats_get(id: u16, stats: &mut rte_eth_stats) -> i32 {
    // SAFETY: stats is a valid out-pointer.
    unsafe { sys::rte_eth_stats_get(id, stats) }
}

/// Every extended statistic of port `id` by name (empty if it has none, or
/// if the names and the values do not match up).
pub fn xstats(id: u16) -> Vec<(String, u64)> {
    // SAFETY: size queries with NULL buffers, then fills of that size.
    unsafe {
        let n = sys::rte_eth_xstats_get_names(id, std::ptr::null_mut(), 0);
        if n <= 0 {
            return Vec::new();
        }
        let mut names = vec![rte_eth_xstat_name::default(); n as usize];
        let mut vals = vec![rte_eth_xstat::default(); n as usize];
        let a = sys::rte_eth_xstats_get_names(id, names.as_mut_ptr(), n as u32);
        let b = sys::rte_eth_xstats_get(id, vals.as_mut_ptr(), n as u32);
        if a != n || b != n {
            return Vec::new();
        }
        vals.iter()
            .map(|v| {
                let nm = std::ffi::CStr::from_ptr(names[v.id as usize].name.as_ptr())
                    .to_string_lossy()
                    .into_owned();
                (nm, v.value)
            })
            .collect()
    }
}
