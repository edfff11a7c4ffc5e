//! Spin budgets and client placement: how far each dispatcher's automatic margin and each `wake`
//! client's lead may grow, so that spinning towards releases never starves a CPU's other tasks, and
//! which CPUs the wake clients run on.

use crate::config::{RunConfig, WAKE_SPIN_BUDGET};
use punctual_plan::{ActionKind, Event, Plan, Task};

/// Releases a second of the plan's tasks and events that `task` and `event` select (periodic tasks
/// at their rates, one-shot events over their span, at least 1 ms).
pub fn releases_per_second(
    plan: &Plan,
    task: impl Fn(&Task) -> bool,
    event: impl Fn(&Event) -> bool,
) -> f64 {
    let mut per_second: f64 = plan
        .tasks
        .iter()
        .filter(|t| task(t))
        .map(|t| 1e9 / t.period as f64)
        .sum();
    let events = plan.events.iter().filter(|e| event(e)).count();
    if events > 0 {
        let span = plan.last_event().unwrap_or(0).max(1_000_000) as f64;
        per_second += events as f64 * 1e9 / span;
    }
    per_second
}

/// The longest spin per release that keeps `per_second` releases within `budget` of a CPU: never
/// below 2 us; `u64::MAX` without releases.
pub fn spin_cap(per_second: f64, budget: f64) -> u64 {
    if per_second <= 0.0 {
        return u64::MAX;
    }
    ((budget * 1e9 / per_second) as u64).max(2_000)
}

/// The most an automatic `wake` lead may grow to: [`WAKE_SPIN_BUDGET`] of a CPU shared among every
/// wake release of the plan. Each released client spins for its lead; without a bound, leads that
/// grow with a late wake-up make many clients spin at once, they hold every CPU, the kernel's normal
/// tasks starve and the fair server (or RT throttling) takes the CPUs away for tens of milliseconds,
/// which makes the wake-ups later still.
pub fn wake_lead_cap(plan: &Plan) -> u64 {
    let is_wake = |a: u16| plan.action(a).action.kind() == ActionKind::Wake;
    spin_cap(
        releases_per_second(plan, |t| is_wake(t.action), |e| is_wake(e.action)),
        WAKE_SPIN_BUDGET,
    )
}

/// The most each action's automatic `wake` lead may grow to (indexed by action; `u64::MAX` for
/// other kinds): [`WAKE_SPIN_BUDGET`] of the CPU its client runs on, shared among the wake
/// releases of the clients placed there (`placed`: action, CPU). A client not placed may run
/// anywhere, with any other: its cap is [`wake_lead_cap`]'s, as if every client shared one CPU.
///
/// With `n` clients of period `P` spread over `m` CPUs, each CPU releases `n / m` of them,
/// `P m / n` apart, and each lead may grow to half of that: leads on one CPU never overlap and
/// spin at most half of it, and the cap does not shrink as clients are added when CPUs are
/// added with them (30 clients at 10 ms on 15 CPUs: 2.5 ms, the period's own 2 ms bound rules).
///
/// A dispatcher CPU that runs clients too (`shared`: each such CPU with its margin cap) spins
/// before every hand-over it makes, for every client wherever it runs: a lead that reaches back
/// over another release's instant puts that spin on a client of its own at its instant (a (c)
/// row with 15 clients on each of 2 CPUs read `dispatcher` 483 times, leads at their 333 us cap
/// with releases 333 us apart). So the leads of what it releases are also held to the spacing of
/// its releases, less its margin cap and `CLIENT_READ_NS`.
pub fn wake_lead_caps(
    plan: &Plan,
    placed: &[(u16, usize)],
    run_cpus: &[usize],
    shared: &[(usize, u64)],
) -> Vec<u64> {
    let rate = |a: u16| -> f64 {
        plan.tasks
            .iter()
            .filter(|t| t.action == a)
            .map(|t| 1e9 / t.period as f64)
            .sum::<f64>()
            + releases_per_second(plan, |_| false, |e| e.action == a)
    };
    let anywhere = wake_lead_cap(plan);
    (0..plan.actions.len() as u16)
        .map(|a| {
            if plan.action(a).action.kind() != ActionKind::Wake {
                return u64::MAX;
            }
            let Some(&(_, cpu)) = placed.iter().find(|(x, _)| *x == a) else {
                return anywhere;
            };
            let on_cpu: f64 = placed
                .iter()
                .filter(|(_, c)| *c == cpu)
                .map(|(x, _)| rate(*x))
                .sum();
            let cap = spin_cap(on_cpu, WAKE_SPIN_BUDGET);
            match shared
                .iter()
                .find(|(l, _)| releases_from(plan, a, *l, run_cpus))
            {
                Some(&(l, margin)) => cap.min(
                    spin_cap(released_on(plan, l, run_cpus), 1.0)
                        .saturating_sub(margin)
                        .saturating_sub(CLIENT_READ_NS)
                        .max(2_000),
                ),
                None => cap,
            }
        })
        .collect()
}

/// How long a client takes past its instant to read its clock: a dispatcher on its CPU keeps
/// off it that long ([`wake_lead_caps`]).
pub const CLIENT_READ_NS: u64 = 5_000;

/// Whether dispatcher CPU `cpu` releases wake action `a` (its tasks' `cpu`, or the run's first).
fn releases_from(plan: &Plan, a: u16, cpu: usize, run_cpus: &[usize]) -> bool {
    plan.tasks
        .iter()
        .any(|t| t.action == a && Plan::cpu_of(t.cpu, run_cpus) == cpu)
}

/// Wake releases a second that dispatcher CPU `cpu` makes.
fn released_on(plan: &Plan, cpu: usize, run_cpus: &[usize]) -> f64 {
    let wake = |a: u16| plan.action(a).action.kind() == ActionKind::Wake;
    releases_per_second(
        plan,
        |t| wake(t.action) && Plan::cpu_of(t.cpu, run_cpus) == cpu,
        |_| false,
    )
}

/// CPUs for `n` wake clients, in the order of their releases' phases: round robin over the
/// online CPUs that run no dispatcher, without `busy_irq` (the CPU taking the most device
/// interrupts); over every online CPU when fewer than two run no dispatcher. With phases spread
/// evenly over the period, each CPU's clients are then spread evenly too, as far apart as they
/// can be. On 2 CPUs, 30 clients on the one without the dispatcher had leads capped at 167 us,
/// and under disk load (c) read `lead` 2,095-2,439 times, below (b); on both, 91-94 % against
/// 76-79 %.
pub fn place_clients(
    n: usize,
    run_cpus: &[usize],
    online: &[usize],
    busy_irq: Option<usize>,
) -> Vec<usize> {
    let mut cpus: Vec<usize> = online
        .iter()
        .copied()
        .filter(|c| !run_cpus.contains(c))
        .collect();
    if cpus.len() < 2 {
        // Too few to spread over: the dispatchers' CPUs take clients too (their leads keep the
        // hand-overs clear of those clients' instants, see `wake_lead_caps`).
        cpus = online.to_vec();
    } else if let Some(b) = busy_irq {
        cpus.retain(|&c| c != b);
    }
    (0..n).map(|i| cpus[i % cpus.len()]).collect()
}

/// The CPU a shield should hold: `preferred`, unless it is `busy_irq` (the CPU taking the most
/// device interrupts) and another CPU is online, then the last other one. A shield moves every
/// IRQ it can, but a managed one (a single-queue disk's) stays, and its interrupts and the
/// softirqs they raise land among the shielded releases: under disk load, (d)'s 30 clients read
/// `softirq` BLOCK 495-628 times in 10 s on the disk's CPU.
pub fn quiet_cpu(preferred: usize, online: &[usize], busy_irq: Option<usize>) -> usize {
    match busy_irq {
        Some(b) if b == preferred => online
            .iter()
            .rev()
            .copied()
            .find(|&c| c != b)
            .unwrap_or(preferred),
        _ => preferred,
    }
}

/// The online CPU that took the most device interrupts (numbered IRQs of /proc/interrupts) over
/// `watch`, if any took at least 100 a second.
pub fn busiest_irq_cpu(watch: std::time::Duration) -> Option<usize> {
    let device = |m: &std::collections::BTreeMap<String, Vec<u64>>| -> Vec<u64> {
        let mut per = Vec::new();
        for (label, counts) in m {
            if !label.starts_with(|c: char| c.is_ascii_digit()) {
                continue;
            }
            per.resize(per.len().max(counts.len()), 0);
            for (i, n) in counts.iter().enumerate() {
                per[i] += n;
            }
        }
        per
    };
    let before = device(&punctual_bench::gaps::read_interrupts());
    std::thread::sleep(watch);
    let after = device(&punctual_bench::gaps::read_interrupts());
    let secs = watch.as_secs_f64().max(1e-3);
    after
        .iter()
        .enumerate()
        .map(|(i, a)| (i, a.saturating_sub(before.get(i).copied().unwrap_or(0))))
        .filter(|&(_, d)| d as f64 / secs >= 100.0)
        .max_by_key(|&(_, d)| d)
        .map(|(i, _)| i)
}

/// The most the dispatcher's automatic margin may grow to on `cpu`: `budget` (by default
/// [`DISPATCH_SPIN_BUDGET`](crate::DISPATCH_SPIN_BUDGET)) of the mean time between the releases it
/// dispatches there (for a single task, half its period). Many tasks on one CPU bring releases
/// closer than the margin a bursty host teaches the loop, which then never sleeps; the CPU's
/// normal tasks starve and the fair server stops everything for 50 ms once a second. A shielded CPU (`shielded`) has no normal tasks left to starve: no cap.
pub fn dispatch_margin_cap(
    plan: &Plan,
    run_cpus: &[usize],
    cpu: usize,
    budget: Option<f64>,
) -> u64 {
    let Some(budget) = budget else {
        return u64::MAX;
    };
    let per_second = releases_per_second(
        plan,
        |t| Plan::cpu_of(t.cpu, run_cpus) == cpu,
        |e| Plan::cpu_of(plan.action(e.action).cpu, run_cpus) == cpu,
    );
    spin_cap(per_second, budget)
}

/// The spin budget a dispatcher CPU keeps to (`None`: none) and whether its loop may treat it as
/// shielded. Wake clients may share the CPU with the dispatcher (real-time mode with the processes
/// pinned there): a dispatcher spinning through releases at its higher priority would starve them,
/// and one whose margin plus the clients' lead fills the spacing wakes for the next release right at
/// a client's instant and preempts it (kurt-periodic's (d) row: p50 176 us late with 167 + 167 us
/// in 333 us). So a CPU with wake actions keeps the budget even when shielded, less the share the
/// clients' leads take ([`WAKE_SPIN_BUDGET`]).
pub fn cpu_spin(cfg: &RunConfig, wakes: bool) -> (Option<f64>, bool) {
    if wakes {
        (Some(cfg.spin_budget * (1.0 - WAKE_SPIN_BUDGET)), false)
    } else {
        (cfg.admitted_spin(), cfg.shielded)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::DISPATCH_SPIN_BUDGET;

    fn plan(text: &str) -> Plan {
        punctual_plan::parse_str(text, "t.toml", None).unwrap()
    }

    /// 30 wake tasks at 10 ms, 300 us apart, each with `extra` lines.
    fn thirty_wake_tasks(extra: &str) -> String {
        (0..30)
            .map(|i| {
                format!(
                    "[[task]]\nname = \"t{i}\"\nperiod = \"10ms\"\noffset = \"{}us\"\n{extra}action = {{ kind = \"wake\" }}\n",
                    i * 300
                )
            })
            .collect()
    }

    #[test]
    fn the_wake_spin_budget_is_shared_among_every_wake_release() {
        // 30 wake tasks at 10 ms: 3000 releases a second share half a CPU, 166 us each.
        let mut text = thirty_wake_tasks("");
        // mark releases do not spin and do not count.
        text += "[[task]]\nname = \"m\"\nperiod = \"100us\"\noffset = \"50us\"\naction = { kind = \"mark\" }\n";
        assert_eq!(wake_lead_cap(&plan(&text)), 166_666);
        let one = "[[task]]\nname = \"t\"\nperiod = \"10ms\"\naction = { kind = \"wake\" }\n";
        assert_eq!(
            wake_lead_cap(&plan(one)),
            5_000_000,
            "the period's own bound (2 ms) applies below this"
        );
        let none = "[[task]]\nname = \"t\"\nperiod = \"1ms\"\naction = { kind = \"mark\" }\n";
        assert_eq!(wake_lead_cap(&plan(none)), u64::MAX);
    }

    #[test]
    fn the_lead_cap_is_per_cpu_the_clients_run_on_not_per_plan() {
        let p = plan(&thirty_wake_tasks(""));
        // Placed on 15 CPUs (1 to 15), two each: 200 releases a second per CPU, half of 5 ms.
        let placed: Vec<(u16, usize)> = place_clients(30, &[0], &(0..16).collect::<Vec<_>>(), None)
            .into_iter()
            .enumerate()
            .map(|(i, c)| (i as u16, c))
            .collect();
        assert!(
            placed.iter().all(|&(_, c)| c != 0),
            "none on the dispatcher's CPU"
        );
        for c in 1..16 {
            assert_eq!(placed.iter().filter(|&&(_, x)| x == c).count(), 2);
        }
        let caps = wake_lead_caps(&p, &placed, &[0], &[]);
        assert!(caps.iter().all(|&c| c == 2_500_000), "{caps:?}");
        // Not placed: as if all shared one CPU (the plan's cap, 166 us).
        assert!(wake_lead_caps(&p, &[], &[0], &[])
            .iter()
            .all(|&c| c == 166_666));
        // All 30 on one CPU: the same as the plan's.
        let one: Vec<(u16, usize)> = (0..30).map(|i| (i, 1)).collect();
        assert!(wake_lead_caps(&p, &one, &[0], &[])
            .iter()
            .all(|&c| c == 166_666));
        // Other kinds are not capped by it.
        let mixed =
            plan("[[task]]\nname = \"m\"\nperiod = \"1ms\"\naction = { kind = \"mark\" }\n");
        assert_eq!(wake_lead_caps(&mixed, &[], &[0], &[]), vec![u64::MAX]);
    }

    /// 30 clients at 10 ms, 15 on each of 2 CPUs, one of them the dispatcher's (margin cap 83 us):
    /// each CPU alone would allow 333 us of lead, but the dispatcher's CPU makes a release every
    /// 333 us, so every lead it hands over stops 83 + 5 us short of that (245 us); with no
    /// client on the dispatcher's CPU, 333 us.
    #[test]
    fn a_dispatcher_cpu_with_clients_holds_every_lead_it_releases_to_its_spacing() {
        let p = plan(&thirty_wake_tasks(""));
        let placed: Vec<(u16, usize)> = place_clients(30, &[1], &[0, 1], None)
            .into_iter()
            .enumerate()
            .map(|(i, c)| (i as u16, c))
            .collect();
        let shared = wake_lead_caps(&p, &placed, &[1], &[(1, 83_333)]);
        assert!(
            shared
                .iter()
                .all(|&c| c == 333_333 - 83_333 - CLIENT_READ_NS),
            "{shared:?}"
        );
        let apart = wake_lead_caps(&p, &placed, &[1], &[]);
        assert!(apart.iter().all(|&c| c == 333_333), "{apart:?}");
        // A shared CPU that releases none of them changes nothing.
        assert_eq!(wake_lead_caps(&p, &placed, &[1], &[(0, 83_333)]), apart);
    }

    #[test]
    fn clients_are_placed_off_the_dispatcher_and_the_busy_interrupt_cpu() {
        let online = [0, 1, 2, 3];
        assert_eq!(
            place_clients(5, &[3], &online, Some(0)),
            vec![1, 2, 1, 2, 1]
        );
        // Two CPUs, the dispatcher on one: both take clients, busy or not.
        assert_eq!(place_clients(3, &[1], &[0, 1], Some(0)), vec![0, 1, 0]);
        assert_eq!(place_clients(3, &[1], &[0, 1], Some(1)), vec![0, 1, 0]);
        // Nothing but the dispatcher's CPU: there.
        assert_eq!(place_clients(2, &[0], &[0], None), vec![0, 0]);
    }

    #[test]
    fn a_shielded_cpu_with_wake_clients_keeps_the_spin_budget() {
        let shielded = RunConfig {
            shielded: true,
            ..RunConfig::default()
        };
        assert_eq!(cpu_spin(&shielded, false), (None, true));
        let share = DISPATCH_SPIN_BUDGET * (1.0 - WAKE_SPIN_BUDGET);
        let with_clients = Some(share);
        assert_eq!(
            cpu_spin(&shielded, true),
            (with_clients, false),
            "its clients may run on that CPU"
        );
        let plain = RunConfig::default();
        assert_eq!(cpu_spin(&plain, false), (Some(DISPATCH_SPIN_BUDGET), false));
        assert_eq!(cpu_spin(&plain, true), (with_clients, false));
        // 30 clients at 10 ms: a release every 333 us; their leads (at most half of it) and the
        // dispatcher's margin (a quarter) leave a gap, so the dispatcher never spins at an instant.
        let spacing = 1e9 / 3000.0;
        let lead = spacing * WAKE_SPIN_BUDGET;
        let margin = spacing * share;
        assert!(lead + margin < spacing * 0.8, "{lead} + {margin}");
    }

    #[test]
    fn the_dispatcher_may_spin_half_of_its_cpu_unless_the_cpu_is_shielded() {
        // 30 tasks at 10 ms on CPU 1, one at 1 ms on CPU 0, 1000 events over 1 s on CPU 0.
        let mut text = thirty_wake_tasks("cpu = 1\n");
        text += "[[task]]\nname = \"m\"\nperiod = \"1ms\"\naction = { kind = \"mark\" }\n";
        for i in 1..=1000 {
            text += &format!("[[event]]\nat = \"{i}ms\"\naction = {{ kind = \"mark\" }}\n");
        }
        let p = plan(&text);
        assert_eq!(
            dispatch_margin_cap(&p, &[0], 1, Some(DISPATCH_SPIN_BUDGET)),
            166_666
        );
        assert_eq!(
            dispatch_margin_cap(&p, &[0], 0, Some(DISPATCH_SPIN_BUDGET)),
            250_000,
            "1000 task releases and 1000 events a second"
        );
        assert_eq!(dispatch_margin_cap(&p, &[0], 1, None), u64::MAX);
        assert_eq!(
            dispatch_margin_cap(&p, &[0], 2, Some(DISPATCH_SPIN_BUDGET)),
            u64::MAX,
            "nothing on CPU 2"
        );
    }

    #[test]
    fn a_shield_keeps_off_the_cpu_of_the_busiest_device_interrupt() {
        assert_eq!(quiet_cpu(1, &[0, 1], Some(1)), 0);
        assert_eq!(quiet_cpu(1, &[0, 1], Some(0)), 1);
        assert_eq!(quiet_cpu(1, &[0, 1], None), 1);
        assert_eq!(quiet_cpu(15, &(0..16).collect::<Vec<_>>(), Some(15)), 14);
        // Nowhere else to go.
        assert_eq!(quiet_cpu(0, &[0], Some(0)), 0);
    }
}
