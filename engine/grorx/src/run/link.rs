//! The RX ports' links while a run goes on: a port whose link is down is not
//! polled until it comes back; each port's link-down events and time down
//! are counted; and a peer that goes away cannot pull a port's memory from
//! under a worker.
//!
//! The link is read several times a second by the run's watch thread, and at
//! once on an `RTE_ETH_EVENT_INTR_LSC` event where the PMD raises one (the
//! callback closes the port before it returns: vhost raises it from its
//! teardown, before the guest memory goes).
//!
//! memif needs more. When its peer leaves, its control-channel handler on
//! EAL's interrupt thread clears the connected flag and unmaps the shared
//! rings and buffers at once, with no handshake with the data path: an RX
//! burst already past its check of the flag goes on reading unmapped memory
//! (SIGSEGV on the worker). The link only reads down after the unmapping,
//! so no flag of ours set on seeing it can come first. What can: holding
//! the interrupt thread. An EAL alarm callback of ours holds it (sleeping)
//! while workers poll such ports, and before it lets go it closes them and
//! waits until every worker has acknowledged; the PMD's handlers run only
//! in the short gaps between holds, when no worker is inside its bursts.
//! With no such port up there is nothing to hold, and the thread runs free
//! (a reconnect's handshake goes at full speed). A memif client connects
//! only when started: while its link is down, the hold's step restarts it
//! every second, on the interrupt thread, so the PMD's own handlers never
//! run beside it; one whose peer was not there when the run started is
//! started the same way.

use super::ports::Ports;
use crate::dpdk::eal::{alarm_cancel, alarm_set};
use crate::dpdk::ethdev::{self, rte_eth_event_type};
use crate::port;
use crate::port::gate::{PollGate, HELD, LINK};
use crate::port::spec::PortSpec;
use crate::report::LinkHistory;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often the watch thread reads every port's link.
const WATCH_EVERY: Duration = Duration::from_millis(100);
/// How long one hold of the interrupt thread lasts: the longest a PMD's
/// handler (a peer's departure, another port's event, an EAL alarm) waits.
const HOLD_FOR: Duration = Duration::from_millis(50);
/// The gap between two holds: long enough for EAL's alarm loop to return to
/// epoll (which then serves every handler pending) before the next hold.
const HOLD_GAP_US: u64 = 50;
/// With nothing to hold, the next look at the held ports' links.
const IDLE_US: u64 = 10_000;
/// A memif client whose link is down is restarted this often while it
/// cannot connect (nothing listens: the attempt costs the peer nothing).
const RETRY_EVERY: Duration = Duration::from_secs(1);
/// One that connected is given this long to finish the handshake before it
/// is restarted: a peer that is still starting answers late, and DPDK
/// 22.11's memif server can die in its interrupt thread when a client
/// leaves in the middle of a handshake.
const HANDSHAKE_WAIT: Duration = Duration::from_secs(5);

/// One RX port's link as the run saw it.
#[derive(Debug, Clone, Copy, Default)]
pub struct LinkStats {
    /// DPDK port id.
    pub port: u16,
    /// Whether the link is up (as last seen).
    pub up: bool,
    /// Times it went down while the run went on.
    pub downs: u64,
    /// Seconds it was down, in all (from the start if it started down).
    pub down_s: f64,
}

impl LinkStats {
    /// The port's link history as the report states it.
    pub fn history(&self) -> LinkHistory {
        LinkHistory {
            link_downs: self.downs,
            link_down_s: self.down_s,
        }
    }
}

/// Ports whose PMD tears its queues down on EAL's interrupt thread when its
/// peer leaves: the interrupt thread is held while they are polled.
fn needs_holding(driver: &str) -> bool {
    driver == "net_memif"
}

/// Whether `port` connects to its peer only when started (a memif client):
/// the hold starts it again while its link is down, so a start that cannot
/// reach the peer yet need not end the run.
pub(super) fn connects_when_started(specs: &[PortSpec], port: &port::Port) -> bool {
    needs_holding(&port.driver)
        && specs
            .iter()
            .find(|p| p.dev_name() == Some(port.name.as_str()))
            .is_some_and(|p| p.arg("role") == Some("client"))
}

/// The gate the workers start with: every port allowed, but those that
/// need the interrupt thread held, which the hold opens once it holds it.
pub(super) fn gate(ports: &Ports, max_port: u16, workers: usize) -> Arc<PollGate> {
    let g = PollGate::new(max_port, workers);
    for p in all_ports(ports) {
        if needs_holding(&p.driver) {
            g.clear(p.id, HELD);
        }
    }
    Arc::new(g)
}

/// The RX ports, then the TX-only outputs (an output that is an RX port
/// is among the RX ports alone: `Ports::outputs` never holds it).
fn all_ports(ports: &Ports) -> impl Iterator<Item = &port::Port> {
    let rx = ports.slots.iter().map(|s| &s.port);
    rx.chain(ports.outputs.iter().map(|(p, _)| p))
}

struct PortState {
    id: u16,
    up: bool,
    downs: u64,
    down_total: Duration,
    down_since: Option<Instant>,
}

/// The ports' link states, shared by the watch thread, the LSC callbacks
/// and the hold.
struct Links {
    gate: Arc<PollGate>,
    /// Transitions are decided under the lock: a change seen by two
    /// observers at once counts once, and a close is never undone by a
    /// stale open.
    ports: Mutex<Vec<PortState>>,
}

impl Links {
    /// Reads port `i`'s link and acts on a change: a port going down is
    /// closed (returning once no worker polls it), one coming up opened.
    fn observe(&self, i: usize) {
        let mut ports = self.ports.lock().unwrap_or_else(|p| p.into_inner());
        let p = &mut ports[i];
        let up = port::link_up(p.id);
        if up == p.up {
            return;
        }
        p.up = up;
        let now = Instant::now();
        if up {
            if let Some(t) = p.down_since.take() {
                p.down_total += now - t;
            }
            self.gate.open(p.id, LINK);
        } else {
            p.downs += 1;
            p.down_since = Some(now);
            self.gate.close(p.id, LINK);
        }
    }

    fn observe_all(&self) {
        let n = self.ports.lock().unwrap_or_else(|p| p.into_inner()).len();
        for i in 0..n {
            self.observe(i);
        }
    }

    fn index_of(&self, id: u16) -> Option<usize> {
        let ports = self.ports.lock().unwrap_or_else(|p| p.into_inner());
        ports.iter().position(|p| p.id == id)
    }

    fn stats(&self) -> Vec<LinkStats> {
        let now = Instant::now();
        let ports = self.ports.lock().unwrap_or_else(|p| p.into_inner());
        ports
            .iter()
            .map(|p| LinkStats {
                port: p.id,
                up: p.up,
                downs: p.downs,
                down_s: (p.down_total + p.down_since.map_or(Duration::ZERO, |t| now - t))
                    .as_secs_f64(),
            })
            .collect()
    }
}

/// A port whose PMD needs the interrupt thread held while it is polled.
struct HeldPort {
    id: u16,
    /// Index into `Links::ports` (an RX port's; an output has none).
    index: Option<usize>,
    /// A memif client: restarted while down, to connect again.
    restart: bool,
    /// Whether it is started (the port's own flag).
    running: Arc<AtomicBool>,
    /// When it was last (re)started; None once its link was seen up (when
    /// it goes down, its peer left: it connects again at once).
    started: Mutex<Option<Instant>>,
}

/// Holds EAL's interrupt thread while ports that need it are polled (see
/// the module's comment).
struct Hold {
    links: Arc<Links>,
    ports: Vec<HeldPort>,
    stop: AtomicBool,
    /// Wakes a hold early when the run stops.
    wake: (Mutex<()>, Condvar),
}

impl Hold {
    /// One step on the interrupt thread: restart what should be, then hold
    /// while any held port is up. Returns the delay before the next step,
    /// or None when the run stops.
    fn step(&self) -> Option<u64> {
        if self.stop.load(Relaxed) {
            return None;
        }
        // From here until this returns no PMD interrupt handler runs.
        let gate = &self.links.gate;
        for p in self.ports.iter().filter(|p| p.restart) {
            let mut started = p.started.lock().unwrap_or_else(|p| p.into_inner());
            if port::link_up(p.id) {
                *started = None;
                continue;
            }
            let stopped = !p.running.load(Relaxed);
            let wait = if stopped { RETRY_EVERY } else { HANDSHAKE_WAIT };
            if started.is_none_or(|t| t.elapsed() >= wait) {
                *started = Some(Instant::now());
                // HELD is clear between holds: no worker polls it.
                let _ = port::restart(p.id, &p.running);
            }
        }
        // A held port's link changes only between holds: each is seen here.
        let mut any = false;
        for p in &self.ports {
            if let Some(i) = p.index {
                self.links.observe(i);
            }
            if port::link_up(p.id) {
                gate.open(p.id, HELD);
                any = true;
            }
        }
        if !any {
            return Some(IDLE_US);
        }
        {
            let g = self.wake.0.lock().unwrap_or_else(|p| p.into_inner());
            if !self.stop.load(Relaxed) {
                let _ = self.wake.1.wait_timeout(g, HOLD_FOR);
            }
        }
        // Let go only once no worker is inside a held port's burst.
        let mut epoch = 0;
        for p in &self.ports {
            epoch = gate.clear(p.id, HELD);
        }
        gate.quiesce(epoch);
        (!self.stop.load(Relaxed)).then_some(HOLD_GAP_US)
    }
}

/// The EAL alarm that runs the hold's steps on the interrupt thread.
///
/// # Safety
/// `arg` points to the `Hold` that `LinkWatch` keeps alive until it has
/// cancelled this alarm (the cancel waits for a running callback).
unsafe extern "C" fn hold_step(arg: *mut c_void) {
    // SAFETY: the caller's contract: arg is a live Hold.
    let hold = unsafe { &*(arg as *const Hold) };
    if let Some(us) = hold.step() {
        // SAFETY: the same Hold, alive until the alarm is cancelled. If
        // arming fails the held ports stay closed (not polled): safe.
        unsafe { alarm_set(us, hold_step, arg) };
    }
}

/// `RTE_ETH_EVENT_INTR_LSC` on a port: look at its link now.
///
/// # Safety
/// `arg` points to the `Links` that `LinkWatch` keeps alive until it has
/// unregistered this callback.
unsafe extern "C" fn on_lsc(
    port_id: u16,
    _event: rte_eth_event_type,
    arg: *mut c_void,
    _ret: *mut c_void,
) -> c_int {
    // SAFETY: the caller's contract: arg is a live Links.
    let links = unsafe { &*(arg as *const Links) };
    if let Some(i) = links.index_of(port_id) {
        links.observe(i);
    }
    0
}

/// The run's link watch: its thread, its LSC callbacks, its hold.
pub(super) struct LinkWatch {
    links: Arc<Links>,
    hold: Option<Arc<Hold>>,
    /// Ports with our LSC callback registered.
    lsc: Vec<u16>,
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: Option<JoinHandle<()>>,
}

impl LinkWatch {
    /// Starts watching the RX ports of `ports`, and holding for the outputs
    /// that need it (the workers already run with `gate`). `specs` and
    /// `out_specs` are how they were named. Returns notes on what could not
    /// be set up.
    pub fn start(
        ports: &Ports,
        specs: &[PortSpec],
        out_specs: &[PortSpec],
        gate: Arc<PollGate>,
    ) -> (LinkWatch, Vec<String>) {
        let mut notes = Vec::new();
        let states = initial_states(ports, &gate);
        let links = Arc::new(Links {
            gate,
            ports: Mutex::new(states),
        });
        let lsc = register_lsc(ports, &links);
        let held = held_ports(ports, specs, out_specs);
        let hold = (!held.is_empty()).then(|| {
            Arc::new(Hold {
                links: links.clone(),
                ports: held,
                stop: AtomicBool::new(false),
                wake: (Mutex::new(()), Condvar::new()),
            })
        });
        if let Some(h) = &hold {
            // SAFETY: hold_step reads arg as the Hold, which this watch
            // keeps alive until `stop` has cancelled the alarm.
            let r = unsafe { alarm_set(1, hold_step, Arc::as_ptr(h) as *mut c_void) };
            if r != 0 {
                notes.push(format!(
                    "link watch: cannot arm an EAL alarm ({}): memif ports are not polled",
                    crate::dpdk::eal::strerror(-r)
                ));
            }
        }
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let thread = match spawn_watch(links.clone(), stop.clone()) {
            Ok(t) => Some(t),
            Err(e) => {
                notes.push(format!(
                    "link watch: no thread ({e}): links are read on events only"
                ));
                None
            }
        };
        (
            LinkWatch {
                links,
                hold,
                lsc,
                stop,
                thread,
            },
            notes,
        )
    }

    /// Each RX port's link, downs and time down so far.
    pub fn stats(&self) -> Vec<LinkStats> {
        self.links.stats()
    }

    /// Stops watching: the hold lets go for good (its ports closed), the
    /// callbacks are gone, the thread has ended. Idempotent.
    pub fn stop(&mut self) {
        {
            let mut s = self.stop.0.lock().unwrap_or_else(|p| p.into_inner());
            *s = true;
            self.stop.1.notify_all();
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        if let Some(h) = self.hold.take() {
            h.stop.store(true, Relaxed);
            {
                let _g = h.wake.0.lock().unwrap_or_else(|p| p.into_inner());
                h.wake.1.notify_all();
            }
            // SAFETY: cancels our own alarm, from outside it; waits for a
            // running step, which sees `stop` and arms no other.
            unsafe { alarm_cancel(hold_step, Arc::as_ptr(&h) as *mut c_void) };
        }
        for id in self.lsc.drain(..) {
            loop {
                // SAFETY: unregisters, from outside it, the callback
                // registered in `start` with the same function and argument.
                let r = unsafe {
                    ethdev::lsc_unregister(id, on_lsc, Arc::as_ptr(&self.links) as *mut c_void)
                };
                // -EAGAIN: the callback is running right now.
                if r != -libc::EAGAIN {
                    break;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }
}

impl Drop for LinkWatch {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Each RX port's link as the run starts. A port that starts down is
/// closed, and its time down counts from now; it has not gone down.
fn initial_states(ports: &Ports, gate: &PollGate) -> Vec<PortState> {
    let t0 = Instant::now();
    ports
        .slots
        .iter()
        .map(|s| {
            let up = port::link_up(s.port.id);
            if !up {
                gate.close(s.port.id, LINK);
            }
            PortState {
                id: s.port.id,
                up,
                downs: 0,
                down_total: Duration::ZERO,
                down_since: (!up).then_some(t0),
            }
        })
        .collect()
}

/// Registers `on_lsc` on every RX port that takes it; returns those ports.
fn register_lsc(ports: &Ports, links: &Arc<Links>) -> Vec<u16> {
    let mut lsc = Vec::new();
    for s in &ports.slots {
        // SAFETY: on_lsc reads arg as the Links, which the watch keeps
        // alive until `stop` has unregistered the callback.
        let r =
            unsafe { ethdev::lsc_register(s.port.id, on_lsc, Arc::as_ptr(links) as *mut c_void) };
        if r == 0 {
            lsc.push(s.port.id);
        }
    }
    lsc
}

/// The ports (RX, then outputs) whose driver needs the interrupt thread
/// held while workers poll them.
fn held_ports(ports: &Ports, specs: &[PortSpec], out_specs: &[PortSpec]) -> Vec<HeldPort> {
    let rx = ports.slots.len();
    all_ports(ports)
        .enumerate()
        .filter(|(_, p)| needs_holding(&p.driver))
        .map(|(i, p)| HeldPort {
            id: p.id,
            index: (i < rx).then_some(i),
            restart: connects_when_started(if i < rx { specs } else { out_specs }, p),
            running: p.running(),
            started: Mutex::new(Some(Instant::now())),
        })
        .collect()
}

/// The watch thread: every port's link, every `WATCH_EVERY`, until `stop`.
fn spawn_watch(
    links: Arc<Links>,
    stop: Arc<(Mutex<bool>, Condvar)>,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("grorx-link".into())
        .spawn(move || loop {
            let g = stop.0.lock().unwrap_or_else(|p| p.into_inner());
            let (g, _) = stop
                .1
                .wait_timeout_while(g, WATCH_EVERY, |s| !*s)
                .unwrap_or_else(|p| p.into_inner());
            if *g {
                break;
            }
            drop(g);
            links.observe_all();
        })
}
