//! Late releases handed over while a run lasts (`punctual monitor`): a timing thread offers each
//! release later than the bound to a fixed ring, another thread takes them to explain. Unlike a
//! [`crate::LateLog`], which the thread keeps until the run ends, the feed is read as it fills, so
//! a run of days needs no more room than a few seconds of late releases.
//!
//! One thread offers at a time, one takes at a time. Both only load and store atomics (no lock, no
//! allocation, no system call); a full ring counts the release as dropped rather than wait.

use crate::record::{LateRelease, Waiter};
use std::sync::atomic::{AtomicU64, Ordering};

/// A late release as the ring holds it.
#[derive(Debug, Default)]
struct Slot {
    target: AtomicU64,
    actual: AtomicU64,
    /// The thread id (high 32 bits) and its CPU (low 32 bits).
    who: AtomicU64,
}

/// A single-producer, single-consumer ring of late releases (24 bytes a release).
#[derive(Debug)]
pub struct LateFeed {
    slots: Box<[Slot]>,
    /// Releases written by the producer so far, and taken by the consumer so far.
    written: AtomicU64,
    taken: AtomicU64,
    /// Late releases that found the ring full.
    dropped: AtomicU64,
    bound: u64,
}

impl LateFeed {
    /// A feed of releases later than `bound` ns, holding at most `capacity` not yet taken.
    pub fn new(bound: u64, capacity: usize) -> LateFeed {
        LateFeed {
            slots: (0..capacity.max(1)).map(|_| Slot::default()).collect(),
            written: AtomicU64::new(0),
            taken: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            bound,
        }
    }

    pub fn bound(&self) -> u64 {
        self.bound
    }

    /// Whether a release this late is to be offered.
    #[inline(always)]
    pub fn is_late(&self, lateness: u64) -> bool {
        lateness > self.bound
    }

    /// Offer a late release (the producer: one thread at a time). Never waits: a full ring
    /// counts it as dropped.
    #[inline]
    pub fn offer(&self, tid: i32, cpu: u32, target: u64, actual: u64) {
        let w = self.written.load(Ordering::Relaxed);
        let t = self.taken.load(Ordering::Acquire);
        if w - t >= self.slots.len() as u64 {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let s = &self.slots[(w % self.slots.len() as u64) as usize];
        s.target.store(target, Ordering::Relaxed);
        s.actual.store(actual, Ordering::Relaxed);
        s.who
            .store(((tid as u32 as u64) << 32) | cpu as u64, Ordering::Relaxed);
        self.written.store(w + 1, Ordering::Release);
    }

    /// Move every release offered since the last call into `out`, counted in `series` (the
    /// consumer: one thread at a time). Returns how many.
    pub fn take(&self, series: u32, out: &mut Vec<LateRelease>) -> usize {
        let t = self.taken.load(Ordering::Relaxed);
        let w = self.written.load(Ordering::Acquire);
        for i in t..w {
            let s = &self.slots[(i % self.slots.len() as u64) as usize];
            let who = s.who.load(Ordering::Relaxed);
            out.push(LateRelease {
                series,
                tid: (who >> 32) as u32 as i32,
                cpu: who as u32,
                waiter: Waiter::Sleeper,
                target: s.target.load(Ordering::Relaxed),
                actual: s.actual.load(Ordering::Relaxed),
                handover: None,
                behind: false,
                last_read: None,
                own_work: None,
            });
        }
        self.taken.store(w, Ordering::Release);
        (w - t) as usize
    }

    /// Late releases that found the ring full, so far.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Every late release offered so far, kept or dropped.
    pub fn offered(&self) -> u64 {
        self.written.load(Ordering::Acquire) + self.dropped()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn releases_come_out_in_order_and_a_full_ring_counts_instead_of_waiting() {
        let f = LateFeed::new(10_000, 3);
        assert!(f.is_late(10_001) && !f.is_late(10_000));
        for k in 0..5u64 {
            f.offer(42, 1, 1_000 * k, 1_000 * k + 20_000);
        }
        assert_eq!((f.offered(), f.dropped()), (5, 2));
        let mut out = Vec::new();
        assert_eq!(f.take(7, &mut out), 3);
        assert_eq!(
            out.iter().map(|r| r.target).collect::<Vec<_>>(),
            vec![0, 1_000, 2_000]
        );
        assert!(out
            .iter()
            .all(|r| r.tid == 42 && r.cpu == 1 && r.series == 7 && r.lateness() == 20_000));
        // Room again once taken; the ring wraps.
        f.offer(-1, 3, 9, 99);
        out.clear();
        assert_eq!(f.take(0, &mut out), 1);
        assert_eq!((out[0].tid, out[0].cpu, out[0].target), (-1, 3, 9));
    }

    #[test]
    fn a_reader_on_another_thread_sees_every_release_once() {
        let f = Arc::new(LateFeed::new(0, 64));
        let writer = {
            let f = f.clone();
            std::thread::spawn(move || {
                for k in 1..=20_000u64 {
                    f.offer(1, 0, k, k + 1);
                }
            })
        };
        let mut got = Vec::new();
        while !writer.is_finished() || got.len() as u64 + f.dropped() < 20_000 {
            f.take(0, &mut got);
        }
        writer.join().unwrap();
        f.take(0, &mut got);
        assert_eq!(got.len() as u64 + f.dropped(), 20_000);
        // Whatever was kept came out in order, each once, and intact.
        assert!(got.windows(2).all(|w| w[0].target < w[1].target));
        assert!(got.iter().all(|r| r.actual == r.target + 1));
    }
}
