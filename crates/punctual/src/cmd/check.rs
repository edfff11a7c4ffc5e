//! `punctual check`: the main job. The measurement is `punctual_latency::measure::Check`.

use crate::args::{duration, run_duration, ExplainArgs, OutputArgs, RtArgs};
use clap::Args;
use punctual_latency::check::{default_load, CheckConfig};
use punctual_latency::measure::Check;
use punctual_session::{drive_repeated, Env, Exit};

#[derive(Args, Debug)]
pub struct CheckArgs {
    /// Total duration; each of the four phases gets a quarter.
    #[arg(short = 'D', long, default_value = "30s", allow_hyphen_values = true, value_parser = run_duration, value_name = "DURATION")]
    pub duration: u64,
    /// Period between releases.
    #[arg(short = 'i', long, default_value = "1ms", allow_hyphen_values = true, value_parser = duration, value_name = "DURATION")]
    pub interval: u64,
    /// Load for the loaded phases (default: one cpu load per online CPU, and io:1).
    #[arg(long, value_name = "SPEC", value_parser = punctual_load::LoadSpec::parse_flag)]
    pub load: Option<punctual_load::LoadSpec>,
    /// Make N checks one after the other, each a result of its own (for `compare A1 A2 A3 --
    /// B1 B2 B3`); every other one runs punctual's method before plain sleep.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub repeat: u32,
    #[command(flatten)]
    pub rt: RtArgs,
    #[command(flatten)]
    pub out: OutputArgs,
    #[command(flatten)]
    pub explain: ExplainArgs,
}

pub fn run(a: CheckArgs, env: &Env) -> anyhow::Result<Exit> {
    a.rt.validate()?;
    let cfg = CheckConfig {
        cpu: a.rt.one_cpu()?,
        duration: a.duration,
        interval: a.interval,
        load: a.load.clone().unwrap_or_else(default_load),
        exe: env.exe.clone(),
        policy: a.rt.policy,
        priority: a.rt.priority(),
        timer_slack_ns: None,
        hybrid_first: false,
    };
    cfg.validate()?;
    let outputs = a.explain.outputs(a.out.outputs()?)?.repeated(a.repeat)?;
    let explain = a.explain.config(punctual_explain::DEFAULT_BOUND_NS)?;
    let want = a.rt.want();
    Ok(drive_repeated(a.repeat, &outputs, env, |k| {
        let cfg = CheckConfig {
            hybrid_first: k % 2 == 1,
            ..cfg.clone()
        };
        Check::new(cfg, want).explain(explain.clone())
    })?)
}
