//! What the wake client of a converted rt-app task does at each release, as the command-line words
//! the converter writes into the plan's `spawn` and the client (`punctual __rtapp-task`) reads back.
//!
//! `--loop N|forever --phase LOOPS:STEP,... [--phase ...] [--policy P] [--priority N] [--cpus LIST]
//! [--lock-pages]`, with `STEP` one of `run=DURATION` (that much CPU time of work: rt-app's `run`,
//! whose loop count follows the CPU's speed), `runtime=DURATION` (busy for that long on the clock)
//! and `sleep=DURATION`. Release `k` runs the steps of the `k`th phase iteration.

use crate::model::exact_duration;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    Run(u64),
    Runtime(u64),
    Sleep(u64),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Phase {
    /// Releases this phase takes before the next (`None`: for ever).
    pub loops: Option<u64>,
    pub steps: Vec<Step>,
}

/// A client's whole job.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Work {
    /// Times through all phases (`None`: for ever).
    pub loops: Option<u64>,
    pub phases: Vec<Phase>,
    /// `other`, `fifo` or `rr`.
    pub policy: String,
    /// FIFO/RR priority, or the nice value under `other`.
    pub priority: i32,
    pub cpus: Option<Vec<usize>>,
    pub lock_pages: bool,
}

fn count(n: Option<u64>) -> String {
    n.map(|n| n.to_string()).unwrap_or_else(|| "forever".into())
}

fn parse_count(s: &str) -> Result<Option<u64>, String> {
    match s {
        "forever" => Ok(None),
        n => n
            .parse::<u64>()
            .ok()
            .filter(|&n| n > 0)
            .map(Some)
            .ok_or_else(|| format!("'{s}' is not a count (1 or more, or forever)")),
    }
}

impl Step {
    fn word(self) -> String {
        match self {
            Step::Run(ns) => format!("run={}", exact_duration(ns)),
            Step::Runtime(ns) => format!("runtime={}", exact_duration(ns)),
            Step::Sleep(ns) => format!("sleep={}", exact_duration(ns)),
        }
    }

    fn parse(s: &str) -> Result<Step, String> {
        let (kind, d) = s
            .split_once('=')
            .ok_or_else(|| format!("'{s}' is not KIND=DURATION"))?;
        let ns = punctual_time::parse_duration_ns(d).map_err(|e| format!("{s}: {e}"))?;
        match kind {
            "run" => Ok(Step::Run(ns)),
            "runtime" => Ok(Step::Runtime(ns)),
            "sleep" => Ok(Step::Sleep(ns)),
            _ => Err(format!("'{kind}' is not run, runtime or sleep")),
        }
    }

    /// The work of a step (sleep is none).
    pub fn work(self) -> u64 {
        match self {
            Step::Run(ns) | Step::Runtime(ns) => ns,
            Step::Sleep(_) => 0,
        }
    }
}

impl Work {
    pub fn to_args(&self) -> Vec<String> {
        let mut a = vec!["--loop".to_string(), count(self.loops)];
        for p in &self.phases {
            let steps: Vec<String> = p.steps.iter().map(|s| s.word()).collect();
            a.push("--phase".into());
            a.push(format!("{}:{}", count(p.loops), steps.join(",")));
        }
        a.extend(["--policy".into(), self.policy.clone()]);
        a.extend(["--priority".into(), self.priority.to_string()]);
        if let Some(c) = &self.cpus {
            let list: Vec<String> = c.iter().map(|c| c.to_string()).collect();
            a.extend(["--cpus".into(), list.join(",")]);
        }
        if self.lock_pages {
            a.push("--lock-pages".into());
        }
        a
    }

    pub fn from_args(args: &[String]) -> Result<Work, String> {
        let mut w = Work {
            policy: "other".into(),
            ..Work::default()
        };
        let mut it = args.iter();
        while let Some(flag) = it.next() {
            let mut value = || {
                it.next()
                    .cloned()
                    .ok_or_else(|| format!("{flag} needs a value"))
            };
            match flag.as_str() {
                "--loop" => w.loops = parse_count(&value()?)?,
                "--phase" => {
                    let v = value()?;
                    let (loops, steps) = v
                        .split_once(':')
                        .ok_or_else(|| format!("--phase '{v}' is not LOOPS:STEP,..."))?;
                    w.phases.push(Phase {
                        loops: parse_count(loops)?,
                        steps: steps
                            .split(',')
                            .filter(|s| !s.is_empty())
                            .map(Step::parse)
                            .collect::<Result<_, _>>()?,
                    });
                }
                "--policy" => {
                    w.policy = value()?;
                    if !matches!(w.policy.as_str(), "other" | "fifo" | "rr") {
                        return Err(format!("--policy '{}': other, fifo or rr", w.policy));
                    }
                }
                "--priority" => {
                    let v = value()?;
                    w.priority = v.parse().map_err(|_| format!("--priority '{v}'"))?;
                }
                "--cpus" => {
                    let v = value()?;
                    w.cpus = Some(
                        punctual_time::cpus::parse_cpu_list(&v)
                            .map_err(|e| format!("--cpus: {e}"))?,
                    );
                }
                "--lock-pages" => w.lock_pages = true,
                other => return Err(format!("unknown option {other}")),
            }
        }
        if w.phases.is_empty() {
            return Err("no --phase: nothing to do at a release".into());
        }
        Ok(w)
    }

    /// The steps of release `k` (from 0), or `None` once the work is done.
    pub fn release(&self, k: u64) -> Option<&[Step]> {
        let round: Option<u64> = self
            .phases
            .iter()
            .map(|p| p.loops)
            .try_fold(0u64, |a, l| l.map(|l| a.saturating_add(l)));
        let mut k = match (round, self.loops) {
            (Some(r), Some(l)) if k >= r.saturating_mul(l) => return None,
            (Some(r), _) if r > 0 => k % r,
            _ => k,
        };
        for p in &self.phases {
            match p.loops {
                None => return Some(&p.steps),
                Some(l) if k < l => return Some(&p.steps),
                Some(l) => k -= l,
            }
        }
        None
    }

    /// Releases in all (`None`: for ever).
    pub fn releases(&self) -> Option<u64> {
        let round = self
            .phases
            .iter()
            .map(|p| p.loops)
            .try_fold(0u64, |a, l| l.map(|l| a.saturating_add(l)))?;
        self.loops.map(|l| l.saturating_mul(round))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn work() -> Work {
        Work {
            loops: Some(2),
            phases: vec![
                Phase {
                    loops: Some(2),
                    steps: vec![Step::Run(3_000_000)],
                },
                Phase {
                    loops: Some(1),
                    steps: vec![Step::Runtime(1_500), Step::Sleep(2_000_000)],
                },
            ],
            policy: "fifo".into(),
            priority: 10,
            cpus: Some(vec![0, 2]),
            lock_pages: true,
        }
    }

    #[test]
    fn the_words_round_trip() {
        let w = work();
        let args = w.to_args();
        assert_eq!(
            args.join(" "),
            "--loop 2 --phase 2:run=3ms --phase 1:runtime=1500ns,sleep=2ms --policy fifo \
             --priority 10 --cpus 0,2 --lock-pages"
        );
        assert_eq!(Work::from_args(&args).unwrap(), w);
        for bad in [
            &["--phase", "x"][..],
            &["--loop", "0"],
            &["--bogus"],
            &["--policy", "batch"],
        ] {
            let a: Vec<String> = bad.iter().map(|s| s.to_string()).collect();
            assert!(Work::from_args(&a).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn releases_walk_the_phases_and_their_loops() {
        let w = work();
        let kinds: Vec<usize> = (0..7)
            .map(|k| w.release(k).map(|s| s.len()).unwrap_or(0))
            .collect();
        // Phase 1 (one step) twice, phase 2 (two steps) once; all of it twice; then done.
        assert_eq!(kinds, vec![1, 1, 2, 1, 1, 2, 0]);
        assert_eq!(w.releases(), Some(6));
        let forever = Work {
            loops: None,
            ..work()
        };
        assert_eq!(forever.releases(), None);
        assert_eq!(forever.release(1_000_000_002).map(|s| s.len()), Some(1));
        let endless_phase = Work {
            loops: Some(1),
            phases: vec![Phase {
                loops: None,
                steps: vec![Step::Run(1)],
            }],
            ..work()
        };
        assert_eq!(endless_phase.releases(), None);
        assert!(endless_phase.release(123_456).is_some());
    }
}
