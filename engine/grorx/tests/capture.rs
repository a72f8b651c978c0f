//! The capture writer when it cannot keep up: a writer stuck in a write (a
//! FIFO nobody reads) does not keep the run from stopping; what it could not
//! write is counted, and every mbuf comes back.

mod common;

use grorx::capture::STALL;
use grorx::run::{self, EalSetup, RunOptions, StageOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::time::{Duration, Instant};

#[test]
fn a_stuck_writer_does_not_keep_the_run_from_stopping() {
    let _e = common::eal();
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("cap.fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid path string.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    // A reader that never reads: the writer's first large write blocks.
    let reader = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&fifo)
        .unwrap();
    let opts = RunOptions {
        eal: EalSetup::Existing,
        stage: StageOptions {
            capture: Some(fifo.clone()),
            ..StageOptions::default()
        },
        duration: Some(1.0),
        // Every frame goes to the capture on its own: the ring fills fast,
        // and the worker waits on it when the stop comes.
        gro: None,
        ..RunOptions::default()
    };
    // Today's failure would be a hang: give up on it loudly instead.
    let (tx, rx) = std::sync::mpsc::channel();
    let t0 = Instant::now();
    std::thread::spawn(move || {
        let _ = tx.send(run::run(&opts));
    });
    let limit = Duration::from_secs(1) + STALL + Duration::from_secs(3);
    let r = rx
        .recv_timeout(limit)
        .expect("the run ends although its capture writer is stuck")
        .unwrap();
    assert!(t0.elapsed() < limit);
    let cap = r.capture.as_ref().unwrap();
    let err = cap.error.as_deref().expect("the capture failed");
    assert!(
        err.contains("no progress") && err.contains("cap.fifo"),
        "{err}"
    );
    assert!(cap.dropped > 0, "{cap:?}");
    assert_eq!(
        cap.packets + cap.dropped,
        r.delivered.packets,
        "each packet given to the capture is written or counted as dropped"
    );
    assert!(
        r.notes.iter().any(|n| n.contains("workers waited")),
        "the worker waited on the full ring: {:?}",
        r.notes
    );
    assert_eq!(r.mbufs_leaked, 0, "{:?}", r.pools);
    assert!(r.failure().is_some());
    drop(reader); // the writer's write now fails, and the thread ends
}
