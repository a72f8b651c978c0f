/* Small C helpers for what bindgen cannot reach from Rust. */
#ifndef GRORX_HELPERS_H
#define GRORX_HELPERS_H
#include <stddef.h>
#include <stdint.h>

/* rte_errno is a macro over a per-lcore variable: reading the TLS symbol from
 * Rust crashes, so it is read here. */
int grorx_rte_errno(void);

/* Constants defined with RTE_BIT64() (a function-like macro bindgen cannot
 * evaluate). Rust hand-writes them; this table lets a test prove each one. */
struct grorx_named_const {
	const char *name;
	uint64_t value;
};
extern const struct grorx_named_const grorx_consts[];
extern const size_t grorx_consts_len;

/* Layout probes: sizes and offsets as the C compiler sees them. */
size_t grorx_sizeof_rte_mbuf(void);
size_t grorx_offsetof_rte_mbuf(const char *field);
#endif
