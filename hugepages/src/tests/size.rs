use crate::{format_size, parse_size};

#[test]
fn parses_sizes_with_binary_units() {
    for (text, bytes) in [
        ("512M", 512 << 20),
        ("1G", 1 << 30),
        ("2MiB", 2 << 20),
        ("1GiB", 1 << 30),
        ("1048576", 1 << 20),
        ("2m", 2 << 20),
        ("4K", 4 << 10),
        ("2048 kB", 2 << 20),
        ("1024M", 1 << 30),
        (" 3gb ", 3 << 30),
        ("1T", 1 << 40),
        ("0", 0),
    ] {
        assert_eq!(parse_size(text), Ok(bytes), "{text:?}");
    }
}

#[test]
fn rejects_junk_with_a_clear_message() {
    for (text, why) in [
        ("", "does not start with a number"),
        ("G", "does not start with a number"),
        ("-1G", "does not start with a number"),
        ("1.5G", "unknown unit"),
        ("12Q", "unknown unit"),
        ("1G2", "unknown unit"),
        ("99999999999999999999", "too large"),
        ("20000000T", "too large"),
    ] {
        let err = parse_size(text).unwrap_err();
        assert!(err.contains(why), "{text:?}: {err}");
        assert!(
            err.contains("expected a size like 512M or 1G"),
            "{text:?}: {err}"
        );
    }
}

#[test]
fn formats_in_binary_units() {
    assert_eq!(format_size(0), "0 B");
    assert_eq!(format_size(512), "512 B");
    assert_eq!(format_size(4096), "4 KiB");
    assert_eq!(format_size(2 << 20), "2 MiB");
    assert_eq!(format_size(80 << 20), "80 MiB");
    assert_eq!(format_size(1 << 30), "1 GiB");
    assert_eq!(format_size(3 << 29), "1.5 GiB");
    assert_eq!(format_size(1 << 40), "1 TiB");
    assert_eq!(format_size(1 << 50), "1024 TiB");
}

#[test]
fn short_sizes_match_hugetlbfs_options() {
    use crate::size::short_size;
    assert_eq!(short_size(2 << 20), "2M");
    assert_eq!(short_size(1 << 30), "1G");
    assert_eq!(short_size(64 << 10), "64K");
    assert_eq!(short_size(80 << 20), "80M");
    assert_eq!(short_size(1000), "1000");
}
