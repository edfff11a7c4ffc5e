//! The drop-in as a measurement of the lifecycle: punctual's latency engine with cyclictest's
//! layout (thread `i` at `interval + i * distance`, pinned round robin), cyclictest's lines on the
//! writer it is given while it runs, and its figures in the document for the formats at the end.

use crate::args::{Settings, Until, Wait};
use crate::export::{facts_to_json, Histogram, RtTestsJson};
use crate::format::json::RunFacts;
use crate::format::{block, header, histogram, spikes, status_line};
use crate::verbose::{Shared, Verbose};
use crate::DropinError;
use punctual_latency::cyclic::{CyclicConfig, CyclicStats};
use punctual_latency::measure::cyclic_doc;
use punctual_latency::{report, run_with, Config, Mode, Outcome, RunExtras, Start, Stop, MAX_RUN};
use punctual_result::export::Json;
use punctual_result::{Failure, Output, ResultDoc};
use punctual_rt::{Policy, RtWant};
use punctual_session::{Ctx, Measurement, Outputs, Report};
use punctual_time::MarginPolicy;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// How often the status lines are redrawn (cyclictest: every 10 ms; SPEC: at most 4 Hz).
const REDRAW: Duration = Duration::from_millis(250);

pub struct Cyclictest {
    pub settings: Settings,
    cfg: Config,
    stats: Vec<CyclicStats>,
    out: Shared,
}

impl Cyclictest {
    /// `out` receives what cyclictest prints while it runs (standard output, for the binary).
    pub fn new(settings: Settings, out: Box<dyn Write + Send>) -> Result<Cyclictest, DropinError> {
        let s = &settings;
        let interval = s.interval_us * 1000;
        let stop = match s.until {
            Until::Loops(l) => Stop::Loops(l),
            Until::Seconds(d) => Stop::Duration(d * 1_000_000_000),
            Until::Stopped => Stop::Duration(MAX_RUN),
        };
        let cfg = Config {
            threads: s.cpus.iter().map(|&c| Some(c)).collect(),
            interval,
            stop,
            clock: s.clock,
            mode: match s.wait {
                Wait::Absolute => Mode::Abs,
                Wait::Relative => Mode::Rel,
                Wait::PosixTimer => Mode::Signal,
            },
            margin: MarginPolicy::Auto,
            policy: s.policy,
            priority: s.priority,
            timer_slack_ns: None,
        };
        cfg.validate().map_err(|e| DropinError::Usage {
            flag: "cyclictest".into(),
            why: e.to_string(),
        })?;
        let cyc = CyclicConfig {
            buckets: s.hist.as_ref().map(|h| h.buckets).unwrap_or(0),
            unit_ns: if s.nsecs { 1 } else { 1000 },
            spike_above: s.spike,
            spike_nodes: s.spike_nodes,
        };
        let stats = (0..cfg.threads.len())
            .map(|_| CyclicStats::new(cyc))
            .collect();
        Ok(Cyclictest {
            settings,
            cfg,
            stats,
            out: Shared::new(out),
        })
    }

    /// The files the command line names (`--json=`, `--histfile`, `--punctual-json`), checked now.
    /// No results store: cyclictest's users read its output, and `--punctual-json` keeps the rest.
    pub fn outputs(&self) -> Result<Outputs, Failure> {
        let s = &self.settings;
        let histfile = s
            .hist
            .as_ref()
            .and_then(|h| h.file.clone())
            .map(Output::File);
        let all = s.hist.as_ref().is_some_and(|h| h.all);
        Outputs::new()
            .export("--json", s.json.as_ref(), RtTestsJson)?
            .export("--histfile", histfile.as_ref(), Histogram { all })?
            .export("--punctual-json", s.punctual_json.as_ref(), Json)
    }

    fn distance_ns(&self) -> u64 {
        self.settings.distance_us * 1000
    }

    fn start(&self) -> Start {
        match (self.settings.aligned_us, self.settings.secaligned_us) {
            (Some(o), _) => Start::Aligned { offset: o * 1000 },
            (_, Some(o)) => Start::SecAligned { offset: o * 1000 },
            _ => Start::Lead,
        }
    }

    /// The status lines of every thread as they are now.
    fn lines(&self, prio: u32) -> Vec<String> {
        self.stats
            .iter()
            .enumerate()
            .map(|(i, st)| {
                let interval_us = self.settings.interval_us + i as u64 * self.settings.distance_us;
                status_line(i, prio, interval_us, &st.status(), self.settings.nsecs)
            })
            .collect()
    }

    /// What cyclictest prints before its threads start: with `-v` the CPUs and each thread's
    /// CPU and interval, and the `/dev/cpu_dma_latency` line when it holds one.
    fn preamble(&self, ctx: &Ctx) -> String {
        let s = &self.settings;
        let mut text = String::new();
        if s.verbose {
            let online = punctual_rt::online_cpus().len();
            text.push_str(&format!("Max CPUs = {online}\nOnline CPUs = {online}\n"));
            if s.affinity_given {
                let mut used = s.cpus.clone();
                used.sort_unstable();
                used.dedup();
                text.push_str(&format!("Using {} cpus.\n", used.len()));
            }
        }
        if let Some(v) = ctx.rt.dma_latency_us {
            text.push_str(&format!("# /dev/cpu_dma_latency set to {v}us\n"));
        }
        if s.verbose {
            for (i, cpu) in s.cpus.iter().enumerate() {
                if s.affinity_given {
                    text.push_str(&format!("Thread {i} using cpu {cpu}.\n"));
                }
                let interval = s.interval_us + i as u64 * s.distance_us;
                text.push_str(&format!("Thread {i} Interval: {interval}\n"));
            }
        }
        text
    }

    /// Redraw the status lines until `done` (not with `-q` or `-v`); `-M` redraws on a new maximum
    /// only.
    fn redraw(&self, policy: Policy, prio: u32, done: &AtomicBool) {
        let head = || header(policy.name(), policy == Policy::Other, &loadavg());
        self.out.put(&block(true, &head(), &self.lines(prio)));
        let mut last_max = self.maxes();
        loop {
            let t0 = std::time::Instant::now();
            while t0.elapsed() < REDRAW && !done.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(10));
            }
            if done.load(Ordering::Relaxed) {
                break;
            }
            let maxes = self.maxes();
            if self.settings.refresh_on_max && maxes == last_max {
                continue;
            }
            last_max = maxes;
            self.out.put(&block(false, &head(), &self.lines(prio)));
        }
        self.out.put(&block(false, &head(), &self.lines(prio)));
    }

    fn maxes(&self) -> Vec<u64> {
        self.stats.iter().map(|s| s.status().max).collect()
    }
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg").unwrap_or_default()
}

impl Measurement for Cyclictest {
    type Outcome = Outcome;

    fn label(&self) -> String {
        "cyclictest".into()
    }

    fn wants(&self) -> Option<RtWant> {
        let s = &self.settings;
        Some(RtWant {
            policy: s.policy,
            priority: s.priority,
            mlock: s.mlock,
            dma_latency_us: s.dma_latency_us,
        })
    }

    fn run(&mut self, ctx: &Ctx) -> Result<Outcome, Failure> {
        for n in &self.settings.notes {
            ctx.note(n);
        }
        self.cfg.policy = ctx.rt.policy;
        self.cfg.priority = ctx.rt.priority;
        self.cfg.timer_slack_ns = ctx.rt.timer_slack_ns;
        // cyclictest's --mainaffinity: this thread (and the status lines) off the measuring CPUs.
        let _main = match &self.settings.main_affinity {
            Some(cpus) => Some(punctual_rt::AffinityGuard::pin(cpus)?),
            None => None,
        };
        self.out.put(&self.preamble(ctx));
        let unit_ns = if self.settings.nsecs { 1 } else { 1000 };
        let sink: Option<Box<dyn Write + Send>> = self.settings.verbose.then(|| {
            Box::new(Verbose::new(
                self.out.clone(),
                unit_ns,
                self.settings.oscope,
                self.stats.len(),
            )) as Box<dyn Write + Send>
        });
        let live = !self.settings.quiet && !self.settings.verbose;
        let extras = RunExtras {
            distance: self.distance_ns(),
            start: self.start(),
            cyclic: Some(&self.stats),
            ..RunExtras::default()
        };
        let done = AtomicBool::new(false);
        let this = &*self;
        let (policy, prio) = (ctx.rt.policy, ctx.rt.priority);
        let outcome = std::thread::scope(|sc| {
            let lines = live.then(|| sc.spawn(|| this.redraw(policy, prio, &done)));
            let r = run_with(&this.cfg, extras, ctx.stop(), sink, None).map(|(o, _)| o);
            done.store(true, Ordering::Relaxed);
            if let Some(h) = lines {
                let _ = h.join();
            }
            r
        })?;
        Ok(outcome)
    }

    fn report(&self, outcome: Outcome, ctx: &Ctx, doc: &mut ResultDoc) -> Result<Report, Failure> {
        let s = &self.settings;
        ctx.runtime_fallbacks(
            doc,
            outcome.threads.iter().filter_map(|t| t.fallback.as_ref()),
        );
        report::fill_latency_doc(doc, &self.cfg, &outcome, false);
        doc.settings
            .extra
            .insert("distance_ns".into(), self.distance_ns().into());
        let mut c = cyclic_doc(&self.cfg, self.distance_ns(), &outcome, &self.stats);
        let facts = run_facts(doc, s, &self.cfg);
        c.extra.insert("run".into(), facts_to_json(&facts));
        let mut text = String::new();
        if s.quiet && s.hist.is_none() {
            let prio = outcome.threads.first().map(|t| t.priority).unwrap_or(0);
            text.extend(self.lines(prio));
        }
        text.push_str(&spikes(&c, s.spike_nodes));
        if let Some(h) = s.hist.as_ref().filter(|h| h.file.is_none()) {
            text.push_str(&histogram(&c, h.all));
        }
        c.into_doc(doc);
        Ok(Report {
            text,
            ..Report::default()
        })
    }
}

/// What rt-tests' JSON says about the run: command line, local times, uname, NUMA nodes.
fn run_facts(doc: &ResultDoc, s: &Settings, cfg: &Config) -> RunFacts {
    let u = uname();
    RunFacts {
        cmdline: doc.command.join(" "),
        start_time: rfc2822_local(&doc.started_at),
        end_time: rfc2822_local(&doc.ended_at),
        return_code: 0,
        sysname: u[0].clone(),
        nodename: u[1].clone(),
        release: u[2].clone(),
        version: u[3].clone(),
        machine: u[4].clone(),
        realtime: doc.host.realtime,
        nsecs: s.nsecs,
        nodes: cfg
            .threads
            .iter()
            .map(|c| c.map(numa_node).unwrap_or(-1))
            .collect(),
    }
}

/// sysname, nodename, release, version, machine.
fn uname() -> [String; 5] {
    // SAFETY: utsname is arrays of bytes: all zeros is valid.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: uname writes one utsname into `u`, a live local of that type; its fields come back
    // NUL-terminated, and are read up to the NUL below.
    if unsafe { libc::uname(&mut u) } != 0 {
        return Default::default();
    }
    let f = |b: &[libc::c_char]| {
        let bytes: Vec<u8> = b
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    [
        f(&u.sysname),
        f(&u.nodename),
        f(&u.release),
        f(&u.version),
        f(&u.machine),
    ]
}

/// The NUMA node of a CPU (its `nodeN` entry in sysfs), or -1 on a kernel without NUMA, as
/// cyclictest says without libnuma.
fn numa_node(cpu: usize) -> i64 {
    std::fs::read_dir(format!("/sys/devices/system/cpu/cpu{cpu}"))
        .ok()
        .and_then(|d| {
            d.flatten().find_map(|e| {
                e.file_name()
                    .to_str()
                    .and_then(|n| n.strip_prefix("node"))
                    .and_then(|n| n.parse().ok())
            })
        })
        .unwrap_or(-1)
}

/// An RFC 3339 instant as rt-tests writes times: RFC 2822 in local time
/// (`Fri, 27 Nov 2026 11:05:48 +0000`); unreadable input is returned as it is.
pub fn rfc2822_local(rfc3339: &str) -> String {
    use time::format_description::well_known::Rfc3339;
    let Ok(t) = time::OffsetDateTime::parse(rfc3339, &Rfc3339) else {
        return rfc3339.to_string();
    };
    let secs = t.unix_timestamp() as libc::time_t;
    // SAFETY: tm is integers and a pointer: all zeros is valid (a null tm_zone).
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: localtime_r reads `secs` and writes one tm into `tm`, both live locals; unlike
    // localtime it uses no shared static buffer, so other threads cannot race it.
    if unsafe { libc::localtime_r(&secs, &mut tm) }.is_null() {
        return rfc3339.to_string();
    }
    const DAYS: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let off = tm.tm_gmtoff / 60;
    format!(
        "{}, {:02} {} {} {:02}:{:02}:{:02} {}{:02}{:02}",
        DAYS[tm.tm_wday.rem_euclid(7) as usize],
        tm.tm_mday,
        MONTHS[tm.tm_mon.rem_euclid(12) as usize],
        tm.tm_year + 1900,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec,
        if off < 0 { '-' } else { '+' },
        off.abs() / 60,
        off.abs() % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_written_as_rt_tests_writes_them() {
        // The test environment's zone is whatever it is; the shape is fixed.
        let t = rfc2822_local("2026-11-27T11:05:48Z");
        let parts: Vec<&str> = t.split(' ').collect();
        assert_eq!(parts.len(), 6, "{t}");
        assert!(parts[0].ends_with(','), "{t}");
        assert!(
            parts[5].starts_with(['+', '-']) && parts[5].len() == 5,
            "{t}"
        );
        if std::env::var("TZ").is_ok_and(|z| z == "UTC") {
            assert_eq!(t, "Fri, 27 Nov 2026 11:05:48 +0000");
        }
        assert_eq!(rfc2822_local("not a time"), "not a time");
    }
}
