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
//! A measurement plugs in through [`Measurement`] (`punctual-measure`, the seam engines depend on): what it wants from the system (plain data), the
//! load it runs under, the system changes of its own, its live figures, `run`, and `report` into the
//! result document and the tables. [`drive`] performs every step; the [`Env`] it is handed supplies
//! the wall clock, host facts, stop flag, terminal, executable path and the system itself, so a fake
//! environment runs the same pipeline with fixed facts and canned outcomes (snapshot tests).
//!
//! This crate never prints on its own: everything a user reads goes through the [`Env`]'s terminal.

mod env;
mod hold;
mod live;
mod outputs;
mod restore;
mod steal;
pub mod store;

pub use env::{Env, Terminal};
pub use hold::Held;
pub use live::Live;
pub use outputs::{numbered, FigureTarget, Outputs};
// The seam engines implement: `punctual-measure`, re-exported for the binary and the tests.
pub use punctual_measure::{
    fake_host, record_load_reports, take_guards, Applied, Canned, Ctx, Exit, FakeLoads, FakeSystem,
    Figure, Guards, LiveSpec, Measurement, RealSystem, Report, RunningLoads, Surroundings, System,
};
pub use restore::{describe_restore, restore_by_hand, restore_leftovers};
pub use steal::record_steal;

use punctual_result::{Failure, HostFacts, ResultDoc, Status};
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// What a measurement sees of this session while it runs: the environment and the live line.
struct Around<'a> {
    env: &'a Env,
    live: &'a Live,
}

impl Surroundings for Around<'_> {
    fn stop(&self) -> &Arc<AtomicBool> {
        self.env.stop()
    }
    fn interrupted(&self) -> bool {
        self.env.interrupted()
    }
    fn exe(&self) -> &Path {
        &self.env.exe
    }
    fn command(&self) -> &[String] {
        &self.env.command
    }
    fn host(&self) -> HostFacts {
        self.env.host()
    }
    fn now(&self) -> String {
        self.env.now()
    }
    fn system(&self) -> &dyn System {
        &*self.env.system
    }
    fn note(&self, msg: &str) {
        self.env.note(msg)
    }
    fn show(&self, text: &str, stdout_taken: bool) {
        self.env.show(text, stdout_taken)
    }
    fn step(&self, what: String) {
        self.live.set_prefix(what)
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
        m.apply(&Ctx::new(&held.plan, &Around { env, live: &idle }))?
    };
    let load = m.load();
    let mut loads = env
        .system
        .start_loads(&load, &env.exe, &Default::default())?;
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
    let around = Around { env, live: &live };
    let ctx = Ctx::new(&held.plan, &around);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn doc() -> ResultDoc {
        let mut d = ResultDoc::new(vec![], fake_host(), "2026-01-01T00:00:00Z".into());
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
