//! `wake`: release a separate process waiting in `Periodic::attach` / `punctual_periodic_attach`. The
//! dispatcher acts a lead before the instant (the client's futex wake-up latency, learnt as the auto
//! margin learns the kernel's), and the client spins to the instant itself and reports its lateness
//! through the channel. The channel is created before the run; a `spawn` argv is started with
//! `PUNCTUAL_WAKE_CHANNEL` set and awaited until it attaches.

use super::{ActionImpl, ActionReport};
use crate::engine::Fired;
use punctual_periodic::channel::{Ack, Server};
use punctual_time::clock::read_clock;
use punctual_time::{AutoMargin, MarginPolicy};

pub struct Wake {
    server: Server,
    lead: AutoMargin,
    clock: libc::clockid_t,
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
        }
    }

    pub fn server(&self) -> &Server {
        &self.server
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
        let previous = self.server.collect();
        if let Some(Ack::Done {
            wake_latency: Some(w),
            ..
        }) = previous
        {
            self.lead.observe(w);
        }
        self.server.release(target, read_clock(self.clock));
        Fired {
            error: false,
            previous,
        }
    }

    fn finish(&mut self) -> Option<Ack> {
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
                other => return other,
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
