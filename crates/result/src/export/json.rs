use super::Exporter;
use crate::ResultDoc;

/// The result document itself, pretty-printed.
pub struct Json;

impl Exporter for Json {
    fn export(&self, doc: &ResultDoc) -> Vec<u8> {
        doc.to_json().into_bytes()
    }
}
