//! `punctual __periodic`: one periodic process of the kurt-periodic experiment (hidden).

use clap::Args;
use punctual_experiments::kurt_periodic::{body as run_body, ChildSpec, Mode};

/// The experiment hands the whole process over as `--spec JSON`; the flags remain for plans and
/// tests that start wake clients by hand.
#[derive(Args, Debug)]
pub struct PeriodicBodyArgs {
    /// The process as JSON (kurt-periodic's `ChildSpec`), instead of the flags below.
    #[arg(long, conflicts_with_all = ["mode", "period_ns", "first_ns", "until_ns", "channel", "explain_bound_ns"])]
    pub spec: Option<String>,
    #[arg(long, required_unless_present = "spec")]
    pub mode: Option<Mode>,
    #[arg(long, required_unless_present = "spec")]
    pub period_ns: Option<u64>,
    #[arg(long, default_value_t = 0)]
    pub first_ns: u64,
    #[arg(long, default_value_t = 0)]
    pub until_ns: u64,
    #[arg(long)]
    pub channel: Option<String>,
    /// Report the releases later than this (ns) for --explain.
    #[arg(long)]
    pub explain_bound_ns: Option<u64>,
}

pub fn body(a: PeriodicBodyArgs) -> anyhow::Result<punctual_session::Exit> {
    let spec = match (a.spec, a.mode, a.period_ns) {
        (Some(json), _, _) => ChildSpec::from_json(&json),
        (None, Some(mode), Some(period_ns)) => Ok(ChildSpec {
            mode,
            period_ns,
            first_ns: a.first_ns,
            until_ns: a.until_ns,
            channel: a.channel,
            late_bound_ns: a.explain_bound_ns,
        }),
        _ => Err("--spec, or --mode and --period-ns".into()),
    };
    match spec.and_then(|s| run_body(&s)) {
        Ok(line) => {
            println!("{line}");
            Ok(punctual_session::Exit::Ok)
        }
        Err(e) => {
            eprintln!("punctual __periodic: {e}");
            Ok(punctual_session::Exit::System)
        }
    }
}
