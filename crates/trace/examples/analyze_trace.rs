//! `punctual trace analyze FILE` without the binary, to measure the library alone:
//! `analyze_trace FILE [--series]` prints the tables; `--series` also builds the result document's
//! series (what `--json`/`--csv` need).
use punctual_trace::render::{report_with, ReportOptions};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(file) = args.get(1) else {
        eprintln!("usage: analyze_trace FILE [--series]");
        std::process::exit(2);
    };
    let series = args.iter().any(|a| a == "--series");
    let trace = punctual_trace::file::read_trace_file(std::path::Path::new(file))
        .expect("a readable trace file");
    let a = punctual_trace::analyze::analyze(&trace);
    let r = report_with(&a, &trace, &ReportOptions::default(), series);
    for t in &r.tables {
        println!("{}", t.render());
    }
    eprintln!("{} series", r.series.len());
}
