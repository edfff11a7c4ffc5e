//! `punctual __load KIND`: the body of one load process (started by [`punctual_load::Loads`]).

use clap::Args;
use std::io::Write;

#[derive(Args, Debug)]
pub struct LoadBodyArgs {
    pub kind: punctual_load::LoadKind,
    #[arg(long)]
    pub cpu: Option<usize>,
    #[arg(long)]
    pub dir: Option<std::path::PathBuf>,
}

pub fn run(a: LoadBodyArgs) -> anyhow::Result<punctual_session::Exit> {
    punctual_load::name_process(a.kind);
    let opts = punctual_load::BodyOptions {
        cpu: a.cpu,
        dir: a.dir,
    };
    let report = punctual_load::run_body_with_ready(a.kind, &opts, || {
        let mut out = std::io::stdout();
        let _ = writeln!(out, "{}", punctual_load::READY_LINE);
        let _ = out.flush();
    })?;
    // When punctual has died (the parent-death signal stopped us), nobody reads the report: the write
    // fails with EPIPE, and that must not become a panic (whose backtrace would keep the load alive).
    let _ = writeln!(std::io::stdout(), "{}", serde_json::to_string(&report)?);
    Ok(punctual_session::Exit::Ok)
}
