//! Which flow a segment belongs to, and where its held packet is: the flow
//! key (`key`) and the bounded table of held packets (`table`).

pub mod key;
pub mod table;
