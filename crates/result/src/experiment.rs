//! The seam every reproduction of a seed's experiment plugs into (`punctual experiment list|run`).
//! An experiment prints its table in the seed's layout with the published numbers beside this
//! machine's, and returns a result document and SVG figures.

use crate::{Failure, ResultDoc, Table};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// What an experiment gets from the command line.
#[derive(Clone, Debug)]
pub struct Context {
    /// `--quick`: a reduced version that finishes in under a minute.
    pub quick: bool,
    /// `--sim`: use the simulator where the experiment has a simulated half.
    pub sim: bool,
    /// The punctual executable, for child processes (loads, wake clients).
    pub exe: PathBuf,
    /// Set when the user interrupts; long experiments check it between steps.
    pub stop: Arc<AtomicBool>,
    /// The command line, for the result document.
    pub command: Vec<String>,
}

/// A named SVG figure.
#[derive(Clone, Debug)]
pub struct Figure {
    /// File stem, e.g. `etsion-latency-fig7`.
    pub name: String,
    pub svg: String,
}

/// Everything an experiment produces.
#[derive(Clone, Debug)]
pub struct Report {
    pub tables: Vec<Table>,
    pub doc: ResultDoc,
    pub figures: Vec<Figure>,
}

pub trait Experiment: Send + Sync {
    /// The name used on the command line (`etsion-latency`).
    fn name(&self) -> &'static str;
    /// Which seed, table or figure it reproduces, in one line.
    fn reproduces(&self) -> &'static str;
    /// How long the full and quick versions take, in one line.
    fn duration(&self) -> &'static str;
    fn run(&self, ctx: &Context) -> Result<Report, Failure>;
}
