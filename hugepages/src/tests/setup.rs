use std::cell::RefCell;
use std::io;
use std::path::PathBuf;

use super::fake_tree::{path, FakeTree, GIB1, MIB2};
use crate::setup::setup_with;
use crate::{setup_at, SetupReport};

fn nr_file(page_size: u64) -> String {
    format!("{}/nr_hugepages", FakeTree::pool_dir(page_size))
}

#[test]
fn raises_nr_hugepages_by_the_shortfall() {
    let tree = FakeTree::new();
    tree.pool(MIB2, 10, 10, 4)
        .default_size_kb(2048)
        .mounts(&["nodev /dev/hugepages hugetlbfs rw,pagesize=2M 0 0"]);
    let report = setup_at(tree.root(), MIB2, 80 << 20).unwrap();
    // 6 unreserved free pages, 40 needed: ask for 34 more than the 10 we have.
    assert_eq!(tree.read(&nr_file(MIB2)), "44\n");
    assert_eq!(
        (report.total_before, report.total_asked, report.total_after),
        (10, 44, 44)
    );
    assert_eq!(
        (report.pages_needed, report.mount.clone()),
        (40, path("/dev/hugepages"))
    );
    assert!(!report.new_mount);
    // The fake kernel does not turn the new pages into free ones.
    assert_eq!(report.pages_free, 6);
    assert!(report.is_short());
    assert!(
        report.to_string().contains("only 6 are free (40 needed)"),
        "{report}"
    );
}

#[test]
fn never_lowers_nr_hugepages() {
    let tree = FakeTree::new();
    tree.pool(MIB2, 100, 60, 0)
        .default_size_kb(2048)
        .mounts(&["nodev /dev/hugepages hugetlbfs rw 0 0"]);

    let report = setup_at(tree.root(), MIB2, 10 * MIB2).unwrap();
    assert_eq!(tree.read(&nr_file(MIB2)), "100\n", "enough free: untouched");
    assert!(!report.is_short());
    assert_eq!(
        report.to_string(),
        "hugepages: 60 2 MiB pages already free (10 needed)"
    );

    // 80 needed with 60 free: the pool grows by 20 to 120, not down to 80.
    setup_at(tree.root(), MIB2, 80 * MIB2).unwrap();
    assert_eq!(tree.read(&nr_file(MIB2)), "120\n");
}

#[test]
fn mounts_hugetlbfs_with_the_page_size_when_no_mount_exists() {
    let tree = FakeTree::new();
    tree.pool(MIB2, 0, 0, 0)
        .pool(GIB1, 2, 2, 0)
        .default_size_kb(2048)
        .mounts(&["nodev /dev/hugepages hugetlbfs rw,pagesize=2M 0 0"]);
    let calls: RefCell<Vec<(PathBuf, String)>> = RefCell::default();
    let record = |dir: &std::path::Path, options: &str| {
        calls
            .borrow_mut()
            .push((dir.to_path_buf(), options.to_string()));
        Ok(())
    };

    let report = setup_with(tree.root(), GIB1, GIB1, record).unwrap();
    let expected_dir = tree.root().join("dev/hugepages-1G");
    assert!(expected_dir.is_dir());
    assert_eq!(*calls.borrow(), [(expected_dir, "pagesize=1G".to_string())]);
    assert_eq!(report.mount, path("/dev/hugepages-1G"));
    assert!(report.new_mount);
    assert_eq!(
        report.to_string(),
        "hugepages: 2 1 GiB pages already free (1 needed); mounted hugetlbfs at /dev/hugepages-1G"
    );

    calls.borrow_mut().clear();
    setup_with(tree.root(), MIB2, MIB2, record).unwrap();
    assert!(calls.borrow().is_empty(), "2 MiB already has a mount");
}

#[test]
fn mount_failure_is_an_error() {
    let tree = FakeTree::new();
    tree.pool(MIB2, 8, 8, 0).default_size_kb(2048).mounts(&[]);
    let err = setup_with(tree.root(), MIB2, MIB2, |_, _| {
        Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            "mount refused",
        ))
    })
    .unwrap_err();
    assert_eq!(err.to_string(), "mount refused");
}

#[test]
fn unknown_page_size_is_an_error_naming_the_offered_sizes() {
    let tree = FakeTree::new();
    tree.pool(MIB2, 8, 8, 0).default_size_kb(2048);
    let err = setup_at(tree.root(), GIB1, GIB1).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::NotFound);
    assert_eq!(
        err.to_string(),
        "the kernel has no 1 GiB hugepages; pick one of the offered sizes: 2 MiB"
    );
    let empty = FakeTree::new();
    let err = setup_at(empty.root(), MIB2, MIB2).unwrap_err();
    assert!(err.to_string().ends_with("offered sizes: none"), "{err}");
}

#[test]
fn short_grant_blames_fragmentation_and_suggests_boot_reservation() {
    let report = SetupReport {
        page_size: GIB1,
        pages_needed: 8,
        total_before: 0,
        total_asked: 8,
        total_after: 3,
        pages_free: 3,
        mount: path("/dev/hugepages-1G"),
        new_mount: false,
    };
    assert!(report.is_short());
    let line = report.to_string();
    for expected in [
        "asked the kernel for 8",
        "granted 3",
        "fragmented",
        "hugepagesz=1G hugepages=8",
    ] {
        assert!(line.contains(expected), "missing {expected:?} in {line}");
    }
    assert!(!line.contains('\n'));
}
