//! A flow's held packet: its state (`held`), what its second segment makes
//! of it (`head`: sums and template), its checksum state and merged headers
//! (`sums`), and the header template the fast path compares with
//! (`template`).

pub(in crate::gro) mod head;
pub(in crate::gro) mod held;
pub(in crate::gro) mod sums;
pub(in crate::gro) mod template;
