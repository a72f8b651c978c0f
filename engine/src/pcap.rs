//! Classic pcap files: counting the frames of a capture (to know when a
//! one-shot replay is over).

use std::io::{self, Read};
use std::path::Path;

const MAGIC_US: u32 = 0xa1b2_c3d4;
const MAGIC_NS: u32 = 0xa1b2_3c4d;

/// Frames in a pcap file (either byte order, micro- or nanosecond stamps).
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
    }
}
