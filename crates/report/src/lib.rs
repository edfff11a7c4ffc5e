//! Looking back at results: [`compare`] puts matching series of two or more result documents side
//! by side with a verdict that accounts for noise (a bootstrap interval of each percentile's
//! difference drawn from the documents' HDR histograms, [`bootstrap`]); [`render`] turns a
//! comparison into text, Markdown or JSON; [`html`] writes one self-contained HTML report (inline
//! CSS and SVG, no script) of one or more documents; [`timeline`] bins a `--samples` file for the
//! report's lateness-over-time figure. Nothing here prints or reads files by name: callers hand in
//! documents and readers, and get text back.

pub mod bootstrap;
pub mod compare;
pub mod html;
pub mod render;
pub mod timeline;

pub use compare::{compare, CompareError, Comparison, Input, Options, Verdict};
pub use html::{report, Report, ReportError, ReportInput};
pub use timeline::{Timeline, TimelineError};
