//! rt-app task files (`doc/tutorial.txt` of rt-app) as plans: the subset whose meaning a plan can
//! carry, and a refusal by name, JSON path and place in the file for everything else, before
//! anything runs.
//!
//! Read: `global` (`duration`, `default_policy`, `calibration`, and rt-app's logging keys, which
//! punctual's result document replaces), `tasks` with `instance`, `loop`, `policy`, `priority`,
//! `cpus`, `delay`, `phases`, and the events `run`, `runtime`, `sleep` and `timer` (`period`,
//! `mode`, `ref`). Each instance becomes a periodic task of the timer's period whose action wakes a
//! client process (`punctual __rtapp-task`, see [`work`]) that does the phase's events at each
//! release. A task's phases share one timer period and end with the timer, since a plan task has
//! one period and its work follows its release. Without a `delay`, a task's offset is `auto`:
//! rt-app starts its threads as they come, and the plan spreads releases that would collide.

pub mod json;
pub mod work;

use crate::model::{Action, MissPolicy, NamedAction, Offset, Plan, Task};
use crate::PlanError;
use json::{Node, Value};
use punctual_time::MarginPolicy;
use std::path::Path;
use work::{Phase, Step, Work};

/// A converted file: the plan, and what the user should know about keys read but not needed.
#[derive(Clone, Debug, PartialEq)]
pub struct Converted {
    pub plan: Plan,
    pub notes: Vec<String>,
}

/// Whether a plan file is an rt-app task file rather than TOML: named `.json`, or starting with `{`.
pub fn is_rtapp(path: &Path, head: &[u8]) -> bool {
    path.extension().is_some_and(|e| e == "json")
        || head.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{')
}

/// Read and convert `path`; `client` is the wake client's argv before its options (the punctual
/// executable and `__rtapp-task`).
pub fn load(path: &Path, client: &[String]) -> Result<Converted, PlanError> {
    let text = std::fs::read_to_string(path).map_err(|source| PlanError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let name = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "rt-app".into());
    convert(&text, &path.display().to_string(), &name, client)
}

/// Events rt-app knows that a plan cannot express, by the prefix rt-app matches them with.
const OTHER_EVENTS: &[&str] = &[
    "lock", "unlock", "wait", "signal", "broad", "sync", "barrier", "suspend", "resume", "yield",
    "memrun", "mem", "iorun", "fork", "sem_post", "sem_wait",
];

/// rt-app's own logging and tracing: read, and replaced by punctual's result document.
const LOGGING: &[&str] = &[
    "logdir",
    "log_basename",
    "log_size",
    "gnuplot",
    "ftrace",
    "cumulative_slack",
];

struct Reader<'a> {
    file: &'a str,
    notes: Vec<String>,
}

/// A member of an object: its key, value, JSON path and where the key is.
struct Member<'n> {
    key: &'n str,
    node: &'n Node,
    path: String,
    at: (usize, usize),
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Pol {
    Other,
    Fifo,
    Rr,
}

impl Pol {
    fn name(self) -> &'static str {
        match self {
            Pol::Other => "other",
            Pol::Fifo => "fifo",
            Pol::Rr => "rr",
        }
    }
}

/// A phase's timer.
struct Timer {
    period_us: u64,
    absolute: bool,
    unique: bool,
    path: String,
    at: (usize, usize),
}

/// One rt-app task (all its instances).
struct TaskSpec {
    name: String,
    instances: u64,
    work: Work,
    period: u64,
    /// `delay`: a fixed offset; without one the plan spreads the releases (`auto`).
    delay: Option<u64>,
    miss: MissPolicy,
    loop_at: (String, (usize, usize)),
}

impl<'a> Reader<'a> {
    fn err(&self, at: (usize, usize), path: &str, message: impl std::fmt::Display) -> PlanError {
        PlanError::At {
            file: self.file.to_string(),
            line: at.0,
            column: at.1,
            message: if path.is_empty() {
                message.to_string()
            } else {
                format!("{path}: {message}")
            },
        }
    }

    fn at(n: &Node) -> (usize, usize) {
        (n.line, n.column)
    }

    /// An object's members, each once (rt-app would keep only the last of a repeated key).
    fn members<'n>(&self, n: &'n Node, path: &str) -> Result<Vec<Member<'n>>, PlanError> {
        let Value::Object(m) = &n.value else {
            return Err(self.err(
                Self::at(n),
                path,
                format!("must be an object, not {}", n.value.kind()),
            ));
        };
        let mut out: Vec<Member<'n>> = Vec::new();
        for (k, v, at) in m {
            let p = if path.is_empty() {
                k.clone()
            } else {
                format!("{path}.{k}")
            };
            if out.iter().any(|o| o.key == k) {
                return Err(self.err(
                    *at,
                    &p,
                    "appears twice at this level (rt-app keeps only the last; rt-app's workgen \
                     renames repeats: run0, run1, ...)",
                ));
            }
            out.push(Member {
                key: k,
                node: v,
                path: p,
                at: *at,
            });
        }
        Ok(out)
    }

    fn int(&self, m: &Member) -> Result<i64, PlanError> {
        match m.node.value {
            Value::Int(i) => Ok(i),
            ref other => Err(self.err(
                Self::at(m.node),
                &m.path,
                format!("must be a whole number, not {}", other.kind()),
            )),
        }
    }

    fn micros(&self, m: &Member) -> Result<u64, PlanError> {
        let v = self.int(m)?;
        u64::try_from(v)
            .ok()
            .filter(|&us| us <= 365 * 86_400 * 1_000_000)
            .ok_or_else(|| {
                self.err(
                    Self::at(m.node),
                    &m.path,
                    format!("{v}: give microseconds, 0 or more"),
                )
            })
    }

    fn string<'n>(&self, m: &Member<'n>) -> Result<&'n str, PlanError> {
        match &m.node.value {
            Value::Str(s) => Ok(s),
            other => Err(self.err(
                Self::at(m.node),
                &m.path,
                format!("must be a string, not {}", other.kind()),
            )),
        }
    }

    /// `loop`: -1 (for ever) or a count.
    fn count(&self, m: &Member) -> Result<Option<u64>, PlanError> {
        match self.int(m)? {
            -1 => Ok(None),
            n if n >= 1 => Ok(Some(n as u64)),
            n => Err(self.err(
                Self::at(m.node),
                &m.path,
                format!("{n}: give -1 (for ever) or 1 or more"),
            )),
        }
    }

    fn policy(&self, m: &Member) -> Result<Pol, PlanError> {
        match self.string(m)? {
            "SCHED_OTHER" => Ok(Pol::Other),
            "SCHED_FIFO" => Ok(Pol::Fifo),
            "SCHED_RR" => Ok(Pol::Rr),
            p => Err(self.err(
                Self::at(m.node),
                &m.path,
                format!(
                    "{p} is not supported: punctual's rt-app tasks run in SCHED_OTHER, \
                     SCHED_FIFO or SCHED_RR"
                ),
            )),
        }
    }

    fn unsupported(&self, m: &Member, what: &str) -> PlanError {
        self.err(
            m.at,
            &m.path,
            format!("\"{}\" is not supported: {what}", m.key),
        )
    }

    /// `global`: the duration (seconds) and the default policy.
    fn global(&mut self, n: &Node) -> Result<(Option<u64>, Pol, bool), PlanError> {
        let (mut duration, mut policy, mut lock) = (None, Pol::Other, false);
        let mut logging = Vec::new();
        for m in self.members(n, "global")? {
            match m.key {
                "duration" => {
                    duration = match self.int(&m)? {
                        d if d <= 0 => None,
                        d if d <= 365 * 86_400 => Some(d as u64),
                        d => {
                            return Err(self.err(
                                Self::at(m.node),
                                &m.path,
                                format!("{d} s is longer than a year"),
                            ))
                        }
                    }
                }
                "default_policy" => policy = self.policy(&m)?,
                "calibration" => self.notes.push(format!(
                    "{}: not needed: a `run` is that much CPU time of the task's client \
                     (rt-app turns it into a loop count calibrated on one CPU)",
                    m.path
                )),
                "lock_pages" => lock = matches!(m.node.value, Value::Bool(true)),
                // Only meaningful with events a plan refuses anyway (mutexes, mem, iorun).
                "pi_enabled" | "io_device" | "mem_buffer_size" => {}
                k if LOGGING.contains(&k) => logging.push(m.path.clone()),
                _ => {
                    return Err(self.unsupported(
                        &m,
                        "the global keys read are duration, default_policy, calibration, \
                         lock_pages and rt-app's logging keys",
                    ))
                }
            }
        }
        if !logging.is_empty() {
            self.notes.push(format!(
                "{}: rt-app's own logs; punctual writes per-task lateness in its result document \
                 (--json) instead",
                logging.join(", ")
            ));
        }
        Ok((duration, policy, lock))
    }

    /// One event of a phase: a step, or its timer.
    fn event(
        &self,
        m: &Member,
        steps: &mut Vec<Step>,
        timer: &mut Option<Timer>,
    ) -> Result<(), PlanError> {
        let k = m.key;
        if let Some(t) = timer {
            return Err(self.err(
                m.at,
                &m.path,
                format!(
                    "comes after the timer ({}): a punctual task does a phase's events after its \
                     release, so the timer must be the phase's last event",
                    t.path
                ),
            ));
        }
        if k.starts_with("runtime") {
            steps.push(Step::Runtime(self.micros(m)? * 1000));
        } else if k.starts_with("run") {
            steps.push(Step::Run(self.micros(m)? * 1000));
        } else if k.starts_with("sleep") {
            steps.push(Step::Sleep(self.micros(m)? * 1000));
        } else if k.starts_with("timer") {
            *timer = Some(self.timer(m)?);
        } else if let Some(e) = OTHER_EVENTS.iter().find(|e| k.starts_with(*e)) {
            return Err(self.unsupported(
                m,
                &format!(
                    "the {e} event: punctual's rt-app tasks are released by the clock and do run, \
                     runtime and sleep (no locks, conditions, barriers, suspend/resume, memory or \
                     IO work)"
                ),
            ));
        } else {
            return Err(self.unsupported(m, "not an rt-app key that punctual reads"));
        }
        Ok(())
    }

    fn timer(&self, m: &Member) -> Result<Timer, PlanError> {
        let (mut period, mut absolute, mut unique) = (None, false, false);
        for t in self.members(m.node, &m.path)? {
            match t.key {
                "period" => {
                    let p = self.micros(&t)?;
                    if p == 0 {
                        return Err(self.err(Self::at(t.node), &t.path, "must be more than 0 us"));
                    }
                    period = Some(p);
                }
                "ref" => unique = self.string(&t)?.starts_with("unique"),
                "mode" => {
                    absolute = match self.string(&t)? {
                        "absolute" => true,
                        "relative" => false,
                        other => {
                            return Err(self.err(
                                Self::at(t.node),
                                &t.path,
                                format!("'{other}': relative or absolute"),
                            ))
                        }
                    }
                }
                _ => return Err(self.unsupported(&t, "a timer has ref, period and mode")),
            }
        }
        let period_us =
            period.ok_or_else(|| self.err(m.at, &m.path, "a timer needs a period (us)"))?;
        Ok(Timer {
            period_us,
            absolute,
            unique,
            path: m.path.clone(),
            at: m.at,
        })
    }

    /// A phase: its events in order; `None` for the events of a task without `phases`.
    fn phase(&self, n: &Node, path: &str, loop_key: bool) -> Result<(Phase, Timer), PlanError> {
        let mut steps = Vec::new();
        let mut timer = None;
        let mut loops = Some(1);
        for m in self.members(n, path)? {
            match m.key {
                "loop" if loop_key => loops = self.count(&m)?,
                // Read by the task when the task is its own phase.
                "instance" | "loop" | "policy" | "priority" | "cpus" | "delay" if !loop_key => {}
                "cpus" | "policy" | "priority" => {
                    return Err(self.unsupported(
                        &m,
                        "per-phase; a task's client keeps one CPU set and scheduling class \
                         (give them on the task)",
                    ))
                }
                _ => self.event(&m, &mut steps, &mut timer)?,
            }
        }
        let timer = timer.ok_or_else(|| {
            self.err(
                (n.line, n.column),
                path,
                "no timer event: a punctual task is released periodically; add \
                 \"timer\" : { \"ref\" : \"unique\", \"period\" : MICROSECONDS } as the last event",
            )
        })?;
        Ok((Phase { loops, steps }, timer))
    }

    fn task(&self, t: &Member, default: Pol, lock: bool) -> Result<TaskSpec, PlanError> {
        let mut instances = 1u64;
        let mut loop_val: Option<(Option<u64>, String, (usize, usize))> = None;
        let mut policy = default;
        let mut priority: Option<(i64, String, (usize, usize))> = None;
        let mut cpus = None;
        let mut delay = None;
        let mut phases_node = None;
        let mut has_events = None;
        for m in self.members(t.node, &t.path)? {
            match m.key {
                "instance" => {
                    instances = u64::try_from(self.int(&m)?)
                        .ok()
                        .filter(|n| (1..=256).contains(n))
                        .ok_or_else(|| {
                            self.err(Self::at(m.node), &m.path, "give 1 to 256 instances")
                        })?
                }
                "loop" => loop_val = Some((self.count(&m)?, m.path.clone(), m.at)),
                "policy" => policy = self.policy(&m)?,
                "priority" => priority = Some((self.int(&m)?, m.path.clone(), Self::at(m.node))),
                "cpus" => cpus = Some(self.cpus(&m)?),
                "delay" => delay = Some(self.micros(&m)? * 1000),
                "phases" => phases_node = Some(m),
                k if ["run", "sleep", "timer"].iter().any(|e| k.starts_with(e))
                    || OTHER_EVENTS.iter().any(|e| k.starts_with(e)) =>
                {
                    has_events.get_or_insert(m);
                }
                _ => {
                    return Err(self.unsupported(
                        &m,
                        "the task keys read are instance, loop, policy, priority, cpus, delay, \
                         phases and the events run, runtime, sleep, timer",
                    ))
                }
            }
        }
        let phases = match (&phases_node, &has_events) {
            (Some(_), Some(e)) => {
                return Err(self.err(
                    e.at,
                    &e.path,
                    "an event beside \"phases\" (rt-app ignores it); move it into a phase",
                ))
            }
            (Some(p), None) => {
                let mut v = Vec::new();
                for ph in self.members(p.node, &p.path)? {
                    v.push(self.phase(ph.node, &ph.path, true)?);
                }
                if v.is_empty() {
                    return Err(self.err(p.at, &p.path, "no phase"));
                }
                v
            }
            (None, _) => {
                // rt-app: without phases the task is its one phase, and `loop` is that phase's
                // (default: for ever).
                let (mut ph, timer) = self.phase(t.node, &t.path, false)?;
                ph.loops = loop_val.as_ref().map(|l| l.0).unwrap_or(None);
                vec![(ph, timer)]
            }
        };
        let thread_loops = match phases_node {
            Some(_) => loop_val.as_ref().map(|l| l.0).unwrap_or(None),
            None => Some(1),
        };
        let first = &phases[0].1;
        for (_, tm) in &phases[1..] {
            if tm.period_us != first.period_us {
                return Err(self.err(
                    tm.at,
                    &format!("{}.period", tm.path),
                    format!(
                        "{} us differs from {} us ({}): a punctual task has one period",
                        tm.period_us, first.period_us, first.path
                    ),
                ));
            }
        }
        if let Some(shared) = phases
            .iter()
            .find(|p| !p.1.unique)
            .filter(|_| instances > 1)
        {
            return Err(self.err(
                shared.1.at,
                &format!("{}.ref", shared.1.path),
                "a timer shared by the task's instances: punctual gives each instance its own \
                 release; name it \"unique\"",
            ));
        }
        let period = first.period_us * 1000;
        if delay.is_some_and(|d| d >= period) {
            return Err(self.err(
                t.at,
                &format!("{}.delay", t.path),
                "must be shorter than the timer's period",
            ));
        }
        let prio = self.priority(policy, priority)?;
        let miss = if first.absolute {
            MissPolicy::CatchUp
        } else {
            MissPolicy::Skip
        };
        let loop_at = loop_val
            .map(|l| (l.1, l.2))
            .unwrap_or_else(|| (t.path.clone(), t.at));
        Ok(TaskSpec {
            name: t.key.to_string(),
            instances,
            work: Work {
                loops: thread_loops,
                phases: phases.into_iter().map(|p| p.0).collect(),
                policy: policy.name().into(),
                priority: prio,
                cpus,
                lock_pages: lock,
            },
            period,
            delay,
            miss,
            loop_at,
        })
    }

    fn cpus(&self, m: &Member) -> Result<Vec<usize>, PlanError> {
        let Value::Array(items) = &m.node.value else {
            return Err(self.err(Self::at(m.node), &m.path, "must be an array of CPU numbers"));
        };
        let v: Option<Vec<usize>> = items
            .iter()
            .map(|i| match i.value {
                Value::Int(c) if (0..4096).contains(&c) => Some(c as usize),
                _ => None,
            })
            .collect();
        v.filter(|v| !v.is_empty())
            .ok_or_else(|| self.err(Self::at(m.node), &m.path, "must be an array of CPU numbers"))
    }

    /// rt-app's priority: the nice value under SCHED_OTHER (default 0), 1-99 otherwise (default 10).
    fn priority(
        &self,
        p: Pol,
        given: Option<(i64, String, (usize, usize))>,
    ) -> Result<i32, PlanError> {
        let (lo, hi, default) = match p {
            Pol::Other => (-20, 19, 0),
            _ => (1, 99, 10),
        };
        match given {
            None => Ok(default),
            Some((v, _, _)) if (lo..=hi).contains(&v) => Ok(v as i32),
            Some((v, path, at)) => Err(self.err(
                at,
                &path,
                format!("{v}: under {} give {lo} to {hi}", p.name()),
            )),
        }
    }
}

/// Convert a file's text (`file` names it in messages, `name` becomes the plan's name).
pub fn convert(
    text: &str,
    file: &str,
    name: &str,
    client: &[String],
) -> Result<Converted, PlanError> {
    let root = json::parse(text).map_err(|e| PlanError::At {
        file: file.to_string(),
        line: e.line,
        column: e.column,
        message: e.message,
    })?;
    let mut r = Reader {
        file,
        notes: Vec::new(),
    };
    let (mut tasks_node, mut global) = (None, (None, Pol::Other, false));
    for m in r.members(&root, "")? {
        match m.key {
            "tasks" => tasks_node = Some(m),
            "global" => global = r.global(m.node)?,
            "resources" => match &m.node.value {
                Value::Object(o) if o.is_empty() => {}
                _ => return Err(r.unsupported(
                    &m,
                    "rt-app's resources (mutexes, conditions, barriers) have no plan equivalent",
                )),
            },
            _ => return Err(r.unsupported(&m, "an rt-app file has tasks, global and resources")),
        }
    }
    let tasks_node = tasks_node.ok_or_else(|| r.err((1, 1), "", "no \"tasks\" object"))?;
    let (duration_s, default, lock) = global;
    let mut specs = Vec::new();
    for t in r.members(tasks_node.node, &tasks_node.path)? {
        punctual_time::text::check_name("task", t.key).map_err(|e| r.err(t.at, &t.path, e))?;
        specs.push(r.task(&t, default, lock)?);
    }
    if specs.is_empty() {
        return Err(r.err(tasks_node.at, "tasks", "no task"));
    }
    let duration = plan_duration(&r, &specs, duration_s)?;
    let mut plan = Plan {
        name: punctual_time::text::check_name("plan", name)
            .map(|_| name.to_string())
            .unwrap_or_else(|_| "rt-app".into()),
        cpus: None,
        shield: false,
        spin_margin: MarginPolicy::Auto,
        duration,
        actions: Vec::new(),
        tasks: Vec::new(),
        events: Vec::new(),
        source: file.to_string(),
    };
    for s in &specs {
        for i in 0..s.instances {
            let name = if s.instances > 1 {
                format!("{}-{i}", s.name)
            } else {
                s.name.clone()
            };
            let mut argv = client.to_vec();
            argv.extend(s.work.to_args());
            plan.actions.push(NamedAction {
                name: name.clone(),
                action: Action::Wake {
                    channel: channel_name(&name),
                    spawn: Some(argv),
                    user: None,
                },
                cpu: None,
                wcet: None,
            });
            plan.tasks.push(Task {
                name,
                period: s.period,
                offset: s.delay.map(Offset::Fixed).unwrap_or(Offset::Auto),
                wcet: None,
                action: (plan.actions.len() - 1) as u16,
                cpu: None,
                miss: s.miss,
            });
        }
    }
    crate::parse::validate_plan(&plan).map_err(|m| r.err((1, 1), "", m))?;
    Ok(Converted {
        plan,
        notes: r.notes,
    })
}

/// How long the plan runs: the global duration, cut to when the last task ends if they all end.
/// A task that would end before the plan is refused: a plan runs every task to its end.
fn plan_duration(
    r: &Reader,
    specs: &[TaskSpec],
    global_s: Option<u64>,
) -> Result<Option<u64>, PlanError> {
    let ends: Vec<Option<u64>> = specs
        .iter()
        .map(|s| {
            s.work
                .releases()
                .map(|n| s.delay.unwrap_or(0) + n.saturating_mul(s.period))
        })
        .collect();
    let longest = ends.iter().try_fold(0u64, |a, e| e.map(|e| a.max(e)));
    let global = global_s.map(|s| s * 1_000_000_000);
    let plan = match (global, longest) {
        (Some(g), Some(l)) => Some(g.min(l)),
        (g, None) => g,
        (None, l) => l,
    };
    for (s, e) in specs.iter().zip(&ends) {
        if let Some(e) = e {
            if plan.is_none_or(|p| *e < p) {
                let until = plan
                    .map(|p| format!("for {}", crate::model::exact_duration(p)))
                    .unwrap_or_else(|| "until stopped".into());
                return Err(r.err(
                    s.loop_at.1,
                    &s.loop_at.0,
                    format!(
                        "this task ends after {} ({} releases) while the plan runs {until}: every \
                         task of a plan runs for the plan's duration; make the loops end together, \
                         or use -1 with a global duration",
                        crate::model::exact_duration(*e),
                        s.work.releases().unwrap_or(0)
                    ),
                ));
            }
        }
    }
    Ok(plan)
}

/// A wake channel name from a task name (channels are file names: a safe alphabet).
fn channel_name(task: &str) -> String {
    let mut c: String = task
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect();
    while c.starts_with('.') {
        c.remove(0);
    }
    c.truncate(56);
    format!("rtapp-{c}")
}

#[cfg(test)]
mod tests;
