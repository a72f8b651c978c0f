//! The settings of a run a caller may get wrong, named as the caller writes
//! them (`RunOptions::rx.queues`), and the error that refuses one. A program
//! with its own names for them (the `grorx` command's flags) maps
//! [`Setting`] to those; the GRO core's are [`crate::gro::Setting`].

use std::fmt;

/// A setting of a run: where it lives in [`RunOptions`](crate::RunOptions)
/// and the structs it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Setting {
    /// `RunOptions::name`.
    Name,
    /// `RunOptions::duration`.
    Duration,
    /// `EalSetup::Start::no_huge`.
    NoHuge,
    /// `RunOptions::ports`.
    Ports,
    /// `RunOptions::cores`.
    Cores,
    /// `RunOptions::rx.queues`.
    Queues,
    /// `RunOptions::rx.desc`.
    RxDesc,
    /// `RunOptions::rx.burst`.
    Burst,
    /// `RunOptions::rx.mtu`.
    Mtu,
    /// `RunOptions::pools.data_room`.
    DataRoom,
    /// `RunOptions::pools.cache`.
    PoolCache,
    /// `RunOptions::gro`.
    Gro,
    /// `RunOptions::skb.headroom`.
    Headroom,
    /// `RunOptions::skb.mode`.
    SkbMode,
    /// `RunOptions::stage.capture`.
    Capture,
    /// `RunOptions::stage.outputs`.
    Outputs,
    /// `ForwardOptions::to`.
    ForwardTo,
    /// `ForwardOptions::encap`.
    Encap,
    /// `VxlanConf::vni`.
    Vni,
    /// `Measure::RteGro` in `RunOptions::stage.measure`.
    RteGro,
    /// `Measure::FreePerPacket` in `RunOptions::stage.measure`.
    FreePerPacket,
    /// `GenConfig::flows`.
    GenFlows,
    /// `GenConfig::mss`.
    GenMss,
    /// `GenConfig::interleave`.
    GenInterleave,
    /// `GenConfig::burst`.
    GenBurst,
    /// `GenConfig::vlan`.
    GenVlan,
}

impl Setting {
    /// Every setting, for a program that maps them all.
    pub const ALL: [Setting; 26] = [
        Setting::Name,
        Setting::Duration,
        Setting::NoHuge,
        Setting::Ports,
        Setting::Cores,
        Setting::Queues,
        Setting::RxDesc,
        Setting::Burst,
        Setting::Mtu,
        Setting::DataRoom,
        Setting::PoolCache,
        Setting::Gro,
        Setting::Headroom,
        Setting::SkbMode,
        Setting::Capture,
        Setting::Outputs,
        Setting::ForwardTo,
        Setting::Encap,
        Setting::Vni,
        Setting::RteGro,
        Setting::FreePerPacket,
        Setting::GenFlows,
        Setting::GenMss,
        Setting::GenInterleave,
        Setting::GenBurst,
        Setting::GenVlan,
    ];

    /// The setting as a caller writes it, e.g. `RunOptions::rx.queues`.
    pub fn name(self) -> &'static str {
        match self {
            Setting::Name => "RunOptions::name",
            Setting::Duration => "RunOptions::duration",
            Setting::NoHuge => "EalSetup::Start::no_huge",
            Setting::Ports => "RunOptions::ports",
            Setting::Cores => "RunOptions::cores",
            Setting::Queues => "RunOptions::rx.queues",
            Setting::RxDesc => "RunOptions::rx.desc",
            Setting::Burst => "RunOptions::rx.burst",
            Setting::Mtu => "RunOptions::rx.mtu",
            Setting::DataRoom => "RunOptions::pools.data_room",
            Setting::PoolCache => "RunOptions::pools.cache",
            Setting::Gro => "RunOptions::gro",
            Setting::Headroom => "RunOptions::skb.headroom",
            Setting::SkbMode => "RunOptions::skb.mode",
            Setting::Capture => "RunOptions::stage.capture",
            Setting::Outputs => "RunOptions::stage.outputs",
            Setting::ForwardTo => "ForwardOptions::to",
            Setting::Encap => "ForwardOptions::encap",
            Setting::Vni => "VxlanConf::vni",
            Setting::RteGro => "Measure::RteGro",
            Setting::FreePerPacket => "Measure::FreePerPacket",
            Setting::GenFlows => "GenConfig::flows",
            Setting::GenMss => "GenConfig::mss",
            Setting::GenInterleave => "GenConfig::interleave",
            Setting::GenBurst => "GenConfig::burst",
            Setting::GenVlan => "GenConfig::vlan",
        }
    }
}

impl fmt::Display for Setting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A setting of a run that cannot work: the GRO core's error over this
/// list of settings.
pub type SettingError = crate::gro::SettingError<Setting>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_setting_is_listed_once_and_no_name_begins_another() {
        for (i, a) in Setting::ALL.iter().enumerate() {
            for b in &Setting::ALL[i + 1..] {
                assert_ne!(a, b);
                assert!(
                    !a.name().starts_with(b.name()) && !b.name().starts_with(a.name()),
                    "{a} and {b}: a program that rewrites names in a message needs them apart"
                );
            }
        }
    }
}
