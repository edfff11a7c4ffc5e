//! What `punctual bench` asks for, checked into the measurements' configurations before anything
//! runs. Every refusal is [`BenchError::Invalid`] (exit 2) and names the flag that fixes it.

use crate::dispatch::{DispatchConfig, Event};
use crate::gaps::GapsConfig;
use crate::measure::AlarmBench;
use crate::memcpy::{self, CopySize, MemcpyConfig, Method};
use crate::BenchError;
use punctual_latency::alarms::{AlarmConfig, AlarmWorkload, Mechanism};
use punctual_load::LoadSpec;
use punctual_rt::{Policy, RtWant, SchedParams};
use punctual_time::format_ns;

/// The most alarms per process a run may ask for (a typo should not mean a week of waiting).
pub const MAX_ALARMS: u64 = 1_000_000;

/// `flag` must be more than zero.
pub fn nonzero(flag: &str, v: u64) -> Result<(), BenchError> {
    if v == 0 {
        return Err(BenchError::Invalid(format!(
            "{flag} must be more than zero"
        )));
    }
    Ok(())
}

impl MemcpyConfig {
    /// Copies of `sizes` (default: inside L1, L2, L3 and memory of `cpu`), each for `per_size_ns`.
    pub fn request(
        sizes: Option<&[usize]>,
        methods: Vec<Method>,
        per_size_ns: u64,
        cpu: usize,
        sched: SchedParams,
    ) -> Result<MemcpyConfig, BenchError> {
        let sizes = match sizes {
            Some(v) => v
                .iter()
                .map(|&b| CopySize {
                    label: memcpy::level_of(b, cpu),
                    bytes: b,
                })
                .collect(),
            None => memcpy::default_sizes(cpu),
        };
        memcpy::check_sizes(&sizes).map_err(|e| BenchError::Invalid(format!("--sizes: {e}")))?;
        Ok(MemcpyConfig {
            sizes,
            methods,
            per_size_ns,
            cpu: Some(cpu),
            sched,
        })
    }
}

impl DispatchConfig {
    /// An `event` every `interval_ns` for `duration_ns`, raised on `raiser_cpu` (default: the
    /// first online CPU) for a waiter on `waiter_cpu`; both in the class of `sched`.
    pub fn request(
        event: Event,
        interval_ns: u64,
        duration_ns: u64,
        raiser_cpu: Option<usize>,
        waiter_cpu: usize,
        sched: SchedParams,
    ) -> Result<DispatchConfig, BenchError> {
        nonzero("-i/--interval", interval_ns)?;
        if duration_ns < interval_ns {
            return Err(BenchError::Invalid(
                "-D/--duration must be at least one -i/--interval".into(),
            ));
        }
        let raiser_cpu = raiser_cpu.unwrap_or(punctual_rt::online_cpus()[0]);
        punctual_rt::affinity::check_online(&[raiser_cpu])
            .map_err(|e| BenchError::Invalid(format!("--raiser-cpu: {e}")))?;
        Ok(DispatchConfig {
            event,
            raiser_cpu,
            waiter_cpu,
            waiter: sched,
            raiser: sched,
            interval_ns,
            duration_ns,
        })
    }
}

impl GapsConfig {
    /// Loops on `cpus` (default: the last online CPU) for `duration_ns`, counting every step
    /// longer than `threshold_ns` (more than zero) as a gap.
    pub fn request(
        cpus: Option<Vec<usize>>,
        duration_ns: u64,
        threshold_ns: u64,
        sched: SchedParams,
    ) -> Result<GapsConfig, BenchError> {
        nonzero("--threshold", threshold_ns)?;
        Ok(GapsConfig {
            cpus: cpus.unwrap_or_else(|| vec![punctual_rt::affinity::last_online_cpu()]),
            duration_ns,
            threshold_ns,
            sched,
            hz: None,
        })
    }
}

/// Etsion's alarm workloads as `punctual bench alarm` gives them.
#[derive(Clone, Debug)]
pub struct AlarmRequest {
    pub workload: AlarmWorkload,
    pub mechanism: Mechanism,
    /// Alarms per alarm-setting process, 1 to [`MAX_ALARMS`].
    pub alarms: u64,
    pub min_delay: u64,
    pub max_delay: u64,
    /// The SCHED_RR timeslice to set for the run (whole milliseconds).
    pub rr_timeslice: Option<u64>,
    /// The one CPU every process shares (default: the last online CPU).
    pub cpu: Option<usize>,
    pub policy: Policy,
    pub priority: u32,
}

/// The priority of the alarm processes when none is given: the workloads' under rr/fifo.
pub fn alarm_priority(policy: Policy) -> u32 {
    if policy.is_realtime() {
        punctual_latency::alarms::DEFAULT_PRIORITY
    } else {
        0
    }
}

impl AlarmRequest {
    /// The measurement, every value checked.
    pub fn bench(self, want: RtWant, load: LoadSpec) -> Result<AlarmBench, BenchError> {
        if self.alarms == 0 || self.alarms > MAX_ALARMS {
            return Err(BenchError::Invalid(format!(
                "--alarms {}: give 1 to {MAX_ALARMS}",
                self.alarms
            )));
        }
        nonzero("--min-delay", self.min_delay)?;
        if self.min_delay > self.max_delay {
            return Err(BenchError::Invalid(
                "--min-delay must not be longer than --max-delay".into(),
            ));
        }
        let timeslice_ms = match self.rr_timeslice {
            // The sysctl takes 1 to i32::MAX ms; above that the kernel's refusal came after the
            // measurement had started, as exit 3.
            Some(ns) if ns == 0 || ns % 1_000_000 != 0 || ns / 1_000_000 > i32::MAX as u64 => {
                return Err(BenchError::Invalid(format!(
                    "--rr-timeslice {}: the kernel takes whole milliseconds, 1ms to 2147483647ms (it then rounds up to whole ticks)",
                    format_ns(ns)
                )))
            }
            Some(ns) => Some(ns / 1_000_000),
            None => None,
        };
        let cfg = AlarmConfig {
            cpu: Some(
                self.cpu
                    .unwrap_or_else(punctual_rt::affinity::last_online_cpu),
            ),
            policy: self.policy,
            priority: self.priority,
            alarms: self.alarms,
            delay_min: self.min_delay,
            delay_max: self.max_delay,
            ..AlarmConfig::paper(self.workload, self.mechanism)
        };
        Ok(AlarmBench::new(cfg, want, load, timeslice_ms))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alarm() -> AlarmRequest {
        AlarmRequest {
            workload: "cont:2".parse().unwrap(),
            mechanism: Mechanism::Signal,
            alarms: 10,
            min_delay: 1_000_000,
            max_delay: 2_000_000,
            rr_timeslice: None,
            cpu: Some(0),
            policy: Policy::Rr,
            priority: 10,
        }
    }

    fn want() -> RtWant {
        RtWant {
            policy: Policy::Rr,
            priority: 10,
            mlock: false,
            dma_latency_us: None,
        }
    }

    fn refusal(r: AlarmRequest) -> String {
        match r.bench(want(), LoadSpec::default()) {
            Err(BenchError::Invalid(m)) => m,
            Err(e) => panic!("not a usage error: {e}"),
            Ok(_) => panic!("accepted"),
        }
    }

    #[test]
    fn alarm_values_out_of_range_are_refused_naming_the_flag() {
        let m = refusal(AlarmRequest {
            alarms: MAX_ALARMS + 1,
            ..alarm()
        });
        assert!(m.starts_with("--alarms 1000001: give 1 to"), "{m}");
        let m = refusal(AlarmRequest {
            min_delay: 0,
            ..alarm()
        });
        assert_eq!(m, "--min-delay must be more than zero");
        let m = refusal(AlarmRequest {
            min_delay: 3_000_000,
            ..alarm()
        });
        assert_eq!(m, "--min-delay must not be longer than --max-delay");
        for bad in [0, 1_500_000, (i32::MAX as u64 + 1) * 1_000_000] {
            let m = refusal(AlarmRequest {
                rr_timeslice: Some(bad),
                ..alarm()
            });
            assert!(m.starts_with("--rr-timeslice "), "{m}");
        }
    }

    #[test]
    fn an_alarm_request_becomes_the_papers_configuration_with_the_values_given() {
        let b = AlarmRequest {
            rr_timeslice: Some(30_000_000),
            ..alarm()
        }
        .bench(want(), LoadSpec::default())
        .unwrap();
        assert_eq!(b.rr_timeslice_ms, Some(30));
        assert_eq!((b.cfg.cpu, b.cfg.alarms, b.cfg.priority), (Some(0), 10, 10));
        assert_eq!((b.cfg.delay_min, b.cfg.delay_max), (1_000_000, 2_000_000));
        assert_eq!(alarm_priority(Policy::Rr), 10);
        assert_eq!(alarm_priority(Policy::Other), 0);
    }

    #[test]
    fn dispatch_needs_an_interval_that_fits_the_duration() {
        let sched = SchedParams {
            policy: Policy::Other,
            priority: 0,
        };
        let r = DispatchConfig::request(Event::Eventfd, 0, 1_000, None, 0, sched);
        assert!(
            matches!(r, Err(BenchError::Invalid(m)) if m == "-i/--interval must be more than zero")
        );
        let r = DispatchConfig::request(Event::Eventfd, 2_000, 1_000, None, 0, sched);
        assert!(
            matches!(r, Err(BenchError::Invalid(m)) if m.contains("at least one -i/--interval"))
        );
        let r = DispatchConfig::request(Event::Eventfd, 1_000, 2_000, Some(100_000), 0, sched);
        assert!(matches!(r, Err(BenchError::Invalid(m)) if m.starts_with("--raiser-cpu: ")));
        let c = DispatchConfig::request(Event::Pipe, 1_000, 2_000, None, 0, sched).unwrap();
        assert_eq!(c.raiser_cpu, punctual_rt::online_cpus()[0]);
        assert_eq!(
            (c.interval_ns, c.duration_ns, c.waiter_cpu),
            (1_000, 2_000, 0)
        );
    }

    #[test]
    fn gaps_need_a_threshold_and_default_to_the_last_cpu() {
        let sched = SchedParams {
            policy: Policy::Other,
            priority: 0,
        };
        let r = GapsConfig::request(None, 1_000, 0, sched);
        assert!(
            matches!(r, Err(BenchError::Invalid(m)) if m == "--threshold must be more than zero")
        );
        let c = GapsConfig::request(None, 1_000, 500, sched).unwrap();
        assert_eq!(c.cpus, vec![punctual_rt::affinity::last_online_cpu()]);
        let c = GapsConfig::request(Some(vec![0]), 1_000, 500, sched).unwrap();
        assert_eq!((c.cpus, c.threshold_ns, c.hz), (vec![0], 500, None));
    }

    #[test]
    fn memcpy_takes_the_sizes_given_or_the_cache_levels() {
        let sched = SchedParams {
            policy: Policy::Other,
            priority: 0,
        };
        let c = MemcpyConfig::request(Some(&[4096]), vec![Method::Loop], 1, 0, sched).unwrap();
        assert_eq!(c.sizes.len(), 1);
        assert_eq!(c.sizes[0].bytes, 4096);
        let d = MemcpyConfig::request(None, vec![Method::Loop], 1, 0, sched).unwrap();
        assert_eq!(d.sizes.len(), memcpy::default_sizes(0).len());
        let e = MemcpyConfig::request(Some(&[]), vec![Method::Loop], 1, 0, sched);
        assert!(matches!(e, Err(BenchError::Invalid(m)) if m.starts_with("--sizes: ")));
    }
}
