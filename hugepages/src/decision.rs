//! Turning a [`Decision`] into the one line the engine prints, the EAL
//! arguments, and (for `Setup`) the actual reservation.

use std::io;

use crate::plan::Decision;
use crate::setup::{setup, SetupReport};
use crate::size::format_size;

impl Decision {
    /// One line saying what was decided and why, with the key figures.
    pub fn summary(&self) -> String {
        match self {
            Decision::UseExisting {
                page_size,
                mount,
                pages_needed,
                pages_free,
            } => format!(
                "hugepages: using {pages_needed} of {pages_free} free {} pages at {} (need {})",
                format_size(*page_size),
                mount.display(),
                format_size(pages_needed.saturating_mul(*page_size)),
            ),
            Decision::Setup {
                page_size,
                mount,
                new_mount,
                pages_needed,
                pages_to_add,
            } => {
                let size = format_size(*page_size);
                let mut steps = Vec::new();
                if *pages_to_add > 0 {
                    steps.push(format!("reserving {pages_to_add} more {size} pages"));
                }
                if *new_mount {
                    steps.push(format!("mounting hugetlbfs at {}", mount.display()));
                }
                format!(
                    "hugepages: {} to get {pages_needed} {size} pages (need {})",
                    steps.join(" and "),
                    format_size(pages_needed.saturating_mul(*page_size)),
                )
            }
            Decision::NoHuge { reason, mem_mb } => format!(
                "hugepages: none usable ({reason}); falling back to --no-huge -m {mem_mb} \
                 (4 KiB pages: expect a lower packet rate from TLB misses; PCI NICs need hugepages)"
            ),
            Decision::Refuse { reason } => format!("hugepages: cannot run: {reason}"),
        }
    }

    /// EAL arguments for this decision: `--huge-dir <mount>` with hugepages
    /// (for `Setup`, valid once [`Decision::apply`] succeeded), `--no-huge
    /// -m <MB>` for the fallback, nothing for `Refuse`.
    pub fn eal_args(&self) -> Vec<String> {
        match self {
            Decision::UseExisting { mount, .. } | Decision::Setup { mount, .. } => {
                vec!["--huge-dir".to_string(), mount.display().to_string()]
            }
            Decision::NoHuge { mem_mb, .. } => {
                vec![
                    "--no-huge".to_string(),
                    "-m".to_string(),
                    mem_mb.to_string(),
                ]
            }
            Decision::Refuse { .. } => Vec::new(),
        }
    }

    /// Performs a `Setup` on the real machine (needs root) and returns the
    /// resulting `UseExisting`. Other decisions are returned unchanged.
    /// On error the message says what failed and what to do; the caller
    /// may then fall back to `--no-huge` itself.
    pub fn apply(self) -> Result<Decision, String> {
        self.apply_with(setup)
    }

    /// `apply` with the setup step injected, so tests can use a fake tree.
    pub(crate) fn apply_with(
        self,
        run_setup: impl FnOnce(u64, u64) -> io::Result<SetupReport>,
    ) -> Result<Decision, String> {
        let Decision::Setup {
            page_size,
            pages_needed,
            ..
        } = self
        else {
            return Ok(self);
        };
        let report = run_setup(page_size, pages_needed.saturating_mul(page_size))
            .map_err(|e| format!("hugepages: setup failed: {e}"))?;
        if report.is_short() {
            return Err(report.to_string());
        }
        Ok(Decision::UseExisting {
            page_size,
            mount: report.mount,
            pages_needed,
            pages_free: report.pages_free,
        })
    }
}
