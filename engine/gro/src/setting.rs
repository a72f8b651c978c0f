//! The settings a caller may get wrong, named as the caller writes them
//! (`GroConfig::max_frags`), and the error that refuses one. A program with
//! its own names for them (a command line's flags) maps [`Setting`] to those.

use std::fmt;

/// A setting of the GRO core's, where it lives in [`GroConfig`](crate::GroConfig)
/// or [`Tunnels`](crate::wire::Tunnels).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Setting {
    /// `GroConfig::max_frags`.
    MaxFrags,
    /// `GroConfig::max_size`.
    MaxSize,
    /// `GroConfig::flows`.
    Flows,
    /// `GroConfig::flow_cache`.
    FlowCache,
    /// `GroConfig::reorder.segments`.
    ReorderSegments,
    /// `Tunnels::vxlan`, the ports `Tunnels::add_vxlan` adds.
    VxlanPorts,
}

impl Setting {
    /// Every setting, for a program that maps them all.
    pub const ALL: [Setting; 6] = [
        Setting::MaxFrags,
        Setting::MaxSize,
        Setting::Flows,
        Setting::FlowCache,
        Setting::ReorderSegments,
        Setting::VxlanPorts,
    ];

    /// The setting as a caller writes it, e.g. `GroConfig::max_frags`.
    pub fn name(self) -> &'static str {
        match self {
            Setting::MaxFrags => "GroConfig::max_frags",
            Setting::MaxSize => "GroConfig::max_size",
            Setting::Flows => "GroConfig::flows",
            Setting::FlowCache => "GroConfig::flow_cache",
            Setting::ReorderSegments => "GroConfig::reorder.segments",
            Setting::VxlanPorts => "Tunnels::vxlan",
        }
    }
}

impl fmt::Display for Setting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A setting that cannot work: which one, the value given, and what is
/// wrong with it and what to give instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingError {
    /// The setting refused.
    pub setting: Setting,
    /// The value given, as written.
    pub value: String,
    /// What is wrong and what to give, e.g. `out of range: give 1..=512`.
    pub problem: String,
}

impl SettingError {
    /// `setting` refused at `value`, because of `problem`.
    pub fn new(setting: Setting, value: impl fmt::Display, problem: impl Into<String>) -> Self {
        SettingError {
            setting,
            value: value.to_string(),
            problem: problem.into(),
        }
    }
}

impl fmt::Display for SettingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}: {}", self.setting, self.value, self.problem)
    }
}

impl std::error::Error for SettingError {}
