//! SIGINT/SIGTERM handling. The handlers are installed first thing (before a command changes
//! anything), unarmed: a signal then undoes every journalled system change and exits with 130 at
//! once, as the default action would end the process, but with the system restored and SPEC's exit
//! code. A command whose loops poll the stop flag arms it ([`Interrupts::arm`]); from then the first
//! signal sets the flag (the loops finish the current period, results are written, guards restore)
//! and a second one undoes everything at once and exits with 130. A dedicated thread receives the
//! signals, so none of this runs in a signal handler.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, OnceLock};

pub const EXIT_INTERRUPTED: i32 = 130;

pub struct Interrupts {
    stop: Arc<AtomicBool>,
    signal: AtomicI32,
    armed: AtomicBool,
}

static GLOBAL: OnceLock<Interrupts> = OnceLock::new();

/// The signal thread's id once it runs (0 before), and the CPUs real-time threads of this process
/// were pinned to: the signal thread keeps off them.
static SIGNAL_TID: AtomicI32 = AtomicI32::new(0);
static MEASURED: std::sync::Mutex<Vec<usize>> = std::sync::Mutex::new(Vec::new());

/// Keep the signal thread off `cpus` (a measuring or dispatching thread is pinned there): it is
/// started before any command knows its CPUs, so it may otherwise wake on a measured CPU. Where
/// every online CPU is measured it stays where it is. Process-local, nothing to restore.
pub fn keep_signal_thread_off(cpus: &[usize]) {
    {
        let mut m = MEASURED.lock().unwrap_or_else(|e| e.into_inner());
        for &c in cpus {
            if !m.contains(&c) {
                m.push(c);
            }
        }
    }
    place_signal_thread();
}

fn place_signal_thread() {
    let tid = SIGNAL_TID.load(Ordering::SeqCst);
    if tid == 0 {
        return;
    }
    let measured = MEASURED.lock().unwrap_or_else(|e| e.into_inner()).clone();
    if measured.is_empty() {
        return;
    }
    let rest: Vec<usize> = crate::affinity::online_cpus()
        .into_iter()
        .filter(|c| !measured.contains(c))
        .collect();
    if !rest.is_empty() {
        let _ = crate::affinity::set(tid, &rest);
    }
}

impl Interrupts {
    /// Install the handlers once for the process; later calls return the same instance.
    pub fn install() -> &'static Interrupts {
        GLOBAL.get_or_init(|| {
            let interrupts = Interrupts {
                stop: Arc::new(AtomicBool::new(false)),
                signal: AtomicI32::new(0),
                armed: AtomicBool::new(false),
            };
            match signal_hook::iterator::Signals::new([libc::SIGINT, libc::SIGTERM]) {
                Ok(mut signals) => {
                    std::thread::Builder::new()
                        .name("punctual-signals".into())
                        .spawn(move || {
                            // SAFETY: gettid has no arguments and cannot fail.
                            let tid = unsafe { libc::gettid() };
                            SIGNAL_TID.store(tid, Ordering::SeqCst);
                            place_signal_thread();
                            for sig in signals.forever() {
                                let me = GLOBAL.get().expect("initialised before signals arrive");
                                let first = me.signal.swap(sig, Ordering::SeqCst) == 0;
                                if !me.armed.load(Ordering::SeqCst) {
                                    abort_now("interrupted");
                                }
                                if first {
                                    me.stop.store(true, Ordering::SeqCst);
                                    unstick_later();
                                } else {
                                    abort_now("second interrupt");
                                }
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
            interrupts
        })
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
    let _ = writeln!(
        std::io::stderr(),
        "\npunctual: {why}, restoring system settings and stopping now"
    );
    // The process ends only when every thread has: one held off its CPU must be able to run. A
    // thread may be pinning itself right now (a measuring thread's set-up), so look until a few
    // passes in a row find none (at most 0.5 s).
    let (mut moved, mut quiet) = (Vec::new(), 0);
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
/// Each such thread is moved off that CPU once, and leaves the real-time class: with every CPU
/// held by higher-priority FIFO work, a FIFO thread gets no CPU at all, a normal one gets a share
/// of what RT throttling (or the fair server) leaves (measured: a run's SIGTERM with FIFO 99
/// spinners on both CPUs took 4.9 s, until the spinners ended). The measurement is ending anyway.
fn unstick_later() {
    let _ = std::thread::Builder::new()
        .name("punctual-unstick".into())
        .spawn(|| {
            std::thread::sleep(UNSTICK_GRACE);
            let mut moved = Vec::new();
            loop {
                unstick(&mut moved);
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
        });
}

/// Every thread of this process that is runnable and not yet in `moved` (the caller excepted):
/// moved to the other online CPUs if pinned to a single one, and set to SCHED_OTHER if it is
/// real-time. Returns how many were handled.
pub fn unstick(moved: &mut Vec<i32>) -> usize {
    // SAFETY: gettid has no preconditions.
    let me = unsafe { libc::gettid() };
    let online = crate::affinity::online_cpus();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    let mut n = 0;
    for t in tasks.flatten() {
        let Some(tid) = t.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        if tid == me || moved.contains(&tid) {
            continue;
        }
        if task_state(tid).is_none_or(|(state, _)| state != 'R') {
            continue;
        }
        if unstick_thread(tid, &online) {
            moved.push(tid);
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
    // SAFETY: sched_getscheduler only reads the thread's policy. It carries the reset-on-fork
    // flag that punctual's real-time threads are set with.
    let policy = unsafe { libc::sched_getscheduler(tid) } & !libc::SCHED_RESET_ON_FORK;
    if policy != libc::SCHED_FIFO && policy != libc::SCHED_RR {
        return false;
    }
    let p = libc::sched_param { sched_priority: 0 };
    // SAFETY: `p` is a valid sched_param; tid is a thread of this process or of an unreaped child.
    unsafe { libc::sched_setscheduler(tid, libc::SCHED_OTHER, &p) == 0 }
}

/// A thread's state letter and the CPU it last ran on (`/proc/self/task/TID/stat`).
fn task_state(tid: i32) -> Option<(char, usize)> {
    let text = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?;
    // The state is field 3, the CPU field 39.
    let (_, f) = crate::task::stat_fields(&text)?;
    let state = f.first()?.chars().next()?;
    let cpu = f.get(39 - 3)?.parse().ok()?;
    Some((state, cpu))
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

    #[test]
    fn task_state_reads_this_threads_state_and_cpu() {
        // SAFETY: gettid has no preconditions.
        let me = unsafe { libc::gettid() };
        let (state, cpu) = task_state(me).expect("our own stat");
        assert_eq!(state, 'R', "the reading thread is running");
        assert!(crate::affinity::online_cpus().contains(&cpu), "cpu {cpu}");
    }
}
