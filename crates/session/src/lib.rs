//! The lifecycle every punctual command and experiment goes through, in one place (rtla's
//! `tool_ops` driven by one `run_tool`):
//!
//! ```text
//!   binary: parse -> validate into a library configuration -> Outputs (paths checked)
//!   drive:  hold (privileges, mlock, cpu_dma_latency) -> apply (shield, RR timeslice)
//!           -> loads -> live line -> run -> stop loads -> teardown
//!           -> document (host, settings, loads, steal) -> report -> status and exit
//!           -> exports, figures, store, tables
//! ```
//!
//! A measurement plugs in through [`Measurement`]: what it wants from the system (plain data), the
//! load it runs under, the system changes of its own, its live figures, `run`, and `report` into the
//! result document and the tables. [`drive`] performs every step; the [`Env`] it is handed supplies
//! the wall clock, host facts, stop flag, terminal, executable path and the system itself, so a fake
//! environment runs the same pipeline with fixed facts and canned outcomes (snapshot tests).
//!
//! This crate never prints on its own: everything a user reads goes through the [`Env`]'s terminal.

mod env;
mod exit;
mod hold;
mod live;
mod outputs;
mod restore;
mod steal;
pub mod store;

pub use env::{Env, FakeLoads, FakeSystem, RealSystem, RunningLoads, System, Terminal};
pub use exit::Exit;
pub use hold::{take_guards, Guards, Held};
pub use live::{Live, LiveSpec};
pub use outputs::{numbered, Figure, FigureTarget, Outputs};
pub use restore::{describe_restore, restore_leftovers};
pub use steal::record_steal;

use punctual_load::LoadSpec;
use punctual_result::{Failure, Fallback, ResultDoc, Status, Table};
use punctual_rt::{RtPlan, RtWant, SchedParams};
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

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

/// What a measurement sees while it runs and reports.
pub struct Ctx<'a> {
    pub env: &'a Env,
    /// The real-time settings in force (after fallbacks); policy `other` for pure computation.
    pub rt: &'a RtPlan,
    live: &'a Live,
}

impl Ctx<'_> {
    /// Set by Ctrl-C or SIGTERM (loops poll it), or by the measurement itself.
    pub fn stop(&self) -> &Arc<AtomicBool> {
        self.env.stop()
    }

    pub fn interrupted(&self) -> bool {
        self.env.interrupted()
    }

    /// The punctual executable, for child processes.
    pub fn exe(&self) -> &Path {
        &self.env.exe
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
        self.env.note(msg.as_ref());
    }

    /// Name the step now running on the live line (experiments: the table row being measured).
    pub fn step(&self, what: impl Into<String>) {
        self.live.set_prefix(what);
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

/// Run a measurement through every step of the lifecycle and write its results where `out`
/// says. Inputs were validated and output paths checked (`Outputs`) before this is called: a
/// failure before `run` leaves nothing changed and nothing written. Every system setting is
/// restored before the document is written, on every path (guards), and after SIGKILL by the next
/// start (journal).
pub fn drive<M: Measurement>(m: &mut M, out: &Outputs, env: &Env) -> Result<Exit, Failure> {
    let done = execute(m, out.fail_above, env)?;
    out.write(&done.doc, &done.report, env)?;
    if done.doc.status == Status::Interrupted {
        // Only what was written is said to be (issue 31: `shield` writes no results).
        env.note(if out.keeps_results() {
            "interrupted; partial results written, everything changed restored"
        } else {
            "interrupted; everything changed restored"
        });
    }
    Ok(done.exit)
}

/// `--repeat N`: the measurement `make(k)` builds (k from 0), driven `n` times one after the other,
/// each run a document of its own (exports numbered `FILE-1` ... by [`Outputs::repeated`]), so
/// `compare` can weigh the spread between runs. Stops after an interrupted run; the exit is the
/// worst of the runs' (interrupted, then system, then limit exceeded). Ends with the stored ids.
pub fn drive_repeated<M: Measurement>(
    n: u32,
    out: &Outputs,
    env: &Env,
    mut make: impl FnMut(u32) -> M,
) -> Result<Exit, Failure> {
    if n <= 1 {
        return drive(&mut make(0), out, env);
    }
    let rank = |e: Exit| match e {
        Exit::Interrupted => 4,
        Exit::System => 3,
        Exit::LimitExceeded => 2,
        Exit::Ok => 0,
        _ => 1,
    };
    let mut worst = Exit::Ok;
    for k in 0..n {
        env.note(&format!("run {} of {n}", k + 1));
        out.set_run(k + 1);
        let exit = drive(&mut make(k), out, env)?;
        if rank(exit) > rank(worst) {
            worst = exit;
        }
        if exit == Exit::Interrupted || env.interrupted() {
            break;
        }
    }
    let ids = out.stored_ids();
    if ids.len() > 1 {
        env.show(
            &format!(
                "\n{} runs stored: {}\nAgainst another set of runs: punctual compare {} -- OTHER...\n",
                ids.len(),
                ids.join(" "),
                ids.join(" ")
            ),
            !out.stdout_free(),
        );
    }
    Ok(worst)
}

/// How a measurement ended, before anything was written.
pub struct Finished {
    pub exit: Exit,
    pub doc: ResultDoc,
    pub report: Report,
}

/// Every step of [`drive`] but the outputs: for callers that look at the document themselves
/// (tests, experiments built of other measurements).
pub fn execute<M: Measurement>(
    m: &mut M,
    fail_above: Option<u64>,
    env: &Env,
) -> Result<Finished, Failure> {
    env.stop();
    let started_at = env.now();
    let held = match m.wants() {
        Some(w) => Held::take(env, &w),
        None => Held::none(),
    };
    let steal = (held.is_real_time() && m.records_steal())
        .then(|| env.system.steal())
        .flatten();
    let guard = {
        let idle = Live::idle();
        m.apply(&Ctx {
            env,
            rt: &held.plan,
            live: &idle,
        })?
    };
    let load = m.load();
    let mut loads = env.system.start_loads(&load, &env.exe)?;
    let ready = loads.wait_ready(std::time::Duration::from_secs(10), env.stop());
    if ready < load.instances() as usize && !env.interrupted() {
        env.note(&format!(
            "{ready} of {} load processes ready after 10 s; measuring anyway",
            load.instances()
        ));
    }
    let live = match m.live() {
        Some(spec) => env.live(m.label(), spec),
        None => Live::idle(),
    };
    let ctx = Ctx {
        env,
        rt: &held.plan,
        live: &live,
    };
    // A signal during the start-up (privileges, the measurement's own changes, loads) ends the
    // command here: nothing was measured, everything is undone below (exit 130).
    let result = if env.interrupted() {
        Err(Failure::interrupted())
    } else {
        m.run(&ctx)
    };
    live.finish();
    let load_reports = loads.stop();
    // Teardown: the system is put back before anything is written.
    for line in guard.map(Applied::undo).unwrap_or_default() {
        env.note(&line);
    }
    let outcome = result?;

    let mut doc = ResultDoc::new(env.command.clone(), env.host(), started_at);
    doc.ended_at = env.now();
    held.describe(&mut doc);
    record_load_reports(&mut doc, &load, &load_reports);
    let report = m.report(outcome, &ctx, &mut doc)?;
    if let Some(meter) = &steal {
        record_steal(meter, &mut doc, env);
    }
    let worst = m.worst(&doc);
    let exit = match close(&mut doc, env.interrupted(), fail_above, worst, env) {
        Exit::Ok => report.exit.unwrap_or(Exit::Ok),
        other => other,
    };
    Ok(Finished { exit, doc, report })
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

/// Set a finished document's status and return the exit (SPEC section 2): an interruption (130;
/// a signal, or the measurement's report saying it was cut short) outranks the watchdog (3, set by the measurement's report), which outranks a crossed
/// `--fail-above` (1), which outranks ok (0).
pub fn close(
    doc: &mut ResultDoc,
    interrupted: bool,
    fail_above: Option<u64>,
    worst: Option<(u64, &str)>,
    env: &Env,
) -> Exit {
    let over = fail_above.zip(worst).filter(|(limit, (w, _))| w > limit);
    doc.status = if interrupted || doc.status == Status::Interrupted {
        Status::Interrupted
    } else if doc.status == Status::Watchdog {
        Status::Watchdog
    } else if over.is_some() {
        Status::LimitExceeded
    } else {
        Status::Ok
    };
    if let Some((limit, (w, what))) = over {
        env.note(&format!(
            "limit exceeded: worst {what} {} is above --fail-above {}",
            punctual_time::format_ns(w),
            punctual_time::format_ns(limit)
        ));
    }
    match doc.status {
        Status::Interrupted => Exit::Interrupted,
        Status::Watchdog => Exit::System,
        Status::LimitExceeded => Exit::LimitExceeded,
        Status::Ok => Exit::Ok,
    }
}

/// A measurement whose `run` returns a prepared outcome, while everything else (wants, loads,
/// report, status, outputs) is the real measurement's: with [`Env::fake`], a command's whole
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

#[cfg(test)]
mod tests {
    use super::*;

    fn doc() -> ResultDoc {
        let mut d = ResultDoc::new(vec![], env::fake_host(), "2026-01-01T00:00:00Z".into());
        d.status = Status::Ok;
        d
    }

    /// Each status gets SPEC's exit code, with an interruption first, then the watchdog, then the
    /// limit (the limit applies to the worst value only when it is above).
    #[test]
    fn statuses_map_to_spec_exit_codes_in_order() {
        let env = Env::fake(&["punctual"]);
        let over = Some((200, "sample"));
        let cases = [
            (false, None, Some(100), over, Status::Ok, Exit::Ok),
            (
                false,
                None,
                Some(100),
                Some((100, "sample")),
                Status::Ok,
                Exit::Ok,
            ),
            (
                false,
                None,
                Some(100),
                over,
                Status::LimitExceeded,
                Exit::LimitExceeded,
            ),
            (
                false,
                Some(Status::Watchdog),
                Some(100),
                over,
                Status::Watchdog,
                Exit::System,
            ),
            (
                true,
                Some(Status::Watchdog),
                Some(100),
                over,
                Status::Interrupted,
                Exit::Interrupted,
            ),
            (
                false,
                Some(Status::Interrupted),
                None,
                None,
                Status::Interrupted,
                Exit::Interrupted,
            ),
        ];
        for (i, (interrupted, set, limit, worst, status, exit)) in cases.into_iter().enumerate() {
            let mut d = doc();
            if let Some(s) = set {
                d.status = s;
            }
            // The first case has no limit set at all.
            let limit = if i == 0 { None } else { limit };
            assert_eq!(
                close(&mut d, interrupted, limit, worst, &env),
                exit,
                "case {i}"
            );
            assert_eq!(d.status, status, "case {i}");
            assert_eq!(
                exit.code(),
                [0, 0, 1, 3, 130, 130][i],
                "case {i}: SPEC section 2"
            );
        }
    }
}
