//! A per-CPU event ring made of fixed-size chunks taken from a shared pool.
//!
//! Under `mlockall(MCL_FUTURE)` every byte a process maps is faulted in and locked inside the
//! system call that maps it, and on a kernel without preemption that call holds its CPU. A
//! `VecDeque` that doubles does so in one call: the drain's `mprotect`, `mmap` and `mremap` of 0.3
//! to 6 MB took 0.2 to 17 ms while a row ran, and `--explain` saw it hold a client's CPU 81 us to
//! 1.39 ms. Here the memory is taken at the start ([`ChunkPool::reserve`]), a chunk never grows,
//! and a chunk emptied at the front goes back to the pool; beyond the reserve a ring grows by one
//! chunk (48 KiB) at a time.

use crate::event::Event;
use std::collections::VecDeque;

/// Events per chunk: 48 KiB of [`Event`]s, below glibc's `mmap` threshold, so a chunk beyond the
/// reserve extends the heap by a few pages rather than mapping a region of its own.
pub const CHUNK: usize = 1024;

/// Chunks not in use, shared by the rings of one capture.
#[derive(Debug, Default)]
pub struct ChunkPool {
    free: Vec<Vec<Event>>,
}

impl ChunkPool {
    /// A pool holding room for at least `events` events, allocated now.
    pub fn reserve(events: usize) -> ChunkPool {
        let n = events.div_ceil(CHUNK);
        ChunkPool {
            free: (0..n).map(|_| Vec::with_capacity(CHUNK)).collect(),
        }
    }

    /// Chunks waiting in the pool.
    pub fn free_chunks(&self) -> usize {
        self.free.len()
    }

    fn take(&mut self) -> Vec<Event> {
        self.free.pop().unwrap_or_else(|| Vec::with_capacity(CHUNK))
    }

    fn give(&mut self, mut chunk: Vec<Event>) {
        chunk.clear();
        self.free.push(chunk);
    }
}

/// Events of one CPU in time order: chunks of [`CHUNK`] events, the first read from `head`.
#[derive(Debug, Default)]
pub struct ChunkRing {
    chunks: VecDeque<Vec<Event>>,
    head: usize,
    len: usize,
}

impl ChunkRing {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Add an event; pages of one CPU arrive in order, and an event older than the newest held
    /// (a clock step) goes in its place.
    pub fn push(&mut self, e: Event, pool: &mut ChunkPool) {
        let mut later = Vec::new();
        while self.back().is_some_and(|b| b.ts > e.ts) {
            later.extend(self.pop_back(pool));
        }
        self.push_back(e, pool);
        for x in later.into_iter().rev() {
            self.push_back(x, pool);
        }
    }

    fn back(&self) -> Option<&Event> {
        self.chunks.back().and_then(|c| c.last())
    }

    fn push_back(&mut self, e: Event, pool: &mut ChunkPool) {
        if self.chunks.back().is_none_or(|c| c.len() == CHUNK) {
            self.chunks.push_back(pool.take());
        }
        self.chunks.back_mut().expect("a chunk").push(e);
        self.len += 1;
    }

    fn pop_back(&mut self, pool: &mut ChunkPool) -> Option<Event> {
        if self.len == 0 {
            return None;
        }
        let last = self.chunks.back_mut()?;
        let e = last.pop()?;
        self.len -= 1;
        if self.len == 0 {
            self.clear(pool);
        } else if last.is_empty() {
            let c = self.chunks.pop_back().expect("a chunk");
            pool.give(c);
        }
        Some(e)
    }

    /// Remove the oldest event.
    pub fn pop_front(&mut self, pool: &mut ChunkPool) -> Option<Event> {
        let first = self.chunks.front()?;
        let e = *first.get(self.head)?;
        self.head += 1;
        self.len -= 1;
        if self.head == first.len() {
            let c = self.chunks.pop_front().expect("a chunk");
            pool.give(c);
            self.head = 0;
        }
        Some(e)
    }

    /// Remove the events before `at`; returns how many.
    pub fn forget_before(&mut self, at: u64, pool: &mut ChunkPool) -> usize {
        let mut gone = 0;
        while let Some(first) = self.chunks.front() {
            let n = first[self.head..].partition_point(|e| e.ts < at);
            gone += n;
            self.len -= n;
            if self.head + n < first.len() {
                self.head += n;
                break;
            }
            let c = self.chunks.pop_front().expect("a chunk");
            pool.give(c);
            self.head = 0;
        }
        gone
    }

    fn clear(&mut self, pool: &mut ChunkPool) {
        for c in self.chunks.drain(..) {
            pool.give(c);
        }
        self.head = 0;
        self.len = 0;
    }

    pub fn iter(&self) -> impl Iterator<Item = &Event> {
        self.chunks
            .iter()
            .enumerate()
            .flat_map(|(i, c)| &c[if i == 0 { self.head } else { 0 }..])
    }

    /// The events in order, in one vector (the chunks go back to the pool).
    pub fn take_all(&mut self, pool: &mut ChunkPool) -> Vec<Event> {
        let mut v = Vec::with_capacity(self.len);
        v.extend(self.iter().copied());
        self.clear(pool);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::EventKind;
    use proptest::prelude::*;

    fn ev(ts: u64) -> Event {
        Event {
            ts,
            cpu: 0,
            kind: EventKind::IrqEntry { irq: 1 },
        }
    }

    fn stamps(r: &ChunkRing) -> Vec<u64> {
        r.iter().map(|e| e.ts).collect()
    }

    #[test]
    fn a_reserved_pool_feeds_the_rings_without_allocating_more_chunks() {
        let mut pool = ChunkPool::reserve(3 * CHUNK);
        assert_eq!(pool.free_chunks(), 3);
        let mut r = ChunkRing::default();
        for t in 0..(3 * CHUNK) as u64 {
            r.push(ev(t), &mut pool);
        }
        assert_eq!((r.len(), pool.free_chunks()), (3 * CHUNK, 0));
        // Emptied chunks go back and are taken again: a ring at its cap turns over in place.
        for t in 0..(5 * CHUNK) as u64 {
            r.pop_front(&mut pool);
            r.push(ev(3 * CHUNK as u64 + t), &mut pool);
            assert!(r.chunks.len() <= 4 && r.chunks.len() + pool.free_chunks() <= 4);
        }
        assert_eq!(r.len(), 3 * CHUNK);
        assert_eq!(r.iter().next().unwrap().ts, 5 * CHUNK as u64);
        let all = r.take_all(&mut pool);
        assert_eq!(all.len(), 3 * CHUNK);
        assert!(all.windows(2).all(|w| w[0].ts + 1 == w[1].ts));
        assert!(r.is_empty() && pool.free_chunks() >= 3);
    }

    #[test]
    fn an_event_older_than_the_newest_goes_in_its_place_across_chunks() {
        let mut pool = ChunkPool::default();
        let mut r = ChunkRing::default();
        for t in 0..CHUNK as u64 + 3 {
            r.push(ev(10 * t), &mut pool);
        }
        r.push(ev(10 * (CHUNK as u64 - 2) + 5), &mut pool);
        let s = stamps(&r);
        assert_eq!(s.len(), CHUNK + 4);
        assert!(s.windows(2).all(|w| w[0] <= w[1]), "out of order");
    }

    proptest! {
        /// Against a sorted vector: pushes (in and out of order), pops and forgets keep the same
        /// events in the same order, and every chunk ends up in the ring or the pool.
        #[test]
        fn a_ring_holds_what_a_sorted_vector_would(
            ops in prop::collection::vec((0u8..4, 0u64..5_000), 1..3_000)
        ) {
            let mut pool = ChunkPool::reserve(2 * CHUNK);
            let mut r = ChunkRing::default();
            let mut model: Vec<u64> = Vec::new();
            let mut last = 0u64;
            for (op, x) in ops {
                match op {
                    0 | 1 => {
                        // Mostly in order, now and then a little back.
                        let t = if op == 0 { last + x % 7 } else { last.saturating_sub(x % 50) };
                        last = last.max(t);
                        r.push(ev(t), &mut pool);
                        let at = model.partition_point(|&m| m <= t);
                        model.insert(at, t);
                    }
                    2 => {
                        let got = r.pop_front(&mut pool).map(|e| e.ts);
                        let want = (!model.is_empty()).then(|| model.remove(0));
                        prop_assert_eq!(got, want);
                    }
                    _ => {
                        let at = last.saturating_sub(x % 300);
                        let n = r.forget_before(at, &mut pool);
                        let keep = model.partition_point(|&m| m < at);
                        model.drain(..keep);
                        prop_assert_eq!(n, keep);
                    }
                }
                prop_assert_eq!(r.len(), model.len());
            }
            prop_assert_eq!(stamps(&r), model);
        }
    }
}
