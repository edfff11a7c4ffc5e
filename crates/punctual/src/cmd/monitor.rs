//! `punctual monitor`: timeliness served as Prometheus metrics, with history in the store. The
//! measurement is `punctual_monitor::measure::Monitor`; this file checks the flags.

use crate::args::{duration, run_duration, OutputArgs, RtArgs};
use clap::Args;
use punctual_monitor::config::{Settings, Source};
use punctual_monitor::measure::{HistoryStore, Monitor};
use punctual_result::Failure;
use punctual_session::{drive, Env, Exit};
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct MonitorArgs {
    /// Serve /metrics here (HOST:PORT).
    #[arg(long, default_value = punctual_monitor::DEFAULT_LISTEN, value_name = "ADDR")]
    pub listen: String,
    /// Period between releases.
    #[arg(short = 'i', long, default_value = "1ms", value_parser = duration, value_name = "DURATION")]
    pub interval: u64,
    /// A release later than this counts in punctual_late_releases_total.
    #[arg(long, default_value = "10us", value_parser = duration, value_name = "DURATION")]
    pub late_bound: u64,
    /// Attribute late releases to causes from a kernel trace of the measured CPUs: auto (when
    /// tracefs can be had, else a note), on (required: exit 3 without), off.
    #[arg(long, default_value = "auto", value_name = "auto|on|off")]
    pub explain: punctual_monitor::attribution::Explain,
    /// Store a window's result in the results store this often, or off.
    #[arg(long, default_value = "10m", value_parser = every, value_name = "DURATION|off")]
    pub history_every: Every,
    /// Measure the floor (bench gaps) of each measured CPU this often, or off.
    #[arg(long, default_value = "off", value_parser = every, value_name = "DURATION|off")]
    pub floor_every: Every,
    /// How long each floor measurement spins.
    #[arg(long, default_value = "1s", value_parser = duration, value_name = "DURATION")]
    pub floor_for: u64,
    /// TOML file with cpus, interval, history_every, floor_every, floor_for; read at start and
    /// again on SIGHUP (its keys override the flags).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Stop after this long (default: until SIGINT/SIGTERM).
    #[arg(short = 'D', long, value_parser = run_duration, value_name = "DURATION")]
    pub duration: Option<u64>,
    #[command(flatten)]
    pub rt: RtArgs,
    #[command(flatten)]
    pub out: OutputArgs,
}

#[derive(Clone, Copy, Debug)]
pub struct Every(Option<u64>);

fn every(s: &str) -> Result<Every, String> {
    if s == "off" {
        return Ok(Every(None));
    }
    duration(s).map(|d| Every(Some(d)))
}

pub fn run(a: MonitorArgs, env: &Env) -> anyhow::Result<Exit> {
    a.rt.validate()?;
    let cpus = a.rt.cpus().map_err(Failure::usage)?;
    let cpus = cpus.map_or_else(|| a.rt.one_cpu().map(|c| vec![c]), Ok)?;
    let mut base = Settings::new(cpus);
    base.interval = a.interval;
    base.history_every = a.history_every.0;
    base.floor_every = a.floor_every.0;
    base.floor_for = a.floor_for;
    let source = Source {
        base,
        file: a.config.clone(),
    };
    source.read().map_err(Failure::from)?;
    let outputs = a.out.outputs()?;
    let store = match (&a.history_every.0, outputs.stores()) {
        (Some(_), true) => Some(HistoryStore {
            store: punctual_session::store::open(a.out.store.store.as_deref())?,
            tags: a.out.store.tags.clone(),
        }),
        _ => None,
    };
    let listener = punctual_monitor::bind(&a.listen).map_err(Failure::from)?;
    let mut want = a.rt.want();
    if a.rt.priority.is_none() && want.policy.is_realtime() {
        want.priority = 98;
    }
    let mut m = Monitor::new(source, a.late_bound, a.duration, want, listener, store);
    m.explain = a.explain;
    Ok(drive(&mut m, &outputs, env)?)
}
