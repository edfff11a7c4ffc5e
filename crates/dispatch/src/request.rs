//! What `punctual run` is asked, checked before anything changes on the system (SPEC's "bad
//! input writes nothing"): the plan's programs and targets, the dispatcher CPUs, the spin margin
//! against the periods, admission control (`--force`), the shield. The binary parses the flags
//! into a [`RunRequest`]; [`RunPlan::request`] owns the policy.

use crate::measure::RunPlan;
use crate::{preflight, shield, RunConfig};
use punctual_load::LoadSpec;
use punctual_plan::Plan;
use punctual_result::Failure;
use punctual_rt::RtWant;
use punctual_time::{format_ns, MarginPolicy};

/// `punctual run`'s request: a loaded plan and what the flags say about running it.
pub struct RunRequest {
    pub plan: Plan,
    /// `-a`, as given (default: the plan's CPUs, else the last online CPU).
    pub affinity: Option<String>,
    /// `-D` (default: the plan's duration).
    pub duration: Option<u64>,
    /// `--spin-margin` (default: the plan's).
    pub margin: Option<MarginPolicy>,
    pub watchdog: Option<u64>,
    pub attach_timeout: u64,
    /// Largest share of an unshielded CPU the dispatcher may take.
    pub spin_budget: f64,
    /// Largest work utilisation per CPU that admission control accepts.
    pub bound: f64,
    /// Run a plan admission control refuses (said in a note).
    pub force: bool,
    pub want: RtWant,
    /// Whether `-p` was given: unasked, the dispatcher runs one below the watchdog's 99.
    pub priority_given: bool,
    pub load: LoadSpec,
}

/// Dispatcher CPUs: `affinity` (`-a`), the plan's, or the last online CPU (CPU 0 takes most
/// interrupts); they and the CPUs the plan names must be online.
pub fn dispatcher_cpus(affinity: Option<&str>, plan: &Plan) -> Result<Vec<usize>, Failure> {
    let cpus = match affinity {
        Some(a) => punctual_rt::parse_cpu_list(a)
            .map_err(|e| Failure::usage(format!("-a/--affinity: {e}")))?,
        None => plan
            .cpus
            .clone()
            .unwrap_or_else(|| vec![punctual_rt::affinity::last_online_cpu()]),
    };
    let mut all = cpus.clone();
    all.extend(plan.named_cpus());
    // Name where the CPUs came from: the flag when given, else the plan (issue 19's bad-input run).
    let from = match affinity {
        Some(_) => "-a/--affinity",
        None => "the plan's CPUs",
    };
    punctual_rt::affinity::check_online(&all)
        .map_err(|e| Failure::usage(format!("{from}: {e}")))?;
    Ok(cpus)
}

/// `punctual plan check`: what `run` would refuse for `plan` (exit 2), then admission control on
/// the dispatcher CPUs (`affinity`) with `bound` per CPU, assuming `margin` (default: the plan's
/// fixed margin, or 50us for auto) and, on CPUs not shielded, `spin_budget`. Running none of it:
/// plugins are read, not loaded (their constructors would run as root). Returns the admission
/// and runs tables as text, and whether the plan is feasible.
pub fn plan_check(
    mut plan: Plan,
    affinity: Option<&str>,
    bound: f64,
    margin: Option<u64>,
    spin_budget: f64,
) -> Result<(String, bool), Failure> {
    preflight::check_static(&plan).map_err(|p| Failure::usage(preflight::describe(&p)))?;
    let cpus = dispatcher_cpus(affinity, &plan)?;
    if plan.shield {
        // What `run` would refuse when it shields (every online CPU, a CPU another shield holds),
        // as `run` refuses it: exit 2.
        shield::check(&cpus).map_err(Failure::from)?;
    }
    let margin = margin.unwrap_or_else(|| crate::measure::assumed_margin(plan.spin_margin));
    let shielded = plan.shield || shield::shielded_by_parent(&cpus);
    let budget = (!shielded).then_some(spin_budget);
    let r = crate::report::admit(&mut plan, &cpus, bound, margin, budget);
    let mut text = crate::report::admission_table(&plan, &r).render();
    text.push_str(&crate::report::runs_table(&preflight::runs(&plan)).render());
    Ok((text, r.feasible()))
}

/// A fixed margin must be shorter than every period (it is spun before each release).
fn check_margin(margin: MarginPolicy, plan: &Plan) -> Result<(), Failure> {
    let MarginPolicy::Fixed(m) = margin else {
        return Ok(());
    };
    match plan.tasks.iter().map(|t| t.period).min() {
        Some(p) if m >= p => Err(Failure::usage(format!(
            "--spin-margin {} must be shorter than the shortest period {}",
            format_ns(m),
            format_ns(p)
        ))),
        _ => Ok(()),
    }
}

impl RunPlan {
    /// The plan `r` asks for, admitted and phased, with its shield planned; every refusal is exit
    /// 2 before anything changes. The notes say what the user should know (a forced admission).
    pub fn request(r: RunRequest) -> Result<(RunPlan, Vec<String>), Failure> {
        if r.duration == Some(0) {
            return Err(Failure::usage(
                "-D/--duration must be more than zero, e.g. 10s",
            ));
        }
        preflight::check(&r.plan).map_err(|p| Failure::usage(preflight::describe(&p)))?;
        let cpus = dispatcher_cpus(r.affinity.as_deref(), &r.plan)?;
        let margin = r.margin.unwrap_or(r.plan.spin_margin);
        check_margin(margin, &r.plan)?;
        let cfg = RunConfig {
            cpus: cpus.clone(),
            margin,
            duration: r.duration.or(r.plan.duration),
            watchdog: r.watchdog,
            attach_timeout: r.attach_timeout,
            shielded: r.plan.shield || shield::shielded_by_parent(&cpus),
            spin_budget: r.spin_budget,
            ..RunConfig::default()
        };
        let mut want = r.want;
        // The watchdog takes the top priority; unasked, the dispatcher simply runs one below it
        // (asked for 99, it says so as a fallback).
        if !r.priority_given && cfg.watchdog.is_some() && want.policy.is_realtime() {
            want.priority = want.priority.min(98);
        }
        let shielding = r.plan.shield;
        let mut m = RunPlan::new(r.plan, cfg, want, r.load, r.bound);
        let mut notes = Vec::new();
        if !m.admission().feasible() {
            let reasons = m.admission().reasons().join("; ");
            if !r.force {
                return Err(Failure::usage(format!("plan refused by admission control: {reasons}. See `punctual plan check`, or pass --force to run it anyway")));
            }
            notes.push(format!(
                "running despite admission control (--force): {reasons}"
            ));
        }
        if shielding {
            m.shield =
                Some(shield::plan(&cpus, &[std::process::id() as i32]).map_err(Failure::from)?);
        }
        Ok((m, notes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use punctual_rt::Policy;

    fn request(toml: &str) -> RunRequest {
        RunRequest {
            plan: punctual_plan::parse::parse_str(toml, "p.toml", None).unwrap(),
            affinity: Some(punctual_rt::affinity::last_online_cpu().to_string()),
            duration: Some(1_000_000_000),
            margin: None,
            watchdog: Some(2_000_000_000),
            attach_timeout: 10_000_000_000,
            spin_budget: 1.0,
            bound: 0.9,
            force: false,
            want: RtWant {
                policy: Policy::Fifo,
                priority: 99,
                mlock: true,
                dma_latency_us: Some(0),
            },
            priority_given: false,
            load: LoadSpec::default(),
        }
    }

    const ONE_TASK: &str =
        "[[task]]\nname = \"t\"\nperiod = \"10ms\"\naction = { kind = \"mark\" }\n";
    /// Two tasks that each want 60 % of one CPU's time.
    const TOO_MUCH: &str = "[[task]]\nname = \"a\"\nperiod = \"10ms\"\nwcet = \"6ms\"\n\
        action = { kind = \"mark\" }\n\n[[task]]\nname = \"b\"\nperiod = \"10ms\"\n\
        wcet = \"6ms\"\naction = { kind = \"mark\" }\n";

    fn refusal(r: RunRequest) -> String {
        match RunPlan::request(r) {
            Ok(_) => panic!("accepted"),
            Err(f) => {
                assert_eq!(f.class, punctual_result::Class::Usage);
                f.message
            }
        }
    }

    #[test]
    fn the_dispatcher_runs_below_the_watchdog_unless_a_priority_was_asked() {
        let (m, notes) = RunPlan::request(request(ONE_TASK)).unwrap();
        assert_eq!(m.want.priority, 98);
        assert!(notes.is_empty(), "{notes:?}");
        let mut asked = request(ONE_TASK);
        asked.priority_given = true;
        assert_eq!(RunPlan::request(asked).unwrap().0.want.priority, 99);
        let mut off = request(ONE_TASK);
        off.watchdog = None;
        assert_eq!(RunPlan::request(off).unwrap().0.want.priority, 99);
    }

    #[test]
    fn a_margin_as_long_as_a_period_and_a_zero_duration_are_refused() {
        let mut r = request(ONE_TASK);
        r.margin = Some(MarginPolicy::Fixed(10_000_000));
        let m = refusal(r);
        assert!(
            m.contains("--spin-margin 10.0 ms") && m.contains("period 10.0 ms"),
            "{m}"
        );
        let mut r = request(ONE_TASK);
        r.duration = Some(0);
        assert!(refusal(r).contains("-D/--duration"));
    }

    #[test]
    fn admission_refuses_an_overloaded_plan_unless_forced_and_then_says_so() {
        let m = refusal(request(TOO_MUCH));
        assert!(
            m.contains("plan refused by admission control") && m.contains("--force"),
            "{m}"
        );
        let mut forced = request(TOO_MUCH);
        forced.force = true;
        let (m, notes) = RunPlan::request(forced).unwrap();
        assert!(!m.admission().feasible());
        assert_eq!(notes.len(), 1);
        assert!(notes[0].starts_with("running despite admission control (--force)"));
    }

    #[test]
    fn offline_cpus_are_named_by_where_they_came_from() {
        let mut r = request(ONE_TASK);
        r.affinity = Some("999".into());
        assert!(refusal(r).starts_with("-a/--affinity"));
        let mut r = request(&format!("[plan]\ncpus = \"999\"\n\n{ONE_TASK}"));
        r.affinity = None;
        // The plan's own CPUs are refused by the preflight, naming the plan.
        let m = refusal(r);
        assert!(
            m.starts_with("the plan names CPUs") && m.contains("999"),
            "{m}"
        );
    }
}
