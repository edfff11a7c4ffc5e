//! The seam between punctual's engines and its lifecycle. An engine (a command or an experiment)
//! implements [`Measurement`]: what it wants from the system, the load it runs under, its own
//! changes, its live figures, `run`, and `report` into the result document and tables. While it
//! runs it sees a [`Ctx`]: the real-time settings in force, the stop flag, the terminal and the
//! [`System`] (real or fake). The driver that performs every step, the outputs, the results store
//! and the live bar are `punctual-session`'s; this crate links none of them, so the simulator and
//! the trace parser build without SQLite or a PostgreSQL client. [`Canned`] is the mock: a real
//! measurement whose run returns a prepared outcome.

mod exit;
mod system;

pub use exit::Exit;
pub use system::{fake_host, FakeLoads, FakeSystem, LoadReports, RealSystem, RunningLoads, System};

use punctual_load::{LoadSpec, StartOptions};
use punctual_result::{Failure, Fallback, HostFacts, ResultDoc, Table};
use punctual_rt::{RtPlan, RtWant, SchedParams};
use std::any::Any;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Instant;

/// Something that measures or runs: a command or an experiment.
pub trait Measurement {
    /// What `run` produces; `report` turns it into the document and tables.
    type Outcome;

    /// Names the live line: `latency abs`, `bench ctxsw`, `kurt-periodic`.
    fn label(&self) -> String;

    /// The real-time settings to hold while it runs. `None`: pure computation (simulator,
    /// analysis): no privileges checked, nothing locked, no steal time recorded.
    fn wants(&self) -> Option<RtWant> {
        None
    }

    /// Whether the hypervisor's steal time bears on the figures (timeliness does; the cost of a
    /// system call or a context switch does not).
    fn records_steal(&self) -> bool {
        true
    }

    /// Background load held while `run` runs (measurements that switch loads between phases
    /// start their own).
    fn load(&self) -> LoadSpec {
        LoadSpec::default()
    }

    /// System changes of its own (shield, RR timeslice), made after the session's settings are
    /// held and undone as soon as `run` returns (and on every other path, by their guards).
    fn apply(&mut self, _ctx: &Ctx) -> Result<Option<Box<dyn Applied>>, Failure> {
        Ok(None)
    }

    /// The live line's total and figures; `None` for measurements that finish in about 2 s.
    fn live(&self) -> Option<LiveSpec> {
        None
    }

    fn run(&mut self, ctx: &Ctx) -> Result<Self::Outcome, Failure>;

    /// Put the outcome into the document (settings, series, extras; `doc.status = Watchdog` when
    /// the run was stopped for the machine's sake) and return what the user reads. The document
    /// arrives with the command, host, start and end times and the held settings; `report` may
    /// replace any of them (a simulation's timestamps are simulated, an analysis' host is the
    /// trace's).
    fn report(
        &self,
        outcome: Self::Outcome,
        ctx: &Ctx,
        doc: &mut ResultDoc,
    ) -> Result<Report, Failure>;

    /// The largest value `--fail-above` applies to, and what it is called in the message.
    /// Default: the largest sample of any series.
    fn worst(&self, doc: &ResultDoc) -> Option<(u64, &'static str)> {
        doc.series
            .iter()
            .map(|s| s.summary.max)
            .max()
            .map(|m| (m, "sample"))
    }
}

/// A system change a measurement made in [`Measurement::apply`]: undone by [`Applied::undo`] at
/// teardown, which says what it put back (one line each), or by dropping it on any other path.
pub trait Applied {
    fn undo(self: Box<Self>) -> Vec<String>;
}

impl Applied for punctual_rt::journal::ChangeGuard {
    fn undo(self: Box<Self>) -> Vec<String> {
        Vec::new()
    }
}

/// What a measurement shows the user.
#[derive(Clone, Debug, Default)]
pub struct Report {
    pub tables: Vec<Table>,
    /// Free text after the tables (verdict explanations, totals).
    pub text: String,
    pub figures: Vec<Figure>,
    /// The exit when the run itself went well, for measurements whose answer is an exit status
    /// (a wrapped command's). `None`: ok, or limit exceeded.
    pub exit: Option<Exit>,
}

impl Report {
    pub fn tables(tables: Vec<Table>) -> Report {
        Report {
            tables,
            ..Report::default()
        }
    }

    /// Tables (a blank line between two), then the text, as the user reads them: all fitted to
    /// the process's width (`punctual_result::table::width`; the text's long lines wrapped).
    pub fn render(&self) -> String {
        let tables: Vec<String> = self.tables.iter().map(Table::render).collect();
        let mut s = tables.join("\n");
        s.push_str(&punctual_result::table::wrap(&self.text));
        s
    }
}

/// A named SVG figure.
#[derive(Clone, Debug)]
pub struct Figure {
    /// File stem, e.g. `etsion-latency-fig7`.
    pub name: String,
    pub svg: String,
}

/// What a measurement shows while it runs.
pub struct LiveSpec {
    /// The bar's length in the unit `poll` reports; `None`: no bar, elapsed time only.
    pub total: Option<u64>,
    /// (position, figures), asked 4 times a second from another thread: read atomics, never lock
    /// what a timing loop holds.
    pub poll: Box<dyn Fn() -> (u64, String) + Send>,
}

impl LiveSpec {
    /// A bar of elapsed wall time against `expected_ns`, with `figures()` beside it.
    pub fn timed(expected_ns: u64, figures: impl Fn() -> String + Send + 'static) -> LiveSpec {
        let t0 = Instant::now();
        LiveSpec {
            total: Some((expected_ns / 1_000_000).max(1)),
            poll: Box::new(move || (t0.elapsed().as_millis() as u64, figures())),
        }
    }

    /// Elapsed time and `figures()`, for runs of unknown length.
    pub fn open(figures: impl Fn() -> String + Send + 'static) -> LiveSpec {
        LiveSpec {
            total: None,
            poll: Box::new(move || (0, figures())),
        }
    }

    /// A bar of `position()` out of `total` units (alarms taken, nanoseconds simulated).
    pub fn counted(total: u64, poll: impl Fn() -> (u64, String) + Send + 'static) -> LiveSpec {
        LiveSpec {
            total: Some(total),
            poll: Box::new(poll),
        }
    }
}

/// What a measurement sees while it runs and reports. The lifecycle behind it (the driver, the
/// terminal, the live line) is a [`Surroundings`]: an engine depends on this crate only.
pub struct Ctx<'a> {
    /// The real-time settings in force (after fallbacks); policy `other` for pure computation.
    pub rt: &'a RtPlan,
    around: &'a dyn Surroundings,
}

/// What the lifecycle supplies to a running measurement (`punctual-session` implements it).
pub trait Surroundings: Sync {
    /// Set by Ctrl-C or SIGTERM (loops poll it), or by the measurement itself.
    fn stop(&self) -> &Arc<AtomicBool>;
    /// A signal asked us to stop.
    fn interrupted(&self) -> bool;
    /// The punctual executable, for child processes.
    fn exe(&self) -> &Path;
    /// The command line, as the result document records it.
    fn command(&self) -> &[String];
    fn host(&self) -> HostFacts;
    /// The wall clock, RFC 3339 in UTC.
    fn now(&self) -> String;
    fn system(&self) -> &dyn System;
    /// A line for the user on stderr (`punctual: ...`).
    fn note(&self, msg: &str);
    /// Text for the user on stdout (on stderr when `stdout_taken`).
    fn show(&self, text: &str, stdout_taken: bool);
    /// Name the step now running on the live line.
    fn step(&self, what: String);
}

impl<'a> Ctx<'a> {
    pub fn new(rt: &'a RtPlan, around: &'a dyn Surroundings) -> Ctx<'a> {
        Ctx { rt, around }
    }

    /// Set by Ctrl-C or SIGTERM (loops poll it), or by the measurement itself.
    pub fn stop(&self) -> &Arc<AtomicBool> {
        self.around.stop()
    }

    pub fn interrupted(&self) -> bool {
        self.around.interrupted()
    }

    /// The punctual executable, for child processes.
    pub fn exe(&self) -> &Path {
        self.around.exe()
    }

    /// The command line, as the result document records it.
    pub fn command(&self) -> &[String] {
        self.around.command()
    }

    /// The machine's facts (fixed ones in a fake environment).
    pub fn host(&self) -> HostFacts {
        self.around.host()
    }

    /// The wall clock, RFC 3339 in UTC.
    pub fn now(&self) -> String {
        self.around.now()
    }

    /// The system the measurement changes or reads (a fake one in snapshot tests).
    pub fn system(&self) -> &dyn System {
        self.around.system()
    }

    /// Start a background load now (a measurement that switches loads between its phases),
    /// through the system, so a fake environment starts none.
    pub fn start_load(&self, spec: &LoadSpec) -> Result<Box<dyn RunningLoads>, Failure> {
        self.start_load_with(spec, &StartOptions::default())
    }

    /// [`Ctx::start_load`] with the load processes' scheduling class set.
    pub fn start_load_with(
        &self,
        spec: &LoadSpec,
        opts: &StartOptions,
    ) -> Result<Box<dyn RunningLoads>, Failure> {
        self.system().start_loads(spec, self.exe(), opts)
    }

    /// Lock memory and hold `/dev/cpu_dma_latency` at `dma_latency_us` for part of a run, saying
    /// what could not be had ([`take_guards`]).
    pub fn hold(&self, mlock: bool, dma_latency_us: Option<u32>) -> Guards {
        take_guards(self.system(), mlock, dma_latency_us)
    }

    /// Text for the user on stdout (on stderr when `stdout_taken`).
    pub fn show(&self, text: &str, stdout_taken: bool) {
        self.around.show(text, stdout_taken)
    }

    /// The scheduling class the session holds.
    pub fn sched(&self) -> SchedParams {
        SchedParams {
            policy: self.rt.policy,
            priority: self.rt.priority,
        }
    }

    /// A line for the user on stderr (`punctual: ...`).
    pub fn note(&self, msg: impl AsRef<str>) {
        self.around.note(msg.as_ref());
    }

    /// Name the step now running on the live line (experiments: the table row being measured).
    pub fn step(&self, what: impl Into<String>) {
        self.around.step(what.into());
    }
    /// Record fallbacks threads took at run time (the kernel refused although the privilege check
    /// passed): printed once, listed in the document, and the document's policy says what ran.
    pub fn runtime_fallbacks<'f>(
        &self,
        doc: &mut ResultDoc,
        fallbacks: impl IntoIterator<Item = &'f Fallback>,
    ) {
        let mut seen = false;
        for f in fallbacks {
            if !doc.settings.fallbacks.contains(f) {
                self.note(format!("fallback: {f}"));
                doc.settings.fallbacks.push(f.clone());
            }
            seen = true;
        }
        if seen {
            doc.settings.policy = Some("other".into());
            doc.settings.priority = Some(0);
        }
    }
}

/// Locked memory and a cpu_dma_latency request, as far as they could be had.
pub struct Guards {
    /// Dropping them releases what was taken.
    pub guards: Vec<Box<dyn Any>>,
    pub mlock: bool,
    pub dma_latency_us: Option<u32>,
    /// What was asked for and could not be had, with why and the fix.
    pub fallbacks: Vec<Fallback>,
}

/// Lock memory (`mlock`) and hold `/dev/cpu_dma_latency` at `dma_latency_us` on `system`, saying
/// what could not be had. The session holds them for a whole measurement; a measurement that
/// compares configurations holds them for some of its steps only ([`Ctx::hold`]).
pub fn take_guards(system: &dyn System, mlock: bool, dma_latency_us: Option<u32>) -> Guards {
    let mut got = Guards {
        guards: Vec::new(),
        mlock: false,
        dma_latency_us: None,
        fallbacks: Vec::new(),
    };
    if mlock {
        match system.lock_memory() {
            Ok(g) => {
                got.guards.push(g);
                got.mlock = true;
            }
            Err(why) => got.fallbacks.push(Fallback {
                setting: "memory locking".into(),
                wanted: "mlockall".into(),
                got: "unlocked memory".into(),
                why,
                fix: punctual_rt::privilege::MLOCK_FIX.into(),
            }),
        }
    }
    if let Some(us) = dma_latency_us {
        match system.hold_dma_latency(us) {
            Ok(g) => {
                got.guards.push(g);
                got.dma_latency_us = Some(us);
            }
            Err(why) => got.fallbacks.push(Fallback {
                setting: "cpu_dma_latency".into(),
                wanted: format!("{us} us"),
                got: "no request".into(),
                why,
                fix: punctual_rt::privilege::DMA_FIX.into(),
            }),
        }
    }
    got
}

/// A run's background load in its document: the spec (`settings.load`) and what each instance
/// reported (`settings.load_reports`); nothing when no load ran.
pub fn record_load_reports(
    doc: &mut ResultDoc,
    spec: &LoadSpec,
    reports: &[(
        punctual_load::LoadKind,
        Option<usize>,
        Option<punctual_load::LoadReport>,
    )],
) {
    if spec.is_empty() {
        return;
    }
    let s = &mut doc.settings.extra;
    s.insert("load".into(), spec.to_string().into());
    let reports: Vec<_> = reports.iter().filter_map(|r| r.2.as_ref()).collect();
    s.insert(
        "load_reports".into(),
        serde_json::to_value(reports).expect("load reports serialise"),
    );
}

/// A measurement whose `run` returns a prepared outcome, while everything else (wants, loads,
/// report, status, outputs) is the real measurement's: with `Env::fake`, a command's whole
/// pipeline runs without touching the machine, so its tables and document can be snapshot-tested
/// (hyperfine's mock executor).
pub struct Canned<M: Measurement> {
    pub inner: M,
    outcome: Option<M::Outcome>,
}

impl<M: Measurement> Canned<M> {
    pub fn new(inner: M, outcome: M::Outcome) -> Canned<M> {
        Canned {
            inner,
            outcome: Some(outcome),
        }
    }
}

impl<M: Measurement> Measurement for Canned<M> {
    type Outcome = M::Outcome;
    fn label(&self) -> String {
        self.inner.label()
    }
    fn wants(&self) -> Option<RtWant> {
        self.inner.wants()
    }
    fn records_steal(&self) -> bool {
        self.inner.records_steal()
    }
    fn load(&self) -> LoadSpec {
        self.inner.load()
    }
    fn live(&self) -> Option<LiveSpec> {
        self.inner.live()
    }
    fn run(&mut self, _ctx: &Ctx) -> Result<M::Outcome, Failure> {
        self.outcome
            .take()
            .ok_or_else(|| Failure::system("a canned measurement runs once"))
    }
    fn report(
        &self,
        outcome: M::Outcome,
        ctx: &Ctx,
        doc: &mut ResultDoc,
    ) -> Result<Report, Failure> {
        self.inner.report(outcome, ctx, doc)
    }
    fn worst(&self, doc: &ResultDoc) -> Option<(u64, &'static str)> {
        self.inner.worst(doc)
    }
}
