//! Synthetic traces with known answers, for tests and examples: say which task runs where and when,
//! and get the events the kernel would have recorded, in memory or as a trace file.

use crate::event::{Event, EventKind, STATE_PREEMPTED};
use crate::file::{read_trace, Header, IrqInfo, TaskInfo, TraceData, TraceWriter, Trailer};
use std::collections::BTreeMap;

pub const SLEEPING: u64 = 0x1;
pub const PREEMPTED: u64 = STATE_PREEMPTED;

#[derive(Clone, Debug)]
pub struct Synth {
    header: Header,
    trailer: Trailer,
    events: Vec<Event>,
}

impl Synth {
    /// A trace of `cpus` CPUs whose window is `[start_ns, end_ns]`.
    pub fn new(cpus: u32, start_ns: u64, end_ns: u64) -> Self {
        Synth {
            header: Header {
                clock: "mono".into(),
                started_at: "2026-01-01T00:00:00Z".into(),
                start_ns,
                host: None,
                cpus: (0..cpus).collect(),
                events: vec!["sched/sched_switch".into(), "sched/sched_waking".into()],
                buffer_kb: 1024,
                command: vec!["synthetic".into()],
                target: None,
            },
            trailer: Trailer {
                end_ns,
                ended_at: "2026-01-01T00:00:01Z".into(),
                ..Default::default()
            },
            events: Vec::new(),
        }
    }

    /// Name a task and its process.
    pub fn task(mut self, pid: i32, tgid: i32, comm: &str) -> Self {
        self.trailer.tasks.insert(
            pid,
            TaskInfo {
                tgid: Some(tgid),
                comm: comm.into(),
            },
        );
        self
    }

    /// The recorder found `pid` the only runnable task on `cpu` as tracing stopped.
    pub fn sole_runner(mut self, cpu: u32, pid: i32) -> Self {
        self.trailer.sole_runners.insert(cpu, pid);
        self
    }

    pub fn irq(mut self, irq: i32, name: &str, driver: Option<&str>) -> Self {
        self.trailer.irqs.insert(
            irq,
            IrqInfo {
                name: name.into(),
                driver: driver.map(Into::into),
            },
        );
        self
    }

    pub fn event(&mut self, ts: u64, cpu: u32, kind: EventKind) -> &mut Self {
        self.events.push(Event { ts, cpu, kind });
        self
    }

    /// `prev` leaves `cpu` in `prev_state` ([`SLEEPING`], [`PREEMPTED`]...), `next` starts.
    pub fn switch(
        &mut self,
        ts: u64,
        cpu: u32,
        prev: i32,
        prev_state: u64,
        next: i32,
    ) -> &mut Self {
        self.event(
            ts,
            cpu,
            EventKind::Switch {
                prev_pid: prev,
                prev_prio: 120,
                prev_state,
                next_pid: next,
                next_prio: 120,
            },
        )
    }

    pub fn waking(&mut self, ts: u64, cpu: u32, pid: i32) -> &mut Self {
        self.event(
            ts,
            cpu,
            EventKind::Waking {
                pid,
                prio: 120,
                target_cpu: cpu as i32,
            },
        )
    }

    /// A handler of `kind` from `t0` to `t1`.
    pub fn span(
        &mut self,
        cpu: u32,
        t0: u64,
        t1: u64,
        entry: EventKind,
        exit: EventKind,
    ) -> &mut Self {
        self.event(t0, cpu, entry).event(t1, cpu, exit)
    }

    pub fn lost(&mut self, ts: u64, cpu: u32) -> &mut Self {
        self.event(ts, cpu, EventKind::Lost { count: None })
    }

    pub fn symbol(mut self, addr: u64, name: &str) -> Self {
        self.trailer
            .symbols
            .insert(format!("{addr:x}"), name.into());
        self
    }

    fn sorted(&self) -> Vec<Event> {
        let mut ev = self.events.clone();
        ev.sort_by_key(|e| e.ts);
        ev
    }

    /// The trace as the reader would return it.
    pub fn build(&self) -> TraceData {
        let comms = self
            .trailer
            .tasks
            .iter()
            .map(|(p, t)| (*p, t.comm.clone()))
            .collect();
        let irq_names = self
            .trailer
            .irqs
            .iter()
            .map(|(i, t)| (*i, t.name.clone()))
            .collect();
        let events = self.sorted();
        let mut t = TraceData {
            header: self.header.clone(),
            trailer: Some(self.trailer.clone()),
            integrity: Default::default(),
            events,
            comms,
            irq_names,
        };
        t.integrity.has_trailer = true;
        t.integrity.events = t.events.len() as u64;
        t
    }

    /// The trace as an in-memory capture holds it (`--explain`), every CPU of the trace traced
    /// over its whole window.
    pub fn captured(&self) -> crate::capture::Captured {
        let t = self.build();
        let mut c = crate::capture::Captured::from_events(
            &t.events,
            Some((self.header.start_ns, self.trailer.end_ns)),
        );
        // CPUs with no event were traced too (an idle CPU says nothing).
        for cpu in &self.header.cpus {
            let cpu = *cpu as usize;
            if let Err(at) = c.cpus.binary_search(&cpu) {
                c.cpus.insert(at, cpu);
                c.events.insert(at, Vec::new());
                c.covered_from.insert(at, self.header.start_ns);
                c.poll_state.insert(at, None);
                c.idle_polled.insert(at, false);
            }
        }
        c.comms = t.comms;
        c.irq_names = t.irq_names;
        c
    }

    /// The trace as a punctual trace file.
    pub fn file_bytes(&self) -> Vec<u8> {
        let mut w = TraceWriter::new(Vec::new(), &self.header).expect("writing to memory");
        let mut named = BTreeMap::new();
        for (i, e) in self.sorted().into_iter().enumerate() {
            if i % 500 == 499 {
                // Several blocks, as a recording's periodic drains give.
                w.flush().expect("writing to memory");
            }
            for pid in pids_of(&e.kind) {
                if let (Some(t), None) = (self.trailer.tasks.get(&pid), named.get(&pid)) {
                    w.comm(e.cpu, e.ts, pid, t.comm.as_bytes());
                    named.insert(pid, ());
                }
            }
            w.push(e.cpu, e.ts, &e.kind).expect("writing to memory");
        }
        w.finish(&self.trailer).expect("writing to memory")
    }

    /// Round trip through the file format (the reader's view of [`Synth::file_bytes`]).
    pub fn through_file(&self) -> TraceData {
        read_trace(&self.file_bytes()).expect("a file just written reads back")
    }
}

fn pids_of(k: &EventKind) -> Vec<i32> {
    match *k {
        EventKind::Switch {
            prev_pid, next_pid, ..
        } => vec![prev_pid, next_pid],
        EventKind::Waking { pid, .. }
        | EventKind::Wakeup { pid, .. }
        | EventKind::WakeupNew { pid, .. } => vec![pid],
        _ => vec![],
    }
}

/// A busy machine's trace: `processes` short-lived processes, one after another on each of `cpus`
/// CPUs over `duration_ns`, each created, run three times (woken, preempted, blocked) and exited;
/// every fourth has a second thread. Each CPU also takes a local-timer vector every 4 ms and a
/// device interrupt every 10 ms. The analysis of this trace must not grow with the number of
/// processes faster than the trace itself does (issue 18).
pub fn short_processes(processes: u32, cpus: u32, duration_ns: u64) -> Synth {
    use crate::event::Vector;
    const US: u64 = 1_000;
    let cpus = cpus.max(1);
    let per_cpu = processes.div_ceil(cpus).max(1) as u64;
    let slot = duration_ns / (per_cpu + 1);
    assert!(
        slot >= 600 * US,
        "{processes} processes do not fit in {duration_ns} ns on {cpus} CPUs (600 us each)"
    );
    let start = 1_000_000_000;
    let mut s =
        Synth::new(cpus, start, start + duration_ns).irq(24, "virtio1-req.0", Some("virtio_blk"));
    for i in 0..processes {
        let pid = 1000 + 2 * i as i32;
        s = s.task(pid, pid, &format!("short-{i}"));
        if i % 4 == 0 {
            s = s.task(pid + 1, pid, &format!("short-{i}-t"));
        }
    }
    for i in 0..processes {
        let cpu = i % cpus;
        let t = start + (i / cpus) as u64 * slot + 50 * US;
        let pid = 1000 + 2 * i as i32;
        s.event(
            t,
            cpu,
            EventKind::WakeupNew {
                pid,
                prio: 120,
                target_cpu: cpu as i32,
            },
        );
        s.switch(t + 10 * US, cpu, 0, 0, pid);
        if i % 4 == 0 {
            let tid = pid + 1;
            s.event(
                t + 30 * US,
                cpu,
                EventKind::WakeupNew {
                    pid: tid,
                    prio: 120,
                    target_cpu: cpu as i32,
                },
            );
            s.switch(t + 40 * US, cpu, pid, PREEMPTED, tid);
            s.event(t + 60 * US, cpu, EventKind::Exit { pid: tid });
            s.switch(t + 65 * US, cpu, tid, 0x10, pid);
        }
        s.switch(t + 100 * US, cpu, pid, SLEEPING, 0);
        s.waking(t + 200 * US, cpu, pid);
        s.switch(t + 215 * US, cpu, 0, 0, pid);
        s.switch(t + 300 * US, cpu, pid, PREEMPTED, 0);
        s.switch(t + 310 * US, cpu, 0, 0, pid);
        s.event(t + 400 * US, cpu, EventKind::Exit { pid });
        s.switch(t + 410 * US, cpu, pid, 0x10, 0);
    }
    for cpu in 0..cpus {
        let mut t = start + 1_000 * US + 7 * US * cpu as u64;
        while t + 10 * US < start + duration_ns {
            s.span(
                cpu,
                t,
                t + 3 * US,
                EventKind::VectorEntry {
                    vector: Vector::LocalTimer,
                },
                EventKind::VectorExit {
                    vector: Vector::LocalTimer,
                },
            );
            if (t - start) % (10_000 * US) < 4_000 * US {
                s.span(
                    cpu,
                    t + 4 * US,
                    t + 6 * US,
                    EventKind::IrqEntry { irq: 24 },
                    EventKind::IrqExit {
                        irq: 24,
                        handled: true,
                    },
                );
            }
            t += 4_000 * US;
        }
    }
    s
}
