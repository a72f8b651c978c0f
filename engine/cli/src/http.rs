//! A small HTTP/1.1 server for the metrics endpoint, whose resources stay
//! bounded whatever its clients do: one thread, at most `max_connections`
//! sockets (past that the connection idle longest is closed), a request
//! line and headers of at most `max_request_bytes` (431, then close), time
//! limits on a request, a keep-alive wait and a response's progress, one
//! response in flight per connection (a client that pipelines and never
//! reads holds one response's memory, until the write timeout closes it),
//! and no accept error that ends it (out of file descriptors: counted, the
//! oldest connection closed, the listener rested for a moment).
//!
//! Why not a library: the maintained servers either run a thread per
//! connection (tiny_http, whose accept loop unwraps EMFILE) or come with an
//! async runtime and its thread pool; a scrape is a few KiB every few
//! seconds, which one thread with `poll(2)` serves.

use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// What a client may cost the server.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Open connections; one more closes the connection idle longest.
    pub max_connections: usize,
    /// Bytes of a request line and its headers.
    pub max_request_bytes: usize,
    /// From a connection's accept, or a request's first byte, to the end of
    /// the request's headers.
    pub request_timeout: Duration,
    /// Between two requests on a kept-alive connection.
    pub idle_timeout: Duration,
    /// A response that makes no progress this long is given up.
    pub write_timeout: Duration,
    /// Requests on one connection before it is closed.
    pub max_requests: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: 64,
            max_request_bytes: 8 << 10,
            request_timeout: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(30),
            write_timeout: Duration::from_secs(10),
            max_requests: 1000,
        }
    }
}

/// What the server did, for its own metrics.
#[derive(Debug, Default)]
pub struct Counts {
    /// Connections accepted.
    pub accepted: AtomicU64,
    /// Connections closed at once: their address is not allowed.
    pub refused: AtomicU64,
    /// Connections closed to make room for a new one.
    pub evicted: AtomicU64,
    /// Accepts that failed (out of file descriptors, ...).
    pub accept_errors: AtomicU64,
    /// Connections closed for a request, keep-alive wait or response that
    /// took too long.
    pub timed_out: AtomicU64,
    /// Requests whose line and headers were too long (431).
    pub too_large: AtomicU64,
    /// Requests that were not HTTP the server takes (400).
    pub bad_requests: AtomicU64,
    /// Responses written whole.
    pub responses: AtomicU64,
}

impl Counts {
    /// Each count by the name the metrics give it.
    pub fn by_event(&self) -> [(&'static str, u64); 8] {
        [
            ("accepted", self.accepted.load(Relaxed)),
            ("refused", self.refused.load(Relaxed)),
            ("evicted", self.evicted.load(Relaxed)),
            ("accept_error", self.accept_errors.load(Relaxed)),
            ("timed_out", self.timed_out.load(Relaxed)),
            ("too_large", self.too_large.load(Relaxed)),
            ("bad_request", self.bad_requests.load(Relaxed)),
            ("response", self.responses.load(Relaxed)),
        ]
    }
}

/// An address block (`10.0.0.0/8`, `::1/128`; a bare address is itself).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    net: IpAddr,
    len: u8,
}

impl Cidr {
    pub fn parse(s: &str) -> Result<Cidr, String> {
        let bad =
            || format!("{s}: not an address block; give e.g. 10.0.0.0/8, 192.0.2.7 or ::1/128");
        let (a, l) = match s.split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (s, None),
        };
        let net: IpAddr = a.trim().parse().map_err(|_| bad())?;
        let max = if net.is_ipv4() { 32 } else { 128 };
        let len = match l {
            Some(l) => l
                .trim()
                .parse::<u8>()
                .ok()
                .filter(|&n| n <= max)
                .ok_or_else(bad)?,
            None => max,
        };
        Ok(Cidr { net, len })
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        let bits = |ip: IpAddr| -> (u128, u8) {
            match ip.to_canonical() {
                IpAddr::V4(a) => (u32::from(a) as u128, 32),
                IpAddr::V6(a) => (u128::from(a), 128),
            }
        };
        let ((n, w), (x, xw)) = (bits(self.net), bits(ip));
        if w != xw {
            return false;
        }
        let shift = w - self.len;
        self.len == 0 || (n >> shift) == (x >> shift)
    }
}

/// A request the server took whole.
#[derive(Debug)]
pub struct Request<'a> {
    pub method: &'a str,
    /// The path, without the query.
    pub path: &'a str,
}

/// What the handler answers.
pub struct Response {
    pub status: u16,
    pub content_type: &'static str,
    pub body: Vec<u8>,
    /// An `Allow` header (a 405's).
    pub allow: Option<&'static str>,
}

impl Response {
    pub fn text(status: u16, body: &str) -> Response {
        Response {
            status,
            content_type: "text/plain; charset=utf-8",
            body: body.as_bytes().to_vec(),
            allow: None,
        }
    }
}

struct Conn {
    s: TcpStream,
    /// What has come in and is not yet answered.
    buf: Vec<u8>,
    /// The response being written, and how much of it is out.
    out: Vec<u8>,
    sent: usize,
    /// When the current wait began (accept, a request's first byte, the
    /// last write progress, the end of the last response).
    since: Instant,
    /// Whether a request was answered on it already (its wait is then a
    /// keep-alive wait).
    answered: u32,
    close_after: bool,
    /// The last response is out and our side shut: what still comes in is
    /// read and dropped until the client closes (or the request timeout),
    /// so that it reads the response instead of a reset.
    draining: bool,
}

impl Conn {
    fn writing(&self) -> bool {
        self.sent < self.out.len()
    }
}

/// The server: its listener, its connections, what it counted.
pub struct Server<'c> {
    listener: TcpListener,
    limits: Limits,
    allow: Vec<Cidr>,
    conns: Vec<Conn>,
    counts: &'c Counts,
    /// Accepts rest until then (after a failed one).
    rest_until: Option<Instant>,
}

/// How long a failed accept rests the listener.
const ACCEPT_REST: Duration = Duration::from_millis(50);
/// The longest one poll waits (the stop flag is read between polls).
const POLL_MAX: Duration = Duration::from_millis(100);

impl<'c> Server<'c> {
    pub fn new(
        listener: TcpListener,
        limits: Limits,
        allow: Vec<Cidr>,
        counts: &'c Counts,
    ) -> io::Result<Server<'c>> {
        listener.set_nonblocking(true)?;
        Ok(Server {
            listener,
            limits,
            allow,
            conns: Vec::new(),
            counts,
            rest_until: None,
        })
    }

    /// Connections open now.
    pub fn connections(&self) -> usize {
        self.conns.len()
    }

    /// Serves until `stop` is set.
    pub fn run(&mut self, stop: &AtomicBool, handle: &mut dyn FnMut(&Request) -> Response) {
        while !stop.load(Relaxed) {
            self.step(POLL_MAX, handle);
        }
    }

    /// One round: waits up to `wait` for something to do, then accepts,
    /// reads, answers, writes and closes what is due.
    pub fn step(&mut self, wait: Duration, handle: &mut dyn FnMut(&Request) -> Response) {
        let now = Instant::now();
        let resting = self.rest_until.is_some_and(|t| now < t);
        let mut fds = Vec::with_capacity(self.conns.len() + 1);
        fds.push(libc::pollfd {
            fd: self.listener.as_raw_fd(),
            events: if resting { 0 } else { libc::POLLIN },
            revents: 0,
        });
        for c in &self.conns {
            fds.push(libc::pollfd {
                fd: c.s.as_raw_fd(),
                events: if c.writing() {
                    libc::POLLOUT
                } else {
                    libc::POLLIN
                },
                revents: 0,
            });
        }
        let ms = wait.min(POLL_MAX).as_millis() as i32;
        // SAFETY: fds is a live array of fds.len() pollfds for the call.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
        if n < 0 {
            return; // EINTR, or ENOMEM: try again next round.
        }
        // Connections first (the accepts below may close some), by index
        // into `fds` (connection i is fds[i + 1]).
        let mut close = vec![false; self.conns.len()];
        for (i, c) in self.conns.iter_mut().enumerate() {
            let ev = fds[i + 1].revents;
            if ev == 0 {
                continue;
            }
            close[i] = !serve_conn(c, ev, &self.limits, self.counts, handle);
        }
        // Time limits.
        let now = Instant::now();
        for (i, c) in self.conns.iter().enumerate() {
            let limit = if c.draining {
                self.limits.request_timeout
            } else if c.writing() {
                self.limits.write_timeout
            } else if c.buf.is_empty() && c.answered > 0 {
                self.limits.idle_timeout
            } else {
                self.limits.request_timeout
            };
            if !close[i] && now.duration_since(c.since) > limit {
                close[i] = true;
                if !c.draining {
                    self.counts.timed_out.fetch_add(1, Relaxed);
                }
            }
        }
        let mut i = 0;
        self.conns.retain(|_| {
            i += 1;
            !close[i - 1]
        });
        if fds[0].revents != 0 || (!resting && self.rest_until.is_some()) {
            self.rest_until = None;
            self.accept_all();
        }
    }

    /// Takes every pending connection.
    fn accept_all(&mut self) {
        loop {
            match self.listener.accept() {
                Ok((s, peer)) => self.admit(s, peer),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    // Out of file descriptors (EMFILE, ENFILE), or a
                    // connection that went before it was taken: counted;
                    // a descriptor freed for the next try, which waits a
                    // moment so that a full process does not spin.
                    self.counts.accept_errors.fetch_add(1, Relaxed);
                    if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) {
                        self.evict_idlest();
                    }
                    self.rest_until = Some(Instant::now() + ACCEPT_REST);
                    return;
                }
            }
        }
    }

    fn admit(&mut self, s: TcpStream, peer: SocketAddr) {
        if !self.allow.is_empty() && !self.allow.iter().any(|c| c.contains(peer.ip())) {
            self.counts.refused.fetch_add(1, Relaxed);
            return; // dropped: closed
        }
        if s.set_nonblocking(true).is_err() {
            return;
        }
        let _ = s.set_nodelay(true);
        if self.conns.len() >= self.limits.max_connections {
            self.evict_idlest();
        }
        self.counts.accepted.fetch_add(1, Relaxed);
        self.conns.push(Conn {
            s,
            buf: Vec::new(),
            out: Vec::new(),
            sent: 0,
            since: Instant::now(),
            answered: 0,
            close_after: false,
            draining: false,
        });
    }

    /// Closes the connection that has waited longest with nothing to write.
    fn evict_idlest(&mut self) {
        let victim = (self.conns.iter().enumerate())
            .min_by_key(|(_, c)| (c.writing(), c.since))
            .map(|(i, _)| i);
        if let Some(i) = victim {
            self.conns.swap_remove(i);
            self.counts.evicted.fetch_add(1, Relaxed);
        }
    }
}

/// Reads, answers and writes what `revents` allows, requests that came
/// pipelined one after the other; false: close it.
fn serve_conn(
    c: &mut Conn,
    revents: i16,
    limits: &Limits,
    counts: &Counts,
    handle: &mut dyn FnMut(&Request) -> Response,
) -> bool {
    if revents & (libc::POLLERR | libc::POLLNVAL) != 0 {
        return false;
    }
    if c.draining {
        let mut sink = [0u8; 4096];
        return match c.s.read(&mut sink) {
            Ok(n) => n > 0,
            Err(e) => matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
            ),
        };
    }
    if !c.writing() {
        // Up to what a request may take, never more.
        let mut chunk = [0u8; 4096];
        let room = limits
            .max_request_bytes
            .saturating_sub(c.buf.len())
            .min(chunk.len());
        if room > 0 {
            match c.s.read(&mut chunk[..room]) {
                Ok(0) => return false,
                Ok(n) => {
                    if c.buf.is_empty() {
                        c.since = Instant::now();
                    }
                    c.buf.extend_from_slice(&chunk[..n]);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return false,
            }
        }
    }
    loop {
        if c.writing() {
            if !write_out(c, counts) {
                return false;
            }
            if c.writing() {
                return true; // the socket is full: on with POLLOUT
            }
            if c.close_after {
                c.draining = true;
                c.since = Instant::now();
                return c.s.shutdown(std::net::Shutdown::Write).is_ok();
            }
        }
        answer_one(c, limits, counts, handle);
        if !c.writing() {
            return true; // no whole request left: on with POLLIN
        }
    }
}

/// Answers the request at the front of `buf`, if it came whole (or can
/// never be one).
fn answer_one(
    c: &mut Conn,
    limits: &Limits,
    counts: &Counts,
    handle: &mut dyn FnMut(&Request) -> Response,
) {
    let Some(end) = find(&c.buf, b"\r\n\r\n") else {
        if c.buf.len() >= limits.max_request_bytes {
            counts.too_large.fetch_add(1, Relaxed);
            c.buf.clear();
            set_response(
                c,
                &Response::text(431, "request line and headers too long\n"),
                false,
                true,
            );
        }
        return;
    };
    let head = c.buf[..end].to_vec();
    c.buf.drain(..end + 4);
    let Some(req) = parse(&head) else {
        counts.bad_requests.fetch_add(1, Relaxed);
        c.buf.clear();
        set_response(c, &Response::text(400, "bad request\n"), false, true);
        return;
    };
    c.answered += 1;
    let close = req.close || c.answered >= limits.max_requests;
    let resp = handle(&Request {
        method: req.method,
        path: req.path,
    });
    set_response(c, &resp, req.method == "HEAD", close);
}

/// A request's head, read: what the server needs of it.
struct Head<'a> {
    method: &'a str,
    path: &'a str,
    close: bool,
}

/// The request line and the headers that matter; None: not a request
/// this server takes (a body, a bad line, not HTTP/1.x).
fn parse(head: &[u8]) -> Option<Head<'_>> {
    let text = std::str::from_utf8(head).ok()?;
    let mut lines = text.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let (method, target, version) = (first.next()?, first.next()?, first.next()?);
    if first.next().is_some() || method.is_empty() || !target.starts_with('/') {
        return None;
    }
    let http10 = match version {
        "HTTP/1.1" => false,
        "HTTP/1.0" => true,
        _ => return None,
    };
    let mut close = http10;
    for line in lines {
        let (name, value) = line.split_once(':')?;
        let value = value.trim().to_ascii_lowercase();
        match name.trim().to_ascii_lowercase().as_str() {
            "connection" if value.contains("close") => close = true,
            "connection" if value.contains("keep-alive") => close = false,
            // A body is not something a metrics scrape sends.
            "content-length" if value != "0" => return None,
            "transfer-encoding" => return None,
            _ => {}
        }
    }
    let path = target.split('?').next().unwrap_or(target);
    Some(Head {
        method,
        path,
        close,
    })
}

fn set_response(c: &mut Conn, r: &Response, head_only: bool, close: bool) {
    let reason = match r.status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        _ => "",
    };
    let mut out = format!(
        "HTTP/1.1 {} {reason}\r\nContent-Type: {}\r\nContent-Length: {}\r\n",
        r.status,
        r.content_type,
        r.body.len()
    )
    .into_bytes();
    if let Some(a) = r.allow {
        out.extend_from_slice(format!("Allow: {a}\r\n").as_bytes());
    }
    if close {
        out.extend_from_slice(b"Connection: close\r\n");
    }
    out.extend_from_slice(b"\r\n");
    if !head_only {
        out.extend_from_slice(&r.body);
    }
    c.out = out;
    c.sent = 0;
    c.close_after = close;
    c.since = Instant::now();
}

/// Writes what the socket takes; false: the connection is gone.
fn write_out(c: &mut Conn, counts: &Counts) -> bool {
    while c.writing() {
        match c.s.write(&c.out[c.sent..]) {
            Ok(0) => return false,
            Ok(n) => {
                c.sent += n;
                c.since = Instant::now();
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
    counts.responses.fetch_add(1, Relaxed);
    c.out = Vec::new();
    c.sent = 0;
    true
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    /// A server on loopback with these limits, serving "hi" at /m, on a
    /// thread of its own until the returned flag is set.
    fn serve(limits: Limits, allow: Vec<Cidr>) -> (SocketAddr, Arc<AtomicBool>, Arc<Counts>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let counts = Arc::new(Counts::default());
        let (st, co) = (stop.clone(), counts.clone());
        std::thread::spawn(move || {
            let mut s = Server::new(l, limits, allow, &co).unwrap();
            s.run(&st, &mut |r: &Request| match r.path {
                "/m" => Response::text(200, "hi\n"),
                _ => Response::text(404, "no\n"),
            });
        });
        (addr, stop, counts)
    }

    fn exchange(addr: SocketAddr, req: &[u8]) -> String {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(req).unwrap();
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        String::from_utf8_lossy(&out).into_owned()
    }

    #[test]
    fn a_get_is_answered_and_http_1_0_closes() {
        let (a, stop, _) = serve(Limits::default(), vec![]);
        let r = exchange(a, b"GET /m?x=1 HTTP/1.0\r\nHost: x\r\n\r\n");
        assert!(r.starts_with("HTTP/1.1 200 OK\r\n"), "{r}");
        assert!(
            r.contains("Content-Length: 3\r\n") && r.ends_with("\r\n\r\nhi\n"),
            "{r}"
        );
        let r = exchange(a, b"GET /nope HTTP/1.1\r\nConnection: close\r\n\r\n");
        assert!(r.starts_with("HTTP/1.1 404"), "{r}");
        stop.store(true, Relaxed);
    }

    #[test]
    fn pipelined_requests_are_answered_in_turn_on_one_connection() {
        let (a, stop, c) = serve(Limits::default(), vec![]);
        let r = exchange(a, b"GET /m HTTP/1.1\r\n\r\nHEAD /m HTTP/1.1\r\n\r\nGET /m HTTP/1.1\r\nConnection: close\r\n\r\n");
        assert_eq!(r.matches("HTTP/1.1 200 OK").count(), 3, "{r}");
        assert_eq!(r.matches("hi\n").count(), 2, "HEAD has no body: {r}");
        assert_eq!(c.responses.load(Relaxed), 3);
        stop.store(true, Relaxed);
    }

    #[test]
    fn headers_past_the_limit_get_431_and_a_close() {
        let lim = Limits {
            max_request_bytes: 1024,
            ..Limits::default()
        };
        let (a, stop, c) = serve(lim, vec![]);
        let mut req = b"GET /m HTTP/1.1\r\nX: ".to_vec();
        req.extend(std::iter::repeat_n(b'a', 4000));
        let r = exchange(a, &req);
        assert!(r.starts_with("HTTP/1.1 431"), "{r}");
        assert_eq!(c.too_large.load(Relaxed), 1);
        stop.store(true, Relaxed);
    }

    #[test]
    fn not_http_or_a_body_is_a_400() {
        let (a, stop, c) = serve(Limits::default(), vec![]);
        for req in [
            &b"hello\r\n\r\n"[..],
            b"GET /m HTTP/2.0\r\n\r\n",
            b"POST /m HTTP/1.1\r\nContent-Length: 5\r\n\r\nabcde",
        ] {
            let r = exchange(a, req);
            assert!(r.starts_with("HTTP/1.1 400"), "{req:?}: {r}");
        }
        assert_eq!(c.bad_requests.load(Relaxed), 3);
        stop.store(true, Relaxed);
    }

    #[test]
    fn past_the_connection_cap_the_idlest_is_closed_and_a_new_one_served() {
        let lim = Limits {
            max_connections: 4,
            ..Limits::default()
        };
        let (a, stop, c) = serve(lim, vec![]);
        let idle: Vec<TcpStream> = (0..10).map(|_| TcpStream::connect(a).unwrap()).collect();
        std::thread::sleep(Duration::from_millis(300));
        let r = exchange(a, b"GET /m HTTP/1.0\r\n\r\n");
        assert!(r.starts_with("HTTP/1.1 200"), "{r}");
        assert!(c.evicted.load(Relaxed) >= 7, "{:?}", c.by_event());
        drop(idle);
        stop.store(true, Relaxed);
    }

    #[test]
    fn silent_and_slow_connections_time_out() {
        let lim = Limits {
            request_timeout: Duration::from_millis(200),
            ..Limits::default()
        };
        let (a, stop, c) = serve(lim, vec![]);
        let mut s = TcpStream::connect(a).unwrap();
        s.write_all(b"GET /m HTTP/1.1\r\n").unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut out = Vec::new();
        assert_eq!(
            s.read_to_end(&mut out).unwrap(),
            0,
            "closed without an answer"
        );
        assert_eq!(c.timed_out.load(Relaxed), 1);
        stop.store(true, Relaxed);
    }

    #[test]
    fn an_address_outside_the_allow_list_is_closed_at_once() {
        let (a, stop, c) = serve(
            Limits::default(),
            vec![Cidr::parse("192.0.2.0/24").unwrap()],
        );
        let r = exchange(a, b"GET /m HTTP/1.0\r\n\r\n");
        assert_eq!(r, "", "nothing answered");
        assert_eq!(c.refused.load(Relaxed), 1);
        stop.store(true, Relaxed);
    }

    #[test]
    fn cidr_blocks_contain_what_they_should() {
        let c = Cidr::parse("10.1.0.0/16").unwrap();
        assert!(c.contains("10.1.200.3".parse().unwrap()));
        assert!(!c.contains("10.2.0.1".parse().unwrap()));
        assert!(
            c.contains("::ffff:10.1.0.9".parse().unwrap()),
            "an IPv4-mapped peer"
        );
        assert!(!c.contains("::1".parse().unwrap()));
        assert!(Cidr::parse("::1").unwrap().contains("::1".parse().unwrap()));
        assert!(Cidr::parse("0.0.0.0/0")
            .unwrap()
            .contains("203.0.113.1".parse().unwrap()));
        for bad in ["10.0.0.0/33", "nope", "10.0.0.0/x", "::1/129"] {
            assert!(Cidr::parse(bad).is_err(), "{bad}");
        }
    }
}
