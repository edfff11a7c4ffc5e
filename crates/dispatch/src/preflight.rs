//! Everything `run` would refuse, found before anything on the system changes. `run` calls
//! [`check`] before it locks memory, requests cpu_dma_latency, shields or starts loads; `plan check`
//! calls it too, so "admitted" means the plan can start. `shield -- COMMAND` calls
//! [`resolve_command`] before it moves the first task.
//!
//! Nothing here changes the system. For `run`, plugins are loaded (and closed again) exactly as the
//! run loads them, so their constructors run a moment early: the run runs them anyway. `plan check`
//! ([`check_static`]) runs no code of a plugin: it reads the file (ELF header, dynamic symbols), and
//! [`runs`] lists what the plan would start and load, as whom, with which capabilities.

use crate::actions;
use punctual_plan::{Action, Plan};
use std::path::PathBuf;

/// One thing that would make `run` refuse the plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// The action at fault (`None`: the plan as a whole).
    pub action: Option<String>,
    /// What is wrong and how to fix it.
    pub message: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.action {
            Some(a) => write!(f, "action '{a}': {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

/// Problems joined for one message (`; ` between them).
pub fn describe(problems: &[Problem]) -> String {
    problems
        .iter()
        .map(Problem::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// Check every action of `plan` the way [`crate::prepare`] will use it, and the CPUs it names:
/// exec programs and wake clients resolve (PATH as execvp searches it, or an explicit path) to
/// executable regular files, exec users exist (and may be switched to), plugins load and export
/// their symbol, udp targets parse, wake channel names are valid and free (no live dispatcher,
/// nobody else's file under the name, the channel directory ours), named CPUs are online. Every
/// problem is reported, not only the first.
pub fn check(plan: &Plan) -> Result<(), Vec<Problem>> {
    check_with(plan, Plugins::Load)
}

/// [`check`] without loading any plugin: each is read as a file ([`actions::plugin::inspect`]).
/// What `plan check` runs, possibly as root.
pub fn check_static(plan: &Plan) -> Result<(), Vec<Problem>> {
    check_with(plan, Plugins::Inspect)
}

/// How plugins are checked.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Plugins {
    /// `dlopen`ed and closed, as the run will (constructors run).
    Load,
    /// Read as files, never loaded.
    Inspect,
}

fn check_with(plan: &Plan, plugins: Plugins) -> Result<(), Vec<Problem>> {
    let mut problems = Vec::new();
    let mut at = |action: &str, message: String| {
        problems.push(Problem {
            action: Some(action.to_string()),
            message,
        })
    };
    for named in &plan.actions {
        let name = named.name.as_str();
        match &named.action {
            Action::Mark => {}
            Action::Exec { argv, user, .. } => {
                if let Some(p) = argv.first() {
                    if let Err(m) = actions::exec::resolve(p) {
                        at(name, m);
                    }
                }
                if let Some(u) = user {
                    match punctual_rt::child::Credentials::lookup(u) {
                        Err(m) => at(name, m),
                        Ok(c) => {
                            // SAFETY: geteuid has no preconditions.
                            let euid = unsafe { libc::geteuid() };
                            if euid != 0 && c.uid != euid {
                                at(
                                    name,
                                    format!(
                                        "user = \"{u}\" needs root to switch to (punctual runs as uid {euid}); run as root or drop user"
                                    ),
                                );
                            }
                        }
                    }
                }
            }
            Action::Udp { to, .. } => {
                if to.parse::<std::net::SocketAddr>().is_err() {
                    at(
                        name,
                        format!("udp to '{to}' is not IP:PORT (e.g. 127.0.0.1:9000)"),
                    );
                }
            }
            Action::Wake {
                channel,
                spawn,
                user,
            } => {
                if let Some(u) = user {
                    match punctual_rt::child::Credentials::lookup(u) {
                        Err(m) => at(name, m),
                        Ok(c) => {
                            // SAFETY: geteuid has no preconditions.
                            let euid = unsafe { libc::geteuid() };
                            if euid != 0 && c.uid != euid {
                                at(
                                    name,
                                    format!(
                                        "user = \"{u}\" needs root to admit another user's client (punctual runs as uid {euid}); run as root or drop user"
                                    ),
                                );
                            }
                        }
                    }
                }
                if let Err(m) = punctual_plan::parse::check_channel(channel) {
                    at(name, m);
                } else if let Err(e) = punctual_periodic::channel::available(
                    &punctual_periodic::channel::shm_dir(),
                    channel,
                ) {
                    at(name, e.to_string());
                }
                if let Some(p) = spawn.as_ref().and_then(|s| s.first()) {
                    if let Err(m) = actions::exec::resolve(p) {
                        at(name, format!("spawn: {m}"));
                    }
                }
            }
            Action::Plugin { path, symbol } => {
                let r = match plugins {
                    Plugins::Load => actions::plugin::probe(path, symbol),
                    Plugins::Inspect => actions::plugin::inspect(path, symbol),
                };
                if let Err(m) = r {
                    at(name, m);
                }
            }
        }
    }
    let mut cpus = plan.named_cpus();
    cpus.extend(plan.cpus.iter().flatten());
    cpus.sort_unstable();
    cpus.dedup();
    if let Err(e) = punctual_rt::affinity::check_online(&cpus) {
        problems.push(Problem {
            action: None,
            message: format!("the plan names CPUs that cannot be used: {e}"),
        });
    }
    if let Err(m) = punctual_plan::parse::validate_plan(plan) {
        problems.push(Problem {
            action: None,
            message: m,
        });
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems)
    }
}

/// One thing a plan runs: a program it starts or a library it loads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Runs {
    /// The action's name.
    pub action: String,
    /// `exec`, `wake client` or `plugin`.
    pub kind: &'static str,
    /// The program as it resolves (or as written, when it does not), or the plugin's path and
    /// symbol.
    pub what: String,
    /// The user it runs as.
    pub user: String,
    /// The capabilities it keeps.
    pub capabilities: String,
    /// Its scheduling (`FIFO 10`, or `normal`).
    pub sched: String,
}

/// Everything `plan` would run, in plan order: programs (exec actions, spawned wake clients) and
/// plugins (code loaded into punctual itself, on the dispatcher thread), each with the user it runs
/// as and the capabilities it keeps. Nothing is run or loaded to find this.
pub fn runs(plan: &Plan) -> Vec<Runs> {
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    let me = user_name(euid);
    let caps_of = |uid: u32| {
        if uid == 0 {
            "all (root's)".to_string()
        } else {
            "none".to_string()
        }
    };
    let program = |p: &str| {
        actions::exec::resolve(p)
            .map(|r| punctual_rt::text::display_path(&r))
            .unwrap_or_else(|_| punctual_rt::text::display_name(p).into_owned())
    };
    let mut out = Vec::new();
    for named in &plan.actions {
        let action = punctual_rt::text::display_name(&named.name).into_owned();
        match &named.action {
            Action::Exec {
                argv,
                priority,
                user,
                drop_caps,
            } => {
                let uid = user
                    .as_deref()
                    .and_then(|u| punctual_rt::child::Credentials::lookup(u).ok())
                    .map_or(euid, |c| c.uid);
                out.push(Runs {
                    action,
                    kind: "exec",
                    what: argv.first().map(|p| program(p)).unwrap_or_default(),
                    user: user
                        .as_deref()
                        .map(|u| punctual_rt::text::display_name(u).into_owned())
                        .unwrap_or_else(|| me.clone()),
                    capabilities: if *drop_caps {
                        "none (drop_caps)".into()
                    } else {
                        caps_of(uid)
                    },
                    sched: priority.map_or("normal".into(), |p| format!("FIFO {p}")),
                });
            }
            Action::Wake {
                spawn: Some(argv),
                user,
                ..
            } => out.push(Runs {
                action,
                kind: "wake client",
                what: argv.first().map(|p| program(p)).unwrap_or_default(),
                user: user
                    .as_deref()
                    .map(|u| punctual_rt::text::display_name(u).into_owned())
                    .unwrap_or_else(|| me.clone()),
                capabilities: if user.is_some() {
                    "none (another user)".into()
                } else {
                    caps_of(euid)
                },
                sched: "its own".into(),
            }),
            Action::Plugin { path, symbol } => out.push(Runs {
                action,
                kind: "plugin",
                what: format!(
                    "{} ({})",
                    punctual_rt::text::display_path(path),
                    punctual_rt::text::display_name(symbol)
                ),
                user: format!("{me} (inside punctual)"),
                capabilities: caps_of(euid),
                sched: "the dispatcher's".into(),
            }),
            _ => {}
        }
    }
    out
}

fn user_name(uid: u32) -> String {
    nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
        .ok()
        .flatten()
        .map_or_else(|| format!("uid {uid}"), |u| u.name)
}

/// The program `punctual shield -- COMMAND` would start, resolved as execvp resolves it (PATH, or
/// a path with a `/`), so a typo is a usage error before the shield moves anything.
pub fn resolve_command(argv: &[String]) -> Result<PathBuf, String> {
    let Some(p) = argv.first().filter(|p| !p.is_empty()) else {
        return Err("the command after -- is empty; give a program to run".into());
    };
    actions::exec::resolve(p).map_err(|m| {
        m.replacen("exec program", "command", 1).replacen(
            "give its full path",
            "give its full path after --",
            1,
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(text: &str) -> Plan {
        punctual_plan::parse_str(text, "t.toml", None).unwrap()
    }

    #[test]
    fn validation_before_any_change_finds_every_bad_action() {
        let p = plan(
            r#"
[plan]
shield = true
cpus = "1023"
[[task]]
name = "missing"
period = "10ms"
action = { kind = "exec", argv = ["/nonexistent/cmd"] }
[[task]]
name = "typo"
period = "10ms"
action = { kind = "exec", argv = ["definitely-not-a-program-xyz"] }
[[task]]
name = "who"
period = "10ms"
action = { kind = "exec", argv = ["/bin/true"], user = "no-such-user-punctual" }
[[task]]
name = "lib"
period = "10ms"
action = { kind = "plugin", path = "/nonexistent/libx.so" }
[[task]]
name = "dir"
period = "10ms"
action = { kind = "plugin", path = "/tmp/" }
[[task]]
name = "client"
period = "10ms"
action = { kind = "wake", spawn = ["/nonexistent/client"] }
"#,
        );
        let problems = check(&p).unwrap_err();
        let text = describe(&problems);
        for want in [
            "action 'missing': exec program /nonexistent/cmd does not exist",
            "action 'typo': exec program 'definitely-not-a-program-xyz' is not in PATH",
            "action 'who': user 'no-such-user-punctual' does not exist",
            "action 'lib': plugin /nonexistent/libx.so does not exist",
            "action 'dir': plugin /tmp/ is not a regular file",
            "action 'client': spawn: exec program /nonexistent/client does not exist",
            "CPUs that cannot be used",
        ] {
            assert!(text.contains(want), "missing '{want}' in: {text}");
        }
        assert_eq!(problems.len(), 7, "{text}");
    }

    #[test]
    fn a_plan_that_can_start_passes() {
        let p = plan(
            r#"
[[task]]
name = "ok"
period = "10ms"
action = { kind = "exec", argv = ["true"] }
[[event]]
at = "1ms"
action = { kind = "udp", to = "127.0.0.1:9" }
"#,
        );
        assert_eq!(check(&p), Ok(()));
    }

    #[test]
    fn a_plugin_that_does_not_load_is_found_before_the_run() {
        let dir = tempfile::tempdir().unwrap();
        let lib = dir.path().join("libbroken.so");
        std::fs::write(&lib, b"not an ELF file").unwrap();
        let text = format!(
            "[[task]]\nname = \"p\"\nperiod = \"10ms\"\naction = {{ kind = \"plugin\", path = \"{}\" }}\n",
            lib.display()
        );
        let e = describe(&check(&plan(&text)).unwrap_err());
        assert!(e.contains("cannot be loaded"), "{e}");
    }

    #[test]
    fn the_shield_command_is_resolved_before_anything_moves() {
        let e = resolve_command(&["/nonexistent/cmd".into()]).unwrap_err();
        assert!(e.contains("command /nonexistent/cmd does not exist"), "{e}");
        let e = resolve_command(&["definitely-not-a-program-xyz".into()]).unwrap_err();
        assert!(e.contains("not in PATH"), "{e}");
        assert!(resolve_command(&[]).is_err());
        let p = resolve_command(&["sh".into(), "-c".into(), "true".into()]).unwrap();
        assert!(p.is_absolute() && p.ends_with("sh"), "{}", p.display());
    }
}
