//! `wake`: release a separate process waiting in `Periodic::attach` / `punctual_periodic_attach`. The
//! dispatcher acts a lead before the instant (the client's futex wake-up latency, learnt as the auto
//! margin learns the kernel's), and the client spins to the instant itself and reports its lateness
//! through the channel. The channel is created before the run; a `spawn` argv is started with
//! `PUNCTUAL_WAKE_CHANNEL` set and awaited until it attaches.

use super::{ActionImpl, ActionReport};
use crate::engine::{Fired, Handed};
use punctual_periodic::channel::{Ack, Server};
use punctual_time::clock::read_clock;
use punctual_time::{AutoMargin, MarginPolicy};

pub struct Wake {
    server: Server,
    lead: AutoMargin,
    clock: libc::clockid_t,
    /// How the release handed over last went out, and the one the last report was about.
    current: Option<Handed>,
    reported: Option<Handed>,
    /// The loop's spin read before the next hand-over.
    last_read: Option<u64>,
}

impl Wake {
    /// `cap`: the most an automatic lead may grow to (see [`crate::wake_lead_cap`]); a fixed
    /// margin is taken as given.
    pub fn new(server: Server, period: u64, margin: MarginPolicy, cap: u64) -> Wake {
        let lead = match margin {
            MarginPolicy::Auto => {
                AutoMargin::for_interval(if period == 0 { 1_000_000 } else { period }).capped(cap)
            }
            MarginPolicy::Fixed(m) => AutoMargin::new(m, m, m),
        };
        // The client refuses releases further ahead than this, so a corrupted one cannot keep it
        // spinning.
        server.set_max_lead(lead.max());
        Wake {
            server,
            lead,
            clock: libc::CLOCK_MONOTONIC,
            current: None,
            reported: None,
            last_read: None,
        }
    }

    pub fn server(&self) -> &Server {
        &self.server
    }

    /// The client's thread and CPU as its last acknowledgement gave them (its process when it
    /// did not say).
    fn with_client(&self, mut h: Handed) -> Handed {
        let (tid, cpu) = self.server.client_thread();
        h.client_tid = if tid > 0 {
            tid
        } else {
            self.server.client().unwrap_or(0)
        };
        h.client_cpu = cpu;
        h.client_read = self.server.client_spin_read();
        h
    }
}

impl ActionImpl for Wake {
    #[inline]
    fn lead(&self) -> u64 {
        self.lead.margin()
    }
    fn delegated(&self) -> bool {
        true
    }
    fn ready(&self) -> bool {
        self.server.client().is_some()
    }
    #[inline]
    fn fire(&mut self, target: u64, _seq: u64, _data: &[u8]) -> Fired {
        // The engine acted at the instant less the lead it read before this firing.
        let planned = target.saturating_sub(self.lead.margin());
        let lead_needed = self.lead.needed();
        let previous = self.server.collect();
        self.reported = self.current.take().map(|h| self.with_client(h));
        if let Some(Ack::Done {
            wake_latency: Some(w),
            ..
        }) = previous
        {
            self.lead.observe(w);
        }
        let at = read_clock(self.clock);
        self.server.release(target, at);
        self.current = Some(Handed {
            target,
            planned,
            at,
            lead_needed,
            client_tid: 0,
            client_cpu: 0,
            last_read: self.last_read,
            client_read: None,
        });
        Fired {
            error: false,
            previous,
        }
    }

    fn handed(&self) -> Option<Handed> {
        self.reported
    }

    fn busy_on(&self, cpu: u32) -> Option<u64> {
        let h = self.current?;
        let (tid, on) = self.server.client_thread();
        (tid > 0 && on == cpu && self.server.client_busy()).then_some(h.target)
    }

    fn wait_client(&self, timeout_ns: u64) {
        self.server.wait_client(timeout_ns)
    }

    #[inline]
    fn spin_read(&mut self, last_read: Option<u64>) {
        self.last_read = last_read;
    }

    fn finish(&mut self) -> Option<Ack> {
        self.reported = self.current.take();
        // Give the client its lead plus a little to acknowledge the last release.
        let deadline = read_clock(self.clock) + self.lead.margin() * 2 + 20_000_000;
        loop {
            let r = self.server.collect();
            match r {
                Some(Ack::Missed) if read_clock(self.clock) < deadline => {
                    // Not yet acknowledged: collect() consumed the pending flag, so look again by hand.
                    std::thread::sleep(std::time::Duration::from_millis(1));
                    self.server.repend();
                }
                other => {
                    self.reported = self.reported.map(|h| self.with_client(h));
                    return other;
                }
            }
        }
    }

    fn report(self: Box<Self>) -> ActionReport {
        ActionReport {
            start_latency: None,
            extra: vec![
                ("channel".into(), self.server.name().into()),
                ("final_lead_ns".into(), self.lead.margin().into()),
                ("lead_cap_ns".into(), self.lead.max().into()),
                (
                    "client_pid".into(),
                    self.server
                        .client()
                        .map(serde_json::Value::from)
                        .unwrap_or(serde_json::Value::Null),
                ),
            ],
        }
    }
}
