//! Everything that talks to the kernel's tracing: finding or mounting tracefs ([`tracefs`]), a
//! private instance with its own per-CPU buffers ([`instance`]), the format files
//! ([`format`](mod@format)), the binary page layout of `trace_pipe_raw` ([`page`]) and decoding
//! records into events ([`decode`]).

pub mod decode;
pub mod format;
pub mod instance;
pub mod page;
pub mod tracefs;

use crate::event::Vector;
use crate::TraceError;

/// The event groups of `--events`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventGroups {
    pub sched: bool,
    pub irq: bool,
    pub timer: bool,
}

pub const GROUP_NAMES: &str = "sched, irq, timer (or all)";

impl Default for EventGroups {
    fn default() -> Self {
        EventGroups {
            sched: true,
            irq: true,
            timer: true,
        }
    }
}

impl std::str::FromStr for EventGroups {
    type Err = TraceError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut g = EventGroups {
            sched: false,
            irq: false,
            timer: false,
        };
        for part in s.split(',').map(str::trim) {
            match part {
                "sched" => g.sched = true,
                "irq" => g.irq = true,
                "timer" => g.timer = true,
                "all" => g = EventGroups::default(),
                "" => {
                    return Err(TraceError::Usage(format!(
                        "--events '{s}': empty group name; valid: {GROUP_NAMES}"
                    )))
                }
                other => {
                    return Err(TraceError::Usage(format!(
                        "--events: unknown event group '{other}'; valid: {GROUP_NAMES}"
                    )))
                }
            }
        }
        Ok(g)
    }
}

/// One kernel event to enable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelEvent {
    pub system: &'static str,
    pub name: String,
    /// Missing on some architectures or configurations; skipped rather than refused.
    pub optional: bool,
}

impl KernelEvent {
    fn required(system: &'static str, name: &str) -> Self {
        KernelEvent {
            system,
            name: name.into(),
            optional: false,
        }
    }

    pub fn path(&self) -> String {
        format!("{}/{}", self.system, self.name)
    }
}

impl EventGroups {
    /// The kernel events the groups stand for.
    pub fn kernel_events(&self) -> Vec<KernelEvent> {
        let mut v = Vec::new();
        if self.sched {
            for n in [
                "sched_switch",
                "sched_waking",
                "sched_wakeup",
                "sched_wakeup_new",
                "sched_process_fork",
                "sched_process_exit",
            ] {
                v.push(KernelEvent::required("sched", n));
            }
        }
        if self.irq {
            for n in [
                "irq_handler_entry",
                "irq_handler_exit",
                "softirq_entry",
                "softirq_exit",
            ] {
                v.push(KernelEvent::required("irq", n));
            }
            // x86 system vectors (local timer, IPIs) do not pass through irq_handler_*.
            for vec in Vector::ALL {
                for end in ["entry", "exit"] {
                    v.push(KernelEvent {
                        system: "irq_vectors",
                        name: format!("{}_{end}", vec.name()),
                        optional: true,
                    });
                }
            }
        }
        if self.timer {
            for n in ["hrtimer_expire_entry", "hrtimer_expire_exit"] {
                v.push(KernelEvent::required("timer", n));
            }
            // Each expiry's programmed time, for the latency from it to the handler.
            v.push(KernelEvent {
                system: "timer",
                name: "hrtimer_start".into(),
                optional: true,
            });
        }
        v
    }

    pub fn describe(&self) -> String {
        let mut v = Vec::new();
        if self.sched {
            v.push("sched");
        }
        if self.irq {
            v.push("irq");
        }
        if self.timer {
            v.push("timer");
        }
        v.join(",")
    }
}

/// Parse a ring-buffer size with a unit: `512K`, `4M`, `1G` (also `KiB`, `MB`...). Returns KiB.
pub fn parse_size_kb(s: &str) -> Result<u64, TraceError> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num.parse().map_err(|_| {
        TraceError::Usage(format!(
            "--buffer-size '{s}': expected a size like 4M or 512K"
        ))
    })?;
    let mult = match unit.trim().to_ascii_lowercase().as_str() {
        "k" | "kb" | "kib" => 1,
        "m" | "mb" | "mib" => 1024,
        "g" | "gb" | "gib" => 1024 * 1024,
        "" => {
            return Err(TraceError::Usage(format!(
                "--buffer-size '{s}' needs a unit: did you mean {s}K? (K, M or G, per CPU)"
            )))
        }
        u => {
            return Err(TraceError::Usage(format!(
                "--buffer-size '{s}': unknown unit '{u}'; use K, M or G"
            )))
        }
    };
    let kb = n
        .checked_mul(mult)
        .ok_or_else(|| TraceError::Usage(format!("--buffer-size '{s}' is too large")))?;
    if kb < 4 {
        return Err(TraceError::Usage(format!(
            "--buffer-size '{s}' is under one 4K page per CPU"
        )));
    }
    Ok(kb)
}

/// Read a tracefs file. Some tracefs files (`events/header_page`) answer a small first read with a
/// short chunk and then end-of-file, so read in large chunks, as `cat` does, not with a size probe.
pub fn read_file(path: &std::path::Path) -> std::io::Result<String> {
    use std::io::Read;
    let mut f = std::fs::File::open(path)?;
    let mut out = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    String::from_utf8(out).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_parse_and_refuse_unknown_names() {
        let g: EventGroups = "sched,irq".parse().unwrap();
        assert!(g.sched && g.irq && !g.timer);
        assert_eq!(
            "all".parse::<EventGroups>().unwrap(),
            EventGroups::default()
        );
        let e = "sched,disk".parse::<EventGroups>().unwrap_err().to_string();
        assert!(
            e.contains("'disk'") && e.contains("sched, irq, timer"),
            "{e}"
        );
        assert!("sched,,irq".parse::<EventGroups>().is_err());
    }

    #[test]
    fn kernel_events_follow_groups() {
        let only_timer = EventGroups {
            sched: false,
            irq: false,
            timer: true,
        }
        .kernel_events();
        assert_eq!(only_timer.len(), 3);
        assert!(only_timer
            .iter()
            .any(|e| e.path() == "timer/hrtimer_start" && e.optional));
        let all = EventGroups::default().kernel_events();
        assert!(all
            .iter()
            .any(|e| e.path() == "sched/sched_switch" && !e.optional));
        assert!(all
            .iter()
            .any(|e| e.path() == "irq_vectors/local_timer_entry" && e.optional));
    }

    #[test]
    fn sizes_need_units() {
        assert_eq!(parse_size_kb("4M").unwrap(), 4096);
        assert_eq!(parse_size_kb("512KiB").unwrap(), 512);
        assert_eq!(parse_size_kb("1g").unwrap(), 1 << 20);
        assert!(parse_size_kb("4096")
            .unwrap_err()
            .to_string()
            .contains("did you mean 4096K"));
        assert!(parse_size_kb("2K").is_err());
        assert!(parse_size_kb("4T").is_err());
        assert!(parse_size_kb("lots").is_err());
    }
}
