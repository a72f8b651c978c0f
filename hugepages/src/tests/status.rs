use super::fake_tree::{path, FakeTree, GIB1, MIB2};
use crate::{Mount, NodePool, Status};

fn two_pool_tree() -> FakeTree {
    let tree = FakeTree::new();
    tree.pool(MIB2, 512, 500, 20)
        .pool(GIB1, 4, 4, 0)
        .node_pool(0, MIB2, 256, 250)
        .node_pool(1, MIB2, 256, 250)
        .node_pool(0, GIB1, 4, 4)
        .default_size_kb(2048)
        .mounts(&[
            "hugetlbfs /dev/hugepages hugetlbfs rw,relatime 0 0",
            "nodev /mnt/huge-1g hugetlbfs rw,relatime,pagesize=1024M 0 0",
            "nodev /mnt/huge\\040big hugetlbfs rw,pagesize=1G 0 0",
            "tmpfs /dev/shm tmpfs rw,nosuid,nodev 0 0",
        ]);
    tree
}

#[test]
fn reads_pools_nodes_mounts_and_default_size() {
    let tree = two_pool_tree();
    let status = Status::read_from(tree.root()).unwrap();
    assert_eq!(status.default_page_size, Some(MIB2));
    assert!(status.problems.is_empty(), "{:?}", status.problems);

    let sizes: Vec<u64> = status.pools.iter().map(|p| p.page_size).collect();
    assert_eq!(sizes, [MIB2, GIB1]);
    let small = status.pool(MIB2).unwrap();
    assert_eq!(
        (small.total, small.free, small.reserved, small.surplus),
        (512, 500, 20, 0)
    );
    assert_eq!(small.available(), 480);
    assert_eq!(
        small.nodes,
        [
            NodePool {
                node: 0,
                total: 256,
                free: 250
            },
            NodePool {
                node: 1,
                total: 256,
                free: 250
            },
        ]
    );
    assert_eq!(status.pool(GIB1).unwrap().nodes.len(), 1);

    assert_eq!(
        status.mounts,
        [
            Mount {
                path: path("/dev/hugepages"),
                page_size: MIB2
            },
            Mount {
                path: path("/mnt/huge-1g"),
                page_size: GIB1
            },
            Mount {
                path: path("/mnt/huge big"),
                page_size: GIB1
            },
        ]
    );
    assert_eq!(status.mount_for(GIB1).unwrap().path, path("/mnt/huge-1g"));
}

#[test]
fn usable_bytes_counts_unreserved_free_pages_only_when_mounted() {
    let tree = FakeTree::new();
    tree.pool(MIB2, 100, 60, 10)
        .pool(GIB1, 8, 8, 0)
        .default_size_kb(2048)
        .mounts(&["nodev /dev/hugepages hugetlbfs rw,pagesize=2M 0 0"]);
    let status = Status::read_from(tree.root()).unwrap();
    assert_eq!(status.usable_bytes(MIB2), 50 * MIB2);
    assert_eq!(status.usable_bytes(GIB1), 0, "no mount for 1 GiB");
    assert_eq!(status.usable_bytes(4096), 0, "no such pool");
}

#[test]
fn missing_directories_give_an_empty_status() {
    let tree = FakeTree::new();
    let status = Status::read_from(tree.root()).unwrap();
    assert_eq!(status, Status::default());

    tree.default_size_kb(2048).mounts(&[]);
    let status = Status::read_from(tree.root()).unwrap();
    assert!(status.pools.is_empty() && status.mounts.is_empty());
    assert_eq!(status.default_page_size, Some(MIB2));
}

#[test]
fn garbage_is_skipped_and_reported() {
    let tree = FakeTree::new();
    tree.pool(MIB2, 16, 16, 0)
        .pool(GIB1, 2, 2, 0)
        .write(
            &format!("{}/free_hugepages", FakeTree::pool_dir(GIB1)),
            "lots\n",
        )
        .write(
            "sys/kernel/mm/hugepages/hugepages-hugekB/nr_hugepages",
            "1\n",
        )
        .write("sys/kernel/mm/hugepages/hugepages-0kB/nr_hugepages", "1\n")
        .node_pool(0, MIB2, 16, 16)
        .write(
            "sys/devices/system/node/node1/hugepages/hugepages-2048kB/nr_hugepages",
            "-3\n",
        )
        .write("sys/devices/system/node/possible", "0-1\n")
        .write("proc/meminfo", "Hugepagesize:       many kB\n")
        .mounts(&[
            "nodev /dev/hugepages hugetlbfs rw,relatime 0 0",
            "nodev /mnt/bad hugetlbfs rw,pagesize=huge 0 0",
            "nodev /mnt/ro hugetlbfs ro,pagesize=2M 0 0",
            "nodev /mnt/ok hugetlbfs rw,pagesize=2M 0 0",
            "truncated line",
        ]);
    let status = Status::read_from(tree.root()).unwrap();

    let sizes: Vec<u64> = status.pools.iter().map(|p| p.page_size).collect();
    assert_eq!(sizes, [MIB2], "the 1 GiB pool with a bad count is skipped");
    assert_eq!(
        status.pool(MIB2).unwrap().nodes.len(),
        1,
        "node1 is garbage"
    );
    assert_eq!(status.default_page_size, None);
    assert_eq!(
        status.mounts,
        [Mount {
            path: path("/mnt/ok"),
            page_size: MIB2
        }]
    );

    let problems = status.problems.join("\n");
    for expected in [
        "hugepages-1048576kB/free_hugepages: expected a number, found \"lots\"",
        "hugepages-hugekB: not a hugepages-<N>kB pool directory",
        "hugepages-0kB: not a hugepages-<N>kB pool directory",
        "node1/hugepages/hugepages-2048kB/nr_hugepages: expected a number, found \"-3\"",
        "cannot read the default page size",
        "hugetlbfs at /dev/hugepages: cannot tell its page size",
        "hugetlbfs at /mnt/bad: cannot tell its page size",
        "hugetlbfs at /mnt/ro is read-only",
    ] {
        assert!(
            problems.contains(expected),
            "missing {expected:?} in:\n{problems}"
        );
    }
}

#[test]
fn mount_point_depends_on_the_default_size() {
    let tree = FakeTree::new();
    tree.pool(MIB2, 0, 0, 0)
        .pool(GIB1, 0, 0, 0)
        .default_size_kb(2048);
    let status = Status::read_from(tree.root()).unwrap();
    assert_eq!(status.mount_point(MIB2), path("/dev/hugepages"));
    assert_eq!(status.mount_point(GIB1), path("/dev/hugepages-1G"));

    tree.mounts(&["nodev /dev/hugepages hugetlbfs rw,pagesize=1G 0 0"]);
    let status = Status::read_from(tree.root()).unwrap();
    assert_eq!(status.mount_point(MIB2), path("/dev/hugepages-2M"));
}

#[test]
fn display_shows_the_table_and_what_is_missing() {
    let tree = FakeTree::new();
    tree.pool(MIB2, 512, 500, 20)
        .pool(GIB1, 4, 4, 0)
        .node_pool(0, MIB2, 512, 500)
        .default_size_kb(2048)
        .mounts(&["nodev /dev/hugepages hugetlbfs rw,pagesize=2M 0 0"]);
    let text = Status::read_from(tree.root()).unwrap().to_string();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("size"), "{text}");
    let two_mib: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(
        two_mib[..6],
        ["2", "MiB", "512", "500", "20", "/dev/hugepages"]
    );
    assert!(lines[1].contains("node0 500/512"), "{text}");
    assert!(
        text.contains("1 GiB pages are unusable without a hugetlbfs mount")
            && text.contains("mount -t hugetlbfs -o pagesize=1G nodev /dev/hugepages-1G"),
        "{text}"
    );
    assert!(text.contains("default page size: 2 MiB"), "{text}");
    assert!(!text.contains("no hugepages reserved"), "{text}");
}

#[test]
fn display_says_how_to_get_hugepages_when_there_are_none() {
    let tree = FakeTree::new();
    let text = Status::read_from(tree.root()).unwrap().to_string();
    assert!(text.contains("no hugepage pools"), "{text}");

    tree.pool(MIB2, 0, 0, 0).default_size_kb(2048);
    let text = Status::read_from(tree.root()).unwrap().to_string();
    assert!(
        text.contains("no hugepages reserved") && text.contains("sudo grorx hugepages --setup 1G"),
        "{text}"
    );
}

#[test]
fn reads_the_real_machine() {
    let status = Status::read();
    assert!(status.is_ok(), "{status:?}");
}
