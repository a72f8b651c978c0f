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

/// A setting that cannot work: which one, the value given (empty when the
/// setting is refused whatever its value), and what is wrong with it and
/// what to give instead (which may name other settings). `S` is the
/// library's own [`Setting`] list: the engine library refuses its
/// settings with the same error over its list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingError<S = Setting> {
    /// The setting refused.
    pub setting: S,
    /// The value given, as written.
    pub value: String,
    /// What is wrong and what to give, e.g. `out of range: give 1..=512`.
    pub problem: String,
}

impl<S> SettingError<S> {
    /// `setting` refused at `value`, because of `problem`.
    pub fn new(setting: S, value: impl fmt::Display, problem: impl Into<String>) -> Self {
        SettingError {
            setting,
            value: value.to_string(),
            problem: problem.into(),
        }
    }
}

impl<S: fmt::Display> fmt::Display for SettingError<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.value.is_empty() {
            write!(f, "{}: {}", self.setting, self.problem)
        } else {
            write!(f, "{} {}: {}", self.setting, self.value, self.problem)
        }
    }
}

impl<S: fmt::Debug + fmt::Display> std::error::Error for SettingError<S> {}
