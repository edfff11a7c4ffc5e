//! What tasks do. Each behaviour is a small state machine the engine drives when the task is on a
//! CPU: it starts, finishes a burst of computation, notices an alarm signal, or wakes for a message or
//! a device interrupt; it answers with the next [`Step`] and asks for alarms, messages and device
//! interrupts through [`Cx`]. The labels follow the seeds: `blk`, `pctK`, `cont`, `cpu`, `periodic`
//! (Etsion Section 7 and SPEC section 6), plus the typist, the game, and the Xine pipeline of
//! Etsion Sections 2, 4 and 6 (a displayer woken by a 4 ms alarm, a decoder, an X server).

use crate::config::{Ns, TaskSpec, NS_PER_S};
use crate::rng::Rng;
use crate::stats::TaskStats;
use crate::SimError;

const MS: Ns = 1_000_000;
const US: Ns = 1_000;

/// How a player wakes up to check whether its next frame is due.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Poll {
    /// A fixed alarm interval (Xine's displayer uses 4 ms).
    Every(Ns),
    /// An alarm at each frame's display time.
    PerFrame,
}

/// A task's behaviour and its parameters.
#[derive(Clone, Debug, PartialEq)]
pub enum Behaviour {
    /// Sets an alarm `U(delay)` ahead and blocks; computes `handler` per wake-up.
    Blk { delay: (Ns, Ns), handler: Ns },
    /// Sets an alarm `U(delay)` ahead and computes `pct` % of that interval, then blocks. An alarm
    /// that arrives first cuts the computation short (counted as an overrun).
    Pct { pct: u32, delay: (Ns, Ns) },
    /// Computes continuously and keeps an alarm `U(delay)` ahead.
    Cont { delay: (Ns, Ns) },
    /// Computes continuously; no timers (the CPU-bound background and the sort of Figs. 2, 3, 8).
    Cpu,
    /// Released every `period` from `offset + period` on; computes `wcet` per release.
    Periodic { period: Ns, wcet: Ns, offset: Ns },
    /// Keystrokes as device interrupts, exponentially spaced with mean `interval` (8 a second is
    /// Etsion's Emacs typing), each handled by a burst `U(burst)`; hands a redraw to `server`.
    Typist {
        interval: Ns,
        burst: (Ns, Ns),
        server: Option<String>,
    },
    /// Shows frames at `fps_milli / 1000` frames a second from `start`: never early, skipped when
    /// late by more than half a frame (Xine's two rules, Etsion Section 5). Hands each shown frame to
    /// `server` and takes it from `decoder`'s buffer when given.
    Player {
        fps_milli: u64,
        poll: Poll,
        work: Ns,
        frames: Option<u64>,
        start: Ns,
        server: Option<String>,
        decoder: Option<String>,
    },
    /// Decodes frames (`U(work)` each) into a buffer of `buffer` frames; blocks when it is full.
    Decoder { work: (Ns, Ns), buffer: u32 },
    /// Woken by messages; computes `U(work)` per message (the X server).
    Server { work: (Ns, Ns) },
    /// Computes a frame `U(frame)`, then waits `U(gpu)` for the graphics card (Quake with DRI).
    Game { frame: (Ns, Ns), gpu: (Ns, Ns) },
}

/// The delays of Etsion's BLK, N% and CONT processes: uniform between 1 and 1000 ms.
pub const ETSION_DELAY: (Ns, Ns) = (MS, 1000 * MS);

impl Behaviour {
    pub fn kind(&self) -> &'static str {
        match self {
            Behaviour::Blk { .. } => "blk",
            Behaviour::Pct { .. } => "pct",
            Behaviour::Cont { .. } => "cont",
            Behaviour::Cpu => "cpu",
            Behaviour::Periodic { .. } => "periodic",
            Behaviour::Typist { .. } => "typist",
            Behaviour::Player { .. } => "player",
            Behaviour::Decoder { .. } => "decoder",
            Behaviour::Server { .. } => "server",
            Behaviour::Game { .. } => "game",
        }
    }

    /// Whether the task sets alarms (and so has alarm-latency series).
    pub fn uses_alarms(&self) -> bool {
        matches!(
            self,
            Behaviour::Blk { .. }
                | Behaviour::Pct { .. }
                | Behaviour::Cont { .. }
                | Behaviour::Periodic { .. }
                | Behaviour::Player { .. }
        )
    }

    /// The task this one hands work to, if any.
    pub fn target(&self) -> Option<&str> {
        match self {
            Behaviour::Typist { server, .. } => server.as_deref(),
            Behaviour::Player { server, .. } => server.as_deref(),
            _ => None,
        }
    }

    pub fn decoder(&self) -> Option<&str> {
        match self {
            Behaviour::Player { decoder, .. } => decoder.as_deref(),
            _ => None,
        }
    }

    pub fn validate(&self, task: &str) -> Result<(), SimError> {
        let range = |field: &str, (lo, hi): (Ns, Ns)| -> Result<(), SimError> {
            if lo == 0 || lo > hi {
                return Err(SimError::invalid(
                    field,
                    format!("task '{task}': the range must be more than zero with min <= max, e.g. 1ms..1000ms"),
                ));
            }
            Ok(())
        };
        for (field, ns) in self.durations() {
            if ns > crate::config::MAX_DURATION {
                return Err(SimError::invalid(
                    field,
                    format!(
                        "task '{task}': {} is longer than the simulator's limit of {}",
                        punctual_time::format_ns(ns),
                        punctual_time::format_ns(crate::config::MAX_DURATION)
                    ),
                ));
            }
        }
        match self {
            Behaviour::Blk { delay, .. } | Behaviour::Cont { delay } => range("delay", *delay),
            Behaviour::Pct { pct, delay } => {
                if !(1..=100).contains(pct) {
                    return Err(SimError::invalid(
                        "pct",
                        format!("task '{task}': pct{pct} must be 1 to 100 percent"),
                    ));
                }
                range("delay", *delay)
            }
            Behaviour::Cpu => Ok(()),
            Behaviour::Periodic { period, wcet, .. } => {
                if *period == 0 || *wcet == 0 {
                    return Err(SimError::invalid(
                        "periodic",
                        format!("task '{task}': period and wcet must be more than zero, e.g. periodic:1:10ms:2ms"),
                    ));
                }
                Ok(())
            }
            Behaviour::Typist {
                interval, burst, ..
            } => {
                if *interval == 0 {
                    return Err(SimError::invalid(
                        "interval",
                        format!("task '{task}': the keystroke interval must be more than zero"),
                    ));
                }
                range("burst", *burst)
            }
            Behaviour::Player {
                fps_milli, poll, ..
            } => {
                if *fps_milli == 0 || *fps_milli > 1_000_000_000 {
                    return Err(SimError::invalid(
                        "fps",
                        format!(
                            "task '{task}': frame rate must be more than 0 and at most 1000000"
                        ),
                    ));
                }
                if *poll == Poll::Every(0) {
                    return Err(SimError::invalid(
                        "poll",
                        format!(
                            "task '{task}': the poll interval must be more than zero, e.g. 4ms"
                        ),
                    ));
                }
                Ok(())
            }
            Behaviour::Decoder { work, buffer } => {
                if *buffer == 0 {
                    return Err(SimError::invalid(
                        "buffer",
                        format!("task '{task}': the buffer must hold at least one frame"),
                    ));
                }
                range("work", *work)
            }
            Behaviour::Server { work } => range("work", *work),
            Behaviour::Game { frame, gpu } => {
                range("frame", *frame)?;
                range("gpu", *gpu)
            }
        }
    }

    /// Every duration the behaviour was given, with its field name (bounded by [`Behaviour::validate`]
    /// so that no sum of simulated times can overflow).
    pub fn durations(&self) -> Vec<(&'static str, Ns)> {
        match self {
            Behaviour::Blk { delay, handler } => {
                vec![
                    ("delay", delay.0),
                    ("delay", delay.1),
                    ("handler", *handler),
                ]
            }
            Behaviour::Pct { delay, .. } | Behaviour::Cont { delay } => {
                vec![("delay", delay.0), ("delay", delay.1)]
            }
            Behaviour::Cpu => vec![],
            Behaviour::Periodic {
                period,
                wcet,
                offset,
            } => vec![("period", *period), ("wcet", *wcet), ("offset", *offset)],
            Behaviour::Typist {
                interval, burst, ..
            } => vec![
                ("interval", *interval),
                ("burst", burst.0),
                ("burst", burst.1),
            ],
            Behaviour::Player {
                poll, work, start, ..
            } => {
                let mut v = vec![("work", *work), ("start", *start)];
                if let Poll::Every(p) = poll {
                    v.push(("poll", *p));
                }
                v
            }
            Behaviour::Decoder { work, .. } | Behaviour::Server { work } => {
                vec![("work", work.0), ("work", work.1)]
            }
            Behaviour::Game { frame, gpu } => vec![
                ("frame", frame.0),
                ("frame", frame.1),
                ("gpu", gpu.0),
                ("gpu", gpu.1),
            ],
        }
    }

    /// A rough upper estimate of the events a second this task generates (for the event budget).
    pub fn events_per_s(&self, tick: Ns) -> f64 {
        let per = |ns: Ns| NS_PER_S as f64 / ns.max(1) as f64;
        match self {
            Behaviour::Blk { delay, .. }
            | Behaviour::Pct { delay, .. }
            | Behaviour::Cont { delay } => 4.0 * per(delay.0),
            Behaviour::Cpu => 0.0,
            Behaviour::Periodic { period, .. } => 4.0 * per(*period),
            Behaviour::Typist { interval, .. } => 6.0 * per(*interval),
            Behaviour::Player {
                fps_milli, poll, ..
            } => {
                let frames = *fps_milli as f64 / 1000.0;
                match poll {
                    Poll::Every(p) => 3.0 * per(*p) + 3.0 * frames,
                    Poll::PerFrame => 6.0 * frames,
                }
            }
            Behaviour::Decoder { work, .. } => 3.0 * per(work.0),
            Behaviour::Server { work } => 3.0 * per(work.0.min(tick)),
            Behaviour::Game { frame, gpu } => 4.0 * per(frame.0 + gpu.0),
        }
    }
}

/// What the task does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Compute this long, then be asked again.
    Compute(Ns),
    /// Compute until something else happens.
    Forever,
    /// Sleep until an alarm, a message or a device interrupt.
    Block,
}

/// Why a blocked task woke (alarm signals arrive through [`TaskState::on_alarm`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wake {
    Message,
    Device,
}

/// A frame buffer between a decoder and a player.
#[derive(Clone, Copy, Debug, Default)]
pub struct Pipe {
    pub ready: u32,
    pub capacity: u32,
}

/// What a behaviour may ask of the engine while it runs. Requests are applied after the call.
pub struct Cx<'a> {
    pub now: Ns,
    pub rng: &'a mut Rng,
    pub stats: &'a mut TaskStats,
    pub inbox: &'a mut u32,
    pub pipe: Option<&'a mut Pipe>,
    /// `Some(Some(t))`: alarm at t; `Some(None)`: cancel.
    pub alarm: Option<Option<Ns>>,
    pub device: Option<Ns>,
    /// Hand work to the server / wake the decoder.
    pub send_server: bool,
    pub send_decoder: bool,
}

impl Cx<'_> {
    pub fn set_alarm(&mut self, at: Ns) {
        self.alarm = Some(Some(at));
    }
    pub fn cancel_alarm(&mut self) {
        self.alarm = Some(None);
    }
    fn take_message(&mut self) -> bool {
        if *self.inbox > 0 {
            *self.inbox -= 1;
            true
        } else {
            false
        }
    }
}

/// A behaviour with its running state.
#[derive(Clone, Debug)]
pub struct TaskState {
    pub behaviour: Behaviour,
    /// Periodic: index of the current release. Player: next frame. Typist: unused.
    k: u64,
    /// Typist: time of the next keystroke.
    next_key: Ns,
    /// Decoder: a frame is being decoded.
    decoding: bool,
    /// Pct: the cycle's computation is under way.
    computing: bool,
}

fn uniform(rng: &mut Rng, (lo, hi): (Ns, Ns)) -> Ns {
    rng.range(lo, hi)
}

impl TaskState {
    pub fn new(spec: &TaskSpec) -> TaskState {
        TaskState {
            behaviour: spec.behaviour.clone(),
            k: 0,
            next_key: 0,
            decoding: false,
            computing: false,
        }
    }

    fn frame_time(start: Ns, fps_milli: u64, k: u64) -> Ns {
        start + ((k as u128 * 1_000_000_000_000u128) / fps_milli as u128) as Ns
    }

    fn periodic_release(period: Ns, offset: Ns, k: u64) -> Ns {
        offset + (k + 1) * period
    }

    pub fn on_start(&mut self, cx: &mut Cx) -> Step {
        let now = cx.now;
        match self.behaviour.clone() {
            Behaviour::Blk { delay, handler } => {
                let d = uniform(cx.rng, delay);
                cx.set_alarm(now + d);
                if handler > 0 {
                    Step::Compute(handler)
                } else {
                    Step::Block
                }
            }
            Behaviour::Pct { .. } => self.pct_cycle(cx),
            Behaviour::Cont { delay } => {
                let d = uniform(cx.rng, delay);
                cx.set_alarm(now + d);
                Step::Forever
            }
            Behaviour::Cpu => Step::Forever,
            Behaviour::Periodic { period, offset, .. } => {
                self.k = 0;
                cx.set_alarm(Self::periodic_release(period, offset, 0));
                Step::Block
            }
            Behaviour::Typist { interval, .. } => {
                self.next_key = now + cx.rng.exp(interval);
                cx.device = Some(self.next_key);
                Step::Block
            }
            Behaviour::Player {
                poll,
                start,
                fps_milli,
                ..
            } => {
                self.k = 0;
                match poll {
                    Poll::Every(p) => cx.set_alarm(now + p),
                    Poll::PerFrame => cx.set_alarm(Self::frame_time(start, fps_milli, 0).max(now)),
                }
                Step::Block
            }
            Behaviour::Decoder { .. } => self.decode_next(cx),
            Behaviour::Server { .. } => Step::Block,
            Behaviour::Game { frame, .. } => Step::Compute(uniform(cx.rng, frame)),
        }
    }

    fn pct_cycle(&mut self, cx: &mut Cx) -> Step {
        let Behaviour::Pct { pct, delay } = self.behaviour else {
            unreachable!()
        };
        let d = uniform(cx.rng, delay);
        cx.set_alarm(cx.now + d);
        self.computing = true;
        Step::Compute((d * pct as u64 / 100).max(1))
    }

    fn decode_next(&mut self, cx: &mut Cx) -> Step {
        let Behaviour::Decoder { work, .. } = self.behaviour else {
            unreachable!()
        };
        let room = cx.pipe.as_ref().is_some_and(|p| p.ready < p.capacity);
        if room {
            self.decoding = true;
            Step::Compute(uniform(cx.rng, work))
        } else {
            self.decoding = false;
            Step::Block
        }
    }

    /// The current burst of computation finished.
    pub fn on_done(&mut self, cx: &mut Cx) -> Step {
        match self.behaviour.clone() {
            Behaviour::Blk { .. } | Behaviour::Player { .. } => Step::Block,
            Behaviour::Pct { .. } => {
                self.computing = false;
                Step::Block
            }
            Behaviour::Cont { .. } | Behaviour::Cpu => Step::Forever,
            Behaviour::Periodic { period, offset, .. } => {
                // The job is done: the next release, skipping (and counting) those already past.
                let mut next = self.k + 1;
                let next_release = Self::periodic_release(period, offset, next);
                if next_release < cx.now {
                    cx.stats.overruns += 1;
                    let passed = (cx.now - Self::periodic_release(period, offset, 0)) / period; // releases <= now
                    let first_future = passed + 1;
                    cx.stats.missed_periods += first_future - next;
                    next = first_future;
                }
                self.k = next;
                cx.set_alarm(Self::periodic_release(period, offset, next));
                Step::Block
            }
            Behaviour::Typist { server, .. } => {
                if server.is_some() {
                    cx.send_server = true;
                }
                Step::Block
            }
            Behaviour::Decoder { .. } => {
                if self.decoding {
                    if let Some(p) = cx.pipe.as_deref_mut() {
                        p.ready += 1;
                    }
                }
                self.decode_next(cx)
            }
            Behaviour::Server { work } => {
                if cx.take_message() {
                    Step::Compute(uniform(cx.rng, work))
                } else {
                    Step::Block
                }
            }
            Behaviour::Game { gpu, .. } => {
                cx.device = Some(cx.now + uniform(cx.rng, gpu));
                Step::Block
            }
        }
    }

    /// The alarm signal is noticed (the task is on a CPU). `computing`: a burst was under way.
    /// `None` keeps the current burst going.
    pub fn on_alarm(&mut self, cx: &mut Cx, computing: bool) -> Option<Step> {
        let now = cx.now;
        match self.behaviour.clone() {
            Behaviour::Blk { delay, handler } => {
                let d = uniform(cx.rng, delay);
                cx.set_alarm(now + d);
                Some(if handler > 0 {
                    Step::Compute(handler)
                } else {
                    Step::Block
                })
            }
            Behaviour::Pct { .. } => {
                if computing && self.computing {
                    cx.stats.overruns += 1;
                }
                Some(self.pct_cycle(cx))
            }
            Behaviour::Cont { delay } => {
                let d = uniform(cx.rng, delay);
                cx.set_alarm(now + d);
                None
            }
            Behaviour::Periodic { wcet, .. } => {
                cx.stats.jobs += 1;
                Some(Step::Compute(wcet))
            }
            Behaviour::Player {
                fps_milli,
                poll,
                work,
                frames,
                start,
                server,
                decoder,
            } => {
                let mut show = false;
                loop {
                    if frames.is_some_and(|n| self.k >= n) {
                        break;
                    }
                    let t = Self::frame_time(start, fps_milli, self.k);
                    if now < t {
                        break;
                    }
                    let late = now - t;
                    // Late by more than half a frame: late * fps > 1/2 s.
                    if late as u128 * 2 * fps_milli as u128 > 1_000_000_000_000u128 {
                        cx.stats.record_skip(self.k);
                        self.k += 1;
                        continue;
                    }
                    if decoder.is_some() {
                        match cx.pipe.as_deref_mut() {
                            Some(p) if p.ready > 0 => {
                                p.ready -= 1;
                                cx.send_decoder = true;
                            }
                            _ => {
                                cx.stats.record_skip(self.k);
                                cx.stats.frames_undecoded += 1;
                                self.k += 1;
                                break;
                            }
                        }
                    }
                    cx.stats.frames_shown += 1;
                    cx.stats.record_frame_lateness(late);
                    self.k += 1;
                    show = true;
                    break;
                }
                let finished = frames.is_some_and(|n| self.k >= n);
                if !finished {
                    match poll {
                        Poll::Every(p) => cx.set_alarm(now + p),
                        Poll::PerFrame => {
                            cx.set_alarm(Self::frame_time(start, fps_milli, self.k).max(now))
                        }
                    }
                }
                if show && server.is_some() {
                    cx.send_server = true;
                }
                Some(if show && work > 0 {
                    Step::Compute(work)
                } else {
                    Step::Block
                })
            }
            // Behaviours without alarms never get one; keep going if they somehow do.
            _ => None,
        }
    }

    /// Woken from a block by a message or a device interrupt.
    pub fn on_wake(&mut self, cx: &mut Cx, why: Wake) -> Step {
        match (self.behaviour.clone(), why) {
            (
                Behaviour::Typist {
                    interval, burst, ..
                },
                Wake::Device,
            ) => {
                self.next_key += cx.rng.exp(interval);
                cx.device = Some(self.next_key.max(cx.now));
                Step::Compute(uniform(cx.rng, burst))
            }
            (Behaviour::Game { frame, .. }, Wake::Device) => Step::Compute(uniform(cx.rng, frame)),
            (Behaviour::Server { work }, Wake::Message) => {
                if cx.take_message() {
                    Step::Compute(uniform(cx.rng, work))
                } else {
                    Step::Block
                }
            }
            (Behaviour::Decoder { .. }, Wake::Message) => {
                *cx.inbox = 0;
                self.decode_next(cx)
            }
            _ => {
                *cx.inbox = 0;
                Step::Block
            }
        }
    }

    /// Whether a pending message should wake this task from a block.
    pub fn wants_messages(&self) -> bool {
        matches!(
            self.behaviour,
            Behaviour::Server { .. } | Behaviour::Decoder { .. }
        )
    }
}

/// Default parameters of the named behaviours (model choices, documented in docs/design.md).
pub mod defaults {
    use super::*;
    /// Etsion's typist: about 8 characters a second.
    pub const TYPIST_INTERVAL: Ns = 125 * MS;
    pub const TYPIST_BURST: (Ns, Ns) = (50 * US, 700 * US);
    /// Xine's displayer alarm.
    pub const XINE_POLL: Ns = 4 * MS;
    pub const XINE_FPS: u64 = 25;
    pub const XINE_DISPLAY_WORK: Ns = 100 * US;
    /// The X server displaying a frame: just under a 100 Hz tick (Etsion Section 4: 0.8-0.9 tick).
    pub const X_FRAME_WORK: (Ns, Ns) = (8 * MS, 9 * MS);
    pub const X_EVENT_WORK: (Ns, Ns) = (100 * US, 400 * US);
    pub const DECODE_WORK: (Ns, Ns) = (12 * MS, 18 * MS);
    pub const DECODE_BUFFER: u32 = 4;
    pub const GAME_FRAME: (Ns, Ns) = (3 * MS, 8 * MS);
    pub const GAME_GPU: (Ns, Ns) = (500 * US, 2 * MS);
    pub const PLAYER_WORK: Ns = 100 * US;
    /// A BLK process's work per alarm: the signal handler and the next alarm system call.
    pub const BLK_HANDLER: Ns = 2 * US;
}

/// Parse a workload given on the command line: `blk:N`, `pctK:N`, `cont:N`, `cpu:N`,
/// `periodic:N:PERIOD:WCET`, `typist:N`, `game:N`, `player:N:FPS`, `xine`, comma-separated.
pub fn parse_workload(spec: &str) -> Result<Vec<TaskSpec>, String> {
    let mut tasks = Vec::new();
    for item in spec.split(',').map(str::trim) {
        if item.is_empty() {
            return Err(format!(
                "empty entry in workload '{spec}'; e.g. cont:8,blk:2"
            ));
        }
        let parts: Vec<&str> = item.split(':').collect();
        let label = parts[0];
        let count = |i: usize| -> Result<usize, String> {
            match parts.get(i) {
                None => Ok(1),
                Some(n) => match n.parse::<usize>() {
                    Ok(0) | Err(_) => Err(format!(
                        "'{item}': the count '{n}' must be a whole number of tasks, 1 or more"
                    )),
                    Ok(v) if v > 4096 => Err(format!("'{item}': at most 4096 tasks per entry")),
                    Ok(v) => Ok(v),
                },
            }
        };
        let dur = |i: usize, what: &str| -> Result<Ns, String> {
            let s = parts.get(i).ok_or_else(|| format!("'{item}': missing {what}; write periodic:N:PERIOD:WCET, e.g. periodic:2:10ms:1ms"))?;
            punctual_time::parse_duration_ns(s).map_err(|e| format!("'{item}': {what}: {e}"))
        };
        let max_parts = |n: usize| -> Result<(), String> {
            if parts.len() > n {
                Err(format!("'{item}' has too many ':' fields"))
            } else {
                Ok(())
            }
        };
        let mut add = |n: usize, group: &str, b: Behaviour| {
            for i in 0..n {
                tasks.push(TaskSpec::new(format!("{group} {i}"), group, b.clone()));
            }
        };
        match label {
            "blk" => {
                max_parts(2)?;
                add(count(1)?, "blk", Behaviour::Blk { delay: ETSION_DELAY, handler: defaults::BLK_HANDLER })
            }
            "cont" => {
                max_parts(2)?;
                add(count(1)?, "cont", Behaviour::Cont { delay: ETSION_DELAY })
            }
            "cpu" => {
                max_parts(2)?;
                add(count(1)?, "cpu", Behaviour::Cpu)
            }
            "typist" => {
                max_parts(2)?;
                add(
                    count(1)?,
                    "typist",
                    Behaviour::Typist { interval: defaults::TYPIST_INTERVAL, burst: defaults::TYPIST_BURST, server: None },
                )
            }
            "game" => {
                max_parts(2)?;
                add(count(1)?, "game", Behaviour::Game { frame: defaults::GAME_FRAME, gpu: defaults::GAME_GPU })
            }
            "periodic" => {
                max_parts(4)?;
                let n = count(1)?;
                let period = dur(2, "PERIOD")?;
                let wcet = dur(3, "WCET")?;
                add(n, "periodic", Behaviour::Periodic { period, wcet, offset: 0 })
            }
            "player" => {
                max_parts(3)?;
                let n = count(1)?;
                let fps = parts.get(2).map(|f| parse_fps(f)).transpose()?.unwrap_or(60_000);
                add(
                    n,
                    "player",
                    Behaviour::Player {
                        fps_milli: fps,
                        poll: Poll::Every(defaults::XINE_POLL),
                        work: defaults::PLAYER_WORK,
                        frames: None,
                        start: 0,
                        server: None,
                        decoder: None,
                    },
                )
            }
            "xine" => {
                max_parts(1)?;
                tasks.extend(xine_pipeline(defaults::XINE_FPS * 1000));
            }
            l if l.starts_with("pct") => {
                max_parts(2)?;
                let k: u32 = l[3..]
                    .parse()
                    .map_err(|_| format!("'{item}': write pctK:N with K the percent computed, e.g. pct8:2"))?;
                let n = count(1)?;
                let group = format!("pct{k}");
                for i in 0..n {
                    tasks.push(TaskSpec::new(format!("{group} {i}"), group.clone(), Behaviour::Pct { pct: k, delay: ETSION_DELAY }));
                }
            }
            other => {
                return Err(format!(
                    "unknown behaviour '{other}' in '{item}' (valid: blk:N, pctK:N, cont:N, cpu:N, periodic:N:PERIOD:WCET, typist:N, game:N, player:N:FPS, xine)"
                ))
            }
        }
    }
    // Names stay unique when an entry repeats (cont:2,cont:2).
    let mut seen = std::collections::HashMap::<String, usize>::new();
    for t in &mut tasks {
        let n = seen.entry(t.name.clone()).or_insert(0);
        if *n > 0 {
            t.name = format!("{} #{}", t.name, *n + 1);
        }
        *n += 1;
    }
    Ok(tasks)
}

/// Frames per second, possibly fractional (`29.97`), as thousandths.
pub fn parse_fps(s: &str) -> Result<u64, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a frame rate, e.g. 60 or 29.97"))?;
    if !(v > 0.0 && v <= 1_000_000.0) {
        return Err(format!(
            "frame rate {s} must be more than 0 and at most 1000000"
        ));
    }
    Ok((v * 1000.0).round() as u64)
}

/// Xine and the X server (Etsion Sections 2, 4, 6): the displayer wakes on a 4 ms alarm and, when
/// a frame is due, hands it to the X server, which takes just under a 100 Hz tick to show it; the
/// decoder fills a small buffer ahead.
pub fn xine_pipeline(fps_milli: u64) -> Vec<TaskSpec> {
    vec![
        TaskSpec::new(
            "xine display",
            "xine",
            Behaviour::Player {
                fps_milli,
                poll: Poll::Every(defaults::XINE_POLL),
                work: defaults::XINE_DISPLAY_WORK,
                frames: None,
                start: 0,
                server: Some("X".into()),
                decoder: Some("xine decode".into()),
            },
        ),
        TaskSpec::new(
            "xine decode",
            "xine",
            Behaviour::Decoder {
                work: defaults::DECODE_WORK,
                buffer: defaults::DECODE_BUFFER,
            },
        ),
        TaskSpec::new(
            "X",
            "X",
            Behaviour::Server {
                work: defaults::X_FRAME_WORK,
            },
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workload_labels_follow_the_seeds() {
        let t = parse_workload("cont:8,blk:2,pct4:3,cpu,periodic:2:10ms:1ms").unwrap();
        assert_eq!(t.len(), 8 + 2 + 3 + 1 + 2);
        assert_eq!(t[0].name, "cont 0");
        assert_eq!(t[0].group, "cont");
        assert_eq!(
            t[10].behaviour,
            Behaviour::Pct {
                pct: 4,
                delay: ETSION_DELAY
            }
        );
        assert_eq!(
            t[14].behaviour,
            Behaviour::Periodic {
                period: 10 * MS,
                wcet: MS,
                offset: 0
            }
        );
        let x = parse_workload("xine").unwrap();
        assert_eq!(
            x.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
            ["xine display", "xine decode", "X"]
        );
    }

    #[test]
    fn workload_errors_name_the_entry_and_the_fix() {
        for (bad, needle) in [
            ("cont:0", "count"),
            ("bogus:2", "unknown behaviour 'bogus'"),
            ("pctx:2", "pctK:N"),
            ("periodic:1:10", "has no unit"),
            ("periodic:1", "missing PERIOD"),
            ("cont:2:3", "too many"),
            ("cont:2,,blk", "empty entry"),
            ("player:1:abc", "frame rate"),
        ] {
            let e = parse_workload(bad).unwrap_err();
            assert!(e.contains(needle), "{bad}: {e}");
        }
    }

    #[test]
    fn repeated_entries_get_unique_names() {
        let t = parse_workload("cont:1,cont:1").unwrap();
        assert_ne!(t[0].name, t[1].name);
    }
}
