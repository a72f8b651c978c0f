use std::io;

use super::fake_tree::{path, FakeTree, MIB2};
use crate::{setup_at, Decision, SetupReport};

fn use_existing() -> Decision {
    Decision::UseExisting {
        page_size: MIB2,
        mount: path("/dev/hugepages"),
        pages_needed: 40,
        pages_free: 512,
    }
}

fn no_huge() -> Decision {
    Decision::NoHuge {
        reason: "no hugetlbfs mount for 2 MiB pages".to_string(),
        mem_mb: 512,
    }
}

fn setup_decision(new_mount: bool, pages_to_add: u64) -> Decision {
    Decision::Setup {
        page_size: MIB2,
        mount: path("/dev/hugepages"),
        new_mount,
        pages_needed: 40,
        pages_to_add,
    }
}

#[test]
fn summaries_are_one_line_with_the_key_figures() {
    assert_eq!(
        use_existing().summary(),
        "hugepages: using 40 of 512 free 2 MiB pages at /dev/hugepages (need 80 MiB)"
    );
    assert_eq!(
        no_huge().summary(),
        "hugepages: none usable (no hugetlbfs mount for 2 MiB pages); falling back to \
         --no-huge -m 512 (4 KiB pages: expect a lower packet rate from TLB misses; \
         PCI NICs need hugepages)"
    );
    assert_eq!(
        setup_decision(true, 34).summary(),
        "hugepages: reserving 34 more 2 MiB pages and mounting hugetlbfs at /dev/hugepages \
         to get 40 2 MiB pages (need 80 MiB)"
    );
    assert_eq!(
        setup_decision(true, 0).summary(),
        "hugepages: mounting hugetlbfs at /dev/hugepages to get 40 2 MiB pages (need 80 MiB)"
    );
    let refuse = Decision::Refuse {
        reason: "the kernel offers no hugepages".to_string(),
    };
    assert_eq!(
        refuse.summary(),
        "hugepages: cannot run: the kernel offers no hugepages"
    );
}

#[test]
fn eal_args_match_the_decision() {
    assert_eq!(use_existing().eal_args(), ["--huge-dir", "/dev/hugepages"]);
    assert_eq!(
        setup_decision(false, 3).eal_args(),
        ["--huge-dir", "/dev/hugepages"]
    );
    assert_eq!(no_huge().eal_args(), ["--no-huge", "-m", "512"]);
    assert!(Decision::Refuse {
        reason: String::new()
    }
    .eal_args()
    .is_empty());
}

#[test]
fn apply_turns_a_successful_setup_into_use_existing() {
    let tree = FakeTree::new();
    tree.pool(MIB2, 64, 64, 0).default_size_kb(2048).mounts(&[]);
    let applied = setup_decision(true, 0)
        .apply_with(|size, bytes| setup_at(tree.root(), size, bytes))
        .unwrap();
    assert_eq!(
        applied,
        Decision::UseExisting {
            page_size: MIB2,
            mount: path("/dev/hugepages"),
            pages_needed: 40,
            pages_free: 64,
        }
    );
}

#[test]
fn apply_reports_short_grants_and_setup_errors() {
    let short = |size, _| {
        Ok(SetupReport {
            page_size: size,
            pages_needed: 40,
            total_before: 0,
            total_asked: 40,
            total_after: 12,
            pages_free: 12,
            mount: path("/dev/hugepages"),
            new_mount: false,
        })
    };
    let err = setup_decision(false, 40).apply_with(short).unwrap_err();
    assert!(
        err.contains("granted 12") && err.contains("fragmented"),
        "{err}"
    );

    let failing = |_, _| Err(io::Error::other("needs root: run as root"));
    let err = setup_decision(false, 40).apply_with(failing).unwrap_err();
    assert_eq!(err, "hugepages: setup failed: needs root: run as root");
}

#[test]
fn apply_passes_other_decisions_through() {
    let untouched = |_, _| -> io::Result<SetupReport> { panic!("setup must not run") };
    assert_eq!(use_existing().apply_with(untouched), Ok(use_existing()));
    assert_eq!(no_huge().apply_with(untouched), Ok(no_huge()));
}
