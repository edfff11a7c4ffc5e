//! The wake channel: one page of shared memory between the dispatcher (which owns and creates it) and
//! one client process (which attaches), plus a futex on the release counter.
//!
//! ```text
//! dispatcher                                  client (in wait_next_period)
//!   T - lead: targets[(s+1) % 4] = T            futex_wait(seq == s) ...
//!             issued = now                      ... woken: read seq, targets[seq % 4]
//!             seq = s + 1; futex_wake(seq)      spin until T; lateness = now - T
//!   next release: read ack_seq == s + 1? ◄──── ack_seq = s + 1 (with lateness, wake latency)
//! ```
//!
//! Release times live in a 4-slot ring indexed by the counter, so a client that reads a counter and
//! then its slot can check the slot was not reused in between. The futex is process-shared (no
//! `FUTEX_PRIVATE_FLAG`). Files live in `/dev/shm` (`$PUNCTUAL_SHM_DIR` overrides) as
//! `punctual-wake-<channel>`; a file whose owner has died is replaced by the next dispatcher.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering};

pub const MAGIC: u64 = u64::from_le_bytes(*b"PUNCWAKE");
pub const VERSION: u32 = 1;
const SLOTS: u32 = 4;

/// Channel states.
pub const STATE_RUNNING: u32 = 1;
pub const STATE_ENDED: u32 = 2;

/// The shared page. Each side writes its own cache lines.
#[repr(C, align(64))]
pub struct Shared {
    // Identity, written by the dispatcher before `magic` is published.
    pub magic: AtomicU64,
    pub version: AtomicU32,
    pub owner_pid: AtomicI32,
    pub owner_start: AtomicU64,
    pub period: AtomicU64,
    pub state: AtomicU32,
    pub client_pid: AtomicI32,
    _pad0: [u8; 24],
    // Releases, written by the dispatcher.
    pub seq: AtomicU32,
    _pad1: u32,
    pub issued: AtomicU64,
    pub targets: [AtomicU64; SLOTS as usize],
    _pad2: [u8; 16],
    // Acknowledgements, written by the client.
    pub ack_seq: AtomicU32,
    pub woke_late: AtomicU32,
    pub lateness: AtomicU64,
    pub wake_latency: AtomicU64,
    pub client_missed: AtomicU64,
    _pad3: [u8; 32],
}

const _: () = assert!(std::mem::size_of::<Shared>() <= 4096);

#[derive(Debug, thiserror::Error)]
pub enum ChannelError {
    #[error("wake channel '{0}' does not exist (is `punctual run` running a plan with a wake action on this channel?)")]
    NotFound(String),
    #[error("wake channel '{name}' is in use by a running dispatcher (pid {pid})")]
    InUse { name: String, pid: i32 },
    #[error("wake channel '{name}' already has a client (pid {pid})")]
    Taken { name: String, pid: i32 },
    #[error("wake channel '{0}' is not a punctual channel of this version")]
    Foreign(String),
    #[error("the plan behind wake channel '{0}' has ended")]
    Ended(String),
    #[error("the dispatcher behind wake channel '{0}' is gone")]
    OwnerGone(String),
    #[error("wake channel '{name}': {source}")]
    Io { name: String, source: io::Error },
}

impl ChannelError {
    /// The errno the C ABI returns for this error.
    pub fn errno(&self) -> i32 {
        match self {
            ChannelError::NotFound(_) => libc::ENOENT,
            ChannelError::InUse { .. } | ChannelError::Taken { .. } => libc::EBUSY,
            ChannelError::Foreign(_) => libc::EPROTO,
            ChannelError::Ended(_) => libc::ESHUTDOWN,
            ChannelError::OwnerGone(_) => libc::EPIPE,
            ChannelError::Io { source, .. } => source.raw_os_error().unwrap_or(libc::EIO),
        }
    }
}

/// Where channel files live.
pub fn shm_dir() -> PathBuf {
    std::env::var_os("PUNCTUAL_SHM_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/dev/shm"))
}

pub fn path_of(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("punctual-wake-{name}"))
}

/// A mapped page.
struct Mapping {
    ptr: *mut Shared,
}

// SAFETY: the page is only accessed through atomics.
unsafe impl Send for Mapping {}
unsafe impl Sync for Mapping {}

impl Mapping {
    fn new(file: &File) -> io::Result<Mapping> {
        use std::os::fd::AsRawFd;
        // SAFETY: mapping a 4096-byte file we hold open, shared, read-write.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                4096,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mapping {
            ptr: p as *mut Shared,
        })
    }

    fn shared(&self) -> &Shared {
        // SAFETY: the mapping lives as long as self and holds a Shared (zeroed is valid for atomics).
        unsafe { &*self.ptr }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmapping what we mapped.
        unsafe { libc::munmap(self.ptr as *mut libc::c_void, 4096) };
    }
}

fn futex_wake(word: &AtomicU32) {
    // SAFETY: FUTEX_WAKE on a valid u32 in shared memory (no private flag: other processes wait on it).
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE,
            i32::MAX,
            0,
            0,
            0,
        )
    };
}

/// Wait while `*word == expected`, at most `timeout_ns`. Spurious returns are fine.
fn futex_wait(word: &AtomicU32, expected: u32, timeout_ns: u64) {
    let ts = libc::timespec {
        tv_sec: (timeout_ns / 1_000_000_000) as _,
        tv_nsec: (timeout_ns % 1_000_000_000) as _,
    };
    // SAFETY: FUTEX_WAIT on a valid shared u32 with a relative timeout.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT,
            expected,
            &ts as *const libc::timespec,
            0,
            0,
        )
    };
}

fn alive(pid: i32, start: u64) -> bool {
    pid > 0 && punctual_rt::journal::task_start_time(pid) == Some(start)
}

/// What the client reported about the previous release.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ack {
    /// The client ran at the release: its lateness, and the futex wake-up latency it saw (if it slept).
    Done {
        lateness: u64,
        wake_latency: Option<u64>,
        woke_late: bool,
    },
    /// The client did not take the release before the next one (busy, gone, or never attached).
    Missed,
}

/// The dispatcher's side. Dropping it ends the channel and removes the file.
pub struct Server {
    map: Mapping,
    path: PathBuf,
    name: String,
    _file: File,
    released: u32,
    pending: bool,
}

impl Server {
    /// Create channel `name` in `dir` for releases every `period` ns (0: event-driven).
    pub fn create(dir: &Path, name: &str, period: u64) -> Result<Server, ChannelError> {
        let path = path_of(dir, name);
        let io_err = |source| ChannelError::Io {
            name: name.to_string(),
            source,
        };
        std::fs::create_dir_all(dir).map_err(io_err)?;
        // A leftover file: refuse if its owner still runs, replace it otherwise.
        if let Ok(f) = OpenOptions::new().read(true).write(true).open(&path) {
            if f.metadata().map(|m| m.len() >= 4096).unwrap_or(false) {
                if let Ok(m) = Mapping::new(&f) {
                    let s = m.shared();
                    let (pid, start) = (
                        s.owner_pid.load(Ordering::Acquire),
                        s.owner_start.load(Ordering::Acquire),
                    );
                    if s.magic.load(Ordering::Acquire) == MAGIC
                        && alive(pid, start)
                        && s.state.load(Ordering::Acquire) != STATE_ENDED
                    {
                        return Err(ChannelError::InUse {
                            name: name.to_string(),
                            pid,
                        });
                    }
                }
            }
            let _ = std::fs::remove_file(&path);
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o666)
            .open(&path)
            .map_err(io_err)?;
        // Let an unprivileged client attach to a channel a root dispatcher created.
        use std::os::unix::fs::PermissionsExt;
        let _ = file.set_permissions(std::fs::Permissions::from_mode(0o666));
        file.set_len(4096).map_err(io_err)?;
        let map = Mapping::new(&file).map_err(io_err)?;
        let s = map.shared();
        let pid = std::process::id() as i32;
        s.version.store(VERSION, Ordering::Relaxed);
        s.owner_pid.store(pid, Ordering::Relaxed);
        s.owner_start.store(
            punctual_rt::journal::task_start_time(pid).unwrap_or(0),
            Ordering::Relaxed,
        );
        s.period.store(period, Ordering::Relaxed);
        s.state.store(STATE_RUNNING, Ordering::Relaxed);
        s.magic.store(MAGIC, Ordering::Release);
        Ok(Server {
            map,
            path,
            name: name.to_string(),
            _file: file,
            released: 0,
            pending: false,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The attached client's pid, if any.
    pub fn client(&self) -> Option<i32> {
        match self.map.shared().client_pid.load(Ordering::Acquire) {
            0 => None,
            p => Some(p),
        }
    }

    /// How the client fared with the previous release (call before [`Server::release`]). `None` when
    /// there was no previous release.
    pub fn collect(&mut self) -> Option<Ack> {
        if !self.pending {
            return None;
        }
        self.pending = false;
        let s = self.map.shared();
        if s.ack_seq.load(Ordering::Acquire) != self.released {
            return Some(Ack::Missed);
        }
        let wl = s.wake_latency.load(Ordering::Relaxed);
        Some(Ack::Done {
            lateness: s.lateness.load(Ordering::Relaxed),
            wake_latency: (wl != u64::MAX).then_some(wl),
            woke_late: s.woke_late.load(Ordering::Relaxed) != 0,
        })
    }

    /// Look at the previous release again (after [`Server::collect`] found it not yet acknowledged).
    pub fn repend(&mut self) {
        self.pending = self.released > 0;
    }

    /// Release the client for instant `target`; `issued` is now, on the same clock.
    #[inline]
    pub fn release(&mut self, target: u64, issued: u64) {
        let s = self.map.shared();
        let next = self.released.wrapping_add(1);
        s.targets[(next % SLOTS) as usize].store(target, Ordering::Relaxed);
        s.issued.store(issued, Ordering::Relaxed);
        s.seq.store(next, Ordering::Release);
        futex_wake(&s.seq);
        self.released = next;
        self.pending = true;
    }

    /// Releases issued so far.
    pub fn released(&self) -> u32 {
        self.released
    }

    /// Tell the client the plan is over (its next wait returns `Ended`).
    pub fn end(&self) {
        let s = self.map.shared();
        s.state.store(STATE_ENDED, Ordering::Release);
        s.seq.fetch_add(0x8000_0000, Ordering::Release);
        futex_wake(&s.seq);
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.end();
        let _ = std::fs::remove_file(&self.path);
    }
}

/// One release as the client sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Release {
    pub seq: u32,
    pub target: u64,
    /// When the dispatcher issued the wake, if the client slept in the futex for it.
    pub issued: Option<u64>,
    /// Releases the client never took (it was busy past them).
    pub missed: u64,
}

/// The client's side.
pub struct Client {
    map: Mapping,
    name: String,
    _file: File,
    last: u32,
}

impl Client {
    /// Attach to channel `name` in `dir`, waiting up to `timeout_ns` for it to appear.
    pub fn attach(dir: &Path, name: &str, timeout_ns: u64) -> Result<Client, ChannelError> {
        let path = path_of(dir, name);
        let deadline = std::time::Instant::now() + std::time::Duration::from_nanos(timeout_ns);
        let file = loop {
            match OpenOptions::new().read(true).write(true).open(&path) {
                Ok(f) if f.metadata().map(|m| m.len() >= 4096).unwrap_or(false) => break f,
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(source) => {
                    return Err(ChannelError::Io {
                        name: name.to_string(),
                        source,
                    })
                }
            }
            if std::time::Instant::now() >= deadline {
                return Err(ChannelError::NotFound(name.to_string()));
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        };
        let map = Mapping::new(&file).map_err(|source| ChannelError::Io {
            name: name.to_string(),
            source,
        })?;
        let s = map.shared();
        // The creator publishes magic last; wait briefly for it.
        let mut tries = 0;
        while s.magic.load(Ordering::Acquire) != MAGIC {
            tries += 1;
            if tries > 200 {
                return Err(ChannelError::Foreign(name.to_string()));
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        if s.version.load(Ordering::Acquire) != VERSION {
            return Err(ChannelError::Foreign(name.to_string()));
        }
        if s.state.load(Ordering::Acquire) == STATE_ENDED {
            return Err(ChannelError::Ended(name.to_string()));
        }
        let me = std::process::id() as i32;
        if let Err(pid) = s
            .client_pid
            .compare_exchange(0, me, Ordering::AcqRel, Ordering::Acquire)
        {
            if pid != me && punctual_rt::journal::task_start_time(pid).is_some() {
                return Err(ChannelError::Taken {
                    name: name.to_string(),
                    pid,
                });
            }
            s.client_pid.store(me, Ordering::Release);
        }
        let last = s.seq.load(Ordering::Acquire);
        Ok(Client {
            map,
            name: name.to_string(),
            _file: file,
            last,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The channel's nominal period (0 for event-driven channels).
    pub fn period(&self) -> u64 {
        self.map.shared().period.load(Ordering::Relaxed)
    }

    /// Wait until the dispatcher releases a release this client has not seen. `now` reads the clock.
    pub fn next(&mut self, now: &dyn Fn() -> u64) -> Result<Release, ChannelError> {
        let s = self.map.shared();
        let mut slept = false;
        loop {
            let seq = s.seq.load(Ordering::Acquire);
            if s.state.load(Ordering::Acquire) == STATE_ENDED || seq & 0x8000_0000 != 0 {
                return Err(ChannelError::Ended(self.name.clone()));
            }
            if seq != self.last {
                let target = s.targets[(seq % SLOTS) as usize].load(Ordering::Relaxed);
                let issued = s.issued.load(Ordering::Relaxed);
                let again = s.seq.load(Ordering::Acquire);
                if again.wrapping_sub(seq) >= SLOTS - 1 {
                    continue; // the slot may have been reused while reading it
                }
                let missed = seq.wrapping_sub(self.last).wrapping_sub(1) as u64;
                self.last = seq;
                return Ok(Release {
                    seq,
                    target,
                    issued: (slept && again == seq).then_some(issued),
                    missed,
                });
            }
            futex_wait(&s.seq, seq, 100_000_000);
            slept = true;
            let _ = now;
            if s.seq.load(Ordering::Acquire) == seq {
                let (pid, start) = (
                    s.owner_pid.load(Ordering::Relaxed),
                    s.owner_start.load(Ordering::Relaxed),
                );
                if !alive(pid, start) {
                    return Err(ChannelError::OwnerGone(self.name.clone()));
                }
            }
        }
    }

    /// Report how release `seq` went.
    pub fn ack(
        &self,
        seq: u32,
        lateness: u64,
        wake_latency: Option<u64>,
        woke_late: bool,
        missed_total: u64,
    ) {
        let s = self.map.shared();
        s.lateness.store(lateness, Ordering::Relaxed);
        s.wake_latency
            .store(wake_latency.unwrap_or(u64::MAX), Ordering::Relaxed);
        s.woke_late.store(woke_late as u32, Ordering::Relaxed);
        s.client_missed.store(missed_total, Ordering::Relaxed);
        s.ack_seq.store(seq, Ordering::Release);
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let me = std::process::id() as i32;
        let _ = self.map.shared().client_pid.compare_exchange(
            me,
            0,
            Ordering::AcqRel,
            Ordering::Relaxed,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> u64 {
        punctual_time::clock::read_clock(libc::CLOCK_MONOTONIC)
    }

    #[test]
    fn releases_reach_the_client_in_order_and_acks_come_back() {
        let dir = tempfile::tempdir().unwrap();
        let mut server = Server::create(dir.path(), "t1", 1_000_000).unwrap();
        assert_eq!(server.collect(), None);
        let dirp = dir.path().to_path_buf();
        let client = std::thread::spawn(move || {
            let mut c = Client::attach(&dirp, "t1", 1_000_000_000).unwrap();
            assert_eq!(c.period(), 1_000_000);
            let mut got = Vec::new();
            loop {
                match c.next(&now) {
                    Ok(r) => {
                        c.ack(r.seq, 7, r.issued.map(|i| now() - i), false, 0);
                        got.push((r.seq, r.target, r.missed));
                    }
                    Err(ChannelError::Ended(_)) => return got,
                    Err(e) => panic!("{e}"),
                }
            }
        });
        // Wait for the client to attach.
        while server.client().is_none() {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let mut acks = Vec::new();
        for k in 1..=5u64 {
            server.release(k * 1000, now());
            std::thread::sleep(std::time::Duration::from_millis(20));
            acks.push(server.collect());
        }
        server.end();
        let got = client.join().unwrap();
        assert_eq!(
            got,
            (1..=5u32)
                .map(|k| (k, k as u64 * 1000, 0))
                .collect::<Vec<_>>()
        );
        assert!(
            acks.iter()
                .all(|a| matches!(a, Some(Ack::Done { lateness: 7, .. }))),
            "{acks:?}"
        );
    }

    #[test]
    fn a_busy_client_sees_missed_releases_and_the_server_sees_no_ack() {
        let dir = tempfile::tempdir().unwrap();
        let mut server = Server::create(dir.path(), "t2", 0).unwrap();
        let mut c = Client::attach(dir.path(), "t2", 0).unwrap();
        server.release(10, now());
        assert_eq!(server.collect(), Some(Ack::Missed));
        server.release(20, now());
        let r = c.next(&now).unwrap();
        assert_eq!((r.seq, r.target, r.missed), (2, 20, 1));
        assert_eq!(r.issued, None, "the client did not sleep for it");
        c.ack(r.seq, 3, None, true, 1);
        assert_eq!(
            server.collect(),
            Some(Ack::Done {
                lateness: 3,
                wake_latency: None,
                woke_late: true
            })
        );
    }

    #[test]
    fn a_second_dispatcher_is_refused_and_a_dead_ones_file_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let server = Server::create(dir.path(), "t3", 0).unwrap();
        assert!(matches!(
            Server::create(dir.path(), "t3", 0),
            Err(ChannelError::InUse { .. })
        ));
        // Pretend the owner died.
        server.map.shared().owner_start.store(1, Ordering::Release);
        let again = Server::create(dir.path(), "t3", 0).unwrap();
        assert_eq!(again.client(), None);
        std::mem::forget(server); // its drop would remove the new file
    }

    #[test]
    fn attach_times_out_on_a_missing_channel_and_sees_an_ended_one() {
        let dir = tempfile::tempdir().unwrap();
        let e = Client::attach(dir.path(), "nope", 20_000_000)
            .err()
            .unwrap();
        assert!(matches!(e, ChannelError::NotFound(_)));
        assert_eq!(e.errno(), libc::ENOENT);
        let server = Server::create(dir.path(), "t4", 0).unwrap();
        let mut c = Client::attach(dir.path(), "t4", 0).unwrap();
        server.end();
        assert!(matches!(c.next(&now), Err(ChannelError::Ended(_))));
        assert!(matches!(
            Client::attach(dir.path(), "t4", 0),
            Err(ChannelError::Ended(_))
        ));
    }
}
