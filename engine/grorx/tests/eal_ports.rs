//! The DPDK layer with a real EAL (no NIC, no hugepages): mempools, mbufs,
//! ports on net_ring / net_null / net_pcap and the embedded generator.
//! Frames sent are frames counted, bytes match, every mbuf goes home.

mod common;

use grorx::gen::GenConfig;
use grorx::mbuf::{Burst, Mbuf};
use grorx::mempool::{Mempool, PoolParams};
use grorx::port::{self, Port, PortConf};
use grorx::port_spec::PortSpec;
use grorx::run::{self, EalSetup, PoolOptions, RunOptions, RxOptions};
use grorx::traffic::{segment_stream, FlowSpec};
use grorx::{Setting, SettingError};

fn quiet(opts: RunOptions) -> RunOptions {
    RunOptions {
        eal: EalSetup::Existing,
        ..opts
    }
}

#[test]
fn pool_gives_one_segment_frames_with_a_private_area() {
    let _e = common::eal();
    let room = grorx::pool_sizing::auto_data_room(1500, dpdk_sys::RTE_PKTMBUF_HEADROOM).unwrap();
    let pool = Mempool::create(&PoolParams {
        name: "t-pool-1".into(),
        elements: 511,
        cache: 32,
        priv_size: run::PRIV_SIZE,
        data_room: room,
        socket: -1,
    })
    .unwrap();
    let mut m = Mbuf::alloc(&pool).unwrap();
    // A full 1514 B frame fits one mbuf, after the headroom.
    assert!(m.append(&[0xab; 1514]));
    assert_eq!(m.nb_segs(), 1);
    // SAFETY: field reads of the live mbuf `m` owns, before it is pushed.
    unsafe {
        let raw = m.as_ptr();
        assert_eq!((*raw).priv_size, run::PRIV_SIZE);
        assert_eq!((*raw).data_off as u32, dpdk_sys::RTE_PKTMBUF_HEADROOM);
        // The private area sits between the mbuf header and the buffer.
        let priv_end = dpdk_sys::inline::priv_area(raw).add(run::PRIV_SIZE as usize);
        assert_eq!(priv_end, (*raw).buf_addr as *mut u8);
    }
    assert_eq!(pool.in_use(), 1);
    drop(m);
    assert_eq!(pool.in_use(), 0);
}

#[test]
fn net_ring_loops_frames_back_byte_for_byte() {
    let _e = common::eal();
    let spec = PortSpec::parse("net_ring0").unwrap();
    let id = port::open(&spec).unwrap();
    let pool = Mempool::create(&PoolParams {
        name: "t-ring-pool".into(),
        elements: 2047,
        cache: 0,
        priv_size: run::PRIV_SIZE,
        data_room: 2176,
        socket: -1,
    })
    .unwrap();
    let mut port = Port::configure(id, &PortConf::default(), &[&pool]).unwrap();
    port.start(false).unwrap();

    let flow = FlowSpec::numbered(3, false);
    let frames = segment_stream(&flow, 3, 1000, 40 * 1448 + 17, 1448);
    let mut tx: Burst<64> = Burst::new();
    for f in &frames {
        let mut m = Mbuf::alloc(&pool).unwrap();
        assert!(m.append(f));
        assert!(tx.push(m).is_ok());
    }
    assert_eq!(tx.tx(id, 0), frames.len());
    let mut rx: Burst<64> = Burst::new();
    assert_eq!(rx.rx(id, 0, 64), frames.len());
    for (i, &m) in rx.as_slice().iter().enumerate() {
        // SAFETY: a valid mbuf the burst received; into_raw below hands it
        // back unfreed, so the burst stays its only owner.
        let got = unsafe { Mbuf::from_raw(m).unwrap() };
        assert_eq!(got.to_vec(), frames[i], "frame {i}");
        got.into_raw(); // still owned by the burst
    }
    rx.free_all();
    port.close();
    assert_eq!(pool.in_use(), 0, "every mbuf back");
}

#[test]
fn generator_frames_are_counted_exactly() {
    let _e = common::eal();
    let n = 200_000;
    let r = run::run(&quiet(RunOptions {
        gen: GenConfig {
            count: n,
            flows: 8,
            ..GenConfig::default()
        },
        ..RunOptions::default()
    }))
    .unwrap();
    assert_eq!(r.source.as_ref().unwrap().sent, n);
    assert_eq!(r.rx_packets, n, "{}", r.text());
    assert_eq!(r.rx_bytes, n * 1514);
    assert_eq!(r.mbufs_leaked, 0);
    assert_eq!(r.freed_at_teardown, 0);
    assert_eq!(r.queues.len(), 1);
    assert!(r.ports[0].pool.segments_per_frame == 1);
}

#[test]
fn generator_ipv6_vlan_frames_are_counted() {
    let _e = common::eal();
    let n = 10_000;
    let gen = GenConfig {
        count: n,
        ipv6: true,
        vlan: Some(42),
        mss: 1000,
        ..GenConfig::default()
    };
    let frame = gen.frame_len() as u64;
    assert_eq!(frame, 14 + 4 + 40 + 32 + 1000);
    let r = run::run(&quiet(RunOptions {
        gen,
        ..RunOptions::default()
    }))
    .unwrap();
    assert_eq!(
        (r.rx_packets, r.rx_bytes, r.mbufs_leaked),
        (n, n * frame, 0)
    );
}

#[test]
fn generator_stopped_by_duration_accounts_everything() {
    let _e = common::eal();
    let r = run::run(&quiet(RunOptions {
        duration: Some(0.5),
        ..RunOptions::default()
    }))
    .unwrap();
    let sent = r.source.as_ref().unwrap().sent;
    assert!(r.rx_packets > 0);
    // Whatever the generator sent was received or freed at teardown.
    assert_eq!(r.rx_packets + r.freed_at_teardown, sent, "{}", r.text());
    assert_eq!(r.mbufs_leaked, 0);
    assert_eq!(r.stop_reason, "duration");
}

#[test]
fn net_null_sink_counts_64_byte_frames() {
    let _e = common::eal();
    let r = run::run(&quiet(RunOptions {
        ports: vec![PortSpec::parse("net_null7").unwrap()],
        duration: Some(0.3),
        ..RunOptions::default()
    }))
    .unwrap();
    assert!(r.rx_packets > 1000, "{}", r.text());
    assert_eq!(r.rx_bytes, r.rx_packets * 64);
    assert_eq!(r.mbufs_leaked, 0);
    assert_eq!(r.ports[0].driver, "net_null");
}

#[test]
fn net_pcap_replay_once_ends_by_itself_with_every_frame() {
    let _e = common::eal();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("in.pcap");
    let mut frames = Vec::new();
    for f in 0..4u32 {
        frames.extend(segment_stream(
            &FlowSpec::numbered(f, f % 2 == 1),
            f,
            f * 7,
            30_000,
            1448,
        ));
    }
    frames.push(vec![0u8; 60]); // not TCP: still counted
    common::write_pcap(&path, &frames);
    let bytes: u64 = frames.iter().map(|f| f.len() as u64).sum();
    let spec = format!("net_pcap5,rx_pcap={}", path.display());
    let r = run::run(&quiet(RunOptions {
        ports: vec![PortSpec::parse(&spec).unwrap()],
        duration: Some(30.0),
        ..RunOptions::default()
    }))
    .unwrap();
    assert_eq!(r.stop_reason, "pcap replay complete");
    assert_eq!(r.rx_packets, frames.len() as u64);
    assert_eq!(r.rx_bytes, bytes);
    assert_eq!(r.mbufs_leaked, 0);
}

#[test]
fn split_frames_use_several_segments() {
    let _e = common::eal();
    // A 1152 B data room (1024 after headroom): a 1514 B frame takes 2 mbufs.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.pcap");
    let frames = segment_stream(&FlowSpec::numbered(1, false), 1, 0, 20 * 1448, 1448);
    common::write_pcap(&path, &frames);
    let spec = format!("net_pcap6,rx_pcap={}", path.display());
    let r = run::run(&quiet(RunOptions {
        ports: vec![PortSpec::parse(&spec).unwrap()],
        pools: PoolOptions {
            data_room: Some(128 + 1024),
            ..PoolOptions::default()
        },
        duration: Some(30.0),
        ..RunOptions::default()
    }))
    .unwrap();
    assert_eq!(r.ports[0].pool.segments_per_frame, 2);
    assert_eq!(r.rx_packets, frames.len() as u64, "{}", r.text());
    assert_eq!(
        r.rx_bytes,
        frames.iter().map(|f| f.len() as u64).sum::<u64>()
    );
    assert_eq!(r.mbufs_leaked, 0);
}

#[test]
fn bad_ports_explain_themselves() {
    let _e = common::eal();
    let e = run::run(&quiet(RunOptions {
        ports: vec![PortSpec::Id(77)],
        ..RunOptions::default()
    }))
    .unwrap_err();
    assert!(e.to_string().contains("no such port"), "{e}");
    let e = run::run(&quiet(RunOptions {
        ports: vec![PortSpec::parse("net_nosuchdriver0").unwrap()],
        ..RunOptions::default()
    }))
    .unwrap_err();
    assert!(e.to_string().contains("could not create"), "{e}");
    let e = run::run(&quiet(RunOptions {
        rx: RxOptions {
            queues: 0,
            ..RxOptions::default()
        },
        ..RunOptions::default()
    }))
    .unwrap_err();
    let e = e.downcast_ref::<SettingError>().expect("a setting refused");
    assert_eq!(e.setting, Setting::Queues, "{e}");
}

#[test]
fn pool_scope_shares_or_splits_pools() {
    let _e = common::eal();
    let mut names = Vec::new();
    // Fresh vdev names each round: a closed port is not reopened by name.
    for (scope, a, b) in [
        (run::PoolScope::Socket, "net_null20", "net_null21"),
        (run::PoolScope::Port, "net_null22", "net_null23"),
    ] {
        let ports = vec![PortSpec::parse(a).unwrap(), PortSpec::parse(b).unwrap()];
        let r = run::run(&quiet(RunOptions {
            ports,
            pools: PoolOptions {
                scope,
                ..PoolOptions::default()
            },
            duration: Some(0.2),
            ..RunOptions::default()
        }))
        .unwrap();
        assert_eq!(r.mbufs_leaked, 0);
        names.push((r.ports[0].pool.name.clone(), r.ports[1].pool.name.clone()));
    }
    assert_eq!(
        names[0].0, names[0].1,
        "socket scope: both ports share one pool"
    );
    assert_ne!(names[1].0, names[1].1, "port scope: a pool each");
}
