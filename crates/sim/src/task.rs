//! A task while the engine runs it: its behaviour's state machine ([`TaskState`]) and what it may
//! ask of the engine ([`Cx`]).

use crate::behaviour::{Behaviour, Poll};
use crate::config::TaskSpec;
use crate::rng::Rng;
use crate::stats::TaskStats;
use crate::units::Ns;

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
    /// Timers are tick-based (no one-shot timer): the tick, which select() rounds its timeout to.
    pub tick_timers: Option<Ns>,
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
    /// Select: when the previous loop began.
    last_loop: Option<Ns>,
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
            last_loop: None,
        }
    }

    /// When select(`timeout`) called at `now` returns: Linux 2.x with tick timers counts whole ticks
    /// from the current one, rounded up, plus one (so it never sleeps less than asked); a one-shot
    /// timer (UTIME) expires at `now + timeout`.
    pub fn select_expiry(now: Ns, timeout: Ns, tick_timers: Option<Ns>) -> Ns {
        match tick_timers {
            Some(tick) if tick > 0 => (now / tick + timeout.div_ceil(tick) + 1) * tick,
            _ => now + timeout,
        }
    }

    /// A select loop begins: the time since the previous one, then its work.
    fn select_loop(&mut self, cx: &mut Cx, timeout: Ns, wcet: Ns) -> Step {
        if let Some(prev) = self.last_loop {
            cx.stats.record_loop(cx.now - prev, timeout);
        }
        self.last_loop = Some(cx.now);
        cx.stats.jobs += 1;
        Step::Compute(wcet)
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
            Behaviour::Select { timeout, wcet } => self.select_loop(cx, timeout, wcet),
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
            Behaviour::Select { timeout, .. } => {
                let at = Self::select_expiry(cx.now, timeout, cx.tick_timers);
                cx.set_alarm(at);
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
            Behaviour::Select { timeout, wcet } => Some(self.select_loop(cx, timeout, wcet)),
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
