//! `punctual __periodic`: one periodic process of the kurt-periodic experiment (hidden).

use clap::Args;
use punctual_experiments::kurt_periodic::{body as run_body, Mode};

#[derive(Args, Debug)]
pub struct PeriodicBodyArgs {
    #[arg(long)]
    pub mode: Mode,
    #[arg(long)]
    pub period_ns: u64,
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
    match run_body(
        a.mode,
        a.period_ns,
        a.first_ns,
        a.until_ns,
        a.channel.as_deref(),
        a.explain_bound_ns,
    ) {
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
