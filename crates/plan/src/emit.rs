//! Writing a plan back as TOML, in a canonical form the parser reads back to the same plan: every
//! action in the table as a named `[[action]]`, tasks and events referring to them with `use`.

use crate::model::*;
use punctual_time::MarginPolicy;
use std::fmt::Write;

fn q(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

fn q_list(v: &[String]) -> String {
    let items: Vec<String> = v.iter().map(|s| q(s)).collect();
    format!("[{}]", items.join(", "))
}

/// The header, the action table and the tasks (everything but the events).
pub fn header_toml(plan: &Plan) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "[plan]");
    let _ = writeln!(s, "name = {}", q(&plan.name));
    if let Some(c) = &plan.cpus {
        let list: Vec<String> = c.iter().map(|c| c.to_string()).collect();
        let _ = writeln!(s, "cpus = {}", q(&list.join(",")));
    }
    let _ = writeln!(s, "shield = {}", plan.shield);
    let margin = match plan.spin_margin {
        MarginPolicy::Auto => "auto".to_string(),
        MarginPolicy::Fixed(ns) => exact_duration(ns),
    };
    let _ = writeln!(s, "spin_margin = {}", q(&margin));
    if let Some(d) = plan.duration {
        let _ = writeln!(s, "duration = {}", q(&exact_duration(d)));
    }
    for a in &plan.actions {
        let _ = writeln!(s, "\n[[action]]");
        let _ = writeln!(s, "name = {}", q(&a.name));
        let _ = writeln!(s, "kind = {}", q(a.action.kind().name()));
        if let Some(c) = a.cpu {
            let _ = writeln!(s, "cpu = {c}");
        }
        if let Some(w) = a.wcet {
            let _ = writeln!(s, "wcet = {}", q(&exact_duration(w)));
        }
        match &a.action {
            Action::Mark => {}
            Action::Exec {
                argv,
                priority,
                user,
                drop_caps,
            } => {
                let _ = writeln!(s, "argv = {}", q_list(argv));
                if let Some(p) = priority {
                    let _ = writeln!(s, "priority = {p}");
                }
                if let Some(u) = user {
                    let _ = writeln!(s, "user = {}", q(u));
                }
                // Written only when set, so plans without it stay readable by older versions.
                if *drop_caps {
                    let _ = writeln!(s, "drop_caps = true");
                }
            }
            Action::Udp { to, bytes } => {
                let _ = writeln!(s, "to = {}\nbytes = {bytes}", q(to));
            }
            Action::Wake {
                channel,
                spawn,
                user,
            } => {
                let _ = writeln!(s, "channel = {}", q(channel));
                if let Some(sp) = spawn {
                    let _ = writeln!(s, "spawn = {}", q_list(sp));
                }
                if let Some(u) = user {
                    let _ = writeln!(s, "user = {}", q(u));
                }
            }
            Action::Plugin { path, symbol } => {
                let _ = writeln!(
                    s,
                    "path = {}\nsymbol = {}",
                    q(&path.to_string_lossy()),
                    q(symbol)
                );
            }
        }
    }
    for t in &plan.tasks {
        let _ = writeln!(s, "\n[[task]]");
        let _ = writeln!(s, "name = {}", q(&t.name));
        let _ = writeln!(s, "period = {}", q(&exact_duration(t.period)));
        let off = match t.offset {
            Offset::Auto => "auto".to_string(),
            Offset::Fixed(o) => exact_duration(o),
        };
        let _ = writeln!(s, "offset = {}", q(&off));
        if let Some(w) = t.wcet {
            let _ = writeln!(s, "wcet = {}", q(&exact_duration(w)));
        }
        if let Some(c) = t.cpu {
            let _ = writeln!(s, "cpu = {c}");
        }
        let _ = writeln!(s, "miss = {}", q(t.miss.name()));
        let _ = writeln!(s, "use = {}", q(&plan.action(t.action).name));
    }
    s
}

/// One `[[event]]` table.
pub fn event_toml(plan: &Plan, e: &Event, out: &mut String) {
    let _ = write!(
        out,
        "\n[[event]]\nat = {}\nuse = {}\n",
        q(&exact_duration(e.at)),
        q(&plan.action(e.action).name)
    );
    if e.len > 0 {
        let bytes: Vec<String> = e.data().iter().map(|b| b.to_string()).collect();
        let _ = writeln!(out, "data = [{}]", bytes.join(", "));
    }
}

/// The whole plan as TOML.
pub fn to_toml(plan: &Plan) -> String {
    let mut s = header_toml(plan);
    for e in &plan.events {
        event_toml(plan, e, &mut s);
    }
    s
}
