//! SIGINT/SIGTERM handling. The handlers are installed first thing (before a command changes
//! anything), unarmed: a signal then undoes every journalled system change and exits with 130 at
//! once, as the default action would end the process, but with the system restored and SPEC's exit
//! code. A command whose loops poll the stop flag arms it ([`Interrupts::arm`]); from then the first
//! signal sets the flag (the loops finish the current period, results are written, guards restore)
//! and a second one undoes everything at once and exits with 130. A dedicated thread receives the
//! signals, so none of this runs in a signal handler.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, OnceLock};

use crate::task::is_realtime;

pub const EXIT_INTERRUPTED: i32 = 130;

pub struct Interrupts {
    stop: Arc<AtomicBool>,
    signal: AtomicI32,
    armed: AtomicBool,
}

static GLOBAL: OnceLock<Interrupts> = OnceLock::new();

/// The ids of the signal thread and the unstick thread once they run (0 before), and the CPUs
/// real-time threads of this process were pinned to: both keep off them.
static HELPER_TIDS: [AtomicI32; 2] = [AtomicI32::new(0), AtomicI32::new(0)];
static MEASURED: std::sync::Mutex<Vec<usize>> = std::sync::Mutex::new(Vec::new());
/// The unstick thread, started with the signal thread and parked until the first signal.
static UNSTICKER: OnceLock<std::thread::Thread> = OnceLock::new();

/// Keep the signal and unstick threads off `cpus` (a measuring or dispatching thread is pinned
/// there): they are started before any command knows its CPUs, so they may otherwise wake on a
/// measured CPU. Where every online CPU is measured they stay where they are. Process-local,
/// nothing to restore.
pub fn keep_signal_thread_off(cpus: &[usize]) {
    {
        let mut m = MEASURED.lock().unwrap_or_else(|e| e.into_inner());
        for &c in cpus {
            if !m.contains(&c) {
                m.push(c);
            }
        }
    }
    place_helper_threads();
}

fn place_helper_threads() {
    let measured = MEASURED.lock().unwrap_or_else(|e| e.into_inner()).clone();
    if measured.is_empty() {
        return;
    }
    let rest: Vec<usize> = crate::affinity::online_cpus()
        .into_iter()
        .filter(|c| !measured.contains(c))
        .collect();
    if rest.is_empty() {
        return;
    }
    for tid in HELPER_TIDS.iter().map(|t| t.load(Ordering::SeqCst)) {
        if tid != 0 {
            let _ = crate::affinity::set(tid, &rest);
        }
    }
}

/// SIGINT and SIGTERM blocked on the calling thread until dropped, when its mask is put back (a
/// signal that came meanwhile is then taken).
struct BlockedInterrupts(libc::sigset_t);

impl BlockedInterrupts {
    fn new() -> BlockedInterrupts {
        // SAFETY: the sets are initialised by sigemptyset before use; pthread_sigmask changes only
        // the calling thread's mask and writes the old one into `old`.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGINT);
            libc::sigaddset(&mut set, libc::SIGTERM);
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut old);
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old);
            BlockedInterrupts(old)
        }
    }
}

impl Drop for BlockedInterrupts {
    fn drop(&mut self) {
        // SAFETY: puts back the mask read in `new`; the guard is a local of the thread that made it.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &self.0, std::ptr::null_mut()) };
    }
}

/// Record the calling helper thread's id (slot 0 the signal thread, 1 the unstick thread) and
/// place it.
fn register_helper(slot: usize) {
    // SAFETY: gettid has no arguments and cannot fail.
    HELPER_TIDS[slot].store(unsafe { libc::gettid() }, Ordering::SeqCst);
    place_helper_threads();
}

impl Interrupts {
    /// Install the handlers once for the process; later calls return the same instance.
    ///
    /// The state is in place, and the unstick thread parked, before the handlers exist: a signal
    /// that came between the two was once lost (issue 32: the signal thread looked the state up,
    /// found it not yet set and panicked; the run went on to its end and exited 0; 8 of 400
    /// SIGTERMs 0.5-6 ms after the start of a loaded machine's run). Nothing the first signal
    /// does needs a new thread: starting one maps its stack, and a stopping run's signal thread
    /// was seen blocked there (`vm_mmap_pgoff`, 15 s) while its threads were held off their CPU.
    pub fn install() -> &'static Interrupts {
        static STARTED: std::sync::Once = std::sync::Once::new();
        let me = GLOBAL.get_or_init(|| Interrupts {
            stop: Arc::new(AtomicBool::new(false)),
            signal: AtomicI32::new(0),
            armed: AtomicBool::new(false),
        });
        STARTED.call_once(|| me.start_threads());
        me
    }

    fn start_threads(&'static self) {
        // signal-hook-registry installs the kernel's handler before it stores the action that
        // handler looks up, so a signal in between is dropped: measured, 1 SIGTERM in about 2,000
        // sent 0.5-6 ms into a run beside other runs was delivered to the handler and the run went
        // on to exit 0 (issue 32). With both signals blocked on this thread, the only one yet, such
        // a signal stays pending until the registration is complete. The threads started here
        // inherit the block and keep it: they never need to take a signal.
        let _blocked = BlockedInterrupts::new();
        // A small stack: it is locked with the rest of the process under mlockall.
        let unsticker = std::thread::Builder::new()
            .name("punctual-unstick".into())
            .stack_size(256 << 10)
            .spawn(move || {
                register_helper(1);
                while !self.requested() {
                    std::thread::park();
                }
                unstick_until_exit();
            });
        if let Ok(h) = unsticker {
            let _ = UNSTICKER.set(h.thread().clone());
        }
        match signal_hook::iterator::Signals::new([libc::SIGINT, libc::SIGTERM]) {
            Ok(mut signals) => {
                std::thread::Builder::new()
                    .name("punctual-signals".into())
                    .spawn(move || {
                        register_helper(0);
                        for sig in signals.forever() {
                            self.take(sig);
                        }
                    })
                    .expect("spawning the signal thread");
            }
            Err(e) => {
                use std::io::Write;
                let _ = writeln!(
                    std::io::stderr(),
                    "punctual: cannot install signal handlers: {e}"
                );
            }
        }
    }

    /// What a received signal does: before arming, restore and exit; the first one after, set
    /// the flag and wake the unstick thread; a second one, restore and exit.
    ///
    /// The unstick thread is woken first on every path: a stop that restores and exits at once
    /// waits on locks (standard error, the journal) that a thread held off its CPU may hold, and
    /// only moving that thread frees them (issue 32: a `latency` signalled before it armed was
    /// seen 30 s later with its signal thread in a futex wait and the unstick thread still parked).
    fn take(&self, sig: i32) {
        let first = self.signal.swap(sig, Ordering::SeqCst) == 0;
        if first {
            match UNSTICKER.get() {
                Some(t) => t.unpark(),
                None => {
                    let _ = std::thread::Builder::new()
                        .name("punctual-unstick".into())
                        .spawn(unstick_until_exit);
                }
            }
        }
        if !self.armed.load(Ordering::SeqCst) {
            abort_now("interrupted");
        }
        if first {
            self.stop.store(true, Ordering::SeqCst);
        } else {
            abort_now("second interrupt");
        }
    }

    /// The flag loops poll. Shared, so a command can also set it (its duration ended).
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }

    /// From now on the first signal only sets the stop flag: the caller polls it often enough to
    /// end within a second (scripts/fault-inject.sh checks this for every command). A signal that
    /// came before arming has already ended the process.
    pub fn arm(&self) {
        self.armed.store(true, Ordering::SeqCst);
    }

    /// A signal asked us to stop.
    pub fn requested(&self) -> bool {
        self.signal.load(Ordering::SeqCst) != 0
    }

    /// The first signal received, if any.
    pub fn signal(&self) -> Option<i32> {
        match self.signal.load(Ordering::SeqCst) {
            0 => None,
            s => Some(s),
        }
    }
}

fn abort_now(why: &str) -> ! {
    use std::io::Write;
    // The process ends only when every thread has: one held off its CPU must be able to run. A
    // thread may be pinning itself right now (a measuring thread's set-up), so look until a few
    // passes in a row find none (at most 0.5 s). Before anything that takes a lock (standard
    // error's among them): the held thread may hold it.
    let (mut moved, mut quiet) = (Moved::new(), 0);
    for _ in 0..50 {
        quiet = if unstick(&mut moved) == 0 {
            quiet + 1
        } else {
            0
        };
        if quiet >= 5 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let _ = writeln!(
        std::io::stderr(),
        "\npunctual: {why}, restoring system settings and stopping now"
    );
    for (change, err) in crate::journal::global().undo_all() {
        let _ = writeln!(
            std::io::stderr(),
            "punctual: could not restore {change}: {err}"
        );
    }
    std::process::exit(EXIT_INTERRUPTED)
}

/// How long after the first signal the threads are left to stop on their own (they normally do
/// within a period), before a pinned one that cannot get its CPU is moved.
const UNSTICK_GRACE: std::time::Duration = std::time::Duration::from_millis(200);

/// Watch, from the first signal until the process ends, for threads of this process that cannot
/// see the stop flag because they cannot run: pinned to one CPU that another process's real-time
/// work holds (another punctual's shield and dispatcher, a FIFO spinner; measured in issue 32:
/// `latency` threads and `bench alarm` processes on a CPU held so took 1.4 s and 7.4 s to stop).
/// Each such thread is moved off that CPU, and leaves the real-time class: with every CPU held by
/// higher-priority FIFO work, a FIFO thread gets no CPU at all, a normal one gets a share of what
/// RT throttling (or the fair server) leaves (measured: a run's SIGTERM with FIFO 99 spinners on
/// both CPUs took 4.9 s, until the spinners ended). The measurement is ending anyway.
fn unstick_until_exit() {
    std::thread::sleep(UNSTICK_GRACE);
    let mut moved = Moved::new();
    loop {
        unstick(&mut moved);
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// The threads [`unstick`] handled, each with the CPUs it left the thread on.
pub type Moved = Vec<(i32, Vec<usize>)>;

/// Every runnable thread of this process (the caller excepted), as `unstick_runnable` does.
/// Returns how many were handled.
pub fn unstick(moved: &mut Moved) -> usize {
    // SAFETY: gettid has no preconditions.
    let me = unsafe { libc::gettid() };
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    let tids = tasks
        .flatten()
        .filter_map(|t| t.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&tid| tid != me);
    unstick_runnable(tids, moved)
}

/// Each of `tids` that is runnable: moved to the other online CPUs if pinned to a single one, and
/// set to SCHED_OTHER if it is real-time. A thread handled before is left alone while it stays
/// where it was left and in the normal class; one that has pinned or promoted itself again since
/// (its own set-up ran after the first pass: the signal came while it was starting) is handled
/// again. Returns how many were handled.
fn unstick_runnable(tids: impl IntoIterator<Item = i32>, moved: &mut Moved) -> usize {
    let online = crate::affinity::online_cpus();
    let mut n = 0;
    for tid in tids {
        if task_state(tid).is_none_or(|(state, _)| state != 'R') {
            continue;
        }
        let before = moved.iter().position(|m| m.0 == tid);
        if let Some(i) = before {
            let unchanged = crate::affinity::get(tid).is_ok_and(|now| now == moved[i].1);
            if unchanged && !is_realtime(tid) {
                continue;
            }
        }
        if unstick_thread(tid, &online) {
            let left = crate::affinity::get(tid).unwrap_or_default();
            match before {
                Some(i) => moved[i].1 = left,
                None => moved.push((tid, left)),
            }
            n += 1;
        }
    }
    n
}

/// Every thread of our unreaped child `pid`, as [`unstick`] does for our own: a real-time child
/// held off every CPU by higher-priority work cannot act on SIGKILL (a signal is taken when the
/// task next runs), so one about to be killed is first moved and demoted. Returns how many
/// threads were handled.
pub fn unstick_process(pid: u32) -> usize {
    let online = crate::affinity::online_cpus();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .flatten()
        .filter_map(|t| t.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&tid| unstick_thread(tid, &online))
        .count()
}

/// End our child `c` now, whatever holds its CPUs: [`unstick_process`], SIGKILL, reap.
pub fn end_child(c: &mut std::process::Child) {
    if matches!(c.try_wait(), Ok(Some(_))) {
        return;
    }
    unstick_process(c.id());
    let _ = c.kill();
    let _ = c.wait();
}

/// Move thread `tid` off its CPU if it is pinned to one, and demote it if it is real-time;
/// whether either was done.
fn unstick_thread(tid: i32, online: &[usize]) -> bool {
    let mut handled = false;
    if let Some(&[cpu]) = crate::affinity::get(tid).ok().as_deref() {
        let elsewhere: Vec<usize> = online.iter().copied().filter(|&c| c != cpu).collect();
        handled |= !elsewhere.is_empty() && crate::affinity::set(tid, &elsewhere).is_ok();
    }
    handled | demote(tid)
}

/// Set thread `tid` to SCHED_OTHER (nice 0) if it is real-time; whether it was changed.
fn demote(tid: i32) -> bool {
    if !is_realtime(tid) {
        return false;
    }
    let p = libc::sched_param { sched_priority: 0 };
    // SAFETY: `p` is a valid sched_param; tid is a thread of this process or of an unreaped child.
    unsafe { libc::sched_setscheduler(tid, libc::SCHED_OTHER, &p) == 0 }
}

/// A thread's state letter and the CPU it last ran on (`/proc/self/task/TID/stat`).
fn task_state(tid: i32) -> Option<(char, usize)> {
    let stat = crate::task::ProcStat::read(format!("/proc/self/task/{tid}/stat"))?;
    // The state is field 3, the CPU field 39.
    Some((stat.field(3)?, stat.field(39)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 32: with every CPU held by higher-priority FIFO work, a FIFO thread of a stopping
    /// run gets no CPU at all; `unstick` moves it off its one CPU and makes it a normal thread.
    #[test]
    fn a_stuck_real_time_thread_is_moved_and_leaves_the_real_time_class() {
        const TEST: &str = "a_stuck_real_time_thread_is_moved_and_leaves_the_real_time_class";
        if !punctual_testkit::need_root(TEST, "SCHED_FIFO needs root") {
            return;
        }
        let _cpu = punctual_testkit::exclusive_cpu();
        let online = crate::affinity::online_cpus();
        let last = *online.last().unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (tx, rx) = std::sync::mpsc::channel();
        let flag = stop.clone();
        let spinner = std::thread::spawn(move || {
            // SAFETY: gettid has no preconditions.
            let tid = unsafe { libc::gettid() };
            crate::affinity::set(tid, &[last]).unwrap();
            let p = libc::sched_param { sched_priority: 1 };
            // As punctual's threads are set: with the reset-on-fork flag.
            let policy = libc::SCHED_FIFO | libc::SCHED_RESET_ON_FORK;
            // SAFETY: a valid sched_param for this thread.
            assert_eq!(unsafe { libc::sched_setscheduler(0, policy, &p) }, 0);
            tx.send(tid).unwrap();
            // Runnable until told (bounded: a failing test must not hold a CPU).
            let t0 = std::time::Instant::now();
            while !flag.load(Ordering::Relaxed) && t0.elapsed().as_secs() < 5 {
                std::hint::spin_loop();
            }
        });
        let tid = rx.recv().unwrap();
        // `unstick` itself would handle every runnable thread of the process, other tests' too.
        assert_eq!(task_state(tid).map(|s| s.0), Some('R'), "the spinner runs");
        let handled = unstick_thread(tid, &online);
        // SAFETY: reads the policy of a thread of this process.
        let policy = unsafe { libc::sched_getscheduler(tid) };
        let mask = crate::affinity::get(tid).unwrap();
        stop.store(true, Ordering::Relaxed);
        spinner.join().unwrap();
        assert!(handled, "the thread was neither moved nor demoted");
        assert_eq!(policy, libc::SCHED_OTHER, "policy after unstick");
        if online.len() > 1 {
            assert!(!mask.contains(&last), "still on CPU {last}: {mask:?}");
        }
    }

    /// Pin the calling thread to `cpu` at SCHED_FIFO 1, as punctual's real-time threads are set
    /// (with the reset-on-fork flag).
    fn pin_fifo(cpu: usize) {
        // SAFETY: gettid has no preconditions.
        crate::affinity::set(unsafe { libc::gettid() }, &[cpu]).unwrap();
        let p = libc::sched_param { sched_priority: 1 };
        let policy = libc::SCHED_FIFO | libc::SCHED_RESET_ON_FORK;
        // SAFETY: a valid sched_param for this thread.
        assert_eq!(unsafe { libc::sched_setscheduler(0, policy, &p) }, 0);
    }

    /// Issue 32: a thread the first pass moved before its own set-up ran pinned itself to the
    /// held CPU again and went back to FIFO; the pass skipped every thread it had handled once, so
    /// the run waited for it until the other process let the CPU go (a `bench alarm` hang).
    #[test]
    fn a_thread_that_pins_itself_again_after_being_moved_is_moved_again() {
        const TEST: &str = "a_thread_that_pins_itself_again_after_being_moved_is_moved_again";
        if !punctual_testkit::need_root(TEST, "SCHED_FIFO needs root") {
            return;
        }
        let online = crate::affinity::online_cpus();
        if online.len() < 2 {
            punctual_testkit::skip(TEST, "needs a second CPU to move the thread to");
            return;
        }
        let _cpu = punctual_testkit::exclusive_cpu();
        let last = *online.last().unwrap();
        let phase = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
        let (tx, rx) = std::sync::mpsc::channel();
        let p = phase.clone();
        let subject = std::thread::spawn(move || {
            pin_fifo(last);
            // SAFETY: gettid has no preconditions.
            tx.send(unsafe { libc::gettid() }).unwrap();
            // Runnable throughout, bounded: a failing test must not hold a CPU.
            let t0 = std::time::Instant::now();
            while p.load(Ordering::Relaxed) != 3 && t0.elapsed().as_secs() < 5 {
                if p.load(Ordering::Relaxed) == 1 {
                    pin_fifo(last);
                    p.store(2, Ordering::Relaxed);
                }
                std::hint::spin_loop();
            }
        });
        let tid = rx.recv().unwrap();
        let mut moved = Moved::new();
        let first = unstick_runnable([tid], &mut moved);
        let again_at_once = unstick_runnable([tid], &mut moved);
        phase.store(1, Ordering::Relaxed);
        let t0 = std::time::Instant::now();
        while phase.load(Ordering::Relaxed) != 2 && t0.elapsed().as_secs() < 5 {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let repinned = crate::affinity::get(tid).unwrap();
        let second = unstick_runnable([tid], &mut moved);
        let mask = crate::affinity::get(tid).unwrap();
        let realtime = is_realtime(tid);
        phase.store(3, Ordering::Relaxed);
        subject.join().unwrap();
        assert_eq!(
            (first, again_at_once),
            (1, 0),
            "first pass, and one at once after"
        );
        assert_eq!(repinned, vec![last], "the subject pinned itself again");
        assert_eq!(
            second, 1,
            "the thread that pinned itself again was not handled"
        );
        assert!(!mask.contains(&last), "still on CPU {last}: {mask:?}");
        assert!(!realtime, "still real-time after the second pass");
    }

    #[test]
    fn task_state_reads_this_threads_state_and_cpu() {
        // SAFETY: gettid has no preconditions.
        let me = unsafe { libc::gettid() };
        let (state, cpu) = task_state(me).expect("our own stat");
        assert_eq!(state, 'R', "the reading thread is running");
        assert!(crate::affinity::online_cpus().contains(&cpu), "cpu {cpu}");
    }
}
