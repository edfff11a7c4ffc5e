//! Workloads given on the command line (`cont:8,blk:2`) and the seeds' named task sets, as
//! [`TaskSpec`]s.

use crate::behaviour::{defaults, parse_fps, Behaviour, Poll, ETSION_DELAY};
use crate::config::{RoundTrips, TaskSpec};
use crate::units::Ns;

/// Parse a workload given on the command line: `blk:N`, `pctK:N`, `cont:N`, `cpu:N`, `sort:N`,
/// `periodic:N:PERIOD:WCET`, `select:N:TIMEOUT:WCET`, `typist:N`, `game:N`, `player:N:FPS`, `xine`, comma-separated.
pub fn parse_workload(spec: &str) -> Result<Vec<TaskSpec>, String> {
    let mut tasks = Vec::new();
    for item in spec.split(',').map(str::trim) {
        if item.is_empty() {
            return Err(format!(
                "empty entry in workload '{spec}'; e.g. cont:8,blk:2"
            ));
        }
        let parts: Vec<&str> = item.split(':').collect();
        let label = parts[0];
        let count = |i: usize| -> Result<usize, String> {
            match parts.get(i) {
                None => Ok(1),
                Some(n) => match n.parse::<usize>() {
                    Ok(0) | Err(_) => Err(format!(
                        "'{item}': the count '{n}' must be a whole number of tasks, 1 or more"
                    )),
                    Ok(v) if v > 4096 => Err(format!("'{item}': at most 4096 tasks per entry")),
                    Ok(v) => Ok(v),
                },
            }
        };
        let dur = |i: usize, what: &str| -> Result<Ns, String> {
            let s = parts.get(i).ok_or_else(|| {
                format!("'{item}': missing {what}; e.g. periodic:2:10ms:1ms or select:1:10ms:100us")
            })?;
            punctual_time::parse_duration_ns(s).map_err(|e| format!("'{item}': {what}: {e}"))
        };
        let max_parts = |n: usize| -> Result<(), String> {
            if parts.len() > n {
                Err(format!("'{item}' has too many ':' fields"))
            } else {
                Ok(())
            }
        };
        let mut add = |n: usize, group: &str, b: Behaviour| {
            for i in 0..n {
                tasks.push(TaskSpec::new(format!("{group} {i}"), group, b.clone()));
            }
        };
        match label {
            "blk" => {
                max_parts(2)?;
                add(count(1)?, "blk", Behaviour::Blk { delay: ETSION_DELAY, handler: defaults::BLK_HANDLER })
            }
            "cont" => {
                max_parts(2)?;
                add(count(1)?, "cont", Behaviour::Cont { delay: ETSION_DELAY })
            }
            "cpu" => {
                max_parts(2)?;
                add(count(1)?, "cpu", Behaviour::Cpu)
            }
            "sort" => {
                max_parts(2)?;
                for i in 0..count(1)? {
                    tasks.push(
                        TaskSpec::new(format!("sort {i}"), "sort", Behaviour::Cpu)
                            .with_footprint(defaults::SORT_FOOTPRINT_KIB),
                    );
                }
            }
            "typist" => {
                max_parts(2)?;
                add(
                    count(1)?,
                    "typist",
                    Behaviour::Typist { interval: defaults::TYPIST_INTERVAL, burst: defaults::TYPIST_BURST, server: None },
                )
            }
            "game" => {
                max_parts(2)?;
                add(count(1)?, "game", Behaviour::Game { frame: defaults::GAME_FRAME, gpu: defaults::GAME_GPU })
            }
            "periodic" => {
                max_parts(4)?;
                let n = count(1)?;
                let period = dur(2, "PERIOD")?;
                let wcet = dur(3, "WCET")?;
                add(n, "periodic", Behaviour::Periodic { period, wcet, offset: 0 })
            }
            "select" => {
                max_parts(4)?;
                let n = count(1)?;
                let timeout = dur(2, "TIMEOUT")?;
                let wcet = dur(3, "WCET")?;
                add(n, "select", Behaviour::Select { timeout, wcet })
            }
            "player" => {
                max_parts(3)?;
                let n = count(1)?;
                let fps = parts.get(2).map(|f| parse_fps(f)).transpose()?.unwrap_or(60_000);
                add(
                    n,
                    "player",
                    Behaviour::Player {
                        fps_milli: fps,
                        poll: Poll::Every(defaults::XINE_POLL),
                        work: defaults::PLAYER_WORK,
                        frames: None,
                        start: 0,
                        server: None,
                        decoder: None,
                    },
                )
            }
            "xine" => {
                max_parts(1)?;
                tasks.extend(xine_pipeline(defaults::XINE_FPS * 1000));
            }
            l if l.starts_with("pct") => {
                max_parts(2)?;
                let k: u32 = l[3..]
                    .parse()
                    .map_err(|_| format!("'{item}': write pctK:N with K the percent computed, e.g. pct8:2"))?;
                let n = count(1)?;
                let group = format!("pct{k}");
                for i in 0..n {
                    tasks.push(TaskSpec::new(format!("{group} {i}"), group.clone(), Behaviour::Pct { pct: k, delay: ETSION_DELAY }));
                }
            }
            other => {
                return Err(format!(
                    "unknown behaviour '{other}' in '{item}' (valid: blk:N, pctK:N, cont:N, cpu:N, sort:N, periodic:N:PERIOD:WCET, select:N:TIMEOUT:WCET, typist:N, game:N, player:N:FPS, xine)"
                ))
            }
        }
    }
    // Names stay unique when an entry repeats (cont:2,cont:2).
    let mut seen = std::collections::HashMap::<String, usize>::new();
    for t in &mut tasks {
        let n = seen.entry(t.name.clone()).or_insert(0);
        if *n > 0 {
            t.name = format!("{} #{}", t.name, *n + 1);
        }
        *n += 1;
    }
    Ok(tasks)
}

/// An X client's round trips to the X server before each hand-off (a frame, a redraw): two
/// requests, each an "extremely short" quantum of the server's (Etsion Section 4: 68 % of the X
/// server's quanta at 100 Hz) and of the client's when the reply comes.
pub const X_ROUND_TRIPS: RoundTrips = RoundTrips {
    count: 2,
    server: (20_000, 60_000),
    client: (10_000, 40_000),
};

/// Xine and the X server (Etsion Sections 2, 4, 6): the displayer wakes on a 4 ms alarm and, when
/// a frame is due, makes its round trips to the X server and hands it the frame, which takes just
/// under a 100 Hz tick to show; the decoder fills a small buffer ahead.
pub fn xine_pipeline(fps_milli: u64) -> Vec<TaskSpec> {
    let mut display = TaskSpec::new(
        "xine display",
        "xine",
        Behaviour::Player {
            fps_milli,
            poll: Poll::Every(defaults::XINE_POLL),
            work: defaults::XINE_DISPLAY_WORK,
            frames: None,
            start: 0,
            server: Some("X".into()),
            decoder: Some("xine decode".into()),
        },
    );
    display.round_trips = Some(X_ROUND_TRIPS);
    vec![
        display,
        TaskSpec::new(
            "xine decode",
            "xine",
            Behaviour::Decoder {
                work: defaults::DECODE_WORK,
                buffer: defaults::DECODE_BUFFER,
            },
        ),
        TaskSpec::new(
            "X",
            "X",
            Behaviour::Server {
                work: defaults::X_FRAME_WORK,
            },
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Ns = 1_000_000;

    #[test]
    fn workload_labels_follow_the_seeds() {
        let t = parse_workload("cont:8,blk:2,pct4:3,cpu,periodic:2:10ms:1ms").unwrap();
        assert_eq!(t.len(), 8 + 2 + 3 + 1 + 2);
        assert_eq!(t[0].name, "cont 0");
        assert_eq!(t[0].group, "cont");
        assert_eq!(
            t[10].behaviour,
            Behaviour::Pct {
                pct: 4,
                delay: ETSION_DELAY
            }
        );
        assert_eq!(
            t[14].behaviour,
            Behaviour::Periodic {
                period: 10 * MS,
                wcet: MS,
                offset: 0
            }
        );
        let x = parse_workload("xine").unwrap();
        assert_eq!(
            x.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
            ["xine display", "xine decode", "X"]
        );
    }

    #[test]
    fn workload_errors_name_the_entry_and_the_fix() {
        for (bad, needle) in [
            ("cont:0", "count"),
            ("bogus:2", "unknown behaviour 'bogus'"),
            ("pctx:2", "pctK:N"),
            ("periodic:1:10", "has no unit"),
            ("periodic:1", "missing PERIOD"),
            ("cont:2:3", "too many"),
            ("cont:2,,blk", "empty entry"),
            ("player:1:abc", "frame rate"),
        ] {
            let e = parse_workload(bad).unwrap_err();
            assert!(e.contains(needle), "{bad}: {e}");
        }
    }

    #[test]
    fn repeated_entries_get_unique_names() {
        let t = parse_workload("cont:1,cont:1").unwrap();
        assert_ne!(t[0].name, t[1].name);
    }
}
