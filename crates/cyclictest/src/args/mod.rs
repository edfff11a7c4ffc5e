//! rt-tests cyclictest's command line (version 2.4, `process_options` in `cyclictest.c`), read the
//! way its `getopt_long` reads it: short options clustered (`-mq`), values attached or as the next
//! word (`-i200`, `-i 200`), long options by unique prefix (`--dur=10`), and cyclictest's own habit
//! of taking the word after `-a`, `-t`, `-A` and `--secaligned` as their optional value when it looks
//! like one (`-t 2`, `-a 0-1`). Flags punctual cannot honour are refused by name, with what to use
//! instead; nothing here touches the system.

use crate::DropinError;
use punctual_result::Output;
use punctual_rt::Policy;
use punctual_time::ClockId;
use std::path::PathBuf;

/// cyclictest's largest histogram (`HIST_MAX`).
pub const HIST_MAX: u64 = 1_000_000;
/// cyclictest's defaults: `-i 1000`, `-d 500` (microseconds).
pub const DEFAULT_INTERVAL_US: u64 = 1000;
pub const DEFAULT_DISTANCE_US: u64 = 500;

/// How a flag takes its value.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Has {
    No,
    Required,
    /// Attached only (`-t4`, `--threads=4`), or cyclictest's look at the next word.
    Optional,
}

/// Every option cyclictest 2.4 knows, plus `-n` (gone from 2.4, still in many scripts) and
/// punctual's own `--punctual-json`.
const OPTIONS: &[(&str, Option<char>, Has)] = &[
    ("affinity", Some('a'), Has::Optional),
    ("aligned", Some('A'), Has::Optional),
    ("breaktrace", Some('b'), Has::Required),
    ("clock", Some('c'), Has::Required),
    ("default-system", None, Has::No),
    ("distance", Some('d'), Has::Required),
    ("duration", Some('D'), Has::Required),
    ("latency", None, Has::Required),
    ("fifo", Some('F'), Has::Required),
    ("histogram", Some('h'), Has::Required),
    ("histofall", Some('H'), Has::Required),
    ("histfile", None, Has::Required),
    ("interval", Some('i'), Has::Required),
    ("json", None, Has::Required),
    ("laptop", None, Has::No),
    ("loops", Some('l'), Has::Required),
    ("mainaffinity", None, Has::Required),
    ("mlockall", Some('m'), Has::No),
    ("refresh_on_max", Some('M'), Has::No),
    ("nsecs", Some('N'), Has::No),
    ("nanosleep", Some('n'), Has::No),
    ("oscope", Some('o'), Has::Required),
    ("priority", Some('p'), Has::Required),
    ("quiet", Some('q'), Has::No),
    ("priospread", None, Has::No),
    ("relative", Some('r'), Has::No),
    ("resolution", Some('R'), Has::No),
    ("secaligned", None, Has::Optional),
    ("system", Some('s'), Has::No),
    ("smi", None, Has::No),
    ("smp", Some('S'), Has::No),
    ("spike", None, Has::Required),
    ("spike-nodes", None, Has::Required),
    ("threads", Some('t'), Has::Optional),
    ("tracemark", None, Has::No),
    ("unbuffered", Some('u'), Has::No),
    ("verbose", Some('v'), Has::No),
    ("dbg_cyclictest", None, Has::No),
    ("policy", None, Has::Required),
    ("help", Some('?'), Has::No),
    ("posix_timers", Some('x'), Has::No),
    ("punctual-json", None, Has::Required),
];

/// Flags punctual does not honour: the flag, and what to use instead.
const REFUSED: &[(&str, &str)] = &[
    (
        "breaktrace",
        "punctual does not stop a kernel trace on a threshold; `--punctual-json FILE` keeps every \
         figure, `punctual latency --fail-above 100us` exits 1 above a bound, and \
         `punctual trace record` records a kernel trace",
    ),
    (
        "tracemark",
        "punctual writes no trace marks; record a kernel trace with `punctual trace record`",
    ),
    (
        "fifo",
        "no named pipe; `--punctual-json FILE` writes every figure at the end, and \
         `punctual monitor` serves live figures",
    ),
    (
        "resolution",
        "the clock's resolution is not checked here; `punctual bench gaps` measures the timeline's \
         gaps",
    ),
    (
        "smi",
        "punctual reads no SMI counters (x86 MSRs); `punctual trace record` shows what interrupted a CPU",
    ),
    (
        "priospread",
        "punctual runs every thread at one priority; give it with -p",
    ),
    (
        "dbg_cyclictest",
        "no equivalent (cyclictest's own debug output)",
    ),
];

/// Where the histogram goes and how.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hist {
    /// Buckets (`-h N`): values 0..N-1 of the unit, the rest overflows.
    pub buckets: usize,
    /// `-H`: also a column over all threads.
    pub all: bool,
    /// `--histfile`: to this file instead of standard output.
    pub file: Option<PathBuf>,
}

/// When the threads stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Until {
    /// Until interrupted (cyclictest's default).
    Stopped,
    /// `-l N` samples per thread.
    Loops(u64),
    /// `-D`, in seconds.
    Seconds(u64),
}

/// How threads wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wait {
    /// clock_nanosleep to absolute times (the default; `-n`).
    Absolute,
    /// Relative sleeps (`-r`, and `-s`'s nanosleep).
    Relative,
    /// POSIX timers and a signal (`-x`).
    PosixTimer,
}

/// A cyclictest command line, with cyclictest's defaults and its rules applied.
#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    /// The CPU of each thread.
    pub cpus: Vec<usize>,
    /// `-a` named CPUs (cyclictest then says which thread got which, with `-v`).
    pub affinity_given: bool,
    pub interval_us: u64,
    /// Added to each next thread's interval (0 with a histogram).
    pub distance_us: u64,
    pub until: Until,
    pub policy: Policy,
    pub priority: u32,
    pub mlock: bool,
    /// `/dev/cpu_dma_latency` held at this (`None`: `--laptop`, `--default-system`).
    pub dma_latency_us: Option<u32>,
    pub clock: ClockId,
    pub wait: Wait,
    /// `-A`: thread `i` starts `i * offset` us late; `--secaligned`: on the next second + offset.
    pub aligned_us: Option<u64>,
    pub secaligned_us: Option<u64>,
    pub hist: Option<Hist>,
    pub json: Option<Output>,
    pub punctual_json: Option<Output>,
    pub quiet: bool,
    pub verbose: bool,
    pub nsecs: bool,
    /// `-o`: with `-v`, the largest of every this many samples.
    pub oscope: u64,
    pub refresh_on_max: bool,
    pub spike: Option<u64>,
    pub spike_nodes: usize,
    pub main_affinity: Option<Vec<usize>>,
    /// What cyclictest would have said on standard error while reading the flags.
    pub notes: Vec<String>,
}

/// What a command line asks for.
#[derive(Clone, Debug, PartialEq)]
pub enum Parsed {
    Help,
    Run(Box<Settings>),
}

fn usage(flag: &str, why: impl Into<String>) -> DropinError {
    DropinError::Usage {
        flag: flag.to_string(),
        why: why.into(),
    }
}

/// The flag as the user would recognise it: `-i/--interval`.
fn spelled(long: &str) -> String {
    match OPTIONS.iter().find(|o| o.0 == long).and_then(|o| o.1) {
        Some(c) => format!("-{c}/--{long}"),
        None => format!("--{long}"),
    }
}

fn number(long: &str, v: &str) -> Result<u64, DropinError> {
    v.trim().parse::<u64>().map_err(|_| {
        usage(
            &spelled(long),
            format!("'{v}' is not a whole number (cyclictest's units: microseconds, counts)"),
        )
    })
}

/// cyclictest's `atoi(next) != 0` test for the optional values it reads from the next word.
fn looks_numeric(w: &str) -> bool {
    let digits: String = w.chars().take_while(|c| c.is_ascii_digit()).collect();
    digits.parse::<u64>().is_ok_and(|n| n > 0)
}

/// `-D`: seconds, or with a suffix m, h, d (cyclictest's `parse_time_string`; `s` is accepted too).
pub fn parse_seconds(v: &str) -> Result<u64, DropinError> {
    let digits: String = v.chars().take_while(|c| c.is_ascii_digit()).collect();
    let rest = &v[digits.len()..];
    let n: u64 = digits.parse().map_err(|_| {
        usage(
            "-D/--duration",
            format!("'{v}': give seconds, or a number with m, h or d (10, 5m, 2h, 1d)"),
        )
    })?;
    let scale = match rest {
        "" | "s" | "S" => 1,
        "m" | "M" => 60,
        "h" | "H" => 3600,
        "d" | "D" => 86_400,
        _ => {
            return Err(usage(
                "-D/--duration",
                format!("'{v}': the unit must be s, m, h or d (10, 5m, 2h, 1d)"),
            ))
        }
    };
    n.checked_mul(scale)
        .filter(|&s| s <= 365 * 86_400)
        .ok_or_else(|| usage("-D/--duration", format!("'{v}' is longer than a year")))
}

/// libnuma's CPU strings as cyclictest takes them: a list (`0-3,5`), `all`, or `!LIST` (every
/// online CPU but those).
pub fn parse_cpuset(flag: &str, v: &str, online: &[usize]) -> Result<Vec<usize>, DropinError> {
    let cpus = if v == "all" {
        online.to_vec()
    } else if let Some(not) = v.strip_prefix('!') {
        let skip = punctual_rt::parse_cpu_list(not).map_err(|e| usage(flag, e.to_string()))?;
        online
            .iter()
            .copied()
            .filter(|c| !skip.contains(c))
            .collect()
    } else if v.starts_with('+') {
        return Err(usage(
            flag,
            format!("'{v}': CPUs relative to a cpuset (+) are not supported; name them (0-3)"),
        ));
    } else {
        punctual_rt::parse_cpu_list(v).map_err(|e| usage(flag, e.to_string()))?
    };
    if cpus.is_empty() {
        return Err(usage(flag, format!("'{v}' names no CPU")));
    }
    if let Some(c) = cpus.iter().find(|c| !online.contains(c)) {
        return Err(usage(
            flag,
            format!(
                "CPU {c} is not online (online: {})",
                punctual_rt::format_cpu_list(online)
            ),
        ));
    }
    Ok(cpus)
}

/// Options as read, before cyclictest's rules run over them.
#[derive(Default)]
struct Raw {
    affinity: Option<Option<String>>,
    threads: Option<Option<u64>>,
    smp: bool,
    interval: Option<u64>,
    distance: Option<u64>,
    loops: u64,
    duration: u64,
    priority: Option<u64>,
    policy: Option<Policy>,
    mlock: bool,
    latency: u32,
    no_dma: bool,
    clock: u64,
    relative: bool,
    system: bool,
    posix: bool,
    aligned: Option<u64>,
    secaligned: Option<u64>,
    histogram: u64,
    histofall: bool,
    histfile: Option<PathBuf>,
    json: Option<Output>,
    punctual_json: Option<Output>,
    quiet: bool,
    verbose: bool,
    nsecs: bool,
    oscope: u64,
    refresh: bool,
    spike: Option<u64>,
    spike_nodes: Option<u64>,
    main_affinity: Option<String>,
    help: bool,
}

/// One option and what came with it; `next` is the word after it when the option may look there.
struct Seen<'a> {
    long: &'static str,
    value: Option<&'a str>,
    next: Option<&'a str>,
}

/// Read a command line (the words after `cyclictest`). `online` are the CPUs to place threads on.
pub fn parse(args: &[String], online: &[usize]) -> Result<Parsed, DropinError> {
    let mut raw = Raw {
        oscope: 1,
        ..Raw::default()
    };
    let mut i = 0;
    while i < args.len() {
        let word = args[i].as_str();
        i += 1;
        if word == "--" {
            if let Some(extra) = args.get(i) {
                return Err(usage(
                    extra,
                    "cyclictest takes no arguments besides options",
                ));
            }
            break;
        }
        let next = args.get(i).map(String::as_str);
        if let Some(long) = word.strip_prefix("--") {
            let (name, value) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (long, None),
            };
            let (full, has) = find_long(name)?;
            let value = match (has, value) {
                (Has::No, Some(_)) => {
                    return Err(usage(&format!("--{full}"), "takes no value"));
                }
                (Has::Required, None) => {
                    let v = next.ok_or_else(|| usage(&spelled(full), "needs a value"))?;
                    i += 1;
                    Some(v)
                }
                (_, v) => v,
            };
            // cyclictest reads the word after some options as their value (`-t 2`).
            if take(
                &mut raw,
                Seen {
                    long: full,
                    value,
                    next,
                },
            )? {
                i += 1;
            }
        } else if let Some(cluster) = word.strip_prefix('-').filter(|c| !c.is_empty()) {
            for (at, c) in cluster.char_indices() {
                let (full, has) = OPTIONS
                    .iter()
                    .find(|o| o.1 == Some(c))
                    .map(|o| (o.0, o.2))
                    .ok_or_else(|| {
                        usage(
                            &format!("-{c}"),
                            "unknown option; see `punctual cyclictest --help`",
                        )
                    })?;
                let rest = &cluster[at + c.len_utf8()..];
                let value = match has {
                    Has::No => None,
                    _ if !rest.is_empty() => Some(rest),
                    Has::Optional => None,
                    Has::Required => {
                        let v = next.ok_or_else(|| {
                            // `-h` alone is often a request for help.
                            let hint = if c == 'h' { " (help: --help)" } else { "" };
                            usage(&spelled(full), format!("needs a value{hint}"))
                        })?;
                        i += 1;
                        Some(v)
                    }
                };
                if take(
                    &mut raw,
                    Seen {
                        long: full,
                        value,
                        next,
                    },
                )? {
                    i += 1;
                }
                if has != Has::No {
                    break;
                }
            }
        } else {
            return Err(usage(
                word,
                "cyclictest takes no arguments besides options; see `punctual cyclictest --help`",
            ));
        }
    }
    if raw.help {
        return Ok(Parsed::Help);
    }
    settle(raw, online).map(|s| Parsed::Run(Box::new(s)))
}

/// A long option by its name or a unique prefix of it (getopt_long's rule).
fn find_long(name: &str) -> Result<(&'static str, Has), DropinError> {
    if let Some(o) = OPTIONS.iter().find(|o| o.0 == name) {
        return Ok((o.0, o.2));
    }
    let matches: Vec<_> = OPTIONS.iter().filter(|o| o.0.starts_with(name)).collect();
    match matches.as_slice() {
        [o] if !name.is_empty() => Ok((o.0, o.2)),
        [] | [_] => Err(usage(
            &format!("--{name}"),
            "unknown option; see `punctual cyclictest --help`",
        )),
        many => Err(usage(
            &format!("--{name}"),
            format!(
                "ambiguous: --{}",
                many.iter().map(|o| o.0).collect::<Vec<_>>().join(", --")
            ),
        )),
    }
}

/// Record one option. Returns whether it used the next word as its value.
fn take(raw: &mut Raw, seen: Seen<'_>) -> Result<bool, DropinError> {
    let Seen { long, value, next } = seen;
    if let Some((_, instead)) = REFUSED.iter().find(|r| r.0 == long) {
        return Err(DropinError::Unsupported {
            flag: spelled(long),
            instead: (*instead).to_string(),
        });
    }
    let val = || value.unwrap_or_default();
    let num = |v: &str| number(long, v);
    let mut used_next = false;
    // cyclictest's optional values: attached, or the next word when it looks like one.
    let mut optional = |numeric: bool| -> Option<String> {
        match (value, next) {
            (Some(v), _) => Some(v.to_string()),
            (None, Some(n))
                if looks_numeric(n)
                    || (!numeric && (n.starts_with(['0', '!', '+']) || n == "all")) =>
            {
                used_next = true;
                Some(n.to_string())
            }
            _ => None,
        }
    };
    match long {
        "affinity" => raw.affinity = Some(optional(false)),
        "threads" => {
            raw.threads = Some(match optional(true) {
                Some(v) => Some(number(long, &v)?),
                None => None,
            })
        }
        "aligned" => raw.aligned = Some(optional(true).map(|v| num(&v)).transpose()?.unwrap_or(0)),
        "secaligned" => {
            raw.secaligned = Some(optional(true).map(|v| num(&v)).transpose()?.unwrap_or(0))
        }
        "smp" => raw.smp = true,
        "interval" => raw.interval = Some(num(val())?),
        "distance" => raw.distance = Some(num(val())?),
        "loops" => raw.loops = num(val())?,
        "duration" => raw.duration = parse_seconds(val())?,
        "priority" => {
            let p = num(val())?;
            raw.priority = Some(p);
            // cyclictest: a priority makes the policy FIFO unless RR was chosen.
            if !matches!(raw.policy, Some(Policy::Fifo | Policy::Rr)) {
                raw.policy = Some(Policy::Fifo);
            }
        }
        "policy" => raw.policy = Some(policy(val())?),
        "mlockall" => raw.mlock = true,
        "latency" => {
            raw.latency = u32::try_from(num(val())?)
                .map_err(|_| usage("--latency", "too large for a latency request"))?
        }
        "laptop" | "default-system" => raw.no_dma = true,
        "clock" => raw.clock = num(val())?,
        "relative" => raw.relative = true,
        "system" => raw.system = true,
        "posix_timers" => raw.posix = true,
        "nanosleep" | "unbuffered" => {}
        "histogram" | "histofall" => {
            raw.histofall |= long == "histofall";
            raw.histogram = num(val())?;
            if raw.histogram == 0 {
                return Err(usage(
                    &spelled(long),
                    "give the largest latency to bucket, e.g. 400",
                ));
            }
        }
        "histfile" => raw.histfile = Some(PathBuf::from(val())),
        "json" => raw.json = Some(output("--json", val())?),
        "punctual-json" => raw.punctual_json = Some(output("--punctual-json", val())?),
        "quiet" => raw.quiet = true,
        "verbose" => raw.verbose = true,
        "nsecs" => raw.nsecs = true,
        "oscope" => raw.oscope = num(val())?,
        "refresh_on_max" => raw.refresh = true,
        "spike" => raw.spike = Some(num(val())?),
        "spike-nodes" => raw.spike_nodes = Some(num(val())?),
        "mainaffinity" => raw.main_affinity = Some(val().to_string()),
        "help" => raw.help = true,
        other => unreachable!("option --{other} is in the table but not handled"),
    }
    Ok(used_next)
}

fn output(flag: &str, v: &str) -> Result<Output, DropinError> {
    v.parse().map_err(|e: String| usage(flag, e))
}

/// cyclictest's `--policy` names.
fn policy(v: &str) -> Result<Policy, DropinError> {
    match v {
        "other" | "normal" => Ok(Policy::Other),
        "fifo" => Ok(Policy::Fifo),
        "rr" => Ok(Policy::Rr),
        "batch" | "idle" => Err(DropinError::Unsupported {
            flag: format!("--policy {v}"),
            instead: "punctual measures in fifo, rr or other; use --policy other".into(),
        }),
        _ => Err(usage(
            "--policy",
            format!("'{v}': give other, normal, batch, idle, fifo or rr"),
        )),
    }
}

/// Which CPU each thread runs on, and whether `-a` named them (`-S`, `-t`, `-a` with cyclictest's
/// precedence).
fn placement(
    raw: &Raw,
    online: &[usize],
    notes: &mut Vec<String>,
) -> Result<(Vec<usize>, bool), DropinError> {
    let mut affinity = None;
    if raw.smp {
        if raw.threads.is_some() {
            notes.push("-t ignored due to smp mode".to_string());
        }
        if raw.affinity.is_some() {
            notes.push("-a ignored due to smp mode".to_string());
        }
    } else if let Some(Some(a)) = &raw.affinity {
        affinity = Some(parse_cpuset("-a/--affinity", a, online)?);
    }
    let pool = affinity.clone().unwrap_or_else(|| online.to_vec());
    let threads = match (raw.smp, raw.threads) {
        (true, _) | (false, Some(None)) => pool.len() as u64,
        (false, Some(Some(n))) => n,
        (false, None) => 1,
    };
    if threads == 0 || threads > punctual_latency::MAX_THREADS as u64 {
        return Err(usage(
            "-t/--threads",
            format!(
                "{threads}: give 1 to {} threads",
                punctual_latency::MAX_THREADS
            ),
        ));
    }
    let cpus = (0..threads as usize)
        .map(|i| pool[i % pool.len()])
        .collect();
    Ok((cpus, affinity.is_some()))
}

/// Policy and priority with cyclictest's rules: a priority means FIFO, a real-time policy without
/// one gets threads + 1.
fn scheduling(
    raw: &Raw,
    threads: usize,
    notes: &mut Vec<String>,
) -> Result<(Policy, u32), DropinError> {
    let mut policy = raw.policy.unwrap_or(Policy::Other);
    let mut priority = raw.priority.unwrap_or(0);
    if priority > 99 {
        return Err(usage("-p/--priority", format!("{priority}: give 0 to 99")));
    }
    if priority > 0 && !policy.is_realtime() {
        notes.push("policy and priority don't match: setting policy to SCHED_FIFO".into());
        policy = Policy::Fifo;
    }
    if policy.is_realtime() && priority == 0 {
        priority = (threads as u64 + 1).min(99);
        notes.push(format!("defaulting realtime priority to {priority}"));
    }
    Ok((policy, priority as u32))
}

/// cyclictest's rules after reading (the end of `process_options`).
fn settle(raw: Raw, online: &[usize]) -> Result<Settings, DropinError> {
    let mut notes = Vec::new();
    let (cpus, affinity_given) = placement(&raw, online, &mut notes)?;
    let (policy, priority) = scheduling(&raw, cpus.len(), &mut notes)?;
    let mut histogram = raw.histogram;
    if histogram > HIST_MAX {
        notes.push(format!(
            "-h {histogram} is more than cyclictest's {HIST_MAX}: using {HIST_MAX}"
        ));
        histogram = HIST_MAX;
    }
    if histogram > 0 && raw.distance.is_some() {
        notes.push("distance is ignored and set to 0, if histogram enabled".into());
    }
    let distance_us = if histogram > 0 {
        0
    } else {
        raw.distance.unwrap_or(DEFAULT_DISTANCE_US)
    };
    if raw.oscope < 1 {
        return Err(usage("-o/--oscope", "give 1 or more"));
    }
    if raw.oscope > 1 && !raw.verbose {
        return Err(usage(
            "-o/--oscope",
            "-o option only meaningful, if verbose (add -v)",
        ));
    }
    if raw.aligned.is_some() && raw.secaligned.is_some() {
        return Err(usage("-A/--aligned", "give -A or --secaligned, not both"));
    }
    let clock = match raw.clock {
        0 => ClockId::Monotonic,
        1 => ClockId::Realtime,
        c => {
            return Err(usage(
                "-c/--clock",
                format!("{c}: give 0 (monotonic) or 1 (realtime)"),
            ))
        }
    };
    let wait = match (raw.system, raw.posix, raw.relative) {
        (true, true, _) => {
            return Err(DropinError::Unsupported {
                flag: "-s/--system with -x/--posix_timers".into(),
                instead: "setitimer is not measured; use -x alone (POSIX timers) or -s alone"
                    .into(),
            })
        }
        (_, true, true) => {
            return Err(DropinError::Unsupported {
                flag: "-r/--relative with -x/--posix_timers".into(),
                instead: "punctual's POSIX timers are absolute; use -x or -r".into(),
            })
        }
        (_, true, false) => Wait::PosixTimer,
        // -s: nanosleep(2), a relative sleep on the monotonic clock, as -r's.
        (true, false, _) | (false, false, true) => Wait::Relative,
        (false, false, false) => Wait::Absolute,
    };
    let interval_us = raw.interval.unwrap_or(DEFAULT_INTERVAL_US);
    if interval_us == 0 {
        return Err(usage("-i/--interval", "must be more than zero, e.g. 1000"));
    }
    let until = match (raw.loops, raw.duration) {
        (0, 0) => Until::Stopped,
        (l, 0) => Until::Loops(l),
        (0, d) => Until::Seconds(d),
        // Both: whichever ends the first thread's run first.
        (l, d) if l.saturating_mul(interval_us) <= d.saturating_mul(1_000_000) => Until::Loops(l),
        (_, d) => Until::Seconds(d),
    };
    if raw.spike_nodes.is_some() && raw.spike.is_none() {
        notes.push("--spike-nodes without --spike: no spikes are recorded".into());
    }
    let main_affinity = raw
        .main_affinity
        .as_deref()
        .map(|m| parse_cpuset("--mainaffinity", m, online))
        .transpose()?;
    Ok(Settings {
        cpus,
        affinity_given,
        interval_us,
        distance_us,
        until,
        policy,
        priority,
        mlock: raw.mlock,
        dma_latency_us: (!raw.no_dma).then_some(raw.latency),
        clock,
        wait,
        aligned_us: raw.aligned,
        secaligned_us: raw.secaligned,
        hist: (histogram > 0).then(|| Hist {
            buckets: histogram as usize,
            all: raw.histofall,
            file: raw.histfile.clone(),
        }),
        json: raw.json,
        punctual_json: raw.punctual_json,
        quiet: raw.quiet,
        verbose: raw.verbose,
        nsecs: raw.nsecs,
        oscope: raw.oscope,
        refresh_on_max: raw.refresh,
        spike: raw.spike,
        spike_nodes: raw.spike_nodes.unwrap_or(1024) as usize,
        main_affinity,
        notes,
    })
    .and_then(|s| {
        if raw.histfile.is_some() && s.hist.is_none() {
            Err(usage(
                "--histfile",
                "writes the histogram of -h/-H; add -h N",
            ))
        } else {
            Ok(s)
        }
    })
}

#[cfg(test)]
mod tests;
