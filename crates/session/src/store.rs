//! The results store: every document `punctual check` (and anything else asked to keep its result)
//! writes, under the XDG data directory (`$XDG_DATA_HOME/punctual/results`, usually
//! `~/.local/share/punctual/results`). `PUNCTUAL_DATA_DIR` overrides the `punctual` directory (a
//! privileged process believes it only as `punctual_rt::env::trusted_dir` says).

use punctual_result::ResultDoc;
use std::path::PathBuf;

pub fn data_dir() -> PathBuf {
    if let Some(d) = punctual_rt::env::trusted_dir(punctual_rt::env::DATA_DIR).path() {
        return d;
    }
    dirs::data_dir()
        .unwrap_or_else(|| PathBuf::from(".local/share"))
        .join("punctual")
}

pub fn results_dir() -> PathBuf {
    data_dir().join("results")
}

/// File name for a document: start time (colons replaced, so it sorts and is portable), the
/// subcommand, and the pid to keep concurrent runs apart.
pub fn file_name(doc: &ResultDoc) -> String {
    let stamp: String = doc
        .started_at
        .chars()
        .map(|c| if c == ':' { '-' } else { c })
        .collect();
    let cmd = doc.command.get(1).map(String::as_str).unwrap_or("run");
    format!("{stamp}-{cmd}-{}.json", std::process::id())
}

/// Save a document in the store and return its path.
pub fn save(doc: &ResultDoc) -> std::io::Result<PathBuf> {
    let dir = results_dir();
    std::fs::create_dir_all(&dir)?;
    let path = dir.join(file_name(doc));
    punctual_result::output::write_atomic(&path, doc.to_json().as_bytes())?;
    Ok(path)
}

/// Check, before a run, that the store can take a document.
pub fn check_writable() -> Result<(), String> {
    let dir = results_dir();
    std::fs::create_dir_all(&dir)
        .map_err(|e| format!("cannot create the results directory {}: {e}", dir.display()))?;
    punctual_result::Output::File(dir.join("probe.json")).check_writable()
}
