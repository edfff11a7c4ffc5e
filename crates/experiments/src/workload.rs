//! Activity for the experiments to trace, as named threads of this process (the trace finds them by
//! name): the kinds of kernel work KURT's Table 4.3 lists (console, loopback network, timers, memory
//! mapping, scheduling; the disk comes from `punctual-load`'s `io` load), and Etsion's mixed desktop
//! (an interactive task, a video pipeline with a display server, a game, CPU-bound tasks).
//!
//! Every generator is bounded: it stops when the shared flag is set, and network traffic stays on
//! the loopback interface.

use std::io::{Read, Write};
use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Threads that run until [`Generators::stop`].
/// Every generator thread's name starts with this: what a trace counts as the activity's own.
pub const PREFIX: &str = "pt-";

pub struct Generators {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
    /// Every thread pinned to this CPU alone.
    cpu: Option<usize>,
}

impl Default for Generators {
    fn default() -> Self {
        Self::new()
    }
}

impl Generators {
    pub fn new() -> Self {
        Generators {
            stop: Arc::new(AtomicBool::new(false)),
            threads: Vec::new(),
            cpu: None,
        }
    }

    /// Generators whose threads all run on `cpu` alone (the seeds' uniprocessors).
    pub fn on_cpu(cpu: usize) -> Self {
        Generators {
            cpu: Some(cpu),
            ..Self::new()
        }
    }

    /// Start a thread named `name` (its kernel task name, at most 15 bytes).
    pub fn spawn(&mut self, name: &str, body: impl FnOnce(&AtomicBool) + Send + 'static) {
        let stop = self.stop.clone();
        let cpu = self.cpu;
        let h = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                if let Some(c) = cpu {
                    pin(c);
                }
                body(&stop)
            })
            .expect("spawning a generator thread");
        self.threads.push(h);
    }

    pub fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads {
            let _ = t.join();
        }
    }
}

/// Spin for about `ns` of CPU time, returning a value so the work is not optimised away.
pub fn compute(ns: u64) -> u64 {
    let start = Instant::now();
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    while (start.elapsed().as_nanos() as u64) < ns {
        for _ in 0..64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
        }
    }
    std::hint::black_box(x)
}

fn pin(cpu: usize) {
    let _ = punctual_rt::affinity::set(0, &[cpu]);
}

/// A small deterministic generator for jitter (no dependency, reproducible runs).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self, below: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % below.max(1)
    }
}

fn sleep_until(stop: &AtomicBool, t: Instant) {
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        if now >= t {
            return;
        }
        std::thread::sleep((t - now).min(Duration::from_millis(50)));
    }
}

// ---- KURT Table 4.3 activities -------------------------------------------------------------

/// Console: a program writing lines to its terminal (a pseudo-terminal) and a terminal reading them.
pub fn console(g: &mut Generators) {
    let Ok(punctual_rt::pty::Pty {
        master: mut reader,
        slave: mut writer,
    }) = punctual_rt::pty::Pty::open()
    else {
        return;
    };
    g.spawn("pt-console-r", move |stop| {
        let mut buf = [0u8; 4096];
        while !stop.load(Ordering::Relaxed) {
            if punctual_rt::pty::readable(&reader, 50) && reader.read(&mut buf).is_err() {
                return;
            }
        }
    });
    g.spawn("pt-console-w", move |stop| {
        let line =
            b"punctual kurt-irq console activity: the quick brown fox jumps over the lazy dog\r\n";
        while !stop.load(Ordering::Relaxed) {
            if writer.write_all(line).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    });
}

/// Network over loopback: UDP ping-pong between two threads on 127.0.0.1.
pub fn network(g: &mut Generators) {
    let (Ok(a), Ok(b)) = (
        UdpSocket::bind("127.0.0.1:0"),
        UdpSocket::bind("127.0.0.1:0"),
    ) else {
        return;
    };
    let (Ok(aa), Ok(ba)) = (a.local_addr(), b.local_addr()) else {
        return;
    };
    let _ = a.set_read_timeout(Some(Duration::from_millis(50)));
    let _ = b.set_read_timeout(Some(Duration::from_millis(50)));
    g.spawn("pt-net-echo", move |stop| {
        let mut buf = [0u8; 2048];
        while !stop.load(Ordering::Relaxed) {
            if let Ok((n, _)) = b.recv_from(&mut buf) {
                let _ = b.send_to(&buf[..n], aa);
            }
        }
    });
    g.spawn("pt-net-send", move |stop| {
        let msg = [7u8; 1024];
        let mut buf = [0u8; 2048];
        while !stop.load(Ordering::Relaxed) {
            let _ = a.send_to(&msg, ba);
            let _ = a.recv_from(&mut buf);
        }
    });
}

/// Timers: a thread sleeping 100 us at a time (10,000 timer interrupts a second).
pub fn timers(g: &mut Generators) {
    g.spawn("pt-timer", |stop| {
        while !stop.load(Ordering::Relaxed) {
            punctual_time::clock::sleep_rel(libc::CLOCK_MONOTONIC, 100_000);
        }
    });
}

/// Memory: one thread maps, touches and unmaps memory while a sibling runs on the other CPU, so every
/// unmap shoots down the sibling's TLB with an inter-processor call.
pub fn memory(g: &mut Generators) {
    let cpus = punctual_rt::online_cpus();
    let (c0, c1) = (cpus[0], *cpus.last().unwrap_or(&cpus[0]));
    g.spawn("pt-mem-spin", move |stop| {
        pin(c1);
        while !stop.load(Ordering::Relaxed) {
            compute(1_000_000);
        }
    });
    g.spawn("pt-mem-map", move |stop| {
        pin(c0);
        const LEN: usize = 256 * 1024;
        while !stop.load(Ordering::Relaxed) {
            // SAFETY: anonymous private mapping, touched within bounds, then unmapped.
            unsafe {
                let p = libc::mmap(
                    std::ptr::null_mut(),
                    LEN,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                );
                if p == libc::MAP_FAILED {
                    return;
                }
                for off in (0..LEN).step_by(4096) {
                    *(p as *mut u8).add(off) = 1;
                }
                libc::munmap(p, LEN);
            }
        }
    });
}

/// Scheduling: two threads on different CPUs waking each other through pipes.
pub fn process(g: &mut Generators) {
    let cpus = punctual_rt::online_cpus();
    let (c0, c1) = (cpus[0], *cpus.last().unwrap_or(&cpus[0]));
    let (Ok((r1, w1)), Ok((r2, w2))) = (pipe(), pipe()) else {
        return;
    };
    g.spawn("pt-ping", move |stop| {
        pin(c0);
        let (mut w, mut r) = (w1, r2);
        let mut b = [0u8; 1];
        while !stop.load(Ordering::Relaxed) {
            if w.write_all(b"x").is_err() || r.read(&mut b).is_err() {
                return;
            }
        }
        drop(w); // the partner sees end-of-file and stops
    });
    g.spawn("pt-pong", move |_stop| {
        pin(c1);
        let (mut r, mut w) = (r1, w2);
        let mut b = [0u8; 1];
        while matches!(r.read(&mut b), Ok(1)) {
            if w.write_all(b"y").is_err() {
                return;
            }
        }
    });
}

fn pipe() -> std::io::Result<(std::fs::File, std::fs::File)> {
    let (r, w) = nix::unistd::pipe().map_err(std::io::Error::from)?;
    Ok((std::fs::File::from(r), std::fs::File::from(w)))
}

// ---- Etsion's mixed desktop ------------------------------------------------------------------

/// An editor-like task: about 8 keystrokes a second, each handled in 100-400 us of work.
pub fn interactive(g: &mut Generators) {
    g.spawn("pt-edit", |stop| {
        let mut rng = Lcg(1);
        while !stop.load(Ordering::Relaxed) {
            let gap = 60 + rng.next(130);
            sleep_until(stop, Instant::now() + Duration::from_millis(gap));
            compute(100_000 + rng.next(300_000));
        }
    });
}

/// A video-like pipeline at 60 frames/s: a decoder (about 4 ms per frame, two frames ahead at most),
/// a displayer woken by a 4 ms alarm that checks whether the next frame is due (Xine's design), and a
/// display server that draws each frame handed to it (about 2 ms).
pub fn video(g: &mut Generators) {
    let (to_display, decoded) = mpsc::sync_channel::<u64>(2);
    let (to_server, frames) = mpsc::channel::<u64>();
    g.spawn("pt-video-dec", move |stop| {
        let mut n = 0;
        while !stop.load(Ordering::Relaxed) {
            compute(4_000_000);
            if to_display.send(n).is_err() {
                return;
            }
            n += 1;
        }
    });
    g.spawn("pt-video-disp", move |stop| {
        let frame = Duration::from_nanos(16_666_667);
        let start = Instant::now();
        let mut next_frame = start;
        let mut tick = start;
        while !stop.load(Ordering::Relaxed) {
            tick += Duration::from_millis(4);
            sleep_until(stop, tick);
            compute(20_000);
            if Instant::now() >= next_frame {
                match decoded.recv_timeout(Duration::from_millis(50)) {
                    Ok(f) => {
                        let _ = to_server.send(f);
                    }
                    Err(mpsc::RecvTimeoutError::Timeout) => {}
                    Err(_) => return,
                }
                next_frame += frame;
            }
        }
    });
    g.spawn("pt-xserver", move |_stop| {
        while frames.recv().is_ok() {
            compute(2_000_000);
        }
    });
}

/// A game loop capped at 250 frames/s: about 2.5 ms of work per frame, then sleep to the next frame.
pub fn game(g: &mut Generators) {
    g.spawn("pt-game", |stop| {
        let mut t = Instant::now();
        while !stop.load(Ordering::Relaxed) {
            compute(2_500_000);
            t += Duration::from_millis(4);
            sleep_until(stop, t);
        }
    });
}

/// CPU-bound tasks that never block, one per CPU.
pub fn cpu_bound(g: &mut Generators, n: usize) {
    for i in 0..n {
        g.spawn(&format!("pt-cpu-{i}"), |stop| {
            while !stop.load(Ordering::Relaxed) {
                compute(1_000_000);
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generators_stop_when_asked() {
        let mut g = Generators::new();
        console(&mut g);
        network(&mut g);
        timers(&mut g);
        process(&mut g);
        interactive(&mut g);
        video(&mut g);
        std::thread::sleep(Duration::from_millis(150));
        let t0 = Instant::now();
        g.stop();
        assert!(
            t0.elapsed() < Duration::from_secs(2),
            "took {:?}",
            t0.elapsed()
        );
    }

    #[test]
    fn compute_spins_about_as_long_as_asked() {
        let t0 = Instant::now();
        compute(2_000_000);
        assert!(t0.elapsed() >= Duration::from_millis(2));
    }
}
