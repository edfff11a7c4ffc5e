//! Flags shared by every command that measures or runs (SPEC section 2): the real-time settings
//! ([`RtArgs`]), the exports ([`OutputArgs`]) and durations that must carry a unit.

use clap::Args;
use punctual_explain::ExplainConfig;
use punctual_result::{Failure, Output};
pub use punctual_rt::dma::DmaLatency;
use punctual_rt::sched::parse_priority;
use punctual_rt::Policy;
use punctual_session::Outputs;
pub use punctual_store::parse_tag;

/// Parse a duration that must carry a unit (a bare number suggests microseconds).
pub fn duration(s: &str) -> Result<u64, String> {
    punctual_time::parse_duration_ns(s).map_err(|e| e.to_string())
}

/// How long something runs (`-D`, timeouts): a bare number suggests seconds.
pub fn run_length(s: &str) -> Result<u64, String> {
    punctual_time::parse_duration_hinting(s, "s").map_err(|e| e.to_string())
}

/// A run's length (`-D`): more than zero and at most latency's limit of a year, because the end of
/// the run is computed as now plus this and a larger value wraps the clock into an instant already
/// past (`-D 18446744073s` ended at once with exit 0).
pub fn run_duration(s: &str) -> Result<u64, String> {
    let ns = run_length(s)?;
    if ns == 0 {
        return Err("a run must last more than zero, e.g. 10s".into());
    }
    at_most(s, ns, punctual_latency::MAX_RUN, "365 days")
}

/// A wait bounded by the user (a timeout, a delay, a threshold): at most an hour, for the same
/// reason as [`run_duration`]; an alarm 584 years away kept `bench alarm` running for ever.
pub fn wait_duration(s: &str) -> Result<u64, String> {
    let ns = duration(s)?;
    at_most(s, ns, punctual_latency::MAX_INTERVAL, "1 h")
}

fn at_most(s: &str, ns: u64, max: u64, said: &str) -> Result<u64, String> {
    if ns > max {
        return Err(format!("'{s}' is longer than the limit of {said}"));
    }
    Ok(ns)
}

/// Real-time settings shared by measuring and running commands.
#[derive(Args, Debug, Clone)]
pub struct RtArgs {
    /// Scheduling policy: fifo, rr or other.
    #[arg(long, default_value = "fifo", value_name = "POLICY")]
    pub policy: Policy,
    /// Real-time priority 1-99 (default 99 for fifo/rr; other takes none).
    #[arg(short = 'p', long, value_name = "N", value_parser = parse_priority)]
    pub priority: Option<u32>,
    /// CPUs to run on, as a list (0-3,5).
    #[arg(short = 'a', long, value_name = "CPUS")]
    pub affinity: Option<String>,
    /// Hold /dev/cpu_dma_latency at this value while running (keeps CPUs out of deep idle; at 0,
    /// CPUs that halt anyway are polled by punctual where its real-time work is woken), or off.
    #[arg(long, default_value = "0", value_name = "off|0|DURATION", value_parser = str::parse::<DmaLatency>)]
    pub dma_latency: DmaLatency,
    /// Do not lock memory (mlockall) while measuring.
    #[arg(long)]
    pub no_mlock: bool,
}

impl RtArgs {
    /// The settings of a command with its own class flags (`bench gaps`, `bench alarm`).
    pub fn of(policy: Policy, priority: Option<u32>, affinity: Option<String>) -> RtArgs {
        RtArgs {
            policy,
            priority,
            affinity,
            dma_latency: DmaLatency::Us(0),
            no_mlock: false,
        }
    }

    /// What the session should hold, as plain data.
    pub fn want(&self) -> punctual_rt::RtWant {
        punctual_rt::RtWant {
            policy: self.policy,
            priority: self.priority(),
            mlock: !self.no_mlock,
            dma_latency_us: self.dma_latency.microseconds(),
        }
    }

    /// The scheduling class asked for (the session may fall back from it).
    pub fn sched(&self) -> punctual_rt::SchedParams {
        punctual_rt::SchedParams {
            policy: self.policy,
            priority: self.priority(),
        }
    }

    /// Check the real-time request itself (before anything changes on the system).
    pub fn validate(&self) -> Result<(), Failure> {
        self.sched()
            .validate()
            .map_err(|e| Failure::usage(format!("-p/--priority: {e}")))?;
        if let Some(cpus) = self.cpus().map_err(Failure::usage)? {
            punctual_rt::affinity::check_online(&cpus)
                .map_err(|e| Failure::usage(format!("-a/--affinity: {e}")))?;
        }
        Ok(())
    }

    /// The one CPU of `-a` (default: the last online CPU, since CPU 0 usually takes most device
    /// interrupts), for measurements that run on one CPU.
    pub fn one_cpu(&self) -> Result<usize, Failure> {
        match self.cpus().map_err(Failure::usage)? {
            Some(c) if c.len() == 1 => Ok(c[0]),
            Some(c) => Err(Failure::usage(format!(
                "-a/--affinity: this measurement runs on one CPU; give one, not {}",
                punctual_rt::format_cpu_list(&c)
            ))),
            None => Ok(punctual_rt::affinity::last_online_cpu()),
        }
    }

    pub fn priority(&self) -> u32 {
        self.priority
            .unwrap_or(if self.policy.is_realtime() { 99 } else { 0 })
    }

    pub fn cpus(&self) -> Result<Option<Vec<usize>>, String> {
        self.affinity
            .as_deref()
            .map(|a| punctual_rt::parse_cpu_list(a).map_err(|e| format!("-a/--affinity: {e}")))
            .transpose()
    }
}

impl OutputArgs {
    /// `--json`, `--csv`, `--fail-above` and the results store, paths checked and the store opened.
    pub fn outputs(&self) -> Result<Outputs, Failure> {
        self.store.apply(
            Outputs::new()
                .json_csv(self.json.as_ref(), self.csv.as_ref())?
                .fail_above(self.fail_above),
        )
    }
}

/// A percentage in `range` (percent) as a share of one (`90%` -> 0.9): the one parser
/// (`punctual_time::parse_percent_in`) for every flag that takes a percentage.
pub fn share(s: &str, range: impl std::ops::RangeBounds<f64>) -> Result<f64, String> {
    punctual_time::parse_percent_in(s, range)
        .map(|v| v / 100.0)
        .map_err(|e| e.to_string())
}

/// The results store, for every command that writes a result document.
#[derive(Args, Debug, Clone, Default)]
pub struct StoreArgs {
    /// Do not keep this result in the results store.
    #[arg(long, conflicts_with_all = ["tags", "store"])]
    pub no_store: bool,
    /// Tag the stored result, e.g. --tag kernel=6.12-rt (repeatable).
    #[arg(long = "tag", value_name = "KEY=VALUE", value_parser = parse_tag)]
    pub tags: Vec<(String, String)>,
    /// The results store: a SQLite file or postgres://USER@HOST/DB (default: PUNCTUAL_STORE, or
    /// results.db in the data directory).
    #[arg(long, value_name = "PATH|URL")]
    pub store: Option<String>,
}

impl StoreArgs {
    /// Add the store to `out` unless `--no-store`.
    pub fn apply(&self, out: Outputs) -> Result<Outputs, Failure> {
        if self.no_store {
            return Ok(out);
        }
        out.store(self.store.as_deref(), self.tags.clone())
    }
}

/// Exports shared by every command that produces a result document.
#[derive(Args, Debug, Clone)]
pub struct OutputArgs {
    /// Write the result document (JSON, schema punctual.result/1) to FILE, or - for stdout.
    #[arg(long, value_name = "FILE")]
    pub json: Option<Output>,
    /// Write one CSV row per series to FILE, or - for stdout.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<Output>,
    /// Exit 1 if any sample exceeds this (e.g. 100us).
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true, value_parser = duration)]
    pub fail_above: Option<u64>,
    #[command(flatten)]
    pub store: StoreArgs,
}

/// `--explain` (run, latency, check, traffic replay): every release outside its bound given one
/// cause from a kernel trace of the CPUs involved (docs/explain.md).
#[derive(Args, Debug, Clone, Default)]
pub struct ExplainArgs {
    /// Trace the CPUs involved and name the cause of every release later than the bound (steal,
    /// irq, softirq, task, throttle, wake_path, lead, dispatcher, or unexplained).
    #[arg(long)]
    pub explain: bool,
    /// The bound releases are explained beyond (default 10us).
    #[arg(long, value_parser = duration, value_name = "DURATION", requires = "explain")]
    pub explain_bound: Option<u64>,
    /// Write the late releases by cause as a stacked-bar SVG figure to FILE.
    #[arg(long, value_name = "FILE", requires = "explain")]
    pub explain_figure: Option<Output>,
    /// Keep the kernel trace the causes were read from in FILE, a punctual trace file (`punctual
    /// trace analyze FILE`); a command that traces more than once writes FILE-2, FILE-3...
    #[arg(long, value_name = "FILE", requires = "explain")]
    pub explain_trace: Option<std::path::PathBuf>,
}

impl ExplainArgs {
    /// What to explain, with `default_bound` when no --explain-bound is given (`None`: off).
    pub fn config(&self, default_bound: u64) -> Result<Option<ExplainConfig>, Failure> {
        let bound = self.explain_bound.unwrap_or(default_bound);
        if let Some(path) = &self.explain_trace {
            Output::File(path.clone())
                .check_writable()
                .map_err(|e| Failure::usage(format!("--explain-trace: {e}")))?;
        }
        let config = self.explain.then(|| {
            ExplainConfig::bounded(bound).map(|c| ExplainConfig {
                keep: self
                    .explain_trace
                    .as_ref()
                    .map(punctual_explain::KeepTrace::new),
                ..c
            })
        });
        config.transpose().map_err(Failure::usage)
    }

    /// The figure's file, checked before anything runs.
    pub fn outputs(&self, out: Outputs) -> Result<Outputs, Failure> {
        out.figure_file("--explain-figure", self.explain_figure.as_ref())
    }
}

/// Which results make which side, for `compare` and `report`.
#[derive(Args, Debug)]
pub struct SideArgs {
    /// Results: files (`--json FILE` of any command), stored ids (a unique prefix is enough),
    /// latest, latest~N. Each is a side of its own, the first the baseline; or, with `--`, those
    /// before are the baseline's runs and those after the other side's.
    #[arg(value_name = "RESULT")]
    pub results: Vec<String>,
    /// The other side's runs (after `--`).
    #[arg(last = true, value_name = "OTHER")]
    pub against: Vec<String>,
    /// A side made of the newest --last N stored results with this tag; once per side
    /// (--tag kernel=6.1 --tag kernel=6.12).
    #[arg(long = "tag", value_name = "KEY=VALUE", value_parser = parse_tag)]
    pub tags: Vec<(String, String)>,
    /// With --tag: how many of the newest tagged results make each side.
    #[arg(long, value_name = "N", default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub last: u32,
    /// With --tag: only results of this command (latency, check, ...).
    #[arg(long, value_name = "COMMAND")]
    pub command: Option<String>,
    /// The results store ids and tags are read from: a SQLite file or postgres://USER@HOST/DB
    /// (default: PUNCTUAL_STORE, or results.db in the data directory). Never created by reading.
    #[arg(long, value_name = "PATH|URL")]
    pub store: Option<String>,
}

impl SideArgs {
    /// The sides, each a list of results (stored ids resolved in one store), at least `least`.
    pub fn sides(self, least: usize) -> Result<Vec<Vec<punctual_store::Named>>, Failure> {
        let spec = punctual_store::SideSpec {
            results: self.results,
            against: self.against,
            tags: self.tags,
            last: self.last as usize,
            command: self.command,
        };
        punctual_store::Resolver::new(self.store.as_deref()).sides(&spec, least)
    }
}

/// Each side's results as `f` takes them (compare's and report's inputs).
pub fn each_result<'a, T>(
    sides: &'a [Vec<punctual_store::Named>],
    f: impl Fn(&'a punctual_store::Named) -> T,
) -> Vec<Vec<T>> {
    sides
        .iter()
        .map(|side| side.iter().map(&f).collect())
        .collect()
}
