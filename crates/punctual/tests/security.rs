//! What a local user, a typo or a hostile file can do to a root punctual (issue 32, items 3 to 5
//! and the "Low" list): every test is named after the item it guards.

mod common;

use common::{punctual, stderr, write_file};
use std::time::Duration;

/// Issue 32, item 3: a live socket under a wake channel's name (another user's, in the shared
/// directory channels used to live in) made a shielded `run` refuse only after its 75 changes,
/// naming a pid the squatter chose. The preflight finds it first, with the kernel's pid and uid,
/// and `plan check` says the same.
#[test]
fn wake_channel_squatted_refuses_a_shielded_plan_before_any_change() {
    // Another test's live shield on the other CPU would refuse this plan for that reason first.
    let _cpu = punctual_testkit::exclusive_cpu();
    let dir = tempfile::tempdir().unwrap();
    let name = format!("sq{}", std::process::id());
    let sock = dir.path().join(format!("punctual-wake-{name}"));
    let _squatter = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    let plan = write_file(
        dir.path(),
        "p.toml",
        &format!(
            "[plan]\nshield = true\ncpus = \"{}\"\nduration = \"1s\"\n\
             [[task]]\nname = \"w\"\nperiod = \"10ms\"\n\
             action = {{ kind = \"wake\", channel = \"{name}\" }}\n",
            common::last_cpu()
        ),
    );
    let state = tempfile::tempdir().unwrap();
    let me = format!(
        "in use: pid {} (uid {})",
        std::process::id(),
        // SAFETY: plain syscall.
        unsafe { libc::geteuid() }
    );
    for args in [&["plan", "check"][..], &["run", "--no-store"][..]] {
        let o = punctual()
            .args(args)
            .arg(&plan)
            .env("PUNCTUAL_SHM_DIR", dir.path())
            .env("PUNCTUAL_STATE_DIR", state.path())
            .timeout(Duration::from_secs(30))
            .output()
            .unwrap();
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {e}");
        assert!(e.contains(&me), "{args:?}: {e}");
        assert!(!e.to_lowercase().contains("shielded"), "{args:?}: {e}");
    }
    // No change was ever journalled (a shield writes its journal before its first change).
    let left: Vec<_> = std::fs::read_dir(state.path()).unwrap().flatten().collect();
    assert!(
        left.iter()
            .all(|e| !e.file_name().to_string_lossy().starts_with("journal")),
        "{left:?}"
    );
    assert!(sock.exists(), "the squatter's socket was not touched");
}

fn run_in(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    punctual()
        .current_dir(dir)
        .args(args)
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap()
}

/// Issue 32, item 4: a typo in `--store` for a command that only reads made the directories and
/// an empty database; now it is exit 2 and nothing is created.
#[test]
fn store_typo_creates_no_directory_and_no_database_for_a_reader() {
    let dir = tempfile::tempdir().unwrap();
    for args in [
        &["results", "list", "--store", "typo/results.db"][..],
        &["results", "list", "--store", "results.bd"][..],
        &["results", "show", "latest", "--store", "typo/results.db"][..],
    ] {
        let o = run_in(dir.path(), args);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {e}");
        assert!(e.contains("no results store at"), "{args:?}: {e}");
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().collect();
        assert!(left.is_empty(), "{args:?} created {left:?}");
    }
}

/// Issue 32, item 4: `mysql://x` became the path `mysql:/x` (a directory `mysql:` and a database).
#[test]
fn store_url_of_an_unknown_scheme_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    for args in [
        &["results", "list", "--store", "mysql://x"][..],
        &["results", "rm", "abc", "--store", "sqlite://x.db"][..],
    ] {
        let o = run_in(dir.path(), args);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {e}");
        assert!(e.contains("unknown URL scheme"), "{args:?}: {e}");
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            0,
            "{args:?}"
        );
    }
}

/// Issue 32, item 4: root followed another user's symbolic link in a shared directory and made a
/// SQLite file where it pointed. The store follows the rules of every other output: a link in a
/// directory others can write is refused, and root keeps no store in such a directory at all.
#[test]
fn store_link_of_another_user_is_not_followed() {
    if !common::is_root() {
        punctual_testkit::skip(
            "store_link_of_another_user_is_not_followed",
            "needs root to plant another user's link",
        );
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let shared = dir.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let victim = dir.path().join("victim.db");
    let link = shared.join("results.db");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    std::os::unix::fs::lchown(&link, Some(65534), Some(65534)).unwrap();
    let o = run_in(
        dir.path(),
        &["results", "rm", "abc", "--store", link.to_str().unwrap()],
    );
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(e.contains("symbolic link"), "{e}");
    assert!(!victim.exists(), "the link was followed");
    // A new store in the shared directory, by a command that stores (the outputs are checked
    // before anything runs): SQLite's -wal and -shm files could be planted there.
    let fresh = shared.join("fresh.db");
    let o = run_in(
        dir.path(),
        &["latency", "-D", "100ms", "--store", fresh.to_str().unwrap()],
    );
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(e.contains("only it can write"), "{e}");
    assert!(!fresh.exists());
}

/// Issue 32, item 5: `plan check` loaded plugins (their constructors ran, as root) and said only
/// whether the plan was admitted. It reads them as files now, and lists what the plan would run.
#[test]
fn plan_check_runs_no_plugin_code_and_lists_what_the_plan_runs() {
    let name = "plan_check_runs_no_plugin_code_and_lists_what_the_plan_runs";
    let Some(gcc) = punctual_testkit::tool(name, "gcc", "gcc") else {
        return;
    };
    let t = tempfile::tempdir().unwrap();
    let marker = t.path().join("constructor-ran");
    let src = write_file(
        t.path(),
        "p.c",
        &format!(
            "#include <stdio.h>\n#include <stdint.h>\n#include <stddef.h>\n\
             __attribute__((constructor)) static void ran(void) {{ FILE *f = fopen(\"{}\", \"w\"); if (f) fclose(f); }}\n\
             int punctual_event(const uint8_t *d, size_t n, uint64_t at) {{ return 0; }}\n\
             int not_a_function = 3;\n",
            marker.display()
        ),
    );
    let so = t.path().join("libp.so");
    let st = std::process::Command::new(gcc)
        .args(["-shared", "-fPIC", "-o"])
        .arg(&so)
        .arg(&src)
        .status()
        .unwrap();
    assert!(st.success());
    let plan = |symbol: &str, path: &std::path::Path| {
        format!(
            "[plan]\nduration = \"1s\"\n\
             [[task]]\nname = \"plug\"\nperiod = \"100ms\"\noffset = \"auto\"\n\
             action = {{ kind = \"plugin\", path = \"{}\", symbol = \"{symbol}\" }}\n\
             [[task]]\nname = \"prog\"\nperiod = \"500ms\"\noffset = \"auto\"\n\
             action = {{ kind = \"exec\", argv = [\"true\"], priority = 5, drop_caps = true }}\n",
            path.display()
        )
    };
    let p = write_file(t.path(), "ok.toml", &plan("punctual_event", &so));
    let o = punctual().args(["plan", "check"]).arg(&p).output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    assert_eq!(o.status.code(), Some(0), "{}{out}", stderr(&o));
    assert!(!marker.exists(), "plan check ran the plugin's constructor");
    let squashed = punctual_testkit::squash(&out);
    assert!(squashed.contains("What the plan runs"), "{out}");
    assert!(
        squashed.contains(&format!("plug plugin {} (punctual_event)", so.display()))
            && squashed.contains("(inside punctual), capabilities: "),
        "{out}"
    );
    assert!(
        squashed.contains("capabilities: none (drop_caps) FIFO 5"),
        "{out}"
    );
    // Refusals, still without loading: a symbol that is data, one that is missing, a file that is
    // not a library at all.
    let text = write_file(t.path(), "libtext.so", "#!/bin/sh\necho not a library\n");
    for (symbol, path, says) in [
        ("not_a_function", &so, "not as a function"),
        ("missing", &so, "has no symbol 'missing'"),
        ("punctual_event", &text, "not a shared library"),
    ] {
        let p = write_file(t.path(), "bad.toml", &plan(symbol, path));
        let o = punctual().args(["plan", "check"]).arg(&p).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{symbol}: {}", stderr(&o));
        assert!(stderr(&o).contains(says), "{symbol}: {}", stderr(&o));
    }
    assert!(!marker.exists(), "plan check ran the plugin's constructor");
}

/// Issue 32, Low: `latency -i 18446744073709551615ns` locked memory and opened cpu_dma_latency
/// before the engine refused the interval. Refused before the lifecycle starts now: the run's
/// stderr has no note of what it set up, and it is exit 2 naming the flag.
#[test]
fn validation_before_changes_latency_interval_beyond_an_hour() {
    let o = punctual()
        .args([
            "latency",
            "--no-store",
            "-i",
            "18446744073709551615ns",
            "-D",
            "1s",
        ])
        .timeout(Duration::from_secs(30))
        .output()
        .unwrap();
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(e.contains("-i/--interval") && e.contains("limit"), "{e}");
    let Some(strace) = punctual_testkit::which("strace") else {
        return;
    };
    // Where strace is installed: not one mlockall, not one open of cpu_dma_latency.
    let trace = tempfile::NamedTempFile::new().unwrap();
    let st = std::process::Command::new(strace)
        .args(["-f", "-e", "trace=mlockall,openat", "-o"])
        .arg(trace.path())
        .arg(common::bin_path())
        .args([
            "latency",
            "--no-store",
            "-i",
            "18446744073709551615ns",
            "-D",
            "1s",
        ])
        .output()
        .unwrap();
    assert_eq!(st.status.code(), Some(2));
    let calls = std::fs::read_to_string(trace.path()).unwrap();
    assert!(
        !calls.contains("mlockall(") && !calls.contains("cpu_dma_latency"),
        "{calls}"
    );
}

/// Issue 32, Low: `cpus = "0-1"` with `shield = true` on a 2-CPU machine was admitted by
/// `plan check` and refused by `run` with exit 3. Both refuse it with exit 2 now.
#[test]
fn validation_before_changes_a_shield_over_every_cpu_is_refused_by_plan_check_and_run() {
    let dir = tempfile::tempdir().unwrap();
    let online = punctual_testkit::online_cpus();
    let all = punctual_rt::format_cpu_list(&online);
    let plan = write_file(
        dir.path(),
        "p.toml",
        &format!(
            "[plan]\nshield = true\ncpus = \"{all}\"\nduration = \"1s\"\n\
             [[task]]\nname = \"m\"\nperiod = \"10ms\"\naction = {{ kind = \"mark\" }}\n"
        ),
    );
    for args in [&["plan", "check"][..], &["run", "--no-store"][..]] {
        let o = punctual()
            .args(args)
            .arg(&plan)
            .timeout(Duration::from_secs(30))
            .output()
            .unwrap();
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {e}");
        assert!(e.contains("every online CPU"), "{args:?}: {e}");
    }
}

/// Issue 32, Low: `--json /dev/stdout` with stdout redirected to a file replaced that file (the
/// shell's redirection kept writing to the old one). A path through a file descriptor is refused
/// before measuring; `-` is stdout.
#[test]
fn json_to_dev_stdout_is_refused_and_a_redirected_file_is_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("redirected");
    std::fs::write(&out, "mine\n").unwrap();
    let inode =
        |p: &std::path::Path| std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(p).unwrap());
    let before = inode(&out);
    for target in ["/dev/stdout", "/dev/fd/1", "/proc/self/fd/1"] {
        let o = std::process::Command::new(common::bin_path())
            .args([
                "latency",
                "--no-store",
                "-i",
                "1ms",
                "-D",
                "100ms",
                "--json",
                target,
            ])
            .stdout(std::fs::File::options().append(true).open(&out).unwrap())
            .output()
            .unwrap();
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{target}: {e}");
        assert!(e.contains("names a file descriptor"), "{target}: {e}");
        assert_eq!(inode(&out), before, "{target} replaced the file");
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "mine\n");
    }
}

/// Issue 32, Low: `-D -1s` was refused by the parser as "unexpected argument '-1'", naming
/// neither the flag nor the value.
#[test]
fn negative_duration_names_the_flag_and_the_value() {
    for args in [
        &["latency", "-D", "-1s"][..],
        &["check", "-D", "-1s"][..],
        &["run", "x.toml", "--watchdog", "-1s"][..],
    ] {
        let o = punctual().args(args).output().unwrap();
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {e}");
        assert!(
            e.contains("'-1s'") && e.contains(args[args.len() - 2].trim_start_matches('-')),
            "{args:?}: {e}"
        );
    }
}

/// Issue 32, Low: `install-lib --from` installed any file as libpunctual.so. The file is read
/// (not loaded) and must be an ELF shared library exporting the C ABI; nothing is created first.
#[test]
fn install_lib_from_a_file_that_is_not_a_library_is_refused_and_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let fake = write_file(
        dir.path(),
        "libpunctual.so",
        "#!/bin/sh\necho not a library\n",
    );
    let prefix = dir.path().join("prefix");
    let o = punctual()
        .args(["install-lib", "--prefix"])
        .arg(&prefix)
        .arg("--from")
        .arg(&fake)
        .output()
        .unwrap();
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(
        e.contains("--from") && e.contains("not a shared library"),
        "{e}"
    );
    assert!(!prefix.exists(), "the prefix was created");
    // An ELF shared library without the C ABI (any system library) is refused too.
    let libc = [
        "/lib/x86_64-linux-gnu/libc.so.6",
        "/usr/lib/x86_64-linux-gnu/libc.so.6",
        "/lib64/libc.so.6",
    ]
    .into_iter()
    .find(|p| std::path::Path::new(p).exists());
    if let Some(libc) = libc {
        let o = punctual()
            .args(["install-lib", "--prefix"])
            .arg(&prefix)
            .args(["--from", libc])
            .output()
            .unwrap();
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{e}");
        assert!(
            e.contains("has no symbol 'punctual_wait_next_period'"),
            "{e}"
        );
        assert!(!prefix.exists());
    }
}

/// Issue 32, Low (raw echo): exec's program, a plugin's path, udp's target and values on the
/// command line (`-w`, `--task`, `results show`, the plan's path) reached the terminal with ESC
/// and RLO, and at a megabyte. Every message is escaped and bounded.
#[test]
fn raw_echo_no_escape_sequence_or_megabyte_reaches_the_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let evil = "\u{1b}[2J\u{1b}]0;pwned\u{7}\u{202e}";
    let big = "A".repeat(1 << 20);
    let plan = write_file(
        dir.path(),
        "p.toml",
        &format!(
            "[plan]\nduration = \"1s\"\n\
             [[task]]\nname = \"a\"\nperiod = \"10ms\"\noffset = \"auto\"\naction = {{ kind = \"exec\", argv = [\"/nope/{evil}{big}\"] }}\n\
             [[task]]\nname = \"b\"\nperiod = \"10ms\"\noffset = \"auto\"\naction = {{ kind = \"plugin\", path = \"/nope/{evil}.so\" }}\n\
             [[task]]\nname = \"c\"\nperiod = \"10ms\"\noffset = \"auto\"\naction = {{ kind = \"udp\", to = \"{evil}\" }}\n"
        )
        .replace('\u{1b}', "\\u001b")
        .replace('\u{7}', "\\u0007"),
    );
    let plan_arg = plan.to_str().unwrap().to_string();
    // One argument is at most 128 KB (MAX_ARG_STRLEN); the plan above holds the megabyte.
    let big = "A".repeat(100_000);
    let evil_path = format!("{}/{evil}{big}.toml", dir.path().display());
    let cases: Vec<Vec<String>> = vec![
        vec!["plan".into(), "check".into(), plan_arg.clone()],
        vec!["run".into(), "--no-store".into(), plan_arg],
        vec!["run".into(), "--no-store".into(), evil_path.clone()],
        vec!["plan".into(), "check".into(), evil_path],
        vec!["simulate".into(), "-w".into(), format!("{evil}{big}")],
        vec!["results".into(), "show".into(), format!("{evil}{big}")],
        vec![
            "trace".into(),
            "analyze".into(),
            "x.ptf".into(),
            "--task".into(),
            format!("{evil}{big}"),
        ],
        vec!["latency".into(), "-i".into(), format!("{evil}{big}")],
    ];
    for args in cases {
        let o = punctual()
            .current_dir(dir.path())
            .args(&args)
            .timeout(Duration::from_secs(30))
            .output()
            .unwrap();
        let shown: Vec<String> = args.iter().map(|a| a.chars().take(40).collect()).collect();
        assert_eq!(
            o.status.code(),
            Some(2),
            "{shown:?}: {}",
            stderr(&o).chars().take(400).collect::<String>()
        );
        let all = [o.stdout.as_slice(), o.stderr.as_slice()].concat();
        let text = String::from_utf8_lossy(&all);
        assert!(
            !text.contains('\u{1b}') && !text.contains('\u{202e}') && !text.contains('\u{7}'),
            "{shown:?}: {:?}",
            text.chars().take(400).collect::<String>()
        );
        assert!(all.len() < 20_000, "{shown:?}: {} bytes", all.len());
    }
}

/// Issue 32, Low: the wake channel admits `Access::client_uid`, but no plan field set it, so a
/// root dispatcher could never admit a client of another user. A wake action's `user` does: the
/// spawned client runs as that user (no capabilities), attaches, and `plan check` says so.
#[test]
fn wake_channel_client_uid_a_plan_user_admits_a_client_of_another_user() {
    if !common::is_root() {
        punctual_testkit::skip(
            "wake_channel_client_uid_a_plan_user_admits_a_client_of_another_user",
            "needs root to run a client as another user",
        );
        return;
    }
    // SAFETY: getpwnam with a NUL-terminated name; the uid is copied out at once.
    let nobody = unsafe {
        let pw = libc::getpwnam(c"nobody".as_ptr());
        (!pw.is_null()).then(|| (*pw).pw_uid)
    };
    let Some(nobody) = nobody else {
        punctual_testkit::missing(
            "wake_channel_client_uid_a_plan_user_admits_a_client_of_another_user",
            "no user 'nobody' on this machine",
        );
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // Where the client, as nobody, writes who it is.
    let out = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        out.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let who = out.path().join("uid");
    let name = format!("cu{}", std::process::id());
    let exe = common::bin_path();
    let script = format!(
        "id -u > {}; exec {} __periodic --mode wake --period-ns 10000000 --channel {name}",
        who.display(),
        exe.display()
    );
    let plan = write_file(
        dir.path(),
        "p.toml",
        &format!(
            "[plan]\nduration = \"300ms\"\n\
             [[task]]\nname = \"c\"\nperiod = \"10ms\"\n\
             action = {{ kind = \"wake\", channel = \"{name}\", user = \"nobody\", \
             spawn = [\"/bin/sh\", \"-c\", {script:?}] }}\n"
        ),
    );
    let check = punctual()
        .args(["plan", "check"])
        .arg(&plan)
        .timeout(Duration::from_secs(30))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&check.stdout);
    assert_eq!(check.status.code(), Some(0), "{text}{}", stderr(&check));
    assert!(
        punctual_testkit::squash(&text).contains("nobody, capabilities: none (another user)"),
        "plan check lists the client as nobody: {text}"
    );
    // The admission is the subject, not timing: a normal-class dispatcher cannot be held off its
    // CPU by another process's FIFO 99 spinner (a loaded suite run once found this run's FIFO 98
    // dispatcher still running 30 s after the plan's end).
    let o = punctual()
        .args([
            "run",
            "--no-store",
            "--policy",
            "other",
            "--attach-timeout",
            "20s",
        ])
        .arg(&plan)
        .env("PUNCTUAL_DATA_DIR", dir.path().join("data"))
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "the client of another user attached: {}",
        stderr(&o)
    );
    let uid = std::fs::read_to_string(&who).unwrap();
    assert_eq!(uid.trim(), nobody.to_string());
}
