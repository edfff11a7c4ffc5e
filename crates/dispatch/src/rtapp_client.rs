//! `punctual __rtapp-task`: the wake client of a task converted from an rt-app file
//! (`punctual_plan::rtapp`). It takes the task's CPUs and scheduling class, attaches to the channel
//! the dispatcher named in `PUNCTUAL_WAKE_CHANNEL`, and at each release does that release's steps:
//! `run` is CPU time of this thread (rt-app's `run` is a loop count calibrated to time on one CPU,
//! so it too is an amount of work), `runtime` is busy time on the clock, `sleep` a relative sleep.

use punctual_periodic::channel::ChannelError;
use punctual_periodic::{Periodic, PeriodicError};
use punctual_plan::rtapp::work::{Step, Work};
use punctual_rt::{AffinityGuard, Policy, SchedParams};
use punctual_time::clock::{read_clock, sleep_rel, thread_cpu_time};

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("{0}")]
    Usage(String),
    #[error("PUNCTUAL_WAKE_CHANNEL is not set: this client is started by `punctual run` on an rt-app file")]
    NoChannel,
    #[error("{0}")]
    Setup(#[from] punctual_rt::RtError),
    #[error("{0}")]
    Periodic(#[from] PeriodicError),
}

/// Take the task's CPUs and class (nice value under `other`), and lock memory if asked. The guards
/// live as long as the process.
fn settle(w: &Work) -> Result<Vec<Box<dyn std::any::Any>>, ClientError> {
    let mut held: Vec<Box<dyn std::any::Any>> = Vec::new();
    if let Some(cpus) = &w.cpus {
        held.push(Box::new(AffinityGuard::pin(cpus)?));
    }
    let policy = match w.policy.as_str() {
        "fifo" => Policy::Fifo,
        "rr" => Policy::Rr,
        _ => Policy::Other,
    };
    if policy.is_realtime() {
        punctual_rt::sched::set_current(SchedParams {
            policy,
            priority: w.priority as u32,
        })?;
    } else if w.priority != 0 {
        // SAFETY: setpriority on this process with a value rt-app's parser bounded to -20..19.
        if unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, w.priority) } != 0 {
            return Err(punctual_rt::RtError::Invalid(format!(
                "nice {}: {}",
                w.priority,
                std::io::Error::last_os_error()
            ))
            .into());
        }
    }
    if w.lock_pages {
        held.push(Box::new(punctual_rt::memlock::MlockGuard::lock_all()?));
    }
    Ok(held)
}

/// Do one step.
pub fn step(s: Step) {
    match s {
        Step::Run(ns) => {
            let t0 = thread_cpu_time();
            while thread_cpu_time().saturating_sub(t0) < ns {
                std::hint::spin_loop();
            }
        }
        Step::Runtime(ns) => {
            let t0 = read_clock(libc::CLOCK_MONOTONIC);
            while read_clock(libc::CLOCK_MONOTONIC).saturating_sub(t0) < ns {
                std::hint::spin_loop();
            }
        }
        Step::Sleep(ns) => sleep_rel(libc::CLOCK_MONOTONIC, ns),
    }
}

/// Serve releases on `channel` (the dispatcher's `PUNCTUAL_WAKE_CHANNEL`) until the work or the
/// plan ends; returns how many were served.
pub fn serve(args: &[String], channel: Option<String>) -> Result<u64, ClientError> {
    let w = Work::from_args(args).map_err(ClientError::Usage)?;
    let channel = channel.ok_or(ClientError::NoChannel)?;
    let _held = settle(&w)?;
    let mut p = Periodic::attach(&channel, 0)?;
    let mut k = 0u64;
    while let Some(steps) = w.release(k) {
        match p.wait_next_period() {
            Ok(_) => {}
            Err(PeriodicError::Channel(ChannelError::Ended(_))) => break,
            Err(e) => return Err(e.into()),
        }
        for &s in steps {
            step(s);
        }
        k += 1;
    }
    Ok(k)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_is_cpu_time_and_runtime_is_clock_time() {
        let c0 = thread_cpu_time();
        step(Step::Run(3_000_000));
        assert!(thread_cpu_time() - c0 >= 3_000_000);
        let t0 = read_clock(libc::CLOCK_MONOTONIC);
        step(Step::Runtime(2_000_000));
        step(Step::Sleep(1_000_000));
        assert!(read_clock(libc::CLOCK_MONOTONIC) - t0 >= 3_000_000);
    }

    #[test]
    fn bad_words_and_a_missing_channel_are_refused_before_anything_is_set() {
        let args: Vec<String> = ["--phase", "1:bogus=1ms"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert!(matches!(
            serve(&args, Some("c".into())),
            Err(ClientError::Usage(_))
        ));
        let args: Vec<String> = ["--phase", "1:run=1ms"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert!(matches!(serve(&args, None), Err(ClientError::NoChannel)));
    }
}
