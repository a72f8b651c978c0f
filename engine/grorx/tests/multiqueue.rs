//! Several RX queues on several lcores, without a NIC: a multi-queue
//! ring-backed port whose rings the test fills the way RSS would (a flow's
//! frames always to one queue). Each queue is polled by one lcore, its GRO
//! sees exactly its flows, flows come out whole and in order, and every mbuf
//! goes back to its pool.

mod common;

use grorx::gro::GroConfig;
use grorx::mbuf::{Burst, Mbuf};
use grorx::mempool::{Mempool, PoolParams};
use grorx::port_spec::PortSpec;
use grorx::ring_port::RingPort;
use grorx::run::{self, EalSetup, RunOptions, RxOptions, StageOptions};
use grorx::traffic::{segment_stream, FlowSpec};
use grorx::wire::{Fields, Tcp};
use std::collections::HashMap;

#[test]
fn flows_stay_on_their_queue_and_every_mbuf_returns() {
    let (eal, _g) = common::eal();
    let queues = 2u16;
    let workers = eal.worker_lcores();
    assert!(workers.len() >= 2, "the test EAL has two worker lcores");
    let pool = Mempool::create(&PoolParams {
        name: "t-mq-frames".into(),
        elements: 8191,
        cache: 0,
        priv_size: run::PRIV_SIZE,
        data_room: 2176,
        socket: -1,
    })
    .unwrap();
    let rp = RingPort::create(queues, 8192, -1).unwrap();
    // 6 flows, 300 segments each, interleaved 5 at a time; flow f -> queue by
    // a hash of its ports (as RSS hashes the 4-tuple).
    let flows: Vec<(FlowSpec, Vec<Vec<u8>>)> = (0..6u32)
        .map(|f| {
            let spec = FlowSpec::numbered(f, f % 3 == 2);
            let frames = segment_stream(&spec, f, 1000 * f, 300 * 1448, 1448);
            (spec, frames)
        })
        .collect();
    let queue_of =
        |spec: &FlowSpec| ((spec.sport as u32).wrapping_mul(2654435761) >> 16) as u16 % queues;
    let mut expect_per_queue = vec![0u64; queues as usize];
    let mut bursts: Vec<Burst<8>> = (0..queues).map(|_| Burst::new()).collect();
    for chunk in 0..60 {
        for (spec, frames) in &flows {
            let q = queue_of(spec) as usize;
            for fr in &frames[chunk * 5..chunk * 5 + 5] {
                let mut m = Mbuf::alloc(&pool).unwrap();
                assert!(m.append(fr));
                if let Err(m) = bursts[q].push(m) {
                    drop(m);
                    panic!("burst full");
                }
                expect_per_queue[q] += 1;
                if bursts[q].len() == 8 {
                    // SAFETY: the port's RX ring, not yet polled by anyone.
                    assert_eq!(unsafe { bursts[q].enqueue(rp.rx_ring(q).0) }, 8);
                }
            }
        }
    }
    for (q, b) in bursts.iter_mut().enumerate() {
        let n = b.len();
        // SAFETY: the port's RX ring q, a valid mbuf ring not yet polled by anyone.
        assert_eq!(unsafe { b.enqueue(rp.rx_ring(q).0) }, n);
    }
    assert!(
        expect_per_queue.iter().all(|&n| n > 0),
        "both queues get flows: {expect_per_queue:?}"
    );

    let dir = tempfile::tempdir().unwrap();
    let cap = dir.path().join("mq.pcap");
    let r = run::run(&RunOptions {
        eal: EalSetup::Existing,
        ports: vec![PortSpec::Id(rp.port_id)],
        rx: RxOptions {
            queues,
            ..RxOptions::default()
        },
        duration: Some(1.0),
        stage: StageOptions {
            capture: Some(cap.clone()),
            ..StageOptions::default()
        },
        gro: Some(GroConfig {
            max_frags: 64,
            ..Default::default()
        }),
        ..RunOptions::default()
    })
    .unwrap();
    // One lcore per queue, each queue saw exactly what was steered to it.
    assert_eq!(r.queues.len(), 2);
    assert_ne!(r.queues[0].lcore, r.queues[1].lcore);
    for q in &r.queues {
        assert_eq!(
            q.counts.rx_packets, expect_per_queue[q.queue as usize],
            "queue {}",
            q.queue
        );
        assert_eq!(q.gro.as_ref().unwrap().segments_in, q.counts.rx_packets);
    }
    // Each flow whole and in order; merged well (the rings hold runs of 5).
    let mut got: HashMap<u16, Vec<u8>> = HashMap::new();
    for rec in grorx::pcap::read_all(&cap).unwrap() {
        let t = Tcp::parse(&rec, rec.len(), true).unwrap();
        let f = Fields::new(&rec, t);
        got.entry((f.ports() >> 16) as u16)
            .or_default()
            .extend_from_slice(&rec[t.payload as usize..]);
    }
    for (spec, frames) in &flows {
        let want: Vec<u8> = frames
            .iter()
            .flat_map(|f| f[spec.header_len()..].to_vec())
            .collect();
        assert!(
            got.get(&spec.sport) == Some(&want),
            "flow {} intact and in order",
            spec.sport
        );
    }
    assert!(r.gro.as_ref().unwrap().avg_segments_per_packet > 4.0);
    assert_eq!(r.mbufs_leaked, 0);
    drop(rp);
    assert_eq!(pool.in_use(), 0, "the frames' own pool got everything back");
}
