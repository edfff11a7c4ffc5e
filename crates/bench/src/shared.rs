//! Two-process measurements: memory shared across `fork`, and forked children that are pinned, set
//! to a class, killed and reaped whatever happens.
//!
//! The child of a `fork` in a multi-threaded process may only make async-signal-safe calls, so the
//! children here run short loops of raw system calls (read, write, futex, clock_gettime through the
//! vDSO) and never return into Rust code that allocates or locks; they leave by `_exit` or are killed.

use crate::BenchError;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

/// A `T` in an anonymous shared mapping, visible to the parent and to children forked after it was
/// made. `T` must be valid when all-zero (atomics, integers).
pub(crate) struct SharedBox<T> {
    ptr: *mut T,
}

// SAFETY: the mapping is only accessed through `&T`, and `T` (atomics) is Sync.
unsafe impl<T: Sync> Sync for SharedBox<T> {}
// SAFETY: the box owns its mapping (unmapped once, on drop, by whichever thread holds it) and
// hands out only `&T`, shared safely between threads since `T` is Sync.
unsafe impl<T: Sync> Send for SharedBox<T> {}

impl<T> SharedBox<T> {
    /// # Safety
    /// `T` must be valid when every byte is zero and must only hold atomics or plain integers.
    pub unsafe fn zeroed() -> Result<Self, BenchError> {
        let p = libc::mmap(
            std::ptr::null_mut(),
            std::mem::size_of::<T>().max(1),
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        if p == libc::MAP_FAILED {
            return Err(BenchError::os("mapping shared memory"));
        }
        Ok(SharedBox { ptr: p.cast() })
    }

    pub fn get(&self) -> &T {
        // SAFETY: the mapping lives as long as self and was zero-initialised, valid for T.
        unsafe { &*self.ptr }
    }
}

impl<T> Drop for SharedBox<T> {
    fn drop(&mut self) {
        // SAFETY: unmapping our own mapping once.
        unsafe { libc::munmap(self.ptr.cast(), std::mem::size_of::<T>().max(1)) };
    }
}

/// Where and how a forked child runs.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ChildSetup {
    pub cpu: Option<usize>,
    pub sched: Option<punctual_rt::SchedParams>,
}

/// A forked child; dropping it kills (SIGKILL) and reaps it.
pub(crate) struct Child {
    pid: libc::pid_t,
}

/// Child setup results, written to the shared `ready` word: 1 ready, negative errno on failure.
pub(crate) const READY: i64 = 1;

impl Child {
    /// Fork a child that arms a parent-death signal, applies `setup`, stores [`READY`] (or a
    /// negative errno) into `ready`, then runs `body` forever (it is killed when dropped).
    ///
    /// # Safety
    /// `body` runs in the child of a possibly multi-threaded process: it must only make
    /// async-signal-safe calls, must not allocate, lock, panic or return.
    pub unsafe fn fork(
        setup: ChildSetup,
        ready: &AtomicI64,
        body: impl FnOnce(),
    ) -> Result<Child, BenchError> {
        ready.store(0, Ordering::SeqCst);
        // The mask stays: a body may wait for a signal the forking thread blocked for it.
        let mut prep = punctual_rt::child::ChildSetup::new(nix::sys::signal::Signal::SIGKILL)
            .keep_signal_mask();
        if let Some(c) = setup.cpu {
            prep = prep.cpus(&[c]);
        }
        if let Some(p) = setup.sched {
            prep = prep.sched(p);
        }
        let pid = libc::fork();
        if pid < 0 {
            return Err(BenchError::os("fork"));
        }
        if pid == 0 {
            if let Err(e) = prep.apply() {
                ready.store(
                    -(e.raw_os_error().unwrap_or(libc::EINVAL) as i64),
                    Ordering::SeqCst,
                );
                libc::_exit(1);
            }
            ready.store(READY, Ordering::SeqCst);
            body();
            libc::_exit(0);
        }
        let child = Child { pid };
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            match ready.load(Ordering::SeqCst) {
                READY => return Ok(child),
                0 if Instant::now() < deadline => std::thread::sleep(Duration::from_micros(200)),
                0 => {
                    return Err(BenchError::Os {
                        what: "starting the child process",
                        source: std::io::ErrorKind::TimedOut.into(),
                    })
                }
                e => {
                    return Err(BenchError::Os {
                        what: "setting up the child process (affinity, scheduling class)",
                        source: std::io::Error::from_raw_os_error(-e as i32),
                    })
                }
            }
        }
    }

    pub fn pid(&self) -> libc::pid_t {
        self.pid
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        // SAFETY: our own unreaped child: the pid cannot have been reused.
        unsafe {
            libc::kill(self.pid, libc::SIGKILL);
            let mut status = 0;
            libc::waitpid(self.pid, &mut status, 0);
        }
    }
}

/// A pipe as two raw fds, closed on drop.
pub(crate) struct Pipe {
    pub r: libc::c_int,
    pub w: libc::c_int,
}

impl Pipe {
    pub fn new() -> Result<Pipe, BenchError> {
        let mut fds = [0; 2];
        // SAFETY: pipe2 fills two fds.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(BenchError::os("creating a pipe"));
        }
        Ok(Pipe {
            r: fds[0],
            w: fds[1],
        })
    }
}

impl Drop for Pipe {
    fn drop(&mut self) {
        // SAFETY: closing our own fds once.
        unsafe {
            libc::close(self.r);
            libc::close(self.w);
        }
    }
}

/// Run `f` on a new thread pinned to `cpu` in class `sched` (falling back to SCHED_OTHER, reported,
/// when the kernel refuses the real-time class). Returns `f`'s result and the fallback taken.
pub(crate) fn on_thread<R: Send>(
    cpu: Option<usize>,
    sched: punctual_rt::SchedParams,
    f: impl FnOnce() -> R + Send,
) -> Result<(R, Option<punctual_result::Fallback>), BenchError> {
    std::thread::scope(|s| {
        std::thread::Builder::new()
            .name("punctual-bench".into())
            .spawn_scoped(s, move || {
                let guards = punctual_rt::setup_current_thread(&punctual_rt::ThreadRequest {
                    cpu,
                    policy: sched.policy,
                    priority: sched.priority,
                    timer_slack_ns: None,
                    fall_back_on_refusal: true,
                })?;
                let r = f();
                Ok((r, guards.fallback.clone()))
            })
            .expect("spawning the measuring thread")
            .join()
            .expect("measuring thread panicked")
    })
}

/// The normal class, for measurements that ask for none.
pub(crate) const OTHER: punctual_rt::SchedParams = punctual_rt::SchedParams {
    policy: punctual_rt::Policy::Other,
    priority: 0,
};
