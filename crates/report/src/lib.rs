//! Looking back at results: [`compare`](mod@compare) puts matching series of two or more sides of runs side by
//! side with a verdict that accounts for noise (an interval of each percentile's ratio: from the
//! spread between runs with several runs per side, [`runs`], else a bootstrap of the two HDR
//! histograms, [`bootstrap`]); [`render`] turns a
//! comparison into text, Markdown or JSON; [`html`] writes one self-contained HTML report (inline
//! CSS and SVG, no script) of one or more documents; [`timeline`] bins a `--samples` file for the
//! report's lateness-over-time figure. Nothing here prints or reads files by name: callers hand in
//! documents and readers, and get text back.

pub mod bootstrap;
pub mod compare;
pub mod html;
pub mod human;
pub mod render;
pub mod runs;
pub mod timeline;

pub use compare::{compare, compare_sides, CompareError, Comparison, Input, Options, Verdict};
pub use html::{report, Report, ReportError, ReportInput};
pub use timeline::{Timeline, TimelineError};
