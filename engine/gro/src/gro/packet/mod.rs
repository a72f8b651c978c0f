//! A flow's held packet: its state (`held`: `Core`, which UDP's held
//! packets share, and TCP's `Held`), what its second segment makes of it
//! and merges (`head`: sums and template), its checksum state and merged
//! headers (`sums`), and the header template the fast path compares with,
//! with the masks of each header layout that a queue's templates share
//! (`template`).

pub(in crate::gro) mod head;
pub(in crate::gro) mod held;
pub(in crate::gro) mod sums;
pub(in crate::gro) mod template;
