use super::fake_tree::{path, FakeTree, GIB1, MIB2};
use crate::{decide, needed_pages, Decision, Request, Status};

fn request(bytes: u64) -> Request {
    Request {
        bytes,
        page_size: None,
        allow_setup: false,
        allow_fallback: true,
        no_huge_mem_mb: 512,
    }
}

fn status(build: impl FnOnce(&FakeTree)) -> Status {
    let tree = FakeTree::new();
    build(&tree);
    Status::read_from(tree.root()).unwrap()
}

#[test]
fn needed_pages_rounds_up() {
    assert_eq!(needed_pages(0, MIB2), 0);
    assert_eq!(needed_pages(1, MIB2), 1);
    assert_eq!(needed_pages(MIB2, MIB2), 1);
    assert_eq!(needed_pages(MIB2 + 1, MIB2), 2);
    assert_eq!(needed_pages(80 << 20, MIB2), 40);
    assert_eq!(needed_pages(GIB1 + 1, GIB1), 2);
    assert_eq!(needed_pages(u64::MAX, MIB2), u64::MAX / MIB2 + 1);
    assert_eq!(needed_pages(5, 0), 0);
}

#[test]
fn enough_free_mounted_pages_are_used() {
    let status = status(|t| {
        t.pool(MIB2, 512, 512, 0)
            .default_size_kb(2048)
            .mounts(&["nodev /dev/hugepages hugetlbfs rw,pagesize=2M 0 0"]);
    });
    let decision = decide(&status, &request((80 << 20) - 1));
    assert_eq!(
        decision,
        Decision::UseExisting {
            page_size: MIB2,
            mount: path("/dev/hugepages"),
            pages_needed: 40,
            pages_free: 512,
        }
    );
}

#[test]
fn chooses_the_mounted_size_with_enough_pages() {
    // Default 2 MiB has pages but no mount; 1 GiB is mounted and has room.
    let status = status(|t| {
        t.pool(MIB2, 512, 512, 0)
            .pool(GIB1, 4, 4, 0)
            .default_size_kb(2048)
            .mounts(&["nodev /dev/hugepages-1G hugetlbfs rw,pagesize=1G 0 0"]);
    });
    let decision = decide(&status, &request(GIB1 + 1));
    assert_eq!(
        decision,
        Decision::UseExisting {
            page_size: GIB1,
            mount: path("/dev/hugepages-1G"),
            pages_needed: 2,
            pages_free: 4,
        }
    );
}

#[test]
fn prefers_the_default_size_when_both_are_ready() {
    let status = status(|t| {
        t.pool(MIB2, 512, 512, 0)
            .pool(GIB1, 4, 4, 0)
            .default_size_kb(2048)
            .mounts(&[
                "nodev /dev/hugepages hugetlbfs rw,pagesize=2M 0 0",
                "nodev /dev/hugepages-1G hugetlbfs rw,pagesize=1G 0 0",
            ]);
    });
    let Decision::UseExisting { page_size, .. } = decide(&status, &request(64 << 20)) else {
        panic!("expected UseExisting");
    };
    assert_eq!(page_size, MIB2);

    let mut wants_1g = request(64 << 20);
    wants_1g.page_size = Some(GIB1);
    let Decision::UseExisting {
        page_size,
        pages_needed,
        ..
    } = decide(&status, &wants_1g)
    else {
        panic!("expected UseExisting");
    };
    assert_eq!((page_size, pages_needed), (GIB1, 1));
}

#[test]
fn not_enough_as_root_plans_a_setup() {
    let status = status(|t| {
        t.pool(MIB2, 10, 10, 4)
            .default_size_kb(2048)
            .mounts(&["nodev /dev/hugepages hugetlbfs rw,pagesize=2M 0 0"]);
    });
    let mut req = request(80 << 20);
    req.allow_setup = true;
    assert_eq!(
        decide(&status, &req),
        Decision::Setup {
            page_size: MIB2,
            mount: path("/dev/hugepages"),
            new_mount: false,
            pages_needed: 40,
            pages_to_add: 34,
        }
    );
}

#[test]
fn missing_mount_as_root_plans_a_mount_only() {
    let status = status(|t| {
        t.pool(MIB2, 64, 64, 0)
            .pool(GIB1, 0, 0, 0)
            .default_size_kb(2048);
    });
    let mut req = request(GIB1);
    req.allow_setup = true;
    req.page_size = Some(GIB1);
    assert_eq!(
        decide(&status, &req),
        Decision::Setup {
            page_size: GIB1,
            mount: path("/dev/hugepages-1G"),
            new_mount: true,
            pages_needed: 1,
            pages_to_add: 1,
        }
    );
    req.page_size = None;
    req.bytes = 64 * MIB2;
    let decision = decide(&status, &req);
    assert!(
        matches!(
            decision,
            Decision::Setup {
                page_size: MIB2,
                new_mount: true,
                pages_to_add: 0,
                ..
            }
        ),
        "{decision:?}"
    );
}

#[test]
fn without_setup_falls_back_and_says_what_is_missing() {
    let mounted: &[&str] = &["nodev /dev/hugepages hugetlbfs rw 0 0"];
    let cases: [(&[&str], u64, &str); 3] = [
        (
            &[],
            4,
            "4 of 40 needed 2 MiB pages free, no hugetlbfs mount",
        ),
        (&[], 100, "no hugetlbfs mount for 2 MiB pages"),
        (mounted, 4, "only 4 of 40 needed 2 MiB pages free"),
    ];
    for (mounts, free, expected) in cases {
        let status = status(|t| {
            t.pool(MIB2, 100, free, 0)
                .default_size_kb(2048)
                .mounts(mounts);
        });
        assert_eq!(
            decide(&status, &request(80 << 20)),
            Decision::NoHuge {
                reason: expected.to_string(),
                mem_mb: 512,
            }
        );
    }
}

#[test]
fn no_pools_or_unknown_size_falls_back() {
    let mut sized = request(1 << 20);
    sized.page_size = Some(MIB2);
    for req in [request(1 << 20), sized] {
        assert_eq!(
            decide(&Status::default(), &req),
            Decision::NoHuge {
                reason: "the kernel offers no hugepages".to_string(),
                mem_mb: 512,
            }
        );
    }

    let status = status(|t| {
        t.pool(MIB2, 64, 64, 0).default_size_kb(2048);
    });
    let mut req = request(1 << 20);
    req.page_size = Some(GIB1);
    req.allow_setup = true;
    let Decision::NoHuge { reason, .. } = decide(&status, &req) else {
        panic!("a size the kernel lacks cannot be set up");
    };
    assert_eq!(reason, "the kernel has no 1 GiB hugepages");
}

#[test]
fn fallback_disallowed_refuses_with_a_hint() {
    let status = status(|t| {
        t.pool(MIB2, 0, 0, 0).default_size_kb(2048);
    });
    let mut req = request(80 << 20);
    req.allow_fallback = false;
    let Decision::Refuse { reason } = decide(&status, &req) else {
        panic!("expected Refuse");
    };
    assert!(
        reason.starts_with("0 of 40 needed 2 MiB pages free, no hugetlbfs mount"),
        "{reason}"
    );
    assert!(
        reason.contains("sudo grorx hugepages --setup 80M"),
        "{reason}"
    );
    assert!(reason.contains("--no-huge"), "{reason}");

    let Decision::Refuse { reason } = decide(&Status::default(), &req) else {
        panic!("expected Refuse");
    };
    assert!(
        reason.contains("the kernel offers no hugepages"),
        "{reason}"
    );
}
