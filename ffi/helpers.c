#include <string.h>
#include <rte_config.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include "helpers.h"

int grorx_rte_errno(void) { return rte_errno; }

#define C(x) { #x, (uint64_t)(x) }
const struct grorx_named_const grorx_consts[] = {
	C(RTE_ETH_RX_OFFLOAD_VLAN_STRIP),
	C(RTE_ETH_RX_OFFLOAD_IPV4_CKSUM),
	C(RTE_ETH_RX_OFFLOAD_UDP_CKSUM),
	C(RTE_ETH_RX_OFFLOAD_TCP_CKSUM),
	C(RTE_ETH_RX_OFFLOAD_TCP_LRO),
	C(RTE_ETH_RX_OFFLOAD_SCATTER),
	C(RTE_ETH_RX_OFFLOAD_RSS_HASH),
	C(RTE_ETH_TX_OFFLOAD_VLAN_INSERT),
	C(RTE_ETH_TX_OFFLOAD_IPV4_CKSUM),
	C(RTE_ETH_TX_OFFLOAD_UDP_CKSUM),
	C(RTE_ETH_TX_OFFLOAD_TCP_CKSUM),
	C(RTE_ETH_TX_OFFLOAD_TCP_TSO),
	C(RTE_ETH_TX_OFFLOAD_MULTI_SEGS),
	C(RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE),
	C(RTE_ETH_RSS_IPV4),
	C(RTE_ETH_RSS_FRAG_IPV4),
	C(RTE_ETH_RSS_NONFRAG_IPV4_TCP),
	C(RTE_ETH_RSS_NONFRAG_IPV4_UDP),
	C(RTE_ETH_RSS_NONFRAG_IPV4_OTHER),
	C(RTE_ETH_RSS_IPV6),
	C(RTE_ETH_RSS_FRAG_IPV6),
	C(RTE_ETH_RSS_NONFRAG_IPV6_TCP),
	C(RTE_ETH_RSS_NONFRAG_IPV6_UDP),
	C(RTE_ETH_RSS_NONFRAG_IPV6_OTHER),
	C(RTE_ETH_RSS_IPV6_EX),
	C(RTE_ETH_RSS_IPV6_TCP_EX),
	C(RTE_ETH_RSS_IP),
	C(RTE_ETH_RSS_TCP),
};
const size_t grorx_consts_len = sizeof(grorx_consts) / sizeof(grorx_consts[0]);

size_t grorx_sizeof_rte_mbuf(void) { return sizeof(struct rte_mbuf); }

#define OFF(f) if (strcmp(field, #f) == 0) return offsetof(struct rte_mbuf, f)
size_t grorx_offsetof_rte_mbuf(const char *field)
{
	OFF(buf_addr);
	OFF(data_off);
	OFF(refcnt);
	OFF(nb_segs);
	OFF(port);
	OFF(ol_flags);
	OFF(packet_type);
	OFF(pkt_len);
	OFF(data_len);
	OFF(vlan_tci);
	OFF(hash);
	OFF(buf_len);
	OFF(pool);
	OFF(next);
	OFF(tx_offload);
	OFF(priv_size);
	OFF(timesync);
	return (size_t)-1;
}
