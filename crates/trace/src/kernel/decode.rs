//! Turning raw records into [`EventKind`]s, with field offsets taken from the format files.

use super::format::{EventFormat, Field, FormatError};
use crate::event::{EventKind, Vector};
use std::collections::HashMap;

/// One per event format (a handful per trace), so the variants' sizes do not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug)]
enum Decoding {
    Switch {
        prev_comm: Field,
        prev_pid: Field,
        prev_prio: Field,
        prev_state: Field,
        next_comm: Field,
        next_pid: Field,
        next_prio: Field,
    },
    Wake {
        which: u8,
        comm: Field,
        pid: Field,
        prio: Field,
        target_cpu: Field,
    },
    Fork {
        parent: Field,
        child: Field,
        child_comm: Field,
    },
    Exit {
        pid: Field,
    },
    IrqEntry {
        irq: Field,
        name: Field,
    },
    IrqExit {
        irq: Field,
        ret: Field,
    },
    Softirq {
        entry: bool,
        vec: Field,
    },
    HrtimerEntry {
        timer: Field,
        function: Field,
        now: Option<Field>,
    },
    HrtimerStart {
        timer: Field,
        function: Field,
        expires: Field,
    },
    HrtimerExit {
        timer: Field,
    },
    Vector {
        entry: bool,
        vector: Vector,
    },
    CpuIdle {
        state: Field,
    },
    StatRuntime {
        comm: Field,
        pid: Field,
        runtime: Field,
    },
    Cpu {
        /// 0: `ipi_send_cpu`, 1: `sched_wake_idle_without_ipi`.
        which: u8,
        cpu: Field,
    },
}

/// Labels a record carries besides the event: task names and IRQ names, recorded once each in the
/// trace file rather than with every event.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Labels<'a> {
    pub comms: [Option<(i32, &'a [u8])>; 2],
    pub irq_name: Option<(i32, &'a [u8])>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decoded<'a> {
    pub kind: EventKind,
    pub labels: Labels<'a>,
}

/// Decodes the events punctual knows by their numeric id.
#[derive(Clone, Debug, Default)]
pub struct Decoder {
    by_id: HashMap<u16, Decoding>,
}

fn need<'a>(f: &'a EventFormat, name: &str) -> Result<&'a Field, FormatError> {
    f.field(name).ok_or_else(|| FormatError {
        what: format!("{}/{}", f.system, f.name),
        why: format!("no field '{name}'"),
    })
}

impl Decoder {
    /// Add an event's format. Events punctual does not know are refused with an error.
    pub fn add(&mut self, f: &EventFormat) -> Result<(), FormatError> {
        let g = |n: &str| need(f, n).cloned();
        let d = match (f.system.as_str(), f.name.as_str()) {
            ("sched", "sched_switch") => Decoding::Switch {
                prev_comm: g("prev_comm")?,
                prev_pid: g("prev_pid")?,
                prev_prio: g("prev_prio")?,
                prev_state: g("prev_state")?,
                next_comm: g("next_comm")?,
                next_pid: g("next_pid")?,
                next_prio: g("next_prio")?,
            },
            ("sched", w @ ("sched_waking" | "sched_wakeup" | "sched_wakeup_new")) => {
                Decoding::Wake {
                    which: match w {
                        "sched_waking" => 0,
                        "sched_wakeup" => 1,
                        _ => 2,
                    },
                    comm: g("comm")?,
                    pid: g("pid")?,
                    prio: g("prio")?,
                    target_cpu: g("target_cpu")?,
                }
            }
            ("sched", "sched_process_fork") => Decoding::Fork {
                parent: g("parent_pid")?,
                child: g("child_pid")?,
                child_comm: g("child_comm")?,
            },
            ("sched", "sched_process_exit") => Decoding::Exit { pid: g("pid")? },
            ("sched", "sched_stat_runtime") => Decoding::StatRuntime {
                comm: g("comm")?,
                pid: g("pid")?,
                runtime: g("runtime")?,
            },
            ("sched", "sched_wake_idle_without_ipi") => Decoding::Cpu {
                which: 1,
                cpu: g("cpu")?,
            },
            ("power", "cpu_idle") => Decoding::CpuIdle { state: g("state")? },
            ("ipi", "ipi_send_cpu") => Decoding::Cpu {
                which: 0,
                cpu: g("cpu")?,
            },
            ("irq", "irq_handler_entry") => Decoding::IrqEntry {
                irq: g("irq")?,
                name: g("name")?,
            },
            ("irq", "irq_handler_exit") => Decoding::IrqExit {
                irq: g("irq")?,
                ret: g("ret")?,
            },
            ("irq", "softirq_entry") => Decoding::Softirq {
                entry: true,
                vec: g("vec")?,
            },
            ("irq", "softirq_exit") => Decoding::Softirq {
                entry: false,
                vec: g("vec")?,
            },
            ("timer", "hrtimer_expire_entry") => Decoding::HrtimerEntry {
                timer: g("hrtimer")?,
                function: g("function")?,
                now: f.field("now").cloned(),
            },
            ("timer", "hrtimer_start") => Decoding::HrtimerStart {
                timer: g("hrtimer")?,
                function: g("function")?,
                expires: g("expires")?,
            },
            ("timer", "hrtimer_expire_exit") => Decoding::HrtimerExit {
                timer: g("hrtimer")?,
            },
            ("irq_vectors", n) => {
                let (stem, entry) = if let Some(s) = n.strip_suffix("_entry") {
                    (s, true)
                } else if let Some(s) = n.strip_suffix("_exit") {
                    (s, false)
                } else {
                    return Err(FormatError {
                        what: format!("irq_vectors/{n}"),
                        why: "not an entry/exit event".into(),
                    });
                };
                let vector = Vector::ALL
                    .into_iter()
                    .find(|v| v.name() == stem)
                    .ok_or_else(|| FormatError {
                        what: format!("irq_vectors/{n}"),
                        why: "vector punctual does not record".into(),
                    })?;
                Decoding::Vector { entry, vector }
            }
            (s, n) => {
                return Err(FormatError {
                    what: format!("{s}/{n}"),
                    why: "event punctual does not decode".into(),
                })
            }
        };
        self.by_id.insert(f.id, d);
        Ok(())
    }

    pub fn knows(&self, id: u16) -> bool {
        self.by_id.contains_key(&id)
    }

    /// Decode one record; `None` for an unknown id or a record too short for its fields.
    pub fn decode<'a>(&self, rec: &'a [u8]) -> Option<Decoded<'a>> {
        let id = u16::from_le_bytes(rec.get(0..2)?.try_into().ok()?);
        let d = self.by_id.get(&id)?;
        let i32f = |f: &Field| f.read_int(rec).map(|v| v as i32);
        let mut labels = Labels::default();
        let kind = match d {
            Decoding::Switch {
                prev_comm,
                prev_pid,
                prev_prio,
                prev_state,
                next_comm,
                next_pid,
                next_prio,
            } => {
                let (pp, np) = (i32f(prev_pid)?, i32f(next_pid)?);
                labels.comms = [
                    Some((pp, prev_comm.read_str(rec)?)),
                    Some((np, next_comm.read_str(rec)?)),
                ];
                EventKind::Switch {
                    prev_pid: pp,
                    prev_prio: i32f(prev_prio)?,
                    prev_state: prev_state.read_u64(rec)?,
                    next_pid: np,
                    next_prio: i32f(next_prio)?,
                }
            }
            Decoding::Wake {
                which,
                comm,
                pid,
                prio,
                target_cpu,
            } => {
                let (pid, prio, target_cpu) = (i32f(pid)?, i32f(prio)?, i32f(target_cpu)?);
                labels.comms[0] = Some((pid, comm.read_str(rec)?));
                match which {
                    0 => EventKind::Waking {
                        pid,
                        prio,
                        target_cpu,
                    },
                    1 => EventKind::Wakeup {
                        pid,
                        prio,
                        target_cpu,
                    },
                    _ => EventKind::WakeupNew {
                        pid,
                        prio,
                        target_cpu,
                    },
                }
            }
            Decoding::Fork {
                parent,
                child,
                child_comm,
            } => {
                let child = i32f(child)?;
                labels.comms[0] = child_comm.read_str(rec).map(|c| (child, c));
                EventKind::Fork {
                    parent: i32f(parent)?,
                    child,
                }
            }
            Decoding::Exit { pid } => EventKind::Exit { pid: i32f(pid)? },
            Decoding::IrqEntry { irq, name } => {
                let irq = i32f(irq)?;
                labels.irq_name = name.read_str(rec).map(|n| (irq, n));
                EventKind::IrqEntry { irq }
            }
            Decoding::IrqExit { irq, ret } => EventKind::IrqExit {
                irq: i32f(irq)?,
                handled: ret.read_int(rec)? != 0,
            },
            Decoding::Softirq { entry: true, vec } => EventKind::SoftirqEntry {
                vec: vec.read_int(rec)? as u32,
            },
            Decoding::Softirq { entry: false, vec } => EventKind::SoftirqExit {
                vec: vec.read_int(rec)? as u32,
            },
            Decoding::HrtimerEntry {
                timer,
                function,
                now,
            } => EventKind::HrtimerEntry {
                timer: timer.read_u64(rec)?,
                function: function.read_u64(rec)?,
                // s64 in the kernel; a negative clock is no time to measure from.
                now: now
                    .as_ref()
                    .and_then(|f| f.read_int(rec))
                    .and_then(|v| u64::try_from(v).ok()),
            },
            Decoding::HrtimerStart {
                timer,
                function,
                expires,
            } => EventKind::HrtimerStart {
                timer: timer.read_u64(rec)?,
                function: function.read_u64(rec)?,
                expires: u64::try_from(expires.read_int(rec)?).ok()?,
            },
            Decoding::HrtimerExit { timer } => EventKind::HrtimerExit {
                timer: timer.read_u64(rec)?,
            },
            Decoding::Vector {
                entry: true,
                vector,
            } => EventKind::VectorEntry { vector: *vector },
            Decoding::Vector {
                entry: false,
                vector,
            } => EventKind::VectorExit { vector: *vector },
            Decoding::StatRuntime { comm, pid, runtime } => {
                let pid = i32f(pid)?;
                labels.comms[0] = comm.read_str(rec).map(|c| (pid, c));
                EventKind::StatRuntime {
                    pid,
                    runtime: runtime.read_u64(rec)?,
                }
            }
            // PWR_EVENT_EXIT is (u32)-1.
            Decoding::CpuIdle { state } => EventKind::CpuIdle {
                state: match state.read_int(rec)? as u32 {
                    u32::MAX => None,
                    s => Some(s),
                },
            },
            Decoding::Cpu { which, cpu } => {
                let target_cpu = cpu.read_int(rec)? as u32;
                match which {
                    0 => EventKind::IpiSend { target_cpu },
                    _ => EventKind::WakeIdleNoIpi { target_cpu },
                }
            }
        };
        Some(Decoded { kind, labels })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::format::parse_event_format;

    fn softirq_format() -> EventFormat {
        parse_event_format(
            "irq",
            "name: softirq_entry\nID: 223\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\tfield:unsigned int vec;\toffset:8;\tsize:4;\tsigned:0;\n",
        )
        .unwrap()
    }

    #[test]
    fn decodes_by_id_and_ignores_unknown_ids() {
        let mut d = Decoder::default();
        d.add(&softirq_format()).unwrap();
        let mut rec = vec![0u8; 12];
        rec[0..2].copy_from_slice(&223u16.to_le_bytes());
        rec[8..12].copy_from_slice(&3u32.to_le_bytes());
        assert_eq!(
            d.decode(&rec).unwrap().kind,
            EventKind::SoftirqEntry { vec: 3 }
        );
        rec[0..2].copy_from_slice(&999u16.to_le_bytes());
        assert!(d.decode(&rec).is_none());
        // Too short for its fields: skipped, not a panic.
        assert!(d.decode(&[223u8, 0, 0]).is_none());
    }

    #[test]
    fn refuses_events_it_does_not_know() {
        let mut f = softirq_format();
        f.name = "softirq_raise".into();
        assert!(Decoder::default().add(&f).is_err());
    }
}
