//! `punctual __periodic`: one periodic process of the kurt-periodic experiment (hidden). The
//! experiment hands it over whole (`--spec JSON`); the flags stay for plans that spawn wake clients.

use clap::Args;
use punctual_experiments::kurt_periodic::{body as run_body, ChildSpec, Mode};

#[derive(Args, Debug)]
pub struct PeriodicBodyArgs {
    /// The process as JSON (kurt-periodic's `ChildSpec`), instead of the flags below.
    #[arg(long, value_parser = ChildSpec::from_json, conflicts_with_all = ["mode", "period_ns", "first_ns", "until_ns", "channel", "explain_bound_ns"])]
    pub spec: Option<ChildSpec>,
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
    let spec = a.spec.unwrap_or_else(|| ChildSpec {
        mode: a.mode.expect("clap requires --mode without --spec"),
        period_ns: a
            .period_ns
            .expect("clap requires --period-ns without --spec"),
        first_ns: a.first_ns,
        until_ns: a.until_ns,
        channel: a.channel,
        late_bound_ns: a.explain_bound_ns,
    });
    match run_body(&spec) {
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
