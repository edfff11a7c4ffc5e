use super::*;

const CLIENT: &[&str] = &["/usr/bin/punctual", "__rtapp-task"];

fn conv(text: &str) -> Result<Converted, PlanError> {
    let client: Vec<String> = CLIENT.iter().map(|s| s.to_string()).collect();
    convert(text, "t.json", "t", &client)
}

fn refused(text: &str) -> String {
    match conv(text) {
        Err(e) => e.to_string(),
        Ok(c) => panic!("accepted: {:?}", c.plan),
    }
}

/// rt-app's tutorial example 2 (10 % load), as shipped.
const EXAMPLE2: &str = r#"{
	/*
	 * Simple use case which creates 10% load
	 * until the use case is stopped with Ctrl+C
	 */
	"tasks" : {
		"thread0" : {
			"instance" : 1,
			"loop" : -1,
			"run" :   10000,
			"timer" : { "ref" : "unique", "period" : 100000 }
		}
	},
	"global" : {
		"duration" : 2,
		"calibration" : "CPU0",
		"default_policy" : "SCHED_OTHER",
		"pi_enabled" : false,
		"lock_pages" : false,
		"logdir" : "./",
		"log_basename" : "rt-app2",
		"ftrace" : true,
		"gnuplot" : true
	}
}"#;

#[test]
fn a_timer_task_becomes_a_periodic_task_with_a_wake_client_doing_the_run() {
    let c = conv(EXAMPLE2).unwrap();
    let p = &c.plan;
    assert_eq!(p.duration, Some(2_000_000_000));
    assert_eq!(p.tasks.len(), 1);
    let t = &p.tasks[0];
    assert_eq!(
        (t.name.as_str(), t.period, t.miss),
        ("thread0", 100_000_000, MissPolicy::Skip)
    );
    // rt-app starts its threads as they come; the plan spreads them over the period.
    assert_eq!(t.offset, Offset::Auto);
    let Action::Wake { channel, spawn, .. } = &p.action(t.action).action else {
        panic!("{:?}", p.actions)
    };
    assert_eq!(channel, "rtapp-thread0");
    assert_eq!(
        spawn.as_ref().unwrap().join(" "),
        "/usr/bin/punctual __rtapp-task --loop 1 --phase forever:run=10ms --policy other --priority 0"
    );
    // Calibration and logging keys are read and explained, not silently dropped.
    assert_eq!(c.notes.len(), 2, "{:?}", c.notes);
    assert!(c.notes[0].starts_with("global.calibration"));
    assert!(c.notes[1].contains("global.logdir") && c.notes[1].contains("global.gnuplot"));
    // The TOML form reads back to the same plan.
    let toml = crate::emit::to_toml(p);
    let back = crate::parse_str(&toml, "t.toml", None).unwrap();
    assert_eq!(back.tasks, p.tasks);
    assert_eq!(back.actions, p.actions);
}

#[test]
fn phases_instances_and_loops_make_tasks_of_one_period_and_a_plan_that_ends_with_them() {
    // rt-app's tutorial example 3: 12 instances, 10 light then 10 heavy periods, once.
    let text = r#"{ "tasks" : { "thread0" : {
        "instance" : 12, "loop" : 1, "policy" : "SCHED_FIFO", "priority" : 20, "cpus" : [0, 1],
        "phases" : {
            "light" : { "loop" : 10, "run" : 3000, "timer" : { "ref" : "unique", "period" : 30000 } },
            "heavy" : { "loop" : 10, "run" : 27000, "timer" : { "ref" : "unique", "period" : 30000 } }
        } } } }"#;
    let p = conv(text).unwrap().plan;
    assert_eq!(p.tasks.len(), 12);
    assert_eq!(p.tasks[11].name, "thread0-11");
    // 20 releases of 30 ms: the plan ends with the tasks.
    assert_eq!(p.duration, Some(600_000_000));
    let Action::Wake { spawn, .. } = &p.actions[3].action else {
        panic!()
    };
    let args = &spawn.as_ref().unwrap()[2..];
    let w = Work::from_args(args).unwrap();
    assert_eq!(w.releases(), Some(20));
    assert_eq!((w.policy.as_str(), w.priority), ("fifo", 20));
    assert_eq!(w.cpus, Some(vec![0, 1]));
    assert_eq!(w.phases[1].steps, vec![Step::Run(27_000_000)]);
}

#[test]
fn absolute_timers_catch_up_and_delays_become_offsets() {
    let text = r#"{ "tasks" : { "a" : { "delay" : 500, "run" : 10, "sleep" : 20, "runtime" : 5,
        "timer" : { "ref" : "t", "period" : 1000, "mode" : "absolute" } } } }"#;
    let p = conv(text).unwrap().plan;
    assert_eq!(p.tasks[0].miss, MissPolicy::CatchUp);
    assert_eq!(p.tasks[0].offset, Offset::Fixed(500_000));
    assert_eq!(
        p.duration, None,
        "loop -1 and no global duration: until stopped"
    );
    let Action::Wake { spawn, .. } = &p.actions[0].action else {
        panic!()
    };
    assert!(spawn
        .as_ref()
        .unwrap()
        .join(" ")
        .contains("--phase forever:run=10us,sleep=20us,runtime=5us"));
}

#[test]
fn unsupported_keys_and_events_are_refused_by_name_path_and_place() {
    for (text, want) in [
        (
            r#"{ "tasks" : { "t" : { "run" : 1, "lock" : "m", "timer" : { "ref" : "u", "period" : 9 } } } }"#,
            "t.json:1:34: tasks.t.lock: \"lock\" is not supported: the lock event",
        ),
        (
            "{ \"tasks\" : { \"t\" : {\n  \"run\" : 1,\n  \"resume1\" : \"x\" } } }",
            "t.json:3:3: tasks.t.resume1: \"resume1\" is not supported: the resume event",
        ),
        (
            r#"{ "tasks" : { "t" : { "dl-runtime" : 5, "run" : 1 } } }"#,
            "tasks.t.dl-runtime: \"dl-runtime\" is not supported",
        ),
        (
            r#"{ "global" : { "taskgroup" : "x" }, "tasks" : {} }"#,
            "global.taskgroup: \"taskgroup\" is not supported",
        ),
        (
            r#"{ "tasks" : { "t" : { "policy" : "SCHED_DEADLINE", "run" : 1 } } }"#,
            "tasks.t.policy: SCHED_DEADLINE is not supported",
        ),
        (
            r#"{ "tasks" : { "t" : { "run" : 1, "sleep" : 2 } } }"#,
            "tasks.t: no timer event",
        ),
        (
            r#"{ "tasks" : { "t" : { "timer" : { "ref" : "u", "period" : 9 }, "run" : 1 } } }"#,
            "tasks.t.run: comes after the timer (tasks.t.timer)",
        ),
        (
            r#"{ "tasks" : { "t" : { "phases" : {
                "a" : { "run" : 1, "timer" : { "ref" : "u", "period" : 10 } },
                "b" : { "run" : 1, "timer" : { "ref" : "u", "period" : 20 } } } } } }"#,
            "tasks.t.phases.b.timer.period: 20 us differs from 10 us",
        ),
        (
            r#"{ "tasks" : { "t" : { "phases" : {
                "a" : { "cpus" : [1], "run" : 1, "timer" : { "ref" : "u", "period" : 10 } } } } } }"#,
            "tasks.t.phases.a.cpus: \"cpus\" is not supported: per-phase",
        ),
        (
            r#"{ "tasks" : { "t" : { "instance" : 2, "run" : 1, "timer" : { "ref" : "tick", "period" : 10 } } } }"#,
            "tasks.t.timer.ref: a timer shared by the task's instances",
        ),
        (
            r#"{ "tasks" : { "t" : { "run" : 1, "run" : 2, "timer" : { "ref" : "u", "period" : 10 } } } }"#,
            "tasks.t.run: appears twice",
        ),
        (
            r#"{ "tasks" : {
                "a" : { "loop" : 5, "run" : 1, "timer" : { "ref" : "u", "period" : 1000 } },
                "b" : { "loop" : 10, "run" : 1, "timer" : { "ref" : "u", "period" : 1000 } } } }"#,
            "tasks.a.loop: this task ends after 5ms (5 releases) while the plan runs for 10ms",
        ),
        (
            r#"{ "tasks" : { "t" : { "priority" : 0, "policy" : "SCHED_FIFO", "run" : 1, "timer" : { "ref" : "u", "period" : 10 } } } }"#,
            "tasks.t.priority: 0: under fifo give 1 to 99",
        ),
        (
            r#"{ "tasks" : { "t" : { "suspend", "run" : 1 } } }"#,
            "key \"suspend\" has no value",
        ),
        (
            r#"{ "resources" : { "m" : {} }, "tasks" : {} }"#,
            "resources: \"resources\" is not supported",
        ),
    ] {
        let e = refused(text);
        assert!(e.contains(want), "{text}\n  got: {e}\n  want: {want}");
    }
}

#[test]
fn a_global_duration_cuts_endless_tasks_and_longer_ones() {
    let text = r#"{ "global" : { "duration" : 1 }, "tasks" : {
        "a" : { "run" : 1, "timer" : { "ref" : "u", "period" : 1000 } },
        "b" : { "loop" : 5000, "run" : 1, "timer" : { "ref" : "u", "period" : 1000 } } } }"#;
    assert_eq!(conv(text).unwrap().plan.duration, Some(1_000_000_000));
    let names: Vec<String> = conv(text)
        .unwrap()
        .plan
        .tasks
        .iter()
        .map(|t| t.name.clone())
        .collect();
    assert_eq!(names, vec!["a", "b"]);
}

#[test]
fn json_files_are_told_from_toml() {
    assert!(is_rtapp(Path::new("x.json"), b"anything"));
    assert!(is_rtapp(Path::new("plan"), b"\n  { \"tasks\""));
    assert!(!is_rtapp(Path::new("plan.toml"), b"[plan]\n"));
}
