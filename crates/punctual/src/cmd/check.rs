//! `punctual check`: the main job. The measurement is `punctual_latency::measure::Check`.

use crate::cli::CheckArgs;
use punctual_latency::check::{default_load, CheckConfig};
use punctual_latency::measure::Check;
use punctual_result::Failure;
use punctual_session::{drive, Env, Exit};
use punctual_time::format_ns;

/// The shortest check that still gives each phase a few hundred releases.
const MIN_DURATION: u64 = 1_000_000_000;

pub fn run(a: CheckArgs, env: &Env) -> anyhow::Result<Exit> {
    a.rt.validate()?;
    let cpu = a.rt.one_cpu()?;
    if a.duration < MIN_DURATION {
        return Err(Failure::usage(format!(
            "-D/--duration {} is too short; use 1s or more",
            format_ns(a.duration)
        ))
        .into());
    }
    if a.interval < 10_000 || a.interval > a.duration / 40 {
        return Err(Failure::usage(
            "-i/--interval must be at least 10us and leave ten releases per phase",
        )
        .into());
    }
    let outputs = a.out.outputs()?.store()?;
    let cfg = CheckConfig {
        cpu,
        duration: a.duration,
        interval: a.interval,
        load: a.load.clone().unwrap_or_else(default_load),
        exe: env.exe.clone(),
        policy: a.rt.policy,
        priority: a.rt.priority(),
        timer_slack_ns: None,
    };
    Ok(drive(&mut Check::new(cfg, a.rt.want()), &outputs, env)?)
}
