//! The sink: every packet consumed (freed in bulk, counted).

use super::{Ctx, Stage};
use crate::skb::Skb;

/// Counts and frees every packet: a packet sink.
#[derive(Debug, Default, Clone, Copy)]
pub struct Sink;

impl Stage for Sink {
    const CONSUMES_ALL: bool = true;

    #[inline(always)]
    fn packet(&mut self, skb: Skb, ctx: &mut Ctx<'_>) {
        ctx.consume(skb);
    }
}
