//! `punctual report RESULT... -o report.html` (or `A1 A2 -- B1 B2`, or `--tag K=V` per side): one
//! self-contained HTML file (inline CSS and SVG, no script, nothing fetched) that opens with the
//! verdicts (`punctual_report::report`).

use crate::args::{each_result, SideArgs};
use clap::Args;
use punctual_report::compare::Options;
use punctual_result::{Failure, Output};
use punctual_session::{Env, Exit};
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct ReportArgs {
    #[command(flatten)]
    pub sides: SideArgs,
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
    let sides = a.sides.sides(1)?;
    let mut timelines = Vec::new();
    for p in &a.samples {
        let shown = punctual_time::text::display_path(p);
        let f = std::fs::File::open(p)
            .map_err(|e| Failure::usage(format!("--samples {shown}: {e}")))?;
        let t = punctual_report::timeline::read(&shown, std::io::BufReader::new(f))
            .map_err(|e| Failure::usage(format!("--samples: {e}")))?;
        timelines.push(t);
    }
    let inputs = each_result(&sides, |n| punctual_report::ReportInput {
        source: n.source.clone(),
        doc: &n.stored.doc,
        figures: &n.stored.figures,
        tables: n.tables.as_deref(),
    });
    let r =
        punctual_report::report(&inputs, &timelines, &Options::default()).map_err(Failure::from)?;
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
