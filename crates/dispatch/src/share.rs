//! The watchdog's CPU-share watch: how much of each CPU the run's real-time tasks held over a
//! sliding window.
//!
//! RLIMIT_RTTIME and the starvation watch bound only a continuous hold: a program at FIFO that
//! spins 1.5 s and sleeps 1 ms resets its RLIMIT_RTTIME count at every sleep and left the
//! watchdog's canary (since replaced by the loop's last block) a millisecond every 1.5 s, so it stalled other tasks 0.95 s at a time for ever (issue 32, item 2).
//! This watch adds up, per CPU, the CPU time (`/proc/PID/task/TID/schedstat`, the scheduler's own
//! per-task count, in ns) of every real-time task of punctual and its descendants, charged to the
//! CPU the task was last seen on (field 39 of its `stat`) at each sample, and compares the window's
//! sum with two bounds:
//!
//! - programs the plan starts (exec children, spawned wake clients: every task that is not one of
//!   punctual's own threads) may hold at most `programs` of any CPU (the spin budget, 50 % unless
//!   `--spin-budget` says otherwise: admission holds the dispatcher's own work and spinning on a CPU
//!   others need to that share, and a program is admitted no work at all beyond its start);
//! - everything real-time of the run together at most [`ALL_SHARE`] (95 %: the share the kernel's
//!   real-time throttling leaves real-time tasks by default, which real-time mode turns off).
//!
//! punctual's own threads on shielded dispatcher CPUs are not counted: those CPUs were given to the
//! dispatcher, which may spin there; the starvation watch and the breathers guard them. Per-CPU cumulative
//! sums are kept per sample, so a window costs one subtraction. Cgroup `cpu.stat` was not used: it
//! counts a cgroup as a whole (not per CPU), and would need the run's children moved into a cgroup
//! punctual owns, which systemd usually does not delegate.

use std::collections::{HashMap, VecDeque};

/// The share of a CPU everything real-time of the run may hold over the window.
pub const ALL_SHARE: f64 = 0.95;

/// The window the share is taken over for a watchdog threshold: 2.5 thresholds (5 s for the
/// default 2 s), at least 1 s, at most 60 s.
pub fn window_for(threshold: u64) -> u64 {
    (threshold.saturating_mul(5) / 2).clamp(1_000_000_000, 60_000_000_000)
}

/// What the watch counts and allows.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Sliding window, ns.
    pub window: u64,
    /// Share of a CPU the programs the plan starts may hold over the window.
    pub programs: f64,
    /// Share of a CPU all the run's real-time tasks together may hold.
    pub all: f64,
    /// CPUs where punctual's own threads are not counted (shielded dispatcher CPUs).
    pub exempt_cpus: Vec<usize>,
}

/// One real-time task as sampled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TaskSample {
    pub pid: i32,
    pub tid: i32,
    /// One of punctual's own threads (not a program it started).
    pub own: bool,
    /// Cumulative CPU time, ns.
    pub runtime: u64,
    /// The CPU it last ran on.
    pub cpu: usize,
    /// Under SCHED_FIFO or SCHED_RR.
    pub realtime: bool,
}

struct Mark {
    t: u64,
    programs: Vec<u64>,
    all: Vec<u64>,
    /// Each program's cumulative runtime then, to name the one that held most.
    tasks: Vec<(i32, i32, u64)>,
}

/// The window's state: last runtime seen per task and cumulative per-CPU sums per sample.
pub struct ShareWatch {
    limits: Limits,
    last: HashMap<i32, u64>,
    programs: Vec<u64>,
    all: Vec<u64>,
    marks: VecDeque<Mark>,
}

/// A bound exceeded: the reason the watchdog gives.
#[derive(Clone, Debug, PartialEq)]
pub struct Excess {
    pub cpu: usize,
    pub share: f64,
    pub bound: f64,
    /// `true`: the programs' bound; `false`: all real-time work's.
    pub programs: bool,
    /// The program (pid, name) that held most of the window, when one did.
    pub top: Option<(i32, String)>,
    pub window: u64,
}

impl std::fmt::Display for Excess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let who = if self.programs {
            "programs the plan started"
        } else {
            "the run's real-time tasks"
        };
        write!(
            f,
            "CPU {} held {:.0} % of the last {} by {who} at a real-time priority (bound {:.0} %)",
            self.cpu,
            self.share * 100.0,
            punctual_time::format_ns(self.window),
            self.bound * 100.0
        )?;
        if let Some((pid, name)) = &self.top {
            write!(f, "; most of it by pid {pid} ({name})")?;
        }
        Ok(())
    }
}

impl ShareWatch {
    pub fn new(limits: Limits) -> ShareWatch {
        let n = punctual_rt::online_cpus()
            .into_iter()
            .max()
            .map_or(1, |c| c + 1);
        ShareWatch {
            limits,
            last: HashMap::new(),
            programs: vec![0; n],
            all: vec![0; n],
            marks: VecDeque::new(),
        }
    }

    /// Take one sample at instant `t` (ns, monotonic) and say whether a bound is exceeded over the
    /// last full window.
    pub fn sample(&mut self, t: u64, tasks: &[TaskSample]) -> Option<Excess> {
        let mut seen = HashMap::with_capacity(tasks.len());
        let mut progs = Vec::new();
        for s in tasks {
            // A task first seen is charged everything it ran: it started since the last sample
            // (or its time before the watch began is charged once, at the first sample).
            let before = self.last.get(&s.tid).copied().unwrap_or(0);
            let delta = s.runtime.saturating_sub(before);
            seen.insert(s.tid, s.runtime);
            if !s.realtime || s.cpu >= self.all.len() {
                continue;
            }
            if !s.own {
                self.programs[s.cpu] += delta;
                progs.push((s.pid, s.tid, s.runtime));
            }
            if !(s.own && self.limits.exempt_cpus.contains(&s.cpu)) {
                self.all[s.cpu] += delta;
            }
        }
        self.last = seen;
        self.marks.push_back(Mark {
            t,
            programs: self.programs.clone(),
            all: self.all.clone(),
            tasks: progs,
        });
        // Keep the newest mark at least a window old as the window's start.
        while self.marks.len() > 2 && t.saturating_sub(self.marks[1].t) >= self.limits.window {
            self.marks.pop_front();
        }
        let start = self.marks.front()?;
        let span = t.saturating_sub(start.t);
        if span < self.limits.window {
            return None;
        }
        let check = |now: &[u64], then: &[u64], bound: f64| {
            (0..now.len())
                .map(|c| (c, (now[c] - then[c]) as f64 / span as f64))
                .filter(|&(_, s)| s > bound)
                .max_by(|a, b| a.1.total_cmp(&b.1))
        };
        let (cpu, share, programs, bound) =
            if let Some((c, s)) = check(&self.programs, &start.programs, self.limits.programs) {
                (c, s, true, self.limits.programs)
            } else {
                let (c, s) = check(&self.all, &start.all, self.limits.all)?;
                (c, s, false, self.limits.all)
            };
        let newest = &self.marks.back()?.tasks;
        let top = newest
            .iter()
            .map(|&(pid, tid, rt)| {
                let then = start.tasks.iter().find(|m| m.1 == tid).map_or(0, |m| m.2);
                (pid, rt.saturating_sub(then))
            })
            .max_by_key(|&(_, d)| d)
            .map(|(pid, _)| (pid, comm(pid)));
        Some(Excess {
            cpu,
            share,
            bound,
            programs,
            top,
            window: self.limits.window,
        })
    }
}

fn comm(pid: i32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|s| punctual_time::text::display_text(s.trim(), 32).into_owned())
        .unwrap_or_else(|_| "?".into())
}

/// How many samples a [`TaskReader`] takes between walks of the run's task list. A task first
/// seen is charged all it ran ([`ShareWatch::sample`]), so one found a second late loses nothing.
pub const LIST_EVERY: u32 = 10;

/// The run's tasks (this process's, but the one to skip, and its descendants'), read again and
/// again: the task list is walked every [`LIST_EVERY`] samples, and each task's `schedstat` and
/// `stat` stay open and are read in place (`pread`).
///
/// Why: the sampler's reads delay a client woken on its CPU until they return (the kernel does
/// not preempt them). Timed here in C at FIFO 50 (issue 26): opening a task's `stat` took 159 us at
/// the 99th percentile, reading it 16.7 us, and listing a process's tasks 344 us (987 at most).
#[derive(Default)]
pub struct TaskReader {
    open: HashMap<i32, OpenTask>,
    /// Per process walked: its `task` directory, read again from its start at each walk, and
    /// each of its tasks' `children` file (an `open` in /proc took 150-300 us under `perf trace`
    /// in a kurt-periodic run, a `getdents64` 70-90 us).
    procs: HashMap<i32, OpenProc>,
    taken: u32,
}

struct OpenProc {
    tasks: nix::dir::Dir,
    children: HashMap<i32, Option<std::fs::File>>,
}

/// One task's files, or `None` where they could not stay open (out of descriptors): read by
/// path then.
struct OpenTask {
    pid: i32,
    own: bool,
    files: Option<(std::fs::File, std::fs::File)>,
}

fn task_path(pid: i32, tid: i32, file: &str) -> String {
    format!("/proc/{pid}/task/{tid}/{file}")
}

impl OpenTask {
    /// Its CPU time (ns), the CPU it last ran on and whether it runs under SCHED_FIFO or
    /// SCHED_RR; `None` once it has ended.
    fn read(&self, tid: i32, buf: &mut [u8]) -> Option<(u64, usize, bool)> {
        let mut read = |f: Option<&std::fs::File>, name: &str| -> Option<String> {
            use std::os::unix::fs::FileExt;
            let n = match f {
                Some(f) => f.read_at(buf, 0).ok()?,
                None => {
                    use std::io::Read;
                    std::fs::File::open(task_path(self.pid, tid, name))
                        .ok()?
                        .read(buf)
                        .ok()?
                }
            };
            std::str::from_utf8(&buf[..n]).ok().map(str::to_string)
        };
        let files = self.files.as_ref();
        let runtime = read(files.map(|f| &f.0), "schedstat")?
            .split_whitespace()
            .next()?
            .parse()
            .ok()?;
        let stat = read(files.map(|f| &f.1), "stat")?;
        let (_, fields) = punctual_rt::stat_fields(&stat)?;
        // Field 39: the CPU it last ran on; 41: its policy (1 FIFO, 2 RR).
        let field = |n: usize| fields.get(n - 3)?.parse::<usize>().ok();
        Some((runtime, field(39)?, matches!(field(41)?, 1 | 2)))
    }
}

impl TaskReader {
    /// The tasks' samples now, `skip` left out.
    pub fn sample(&mut self, skip: i32) -> Vec<TaskSample> {
        if self.taken.is_multiple_of(LIST_EVERY) {
            self.list();
        }
        self.taken = self.taken.wrapping_add(1);
        // A stat line is about 300 bytes (the name is at most 64).
        let mut buf = [0u8; 1024];
        let mut out = Vec::with_capacity(self.open.len());
        self.open.retain(|&tid, t| {
            if tid == skip {
                return true;
            }
            let Some((runtime, cpu, realtime)) = t.read(tid, &mut buf) else {
                return false;
            };
            out.push(TaskSample {
                pid: t.pid,
                tid,
                own: t.own,
                runtime,
                cpu,
                realtime,
            });
            true
        });
        out
    }

    /// Walk this process and its descendants (the kernel's `children` lists, or a scan of /proc
    /// where it has none), opening only what is new, and open the files of the tasks not yet
    /// open. Processes that ended are forgotten.
    fn list(&mut self) {
        let me = std::process::id() as i32;
        let lists = std::path::Path::new(&format!("/proc/{me}/task/{me}/children")).exists();
        let mut frontier = vec![(me, true)];
        if !lists {
            frontier.extend(
                crate::procs::descendants(me)
                    .into_iter()
                    .map(|p| (p, false)),
            );
        }
        // A set: a run may start hundreds of processes.
        let mut walked = std::collections::HashSet::new();
        let mut buf = [0u8; 4096];
        while let Some((pid, own)) = frontier.pop() {
            if !walked.insert(pid) {
                continue;
            }
            let p = match self.procs.entry(pid) {
                std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::hash_map::Entry::Vacant(e) => {
                    let flags = nix::fcntl::OFlag::O_RDONLY | nix::fcntl::OFlag::O_DIRECTORY;
                    let Ok(tasks) = nix::dir::Dir::open(
                        format!("/proc/{pid}/task").as_str(),
                        flags | nix::fcntl::OFlag::O_CLOEXEC,
                        nix::sys::stat::Mode::empty(),
                    ) else {
                        continue;
                    };
                    e.insert(OpenProc {
                        tasks,
                        children: HashMap::new(),
                    })
                }
            };
            // The iterator rewinds the directory when dropped: the next walk reads it afresh.
            let mut tids: Vec<i32> = p
                .tasks
                .iter()
                .flatten()
                .filter_map(|e| e.file_name().to_str().ok()?.parse().ok())
                .collect();
            // Ended (a directory kept open lists nothing then): forgotten, so that a process
            // given its pid later is opened afresh at the next walk.
            if tids.is_empty() {
                self.procs.remove(&pid);
                continue;
            }
            for &tid in &tids {
                self.open.entry(tid).or_insert_with(|| {
                    let open = |f| std::fs::File::open(task_path(pid, tid, f));
                    OpenTask {
                        pid,
                        own,
                        files: open("schedstat").and_then(|a| Ok((a, open("stat")?))).ok(),
                    }
                });
                if !lists {
                    continue;
                }
                let file = p
                    .children
                    .entry(tid)
                    .or_insert_with(|| std::fs::File::open(task_path(pid, tid, "children")).ok());
                let n = file.as_ref().and_then(|f| {
                    use std::os::unix::fs::FileExt;
                    f.read_at(&mut buf, 0).ok()
                });
                // A list longer than the buffer (hundreds of children) is read whole.
                let long;
                let text = match n {
                    Some(n) if n == buf.len() => {
                        long = std::fs::read_to_string(task_path(pid, tid, "children"))
                            .unwrap_or_default();
                        long.as_str()
                    }
                    n => std::str::from_utf8(&buf[..n.unwrap_or(0)]).unwrap_or(""),
                };
                let kids = text.split_whitespace().filter_map(|c| c.parse().ok());
                frontier.extend(kids.map(|c| (c, false)));
            }
            tids.sort_unstable();
            p.children.retain(|t, _| tids.binary_search(t).is_ok());
        }
        self.procs.retain(|pid, _| walked.contains(pid));
    }
}

/// Every task of this process (but `skip`, the watchdog's own) and of its descendants, read once.
pub fn run_tasks(skip: i32) -> Vec<TaskSample> {
    TaskReader::default().sample(skip)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reader keeps each task's files open: it sees a child's task and this process's, reads
    /// a FIFO thread's policy from `stat` as the kernel reports it, drops a task that ended at
    /// its next sample, and finds a new one at its next walk of the list (not before).
    #[test]
    fn the_reader_follows_the_runs_tasks_with_its_files_kept_open() {
        let test = "the_reader_follows_the_runs_tasks_with_its_files_kept_open";
        if !punctual_testkit::need_root(test, "a thread at SCHED_FIFO") {
            return;
        }
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done) = std::sync::mpsc::channel::<()>();
        let fifo = std::thread::spawn(move || {
            let p = libc::sched_param { sched_priority: 1 };
            // SAFETY: sets the calling thread's own policy.
            let ok = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) } == 0;
            // SAFETY: gettid has no preconditions.
            tx.send((unsafe { libc::gettid() }, ok)).unwrap();
            let _ = done.recv();
        });
        let (fifo_tid, ok) = rx.recv().unwrap();
        assert!(ok, "root may set SCHED_FIFO 1");
        let mut r = TaskReader::default();
        let first = r.sample(0);
        let me = std::process::id() as i32;
        let find = |s: &[TaskSample], tid: i32| s.iter().find(|t| t.tid == tid).copied();
        let kid = find(&first, pid).expect("the child's task is read");
        assert_eq!((kid.pid, kid.own, kid.realtime), (pid, false, false));
        let f = find(&first, fifo_tid).expect("this process's thread is read");
        assert_eq!((f.pid, f.own, f.realtime), (me, true, true));
        assert!(find(&first, me).is_some_and(|t| t.own && !t.realtime));
        // Policies as the scheduler reports them (other tests' threads may change theirs).
        for t in first
            .iter()
            .filter(|t| [me, fifo_tid, pid].contains(&t.tid))
        {
            assert_eq!(t.realtime, punctual_rt::is_realtime(t.tid), "{t:?}");
        }

        child.kill().unwrap();
        child.wait().unwrap();
        let _ = done_tx.send(());
        fifo.join().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let late = std::thread::spawn(move || {
            // SAFETY: as above.
            tx.send(unsafe { libc::gettid() }).unwrap();
            std::thread::park();
        });
        let new_tid = rx.recv().unwrap();
        let second = r.sample(0);
        assert!(find(&second, pid).is_none(), "the ended child is dropped");
        assert!(
            find(&second, fifo_tid).is_none(),
            "the ended thread is dropped"
        );
        assert!(
            find(&second, new_tid).is_none(),
            "found only at the next walk"
        );
        for _ in 2..LIST_EVERY {
            r.sample(0);
        }
        // A grandchild, started now, through the children lists kept open.
        let mut sh = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & echo $!; wait"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(sh.stdout.as_mut().unwrap()),
            &mut line,
        )
        .unwrap();
        let grandchild: i32 = line.trim().parse().unwrap();
        let walked = r.sample(0);
        assert!(find(&walked, new_tid).is_some_and(|t| t.own));
        let g = find(&walked, grandchild).expect("the grandchild is read");
        assert_eq!((g.pid, g.own), (grandchild, false));
        // SAFETY: a process this test started, by its pid.
        unsafe { libc::kill(grandchild, libc::SIGKILL) };
        sh.wait().unwrap();
        // The task to skip is left out.
        assert!(find(&r.sample(new_tid), new_tid).is_none());
        late.thread().unpark();
        late.join().unwrap();
    }

    fn limits() -> Limits {
        Limits {
            window: 5_000_000_000,
            programs: 0.5,
            all: 0.95,
            exempt_cpus: vec![1],
        }
    }

    fn task(tid: i32, own: bool, runtime: u64, cpu: usize) -> TaskSample {
        TaskSample {
            pid: tid,
            tid,
            own,
            runtime,
            cpu,
            realtime: true,
        }
    }

    const MS: u64 = 1_000_000;

    /// The child: spins 1.5 s, sleeps 1 ms, on CPU 0, sampled every 100 ms.
    #[test]
    fn a_program_holding_two_thirds_of_a_cpu_between_short_sleeps_exceeds_the_bound() {
        let mut w = ShareWatch::new(limits());
        let mut rt = 0;
        let mut hit = None;
        for k in 0..=60u64 {
            let t = k * 100 * MS;
            if k > 0 && (t % (1501 * MS)) >= MS {
                rt += 100 * MS * 95 / 100; // throttled to 95 % within each second
            }
            if let Some(e) = w.sample(t, &[task(7, false, rt, 0)]) {
                hit = Some((t, e));
                break;
            }
        }
        let (t, e) = hit.expect("the bound trips");
        assert_eq!(t, 5_000 * MS, "at the first full window");
        assert!(e.programs && e.cpu == 0 && e.share > 0.9, "{e:?}");
        assert_eq!(e.top.map(|p| p.0), Some(7));
    }

    #[test]
    fn a_program_at_a_third_of_a_cpu_and_a_dispatcher_spinning_on_its_shielded_cpu_pass() {
        let mut w = ShareWatch::new(limits());
        for k in 0..=100u64 {
            let t = k * 100 * MS;
            let tasks = [
                task(7, false, k * 33 * MS, 0),
                // The dispatcher spinning on CPU 1, which was shielded for it.
                task(8, true, k * 100 * MS, 1),
            ];
            assert_eq!(w.sample(t, &tasks), None, "at {t}");
        }
    }

    #[test]
    fn own_threads_spinning_on_a_cpu_that_is_not_shielded_exceed_the_bound_for_all() {
        let mut w = ShareWatch::new(limits());
        let mut hit = None;
        for k in 0..=60u64 {
            if let Some(e) = w.sample(k * 100 * MS, &[task(8, true, k * 99 * MS, 0)]) {
                hit = Some(e);
                break;
            }
        }
        let e = hit.expect("the bound for all trips");
        assert!(!e.programs && e.cpu == 0 && e.top.is_none(), "{e:?}");
    }

    #[test]
    fn tasks_not_at_a_real_time_priority_are_not_counted() {
        let mut w = ShareWatch::new(limits());
        for k in 0..=60u64 {
            let mut s = task(7, false, k * 100 * MS, 0);
            s.realtime = false;
            assert_eq!(w.sample(k * 100 * MS, &[s]), None);
        }
    }

    #[test]
    fn the_window_is_two_and_a_half_thresholds_within_one_second_and_a_minute() {
        assert_eq!(window_for(2_000_000_000), 5_000_000_000);
        assert_eq!(window_for(100_000_000), 1_000_000_000);
        assert_eq!(window_for(u64::MAX), 60_000_000_000);
    }
}
