//! A run always starts or refuses, and a signal ends it in any phase, start-up included (issue 32,
//! item 1). `scripts/fault-inject.sh` with `FI_RANDOM` sends hundreds of signals at random points;
//! these are the regressions of the two causes it found.

mod common;

use common::{punctual, stderr, write_file};
use std::time::{Duration, Instant};

/// A plan of four exec actions and four wake actions whose clients punctual spawns: the preparer
/// threads fork held children while the main thread spawns the clients.
fn exec_and_wake_plan(exe: &str, tag: &str) -> String {
    let mut plan = String::from("[plan]\nname = \"startup\"\nduration = \"200ms\"\n");
    for i in 0..4 {
        plan += &format!(
            "\n[[task]]\nname = \"x{i}\"\nperiod = \"10ms\"\noffset = \"auto\"\n\
             action = {{ kind = \"exec\", argv = [\"/bin/true\"] }}\n\
             \n[[task]]\nname = \"c{i}\"\nperiod = \"10ms\"\noffset = \"auto\"\n\
             action = {{ kind = \"wake\", channel = \"{tag}-{i}\", spawn = [\"{exe}\", \"__periodic\", \
             \"--mode\", \"wake\", \"--period-ns\", \"10000000\", \"--channel\", \"{tag}-{i}\"] }}\n"
        );
    }
    plan
}

/// Issue 32, item 1, the deadlock: a held exec child kept the pipe through which the main thread's
/// spawn of a wake client learns of its exec, and the spawn waited for a release only the main
/// thread could give. Before the fix a quarter of these starts hung.
#[test]
fn run_with_exec_actions_and_spawned_wake_clients_always_starts() {
    let dir = tempfile::tempdir().unwrap();
    let exe = common::bin_path();
    for k in 0..8 {
        let tag = format!("st{}-{k}", std::process::id());
        let plan = write_file(
            dir.path(),
            "p.toml",
            &exec_and_wake_plan(&exe.display().to_string(), &tag),
        );
        let t0 = Instant::now();
        let o = punctual()
            .args(["run", "--no-store", "--attach-timeout", "30s"])
            .arg(&plan)
            .env("PUNCTUAL_SHM_DIR", dir.path())
            // Far above any start: a hang is a hang, not a slow machine.
            .timeout(Duration::from_secs(60))
            .output()
            .unwrap();
        assert_eq!(
            o.status.code(),
            Some(0),
            "start {k} did not finish ({:?}): {}",
            t0.elapsed(),
            stderr(&o)
        );
    }
}

/// Issue 32, item 1, the signal: SIGTERM while the run waits for its wake clients used to set a
/// flag nobody read; the run waited out the attach timeout and exited 3 ("no client attached").
#[test]
fn sigterm_while_waiting_for_wake_clients_ends_the_run_as_interrupted() {
    let dir = tempfile::tempdir().unwrap();
    // A client that never attaches.
    let plan = write_file(
        dir.path(),
        "p.toml",
        &format!(
            "[[task]]\nname = \"c\"\nperiod = \"10ms\"\n\
             action = {{ kind = \"wake\", channel = \"never-{}\", spawn = [\"/bin/sleep\", \"60\"] }}\n",
            std::process::id()
        ),
    );
    let mut cmd = std::process::Command::new(common::bin_path());
    cmd.args(["run", "--no-store", "--attach-timeout", "60s"])
        .arg(&plan)
        .env("PUNCTUAL_SHM_DIR", dir.path())
        .env(
            "PUNCTUAL_DATA_DIR",
            dir.path().join("data").display().to_string(),
        )
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    // Well into the wait for the client (the sleep is spawned at once).
    std::thread::sleep(Duration::from_millis(500));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t0.elapsed() > Duration::from_secs(50) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the run did not end after SIGTERM: it waited for the attach timeout");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut err = String::new();
    use std::io::Read;
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert_eq!(status.code(), Some(130), "{err}");
    assert!(!err.contains("no client attached"), "{err}");
}

/// Whether any live process has `needle` in its command line (the tag of one test's runs).
fn tagged_alive(needle: &str) -> Vec<String> {
    let mut found = vec![];
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        if let Ok(c) = std::fs::read(e.path().join("cmdline")) {
            if String::from_utf8_lossy(&c).contains(needle) {
                found.push(name);
            }
        }
    }
    found
}

/// Issue 32, item 1: a signal at random points of start-up (while exec children are pre-forked
/// and wake clients spawned and attaching) ends every run as interrupted, promptly, leaving no
/// process, channel or journal. `scripts/fault-inject.sh` (FI_RANDOM) does the same hundreds of
/// times with the 1 s bound on a quiet machine; here the bound is 5 s so a loaded test machine
/// cannot fail it, while a hang (the 30 s attach timeout, or for ever) still does.
#[test]
fn signal_at_random_points_of_start_up_ends_every_run_within_bound_and_restored() {
    let dir = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let exe = common::bin_path();
    // A fixed xorshift sequence: random points, the same ones every run of the test.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut slow = vec![];
    for k in 0..24 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let delay = Duration::from_millis(x % 400);
        let signal = if k % 2 == 0 {
            libc::SIGTERM
        } else {
            libc::SIGINT
        };
        let tag = format!("rs{}-{k}", std::process::id());
        let mut plan = exec_and_wake_plan(&exe.display().to_string(), &tag);
        plan = plan.replace("duration = \"200ms\"", "duration = \"20s\"");
        let plan = write_file(dir.path(), "p.toml", &plan);
        let mut child = std::process::Command::new(&exe)
            .args(["run", "--no-store", "--attach-timeout", "30s"])
            .arg(&plan)
            .env("PUNCTUAL_SHM_DIR", dir.path())
            .env("PUNCTUAL_STATE_DIR", state.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(delay);
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, signal) };
        let t0 = Instant::now();
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            if t0.elapsed() > Duration::from_secs(30) {
                // What the run's threads and every real-time task on the machine were doing (twice
                // in helpers' loaded runs, cause not measured): read before the kill.
                let seen = threads_of(child.id() as i32);
                let rt = realtime_runnable();
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "signal {signal} {delay:?} into start-up: still running 30 s later\n\
                     its threads (tid name state cpu policy prio wchan):\n{seen}\n\
                     runnable real-time tasks on the machine:\n{rt}"
                );
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        let took = t0.elapsed();
        if took > Duration::from_secs(5) {
            slow.push((delay, took));
        }
        assert_eq!(
            status.code(),
            Some(130),
            "signal {signal} {delay:?} into start-up"
        );
        // Everything it started is gone within a second (clients get SIGTERM and detach).
        // (Clients carry the tag; held exec children are forks of the run, with its plan path.)
        let plan_path = plan.display().to_string();
        let left = || [tagged_alive(&tag), tagged_alive(&plan_path)].concat();
        let t1 = Instant::now();
        while !left().is_empty() && t1.elapsed() < Duration::from_secs(2) {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(left(), Vec::<String>::new(), "{delay:?}: left");
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n != "p.toml")
            .collect();
        assert!(left.is_empty(), "{delay:?}: channels left {left:?}");
        let journals: Vec<_> = std::fs::read_dir(state.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("journal"))
            .collect();
        assert!(journals.is_empty(), "{delay:?}: journals left {journals:?}");
    }
    assert!(slow.is_empty(), "ended later than 5 s: {slow:?}");
}

/// Whether any live process carries `tag` in its environment (a run and every child it started).
/// A thread as `/proc/PID/task/TID/stat` gives it when a run hangs: a line (tid, name, state,
/// last CPU, policy, real-time priority, the kernel function it waits in), whether it is
/// runnable, and whether it is real-time (SCHED_FIFO or SCHED_RR).
fn thread_line(dir: &std::path::Path) -> Option<(String, bool, bool)> {
    let stat = std::fs::read_to_string(dir.join("stat")).ok()?;
    let (name, f) = punctual_rt::stat_fields(&stat)?;
    // State is field 3, processor 39, rt_priority 40, policy 41 (1-based).
    let (state, cpu, prio, policy) = (*f.first()?, f.get(36)?, f.get(37)?, *f.get(38)?);
    let wchan = std::fs::read_to_string(dir.join("wchan")).unwrap_or_default();
    let tid = dir.file_name()?.to_string_lossy().into_owned();
    let line = format!("{tid} {name} {state} cpu {cpu} policy {policy} prio {prio} {wchan}");
    Some((line, state == "R", policy == "1" || policy == "2"))
}

fn threads_of(pid: i32) -> String {
    let mut out = Vec::new();
    for t in std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .flatten()
    {
        out.extend(thread_line(&t.path()).map(|t| t.0));
    }
    out.join("\n")
}

/// Every runnable real-time task on the machine.
fn realtime_runnable() -> String {
    let mut out = Vec::new();
    for p in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let pid = p.file_name().to_string_lossy().into_owned();
        if !pid.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        for t in std::fs::read_dir(p.path().join("task"))
            .into_iter()
            .flatten()
            .flatten()
        {
            if let Some((line, true, true)) = thread_line(&t.path()) {
                out.push(format!("pid {pid} {line}"));
            }
        }
    }
    out.join("\n")
}

/// The hang diagnostics read what they say: this test's own thread is running, at the normal class.
#[test]
fn the_hang_diagnostics_read_a_thread_of_ours() {
    // SAFETY: gettid has no preconditions.
    let me = unsafe { libc::gettid() };
    let dir = std::path::PathBuf::from(format!("/proc/self/task/{me}"));
    let (line, runnable, realtime) = thread_line(&dir).expect("our own stat");
    assert!(line.starts_with(&format!("{me} ")), "{line}");
    assert!(runnable && !realtime, "{line}");
    assert!(threads_of(std::process::id() as i32).contains(&line[..me.to_string().len() + 1]));
}

fn env_tagged_alive(tag: &str) -> Vec<String> {
    let needle = format!("PUNCTUAL_TEST_TAG={tag}");
    let mut found = vec![];
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        if let Ok(env) = std::fs::read(e.path().join("environ")) {
            if env.split(|&b| b == 0).any(|v| v == needle.as_bytes()) {
                found.push(name);
            }
        }
    }
    found
}

/// Issue 32: `latency --load cpu:1,io:1` took up to 1.37 s after SIGTERM and `bench alarm
/// --workload blk:2,cont:1` 7.36 s when another session's shield held CPU 1 with real-time work:
/// their threads, pinned there, could not run to see the stop flag (0 releases, 0 alarms taken in
/// the whole run), and the main thread waited for them. A FIFO 99 spinner on the last CPU stands
/// for that work here: before the fix both commands ran their whole 20 s (latency for ever: its
/// thread never reached the start). Now a thread that cannot run is moved off its CPU 0.2 s after
/// the signal. The bound is 5 s, for a loaded 2-CPU machine; nothing of the runs may be left.
#[test]
fn a_signal_ends_latency_and_bench_alarm_whose_cpu_another_process_holds() {
    let name = "a_signal_ends_latency_and_bench_alarm_whose_cpu_another_process_holds";
    if !common::is_root() {
        punctual_testkit::skip(name, "needs root for a SCHED_FIFO spinner");
        return;
    }
    if punctual_rt::online_cpus().len() < 2 {
        punctual_testkit::skip(name, "needs a second CPU to move the threads to");
        return;
    }
    let _cpu = punctual_testkit::exclusive_cpu();
    let last = common::last_cpu();
    let state = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let rr = || std::fs::read_to_string("/proc/sys/kernel/sched_rr_timeslice_ms").unwrap();
    let rr_before = rr();
    let mut spinner = Some(punctual_testkit::Spinner::start(last, Some(99)));
    let commands: [&[&str]; 2] = [
        &[
            "latency",
            "-D",
            "20s",
            "-a",
            "",
            "--load",
            "cpu:1",
            "--no-store",
        ],
        &[
            "bench",
            "alarm",
            "--workload",
            "blk:2,cont:1",
            "--alarms",
            "400",
            "--rr-timeslice",
            "1ms",
            "-a",
            "",
            "--no-store",
        ],
    ];
    let mut slow = vec![];
    for (k, args) in commands.iter().enumerate() {
        for (j, delay_ms) in [300u64, 900, 1600].into_iter().enumerate() {
            let tag = format!("held{}-{k}-{j}", std::process::id());
            let json = out.path().join(format!("{tag}.json"));
            let args: Vec<String> = args
                .iter()
                .map(|a| match *a {
                    "" => last.to_string(),
                    a => a.to_string(),
                })
                .collect();
            let mut child = std::process::Command::new(common::bin_path())
                .args(&args)
                .arg("--json")
                .arg(&json)
                .env("PUNCTUAL_STATE_DIR", state.path())
                .env("PUNCTUAL_TEST_TAG", &tag)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap();
            std::thread::sleep(Duration::from_millis(delay_ms));
            let signal = if j % 2 == 0 {
                libc::SIGTERM
            } else {
                libc::SIGINT
            };
            // SAFETY: signalling our own child.
            unsafe { libc::kill(child.id() as i32, signal) };
            let t0 = Instant::now();
            let status = loop {
                if let Some(s) = child.try_wait().unwrap() {
                    break s;
                }
                if t0.elapsed() > Duration::from_secs(30) {
                    // Seen twice in loaded whole-suite runs (11-27 and 11-28), never alone; made
                    // again beside CPU hogs (11-29): a signal lost in the handlers' install window
                    // (no signal thread left), or a stop that started a thread (the signal thread
                    // blocked mapping its stack). What its threads and every real-time task were
                    // doing, read before the kill.
                    let seen = threads_of(child.id() as i32);
                    let rt = realtime_runnable();
                    // A thread held by the spinner can only die once the spinner is gone.
                    let _ = child.kill();
                    drop(spinner.take());
                    let _ = child.wait();
                    panic!(
                        "{args:?}: still running 30 s after signal {signal} at {delay_ms} ms\n\
                         its threads (tid name state cpu policy prio wchan):\n{seen}\n\
                         runnable real-time tasks on the machine:\n{rt}"
                    );
                }
                std::thread::sleep(Duration::from_millis(5));
            };
            let took = t0.elapsed();
            if took > Duration::from_secs(5) {
                slow.push((args.clone(), delay_ms, took));
            }
            assert_eq!(status.code(), Some(130), "{args:?} at {delay_ms} ms");
            let t1 = Instant::now();
            while !env_tagged_alive(&tag).is_empty() && t1.elapsed() < Duration::from_secs(2) {
                std::thread::sleep(Duration::from_millis(20));
            }
            assert_eq!(
                env_tagged_alive(&tag),
                Vec::<String>::new(),
                "{args:?}: left"
            );
            let journals: Vec<_> = std::fs::read_dir(state.path())
                .unwrap()
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("journal"))
                .collect();
            assert!(journals.is_empty(), "{args:?}: journals left {journals:?}");
            assert_eq!(
                rr(),
                rr_before,
                "{args:?}: the RR timeslice was left changed"
            );
        }
    }
    drop(spinner);
    assert!(slow.is_empty(), "ended later than 5 s: {slow:?}");
}

/// Issue 32: a signal in the first milliseconds of a run was lost when it came between the
/// handlers' installation and the state they report to: the signal thread panicked, and the
/// command ran on to its end and exited 0 (8 of 400 SIGTERMs 0.5-6 ms after the start, beside two
/// CPU hogs). Here the command shares its one CPU with a hog of this test's, which stretches its
/// start-up; every run must end within 1 s of the signal, by the signal (before the handlers:
/// 143 by the default action) or with 130, and never with a panic.
#[test]
fn a_signal_in_the_first_milliseconds_of_a_run_is_never_lost() {
    use std::os::unix::process::CommandExt;
    let _cpu = punctual_testkit::exclusive_cpu();
    let cpu = punctual_rt::online_cpus()[0];
    let state = tempfile::tempdir().unwrap();
    // A normal-class spinner on the command's CPU, ended when dropped.
    let hog = punctual_testkit::Spinner::start(cpu, None);
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut wrong = vec![];
    let (mut early, mut handled) = (0, 0);
    for k in 0..200 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let delay = Duration::from_micros(500 + x % 5_500);
        let mut cmd = std::process::Command::new(common::bin_path());
        cmd.args(["latency", "-D", "3s", "--no-store"])
            .env("PUNCTUAL_STATE_DIR", state.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
        // SAFETY: sched_setaffinity is async-signal-safe; the child only calls it before exec.
        unsafe {
            cmd.pre_exec(move || {
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                libc::CPU_SET(cpu, &mut set);
                libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
                Ok(())
            });
        }
        let child = cmd.spawn().unwrap();
        std::thread::sleep(delay);
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let t0 = Instant::now();
        let out = child.wait_with_output().unwrap();
        let took = t0.elapsed();
        let err = String::from_utf8_lossy(&out.stderr);
        use std::os::unix::process::ExitStatusExt;
        let panicked = err.contains("panicked");
        let right = match (out.status.code(), out.status.signal()) {
            (None, Some(libc::SIGTERM)) => {
                early += 1;
                true
            }
            (Some(130), None) => {
                handled += 1;
                true
            }
            _ => false,
        };
        if !right || took > Duration::from_secs(1) || panicked {
            let said: String = err.chars().take(300).collect();
            wrong.push((k, delay, out.status, took, said));
        }
    }
    drop(hog);
    eprintln!("{early} ended by the signal before the handlers, {handled} with 130");
    assert!(
        wrong.is_empty(),
        "{} of 200 lost or slow (run, delay, status, time after the signal, stderr): {wrong:?}",
        wrong.len()
    );
}
