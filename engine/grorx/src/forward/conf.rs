//! What the forward stage is asked to do: the encapsulation, the TX port's
//! offloads and what they allow, the stage's settings.

use crate::port::{
    RTE_ETH_TX_OFFLOAD_IPV4_CKSUM, RTE_ETH_TX_OFFLOAD_MULTI_SEGS, RTE_ETH_TX_OFFLOAD_TCP_CKSUM,
    RTE_ETH_TX_OFFLOAD_TCP_TSO,
};
use crate::setting::Setting;
use anyhow::Result;

/// `RTE_ETH_TX_OFFLOAD_OUTER_IPV4_CKSUM`, which dpdk-sys does not name
/// (`RTE_BIT64` in rte_ethdev.h, 22.11).
pub const TX_OFFLOAD_OUTER_IPV4_CKSUM: u64 = 1 << 7;
/// `RTE_ETH_TX_OFFLOAD_VXLAN_TNL_TSO`, which dpdk-sys does not name either.
pub const TX_OFFLOAD_VXLAN_TNL_TSO: u64 = 1 << 9;

/// Bytes of a `struct virtio_net_hdr_mrg_rxbuf`.
pub const VIRTIO_NET_HDR_LEN: u16 = 12;

/// The fields of a `virtio_net_hdr_mrg_rxbuf` (virtio 1.x: little-endian).
pub mod virtio_net {
    use crate::wire::field::Field;
    /// `VIRTIO_NET_HDR_F_*`.
    pub const FLAGS: usize = 0;
    /// `VIRTIO_NET_HDR_GSO_*`.
    pub const GSO_TYPE: usize = 1;
    /// Bytes of headers in front of the payload.
    pub const HDR_LEN: Field = 2..4;
    /// Payload bytes of each segment.
    pub const GSO_SIZE: Field = 4..6;
    /// Where the checksum's sum starts (the L4 header).
    pub const CSUM_START: Field = 6..8;
    /// Where, from `CSUM_START`, the checksum is written.
    pub const CSUM_OFFSET: Field = 8..10;
    /// Buffers the packet spans (mergeable RX buffers).
    pub const NUM_BUFFERS: Field = 10..12;
}
/// virtio_net_hdr `flags`: the TCP checksum is partial (`csum_start`, `csum_offset`).
pub const VIRTIO_NET_HDR_F_NEEDS_CSUM: u8 = 1;
/// virtio_net_hdr `gso_type`: one packet, nothing to segment.
pub const VIRTIO_NET_HDR_GSO_NONE: u8 = 0;
/// virtio_net_hdr `gso_type`: TCP over IPv4, to be segmented.
pub const VIRTIO_NET_HDR_GSO_TCPV4: u8 = 1;
/// virtio_net_hdr `gso_type`: TCP over IPv6, to be segmented.
pub const VIRTIO_NET_HDR_GSO_TCPV6: u8 = 4;
/// virtio_net_hdr `gso_type` flag: the first segment has CWR (the flow uses ECN).
pub const VIRTIO_NET_HDR_GSO_ECN: u8 = 0x80;

/// Outer Ethernet + IPv4 + UDP + VXLAN.
pub const VXLAN_ENCAP_LEN: u16 = 50;
/// The IANA VXLAN UDP port.
pub const VXLAN_UDP_PORT: u16 = 4789;

/// The outer headers of `Encap::Vxlan`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VxlanConf {
    /// 24-bit VXLAN network identifier.
    pub vni: u32,
    /// Outer source MAC.
    pub src_mac: [u8; 6],
    /// Outer destination MAC (the next hop's).
    pub dst_mac: [u8; 6],
    /// Outer IPv4 source: the local VTEP.
    pub src_ip: [u8; 4],
    /// Outer IPv4 destination: the remote VTEP.
    pub dst_ip: [u8; 4],
    /// Outer UDP source port; 0: derived from the inner flow (RFC 7348
    /// entropy, 49152..=65535), so one flow keeps one underlay path.
    pub src_port: u16,
    /// Outer UDP destination port.
    pub dst_port: u16,
    /// Outer IPv4 TTL.
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
    /// Nothing prepended: packets leave as GRO built them (segmented for the port).
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
    /// VXLAN over IPv4 with these outer headers (50 B: Ethernet, IPv4, UDP, VXLAN).
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

    /// The name the CLI takes and the report shows: `none`, `virtio` or `vxlan`.
    pub fn name(&self) -> &'static str {
        match self {
            Encap::None => "none",
            Encap::VirtioNet => "virtio",
            Encap::Vxlan(_) => "vxlan",
        }
    }

    /// By name: `none`, `virtio` or `vxlan` (with `vni`, the other outer
    /// fields at their defaults).
    pub fn parse(kind: &str, vni: u32) -> Result<Encap, String> {
        match kind {
            "none" => Ok(Encap::None),
            "virtio" | "virtio-net" => Ok(Encap::VirtioNet),
            "vxlan" => {
                if vni > 0x00ff_ffff {
                    return Err(format!(
                        "{} {vni}: out of range: give 0..=16777215",
                        Setting::Vni
                    ));
                }
                Ok(Encap::Vxlan(VxlanConf {
                    vni,
                    ..VxlanConf::default()
                }))
            }
            _ => Err(format!(
                "{} {kind}: unknown encapsulation; give none, virtio or vxlan",
                Setting::Encap
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

/// One forwarder's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ForwardConf {
    /// TX port id (configured and started by the caller).
    pub port: u16,
    /// TX queue on that port: one per forwarding worker.
    pub queue: u16,
    /// What is prepended to every packet.
    pub encap: Encap,
    /// Which TX offloads the forwarder may use.
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
    let mut w = RTE_ETH_TX_OFFLOAD_MULTI_SEGS
        | RTE_ETH_TX_OFFLOAD_TCP_TSO
        | RTE_ETH_TX_OFFLOAD_IPV4_CKSUM
        | RTE_ETH_TX_OFFLOAD_TCP_CKSUM;
    if let Encap::Vxlan(_) = encap {
        w |= TX_OFFLOAD_VXLAN_TNL_TSO | TX_OFFLOAD_OUTER_IPV4_CKSUM;
    }
    w
}

/// What segmentation the TX port does, from its offload bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TxCaps {
    /// TSO of TCP over IPv4 (with the IPv4 checksum offload it needs).
    pub tso_v4: bool,
    /// TSO of TCP over IPv6.
    pub tso_v6: bool,
    /// VXLAN tunnel TSO (with the outer IPv4 checksum the NIC must redo).
    pub vxlan_tso_v4: bool,
    /// VXLAN tunnel TSO of inner TCP over IPv6.
    pub vxlan_tso_v6: bool,
    /// Buffers one TSO packet may span (0: no limit known).
    pub max_segs: u16,
}

impl TxCaps {
    /// What a port with these `RTE_ETH_TX_OFFLOAD_*` bits segments; `max_segs`
    /// as in [`TxCaps::max_segs`].
    pub fn from_offloads(bits: u64, max_segs: u16) -> TxCaps {
        let has = |b: u64| bits & b == b;
        let v4csum = has(RTE_ETH_TX_OFFLOAD_IPV4_CKSUM);
        let tso = has(RTE_ETH_TX_OFFLOAD_TCP_TSO);
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
