//! `etsion-overhead`: Etsion et al. Tables 1 and 2 and Figs. 2, 3 and 8 on this machine. Table 1
//! (the cost of a clock interrupt) becomes the cost of one timer tick seen by a busy loop
//! ([`crate::gaps`]); Table 2 is the context switch through a pipe, the getpid trap and memcpy
//! bandwidth; Figs. 2, 3 and 8 are the sort workload's throughput with 1, 2, 4 and 8 copies sharing
//! one CPU in SCHED_RR at several RR timeslices (the paper varied HZ and the quantum; the quantum is
//! the knob a modern kernel still has).

use super::published::{
    FIG8_PIII1133_EXTREME, FIG8_PIII664_BASE, SORT_MS_10000HZ, SORT_MS_100HZ, TABLE1, TABLE2,
};
use super::{add_fallback, close_doc, figure, group, last_cpu, new_doc, us2};
use crate::{ctxsw, gaps, kind, memcpy, trap, tsc};
use punctual_load::{LoadKind, LoadSpec, Loads, StartOptions};
use punctual_result::experiment::{Context, Experiment, Report};
use punctual_result::{Failure, Series, Table};
use punctual_rt::{Policy, SchedParams};
use punctual_time::format_ns;
use std::sync::atomic::Ordering;
use std::time::Duration;

#[derive(Clone, Debug)]
pub struct OverheadSettings {
    pub gaps_ns: u64,
    pub ctxsw_ns: u64,
    pub trap_ns: u64,
    pub memcpy_per_size_ns: u64,
    /// How long each sort configuration runs.
    pub sort_ns: u64,
    pub copies: Vec<u32>,
    /// RR timeslices to sort under, in ms, longest first (the first is the baseline).
    pub timeslices_ms: Vec<u64>,
}

impl OverheadSettings {
    /// About 5 minutes.
    pub fn full() -> Self {
        OverheadSettings {
            gaps_ns: 30_000_000_000,
            ctxsw_ns: 10_000_000_000,
            trap_ns: 5_000_000_000,
            memcpy_per_size_ns: 2_000_000_000,
            sort_ns: 20_000_000_000,
            copies: vec![1, 2, 4, 8],
            timeslices_ms: vec![100, 10, 1],
        }
    }
    /// About 30 seconds.
    pub fn quick() -> Self {
        OverheadSettings {
            gaps_ns: 2_000_000_000,
            ctxsw_ns: 1_000_000_000,
            trap_ns: 500_000_000,
            memcpy_per_size_ns: 200_000_000,
            sort_ns: 1_500_000_000,
            ..Self::full()
        }
    }
}

#[derive(Default)]
pub struct EtsionOverhead {
    pub settings: Option<OverheadSettings>,
}

/// Wait `ns`, or less if the user interrupts.
fn pause(ctx: &Context, ns: u64) {
    let end = std::time::Instant::now() + Duration::from_nanos(ns);
    while std::time::Instant::now() < end && !ctx.stop.load(Ordering::Relaxed) {
        std::thread::sleep(
            Duration::from_millis(20).min(end.saturating_duration_since(std::time::Instant::now())),
        );
    }
}

struct SortPoint {
    timeslice_ms: u64,
    effective_ns: Option<u64>,
    copies: u32,
    /// Numbers sorted per second of CPU time, all copies together.
    per_second: f64,
    /// CPU time one sort takes, ms.
    ms_per_sort: f64,
}

impl Experiment for EtsionOverhead {
    fn name(&self) -> &'static str {
        "etsion-overhead"
    }
    fn reproduces(&self) -> &'static str {
        "Etsion et al. 2003, Tables 1-2 and Figs. 2, 3, 8: tick, context switch, trap and copy costs; sort throughput against the RR quantum"
    }
    fn duration(&self) -> &'static str {
        "full about 6 min (sort: 20 s per configuration, 12 configurations); --quick about 30 s"
    }

    fn run(&self, ctx: &Context) -> Result<Report, Failure> {
        let s = self.settings.clone().unwrap_or_else(|| {
            if ctx.quick {
                OverheadSettings::quick()
            } else {
                OverheadSettings::full()
            }
        });
        if s.copies.is_empty()
            || s.copies.contains(&0)
            || s.timeslices_ms.is_empty()
            || s.timeslices_ms.contains(&0)
        {
            return Err(Failure::usage(
                "etsion-overhead: copies and timeslices must be non-empty and above zero",
            ));
        }
        let cpu = last_cpu();
        let host = punctual_rt::host::detect();
        let mut doc = new_doc(ctx, self.name(), punctual_result::now_rfc3339());
        doc.settings.extra.insert("cpu".into(), cpu.into());
        let cal = tsc::Calibration::measure(50_000_000);
        let cycles = |ns: f64| ns / cal.ns_per_tick;
        doc.settings
            .extra
            .insert("tsc_hz".into(), (cal.hz().round() as u64).into());

        // Table 1: the tick.
        let g = gaps::run(
            &gaps::GapsConfig {
                cpus: vec![cpu],
                duration_ns: s.gaps_ns,
                threshold_ns: 500,
                sched: SchedParams {
                    policy: Policy::Fifo,
                    priority: 1,
                },
                hz: host.hz,
            },
            &ctx.stop,
        )?;
        let gc = &g.cpus[0];
        add_fallback(&mut doc, gc.fallback.as_ref());
        let mut gs =
            Series::from_recorder(format!("gaps cpu {cpu}"), kind::GAP, Some(cpu), &gc.gaps)
                .with("threshold_ns", 500u64)
                .with("duration_ns", gc.wall_ns);
        if let Some(t) = &gc.tick {
            gs = gs
                .with("tick_median_ns", t.median_ns)
                .with("tick_mean_ns", t.mean_ns)
                .with("tick_stddev_ns", t.stddev_ns)
                .with("tick_gaps", t.gaps)
                .with("tick_gaps_trimmed", t.trimmed)
                .with("hz", t.hz);
        }
        doc.series.push(gs);

        // Table 2: context switch, trap, bandwidth.
        let c = ctxsw::run(
            &ctxsw::CtxswConfig::new(ctxsw::Channel::Pipe, cpu, s.ctxsw_ns),
            &ctx.stop,
        )?;
        add_fallback(&mut doc, c.fallback.as_ref());
        doc.series.push(
            Series::from_recorder(
                "context switch (pipe)",
                kind::CONTEXT_SWITCH,
                Some(cpu),
                &c.per_switch,
            )
            .with("round_trips", c.round_trips)
            .with("mean_ps", (c.mean_switch_ns() * 1000.0).round() as u64),
        );
        let t = trap::run(
            &trap::TrapConfig {
                cpu: Some(cpu),
                ..trap::TrapConfig::new(s.trap_ns)
            },
            &ctx.stop,
        )?;
        add_fallback(&mut doc, t.fallback.as_ref());
        doc.series.push(
            Series::from_recorder("trap (getpid)", kind::TRAP, Some(cpu), &t.per_call)
                .with("calls", t.calls)
                .with("mean_ps", (t.mean_ns() * 1000.0).round() as u64),
        );
        let m = memcpy::run(
            &memcpy::MemcpyConfig {
                sizes: memcpy::default_sizes(cpu),
                methods: memcpy::Method::ALL.to_vec(),
                per_size_ns: s.memcpy_per_size_ns,
                cpu: Some(cpu),
                sched: crate::shared::OTHER,
            },
            &ctx.stop,
        )?;
        for r in &m.sizes {
            doc.series.push(
                Series::from_recorder(
                    format!(
                        "{} {} ({})",
                        r.method.name(),
                        memcpy::format_bytes(r.size.bytes),
                        r.size.label
                    ),
                    kind::COPY,
                    Some(cpu),
                    &r.per_copy,
                )
                .with("bytes", r.size.bytes as u64)
                .with("method", r.method.name())
                .with("mb_per_s_mean", r.mb_per_s_mean.round() as u64)
                .with("mb_per_s_stddev", r.mb_per_s_stddev.round() as u64),
            );
        }

        // Figs. 2, 3, 8: sort throughput against the quantum.
        let mut points: Vec<SortPoint> = Vec::new();
        let mut sort_json: Vec<serde_json::Value> = Vec::new();
        let sort_len = punctual_load::sort_array_len(Some(cpu));
        'slices: for &ms in &s.timeslices_ms {
            let guard = punctual_rt::rr::set_ms(ms)?;
            let effective_ns = punctual_rt::rr::effective_ns();
            for &n in &s.copies {
                if ctx.stop.load(Ordering::Relaxed) {
                    drop(guard);
                    break 'slices;
                }
                let spec: LoadSpec = format!("sort:{n}@{cpu}").parse().map_err(Failure::usage)?;
                debug_assert_eq!(spec.items[0].kind, LoadKind::Sort);
                let mut loads = Loads::start_with(
                    &spec,
                    &ctx.exe,
                    &StartOptions {
                        sched: Some(SchedParams {
                            policy: Policy::Rr,
                            priority: 1,
                        }),
                    },
                )
                .map_err(|e| Failure::system(e.to_string()))?;
                // The window starts when every copy sorts (starting copies queue behind running ones).
                let ready = loads.wait_ready(Duration::from_secs(30));
                if ready != n as usize {
                    return Err(Failure::system(format!(
                        "only {ready} of {n} sort copies started within 30 s"
                    )));
                }
                pause(ctx, s.sort_ns);
                let reports = loads.stop();
                let got: Vec<_> = reports.iter().filter_map(|r| r.2.as_ref()).collect();
                if got.len() != n as usize {
                    return Err(Failure::system(format!(
                        "only {} of {n} sort copies reported their work",
                        got.len()
                    )));
                }
                // Per second of the copies' own CPU time: copies start and stop a little apart, and this
                // machine's CPU is shared, so wall time would count waiting; CPU time counts what the
                // switches and cache refills cost each copy.
                let ops: u64 = got.iter().map(|r| r.ops).sum();
                let cpu_ns: u64 = got.iter().filter_map(|r| r.cpu_ns).sum();
                let per_second = if cpu_ns > 0 {
                    ops as f64 * 1e9 / cpu_ns as f64
                } else {
                    0.0
                };
                let ms_per_sort = if per_second > 0.0 {
                    sort_len as f64 / per_second * 1e3
                } else {
                    0.0
                };
                sort_json.push(serde_json::json!({
                    "copies": n,
                    "rr_timeslice_ms": ms,
                    "rr_timeslice_effective_ns": effective_ns,
                    "numbers_per_cpu_second": per_second.round() as u64,
                    "ns_per_sort": (ms_per_sort * 1e6).round() as u64,
                    "array_numbers": sort_len as u64,
                    "reports": got,
                }));
                points.push(SortPoint {
                    timeslice_ms: ms,
                    effective_ns,
                    copies: n,
                    per_second,
                    ms_per_sort,
                });
            }
            drop(guard);
        }
        doc.extra.insert("sort_throughput".into(), sort_json.into());
        close_doc(ctx, &mut doc);

        // ---- tables ----
        let model = if host.cpu_model.is_empty() {
            "this machine".to_string()
        } else {
            format!("here: {}", host.cpu_model)
        };
        let mut t1 = Table::new(&[
            "Processor",
            "Default cycles",
            "us",
            "Without 8253 cycles",
            "us",
        ])
        .titled(
            "Etsion Table 1: clock interrupt processing overhead (average ± standard deviation)",
        );
        for r in &TABLE1 {
            t1.row(r.iter().map(|s| s.to_string()));
        }
        t1.rule();
        match &gc.tick {
            Some(tk) => t1.row([
                model.clone(),
                "-".into(),
                "-".into(),
                format!(
                    "{:.0} ± {:.0}",
                    cycles(tk.mean_ns as f64),
                    cycles(tk.stddev_ns as f64)
                ),
                us2(tk.mean_ns as f64),
            ]),
            None => t1.row([
                model.clone(),
                "-".into(),
                "-".into(),
                "no tick found".into(),
                "-".into(),
            ]),
        };
        t1.note(format!(
            "Here: the gap one timer tick leaves in a busy loop (SCHED_FIFO 1) on CPU {cpu}, found at one phase of the tick period \
             over {} ({:.0} gaps/s above 500 ns in all, {:.3} % of the time lost; HZ {}).",
            format_ns(gc.wall_ns),
            gc.gaps_per_second(),
            gc.lost_fraction() * 100.0,
            gc.tick.as_ref().map(|t| t.hz.to_string()).unwrap_or_else(|| "unknown".into()),
        ));
        if let Some(tk) = &gc.tick {
            t1.note(format!(
                "{} tick gaps, median {}; {} longer than {}x the median (a tick that met something longer) left out of the mean.",
                tk.gaps,
                format_ns(tk.median_ns),
                tk.trimmed,
                gaps::TICK_TRIM
            ));
        }
        t1.note(format!(
            "Cycles are TSC cycles ({:.2} GHz). No 8253 is read on a tick today (the clocksource is {}).",
            cal.hz() / 1e9,
            host.clocksource
        ));
        let l2 = m
            .sizes
            .iter()
            .find(|r| r.size.label == "L2" && r.method == memcpy::Method::Memcpy);
        let sd_ns = |rec: &punctual_stats::Recorder| rec.summary().stddev as f64;
        let mut t2 = Table::new(&[
            "Processor",
            "Context switch cycles",
            "us",
            "Cache BW MB/s",
            "Trap cycles",
            "us",
        ])
        .titled("Etsion Table 2: other overheads (average ± standard deviation)");
        for r in &TABLE2 {
            t2.row(r.iter().map(|s| s.to_string()));
        }
        t2.rule();
        t2.row([
            model.clone(),
            format!(
                "{:.0} ± {:.0}",
                cycles(c.mean_switch_ns()),
                cycles(sd_ns(&c.per_switch))
            ),
            us2(c.mean_switch_ns()),
            l2.map(|r| format!("{:.0} ± {:.0}", r.mb_per_s_mean, r.mb_per_s_stddev))
                .unwrap_or_else(|| "-".into()),
            format!(
                "{:.0} ± {:.0}",
                cycles(t.mean_ns()),
                cycles(sd_ns(&t.per_call))
            ),
            us2(t.mean_ns()),
        ]);
        t2.note("Here: two processes pinned to one CPU passing a byte through pipes (half a round trip); getpid through syscall(2); memcpy of a size inside L2. Deviations are between batches.");
        let mut tb = Table::new(&[
            "Copy size",
            "level",
            "memcpy MB/s",
            "± sd",
            "loop MB/s",
            "± sd",
        ])
        .titled("Copy bandwidth at each level");
        for r in m
            .sizes
            .iter()
            .filter(|r| r.method == memcpy::Method::Memcpy)
        {
            let lp = m
                .sizes
                .iter()
                .find(|l| l.method == memcpy::Method::Loop && l.size == r.size);
            tb.row([
                memcpy::format_bytes(r.size.bytes),
                r.size.label.clone(),
                format!("{:.0}", r.mb_per_s()),
                format!("{:.0}", r.mb_per_s_stddev),
                lp.map(|l| format!("{:.0}", l.mb_per_s()))
                    .unwrap_or_else(|| "-".into()),
                lp.map(|l| format!("{:.0}", l.mb_per_s_stddev))
                    .unwrap_or_else(|| "-".into()),
            ]);
        }
        tb.note("memcpy: the C library's (the paper's); loop: 16-byte vector loads and stores. Where memcpy is slower in cache than in memory, the library chose rep movsb, which this machine runs slowly.");
        let mut header = vec!["Configuration".to_string()];
        header.extend(
            s.copies
                .iter()
                .map(|n| format!("{n} cop{}", if *n == 1 { "y" } else { "ies" })),
        );
        header.push("ms per sort".into());
        let header_refs: Vec<&str> = header.iter().map(String::as_str).collect();
        let mut ts = Table::new(&header_refs).titled("Etsion Figs. 2, 3, 8: sort throughput (numbers sorted per CPU-second, all copies) against the quantum");
        let blank = || vec!["-".to_string(); s.copies.len()];
        let eight = s.copies.iter().position(|&n| n == 8);
        let published_row = |label: &str, at8: Option<&str>, ms: &str| {
            let mut r = vec![label.to_string()];
            let mut b = blank();
            if let (Some(i), Some(v)) = (eight, at8) {
                b[i] = v.to_string();
            }
            r.extend(b);
            r.push(ms.to_string());
            r
        };
        ts.row(published_row(
            "paper PIII-664, 100 Hz, 50 ms quanta",
            None,
            SORT_MS_100HZ,
        ));
        ts.row(published_row(
            "paper PIII-664, 10,000 Hz, 50 ms quanta",
            None,
            SORT_MS_10000HZ,
        ));
        ts.row(published_row(
            "paper PIII-664, 100 Hz, 60 ms quanta (Fig. 8)",
            Some(FIG8_PIII664_BASE),
            "-",
        ));
        ts.row(published_row(
            "paper PIII-1.133, 20,000 Hz, 100 us quanta (Fig. 8)",
            Some(FIG8_PIII1133_EXTREME),
            "-",
        ));
        ts.rule();
        let base: Vec<f64> = s
            .copies
            .iter()
            .map(|&n| {
                points
                    .iter()
                    .find(|p| p.timeslice_ms == s.timeslices_ms[0] && p.copies == n)
                    .map(|p| p.per_second)
                    .unwrap_or(0.0)
            })
            .collect();
        for &ms in &s.timeslices_ms {
            let row_points: Vec<&SortPoint> =
                points.iter().filter(|p| p.timeslice_ms == ms).collect();
            if row_points.is_empty() {
                continue;
            }
            let eff = row_points[0]
                .effective_ns
                .map(format_ns)
                .unwrap_or_else(|| "?".into());
            let mut r = vec![format!("here, RR timeslice {ms} ms (effective {eff})")];
            for (i, &n) in s.copies.iter().enumerate() {
                r.push(match row_points.iter().find(|p| p.copies == n) {
                    Some(p) if ms != s.timeslices_ms[0] && base[i] > 0.0 => {
                        format!(
                            "{} ({:+.1} %)",
                            group(p.per_second.round() as u64),
                            (base[i] / p.per_second - 1.0) * 100.0
                        )
                    }
                    Some(p) => group(p.per_second.round() as u64),
                    None => "-".into(),
                });
            }
            r.push(
                row_points
                    .iter()
                    .find(|p| p.copies == 1)
                    .map(|p| format!("{:.3}", p.ms_per_sort))
                    .unwrap_or_else(|| "-".into()),
            );
            ts.row(r);
        }
        ts.note(format!(
            "Here: {} numbers ({} KiB, half the L2 cache) per sort, introsort; copies SCHED_RR 1 on CPU {cpu}; per second of the copies' \
             own CPU time (this machine's CPU is shared). In parentheses: added overhead against the {} ms row, as in Figs. 2 and 3.",
            group(sort_len as u64),
            sort_len * 4 / 1024,
            s.timeslices_ms[0]
        ));
        let lines: Vec<punctual_plot::Line> = s
            .timeslices_ms
            .iter()
            .map(|&ms| punctual_plot::Line {
                label: format!("RR timeslice {ms} ms"),
                points: points
                    .iter()
                    .filter(|p| p.timeslice_ms == ms)
                    .map(|p| (p.copies as f64, p.per_second / 1e6))
                    .collect(),
            })
            .collect();
        let fig = figure(
            "etsion-overhead-sort",
            punctual_plot::line_plot(
                "Etsion Figs. 2, 3, 8: sort throughput against copies and quantum",
                "copies",
                "million numbers sorted per CPU-second",
                &lines,
                false,
                false,
            ),
        )?;
        Ok(Report {
            tables: vec![t1, t2, tb, ts],
            doc,
            figures: vec![fig],
        })
    }
}
