//! A small HTTP/1.x server for `/metrics`, on std alone, with strict limits: a fixed set of
//! threads (one accepting, a few answering), a bounded queue between them, a request head of at
//! most 8 KiB read within 2 s in all, only `GET` and `HEAD`, one request per connection. Anything
//! else is answered with a 4xx and the connection closed; a full queue is answered 503 at once.
//! No input can make it panic, and a panic in the handler would cost one answer (500), not a thread.
//!
//! Its threads run in the normal scheduling class on the CPUs [`Placement`] names (the CPUs not
//! being measured), so no amount of traffic can delay a real-time measuring thread: they share no
//! lock with it and cannot run on its CPU.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What the server accepts and how long it waits.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Threads answering requests.
    pub workers: usize,
    /// Connections accepted but not yet answered; beyond this, 503.
    pub queue: usize,
    /// Largest request head (request line and headers).
    pub head_bytes: usize,
    /// The whole head must arrive within this (a client sending a byte a second gets 408).
    pub head_time: Duration,
    /// Writing an answer may take this long (a client that does not read is dropped).
    pub write_time: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            workers: 4,
            queue: 1024,
            head_bytes: 8192,
            head_time: Duration::from_secs(2),
            write_time: Duration::from_secs(10),
        }
    }
}

/// A parsed request: only what the handler needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub method: Method,
    /// The path, without the query.
    pub path: String,
    /// The `Accept` header, if any.
    pub accept: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    Get,
    Head,
}

/// An answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub content_type: String,
    pub body: Vec<u8>,
    /// Extra header lines (`Allow: GET, HEAD`).
    pub headers: Vec<(String, String)>,
}

impl Response {
    pub fn new(status: u16, content_type: &str, body: impl Into<Vec<u8>>) -> Response {
        Response {
            status,
            content_type: content_type.into(),
            body: body.into(),
            headers: Vec::new(),
        }
    }

    /// A plain-text error answer.
    pub fn error(status: u16, why: &str) -> Response {
        Response::new(
            status,
            "text/plain; charset=utf-8",
            format!("{status} {}: {why}\n", reason(status)),
        )
    }
}

/// Answers requests. Called on the server's threads, never on a measuring thread.
pub trait Handler: Send + Sync {
    fn handle(&self, req: &Request) -> Response;
}

/// Counts of what the server did, for its own metrics.
#[derive(Debug, Default)]
pub struct ServerStats {
    /// Answers by status class: index 0 for 2xx, 1 for 4xx, 2 for 5xx.
    pub answered: [AtomicU64; 3],
    /// Connections closed before an answer could be written.
    pub dropped: AtomicU64,
}

impl ServerStats {
    fn count(&self, status: u16) {
        let i = match status {
            200..=299 => 0,
            400..=499 => 1,
            _ => 2,
        };
        self.answered[i].fetch_add(1, Ordering::Relaxed);
    }
}

/// Where the server's threads may run: the CPUs not being measured. Changing it (a new
/// measurement configuration) moves every thread before its next request.
#[derive(Debug, Default)]
pub struct Placement {
    cpus: Mutex<Vec<usize>>,
    generation: AtomicU64,
}

impl Placement {
    /// Threads keep off `measured` (on every online CPU when nothing else is left).
    pub fn avoiding(measured: &[usize]) -> Placement {
        let p = Placement::default();
        p.avoid(measured);
        p
    }

    pub fn avoid(&self, measured: &[usize]) {
        let mut cpus: Vec<usize> = punctual_rt::online_cpus()
            .into_iter()
            .filter(|c| !measured.contains(c))
            .collect();
        if cpus.is_empty() {
            cpus = punctual_rt::online_cpus();
        }
        *self.cpus.lock().unwrap_or_else(|p| p.into_inner()) = cpus;
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// The CPUs threads may run on now.
    pub fn cpus(&self) -> Vec<usize> {
        self.cpus.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Put the calling thread in the normal class on the placement's CPUs, if it changed since
    /// `seen` (which is updated). Failures are ignored: the thread then runs where it was.
    pub fn apply(&self, seen: &mut u64) {
        let g = self.generation.load(Ordering::Acquire);
        if g == *seen {
            return;
        }
        *seen = g;
        normal_class();
        let cpus = self.cpus();
        let _ = punctual_rt::affinity::set(0, &cpus);
    }
}

/// The calling thread in SCHED_OTHER, nice 0 (threads inherit their creator's class).
fn normal_class() {
    let p = libc::sched_param { sched_priority: 0 };
    // SAFETY: plain syscall on the calling thread with a valid parameter block.
    unsafe {
        libc::sched_setscheduler(0, libc::SCHED_OTHER, &p);
    }
}

/// A running server; [`Server::stop`] (or dropping it) ends its threads.
pub struct Server {
    addr: std::net::SocketAddr,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    pub stats: Arc<ServerStats>,
}

impl Server {
    /// Serve `listener` with `handler` on threads placed by `placement`.
    pub fn start(
        listener: TcpListener,
        handler: Arc<dyn Handler>,
        placement: Arc<Placement>,
        limits: Limits,
        stats: Arc<ServerStats>,
    ) -> io::Result<Server> {
        let addr = listener.local_addr()?;
        listener.set_nonblocking(true)?;
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = sync_channel::<TcpStream>(limits.queue.max(1));
        let rx = Arc::new(Mutex::new(rx));
        let mut threads = Vec::new();
        for i in 0..limits.workers.max(1) {
            let rx = rx.clone();
            let handler = handler.clone();
            let placement = placement.clone();
            let stats = stats.clone();
            threads.push(
                std::thread::Builder::new()
                    .name(format!("punctual-http{i}"))
                    .spawn(move || worker(&rx, &*handler, &placement, &stats, limits))?,
            );
        }
        let (stop2, stats2) = (stop.clone(), stats.clone());
        threads.push(
            std::thread::Builder::new()
                .name("punctual-accept".into())
                .spawn(move || {
                    // On a measured CPU, the monitor's own threads are `dispatcher` to --explain.
                    punctual_explain::own_thread(punctual_explain::here().0);
                    let mut seen = u64::MAX;
                    while !stop2.load(Ordering::Relaxed) {
                        placement.apply(&mut seen);
                        if !readable(&listener, 200) {
                            continue;
                        }
                        loop {
                            let stream = match listener.accept() {
                                Ok((s, _)) => s,
                                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                                Err(_) => {
                                    // Out of descriptors (or the like): let answers finish
                                    // rather than spin on a listener that stays readable.
                                    std::thread::sleep(Duration::from_millis(10));
                                    break;
                                }
                            };
                            match tx.try_send(stream) {
                                Ok(()) => {}
                                Err(TrySendError::Full(s)) => {
                                    busy(s, &stats2);
                                }
                                Err(TrySendError::Disconnected(_)) => return,
                            }
                        }
                    }
                    // Dropping the sender ends the workers once the queue is empty.
                })?,
        );
        Ok(Server {
            addr,
            stop,
            threads,
            stats,
        })
    }

    /// Where it listens (with the port the kernel chose for `:0`).
    pub fn addr(&self) -> std::net::SocketAddr {
        self.addr
    }

    /// Stop accepting, answer what was queued, and end the threads.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// The listening socket's backlog: connections the kernel completes before they are accepted
/// (std's 128 would drop the SYNs of a burst of scrapes, which clients retry only after a second).
pub const BACKLOG: i32 = 1024;

/// Set `listener`'s backlog to [`BACKLOG`] (Linux takes a second `listen` as a change).
pub fn widen_backlog(listener: &TcpListener) {
    // SAFETY: listen on a socket we own, already listening.
    unsafe {
        libc::listen(listener.as_raw_fd(), BACKLOG);
    }
}

/// Raise this process's descriptor limit to `want` (at most the hard limit), so a full queue of
/// connections cannot run it out of descriptors. Process-local: it ends with the process.
pub fn raise_fd_limit(want: u64) {
    let mut l = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: valid rlimit pointers for this process's own limit.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) == 0 && l.rlim_cur < want {
            l.rlim_cur = want.min(l.rlim_max);
            libc::setrlimit(libc::RLIMIT_NOFILE, &l);
        }
    }
}

/// Wait up to `ms` for a connection to accept.
fn readable(listener: &TcpListener, ms: i32) -> bool {
    let mut p = libc::pollfd {
        fd: listener.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd for the listener we own.
    unsafe { libc::poll(&mut p, 1, ms) > 0 }
}

/// The queue is full: say so without waiting for the client, and close.
fn busy(mut s: TcpStream, stats: &ServerStats) {
    let _ = s.set_nonblocking(true);
    let r = Response::error(503, "too many requests at once; try again");
    if write_response(&mut s, &r, true).is_ok() {
        stats.count(503);
    } else {
        stats.dropped.fetch_add(1, Ordering::Relaxed);
    }
    let _ = s.shutdown(Shutdown::Both);
}

fn worker(
    rx: &Mutex<Receiver<TcpStream>>,
    handler: &dyn Handler,
    placement: &Placement,
    stats: &ServerStats,
    limits: Limits,
) {
    punctual_explain::own_thread(punctual_explain::here().0);
    let mut seen = u64::MAX;
    loop {
        placement.apply(&mut seen);
        let next = {
            let rx = rx.lock().unwrap_or_else(|p| p.into_inner());
            rx.recv_timeout(Duration::from_millis(200))
        };
        match next {
            Ok(stream) => serve(stream, handler, stats, limits),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => continue,
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return,
        }
    }
}

/// One connection: read the head, answer, close.
fn serve(mut s: TcpStream, handler: &dyn Handler, stats: &ServerStats, limits: Limits) {
    let _ = s.set_nonblocking(false);
    let _ = s.set_write_timeout(Some(limits.write_time));
    let (resp, head) = match read_head(&mut s, limits) {
        Ok(head) => match parse(&head) {
            Ok(req) => {
                let answer =
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| handler.handle(&req)))
                        .unwrap_or_else(|_| Response::error(500, "the handler failed"));
                (answer, req.method == Method::Head)
            }
            Err(r) => (r, false),
        },
        Err(HeadError::Closed) => {
            stats.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        Err(HeadError::Answer(r)) => (r, false),
    };
    match write_response(&mut s, &resp, !head) {
        Ok(()) => stats.count(resp.status),
        Err(_) => {
            stats.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
    let _ = s.shutdown(Shutdown::Write);
    if resp.status >= 400 {
        // The request may not have been read to its end (too large, malformed): closing with
        // unread data sends a reset that can overtake the answer. Give the client a moment.
        let _ = s.set_read_timeout(Some(Duration::from_millis(50)));
        let until = Instant::now() + Duration::from_millis(200);
        let mut sink = [0u8; 4096];
        while Instant::now() < until && matches!(s.read(&mut sink), Ok(n) if n > 0) {}
    }
}

enum HeadError {
    /// The client went away (or sent nothing): nothing to answer.
    Closed,
    Answer(Response),
}

/// Read up to the blank line ending the head, within the size and time limits.
fn read_head(s: &mut TcpStream, limits: Limits) -> Result<Vec<u8>, HeadError> {
    let deadline = Instant::now() + limits.head_time;
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    loop {
        if let Some(end) = find_end(&head) {
            head.truncate(end);
            return Ok(head);
        }
        if head.len() > limits.head_bytes {
            return Err(HeadError::Answer(Response::error(
                431,
                "the request head is larger than 8 KiB",
            )));
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(HeadError::Answer(Response::error(
                408,
                "the request took too long to arrive",
            )));
        }
        let _ = s.set_read_timeout(Some(left));
        match s.read(&mut buf) {
            Ok(0) => {
                return Err(if head.is_empty() {
                    HeadError::Closed
                } else {
                    HeadError::Answer(Response::error(400, "the request ended early"))
                })
            }
            Ok(n) => head.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return Err(HeadError::Closed),
        }
    }
}

/// Where the head ends (the index of its blank line), accepting bare LF line ends too.
fn find_end(b: &[u8]) -> Option<usize> {
    (0..b.len()).find(|&i| b[i..].starts_with(b"\r\n\r\n") || b[i..].starts_with(b"\n\n"))
}

/// Parse a request head. Errors are the answer to give.
pub fn parse(head: &[u8]) -> Result<Request, Response> {
    let bad = |why: &str| Response::error(400, why);
    let text = std::str::from_utf8(head).map_err(|_| bad("the request head is not text"))?;
    let mut lines = text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l));
    let line = lines.next().unwrap_or("");
    let mut parts = line.split(' ');
    let (method, target, version) = match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(m), Some(t), Some(v), None) if !m.is_empty() && !t.is_empty() => (m, t, v),
        _ => return Err(bad("the request line is not METHOD PATH HTTP/1.1")),
    };
    if !(version == "HTTP/1.1" || version == "HTTP/1.0") {
        return Err(bad("only HTTP/1.0 and HTTP/1.1 are served"));
    }
    let method = match method {
        "GET" => Method::Get,
        "HEAD" => Method::Head,
        m if m.bytes().all(|b| b.is_ascii_uppercase()) => {
            let mut r = Response::error(405, "only GET and HEAD are served");
            r.headers.push(("Allow".into(), "GET, HEAD".into()));
            return Err(r);
        }
        _ => return Err(bad("the method is not a token")),
    };
    if !target.starts_with('/') || target.bytes().any(|b| b <= b' ' || b == 0x7f) {
        return Err(bad(
            "the path must start with / and hold no spaces or controls",
        ));
    }
    let path = target.split(['?', '#']).next().unwrap_or("/").to_string();
    let mut accept = None;
    for (n, l) in lines.enumerate() {
        if n >= 100 {
            return Err(Response::error(431, "more than 100 header lines"));
        }
        if l.is_empty() {
            break;
        }
        if l.starts_with([' ', '\t']) {
            return Err(bad("folded header lines are not accepted"));
        }
        let Some((name, value)) = l.split_once(':') else {
            return Err(bad("a header line has no colon"));
        };
        if name.is_empty() || name.bytes().any(|b| b <= b' ' || b >= 0x7f) {
            return Err(bad("a header name is not a token"));
        }
        if name.eq_ignore_ascii_case("accept") {
            accept = Some(value.trim().to_string());
        }
    }
    Ok(Request {
        method,
        path,
        accept,
    })
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Unknown",
    }
}

fn write_response(s: &mut TcpStream, r: &Response, body: bool) -> io::Result<()> {
    let mut head = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n",
        r.status,
        reason(r.status),
        r.content_type,
        r.body.len()
    );
    for (k, v) in &r.headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes())?;
    if body {
        s.write_all(&r.body)?;
    }
    s.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_parse_and_bad_ones_get_the_right_4xx() {
        let ok = parse(b"GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\nAccept: text/plain\r\n").unwrap();
        assert_eq!(ok.method, Method::Get);
        assert_eq!(ok.path, "/metrics");
        assert_eq!(ok.accept.as_deref(), Some("text/plain"));
        assert_eq!(parse(b"HEAD / HTTP/1.0").unwrap().method, Method::Head);
        let status = |h: &[u8]| parse(h).unwrap_err().status;
        assert_eq!(status(b"POST /metrics HTTP/1.1"), 405);
        assert_eq!(status(b"GET /metrics HTTP/2.0"), 400);
        assert_eq!(status(b"GET /metrics"), 400);
        assert_eq!(status(b"GET  /metrics HTTP/1.1"), 400);
        assert_eq!(status(b"GET metrics HTTP/1.1"), 400);
        assert_eq!(status(b"GET /met\x01rics HTTP/1.1"), 400);
        assert_eq!(status(b"get /metrics HTTP/1.1"), 400);
        assert_eq!(status(b"GET /metrics HTTP/1.1\r\nNoColon"), 400);
        assert_eq!(status(b"GET /metrics HTTP/1.1\r\nA: b\r\n folded"), 400);
        assert_eq!(status(b"GET /\xff HTTP/1.1"), 400);
        assert_eq!(status(b""), 400);
        let many: Vec<u8> = std::iter::once(b"GET / HTTP/1.1".to_vec())
            .chain((0..101).map(|i| format!("\r\nX-{i}: y").into_bytes()))
            .flatten()
            .collect();
        assert_eq!(status(&many), 431);
    }

    #[test]
    fn parse_never_panics_on_any_bytes() {
        // A cheap fuzz: every prefix and single-byte change of a valid head.
        let good = b"GET /metrics HTTP/1.1\r\nAccept: application/openmetrics-text\r\n".to_vec();
        for cut in 0..good.len() {
            let _ = parse(&good[..cut]);
            for b in [0u8, b'\n', b'\r', b' ', b':', 0xff, b'/'] {
                let mut m = good.clone();
                m[cut] = b;
                let _ = parse(&m);
            }
        }
    }
}
