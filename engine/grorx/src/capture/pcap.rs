//! Classic pcap files: counting the frames of a capture (to know when a
//! one-shot replay is over).

use std::io::{self, Read};
use std::path::Path;

const MAGIC_US: u32 = 0xa1b2_c3d4;
const MAGIC_NS: u32 = 0xa1b2_3c4d;

/// Where the fields of a pcap file are: a file header, then a header in
/// front of each record.
mod field {
    use std::ops::Range;
    /// Bytes of the file header.
    pub const FILE_HEADER_LEN: usize = 24;
    /// The magic number: byte order, and micro- or nanosecond stamps.
    pub const MAGIC: Range<usize> = 0..4;
    pub const VERSION_MAJOR: Range<usize> = 4..6;
    pub const VERSION_MINOR: Range<usize> = 6..8;
    pub const SNAPLEN: Range<usize> = 16..20;
    pub const LINKTYPE: Range<usize> = 20..24;
    /// Bytes of a record's header.
    pub const RECORD_HEADER_LEN: usize = 16;
    pub const TS_SEC: Range<usize> = 0..4;
    /// Micro- or nanoseconds, as the magic number says.
    pub const TS_FRAC: Range<usize> = 4..8;
    /// Bytes of the record in the file.
    pub const CAP_LEN: Range<usize> = 8..12;
    /// Bytes of the packet on the wire.
    pub const ORIG_LEN: Range<usize> = 12..16;
}

/// Whether a file header says little-endian (None: not pcap).
fn little_endian(file_header: &[u8]) -> Option<bool> {
    match u32::from_le_bytes(file_header[field::MAGIC].try_into().ok()?) {
        MAGIC_US | MAGIC_NS => Some(true),
        m if m.swap_bytes() == MAGIC_US || m.swap_bytes() == MAGIC_NS => Some(false),
        _ => None,
    }
}

/// The 32-bit field at `at` of a header in the file's byte order.
fn read32(b: &[u8], at: std::ops::Range<usize>, le: bool) -> u32 {
    let w: [u8; 4] = b[at].try_into().expect("a 4-byte field");
    if le {
        u32::from_le_bytes(w)
    } else {
        u32::from_be_bytes(w)
    }
}

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
    let mut gh = [0u8; field::FILE_HEADER_LEN];
    r.read_exact(&mut gh)
        .map_err(|_| bad("too short for a pcap header"))?;
    let le = little_endian(&gh).ok_or_else(|| {
        bad("not a pcap file (pcapng is not supported: convert with editcap -F pcap)")
    })?;
    let linktype = read32(&gh, field::LINKTYPE, le);
    // net_pcap replays each record as an Ethernet frame, whatever it is.
    if linktype != LINKTYPE_ETHERNET {
        return Err(bad(&format!(
            "link type {linktype} ({}): frames are replayed as Ethernet, so only link type 1 \
             (Ethernet) can be; convert it (e.g. tcprewrite --dlt=enet) or capture on an Ethernet interface",
            linktype_name(linktype)
        )));
    }
    let mut n = 0u64;
    let mut rh = [0u8; field::RECORD_HEADER_LEN];
    let mut skip = vec![0u8; 1 << 16];
    loop {
        match r.read_exact(&mut rh) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(n),
            Err(e) => return Err(e),
        }
        let mut left = read32(&rh, field::CAP_LEN, le) as usize;
        while left > 0 {
            let k = left.min(skip.len());
            r.read_exact(&mut skip[..k])
                .map_err(|_| bad("truncated record"))?;
            left -= k;
        }
        n += 1;
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
        let mut h = [0u8; field::FILE_HEADER_LEN];
        h[field::MAGIC].copy_from_slice(&MAGIC_NS.to_le_bytes());
        h[field::VERSION_MAJOR].copy_from_slice(&2u16.to_le_bytes());
        h[field::VERSION_MINOR].copy_from_slice(&4u16.to_le_bytes());
        h[field::SNAPLEN].copy_from_slice(&SNAPLEN.to_le_bytes());
        h[field::LINKTYPE].copy_from_slice(&LINKTYPE_ETHERNET.to_le_bytes());
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
        let mut r = [0u8; field::RECORD_HEADER_LEN];
        r[field::TS_SEC].copy_from_slice(&((ts_ns / 1_000_000_000) as u32).to_le_bytes());
        r[field::TS_FRAC].copy_from_slice(&((ts_ns % 1_000_000_000) as u32).to_le_bytes());
        r[field::CAP_LEN].copy_from_slice(&cap.to_le_bytes());
        r[field::ORIG_LEN].copy_from_slice(&len.to_le_bytes());
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
    if data.len() < field::FILE_HEADER_LEN {
        return Err(bad());
    }
    let le = little_endian(&data).ok_or_else(bad)?;
    let mut out = Vec::new();
    let mut off = field::FILE_HEADER_LEN;
    while off + field::RECORD_HEADER_LEN <= data.len() {
        let cap = read32(&data[off..], field::CAP_LEN, le) as usize;
        off += field::RECORD_HEADER_LEN;
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
        h[field::LINKTYPE.start] = 101;
        let mut r = tempfile::NamedTempFile::new().unwrap();
        r.write_all(&h).unwrap();
        let e = count_frames(r.path()).unwrap_err().to_string();
        assert!(e.contains("link type 101 (raw IP)"), "{e}");
        assert!(e.contains("only link type 1 (Ethernet)"), "{e}");
    }

    #[test]
    fn reads_a_big_endian_capture() {
        let mut h = Vec::new();
        h.extend_from_slice(&MAGIC_US.to_be_bytes());
        h.extend_from_slice(&[
            0, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 0, 1,
        ]);
        let frames: [&[u8]; 2] = [&[7u8; 60], &[9u8; 300]];
        for f in frames {
            h.extend_from_slice(&[0u8; 8]);
            h.extend_from_slice(&(f.len() as u32).to_be_bytes());
            h.extend_from_slice(&(f.len() as u32).to_be_bytes());
            h.extend_from_slice(f);
        }
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(&h).unwrap();
        assert_eq!(count_frames(f.path()).unwrap(), 2);
        assert_eq!(read_all(f.path()).unwrap(), frames.map(|f| f.to_vec()));
    }
}
