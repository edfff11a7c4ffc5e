//! What `punctual simulate` asks for, checked and assembled into measurements: the values given on
//! the command line ([`Overrides`]) over a base (the defaults, or a scenario file), as a sweep over
//! rates and quanta ([`Overrides::sweep`], [`Overrides::scenario`]) or a frames study
//! ([`Overrides::frames`]). Every refusal names the flag or the file that fixes it.

use crate::frames::FramesConfig;
use crate::measure::{Frames, Sweep};
use crate::{Mechanism, Ns, Policy, Poll, Quantum, RunConfig, SimError, TaskSpec};
use punctual_result::Failure;
use std::path::Path;

/// A workload as written (its label, for the document) and its tasks.
#[derive(Clone, Debug, PartialEq)]
pub struct Workload {
    pub spec: String,
    pub tasks: Vec<TaskSpec>,
}

impl std::str::FromStr for Workload {
    type Err = String;
    fn from_str(s: &str) -> Result<Workload, String> {
        Ok(Workload {
            spec: s.to_string(),
            tasks: crate::parse_workload(s)?,
        })
    }
}

/// A comma-separated list (a sweep), each entry read by `parse`; an empty entry is refused.
pub fn parse_list<T>(s: &str, parse: impl Fn(&str) -> Result<T, String>) -> Result<Vec<T>, String> {
    let items: Vec<&str> = s.split(',').map(str::trim).collect();
    if items.iter().any(|i| i.is_empty()) {
        return Err(format!(
            "'{s}' has an empty entry; write a comma-separated list, e.g. 100,1000"
        ));
    }
    items.into_iter().map(parse).collect()
}

/// The simulated machine as the command line gives it: each value set replaces the base's, a list
/// of rates or quanta makes a sweep.
#[derive(Clone, Debug, PartialEq)]
pub struct Overrides {
    pub hz: Option<Vec<u32>>,
    pub quanta: Option<Vec<Quantum>>,
    pub policy: Option<Policy>,
    pub timer: Option<Mechanism>,
    pub cpus: Option<usize>,
    pub duration: Option<Ns>,
    pub seed: Option<u64>,
    pub irq_cost: Option<Ns>,
    pub irq_indirect: Option<Ns>,
    pub switch_cost: Option<Ns>,
    pub entry_interval: Option<Ns>,
    pub overshoot: Option<Ns>,
    pub max_events: Option<u64>,
    /// Runs of a sweep simulated at once (at least 1; the output does not depend on it).
    pub jobs: usize,
}

/// A frames study as the command line gives it (`None`: the study's default).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FramesRequest {
    /// Frame rates in millihertz; a list sweeps (default 60 fps).
    pub fps_milli: Option<Vec<u64>>,
    pub frames: u64,
    pub shifts: u32,
    /// How the player wakes (default: Xine's 4 ms alarm).
    pub poll: Option<Poll>,
    /// Tasks competing with the player.
    pub background: Vec<TaskSpec>,
}

impl Overrides {
    /// Nothing given: every value is the base's, one run at a time.
    pub fn none() -> Overrides {
        Overrides {
            hz: None,
            quanta: None,
            policy: None,
            timer: None,
            cpus: None,
            duration: None,
            seed: None,
            irq_cost: None,
            irq_indirect: None,
            switch_cost: None,
            entry_interval: None,
            overshoot: None,
            max_events: None,
            jobs: 1,
        }
    }

    /// Apply the given values over `base`, and the rate and quantum lists over `hz` and `quanta`.
    fn apply(
        &self,
        base: &mut RunConfig,
        hz: &mut Vec<u32>,
        quanta: &mut Vec<Quantum>,
    ) -> Result<(), SimError> {
        if let Some(h) = &self.hz {
            hz.clone_from(h);
        }
        if let Some(q) = &self.quanta {
            quanta.clone_from(q);
        }
        base.policy = self.policy.unwrap_or(base.policy);
        base.timer = self.timer.unwrap_or(base.timer);
        base.cpus = self.cpus.unwrap_or(base.cpus);
        let set = |to: &mut u64, given: Option<u64>| *to = given.unwrap_or(*to);
        set(&mut base.duration, self.duration);
        set(&mut base.seed, self.seed);
        set(&mut base.costs.irq_direct, self.irq_cost);
        set(&mut base.costs.irq_indirect, self.irq_indirect);
        set(&mut base.costs.switch, self.switch_cost);
        set(&mut base.entry_interval, self.entry_interval);
        set(&mut base.overshoot, self.overshoot);
        set(&mut base.max_events, self.max_events);
        if self.jobs == 0 {
            return Err(SimError::invalid("-j/--jobs", "must be at least 1"));
        }
        Ok(())
    }

    /// A workload over the defaults, at each rate and quantum given; every run checked.
    pub fn sweep(&self, w: &Workload) -> Result<Sweep, Failure> {
        let mut base = RunConfig {
            tasks: w.tasks.clone(),
            ..RunConfig::default()
        };
        let (mut hz, mut quanta) = (vec![base.hz], vec![base.quantum]);
        self.apply(&mut base, &mut hz, &mut quanta)?;
        Sweep::new(base.sweep(&hz, &quanta), self.jobs, Some(w.spec.clone()))
    }

    /// A scenario file with the given values over it (`workload` replaces its tasks). A value from
    /// the file is refused naming the file (the checks name the flags that can override it).
    pub fn scenario(&self, file: &Path, workload: Option<&Workload>) -> Result<Sweep, Failure> {
        let sc = crate::scenario::load(file)?;
        let (mut base, mut hz, mut quanta) = (sc.base, sc.hz, sc.quanta);
        if let Some(w) = workload {
            base.tasks.clone_from(&w.tasks);
        }
        self.apply(&mut base, &mut hz, &mut quanta)?;
        let runs = base.sweep(&hz, &quanta);
        for c in &runs {
            c.validate().map_err(|e| {
                SimError::invalid(&punctual_time::text::display_path(file), e.to_string())
            })?;
        }
        let label = sc.name.unwrap_or_else(|| file.display().to_string());
        Sweep::new(runs, self.jobs, Some(label))
    }

    /// Etsion Section 5's frames study at each rate and frame rate, on the one quantum given.
    pub fn frames(&self, f: FramesRequest) -> Result<Frames, Failure> {
        let mut base = RunConfig::default();
        let (mut hz, mut quanta) = (vec![100u32], vec![base.quantum]);
        self.apply(&mut base, &mut hz, &mut quanta)?;
        if self.duration.is_some() {
            return Err(SimError::invalid(
                "-D/--duration",
                "frames runs as long as the clip; set --frames instead",
            )
            .into());
        }
        if quanta.len() > 1 {
            return Err(SimError::invalid("-q/--quantum", "frames takes one quantum").into());
        }
        let study = FramesConfig {
            frames: f.frames,
            shifts: f.shifts,
            poll: f
                .poll
                .unwrap_or(Poll::Every(crate::behaviour::defaults::XINE_POLL)),
            timer: base.timer,
            policy: base.policy,
            quantum: quanta[0],
            costs: base.costs,
            background: f.background,
            seed: base.seed,
            max_events: base.max_events,
            ..FramesConfig::default()
        };
        Frames::new(&study, &hz, &f.fps_milli.unwrap_or_else(|| vec![60_000]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cont8() -> Workload {
        "cont:8".parse().unwrap()
    }

    #[test]
    fn lists_refuse_empty_entries_and_read_each() {
        assert_eq!(
            parse_list("100, 1000", crate::config::parse_hz).unwrap(),
            vec![100, 1000]
        );
        let e = parse_list("100,,1000", crate::config::parse_hz).unwrap_err();
        assert!(e.contains("empty entry"), "{e}");
        assert!(parse_list("100,0", crate::config::parse_hz).is_err());
    }

    #[test]
    fn a_sweep_is_every_rate_times_every_quantum_with_the_values_given() {
        let o = Overrides {
            hz: Some(vec![100, 1000]),
            quanta: Some(vec![Quantum::Ticks(2), Quantum::Ticks(6)]),
            seed: Some(7),
            switch_cost: Some(3_000),
            ..Overrides::none()
        };
        let s = o.sweep(&cont8()).unwrap();
        let got: Vec<(u32, Quantum)> = s.cfgs.iter().map(|c| (c.hz, c.quantum)).collect();
        assert_eq!(
            got,
            [
                (100, Quantum::Ticks(2)),
                (100, Quantum::Ticks(6)),
                (1000, Quantum::Ticks(2)),
                (1000, Quantum::Ticks(6))
            ]
        );
        assert!(s
            .cfgs
            .iter()
            .all(|c| c.seed == 7 && c.costs.switch == 3_000));
        assert_eq!(s.workload.as_deref(), Some("cont:8"));
        assert_eq!(s.cfgs[0].tasks, cont8().tasks);
    }

    #[test]
    fn nothing_given_keeps_the_defaults() {
        let s = Overrides::none().sweep(&cont8()).unwrap();
        let d = RunConfig::default();
        assert_eq!(s.cfgs.len(), 1);
        assert_eq!((s.cfgs[0].hz, s.cfgs[0].quantum), (d.hz, d.quantum));
        assert_eq!(s.cfgs[0].duration, d.duration);
    }

    #[test]
    fn zero_jobs_and_frames_misuse_are_refused_naming_the_flag() {
        let zero = Overrides {
            jobs: 0,
            ..Overrides::none()
        };
        let e = zero.sweep(&cont8()).err().unwrap();
        assert_eq!(e.message, "-j/--jobs: must be at least 1");
        let timed = Overrides {
            duration: Some(1_000_000_000),
            ..Overrides::none()
        };
        let e = timed.frames(FramesRequest::default()).err().unwrap();
        assert!(
            e.message.starts_with("-D/--duration: frames runs"),
            "{}",
            e.message
        );
        let two = Overrides {
            quanta: Some(vec![Quantum::Ticks(1), Quantum::Ticks(2)]),
            ..Overrides::none()
        };
        let e = two.frames(FramesRequest::default()).err().unwrap();
        assert_eq!(e.message, "-q/--quantum: frames takes one quantum");
    }

    #[test]
    fn a_scenario_value_out_of_range_is_refused_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.toml");
        std::fs::write(
            &path,
            "[sim]\nhz = 100\nquantum = \"50ms\"\nduration = \"1s\"\nworkload = \"cont:2\"\n",
        )
        .unwrap();
        let fine = Overrides::none().scenario(&path, None);
        let Ok(fine) = fine else {
            panic!("{}", fine.err().unwrap().message)
        };
        assert_eq!(fine.workload, Some(path.display().to_string()));
        // A value past the simulator's limits is refused naming the file it came with.
        let costly = Overrides {
            irq_cost: Some(2_000_000_000),
            ..Overrides::none()
        };
        let e = costly.scenario(&path, None).err().unwrap();
        assert!(
            e.message.starts_with(&format!("{}: ", path.display())),
            "{}",
            e.message
        );
    }
}
