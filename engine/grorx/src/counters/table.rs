//! A counter table: a set of counters declared once, a line each (field,
//! unit, help), as DPDK's xstats and the kernel's ethtool strings are. From
//! the one declaration come a plain struct of `u64`s, the table every
//! exporter walks (the text and JSON reports, DPDK telemetry, Prometheus),
//! sums, and the JSON form. No counter's name is written twice.

/// What a counter counts: exporters choose by it (cycle counts are
/// measurement, kept out of the live exporters and the JSON queue objects).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Packets (or frames, or chains of mbufs).
    Packets,
    /// Bytes of packets or of buffers.
    Bytes,
    /// Polls of the queue.
    Polls,
    /// Times something happened (a wait, a miss, a failure).
    Events,
    /// TSC cycles, counted only when the run measures them.
    Cycles,
}

/// One per-queue counter as every exporter names it: the text report, the
/// JSON report's queue objects, DPDK telemetry, Prometheus
/// (`grorx_<name>_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CounterDef {
    /// The field's name, and the counter's key in every exporter.
    pub name: &'static str,
    /// What it counts.
    pub unit: Unit,
    /// One line, a sentence.
    pub help: &'static str,
}

impl CounterDef {
    /// Whether the live exporters and the JSON queue objects carry it.
    pub fn exported(&self) -> bool {
        self.unit != Unit::Cycles
    }
}

/// Declares a struct of `u64` counters and its table: `counter_table! {
/// /// docs
/// Name, TABLE { field Unit "help."; ... } }`. The struct serializes as an
/// object of its exported counters, by their table names.
macro_rules! counter_table {
    ($(#[$m:meta])* $name:ident, $table:ident {
        $($field:ident $unit:ident $help:literal;)*
    }) => {
        $(#[$m])*
        #[derive(Default, Clone, Copy, Debug, PartialEq, Eq)]
        pub struct $name {
            $(#[doc = $help] pub $field: u64,)*
        }

        /// Every counter of the struct, in declaration order.
        pub const $table: &[$crate::counters::table::CounterDef] = &[
            $($crate::counters::table::CounterDef {
                name: stringify!($field),
                unit: $crate::counters::table::Unit::$unit,
                help: $help,
            },)*
        ];

        impl $name {
            /// The values in the table's order.
            pub fn values(&self) -> [u64; $table.len()] {
                [$(self.$field,)*]
            }

            /// Adds another's counts (saturating: a sum for a report or the
            /// telemetry thread never panics).
            pub fn add(&mut self, o: &$name) {
                $(self.$field = self.$field.saturating_add(o.$field);)*
            }

            /// What was counted since `earlier`, a reading of the same
            /// counters (saturating: a counter that started again reads 0).
            pub fn since(&self, earlier: &$name) -> $name {
                $name { $($field: self.$field.saturating_sub(earlier.$field),)* }
            }

            /// Each counter with its declaration, in table order.
            pub fn each(
                &self,
            ) -> impl Iterator<Item = (&'static $crate::counters::table::CounterDef, u64)> {
                $table.iter().zip(self.values())
            }

            /// The exported counters (cycle counts left out), in table order.
            pub fn exported(
                &self,
            ) -> impl Iterator<Item = (&'static $crate::counters::table::CounterDef, u64)> {
                self.each().filter(|(d, _)| d.exported())
            }
        }

        /// The exported counters as an object, by their table names.
        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                use serde::ser::SerializeMap;
                let mut m = s.serialize_map(None)?;
                for (d, v) in self.exported() {
                    m.serialize_entry(d.name, &v)?;
                }
                m.end()
            }
        }
    };
}
pub(crate) use counter_table;
