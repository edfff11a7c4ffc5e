//! What a run produces, and every way it leaves the process.
//!
//! [`ResultDoc`] is SPEC section 3's `punctual.result/1` document. [`export`] turns it into bytes (one
//! module per format behind [`export::Exporter`]); [`table`] renders human tables; [`output`] checks
//! output paths before anything runs and writes atomically; [`Failure`] classifies errors for the exit
//! codes of SPEC section 2. Plain data: nothing here touches the system but the files it is told to
//! write.

pub mod doc;
pub mod export;
pub mod failure;
pub mod host;
pub mod output;
pub mod table;

pub use doc::{
    now_rfc3339, rfc3339_at, DocError, ResultDoc, Series, Settings, Status, Tool, SCHEMA_ID,
};
pub use failure::{Class, Failure};
pub use host::{Fallback, HostFacts};
pub use output::Output;
pub use table::Table;

/// The JSON Schema of the result document (draft 2020-12).
pub const SCHEMA_JSON: &str = include_str!("../schema/punctual.result-1.schema.json");
