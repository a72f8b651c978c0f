//! The bulk freer every stage ends a packet with: each segment of a chain
//! goes home to its own pool, past a batch's size; a segment someone else
//! still holds a reference to stays with them; a clone's indirect segments
//! are detached, and the buffers they shared go home with the last owner.

mod common;

use grorx::mbuf::BulkFree;
use grorx::mempool::{Mempool, PoolParams};
use grorx::run;

fn pool(name: &str) -> Mempool {
    Mempool::create(&PoolParams {
        name: name.into(),
        elements: 255,
        cache: 32,
        priv_size: run::PRIV_SIZE,
        data_room: 2176,
        socket: -1,
    })
    .unwrap()
}

/// One mbuf from `p` holding `len` bytes.
fn one(p: &Mempool, len: usize) -> *mut dpdk_sys::rte_mbuf {
    common::seg(p, &vec![0x5a; len])
}

#[test]
fn a_chain_over_two_pools_and_past_a_batch_goes_home_whole() {
    let _e = common::eal();
    let (a, b) = (pool("t-bf-a"), pool("t-bf-b"));
    // 100 segments: runs of one pool, then the pools taking turns, so
    // that the batch both fills (64) and changes pool mid-chain.
    let mut segs: Vec<_> = (0..70).map(|i| one(&a, 100 + i)).collect();
    segs.extend((0..30).map(|i| one(if i % 2 == 0 { &b } else { &a }, 60)));
    let want: u32 = (0..70).map(|i| 100 + i as u32).sum::<u32>() + 30 * 60;
    let h = common::link(&segs);
    assert_eq!(a.in_use() + b.in_use(), 100);
    let mut f = BulkFree::new();
    // SAFETY: `h` is a valid chain we own and no longer use.
    let len = unsafe { f.chain(h) };
    assert_eq!(len, want, "the chain's pkt_len");
    // A second chain after it, into the same batch.
    let h2 = common::link(&[one(&b, 10), one(&a, 20)]);
    // SAFETY: as above.
    assert_eq!(unsafe { f.chain(h2) }, 30);
    f.flush();
    assert_eq!((a.in_use(), b.in_use()), (0, 0), "every segment home");
    // What went home is reset: one segment, unlinked.
    let m = grorx::mbuf::Mbuf::alloc(&a).unwrap();
    assert_eq!(m.nb_segs(), 1);
    // SAFETY: a field read of the mbuf `m` owns.
    assert!(unsafe { (*m.as_ptr()).next.is_null() });
}

#[test]
fn a_shared_segment_stays_until_its_last_owner_frees_it() {
    let _e = common::eal();
    let p = pool("t-bf-shared");
    let segs = [one(&p, 40), one(&p, 50), one(&p, 60)];
    // Someone else holds the middle segment too.
    // SAFETY: a live mbuf we own; its count goes from 1 to 2.
    unsafe { dpdk_sys::rte_mbuf_refcnt_update(segs[1], 1) };
    let mut f = BulkFree::new();
    // SAFETY: a valid chain we own and no longer use (the middle segment's
    // other reference is freed below).
    assert_eq!(unsafe { f.chain(common::link(&segs)) }, 150);
    f.flush();
    assert_eq!(p.in_use(), 1, "the shared segment stays");
    // SAFETY: the other owner's reference, now the last.
    unsafe { dpdk_sys::rte_pktmbuf_free_seg(segs[1]) };
    assert_eq!(p.in_use(), 0);
}

#[test]
fn a_clone_and_its_original_go_home_in_either_order() {
    let _e = common::eal();
    let (p, clones) = (pool("t-bf-orig"), pool("t-bf-clones"));
    for clone_first in [true, false] {
        let orig = common::link(&[one(&p, 70), one(&p, 80)]);
        // SAFETY: `orig` is a valid chain we own; the clone's segments are
        // indirect mbufs of `clones` attached to its buffers.
        let clone = unsafe { dpdk_sys::rte_pktmbuf_clone(orig, clones.as_ptr()) };
        assert!(!clone.is_null());
        assert_eq!((p.in_use(), clones.in_use()), (2, 2));
        let mut f = BulkFree::new();
        let (first, second) = if clone_first {
            (clone, orig)
        } else {
            (orig, clone)
        };
        // SAFETY: each is a valid chain we own, freed once; the buffers they
        // share are counted by their refcounts.
        unsafe {
            assert_eq!(f.chain(first), 150);
            f.flush();
            assert_eq!(
                p.in_use(),
                2,
                "the shared buffers stay while one holds them"
            );
            assert_eq!(f.chain(second), 150);
        }
        f.flush();
        assert_eq!(
            (p.in_use(), clones.in_use()),
            (0, 0),
            "clone first: {clone_first}"
        );
    }
}
