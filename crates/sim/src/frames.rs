//! Etsion Section 5 and Fig. 5: a player that never shows a frame early and skips one that is late
//! by more than half a frame, woken by the clock. Whether a frame is shown depends on where the
//! ticks fall relative to the frames' display times, so the study runs the same clip at evenly
//! spread start shifts (the time from the first frame to the first tick after it) and reports, per
//! shift, the frames shown and skipped, which ones, and the achieved rate.

use crate::behaviour::{Behaviour, Poll};
use crate::config::{Costs, Mechanism, Ns, Policy, Quantum, RunConfig, TaskSpec, NS_PER_S};
use crate::engine::Control;
use crate::{simulate, SimError};
use punctual_stats::Recorder;

/// One frames study: a frame rate on a clock.
#[derive(Clone, Debug, PartialEq)]
pub struct FramesConfig {
    pub fps_milli: u64,
    pub hz: u32,
    pub frames: u64,
    pub shifts: u32,
    pub poll: Poll,
    pub timer: Mechanism,
    pub policy: Policy,
    pub quantum: Quantum,
    pub costs: Costs,
    /// Work per shown frame (the player's own display call).
    pub work: Ns,
    /// Other tasks competing for the CPU.
    pub background: Vec<TaskSpec>,
    pub seed: u64,
    pub max_events: u64,
}

impl Default for FramesConfig {
    fn default() -> Self {
        FramesConfig {
            fps_milli: 60_000,
            hz: 100,
            frames: 500,
            shifts: 60,
            poll: Poll::Every(crate::behaviour::defaults::XINE_POLL),
            timer: Mechanism::Periodic,
            policy: Policy::Rr,
            quantum: Quantum::Time(50_000_000),
            costs: Costs::default(),
            work: crate::behaviour::defaults::PLAYER_WORK,
            background: Vec::new(),
            seed: 1,
            max_events: crate::config::DEFAULT_MAX_EVENTS,
        }
    }
}

/// What one start shift gave.
#[derive(Debug)]
pub struct ShiftResult {
    pub shift_ns: Ns,
    pub shown: u64,
    pub skipped: u64,
    pub achieved_fps: f64,
    /// Positions (0-based) within the tick/frame cycle of the frames that were skipped.
    pub skipped_positions: Vec<u64>,
    /// How late the shown frames were.
    pub lateness: Recorder,
    pub events: u64,
    pub simulated_ns: Ns,
}

#[derive(Debug)]
pub struct FramesResult {
    pub config: FramesConfig,
    /// Frames in one cycle of ticks and frames (3 for 60 fps at 100 Hz), if the cycle is short.
    pub cycle_frames: Option<u64>,
    pub shifts: Vec<ShiftResult>,
    pub interrupted: bool,
}

impl FramesResult {
    pub fn events(&self) -> u64 {
        self.shifts.iter().map(|s| s.events).sum()
    }
    pub fn simulated_ns(&self) -> Ns {
        self.shifts.iter().map(|s| s.simulated_ns).sum()
    }
    pub fn mean_fps(&self) -> f64 {
        if self.shifts.is_empty() {
            return 0.0;
        }
        self.shifts.iter().map(|s| s.achieved_fps).sum::<f64>() / self.shifts.len() as f64
    }
    pub fn min_fps(&self) -> f64 {
        self.shifts
            .iter()
            .map(|s| s.achieved_fps)
            .fold(f64::INFINITY, f64::min)
    }
    pub fn max_fps(&self) -> f64 {
        self.shifts
            .iter()
            .map(|s| s.achieved_fps)
            .fold(0.0, f64::max)
    }
    /// Share of start shifts that skipped at least one frame.
    pub fn share_skipping(&self) -> f64 {
        if self.shifts.is_empty() {
            return 0.0;
        }
        self.shifts.iter().filter(|s| s.skipped > 0).count() as f64 / self.shifts.len() as f64
    }
    /// Consecutive shifts with the same skipped positions, as (from, to, positions).
    pub fn shift_ranges(&self) -> Vec<(Ns, Ns, Vec<u64>)> {
        let mut out: Vec<(Ns, Ns, Vec<u64>)> = Vec::new();
        for s in &self.shifts {
            match out.last_mut() {
                Some((_, to, pos)) if *pos == s.skipped_positions => *to = s.shift_ns,
                _ => out.push((s.shift_ns, s.shift_ns, s.skipped_positions.clone())),
            }
        }
        out
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Frames per cycle of ticks and frames: the cycle is `1 / gcd(fps, hz)` seconds.
pub fn cycle_frames(fps_milli: u64, hz: u32) -> Option<u64> {
    let g = gcd(fps_milli, hz as u64 * 1000);
    let n = fps_milli / g;
    (n <= 1000).then_some(n)
}

fn tick_time(hz: u32, k: u64) -> Ns {
    let hz = hz as u64;
    (k / hz) * NS_PER_S + ((k % hz) * NS_PER_S) / hz
}

/// The start shifts: midpoints of `n` equal slices of one tick, so no shift sits exactly on a
/// boundary between showing and skipping.
pub fn shifts(hz: u32, n: u32) -> Vec<Ns> {
    let tick = tick_time(hz, 1) as u128;
    (0..n as u128)
        .map(|i| ((2 * i + 1) * tick / (2 * n as u128)) as Ns)
        .collect()
}

/// The seeds' analysis (Etsion Section 5), for a player that checks at every tick: frame `k` is
/// shown when a tick falls in `[t_k, t_k + F/2]`. Returns the shown count.
pub fn analytic_shown(fps_milli: u64, hz: u32, shift: Ns, frames: u64) -> u64 {
    let start = first_frame(hz, shift);
    let mut shown = 0;
    for k in 0..frames {
        let t = start + ((k as u128 * 1_000_000_000_000u128) / fps_milli as u128) as Ns;
        // First tick at or after t.
        let idx = ((t as u128 * hz as u128).div_ceil(NS_PER_S as u128)) as u64;
        let mut tick = tick_time(hz, idx);
        if tick < t {
            tick = tick_time(hz, idx + 1);
        }
        if ((tick - t) as u128) * 2 * fps_milli as u128 <= 1_000_000_000_000u128 {
            shown += 1;
        }
    }
    shown
}

/// The first frame's display time for a shift: a few ticks in (so the player is already polling),
/// `shift` before a tick.
pub fn first_frame(hz: u32, shift: Ns) -> Ns {
    let lead_ticks = (20_000_000u128 * hz as u128).div_ceil(NS_PER_S as u128) as u64 + 1;
    tick_time(hz, lead_ticks) - shift
}

impl FramesConfig {
    /// The simulated run for one shift.
    pub fn run_config(&self, shift: Ns) -> RunConfig {
        let start = first_frame(self.hz, shift);
        let clip = ((self.frames as u128 * 1_000_000_000_000u128) / self.fps_milli as u128) as Ns;
        let poll = match self.poll {
            Poll::Every(p) => p,
            Poll::PerFrame => 0,
        };
        let mut player = TaskSpec::new(
            "player",
            "player",
            Behaviour::Player {
                fps_milli: self.fps_milli,
                poll: self.poll,
                work: self.work,
                frames: Some(self.frames),
                start,
                server: None,
                decoder: None,
            },
        );
        player.priority = 50;
        let mut tasks = vec![player];
        tasks.extend(self.background.iter().cloned());
        RunConfig {
            hz: self.hz,
            quantum: self.quantum,
            policy: self.policy,
            timer: self.timer,
            duration: start + clip + poll + 2 * tick_time(self.hz, 1) + 1_000_000,
            seed: self.seed,
            costs: self.costs,
            tasks,
            max_events: self.max_events,
            ..RunConfig::default()
        }
    }

    pub fn validate(&self) -> Result<(), SimError> {
        if self.frames == 0 {
            return Err(SimError::invalid("--frames", "must be at least 1"));
        }
        if self.shifts == 0 || self.shifts > 100_000 {
            return Err(SimError::invalid(
                "--shifts",
                format!("{}: give 1 to 100000 start shifts", self.shifts),
            ));
        }
        let probe = self.run_config(tick_time(self.hz.max(1), 1) / 2);
        probe.validate()?;
        let total = probe.estimate_events().saturating_mul(self.shifts as u64);
        if total > self.max_events {
            return Err(SimError::invalid(
                "--frames",
                format!(
                    "{} shifts of {} frames would process about {total} events, above the limit of {}; use fewer --frames or --shifts, or raise --max-events",
                    self.shifts, self.frames, self.max_events
                ),
            ));
        }
        Ok(())
    }
}

/// Run the study: one simulation per start shift.
pub fn study(cfg: &FramesConfig, control: &Control) -> Result<FramesResult, SimError> {
    cfg.validate()?;
    let cycle = cycle_frames(cfg.fps_milli, cfg.hz);
    let mut out = Vec::new();
    let mut interrupted = false;
    for shift in shifts(cfg.hz, cfg.shifts) {
        let run = simulate(&cfg.run_config(shift), control)?;
        let p = &run.tasks[0].stats;
        let clip_s = cfg.frames as f64 * 1000.0 / cfg.fps_milli as f64;
        let mut positions: Vec<u64> = match cycle {
            Some(n) => p.skipped_frames.iter().map(|k| k % n).collect(),
            None => Vec::new(),
        };
        positions.sort_unstable();
        positions.dedup();
        out.push(ShiftResult {
            shift_ns: shift,
            shown: p.frames_shown,
            skipped: p.frames_skipped,
            achieved_fps: p.frames_shown as f64 / clip_s,
            skipped_positions: positions,
            lateness: p.frame_lateness.as_deref().cloned().unwrap_or_default(),
            events: run.events,
            simulated_ns: run.simulated_ns,
        });
        if run.interrupted {
            interrupted = true;
            break;
        }
    }
    Ok(FramesResult {
        config: cfg.clone(),
        cycle_frames: cycle,
        shifts: out,
        interrupted,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cycles_match_the_seed() {
        assert_eq!(cycle_frames(60_000, 100), Some(3)); // 50 ms: 3 frames, 5 ticks
        assert_eq!(cycle_frames(50_000, 50), Some(1));
        assert_eq!(cycle_frames(25_000, 1000), Some(1));
    }

    #[test]
    fn analytic_windows_are_etsions() {
        // Shift in 8 1/3 - 10 ms skips frame 1 of 3; 5 - 6 2/3 frame 2; 1 2/3 - 3 1/3 frame 3.
        let ms = |x: f64| (x * 1e6) as Ns;
        for (shift, skips) in [
            (ms(9.0), true),
            (ms(5.8), true),
            (ms(2.5), true),
            (ms(0.8), false),
            (ms(4.0), false),
            (ms(7.5), false),
        ] {
            let shown = analytic_shown(60_000, 100, shift, 300);
            assert_eq!(shown < 300, skips, "shift {shift}: shown {shown}");
            if skips {
                assert_eq!(shown, 200, "one frame in three skipped");
            }
        }
    }

    #[test]
    fn shifts_are_midpoints() {
        let s = shifts(100, 4);
        assert_eq!(s, vec![1_250_000, 3_750_000, 6_250_000, 8_750_000]);
    }
}
