//! The wake channel: one page of shared memory between the dispatcher (which owns it) and one client
//! process, plus a futex on the release counter.
//!
//! ```text
//! dispatcher                                  client (in wait_next_period)
//!   T - lead: targets[(s+1) % 4] = T            futex_wait(seq == s) ...
//!             issued = now                      ... woken: read seq, targets[seq % 4]
//!             seq = s + 1; futex_wake(seq)      spin until T; lateness = now - T
//!   next release: read ack_seq == s + 1? ◄──── ack_seq = s + 1 (with lateness, wake latency)
//!   before a spin on the client's CPU:          back in wait_next_period: parked = s + 1,
//!     parked != s + 1? futex_wait(parked) ◄────   futex_wake(parked) if the dispatcher waits
//! ```
//!
//! Release times live in a 4-slot ring indexed by the counter, so a client that reads a counter and
//! then its slot can check the slot was not reused in between. The futex is process-shared (no
//! `FUTEX_PRIVATE_FLAG`).
//!
//! Who can reach the page: the page is a sealed memfd (its size can never change, so no side can
//! make the other fault with SIGBUS), handed over a unix socket `punctual-wake-<channel>` in a
//! directory nobody else can write: [`ROOT_DIR`] (`/run/punctual-wake`, mode 0755, under root's
//! `/run`) for a dispatcher running as root, `/dev/shm/punctual-wake-<uid>` (mode 0700, checked to
//! be the user's own) for any other; `$PUNCTUAL_SHM_DIR` overrides both. Another local user can
//! therefore not squat a name (they could in the shared `/dev/shm`, issue 32). A client looks in
//! root's directory, then its own user's. The socket file is mode 0600, owned by the dispatcher's
//! user (or by the client user the plan names), and the dispatcher checks the connecting process's
//! credentials (`SO_PEERCRED`): only root, the dispatcher's own user and the plan's `user` get the
//! page. The client checks the dispatcher the same way (root or its own user), then every header
//! field, and never spins past a release further ahead than the channel's declared lead.
//! A socket whose dispatcher is gone (nobody listens) is removed by the next dispatcher.

use punctual_rt::futex::{self, Scope};
use std::ffi::CString;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

pub const MAGIC: u64 = u64::from_le_bytes(*b"PUNCWAKE");
pub const VERSION: u32 = 2;
const SLOTS: u32 = 4;
const PAGE: usize = 4096;

/// Channel states.
pub const STATE_RUNNING: u32 = 1;
pub const STATE_ENDED: u32 = 2;

/// The longest period a channel may declare (a client refuses anything longer).
pub const MAX_PERIOD_NS: u64 = 86_400_000_000_000;
/// The longest lead a channel may declare: how far ahead of its instant a release may come.
pub const MAX_LEAD_NS: u64 = 10_000_000_000;
/// Added to the declared lead before a release counts as impossibly far ahead (wake-up jitter).
pub const LEAD_SLACK_NS: u64 = 2_000_000;
/// Acknowledged figures above this (an hour, the histograms' top) are clamped.
pub const MAX_ACK_NS: u64 = 3_600_000_000_000;

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
    /// Written by the client once it is attached and has read the release counter.
    pub client_pid: AtomicI32,
    /// `size_of::<Shared>()`, so a client can tell the layout is the one it knows.
    pub header_len: AtomicU32,
    /// Written by the dispatcher when it hands the page to a client (that client's pid).
    pub admitted_pid: AtomicI32,
    /// The most a release may come ahead of its instant.
    pub max_lead: AtomicU64,
    _pad0: [u8; 8],
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
    /// The client's thread and the CPU it acknowledged from (0 from a client that does not say:
    /// the layout's size is unchanged, so older clients still attach).
    pub client_tid: AtomicI32,
    pub client_cpu: AtomicU32,
    /// The client's clock read before the one that found its instant passed, when it spun to it
    /// (0: it did not spin, or a client that does not say; the layout's size is unchanged).
    pub spin_read: AtomicU64,
    /// The release the client last finished with: written when it comes back for the next one
    /// ([`PARK_UNSAID`] until a client that says attaches).
    pub parked: AtomicU32,
    /// Non-zero while the dispatcher waits for the client to come back ([`Server::wait_client`]):
    /// the client then wakes it through `parked`.
    pub park_waiter: AtomicU32,
    _pad3: [u8; 8],
}

const _: () = assert!(std::mem::size_of::<Shared>() <= PAGE);

#[derive(Debug, thiserror::Error)]
pub enum ChannelError {
    #[error("wake channel '{0}' does not exist (is `punctual run` running a plan with a wake action on this channel?)")]
    NotFound(String),
    #[error("wake channel '{name}' is in use: pid {pid} (uid {uid}) listens on its socket")]
    InUse { name: String, pid: i32, uid: u32 },
    #[error("wake channel directory {dir} cannot be used: {why}")]
    Dir { dir: String, why: String },
    #[error("wake channel '{name}' already has a client (pid {pid})")]
    Taken { name: String, pid: i32 },
    #[error("wake channel '{0}' is not a punctual channel of this version")]
    Foreign(String),
    #[error("wake channel '{name}' refused: {why}")]
    Invalid { name: String, why: String },
    #[error("wake channel '{name}' does not admit uid {uid}: only root, the dispatcher's user and the user the plan's wake action names (user = \"...\") may attach")]
    Denied { name: String, uid: u32 },
    #[error("wake channel '{name}': {path} belongs to uid {uid} and is not a channel punctual may replace; if no punctual of that user runs, remove it, or choose another channel name")]
    Squatted {
        name: String,
        path: PathBuf,
        uid: u32,
    },
    #[error("wake channel name '{0}' must be 1 to 64 characters of A-Z a-z 0-9 _ - . (not starting with a dot)")]
    BadName(String),
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
            ChannelError::Foreign(_) | ChannelError::Invalid { .. } => libc::EPROTO,
            ChannelError::Denied { .. } => libc::EACCES,
            ChannelError::Squatted { .. } => libc::EADDRINUSE,
            ChannelError::Dir { .. } => libc::EACCES,
            ChannelError::BadName(_) => libc::EINVAL,
            ChannelError::Ended(_) => libc::ESHUTDOWN,
            ChannelError::OwnerGone(_) => libc::EPIPE,
            ChannelError::Io { source, .. } => source.raw_os_error().unwrap_or(libc::EIO),
        }
    }
}

/// Where the channels of dispatchers running as root live: under `/run`, which only root can write.
pub const ROOT_DIR: &str = "/run/punctual-wake";

/// Where this process's channels live when it is not root: a directory of its own user in
/// `/dev/shm` (mode 0700).
pub fn user_dir(uid: u32) -> PathBuf {
    PathBuf::from(format!("/dev/shm/punctual-wake-{uid}"))
}

fn override_dir() -> Option<PathBuf> {
    punctual_rt::env::trusted_dir(punctual_rt::env::SHM_DIR).path()
}

/// Where this process creates channels: `$PUNCTUAL_SHM_DIR` when [`punctual_rt::env::trusted_dir`]
/// believes it, else [`ROOT_DIR`] for root and [`user_dir`] for anyone else.
pub fn shm_dir() -> PathBuf {
    override_dir().unwrap_or_else(|| match euid() {
        0 => PathBuf::from(ROOT_DIR),
        uid => user_dir(uid),
    })
}

/// Where a client looks for a channel, in order: `$PUNCTUAL_SHM_DIR` alone when set, else root's
/// directory, then its own user's.
pub fn client_dirs() -> Vec<PathBuf> {
    match override_dir() {
        Some(d) => vec![d],
        None => {
            let mut dirs = vec![PathBuf::from(ROOT_DIR)];
            if euid() != 0 {
                dirs.push(user_dir(euid()));
            }
            dirs
        }
    }
}

/// Make `dir` ready to hold channels: created when missing (mode 0755 for root, whose clients may
/// be other users, 0700 otherwise, whatever the umask; parents as they are), then checked: a real
/// directory (not a link), owned by this user or root, writable by nobody else unless sticky
/// (an override such as `/dev/shm` itself). A directory someone else made is refused with its
/// owner, before anything is created in it.
pub fn prepare_dir(dir: &Path) -> Result<(), ChannelError> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    let me = euid();
    let mode = if me == 0 { 0o755 } else { 0o700 };
    let shown = || punctual_rt::text::display_path(dir);
    let fail = |why: String| ChannelError::Dir { dir: shown(), why };
    match std::fs::DirBuilder::new().mode(mode).create(dir) {
        Ok(()) => {
            // The umask may have taken bits root's clients need.
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode))
                .map_err(|e| fail(e.to_string()))?;
        }
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(fail(e.to_string())),
    }
    let m = std::fs::symlink_metadata(dir).map_err(|e| fail(e.to_string()))?;
    if !m.is_dir() {
        return Err(fail(format!(
            "it is not a directory (owned by uid {}); remove it",
            m.uid()
        )));
    }
    if m.uid() != me && m.uid() != 0 {
        return Err(fail(format!(
            "it belongs to uid {}, neither root nor this user (uid {me}), who could plant or squat channels in it; remove it",
            m.uid()
        )));
    }
    if m.mode() & 0o022 != 0 && m.mode() & 0o1000 == 0 {
        return Err(fail(format!(
            "it is writable by other users (mode {:o}); make it 0755 or remove it",
            m.mode() & 0o7777
        )));
    }
    Ok(())
}

/// Whether `run` could create channel `name` in `dir` now, changing nothing: the name is valid,
/// the directory is ours (or missing, to be created), and no live dispatcher or another user's
/// file holds the name. For the preflight, before any system change.
pub fn available(dir: &Path, name: &str) -> Result<(), ChannelError> {
    check_name(name)?;
    match std::fs::symlink_metadata(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => {
            return Err(ChannelError::Dir {
                dir: punctual_rt::text::display_path(dir),
                why: e.to_string(),
            })
        }
        Ok(m) => {
            let me = euid();
            if !m.is_dir()
                || (m.uid() != me && m.uid() != 0)
                || (m.mode() & 0o022 != 0 && m.mode() & 0o1000 == 0)
            {
                // prepare_dir says why; on an existing directory it only creates nothing.
                prepare_dir(dir)?;
            }
        }
    }
    probe_name(&path_of(dir, name), name).map(|_| ())
}

pub fn path_of(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("punctual-wake-{name}"))
}

/// A channel name becomes a file name: the plan's alphabet, checked again on both sides.
pub fn check_name(name: &str) -> Result<(), ChannelError> {
    let ok = (1..=64).contains(&name.len())
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    if ok {
        Ok(())
    } else {
        Err(ChannelError::BadName(
            punctual_rt::text::display_name(name).into_owned(),
        ))
    }
}

/// Who may attach besides root and the dispatcher's own user.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Access {
    /// The client's user (the plan's `user` on the wake action).
    pub client_uid: Option<u32>,
}

/// A mapped page of a sealed memfd.
struct Mapping {
    ptr: *mut Shared,
}

// SAFETY: the page is only accessed through atomics, and stays mapped until the Mapping drops.
unsafe impl Send for Mapping {}
// SAFETY: as for Send: `&Mapping` reaches only atomics, which any thread may use at once.
unsafe impl Sync for Mapping {}

impl Mapping {
    fn new(fd: &OwnedFd) -> io::Result<Mapping> {
        // SAFETY: mapping one page of a memfd whose size is sealed at one page.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                PAGE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
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
        unsafe { libc::munmap(self.ptr as *mut libc::c_void, PAGE) };
    }
}

const SEALS: libc::c_int = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL;

/// The page: a memfd of exactly one page, sealed so neither side (nor anyone the fd reaches) can
/// shrink or grow it.
fn sealed_page() -> io::Result<OwnedFd> {
    use nix::sys::memfd::{memfd_create, MemFdCreateFlag};
    let fd = memfd_create(
        c"punctual-wake",
        MemFdCreateFlag::MFD_CLOEXEC | MemFdCreateFlag::MFD_ALLOW_SEALING,
    )?;
    nix::unistd::ftruncate(&fd, PAGE as libc::off_t)?;
    // SAFETY: fcntl on an fd we own.
    if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, SEALS) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fd)
}

/// Why a page handed to us cannot be trusted to stay mapped, if so.
fn check_page(fd: &OwnedFd) -> Result<(), String> {
    // SAFETY: fcntl/fstat on an fd we own.
    let seals = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GET_SEALS) };
    let needed = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW;
    if seals < 0 || seals & needed != needed {
        return Err("the page handed over is not sealed against resizing".into());
    }
    let st = nix::sys::stat::fstat(fd.as_raw_fd()).map_err(|e| e.to_string())?;
    if st.st_size != PAGE as libc::off_t {
        return Err(format!(
            "the page handed over is {} bytes, not {PAGE}",
            st.st_size
        ));
    }
    Ok(())
}

fn futex_wake(word: &AtomicU32) {
    // No private flag: other processes wait on it.
    futex::wake(word, u32::MAX, Scope::Shared);
}

/// Wait while `*word == expected`, at most `timeout_ns`. Spurious returns are fine.
fn futex_wait(word: &AtomicU32, expected: u32, timeout_ns: u64) {
    futex::wait(word, expected, Some(timeout_ns), Scope::Shared);
}

fn alive(pid: i32, start: u64) -> bool {
    pid > 0 && punctual_rt::journal::task_start_time(pid) == Some(start)
}

/// The dispatcher a client attached to, asked after each of the client's waits that timed out
/// whether it is still there.
///
/// A pidfd answers with one `poll`; the fallback, on kernels without pidfds, reads
/// `/proc/PID/stat` for the start time (an `open` there took up to 457 us on this VM). Every
/// client waiting for its first release times out each 100 ms, on a CPU other clients' releases
/// use, and in kurt-periodic's (d) rows such clients were seen holding it 150-650 us without a
/// guest event (issue 26; not the read alone: some still did with the pidfd).
struct Owner {
    pid: i32,
    start: u64,
    fd: Option<OwnedFd>,
}

impl Owner {
    fn new(pid: i32, start: u64) -> Owner {
        Owner {
            pid,
            start,
            fd: punctual_rt::pidfd_open(pid),
        }
    }

    fn gone(&self) -> bool {
        match &self.fd {
            Some(fd) => punctual_rt::pidfd_exited(fd.as_fd()),
            None => !alive(self.pid, self.start),
        }
    }
}

fn euid() -> u32 {
    nix::unistd::geteuid().as_raw()
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

/// `parked` before a client that reports it attaches.
pub const PARK_UNSAID: u32 = u32::MAX;

// The hand-over protocol: the client sends one byte (attach or probe), the dispatcher answers with
// one `Reply` (and the page's fd when it admits the client).
const HELLO_ATTACH: u8 = b'a';
const HELLO_PROBE: u8 = b'p';
const REPLY_OK: u32 = 1;
const REPLY_ALIVE: u32 = 2;
const REPLY_DENIED: u32 = 3;
const REPLY_TAKEN: u32 = 4;
const REPLY_ENDED: u32 = 5;
const REPLY_LEN: usize = 12;

fn reply_bytes(status: u32, pid: i32, uid: u32) -> [u8; REPLY_LEN] {
    let mut b = [0u8; REPLY_LEN];
    b[0..4].copy_from_slice(&status.to_le_bytes());
    b[4..8].copy_from_slice(&pid.to_le_bytes());
    b[8..12].copy_from_slice(&uid.to_le_bytes());
    b
}

fn peer(stream: &UnixStream) -> io::Result<nix::sys::socket::UnixCredentials> {
    nix::sys::socket::getsockopt(stream, nix::sys::socket::sockopt::PeerCredentials)
        .map_err(io::Error::from)
}

/// What the dispatcher's hand-over thread needs.
struct Door {
    page: Arc<OwnedFd>,
    map: Arc<Mapping>,
    allowed: Vec<u32>,
    stop: Arc<AtomicBool>,
}

impl Door {
    fn serve(self, listener: UnixListener) {
        loop {
            let stream = match listener.accept() {
                Ok((s, _)) => s,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return, // shut down
            };
            if self.stop.load(Ordering::Acquire) {
                return;
            }
            let _ = self.answer(stream);
        }
    }

    fn answer(&self, mut stream: UnixStream) -> io::Result<()> {
        // A connection that says nothing must not hold the door.
        stream.set_read_timeout(Some(std::time::Duration::from_secs(1)))?;
        stream.set_write_timeout(Some(std::time::Duration::from_secs(1)))?;
        let mut hello = [0u8; 1];
        stream.read_exact(&mut hello)?;
        let me = std::process::id() as i32;
        let s = self.map.shared();
        match hello[0] {
            HELLO_PROBE => return stream.write_all(&reply_bytes(REPLY_ALIVE, me, euid())),
            HELLO_ATTACH => {}
            _ => return Ok(()),
        }
        let cred = peer(&stream)?;
        if !self.allowed.contains(&cred.uid()) {
            return stream.write_all(&reply_bytes(REPLY_DENIED, me, cred.uid()));
        }
        if s.state.load(Ordering::Acquire) == STATE_ENDED {
            return stream.write_all(&reply_bytes(REPLY_ENDED, me, 0));
        }
        for current in [
            s.client_pid.load(Ordering::Acquire),
            s.admitted_pid.load(Ordering::Acquire),
        ] {
            if current != 0
                && current != cred.pid()
                && punctual_rt::journal::task_start_time(current).is_some()
            {
                return stream.write_all(&reply_bytes(REPLY_TAKEN, current, 0));
            }
        }
        s.admitted_pid.store(cred.pid(), Ordering::Release);
        let fds = [self.page.as_raw_fd()];
        let bytes = reply_bytes(REPLY_OK, me, 0);
        let iov = [io::IoSlice::new(&bytes)];
        let cmsg = [nix::sys::socket::ControlMessage::ScmRights(&fds)];
        nix::sys::socket::sendmsg::<()>(
            stream.as_raw_fd(),
            &iov,
            &cmsg,
            nix::sys::socket::MsgFlags::MSG_NOSIGNAL,
            None,
        )?;
        Ok(())
    }
}

/// The dispatcher's side. Dropping it ends the channel and removes its socket.
pub struct Server {
    map: Arc<Mapping>,
    path: PathBuf,
    name: String,
    /// The socket file we bound (device, inode), so only our own is ever removed.
    bound: (u64, u64),
    listener_fd: RawFd,
    stop: Arc<AtomicBool>,
    door: Option<std::thread::JoinHandle<()>>,
    released: u32,
    pending: bool,
}

impl Server {
    /// Create channel `name` in `dir` for releases every `period` ns (0: event-driven), open to
    /// root and this process's user.
    pub fn create(dir: &Path, name: &str, period: u64) -> Result<Server, ChannelError> {
        Self::create_for(dir, name, period, Access::default())
    }

    /// [`Server::create`], also admitting `access.client_uid`. Only root may admit another user.
    pub fn create_for(
        dir: &Path,
        name: &str,
        period: u64,
        access: Access,
    ) -> Result<Server, ChannelError> {
        check_name(name)?;
        let io_err = |source| ChannelError::Io {
            name: name.to_string(),
            source,
        };
        let me = euid();
        if let Some(uid) = access.client_uid {
            if me != 0 && uid != me {
                return Err(io_err(io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    format!("only a dispatcher running as root may admit a client of another user (uid {uid})"),
                )));
            }
        }
        if period > MAX_PERIOD_NS {
            return Err(ChannelError::Invalid {
                name: name.to_string(),
                why: format!("a period of {period} ns is longer than a day"),
            });
        }
        let path = path_of(dir, name);
        prepare_dir(dir)?;
        clear_stale(&path, name)?;
        let page = sealed_page().map_err(io_err)?;
        let map = Arc::new(Mapping::new(&page).map_err(io_err)?);
        let s = map.shared();
        let pid = std::process::id() as i32;
        s.version.store(VERSION, Ordering::Relaxed);
        s.header_len
            .store(std::mem::size_of::<Shared>() as u32, Ordering::Relaxed);
        s.owner_pid.store(pid, Ordering::Relaxed);
        s.owner_start.store(
            punctual_rt::journal::task_start_time(pid).unwrap_or(0),
            Ordering::Relaxed,
        );
        s.period.store(period, Ordering::Relaxed);
        s.parked.store(PARK_UNSAID, Ordering::Relaxed);
        s.max_lead.store(
            if period == 0 {
                MAX_LEAD_NS.min(1_000_000_000)
            } else {
                (period / 2).min(MAX_LEAD_NS)
            },
            Ordering::Relaxed,
        );
        s.state.store(STATE_RUNNING, Ordering::Relaxed);
        s.magic.store(MAGIC, Ordering::Release);

        let listener = match UnixListener::bind(&path) {
            Ok(l) => l,
            Err(e) if e.kind() == io::ErrorKind::AddrInUse => {
                // Bound in the instant since clear_stale looked: say who holds it now.
                return Err(probe_name(&path, name)
                    .err()
                    .unwrap_or(ChannelError::InUse {
                        name: name.to_string(),
                        pid: 0,
                        uid: u32::MAX,
                    }));
            }
            Err(e) => return Err(io_err(e)),
        };
        let unbind = |e| {
            let _ = std::fs::remove_file(&path);
            io_err(e)
        };
        let m = std::fs::symlink_metadata(&path).map_err(unbind)?;
        let bound = (m.dev(), m.ino());
        // The mode of the socket file is the first gate (connect needs write permission on it);
        // the credentials check at the door is the second.
        let cpath = CString::new(path.as_os_str().as_encoded_bytes())
            .map_err(|_| unbind(io::Error::new(io::ErrorKind::InvalidInput, "NUL in path")))?;
        // SAFETY: chmod/chown (no link following: lchown) of the socket we just bound.
        unsafe {
            if libc::chmod(cpath.as_ptr(), 0o600) != 0 {
                return Err(unbind(io::Error::last_os_error()));
            }
            if let Some(uid) = access.client_uid.filter(|&u| u != me) {
                if libc::lchown(cpath.as_ptr(), uid, u32::MAX) != 0 {
                    return Err(unbind(io::Error::last_os_error()));
                }
            }
        }
        let mut allowed = vec![0, me];
        allowed.extend(access.client_uid);
        let stop = Arc::new(AtomicBool::new(false));
        let door = Door {
            page: Arc::new(page),
            map: map.clone(),
            allowed,
            stop: stop.clone(),
        };
        let listener_fd = listener.as_raw_fd();
        let handle = std::thread::Builder::new()
            .name("punctual-door".into())
            .spawn(move || door.serve(listener))
            .map_err(unbind)?;
        Ok(Server {
            map,
            path,
            name: name.to_string(),
            bound,
            listener_fd,
            stop,
            door: Some(handle),
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

    /// Declare how far ahead of its instant a release may come (the wake action's largest lead);
    /// the client refuses releases further ahead, so a wrong one cannot make it spin for long.
    pub fn set_max_lead(&self, ns: u64) {
        self.map
            .shared()
            .max_lead
            .store(ns.min(MAX_LEAD_NS), Ordering::Release);
    }

    /// The attached client's pid, if any.
    pub fn client(&self) -> Option<i32> {
        match self.map.shared().client_pid.load(Ordering::Acquire) {
            0 => None,
            p => Some(p),
        }
    }

    /// How the client fared with the previous release (call before [`Server::release`]). `None` when
    /// there was no previous release. The client's figures are clamped to [`MAX_ACK_NS`]: they come
    /// from another process.
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
            lateness: s.lateness.load(Ordering::Relaxed).min(MAX_ACK_NS),
            wake_latency: (wl <= MAX_ACK_NS).then_some(wl),
            woke_late: s.woke_late.load(Ordering::Relaxed) != 0,
        })
    }

    /// The client's clock read before the one that found its last acknowledged instant passed,
    /// when it spun to it (`--explain`: from there to its report it did nothing but read the
    /// clock). `None` when it did not spin or does not say.
    pub fn client_spin_read(&self) -> Option<u64> {
        match self.map.shared().spin_read.load(Ordering::Relaxed) {
            0 => None,
            t => Some(t),
        }
    }

    /// Whether the client is still busy with the last release: it has not come back for the
    /// next one yet (a client that does not say: it has not acknowledged it). Unlike
    /// [`Server::collect`], this leaves the acknowledgement pending.
    pub fn client_busy(&self) -> bool {
        if self.released == 0 {
            return false;
        }
        let s = self.map.shared();
        match s.parked.load(Ordering::Acquire) {
            PARK_UNSAID => s.ack_seq.load(Ordering::Acquire) != self.released,
            p => p != self.released,
        }
    }

    /// Wait until the client comes back for its next release ([`Server::client_busy`] false),
    /// at most `timeout_ns`; it wakes this thread as it does. Spurious returns are fine.
    pub fn wait_client(&self, timeout_ns: u64) {
        let s = self.map.shared();
        s.park_waiter.store(1, Ordering::SeqCst);
        let p = s.parked.load(Ordering::SeqCst);
        if p != self.released {
            futex_wait(&s.parked, p, timeout_ns);
        }
        s.park_waiter.store(0, Ordering::SeqCst);
    }

    /// Look at the previous release again (after [`Server::collect`] found it not yet acknowledged).
    pub fn repend(&mut self) {
        self.pending = self.released > 0;
    }

    /// The client's thread and the CPU it last acknowledged from (`--explain` traces them); 0
    /// when the client does not say.
    pub fn client_thread(&self) -> (i32, u32) {
        let s = self.map.shared();
        (
            s.client_tid.load(Ordering::Relaxed),
            s.client_cpu.load(Ordering::Relaxed),
        )
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
        self.stop.store(true, Ordering::Release);
        // Wakes the door's accept() (EINVAL on a shut-down listening socket).
        // SAFETY: shutdown of the listening socket the door thread owns and still holds open.
        unsafe { libc::shutdown(self.listener_fd, libc::SHUT_RDWR) };
        if let Some(h) = self.door.take() {
            let _ = h.join();
        }
        // Remove the socket only if it is still the one we bound.
        if let Ok(m) = std::fs::symlink_metadata(&self.path) {
            if (m.dev(), m.ino()) == self.bound {
                let _ = std::fs::remove_file(&self.path);
            }
        }
    }
}

/// What is at a channel's `path`, changing nothing: `Ok(false)` nothing, `Ok(true)` an entry a new
/// channel may replace (a socket nobody listens on, its dispatcher died, or a file of an older
/// version under the reserved name, if it is ours or we are root); `Err` a live socket (its
/// listener's pid and uid as the kernel gives them, `SO_PEERCRED`: never what the listener says)
/// or another user's entry. Never follows a link.
fn probe_name(path: &Path, name: &str) -> Result<bool, ChannelError> {
    let m = match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(source) => {
            return Err(ChannelError::Io {
                name: name.to_string(),
                source,
            })
        }
        Ok(m) => m,
    };
    let me = euid();
    let ours = m.uid() == me || me == 0;
    if m.file_type().is_socket() {
        match UnixStream::connect(path) {
            Ok(s) => {
                let (pid, uid) = peer(&s).map_or((0, m.uid()), |c| (c.pid(), c.uid()));
                return Err(ChannelError::InUse {
                    name: name.to_string(),
                    pid,
                    uid,
                });
            }
            Err(e) if e.raw_os_error() == Some(libc::ECONNREFUSED) => {}
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
                return Err(ChannelError::Squatted {
                    name: name.to_string(),
                    path: path.to_path_buf(),
                    uid: m.uid(),
                });
            }
            Err(source) => {
                return Err(ChannelError::Io {
                    name: name.to_string(),
                    source,
                })
            }
        }
    }
    if !ours {
        return Err(ChannelError::Squatted {
            name: name.to_string(),
            path: path.to_path_buf(),
            uid: m.uid(),
        });
    }
    Ok(true)
}

/// Make way for a new channel at `path`: [`probe_name`], then the stale entry removed.
fn clear_stale(path: &Path, name: &str) -> Result<(), ChannelError> {
    if !probe_name(path, name)? {
        return Ok(());
    }
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(ChannelError::Io {
            name: name.to_string(),
            source: e,
        }),
        _ => Ok(()),
    }
}

/// Remove the sockets in `dir` of channels whose dispatcher is gone (killed before it could remove
/// them; found by scripts/fault-inject.sh, issue 19): each is probed as [`Server::create`] does, so a
/// live channel, another user's socket (unless we are root) and anything that is not a socket are
/// left. Called at every punctual start with the journals' restore. Returns the names removed.
pub fn remove_stale(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for e in entries.flatten() {
        let file = e.file_name();
        let Some(name) = file.to_str().and_then(|f| f.strip_prefix("punctual-wake-")) else {
            continue;
        };
        if check_name(name).is_err() {
            continue;
        }
        let path = e.path();
        let is_socket = std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_socket());
        if is_socket && clear_stale(&path, name).is_ok() {
            removed.push(name.to_string());
        }
    }
    removed.sort();
    removed
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
    /// Kept private to this process (the mapping would outlive it anyway).
    _page: OwnedFd,
    last: u32,
    /// The declared lead plus slack: the furthest ahead a release may be.
    lead_bound: u64,
    /// The thread that attached (and waits: one client per thread), told to the dispatcher with
    /// each acknowledgement.
    tid: i32,
    owner: Owner,
}

impl Client {
    /// Attach to channel `name` in `dir`, waiting up to `timeout_ns` for it to appear.
    pub fn attach(dir: &Path, name: &str, timeout_ns: u64) -> Result<Client, ChannelError> {
        Self::attach_any(&[dir.to_path_buf()], name, timeout_ns)
    }

    /// [`Client::attach`] to the channel in whichever of `dirs` has it first (in order, looked at
    /// every 5 ms): [`client_dirs`] gives root's directory, then the user's own.
    pub fn attach_any(
        dirs: &[PathBuf],
        name: &str,
        timeout_ns: u64,
    ) -> Result<Client, ChannelError> {
        check_name(name)?;
        let paths: Vec<PathBuf> = dirs.iter().map(|d| path_of(d, name)).collect();
        let named = |why: String| ChannelError::Invalid {
            name: name.to_string(),
            why,
        };
        let io_err = |source| ChannelError::Io {
            name: name.to_string(),
            source,
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_nanos(timeout_ns);
        let mut seen_stale = false;
        let mut stream = 'found: loop {
            for path in &paths {
                let is_socket = std::fs::symlink_metadata(path)
                    .map(|m| m.file_type().is_socket())
                    .unwrap_or(false);
                if !is_socket {
                    continue;
                }
                match UnixStream::connect(path) {
                    Ok(s) => break 'found s,
                    Err(e) if e.raw_os_error() == Some(libc::ECONNREFUSED) => seen_stale = true,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
                        return Err(ChannelError::Denied {
                            name: name.to_string(),
                            uid: euid(),
                        })
                    }
                    Err(source) => return Err(io_err(source)),
                }
            }
            if std::time::Instant::now() >= deadline {
                return Err(if seen_stale {
                    ChannelError::OwnerGone(name.to_string())
                } else {
                    ChannelError::NotFound(name.to_string())
                });
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        };
        // The dispatcher must be root or this user: anyone else may have squatted the name.
        let server = peer(&stream).map_err(io_err)?;
        if server.uid() != 0 && server.uid() != euid() {
            return Err(named(format!(
                "its socket is held by uid {}, neither root nor this user; a client attaches only to a dispatcher run by root or by its own user",
                server.uid()
            )));
        }
        stream
            .set_read_timeout(Some(std::time::Duration::from_secs(5)))
            .map_err(io_err)?;
        stream.write_all(&[HELLO_ATTACH]).map_err(io_err)?;
        let (reply, page) = receive(&stream).map_err(io_err)?;
        let status = u32::from_le_bytes(reply[0..4].try_into().expect("4 bytes"));
        let pid = i32::from_le_bytes(reply[4..8].try_into().expect("4 bytes"));
        let uid = u32::from_le_bytes(reply[8..12].try_into().expect("4 bytes"));
        let page = match (status, page) {
            (REPLY_OK, Some(fd)) => fd,
            (REPLY_DENIED, _) => {
                return Err(ChannelError::Denied {
                    name: name.to_string(),
                    uid,
                })
            }
            (REPLY_TAKEN, _) => {
                return Err(ChannelError::Taken {
                    name: name.to_string(),
                    pid,
                })
            }
            (REPLY_ENDED, _) => return Err(ChannelError::Ended(name.to_string())),
            _ => return Err(ChannelError::Foreign(name.to_string())),
        };
        check_page(&page).map_err(named)?;
        let map = Mapping::new(&page).map_err(io_err)?;
        let s = map.shared();
        let me = std::process::id() as i32;
        if s.magic.load(Ordering::Acquire) != MAGIC || s.version.load(Ordering::Acquire) != VERSION
        {
            return Err(ChannelError::Foreign(name.to_string()));
        }
        let header_len = s.header_len.load(Ordering::Acquire);
        if header_len as usize != std::mem::size_of::<Shared>() {
            return Err(named(format!(
                "its header is {header_len} bytes, this version's is {}",
                std::mem::size_of::<Shared>()
            )));
        }
        let owner = s.owner_pid.load(Ordering::Acquire);
        if owner != server.pid() {
            return Err(named(format!(
                "its header names pid {owner} as the dispatcher, but pid {} answered",
                server.pid()
            )));
        }
        let period = s.period.load(Ordering::Acquire);
        if period > MAX_PERIOD_NS {
            return Err(named(format!(
                "its period of {period} ns is longer than a day"
            )));
        }
        let max_lead = s.max_lead.load(Ordering::Acquire);
        if max_lead > MAX_LEAD_NS {
            return Err(named(format!(
                "its lead of {max_lead} ns is longer than {MAX_LEAD_NS} ns"
            )));
        }
        match s.state.load(Ordering::Acquire) {
            STATE_RUNNING => {}
            STATE_ENDED => return Err(ChannelError::Ended(name.to_string())),
            other => return Err(named(format!("unknown state {other}"))),
        }
        if s.admitted_pid.load(Ordering::Acquire) != me {
            return Err(named("the dispatcher did not record this client".into()));
        }
        let last = s.seq.load(Ordering::Acquire);
        // Opened while the dispatcher still holds its end of the connection: the pid is its own.
        let owner = Owner::new(owner, s.owner_start.load(Ordering::Acquire));
        // Attached only now: the dispatcher waits for this before its first release.
        s.client_pid.store(me, Ordering::Release);
        Ok(Client {
            map,
            name: name.to_string(),
            _page: page,
            last,
            lead_bound: max_lead + LEAD_SLACK_NS,
            // SAFETY: a plain system call without arguments that can fail.
            tid: unsafe { libc::gettid() },
            owner,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The channel's nominal period (0 for event-driven channels).
    pub fn period(&self) -> u64 {
        self.map
            .shared()
            .period
            .load(Ordering::Relaxed)
            .min(MAX_PERIOD_NS)
    }

    /// The plan has ended (spinning towards a release must stop).
    #[inline]
    pub fn ended(&self) -> bool {
        self.map.shared().state.load(Ordering::Relaxed) == STATE_ENDED
    }

    /// The furthest ahead of now a release may be; [`Client::next`] refuses anything further.
    pub fn lead_bound(&self) -> u64 {
        self.lead_bound
    }

    /// Wait until the dispatcher releases a release this client has not seen. `now` reads the
    /// clock. A release further ahead than the channel's lead is refused ([`ChannelError::Invalid`]):
    /// no dispatcher issues one, and spinning towards it would burn the CPU for nothing.
    pub fn next(&mut self, now: &dyn Fn() -> u64) -> Result<Release, ChannelError> {
        let s = self.map.shared();
        // Done with the last release: a dispatcher waiting to use this CPU may go on.
        s.parked.store(self.last, Ordering::SeqCst);
        if s.park_waiter.load(Ordering::SeqCst) != 0 {
            futex_wake(&s.parked);
        }
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
                let t = now();
                if target > t.saturating_add(self.lead_bound) {
                    return Err(ChannelError::Invalid {
                        name: self.name.clone(),
                        why: format!(
                            "a release {} ns ahead, beyond the channel's lead bound of {} ns",
                            target - t,
                            self.lead_bound
                        ),
                    });
                }
                let missed = seq.wrapping_sub(self.last).wrapping_sub(1) as u64;
                self.last = seq;
                return Ok(Release {
                    seq,
                    target,
                    issued: (slept && again == seq && issued <= t).then_some(issued),
                    missed,
                });
            }
            futex_wait(&s.seq, seq, 100_000_000);
            slept = true;
            if s.seq.load(Ordering::Acquire) == seq && self.owner.gone() {
                return Err(ChannelError::OwnerGone(self.name.clone()));
            }
        }
    }

    /// Report how release `seq` went.
    #[allow(clippy::too_many_arguments)]
    pub fn ack(
        &self,
        seq: u32,
        lateness: u64,
        wake_latency: Option<u64>,
        woke_late: bool,
        missed_total: u64,
        spin_read: Option<u64>,
    ) {
        let s = self.map.shared();
        // SAFETY: a plain system call without arguments that can fail (the vDSO's getcpu).
        let cpu = unsafe { libc::sched_getcpu() };
        s.client_tid.store(self.tid, Ordering::Relaxed);
        s.client_cpu.store(cpu.max(0) as u32, Ordering::Relaxed);
        s.lateness.store(lateness, Ordering::Relaxed);
        s.wake_latency
            .store(wake_latency.unwrap_or(u64::MAX), Ordering::Relaxed);
        s.woke_late.store(woke_late as u32, Ordering::Relaxed);
        s.client_missed.store(missed_total, Ordering::Relaxed);
        s.spin_read.store(spin_read.unwrap_or(0), Ordering::Relaxed);
        s.ack_seq.store(seq, Ordering::Release);
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let me = std::process::id() as i32;
        let s = self.map.shared();
        for word in [&s.client_pid, &s.admitted_pid] {
            let _ = word.compare_exchange(me, 0, Ordering::AcqRel, Ordering::Relaxed);
        }
    }
}

/// Read the dispatcher's reply and the fd that comes with it.
fn receive(stream: &UnixStream) -> io::Result<([u8; REPLY_LEN], Option<OwnedFd>)> {
    use std::os::fd::FromRawFd;
    let mut buf = [0u8; REPLY_LEN];
    let mut space = nix::cmsg_space!([RawFd; 1]);
    let (n, fds) = {
        let mut iov = [io::IoSliceMut::new(&mut buf)];
        let msg = nix::sys::socket::recvmsg::<()>(
            stream.as_fd().as_raw_fd(),
            &mut iov,
            Some(&mut space),
            nix::sys::socket::MsgFlags::MSG_CMSG_CLOEXEC,
        )?;
        let mut fds = Vec::new();
        for c in msg.cmsgs()? {
            if let nix::sys::socket::ControlMessageOwned::ScmRights(f) = c {
                fds.extend(f);
            }
        }
        (msg.bytes, fds)
    };
    // SAFETY: fds received with SCM_RIGHTS are new descriptors this process owns.
    let mut owned: Vec<OwnedFd> = fds
        .into_iter()
        .map(|f| unsafe { OwnedFd::from_raw_fd(f) })
        .collect();
    if n != REPLY_LEN {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "short reply from the dispatcher",
        ));
    }
    let page = if owned.len() == 1 { owned.pop() } else { None };
    Ok((buf, page))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    fn now() -> u64 {
        punctual_time::clock::read_clock(libc::CLOCK_MONOTONIC)
    }

    /// A client asks whether its dispatcher is gone: through a pidfd, and where the kernel has
    /// none through the pid and start time. Both say no while it runs and yes once it ended.
    #[test]
    fn the_owner_is_gone_once_its_process_ended_by_pidfd_or_start_time() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let start = punctual_rt::journal::task_start_time(pid).unwrap();
        let by_fd = Owner::new(pid, start);
        assert!(by_fd.fd.is_some(), "Linux 5.3 and later have pidfd_open");
        let by_stat = Owner {
            fd: None,
            ..Owner::new(pid, start)
        };
        assert!(!by_fd.gone() && !by_stat.gone());
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(by_fd.gone() && by_stat.gone());
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
                        c.ack(r.seq, 7, r.issued.map(|i| now() - i), false, 0, None);
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
        c.ack(r.seq, 3, None, true, 1, None);
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
    fn a_second_dispatcher_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let _server = Server::create(dir.path(), "t3", 0).unwrap();
        match Server::create(dir.path(), "t3", 0) {
            Err(ChannelError::InUse { pid, .. }) => assert_eq!(pid, std::process::id() as i32),
            other => panic!("{:?}", other.err()),
        }
    }

    #[test]
    fn stale_channel_of_a_dead_owner_is_cleaned() {
        let dir = tempfile::tempdir().unwrap();
        // A dispatcher that died: its socket is left, nobody listens.
        drop(std::os::unix::net::UnixListener::bind(path_of(dir.path(), "t5")).unwrap());
        let s = Server::create(dir.path(), "t5", 0).unwrap();
        assert_eq!(s.client(), None);
        drop(s);
        assert!(!path_of(dir.path(), "t5").exists(), "removed on drop");
        // A file of an older version, and a link someone planted: the entries go, never their
        // targets.
        std::fs::write(path_of(dir.path(), "t6"), vec![0u8; 4096]).unwrap();
        drop(Server::create(dir.path(), "t6", 0).unwrap());
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "precious").unwrap();
        std::os::unix::fs::symlink(&victim, path_of(dir.path(), "t7")).unwrap();
        let s = Server::create(dir.path(), "t7", 0).unwrap();
        assert!(std::fs::symlink_metadata(s.path())
            .unwrap()
            .file_type()
            .is_socket());
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    }

    #[test]
    fn stale_channel_sockets_of_killed_dispatchers_are_swept() {
        let dir = tempfile::tempdir().unwrap();
        // Killed dispatchers: sockets nobody listens on.
        drop(std::os::unix::net::UnixListener::bind(path_of(dir.path(), "dead1")).unwrap());
        drop(std::os::unix::net::UnixListener::bind(path_of(dir.path(), "dead2")).unwrap());
        // A live channel, a file that is not a socket, a link, and something not ours by name.
        let live = Server::create(dir.path(), "live", 0).unwrap();
        std::fs::write(path_of(dir.path(), "plain"), "x").unwrap();
        let victim = dir.path().join("victim");
        drop(std::os::unix::net::UnixListener::bind(&victim).unwrap());
        std::os::unix::fs::symlink(&victim, path_of(dir.path(), "link")).unwrap();
        drop(std::os::unix::net::UnixListener::bind(dir.path().join("other-sock")).unwrap());

        assert_eq!(remove_stale(dir.path()), vec!["dead1", "dead2"]);
        assert!(!path_of(dir.path(), "dead1").exists());
        assert!(!path_of(dir.path(), "dead2").exists());
        assert!(live.path().exists(), "a live channel is left");
        assert_eq!(live.client(), None);
        assert!(path_of(dir.path(), "plain").exists());
        assert!(std::fs::symlink_metadata(path_of(dir.path(), "link")).is_ok());
        assert!(victim.exists());
        assert!(dir.path().join("other-sock").exists());
        assert_eq!(remove_stale(dir.path()), Vec::<String>::new());
    }

    #[test]
    fn channel_names_cannot_leave_the_directory() {
        let dir = tempfile::tempdir().unwrap();
        for bad in ["../x", "a/b", ".hidden", "", "x\n"] {
            assert!(matches!(
                Client::attach(dir.path(), bad, 0),
                Err(ChannelError::BadName(_))
            ));
            assert!(matches!(
                Server::create(dir.path(), bad, 0),
                Err(ChannelError::BadName(_))
            ));
        }
    }

    #[test]
    fn the_socket_is_private_and_the_page_sealed() {
        let dir = tempfile::tempdir().unwrap();
        let s = Server::create(dir.path(), "t8", 0).unwrap();
        let m = std::fs::symlink_metadata(s.path()).unwrap();
        assert_eq!(m.mode() & 0o777, 0o600);
        assert_eq!(m.uid(), euid());
        let c = Client::attach(dir.path(), "t8", 0).unwrap();
        check_page(&c._page).unwrap();
    }

    #[test]
    fn a_page_that_could_shrink_is_refused() {
        use nix::sys::memfd::{memfd_create, MemFdCreateFlag};
        let fd = memfd_create(c"t", MemFdCreateFlag::MFD_ALLOW_SEALING).unwrap();
        nix::unistd::ftruncate(&fd, PAGE as libc::off_t).unwrap();
        assert!(check_page(&fd).unwrap_err().contains("not sealed"));
        // SAFETY: fcntl on an fd we own.
        unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, libc::F_SEAL_GROW) };
        assert!(check_page(&fd).is_err(), "growing sealed is not enough");
        let ok = sealed_page().unwrap();
        check_page(&ok).unwrap();
    }

    #[test]
    fn channel_truncated_under_a_live_dispatcher_and_client_crashes_neither() {
        let dir = tempfile::tempdir().unwrap();
        let mut server = Server::create(dir.path(), "t9", 0).unwrap();
        let mut c = Client::attach(dir.path(), "t9", 0).unwrap();
        // The page cannot shrink (sealed), and the name is a socket, not a file to truncate.
        let e = nix::unistd::ftruncate(&c._page, 0).unwrap_err();
        assert_eq!(e, nix::errno::Errno::EPERM);
        assert!(std::fs::OpenOptions::new()
            .write(true)
            .open(server.path())
            .is_err());
        assert!(nix::unistd::truncate(server.path(), 0).is_err());
        // Both sides still work.
        let t = now() + 100_000;
        server.release(t, now());
        let r = c.next(&now).unwrap();
        assert_eq!(r.target, t);
        c.ack(r.seq, 1, None, false, 0, None);
        assert!(matches!(
            server.collect(),
            Some(Ack::Done { lateness: 1, .. })
        ));
    }

    #[test]
    fn a_client_is_busy_with_a_release_until_it_comes_back_for_the_next() {
        let dir = tempfile::tempdir().unwrap();
        let mut server = Server::create(dir.path(), "t11", 0).unwrap();
        let mut c = Client::attach(dir.path(), "t11", 0).unwrap();
        assert!(!server.client_busy(), "nothing released yet");
        server.release(now() + 100_000, now());
        let r = c.next(&now).unwrap();
        assert!(server.client_busy());
        c.ack(r.seq, 1, None, false, 0, None);
        // Acknowledged, but still at its work: the dispatcher's wait ends at its timeout.
        assert!(server.client_busy());
        let t0 = now();
        server.wait_client(2_000_000);
        assert!(now() - t0 >= 1_000_000, "woken early");
        // Back for the next release: no longer busy, and a dispatcher waiting for that is woken.
        let waited = std::thread::scope(|scope| {
            let client = scope.spawn(move || {
                std::thread::sleep(std::time::Duration::from_millis(20));
                c.next(&now).map(|r| r.seq)
            });
            let t0 = now();
            server.wait_client(5_000_000_000);
            let waited = now() - t0;
            assert!(!server.client_busy());
            assert!(matches!(server.collect(), Some(Ack::Done { .. })));
            server.release(now() + 100_000, now());
            client.join().unwrap().unwrap();
            waited
        });
        assert!(waited < 2_000_000_000, "not woken: {waited} ns");
    }

    #[test]
    fn forged_header_is_refused_with_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let server = Server::create(dir.path(), "t10", 0).unwrap();
        let s = server.map.shared();
        s.header_len.store(999, Ordering::Release);
        let e = Client::attach(dir.path(), "t10", 0).err().unwrap();
        assert!(e.to_string().contains("header is 999 bytes"), "{e}");
        assert_eq!(e.errno(), libc::EPROTO);
        s.header_len
            .store(std::mem::size_of::<Shared>() as u32, Ordering::Release);
        s.max_lead.store(u64::MAX, Ordering::Release);
        let e = Client::attach(dir.path(), "t10", 0).err().unwrap();
        assert!(e.to_string().contains("lead of"), "{e}");
        s.max_lead.store(0, Ordering::Release);
        s.owner_pid.store(1, Ordering::Release);
        let e = Client::attach(dir.path(), "t10", 0).err().unwrap();
        assert!(e.to_string().contains("names pid 1"), "{e}");
        s.owner_pid
            .store(std::process::id() as i32, Ordering::Release);
        s.version.store(77, Ordering::Release);
        assert!(matches!(
            Client::attach(dir.path(), "t10", 0),
            Err(ChannelError::Foreign(_))
        ));
    }

    #[test]
    fn forged_release_far_ahead_is_refused_without_spinning() {
        let dir = tempfile::tempdir().unwrap();
        let mut server = Server::create(dir.path(), "t11", 10_000_000).unwrap();
        server.set_max_lead(1_000_000);
        let mut c = Client::attach(dir.path(), "t11", 0).unwrap();
        assert_eq!(c.lead_bound(), 1_000_000 + LEAD_SLACK_NS);
        let t0 = std::time::Instant::now();
        server.release(now() + 60_000_000_000, now());
        let e = c.next(&now).err().unwrap();
        assert!(
            e.to_string().contains("beyond the channel's lead bound"),
            "{e}"
        );
        assert!(t0.elapsed() < std::time::Duration::from_secs(5));
        // A release within the lead is taken.
        let t = now() + 500_000;
        server.release(t, now());
        assert_eq!(c.next(&now).unwrap().target, t);
    }

    fn is_root() -> bool {
        euid() == 0
    }

    /// Fork a child that drops to uid/gid 65534 and runs `body` (raw system calls only: the
    /// parent is multi-threaded). Returns the child's exit code.
    fn as_nobody(body: impl FnOnce() -> i32) -> i32 {
        // SAFETY: the child only makes async-signal-safe system calls, then _exit.
        match unsafe { libc::fork() } {
            // SAFETY: in the forked child of a threaded parent only async-signal-safe calls are
            // sound: setgroups (a NULL list of length 0), setgid, setuid, the body's raw system
            // calls (this function's contract) and _exit, which never returns to Rust code.
            0 => unsafe {
                let ok = libc::setgroups(0, std::ptr::null()) == 0
                    && libc::setgid(65534) == 0
                    && libc::setuid(65534) == 0;
                libc::_exit(if ok { body() } else { 99 })
            },
            pid => {
                let mut st = 0;
                // SAFETY: waiting for the child we forked.
                unsafe { libc::waitpid(pid, &mut st, 0) };
                libc::WEXITSTATUS(st)
            }
        }
    }

    /// Issue 32, item 3: another user's live socket under a channel's name used to make a root
    /// `run` say "in use by a running dispatcher (pid 1)", the pid the squatter's answer chose.
    /// The pid and uid are now the kernel's (SO_PEERCRED), found without changing anything.
    #[test]
    fn wake_channel_squatted_by_another_user_is_reported_with_the_kernels_pid_and_uid() {
        if !is_root() {
            punctual_testkit::skip(
                "wake_channel_squatted_by_another_user_is_reported_with_the_kernels_pid_and_uid",
                "needs root to become another user",
            );
            return;
        }
        use std::os::unix::fs::PermissionsExt;
        // A shared directory as /dev/shm is (sticky, everyone may create).
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
        let path = path_of(dir.path(), "sq");
        let addr = sockaddr(&path);
        let mut ready = [0i32; 2];
        // SAFETY: a pipe for the child to say it listens.
        assert_eq!(unsafe { libc::pipe(ready.as_mut_ptr()) }, 0);
        // SAFETY: the child makes raw system calls only, then waits to be killed.
        let child = match unsafe { libc::fork() } {
            // SAFETY: the forked child of a threaded parent makes only async-signal-safe calls
            // (setgroups with a NULL list of length 0, setgid, setuid, socket, bind and listen on
            // `addr`, a live sockaddr_un of the length given, a one-byte write from a live array,
            // pause) and never leaves the loop but by being killed.
            0 => unsafe {
                let ok = libc::setgroups(0, std::ptr::null()) == 0
                    && libc::setgid(65534) == 0
                    && libc::setuid(65534) == 0;
                let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
                let len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
                let bound = ok
                    && libc::bind(fd, &addr as *const _ as *const libc::sockaddr, len) == 0
                    && libc::listen(fd, 4) == 0;
                libc::write(ready[1], [bound as u8].as_ptr() as *const libc::c_void, 1);
                loop {
                    // Answers nothing: the old code asked the listener who it was.
                    libc::pause();
                }
            },
            pid => pid,
        };
        let mut b = [0u8; 1];
        // SAFETY: reading the child's one byte.
        unsafe { libc::read(ready[0], b.as_mut_ptr() as *mut libc::c_void, 1) };
        let e = available(dir.path(), "sq").err();
        let created = Server::create(dir.path(), "sq", 1_000_000).err();
        // SAFETY: ending and reaping the child we forked, by its pid.
        unsafe {
            libc::kill(child, libc::SIGKILL);
            libc::waitpid(child, std::ptr::null_mut(), 0);
            libc::close(ready[0]);
            libc::close(ready[1]);
        }
        assert_eq!(b[0], 1, "the squatter could not listen");
        for e in [e, created] {
            match e {
                Some(ChannelError::InUse { pid, uid, .. }) => {
                    assert_eq!((pid, uid), (child, 65534))
                }
                other => panic!("expected InUse with the squatter's pid: {other:?}"),
            }
        }
    }

    /// Issue 32, item 3: root's channels live where only root can create a file, so nobody can
    /// squat their names; a channel directory another user made is refused, naming its owner.
    #[test]
    fn wake_channel_directory_of_root_cannot_be_squatted_and_a_planted_one_is_refused() {
        let name = "wake_channel_directory_of_root_cannot_be_squatted_and_a_planted_one_is_refused";
        if !is_root() {
            punctual_testkit::skip(name, "needs root to become another user");
            return;
        }
        prepare_dir(Path::new(ROOT_DIR)).unwrap();
        let addr = sockaddr(&path_of(Path::new(ROOT_DIR), "squat-test"));
        let code = as_nobody(|| {
            // SAFETY: raw socket calls on a stack address.
            unsafe {
                let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
                let len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
                if libc::bind(fd, &addr as *const _ as *const libc::sockaddr, len) == 0 {
                    1
                } else if *libc::__errno_location() == libc::EACCES {
                    0
                } else {
                    2
                }
            }
        });
        assert_eq!(code, 0, "another user could bind in {ROOT_DIR}");
        let tmp = tempfile::tempdir().unwrap();
        let planted = tmp.path().join("planted");
        std::fs::create_dir(&planted).unwrap();
        std::os::unix::fs::lchown(&planted, Some(65534), Some(65534)).unwrap();
        let e = prepare_dir(&planted).unwrap_err().to_string();
        assert!(e.contains("belongs to uid 65534"), "{e}");
        assert!(available(&planted, "x").is_err());
    }

    fn sockaddr(path: &Path) -> libc::sockaddr_un {
        // SAFETY: zeroed sockaddr_un is valid.
        let mut a: libc::sockaddr_un = unsafe { std::mem::zeroed() };
        a.sun_family = libc::AF_UNIX as libc::sa_family_t;
        for (d, s) in a
            .sun_path
            .iter_mut()
            .zip(path.as_os_str().as_encoded_bytes())
        {
            *d = *s as libc::c_char;
        }
        a
    }

    /// In the child: connect, say attach, and classify what happens (raw system calls).
    fn raw_attach(addr: &libc::sockaddr_un) -> i32 {
        // SAFETY: raw socket calls on a stack address and buffer.
        unsafe {
            let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
            let len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
            if libc::connect(fd, addr as *const _ as *const libc::sockaddr, len) != 0 {
                return if *libc::__errno_location() == libc::EACCES {
                    10
                } else {
                    11
                };
            }
            let hello = [HELLO_ATTACH];
            libc::write(fd, hello.as_ptr() as *const libc::c_void, 1);
            let mut b = [0u8; REPLY_LEN];
            let n = libc::read(fd, b.as_mut_ptr() as *mut libc::c_void, REPLY_LEN);
            if n as usize != REPLY_LEN {
                return 12;
            }
            match u32::from_le_bytes([b[0], b[1], b[2], b[3]]) {
                REPLY_DENIED => 20,
                REPLY_OK => 21,
                _ => 22,
            }
        }
    }

    #[test]
    fn unprivileged_process_cannot_open_a_channel() {
        if !is_root() {
            punctual_testkit::skip(
                "unprivileged_process_cannot_open_a_channel",
                "needs root to run a child as uid 65534",
            );
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let server = Server::create(dir.path(), "t12", 0).unwrap();
        let addr = sockaddr(server.path());
        // The socket's mode stops it at connect.
        assert_eq!(
            as_nobody(|| raw_attach(&addr)),
            10,
            "connect must be refused"
        );
        // Even through a socket whose mode slipped, the door checks who is asking.
        std::fs::set_permissions(server.path(), std::fs::Permissions::from_mode(0o666)).unwrap();
        assert_eq!(
            as_nobody(|| raw_attach(&addr)),
            20,
            "the door must deny uid 65534"
        );
        assert_eq!(server.client(), None);
        // Admitted by name, the same user gets the page.
        let dir2 = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir2.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let admitted = Server::create_for(
            dir2.path(),
            "t13",
            0,
            Access {
                client_uid: Some(65534),
            },
        )
        .unwrap();
        assert_eq!(
            std::fs::symlink_metadata(admitted.path()).unwrap().uid(),
            65534
        );
        let addr = sockaddr(admitted.path());
        assert_eq!(as_nobody(|| raw_attach(&addr)), 21);
    }

    #[test]
    fn a_client_refuses_a_dispatcher_of_another_user() {
        if !is_root() {
            punctual_testkit::skip(
                "a_client_refuses_a_dispatcher_of_another_user",
                "needs root to run a child as uid 65534",
            );
            return;
        }
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
        let path = path_of(dir.path(), "t14");
        let addr = sockaddr(&path);
        let (r, w) = nix::unistd::pipe().unwrap();
        let (rfd, wfd) = (r.as_raw_fd(), w.as_raw_fd());
        // SAFETY: the child makes raw system calls only, then _exit.
        let child = unsafe { libc::fork() };
        if child == 0 {
            // SAFETY: as above.
            unsafe {
                libc::close(rfd);
                if libc::setgroups(0, std::ptr::null()) != 0
                    || libc::setgid(65534) != 0
                    || libc::setuid(65534) != 0
                {
                    libc::_exit(99);
                }
                let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
                let len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
                libc::bind(fd, &addr as *const _ as *const libc::sockaddr, len);
                libc::chmod(addr.sun_path.as_ptr(), 0o666);
                libc::listen(fd, 1);
                libc::write(wfd, [1u8].as_ptr() as *const libc::c_void, 1);
                let c = libc::accept(fd, std::ptr::null_mut(), std::ptr::null_mut());
                let mut b = [0u8; 1];
                libc::read(c, b.as_mut_ptr() as *mut libc::c_void, 1);
                libc::_exit(0);
            }
        }
        drop(w);
        let mut b = [0u8; 1];
        nix::unistd::read(r.as_raw_fd(), &mut b).unwrap();
        let e = Client::attach(dir.path(), "t14", 1_000_000_000).err();
        // SAFETY: ending and reaping the child we forked, by its pid.
        unsafe {
            libc::kill(child, libc::SIGKILL);
            libc::waitpid(child, std::ptr::null_mut(), 0);
        }
        let e = e.expect("the squatter's socket must be refused");
        assert!(e.to_string().contains("held by uid 65534"), "{e}");
        // The next dispatcher (root) replaces the squatter's dead socket.
        drop(Server::create(dir.path(), "t14", 0).unwrap());
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
