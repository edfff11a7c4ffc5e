//! What the monitor measures: from the command line, then the configuration file (`--config`),
//! which SIGHUP re-reads. The listening address, the scheduling class and the late bound are the
//! command line's alone: they are fixed for the life of the process (a counter must not change
//! meaning, a port must not move under a scraper).

use crate::MonitorError;
use punctual_time::format_ns;
use std::path::{Path, PathBuf};

/// The shortest period: below it the wake-up itself takes most of the period.
pub const MIN_INTERVAL: u64 = 10_000;
/// The longest period a monitor takes (it measures wake-ups, not a heartbeat).
pub const MAX_INTERVAL: u64 = 1_000_000_000;
/// The shortest history window.
pub const MIN_WINDOW: u64 = 1_000_000_000;
/// The longest floor measurement (it spins a CPU for that long).
pub const MAX_FLOOR: u64 = 10_000_000_000;

/// The settings SIGHUP may change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    /// The CPUs measured, a thread each.
    pub cpus: Vec<usize>,
    /// Release period.
    pub interval: u64,
    /// How often a window goes to the results store (`None`: never).
    pub history_every: Option<u64>,
    /// How often to measure the floor (`bench gaps`) on each measured CPU (`None`: never).
    pub floor_every: Option<u64>,
    /// How long each floor measurement spins.
    pub floor_for: u64,
}

impl Settings {
    /// The defaults: every 1 ms on `cpus`, a window every 10 minutes, no floors.
    pub fn new(cpus: Vec<usize>) -> Settings {
        Settings {
            cpus,
            interval: 1_000_000,
            history_every: Some(600_000_000_000),
            floor_every: None,
            floor_for: 1_000_000_000,
        }
    }

    /// Refuse what cannot be measured, naming the setting that fixes it.
    pub fn validate(&self) -> Result<(), MonitorError> {
        let bad = |what: &'static str, why: String| Err(MonitorError::Invalid { what, why });
        if self.cpus.is_empty() {
            return bad("-a/--affinity (cpus)", "give at least one CPU".into());
        }
        punctual_rt::affinity::check_online(&self.cpus).map_err(|e| MonitorError::Invalid {
            what: "-a/--affinity (cpus)",
            why: e.to_string(),
        })?;
        if !(MIN_INTERVAL..=MAX_INTERVAL).contains(&self.interval) {
            return bad(
                "-i/--interval",
                format!(
                    "{} is outside {}..{}",
                    format_ns(self.interval),
                    format_ns(MIN_INTERVAL),
                    format_ns(MAX_INTERVAL)
                ),
            );
        }
        if let Some(w) = self.history_every {
            if w < MIN_WINDOW || w < self.interval.saturating_mul(10) {
                return bad(
                    "--history-every",
                    format!(
                        "{} is too short: at least 1s and ten periods, e.g. 10m",
                        format_ns(w)
                    ),
                );
            }
        }
        if self.floor_for == 0 || self.floor_for > MAX_FLOOR {
            return bad(
                "--floor-for",
                format!(
                    "{} must be above 0 and at most 10s",
                    format_ns(self.floor_for)
                ),
            );
        }
        if let Some(e) = self.floor_every {
            if e <= self.floor_for.saturating_mul(10) {
                return bad(
                    "--floor-every",
                    format!(
                        "{} must be more than ten times --floor-for ({}): a floor spins its CPU",
                        format_ns(e),
                        format_ns(self.floor_for)
                    ),
                );
            }
        }
        Ok(())
    }

    /// These settings with the file's on top (keys it leaves out keep their values here).
    pub fn with_file(&self, path: &Path) -> Result<Settings, MonitorError> {
        let err = |why: String| MonitorError::Config {
            path: path.to_path_buf(),
            why,
        };
        let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
        let file: File = toml::from_str(&text).map_err(|e| err(e.message().to_string()))?;
        let mut s = self.clone();
        if let Some(c) = file.cpus {
            s.cpus = punctual_rt::parse_cpu_list(&c).map_err(|e| err(format!("cpus: {e}")))?;
        }
        let dur = |key: &str, v: &str| {
            punctual_time::parse_duration_ns(v).map_err(|e| err(format!("{key}: {e}")))
        };
        let off_or = |key: &str, v: &str| -> Result<Option<u64>, MonitorError> {
            if v == "off" {
                Ok(None)
            } else {
                dur(key, v).map(Some)
            }
        };
        if let Some(v) = file.interval {
            s.interval = dur("interval", &v)?;
        }
        if let Some(v) = file.history_every {
            s.history_every = off_or("history_every", &v)?;
        }
        if let Some(v) = file.floor_every {
            s.floor_every = off_or("floor_every", &v)?;
        }
        if let Some(v) = file.floor_for {
            s.floor_for = dur("floor_for", &v)?;
        }
        s.validate().map_err(|e| err(e.to_string()))?;
        Ok(s)
    }
}

/// The configuration file: TOML, every key optional.
///
/// ```toml
/// cpus = "1"
/// interval = "1ms"
/// history_every = "10m"   # or "off"
/// floor_every = "off"     # or e.g. "1h"
/// floor_for = "1s"
/// ```
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    cpus: Option<String>,
    interval: Option<String>,
    history_every: Option<String>,
    floor_every: Option<String>,
    floor_for: Option<String>,
}

/// The command line's settings and where a reload reads more.
#[derive(Clone, Debug)]
pub struct Source {
    pub base: Settings,
    pub file: Option<PathBuf>,
}

impl Source {
    /// The settings in force: the command line's, with the file's on top.
    pub fn read(&self) -> Result<Settings, MonitorError> {
        match &self.file {
            Some(p) => self.base.with_file(p),
            None => {
                self.base.validate()?;
                Ok(self.base.clone())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_overrides_the_command_line_and_is_checked() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("monitor.toml");
        let base = Settings::new(vec![0]);
        std::fs::write(&p, "interval = \"500us\"\nhistory_every = \"off\"\n").unwrap();
        let s = base.with_file(&p).unwrap();
        assert_eq!(s.interval, 500_000);
        assert_eq!(s.history_every, None);
        assert_eq!(s.cpus, vec![0], "left out: kept");
        for (text, says) in [
            ("interval = \"1us\"", "-i/--interval"),
            ("interval = 5", "invalid type"),
            ("listen = \"0.0.0.0:1\"", "unknown field"),
            ("cpus = \"9999\"", "cpus"),
            ("history_every = \"100ms\"", "--history-every"),
            ("floor_every = \"2s\"", "--floor-every"),
            ("interval = \"1000\"", "interval"),
        ] {
            std::fs::write(&p, text).unwrap();
            let e = base.with_file(&p).unwrap_err().to_string();
            assert!(e.contains(says), "{text}: {e}");
            assert!(e.contains("monitor.toml"), "{e}");
        }
        let missing = base.with_file(&dir.path().join("none.toml")).unwrap_err();
        assert!(matches!(missing, MonitorError::Config { .. }));
    }
}
