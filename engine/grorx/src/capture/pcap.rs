//! Classic pcap files: counting the frames of a capture (to know when a
//! one-shot replay is over).

use std::io::{self, Read};
use std::path::Path;

const MAGIC_US: u32 = 0xa1b2_c3d4;
const MAGIC_NS: u32 = 0xa1b2_3c4d;

/// The pcap link type of Ethernet frames.
const LINKTYPE_ETHERNET: u32 = 1;

/// A link type's name, for the common ones.
fn linktype_name(t: u32) -> &'static str {
    match t {
        0 => "BSD loopback",
        101 => "raw IP",
        105 => "IEEE 802.11",
        113 => "Linux cooked capture",
        127 => "802.11 radiotap",
        228 => "raw IPv4",
        229 => "raw IPv6",
        276 => "Linux cooked capture v2",
        _ => "not Ethernet",
    }
}

/// Frames in a pcap file (either byte order, micro- or nanosecond stamps);
/// a file whose frames are not Ethernet is refused, its link type named.
pub fn count_frames(path: &Path) -> io::Result<u64> {
    let bad = |m: &str| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: {m}", path.display()),
        )
    };
    let mut r = io::BufReader::with_capacity(1 << 20, std::fs::File::open(path)?);
    let mut gh = [0u8; 24];
    r.read_exact(&mut gh)
        .map_err(|_| bad("too short for a pcap header"))?;
    let le = match u32::from_le_bytes(gh[0..4].try_into().unwrap()) {
        MAGIC_US | MAGIC_NS => true,
        m if m.swap_bytes() == MAGIC_US || m.swap_bytes() == MAGIC_NS => false,
        _ => {
            return Err(bad(
                "not a pcap file (pcapng is not supported: convert with editcap -F pcap)",
            ))
        }
    };
    let w = [gh[20], gh[21], gh[22], gh[23]];
    let linktype = if le {
        u32::from_le_bytes(w)
    } else {
        u32::from_be_bytes(w)
    };
    // net_pcap replays each record as an Ethernet frame, whatever it is.
    if linktype != LINKTYPE_ETHERNET {
        return Err(bad(&format!(
            "link type {linktype} ({}): frames are replayed as Ethernet, so only link type 1 \
             (Ethernet) can be; convert it (e.g. tcprewrite --dlt=enet) or capture on an Ethernet interface",
            linktype_name(linktype)
        )));
    }
    let mut n = 0u64;
    let mut rh = [0u8; 16];
    let mut skip = vec![0u8; 1 << 16];
    loop {
        match r.read_exact(&mut rh) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(n),
            Err(e) => return Err(e),
        }
        let w = [rh[8], rh[9], rh[10], rh[11]];
        let caplen = if le {
            u32::from_le_bytes(w)
        } else {
            u32::from_be_bytes(w)
        } as usize;
        let mut left = caplen;
        while left > 0 {
            let k = left.min(skip.len());
            r.read_exact(&mut skip[..k])
                .map_err(|_| bad("truncated record"))?;
            left -= k;
        }
        n += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn counts_records_and_rejects_junk() {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        let mut h = Vec::new();
        h.extend_from_slice(&MAGIC_US.to_le_bytes());
        h.extend_from_slice(&[
            2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 1, 0, 0, 0,
        ]);
        for len in [60u32, 1514, 0] {
            h.extend_from_slice(&[0u8; 8]);
            h.extend_from_slice(&len.to_le_bytes());
            h.extend_from_slice(&len.to_le_bytes());
            h.extend(std::iter::repeat_n(0u8, len as usize));
        }
        f.write_all(&h).unwrap();
        assert_eq!(count_frames(f.path()).unwrap(), 3);

        let mut g = tempfile::NamedTempFile::new().unwrap();
        g.write_all(b"not a capture at all, really").unwrap();
        assert!(count_frames(g.path())
            .unwrap_err()
            .to_string()
            .contains("not a pcap"));

        // The same file with raw-IP frames (link type 101).
        h[20] = 101;
        let mut r = tempfile::NamedTempFile::new().unwrap();
        r.write_all(&h).unwrap();
        let e = count_frames(r.path()).unwrap_err().to_string();
        assert!(e.contains("link type 101 (raw IP)"), "{e}");
        assert!(e.contains("only link type 1 (Ethernet)"), "{e}");
    }
}

/// Writes classic pcap with nanosecond timestamps and a snap length large
/// enough for 64 KiB GRO packets (tcpdump, tshark and Wireshark read it).
pub struct Writer<W: io::Write> {
    w: W,
}

/// The longest record pcap readers take whole (Wireshark's and tcpdump's
/// limit): a 64 KiB packet, or a BIG TCP one of up to 256 KiB with its
/// Ethernet header. A longer one (`GroConfig::max_size` past 262130) is cut to
/// it, its record stating both lengths, as `tcpdump -s` cuts.
pub const SNAPLEN: u32 = 262_144;

impl<W: io::Write> Writer<W> {
    pub fn new(mut w: W) -> io::Result<Writer<W>> {
        let mut h = [0u8; 24];
        h[0..4].copy_from_slice(&MAGIC_NS.to_le_bytes());
        h[4..6].copy_from_slice(&2u16.to_le_bytes());
        h[6..8].copy_from_slice(&4u16.to_le_bytes());
        h[16..20].copy_from_slice(&SNAPLEN.to_le_bytes());
        h[20..24].copy_from_slice(&1u32.to_le_bytes()); // Ethernet
        w.write_all(&h)?;
        Ok(Writer { w })
    }

    /// One record of `len` bytes given as chunks (an mbuf chain's segments).
    /// Nothing is written if the chunks hold fewer than `len` bytes.
    pub fn packet<'a>(
        &mut self,
        ts_ns: u64,
        len: u32,
        chunks: impl Iterator<Item = &'a [u8]> + Clone,
    ) -> io::Result<()> {
        let have: usize = chunks.clone().map(|c| c.len()).sum();
        if have < len as usize {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "packet shorter than its length",
            ));
        }
        let cap = len.min(SNAPLEN);
        let mut r = [0u8; 16];
        r[0..4].copy_from_slice(&((ts_ns / 1_000_000_000) as u32).to_le_bytes());
        r[4..8].copy_from_slice(&((ts_ns % 1_000_000_000) as u32).to_le_bytes());
        r[8..12].copy_from_slice(&cap.to_le_bytes());
        r[12..16].copy_from_slice(&len.to_le_bytes());
        self.w.write_all(&r)?;
        let mut left = cap as usize;
        for c in chunks {
            if left == 0 {
                break;
            }
            let n = c.len().min(left);
            self.w.write_all(&c[..n])?;
            left -= n;
        }
        Ok(())
    }

    pub fn into_inner(self) -> W {
        self.w
    }

    pub fn get_ref(&self) -> &W {
        &self.w
    }

    pub fn get_mut(&mut self) -> &mut W {
        &mut self.w
    }
}

/// Reads every record of a pcap file (tests and tools; not the data path).
pub fn read_all(path: &Path) -> io::Result<Vec<Vec<u8>>> {
    let data = std::fs::read(path)?;
    let bad = || {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: not a pcap file", path.display()),
        )
    };
    if data.len() < 24 {
        return Err(bad());
    }
    let m = u32::from_le_bytes(data[0..4].try_into().unwrap());
    let le = match m {
        MAGIC_US | MAGIC_NS => true,
        x if x.swap_bytes() == MAGIC_US || x.swap_bytes() == MAGIC_NS => false,
        _ => return Err(bad()),
    };
    let rd = |b: &[u8]| {
        let w = [b[0], b[1], b[2], b[3]];
        if le {
            u32::from_le_bytes(w)
        } else {
            u32::from_be_bytes(w)
        }
    };
    let mut out = Vec::new();
    let mut off = 24;
    while off + 16 <= data.len() {
        let cap = rd(&data[off + 8..off + 12]) as usize;
        off += 16;
        let end = off
            .checked_add(cap)
            .filter(|&e| e <= data.len())
            .ok_or_else(bad)?;
        out.push(data[off..end].to_vec());
        off = end;
    }
    Ok(out)
}

#[cfg(test)]
mod writer_tests {
    use super::*;

    #[test]
    fn writes_what_it_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.pcap");
        let mut w = Writer::new(std::fs::File::create(&p).unwrap()).unwrap();
        let big = vec![7u8; 65_000];
        w.packet(
            1_500_000_000_123,
            65_000,
            [&big[..40_000], &big[40_000..]].into_iter(),
        )
        .unwrap();
        w.packet(1, 3, [&[1u8, 2][..], &[3u8][..]].into_iter())
            .unwrap();
        assert!(w.packet(1, 10, [&[1u8][..]].into_iter()).is_err());
        drop(w);
        let recs = read_all(&p).unwrap();
        assert_eq!(recs[0].len(), 65_000);
        assert_eq!(recs[1], vec![1, 2, 3]);
        assert_eq!(
            count_frames(&p).unwrap(),
            2,
            "nothing of the short packet was written"
        );
    }
}
