use super::*;

const ONLINE: &[usize] = &[0, 1, 2, 3];

fn run(words: &[&str]) -> Settings {
    match parse(
        &words.iter().map(|w| w.to_string()).collect::<Vec<_>>(),
        ONLINE,
    ) {
        Ok(Parsed::Run(s)) => *s,
        other => panic!("{words:?}: {other:?}"),
    }
}

fn refused(words: &[&str]) -> DropinError {
    match parse(
        &words.iter().map(|w| w.to_string()).collect::<Vec<_>>(),
        ONLINE,
    ) {
        Err(e) => e,
        Ok(p) => panic!("{words:?} was accepted: {p:?}"),
    }
}

#[test]
fn without_flags_it_is_cyclictests_default_run() {
    let s = run(&[]);
    assert_eq!(s.cpus, vec![0]);
    assert_eq!((s.interval_us, s.distance_us), (1000, 500));
    assert_eq!(s.until, Until::Stopped);
    assert_eq!((s.policy, s.priority), (Policy::Other, 0));
    assert!(!s.mlock && !s.quiet && !s.verbose);
    assert_eq!(s.dma_latency_us, Some(0));
    assert_eq!(s.wait, Wait::Absolute);
    assert!(s.hist.is_none() && s.notes.is_empty());
}

#[test]
fn the_common_osadl_command_line_reads_as_in_cyclictest() {
    let s = run(&[
        "-m", "-q", "-l", "200", "-i", "1000", "-h", "20", "-t", "2", "-a", "0-1", "-p", "80",
    ]);
    assert_eq!(s.cpus, vec![0, 1]);
    assert!(s.affinity_given && s.mlock && s.quiet);
    assert_eq!(s.until, Until::Loops(200));
    assert_eq!((s.policy, s.priority), (Policy::Fifo, 80));
    assert_eq!(
        s.distance_us, 0,
        "a histogram puts every thread on one interval"
    );
    assert_eq!(
        s.hist,
        Some(Hist {
            buckets: 20,
            all: false,
            file: None
        })
    );
}

#[test]
fn optional_values_are_read_attached_or_from_the_next_word() {
    for words in [&["-t", "3"][..], &["-t3"], &["--threads=3"], &["--thr=3"]] {
        assert_eq!(run(words).cpus, vec![0, 1, 2], "{words:?}");
    }
    // -t alone: one per CPU; the next word is an option, not a count.
    assert_eq!(run(&["-t", "-m"]).cpus, ONLINE.to_vec());
    assert_eq!(run(&["-a", "2", "-t", "2"]).cpus, vec![2, 2]);
    assert_eq!(run(&["-a2"]).cpus, vec![2]);
    assert_eq!(run(&["-a", "!0-2"]).cpus, vec![3]);
    assert_eq!(run(&["-a", "all", "-t"]).cpus, ONLINE.to_vec());
    // -a alone: every CPU, round robin.
    let s = run(&["-a", "-t", "6"]);
    assert_eq!(s.cpus, vec![0, 1, 2, 3, 0, 1]);
    assert!(!s.affinity_given);
    assert_eq!(run(&["--secaligned", "250"]).secaligned_us, Some(250));
    assert_eq!(run(&["--secaligned"]).secaligned_us, Some(0));
    assert_eq!(run(&["-A", "50", "-t", "2"]).aligned_us, Some(50));
}

#[test]
fn short_options_cluster_and_long_ones_take_unique_prefixes() {
    let s = run(&["-mqnNi200", "--dur=2m", "--prior", "70"]);
    assert!(s.mlock && s.quiet && s.nsecs);
    assert_eq!(s.interval_us, 200);
    assert_eq!(s.until, Until::Seconds(120));
    assert_eq!(s.priority, 70);
    assert!(refused(&["--prio", "7"])
        .to_string()
        .contains("--priospread"));
    let e = refused(&["--hist=5"]).to_string();
    assert!(e.contains("ambiguous") && e.contains("--histofall"), "{e}");
    let e = refused(&["--bogus"]).to_string();
    assert!(e.starts_with("--bogus: unknown option"), "{e}");
    assert!(refused(&["-z"])
        .to_string()
        .starts_with("-z: unknown option"));
    assert!(refused(&["5"])
        .to_string()
        .contains("no arguments besides options"));
    assert!(refused(&["-i"]).to_string().contains("needs a value"));
    assert!(refused(&["-i", "1ms"]).to_string().contains("whole number"));
    assert!(refused(&["--mlockall=1"])
        .to_string()
        .contains("takes no value"));
}

#[test]
fn flags_punctual_cannot_honour_are_refused_by_name_with_the_equivalent() {
    for (words, flag, hint) in [
        (&["-b", "100"][..], "-b/--breaktrace", "--fail-above"),
        (&["--breaktrace=100"], "-b/--breaktrace", "trace record"),
        (&["--tracemark"], "--tracemark", "trace record"),
        (&["-F", "/tmp/f"], "-F/--fifo", "--punctual-json"),
        (&["-R"], "-R/--resolution", "bench gaps"),
        (&["--smi"], "--smi", "SMI"),
        (&["--priospread"], "--priospread", "-p"),
        (&["--policy=batch"], "--policy batch", "--policy other"),
        (
            &["-s", "-x"],
            "-s/--system with -x/--posix_timers",
            "-x alone",
        ),
    ] {
        match refused(words) {
            DropinError::Unsupported { flag: f, instead } => {
                assert_eq!(f, flag, "{words:?}");
                assert!(instead.contains(hint), "{words:?}: {instead}");
            }
            other => panic!("{words:?}: {other}"),
        }
    }
    let f: punctual_result::Failure = refused(&["--smi"]).into();
    assert_eq!(f.class, punctual_result::Class::Usage, "exit 2");
}

#[test]
fn policy_and_priority_follow_cyclictests_rules() {
    let s = run(&["--policy=rr", "-t", "3"]);
    assert_eq!((s.policy, s.priority), (Policy::Rr, 4));
    assert_eq!(s.notes, vec!["defaulting realtime priority to 4"]);
    let s = run(&["-p", "50", "--policy=other"]);
    assert_eq!((s.policy, s.priority), (Policy::Fifo, 50));
    assert!(s.notes[0].contains("setting policy to SCHED_FIFO"));
    assert_eq!(run(&["--policy=rr", "-p", "5"]).policy, Policy::Rr);
    assert_eq!(run(&["--policy=normal"]).policy, Policy::Other);
    assert!(refused(&["-p", "100"]).to_string().contains("0 to 99"));
}

#[test]
fn smp_and_modes_and_clocks() {
    let s = run(&["-S", "-t", "2", "-a", "1"]);
    assert_eq!(s.cpus, ONLINE.to_vec());
    assert_eq!(s.notes.len(), 2, "{:?}", s.notes);
    assert_eq!(run(&["-x"]).wait, Wait::PosixTimer);
    assert_eq!(run(&["-s"]).wait, Wait::Relative);
    assert_eq!(run(&["-r"]).wait, Wait::Relative);
    assert_eq!(run(&["-c", "1"]).clock, ClockId::Realtime);
    assert!(refused(&["-c", "2"]).to_string().starts_with("-c/--clock"));
    assert_eq!(run(&["--laptop"]).dma_latency_us, None);
    assert_eq!(run(&["--default-system"]).dma_latency_us, None);
    assert_eq!(run(&["--latency=10"]).dma_latency_us, Some(10));
}

#[test]
fn histogram_rules() {
    let s = run(&["-H", "30", "-d", "100", "--histfile=/tmp/h"]);
    let h = s.hist.unwrap();
    assert!(h.all && h.buckets == 30 && h.file.is_some());
    assert_eq!(s.distance_us, 0);
    assert!(s.notes.iter().any(|n| n.contains("distance is ignored")));
    assert_eq!(
        run(&["-h", "5000000"]).hist.unwrap().buckets,
        HIST_MAX as usize
    );
    assert!(refused(&["-h", "0"])
        .to_string()
        .starts_with("-h/--histogram"));
    assert!(refused(&["--histfile", "/tmp/h"])
        .to_string()
        .contains("add -h"));
    assert!(refused(&["-o", "2"]).to_string().contains("-v"));
    assert_eq!(run(&["-v", "-o", "2"]).oscope, 2);
}

#[test]
fn durations_and_loops() {
    assert_eq!(run(&["-D", "10"]).until, Until::Seconds(10));
    assert_eq!(run(&["-D", "10s"]).until, Until::Seconds(10));
    assert_eq!(run(&["-D", "2h"]).until, Until::Seconds(7200));
    assert_eq!(run(&["-D1d"]).until, Until::Seconds(86_400));
    assert!(refused(&["-D", "5x"]).to_string().contains("s, m, h or d"));
    assert!(refused(&["-D", "1000d"]).to_string().contains("year"));
    // Both: the one that ends thread 0 first.
    assert_eq!(run(&["-l", "100", "-D", "10"]).until, Until::Loops(100));
    assert_eq!(run(&["-l", "100000", "-D", "10"]).until, Until::Seconds(10));
    assert_eq!(run(&["-l", "0"]).until, Until::Stopped);
}

#[test]
fn help_and_outputs() {
    for w in [&["--help"][..], &["-?"], &["-m", "--he"]] {
        assert_eq!(
            parse(&w.iter().map(|s| s.to_string()).collect::<Vec<_>>(), ONLINE).unwrap(),
            Parsed::Help
        );
    }
    assert_eq!(run(&["--json=-"]).json, Some(Output::Stdout));
    assert_eq!(
        run(&["--punctual-json", "p.json"]).punctual_json,
        Some(Output::File("p.json".into()))
    );
    assert!(refused(&["--json="]).to_string().starts_with("--json"));
    assert!(refused(&["-a", "7"]).to_string().contains("not online"));
    assert_eq!(run(&["--mainaffinity=0"]).main_affinity, Some(vec![0]));
}
