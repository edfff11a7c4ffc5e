//! `punctual run PLAN` as a measurement of the lifecycle (`punctual_session::drive`), and
//! [`run_plan`], the one way a plan is run (`punctual run` and the `kurt-periodic` experiment).

use crate::engine::{Heartbeat, SlotProgress};
use crate::shield::{Shield, ShieldPlan};
use crate::{prepare, report, Avoidance, DispatchError, Outcome, Prepared, RunConfig};
use punctual_explain::{ExplainConfig, Explainer, Explanation};
use punctual_load::LoadSpec;
use punctual_measure::{Applied, Ctx, LiveSpec, Measurement, Report};
use punctual_plan::admission::Report as Admission;
use punctual_plan::{Offset, Plan};
use punctual_result::{Failure, ResultDoc, Status};
use punctual_rt::RtWant;
use punctual_time::{format_ns, MarginPolicy};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

/// What a running plan shows while it runs, known once the plan is prepared: its slots (names,
/// CPUs, live figures) and each dispatcher CPU's heartbeat.
pub struct LiveState {
    pub slots: Vec<crate::SlotInfo>,
    pub progress: Arc<[SlotProgress]>,
    /// Dispatcher CPUs, with their heartbeats in the same order.
    pub cpus: Vec<usize>,
    pub heartbeats: Arc<[Heartbeat]>,
}

/// Where [`run_plan`] publishes the [`LiveState`]; shared with whoever displays it.
#[derive(Clone, Default)]
pub struct LiveSlots {
    cell: Arc<OnceLock<LiveState>>,
    /// Keep a live histogram of every slot's lateness (`run --metrics`; about 270 KB a slot).
    pub histograms: bool,
}

impl LiveSlots {
    /// Live figures with a lateness histogram per slot.
    pub fn with_histograms() -> LiveSlots {
        LiveSlots {
            histograms: true,
            ..LiveSlots::default()
        }
    }

    /// The running plan's state (`None` until it is prepared).
    pub fn get(&self) -> Option<&LiveState> {
        self.cell.get()
    }
}

/// Prepare the plan (actions, exec children, wake channels and their clients) and run it with
/// `cfg`, whose `duration` is the one that counts (resolved once by the caller). `slots`, when
/// given, receives the slots' live figures as soon as they exist.
pub fn run_plan(
    plan: Plan,
    cfg: &RunConfig,
    stop: Arc<AtomicBool>,
    slots: Option<&LiveSlots>,
) -> Result<Outcome, DispatchError> {
    let (prepared, progress, heartbeats) = prepared_for(plan, cfg, &stop, slots)?;
    crate::execute_with(prepared, cfg, stop, progress, heartbeats)
}

/// A prepared plan with its live figures and heartbeats.
type Started = (Prepared, Arc<[SlotProgress]>, Arc<[Heartbeat]>);

/// The plan prepared (clients attached) with its live figures, shown to `slots` when asked.
fn prepared_for(
    plan: Plan,
    cfg: &RunConfig,
    stop: &AtomicBool,
    slots: Option<&LiveSlots>,
) -> Result<Started, DispatchError> {
    let prepared = prepare(plan, cfg, stop)?;
    let progress = match slots {
        Some(s) if s.histograms => crate::live_progress_for(&prepared),
        _ => crate::progress_for(&prepared),
    };
    let heartbeats = crate::heartbeats_for(&prepared);
    if let Some(s) = slots {
        let _ = s.cell.set(LiveState {
            slots: prepared.slots.clone(),
            progress: progress.clone(),
            cpus: prepared.cpus(),
            heartbeats: heartbeats.clone(),
        });
    }
    Ok((prepared, progress, heartbeats))
}

/// [`run_plan`], with `--explain`: the kernel trace runs from the moment the plan is prepared
/// (its clients attached) to its end, the dispatcher keeps its late releases (`cfg.explain_bound`
/// is set from `explain`), and each gets its cause, counted per slot (series = index in
/// [`Outcome::slots`]).
pub fn run_plan_explained(
    plan: Plan,
    cfg: &RunConfig,
    stop: Arc<AtomicBool>,
    slots: Option<&LiveSlots>,
    explain: Option<&ExplainConfig>,
) -> Result<(Outcome, Option<Explanation>), Failure> {
    let Some(explain) = explain else {
        return Ok((run_plan(plan, cfg, stop, slots)?, None));
    };
    let (out, trace, records, unlogged) = run_plan_traced(plan, cfg, stop, slots, explain)?;
    Ok((out, Some(trace.explain(&records, &unlogged))))
}

/// The trace, the late releases and those the logs had no room for (per slot) of an explained
/// run, before they are explained: for studies of the trace around them
/// (`examples/late_after_tick.rs`).
pub fn run_plan_traced(
    plan: Plan,
    cfg: &RunConfig,
    stop: Arc<AtomicBool>,
    slots: Option<&LiveSlots>,
    explain: &ExplainConfig,
) -> Result<TracedRun, Failure> {
    let mut cfg = cfg.clone();
    cfg.explain_bound = Some(explain.bound);
    let (prepared, progress, heartbeats) = prepared_for(plan, &cfg, &stop, slots)?;
    // The drain keeps off the wake clients' CPUs too: its reads in a kernel without preemption
    // would delay a client at its instant.
    let mut explain = explain.clone();
    explain
        .quiet
        .extend(cfg.client_cpus.iter().map(|&(_, c)| c));
    let explainer = Explainer::start(&explain)?;
    let mut out = crate::execute_with(prepared, &cfg, stop, progress, heartbeats)?;
    let (records, unlogged) = out.late_releases();
    let mut trace = explainer.stop()?;
    let stalls = out.stalls();
    trace.add_stalls(stalls, out.stalls_dropped());
    Ok((out, trace, records, unlogged))
}

/// What [`run_plan_traced`] returns.
pub type TracedRun = (
    Outcome,
    punctual_explain::Trace,
    Vec<punctual_explain::LateRelease>,
    Vec<(u32, u64)>,
);

impl Applied for Shield {
    fn undo(self: Box<Self>) -> Vec<String> {
        if let Some(pid) = self.nested_in {
            return vec![format!(
                "the shield of pid {pid} over these CPUs still holds; nothing of ours to restore"
            )];
        }
        let released = self.restore();
        vec![format!(
            "shield lifted: {}",
            crate::shield::describe_restore(&released)
        )]
    }
}

/// The margin admission control assumes: the fixed one, or 50 us for `auto`.
pub fn assumed_margin(margin: MarginPolicy) -> u64 {
    match margin {
        MarginPolicy::Fixed(m) => m,
        MarginPolicy::Auto => 50_000,
    }
}

/// A plan, admitted, with how to run it.
pub struct RunPlan {
    /// Taken when it runs (a compiled plan can hold millions of events: never copied).
    plan: Option<Plan>,
    name: String,
    source: String,
    /// Policy, priority and slack are replaced by what the session holds.
    pub cfg: RunConfig,
    pub want: RtWant,
    pub load: LoadSpec,
    /// `shield = true`: real-time mode on the dispatcher CPUs while the plan runs.
    pub shield: Option<ShieldPlan>,
    /// Admission control's verdict (with `--force`, possibly a refusal).
    admission: Admission,
    /// `--avoid-interference`: watch the CPUs first and re-phase the automatic offsets.
    pub avoid_interference: bool,
    /// Largest work utilisation per CPU, for the re-check after re-phasing.
    bound: f64,
    /// Tasks whose offsets admission control chose (again, avoiding, with `--avoid-interference`).
    auto_tasks: Vec<usize>,
    avoidance: Option<Avoidance>,
    slots: LiveSlots,
    /// `--explain`: trace the run and attribute every release later than the bound.
    pub explain: Option<ExplainConfig>,
    explained: Option<Explanation>,
    /// With `--explain`: the floor watched on the dispatcher CPUs just before the run.
    floor: punctual_bench::gaps::Floor,
}

impl RunPlan {
    /// `-p 99` with the watchdog on: the watchdog needs the one priority above the dispatcher, so
    /// the dispatcher runs at 98, said at the start and kept in the document.
    fn priority_fallback(&self, ctx: &Ctx) -> Option<punctual_result::Fallback> {
        let got = self.dispatcher_priority(ctx);
        (got < ctx.rt.priority).then(|| punctual_result::Fallback {
            setting: "priority".into(),
            wanted: ctx.rt.priority.to_string(),
            got: got.to_string(),
            why: "the watchdog runs one priority above the dispatcher, so it can stop a stuck run"
                .into(),
            fix: "--watchdog off runs the dispatcher at the priority asked (and nothing stops a \
                  run that starves its CPU)"
                .into(),
        })
    }

    /// With the watchdog on, it takes the top priority and the dispatcher the one below.
    fn dispatcher_priority(&self, ctx: &Ctx) -> u32 {
        if self.cfg.watchdog.is_some() && ctx.rt.policy.is_realtime() {
            ctx.rt.priority.min(98)
        } else {
            ctx.rt.priority
        }
    }

    /// Phase the automatic offsets and check the plan against `bound` (admission control); the
    /// caller looks at [`RunPlan::admission`] before driving it.
    pub fn new(
        mut plan: Plan,
        cfg: RunConfig,
        want: RtWant,
        load: LoadSpec,
        bound: f64,
    ) -> RunPlan {
        let auto_tasks = (0..plan.tasks.len())
            .filter(|&i| plan.tasks[i].offset == Offset::Auto)
            .collect();
        let admission = report::admit(
            &mut plan,
            &cfg.cpus,
            bound,
            assumed_margin(cfg.margin),
            cfg.admitted_spin(),
        );
        RunPlan {
            name: plan.name.clone(),
            source: plan.source.clone(),
            plan: Some(plan),
            cfg,
            want,
            load,
            shield: None,
            admission,
            avoid_interference: false,
            bound,
            auto_tasks,
            avoidance: None,
            slots: LiveSlots::default(),
            explain: None,
            explained: None,
            floor: Default::default(),
        }
    }

    pub fn admission(&self) -> &Admission {
        &self.admission
    }

    /// The plan, as admission control phased it (until it runs).
    pub fn plan(&self) -> Option<&Plan> {
        self.plan.as_ref()
    }

    /// The plan's live state while it runs; with `histograms`, each slot keeps a live histogram
    /// of its lateness (`run --metrics`). Call before it runs.
    pub fn live_slots(&mut self, histograms: bool) -> LiveSlots {
        self.slots.histograms = histograms;
        self.slots.clone()
    }

    /// Watch the CPUs and give the automatic offsets that miss the interruptions seen, kept only
    /// if admission control still agrees (or already refused, under `--force`).
    fn avoid(&mut self, plan: &mut Plan, ctx: &Ctx) -> Result<(), Failure> {
        let plain: Vec<Offset> = self
            .auto_tasks
            .iter()
            .map(|&i| plan.tasks[i].offset)
            .collect();
        for &i in &self.auto_tasks {
            plan.tasks[i].offset = Offset::Auto;
        }
        let sched = punctual_rt::SchedParams {
            policy: ctx.rt.policy,
            priority: ctx.rt.priority.min(98),
        };
        match crate::phase_around_interference(plan, &self.cfg.cpus, sched, ctx.stop())? {
            Some(av) => {
                let mut r = report::admit(
                    plan,
                    &self.cfg.cpus,
                    self.bound,
                    assumed_margin(self.cfg.margin),
                    self.cfg.admitted_spin(),
                );
                if r.feasible() || !self.admission.feasible() {
                    ctx.note(av.summary());
                    r.phased = av.given.clone();
                    self.admission = r;
                    self.cfg.start_grid = Some(av.grid);
                    self.cfg.avoid = Some(Arc::new(av.interference.clone()));
                    self.avoidance = Some(av);
                } else {
                    for (&i, o) in self.auto_tasks.iter().zip(plain) {
                        plan.tasks[i].offset = o;
                    }
                    ctx.note("--avoid-interference: the offsets it found fail admission control; plain phasing");
                }
            }
            None => {
                for (&i, o) in self.auto_tasks.iter().zip(plain) {
                    plan.tasks[i].offset = o;
                }
                ctx.note("--avoid-interference: no task has an automatic offset, or the hyperperiod is over 1 s; plain phasing")
            }
        }
        Ok(())
    }
}

impl Measurement for RunPlan {
    type Outcome = Outcome;

    fn label(&self) -> String {
        "run".into()
    }
    fn wants(&self) -> Option<RtWant> {
        Some(self.want)
    }
    fn load(&self) -> LoadSpec {
        self.load.clone()
    }
    fn apply(&mut self, ctx: &Ctx) -> Result<Option<Box<dyn Applied>>, Failure> {
        let Some(sp) = &self.shield else {
            return Ok(None);
        };
        let cpus = punctual_rt::format_cpu_list(&self.cfg.cpus);
        let s = Shield::apply_noted(sp, ctx, |s| {
            format!(
                "real-time mode on CPU {cpus}: {} change(s) applied, {} refused, {} task(s) \
                 cannot move",
                s.applied,
                s.refused.len(),
                sp.skipped.len()
            )
        })?;
        Ok(Some(Box::new(s)))
    }
    fn live(&self) -> Option<LiveSpec> {
        let slots = self.slots.clone();
        let figures = move || {
            let Some(live) = slots.get() else {
                return "preparing".to_string();
            };
            let parts: Vec<String> = live
                .slots
                .iter()
                .map(|s| &s.name)
                .zip(live.progress.iter())
                .take(6)
                .map(|(n, p)| {
                    format!(
                        "{n}: {} rel, max {}, missed {}",
                        p.releases.load(Ordering::Relaxed),
                        format_ns(p.max_ns.load(Ordering::Relaxed)),
                        p.missed.load(Ordering::Relaxed)
                    )
                })
                .collect();
            parts.join(" | ")
        };
        Some(match self.cfg.duration {
            Some(d) => LiveSpec::timed(d, figures),
            None => LiveSpec::open(figures),
        })
    }

    fn run(&mut self, ctx: &Ctx) -> Result<Outcome, Failure> {
        let mut plan = self
            .plan
            .take()
            .ok_or_else(|| Failure::system("a plan runs once"))?;
        if self.avoid_interference {
            self.avoid(&mut plan, ctx)?;
            // Interference the watch did not see is met during the run: automatic offsets may move.
            self.cfg.movable = self.auto_tasks.clone();
        }
        self.cfg.policy = ctx.rt.policy;
        self.cfg.priority = self.dispatcher_priority(ctx);
        if let Some(f) = self.priority_fallback(ctx) {
            ctx.note(format!("fallback: {f}"));
        }
        self.cfg.timer_slack_ns = ctx.rt.timer_slack_ns;
        if let Some(x) = &self.explain {
            // What no method could win on these CPUs, watched just before the plan runs.
            ctx.step("floor");
            let sched = punctual_rt::SchedParams {
                policy: ctx.rt.policy,
                priority: self.cfg.priority,
            };
            self.floor = punctual_bench::gaps::measure_floor(
                &self.cfg.cpus,
                punctual_bench::gaps::FLOOR_WATCH_NS,
                x.bound,
                sched,
                ctx.stop(),
            )
            .map_err(|e| Failure::system(format!("--explain: watching the floor: {e}")))?;
            ctx.step("");
        }
        // The trace's own thread keeps off shielded CPUs.
        let explain = self.explain.clone().map(|mut x| {
            if self.shield.is_some() || self.cfg.shielded {
                x.quiet = self.cfg.cpus.clone();
            }
            x
        });
        let (out, explained) = run_plan_explained(
            plan,
            &self.cfg,
            ctx.stop().clone(),
            Some(&self.slots),
            explain.as_ref(),
        )?;
        self.explained = explained;
        Ok(out)
    }

    fn report(&self, o: Outcome, ctx: &Ctx, doc: &mut ResultDoc) -> Result<Report, Failure> {
        ctx.runtime_fallbacks(doc, o.cpus.iter().filter_map(|c| c.fallback.as_ref()));
        if let Some(f) = self.priority_fallback(ctx) {
            doc.settings.fallbacks.push(f);
        }
        doc.settings.priority = Some(
            o.cpus
                .first()
                .map(|c| c.priority)
                .unwrap_or(self.cfg.priority),
        );
        let a = &self.admission;
        let s = &mut doc.settings.extra;
        s.insert("plan".into(), self.name.clone().into());
        s.insert("plan_file".into(), self.source.clone().into());
        s.insert(
            "cpus".into(),
            punctual_rt::format_cpu_list(&self.cfg.cpus).into(),
        );
        s.insert(
            "spin_margin".into(),
            match self.cfg.margin {
                MarginPolicy::Auto => "auto".into(),
                MarginPolicy::Fixed(m) => m.into(),
            },
        );
        if let Some(d) = self.cfg.duration {
            s.insert("duration_ns".into(), d.into());
        }
        s.insert("watchdog_ns".into(), self.cfg.watchdog.into());
        s.insert("shield".into(), self.shield.is_some().into());
        if let Some(av) = &self.avoidance {
            s.insert("interference".into(), av.to_json());
        }
        s.insert("admission".into(), serde_json::json!({"feasible": a.feasible(), "reasons": a.reasons(), "collisions": a.collision_count,
            "phased": a.phased.iter().map(|(n, o)| serde_json::json!({"task": n, "offset_ns": o})).collect::<Vec<_>>()}));
        report::fill_doc(doc, &o);
        if let Some(hwm) = report::peak_rss() {
            doc.extra.insert("peak_rss_bytes".into(), hwm.into());
        }
        for h in &o.held_by_others {
            ctx.note(format!(
                "CPU {} was held for {} by real-time work outside this run (the dispatcher ran {} of the {} sampled): releases in that span were late, and the watchdog left the run alone",
                h.cpu,
                punctual_time::format_ns(h.held_ns),
                punctual_time::format_ns(h.dispatcher_ns),
                punctual_time::format_ns(h.sampled_ns)
            ));
        }
        if let Some(t) = &o.trip {
            doc.status = Status::Watchdog;
            ctx.note(format!(
                "watchdog: {}. Demoted {} real-time thread(s) of punctual and {} of its children to SCHED_OTHER and stopped the run.",
                t.reason, t.demoted_threads, t.demoted_children
            ));
            if !o.stuck.is_empty() {
                ctx.note(format!(
                    "the dispatcher on CPU {} never returned; its figures are missing",
                    punctual_rt::format_cpu_list(&o.stuck)
                ));
            }
        }
        let mut out = Report::tables(vec![report::table(doc, &o, &self.name)]);
        if let Some(x) = &self.explained {
            let (names, counts): (Vec<(u32, String)>, Vec<u64>) = o
                .slots
                .iter()
                .enumerate()
                .map(|(i, s)| {
                    (
                        (i as u32, s.info.name.clone()),
                        s.stats.lateness.count() + s.stats.lateness.missed_periods(),
                    )
                })
                .unzip();
            record_floor(doc, &names, x.bound, self.floor);
            if let Some(t) = out.tables.first_mut() {
                t.note(floor_note(self.floor, &self.cfg.cpus, x.bound));
            }
            out = punctual_explain::render::into_report(out, doc, x, &names, &counts)?;
        }
        Ok(out)
    }
}

/// `"floor": {"10us": share}` (SPEC section 9: windows holding an interruption over the bound)
/// and `"floor_instants": {"10us": share}` (instants a release would be late at) on each named
/// series; the key is the bound, as `within` names its thresholds.
pub fn record_floor(
    doc: &mut ResultDoc,
    names: &[(u32, String)],
    bound: u64,
    floor: punctual_bench::gaps::Floor,
) {
    let key = punctual_explain::bound_key(bound);
    for s in doc
        .series
        .iter_mut()
        .filter(|s| names.iter().any(|(_, n)| *n == s.name))
    {
        if let Some(w) = floor.windows {
            s.extra
                .insert("floor".into(), serde_json::json!({ key.clone(): w }));
        }
        if let Some(i) = floor.instants {
            s.extra.insert(
                "floor_instants".into(),
                serde_json::json!({ key.clone(): i }),
            );
        }
        if let Some(p) = floor.stop {
            s.extra.insert("floor_stop".into(), p.to_json());
        }
    }
}

/// One line under the run's table: the floor as a share of releases that can be within the bound.
pub fn floor_note(floor: punctual_bench::gaps::Floor, cpus: &[usize], bound: u64) -> String {
    let pct = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{:.2} %", v * 100.0));
    let stop = floor.stop.map_or(String::new(), |p| {
        format!(" Besides the tick: {}.", p.describe())
    });
    format!(
        "floor on CPU {} (watched {} before the run): {} of instants let a release be within {} \
         (interruptions longer cover the rest); {} of 10 ms windows held one.{stop}",
        punctual_rt::format_cpu_list(cpus),
        format_ns(punctual_bench::gaps::FLOOR_WATCH_NS),
        pct(floor.instants.map(|i| 1.0 - i)),
        format_ns(bound),
        pct(floor.windows),
    )
}

/// `punctual shield`: real-time mode held for a duration, until Ctrl-C, or around a command run on
/// the shielded CPUs (whose exit status becomes punctual's).
pub struct HoldShield {
    pub plan: ShieldPlan,
    pub cpus: Vec<usize>,
    pub duration: Option<u64>,
    /// Run this on the shielded CPUs while the shield holds (argv, never a shell).
    pub command: Vec<String>,
}

/// How a shield ended: the command's exit status, if one ran to its end.
pub struct ShieldEnd {
    pub status: Option<i32>,
}

impl HoldShield {
    fn expired(&self, t0: std::time::Instant) -> bool {
        self.duration
            .is_some_and(|d| t0.elapsed().as_nanos() as u64 >= d)
    }

    fn run_command(&self, ctx: &Ctx) -> Result<Option<i32>, Failure> {
        let program = crate::preflight::resolve_command(&self.command).map_err(Failure::usage)?;
        let mut cmd = std::process::Command::new(program);
        cmd.args(&self.command[1..]);
        // Tells a `punctual run` inside that its CPUs hold no normal tasks (no spin budget needed).
        cmd.env(
            crate::shield::SHIELDED_ENV,
            punctual_rt::format_cpu_list(&self.cpus),
        );
        punctual_rt::child::ChildSetup::new(nix::sys::signal::Signal::SIGTERM)
            .cpus(&self.cpus)
            .install(&mut cmd);
        let mut child = cmd
            .spawn()
            .map_err(|e| Failure::usage(format!("starting {}: {e}", self.command[0])))?;
        let t0 = std::time::Instant::now();
        loop {
            if let Some(st) = child.try_wait()? {
                return Ok(Some(st.code().unwrap_or(1)));
            }
            if ctx.stop().load(Ordering::Relaxed) || self.expired(t0) {
                let _ = child.kill();
                let _ = child.wait();
                return Ok(None);
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

// Here rather than in shield.rs: the shield's own module has no session (Ctx) in it.
impl Shield {
    /// [`Shield::apply`], then what it did in notes, the same for every command that shields:
    /// an ancestor's shield already holding the CPUs (then nothing else), shields of dead runs
    /// restored on the way, `summary`'s words for the changes, and why any was refused.
    pub fn apply_noted(
        plan: &ShieldPlan,
        ctx: &Ctx,
        summary: impl FnOnce(&Shield) -> String,
    ) -> Result<Shield, Failure> {
        let held = Shield::apply(plan)?;
        if let Some(pid) = held.nested_in {
            ctx.note(format!(
                "CPU {} is already shielded by punctual (pid {pid}), an ancestor of this process: its shield holds",
                punctual_rt::format_cpu_list(&plan.cpus)
            ));
            return Ok(held);
        }
        for r in &held.recovered {
            ctx.note(format!(
                "a shield left by a dead punctual run: {}",
                crate::shield::describe_restore(r)
            ));
        }
        ctx.note(summary(&held));
        if let Some(why) = crate::shield::describe_refused(&held.refused) {
            ctx.note(why);
        }
        Ok(held)
    }
}

impl Measurement for HoldShield {
    type Outcome = ShieldEnd;

    fn label(&self) -> String {
        format!("shield CPU {}", punctual_rt::format_cpu_list(&self.cpus))
    }
    fn apply(&mut self, ctx: &Ctx) -> Result<Option<Box<dyn Applied>>, Failure> {
        let count = |task: bool| {
            self.plan
                .moves
                .iter()
                .filter(|m| matches!(m, crate::shield::Move::Task { .. }) == task)
                .count()
        };
        let held = Shield::apply_noted(&self.plan, ctx, |held| {
            format!(
                "shielded CPU {}: {} change(s) applied ({} task(s), {} other change(s) planned), {} refused, {} task(s) cannot move; Ctrl-C restores",
                punctual_rt::format_cpu_list(&self.cpus),
                held.applied,
                count(true),
                count(false),
                held.refused.len(),
                self.plan.skipped.len()
            )
        })?;
        Ok(Some(Box::new(held)))
    }
    fn live(&self) -> Option<LiveSpec> {
        let figures = String::new;
        Some(match self.duration {
            Some(d) => LiveSpec::timed(d, figures),
            None => LiveSpec::open(figures),
        })
    }
    fn run(&mut self, ctx: &Ctx) -> Result<ShieldEnd, Failure> {
        let status = if self.command.is_empty() {
            let t0 = std::time::Instant::now();
            while !ctx.stop().load(Ordering::Relaxed) && !self.expired(t0) {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            None
        } else {
            self.run_command(ctx)?
        };
        Ok(ShieldEnd { status })
    }
    fn report(&self, end: ShieldEnd, _ctx: &Ctx, _doc: &mut ResultDoc) -> Result<Report, Failure> {
        Ok(Report {
            exit: end
                .status
                .map(|c| punctual_measure::Exit::Child(c.clamp(0, 255) as u8)),
            ..Report::default()
        })
    }
}
