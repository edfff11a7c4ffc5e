//! `etsion-latency`: Etsion et al. Table 6 and Fig. 7 on this machine. The paper's alarm workloads
//! (BLK, N%, CONT, with CPU-bound neighbours) run pinned to one CPU in SCHED_RR, once at the kernel's
//! RR timeslice and once at the shortest one it allows, with signals (as the paper) and with
//! clock_nanosleep. The paper changed the tick rate and the quantum together (100 Hz with 60 ms
//! quanta, 20,000 Hz with 100 us); on a modern kernel timers are one-shot and need no tick, so what
//! is left of its knob is the quantum: `/proc/sys/kernel/sched_rr_timeslice_ms`, set through the
//! journal and restored afterwards.

use super::published::TABLE6;
use super::{add_fallback, close_doc, figure, last_cpu, new_doc, us};
use crate::kind;
use punctual_latency::alarms::{
    run_alarms, AlarmConfig, AlarmWorkload, Mechanism, DEFAULT_PRIORITY,
};
use punctual_result::experiment::{Context, Experiment, Report};
use punctual_result::{Failure, Series, Table};
use punctual_rt::Policy;
use punctual_stats::Recorder;
use punctual_time::format_ns;
use std::sync::atomic::Ordering;

#[derive(Clone, Debug)]
pub struct LatencySettings {
    /// Alarms per alarm-setting process (the paper: 500).
    pub alarms: u64,
    /// Delays uniform in this range (the paper: 1 ms to 1000 ms).
    pub delay_min: u64,
    pub delay_max: u64,
    /// The long quantum, in ms; `None` leaves the kernel's setting (the default RR timeslice).
    pub long_ms: Option<u64>,
    /// The short quantum, in ms (the kernel rounds up to one tick).
    pub short_ms: u64,
    pub mechanisms: Vec<Mechanism>,
}

impl LatencySettings {
    /// The paper's runs: about 3.5 hours.
    pub fn full() -> Self {
        LatencySettings {
            alarms: 500,
            delay_min: 1_000_000,
            delay_max: 1_000_000_000,
            long_ms: None,
            short_ms: 1,
            mechanisms: vec![Mechanism::Signal, Mechanism::Nanosleep],
        }
    }

    /// Under a minute: 5 alarms per process, delays 1-100 ms (still long against the short quantum
    /// and about the long one, as the paper's were against its quanta).
    pub fn quick() -> Self {
        LatencySettings {
            alarms: 5,
            delay_min: 1_000_000,
            delay_max: 100_000_000,
            ..Self::full()
        }
    }
}

#[derive(Default)]
pub struct EtsionLatency {
    /// `None`: full or quick, from the command line.
    pub settings: Option<LatencySettings>,
}

/// One measured cell group: a Table 6 row at one quantum with one mechanism.
struct Measured {
    row: usize,
    quantum: usize,
    mechanism: Mechanism,
    rec: Recorder,
}

const QUANTA: [&str; 2] = ["long", "short"];

fn cells(rec: &Recorder) -> [String; 4] {
    if rec.count() == 0 {
        return ["-".into(), "-".into(), "-".into(), "-".into()];
    }
    [
        us(rec.percentile(90_000)),
        us(rec.percentile(95_000)),
        us(rec.percentile(99_000)),
        us(rec.max().unwrap_or(0)),
    ]
}

impl Experiment for EtsionLatency {
    fn name(&self) -> &'static str {
        "etsion-latency"
    }
    fn reproduces(&self) -> &'static str {
        "Etsion et al. 2003, Table 6 and Fig. 7: alarm latency of BLK, N% and CONT workloads at a long and a short RR quantum"
    }
    fn duration(&self) -> &'static str {
        "full about 3.5 h (500 alarms of 1-1000 ms per process, 40 runs); --quick under a minute"
    }

    fn run(&self, ctx: &Context) -> Result<Report, Failure> {
        let s = self.settings.clone().unwrap_or_else(|| {
            if ctx.quick {
                LatencySettings::quick()
            } else {
                LatencySettings::full()
            }
        });
        if s.alarms == 0 || s.delay_min == 0 || s.delay_min > s.delay_max || s.mechanisms.is_empty()
        {
            return Err(Failure::usage(
                "etsion-latency: alarms, delays and mechanisms must be non-zero, with min <= max",
            ));
        }
        let cpu = last_cpu();
        let mut doc = new_doc(ctx, self.name(), punctual_result::now_rfc3339());
        let st = &mut doc.settings.extra;
        st.insert("cpu".into(), cpu.into());
        st.insert("policy_workloads".into(), "rr".into());
        st.insert("priority_workloads".into(), DEFAULT_PRIORITY.into());
        st.insert("alarms_per_process".into(), s.alarms.into());
        st.insert("delay_min_ns".into(), s.delay_min.into());
        st.insert("delay_max_ns".into(), s.delay_max.into());
        let default_ms = punctual_rt::rr::read_ms();
        let mut quantum_ns = [0u64; 2];
        let mut measured: Vec<Measured> = Vec::new();
        'quanta: for (qi, setting) in [s.long_ms, Some(s.short_ms)].into_iter().enumerate() {
            let guard = match setting {
                Some(ms) => Some(punctual_rt::rr::set_ms(ms)?),
                None => None,
            };
            let effective = punctual_rt::rr::effective_ns();
            quantum_ns[qi] = effective.unwrap_or(0);
            doc.settings.extra.insert(
                format!("rr_timeslice_{}", QUANTA[qi]),
                serde_json::json!({
                    "setting_ms": setting.or(default_ms),
                    "effective_ns": effective,
                }),
            );
            for &mechanism in &s.mechanisms {
                for (ri, row) in TABLE6.iter().enumerate() {
                    if ctx.stop.load(Ordering::Relaxed) {
                        drop(guard);
                        break 'quanta;
                    }
                    let workload: AlarmWorkload = row.workload.parse().map_err(Failure::usage)?;
                    let cfg = AlarmConfig {
                        cpu: Some(cpu),
                        policy: Policy::Rr,
                        priority: DEFAULT_PRIORITY,
                        alarms: s.alarms,
                        delay_min: s.delay_min,
                        delay_max: s.delay_max,
                        ..AlarmConfig::paper(workload, mechanism)
                    };
                    let out = run_alarms(&cfg, &ctx.stop)?;
                    for p in &out.processes {
                        add_fallback(&mut doc, p.fallback.as_ref());
                    }
                    let rec = out.merged();
                    doc.series.push(
                        Series::from_recorder(
                            format!(
                                "{} {} {} {} quantum",
                                row.ty,
                                row.number,
                                mechanism.name(),
                                QUANTA[qi]
                            ),
                            kind::ALARM_LATENCY,
                            Some(cpu),
                            &rec,
                        )
                        .with("workload", row.workload)
                        .with("mechanism", mechanism.name())
                        .with("quantum", QUANTA[qi])
                        .with("rr_timeslice_ns", quantum_ns[qi]),
                    );
                    measured.push(Measured {
                        row: ri,
                        quantum: qi,
                        mechanism,
                        rec,
                    });
                }
            }
            drop(guard);
        }
        close_doc(ctx, &mut doc);

        let find = |row, quantum, mechanism| {
            measured
                .iter()
                .find(|m| m.row == row && m.quantum == quantum && m.mechanism == mechanism)
                .map(|m| &m.rec)
        };
        let empty = Recorder::new();
        let q = |i: usize| {
            if quantum_ns[i] > 0 {
                format_ns(quantum_ns[i])
            } else {
                "?".into()
            }
        };
        let mut tables = Vec::new();
        for (qi, (paper, title)) in [
            (0usize, "@100Hz (60 ms quanta)"),
            (1, "@20,000Hz (100 us quanta)"),
        ]
        .into_iter()
        .enumerate()
        {
            let here = format!("here, signal, {} quantum", q(qi));
            let mut t = Table::new(&["Type", "Number", "0.9", "0.95", "0.99", "max", "0.9", "0.95", "0.99", "max"]).titled(format!(
                "Etsion Table 6, {} quantum: alarm latency (us) at percentiles | paper {title} | {here}",
                QUANTA[qi]
            ));
            for (ri, row) in TABLE6.iter().enumerate() {
                let published = if paper == 0 { &row.hz100 } else { &row.hz20000 };
                let ours = cells(find(ri, qi, Mechanism::Signal).unwrap_or(&empty));
                t.row(
                    [row.ty.to_string(), row.number.to_string()]
                        .into_iter()
                        .chain(published.iter().map(|s| s.to_string()))
                        .chain(ours),
                );
            }
            t.note(format!(
                "Left: published ({title}, Linux 2.4 on a uniprocessor). Right: this machine, all processes SCHED_RR {DEFAULT_PRIORITY} pinned to CPU {cpu}, RR timeslice {}.",
                q(qi)
            ));
            tables.push(t);
        }
        if s.mechanisms.contains(&Mechanism::Nanosleep) {
            let mut t = Table::new(&[
                "Type", "Number", "0.9", "0.95", "0.99", "max", "0.9", "0.95", "0.99", "max",
            ])
            .titled(format!(
                "The same alarms taken with clock_nanosleep (us) | {} quantum | {} quantum",
                q(0),
                q(1)
            ));
            for (ri, row) in TABLE6.iter().enumerate() {
                let a = cells(find(ri, 0, Mechanism::Nanosleep).unwrap_or(&empty));
                let b = cells(find(ri, 1, Mechanism::Nanosleep).unwrap_or(&empty));
                t.row(
                    [row.ty.to_string(), row.number.to_string()]
                        .into_iter()
                        .chain(a)
                        .chain(b),
                );
            }
            t.note("No published column: the paper used signals. A CONT process takes its nanosleep alarms on a second thread of the same class and CPU.");
            tables.push(t);
        }
        let last = tables.last_mut().expect("at least one table");
        last.note(format!(
            "{} alarms per process, delays uniform {}-{}. A short quantum is the modern form of the paper's 20,000 Hz: \
             the kernel cannot go below one tick (1/HZ), so it cannot reach 100 us.",
            s.alarms,
            format_ns(s.delay_min),
            format_ns(s.delay_max)
        ));
        // Fig. 7: CONT workloads on the exponential percentile axis.
        let mut lines: Vec<(String, &Recorder)> = Vec::new();
        for (ri, row) in TABLE6.iter().enumerate().filter(|(_, r)| r.ty == "CONT") {
            for qi in 0..2 {
                if let Some(r) = find(ri, qi, Mechanism::Signal).filter(|r| r.count() > 0) {
                    lines.push((format!("CONT {} ({} quantum)", row.number, q(qi)), r));
                }
            }
        }
        let fig = figure(
            "etsion-latency-fig7",
            punctual_plot::percentile_plot(
                "Etsion Fig. 7: alarm latency of CONT processes (signals)",
                &lines,
            ),
        )?;
        Ok(Report {
            tables,
            doc,
            figures: vec![fig],
        })
    }
}
