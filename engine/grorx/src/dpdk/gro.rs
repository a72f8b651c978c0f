//! DPDK's GRO library (`rte_gro`, lightweight mode) and the packet typing
//! it needs (`rte_net_get_ptype`): the baseline the measurement stages run.

use super::mbuf::rte_mbuf;
use dpdk_sys as sys;

/// The most packets one `reassemble` call can hold for merging.
pub const MAX_ITEMS: usize = sys::RTE_GRO_MAX_BURST_ITEM_NUM as usize;

/// The `packet_type` bits the baseline reads and sets.
pub mod ptype {
    pub use dpdk_sys::{
        RTE_PTYPE_INNER_L2_ETHER as INNER_L2_ETHER, RTE_PTYPE_INNER_L3_IPV4 as INNER_L3_IPV4,
        RTE_PTYPE_INNER_L4_TCP as INNER_L4_TCP, RTE_PTYPE_L4_MASK as L4_MASK,
        RTE_PTYPE_L4_UDP as L4_UDP, RTE_PTYPE_TUNNEL_VXLAN as TUNNEL_VXLAN,
    };
}

/// rte_gro's lightweight mode, TCP/IPv4: the parameters of
/// `rte_gro_reassemble_burst` (it keeps no state between calls: every call
/// builds its tables on the stack and flushes them before it returns).
#[derive(Debug, Clone, Copy)]
pub struct RteGro {
    param: sys::rte_gro_param,
}

impl RteGro {
    /// `max_flows * max_items_per_flow` bounds the packets one call holds
    /// (DPDK caps it further at [`MAX_ITEMS`] and at the burst size).
    pub fn new(max_flows: u16, max_items_per_flow: u16) -> RteGro {
        assert!(
            max_flows > 0 && max_items_per_flow > 0,
            "rte_gro with room for no packet merges nothing"
        );
        RteGro {
            param: sys::rte_gro_param {
                gro_types: (sys::RTE_GRO_TCP_IPV4 | sys::RTE_GRO_IPV4_VXLAN_TCP_IPV4) as u64,
                max_flow_num: max_flows,
                max_item_per_flow: max_items_per_flow,
                // Not read by the lightweight mode (its tables are on the stack).
                socket_id: 0,
            },
        }
    }

    /// The GRO types asked for, and the flows and packets per flow one call
    /// may hold.
    pub fn limits(&self) -> (u64, u16, u16) {
        let p = &self.param;
        (p.gro_types, p.max_flow_num, p.max_item_per_flow)
    }

    /// Merges a burst with `rte_gro_reassemble_burst`; returns `n`, the
    /// packets left.
    ///
    /// Ownership: on entry the caller owns every `pkts[i]`; on return it owns
    /// exactly `pkts[..n]`: first what rte_gro held (merged or not), flow by
    /// flow, then the packets it did not process (PSH, no payload, not TCP/IPv4,
    /// no room), in arrival order. Merged packets have the others chained in.
    /// `pkts[n..]` are stale: those mbufs now live inside the chains of
    /// `pkts[..n]` and must be neither used nor freed. Nothing is freed by the
    /// call. Merged packets carry stale checksums (the baseline's
    /// `fix_checksums` recomputes them).
    ///
    /// # Safety
    /// Every pointer is a valid mbuf chain head the caller owns, with
    /// `packet_type` and l2/l3/l4 lengths set (the baseline's `classify`)
    /// and its headers in the first segment; no pointer appears twice.
    pub unsafe fn reassemble(&self, pkts: &mut [*mut rte_mbuf]) -> usize {
        if pkts.is_empty() {
            return 0;
        }
        let n = u16::try_from(pkts.len()).expect("a burst of at most 65535 packets");
        // SAFETY: the array holds n owned, classified mbufs (the caller's
        // contract); rte_gro writes at most n pointers back into it.
        unsafe { sys::rte_gro_reassemble_burst(pkts.as_mut_ptr(), n, &self.param) as usize }
    }
}

/// The packet type `rte_net_get_ptype` reads from the headers (every layer
/// it knows), and the lengths of L2, L3 and L4.
///
/// # Safety
/// `m` is a valid mbuf the caller may read.
pub unsafe fn packet_type(m: *const rte_mbuf) -> (u32, [u64; 3]) {
    let mut hl = sys::rte_net_hdr_lens::default();
    // SAFETY: m is readable (the caller's promise); hl is ours to write.
    let t = unsafe { sys::rte_net_get_ptype(m, &mut hl, sys::RTE_PTYPE_ALL_MASK) };
    (t, [hl.l2_len as u64, hl.l3_len as u64, hl.l4_len as u64])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lightweight_parameters() {
        let types = sys::RTE_GRO_TCP_IPV4 | sys::RTE_GRO_IPV4_VXLAN_TCP_IPV4;
        let (t, flows, items) = RteGro::new(8, 32).limits();
        assert_eq!(t, types as u64, "TCP/IPv4, and inside VXLAN/IPv4");
        assert_eq!((flows, items), (8, 32));
        assert_eq!(MAX_ITEMS, 128);
    }
}
