//! `punctual bench <ctxsw|trap|memcpy|dispatch|gaps|alarm>` as measurements of the lifecycle
//! (`punctual_session::drive`): each holds the session's real-time class, runs one
//! micro-measurement and reports its series and table ([`crate::report`]).

use crate::{ctxsw, dispatch, gaps, memcpy, report, trap, tsc};
use punctual_latency::alarms::{run_alarms_counted, AlarmConfig, AlarmOutcome};
use punctual_load::LoadSpec;
use punctual_measure::{Applied, Ctx, LiveSpec, Measurement, Report};
use punctual_result::{Failure, ResultDoc, Table};
use punctual_rt::{Policy, RtWant, SchedParams};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A micro-measurement's configuration with what the session holds for it and its load; one
/// lifecycle measurement for all of them, the differences in [`Micro`].
pub struct Bench<C> {
    pub cfg: C,
    pub want: RtWant,
    pub load: LoadSpec,
}

/// What differs between the micro-measurements.
pub trait Micro {
    type Out;
    /// Names the live line (`bench ctxsw`).
    const LABEL: &'static str;
    /// Whether the hypervisor's steal time bears on the figures.
    const STEAL: bool = true;
    /// How long `run` takes, for the live line.
    fn expected_ns(&self) -> u64;
    /// Measure, in the class the session holds (`ctx.sched()`).
    fn run(&mut self, ctx: &Ctx) -> Result<Self::Out, Failure>;
    fn report(&self, out: Self::Out, ctx: &Ctx, doc: &mut ResultDoc)
        -> Result<Vec<Table>, Failure>;
}

impl<C: Micro> Measurement for Bench<C> {
    type Outcome = C::Out;
    fn label(&self) -> String {
        C::LABEL.into()
    }
    fn wants(&self) -> Option<RtWant> {
        Some(self.want)
    }
    fn records_steal(&self) -> bool {
        C::STEAL
    }
    fn load(&self) -> LoadSpec {
        self.load.clone()
    }
    fn live(&self) -> Option<LiveSpec> {
        Some(LiveSpec::timed(self.cfg.expected_ns(), String::new))
    }
    fn run(&mut self, ctx: &Ctx) -> Result<C::Out, Failure> {
        self.cfg.run(ctx)
    }
    fn report(&self, out: C::Out, ctx: &Ctx, doc: &mut ResultDoc) -> Result<Report, Failure> {
        Ok(Report::tables(self.cfg.report(out, ctx, doc)?))
    }
}

/// The figures `run` produced, with the cycle-counter calibration taken beside them.
pub struct Measured<O> {
    pub out: O,
    pub cal: tsc::Calibration,
}

fn calibrate() -> tsc::Calibration {
    tsc::Calibration::measure(20_000_000)
}

impl Micro for ctxsw::CtxswConfig {
    type Out = Measured<ctxsw::CtxswOutcome>;
    const LABEL: &'static str = "bench ctxsw";
    const STEAL: bool = false;
    fn expected_ns(&self) -> u64 {
        self.duration_ns
    }
    fn run(&mut self, ctx: &Ctx) -> Result<Self::Out, Failure> {
        self.sched = ctx.sched();
        let cal = calibrate();
        let out = ctxsw::run(self, ctx.stop())?;
        Ok(Measured { out, cal })
    }
    fn report(&self, m: Self::Out, ctx: &Ctx, doc: &mut ResultDoc) -> Result<Vec<Table>, Failure> {
        ctx.runtime_fallbacks(doc, m.out.fallback.iter());
        Ok(vec![report::ctxsw(doc, self, &m.out, &m.cal)])
    }
}

impl Micro for trap::TrapConfig {
    type Out = Measured<trap::TrapOutcome>;
    const LABEL: &'static str = "bench trap";
    const STEAL: bool = false;
    fn expected_ns(&self) -> u64 {
        self.duration_ns
    }
    fn run(&mut self, ctx: &Ctx) -> Result<Self::Out, Failure> {
        self.sched = ctx.sched();
        let cal = calibrate();
        let out = trap::run(self, ctx.stop())?;
        Ok(Measured { out, cal })
    }
    fn report(&self, m: Self::Out, ctx: &Ctx, doc: &mut ResultDoc) -> Result<Vec<Table>, Failure> {
        ctx.runtime_fallbacks(doc, m.out.fallback.iter());
        Ok(vec![report::trap(doc, self, &m.out, &m.cal)])
    }
}

impl Micro for memcpy::MemcpyConfig {
    type Out = memcpy::MemcpyOutcome;
    const LABEL: &'static str = "bench memcpy";
    fn expected_ns(&self) -> u64 {
        let runs = (self.sizes.len() * self.methods.len()) as u64;
        self.per_size_ns.saturating_mul(runs)
    }
    fn run(&mut self, ctx: &Ctx) -> Result<Self::Out, Failure> {
        self.sched = ctx.sched();
        Ok(memcpy::run(self, ctx.stop())?)
    }
    fn report(
        &self,
        out: Self::Out,
        ctx: &Ctx,
        doc: &mut ResultDoc,
    ) -> Result<Vec<Table>, Failure> {
        ctx.runtime_fallbacks(doc, out.fallback.iter());
        Ok(vec![report::memcpy(doc, self, &out)])
    }
}

impl Micro for dispatch::DispatchConfig {
    type Out = dispatch::DispatchOutcome;
    const LABEL: &'static str = "bench dispatch";
    fn expected_ns(&self) -> u64 {
        self.duration_ns
    }
    fn run(&mut self, ctx: &Ctx) -> Result<Self::Out, Failure> {
        self.waiter = ctx.sched();
        // The raiser must not wait behind the waiter's class: one step below the top.
        self.raiser = if ctx.rt.policy.is_realtime() {
            SchedParams {
                policy: Policy::Fifo,
                priority: 98,
            }
        } else {
            ctx.sched()
        };
        Ok(dispatch::run(self, ctx.stop())?)
    }
    fn report(
        &self,
        out: Self::Out,
        ctx: &Ctx,
        doc: &mut ResultDoc,
    ) -> Result<Vec<Table>, Failure> {
        ctx.runtime_fallbacks(doc, out.raiser_fallback.iter());
        Ok(vec![report::dispatch(doc, self, &out)])
    }
}

impl Micro for gaps::GapsConfig {
    type Out = gaps::GapsOutcome;
    const LABEL: &'static str = "bench gaps";
    fn expected_ns(&self) -> u64 {
        self.duration_ns
    }
    fn run(&mut self, ctx: &Ctx) -> Result<Self::Out, Failure> {
        self.sched = ctx.sched();
        self.hz = ctx.host().hz;
        Ok(gaps::run(self, ctx.stop())?)
    }
    fn report(
        &self,
        out: Self::Out,
        ctx: &Ctx,
        doc: &mut ResultDoc,
    ) -> Result<Vec<Table>, Failure> {
        ctx.runtime_fallbacks(doc, out.cpus.iter().filter_map(|c| c.fallback.as_ref()));
        Ok(report::gaps(doc, self, &out))
    }
}

/// Etsion's alarm workloads (`bench alarm`), optionally at another RR timeslice.
pub struct AlarmBench {
    pub cfg: AlarmConfig,
    pub want: RtWant,
    pub load: LoadSpec,
    /// Set the SCHED_RR timeslice to this many ms for the run (journalled, restored after).
    pub rr_timeslice_ms: Option<u64>,
    taken: Arc<AtomicU64>,
}

impl AlarmBench {
    pub fn new(
        cfg: AlarmConfig,
        want: RtWant,
        load: LoadSpec,
        rr_timeslice_ms: Option<u64>,
    ) -> Self {
        AlarmBench {
            cfg,
            want,
            load,
            rr_timeslice_ms,
            taken: Arc::new(AtomicU64::new(0)),
        }
    }
}

/// What an alarm run measured, with the RR timeslice it ran under.
pub struct AlarmMeasured {
    pub out: AlarmOutcome,
    /// What `sched_rr_get_interval` said during the run.
    pub effective_rr_ns: Option<u64>,
}

impl Measurement for AlarmBench {
    type Outcome = AlarmMeasured;
    fn label(&self) -> String {
        "bench alarm".into()
    }
    fn wants(&self) -> Option<RtWant> {
        Some(self.want)
    }
    fn load(&self) -> LoadSpec {
        self.load.clone()
    }
    fn apply(&mut self, _ctx: &Ctx) -> Result<Option<Box<dyn Applied>>, Failure> {
        Ok(match self.rr_timeslice_ms {
            Some(ms) => Some(Box::new(punctual_rt::rr::set_ms(ms)?)),
            None => None,
        })
    }
    /// Alarms taken of all asked (Etsion's 500 per process take minutes).
    fn live(&self) -> Option<LiveSpec> {
        let total = self
            .cfg
            .alarms
            .saturating_mul(self.cfg.workload.alarm_processes() as u64);
        let taken = self.taken.clone();
        Some(LiveSpec::counted(total, move || {
            let n = taken.load(Ordering::Relaxed);
            (n, format!("{n} of {total} alarms taken"))
        }))
    }
    fn run(&mut self, ctx: &Ctx) -> Result<AlarmMeasured, Failure> {
        self.cfg.policy = ctx.rt.policy;
        self.cfg.priority = ctx.rt.priority;
        let effective_rr_ns = punctual_rt::rr::effective_ns();
        let out = run_alarms_counted(&self.cfg, ctx.stop(), &self.taken)?;
        Ok(AlarmMeasured {
            out,
            effective_rr_ns,
        })
    }
    fn report(&self, m: AlarmMeasured, ctx: &Ctx, doc: &mut ResultDoc) -> Result<Report, Failure> {
        ctx.runtime_fallbacks(
            doc,
            m.out.processes.iter().filter_map(|p| p.fallback.as_ref()),
        );
        let rr_ms = self.rr_timeslice_ms.or_else(punctual_rt::rr::read_ms);
        Ok(Report::tables(vec![report::alarm(
            doc,
            &self.cfg,
            &m.out,
            rr_ms,
            m.effective_rr_ns,
        )]))
    }
}
