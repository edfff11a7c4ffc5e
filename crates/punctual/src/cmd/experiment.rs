//! `punctual experiment list|run NAME`: the seeds' experiments. Each crate that reproduces one
//! contributes an [`Experiment`] to [`registry`].

use crate::cli::{ExperimentCmd, ExperimentRunArgs};
use crate::session::{show, Exports};
use punctual_result::experiment::{Context, Experiment};
use punctual_result::export::Json;
use punctual_result::{Failure, Table};

/// Every experiment punctual knows, measured on this machine.
pub fn registry() -> Vec<Box<dyn Experiment>> {
    vec![
        Box::new(punctual_bench::experiments::EtsionLatency::default()),
        Box::new(punctual_bench::experiments::EtsionOverhead::default()),
        Box::new(punctual_bench::experiments::McKenneyNanosleep::default()),
        Box::new(punctual_bench::experiments::ZeadallyDispatch::default()),
    ]
}

/// Simulated halves of experiments (chosen with `--sim`), under the same names.
pub fn sim_registry() -> Vec<Box<dyn Experiment>> {
    vec![Box::new(punctual_sim::experiments::EtsionLatency)]
}

pub fn run(
    cmd: ExperimentCmd,
    env: &punctual_session::Env,
) -> anyhow::Result<punctual_session::Exit> {
    match cmd {
        ExperimentCmd::List => {
            let mut t = Table::new(&["experiment", "reproduces", "duration"]);
            for e in punctual_experiments::registry() {
                t.row([e.name(), e.reproduces(), e.duration()]);
            }
            for e in registry() {
                t.row([e.name(), e.reproduces(), e.duration()]);
            }
            for e in punctual_experiments::sim_registry() {
                t.row([
                    format!("{} --sim", e.name()),
                    e.reproduces().to_string(),
                    e.duration().to_string(),
                ]);
            }
            for e in sim_registry() {
                t.row([
                    format!("{} --sim", e.name()),
                    e.reproduces().to_string(),
                    e.duration().to_string(),
                ]);
            }
            print!("{}", t.render());
            Ok(punctual_session::Exit::Ok)
        }
        ExperimentCmd::Run(a) => {
            let reg = if a.sim {
                punctual_experiments::sim_registry()
            } else {
                punctual_experiments::registry()
            };
            if let Some(e) = reg.iter().find(|e| e.name() == a.name) {
                let mut out = punctual_session::Outputs::new()
                    .export("--json", a.json.as_ref(), Json)?
                    .figures_dir(
                        "--figures",
                        a.figures
                            .clone()
                            .unwrap_or_else(punctual_result::store::results_dir),
                    )?;
                out = out.store()?;
                return Ok(e.run(punctual_experiments::Options { quick: a.quick }, &out, env)?);
            }
            Ok(match run_one(a)? {
                0 => punctual_session::Exit::Ok,
                130 => punctual_session::Exit::Interrupted,
                _ => punctual_session::Exit::System,
            })
        }
    }
}

fn run_one(a: ExperimentRunArgs) -> anyhow::Result<i32> {
    let all = if a.sim { sim_registry() } else { registry() };
    let Some(exp) = all.iter().find(|e| e.name() == a.name) else {
        let names: Vec<&str> = all.iter().map(|e| e.name()).collect();
        let names = if names.is_empty() {
            vec!["none yet"]
        } else {
            names
        };
        let which = if a.sim {
            "simulated experiment"
        } else {
            "experiment"
        };
        return Err(Failure::usage(format!(
            "unknown {which} '{}' (valid: {})",
            a.name,
            names.join(", ")
        ))
        .into());
    };
    let mut exports = Exports::default();
    exports.add("json", a.json.as_ref(), Json)?;
    let fig_dir = a
        .figures
        .clone()
        .unwrap_or_else(punctual_result::store::results_dir);
    std::fs::create_dir_all(&fig_dir)
        .map_err(|e| Failure::usage(format!("--figures {}: {e}", fig_dir.display())))?;
    let interrupts = punctual_rt::Interrupts::install();
    let ctx = Context {
        quick: a.quick,
        sim: a.sim,
        exe: super::own_exe()?,
        stop: interrupts.stop_flag(),
        command: std::env::args().collect(),
    };
    let steal = if a.sim {
        None
    } else {
        crate::session::StealMeter::start()
    };
    let mut report = exp.run(&ctx)?;
    if let Some(m) = &steal {
        m.record(&mut report.doc);
    }
    let mut text = String::new();
    for t in &report.tables {
        text.push_str(&t.render());
        text.push('\n');
    }
    for f in &report.figures {
        let path = fig_dir.join(format!("{}.svg", f.name));
        punctual_result::output::write_atomic(&path, f.svg.as_bytes())?;
        text.push_str(&format!("Figure: {}\n", path.display()));
    }
    let stored = punctual_result::store::save(&report.doc)?;
    text.push_str(&format!("Result saved: {}\n", stored.display()));
    exports.write(&report.doc)?;
    show(&exports, &text);
    Ok(if interrupts.requested() { 130 } else { 0 })
}
