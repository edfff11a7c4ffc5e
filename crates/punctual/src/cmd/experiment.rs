//! `punctual experiment list|run NAME`: the seeds' experiments (`punctual-experiments`).

use clap::{Args, Subcommand};
use punctual_experiments::{registry, sim_registry, Options};
use punctual_result::export::Json;
use punctual_result::Output;
use punctual_result::{Failure, Table};
use punctual_session::{Env, Exit, Outputs};

#[derive(Subcommand, Debug)]
pub enum ExperimentCmd {
    /// List the experiments.
    List,
    /// Run one experiment.
    Run(ExperimentRunArgs),
}

#[derive(Args, Debug)]
pub struct ExperimentRunArgs {
    /// Experiment name (see `punctual experiment list`).
    pub name: String,
    /// The reduced version (under a minute).
    #[arg(long)]
    pub quick: bool,
    /// Use the simulator where the experiment has a simulated half.
    #[arg(long)]
    pub sim: bool,
    /// Directory for the SVG figures (default: kept with the stored result only, see `punctual
    /// results export`; with --no-store, the results directory).
    #[arg(long, value_name = "DIR")]
    pub figures: Option<std::path::PathBuf>,
    /// Write the result document to FILE, or - for stdout.
    #[arg(long, value_name = "FILE")]
    pub json: Option<Output>,
    /// Keep the kernel trace each row's late releases were explained from (kurt-periodic): FILE
    /// for the first row, FILE-2, FILE-3... for the next, punctual trace files (`punctual trace
    /// analyze FILE`).
    #[arg(long, value_name = "FILE")]
    pub explain_trace: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub store: crate::args::StoreArgs,
}

pub fn run(cmd: ExperimentCmd, env: &Env) -> anyhow::Result<Exit> {
    match cmd {
        ExperimentCmd::List => {
            let mut t = Table::new(&["experiment", "reproduces", "duration"]);
            for e in registry() {
                t.row([e.name(), e.reproduces(), e.duration()]);
            }
            for e in sim_registry() {
                t.row([
                    format!("{} --sim", e.name()),
                    e.reproduces().to_string(),
                    e.duration().to_string(),
                ]);
            }
            env.show(&t.render(), false);
            Ok(Exit::Ok)
        }
        ExperimentCmd::Run(a) => run_one(a, env),
    }
}

fn run_one(a: ExperimentRunArgs, env: &Env) -> anyhow::Result<Exit> {
    // An experiment that is a simulation anyway takes --sim too (issue 31: etsion-frames refused).
    let sim = a.sim && !punctual_experiments::SIMULATED.contains(&a.name.as_str());
    let all = if sim { sim_registry() } else { registry() };
    let Some(exp) = all.iter().find(|e| e.name() == a.name) else {
        let mut names: Vec<&str> = all.iter().map(|e| e.name()).collect();
        if sim {
            names.extend(punctual_experiments::SIMULATED);
        }
        let which = if a.sim {
            "simulated experiment"
        } else {
            "experiment"
        };
        return Err(Failure::usage(format!(
            "unknown {which} '{}' (valid: {})",
            punctual_time::text::display_name(&a.name),
            names.join(", ")
        ))
        .into());
    };
    if let Some(path) = &a.explain_trace {
        if !punctual_experiments::EXPLAINED.contains(&a.name.as_str()) || sim {
            return Err(Failure::usage(format!(
                "--explain-trace: '{}' does not trace its rows (only {} does)",
                punctual_time::text::display_name(&a.name),
                punctual_experiments::EXPLAINED.join(", ")
            ))
            .into());
        }
        Output::File(path.clone())
            .check_writable()
            .map_err(|e| Failure::usage(format!("--explain-trace: {e}")))?;
    }
    let mut out = Outputs::new().export("--json", a.json.as_ref(), Json)?;
    // Figures are stored with the result; files only where asked, or where they would otherwise
    // be lost (--no-store).
    let figures = a
        .figures
        .clone()
        .or_else(|| a.store.no_store.then(punctual_session::store::results_dir));
    if let Some(dir) = figures {
        out = out.figures_dir("--figures", dir)?;
    }
    let out = a.store.apply(out)?;
    let opts = Options {
        quick: a.quick,
        explain_trace: a.explain_trace.clone(),
    };
    Ok(exp.run(opts, &out, env)?)
}
