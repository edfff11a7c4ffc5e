//! Timeline gaps: a thread per CPU reads the time-stamp counter in a tight loop and records every
//! step between two reads longer than a threshold (the CPU was taken away: an interrupt, a
//! hypervisor exit, a preemption). It is oslat's method; Etsion's "timeline gaps". The gaps are
//! attributed with the per-CPU deltas of /proc/interrupts over the run, and the timer tick is found
//! by folding the gaps' start times on the tick period: tick gaps all fall at one phase, so the
//! gaps at the peak phase give the cost of one tick (the modern form of Etsion Table 1).

use crate::tsc::{self, Calibration};
use crate::BenchError;
use punctual_result::Fallback;
use punctual_rt::{setup_current_thread, SchedParams, ThreadRequest};
use punctual_stats::Recorder;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};

#[derive(Clone, Debug)]
pub struct GapsConfig {
    pub cpus: Vec<usize>,
    pub duration_ns: u64,
    /// Steps longer than this are gaps.
    pub threshold_ns: u64,
    pub sched: SchedParams,
    /// The timer tick rate (CONFIG_HZ), if known; otherwise estimated from the local timer
    /// interrupts counted during the run.
    pub hz: Option<u32>,
}

/// Gap start times kept per CPU for the tick analysis (the histogram keeps every gap regardless).
const KEEP: usize = 1 << 18;
/// Phase bins over one tick period.
const PHASE_BINS: usize = 64;

pub struct CpuGaps {
    pub cpu: usize,
    /// Gap durations, ns.
    pub gaps: Recorder,
    /// Loop iterations (clock reads).
    pub reads: u64,
    /// Smallest step between two reads, ns (the loop's own cost).
    pub min_step_ns: u64,
    pub wall_ns: u64,
    /// When the loop began and ended, CLOCK_MONOTONIC ns.
    pub began_ns: u64,
    pub ended_ns: u64,
    /// Gaps as (start, duration), ns on CLOCK_MONOTONIC (the first 262,144).
    pub starts: Vec<(u64, u64)>,
    /// Time inside gaps, ns.
    pub lost_ns: u64,
    /// Interrupts taken on this CPU during the run, by source (/proc/interrupts label).
    pub interrupts: BTreeMap<String, u64>,
    pub tick: Option<TickEstimate>,
    /// Interruptions at other timer rates ([`other_periodic`]).
    pub periodic: Vec<TickEstimate>,
    pub fallback: Option<Fallback>,
}

impl CpuGaps {
    pub fn gaps_per_second(&self) -> f64 {
        per_second(self.gaps.count(), self.wall_ns)
    }
    /// Gaps longer than `ns`.
    pub fn count_above(&self, ns: u64) -> u64 {
        let n = self.gaps.count();
        n - (self.gaps.fraction_at_or_below(ns) * n as f64).round() as u64
    }

    pub fn lost_fraction(&self) -> f64 {
        if self.wall_ns == 0 {
            0.0
        } else {
            self.lost_ns as f64 / self.wall_ns as f64
        }
    }
}

fn per_second(n: u64, ns: u64) -> f64 {
    if ns == 0 {
        0.0
    } else {
        n as f64 * 1e9 / ns as f64
    }
}

/// The gaps that line up with the timer tick.
#[derive(Clone, Debug, PartialEq)]
pub struct TickEstimate {
    pub hz: u32,
    /// Ticks seen: periods with a gap in the peak phase window.
    pub gaps: u64,
    pub per_second: f64,
    /// Those periods over all the periods watched (at most 1).
    pub share: f64,
    /// Median time one tick took from the loop (its gaps in the window added up).
    pub median_ns: u64,
    /// Mean and population standard deviation of those gaps, leaving out the ones longer than
    /// [`TICK_TRIM`] times the median (a tick that coincided with something longer: a preemption,
    /// the hypervisor).
    pub mean_ns: u64,
    pub stddev_ns: u64,
    /// Gaps left out of the mean.
    pub trimmed: u64,
}

/// Tick-phase gaps longer than this many medians are not counted as ticks in the mean.
pub const TICK_TRIM: u64 = 4;

pub struct GapsOutcome {
    pub cpus: Vec<CpuGaps>,
    pub calibration: Calibration,
}

/// Per-CPU counts of every /proc/interrupts line: label -> counts by CPU index.
pub fn read_interrupts() -> BTreeMap<String, Vec<u64>> {
    parse_interrupts(&std::fs::read_to_string("/proc/interrupts").unwrap_or_default())
}

pub fn parse_interrupts(text: &str) -> BTreeMap<String, Vec<u64>> {
    let mut lines = text.lines();
    let ncpu = lines
        .next()
        .map(|h| h.split_whitespace().count())
        .unwrap_or(0);
    let mut out = BTreeMap::new();
    for l in lines {
        let Some((irq, rest)) = l.split_once(':') else {
            continue;
        };
        let mut counts = Vec::with_capacity(ncpu);
        let mut words = rest.split_whitespace().peekable();
        while counts.len() < ncpu {
            match words.peek().and_then(|w| w.parse::<u64>().ok()) {
                Some(n) => {
                    counts.push(n);
                    words.next();
                }
                None => break,
            }
        }
        if counts.len() != ncpu {
            continue; // ERR:, MIS: carry one total, not per-CPU counts
        }
        let desc: Vec<&str> = words.collect();
        let irq = irq.trim();
        // Numbered IRQs are named by their device (last word); named ones keep their description.
        let label = if irq.chars().all(|c| c.is_ascii_digit()) {
            format!("{irq} {}", desc.last().copied().unwrap_or(""))
        } else {
            format!("{irq} ({})", desc.join(" "))
        };
        out.insert(label, counts);
    }
    out
}

fn interrupt_deltas(
    before: &BTreeMap<String, Vec<u64>>,
    after: &BTreeMap<String, Vec<u64>>,
    cpu: usize,
) -> BTreeMap<String, u64> {
    let mut d = BTreeMap::new();
    for (k, a) in after {
        let b = before.get(k).and_then(|v| v.get(cpu)).copied().unwrap_or(0);
        let n = a.get(cpu).copied().unwrap_or(0).saturating_sub(b);
        if n > 0 {
            d.insert(k.clone(), n);
        }
    }
    d
}

/// Windows the floor is counted in (SPEC section 9: KURT's 10 ms period).
pub const FLOOR_WINDOW_NS: u64 = 10_000_000;
/// How long the floor is watched before a row or run.
pub const FLOOR_WATCH_NS: u64 = 1_000_000_000;

/// The floor: over every CPU watched, the share of `window`-long windows (from each loop's start)
/// that hold an interruption longer than `bound`. A release falling in such a window can be late
/// by more than `bound` whatever the method, so a result above `1 - floor` within `bound` is what
/// is left to win. `None` when no whole window was watched. Gaps are the ones kept (`starts`):
/// measure with a threshold at or below `bound`.
pub fn floor_share(out: &GapsOutcome, window: u64, bound: u64) -> Option<f64> {
    let window = window.max(1);
    let (mut hit, mut all) = (0u64, 0u64);
    for c in &out.cpus {
        let n = c.ended_ns.saturating_sub(c.began_ns) / window;
        if n == 0 {
            continue;
        }
        let mut marked = vec![false; n as usize];
        for &(start, dur) in c.starts.iter().filter(|g| g.1 > bound) {
            let first = start.saturating_sub(c.began_ns) / window;
            let last = (start + dur).saturating_sub(c.began_ns) / window;
            for w in first..=last.min(n - 1) {
                if let Some(m) = marked.get_mut(w as usize) {
                    *m = true;
                }
            }
        }
        hit += marked.iter().filter(|m| **m).count() as u64;
        all += n;
    }
    (all > 0).then(|| hit as f64 / all as f64)
}

/// The floor for releases at any phase: over every CPU watched, the share of instants at which a
/// release would be later than `bound` whatever the method (inside an interruption, more than
/// `bound` before its end): the sum over gaps of `duration - bound`, over the time watched. Where
/// every window holds an interruption (a timer tick of tens of microseconds), this is the floor
/// that still tells something; a release placed away from the interruptions' phase beats it.
pub fn floor_instants(out: &GapsOutcome, bound: u64) -> Option<f64> {
    let (mut lost, mut all) = (0u64, 0u64);
    for c in &out.cpus {
        all += c.ended_ns.saturating_sub(c.began_ns);
        lost += c
            .starts
            .iter()
            .map(|&(_, d)| d.saturating_sub(bound))
            .sum::<u64>();
    }
    (all > 0).then(|| (lost as f64 / all as f64).min(1.0))
}

/// What [`measure_floor`] found.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Floor {
    /// [`floor_share`]: windows holding an interruption over the bound (SPEC section 9's).
    pub windows: Option<f64>,
    /// [`floor_instants`]: instants a release would be late at.
    pub instants: Option<f64>,
    /// A periodic interruption besides the tick ([`other_periodic`]) on the CPUs watched.
    pub stop: Option<PeriodicStop>,
}

/// The periodic interruption besides the tick that most of the CPUs watched showed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PeriodicStop {
    pub hz: u32,
    /// On how many of the CPUs watched.
    pub cpus: usize,
    /// Share of its periods it interrupted, the lowest of those CPUs'.
    pub share: f64,
    /// Its median length, the longest of those CPUs'.
    pub median_ns: u64,
    /// No interrupt the guest counted on those CPUs ran at half that rate or more (the local
    /// timer: beyond the tick's): the guest had no event to cause it.
    pub guest_silent: bool,
}

/// Whether no interrupt counter of `c` (the local timer's beyond its tick) ran at half of `hz` or
/// more over the watch; `false` when the tick's rate is not known.
fn guest_silent_at(c: &CpuGaps, hz: u32) -> bool {
    let Some(tick) = c.tick.as_ref().map(|t| t.hz) else {
        return false;
    };
    let half = hz as f64 / 2.0;
    c.interrupts.iter().all(|(src, &n)| {
        let rate = per_second(n, c.wall_ns);
        if src.starts_with("LOC") {
            rate < tick as f64 + half
        } else {
            rate < half
        }
    })
}

impl PeriodicStop {
    pub fn period_ns(&self) -> u64 {
        1_000_000_000 / self.hz.max(1) as u64
    }

    /// The rate most CPUs showed (ties: the higher rate), summed up over those CPUs.
    pub fn of(cpus: &[CpuGaps]) -> Option<PeriodicStop> {
        let mut by: BTreeMap<u32, PeriodicStop> = BTreeMap::new();
        for c in cpus {
            for p in &c.periodic {
                let e = by.entry(p.hz).or_insert(PeriodicStop {
                    hz: p.hz,
                    cpus: 0,
                    share: 1.0,
                    median_ns: 0,
                    guest_silent: true,
                });
                e.cpus += 1;
                e.share = e.share.min(p.share);
                e.median_ns = e.median_ns.max(p.median_ns);
                e.guest_silent &= guest_silent_at(c, p.hz);
            }
        }
        by.into_values().max_by_key(|s| (s.cpus, s.hz))
    }

    /// "a 26.9 us stop every 10.0 ms (99.8 % of periods, 2 CPUs), with no guest interrupt at
    /// that rate: the host's".
    pub fn describe(&self) -> String {
        format!(
            "a {} stop every {} ({:.1} % of periods, {} CPU{}), {}",
            punctual_time::format_ns(self.median_ns),
            punctual_time::format_ns(self.period_ns()),
            self.share * 100.0,
            self.cpus,
            if self.cpus == 1 { "" } else { "s" },
            if self.guest_silent {
                "with no guest interrupt at that rate: the host's (neither a trace nor the steal \
                 counter sees it)"
            } else {
                "with a guest interrupt counter at that rate or more (see bench gaps)"
            }
        )
    }

    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "period_ns": self.period_ns(),
            "median_ns": self.median_ns,
            "share": self.share,
            "cpus": self.cpus,
            "guest_silent": self.guest_silent,
        })
    }
}

/// Watch `cpus` with the gaps loop at `sched` for `duration` and return the floor for `bound`
/// in [`FLOOR_WINDOW_NS`] windows, and for releases at any instant.
pub fn measure_floor(
    cpus: &[usize],
    duration: u64,
    bound: u64,
    sched: SchedParams,
    stop: &AtomicBool,
) -> Result<Floor, BenchError> {
    let out = run(
        &GapsConfig {
            cpus: cpus.to_vec(),
            duration_ns: duration,
            threshold_ns: bound,
            sched,
            hz: None,
        },
        stop,
    )?;
    Ok(Floor {
        windows: floor_share(&out, FLOOR_WINDOW_NS, bound),
        instants: floor_instants(&out, bound),
        stop: PeriodicStop::of(&out.cpus),
    })
}

/// Find the tick among gaps given as (start ns, duration ns): fold the starts on the tick period and
/// take the fullest phase bin with its neighbours. A tick can leave more than one gap (the interrupt,
/// then its soft-interrupt work), so the gaps of one period inside that window are added up: that
/// sum is what one tick cost the loop. `None` when no phase stands out (fewer than a third of the
/// expected ticks, or no clear peak) among all the gaps, nor among those of 5 us or more.
pub fn tick_estimate(gaps: &[(u64, u64)], hz: u32, wall_ns: u64) -> Option<TickEstimate> {
    periodic_estimate(gaps, hz, wall_ns, 1.0 / 3.0, false).or_else(|| {
        // Thousands of 1-3 us gaps a second (seen here: 10,000 a second on a quiet VM) can hide
        // a tick's peak among all gaps; its own gaps are longer.
        let long: Vec<(u64, u64)> = gaps
            .iter()
            .copied()
            .filter(|&(_, d)| d >= OTHER_MIN_GAP_NS)
            .collect();
        periodic_estimate(&long, hz, wall_ns, 1.0 / 3.0, false)
    })
}

/// The timer tick rates Linux is built with (CONFIG_HZ): the guest's tick is one, and the others
/// are looked for besides it, since a hypervisor's host kernel has one too. Measured on this project's KVM guest: a
/// stop of 10-160 us every 10 ms on both vCPUs at once, with no guest event and the steal counter
/// unmoved (docs/benchmarks.md, 2026-11-29).
pub const HZ_RATES: [u32; 4] = [100, 250, 300, 1000];

/// Share of its periods a rate other than the tick must interrupt to be reported: above one half,
/// so that the tick (or a source at another listed rate) folded on a neighbouring rate, which
/// lands at one phase in at most every other period (4 ms ticks folded on 10 ms), is not taken
/// for a source of its own.
pub const OTHER_MIN_SHARE: f64 = 2.0 / 3.0;

/// Gaps shorter than this are left out of the search for other rates: a loop with a 1 us
/// threshold sees thousands a second (the tick's soft-interrupt work, cache misses), enough to put
/// one in every phase window of every rate.
pub const OTHER_MIN_GAP_NS: u64 = 5_000;

/// Periodic interruptions besides the tick: the gaps of at least [`OTHER_MIN_GAP_NS`] folded on
/// each of [`HZ_RATES`] but the tick's (`tick_hz`); a rate is kept when one phase of it holds a
/// gap in at least [`OTHER_MIN_SHARE`] of its periods. The tick is not set aside first: folded on
/// the other rates it falls at one phase in at most half of their periods, while setting aside its
/// phase would also take a source that shares it every other period. A source's phase may drift
/// against this clock (the host's clock is not the guest's): a few microseconds a second, within
/// one phase bin over a watch of seconds.
pub fn other_periodic(
    gaps: &[(u64, u64)],
    tick_hz: Option<u32>,
    wall_ns: u64,
) -> Vec<TickEstimate> {
    let long: Vec<(u64, u64)> = gaps
        .iter()
        .copied()
        .filter(|&(_, d)| d >= OTHER_MIN_GAP_NS)
        .collect();
    HZ_RATES
        .iter()
        .filter(|&&r| Some(r) != tick_hz)
        .filter_map(|&r| periodic_estimate(&long, r, wall_ns, OTHER_MIN_SHARE, true))
        .collect()
}

/// The tick rate behind a local timer's interrupt rate on a busy CPU: the largest rate Linux is
/// built with that the count reaches (it adds the CPU's other timers: 271 a second here at
/// CONFIG_HZ=250, which folded on 271 Hz found no tick and then found the tick as "another" rate);
/// the rate itself, rounded, when it is under all of them.
pub fn tick_rate_of(loc_per_second: f64) -> Option<u32> {
    let r = loc_per_second * 1.05;
    HZ_RATES
        .iter()
        .copied()
        .filter(|&h| h as f64 <= r)
        .max()
        .or_else(|| Some(loc_per_second.round() as u32).filter(|&h| h > 0))
}

fn phase_bin(start: u64, period: u64) -> usize {
    ((start % period) * PHASE_BINS as u64 / period) as usize
}

/// Whether `start` falls in the 3-bin window centred on bin `peak` of `period`.
fn in_window(start: u64, period: u64, peak: usize) -> bool {
    let b = phase_bin(start, period);
    b == peak || b == (peak + 1) % PHASE_BINS || (b + 1) % PHASE_BINS == peak
}

/// The centre bin of the 3-bin phase window, of the starts folded on `period`, that holds the most
/// gaps or (`by_periods`) a gap in the most periods, when it holds at least twice its uniform share
/// of the gaps. By periods, a tick that leaves two gaps a period does not outweigh a source present
/// in more periods; but with the thousands of 1-3 us gaps a second a 1 us threshold sees, every
/// window holds one in nearly every period, so the tick (all gaps kept) is found by count.
/// `gaps` in start order.
fn phase_peak(gaps: &[(u64, u64)], period: u64, by_periods: bool) -> Option<usize> {
    if period == 0 || gaps.is_empty() {
        return None;
    }
    let mut bins = [0u64; PHASE_BINS];
    let mut present = [0u64; PHASE_BINS];
    let mut last = [u64::MAX; PHASE_BINS];
    for &(s, _) in gaps {
        let b = phase_bin(s, period);
        bins[b] += 1;
        let k = s / period;
        for c in [(b + PHASE_BINS - 1) % PHASE_BINS, b, (b + 1) % PHASE_BINS] {
            if last[c] != k {
                last[c] = k;
                present[c] += 1;
            }
        }
    }
    let window =
        |c: usize| bins[(c + PHASE_BINS - 1) % PHASE_BINS] + bins[c] + bins[(c + 1) % PHASE_BINS];
    let peak = (0..PHASE_BINS).max_by_key(|&c| {
        if by_periods {
            (present[c], window(c))
        } else {
            (window(c), present[c])
        }
    })?;
    let uniform_share = 3.0 / PHASE_BINS as f64 * gaps.len() as f64;
    (window(peak) as f64 >= 2.0 * uniform_share).then_some(peak)
}

/// An interruption at `hz` among the gaps: [`tick_estimate`]'s method, kept when its phase
/// ([`phase_peak`], `by_periods`) holds a gap in at least `min_share` of the periods watched.
fn periodic_estimate(
    gaps: &[(u64, u64)],
    hz: u32,
    wall_ns: u64,
    min_share: f64,
    by_periods: bool,
) -> Option<TickEstimate> {
    if hz == 0 || gaps.is_empty() {
        return None;
    }
    let period = 1_000_000_000u64 / hz as u64;
    let peak = phase_peak(gaps, period, by_periods)?;
    // One total per period: the window may straddle a period boundary, so key on the period of
    // the window's centre.
    let centre = (peak as u64 * period + period / 2) / PHASE_BINS as u64;
    let mut per_tick: std::collections::BTreeMap<u64, u64> = std::collections::BTreeMap::new();
    for &(s, d) in gaps.iter().filter(|&&(s, _)| in_window(s, period, peak)) {
        let k = (s + period / 2).saturating_sub(centre) / period;
        *per_tick.entry(k).or_default() += d;
    }
    let expected_ticks = wall_ns as f64 * hz as f64 / 1e9;
    if (per_tick.len() as f64) < expected_ticks * min_share {
        return None;
    }
    let mut sorted: Vec<u64> = per_tick.into_values().collect();
    sorted.sort_unstable();
    let median_ns = sorted[(sorted.len() - 1) / 2];
    let kept: Vec<f64> = sorted
        .iter()
        .filter(|&&d| d <= median_ns * TICK_TRIM)
        .map(|&d| d as f64)
        .collect();
    let n = kept.len() as f64;
    let mean = kept.iter().sum::<f64>() / n;
    let var = kept.iter().map(|d| (d - mean).powi(2)).sum::<f64>() / n;
    Some(TickEstimate {
        trimmed: (sorted.len() - kept.len()) as u64,
        hz,
        gaps: sorted.len() as u64,
        per_second: per_second(sorted.len() as u64, wall_ns),
        share: (sorted.len() as f64 / expected_ticks.max(1.0)).min(1.0),
        median_ns,
        mean_ns: mean.round() as u64,
        stddev_ns: var.sqrt().round() as u64,
    })
}

struct Raw {
    gaps: Recorder,
    starts: Vec<(u64, u64)>,
    reads: u64,
    min_step: u64,
    lost: u64,
    t0: (u64, u64),
    t1: (u64, u64),
    fallback: Option<Fallback>,
}

/// The loop. Nothing in it allocates (the start-time buffer is preallocated and stops growing when
/// full), locks or enters the kernel.
#[inline(never)]
fn spin(threshold_ticks: u64, end_ticks: u64, stop: &AtomicBool, raw: &mut Raw, cal: &Calibration) {
    let mut prev = tsc::ticks();
    let mut min_step = u64::MAX;
    let mut reads = 0u64;
    'outer: loop {
        for _ in 0..4096 {
            let now = tsc::ticks();
            let step = now.wrapping_sub(prev);
            if step > threshold_ticks {
                let ns = cal.to_ns(step);
                raw.gaps.record(ns);
                raw.lost += ns;
                if raw.starts.len() < raw.starts.capacity() {
                    raw.starts.push((prev, step));
                }
            } else if step < min_step {
                min_step = step;
            }
            prev = now;
        }
        reads += 4096;
        if prev >= end_ticks || stop.load(Ordering::Relaxed) {
            break 'outer;
        }
    }
    raw.reads = reads;
    raw.min_step = min_step;
}

pub fn run(cfg: &GapsConfig, stop: &AtomicBool) -> Result<GapsOutcome, BenchError> {
    if cfg.cpus.is_empty() || cfg.duration_ns == 0 || cfg.threshold_ns == 0 {
        return Err(BenchError::Invalid(
            "gaps: give at least one CPU, a duration and a threshold above zero".into(),
        ));
    }
    punctual_rt::affinity::check_online(&cfg.cpus)?;
    // The loops keep their CPUs for the whole watch: punctual's idle pollers there wait.
    let _aside = punctual_rt::idle_poll::Claim::aside(&cfg.cpus);
    let cal = Calibration::measure(50_000_000);
    let threshold_ticks = cal.from_ns(cfg.threshold_ns).max(1);
    let irq_before = read_interrupts();
    let config_hz = cfg.hz.or_else(punctual_rt::host::config_hz);
    // The loops start together and end at one instant, so every CPU watches the same window
    // however late its thread got going (measured under load: one loop 116 ms behind the other).
    let ready = std::sync::Barrier::new(cfg.cpus.len());
    let end_ticks = std::sync::atomic::AtomicU64::new(0);
    let raws: Vec<Result<Raw, BenchError>> = std::thread::scope(|s| {
        let hs: Vec<_> = cfg
            .cpus
            .iter()
            .map(|&cpu| {
                let (cal, ready, end_ticks) = (&cal, &ready, &end_ticks);
                s.spawn(move || -> Result<Raw, BenchError> {
                    let setup = setup_current_thread(&ThreadRequest {
                        cpu: Some(cpu),
                        policy: cfg.sched.policy,
                        priority: cfg.sched.priority,
                        timer_slack_ns: None,
                        fall_back_on_refusal: true,
                    });
                    let prepared = setup.map(|g| {
                        let mut raw = Raw {
                            gaps: Recorder::new(),
                            starts: Vec::with_capacity(KEEP),
                            reads: 0,
                            min_step: 0,
                            lost: 0,
                            t0: (0, 0),
                            t1: (0, 0),
                            fallback: g.fallback.clone(),
                        };
                        // Touch the buffer so the loop takes no page faults on it.
                        raw.starts.resize(KEEP, (0, 0));
                        raw.starts.clear();
                        (g, raw)
                    });
                    // Every thread reaches the barrier, even one whose setup failed.
                    ready.wait();
                    let (_g, mut raw) = prepared?;
                    raw.t0 = tsc::stamp();
                    let mine = raw.t0.1 + cal.from_ns(cfg.duration_ns);
                    let end = match end_ticks.compare_exchange(
                        0,
                        mine,
                        Ordering::SeqCst,
                        Ordering::SeqCst,
                    ) {
                        Ok(_) => mine,
                        Err(first) => first,
                    };
                    spin(threshold_ticks, end, stop, &mut raw, cal);
                    raw.t1 = tsc::stamp();
                    Ok(raw)
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().expect("gap loop panicked"))
            .collect()
    });
    let irq_after = read_interrupts();
    let mut cpus = Vec::new();
    for (&cpu, raw) in cfg.cpus.iter().zip(raws) {
        let raw = raw?;
        let wall_ns = raw.t1.0.saturating_sub(raw.t0.0);
        let interrupts = interrupt_deltas(&irq_before, &irq_after, cpu);
        // The tick rate: CONFIG_HZ, else local timer interrupts per second on this CPU.
        let hz = config_hz.or_else(|| {
            let loc = interrupts.iter().find(|(k, _)| k.starts_with("LOC"))?.1;
            tick_rate_of(per_second(*loc, wall_ns))
        });
        // Starts in ns since the loop began, on the monotonic time line.
        let starts: Vec<(u64, u64)> = raw
            .starts
            .iter()
            .map(|&(s, d)| {
                (
                    raw.t0.0 + cal.to_ns(s.saturating_sub(raw.t0.1)),
                    cal.to_ns(d),
                )
            })
            .collect();
        let tick = hz.and_then(|hz| tick_estimate(&starts, hz, wall_ns));
        let periodic = other_periodic(&starts, tick.as_ref().map(|t| t.hz).or(hz), wall_ns);
        let (began_ns, ended_ns) = (raw.t0.0, raw.t1.0);
        cpus.push(CpuGaps {
            cpu,
            gaps: raw.gaps,
            reads: raw.reads,
            min_step_ns: if raw.min_step == u64::MAX {
                0
            } else {
                cal.to_ns(raw.min_step)
            },
            wall_ns,
            began_ns,
            ended_ns,
            starts,
            lost_ns: raw.lost,
            interrupts,
            tick,
            periodic,
            fallback: raw.fallback,
        });
    }
    Ok(GapsOutcome {
        cpus,
        calibration: cal,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "           CPU0       CPU1       
  0:         45          0   IO-APIC   2-edge      timer
 36:          0      53749 PCI-MSIX-0000:00:02.0   1-edge      virtio1-req.0
NMI:          0          0   Non-maskable interrupts
LOC:     136310     146126   Local timer interrupts
ERR:          0
";

    fn cpu(began: u64, ended: u64, starts: Vec<(u64, u64)>) -> CpuGaps {
        CpuGaps {
            cpu: 0,
            gaps: Recorder::new(),
            reads: 0,
            min_step_ns: 0,
            wall_ns: ended - began,
            began_ns: began,
            ended_ns: ended,
            starts,
            lost_ns: 0,
            interrupts: BTreeMap::new(),
            tick: None,
            periodic: Vec::new(),
            fallback: None,
        }
    }

    #[test]
    fn the_floor_is_the_share_of_windows_holding_an_interruption_over_the_bound() {
        const MS: u64 = 1_000_000;
        // 100 ms on two CPUs: 20 windows of 10 ms. CPU a: a 50 us gap in window 0, a 5 us one in
        // window 3 (under the bound), a 30 us one across windows 6 and 7; CPU b: one in window 9
        // and the partial window after the end does not count.
        let a = cpu(
            1_000 * MS,
            1_100 * MS,
            vec![
                (1_001 * MS, 50_000),
                (1_033 * MS, 5_000),
                (1_070 * MS - 10_000, 30_000),
            ],
        );
        let b = cpu(
            2_000 * MS,
            2_105 * MS,
            vec![(2_095 * MS, 20_000), (2_102 * MS, 90_000)],
        );
        let out = GapsOutcome {
            cpus: vec![a, b],
            calibration: Calibration::measure(1_000_000),
        };
        let f = floor_share(&out, 10 * MS, 10_000).unwrap();
        assert!((f - 4.0 / 20.0).abs() < 1e-12, "{f}");
        assert_eq!(floor_share(&out, 10 * MS, 100_000), Some(0.0));
        let short = GapsOutcome {
            cpus: vec![cpu(0, 5 * MS, vec![(MS, 50_000)])],
            calibration: Calibration::measure(1_000_000),
        };
        assert_eq!(
            floor_share(&short, 10 * MS, 10_000),
            None,
            "no whole window"
        );
    }

    #[test]
    fn proc_interrupts_parse_with_labels() {
        let m = parse_interrupts(SAMPLE);
        assert_eq!(m["LOC (Local timer interrupts)"], vec![136310, 146126]);
        assert_eq!(m["36 virtio1-req.0"], vec![0, 53749]);
        assert_eq!(m["0 timer"], vec![45, 0]);
        assert!(!m.keys().any(|k| k.starts_with("ERR")));
        let mut after = m.clone();
        after.get_mut("LOC (Local timer interrupts)").unwrap()[1] += 250;
        let d = interrupt_deltas(&m, &after, 1);
        assert_eq!(d.len(), 1);
        assert_eq!(d["LOC (Local timer interrupts)"], 250);
    }

    #[test]
    fn the_tick_is_found_at_its_phase_among_random_gaps() {
        // 2 s at HZ=250: a 3 us tick gap every 4 ms at phase 1.3 ms, plus 300 gaps of 10 us scattered.
        let mut g: Vec<(u64, u64)> = (0..500u64)
            .map(|k| (k * 4_000_000 + 1_300_000, 3_000 + k % 3))
            .collect();
        let mut x = 12345u64;
        for _ in 0..300 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            g.push(((x >> 11) % 2_000_000_000, 10_000));
        }
        g.sort_unstable();
        let t = tick_estimate(&g, 250, 2_000_000_000).unwrap();
        assert_eq!(t.gaps, 500, "{t:?}");
        assert_eq!(t.median_ns, 3_001);
        assert_eq!(t.mean_ns, 3_001);
        // The few ticks a random 10 us gap fell beside are left out of the mean.
        assert!(t.trimmed > 0 && t.trimmed < 30, "{t:?}");
        assert!((t.per_second - 250.0).abs() < 1.0);
    }

    #[test]
    fn the_tick_is_found_among_thousands_of_short_gaps() {
        // 2 s at HZ=250: a 27 us tick at phase 0.9 ms, under 20,000 random 1-3 us gaps (10,000 a
        // second, as a quiet VM showed), which leave no peak among all gaps.
        let mut g: Vec<(u64, u64)> = (0..500u64)
            .map(|k| (k * 4_000_000 + 900_000, 27_000))
            .collect();
        let mut x = 3u64;
        for i in 0..20_000u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            g.push(((x >> 11) % 2_000_000_000, 1_000 + i % 2_000));
        }
        g.sort_unstable();
        assert_eq!(
            periodic_estimate(&g, 250, 2_000_000_000, 1.0 / 3.0, false),
            None
        );
        let t = tick_estimate(&g, 250, 2_000_000_000).unwrap();
        assert_eq!((t.gaps, t.median_ns), (500, 27_000), "{t:?}");
    }

    #[test]
    fn the_gaps_of_one_tick_add_up() {
        // Each tick leaves an interrupt gap and, 20 us later, a soft-interrupt gap: 2 us + 1 us.
        let mut g = Vec::new();
        for k in 0..500u64 {
            g.push((k * 4_000_000 + 3_990_000, 2_000));
            g.push((k * 4_000_000 + 3_990_000 + 22_000, 1_000));
        }
        // A window that straddles the period boundary still groups each tick's pair.
        let t = tick_estimate(&g, 250, 2_000_000_000).unwrap();
        assert_eq!(t.median_ns, 3_000, "{t:?}");
        assert!((499..=501).contains(&t.gaps), "{t:?}");
        assert!((t.per_second - 250.0).abs() < 25.0);
    }

    /// 2 s at HZ=250 with a 25 us tick at phase 1.3 ms, 300 random 10 us gaps, 3,000 random 1-3 us
    /// ones, and (when `host`) a 30 us stop every 10 ms at phase `host` in 9 of 10 periods, its
    /// phase drifting 6 us a second (as measured on this project's VM).
    fn with_a_host_stop(host: Option<u64>) -> Vec<(u64, u64)> {
        let mut g: Vec<(u64, u64)> = (0..500u64)
            .map(|k| (k * 4_000_000 + 1_300_000, 25_000))
            .collect();
        let mut x = 7u64;
        let mut next = || {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            x >> 11
        };
        for i in 0..3300u64 {
            let d = if i < 300 { 10_000 } else { 1_000 + i % 2_000 };
            g.push((next() % 2_000_000_000, d));
        }
        if let Some(phase) = host {
            for k in (0..200u64).filter(|k| k % 10 != 3) {
                g.push((k * 10_000_000 + phase - k * 60, 30_000));
            }
        }
        g.sort_unstable();
        g
    }

    #[test]
    fn a_stop_at_another_timer_rate_is_found_beside_the_tick() {
        let g = with_a_host_stop(Some(7_900_000));
        let p = other_periodic(&g, Some(250), 2_000_000_000);
        assert_eq!(p.len(), 1, "only the 100 Hz stop: {p:?}");
        assert_eq!(p[0].hz, 100);
        assert_eq!(p[0].median_ns, 30_000);
        assert!((p[0].share - 0.9).abs() < 0.02, "{:?}", p[0]);
        // The tick is still found as the tick, and not again among the others.
        assert_eq!(
            tick_estimate(&g, 250, 2_000_000_000).unwrap().median_ns,
            25_000
        );
        // A stop whose phase meets the tick's every other period (17.3 ms is 1.3 ms on the 4 ms
        // grid) is still found; those periods add the tick to it, so the median holds, not the
        // mean.
        let shared = with_a_host_stop(Some(7_300_000));
        let q = other_periodic(&shared, Some(250), 2_000_000_000);
        assert_eq!(
            q.iter().map(|p| (p.hz, p.median_ns)).collect::<Vec<_>>(),
            vec![(100, 30_000)]
        );
        // Without the stop, the tick folded on 100 Hz (every other period at one phase) and the
        // random gaps make no source of their own, whether or not the tick's rate is known.
        let none = with_a_host_stop(None);
        assert_eq!(other_periodic(&none, Some(250), 2_000_000_000), vec![]);
        let unknown: Vec<u32> = other_periodic(&none, None, 2_000_000_000)
            .iter()
            .map(|p| p.hz)
            .collect();
        assert_eq!(
            unknown,
            vec![250],
            "the tick itself, when its rate is not given"
        );
    }

    /// A CPU watched 10 s with the tick at 250 Hz, its local timer at `loc` a second, one other
    /// interrupt at `other` a second, and a 100 Hz stop of `median` ns in `share` of its periods.
    fn watched(loc: u64, other: u64, share: f64, median: u64) -> CpuGaps {
        let mut c = cpu(0, 10_000_000_000, Vec::new());
        c.interrupts = [
            ("LOC (Local timer interrupts)".to_string(), loc * 10),
            ("40 virtio2-input.0".to_string(), other * 10),
        ]
        .into_iter()
        .collect();
        let est = |hz: u32, share: f64, median_ns: u64| TickEstimate {
            hz,
            gaps: 0,
            per_second: 0.0,
            share,
            median_ns,
            mean_ns: median_ns,
            stddev_ns: 0,
            trimmed: 0,
        };
        c.tick = Some(est(250, 1.0, 25_000));
        c.periodic = vec![est(100, share, median)];
        c
    }

    #[test]
    fn a_stop_on_every_cpu_with_no_guest_interrupt_at_its_rate_is_the_hosts() {
        let quiet = [watched(270, 1, 0.99, 26_000), watched(252, 0, 0.97, 31_000)];
        let p = PeriodicStop::of(&quiet).unwrap();
        assert_eq!((p.hz, p.cpus, p.median_ns), (100, 2, 31_000));
        assert!((p.share - 0.97).abs() < 1e-9, "the lowest share: {p:?}");
        assert!(p.guest_silent, "{p:?}");
        assert!(p.describe().contains("the host's"), "{}", p.describe());
        // A device interrupting 100 times a second on one of them: not called the host's.
        let device = [
            watched(270, 1, 0.99, 26_000),
            watched(252, 100, 0.97, 31_000),
        ];
        assert!(!PeriodicStop::of(&device).unwrap().guest_silent);
        // Nor a local timer running 100 a second beyond the tick (a guest's own 100 Hz timer).
        let timer = [watched(352, 0, 0.99, 26_000)];
        assert!(!PeriodicStop::of(&timer).unwrap().guest_silent);
        // No stop anywhere: nothing to report.
        let mut none = watched(250, 0, 1.0, 0);
        none.periodic.clear();
        assert_eq!(PeriodicStop::of(&[none]), None);
    }

    #[test]
    fn the_tick_rate_is_read_from_the_local_timers_count_to_a_built_rate() {
        assert_eq!(
            tick_rate_of(271.3),
            Some(250),
            "the tick and 21 other timers a second"
        );
        assert_eq!(tick_rate_of(249.0), Some(250));
        assert_eq!(tick_rate_of(1_012.0), Some(1000));
        assert_eq!(tick_rate_of(130.0), Some(100));
        assert_eq!(
            tick_rate_of(40.0),
            Some(40),
            "an idle tickless CPU: what it counted"
        );
        assert_eq!(tick_rate_of(0.0), None);
    }

    #[test]
    fn no_tick_is_claimed_without_a_peak() {
        let mut x = 99u64;
        let g: Vec<(u64, u64)> = (0..1000)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((x >> 11) % 2_000_000_000, 5_000)
            })
            .collect();
        assert_eq!(tick_estimate(&g, 250, 2_000_000_000), None);
        assert_eq!(tick_estimate(&[], 250, 1), None);
    }
}
