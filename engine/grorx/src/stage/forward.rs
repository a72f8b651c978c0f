//! The forward stage: a [`Forwarder`] (encapsulate, segment, transmit) per
//! RX queue, its counters published for the run's report and telemetry.

use super::{Ctx, Stage};
use crate::forward::{ForwardCounters, Forwarder};
use crate::skb::Skb;
use std::sync::Arc;

/// Forwards every packet through its own TX queue.
pub struct ForwardStage {
    fwd: Forwarder,
    counters: Arc<ForwardCounters>,
    published: u64,
}

impl ForwardStage {
    /// The stage around `fwd`, publishing its counters to `counters`.
    pub fn new(fwd: Forwarder, counters: Arc<ForwardCounters>) -> ForwardStage {
        ForwardStage {
            fwd,
            counters,
            published: 0,
        }
    }
}

impl Stage for ForwardStage {
    #[inline(always)]
    fn packet(&mut self, skb: Skb, _ctx: &mut Ctx<'_>) {
        self.fwd.push(skb);
    }

    #[inline]
    fn end_of_poll(&mut self, _ctx: &mut Ctx<'_>) {
        self.fwd.flush();
        // Published when something moved: an idle poll stores nothing.
        let s = self.fwd.stats();
        if s.packets_in != self.published {
            self.published = s.packets_in;
            self.counters.publish(s);
        }
    }

    fn finish(&mut self, _ctx: &mut Ctx<'_>) {
        self.fwd.finish();
        self.counters.publish(self.fwd.stats());
    }
}
