//! `mckenney-choose`: the decision half of McKenney's "real time vs. real fast" (OLS 2008, Table 1
//! and Figs. 5-7; the 2009 slides' repeat of Table 1) on this machine, for the configurations it
//! can switch without a reboot: "real time" (SCHED_FIFO, mlockall, cpu_dma_latency 0, punctual's
//! sleep-then-spin) and "real fast" (SCHED_OTHER and the kernel's defaults). Each configuration's
//! start latency is measured idle and under a `cpu` load; three kinds of work unit are timed in
//! each (user-mode compute, a small gcc build, fsync'd writes), and total delay = start latency at
//! p99.9 + work x slowdown is drawn against the work-unit duration with the crossover printed. The
//! run-time preemption modes of a PREEMPT_DYNAMIC kernel are measured too where the kernel lets
//! them be switched (restored by a guard on every path), and the refusal is reported where not.
//!
//! measure: [`McKenneyChoose::run`]; model: [`Model`]; tables: [`tables`]; figures: [`figures`].

use crate::common::group;
use crate::published::mckenney as paper;
use punctual_advise::mckenney::{crossover, kind_key, WorkKind};
use punctual_latency::{Config, Mode, Stop};
use punctual_load::LoadSpec;
use punctual_result::doc::kind;
use punctual_result::{Failure, Fallback, ResultDoc, Series, Table};
use punctual_rt::{setup_current_thread, Policy, RtWant, SchedParams, ThreadRequest};
use punctual_session::{Ctx, Figure, LiveSpec, Measurement, Report};
use punctual_stats::Recorder;
use punctual_time::clock::read_clock;
use punctual_time::{format_ns, ClockId, MarginPolicy};
use serde_json::{json, Map, Value};
use std::any::Any;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::Ordering;

pub const NAME: &str = punctual_advise::mckenney::CHOOSE;
/// Figs. 5-7 are drawn at this percentile (milli-percent): p99.9.
pub const PERCENTILE: u64 = 99_900;
/// The real-time configuration's priority: what `punctual advise` recommends (one below the
/// watchdog's 99).
pub const RT_PRIORITY: u32 = 98;
/// The timer slack a normal-class thread has by default: part of "real fast".
const DEFAULT_SLACK_NS: u64 = 50_000;
pub use punctual_rt::preempt::PREEMPT_PATH;
/// The kinds of work unit, in table order (Figs. 5, 6, 7).
pub const KINDS: [WorkKind; 3] = [WorkKind::Compute, WorkKind::Kernel, WorkKind::Io];

// ---------------------------------------------------------------------------------------------
// measure

/// A configuration this machine can switch to without a reboot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Setup {
    RealTime,
    RealFast,
}

impl Setup {
    pub const ALL: [Setup; 2] = [Setup::RealTime, Setup::RealFast];
    pub fn name(self) -> &'static str {
        match self {
            Setup::RealTime => "real time",
            Setup::RealFast => "real fast",
        }
    }
    /// The key in the result document.
    pub fn key(self) -> &'static str {
        match self {
            Setup::RealTime => "real_time",
            Setup::RealFast => "real_fast",
        }
    }
    pub fn recipe(self) -> &'static str {
        match self {
            Setup::RealTime => "SCHED_FIFO 98, mlockall, cpu_dma_latency 0, sleep-then-spin",
            Setup::RealFast => "SCHED_OTHER, 50 us timer slack, plain absolute sleep",
        }
    }
}

pub fn kind_name(k: WorkKind) -> &'static str {
    match k {
        WorkKind::Compute => "user-mode compute",
        WorkKind::Kernel => "kernel-heavy",
        WorkKind::Io => "heavy I/O",
    }
}

fn figure_of(k: WorkKind) -> &'static str {
    match k {
        WorkKind::Compute => "Fig. 5",
        WorkKind::Kernel => "Fig. 6",
        WorkKind::Io => "Fig. 7",
    }
}

#[derive(Clone, Debug)]
pub struct ChooseSettings {
    /// Each start-latency cell (configuration x idle/loaded).
    pub latency_ns: u64,
    pub interval_ns: u64,
    /// Runs of each work unit in each configuration (the paper: 3).
    pub runs: u32,
    /// Steps of the arithmetic loop (user-mode compute).
    pub compute_iterations: u64,
    /// Translation units of the generated project one build compiles; all of them are linked too.
    pub build_units: usize,
    /// Iterations of the system-call loop that stands in for the build without gcc.
    pub syscalls: u64,
    /// fsync'd writes of `io_bytes` each (heavy I/O).
    pub io_writes: u32,
    pub io_bytes: usize,
}

impl ChooseSettings {
    /// About 5 minutes here (4 min 40 s measured).
    pub fn full() -> Self {
        ChooseSettings {
            latency_ns: 45_000_000_000,
            interval_ns: 1_000_000,
            runs: 5,
            compute_iterations: 400_000_000,
            build_units: punctual_load::build::FILES + 1,
            syscalls: 200_000,
            io_writes: 200,
            io_bytes: 64 << 10,
        }
    }
    /// About 30 seconds here (26 s measured).
    pub fn quick() -> Self {
        ChooseSettings {
            latency_ns: 4_000_000_000,
            runs: 3,
            compute_iterations: 50_000_000,
            build_units: 6,
            syscalls: 30_000,
            io_writes: 40,
            ..Self::full()
        }
    }

    fn check(&self) -> Result<(), Failure> {
        if self.latency_ns == 0
            || self.interval_ns == 0
            || self.runs == 0
            || self.compute_iterations == 0
            || self.build_units == 0
            || self.syscalls == 0
            || self.io_writes == 0
            || self.io_bytes == 0
        {
            return Err(Failure::usage(
                "mckenney-choose: every duration, count and size must be above zero",
            ));
        }
        if self.build_units > punctual_load::build::FILES + 1 {
            return Err(Failure::usage(format!(
                "mckenney-choose: the generated project has {} files",
                punctual_load::build::FILES + 1
            )));
        }
        Ok(())
    }

    /// Four latency cells plus a rough guess at the work (about 3 s of work per run here).
    fn expected_ns(&self) -> u64 {
        let per_run = self.compute_iterations + self.build_units as u64 * 60_000_000;
        4 * self.latency_ns + 2 * u64::from(self.runs) * per_run
    }
}

/// What the kernel-heavy work unit was.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KernelWork {
    /// gcc -O2 of this many generated files, one at a time; linked when all were compiled.
    Build { units: usize, linked: bool },
    /// gcc was not found: a system-call loop instead.
    Syscalls { calls: u64, why: String },
}

impl KernelWork {
    pub fn describe(&self) -> String {
        match self {
            KernelWork::Build { units, linked } => format!(
                "gcc -O2 build of {units} generated C files{}, one job",
                if *linked { ", linked" } else { "" }
            ),
            KernelWork::Syscalls { calls, why } => format!(
                "system calls: {} x (open /dev/null, write 512 B, close, getppid), since {why}",
                group(*calls)
            ),
        }
    }
}

/// Whether this kernel's preemption mode can be switched at run time (probed by
/// `punctual-rt`, which owns the preemption knobs).
pub use punctual_rt::preempt::{
    parse as parse_preempt, probe as probe_preempt, Switching as Preempt,
};

/// The preemption modes in a sentence: which were switched, or why they could not be.
fn describe_preempt(p: &Preempt) -> String {
    match p {
        Preempt::Switchable { original, modes } => {
            format!("switched: {} (back to {original})", modes.join(", "))
        }
        Preempt::NotSwitchable(why) => format!("not switchable here: {why}"),
    }
}

/// One start-latency distribution.
pub struct StartCell {
    pub setup: Setup,
    pub loaded: bool,
    /// The preemption mode it ran under, when the experiment switched it.
    pub preempt: Option<String>,
    pub rec: Recorder,
}

impl StartCell {
    pub fn name(&self) -> String {
        format!(
            "{} {}{}",
            self.setup.name(),
            if self.loaded { "loaded" } else { "idle" },
            self.preempt
                .as_ref()
                .map(|m| format!(", preempt={m}"))
                .unwrap_or_default()
        )
    }
}

/// The durations of one kind of work unit in one configuration.
pub struct WorkRuns {
    pub kind: WorkKind,
    pub setup: Setup,
    pub runs_ns: Vec<u64>,
}

/// What `run` measured, as far as it got.
pub struct Outcome {
    /// The CPU everything ran on.
    pub cpu: usize,
    pub preempt: Preempt,
    pub starts: Vec<StartCell>,
    pub work: Vec<WorkRuns>,
    pub kernel_work: KernelWork,
    /// Where the fsync'd writes went, and its file system.
    pub io_dir: String,
    pub fallbacks: Vec<Fallback>,
    /// What went wrong on the way without stopping the run (a mode the kernel refused).
    pub notes: Vec<String>,
}

/// The experiment.
pub struct McKenneyChoose {
    pub quick: bool,
    pub settings: ChooseSettings,
}

impl McKenneyChoose {
    pub fn new(opts: crate::Options) -> McKenneyChoose {
        McKenneyChoose {
            quick: opts.quick,
            settings: if opts.quick {
                ChooseSettings::quick()
            } else {
                ChooseSettings::full()
            },
        }
    }
}

/// A busy loop on every online CPU, each pinned: the load the paper's latencies were taken under.
pub fn cpu_load() -> LoadSpec {
    let cpus = punctual_rt::online_cpus();
    format!("cpu:{}@{}", cpus.len(), punctual_rt::format_cpu_list(&cpus))
        .parse()
        .expect("a cpu load spec is valid")
}

fn now() -> u64 {
    read_clock(libc::CLOCK_MONOTONIC)
}

fn push_fallback(all: &mut Vec<Fallback>, f: Fallback) {
    if !all.contains(&f) {
        all.push(f);
    }
}

impl McKenneyChoose {
    /// What a configuration holds process-wide while it runs: locked memory and the
    /// cpu_dma_latency request for real time, nothing for real fast (whose numbers must not be
    /// helped by the other configuration's settings, so the session does not hold them).
    fn hold(ctx: &Ctx, setup: Setup, fallbacks: &mut Vec<Fallback>) -> Vec<Box<dyn Any>> {
        if setup != Setup::RealTime {
            return Vec::new();
        }
        let got = ctx.hold(true, Some(0));
        for f in got.fallbacks {
            push_fallback(fallbacks, f);
        }
        got.guards
    }

    fn sched(ctx: &Ctx, setup: Setup) -> SchedParams {
        match setup {
            Setup::RealTime => ctx.sched(),
            Setup::RealFast => SchedParams {
                policy: Policy::Other,
                priority: 0,
            },
        }
    }

    /// One start-latency cell.
    fn start_cell(
        &self,
        ctx: &Ctx,
        cell: (Setup, bool, Option<&str>),
        duration: u64,
        out: &mut Outcome,
    ) -> Result<(), Failure> {
        let (setup, loaded, preempt) = cell;
        ctx.step(format!(
            "start latency: {}, {}{}",
            setup.name(),
            if loaded { "cpu load" } else { "idle" },
            preempt
                .map(|m| format!(", preempt={m}"))
                .unwrap_or_default()
        ));
        let _held = Self::hold(ctx, setup, &mut out.fallbacks);
        let sched = Self::sched(ctx, setup);
        let cfg = Config {
            threads: vec![Some(out.cpu)],
            interval: self.settings.interval_ns,
            stop: Stop::Duration(duration),
            clock: ClockId::Monotonic,
            mode: match setup {
                Setup::RealTime => Mode::Hybrid,
                Setup::RealFast => Mode::Abs,
            },
            margin: MarginPolicy::Auto,
            policy: sched.policy,
            priority: sched.priority,
            timer_slack_ns: match setup {
                Setup::RealTime => None,
                Setup::RealFast => Some(DEFAULT_SLACK_NS),
            },
        };
        let o = punctual_latency::run(&cfg, ctx.stop(), None, None)?;
        for f in o.threads.iter().filter_map(|t| t.fallback.clone()) {
            push_fallback(&mut out.fallbacks, f);
        }
        out.starts.push(StartCell {
            setup,
            loaded,
            preempt: preempt.map(str::to_string),
            rec: o.merged(),
        });
        Ok(())
    }

    /// Both configurations idle, then both under the cpu load (started here, stopped after).
    fn starts(
        &self,
        ctx: &Ctx,
        preempt: Option<&str>,
        duration: u64,
        out: &mut Outcome,
    ) -> Result<(), Failure> {
        let stopped = || ctx.stop().load(Ordering::Relaxed);
        for setup in Setup::ALL {
            if stopped() {
                return Ok(());
            }
            self.start_cell(ctx, (setup, false, preempt), duration, out)?;
        }
        if stopped() {
            return Ok(());
        }
        let spec = cpu_load();
        let mut loads = ctx.start_load(&spec)?;
        loads.wait_ready(std::time::Duration::from_secs(5), ctx.stop());
        let measured = (|| {
            for setup in Setup::ALL {
                if stopped() {
                    break;
                }
                self.start_cell(ctx, (setup, true, preempt), duration, out)?;
            }
            Ok(())
        })();
        loads.stop();
        measured
    }

    /// Every other preemption mode, both configurations idle and loaded for half a cell each,
    /// the original mode back afterwards (and on every other path, by the guard).
    fn preempt_modes(&self, ctx: &Ctx, out: &mut Outcome) -> Result<(), Failure> {
        let Preempt::Switchable { original, modes } = out.preempt.clone() else {
            return Ok(());
        };
        for mode in modes.iter().filter(|m| **m != original) {
            if ctx.stop().load(Ordering::Relaxed) {
                break;
            }
            let _guard = match punctual_rt::preempt::set(Path::new(PREEMPT_PATH), &original, mode) {
                Ok(g) => g,
                Err(e) => {
                    out.notes.push(format!(
                        "preemption mode {mode}: the kernel refused it: {e}"
                    ));
                    continue;
                }
            };
            self.starts(ctx, Some(mode), self.settings.latency_ns / 2, out)?;
        }
        Ok(())
    }
}

/// The unit of user-mode work: a fixed arithmetic loop (xorshift), nothing the kernel touches.
#[inline(never)]
pub fn compute(iterations: u64) -> u64 {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut acc = 0u64;
    for _ in 0..iterations {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        acc = acc.wrapping_add(x);
    }
    std::hint::black_box(acc)
}

/// The kernel-heavy unit without a compiler: open, write, close and a trivial call, over and over.
pub fn syscalls(calls: u64) -> std::io::Result<()> {
    let buf = [0u8; 512];
    for _ in 0..calls {
        let mut f = std::fs::OpenOptions::new().write(true).open("/dev/null")?;
        f.write_all(&buf)?;
        drop(f);
        std::hint::black_box(nix::unistd::getppid());
    }
    Ok(())
}

/// The heavy-I/O unit: `writes` writes of `bytes`, each followed by fsync.
pub fn fsync_writes(dir: &Path, writes: u32, bytes: usize) -> std::io::Result<()> {
    let path = dir.join("fsync-writes");
    let buf = vec![0x5au8; bytes];
    let result = (|| {
        let mut f = std::fs::File::create(&path)?;
        for _ in 0..writes {
            f.write_all(&buf)?;
            f.sync_all()?;
        }
        Ok(())
    })();
    let _ = std::fs::remove_file(&path);
    result
}

/// The kernel-heavy unit: compile `units` of the generated project's `sources` (written
/// beforehand by `punctual_load::build::generate`, outside the timing) one at a time with gcc
/// -O2, link when every file was compiled, remove the objects. The compilers run on `cpu` in
/// `sched`, with RLIMIT_RTTIME when that is a real-time class, so a runaway compiler cannot hold
/// the CPU.
pub fn build(
    project: &Path,
    sources: &[PathBuf],
    units: usize,
    cpu: usize,
    sched: SchedParams,
) -> Result<(), Failure> {
    let objs: Vec<PathBuf> = sources
        .iter()
        .take(units)
        .map(|s| s.with_extension("o"))
        .collect();
    let gcc = |args: &[&std::ffi::OsStr]| -> Result<(), Failure> {
        let mut cmd = Command::new(punctual_load::build::COMPILER);
        cmd.args(args)
            .current_dir(project)
            .env("TMPDIR", project)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let mut setup = punctual_rt::child::ChildSetup::new(nix::sys::signal::Signal::SIGKILL)
            .process_group()
            .cpus(&[cpu])
            .sched(sched);
        if sched.policy.is_realtime() {
            setup = setup.rttime(5_000_000, 10_000_000);
        }
        setup.install(&mut cmd);
        let status = cmd.status()?;
        if !status.success() {
            return Err(Failure::system(format!(
                "the build's {} failed: {status}",
                punctual_load::build::COMPILER
            )));
        }
        Ok(())
    };
    let result = (|| {
        for (src, obj) in sources.iter().zip(&objs) {
            gcc(&[
                "-O2".as_ref(),
                "-c".as_ref(),
                src.as_os_str(),
                "-o".as_ref(),
                obj.as_os_str(),
            ])?;
        }
        if units == sources.len() {
            let mut args: Vec<&std::ffi::OsStr> = objs.iter().map(|o| o.as_os_str()).collect();
            args.extend([std::ffi::OsStr::new("-o"), std::ffi::OsStr::new("prog")]);
            gcc(&args)?;
        }
        Ok(())
    })();
    for o in &objs {
        let _ = std::fs::remove_file(o);
    }
    let _ = std::fs::remove_file(project.join("prog"));
    result
}

/// Where the fsync'd writes go: /var/tmp (kept on disk by convention), else the temporary
/// directory; a tmpfs is said, since fsync writes nothing there.
fn io_dir() -> Result<(tempfile::TempDir, String), Failure> {
    let base = ["/var/tmp"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_dir())
        .unwrap_or_else(std::env::temp_dir);
    let dir = tempfile::Builder::new()
        .prefix("punctual-choose-")
        .tempdir_in(&base)?;
    let tmpfs = nix::sys::statfs::statfs(dir.path())
        .is_ok_and(|s| s.filesystem_type() == nix::sys::statfs::TMPFS_MAGIC);
    let what = format!(
        "{}{}",
        base.display(),
        if tmpfs {
            " (a tmpfs: fsync writes nothing to a disk)"
        } else {
            ""
        }
    );
    Ok((dir, what))
}

/// Run `work` once on `cpu` in a thread of `setup`'s class; how long it took.
fn timed(
    ctx: &Ctx,
    setup: Setup,
    cpu: usize,
    work: impl FnOnce(SchedParams) -> Result<(), Failure> + Send,
) -> Result<(u64, Option<Fallback>), Failure> {
    let sched = McKenneyChoose::sched(ctx, setup);
    std::thread::scope(|s| {
        s.spawn(move || {
            let guards = setup_current_thread(&ThreadRequest {
                cpu: Some(cpu),
                policy: sched.policy,
                priority: sched.priority,
                timer_slack_ns: match setup {
                    Setup::RealTime => None,
                    Setup::RealFast => Some(DEFAULT_SLACK_NS),
                },
                fall_back_on_refusal: true,
            })?;
            let params = guards.sched();
            let t0 = now();
            work(params)?;
            Ok((now() - t0, guards.fallback.clone()))
        })
        .join()
        .unwrap_or_else(|_| Err(Failure::system("a work unit panicked")))
    })
}

impl McKenneyChoose {
    /// Table 1: every kind of work unit in both configurations, `runs` times, the configurations
    /// taking turns to go first so that a drift of the machine does not favour one.
    fn work(&self, ctx: &Ctx, out: &mut Outcome) -> Result<(), Failure> {
        let s = &self.settings;
        let (scratch, io_where) = io_dir()?;
        out.io_dir = io_where;
        let project = scratch.path().join("build");
        let mut sources = Vec::new();
        out.kernel_work = if punctual_load::build::compiler_available() {
            sources = punctual_load::build::generate(&project)?;
            KernelWork::Build {
                units: s.build_units,
                linked: s.build_units == punctual_load::build::FILES + 1,
            }
        } else {
            KernelWork::Syscalls {
                calls: s.syscalls,
                why: format!("{} was not found", punctual_load::build::COMPILER),
            }
        };
        for k in KINDS {
            for setup in Setup::ALL {
                out.work.push(WorkRuns {
                    kind: k,
                    setup,
                    runs_ns: Vec::new(),
                });
            }
        }
        let cpu = out.cpu;
        for run in 0..s.runs {
            for (ki, k) in KINDS.into_iter().enumerate() {
                let order = if (run as usize + ki).is_multiple_of(2) {
                    Setup::ALL
                } else {
                    [Setup::RealFast, Setup::RealTime]
                };
                for setup in order {
                    if ctx.stop().load(Ordering::Relaxed) {
                        return Ok(());
                    }
                    ctx.step(format!(
                        "Table 1: {}, {}, run {} of {}",
                        kind_name(k),
                        setup.name(),
                        run + 1,
                        s.runs
                    ));
                    let _held = Self::hold(ctx, setup, &mut out.fallbacks);
                    let kernel = &out.kernel_work;
                    let (ns, fallback) = timed(ctx, setup, cpu, |sched| match k {
                        WorkKind::Compute => {
                            compute(s.compute_iterations);
                            Ok(())
                        }
                        WorkKind::Kernel => match kernel {
                            KernelWork::Build { units, .. } => {
                                build(&project, &sources, *units, cpu, sched)
                            }
                            KernelWork::Syscalls { calls, .. } => Ok(syscalls(*calls)?),
                        },
                        WorkKind::Io => Ok(fsync_writes(scratch.path(), s.io_writes, s.io_bytes)?),
                    })?;
                    if let Some(f) = fallback {
                        push_fallback(&mut out.fallbacks, f);
                    }
                    let slot = out
                        .work
                        .iter_mut()
                        .find(|w| w.kind == k && w.setup == setup)
                        .expect("a slot per kind and configuration");
                    slot.runs_ns.push(ns);
                }
            }
        }
        Ok(())
    }
}

impl Measurement for McKenneyChoose {
    type Outcome = Outcome;

    fn label(&self) -> String {
        NAME.into()
    }
    /// The real-time class only, checked before anything runs: locked memory and the
    /// cpu_dma_latency request are held by the real-time configuration's own steps, since a
    /// session-wide hold would help the real-fast rows too.
    fn wants(&self) -> Option<RtWant> {
        Some(RtWant {
            policy: Policy::Fifo,
            priority: RT_PRIORITY,
            mlock: false,
            dma_latency_us: None,
        })
    }
    fn live(&self) -> Option<LiveSpec> {
        Some(LiveSpec::timed(self.settings.expected_ns(), String::new))
    }
    fn run(&mut self, ctx: &Ctx) -> Result<Outcome, Failure> {
        self.settings.check()?;
        let host = ctx.host();
        let preempt = if host.preempt.starts_with("dynamic") {
            probe_preempt(Path::new(PREEMPT_PATH))
        } else {
            Preempt::NotSwitchable(format!(
                "the kernel's preemption model is fixed ({})",
                host.preempt
            ))
        };
        let mut out = Outcome {
            cpu: *punctual_rt::online_cpus().last().unwrap_or(&0),
            preempt,
            starts: Vec::new(),
            work: Vec::new(),
            kernel_work: KernelWork::Build {
                units: 0,
                linked: false,
            },
            io_dir: String::new(),
            fallbacks: Vec::new(),
            notes: Vec::new(),
        };
        self.starts(ctx, None, self.settings.latency_ns, &mut out)?;
        if !ctx.stop().load(Ordering::Relaxed) {
            self.work(ctx, &mut out)?;
        }
        self.preempt_modes(ctx, &mut out)?;
        Ok(out)
    }
    fn report(&self, out: Outcome, ctx: &Ctx, doc: &mut ResultDoc) -> Result<Report, Failure> {
        crate::common::mark(doc, NAME, self.quick);
        ctx.runtime_fallbacks(doc, out.fallbacks.iter());
        let s = &self.settings;
        let st = &mut doc.settings.extra;
        st.insert("cpu".into(), out.cpu.into());
        st.insert("interval_ns".into(), s.interval_ns.into());
        st.insert("latency_ns".into(), s.latency_ns.into());
        st.insert("runs".into(), s.runs.into());
        st.insert(
            "configurations".into(),
            json!({
                "real_time": Setup::RealTime.recipe(),
                "real_fast": Setup::RealFast.recipe(),
            }),
        );
        for c in &out.starts {
            doc.series.push(series(c, out.cpu));
        }
        let model = Model::of(&out, s);
        model.document(doc);
        Ok(Report {
            tables: tables(&model),
            figures: figures(&model, &out)?,
            ..Report::default()
        })
    }
}

fn series(c: &StartCell, cpu: usize) -> Series {
    let mut s = Series::from_recorder(c.name(), kind::WAKEUP_LATENCY, Some(cpu), &c.rec)
        .with("configuration", c.setup.key())
        .with("load", if c.loaded { "cpu" } else { "none" })
        .with(
            "mode",
            match c.setup {
                Setup::RealTime => "hybrid",
                Setup::RealFast => "abs",
            },
        );
    if let Some(m) = &c.preempt {
        s = s.with("preempt", m.as_str());
    }
    s
}

// ---------------------------------------------------------------------------------------------
// model

/// A start-latency row: samples and percentiles (ns).
#[derive(Clone, Debug, PartialEq)]
pub struct StartRow {
    pub setup: Setup,
    pub loaded: bool,
    pub preempt: Option<String>,
    pub count: u64,
    pub p50: u64,
    pub p99: u64,
    pub p999: u64,
    pub max: u64,
}

/// Mean and sample standard deviation of a work unit's runs (ns).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stat {
    pub runs: usize,
    pub mean: f64,
    pub stddev: f64,
}

impl Stat {
    pub fn of(runs: &[u64]) -> Option<Stat> {
        if runs.is_empty() {
            return None;
        }
        let n = runs.len() as f64;
        let mean = runs.iter().map(|&r| r as f64).sum::<f64>() / n;
        let var = if runs.len() > 1 {
            runs.iter().map(|&r| (r as f64 - mean).powi(2)).sum::<f64>() / (n - 1.0)
        } else {
            0.0
        };
        Some(Stat {
            runs: runs.len(),
            mean,
            stddev: var.sqrt(),
        })
    }
}

/// One row of this machine's Table 1.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkRow {
    pub kind: WorkKind,
    pub real_time: Option<Stat>,
    pub real_fast: Option<Stat>,
}

impl WorkRow {
    /// Real time's time per unit over real fast's: Figs. 5-7's slowdown (real fast is 1).
    pub fn slowdown(&self) -> Option<f64> {
        match (self.real_time, self.real_fast) {
            (Some(rt), Some(f)) if f.mean > 0.0 => Some(rt.mean / f.mean),
            _ => None,
        }
    }
}

/// Where the two total-delay curves of a kind of work cross.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Crossing {
    /// At this work duration: the first configuration completes sooner below it, the second above.
    At(u64, Setup, Setup),
    /// Never over positive durations: this configuration always completes sooner.
    Never(Setup),
    /// A start latency or slowdown was not measured.
    Unknown,
}

impl Crossing {
    pub fn describe(&self) -> String {
        match self {
            Crossing::At(ns, below, above) => format!(
                "{}: {} below, {} above",
                format_ns(*ns),
                below.name(),
                above.name()
            ),
            Crossing::Never(s) => format!("none: {} always", s.name()),
            Crossing::Unknown => "-".into(),
        }
    }
}

/// Figs. 5-7: where start_rt + w x slowdown meets start_fast + w (real fast's slowdown is 1).
pub fn crossing(start_rt: u64, slowdown: f64, start_fast: u64) -> Crossing {
    let total = |start: u64, slow: f64, w: f64| start as f64 + w * slow;
    match crossover(start_rt, slowdown, start_fast, 1.0) {
        Some(w) => {
            let (below, above) = if start_rt <= start_fast {
                (Setup::RealTime, Setup::RealFast)
            } else {
                (Setup::RealFast, Setup::RealTime)
            };
            Crossing::At(w, below, above)
        }
        None => {
            // The same configuration wins everywhere; ask at 1 ms.
            let w = 1e6;
            if total(start_rt, slowdown, w) <= total(start_fast, 1.0, w) {
                Crossing::Never(Setup::RealTime)
            } else {
                Crossing::Never(Setup::RealFast)
            }
        }
    }
}

/// The numbers of the tables and figures.
pub struct Model {
    pub cpu: usize,
    pub interval_ns: u64,
    pub starts: Vec<StartRow>,
    pub work: Vec<WorkRow>,
    pub kernel_work: KernelWork,
    pub io_dir: String,
    pub io_writes: u32,
    pub io_bytes: usize,
    pub compute_iterations: u64,
    pub preempt: Preempt,
    pub notes: Vec<String>,
}

impl Model {
    pub fn of(out: &Outcome, s: &ChooseSettings) -> Model {
        let starts = out
            .starts
            .iter()
            .map(|c| {
                let [p50, p99, p999] = c.rec.percentiles_of([50_000, 99_000, PERCENTILE]);
                StartRow {
                    setup: c.setup,
                    loaded: c.loaded,
                    preempt: c.preempt.clone(),
                    count: c.rec.count(),
                    p50,
                    p99,
                    p999,
                    max: c.rec.max().unwrap_or(0),
                }
            })
            .collect();
        let stat = |k: WorkKind, setup: Setup| {
            out.work
                .iter()
                .find(|w| w.kind == k && w.setup == setup)
                .and_then(|w| Stat::of(&w.runs_ns))
        };
        let work = KINDS
            .iter()
            .map(|&k| WorkRow {
                kind: k,
                real_time: stat(k, Setup::RealTime),
                real_fast: stat(k, Setup::RealFast),
            })
            .collect();
        Model {
            cpu: out.cpu,
            interval_ns: s.interval_ns,
            starts,
            work,
            kernel_work: out.kernel_work.clone(),
            io_dir: out.io_dir.clone(),
            io_writes: s.io_writes,
            io_bytes: s.io_bytes,
            compute_iterations: s.compute_iterations,
            preempt: out.preempt.clone(),
            notes: out.notes.clone(),
        }
    }

    /// The start latency Figs. 5-7 use: p99.9 under the load (a deadline must hold on a busy
    /// machine), idle when the loaded cell was not measured; the kernel's own preemption mode.
    pub fn start(&self, setup: Setup) -> Option<u64> {
        let of = |loaded: bool| {
            self.starts
                .iter()
                .find(|r| r.setup == setup && r.loaded == loaded && r.preempt.is_none())
                .map(|r| r.p999)
        };
        of(true).or_else(|| of(false))
    }

    pub fn crossing(&self, k: WorkKind) -> Crossing {
        let slow = self
            .work
            .iter()
            .find(|w| w.kind == k)
            .and_then(WorkRow::slowdown);
        match (
            self.start(Setup::RealTime),
            self.start(Setup::RealFast),
            slow,
        ) {
            (Some(rt), Some(fast), Some(s)) => crossing(rt, s, fast),
            _ => Crossing::Unknown,
        }
    }

    /// Table 1, the slowdowns `punctual advise` reads, the crossovers and the preemption modes in
    /// the document.
    fn document(&self, doc: &mut ResultDoc) {
        let stat = |s: Option<Stat>| {
            s.map(|s| {
                json!({"runs": s.runs, "mean_ns": s.mean.round() as u64,
                       "stddev_ns": s.stddev.round() as u64})
            })
        };
        let mut table1 = Map::new();
        let mut slowdowns = Map::new();
        let mut crossovers = Map::new();
        for w in &self.work {
            let key = kind_key(w.kind);
            table1.insert(
                key.into(),
                json!({
                    "work": self.work_label(w.kind),
                    "real_time": stat(w.real_time),
                    "real_fast": stat(w.real_fast),
                    "slowdown": w.slowdown(),
                }),
            );
            if let Some(s) = w.slowdown() {
                slowdowns.insert(key.into(), s.into());
            }
            let c = match self.crossing(w.kind) {
                Crossing::At(ns, ..) => Value::from(ns),
                _ => Value::Null,
            };
            crossovers.insert(key.into(), c);
        }
        doc.extra.insert("table1".into(), table1.into());
        doc.extra.insert("slowdowns".into(), slowdowns.into());
        doc.extra.insert("crossovers_ns".into(), crossovers.into());
        doc.extra.insert(
            "preempt".into(),
            match &self.preempt {
                Preempt::Switchable { original, modes } => {
                    json!({"switchable": true, "original": original, "modes": modes})
                }
                Preempt::NotSwitchable(why) => json!({"switchable": false, "reason": why}),
            },
        );
    }

    fn work_label(&self, k: WorkKind) -> String {
        match k {
            WorkKind::Compute => format!(
                "{} steps of an arithmetic loop",
                group(self.compute_iterations)
            ),
            WorkKind::Kernel => self.kernel_work.describe(),
            WorkKind::Io => format!(
                "{} writes of {} KiB, each fsync'd, in {}",
                self.io_writes,
                self.io_bytes >> 10,
                self.io_dir
            ),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// tables and figures

fn u1(ns: u64) -> String {
    format!("{:.1}", ns as f64 / 1000.0)
}

fn times(x: f64) -> String {
    format!("{x:.3}x")
}

/// Start latencies, Table 1, and the crossovers of Figs. 5-7.
pub fn tables(m: &Model) -> Vec<Table> {
    vec![start_table(m), table1(m), crossovers(m)]
}

fn start_table(m: &Model) -> Table {
    let mut t = Table::new(&[
        "Configuration",
        "load",
        "samples",
        "p50",
        "p99",
        "p99.9",
        "max",
        "settings",
    ])
    .titled(format!(
        "McKenney Figs. 5-7, start latency (us) on CPU {}: releases every {}, idle and beside a busy loop per CPU",
        m.cpu,
        format_ns(m.interval_ns)
    ));
    for r in &m.starts {
        t.row([
            format!(
                "{}{}",
                r.setup.name(),
                r.preempt
                    .as_ref()
                    .map(|p| format!(", preempt={p}"))
                    .unwrap_or_default()
            ),
            if r.loaded { "cpu" } else { "idle" }.to_string(),
            group(r.count),
            u1(r.p50),
            u1(r.p99),
            u1(r.p999),
            u1(r.max),
            r.setup.recipe().to_string(),
        ]);
    }
    t.rule();
    t.row([
        "preemption modes (PREEMPT_DYNAMIC)".to_string(),
        "-".into(),
        "-".into(),
        "-".into(),
        "-".into(),
        "-".into(),
        "-".into(),
        match &m.preempt {
            Preempt::Switchable { .. } => describe_preempt(&m.preempt),
            Preempt::NotSwitchable(_) => "not switchable here".into(),
        },
    ]);
    t.note(format!(
        "Preemption modes: {}.",
        describe_preempt(&m.preempt)
    ));
    for n in &m.notes {
        t.note(n.clone());
    }
    t
}

fn fmt_stat(s: Option<Stat>) -> String {
    match s {
        Some(s) => format!(
            "{} ± {}",
            format_ns(s.mean.round() as u64),
            format_ns(s.stddev.round() as u64)
        ),
        None => "-".into(),
    }
}

fn table1(m: &Model) -> Table {
    let mut t = Table::new(&["Work unit", "real fast", "real time", "slowdown", "runs"])
        .titled("McKenney Table 1 on this machine: time per work unit, mean ± standard deviation");
    for w in &m.work {
        let runs = w
            .real_time
            .map(|s| s.runs)
            .into_iter()
            .chain(w.real_fast.map(|s| s.runs))
            .min()
            .unwrap_or(0);
        t.row([
            kind_name(w.kind).to_string(),
            fmt_stat(w.real_fast),
            fmt_stat(w.real_time),
            w.slowdown().map(times).unwrap_or_else(|| "-".into()),
            runs.to_string(),
        ]);
    }
    t.rule();
    let s = |v: f64| format!("{v:.1} s");
    let published = [
        (
            "paper 2008 Table 1: kernel build, real",
            paper::TABLE1_REAL_S,
            "3",
        ),
        (
            "paper 2008 Table 1: kernel build, sys",
            paper::TABLE1_SYS_S,
            "3",
        ),
        (
            "paper 2009 slides: kernel build, real",
            paper::SLIDES_REAL_S,
            "-",
        ),
    ];
    for (label, (fast, rt), runs) in published {
        t.row([
            label.to_string(),
            s(fast),
            s(rt),
            times(rt / fast),
            runs.to_string(),
        ]);
    }
    for w in &m.work {
        t.note(format!("{}: {}.", kind_name(w.kind), m.work_label(w.kind)));
    }
    t.note(format!(
        "Here both configurations run on this kernel, on CPU {}: real time = {}; real fast = {}. \
         The build's compilers inherit the configuration's class.",
        m.cpu,
        Setup::RealTime.recipe(),
        Setup::RealFast.recipe()
    ));
    t.note(
        "Paper: an 8-way allyesconfig 2.6.24 build, real fast on a non-real-time kernel, real time on -rt.",
    );
    t
}

fn crossovers(m: &Model) -> Table {
    let mut t = Table::new(&[
        "Work kind",
        "slowdown",
        "real time p99.9",
        "real fast p99.9",
        "crossover here",
        "paper",
    ])
    .titled("McKenney Figs. 5-7: total delay at p99.9 = start latency + work x slowdown; where the curves cross (us)");
    let start = |s: Setup| m.start(s).map(u1).unwrap_or_else(|| "-".into());
    for w in &m.work {
        t.row([
            format!("{} ({})", kind_name(w.kind), figure_of(w.kind)),
            w.slowdown().map(times).unwrap_or_else(|| "-".into()),
            start(Setup::RealTime),
            start(Setup::RealFast),
            m.crossing(w.kind).describe(),
            match w.kind {
                WorkKind::Compute => paper::FIG5_CROSSOVER,
                WorkKind::Kernel => paper::FIG6_CROSSOVER,
                WorkKind::Io => paper::FIG7_CROSSOVER,
            }
            .to_string(),
        ]);
    }
    t.note(
        "Start latency: p99.9 under the cpu load (idle where no loaded run). Real fast's slowdown is 1 by definition.",
    );
    t.note("The paper's crossovers compare a -rt kernel with a non-real-time one; here one kernel runs both configurations.");
    t
}

/// Work-unit durations of Figs. 5-7: 1 us to 100 ms, five a decade.
fn durations_us() -> impl Iterator<Item = f64> {
    (0..=25).map(|i| 10f64.powf(i as f64 / 5.0))
}

/// The start-latency distributions; then, per kind of work, total delay against work duration.
pub fn figures(m: &Model, out: &Outcome) -> Result<Vec<Figure>, Failure> {
    let mut figs = Vec::new();
    let lines: Vec<(String, &Recorder)> = out
        .starts
        .iter()
        .filter(|c| c.rec.count() > 0)
        .map(|c| (c.name(), &c.rec))
        .collect();
    if !lines.is_empty() {
        figs.push(crate::common::figure(
            "mckenney-choose-start",
            punctual_plot::percentile_plot(
                "McKenney: start latency, real time vs real fast",
                &lines,
            ),
        )?);
    }
    for w in &m.work {
        let Some(slow) = w.slowdown() else { continue };
        let curves: Vec<punctual_plot::Line> = Setup::ALL
            .iter()
            .filter_map(|&s| {
                let start = m.start(s)? as f64 / 1000.0;
                let slow = if s == Setup::RealTime { slow } else { 1.0 };
                Some(punctual_plot::Line {
                    label: format!("{} ({} x{slow:.3})", s.name(), format_ns(m.start(s)?)),
                    points: durations_us().map(|d| (d, start + d * slow)).collect(),
                })
            })
            .collect();
        if curves.is_empty() {
            continue;
        }
        let fig = figure_of(w.kind);
        figs.push(crate::common::figure(
            &format!(
                "mckenney-choose-{}-{}",
                fig.to_lowercase().replace(". ", ""),
                kind_key(w.kind)
            ),
            punctual_plot::line_plot(
                &format!(
                    "McKenney {fig}: {}, total delay at p99.9 ({})",
                    kind_name(w.kind),
                    m.crossing(w.kind).describe()
                ),
                "work-unit duration (us)",
                "total delay (us)",
                &curves,
                true,
                true,
            ),
        )?);
    }
    Ok(figs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crossings_on_curves_with_a_known_answer() {
        // 20 us + 1.5 w against 1 ms + w: equal at w = 980 us / 0.5 = 1.96 ms.
        assert_eq!(
            crossing(20_000, 1.5, 1_000_000),
            Crossing::At(1_960_000, Setup::RealTime, Setup::RealFast)
        );
        // Real time starts sooner and runs no slower: it always wins (McKenney Fig. 5).
        assert_eq!(
            crossing(20_000, 1.0, 1_000_000),
            Crossing::Never(Setup::RealTime)
        );
        assert_eq!(
            crossing(20_000, 0.97, 1_000_000),
            Crossing::Never(Setup::RealTime)
        );
        // Real time starting later and running slower never wins.
        assert_eq!(
            crossing(2_000_000, 1.2, 1_000_000),
            Crossing::Never(Setup::RealFast)
        );
        // Starting later but running faster: real fast below, real time above 1 ms / 0.5 = 2 ms.
        assert_eq!(
            crossing(2_000_000, 0.5, 1_000_000),
            Crossing::At(2_000_000, Setup::RealFast, Setup::RealTime)
        );
    }

    #[test]
    fn stats_are_the_mean_and_sample_deviation() {
        let s = Stat::of(&[2, 4, 4, 4, 5, 5, 7, 9]).unwrap();
        assert_eq!(s.mean, 5.0);
        assert!((s.stddev - (32.0f64 / 7.0).sqrt()).abs() < 1e-12);
        assert_eq!(Stat::of(&[7]).unwrap().stddev, 0.0);
        assert_eq!(Stat::of(&[]), None);
    }

    #[test]
    fn work_units_do_their_work() {
        assert_ne!(compute(1_000), compute(1_001));
        syscalls(10).unwrap();
        let dir = tempfile::tempdir().unwrap();
        fsync_writes(dir.path(), 3, 4096).unwrap();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
