//! Plan files as the commands open them: any form by its first bytes (TOML, compiled, or an rt-app
//! task file converted), and compiling one with extra events from CSV. Errors are the messages a
//! user sees (bad input: exit 2), each naming the file or flag.

use crate::{compiled, parse, Plan, PlanError};
use std::io::Read;
use std::path::Path;

/// A plan read from a file, with what the conversion of an rt-app file read without needing it.
#[derive(Debug)]
pub struct Opened {
    pub plan: Plan,
    pub notes: Vec<String>,
}

/// Read `path` as TOML, a compiled plan, or an rt-app task file (`client`: the wake client's argv
/// before its options, for the converted tasks).
pub fn open(path: &Path, client: &[String]) -> Result<Opened, String> {
    let mut head = Vec::new();
    let _ = std::fs::File::open(path).and_then(|f| f.take(64).read_to_end(&mut head));
    if crate::rtapp::is_rtapp(path, &head) {
        let c = crate::rtapp::load(path, client).map_err(|e| e.to_string())?;
        return Ok(Opened {
            plan: c.plan,
            notes: c.notes,
        });
    }
    let plan = crate::load(path).map_err(|e| match e {
        PlanError::Io { .. } => format!("plan {e}"),
        other => other.to_string(),
    })?;
    Ok(Opened {
        plan,
        notes: Vec::new(),
    })
}

fn is_compiled(path: &Path) -> bool {
    let mut b = [0u8; 8];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut b))
        .is_ok()
        && compiled::is_compiled(&b)
}

/// `path` with the events of the CSV file `events` added (its header `at_ns,action,data_hex`),
/// validated, in the compact binary form. With `events`, a TOML plan may hold only the header and
/// the actions.
pub fn compile(
    path: &Path,
    events: Option<&Path>,
    client: &[String],
) -> Result<(Opened, Vec<u8>), String> {
    let mut opened = match events {
        Some(_) if !is_compiled(path) => Opened {
            plan: parse::parse_file_without_events(path).map_err(|e| e.to_string())?,
            notes: Vec::new(),
        },
        _ => open(path, client)?,
    };
    if let Some(csv) = events {
        let plan = &mut opened.plan;
        let f = std::fs::File::open(csv).map_err(|e| format!("--events {}: {e}", csv.display()))?;
        let reader = std::io::BufReader::new(f);
        let extra = compiled::events_from_csv(plan, reader, &csv.display().to_string())
            .map_err(|e| e.to_string())?;
        plan.events.extend(extra);
        plan.events.sort_by_key(|e| e.at);
    }
    parse::validate_plan(&opened.plan).map_err(|m| format!("{}: {m}", path.display()))?;
    let bytes = compiled::to_bytes(&opened.plan);
    Ok((opened, bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAN: &str = "[plan]\nname = \"t\"\n\n[[action]]\nname = \"a\"\nkind = \"mark\"\n";

    #[test]
    fn a_missing_file_is_named_as_a_plan() {
        let e = open(Path::new("/nonexistent/p.toml"), &[]).unwrap_err();
        assert!(e.starts_with("plan /nonexistent/p.toml: "), "{e}");
    }

    #[test]
    fn compiling_adds_the_csv_events_in_time_order_and_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let (toml, csv) = (dir.path().join("p.toml"), dir.path().join("e.csv"));
        std::fs::write(&toml, PLAN).unwrap();
        std::fs::write(&csv, "at_ns,action,data_hex\n2000,a,\n1000,a,\n").unwrap();
        let (opened, bytes) = compile(&toml, Some(&csv), &[]).unwrap();
        let at: Vec<u64> = opened.plan.events.iter().map(|e| e.at).collect();
        assert_eq!(at, [1000, 2000]);
        let bin = dir.path().join("p.bin");
        std::fs::write(&bin, &bytes).unwrap();
        assert!(is_compiled(&bin) && !is_compiled(&toml));
        let back = open(&bin, &[]).unwrap();
        assert_eq!(back.plan.events.len(), 2);
        let e = compile(&toml, Some(&dir.path().join("none.csv")), &[]).unwrap_err();
        assert!(e.starts_with("--events "), "{e}");
    }
}
