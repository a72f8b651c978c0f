//! Byte sizes: parsing user input ("512M", "1GiB") and printing in binary units.

const KIB: u64 = 1 << 10;

/// Parses a size such as `512M`, `1G`, `2MiB`, `1GiB`, `4K`, `2048kB` or a
/// plain byte count like `1048576`.
///
/// Units are binary and case-insensitive (`M`, `MB` and `MiB` all mean
/// 2^20 bytes), matching how hugetlbfs and DPDK spell page sizes.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let bad = |why: &str| format!("invalid size {text:?}: {why}; expected a size like 512M or 1G");
    let trimmed = text.trim();
    let split = trimmed
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(trimmed.len());
    let (digits, unit) = trimmed.split_at(split);
    if digits.is_empty() {
        return Err(bad("it does not start with a number"));
    }
    let number: u64 = digits.parse().map_err(|_| bad("the number is too large"))?;
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => return Err(bad("unknown unit (use K, M, G or T)")),
    };
    number
        .checked_mul(1 << shift)
        .ok_or_else(|| bad("the size is too large"))
}

/// Formats bytes in the largest binary unit that fits: `2 MiB`, `1 GiB`,
/// `1.5 GiB`, `512 B`.
pub fn format_size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut index = 0;
    while index + 1 < UNITS.len() && bytes >= KIB << (10 * index) {
        index += 1;
    }
    let unit = 1u64 << (10 * index);
    if bytes.is_multiple_of(unit) {
        format!("{} {}", bytes / unit, UNITS[index])
    } else {
        format!("{:.1} {}", bytes as f64 / unit as f64, UNITS[index])
    }
}

/// The compact spelling hugetlbfs uses in its `pagesize=` option and that
/// names per-size mount points: `2M`, `1G`, `64K`.
pub(crate) fn short_size(bytes: u64) -> String {
    for (shift, suffix) in [(30, "G"), (20, "M"), (10, "K")] {
        if bytes >= 1 << shift && bytes.is_multiple_of(1 << shift) {
            return format!("{}{suffix}", bytes >> shift);
        }
    }
    bytes.to_string()
}
