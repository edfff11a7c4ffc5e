//! Periodic tasks (KURT's `rt_suspend`, SPEC section 4's `Periodic`).
//!
//! A task calls [`Periodic::wait_next_period`] in a loop. Standalone ([`Periodic::new`]), the process
//! keeps its own period: release `k` is at `first + k * period` on CLOCK_MONOTONIC, where `first` is
//! the next multiple of the period plus the phase (so separate processes with one period and
//! different phases never collide), and each wait sleeps until a margin before the release (auto,
//! from the wake-ups seen) and spins to it. As a client of a plan ([`Periodic::attach`]), the
//! dispatcher wakes the process ahead of each release through the [`channel`] and the process spins
//! to the instant itself.
//!
//! A release whose time had already passed when the task asked for it (its work overran) is counted
//! as missed and skipped: the wait returns at the first release still ahead.

pub mod channel;

use punctual_stats::Recorder;
use punctual_time::{hybrid_until, AutoMargin, Clock, SystemClock};
use std::sync::Arc;

/// Sleep until the release with `clock_nanosleep` only, without spinning (standalone).
pub const FLAG_NO_SPIN: u32 = 1;
/// Run the calling thread under SCHED_FIFO (priority [`REALTIME_PRIORITY`]) with memory locked.
pub const FLAG_REALTIME: u32 = 2;
pub const ALL_FLAGS: u32 = FLAG_NO_SPIN | FLAG_REALTIME;
pub const REALTIME_PRIORITY: u32 = 80;

/// How long [`Periodic::attach`] waits for the channel to appear.
pub const ATTACH_TIMEOUT_NS: u64 = 10_000_000_000;
/// The first standalone release is at least this far ahead, so it is not missed at once.
const FIRST_LEAD_NS: u64 = 1_000_000;

#[derive(Debug, thiserror::Error)]
pub enum PeriodicError {
    #[error("period must be more than zero")]
    ZeroPeriod,
    #[error("phase {phase} ns must be less than the period {period} ns")]
    PhaseBeyondPeriod { phase: u64, period: u64 },
    #[error("unknown flags {0:#x} (known: NO_SPIN = 1, REALTIME = 2)")]
    Flags(u32),
    #[error("{0}")]
    Channel(#[from] channel::ChannelError),
    #[error("{0}")]
    Setup(#[from] punctual_rt::RtError),
}

impl PeriodicError {
    pub fn errno(&self) -> i32 {
        match self {
            PeriodicError::ZeroPeriod
            | PeriodicError::PhaseBeyondPeriod { .. }
            | PeriodicError::Flags(_) => libc::EINVAL,
            PeriodicError::Channel(c) => c.errno(),
            PeriodicError::Setup(punctual_rt::RtError::Invalid(_)) => libc::EINVAL,
            PeriodicError::Setup(_) => libc::EPERM,
        }
    }
}

/// One release, as `wait_next_period` returns it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Release {
    /// The release instant (CLOCK_MONOTONIC, ns).
    pub target: u64,
    /// How late the task runs after it.
    pub lateness: u64,
    /// Releases skipped since the previous wait because their time had passed.
    pub missed: u64,
    /// The kernel (or the dispatcher's wake) came after the instant itself: spinning could not help.
    pub woke_late: bool,
    /// The task's first clock read after its wait in the kernel returned, before any spin
    /// (CLOCK_MONOTONIC, ns): up to there since it asked, it was asleep or on its way in and out.
    pub woke: u64,
}

enum Mode {
    Own {
        period: u64,
        next: u64,
        margin: AutoMargin,
        spin: bool,
    },
    Client {
        chan: channel::Client,
        margin_hint: u64,
    },
}

/// A periodic task. Not thread-safe: one per thread.
pub struct Periodic {
    clock: Arc<dyn Clock>,
    mode: Mode,
    rec: Recorder,
    releases: u64,
    flags: u32,
    _rt: Option<(
        punctual_rt::SchedGuard,
        Option<punctual_rt::memlock::MlockGuard>,
    )>,
}

fn check_flags(flags: u32) -> Result<(), PeriodicError> {
    if flags & !ALL_FLAGS != 0 {
        return Err(PeriodicError::Flags(flags & !ALL_FLAGS));
    }
    Ok(())
}

fn realtime(
    flags: u32,
) -> Result<
    Option<(
        punctual_rt::SchedGuard,
        Option<punctual_rt::memlock::MlockGuard>,
    )>,
    PeriodicError,
> {
    if flags & FLAG_REALTIME == 0 {
        return Ok(None);
    }
    let g = punctual_rt::SchedGuard::set(punctual_rt::SchedParams {
        policy: punctual_rt::Policy::Fifo,
        priority: REALTIME_PRIORITY,
    })?;
    Ok(Some((g, punctual_rt::memlock::MlockGuard::lock_all().ok())))
}

impl Periodic {
    /// A task that keeps its own period on CLOCK_MONOTONIC.
    pub fn new(period: u64, phase: u64, flags: u32) -> Result<Self, PeriodicError> {
        Self::with_clock(Arc::new(SystemClock::monotonic()), period, phase, flags)
    }

    /// As [`Periodic::new`], on any clock (tests use `ManualClock`).
    pub fn with_clock(
        clock: Arc<dyn Clock>,
        period: u64,
        phase: u64,
        flags: u32,
    ) -> Result<Self, PeriodicError> {
        if period == 0 {
            return Err(PeriodicError::ZeroPeriod);
        }
        if phase >= period {
            return Err(PeriodicError::PhaseBeyondPeriod { phase, period });
        }
        check_flags(flags)?;
        let rt = realtime(flags)?;
        let earliest = clock.now() + FIRST_LEAD_NS;
        // The first multiple of the period (plus phase) at or after `earliest`.
        let base = earliest.saturating_sub(phase).div_ceil(period) * period;
        let next = base + phase;
        Ok(Periodic {
            clock,
            mode: Mode::Own {
                period,
                next,
                margin: AutoMargin::for_interval(period),
                spin: flags & FLAG_NO_SPIN == 0,
            },
            rec: Recorder::new(),
            releases: 0,
            flags,
            _rt: rt,
        })
    }

    /// A task released by a running plan's `wake` action on `channel`. Waits up to 10 s for the
    /// channel to appear, in root's channel directory or this user's ([`channel::client_dirs`]).
    pub fn attach(channel: &str, flags: u32) -> Result<Self, PeriodicError> {
        Self::attach_any(&channel::client_dirs(), channel, flags, ATTACH_TIMEOUT_NS)
    }

    pub fn attach_in(
        dir: &std::path::Path,
        channel: &str,
        flags: u32,
        timeout_ns: u64,
    ) -> Result<Self, PeriodicError> {
        Self::attach_any(&[dir.to_path_buf()], channel, flags, timeout_ns)
    }

    fn attach_any(
        dirs: &[std::path::PathBuf],
        channel: &str,
        flags: u32,
        timeout_ns: u64,
    ) -> Result<Self, PeriodicError> {
        check_flags(flags)?;
        if flags & FLAG_NO_SPIN != 0 {
            return Err(PeriodicError::Flags(FLAG_NO_SPIN));
        }
        let rt = realtime(flags)?;
        let chan = channel::Client::attach_any(dirs, channel, timeout_ns)?;
        Ok(Periodic {
            clock: Arc::new(SystemClock::monotonic()),
            mode: Mode::Client {
                chan,
                margin_hint: 0,
            },
            rec: Recorder::new(),
            releases: 0,
            flags,
            _rt: rt,
        })
    }

    /// The period (0 for a client of an event-driven channel).
    pub fn period(&self) -> u64 {
        match &self.mode {
            Mode::Own { period, .. } => *period,
            Mode::Client { chan, .. } => chan.period(),
        }
    }

    /// The instant of the next release (standalone only).
    pub fn next_release(&self) -> Option<u64> {
        match &self.mode {
            Mode::Own { next, .. } => Some(*next),
            Mode::Client { .. } => None,
        }
    }

    /// The current spin margin: standalone, the auto margin; as a client, how early the last wake came.
    pub fn margin(&self) -> u64 {
        match &self.mode {
            Mode::Own { margin, spin, .. } => {
                if *spin {
                    margin.margin()
                } else {
                    0
                }
            }
            Mode::Client { margin_hint, .. } => *margin_hint,
        }
    }

    /// Block until the next release and return how it went.
    pub fn wait_next_period(&mut self) -> Result<Release, PeriodicError> {
        let r = match &mut self.mode {
            Mode::Own {
                period,
                next,
                margin,
                spin,
            } => {
                let p = *period;
                // Releases already past when the task asks: missed, skipped.
                let now = self.clock.now();
                let mut missed = 0;
                if now > *next {
                    missed = (now - *next) / p + 1;
                    *next += missed * p;
                }
                let target = *next;
                let m = if *spin { margin.margin() } else { 0 };
                let w = hybrid_until(&*self.clock, target, m);
                if *spin && w.woke > w.sleep_to {
                    margin.observe(w.sleep_latency());
                }
                *next += p;
                Release {
                    target,
                    lateness: w.lateness(),
                    missed,
                    woke_late: w.woke_late(),
                    woke: w.woke,
                }
            }
            Mode::Client { chan, margin_hint } => {
                let clock = self.clock.clone();
                let mut missed = 0;
                let rel = loop {
                    let now = clock.now();
                    let r = chan.next(&|| clock.now())?;
                    missed += r.missed;
                    if r.target < now {
                        // Its time had passed before we asked: missed, wait for the next one.
                        missed += 1;
                        chan.ack(
                            r.seq,
                            now - r.target,
                            None,
                            true,
                            self.rec.missed_periods() + missed,
                            None,
                        );
                        continue;
                    }
                    break r;
                };
                let woke = clock.now();
                *margin_hint = rel.target.saturating_sub(woke);
                let mut done = woke;
                let mut spin_read = None;
                // `next` refused releases beyond the channel's lead, so this spin is bounded; it
                // also stops the moment the plan ends.
                while done < rel.target {
                    if chan.ended() {
                        return Err(channel::ChannelError::Ended(chan.name().to_string()).into());
                    }
                    std::hint::spin_loop();
                    spin_read = Some(done);
                    done = clock.now();
                }
                let lateness = done - rel.target;
                let woke_late = woke > rel.target;
                chan.ack(
                    rel.seq,
                    lateness,
                    rel.issued.map(|i| woke.saturating_sub(i)),
                    woke_late,
                    self.rec.missed_periods() + missed,
                    spin_read,
                );
                Release {
                    target: rel.target,
                    lateness,
                    missed,
                    woke_late,
                    woke,
                }
            }
        };
        self.releases += 1;
        self.rec.record(r.lateness);
        self.rec.add_missed(r.missed);
        if r.woke_late {
            self.rec.add_woke_late();
        }
        Ok(r)
    }

    /// Releases taken so far.
    pub fn releases(&self) -> u64 {
        self.releases
    }

    pub fn recorder(&self) -> &Recorder {
        &self.rec
    }

    /// The task's statistics as a `punctual.result/1` series (kind `lateness`).
    pub fn series(&self, name: &str) -> punctual_result::Series {
        let mode = match &self.mode {
            Mode::Own { .. } => "standalone",
            Mode::Client { .. } => "wake client",
        };
        let mut s = punctual_result::Series::from_recorder(
            name,
            punctual_result::doc::kind::LATENESS,
            None,
            &self.rec,
        )
        .with("releases", self.releases)
        .with("period_ns", self.period())
        .with("mode", mode)
        .with("flags", self.flags);
        if let Mode::Own {
            spin: true, margin, ..
        } = &self.mode
        {
            s = s.with("spin_margin_ns", margin.margin());
        }
        if let Mode::Client { chan, .. } = &self.mode {
            s = s.with("channel", chan.name());
        }
        s
    }

    /// [`Periodic::series`] as JSON text.
    pub fn stats_json(&self, name: &str) -> String {
        serde_json::to_string(&self.series(name)).expect("a series always serialises")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use punctual_time::ManualClock;

    #[test]
    fn releases_are_aligned_to_the_period_plus_phase_and_never_drift() {
        let clock = ManualClock::with_wake_latency(5_123_456, 50, |_| 20_000);
        let mut p = Periodic::with_clock(Arc::new(clock.clone()), 1_000_000, 250_000, 0).unwrap();
        let first = p.next_release().unwrap();
        assert_eq!(first % 1_000_000, 250_000);
        assert!(first >= 5_123_456 + FIRST_LEAD_NS);
        for k in 0..50u64 {
            let r = p.wait_next_period().unwrap();
            assert_eq!(r.target, first + k * 1_000_000);
            assert_eq!(r.missed, 0);
            assert!(r.lateness < 1_000, "release {k}: {r:?}"); // spun to the instant
            clock.advance(100_000); // work
        }
        assert_eq!(p.releases(), 50);
        assert_eq!(p.recorder().count(), 50);
    }

    #[test]
    fn an_overrun_counts_the_passed_releases_as_missed_and_skips_them() {
        let clock = ManualClock::new(0, 10);
        let mut p = Periodic::with_clock(Arc::new(clock.clone()), 1_000_000, 0, 0).unwrap();
        let a = p.wait_next_period().unwrap();
        clock.advance(3_500_000); // work overran three and a half periods
        let b = p.wait_next_period().unwrap();
        assert_eq!(b.missed, 3);
        assert_eq!(b.target, a.target + 4_000_000);
        assert_eq!(p.recorder().missed_periods(), 3);
    }

    #[test]
    fn no_spin_sleeps_plainly_and_reports_the_kernel_lateness() {
        let clock = ManualClock::with_wake_latency(0, 10, |_| 40_000);
        let mut p =
            Periodic::with_clock(Arc::new(clock.clone()), 1_000_000, 0, FLAG_NO_SPIN).unwrap();
        let r = p.wait_next_period().unwrap();
        assert!(r.woke_late);
        assert!((40_000..41_000).contains(&r.lateness), "{r:?}");
        // Woken by the kernel 40 us late (and a clock read's step), done at that read.
        assert_eq!(r.woke, r.target + r.lateness, "{r:?}");
        assert_eq!(p.margin(), 0);
    }

    #[test]
    fn bad_arguments_are_refused_with_einval() {
        assert_eq!(Periodic::new(0, 0, 0).err().unwrap().errno(), libc::EINVAL);
        assert_eq!(
            Periodic::new(10, 10, 0).err().unwrap().errno(),
            libc::EINVAL
        );
        assert_eq!(
            Periodic::new(10, 0, 64).err().unwrap().errno(),
            libc::EINVAL
        );
    }

    #[test]
    fn stats_are_a_result_series() {
        let clock = ManualClock::new(0, 10);
        let mut p = Periodic::with_clock(Arc::new(clock), 1_000_000, 0, 0).unwrap();
        for _ in 0..3 {
            p.wait_next_period().unwrap();
        }
        let v: serde_json::Value = serde_json::from_str(&p.stats_json("t")).unwrap();
        assert_eq!(v["count"], 3);
        assert_eq!(v["kind"], "lateness");
        assert_eq!(v["releases"], 3);
        assert!(
            v["percentiles"]["99"].is_u64()
                && v["within"]["10us"].is_number()
                && v["histogram"]["data"].is_string()
        );
    }

    #[test]
    fn a_client_is_released_by_a_server_and_spins_to_the_instant() {
        let dir = tempfile::tempdir().unwrap();
        let mut server = channel::Server::create(dir.path(), "pc", 20_000_000).unwrap();
        let d = dir.path().to_path_buf();
        let t = std::thread::spawn(move || {
            let mut p = Periodic::attach_in(&d, "pc", 0, 1_000_000_000).unwrap();
            let mut out = Vec::new();
            loop {
                match p.wait_next_period() {
                    Ok(r) => out.push(r),
                    Err(PeriodicError::Channel(channel::ChannelError::Ended(_))) => {
                        return (out, p.recorder().count())
                    }
                    Err(e) => panic!("{e}"),
                }
            }
        });
        while server.client().is_none() {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let clock = SystemClock::monotonic();
        let mut acks = 0;
        let mut targets = Vec::new();
        // Each release 5 ms ahead (the dispatcher's lead), the next only once the client has
        // taken this one: a client held off its CPU longer than a period would miss one, and on
        // a loaded test machine a normal-class thread can be (a fixed 20 ms spacing missed one).
        for _ in 0..5 {
            let target = clock.now() + 5_000_000;
            server.release(target, clock.now());
            targets.push(target);
            let t0 = clock.now();
            loop {
                clock.sleep_until(clock.now().max(target) + 1_000_000);
                match server.collect() {
                    Some(channel::Ack::Done { .. }) => break acks += 1,
                    _ if clock.now() - t0 > 30_000_000_000 => panic!("no ack in 30 s"),
                    _ => server.repend(),
                }
            }
        }
        server.end();
        let (out, count) = t.join().unwrap();
        assert_eq!(out.len(), 5);
        assert_eq!(count, 5);
        assert_eq!(acks, 5);
        for (r, &target) in out.iter().zip(&targets) {
            assert_eq!(r.target, target);
            assert!(!r.woke_late || r.lateness > 0);
            // Woken before its spin ended, late exactly when after the instant.
            assert!(r.woke <= r.target + r.lateness, "{r:?}");
            assert_eq!(r.woke_late, r.woke > r.target, "{r:?}");
        }
    }
}
