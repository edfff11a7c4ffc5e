//! TOML plans (SPEC section 4). Every error names the file, the line and the column of the value at
//! fault, and how to fix it. Durations are strings with a unit (`"1500us"`); a bare number is refused.
//!
//! ```toml
//! [plan]
//! name = "av"           # optional
//! cpus = "1"            # dispatcher CPUs
//! shield = false        # real-time mode on those CPUs while running
//! spin_margin = "auto"  # or a duration
//! duration = "10s"      # optional; default: until the last event (or until stopped)
//! repeat = 3            # optional: the event table N times (KURT's rt_schedule_events(num_times)),
//! repeat_every = "10ms" #   copy k at + k * repeat_every (default: last + mean spacing)
//!
//! [[action]]            # a named action, shared by events and tasks (`use = "ping"`)
//! name = "ping"
//! kind = "udp"
//! to = "127.0.0.1:9000"
//! bytes = 64
//!
//! [[task]]
//! name = "video"
//! period = "16667us"
//! offset = "0us"        # or "auto"
//! wcet = "2ms"
//! miss = "skip"         # or "catch_up"
//! action = { kind = "exec", argv = ["/usr/bin/true"] }  # also user = "nobody", drop_caps = true
//!
//! [[event]]
//! at = "1500us"
//! use = "ping"
//! data = [1, 2, 3]      # up to 12 bytes handed to the action
//! ```

use crate::model::*;
use crate::PlanError;
use punctual_time::{parse_duration_ns, MarginPolicy};
use serde::Deserialize;
use std::collections::HashMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use toml::Spanned;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    plan: Option<RawHeader>,
    #[serde(default)]
    action: Vec<Spanned<RawAction>>,
    #[serde(default)]
    task: Vec<Spanned<RawTask>>,
    #[serde(default)]
    event: Vec<Spanned<RawEvent>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHeader {
    name: Option<Spanned<String>>,
    cpus: Option<Spanned<toml::Value>>,
    shield: Option<bool>,
    spin_margin: Option<Spanned<toml::Value>>,
    duration: Option<Spanned<toml::Value>>,
    repeat: Option<Spanned<i64>>,
    repeat_every: Option<Spanned<toml::Value>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTask {
    name: Spanned<String>,
    period: Spanned<toml::Value>,
    offset: Option<Spanned<toml::Value>>,
    wcet: Option<Spanned<toml::Value>>,
    action: Option<Spanned<RawAction>>,
    #[serde(rename = "use")]
    use_: Option<Spanned<String>>,
    cpu: Option<Spanned<i64>>,
    miss: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEvent {
    at: Spanned<toml::Value>,
    action: Option<Spanned<RawAction>>,
    #[serde(rename = "use")]
    use_: Option<Spanned<String>>,
    data: Option<Spanned<Vec<Spanned<i64>>>>,
}

#[derive(Deserialize, Clone)]
#[serde(deny_unknown_fields)]
struct RawAction {
    kind: Spanned<String>,
    name: Option<Spanned<String>>,
    cpu: Option<Spanned<i64>>,
    wcet: Option<Spanned<toml::Value>>,
    argv: Option<Spanned<Vec<String>>>,
    priority: Option<Spanned<i64>>,
    to: Option<Spanned<String>>,
    bytes: Option<Spanned<i64>>,
    channel: Option<Spanned<String>>,
    spawn: Option<Spanned<Vec<String>>>,
    path: Option<Spanned<String>>,
    symbol: Option<Spanned<String>>,
    user: Option<Spanned<toml::Value>>,
    drop_caps: Option<Spanned<bool>>,
}

/// Turns byte offsets into `file:line:column` errors.
struct Locator<'a> {
    file: &'a str,
    text: &'a str,
}

impl Locator<'_> {
    fn at(&self, span: Range<usize>, message: impl Into<String>) -> PlanError {
        let (line, column) = line_col(self.text, span.start);
        PlanError::At {
            file: self.file.to_string(),
            line,
            column,
            message: message.into(),
        }
    }
}

/// 1-based line and column (in characters) of a byte offset.
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map(|i| i + 1).unwrap_or(0);
    (line, text[line_start..offset].chars().count() + 1)
}

/// The longest time a plan may name (a period, an offset, a duration, an event's time): a year, the
/// longest run punctual accepts. Release instants are sums of these; a period of
/// 18446744073709551615ns wrapped them and the run went on past its -D (issue 19's bad-input run).
pub const MAX_TIME_NS: u64 = 365 * 86_400_000_000_000;

fn duration(loc: &Locator, field: &str, v: &Spanned<toml::Value>) -> Result<u64, PlanError> {
    match v.get_ref() {
        toml::Value::String(s) => match parse_duration_ns(s) {
            Ok(ns) if ns > MAX_TIME_NS => Err(loc.at(
                v.span(),
                format!("{field}: {} is longer than the limit of 365 days", punctual_time::text::display_name(s)),
            )),
            Ok(ns) => Ok(ns),
            Err(e) => Err(loc.at(v.span(), format!("{field}: {e}"))),
        },
        toml::Value::Integer(i) if *i < 0 => {
            Err(loc.at(v.span(), format!("{field}: {i} is negative; durations are zero or more")))
        }
        toml::Value::Integer(i) => Err(loc.at(
            v.span(),
            format!("{field}: {i} has no unit; write it as a string with a unit, e.g. {field} = \"{i}us\""),
        )),
        toml::Value::Float(f) => Err(loc.at(
            v.span(),
            format!("{field}: {f} has no unit; write it as a string with a unit, e.g. {field} = \"{f}ms\""),
        )),
        other => Err(loc.at(
            v.span(),
            format!("{field}: expected a duration string like \"250us\", found {}", other.type_str()),
        )),
    }
}

fn cpu(loc: &Locator, v: &Spanned<i64>) -> Result<usize, PlanError> {
    usize::try_from(*v.get_ref())
        .ok()
        .filter(|&c| c < 4096)
        .ok_or_else(|| {
            loc.at(
                v.span(),
                format!("cpu {} is not a CPU number (0 to 4095)", v.get_ref()),
            )
        })
}

fn check_name(loc: &Locator, what: &str, v: &Spanned<String>) -> Result<String, PlanError> {
    let s = v.get_ref().trim();
    if s.is_empty() {
        return Err(loc.at(v.span(), format!("{what} name is empty; give it a name")));
    }
    // Names are echoed in messages and tables: nothing that steers a terminal or reorders text.
    punctual_time::text::check_name(what, s).map_err(|e| loc.at(v.span(), e))?;
    // A compiled plan's header keeps names in NAME_MAX bytes: wide characters count several.
    if s.len() > NAME_MAX {
        return Err(loc.at(
            v.span(),
            format!(
                "{what} name '{}' is longer than {NAME_MAX} bytes",
                s.escape_debug()
            ),
        ));
    }
    Ok(s.to_string())
}

/// A user for an exec child: a name as in /etc/passwd, or a uid. Whether it exists on this machine
/// is checked before the run (`punctual_dispatch::preflight`), not here: a plan may be written on
/// another machine.
fn check_user(loc: &Locator, v: &Spanned<toml::Value>) -> Result<String, PlanError> {
    let s = match v.get_ref() {
        toml::Value::String(s) => s.clone(),
        toml::Value::Integer(i) if (0..=u32::MAX as i64 - 1).contains(i) => i.to_string(),
        toml::Value::Integer(i) => {
            return Err(loc.at(v.span(), format!("user: {i} is not a uid (0 to 4294967294)")))
        }
        other => {
            return Err(loc.at(
                v.span(),
                format!(
                    "user: expected a user name or uid, e.g. user = \"nobody\" or user = 65534; found {}",
                    other.type_str()
                ),
            ))
        }
    };
    let valid = !s.is_empty()
        && s.len() <= 32
        && !s.starts_with('-')
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '$'));
    if !valid {
        return Err(loc.at(
            v.span(),
            format!(
                "user '{}' is not a user name (1 to 32 of A-Z a-z 0-9 _ - . $, not starting with -) or a uid",
                s.escape_debug()
            ),
        ));
    }
    Ok(s)
}

/// A wake channel name becomes a file name under /dev/shm: keep it to a safe alphabet.
pub fn check_channel(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        && !name.starts_with('.');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "wake channel '{}' must be 1 to 64 characters of A-Z a-z 0-9 _ - . (not starting with a dot)",
            punctual_time::text::display_name(name)
        ))
    }
}

struct Builder<'a> {
    loc: Locator<'a>,
    base: Option<&'a Path>,
    actions: Vec<NamedAction>,
    by_name: HashMap<String, usize>,
    /// Inline event actions already in the table, to share one entry (and one series) between events.
    inline: HashMap<(Action, Option<usize>, Option<u64>), usize>,
}

impl Builder<'_> {
    fn resolve(&self, p: &str) -> PathBuf {
        let path = PathBuf::from(p);
        match self.base {
            Some(b) if path.is_relative() => b.join(path),
            _ => path,
        }
    }

    fn action(
        &self,
        raw: &Spanned<RawAction>,
    ) -> Result<(Action, Option<usize>, Option<u64>), PlanError> {
        let loc = &self.loc;
        let a = raw.get_ref();
        let kind = a.kind.get_ref().as_str();
        check_action_fields(loc, a, kind)?;
        let missing = |field: &str| loc.at(raw.span(), format!("a {kind} action needs '{field}'"));
        let action = match kind {
            "mark" => Action::Mark,
            "exec" => self.exec_action(a, &missing)?,
            "udp" => udp_action(loc, a, &missing)?,
            "wake" => self.wake_action(a)?,
            "plugin" => self.plugin_action(a, &missing)?,
            _ => unreachable!("kind checked above"),
        };
        let cpu = a.cpu.as_ref().map(|c| cpu(loc, c)).transpose()?;
        let wcet = a
            .wcet
            .as_ref()
            .map(|w| duration(loc, "wcet", w))
            .transpose()?;
        if wcet == Some(0) {
            return Err(loc.at(
                a.wcet.as_ref().unwrap().span(),
                "wcet must be more than zero (or leave it out)",
            ));
        }
        Ok((action, cpu, wcet))
    }

    fn exec_action(
        &self,
        a: &RawAction,
        missing: &dyn Fn(&str) -> PlanError,
    ) -> Result<Action, PlanError> {
        let loc = &self.loc;
        let argv = a.argv.as_ref().ok_or_else(|| missing("argv"))?;
        if argv.get_ref().is_empty() || argv.get_ref()[0].is_empty() {
            return Err(loc.at(
                argv.span(),
                "exec argv is empty; give the program and its arguments, e.g. [\"/usr/bin/true\"]",
            ));
        }
        let mut v = argv.get_ref().clone();
        if v[0].contains('/') {
            v[0] = self.resolve(&v[0]).to_string_lossy().into_owned();
        }
        let priority = match &a.priority {
            Some(p) if !(1..=99).contains(p.get_ref()) => {
                return Err(loc.at(
                    p.span(),
                    format!("exec priority {} is outside 1..=99", p.get_ref()),
                ))
            }
            Some(p) => Some(*p.get_ref() as u32),
            None => None,
        };
        let user = a.user.as_ref().map(|u| check_user(loc, u)).transpose()?;
        Ok(Action::Exec {
            argv: v,
            priority,
            user,
            drop_caps: a.drop_caps.as_ref().is_some_and(|d| *d.get_ref()),
        })
    }

    fn wake_action(&self, a: &RawAction) -> Result<Action, PlanError> {
        let loc = &self.loc;
        let channel = match &a.channel {
            Some(c) => {
                check_channel(c.get_ref()).map_err(|e| loc.at(c.span(), e))?;
                c.get_ref().clone()
            }
            None => String::new(), // filled with the task or action name by the caller
        };
        let spawn = match &a.spawn {
            Some(s) if s.get_ref().is_empty() || s.get_ref()[0].is_empty() => {
                return Err(loc.at(s.span(), "wake spawn is empty; give the client's argv, or drop spawn and start the client yourself"))
            }
            Some(s) => {
                let mut v = s.get_ref().clone();
                if v[0].contains('/') {
                    v[0] = self.resolve(&v[0]).to_string_lossy().into_owned();
                }
                Some(v)
            }
            None => None,
        };
        let user = a.user.as_ref().map(|u| check_user(loc, u)).transpose()?;
        Ok(Action::Wake {
            channel,
            spawn,
            user,
        })
    }

    fn plugin_action(
        &self,
        a: &RawAction,
        missing: &dyn Fn(&str) -> PlanError,
    ) -> Result<Action, PlanError> {
        let loc = &self.loc;
        let path = a.path.as_ref().ok_or_else(|| missing("path"))?;
        if !path.get_ref().contains('/') {
            return Err(loc.at(
                path.span(),
                format!(
                    "plugin path '{}' must be an explicit path (./{0} or /abs/{0}); punctual never searches the library path",
                    path.get_ref()
                ),
            ));
        }
        let symbol = match &a.symbol {
            Some(s) if s.get_ref().is_empty() || s.get_ref().contains('\0') => {
                return Err(loc.at(s.span(), "plugin symbol must be a non-empty C identifier"))
            }
            Some(s) => s.get_ref().clone(),
            None => Action::PLUGIN_SYMBOL.to_string(),
        };
        Ok(Action::Plugin {
            path: self.resolve(path.get_ref()),
            symbol,
        })
    }

    fn push(
        &mut self,
        name: String,
        action: Action,
        cpu: Option<usize>,
        wcet: Option<u64>,
        span: Range<usize>,
    ) -> Result<u16, PlanError> {
        if self.actions.len() >= MAX_ACTIONS {
            return Err(self
                .loc
                .at(span, format!("more than {MAX_ACTIONS} actions in one plan")));
        }
        let mut unique = name.clone();
        let mut n = 2;
        while self.by_name.contains_key(&unique) {
            // The suffix must keep a generated name within the 64 bytes a name may have.
            let suffix = format!(" #{n}");
            unique = format!("{}{suffix}", truncate(&name, NAME_MAX - suffix.len()));
            n += 1;
        }
        self.by_name.insert(unique.clone(), self.actions.len());
        self.actions.push(NamedAction {
            name: unique,
            action,
            cpu,
            wcet,
        });
        Ok((self.actions.len() - 1) as u16)
    }

    fn lookup(&self, use_: &Spanned<String>) -> Result<u16, PlanError> {
        self.by_name
            .get(use_.get_ref())
            .map(|&i| i as u16)
            .ok_or_else(|| {
                let mut names: Vec<&str> = self.by_name.keys().map(String::as_str).collect();
                names.sort_unstable();
                self.loc.at(
                    use_.span(),
                    format!(
                        "no [[action]] named '{}' (defined: {})",
                        punctual_time::text::display_name(use_.get_ref()),
                        if names.is_empty() {
                            "none".to_string()
                        } else {
                            names.join(", ")
                        }
                    ),
                )
            })
    }
}

/// Refuses an unknown kind, and fields that belong to other kinds: those are mistakes, not options
/// to ignore.
fn check_action_fields(loc: &Locator, a: &RawAction, kind: &str) -> Result<(), PlanError> {
    let present: [(&str, Option<Range<usize>>); 10] = [
        ("argv", a.argv.as_ref().map(|v| v.span())),
        ("priority", a.priority.as_ref().map(|v| v.span())),
        ("to", a.to.as_ref().map(|v| v.span())),
        ("bytes", a.bytes.as_ref().map(|v| v.span())),
        ("channel", a.channel.as_ref().map(|v| v.span())),
        ("spawn", a.spawn.as_ref().map(|v| v.span())),
        ("path", a.path.as_ref().map(|v| v.span())),
        ("symbol", a.symbol.as_ref().map(|v| v.span())),
        ("user", a.user.as_ref().map(|v| v.span())),
        ("drop_caps", a.drop_caps.as_ref().map(|v| v.span())),
    ];
    let allowed: &[&str] = match kind {
        "mark" => &[],
        "exec" => &["argv", "priority", "user", "drop_caps"],
        "udp" => &["to", "bytes"],
        "wake" => &["channel", "spawn", "user"],
        "plugin" => &["path", "symbol"],
        other => {
            return Err(loc.at(
                a.kind.span(),
                format!("unknown action kind '{other}' (valid: {})", Action::KINDS),
            ))
        }
    };
    for (field, span) in &present {
        if let Some(span) = span {
            if !allowed.contains(field) {
                return Err(loc.at(
                    span.clone(),
                    format!(
                        "'{field}' does not apply to a {kind} action (it takes: {})",
                        list(allowed)
                    ),
                ));
            }
        }
    }
    Ok(())
}

fn udp_action(
    loc: &Locator,
    a: &RawAction,
    missing: &dyn Fn(&str) -> PlanError,
) -> Result<Action, PlanError> {
    let to = a.to.as_ref().ok_or_else(|| missing("to"))?;
    if to.get_ref().parse::<std::net::SocketAddr>().is_err() {
        return Err(loc.at(
            to.span(),
            format!(
                "udp to '{}' is not IP:PORT; give an address such as 127.0.0.1:9000 or [::1]:9000",
                to.get_ref()
            ),
        ));
    }
    let bytes = match &a.bytes {
        None => 64,
        Some(b) => {
            let n = *b.get_ref();
            if n < UDP_HEADER as i64 || n > UDP_MAX as i64 {
                return Err(loc.at(
                    b.span(),
                    format!("udp bytes {n} is outside {UDP_HEADER}..={UDP_MAX} (the first {UDP_HEADER} bytes carry the sequence number and release time)"),
                ));
            }
            n as usize
        }
    };
    Ok(Action::Udp {
        to: to.get_ref().clone(),
        bytes,
    })
}

fn list(v: &[&str]) -> String {
    if v.is_empty() {
        "no other fields".into()
    } else {
        v.join(", ")
    }
}

/// The longest action or task name, in bytes.
const NAME_MAX: usize = 64;

/// `s` cut to at most `max` bytes on a character boundary, without trailing blanks.
fn truncate(s: &str, max: usize) -> &str {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].trim_end()
}

/// The name an inline event action gets: it must read back as a name (printable, trimmed, at most
/// 64 bytes), or a compiled plan's header would not parse (found by fuzzing, issue 18).
fn default_event_name(a: &Action) -> String {
    let raw = match a {
        Action::Mark => "mark".into(),
        Action::Exec { argv, .. } => format!("exec {}", argv[0]),
        Action::Udp { to, .. } => format!("udp {to}"),
        Action::Wake { channel, .. } => format!("wake {channel}"),
        Action::Plugin { path, symbol } => format!("plugin {}:{symbol}", path.display()),
    };
    let printable: String = raw
        .trim()
        .chars()
        .map(|c| {
            if punctual_time::text::needs_escape(c) {
                '?'
            } else {
                c
            }
        })
        .collect();
    truncate(&printable, NAME_MAX).to_string()
}

/// Read and validate a TOML plan from a file. Relative paths in `exec`, `spawn` and `plugin` are
/// taken relative to the plan's directory.
pub fn parse_file(path: &Path) -> Result<Plan, PlanError> {
    let plan = parse_file_without_events(path)?;
    validate_plan(&plan).map_err(|m| PlanError::Invalid {
        file: path.display().to_string(),
        message: m,
    })?;
    Ok(plan)
}

/// Parse and validate a TOML plan held in memory. `file` names it in errors; `base` resolves
/// relative paths (`None`: leave them relative to the working directory).
pub fn parse_str(text: &str, file: &str, base: Option<&Path>) -> Result<Plan, PlanError> {
    let plan = parse_inner(text, file, base)?;
    validate_plan(&plan).map_err(|m| PlanError::Invalid {
        file: file.to_string(),
        message: m,
    })?;
    Ok(plan)
}

/// The header of a compiled plan: a plan whose events follow separately, so it may be empty here.
pub(crate) fn parse_str_allow_empty(text: &str, file: &str) -> Result<Plan, PlanError> {
    parse_inner(text, file, None)
}

/// A TOML plan whose events come from elsewhere (`plan compile --events`): it may have no task and
/// no event yet. Call [`validate_plan`] once the events are added.
pub fn parse_file_without_events(path: &Path) -> Result<Plan, PlanError> {
    let bytes = std::fs::read(path).map_err(|source| PlanError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    // Issue 31: a binary file said only "stream did not contain valid UTF-8".
    let text = String::from_utf8(bytes).map_err(|e| PlanError::Invalid {
        file: path.display().to_string(),
        message: format!(
            "not a plan: a plan is TOML text or a compiled plan, and this is neither (byte {} is \
             not text, and the file does not start as `punctual plan compile` writes). {}",
            e.utf8_error().valid_up_to(),
            PLAN_HINT
        ),
    })?;
    let base = path.parent().map(|p| {
        if p.as_os_str().is_empty() {
            Path::new(".")
        } else {
            p
        }
    });
    parse_inner(&text, &path.display().to_string(), base)
}

/// Where a plan's form is described, for errors about files that are not plans.
const PLAN_HINT: &str =
    "A plan has [plan], [[task]] and [[event]] tables (examples/plans/basic.toml, \
     docs/plan-format.md).";

fn parse_inner(text: &str, file: &str, base: Option<&Path>) -> Result<Plan, PlanError> {
    let loc = Locator { file, text };
    let raw: RawFile = toml::from_str(text).map_err(|e| {
        let span = e.span().unwrap_or(0..0);
        let mut message = e.message().trim().to_string();
        // Text that is no plan at all (a wrong file named) is told what a plan looks like.
        if !["[plan]", "[[task]]", "[[event]]", "[[action]]"]
            .iter()
            .any(|t| text.contains(t))
        {
            message = format!("{message}; this does not look like a plan. {PLAN_HINT}");
        }
        loc.at(span, message)
    })?;
    let mut b = Builder {
        loc: Locator { file, text },
        base,
        actions: Vec::new(),
        by_name: HashMap::new(),
        inline: HashMap::new(),
    };
    let mut plan = Plan {
        name: "plan".into(),
        cpus: None,
        shield: false,
        spin_margin: MarginPolicy::Auto,
        duration: None,
        actions: Vec::new(),
        tasks: Vec::new(),
        events: Vec::new(),
        source: file.to_string(),
    };
    if let Some(h) = &raw.plan {
        header(&loc, h, &mut plan)?;
    }
    // Named actions first, so tasks and events can `use` them wherever they appear in the file.
    for a in &raw.action {
        b.named_action(a)?;
    }
    let mut task_names: HashMap<String, Range<usize>> = HashMap::new();
    for t in &raw.task {
        let task = b.task(t, &mut task_names)?;
        plan.tasks.push(task);
    }
    for e in &raw.event {
        let event = b.event(e)?;
        plan.events.push(event);
    }
    plan.events.sort_by_key(|e| e.at);
    if let Some(h) = &raw.plan {
        repeat_events(&loc, h, &mut plan.events)?;
    }
    plan.actions = b.actions;
    Ok(plan)
}

/// The most events `repeat` may expand a table to: 24 MB of events, whatever the plan's size (50
/// million let a 100-byte plan take 1.6 GB; issue 32). Longer tables are compiled (`plan compile`),
/// which keeps memory in proportion to the file.
pub const MAX_REPEATED_EVENTS: u64 = 1_000_000;

/// `repeat = N`: the event table N times, copy k shifted by k * `repeat_every` (default: the last
/// event's instant plus the table's mean spacing, so an evenly spaced table continues evenly).
/// Expanded when the plan is read, so compiled and decoded plans hold every copy.
fn repeat_events(loc: &Locator, h: &RawHeader, events: &mut Vec<Event>) -> Result<(), PlanError> {
    let Some(r) = &h.repeat else {
        if let Some(e) = &h.repeat_every {
            return Err(loc.at(e.span(), "repeat_every needs repeat = N"));
        }
        return Ok(());
    };
    let n = *r.get_ref();
    if n < 1 {
        return Err(loc.at(r.span(), format!("repeat must be at least 1, found {n}")));
    }
    let n = n as u64;
    if n == 1 {
        return Ok(());
    }
    let (Some(first), Some(last)) = (events.first().map(|e| e.at), events.last().map(|e| e.at))
    else {
        return Err(loc.at(
            r.span(),
            "repeat repeats the [[event]] table, and this plan has no event",
        ));
    };
    if n.saturating_mul(events.len() as u64) > MAX_REPEATED_EVENTS {
        return Err(loc.at(
            r.span(),
            format!(
                "repeat = {n} makes {} events from {}, more than {MAX_REPEATED_EVENTS}; compile a longer table instead",
                n.saturating_mul(events.len() as u64),
                events.len()
            ),
        ));
    }
    let every = match &h.repeat_every {
        Some(e) => duration(loc, "repeat_every", e)?,
        None if events.len() > 1 => last + (last - first) / (events.len() as u64 - 1),
        None => {
            return Err(loc.at(
                r.span(),
                "repeat with a single event needs repeat_every = \"DURATION\"",
            ))
        }
    };
    if every <= last {
        let at = h.repeat_every.as_ref().map_or(r.span(), |e| e.span());
        return Err(loc.at(
            at,
            format!(
                "repeat_every {} must be longer than the table's last event at {}, or the copies would overlap",
                exact_duration(every),
                exact_duration(last)
            ),
        ));
    }
    if (n - 1)
        .checked_mul(every)
        .and_then(|s| s.checked_add(last))
        .is_none_or(|t| t > MAX_TIME_NS)
    {
        return Err(loc.at(r.span(), "repeat * repeat_every goes past a year"));
    }
    let table = events.clone();
    events.reserve(table.len() * (n as usize - 1));
    for k in 1..n {
        events.extend(table.iter().map(|e| {
            let mut c = *e;
            c.at = e.at + k * every;
            c
        }));
    }
    Ok(())
}

/// The `[plan]` table, into the defaults already in `plan`.
fn header(loc: &Locator, h: &RawHeader, plan: &mut Plan) -> Result<(), PlanError> {
    if let Some(n) = &h.name {
        plan.name = check_name(loc, "plan", n)?;
    }
    if let Some(c) = &h.cpus {
        plan.cpus = Some(header_cpus(loc, c)?);
    }
    plan.shield = h.shield.unwrap_or(false);
    if let Some(m) = &h.spin_margin {
        plan.spin_margin = header_spin_margin(loc, m)?;
    }
    if let Some(d) = &h.duration {
        let ns = duration(loc, "duration", d)?;
        if ns == 0 {
            return Err(loc.at(
                d.span(),
                "duration must be more than zero (or leave it out)",
            ));
        }
        plan.duration = Some(ns);
    }
    Ok(())
}

fn header_cpus(loc: &Locator, c: &Spanned<toml::Value>) -> Result<Vec<usize>, PlanError> {
    let s = match c.get_ref() {
        toml::Value::String(s) => s.clone(),
        toml::Value::Integer(i) => i.to_string(),
        other => {
            return Err(loc.at(
                c.span(),
                format!(
                    "cpus: expected a CPU list like \"1\" or \"2-3\", found {}",
                    other.type_str()
                ),
            ))
        }
    };
    punctual_time::cpus::parse_cpu_list(&s).map_err(|e| loc.at(c.span(), format!("cpus: {e}")))
}

fn header_spin_margin(loc: &Locator, m: &Spanned<toml::Value>) -> Result<MarginPolicy, PlanError> {
    Ok(match m.get_ref() {
        toml::Value::String(s) if s == "auto" => MarginPolicy::Auto,
        _ => MarginPolicy::Fixed(duration(loc, "spin_margin", m).map_err(|e| match e {
            PlanError::At {
                file,
                line,
                column,
                message,
            } => PlanError::At {
                file,
                line,
                column,
                message: format!("{message}; or \"auto\""),
            },
            other => other,
        })?),
    })
}

/// A task's offset: 0 when left out, "auto", or a duration in [0, period).
fn task_offset(
    loc: &Locator,
    name: &str,
    offset: Option<&Spanned<toml::Value>>,
    period: u64,
) -> Result<Offset, PlanError> {
    Ok(match offset {
        None => Offset::Fixed(0),
        Some(o) if matches!(o.get_ref(), toml::Value::String(s) if s == "auto") => Offset::Auto,
        Some(o) => {
            let ns = duration(loc, "offset", o)?;
            if ns >= period {
                return Err(loc.at(
                    o.span(),
                    format!(
                        "task '{name}': offset {} is not less than the period {}; offsets lie in [0, period), or use \"auto\"",
                        exact_duration(ns),
                        exact_duration(period)
                    ),
                ));
            }
            Offset::Fixed(ns)
        }
    })
}

/// A task's wcet, if given: more than zero and at most the period.
fn task_wcet(
    loc: &Locator,
    name: &str,
    wcet: Option<&Spanned<toml::Value>>,
    period: u64,
) -> Result<Option<u64>, PlanError> {
    let Some(w) = wcet else {
        return Ok(None);
    };
    let ns = duration(loc, "wcet", w)?;
    if ns == 0 {
        return Err(loc.at(
            w.span(),
            format!("task '{name}': wcet must be more than zero (or leave it out)"),
        ));
    }
    if ns > period {
        return Err(loc.at(
            w.span(),
            format!(
                "task '{name}': wcet {} is above the period {}, so every release would overrun the next",
                exact_duration(ns),
                exact_duration(period)
            ),
        ));
    }
    Ok(Some(ns))
}

fn miss_policy(
    loc: &Locator,
    name: &str,
    miss: Option<&Spanned<String>>,
) -> Result<MissPolicy, PlanError> {
    match miss.map(|m| (m.get_ref().as_str(), m.span())) {
        None | Some(("skip", _)) => Ok(MissPolicy::Skip),
        Some(("catch_up", _)) | Some(("catch-up", _)) => Ok(MissPolicy::CatchUp),
        Some((other, span)) => Err(loc.at(
            span,
            format!("task '{name}': unknown miss policy '{other}' (valid: skip, catch_up)"),
        )),
    }
}

/// The `data` bytes of an event: at most [`EVENT_DATA`], each in 0..=255.
fn event_data(
    loc: &Locator,
    data: Option<&Spanned<Vec<Spanned<i64>>>>,
) -> Result<Vec<u8>, PlanError> {
    let Some(d) = data else {
        return Ok(Vec::new());
    };
    if d.get_ref().len() > EVENT_DATA {
        return Err(loc.at(
            d.span(),
            format!(
                "event data has {} bytes; at most {EVENT_DATA} fit in an event",
                d.get_ref().len()
            ),
        ));
    }
    d.get_ref()
        .iter()
        .map(|v| {
            u8::try_from(*v.get_ref()).map_err(|_| {
                loc.at(
                    v.span(),
                    format!("event data byte {} is outside 0..=255", v.get_ref()),
                )
            })
        })
        .collect()
}

impl Builder<'_> {
    /// One `[[action]]`: it must have a name, unique among named actions.
    fn named_action(&mut self, a: &Spanned<RawAction>) -> Result<(), PlanError> {
        let loc = &self.loc;
        let name = match &a.get_ref().name {
            Some(n) => check_name(loc, "action", n)?,
            None => {
                return Err(loc.at(
                    a.span(),
                    "[[action]] needs a name, so tasks and events can `use` it",
                ))
            }
        };
        if self.by_name.contains_key(&name) {
            return Err(loc.at(
                a.get_ref().name.as_ref().unwrap().span(),
                format!("a second [[action]] named '{name}'"),
            ));
        }
        let (mut action, cpu, wcet) = self.action(a)?;
        if let Action::Wake { channel, .. } = &mut action {
            if channel.is_empty() {
                check_channel(&name)
                    .map_err(|e| loc.at(a.span(), format!("{e}; or set channel")))?;
                *channel = name.clone();
            }
        }
        self.push(name, action, cpu, wcet, a.span())?;
        Ok(())
    }

    /// One `[[task]]`; `task_names` holds the names seen so far, to refuse a second one.
    fn task(
        &mut self,
        t: &Spanned<RawTask>,
        task_names: &mut HashMap<String, Range<usize>>,
    ) -> Result<Task, PlanError> {
        let loc = &self.loc;
        let rt = t.get_ref();
        let name = check_name(loc, "task", &rt.name)?;
        if task_names.insert(name.clone(), rt.name.span()).is_some() {
            return Err(loc.at(
                rt.name.span(),
                format!("a second task named '{name}'; task names must be unique"),
            ));
        }
        let period = duration(loc, "period", &rt.period)?;
        if period == 0 {
            return Err(loc.at(
                rt.period.span(),
                format!("task '{name}': period must be more than zero"),
            ));
        }
        let offset = task_offset(loc, &name, rt.offset.as_ref(), period)?;
        let wcet = task_wcet(loc, &name, rt.wcet.as_ref(), period)?;
        let cpu_ = rt.cpu.as_ref().map(|c| cpu(loc, c)).transpose()?;
        let miss = miss_policy(loc, &name, rt.miss.as_ref())?;
        let action = self.task_action(t, &name, wcet)?;
        Ok(Task {
            name,
            period,
            offset,
            wcet,
            action,
            cpu: cpu_,
            miss,
        })
    }

    /// A task's action: `use` of a named one, or an inline one added to the table under the task's name.
    fn task_action(
        &mut self,
        t: &Spanned<RawTask>,
        name: &str,
        wcet: Option<u64>,
    ) -> Result<u16, PlanError> {
        let loc = &self.loc;
        let rt = t.get_ref();
        match (&rt.action, &rt.use_) {
            (Some(_), Some(u)) => {
                Err(loc.at(u.span(), format!("task '{name}' has both action and use; keep one")))
            }
            (None, None) => {
                Err(loc.at(t.span(), format!("task '{name}' has no action; add action = {{ kind = \"mark\" }} or use = \"NAME\"")))
            }
            (None, Some(u)) => self.lookup(u),
            (Some(a), None) => {
                if let Some(c) = &a.get_ref().cpu {
                    return Err(loc.at(c.span(), format!("task '{name}': put cpu on the task, not on its inline action")));
                }
                let (mut action, _, _) = self.action(a)?;
                if let Action::Wake { channel, .. } = &mut action {
                    if channel.is_empty() {
                        check_channel(name).map_err(|e| loc.at(rt.name.span(), format!("{e}; or set channel in the wake action")))?;
                        *channel = name.to_string();
                    }
                }
                let label = a.get_ref().name.as_ref().map(|n| n.get_ref().clone()).unwrap_or_else(|| name.to_string());
                self.push(label, action, None, wcet, a.span())
            }
        }
    }

    /// One `[[event]]`.
    fn event(&mut self, e: &Spanned<RawEvent>) -> Result<Event, PlanError> {
        let re = e.get_ref();
        let at = duration(&self.loc, "at", &re.at)?;
        let action = self.event_action(e)?;
        let data = event_data(&self.loc, re.data.as_ref())?;
        Ok(Event::new(at, action, &data))
    }

    /// An event's action: `use` of a named one, or an inline one; identical unnamed inline actions
    /// share one table entry.
    fn event_action(&mut self, e: &Spanned<RawEvent>) -> Result<u16, PlanError> {
        let loc = &self.loc;
        let re = e.get_ref();
        match (&re.action, &re.use_) {
            (Some(_), Some(u)) => Err(loc.at(u.span(), "event has both action and use; keep one")),
            (None, None) => Err(loc.at(
                e.span(),
                "event has no action; add action = { kind = \"mark\" } or use = \"NAME\"",
            )),
            (None, Some(u)) => self.lookup(u),
            (Some(a), None) => {
                let (mut action, cpu_, wcet) = self.action(a)?;
                if let Action::Wake { channel, .. } = &action {
                    if channel.is_empty() {
                        return Err(loc.at(
                            a.span(),
                            "a wake action on an event needs channel = \"NAME\"",
                        ));
                    }
                }
                if let Action::Wake { channel, .. } = &mut action {
                    channel.shrink_to_fit();
                }
                let key = (action.clone(), cpu_, wcet);
                match self.inline.get(&key) {
                    Some(&i) if a.get_ref().name.is_none() => Ok(i as u16),
                    _ => {
                        let name = match &a.get_ref().name {
                            Some(n) => check_name(loc, "action", n)?,
                            None => default_event_name(&action),
                        };
                        let i = self.push(name, action, cpu_, wcet, a.span())?;
                        self.inline.insert(key, i as usize);
                        Ok(i)
                    }
                }
            }
        }
    }
}

/// Checks across the whole plan (also run on decoded binary plans).
pub fn validate_plan(plan: &Plan) -> Result<(), String> {
    if plan.tasks.is_empty() && plan.events.is_empty() {
        return Err("the plan has no [[task]] and no [[event]]: nothing to run".into());
    }
    // One release stream per wake channel.
    let mut owners: HashMap<&str, String> = HashMap::new();
    for t in &plan.tasks {
        if let Action::Wake { channel, .. } = &plan.action(t.action).action {
            if let Some(prev) = owners.insert(channel, format!("task '{}'", t.name)) {
                return Err(format!("wake channel '{channel}' is released by both {prev} and task '{}'; give each its own channel", t.name));
            }
        }
    }
    for e in &plan.events {
        if e.action as usize >= plan.actions.len() {
            return Err(format!(
                "an event names action {} but the plan has {}",
                e.action,
                plan.actions.len()
            ));
        }
    }
    for (i, a) in plan.actions.iter().enumerate() {
        if let Action::Wake { channel, .. } = &a.action {
            check_channel(channel)?;
            let used_by_events = plan.events.iter().any(|e| e.action as usize == i);
            if used_by_events {
                if let Some(prev) = owners.get(channel.as_str()) {
                    if prev.starts_with("task") {
                        return Err(format!("wake channel '{channel}' is released by {prev} and by events; give each its own channel"));
                    }
                }
            }
        }
    }
    for w in plan.events.windows(2) {
        if w[1].at < w[0].at {
            return Err("events are not sorted by time".into());
        }
    }
    // Times from a CSV or a compiled plan are checked here too: the start plus u64::MAX wrapped
    // into an instant already past (issue 32).
    if let Some(e) = plan.events.iter().find(|e| e.at > MAX_TIME_NS) {
        return Err(format!(
            "an event at {} ns is later than a year after the start (the limit of a plan's times)",
            e.at
        ));
    }
    Ok(())
}
