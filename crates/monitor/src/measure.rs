//! `punctual monitor` as a measurement of the lifecycle (`punctual_session::drive`): the
//! session holds the real-time settings (policy, mlockall, cpu_dma_latency) and restores them;
//! `run` serves `/metrics`, runs the latency engine on the measured CPUs until SIGINT/SIGTERM or
//! `-D`, restarts it with new settings on SIGHUP, and stores a window every `--history-every`;
//! `report` gives the whole run's document and table, like `latency`.

use crate::attribution::{start_trace, Attributor, Explain};
use crate::config::{Settings, Source};
use crate::history::{History, StealSource, WINDOW_TAG};
use crate::http::{Limits, Placement, Server, ServerStats};
use crate::metrics::{Board, HostLabels, Ops};
use crate::{MetricsHandler, MonitorError};
use punctual_latency::{Config, Mode, Outcome, Progress, Stop, ThreadResult, MAX_RUN};
use punctual_measure::{Ctx, LiveSpec, Measurement, Report};
use punctual_result::{Failure, ResultDoc};
use punctual_rt::RtWant;
use punctual_store::Store;
use punctual_time::{format_ns, Clock, ClockId, MarginPolicy, SystemClock};
use punctual_trace::capture::Capture;
use std::collections::BTreeMap;
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::sync::Arc;
use std::thread::JoinHandle;

/// How often the housekeeping loop looks at the stop flag, SIGHUP and the clock.
const TICK_NS: u64 = 200_000_000;

/// The results store windows go to, and the tags they carry.
pub struct HistoryStore {
    pub store: Store,
    pub tags: Vec<(String, String)>,
}

pub struct Monitor {
    pub source: Source,
    /// A release later than this is late.
    pub late_bound: u64,
    /// `-D`: stop after this long (`None`: until stopped).
    pub duration: Option<u64>,
    pub want: RtWant,
    pub limits: Limits,
    /// Whether late releases are explained from a kernel trace (`--explain`).
    pub explain: Explain,
    /// What made releases late, by name, over the whole run.
    offenders: crate::attribution::Offenders,
    listener: Option<TcpListener>,
    store: Option<HistoryStore>,
    board: Arc<Board>,
    ops: Arc<Ops>,
    http: Arc<ServerStats>,
}

impl Monitor {
    /// A monitor serving on `listener` (bound before anything is measured), storing windows in
    /// `store` when given.
    pub fn new(
        source: Source,
        late_bound: u64,
        duration: Option<u64>,
        want: RtWant,
        listener: TcpListener,
        store: Option<HistoryStore>,
    ) -> Monitor {
        Monitor {
            source,
            late_bound,
            duration,
            want,
            limits: Limits::default(),
            explain: Explain::default(),
            offenders: Vec::new(),
            listener: Some(listener),
            store,
            board: Arc::new(Board::new(late_bound)),
            ops: Arc::new(Ops::default()),
            http: Arc::new(ServerStats::default()),
        }
    }
}

/// What a monitor run measured, per CPU over the whole run (every configuration it ran).
pub struct MonitorOutcome {
    /// The engine's results, merged over configurations: one per CPU ever measured.
    pub outcome: Outcome,
    /// The settings in force at the end.
    pub settings: Settings,
    pub served_at: std::net::SocketAddr,
    pub windows_stored: u64,
    pub reloads: u64,
    pub answered: [u64; 3],
}

impl Measurement for Monitor {
    type Outcome = MonitorOutcome;

    fn label(&self) -> String {
        "monitor".into()
    }
    fn wants(&self) -> Option<RtWant> {
        Some(self.want)
    }
    fn live(&self) -> Option<LiveSpec> {
        let board = self.board.clone();
        let figures = move || {
            let mut n = 0u64;
            let mut max = 0u64;
            let mut c = board.take_counts();
            for (_, h) in board.active() {
                h.snapshot(&mut c);
                n += c.count();
                max = max.max(h.max());
            }
            board.give_counts(c);
            format!("{n} samples, max {}", format_ns(max))
        };
        Some(match self.duration {
            Some(d) => LiveSpec::timed(d, figures),
            None => LiveSpec::open(figures),
        })
    }

    fn run(&mut self, ctx: &Ctx) -> Result<MonitorOutcome, Failure> {
        // Caught from the start: SIGHUP's default would end the process.
        let hangup = Hangup::register();
        let mut settings = self.source.read()?;
        let listener = self
            .listener
            .take()
            .ok_or_else(|| Failure::system("a monitor runs once"))?;
        let placement = Arc::new(Placement::avoiding(&settings.cpus));
        // Room for a full queue of connections besides everything else.
        crate::http::raise_fd_limit(self.limits.queue as u64 + 1024);
        let labels = HostLabels::of(&ctx.host());
        let registry = crate::metrics::registry(
            self.board.clone(),
            self.ops.clone(),
            self.http.clone(),
            labels,
        );
        // Decided before the first scrape can be answered: the late releases' series never
        // change meaning under a scraper.
        let mut first_trace = self.open_trace(ctx, &settings, true)?;
        // The measured CPUs' series exist from the first answer (zeros until the first release):
        // a scrape right after start found no `_count` under load (the storm test, once).
        let _ = self.board.measure(&settings.cpus, settings.interval);
        let server = Server::start(
            listener,
            Arc::new(MetricsHandler { registry }),
            placement.clone(),
            self.limits,
            self.http.clone(),
        )
        .map_err(MonitorError::Server)?;
        let served_at = server.addr();
        ctx.note(format!(
            "serving http://{served_at}/metrics; measuring CPU {} every {}",
            punctual_rt::format_cpu_list(&settings.cpus),
            format_ns(settings.interval)
        ));
        // The housekeeping (this thread) keeps off the measured CPUs too.
        let _pin = punctual_rt::affinity::AffinityGuard::pin(&placement.cpus()).ok();
        if self.store.is_none() && settings.history_every.is_some() {
            ctx.note("no results store (--no-store): windows are not kept");
        }
        let clock = SystemClock::new(ClockId::Monotonic);
        let steal: &StealSource = &punctual_rt::host::steal_ns;
        let mut keeper = Housekeeper::new(
            &clock,
            self.board.clone(),
            self.ops.clone(),
            self.store.take(),
            window_template(ctx),
            steal,
        );
        let deadline = self.duration.map(|d| clock.now().saturating_add(d));
        let mut totals: BTreeMap<usize, ThreadResult> = BTreeMap::new();
        let mut first_release = 0;
        loop {
            let hists = self.board.measure(&settings.cpus, settings.interval);
            placement.avoid(&settings.cpus);
            keeper.follow(&settings);
            let attributor = if self.board.attributing() {
                let trace = match first_trace.take() {
                    Some(t) => Some(t),
                    None => self.open_trace(ctx, &settings, false)?,
                };
                Some(Attributor::start(
                    self.board.clone(),
                    &settings.cpus,
                    trace,
                    placement.cpus(),
                ))
            } else {
                None
            };
            let progress: Arc<[Progress]> = hists
                .into_iter()
                .zip(&settings.cpus)
                .map(|(h, &cpu)| Progress {
                    late: attributor
                        .is_some()
                        .then(|| self.board.late_counts(cpu).feed.clone()),
                    ..Progress::with_live(h)
                })
                .collect();
            let cfg = engine_config(&settings, ctx);
            let gen_stop = Arc::new(AtomicBool::new(false));
            let engine = spawn_engine(cfg, gen_stop.clone(), progress, placement.cpus());
            let next = keeper.watch(ctx, &hangup, &self.source, deadline, &engine, &settings);
            gen_stop.store(true, Ordering::SeqCst);
            let outcome = engine
                .join()
                .map_err(|_| Failure::system("the measuring engine panicked"))??;
            if let Some((failed, offenders)) = attributor.map(Attributor::finish) {
                if let Some(why) = failed {
                    ctx.note(format!(
                        "the kernel trace stopped ({why}): late releases since count as unexplained"
                    ));
                }
                crate::attribution::add_offenders(&mut self.offenders, &offenders);
            }
            if first_release == 0 {
                first_release = outcome.first_release;
            }
            merge_threads(&mut totals, outcome.threads);
            match next {
                Next::Stop => break,
                Next::Reload(new) => {
                    ctx.note(format!(
                        "SIGHUP: now CPU {} every {}, a window every {}",
                        punctual_rt::format_cpu_list(&new.cpus),
                        format_ns(new.interval),
                        new.history_every
                            .map(format_ns)
                            .unwrap_or_else(|| "never".into())
                    ));
                    self.ops.reloads_ok.fetch_add(1, Ordering::Relaxed);
                    settings = new;
                }
            }
        }
        let windows_stored = keeper.finish(&settings, ctx);
        server.stop();
        let threads = totals
            .into_values()
            .enumerate()
            .map(|(i, mut t)| {
                t.index = i;
                t
            })
            .collect();
        Ok(MonitorOutcome {
            outcome: Outcome {
                threads,
                samples_written: 0,
                first_release,
            },
            settings,
            served_at,
            windows_stored,
            reloads: self.ops.reloads_ok.load(Ordering::Relaxed),
            answered: self
                .http
                .answered
                .each_ref()
                .map(|a| a.load(Ordering::Relaxed)),
        })
    }

    fn report(&self, o: MonitorOutcome, ctx: &Ctx, doc: &mut ResultDoc) -> Result<Report, Failure> {
        ctx.runtime_fallbacks(
            doc,
            o.outcome.threads.iter().filter_map(|t| t.fallback.as_ref()),
        );
        // The run's length as it went, not the year an open-ended engine was given.
        let ran = o
            .outcome
            .threads
            .iter()
            .map(|t| t.wall_ns)
            .max()
            .unwrap_or(0);
        let cfg = Config {
            threads: o.outcome.threads.iter().map(|t| t.cpu).collect(),
            interval: o.settings.interval,
            stop: Stop::Duration(ran.max(1)),
            clock: ClockId::Monotonic,
            mode: Mode::Abs,
            margin: MarginPolicy::Auto,
            policy: ctx.rt.policy,
            priority: ctx.rt.priority,
            timer_slack_ns: ctx.rt.timer_slack_ns,
        };
        punctual_latency::report::fill_latency_doc(doc, &cfg, &o.outcome, false);
        let s = &mut doc.settings.extra;
        s.insert("late_bound_ns".into(), self.late_bound.into());
        s.insert(
            "monitor".into(),
            serde_json::json!({
                "listen": o.served_at.to_string(),
                "windows_stored": o.windows_stored,
                "reloads": o.reloads,
                "http_answers": {"2xx": o.answered[0], "4xx": o.answered[1], "5xx": o.answered[2]},
            }),
        );
        if self.board.attributing() {
            late_causes(doc, &self.board, &self.offenders, &o.outcome);
        }
        let mut table = punctual_latency::report::latency_table(doc, &cfg, &o.outcome);
        table.note(format!(
            "http://{}/metrics: {} answered, {} refused (4xx), {} failed (5xx); {} windows stored",
            o.served_at, o.answered[0], o.answered[1], o.answered[2], o.windows_stored
        ));
        if self.board.attributing() {
            table.note(late_note(&self.board, &self.offenders, &o.outcome));
        }
        Ok(Report::tables(vec![table]))
    }
}

/// One line: the run's late releases by cause (all CPUs) and what made most of them late.
fn late_note(board: &Board, offenders: &crate::attribution::Offenders, o: &Outcome) -> String {
    let mut sum = [0u64; crate::metrics::CAUSES.len()];
    for cpu in o.threads.iter().filter_map(|t| t.cpu) {
        for (a, b) in sum.iter_mut().zip(board.late_counts(cpu).read().0) {
            *a += b;
        }
    }
    let causes: Vec<String> = crate::metrics::CAUSES
        .iter()
        .zip(sum)
        .filter(|(_, n)| *n > 0)
        .map(|(c, n)| format!("{c} {n}"))
        .collect();
    let top: Vec<String> = offenders
        .iter()
        .take(3)
        .map(|(c, name, k)| format!("{name} ({} {k})", c.name()))
        .collect();
    format!(
        "late releases (> {}) by cause: {}{}",
        format_ns(board.late_bound_ns),
        if causes.is_empty() {
            "none".into()
        } else {
            causes.join(", ")
        },
        if top.is_empty() {
            String::new()
        } else {
            format!("; most often {}", top.join(", "))
        }
    )
}

impl Monitor {
    /// Start explaining the late releases of `settings`' CPUs, as `--explain` asks. The first
    /// configuration decides for the process (a counter must not change meaning): with a trace
    /// then, later configurations without one count their late releases `unexplained`.
    /// Open the kernel trace of `settings`' CPUs, as `--explain` asks. The first one (`first`,
    /// before the server answers any scrape) decides for the process (a counter must not change
    /// meaning): with a trace then, later configurations without one count their late releases
    /// `unexplained`.
    fn open_trace(
        &self,
        ctx: &Ctx,
        settings: &Settings,
        first: bool,
    ) -> Result<Option<Capture>, Failure> {
        if self.explain == Explain::Off || (!first && !self.board.attributing()) {
            return Ok(None);
        }
        let cpus = punctual_rt::format_cpu_list(&settings.cpus);
        match start_trace(&settings.cpus) {
            Ok(t) => {
                if first {
                    self.board.set_attributing(true);
                    ctx.note(format!(
                        "explaining late releases from a kernel trace of CPU {cpus} (--explain off to stop)"
                    ));
                }
                Ok(Some(t))
            }
            Err(e) if first && self.explain == Explain::On => {
                Err(punctual_explain::ExplainError::Trace(e).into())
            }
            Err(e) if first => {
                ctx.note(format!(
                    "late releases are not attributed to causes (no kernel trace: {e}); \
                     each counts as unexplained (--explain off says so quietly)"
                ));
                Ok(None)
            }
            Err(e) => {
                ctx.note(format!(
                    "no kernel trace of CPU {cpus} ({e}): its late releases count as unexplained"
                ));
                Ok(None)
            }
        }
    }
}

/// The whole run's late releases by cause per CPU and its offenders, in the document
/// (`settings.monitor.late_causes`, `.late_offenders`).
fn late_causes(
    doc: &mut ResultDoc,
    board: &Board,
    offenders: &crate::attribution::Offenders,
    outcome: &Outcome,
) {
    let per_cpu: serde_json::Map<String, serde_json::Value> = outcome
        .threads
        .iter()
        .filter_map(|t| t.cpu)
        .map(|cpu| {
            let (counts, pending) = board.late_counts(cpu).read();
            let mut m: serde_json::Map<String, serde_json::Value> = crate::metrics::CAUSES
                .iter()
                .zip(counts)
                .map(|(c, n)| (c.to_string(), n.into()))
                .collect();
            m.insert("pending".into(), pending.into());
            (cpu.to_string(), m.into())
        })
        .collect();
    let top: Vec<_> = offenders
        .iter()
        .take(10)
        .map(|(c, name, k)| serde_json::json!({"cause": c.name(), "name": name, "count": k}))
        .collect();
    if let Some(m) = doc
        .settings
        .extra
        .get_mut("monitor")
        .and_then(|m| m.as_object_mut())
    {
        m.insert("late_causes".into(), per_cpu.into());
        m.insert("late_offenders".into(), top.into());
    }
}

/// The engine's configuration for `settings` in the class the session holds.
fn engine_config(settings: &Settings, ctx: &Ctx) -> Config {
    Config {
        threads: settings.cpus.iter().map(|&c| Some(c)).collect(),
        interval: settings.interval,
        stop: Stop::Duration(MAX_RUN),
        clock: ClockId::Monotonic,
        mode: Mode::Abs,
        margin: MarginPolicy::Auto,
        policy: ctx.rt.policy,
        priority: ctx.rt.priority,
        timer_slack_ns: ctx.rt.timer_slack_ns,
    }
}

type Engine = JoinHandle<Result<Outcome, punctual_latency::LatencyError>>;

/// The latency engine on its own thread (kept, like its helpers, off the measured CPUs; the
/// measuring threads pin themselves).
fn spawn_engine(
    cfg: Config,
    stop: Arc<AtomicBool>,
    progress: Arc<[Progress]>,
    housekeeping: Vec<usize>,
) -> Engine {
    std::thread::Builder::new()
        .name("punctual-engine".into())
        .spawn(move || {
            let _ = punctual_rt::affinity::set(0, &housekeeping);
            punctual_latency::run(&cfg, &stop, None, Some(&progress))
        })
        .expect("spawning the engine thread")
}

/// One CPU's results over several configurations, added up.
fn merge_threads(totals: &mut BTreeMap<usize, ThreadResult>, threads: Vec<ThreadResult>) {
    for t in threads {
        let cpu = t.cpu.unwrap_or(usize::MAX);
        match totals.get_mut(&cpu) {
            Some(sum) => {
                let _ = sum.recorder.merge(&t.recorder);
                sum.cpu_ns += t.cpu_ns;
                sum.wall_ns += t.wall_ns;
                sum.fallback = sum.fallback.take().or(t.fallback);
            }
            None => {
                totals.insert(cpu, t);
            }
        }
    }
}

/// The document every window starts from: the monitor's command, the host, the held settings.
fn window_template(ctx: &Ctx) -> ResultDoc {
    let mut doc = ResultDoc::new(ctx.command().to_vec(), ctx.host(), ctx.now());
    let s = &mut doc.settings;
    s.policy = Some(ctx.rt.policy.name().into());
    s.priority = Some(ctx.rt.priority);
    s.mlock = Some(ctx.rt.mlock);
    s.dma_latency_us = ctx.rt.dma_latency_us;
    s.fallbacks = ctx.rt.fallbacks.clone();
    doc
}

/// SIGHUP, caught for as long as the monitor runs (its default would end the process).
pub struct Hangup {
    flag: Arc<AtomicBool>,
    id: Option<signal_hook::SigId>,
}

impl Hangup {
    pub fn register() -> Hangup {
        let flag = Arc::new(AtomicBool::new(false));
        let id = signal_hook::flag::register(signal_hook::consts::SIGHUP, flag.clone()).ok();
        Hangup { flag, id }
    }

    /// Whether a SIGHUP came since the last call.
    pub fn take(&self) -> bool {
        self.flag.swap(false, Ordering::SeqCst)
    }
}

impl Drop for Hangup {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            signal_hook::low_level::unregister(id);
        }
    }
}

/// What ends a configuration.
pub enum Next {
    Stop,
    Reload(Settings),
}

/// The periodic work beside the measurement, on an injected clock: windows into the store,
/// floors, SIGHUP. Nothing it does touches a measuring thread.
pub struct Housekeeper<'a> {
    clock: &'a dyn Clock,
    board: Arc<Board>,
    ops: Arc<Ops>,
    history: Option<(History, Writer)>,
    steal: &'a StealSource,
    next_window: Option<u64>,
    next_floor: Option<u64>,
}

impl<'a> Housekeeper<'a> {
    pub fn new(
        clock: &'a dyn Clock,
        board: Arc<Board>,
        ops: Arc<Ops>,
        store: Option<HistoryStore>,
        template: ResultDoc,
        steal: &'a StealSource,
    ) -> Housekeeper<'a> {
        let now = clock.now();
        let unix = punctual_time::clock::read_clock(libc::CLOCK_REALTIME) as i128
            - punctual_time::clock::read_clock(libc::CLOCK_MONOTONIC) as i128
            + now as i128;
        let history = store.map(|s| {
            (
                History::new(template, now, unix, steal),
                Writer::start(s, ops.clone()),
            )
        });
        Housekeeper {
            clock,
            board,
            ops,
            history,
            steal,
            next_window: None,
            next_floor: None,
        }
    }

    /// Take up `settings`: follow its CPUs, schedule its windows and floors from now.
    pub fn follow(&mut self, settings: &Settings) {
        let now = self.clock.now();
        if let Some((h, _)) = &mut self.history {
            h.follow(&self.board.active());
        }
        self.next_window = match (settings.history_every, self.history.is_some()) {
            (Some(every), true) => Some(self.next_window.unwrap_or(now.saturating_add(every))),
            _ => None,
        };
        self.next_floor = settings.floor_every.map(|e| now.saturating_add(e));
    }

    /// Do what is due at the clock's time; `settings` are those in force.
    pub fn tick(&mut self, settings: &Settings, stop: &AtomicBool) {
        let now = self.clock.now();
        if let (Some(at), Some(every)) = (self.next_window, settings.history_every) {
            if now >= at {
                self.close_window(now, settings);
                // The next one a whole window later, never a burst of short ones after a pause.
                self.next_window = Some(at.saturating_add(every).max(now + 1));
            }
        }
        if let (Some(at), Some(every)) = (self.next_floor, settings.floor_every) {
            if now >= at {
                crate::floor::measure_floors(settings, self.board.late_bound_ns, &self.ops, stop);
                self.next_floor = Some(self.clock.now().saturating_add(every));
            }
        }
    }

    fn close_window(&mut self, now: u64, settings: &Settings) {
        if let Some((h, w)) = &mut self.history {
            if let Some(doc) = h.close(now, &settings.cpus, settings.interval, self.steal) {
                w.send(doc);
            }
        }
    }

    /// Run one configuration's housekeeping until it ends: stop (signal, `-D`, a failed engine)
    /// or a SIGHUP with new settings.
    fn watch(
        &mut self,
        ctx: &Ctx,
        hangup: &Hangup,
        source: &Source,
        deadline: Option<u64>,
        engine: &Engine,
        settings: &Settings,
    ) -> Next {
        loop {
            let now = self.clock.now();
            let mut wake = now.saturating_add(TICK_NS);
            for t in [self.next_window, self.next_floor, deadline]
                .into_iter()
                .flatten()
            {
                wake = wake.min(t.max(now));
            }
            self.clock.sleep_until(wake);
            if ctx.stop().load(Ordering::Relaxed) || engine.is_finished() {
                return Next::Stop;
            }
            if deadline.is_some_and(|d| self.clock.now() >= d) {
                return Next::Stop;
            }
            if hangup.take() {
                match source.read() {
                    Ok(new) if new != *settings => return Next::Reload(new),
                    Ok(_) => {
                        self.ops.reloads_ok.fetch_add(1, Ordering::Relaxed);
                        ctx.note("SIGHUP: the configuration is unchanged");
                    }
                    Err(e) => {
                        self.ops.reloads_failed.fetch_add(1, Ordering::Relaxed);
                        ctx.note(format!("SIGHUP: {e}; keeping the running configuration"));
                    }
                }
            }
            self.tick(settings, ctx.stop());
        }
    }

    /// Store the last (partial) window and wait for the store; how many windows were stored.
    pub fn finish(mut self, settings: &Settings, ctx: &Ctx) -> u64 {
        let now = self.clock.now();
        if self.next_window.is_some() {
            self.close_window(now, settings);
        }
        let failed_before = self.ops.windows_failed.load(Ordering::Relaxed);
        if let Some((_, w)) = self.history.take() {
            w.finish();
        }
        let failed = self.ops.windows_failed.load(Ordering::Relaxed);
        if failed > 0 {
            ctx.note(format!(
                "{failed} windows could not be stored ({} at the end)",
                failed - failed_before
            ));
        }
        self.ops.windows_stored.load(Ordering::Relaxed)
    }
}

/// Writes windows to the store on a thread of its own, so a slow database delays nothing; at
/// most a few windows wait, beyond that a window is counted as failed rather than queued.
pub struct Writer {
    tx: Option<SyncSender<ResultDoc>>,
    thread: Option<JoinHandle<()>>,
    ops: Arc<Ops>,
}

impl Writer {
    pub fn start(store: HistoryStore, ops: Arc<Ops>) -> Writer {
        let (tx, rx) = sync_channel::<ResultDoc>(4);
        let ops2 = ops.clone();
        let thread = std::thread::Builder::new()
            .name("punctual-history".into())
            .spawn(move || {
                let mut tags = store.tags.clone();
                tags.push((WINDOW_TAG.0.into(), WINDOW_TAG.1.into()));
                for doc in rx {
                    let table = punctual_result::table::series_table(&doc).render();
                    let stored = store
                        .store
                        .put_with_tables(&doc, &[], &tags, Some(&table))
                        .is_ok();
                    // Counted once the window is freed: a reader that waits for the count sees
                    // the heap without it (the memory test read it with a window still held, 1
                    // run in 4).
                    drop((table, doc));
                    match stored {
                        true => ops2.windows_stored.fetch_add(1, Ordering::Relaxed),
                        false => ops2.windows_failed.fetch_add(1, Ordering::Relaxed),
                    };
                }
            })
            .expect("spawning the history writer");
        Writer {
            tx: Some(tx),
            thread: Some(thread),
            ops,
        }
    }

    pub fn send(&self, doc: ResultDoc) {
        if let Some(tx) = &self.tx {
            if let Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) = tx.try_send(doc) {
                self.ops.windows_failed.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Wait until every window sent is written.
    pub fn finish(mut self) {
        self.tx.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
