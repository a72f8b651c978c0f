//! The grorx telemetry commands, asked through DPDK's own client
//! (`dpdk-telemetry.py`, fed on stdin) over EAL's real telemetry socket.
//!
//! This binary starts its own EAL (not tests/common: that one runs with
//! `--no-shconf` and the default prefix, whose socket lands in the shared
//! /var/run/dpdk/rte), with a unique `--file-prefix`, and removes that
//! runtime directory at the end.

use grorx::eal::{self, Eal};
use grorx::gro::{Flush, GroStats, Pass};
use grorx::stats::{QueueCounters, QueueCounts};
use grorx::telemetry::{self, Live, QueueInfo};
use serde_json::Value;
use std::sync::Arc;
use std::time::{Duration, Instant};

mod telemetry_client;
use telemetry_client::{body, query, RuntimeDir};

fn fake_live() -> Arc<Live> {
    let counters: Arc<[QueueCounters]> = (0..2).map(|_| QueueCounters::default()).collect();
    counters[0].publish(&QueueCounts {
        rx_packets: 1000,
        rx_bytes: 1_514_000,
        rx_bursts: 40,
        rx_polls: 400,
        out_packets: 250,
        out_bytes: 1_504_000,
        truesize: 2_000_000,
        ..Default::default()
    });
    counters[1].publish(&QueueCounts {
        rx_packets: 3000,
        rx_bytes: 4_542_000,
        rx_bursts: 100,
        rx_polls: 900,
        out_packets: 1000,
        out_bytes: 4_512_000,
        headroom_miss: 2,
        ..Default::default()
    });
    let mut g0 = GroStats {
        segments_in: 1000,
        packets_out: 250,
        merged_segments: 750,
        max_segments: 8,
        ..Default::default()
    };
    g0.flush[Flush::Psh as usize] = 20;
    g0.flush[Flush::Age as usize] = 5;
    g0.pass[Pass::NoPayload.index()] = 3;
    let mut g1 = GroStats {
        segments_in: 3000,
        packets_out: 1000,
        merged_segments: 2000,
        max_segments: 16,
        ..Default::default()
    };
    g1.flush[Flush::Psh as usize] = 7;
    g1.flush[Flush::SizeLimit as usize] = 11;
    g1.pass[Pass::NoPayload.index()] = 4;
    counters[0].publish_gro(&g0);
    counters[1].publish_gro(&g1);
    Arc::new(Live {
        queues: vec![
            QueueInfo {
                port: 0,
                queue: 0,
                lcore: 1,
                cpu: 1,
            },
            QueueInfo {
                port: 0,
                queue: 1,
                lcore: 2,
                cpu: 0,
            },
        ],
        counters,
        ports: vec![(0, "net_null0".into())],
        started: Instant::now() - Duration::from_secs(5),
        gro_on: true,
    })
}

#[test]
fn grorx_commands_answer_on_the_telemetry_socket() {
    let t0 = Instant::now();
    // Before EAL: a clear error.
    let e = telemetry::register().unwrap_err().to_string();
    assert!(e.contains("EAL is not running"), "{e}");

    let prefix = format!("grorx-tele-{}", std::process::id());
    let cpu = grorx::lcores::available_cpus()[0];
    let argv: Vec<String> = [
        "grorx-telemetry-test",
        "--no-huge",
        "-m",
        "256",
        "--file-prefix",
        &prefix,
        "--no-pci",
        "--vdev",
        "net_null0",
        "--lcores",
        &format!("0@{cpu}"),
        "--log-level",
        "lib.eal:error",
        "--log-level",
        "lib.telemetry:error",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    Eal::init(&argv).expect("EAL starts with --no-huge");
    let dir = eal::runtime_dir().expect("EAL has a runtime directory");
    assert_eq!(dir.file_name().unwrap().to_string_lossy(), prefix);
    let _cleanup = RuntimeDir(dir.clone());
    assert_eq!(
        telemetry::socket_path().as_deref(),
        Some(dir.join("dpdk_telemetry.v2").as_path())
    );

    telemetry::register().expect("registers");
    telemetry::register().expect("a second call is a no-op");

    // No run yet.
    let r = query(&prefix, &["/grorx/stats", "/grorx/gro"]);
    assert_eq!(body(&r[0], "/grorx/stats")["running"], 0);
    assert_eq!(body(&r[1], "/grorx/gro")["running"], 0);

    telemetry::set_live(Some(fake_live()));
    let cmds = [
        "/",
        "/grorx/stats",
        "/grorx/queues",
        "/grorx/gro",
        "/grorx/gro,1",
        "/grorx/gro,0:0",
        "/grorx/gro,9",
        "/grorx/queues,0:1",
        "/help,/grorx/stats",
        "/help,/grorx/gro",
        "/ethdev/list",
    ];
    let r = query(&prefix, &cmds);

    let list = body(&r[0], "/").as_array().unwrap();
    for c in [
        "/grorx/stats",
        "/grorx/queues",
        "/grorx/gro",
        "/ethdev/list",
    ] {
        assert!(list.iter().any(|v| v == c), "{c} not in {list:?}");
    }

    let st = body(&r[1], "/grorx/stats");
    assert_eq!(st["running"], 1);
    assert_eq!(st["rx_packets"], 4000);
    assert_eq!(st["rx_bytes"], 6_056_000);
    assert_eq!(st["out_packets"], 1250);
    assert_eq!(st["out_bytes"], 6_016_000);
    assert_eq!(st["rx_polls"], 1300);
    assert_eq!(st["headroom_miss"], 2);
    assert_eq!(st["queues"], 2);
    assert_eq!(st["ports"]["0"], "net_null0");
    assert_eq!(st["gro"], "on");
    assert_eq!(st["gro_segments_in"], 4000);
    assert_eq!(st["gro_packets_out"], 1250);
    assert_eq!(st["gro_avg_segments_per_packet_milli"], 3200);
    let up = st["uptime_s"].as_u64().unwrap();
    assert!((5..60).contains(&up), "uptime {up}");

    let qs = body(&r[2], "/grorx/queues");
    assert_eq!(qs["queues"], 2);
    assert_eq!(qs["listed"], 2);
    assert_eq!(qs["truncated"], 0);
    let q1 = &qs["1"];
    assert_eq!(
        (&q1["port"], &q1["queue"], &q1["lcore"], &q1["cpu"]),
        (
            &Value::from(0),
            &Value::from(1),
            &Value::from(2),
            &Value::from(0)
        )
    );
    assert_eq!(q1["rx_packets"], 3000);
    assert_eq!(q1["rx_bursts"], 100);
    assert_eq!(q1["rx_polls"], 900);
    assert_eq!(q1["avg_burst_milli"], 30000);
    assert_eq!(qs["0"]["rx_bytes"], 1_514_000);
    assert_eq!(qs["0"]["gro_segments_in"], 1000);

    let g = body(&r[3], "/grorx/gro");
    assert_eq!(g["scope"], "all");
    assert_eq!(g["segments_in"], 4000);
    assert_eq!(g["max_segments_per_packet"], 16);
    assert_eq!(g["flush_reasons"]["psh"], 27);
    assert_eq!(g["flush_reasons"]["age"], 5);
    assert_eq!(g["flush_reasons"]["size_limit"], 11);
    assert_eq!(g["flush_reasons"]["end_of_poll"], 0);
    assert_eq!(
        g["flush_reasons"].as_object().unwrap().len(),
        Flush::N,
        "every flush reason by name"
    );
    assert_eq!(g["passthrough"]["tcp_no_payload"], 7);
    assert_eq!(g["passthrough"].as_object().unwrap().len(), Pass::N);

    let g1 = body(&r[4], "/grorx/gro");
    assert_eq!(g1["scope"], "1");
    assert_eq!(g1["queue"], 1);
    assert_eq!(g1["flush_reasons"]["psh"], 7);
    assert_eq!(g1["avg_segments_per_packet_milli"], 3000);
    let g0 = body(&r[5], "/grorx/gro");
    assert_eq!(g0["scope"], "0");
    assert_eq!(g0["flush_reasons"]["age"], 5);
    let bad = body(&r[6], "/grorx/gro");
    assert!(
        bad["error"].as_str().unwrap().contains("no queue '9'"),
        "{bad}"
    );
    let one = body(&r[7], "/grorx/queues");
    assert_eq!(one["listed"], 1);
    assert_eq!(one["1"]["rx_packets"], 3000);
    assert!(one.get("0").is_none());

    assert_eq!(body(&r[8], "/help")["/grorx/stats"], telemetry::HELP_STATS);
    assert_eq!(body(&r[9], "/help")["/grorx/gro"], telemetry::HELP_GRO);
    // EAL's own commands still answer: the null port is port 0.
    assert_eq!(body(&r[10], "/ethdev/list"), &serde_json::json!([0]));

    // Counters move between queries (read live, not copied at set_live).
    let live = fake_live();
    let mut l = live.counters[0].read();
    l.rx_packets += 5;
    live.counters[0].publish(&l);
    telemetry::set_live(Some(live));
    let r = query(&prefix, &["/grorx/stats"]);
    assert_eq!(body(&r[0], "/grorx/stats")["rx_packets"], 4005);

    // More queues than one reply (16 KiB) holds: what is listed arrives
    // whole (DPDK drops what does not fit without a word).
    let many: Arc<[QueueCounters]> = (0..200).map(|_| QueueCounters::default()).collect();
    telemetry::set_live(Some(Arc::new(Live {
        queues: (0..200u16)
            .map(|i| QueueInfo {
                port: i / 8,
                queue: i % 8,
                lcore: 1,
                cpu: 1,
            })
            .collect(),
        counters: many,
        ports: (0..25).map(|p| (p, format!("net_ring{p}"))).collect(),
        started: Instant::now(),
        gro_on: true,
    })));
    let r = query(
        &prefix,
        &["/grorx/queues", "/grorx/queues,199", "/grorx/stats"],
    );
    let qs = body(&r[0], "/grorx/queues");
    let listed = qs["listed"].as_u64().unwrap();
    let keys = qs
        .as_object()
        .unwrap()
        .keys()
        .filter(|k| k.parse::<u32>().is_ok())
        .count() as u64;
    assert_eq!(keys, listed, "every listed queue arrived");
    eprintln!(
        "/grorx/queues: {listed} of 200 queues in {} bytes of JSON",
        r[0].to_string().len()
    );
    assert!((20..200).contains(&listed), "{listed}");
    assert_eq!(qs["truncated"], 1);
    assert_eq!(body(&r[1], "/grorx/queues")["199"]["port"], 24);
    assert_eq!(body(&r[2], "/grorx/stats")["ports"]["24"], "net_ring24");

    // Live::new places the slots as the engine's plan does; the scope
    // guard clears the state when dropped.
    let plan = grorx::worker::assign(&[(0, 0), (0, 1), (1, 0)], &[0]);
    let counters: Arc<[QueueCounters]> = (0..3).map(|_| QueueCounters::default()).collect();
    counters[2].publish(&QueueCounts {
        rx_packets: 77,
        ..Default::default()
    });
    let eal = Eal::get().unwrap();
    let live = Live::new(eal, &plan, counters, vec![], Instant::now(), false);
    assert_eq!(
        live.queues[2],
        QueueInfo {
            port: 1,
            queue: 0,
            lcore: 0,
            cpu: cpu as i32
        }
    );
    {
        let _scope = telemetry::live_scope(live);
        let r = query(&prefix, &["/grorx/queues,1:0", "/grorx/gro"]);
        assert_eq!(body(&r[0], "/grorx/queues")["2"]["rx_packets"], 77);
        assert_eq!(body(&r[1], "/grorx/gro")["gro"], "off");
    }
    let r = query(&prefix, &["/grorx/queues"]);
    assert_eq!(body(&r[0], "/grorx/queues")["running"], 0);

    telemetry::set_live(None);
    let r = query(&prefix, &["/grorx/queues"]);
    assert_eq!(body(&r[0], "/grorx/queues")["running"], 0);
    eprintln!("telemetry test: {:.1} s", t0.elapsed().as_secs_f64());
}
