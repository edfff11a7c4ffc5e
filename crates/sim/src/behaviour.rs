//! What tasks do. Each behaviour is a small state machine ([`crate::task`]) the engine drives when
//! the task is on a CPU: it starts, finishes a burst of computation, notices an alarm signal, or
//! wakes for a message or a device interrupt; it answers with the next [`Step`](crate::task::Step)
//! and asks for alarms, messages and device interrupts through [`Cx`](crate::task::Cx). The labels
//! follow the seeds: `blk`, `pctK`, `cont`, `cpu`, `periodic` (Etsion Section 7 and SPEC section
//! 6), plus the typist, the game, and the Xine pipeline of Etsion Sections 2, 4 and 6 (a displayer
//! woken by a 4 ms alarm, a decoder, an X server).

use crate::units::{Ns, MAX_DURATION, NS_PER_S};
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
    /// A loop that computes `wcet`, then sleeps `timeout` in select() (KURT Fig. 3.2): with
    /// tick-based timers Linux rounds the timeout up to whole ticks and adds one, so a 10 ms loop at
    /// HZ=100 runs every 20 ms; with one-shot timers it sleeps exactly `timeout`.
    Select { timeout: Ns, wcet: Ns },
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
            Behaviour::Select { .. } => "select",
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
                | Behaviour::Select { .. }
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
            if ns > MAX_DURATION {
                return Err(SimError::invalid(
                    field,
                    format!(
                        "task '{task}': {} is longer than the simulator's limit of {}",
                        punctual_time::format_ns(ns),
                        punctual_time::format_ns(MAX_DURATION)
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
            Behaviour::Select { timeout, wcet } => {
                if *timeout == 0 || *wcet == 0 {
                    return Err(SimError::invalid(
                        "select",
                        format!("task '{task}': timeout and wcet must be more than zero, e.g. select:1:10ms:100us"),
                    ));
                }
                Ok(())
            }
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
            Behaviour::Select { timeout, wcet } => vec![("timeout", *timeout), ("wcet", *wcet)],
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
            Behaviour::Select { timeout, .. } => 4.0 * per(*timeout),
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
    /// Etsion's sort (Section 3, Figs. 2, 3, 8): an array of about half the 256 KiB L2 cache.
    pub const SORT_FOOTPRINT_KIB: u64 = 128;
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
