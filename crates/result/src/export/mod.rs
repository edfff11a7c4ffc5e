//! Export formats, one module each, behind one trait that returns bytes.

mod csv;
mod json;

pub use self::csv::Csv;
pub use self::json::Json;

use crate::ResultDoc;

pub trait Exporter {
    fn export(&self, doc: &ResultDoc) -> Vec<u8>;
}
