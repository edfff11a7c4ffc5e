//! `punctual report RESULT... -o report.html`: one self-contained HTML file (inline CSS and SVG,
//! no script, nothing fetched) of one or more results (`punctual_report::report`).

use crate::cmd::compare::resolve;
use clap::Args;
use punctual_result::{Failure, Output};
use punctual_session::{Env, Exit};
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct ReportArgs {
    /// Results to report (result files; ids and `latest` need the results store). Several
    /// results overlay their CDFs.
    #[arg(value_name = "RESULT", required = true)]
    pub results: Vec<String>,
    /// The HTML file to write (`-` = stdout).
    #[arg(short = 'o', long, value_name = "FILE|-")]
    pub output: Output,
    /// A samples file (`punctual latency --samples FILE`) to draw lateness over time from;
    /// repeatable.
    #[arg(long, value_name = "FILE")]
    pub samples: Vec<PathBuf>,
}

pub fn run(a: ReportArgs, env: &Env) -> anyhow::Result<Exit> {
    a.output
        .check_writable()
        .map_err(|e| Failure::usage(format!("-o {}: {e}", a.output)))?;
    let docs = a
        .results
        .iter()
        .map(|s| resolve(s))
        .collect::<Result<Vec<_>, _>>()?;
    let mut timelines = Vec::new();
    for p in &a.samples {
        let shown = punctual_time::text::display_path(p);
        let f = std::fs::File::open(p)
            .map_err(|e| Failure::usage(format!("--samples {shown}: {e}")))?;
        let t = punctual_report::timeline::read(&shown, std::io::BufReader::new(f))
            .map_err(|e| Failure::usage(format!("--samples: {e}")))?;
        timelines.push(t);
    }
    let inputs: Vec<punctual_report::ReportInput> = a
        .results
        .iter()
        .zip(&docs)
        .map(|(s, doc)| punctual_report::ReportInput {
            source: s.clone(),
            doc,
        })
        .collect();
    let r = punctual_report::report(&inputs, &timelines).map_err(Failure::from)?;
    match &a.output {
        Output::Stdout => env.show(&r.html, false),
        out => {
            out.write(r.html.as_bytes())
                .map_err(|e| Failure::system(format!("writing -o {out}: {e}")))?;
            env.show(
                &format!(
                    "report: {} ({} KB, {} figures)\n",
                    out,
                    r.html.len().div_ceil(1024),
                    r.figures.len()
                ),
                false,
            );
        }
    }
    Ok(Exit::Ok)
}
