//! The breath partner: a thread on another CPU that wakes a dispatch loop from its breather.
//!
//! A loop that never blocks by itself (releases closer than the kernel can wake it) must still
//! block now and then: RLIMIT_RTTIME and the watchdog count from its last block, and lower-priority
//! work on its CPU only runs then ([`crate::engine`]'s breathers). A timed sleep for that costs
//! far more than it asks for on a virtual machine: arming the timer and its expiry both go through
//! the host, so a 20 us sleep came back after 36-46 us at the median here (every release of a 10 us
//! plan inside it late). Woken by a thread already running on another CPU, the same block lasts
//! about 5 us at the median: no timer is armed, and the loop's CPU polls in idle (the run holds
//! `cpu_dma_latency` at 0), so the wake-up needs no interrupt. Measured 2026-11-30 with 3,000
//! blocks, FIFO 98 on CPU 1 and the waker on CPU 0 (`docs/benchmarks.md`).
//!
//! The loop makes no system call for its partner: each time it blocks it publishes when its next
//! breather is due ([`Breath::due_at`]), and whether it saw room for a timed one ([`Breath::room`]).
//! The partner sleeps on its own timer until [`STAND_BY_LEAD_NS`] before that instant, then, if the
//! loop has neither blocked since nor seen room, says it is ready and spins. The loop then blocks on
//! a futex with no timeout (arming one is the cost being avoided), only ever from that ready state.
//! The partner watches the loop's charged runtime (its `schedstat`: the kernel charges it as it
//! dequeues the loop), waits [`WAKE_AFTER_NS`] more for the loop's CPU to be in its idle loop, and
//! wakes it, repeating the wake until the kernel says it found the loop asleep. A stand-by the loop
//! did not use within [`STAND_BY_MAX_NS`] ends; the loop then keeps its timed sleep.
//!
//! The block still costs the loop 12-18 us here, more than the 10 us between two releases of a
//! dense plan: the release it blocked before came late by the loop's own doing, one a breather.
//! So the loop may hand the partner that release and the few after it ([`Relay`]): short actions
//! that any thread may fire (a mark, a datagram). The partner fires each at its instant while the
//! loop is not back; exactly one of the two fires each, decided on one word, and the loop returns
//! from the breather only once the partner is done with them. Such a loop blocks on its own timer
//! ([`Relay::back_in`]) and the partner makes no wake-up call: the call holds the partner for
//! 10-40 us whenever a kernel worker runs in the breather (the wake-up must interrupt it), and the
//! release that fell due inside it came late (every `dispatcher` release read in seven 10 us plan
//! runs, the eighteenth session). The timer's cost on a virtual machine is the loop's, whose
//! releases the partner fires meanwhile; a timer that ends before the loop has left its CPU is no
//! block, and the loop tries again (`timed_block`).

use punctual_rt::futex::{self, Scope};
use punctual_rt::SchedParams;
use punctual_time::clock::read_clock;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// How long before a breather is due the partner stands by.
pub const STAND_BY_LEAD_NS: u64 = 200_000;
/// The longest one stand-by spins without the loop blocking; the partner then rests as long.
pub const STAND_BY_MAX_NS: u64 = 2_000_000;
/// How long the partner waits after the kernel charged the loop's runtime (it is being dequeued)
/// before it wakes it: long enough for the loop's CPU to be in its idle loop, where a wake-up needs
/// no interrupt. One that finds the loop still switching out goes by an IPI, which took 20-30 us
/// here; the switch came 2-8 us after the charge in traced runs.
pub const WAKE_AFTER_NS: u64 = 5_000;
/// How long a partner with nothing due sleeps before it looks again (the loop's first due wakes
/// it before).
pub const IDLE_LOOK_NS: u64 = 1_000_000_000;
/// Without the loop's schedstat to watch: how long after the loop said it blocks.
pub const UNSEEN_WAKE_AFTER_NS: u64 = 12_000;
/// The longest the partner watches for the loop's dequeue before it wakes it anyway.
pub const DEQUEUE_WAIT_MAX_NS: u64 = 50_000;
/// A plan whose releases on a CPU come closer than this has no room for a timed breather
/// between two of them (20 us, the kernel's wake-up of 40-60 us here, and the shortest sleep
/// worth its system call): only such a dispatcher gets a partner. Others never use one, and a
/// partner's own timer wake-ups (8-25 us each here, at the loop's priority) fell on clients: in a
/// full run where every dispatcher had one waking every 100 ms, kurt-periodic's (c) rows read 46
/// `dispatcher` (7-10 before).
pub const DENSE_BELOW_NS: u64 = 100_000;

/// Releases the loop hands its partner for the breather it blocks in: `fire` fires the next one
/// (reading the loop's clock, so it never fires early) and returns the instant of the one after
/// (`None`: no more). The partner calls it from `at` (`CLOCK_MONOTONIC`) on, then from each instant
/// it returned, while the loop is not back, with what it did before ([`Look`]).
pub struct Relay<'f> {
    pub at: u64,
    pub fire: &'f mut (dyn FnMut(Look) -> Option<u64> + Send),
    /// How long the loop blocks on its own timer: the partner does not wake it.
    pub back_in: u64,
}

/// What the partner did before the look that found a release handed over due: for the record of
/// one that came late, whose thread (the one that had to run at the instant) is the partner's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Look {
    /// When the loop said it blocks (its clock, just before): one due before came to the partner
    /// late, by the loop's way into the breather; one due after was the partner's to fire on time.
    pub took: u64,
    /// Its clock read before the one that found the release due.
    pub last_read: u64,
    /// Its own work lay between the two reads (the firing of the release before): from
    /// `last_read` on it was not merely reading its clock.
    pub busy: bool,
}

/// How a breather went ([`Breath::breathe`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Breathed {
    /// When the wake-up that ended the block was due: when the partner sent it, or the end of the
    /// loop's own timer when it handed over releases (`None`: the partner was not ready, or the
    /// thread came back without having blocked: nothing was done that counts as a block).
    pub woke_at: Option<u64>,
    /// The partner fired at least one of the releases it was handed.
    pub relayed: bool,
}

/// What the dispatch loop tells and asks its partner. [`Partner`] is the real one; tests inject
/// others. The first two are plain stores: the loop calls them between releases.
pub trait Breath: Sync {
    /// The loop blocked: its next breather is due at `at` (`u64::MAX`: none).
    fn due_at(&self, at: u64);
    /// The loop saw room for a timed breather since it last blocked: the partner is not needed
    /// before it blocks again.
    fn room(&self);
    /// The partner spins ready: a breather now would be woken by it.
    fn ready(&self) -> bool;
    /// Block the calling thread until the partner wakes it; with `relay`, for its
    /// [`Relay::back_in`], the partner firing its releases meanwhile as their instants come.
    /// Returns only once the partner is done with `relay`.
    fn breathe(&self, relay: Option<Relay<'_>>) -> Breathed;
}

const IDLE: u32 = 0;
const READY: u32 = 1;
const ASLEEP: u32 = 2;

// The relay word: nothing handed over, releases handed over, the partner firing one, all fired.
const NO_RELAY: u32 = 0;
const OFFERED: u32 = 1;
const FIRING: u32 = 2;
const FIRED: u32 = 3;

/// The loop's [`Relay::fire`], its lifetime erased: only called between the relay word's
/// OFFERED -> FIRING and its move back to OFFERED or on to FIRED, and the loop leaves the breather
/// (ending the borrow) only after taking the word back from OFFERED or seeing FIRED.
struct RelayFn(*mut (dyn FnMut(Look) -> Option<u64> + Send + 'static));
// SAFETY: the closure is `Send`; the pointer is only dereferenced as described above, by one
// thread at a time.
unsafe impl Send for RelayFn {}

struct Words {
    /// When the loop's next breather is due (`u64::MAX`: none).
    due: AtomicU64,
    /// The loop saw room since it last blocked.
    roomy: AtomicBool,
    /// IDLE, READY (set by the partner, spinning) or ASLEEP (set by the loop, which waits on it).
    state: AtomicU32,
    /// 1 once the partner is to end.
    stop: AtomicU32,
    /// The futex word the partner sleeps on: moved on, and woken, by a stop and by the loop's
    /// first due.
    bell: AtomicU32,
    /// Breathers the partner ended (the kernel found the loop asleep).
    woken: AtomicU64,
    /// When the partner last called the kernel to wake the loop (its clock, before the call).
    woke_at: AtomicU64,
    /// The partner thread's id, once it runs (0 before).
    tid: AtomicI32,
    /// When the loop last said it blocks (its clock, read just before).
    asleep_at: AtomicU64,
    /// NO_RELAY, OFFERED (by the loop), FIRING (the partner won the next one) or FIRED (all).
    relay: AtomicU32,
    /// The instant of the first release handed over (`CLOCK_MONOTONIC`).
    relay_at: AtomicU64,
    relay_fn: Mutex<Option<RelayFn>>,
    /// Releases the partner fired.
    relayed: AtomicU64,
}

impl Words {
    fn new() -> Words {
        Words {
            due: AtomicU64::new(u64::MAX),
            roomy: AtomicBool::new(false),
            state: AtomicU32::new(IDLE),
            stop: AtomicU32::new(0),
            bell: AtomicU32::new(0),
            woken: AtomicU64::new(0),
            woke_at: AtomicU64::new(0),
            tid: AtomicI32::new(0),
            asleep_at: AtomicU64::new(0),
            relay: AtomicU32::new(NO_RELAY),
            relay_at: AtomicU64::new(0),
            relay_fn: Mutex::new(None),
            relayed: AtomicU64::new(0),
        }
    }

    /// Wake the partner from its sleep.
    fn ring(&self) {
        self.bell.fetch_add(1, Ordering::Release);
        futex::wake(&self.bell, 1, Scope::Private);
    }

    /// The loop hands over `r` before it blocks.
    fn offer(&self, r: Relay<'_>) {
        // SAFETY: only the lifetime is erased; see [`RelayFn`].
        let f: *mut (dyn FnMut(Look) -> Option<u64> + Send + 'static) = unsafe {
            std::mem::transmute::<
                *mut (dyn FnMut(Look) -> Option<u64> + Send + '_),
                *mut (dyn FnMut(Look) -> Option<u64> + Send),
            >(r.fire)
        };
        *self.relay_fn.lock().unwrap_or_else(|e| e.into_inner()) = Some(RelayFn(f));
        self.relay_at.store(r.at, Ordering::Relaxed);
        self.relay.store(OFFERED, Ordering::Release);
    }

    /// The loop takes back the releases the partner has not fired (once it is done with the one
    /// it may be firing): how many it fired.
    fn take_back(&self, before: u64) -> u64 {
        while let Err(FIRING) =
            self.relay
                .compare_exchange(OFFERED, NO_RELAY, Ordering::AcqRel, Ordering::Acquire)
        {
            std::hint::spin_loop();
        }
        self.relay.store(NO_RELAY, Ordering::Release);
        self.relayed.load(Ordering::Acquire) - before
    }

    /// The partner fires the next release handed over, unless the loop took them back: the
    /// instant of the one after (`None`: no more, or taken back).
    fn fire_relay(&self, look: Look) -> Option<u64> {
        self.relay
            .compare_exchange(OFFERED, FIRING, Ordering::AcqRel, Ordering::Acquire)
            .ok()?;
        let f = self
            .relay_fn
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map(|f| f.0);
        // SAFETY: the loop is inside `breathe` until it moved the word off OFFERED, which it
        // cannot while it reads FIRING (see [`RelayFn`]).
        let next = f.and_then(|f| unsafe { (*f)(look) });
        self.relayed.fetch_add(1, Ordering::Release);
        let word = if next.is_some() { OFFERED } else { FIRED };
        self.relay.store(word, Ordering::Release);
        next
    }
}

/// The partner's side of the releases handed over for one breather: the instant of the next,
/// and what it did since its last look at the clock.
struct Relaying<'w> {
    w: &'w Words,
    next: std::cell::Cell<Option<u64>>,
    look: std::cell::Cell<Look>,
}

impl<'w> Relaying<'w> {
    /// The releases the loop handed `w` for this breather, if any.
    fn new(w: &'w Words) -> Relaying<'w> {
        let next = (w.relay.load(Ordering::Acquire) == OFFERED)
            .then(|| w.relay_at.load(Ordering::Relaxed));
        Relaying {
            w,
            next: std::cell::Cell::new(next),
            look: std::cell::Cell::new(Look {
                took: w.asleep_at.load(Ordering::Acquire),
                last_read: now(),
                busy: false,
            }),
        }
    }

    /// Fire every release handed over whose instant passed, in order. All of them, not one: a
    /// look may come long after the last (the seventeenth session's A/B: two were due at the look
    /// before a wake-up call, and the second was fired 18 us late, after it).
    fn fire_due(&self) {
        while let Some(at) = self.next.get() {
            let t = now();
            if t < at {
                self.look.set(Look {
                    last_read: t,
                    busy: false,
                    ..self.look.get()
                });
                return;
            }
            self.next.set(self.w.fire_relay(self.look.get()));
            self.look.set(Look {
                last_read: t,
                busy: true,
                ..self.look.get()
            });
        }
    }
}

/// A partner thread for one dispatch loop, on CPUs other than the loop's. Dropping it ends the
/// thread.
pub struct Partner {
    words: Arc<Words>,
    thread: Option<JoinHandle<()>>,
}

impl Partner {
    /// Start a partner for the calling thread (the loop, on `loop_cpu`; the partner thread is
    /// named `punctual-bN` after it) on `cpus` (which must not hold the loop's CPU), in the loop's
    /// scheduling class and priority `sched` (a refusal leaves it in the normal class). `None`
    /// when no CPU is given or the thread could not be started: the loop then breathes on its
    /// timer alone.
    pub fn start(cpus: &[usize], sched: SchedParams, loop_cpu: usize) -> Option<Partner> {
        if cpus.is_empty() {
            return None;
        }
        let words = Arc::new(Words::new());
        let w = words.clone();
        // The calling thread is the loop: the partner watches its charged runtime.
        // SAFETY: gettid has no arguments and cannot fail.
        let tid = unsafe { libc::gettid() };
        let stat = std::fs::File::open(format!("/proc/self/task/{tid}/schedstat")).ok();
        let cpus = cpus.to_vec();
        let thread = std::thread::Builder::new()
            .name(format!("punctual-b{loop_cpu}"))
            .stack_size(64 << 10)
            .spawn(move || {
                // One of punctual's own: `--explain` reads its turns on a CPU as the dispatcher's.
                let (me, _) = punctual_explain::here();
                punctual_explain::own_thread(me);
                w.tid.store(me, Ordering::Release);
                let _ = punctual_rt::affinity::set(0, &cpus);
                if sched.policy.is_realtime() {
                    let _ = punctual_rt::sched::set_current(sched);
                }
                serve(&w, stat.as_ref());
            })
            .ok()?;
        Some(Partner {
            words,
            thread: Some(thread),
        })
    }

    /// Breathers this partner ended.
    pub fn woken(&self) -> u64 {
        self.words.woken.load(Ordering::Relaxed)
    }

    /// Releases this partner fired for its loop.
    pub fn relayed(&self) -> u64 {
        self.words.relayed.load(Ordering::Relaxed)
    }
}

impl Breath for Partner {
    fn due_at(&self, at: u64) {
        self.words.roomy.store(false, Ordering::Relaxed);
        let before = self.words.due.swap(at, Ordering::AcqRel);
        // The first due (the loop's start) ends the partner's wait for one: a partner started
        // before it would otherwise sleep out its whole look and miss the first breather (b60's
        // 10 us plan: the first came at twice overdue, 1 s into the run, and a kernel worker
        // waiting since 57 ms was run over the loop by the fair server). A system call once.
        if before == u64::MAX && at != u64::MAX {
            self.words.ring();
        }
    }

    fn room(&self) {
        self.words.roomy.store(true, Ordering::Relaxed);
    }

    fn ready(&self) -> bool {
        self.words.state.load(Ordering::Acquire) == READY
    }

    fn breathe(&self, relay: Option<Relay<'_>>) -> Breathed {
        let w = &self.words;
        let st = &w.state;
        let handed = relay.is_some();
        let timeout = relay.as_ref().map(|r| r.back_in);
        let before = w.relayed.load(Ordering::Acquire);
        // Handed over before the word says asleep: the partner looks at it only after.
        if let Some(r) = relay {
            w.offer(r);
        }
        w.asleep_at.store(now(), Ordering::Relaxed);
        if st
            .compare_exchange(READY, ASLEEP, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            // Not ready: the partner never looks at the release.
            w.relay.store(NO_RELAY, Ordering::Release);
            return Breathed::default();
        }
        // Only the loop moves the word off ASLEEP, so this returns once the partner woke it (or
        // on a signal, which the call's result tells). No switch count around it: each
        // `getrusage` is a system call, which costs microseconds on a virtual machine, and the
        // breather is already a release late here.
        let woke_at = match timeout {
            Some(t) => timed_block(st, t),
            None => futex::wait(st, ASLEEP, None, Scope::Private)
                .then(|| w.woke_at.load(Ordering::Acquire)),
        };
        st.store(IDLE, Ordering::Release);
        Breathed {
            woke_at,
            relayed: handed && w.take_back(before) > 0,
        }
    }
}

/// A timed block of the calling thread on `st` (ASLEEP) for `t`, up to [`BLOCK_TRIES`] times,
/// until one leaves the CPU: when its timer was due (`None`: none did).
/// A timer that ends before the thread is off its CPU ends no block (the wake-up finds it still
/// running): nothing of lower priority ran, and RLIMIT_RTTIME counts on. RLIMIT_RTTIME stopped two
/// of ten 10 us plan runs with 20 us blocks; in both traces every block from some point on ended
/// so (the kernel's timer wake-up logged, no switch) until SIGXCPU 4.5 s later (eighteenth
/// session). The kernel clock's `pause` makes the same check ([`punctual_time::clock::until_switched`]);
/// here the block must stay the partner's futex wait. Two reads of the thread's switch count cost a
/// few microseconds, which a breather whose releases the partner fires can spare.
fn timed_block(st: &AtomicU32, t: u64) -> Option<u64> {
    retry_block(
        t,
        |t| {
            futex::wait(st, ASLEEP, Some(t), Scope::Private);
        },
        punctual_time::clock::voluntary_switches,
    )
}

/// [`timed_block`]'s tries: `wait` blocks for the time it is given, `switches` counts the
/// thread's voluntary switches.
fn retry_block(t: u64, mut wait: impl FnMut(u64), switches: impl Fn() -> u64) -> Option<u64> {
    let mut asleep = 0;
    let tries = std::iter::repeat_n(t, BLOCK_TRIES as usize);
    punctual_time::clock::until_switched(
        tries,
        |t| {
            asleep = now();
            wait(t);
        },
        switches,
    )
    .map(|t| asleep + t)
}

/// How many timed blocks a breather tries before it gives up ([`timed_block`]).
pub const BLOCK_TRIES: u32 = 4;

impl Drop for Partner {
    fn drop(&mut self) {
        self.words.stop.store(1, Ordering::Release);
        self.words.ring();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Where the partner of the loop on `cpu` runs: off the loop's CPU always, and off the CPUs of
/// each of `avoid` (clients, other dispatchers: its stand-by spins at the loop's priority) while
/// any other CPU remains, the first kept off longest. `None` on a machine of one CPU.
pub fn partner_cpus(cpu: usize, avoid: &[&[usize]]) -> Option<Vec<usize>> {
    let own = [cpu];
    let tiers: Vec<&[usize]> = std::iter::once(&own[..])
        .chain(avoid.iter().copied())
        .collect();
    punctual_rt::housekeeping_cpus(&tiers).filter(|c| !c.contains(&cpu))
}

fn now() -> u64 {
    read_clock(libc::CLOCK_MONOTONIC)
}

/// The partner thread: sleep on its own timer until a breather of the loop's is near, then stand
/// by and wake the loop from it.
fn serve(w: &Words, sched: Option<&std::fs::File>) {
    while w.stop.load(Ordering::Acquire) == 0 {
        // Sleeps end at their time, at a stop, or when the loop tells its first due: the bell
        // read before the due, so a ring between the two ends the sleep at once.
        let bell = w.bell.load(Ordering::Acquire);
        let sleep_until = |t: u64| {
            let d = t.saturating_sub(now());
            if d > 0 {
                futex::wait(&w.bell, bell, Some(d), Scope::Private);
            }
        };
        let due = w.due.load(Ordering::Acquire);
        let t = now();
        let from = due.saturating_sub(STAND_BY_LEAD_NS);
        if due == u64::MAX || t < from {
            // Nothing due yet: until the loop tells one (or a look now and then), else until
            // the stand-by (a loop that blocks by itself moves it on).
            sleep_until(if due == u64::MAX {
                t + IDLE_LOOK_NS
            } else {
                from
            });
            continue;
        }
        if w.roomy.load(Ordering::Relaxed) {
            // The loop will breathe in its room, and blocking there publishes a new due.
            sleep_until(t + STAND_BY_MAX_NS);
            continue;
        }
        if !stand_by(w, sched, due) {
            sleep_until(now() + STAND_BY_MAX_NS);
        }
    }
}

/// The runtime the kernel charged the task of `f` (its `schedstat`, first field, ns). Read without
/// allocating: about 1 us here.
fn runtime(f: &std::fs::File) -> Option<u64> {
    use std::os::unix::fs::FileExt;
    let mut buf = [0u8; 96];
    let n = f.read_at(&mut buf, 0).ok()?;
    let field = buf[..n].split(|&b| b == b' ').next()?;
    std::str::from_utf8(field).ok()?.trim().parse().ok()
}

/// One stand-by for the breather due at `due`: ready until the loop blocks on it (then wake it,
/// `true`), blocks by itself (a new due, `true`), or [`STAND_BY_MAX_NS`] passed (`false`).
/// `sched`: the loop thread's `schedstat`, whose charged runtime says when it left its CPU.
fn stand_by(w: &Words, sched: Option<&std::fs::File>, due: u64) -> bool {
    let st = &w.state;
    if st
        .compare_exchange(IDLE, READY, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        return true;
    }
    let since = now();
    // The loop's runtime as charged while it still runs: the kernel charges it again as it
    // dequeues the loop. (Read only once the loop said it blocks, that charge was often already
    // made, and the wait for it ran out: 1 breather in 3 lasted 50 us more, b60 and after.)
    let mut charged = None;
    loop {
        match st.load(Ordering::Acquire) {
            ASLEEP => break,
            // The loop blocked and is back already, before this look: one that handed over
            // releases blocks on its own timer, which may end first (a partner held by a tick
            // or the host). Nothing is left to do; waiting for the word to leave READY would
            // spin forever (twice in ten 10 us plan runs the partner spun until RLIMIT_RTTIME
            // stopped the run, eighteenth session).
            IDLE => return true,
            _ => {}
        }
        charged = sched.and_then(runtime);
        let over = now().saturating_sub(since) > STAND_BY_MAX_NS;
        let moved = w.due.load(Ordering::Acquire) != due;
        if over || moved || w.stop.load(Ordering::Acquire) != 0 {
            // Whoever wins the word decides: the loop asleep on it, or the stand-by ending.
            if st
                .compare_exchange(READY, IDLE, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                return moved;
            }
        }
        std::hint::spin_loop();
    }
    wake_when_off_cpu(w, sched, charged);
    true
}

/// The loop said it blocks: wake it once its CPU is in the idle loop (`charged`: its runtime as
/// last read before it said so). One that handed over releases comes back on its own timer: fire
/// them as their instants come while the loop is not back, with no wake-up call.
fn wake_when_off_cpu(w: &Words, sched: Option<&std::fs::File>, charged: Option<u64>) {
    let relay = Relaying::new(w);
    if relay.next.get().is_some() {
        let from = now();
        // Until the loop takes them back (a host that holds the loop's CPU holds it longest).
        while w.relay.load(Ordering::Acquire) == OFFERED
            && now().saturating_sub(from) <= STAND_BY_MAX_NS
        {
            relay.fire_due();
            std::hint::spin_loop();
        }
        return;
    }
    let st = &w.state;
    let asked = now();
    let mut after = WAKE_AFTER_NS;
    match sched.filter(|_| charged.is_some()) {
        Some(f) => {
            while runtime(f) == charged && now().saturating_sub(asked) <= DEQUEUE_WAIT_MAX_NS {
                std::hint::spin_loop();
            }
        }
        None => after = UNSEEN_WAKE_AFTER_NS,
    }
    let from = now();
    while now().saturating_sub(from) < after {
        std::hint::spin_loop();
    }
    // A wake that finds nobody queued came before the loop slept: try again until one does, or
    // the loop left the wait by itself (a signal).
    while st.load(Ordering::Acquire) == ASLEEP {
        w.woke_at.store(now(), Ordering::Release);
        if futex::wake(st, 1, Scope::Private) == 1 {
            w.woken.fetch_add(1, Ordering::Relaxed);
            break;
        }
        std::hint::spin_loop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// The tests' partners run in the normal class (no privileges needed).
    const NORMAL: SchedParams = SchedParams {
        policy: punctual_rt::Policy::Other,
        priority: 0,
    };

    /// Wait (bounded) until the partner stands by.
    fn until_ready(p: &Partner) {
        let deadline = now() + 10_000_000_000;
        while !p.ready() {
            assert!(now() < deadline, "the partner never stood by");
            std::thread::sleep(Duration::from_micros(100));
        }
    }

    #[test]
    fn every_breather_a_ready_partner_serves_is_a_real_block_it_ends() {
        let p = Partner::start(&punctual_rt::online_cpus(), NORMAL, 0).unwrap();
        let n = 50;
        let mut served = 0;
        p.due_at(now());
        while served < n {
            until_ready(&p);
            // On a loaded machine the stand-by may end between the two calls.
            if p.breathe(None).woke_at.is_some() {
                served += 1;
                p.due_at(now());
            }
        }
        // The partner counts a wake-up once the kernel said so, which may be after the loop ran.
        let deadline = now() + 10_000_000_000;
        while p.woken() < n {
            assert!(now() < deadline, "woken {} of {n}", p.woken());
            std::thread::sleep(Duration::from_micros(100));
        }
        assert_eq!(p.woken(), n);
    }

    #[test]
    fn a_partner_stands_by_only_near_a_breather_due_without_room_and_not_for_ever() {
        let p = Partner::start(&punctual_rt::online_cpus(), NORMAL, 0).unwrap();
        // Nothing due: not ready, and the loop must not block.
        assert!(!p.ready());
        assert_eq!(p.breathe(None), Breathed::default());
        // Due in 2 s: nothing to stand by for yet. Then room seen: nothing past it either.
        p.due_at(now() + 2_000_000_000);
        std::thread::sleep(Duration::from_millis(300));
        assert!(!p.ready());
        p.room();
        std::thread::sleep(Duration::from_millis(2_200));
        assert!(!p.ready());
        // Due now without room: it stands by, and ends the stand-by the loop does not use.
        p.due_at(now());
        until_ready(&p);
        let t0 = now();
        while p.ready() {
            assert!(now() - t0 < 10_000_000_000, "the partner stood by for ever");
            std::thread::sleep(Duration::from_micros(200));
        }
        assert_eq!(p.woken(), 0);
    }

    /// The partner started before the loop told its first due (as `run` starts it): that due
    /// wakes it, rather than the partner sleeping out its idle look ([`IDLE_LOOK_NS`]).
    #[test]
    fn the_first_due_wakes_a_partner_started_before_it() {
        let p = Partner::start(&punctual_rt::online_cpus(), NORMAL, 0).unwrap();
        // Let it reach its sleep with nothing due.
        let deadline = now() + 10_000_000_000;
        while p.words.tid.load(Ordering::Acquire) == 0 {
            assert!(now() < deadline, "the partner never ran");
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_millis(50));
        let told = now();
        p.due_at(told);
        while !p.ready() {
            assert!(
                now() - told < IDLE_LOOK_NS / 2,
                "the partner slept on after the first due"
            );
            std::thread::sleep(Duration::from_micros(100));
        }
    }

    #[test]
    fn the_partner_thread_is_declared_punctuals_own_for_explain() {
        let p = Partner::start(&punctual_rt::online_cpus(), NORMAL, 0).unwrap();
        let deadline = now() + 10_000_000_000;
        let tid = loop {
            match p.words.tid.load(Ordering::Acquire) {
                0 => assert!(now() < deadline, "the partner never ran"),
                t => break t,
            }
            std::thread::sleep(Duration::from_millis(1));
        };
        assert!(punctual_explain::record::own_threads().contains(&tid));
    }

    /// A release handed over is fired exactly once: by the partner, on its thread, when its
    /// instant passed before the loop was back; else by nobody (the loop takes it back).
    #[test]
    fn a_release_handed_over_is_fired_by_the_partner_only_when_due_before_the_loop_is_back() {
        let p = Partner::start(&punctual_rt::online_cpus(), NORMAL, 0).unwrap();
        // SAFETY: gettid has no arguments and cannot fail.
        let me = unsafe { libc::gettid() };
        let mut fired_on: Vec<(bool, Option<libc::pid_t>)> = Vec::new();
        let mut served = 0;
        p.due_at(now());
        while served < 20 {
            until_ready(&p);
            // Every other one due already; the others in ten seconds.
            let past = served % 2 == 0;
            let at = if past { 0 } else { now() + 10_000_000_000 };
            let mut tid = None;
            let mut fire = |_: Look| {
                // SAFETY: as above.
                tid = Some(unsafe { libc::gettid() });
                None
            };
            let asked = now();
            let woken = p.woken();
            let b = p.breathe(Some(Relay {
                at,
                fire: &mut fire,
                back_in: 50_000,
            }));
            let back = now();
            let Some(woke_at) = b.woke_at else {
                // The stand-by ended between the two calls: nothing was fired.
                assert!(!b.relayed && tid.is_none(), "{b:?} {tid:?}");
                continue;
            };
            assert_eq!(b.relayed, tid.is_some(), "{b:?} {tid:?}");
            // Firing for the loop, the partner does not wake it: its own timer does.
            assert!(
                woke_at >= asked + 50_000 && back >= woke_at,
                "due {} ns after it blocked, back {} ns after",
                woke_at - asked,
                back - asked
            );
            assert_eq!(p.woken(), woken, "the partner made a wake-up call");
            fired_on.push((past, tid));
            served += 1;
            p.due_at(now());
        }
        for (k, &(past, tid)) in fired_on.iter().enumerate() {
            if past {
                let tid = tid.unwrap_or_else(|| panic!("breather {k}: a due release not fired"));
                assert_ne!(tid, me, "breather {k}: fired on the loop's thread");
            } else {
                assert_eq!(tid, None, "breather {k}: fired ten seconds early");
            }
        }
        assert_eq!(p.relayed(), 10);
    }

    /// Of releases handed over together, the partner fires those due before the loop is back, in
    /// order, and the loop takes back the rest.
    #[test]
    fn the_partner_fires_the_releases_handed_over_that_are_due_and_leaves_the_rest() {
        let p = Partner::start(&punctual_rt::online_cpus(), NORMAL, 0).unwrap();
        let mut served = 0;
        p.due_at(now());
        while served < 10 {
            until_ready(&p);
            // Two due already, then one in ten seconds.
            let later = now() + 10_000_000_000;
            let ats = [0, 1, later];
            let mut fired = Vec::new();
            let mut fire = |_: Look| {
                fired.push(ats[fired.len()]);
                ats.get(fired.len()).copied()
            };
            let b = p.breathe(Some(Relay {
                at: ats[0],
                fire: &mut fire,
                back_in: 50_000,
            }));
            if b.woke_at.is_none() {
                assert!(!b.relayed && fired.is_empty(), "{b:?} {fired:?}");
                continue;
            }
            assert!(b.relayed);
            assert_eq!(fired, [0, 1]);
            served += 1;
            p.due_at(now());
        }
        assert_eq!(p.relayed(), 20);
    }

    /// One look fires every release handed over that is due, in order, and leaves the next; each
    /// is told what the partner did since its previous read of the clock.
    #[test]
    fn one_look_fires_every_release_already_due() {
        let w = Words::new();
        let later = now() + 10_000_000_000;
        let ats = [0, 1, 2, later];
        let mut fired = Vec::new();
        {
            let mut fire = |look: Look| {
                fired.push((ats[fired.len()], look));
                ats.get(fired.len()).copied()
            };
            w.offer(Relay {
                at: 0,
                fire: &mut fire,
                back_in: 0,
            });
            let r = Relaying::new(&w);
            let start = r.look.get();
            assert!(!start.busy);
            r.fire_due();
            assert_eq!(r.next.get(), Some(later));
            assert_eq!(w.take_back(0), 3);
            // The look that found the next one not due yet is a plain read.
            let end = r.look.get();
            assert!(!end.busy && end.last_read >= start.last_read, "{end:?}");
        }
        let at: Vec<u64> = fired.iter().map(|f| f.0).collect();
        assert_eq!(at, [0, 1, 2]);
        // The first came after a plain read; each after it, after the partner fired the one
        // before, read in order.
        assert!(!fired[0].1.busy, "{:?}", fired[0]);
        for k in 1..3 {
            assert!(fired[k].1.busy, "{:?}", fired[k]);
            assert!(fired[k].1.last_read >= fired[k - 1].1.last_read);
        }
        // Taken back: nothing more is fired.
        let r = Relaying::new(&w);
        assert_eq!(r.next.get(), None);
        r.next.set(Some(0));
        r.fire_due();
        assert_eq!(r.next.get(), None);
        assert_eq!(w.relayed.load(Ordering::Relaxed), 3);
    }

    /// A loop that blocked and came back before its partner looked (its own timer ended the
    /// block) ends the stand-by: the partner does not spin on, waiting for a word only it could
    /// have moved.
    #[test]
    fn a_stand_by_the_loop_came_back_from_unseen_ends() {
        let w = Arc::new(Words::new());
        // A stand-by ends by itself after 2 ms: on a loaded machine the test may look too late,
        // and then tries again.
        for _ in 0..50 {
            w.state.store(IDLE, Ordering::Release);
            w.due.store(now(), Ordering::Release);
            let due = w.due.load(Ordering::Acquire);
            let (tx, rx) = std::sync::mpsc::channel();
            let p = w.clone();
            std::thread::spawn(move || {
                let _ = tx.send(stand_by(&p, None, due));
            });
            let deadline = now() + 10_000_000_000;
            // Standing by, or already over by itself (then try again).
            let ready = loop {
                if w.state.load(Ordering::Acquire) == READY {
                    break true;
                }
                if rx.try_recv().is_ok() {
                    break false;
                }
                assert!(now() < deadline, "the partner never stood by");
                std::thread::yield_now();
            };
            if !ready {
                continue;
            }
            // The loop blocks and is back, unseen: READY -> ASLEEP -> IDLE between two looks.
            w.state.store(IDLE, Ordering::Release);
            w.due.store(due + 1, Ordering::Release);
            let ended = rx.recv_timeout(Duration::from_secs(10));
            if ended == Ok(false) {
                // It had ended by itself first.
                continue;
            }
            // Whatever happens, leave no thread spinning behind the test.
            w.stop.store(1, Ordering::Release);
            assert_eq!(ended, Ok(true), "the stand-by did not end");
            return;
        }
        panic!("never caught the partner standing by");
    }

    /// Every breather whose releases the partner fires, reported as a block, switched the loop
    /// out.
    #[test]
    fn a_timed_breather_reported_as_a_block_switched_the_thread_out() {
        let p = Partner::start(&punctual_rt::online_cpus(), NORMAL, 0).unwrap();
        let mut blocks = 0;
        p.due_at(now());
        for k in 0..20 {
            until_ready(&p);
            let mut fire = |_: Look| None;
            let before = punctual_time::clock::voluntary_switches();
            let b = p.breathe(Some(Relay {
                at: now() + 10_000_000_000,
                fire: &mut fire,
                back_in: 50_000,
            }));
            if b.woke_at.is_some() {
                let after = punctual_time::clock::voluntary_switches();
                assert!(after > before, "breather {k}: reported a block without one");
                blocks += 1;
            }
            p.due_at(now());
        }
        // A stand-by that ended between the calls reports none.
        assert!(blocks >= 10, "{blocks} blocks of 20");
    }

    /// A timed block whose timer ended before the thread left its CPU is tried again, and none of
    /// [`BLOCK_TRIES`] that left it is no block.
    #[test]
    fn a_timed_block_that_did_not_leave_the_cpu_is_tried_again_longer() {
        let asked = std::cell::RefCell::new(Vec::new());
        let switched_on = |n: usize| {
            let asked = &asked;
            move || {
                let k = asked.borrow().len();
                // The count before and after each wait: it moves in the n-th wait.
                u64::from(k >= n)
            }
        };
        let t0 = now();
        let at = retry_block(20_000, |t| asked.borrow_mut().push(t), switched_on(3));
        assert_eq!(*asked.borrow(), [20_000, 20_000, 20_000]);
        let at = at.expect("the third blocked");
        assert!(at >= t0 + 20_000, "due {} ns after the first try", at - t0);
        asked.borrow_mut().clear();
        let none = retry_block(20_000, |t| asked.borrow_mut().push(t), || 0);
        assert_eq!(none, None);
        assert_eq!(asked.borrow().len(), BLOCK_TRIES as usize);
    }

    #[test]
    fn no_cpu_no_partner() {
        assert!(Partner::start(&[], NORMAL, 0).is_none());
    }
}
