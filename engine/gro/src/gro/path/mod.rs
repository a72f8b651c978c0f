//! The ways a segment takes through GRO: the fast path (`fast`: the next
//! segment of a flow checked against its template, and a burst's runs of
//! one flow), the full path (`full`: parse, look up, decide by the rules,
//! act), two segments in a row merged without a table entry (`pair`), a
//! poll's burst taken whole (`poll`), and the window that lets segments
//! ahead of a gap wait for it (`reorder`).

pub(in crate::gro) mod fast;
pub(in crate::gro) mod full;
pub(in crate::gro) mod pair;
pub(in crate::gro) mod poll;
pub(in crate::gro) mod reorder;
