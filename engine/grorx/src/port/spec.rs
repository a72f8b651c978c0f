//! A port spec: what the user names, and what it becomes before and after
//! EAL starts. Checked before EAL so a typo is a one-line error, not a page of
//! EAL log.

use std::fmt;
use std::path::Path;

/// A port as `RunOptions::ports` (or an output) names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PortSpec {
    /// A PCI device, `0000:3b:00.0` or `3b:00.0`, optionally `,devargs`:
    /// passed to EAL as `-a` so only it is probed.
    Pci {
        /// The PCI address as given.
        addr: String,
        /// Device arguments after the first comma.
        devargs: Option<String>,
    },
    /// A virtual device `net_xxxN[,args]`, created after EAL starts.
    Vdev {
        /// The driver name with an instance number (`net_null0`).
        name: String,
        /// The comma-separated `key=value` arguments (empty: none).
        args: String,
    },
    /// A port EAL already created from the user's own EAL arguments.
    Id(u16),
}

impl fmt::Display for PortSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PortSpec::Pci {
                addr,
                devargs: None,
            } => write!(f, "{addr}"),
            PortSpec::Pci {
                addr,
                devargs: Some(d),
            } => write!(f, "{addr},{d}"),
            PortSpec::Vdev { name, args } if args.is_empty() => write!(f, "{name}"),
            PortSpec::Vdev { name, args } => write!(f, "{name},{args}"),
            PortSpec::Id(id) => write!(f, "{id}"),
        }
    }
}

const HELP: &str = "expected a PCI address (0000:3b:00.0), a virtual device \
(net_null0, net_ring0, net_pcap0,rx_pcap=FILE, net_memif0,role=client,socket=PATH) \
or the id of a port EAL created from its own arguments";

fn is_hex(s: &str, n: usize) -> bool {
    s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// `DDDD:BB:DD.F` or `BB:DD.F`.
fn is_pci(addr: &str) -> bool {
    let parts: Vec<&str> = addr.split(':').collect();
    let (dom, bus, devfn) = match parts.as_slice() {
        [d, b, df] => (Some(*d), *b, *df),
        [b, df] => (None, *b, *df),
        _ => return false,
    };
    let Some((dev, func)) = devfn.split_once('.') else {
        return false;
    };
    dom.is_none_or(|d| is_hex(d, 4))
        && is_hex(bus, 2)
        && is_hex(dev, 2)
        && func.len() == 1
        && func.as_bytes()[0].is_ascii_digit()
}

/// A PCI address in full: the domain (0000 when not given), lower case.
pub fn pci_full(addr: &str) -> String {
    let a = addr.to_ascii_lowercase();
    if a.matches(':').count() == 1 {
        format!("0000:{a}")
    } else {
        a
    }
}

impl PortSpec {
    /// Parses a port spec and checks the files a vdev reads or writes; the
    /// error says what forms are accepted.
    pub fn parse(spec: &str) -> Result<PortSpec, String> {
        let spec = spec.trim();
        if spec.is_empty() {
            return Err(format!("empty port: {HELP}"));
        }
        if let Ok(id) = spec.parse::<u16>() {
            return Ok(PortSpec::Id(id));
        }
        let (head, rest) = match spec.split_once(',') {
            Some((h, r)) => (h, Some(r.to_string())),
            None => (spec, None),
        };
        if is_pci(head) {
            return Ok(PortSpec::Pci {
                addr: head.to_string(),
                devargs: rest,
            });
        }
        let ok_name = head.starts_with("net_")
            && head.len() > 4
            && head.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !ok_name {
            return Err(format!("'{spec}' is not a port: {HELP}"));
        }
        let args = rest.unwrap_or_default();
        let spec = PortSpec::Vdev {
            name: head.to_string(),
            args,
        };
        spec.check_files()?;
        Ok(spec)
    }

    /// True when both name the same device as far as can be told before
    /// EAL starts: PCI addresses in their full form (`3b:00.0` is
    /// `0000:3b:00.0`, any case), vdevs by name (their arguments aside),
    /// port ids by number. A port id and a device name are compared once EAL
    /// has resolved both.
    pub fn same_device(&self, other: &PortSpec) -> bool {
        match (self, other) {
            (PortSpec::Pci { addr: a, .. }, PortSpec::Pci { addr: b, .. }) => {
                pci_full(a) == pci_full(b)
            }
            (PortSpec::Vdev { name: a, .. }, PortSpec::Vdev { name: b, .. }) => a == b,
            (PortSpec::Id(a), PortSpec::Id(b)) => a == b,
            _ => false,
        }
    }

    /// The address EAL's allow list and the ethdev name use: the PCI
    /// address in full (`0000:3b:00.0`), lower case, with its devargs.
    pub fn eal_allow(&self) -> Option<String> {
        match self {
            PortSpec::Pci { addr, devargs } => Some(match devargs {
                Some(d) => format!("{},{d}", pci_full(addr)),
                None => pci_full(addr),
            }),
            _ => None,
        }
    }

    /// The ethdev name DPDK gives the port (to find its id after probing).
    pub fn dev_name(&self) -> Option<&str> {
        match self {
            PortSpec::Pci { addr, .. } => Some(addr),
            PortSpec::Vdev { name, .. } => Some(name),
            PortSpec::Id(_) => None,
        }
    }

    /// Key/value arguments of a vdev.
    pub fn kv(&self) -> Vec<(&str, &str)> {
        match self {
            PortSpec::Vdev { args, .. } => args
                .split(',')
                .filter(|a| !a.is_empty())
                .map(|a| a.split_once('=').unwrap_or((a, "")))
                .collect(),
            _ => Vec::new(),
        }
    }

    /// The value of vdev argument `key`, if given.
    pub fn arg(&self, key: &str) -> Option<&str> {
        self.kv()
            .into_iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v)
    }

    /// A net_pcap port that replays a file once ends by itself.
    pub fn pcap_replay_once(&self) -> Option<&str> {
        match self {
            PortSpec::Vdev { name, .. } if name.starts_with("net_pcap") => {
                let infinite = self.arg("infinite_rx").is_some_and(|v| v != "0");
                self.arg("rx_pcap").filter(|_| !infinite)
            }
            _ => None,
        }
    }

    /// Files a vdev reads must exist, and outputs must go to a directory that does.
    fn check_files(&self) -> Result<(), String> {
        for (k, v) in self.kv() {
            match k {
                "rx_pcap" if !Path::new(v).is_file() => {
                    return Err(format!(
                        "port '{self}': rx_pcap file '{v}' does not exist (give the path of a pcap capture)"
                    ));
                }
                "tx_pcap" => {
                    let dir = Path::new(v).parent().filter(|p| !p.as_os_str().is_empty());
                    if let Some(d) = dir.filter(|d| !d.is_dir()) {
                        return Err(format!(
                            "port '{self}': directory '{}' for tx_pcap does not exist",
                            d.display()
                        ));
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pci_forms() {
        assert_eq!(
            PortSpec::parse("0000:3b:00.0").unwrap(),
            PortSpec::Pci {
                addr: "0000:3b:00.0".into(),
                devargs: None
            }
        );
        assert_eq!(
            PortSpec::parse("3b:00.1,rxq_cqe_comp_en=0").unwrap(),
            PortSpec::Pci {
                addr: "3b:00.1".into(),
                devargs: Some("rxq_cqe_comp_en=0".into())
            }
        );
        assert!(PortSpec::parse("0000:3b:00").is_err());
        assert!(PortSpec::parse("zz:00.0").is_err());
    }

    #[test]
    fn one_device_named_two_ways_is_the_same_device() {
        let p = |s: &str| PortSpec::parse(s).unwrap();
        assert!(p("3b:00.0").same_device(&p("0000:3b:00.0")));
        assert!(p("0000:3B:00.0").same_device(&p("3b:00.0,rxq_cqe_comp_en=0")));
        assert!(!p("3b:00.0").same_device(&p("3b:00.1")));
        assert!(!p("3b:00.0").same_device(&p("0001:3b:00.0")));
        assert!(p("net_null0").same_device(&p("net_null0,size=128")));
        assert!(!p("net_null0").same_device(&p("net_null1")));
        assert!(p("2").same_device(&p("2")));
        // Known only once EAL has resolved the name.
        assert!(!p("net_null0").same_device(&p("0")));
        assert_eq!(
            p("3B:00.0,x=1").eal_allow().as_deref(),
            Some("0000:3b:00.0,x=1")
        );
        assert_eq!(p("net_null0").eal_allow(), None);
    }

    #[test]
    fn vdev_forms() {
        let p = PortSpec::parse("net_null0").unwrap();
        assert_eq!(p.dev_name(), Some("net_null0"));
        let p = PortSpec::parse("net_memif0,role=client,socket=/tmp/s").unwrap();
        assert_eq!(p.arg("role"), Some("client"));
        assert_eq!(p.to_string(), "net_memif0,role=client,socket=/tmp/s");
        assert_eq!(PortSpec::parse("3").unwrap(), PortSpec::Id(3));
    }

    #[test]
    fn bad_specs_explain() {
        for bad in ["", "eth0", "null0", "net_", "net_nu ll0", "foo,bar"] {
            let e = PortSpec::parse(bad).unwrap_err();
            assert!(e.contains("expected") || e.contains("empty"), "{bad}: {e}");
        }
    }

    #[test]
    fn pcap_files_checked() {
        let e = PortSpec::parse("net_pcap0,rx_pcap=/nonexistent/x.pcap").unwrap_err();
        assert!(e.contains("does not exist"), "{e}");
        let f = tempfile::NamedTempFile::new().unwrap();
        let spec = format!("net_pcap0,rx_pcap={}", f.path().display());
        let p = PortSpec::parse(&spec).unwrap();
        assert_eq!(p.pcap_replay_once(), Some(f.path().to_str().unwrap()));
        let p = PortSpec::parse(&format!("{spec},infinite_rx=1")).unwrap();
        assert_eq!(p.pcap_replay_once(), None);
        assert!(PortSpec::parse("net_pcap0,tx_pcap=/nonexistent/dir/o.pcap").is_err());
    }
}
