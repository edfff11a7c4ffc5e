//! Scenario files: a run (or a sweep over HZ and quanta) and its tasks in TOML. Every error names
//! the file, line and column, and what to write instead. See `examples/sim/` for one file per seed
//! figure.
//!
//! ```toml
//! [sim]
//! hz = [100, 1000]          # one value or a list (a sweep)
//! quantum = "50ms"          # time, or ticks: "6ticks"; one or a list
//! policy = "linux24"        # rr, fifo, linux24, fair, plan
//! timer = "periodic"        # periodic, oneshot, soft, firm
//! duration = "60s"
//! workload = "cpu:1"        # optional: command-line labels, added to the tasks below
//! cache_kib = 256           # per-CPU cache for tasks with a footprint (256)
//! refill_mb_s = 2512        # how fast an evicted working set comes back (2512)
//!
//! [[task]]
//! name = "X"
//! behaviour = "server"      # blk, pct, cont, cpu, periodic, typist, player, decoder, server, game
//! work = ["8ms", "9ms"]     # a duration or a [min, max] range
//! footprint_kib = 128       # any behaviour: working set refilled after other tasks ran (0)
//!
//! [[task]]
//! behaviour = "typist"
//! server = "X"
//! round_trips = 2           # typist, player: requests to the server before each hand-off (0)
//! request_work = ["20us", "60us"]  # the server's work per request (20-60 us)
//! reply_work = ["10us", "40us"]    # the client's work per reply (10-40 us)
//! ```

use crate::behaviour::{defaults, parse_fps, Behaviour, Poll, ETSION_DELAY};
use crate::config::{
    Class, Costs, Mechanism, Ns, Policy, Quantum, RoundTrips, RunConfig, TaskSpec,
};
use crate::workload::parse_workload;
use crate::workload::X_ROUND_TRIPS;
use crate::SimError;
use serde::Deserialize;
use std::ops::Range;
use toml::Spanned;

/// The largest cache or footprint a scenario may give: 1 TiB, in KiB.
const MAX_KIB: i64 = 1 << 30;

#[derive(Deserialize, Debug)]
#[serde(untagged)]
enum OneOrMany<T> {
    One(T),
    Many(Vec<T>),
}

impl<T: Clone> OneOrMany<T> {
    fn to_vec(&self) -> Vec<T> {
        match self {
            OneOrMany::One(v) => vec![v.clone()],
            OneOrMany::Many(v) => v.clone(),
        }
    }
}

#[derive(Deserialize, Debug)]
#[serde(untagged)]
enum DurOrRange {
    One(String),
    Range(Vec<String>),
}

#[derive(Deserialize, Debug)]
#[serde(untagged)]
enum Fps {
    Int(u64),
    Float(f64),
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct File {
    sim: Option<SimSection>,
    #[serde(default)]
    task: Vec<Spanned<TaskSection>>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct SimSection {
    name: Option<Spanned<String>>,
    description: Option<String>,
    hz: Option<Spanned<OneOrMany<i64>>>,
    quantum: Option<Spanned<OneOrMany<String>>>,
    policy: Option<Spanned<String>>,
    timer: Option<Spanned<String>>,
    cpus: Option<Spanned<i64>>,
    duration: Option<Spanned<String>>,
    seed: Option<Spanned<i64>>,
    irq_cost: Option<Spanned<String>>,
    irq_indirect: Option<Spanned<String>>,
    switch_cost: Option<Spanned<String>>,
    entry_interval: Option<Spanned<String>>,
    overshoot: Option<Spanned<String>>,
    workload: Option<Spanned<String>>,
    cache_kib: Option<Spanned<i64>>,
    refill_mb_s: Option<Spanned<i64>>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct TaskSection {
    name: Option<Spanned<String>>,
    behaviour: Spanned<String>,
    count: Option<Spanned<i64>>,
    policy: Option<Spanned<String>>,
    priority: Option<Spanned<i64>>,
    nice: Option<Spanned<i64>>,
    cpu: Option<Spanned<i64>>,
    footprint_kib: Option<Spanned<i64>>,
    round_trips: Option<Spanned<i64>>,
    request_work: Option<Spanned<DurOrRange>>,
    reply_work: Option<Spanned<DurOrRange>>,
    delay: Option<Spanned<DurOrRange>>,
    handler: Option<Spanned<String>>,
    pct: Option<Spanned<i64>>,
    period: Option<Spanned<String>>,
    wcet: Option<Spanned<String>>,
    offset: Option<Spanned<String>>,
    interval: Option<Spanned<String>>,
    burst: Option<Spanned<DurOrRange>>,
    server: Option<Spanned<String>>,
    fps: Option<Spanned<Fps>>,
    poll: Option<Spanned<String>>,
    work: Option<Spanned<DurOrRange>>,
    frames: Option<Spanned<i64>>,
    start: Option<Spanned<String>>,
    decoder: Option<Spanned<String>>,
    buffer: Option<Spanned<i64>>,
    frame: Option<Spanned<DurOrRange>>,
    gpu: Option<Spanned<DurOrRange>>,
}

/// A parsed scenario: the base configuration and the sweep lists.
#[derive(Clone, Debug, PartialEq)]
pub struct Scenario {
    pub name: Option<String>,
    pub description: Option<String>,
    pub base: RunConfig,
    pub hz: Vec<u32>,
    pub quanta: Vec<Quantum>,
}

impl Scenario {
    /// One configuration per HZ and quantum, HZ-major.
    pub fn runs(&self) -> Vec<RunConfig> {
        let mut out = Vec::new();
        for &hz in &self.hz {
            for &q in &self.quanta {
                out.push(RunConfig {
                    hz,
                    quantum: q,
                    ..self.base.clone()
                });
            }
        }
        out
    }
}

struct Ctx<'a> {
    file: &'a str,
    text: &'a str,
}

impl Ctx<'_> {
    fn at(&self, span: Range<usize>, message: impl Into<String>) -> SimError {
        let offset = span.start.min(self.text.len());
        let before = &self.text[..offset];
        let line = before.matches('\n').count() + 1;
        let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        SimError::Scenario {
            file: self.file.to_string(),
            line,
            column,
            message: message.into(),
        }
    }

    fn dur(&self, s: &Spanned<String>, key: &str) -> Result<Ns, SimError> {
        punctual_time::parse_duration_ns(s.get_ref())
            .map_err(|e| self.at(s.span(), format!("{key}: {e}")))
    }

    fn range(&self, s: &Spanned<DurOrRange>, key: &str) -> Result<(Ns, Ns), SimError> {
        let parse = |x: &str| {
            punctual_time::parse_duration_ns(x)
                .map_err(|e| self.at(s.span(), format!("{key}: {e}")))
        };
        match s.get_ref() {
            DurOrRange::One(v) => {
                let d = parse(v)?;
                Ok((d, d))
            }
            DurOrRange::Range(v) if v.len() == 2 => {
                let (lo, hi) = (parse(&v[0])?, parse(&v[1])?);
                if lo > hi {
                    return Err(self.at(
                        s.span(),
                        format!("{key}: the range [{}, {}] has min above max", v[0], v[1]),
                    ));
                }
                Ok((lo, hi))
            }
            DurOrRange::Range(_) => Err(self.at(
                s.span(),
                format!("{key}: give a duration or a [min, max] pair, e.g. [\"1ms\", \"1000ms\"]"),
            )),
        }
    }

    /// A duration key, or `default` when it is left out.
    fn dur_or(&self, s: &Option<Spanned<String>>, key: &str, default: Ns) -> Result<Ns, SimError> {
        s.as_ref().map_or(Ok(default), |v| self.dur(v, key))
    }

    /// A duration-or-range key, or `default` when it is left out.
    fn range_or(
        &self,
        s: &Option<Spanned<DurOrRange>>,
        key: &str,
        default: (Ns, Ns),
    ) -> Result<(Ns, Ns), SimError> {
        s.as_ref().map_or(Ok(default), |v| self.range(v, key))
    }

    fn int(&self, s: &Spanned<i64>, key: &str, lo: i64, hi: i64) -> Result<i64, SimError> {
        let v = *s.get_ref();
        if v < lo || v > hi {
            return Err(self.at(
                s.span(),
                format!("{key} = {v} is out of range ({lo} to {hi})"),
            ));
        }
        Ok(v)
    }
}

/// Parse a scenario from its text. `file` names it in errors.
pub fn parse(file: &str, text: &str) -> Result<Scenario, SimError> {
    let cx = Ctx { file, text };
    let raw: File = toml::from_str(text).map_err(|e| {
        let span = e.span().unwrap_or(0..0);
        cx.at(span, e.message().to_string())
    })?;
    let mut base = RunConfig::default();
    let mut hz = vec![base.hz];
    let mut quanta = vec![base.quantum];
    let mut name = None;
    let mut description = None;
    let mut costs = Costs::default();
    if let Some(sim) = &raw.sim {
        if let Some(n) = &sim.name {
            punctual_time::text::check_name("scenario", n.get_ref())
                .map_err(|e| cx.at(n.span(), e))?;
            name = Some(n.get_ref().clone());
        }
        description = sim.description.clone();
        if let Some(h) = &sim.hz {
            hz = Vec::new();
            for v in h.get_ref().to_vec() {
                if v <= 0 || v > crate::config::MAX_HZ as i64 {
                    return Err(cx.at(
                        h.span(),
                        format!(
                            "hz = {v} is out of range; give 1 to {} (1 MHz)",
                            crate::config::MAX_HZ
                        ),
                    ));
                }
                hz.push(v as u32);
            }
            if hz.is_empty() {
                return Err(cx.at(h.span(), "hz: give at least one value, e.g. hz = 100"));
            }
        }
        if let Some(q) = &sim.quantum {
            quanta = Vec::new();
            for v in q.get_ref().to_vec() {
                quanta.push(
                    v.parse::<Quantum>()
                        .map_err(|e| cx.at(q.span(), format!("quantum: {e}")))?,
                );
            }
            if quanta.is_empty() {
                return Err(cx.at(
                    q.span(),
                    "quantum: give at least one value, e.g. quantum = \"60ms\"",
                ));
            }
        }
        if let Some(p) = &sim.policy {
            base.policy = p
                .get_ref()
                .parse::<Policy>()
                .map_err(|e| cx.at(p.span(), e))?;
        }
        if let Some(t) = &sim.timer {
            base.timer = t
                .get_ref()
                .parse::<Mechanism>()
                .map_err(|e| cx.at(t.span(), e))?;
        }
        if let Some(c) = &sim.cpus {
            base.cpus = cx.int(c, "cpus", 1, 256)? as usize;
        }
        if let Some(d) = &sim.duration {
            base.duration = cx.dur(d, "duration")?;
        }
        if let Some(s) = &sim.seed {
            base.seed = cx.int(s, "seed", 0, i64::MAX)? as u64;
        }
        if let Some(d) = &sim.irq_cost {
            costs.irq_direct = cx.dur(d, "irq_cost")?;
        }
        if let Some(d) = &sim.irq_indirect {
            costs.irq_indirect = cx.dur(d, "irq_indirect")?;
        }
        if let Some(d) = &sim.switch_cost {
            costs.switch = cx.dur(d, "switch_cost")?;
        }
        if let Some(d) = &sim.entry_interval {
            base.entry_interval = cx.dur(d, "entry_interval")?;
        }
        if let Some(d) = &sim.overshoot {
            base.overshoot = cx.dur(d, "overshoot")?;
        }
        if let Some(k) = &sim.cache_kib {
            base.cache.size_kib = cx.int(k, "cache_kib", 1, MAX_KIB)? as u64;
        }
        if let Some(r) = &sim.refill_mb_s {
            base.cache.refill_mb_s = cx.int(r, "refill_mb_s", 1, i64::MAX)? as u64;
        }
        if let Some(w) = &sim.workload {
            base.tasks = parse_workload(w.get_ref())
                .map_err(|e| cx.at(w.span(), format!("workload: {e}")))?;
        }
    }
    base.costs = costs;
    for t in &raw.task {
        let span = t.span();
        let specs = task(&cx, t.get_ref())?;
        for s in specs {
            if base.tasks.iter().any(|o| o.name == s.name) {
                return Err(cx.at(
                    span.clone(),
                    format!(
                        "a task named '{}' already exists; names must be unique",
                        s.name
                    ),
                ));
            }
            base.tasks.push(s);
        }
    }
    if base.tasks.is_empty() {
        return Err(cx.at(
            0..0,
            "no tasks: add [[task]] tables or a workload = \"cont:8\" line under [sim]",
        ));
    }
    check_targets(&cx, &raw.task, &base.tasks)?;
    Ok(Scenario {
        name,
        description,
        base,
        hz,
        quanta,
    })
}

/// Names a task hands work to must exist; round trips go only to a server.
fn check_targets(
    cx: &Ctx,
    raw: &[Spanned<TaskSection>],
    tasks: &[TaskSpec],
) -> Result<(), SimError> {
    for t in raw {
        for (field, key) in [
            (&t.get_ref().server, "server"),
            (&t.get_ref().decoder, "decoder"),
        ] {
            if let Some(target) = field {
                if !tasks.iter().any(|o| &o.name == target.get_ref()) {
                    return Err(cx.at(
                        target.span(),
                        format!(
                            "{key} = \"{}\" names no task of this scenario",
                            target.get_ref()
                        ),
                    ));
                }
            }
        }
        // Only a server answers round trips.
        if let (Some(n), Some(target)) = (&t.get_ref().round_trips, &t.get_ref().server) {
            let serves = tasks.iter().any(|o| {
                &o.name == target.get_ref() && matches!(o.behaviour, Behaviour::Server { .. })
            });
            if !serves {
                return Err(cx.at(
                    n.span(),
                    format!(
                        "round_trips go to server = \"{}\", which is not a server behaviour",
                        target.get_ref()
                    ),
                ));
            }
        }
    }
    Ok(())
}

fn task(cx: &Ctx, t: &TaskSection) -> Result<Vec<TaskSpec>, SimError> {
    let b = t.behaviour.get_ref().as_str();
    check_task_keys(cx, t, b)?;
    let behaviour = behaviour(cx, t, b)?;
    if let Some(n) = &t.name {
        // Names are echoed in messages and tables: nothing that steers a terminal.
        punctual_time::text::check_name("task", n.get_ref()).map_err(|e| cx.at(n.span(), e))?;
    }
    behaviour
        .validate(t.name.as_ref().map_or(b, |n| n.get_ref()))
        .map_err(|e| cx.at(t.behaviour.span(), e.to_string()))?;
    let count = t
        .count
        .as_ref()
        .map_or(Ok(1), |c| cx.int(c, "count", 1, 4096))? as usize;
    let class = t
        .policy
        .as_ref()
        .map(|p| p.get_ref().parse::<Class>().map_err(|e| cx.at(p.span(), e)))
        .transpose()?;
    let priority = t
        .priority
        .as_ref()
        .map_or(Ok(50), |p| cx.int(p, "priority", 1, 99))? as u32;
    let nice = t
        .nice
        .as_ref()
        .map_or(Ok(0), |n| cx.int(n, "nice", -20, 19))? as i32;
    let cpu = t
        .cpu
        .as_ref()
        .map(|c| cx.int(c, "cpu", 0, 255))
        .transpose()?
        .map(|c| c as usize);
    let footprint_kib = t
        .footprint_kib
        .as_ref()
        .map_or(Ok(0), |f| cx.int(f, "footprint_kib", 0, MAX_KIB))? as u64;
    let round_trips = round_trips(cx, t)?;
    let base = t
        .name
        .as_ref()
        .map_or_else(|| b.to_string(), |n| n.get_ref().clone());
    Ok((0..count)
        .map(|i| {
            let name = if count > 1 {
                format!("{base} {i}")
            } else {
                base.clone()
            };
            TaskSpec {
                name,
                group: base.clone(),
                behaviour: behaviour.clone(),
                class,
                priority,
                nice,
                cpu,
                round_trips,
                footprint_kib,
            }
        })
        .collect())
}

/// A client's round trips to its server (`round_trips`, `request_work`, `reply_work`); the work
/// keys need a count and a server.
fn round_trips(cx: &Ctx, t: &TaskSection) -> Result<Option<RoundTrips>, SimError> {
    let Some(n) = &t.round_trips else {
        if let Some(w) = t.request_work.as_ref().or(t.reply_work.as_ref()) {
            return Err(cx.at(w.span(), "request_work and reply_work need round_trips = N"));
        }
        return Ok(None);
    };
    if t.server.is_none() {
        return Err(cx.at(
            n.span(),
            "round_trips need a server = \"NAME\" to send them to",
        ));
    }
    let count = cx.int(n, "round_trips", 0, RoundTrips::MAX_COUNT as i64)? as u32;
    let nonzero = |(lo, hi): (Ns, Ns), key: &str, s: &Option<Spanned<DurOrRange>>| {
        if lo == 0 {
            let span = s.as_ref().map_or(n.span(), |s| s.span());
            return Err(cx.at(span, format!("{key} must be more than zero")));
        }
        Ok((lo, hi))
    };
    let server = cx.range_or(&t.request_work, "request_work", X_ROUND_TRIPS.server)?;
    let client = cx.range_or(&t.reply_work, "reply_work", X_ROUND_TRIPS.client)?;
    Ok(Some(RoundTrips {
        count,
        server: nonzero(server, "request_work", &t.request_work)?,
        client: nonzero(client, "reply_work", &t.reply_work)?,
    }))
}

/// Refuses an unknown behaviour, and parameters behaviour `b` does not take, so typos do not pass.
fn check_task_keys(cx: &Ctx, t: &TaskSection, b: &str) -> Result<(), SimError> {
    let allowed: &[&str] = match b {
        "blk" => &["delay", "handler"],
        "pct" => &["pct", "delay"],
        "cont" => &["delay"],
        "cpu" => &[],
        "periodic" => &["period", "wcet", "offset"],
        "select" => &["interval", "wcet"],
        "typist" => &["interval", "burst", "server", "round_trips", "request_work", "reply_work"],
        "player" => &[
            "fps",
            "poll",
            "work",
            "frames",
            "start",
            "server",
            "decoder",
            "round_trips",
            "request_work",
            "reply_work",
        ],
        "decoder" => &["work", "buffer"],
        "server" => &["work"],
        "game" => &["frame", "gpu"],
        other => {
            return Err(cx.at(
                t.behaviour.span(),
                format!("unknown behaviour '{other}' (valid: blk, pct, cont, cpu, periodic, select, typist, player, decoder, server, game)"),
            ))
        }
    };
    let present: [(&str, Option<Range<usize>>); 21] = [
        ("delay", t.delay.as_ref().map(|s| s.span())),
        ("handler", t.handler.as_ref().map(|s| s.span())),
        ("pct", t.pct.as_ref().map(|s| s.span())),
        ("period", t.period.as_ref().map(|s| s.span())),
        ("wcet", t.wcet.as_ref().map(|s| s.span())),
        ("offset", t.offset.as_ref().map(|s| s.span())),
        ("interval", t.interval.as_ref().map(|s| s.span())),
        ("burst", t.burst.as_ref().map(|s| s.span())),
        ("server", t.server.as_ref().map(|s| s.span())),
        ("fps", t.fps.as_ref().map(|s| s.span())),
        ("poll", t.poll.as_ref().map(|s| s.span())),
        ("work", t.work.as_ref().map(|s| s.span())),
        ("frames", t.frames.as_ref().map(|s| s.span())),
        ("start", t.start.as_ref().map(|s| s.span())),
        ("decoder", t.decoder.as_ref().map(|s| s.span())),
        ("buffer", t.buffer.as_ref().map(|s| s.span())),
        ("frame", t.frame.as_ref().map(|s| s.span())),
        ("gpu", t.gpu.as_ref().map(|s| s.span())),
        ("round_trips", t.round_trips.as_ref().map(|s| s.span())),
        ("request_work", t.request_work.as_ref().map(|s| s.span())),
        ("reply_work", t.reply_work.as_ref().map(|s| s.span())),
    ];
    for (key, span) in present {
        if let Some(span) = span {
            if !allowed.contains(&key) {
                return Err(cx.at(
                    span,
                    format!(
                        "'{key}' does not apply to behaviour '{b}' (it takes: {})",
                        if allowed.is_empty() {
                            "nothing".to_string()
                        } else {
                            allowed.join(", ")
                        }
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// The behaviour `b` (already checked by [`check_task_keys`]) with its parameters, defaults filled in.
fn behaviour(cx: &Ctx, t: &TaskSection, b: &str) -> Result<Behaviour, SimError> {
    let need = |s: &Option<Spanned<String>>, key: &str| -> Result<Ns, SimError> {
        match s {
            Some(v) => cx.dur(v, key),
            None => Err(cx.at(
                t.behaviour.span(),
                format!("behaviour '{b}' needs {key} (e.g. {key} = \"10ms\")"),
            )),
        }
    };
    Ok(match b {
        "blk" => Behaviour::Blk {
            delay: cx.range_or(&t.delay, "delay", ETSION_DELAY)?,
            handler: cx.dur_or(&t.handler, "handler", 0)?,
        },
        "pct" => {
            let pct =
                match &t.pct {
                    Some(p) => cx.int(p, "pct", 1, 100)? as u32,
                    None => return Err(cx.at(
                        t.behaviour.span(),
                        "behaviour 'pct' needs pct = K (percent of each alarm interval computed)",
                    )),
                };
            Behaviour::Pct {
                pct,
                delay: cx.range_or(&t.delay, "delay", ETSION_DELAY)?,
            }
        }
        "cont" => Behaviour::Cont {
            delay: cx.range_or(&t.delay, "delay", ETSION_DELAY)?,
        },
        "cpu" => Behaviour::Cpu,
        "periodic" => Behaviour::Periodic {
            period: need(&t.period, "period")?,
            wcet: need(&t.wcet, "wcet")?,
            offset: cx.dur_or(&t.offset, "offset", 0)?,
        },
        "select" => Behaviour::Select {
            timeout: need(&t.interval, "interval")?,
            wcet: need(&t.wcet, "wcet")?,
        },
        "typist" => Behaviour::Typist {
            interval: cx.dur_or(&t.interval, "interval", defaults::TYPIST_INTERVAL)?,
            burst: cx.range_or(&t.burst, "burst", defaults::TYPIST_BURST)?,
            server: t.server.as_ref().map(|s| s.get_ref().clone()),
        },
        "player" => player(cx, t)?,
        "decoder" => Behaviour::Decoder {
            work: cx.range_or(&t.work, "work", defaults::DECODE_WORK)?,
            buffer: t
                .buffer
                .as_ref()
                .map_or(Ok(defaults::DECODE_BUFFER as i64), |b| {
                    cx.int(b, "buffer", 1, 1_000_000)
                })? as u32,
        },
        "server" => Behaviour::Server {
            work: cx.range_or(&t.work, "work", defaults::X_EVENT_WORK)?,
        },
        "game" => Behaviour::Game {
            frame: cx.range_or(&t.frame, "frame", defaults::GAME_FRAME)?,
            gpu: cx.range_or(&t.gpu, "gpu", defaults::GAME_GPU)?,
        },
        _ => unreachable!("checked above"),
    })
}

fn player(cx: &Ctx, t: &TaskSection) -> Result<Behaviour, SimError> {
    let fps_milli = match &t.fps {
        None => 60_000,
        Some(f) => {
            let text = match f.get_ref() {
                Fps::Int(i) => i.to_string(),
                Fps::Float(x) => x.to_string(),
            };
            parse_fps(&text).map_err(|e| cx.at(f.span(), format!("fps: {e}")))?
        }
    };
    let poll = match &t.poll {
        None => Poll::Every(defaults::XINE_POLL),
        Some(p) if p.get_ref() == "frame" => Poll::PerFrame,
        Some(p) => Poll::Every(cx.dur(p, "poll").map_err(|_| {
            cx.at(
                p.span(),
                format!(
                    "poll: '{}' is neither a duration (4ms) nor \"frame\"",
                    p.get_ref()
                ),
            )
        })?),
    };
    let work = cx
        .range_or(
            &t.work,
            "work",
            (defaults::PLAYER_WORK, defaults::PLAYER_WORK),
        )?
        .0;
    Ok(Behaviour::Player {
        fps_milli,
        poll,
        work,
        frames: t
            .frames
            .as_ref()
            .map(|f| cx.int(f, "frames", 1, i64::MAX))
            .transpose()?
            .map(|v| v as u64),
        start: cx.dur_or(&t.start, "start", 0)?,
        server: t.server.as_ref().map(|s| s.get_ref().clone()),
        decoder: t.decoder.as_ref().map(|s| s.get_ref().clone()),
    })
}

/// Read and parse a scenario file.
pub fn load(path: &std::path::Path) -> Result<Scenario, SimError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| SimError::Io(format!("reading scenario {}: {e}", path.display())))?;
    parse(&path.display().to_string(), &text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> (usize, usize, String) {
        match parse("s.toml", text).unwrap_err() {
            SimError::Scenario {
                line,
                column,
                message,
                ..
            } => (line, column, message),
            e => panic!("{e}"),
        }
    }

    #[test]
    fn names_that_steer_the_terminal_are_refused_escaped() {
        let (line, _, m) = err("[[task]]\nname = \"x\\u001B[2J\"\nbehaviour = \"cpu\"\n");
        assert_eq!(line, 2);
        assert!(m.contains("x\\u{001b}[2J"), "{m}");
        assert!(!m.contains('\u{1b}'), "{m:?}");
        let (line, _, m) = err("[sim]\nname = \"a\\u202Eb\"\n");
        assert_eq!(line, 2);
        assert!(m.contains("scenario name"), "{m}");
    }

    #[test]
    fn parses_a_sweep_with_tasks() {
        let s = parse(
            "x.toml",
            "[sim]\nhz = [100, 1000]\nquantum = [\"60ms\", \"6ticks\"]\npolicy = \"linux24\"\nduration = \"10s\"\nworkload = \"cpu:1\"\n\n\
             [[task]]\nname = \"X\"\nbehaviour = \"server\"\nwork = [\"8ms\", \"9ms\"]\n\n[[task]]\nbehaviour = \"pct\"\npct = 8\ncount = 2\n",
        )
        .unwrap();
        assert_eq!(s.hz, vec![100, 1000]);
        assert_eq!(s.quanta, vec![Quantum::Time(60_000_000), Quantum::Ticks(6)]);
        assert_eq!(s.runs().len(), 4);
        assert_eq!(s.base.policy, Policy::Linux24);
        let names: Vec<&str> = s.base.tasks.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["cpu 0", "X", "pct 0", "pct 1"]);
        assert_eq!(
            s.base.tasks[1].behaviour,
            Behaviour::Server {
                work: (8_000_000, 9_000_000)
            }
        );
    }

    #[test]
    fn errors_carry_line_and_column() {
        // Malformed TOML.
        let (l, c, m) = err("[sim]\nhz = 100\nquantum = \n");
        assert_eq!((l, c), (3, 11), "{m}");
        // Unknown behaviour, at its value.
        let (l, c, m) = err("[[task]]\nbehaviour = \"dancer\"\n");
        assert_eq!((l, c), (2, 13));
        assert!(
            m.contains("unknown behaviour 'dancer'") && m.contains("valid:"),
            "{m}"
        );
        // Unknown policy.
        let (l, _, m) = err("[sim]\npolicy = \"edf\"\nworkload = \"cpu\"\n");
        assert_eq!(l, 2);
        assert!(m.contains("valid: rr, fifo, linux24, fair, plan"), "{m}");
        // A bare number where a duration goes.
        let (l, _, m) = err("[sim]\nduration = \"60\"\nworkload = \"cpu\"\n");
        assert_eq!(l, 2);
        assert!(m.contains("did you mean 60us?"), "{m}");
        // A parameter that does not apply.
        let (l, _, m) = err("[[task]]\nbehaviour = \"cpu\"\nfps = 60\n");
        assert_eq!(l, 3);
        assert!(m.contains("'fps' does not apply to behaviour 'cpu'"), "{m}");
        // Unknown keys are refused.
        let (l, _, m) = err("[sim]\nhertz = 100\n");
        assert_eq!(l, 2);
        assert!(m.contains("hertz"), "{m}");
        // HZ out of range.
        let (l, _, m) = err("[sim]\nhz = 0\nworkload = \"cpu\"\n");
        assert_eq!(l, 2);
        assert!(m.contains("out of range"), "{m}");
        // A server that does not exist.
        let (l, _, m) = err("[[task]]\nbehaviour = \"typist\"\nserver = \"Y\"\n");
        assert_eq!(l, 3);
        assert!(m.contains("names no task"), "{m}");
        // No tasks at all.
        let (_, _, m) = err("[sim]\nhz = 100\n");
        assert!(m.contains("no tasks"), "{m}");
    }

    #[test]
    fn round_trips_parse_with_defaults_and_refuse_what_cannot_work() {
        let x = "[[task]]\nname = \"X\"\nbehaviour = \"server\"\n";
        let sc = parse(
            "t.toml",
            &format!("{x}[[task]]\nbehaviour = \"typist\"\nserver = \"X\"\nround_trips = 3\nreply_work = \"5us\"\n"),
        )
        .unwrap();
        let rt = sc.base.tasks[1].round_trips.unwrap();
        assert_eq!(rt.count, 3);
        assert_eq!(rt.server, crate::workload::X_ROUND_TRIPS.server);
        assert_eq!(rt.client, (5_000, 5_000));
        assert_eq!(sc.base.tasks[0].round_trips, None);
        // Work without a count, a count without a server, a zero request, too many.
        let typist = "[[task]]\nbehaviour = \"typist\"\n";
        let (l, _, m) = err(&format!("{typist}request_work = \"1us\"\n"));
        assert_eq!(l, 3);
        assert!(m.contains("need round_trips"), "{m}");
        let (l, _, m) = err(&format!("{typist}round_trips = 2\n"));
        assert_eq!(l, 3);
        assert!(m.contains("need a server"), "{m}");
        let (l, _, m) = err(&format!(
            "{x}{typist}server = \"X\"\nround_trips = 2\nrequest_work = \"0us\"\n"
        ));
        assert_eq!(l, 8);
        assert!(m.contains("more than zero"), "{m}");
        let (_, _, m) = err(&format!("{x}{typist}server = \"X\"\nround_trips = 5000\n"));
        assert!(m.contains("out of range"), "{m}");
        // Only clients make them.
        let (_, _, m) = err("[[task]]\nbehaviour = \"cpu\"\nround_trips = 1\n");
        assert!(m.contains("'round_trips' does not apply"), "{m}");
        // Only a server answers them.
        let cpu = "[[task]]\nname = \"C\"\nbehaviour = \"cpu\"\n";
        let (_, _, m) = err(&format!("{cpu}{typist}server = \"C\"\nround_trips = 1\n"));
        assert!(m.contains("which is not a server"), "{m}");
        let mut cfg = sc.base.clone();
        cfg.tasks[0].behaviour = Behaviour::Cpu;
        assert!(cfg
            .validate()
            .unwrap_err()
            .to_string()
            .contains("not a server"));
    }

    #[test]
    fn every_example_scenario_parses_and_validates() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/sim");
        let mut n = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let p = entry.unwrap().path();
            if p.extension().is_some_and(|e| e == "toml") {
                let s = load(&p).unwrap_or_else(|e| panic!("{e}"));
                for r in s.runs() {
                    r.validate()
                        .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
                }
                n += 1;
            }
        }
        assert!(n >= 8, "only {n} example scenarios");
    }
}
