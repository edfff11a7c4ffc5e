//! KURT's real-time modules, one module per action kind. Each is prepared before the run (sockets
//! opened, libraries loaded, children forked, channels created), so firing one is a few system calls
//! at most.

pub mod exec;
pub mod plugin;
pub mod udp;
pub mod wake;

use crate::engine::{Actions, Fire, Fired, Handed};
use punctual_periodic::channel::Ack;
use punctual_stats::Recorder;

/// A prepared action.
pub trait ActionImpl: Send {
    fn lead(&self) -> u64 {
        0
    }
    fn delegated(&self) -> bool {
        false
    }
    /// Firing is short work of punctual's own ([`Actions::short`]): a hand-over, a mark, a send.
    fn short(&self) -> bool {
        self.delegated()
    }
    /// Short work that any thread may do, at no cost to the loop's CPU's own state (a mark, a
    /// datagram from a socket that is not bound to a CPU): the loop's breath partner may fire it
    /// in the loop's place ([`Actions::relay`]).
    fn relayable(&self) -> bool {
        false
    }
    /// Ready to run (a wake channel has its client).
    fn ready(&self) -> bool {
        true
    }
    fn fire(&mut self, target: u64, seq: u64, data: &[u8]) -> Fired;
    /// The loop's spin read before its next [`ActionImpl::fire`] ([`Actions::spin_read`]).
    #[inline(always)]
    fn spin_read(&mut self, _last_read: Option<u64>) {}
    fn finish(&mut self) -> Option<Ack> {
        None
    }
    /// A delegated action: how the release its last report was about was handed over.
    fn handed(&self) -> Option<Handed> {
        None
    }
    /// A delegated action whose client runs on `cpu`: the instant of its last release while the
    /// client is still busy with it ([`Actions::busy_here`]).
    fn busy_on(&self, _cpu: u32) -> Option<u64> {
        None
    }
    /// Wait until the client comes back for its next release, at most `timeout_ns`.
    fn wait_client(&self, _timeout_ns: u64) {}
    /// What the action measured besides the dispatcher's lateness (after the run).
    fn report(self: Box<Self>) -> ActionReport {
        ActionReport::default()
    }
}

/// Measurements an action makes beside the release lateness.
#[derive(Default)]
pub struct ActionReport {
    /// exec: from the release instant to the forked child running (before its exec).
    pub start_latency: Option<Recorder>,
    /// Extra fields for the series (`sent`, `spawn_errors`, `final_lead_ns`...).
    pub extra: Vec<(String, serde_json::Value)>,
}

pub struct Mark;

impl ActionImpl for Mark {
    fn short(&self) -> bool {
        true
    }
    fn relayable(&self) -> bool {
        true
    }
    #[inline]
    fn fire(&mut self, _: u64, _: u64, _: &[u8]) -> Fired {
        Fired {
            error: false,
            previous: None,
        }
    }
}

/// The actions one dispatcher thread owns, indexed by the plan's action table.
#[derive(Default)]
pub struct RealActions {
    pub items: Vec<Option<Box<dyn ActionImpl>>>,
}

impl RealActions {
    fn get(&self, a: u16) -> &dyn ActionImpl {
        self.items[a as usize]
            .as_deref()
            .expect("every action used on a CPU is prepared on it")
    }
}

impl Actions for RealActions {
    #[inline]
    fn lead(&self, action: u16) -> u64 {
        self.get(action).lead()
    }
    #[inline]
    fn delegated(&self, action: u16) -> bool {
        self.get(action).delegated()
    }
    #[inline]
    fn short(&self, action: u16) -> bool {
        self.get(action).short()
    }
    #[inline]
    fn fire(&mut self, action: u16, target: u64, seq: u64, data: &[u8]) -> Fired {
        self.items[action as usize]
            .as_mut()
            .expect("prepared")
            .fire(target, seq, data)
    }
    fn finish(&mut self, action: u16) -> Option<Ack> {
        self.items[action as usize]
            .as_mut()
            .and_then(|a| a.finish())
    }
    #[inline]
    fn spin_read(&mut self, action: u16, last_read: Option<u64>) {
        if let Some(a) = self.items[action as usize].as_mut() {
            a.spin_read(last_read);
        }
    }
    fn handed(&self, action: u16) -> Option<Handed> {
        self.get(action).handed()
    }
    fn busy_here(&self, from: u64, before: u64) -> Option<(u64, u16)> {
        // SAFETY: sched_getcpu takes no arguments and touches no memory (the vDSO's getcpu).
        let cpu = unsafe { libc::sched_getcpu() };
        let cpu = u32::try_from(cpu).ok()?;
        self.items
            .iter()
            .enumerate()
            .filter_map(|(i, a)| Some((a.as_ref()?.busy_on(cpu)?, i as u16)))
            .filter(|&(t, _)| (from..before).contains(&t))
            .min()
    }
    fn wait_client(&self, action: u16, timeout_ns: u64) {
        self.get(action).wait_client(timeout_ns)
    }
    fn relay(&mut self, action: u16) -> Option<&mut dyn Fire> {
        match self.items[action as usize].as_mut() {
            Some(a) if a.relayable() => Some(a),
            _ => None,
        }
    }
}

impl Fire for Box<dyn ActionImpl> {
    #[inline]
    fn fire(&mut self, target: u64, seq: u64, data: &[u8]) -> Fired {
        ActionImpl::fire(&mut **self, target, seq, data)
    }
}
