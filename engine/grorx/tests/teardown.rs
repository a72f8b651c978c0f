//! The end of a run, on every path: every pool the run made is counted (an
//! output port's pool too), a leak and a double free are each reported with
//! the pool's name, and a run that fails as its stages are made closes its
//! ports and frees its pools before it returns, so the next run in the same
//! EAL starts clean.

mod common;

use grorx::mbuf::Mbuf;
use grorx::mempool::{self, Mempool, PoolParams};
use grorx::port_spec::PortSpec;
use grorx::run::{self, EalSetup, RunOptions, StageOptions};
use grorx::stage::{Ctx, QueueSetup, Sink, Stage};
use grorx::Skb;
use std::sync::Arc;

fn null_ports(rx: &[&str], outputs: &[&str]) -> RunOptions {
    RunOptions {
        eal: EalSetup::Existing,
        ports: rx.iter().map(|p| PortSpec::parse(p).unwrap()).collect(),
        stage: StageOptions {
            outputs: outputs
                .iter()
                .map(|p| PortSpec::parse(p).unwrap())
                .collect(),
            ..StageOptions::default()
        },
        duration: Some(0.3),
        ..RunOptions::default()
    }
}

/// The run's pools EAL still holds (a run names its pools `grorx-...`).
fn grorx_pools() -> Vec<String> {
    let mut v: Vec<String> = mempool::names_in_eal()
        .into_iter()
        .filter(|n| n.starts_with("grorx-"))
        .collect();
    v.sort();
    v
}

/// Consumes every packet; at the end does `last` with the pool of the
/// run's first output port.
struct AtTheEnd {
    output_pool: Arc<Mempool>,
    last: fn(&Mempool),
}

impl Stage for AtTheEnd {
    fn packet(&mut self, skb: Skb, ctx: &mut Ctx<'_>) {
        ctx.consume(skb);
    }

    fn finish(&mut self, _ctx: &mut Ctx<'_>) {
        (self.last)(&self.output_pool);
    }
}

fn run_with_output_pool(last: fn(&Mempool)) -> grorx::Report {
    let opts = null_ports(&["net_null0"], &["net_null1"]);
    run::start_with(&opts, |q: &QueueSetup| {
        Ok(AtTheEnd {
            output_pool: q.outputs[0].1.clone(),
            last,
        })
    })
    .unwrap()
    .wait()
    .unwrap()
}

#[test]
fn an_mbuf_leaked_from_an_output_pool_is_counted_and_the_pool_named() {
    let _e = common::eal();
    let r = run_with_output_pool(|pool| {
        let m = Mbuf::alloc(pool).expect("an mbuf");
        let _ = m.into_raw(); // leaked
    });
    assert_eq!(r.mbufs_leaked, 1, "{:?}", r.pools);
    assert_eq!(r.mbufs_freed_twice, 0);
    let out: Vec<_> = r.pools.iter().filter(|p| p.role == "output").collect();
    assert_eq!(
        out.len(),
        1,
        "the output port's pool is counted: {:?}",
        r.pools
    );
    assert_eq!(out[0].in_use, 1);
    assert_eq!(out[0].available + 1, out[0].size as u64);
    assert!(
        r.pools.iter().any(|p| p.role == "rx" && p.in_use == 0),
        "{:?}",
        r.pools
    );
    assert!(
        r.notes
            .iter()
            .any(|n| n.contains(&out[0].name) && n.contains("leaked")),
        "a note names the pool: {:?}",
        r.notes
    );
    assert!(r.failure().unwrap().contains("1 mbuf(s) leaked"));
}

#[test]
fn an_mbuf_freed_twice_is_its_own_error_not_netted_against_a_leak() {
    let _e = common::eal();
    let r = run_with_output_pool(|pool| {
        let _leaked = Mbuf::alloc(pool).expect("an mbuf").into_raw();
        let m = Mbuf::alloc(pool).expect("an mbuf").into_raw();
        // SAFETY: none: a deliberate double free into a pool this run made
        // and keeps (never freed, never used again) once it is found.
        unsafe {
            dpdk_sys::rte_pktmbuf_free(m);
            dpdk_sys::rte_pktmbuf_free(m);
        }
    });
    assert_eq!(r.mbufs_freed_twice, 1, "{:?}", r.pools);
    assert_eq!(r.mbufs_leaked, 1, "{:?}", r.pools);
    let p = r.pools.iter().find(|p| p.role == "output").unwrap();
    assert_eq!((p.freed_twice, p.in_use), (1, 1));
    assert_eq!(p.available, p.size as u64, "the counts alone net out");
    assert!(
        r.notes
            .iter()
            .any(|n| n.contains(&p.name) && n.contains("double free")),
        "{:?}",
        r.notes
    );
    let f = r.failure().unwrap();
    assert!(f.contains("freed twice") && f.contains("leaked"), "{f}");
    assert!(
        grorx_pools().contains(&p.name),
        "a pool with an mbuf in it twice is kept, not freed"
    );
}

#[test]
fn a_leak_and_a_double_free_in_one_pool_do_not_cancel_out() {
    let _e = common::eal();
    let pool = Mempool::create(&PoolParams {
        name: "t-leak-and-twice".into(),
        elements: 1023,
        cache: 0,
        priv_size: run::PRIV_SIZE,
        data_room: 2176,
        socket: -1,
    })
    .unwrap();
    let _leaked = Mbuf::alloc(&pool).unwrap().into_raw();
    let m = Mbuf::alloc(&pool).unwrap().into_raw();
    // SAFETY: none: a deliberate double free into a pool the test then
    // forgets (it is never used or freed again).
    unsafe {
        dpdk_sys::rte_pktmbuf_free(m);
        dpdk_sys::rte_pktmbuf_free(m);
    }
    assert_eq!(pool.in_use(), 0, "DPDK's own count nets them out");
    let counted = pool.usage("test");
    assert_eq!(
        (counted.in_use, counted.freed_twice),
        (0, 0),
        "so does a count"
    );
    // SAFETY: nothing else uses the pool.
    let u = unsafe { pool.audit("test", 0) };
    assert_eq!((u.available, u.in_use, u.freed_twice), (1023, 1, 1));
    std::mem::forget(pool);
}

/// Holds an mbuf of its queue's pool from the moment it is made.
struct Holding(#[allow(dead_code)] Mbuf);

impl Stage for Holding {
    fn packet(&mut self, skb: Skb, ctx: &mut Ctx<'_>) {
        ctx.consume(skb);
    }
}

#[test]
fn a_stage_that_fails_for_its_second_queue_leaves_nothing_behind() {
    let (eal, _g) = common::eal();
    assert!(eal.worker_lcores().len() >= 2, "a worker per queue");
    let before = grorx_pools();
    let mut opts = null_ports(&["net_null0"], &["net_null1"]);
    opts.rx.queues = 2;
    let mut made = 0;
    let e = run::start_with(&opts, |q: &QueueSetup| {
        made += 1;
        if q.queue == 1 {
            anyhow::bail!("no stage for queue 1");
        }
        Ok(Holding(Mbuf::alloc(&q.pool).expect("an mbuf")))
    })
    .err()
    .expect("the run fails");
    assert_eq!(made, 2);
    let msg = format!("{e:#}");
    assert!(msg.contains("no stage for queue 1"), "{msg}");
    assert!(
        !msg.contains("teardown"),
        "nothing wrong at teardown: {msg}"
    );
    assert_eq!(
        grorx_pools(),
        before,
        "every pool of the failed run is freed (none kept for mbufs out)"
    );

    // The ports were closed and the devices removed: the same run again works.
    let r = run::start_with(&opts, |_| Ok(Sink))
        .unwrap()
        .wait()
        .unwrap();
    assert!(r.rx_packets > 0);
    assert_eq!(r.queues.len(), 2);
    assert_eq!(
        (r.mbufs_leaked, r.mbufs_freed_twice),
        (0, 0),
        "{:?}",
        r.pools
    );
    assert!(r.pools.iter().any(|p| p.role == "output"), "{:?}", r.pools);
    assert_eq!(grorx_pools(), before);
}
