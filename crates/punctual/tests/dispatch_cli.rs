//! End-to-end tests of `punctual run`, `plan`, `shield`, `install-lib` and the watchdog: the real
//! binary in temporary directories. Real-time runs last a second or two.

use assert_cmd::Command;
use std::path::{Path, PathBuf};
use std::process::Command as Std;

fn punctual() -> Command {
    let mut c = Command::cargo_bin("punctual").unwrap();
    c.env("PUNCTUAL_DATA_DIR", data_dir());
    c
}

/// This test process's own results store: a store shared by every checkout on the machine would
/// be migrated by a newer punctual, and this one would refuse it (issue 31).
fn data_dir() -> PathBuf {
    punctual_testkit::data_dir()
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn gcc() -> bool {
    Std::new("gcc").arg("--version").output().is_ok()
}

fn last_cpu() -> usize {
    punctual_last_cpu()
}

fn punctual_last_cpu() -> usize {
    let s = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    s.trim().rsplit([',', '-']).next().unwrap().parse().unwrap()
}

fn is_root() -> bool {
    // SAFETY: plain syscall.
    unsafe { libc::geteuid() == 0 }
}

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn malformed_plans_exit_2_naming_file_line_and_column() {
    let t = tempfile::tempdir().unwrap();
    let cases = [
        ("[[task]]\nname = \"a\"\nperiod = \"0ms\"\naction = { kind = \"mark\" }\n", ":3:10:", "period must be more than zero"),
        ("[[task]]\nname = \"a\"\nperiod = \"1ms\"\naction = { kind = \"beam\" }\n", ":4:19:", "unknown action kind"),
        ("[[task]]\nname = \"a\"\nperiod = \"1ms\"\noffset = \"2ms\"\naction = { kind = \"mark\" }\n", ":4:10:", "not less than the period"),
        ("[[task]]\nname = \"a\"\nperiod = \"1ms\"\nwcet = \"3ms\"\naction = { kind = \"mark\" }\n", ":4:8:", "above the period"),
        ("[plan\n", ":1:", ""),
    ];
    for (i, (text, at, msg)) in cases.iter().enumerate() {
        let p = write(t.path(), &format!("p{i}.toml"), text);
        let json = t.path().join(format!("out{i}.json"));
        let o = punctual()
            .arg("run")
            .arg(&p)
            .arg("--json")
            .arg(&json)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "case {i}: {}", stderr(&o));
        let e = stderr(&o);
        assert!(
            e.contains(&format!("p{i}.toml{at}")) && e.contains(msg),
            "case {i}: {e}"
        );
        assert!(!json.exists(), "nothing is written for bad input");
    }
}

#[test]
fn bad_inputs_found_while_preparing_exit_2() {
    let t = tempfile::tempdir().unwrap();
    let missing = write(
        t.path(),
        "m.toml",
        "[[event]]\nat = \"1ms\"\naction = { kind = \"plugin\", path = \"./nope.so\" }\n",
    );
    let o = punctual().arg("run").arg(&missing).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("does not exist"), "{}", stderr(&o));

    let noprog = write(
        t.path(),
        "x.toml",
        "[[event]]\nat = \"1ms\"\naction = { kind = \"exec\", argv = [\"no-such-program-xyz\"] }\n",
    );
    let o = punctual().arg("run").arg(&noprog).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("not in PATH"), "{}", stderr(&o));

    let ok = write(
        t.path(),
        "ok.toml",
        "[[event]]\nat = \"1ms\"\naction = { kind = \"mark\" }\n",
    );
    let o = punctual()
        .arg("run")
        .arg(&ok)
        .args(["-a", "1000"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("not online"), "{}", stderr(&o));

    let o = punctual()
        .arg("run")
        .arg(t.path().join("absent.toml"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));

    // Two tasks released at the same instant collide: refused unless --force.
    let clash = write(
        t.path(),
        "c.toml",
        "[plan]\nduration = \"50ms\"\n[[task]]\nname = \"a\"\nperiod = \"10ms\"\naction = { kind = \"mark\" }\n[[task]]\nname = \"b\"\nperiod = \"10ms\"\naction = { kind = \"mark\" }\n",
    );
    let o = punctual().arg("run").arg(&clash).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("collision") && stderr(&o).contains("--force"),
        "{}",
        stderr(&o)
    );
    let o = punctual()
        .args(["plan", "check"])
        .arg(&clash)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stdout).contains("verdict: refused"));
}

/// An unreachable UDP target is refused before anything runs: in a network namespace of its own
/// (which the test creates; its loopback is down) no address is routable.
#[test]
fn an_unreachable_udp_target_exits_2_before_running() {
    let unshare_ok = Std::new("unshare")
        .args(["-n", "true"])
        .status()
        .is_ok_and(|s| s.success());
    if !is_root() || !unshare_ok {
        punctual_testkit::skip(
            "an_unreachable_udp_target",
            "needs root and unshare -n for a private network namespace",
        );
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let plan = write(
        t.path(),
        "u.toml",
        "[[event]]\nat = \"1ms\"\naction = { kind = \"udp\", to = \"127.0.0.1:9\" }\n",
    );
    let json = t.path().join("out.json");
    let o = Std::new("unshare")
        .arg("-n")
        .arg(assert_cmd::cargo::cargo_bin("punctual"))
        .arg("run")
        .arg(&plan)
        .arg("--json")
        .arg(&json)
        .env("PUNCTUAL_DATA_DIR", data_dir())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("127.0.0.1:9 is unreachable"),
        "{}",
        stderr(&o)
    );
    assert!(!json.exists(), "nothing is written for bad input");
}

#[test]
fn shielding_every_cpu_is_refused_and_dry_run_changes_nothing() {
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    let o = punctual()
        .args(["shield", "--cpus", online.trim()])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("every online CPU"), "{}", stderr(&o));
    let o = punctual()
        .args(["shield", "--cpus", "4000"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    if last_cpu() > 0 {
        // A dry run is refused while another shield holds the CPU (shields are machine-wide).
        let _cpu = punctual_testkit::exclusive_cpu();
        let o = punctual()
            .args(["shield", "--dry-run", "--cpus"])
            .arg(last_cpu().to_string())
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        assert!(
            String::from_utf8_lossy(&o.stdout).contains("would move"),
            "{}",
            String::from_utf8_lossy(&o.stdout)
        );
    }
}

#[test]
fn compile_and_decode_round_trip_with_csv_events() {
    let t = tempfile::tempdir().unwrap();
    let p = write(t.path(), "p.toml", "[plan]\nname = \"c\"\n[[action]]\nname = \"m\"\nkind = \"mark\"\n[[event]]\nat = \"1ms\"\nuse = \"m\"\n");
    let csv = write(
        t.path(),
        "e.csv",
        "at_ns,action,data_hex\n3000000,m,0102\n2000000,m,\n",
    );
    let bin = t.path().join("p.pplan");
    let o = punctual()
        .args(["plan", "compile"])
        .arg(&p)
        .arg("--events")
        .arg(&csv)
        .arg("-o")
        .arg(&bin)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = punctual()
        .args(["plan", "decode"])
        .arg(&bin)
        .output()
        .unwrap();
    let text = String::from_utf8(o.stdout).unwrap();
    assert_eq!(text.matches("[[event]]").count(), 3, "{text}");
    assert!(
        text.contains("at = \"3ms\"") && text.contains("data = [1, 2]"),
        "{text}"
    );
    let mut bad = std::fs::read(&bin).unwrap();
    bad.truncate(bad.len() - 3);
    std::fs::write(&bin, bad).unwrap();
    let o = punctual()
        .args(["plan", "decode"])
        .arg(&bin)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("truncated"), "{}", stderr(&o));
}

#[test]
fn a_short_run_of_mark_exec_and_udp_writes_per_task_series() {
    let t = tempfile::tempdir().unwrap();
    let rx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    rx.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    let to = rx.local_addr().unwrap();
    let marker = t.path().join("ran");
    let p = write(
        t.path(),
        "p.toml",
        &format!(
            "[plan]\nduration = \"1s\"\n[[task]]\nname = \"tick\"\nperiod = \"2ms\"\noffset = \"auto\"\naction = {{ kind = \"mark\" }}\n\
             [[task]]\nname = \"spawn\"\nperiod = \"250ms\"\noffset = \"auto\"\naction = {{ kind = \"exec\", argv = [\"/bin/sh\", \"-c\", \"echo >> {}\"] }}\n\
             [[event]]\nat = \"300100us\"\naction = {{ kind = \"udp\", to = \"{to}\", bytes = 40 }}\ndata = [7]\n",
            marker.display()
        ),
    );
    let json = t.path().join("r.json");
    let o = punctual()
        .arg("run")
        .arg(&p)
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let series = doc["series"].as_array().unwrap();
    let by = |n: &str| {
        series
            .iter()
            .find(|s| s["name"] == n)
            .unwrap_or_else(|| panic!("no series {n}"))
    };
    // Every release ran or was counted missed (a hypervisor stall can skip a few).
    assert_eq!(by("tick")["count"], by("tick")["releases"]);
    assert_eq!(
        by("tick")["missed_periods"].as_u64().unwrap() + by("tick")["releases"].as_u64().unwrap(),
        500
    );
    let spawned = by("spawn")["releases"].as_u64().unwrap();
    assert_eq!(spawned + by("spawn")["missed_periods"].as_u64().unwrap(), 4);
    assert!(spawned >= 3, "a stall skipped more than one 250 ms release");
    assert_eq!(by("spawn (exec start)")["count"], spawned);
    let udp = series.iter().find(|s| s["action"] == "udp").unwrap();
    assert_eq!(udp["releases"], 1);
    let mut b = [0u8; 64];
    let n = rx.recv(&mut b).unwrap();
    assert_eq!(n, 40);
    assert_eq!(b[16], 7);
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert_eq!(
        std::fs::read_to_string(&marker).unwrap().lines().count() as u64,
        spawned
    );
    // The document follows the schema.
    let schema: serde_json::Value = serde_json::from_str(punctual_result_schema()).unwrap();
    let v = jsonschema::validator_for(&schema).unwrap();
    let errs: Vec<String> = v.iter_errors(&doc).map(|e| e.to_string()).collect();
    assert!(errs.is_empty(), "{errs:?}");
}

fn punctual_result_schema() -> &'static str {
    include_str!("../../result/schema/punctual.result-1.schema.json")
}

fn build_plugin(dir: &Path, body: &str) -> PathBuf {
    let src = write(
        dir,
        "plugin.c",
        &format!("#include <stdint.h>\n#include <stddef.h>\n{body}\n"),
    );
    let so = dir.join("libplugin.so");
    let st = Std::new("gcc")
        .args(["-shared", "-fPIC", "-O2", "-o"])
        .arg(&so)
        .arg(&src)
        .status()
        .unwrap();
    assert!(st.success());
    so
}

#[test]
fn plugin_events_receive_their_data_and_a_missing_symbol_is_refused() {
    if !gcc() {
        punctual_testkit::missing(
            "plugin_events",
            "gcc is not installed (apt-get install -y gcc)",
        );
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let out = t.path().join("sum");
    let so = build_plugin(
        t.path(),
        &format!(
            "#include <stdio.h>\nstatic unsigned long total;\nint punctual_event(const uint8_t *d, size_t n, uint64_t at) {{ for (size_t i = 0; i < n; i++) total += d[i]; \
             FILE *f = fopen(\"{}\", \"w\"); if (f) {{ fprintf(f, \"%lu\", total); fclose(f); }} return 0; }}",
            out.display()
        ),
    );
    let p = write(
        t.path(),
        "p.toml",
        &format!(
            "[[action]]\nname = \"plug\"\nkind = \"plugin\"\npath = \"{}\"\n[[event]]\nat = \"10ms\"\nuse = \"plug\"\ndata = [1, 2]\n[[event]]\nat = \"20ms\"\nuse = \"plug\"\ndata = [40]\n",
            so.display()
        ),
    );
    let o = punctual().arg("run").arg(&p).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "43");

    let p = write(t.path(), "q.toml", &format!("[[event]]\nat = \"1ms\"\naction = {{ kind = \"plugin\", path = \"{}\", symbol = \"other\" }}\n", so.display()));
    let o = punctual().arg("run").arg(&p).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("has no symbol 'other'"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn the_watchdog_demotes_a_plugin_spinning_forever_under_fifo_and_exits_3() {
    if !gcc() || !is_root() {
        punctual_testkit::skip(
            "the_watchdog_demotes_a_plugin",
            "needs gcc and root for SCHED_FIFO",
        );
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let so = build_plugin(t.path(), "int punctual_event(const uint8_t *d, size_t n, uint64_t at) { for (;;) { __asm__ volatile(\"\"); } return 0; }");
    let p = write(t.path(), "p.toml", &format!("[[event]]\nat = \"10ms\"\naction = {{ kind = \"plugin\", name = \"forever\", path = \"{}\" }}\n", so.display()));
    let json = t.path().join("r.json");
    let start = std::time::Instant::now();
    let o = punctual()
        .arg("run")
        .arg(&p)
        .args(["--watchdog", "300ms", "--json"])
        .arg(&json)
        .timeout(std::time::Duration::from_secs(20))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("watchdog") && e.contains("'forever'") && e.contains("Demoted"),
        "{e}"
    );
    assert!(start.elapsed().as_secs() < 10);
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert!(doc["watchdog"]["reason"]
        .as_str()
        .unwrap()
        .contains("forever"));
    assert!(doc["watchdog"]["demoted_threads"].as_u64().unwrap() >= 1);
}

/// Issue 31: this test failed once in two suite runs with "CPU 1 starved" and no action named. A
/// sibling test's real-time dispatcher held the CPU before this run reached its action, and the
/// watchdog blamed this run. Here another process spins at FIFO on the dispatcher's CPU for a
/// second once the watchdog watches, before the plugin's release: the watchdog reports that span
/// as someone else's, then trips on the plugin, by name.
#[test]
fn the_watchdog_names_the_spinning_plugin_even_after_another_process_starved_its_cpu() {
    if !gcc() || !is_root() {
        punctual_testkit::skip(
            "the_watchdog_names_the_spinning_plugin_even_after_another_process_starved_its_cpu",
            "needs gcc and root for SCHED_FIFO",
        );
        return;
    }
    let _cpu = punctual_testkit::exclusive_cpu();
    let t = tempfile::tempdir().unwrap();
    let so = build_plugin(t.path(), "int punctual_event(const uint8_t *d, size_t n, uint64_t at) { for (;;) { __asm__ volatile(\"\"); } return 0; }");
    let p = write(t.path(), "p.toml", &format!("[[event]]\nat = \"3s\"\naction = {{ kind = \"plugin\", name = \"forever\", path = \"{}\" }}\n", so.display()));
    let json = t.path().join("r.json");
    let child = Std::new(assert_cmd::cargo::cargo_bin("punctual"))
        .env("PUNCTUAL_DATA_DIR", data_dir())
        .arg("run")
        .arg(&p)
        .args(["--watchdog", "300ms", "--json"])
        .arg(&json)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The watchdog watches once its thread exists.
    let watchdog = "punctual-watchdog";
    let t0 = std::time::Instant::now();
    while !thread_named(child.id(), watchdog) {
        assert!(t0.elapsed().as_secs() < 20, "no {watchdog} thread");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let spinner = punctual_testkit::Spinner::start(last_cpu(), Some(98));
    std::thread::sleep(std::time::Duration::from_millis(1_000));
    drop(spinner);
    let o = child.wait_with_output().unwrap();
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(3), "{e}");
    assert!(e.contains("'forever'"), "the plugin is not named: {e}");
    assert!(
        e.contains("by real-time work outside this run"),
        "the foreign starvation is not reported: {e}"
    );
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert!(doc["watchdog"]["reason"]
        .as_str()
        .unwrap()
        .contains("forever"));
    let held = doc["cpu_held_by_others"].as_array().unwrap();
    assert!(held.iter().any(|h| h["cpu"] == last_cpu()), "{held:?}");
}

/// Whether process `pid` has a thread called `name` (as the kernel keeps it: 15 bytes).
fn thread_named(pid: u32, name: &str) -> bool {
    let name = &name[..name.len().min(15)];
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.flatten().any(|t| {
                std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim() == name)
            })
        })
        .unwrap_or(false)
}

/// The second SIGINT is for a run the first cannot end: here the dispatcher is stuck inside an
/// action that never returns, with the watchdog off. The second undoes everything and exits at once.
#[test]
fn a_second_interrupt_ends_a_run_stuck_in_an_action_at_once() {
    let test = "a_second_interrupt_ends_a_run_stuck_in_an_action_at_once";
    if !gcc() {
        punctual_testkit::missing(test, "gcc is not installed (apt-get install -y gcc)");
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let so = build_plugin(
        t.path(),
        "#include <unistd.h>\nint punctual_event(const uint8_t *d, size_t n, uint64_t at) { sleep(3600); return 0; }",
    );
    let p = write(t.path(), "p.toml", &format!("[[event]]\nat = \"10ms\"\naction = {{ kind = \"plugin\", name = \"stuck\", path = \"{}\" }}\n", so.display()));
    let mut child = Std::new(assert_cmd::cargo::cargo_bin("punctual"))
        .args(["run", "--no-store", "--watchdog", "off"])
        .arg(&p)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let sigint = |c: &std::process::Child| {
        // SAFETY: signalling our own child by pid.
        unsafe { libc::kill(c.id() as i32, libc::SIGINT) };
    };
    std::thread::sleep(std::time::Duration::from_millis(1500));
    sigint(&child);
    std::thread::sleep(std::time::Duration::from_millis(1000));
    assert!(
        child.try_wait().unwrap().is_none(),
        "the first interrupt ended a run whose dispatcher is inside the action"
    );
    sigint(&child);
    let t0 = std::time::Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if t0.elapsed().as_secs() >= 20 {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the second interrupt did not end the run");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(130), "{err}");
    assert!(err.contains("second interrupt"), "{err}");
}

fn lib_built() -> bool {
    let exe = assert_cmd::cargo::cargo_bin("punctual");
    let dir = exe.parent().unwrap().to_path_buf();
    dir.join("libpunctual.so").exists() || dir.join("deps/libpunctual.so").exists()
}

#[test]
fn install_lib_then_the_c_example_runs_as_a_spawned_wake_client() {
    if !gcc() {
        punctual_testkit::missing(
            "install_lib",
            "gcc is not installed (apt-get install -y gcc)",
        );
        return;
    }
    if !lib_built() {
        punctual_testkit::skip(
            "install_lib",
            "libpunctual.so is not built (run the whole workspace's tests)",
        );
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let prefix = t.path().join("prefix");
    let o = punctual()
        .args(["install-lib", "--prefix"])
        .arg(&prefix)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        prefix.join("include/punctual.h").exists() && prefix.join("lib/libpunctual.so").exists()
    );
    // The flags come from the installed punctual.pc alone (its Libs carry the run path, so the
    // program starts without LD_LIBRARY_PATH), read as pkg-config would substitute them.
    let pc = std::fs::read_to_string(prefix.join("lib/pkgconfig/punctual.pc")).unwrap();
    let var = |k: &str| {
        pc.lines()
            .find_map(|l| l.strip_prefix(k))
            .unwrap_or_else(|| panic!("{k} in {pc}"))
            .trim()
            .replace("${prefix}", &prefix.display().to_string())
    };
    let libdir = var("libdir=");
    let flags = format!("{} {}", var("Cflags:"), var("Libs:"))
        .replace(
            "${includedir}",
            &prefix.join("include").display().to_string(),
        )
        .replace("${libdir}", &libdir);
    assert!(flags.contains("-Wl,-rpath,"), "{flags}");
    let bin = t.path().join("periodic");
    let st = Std::new("gcc")
        .arg("-O2")
        .arg(repo().join("examples/c/periodic.c"))
        .args(flags.split_whitespace())
        .arg("-o")
        .arg(&bin)
        .status()
        .unwrap();
    assert!(st.success());
    let out = t.path().join("client.txt");
    let wrapper = write(
        t.path(),
        "client.sh",
        &format!(
            "#!/bin/sh\nexec {} --attach \"$PUNCTUAL_WAKE_CHANNEL\" --loops 1000000 > {}\n",
            bin.display(),
            out.display()
        ),
    );
    Std::new("chmod").arg("+x").arg(&wrapper).status().unwrap();
    let shm = tempfile::tempdir().unwrap();
    let p = write(
        t.path(),
        "w.toml",
        &format!("[plan]\nduration = \"600ms\"\n[[task]]\nname = \"client\"\nperiod = \"5ms\"\naction = {{ kind = \"wake\", spawn = [\"{}\"] }}\n", wrapper.display()),
    );
    let json = t.path().join("r.json");
    let o = punctual()
        .arg("run")
        .arg(&p)
        .arg("--json")
        .arg(&json)
        .env("PUNCTUAL_SHM_DIR", shm.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let s = doc["series"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "client")
        .unwrap()
        .clone();
    // A stall of more than a period (the host; on a loaded machine the client itself: 250 ms
    // once, 82 periods) makes the dispatcher skip (and count) releases: how many were handed over
    // depends on the machine, what was measured and missed adds up below.
    let released = s["releases"].as_u64().unwrap();
    assert!(
        released <= 120 && released >= s["count"].as_u64().unwrap(),
        "{s}"
    );
    assert_eq!(s["measured_by"], "wake client");
    // Every release was either measured by the client or counted as missed.
    assert_eq!(
        s["count"].as_u64().unwrap() + s["missed_periods"].as_u64().unwrap(),
        120,
        "{s}"
    );
    let text = std::fs::read_to_string(&out).unwrap();
    let first = text.lines().next().unwrap_or_default().to_string();
    assert!(first.starts_with("releases "), "{text}");
    let n: u64 = first.split_whitespace().nth(1).unwrap().parse().unwrap();
    assert!(
        n + s["missed_periods"].as_u64().unwrap() >= 119 && n <= 120,
        "client saw {n}: {text}"
    );
    let cs: serde_json::Value = serde_json::from_str(text.lines().nth(1).unwrap()).unwrap();
    assert_eq!(cs["mode"], "wake client");

    // Installed elsewhere (`cargo install` puts only the binary in ~/.cargo/bin), run from the
    // source tree: the library is found under ./target.
    let in_tree = ["release", "debug"].iter().any(|p| {
        let d = repo().join("target").join(p);
        d.join("libpunctual.so").is_file() || d.join("deps/libpunctual.so").is_file()
    });
    if in_tree {
        install_from_a_copy_run_in_the_tree(t.path());
    } else {
        punctual_testkit::skip(
            "install_lib from ./target",
            "the build is not under the source tree's target/ (CARGO_TARGET_DIR?)",
        );
    }
    uninstall_removes_exactly_what_was_installed(&prefix);
}

fn install_from_a_copy_run_in_the_tree(t: &Path) {
    let elsewhere = t.join("bin");
    std::fs::create_dir(&elsewhere).unwrap();
    std::fs::copy(
        assert_cmd::cargo::cargo_bin("punctual"),
        elsewhere.join("punctual"),
    )
    .unwrap();
    let o = Std::new(elsewhere.join("punctual"))
        .args(["install-lib", "--prefix"])
        .arg(t.join("prefix2"))
        .current_dir(repo())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(t.join("prefix2/lib/libpunctual.so").is_file());
}

fn uninstall_removes_exactly_what_was_installed(prefix: &Path) {
    // A library that is not there is a usage error; --uninstall removes exactly what was installed.
    let o = punctual()
        .args([
            "install-lib",
            "--from",
            "/nonexistent/libpunctual.so",
            "--prefix",
        ])
        .arg(prefix)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    std::fs::write(prefix.join("lib/other.so"), b"not ours").unwrap();
    let o = punctual()
        .args(["install-lib", "--uninstall", "--prefix"])
        .arg(prefix)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("removed 3 file(s)"));
    for f in [
        "lib/libpunctual.so",
        "include/punctual.h",
        "lib/pkgconfig/punctual.pc",
    ] {
        assert!(!prefix.join(f).exists(), "{f} left behind");
    }
    assert!(prefix.join("lib/other.so").exists());
}

#[test]
fn shield_is_restored_after_kill_9() {
    if !is_root() || last_cpu() == 0 {
        punctual_testkit::skip("shield_is_restored_after_kill_9", "needs root and two CPUs");
        return;
    }
    // A shield needs its CPU to itself: one at a time across test processes.
    let _cpu = punctual_testkit::exclusive_cpu();
    let state = tempfile::tempdir().unwrap();
    let mut sleeper = Std::new("sleep").arg("30").spawn().unwrap();
    let pid = sleeper.id();
    // The runner may hand its tests a narrower CPU mask (CI pins them to CPU 0): give the sleeper
    // every online CPU, so the shielded one is in its mask and the shield has something to move.
    // SAFETY: a zeroed cpu_set_t filled by CPU_SET, applied to the child we started.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for c in 0..=last_cpu() {
            libc::CPU_SET(c, &mut set);
        }
        assert_eq!(
            libc::sched_setaffinity(pid as i32, std::mem::size_of::<libc::cpu_set_t>(), &set),
            0,
            "widening the sleeper's CPU mask"
        );
    }
    let affinity = |pid: u32| {
        let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        s.lines()
            .find(|l| l.starts_with("Cpus_allowed_list:"))
            .unwrap()
            .split_whitespace()
            .nth(1)
            .unwrap()
            .to_string()
    };
    let before = affinity(pid);
    let exe = assert_cmd::cargo::cargo_bin("punctual");
    let mut shield = Std::new(&exe)
        .args(["shield", "--cpus", &last_cpu().to_string(), "-D", "20s"])
        .env("PUNCTUAL_STATE_DIR", state.path())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait for the shield to be up (the journal file appears, the sleeper moves).
    let t0 = std::time::Instant::now();
    while affinity(pid) == before && t0.elapsed().as_secs() < 10 {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let during = affinity(pid);
    // SAFETY: killing the process we started, by pid.
    unsafe { libc::kill(shield.id() as i32, libc::SIGKILL) };
    let _ = shield.wait();
    let journals = std::fs::read_dir(state.path()).unwrap().count();
    // Restore before any assertion: a failing assertion drops the state directory, and with it
    // the journal, which would leave the IRQs and RT throttling changed on this machine (a first
    // version of this test did exactly that when the runner pinned it to one CPU).
    let o = punctual()
        .args(["shield", "--restore"])
        .env("PUNCTUAL_STATE_DIR", state.path())
        .output()
        .unwrap();
    assert_ne!(during, before, "the shield did not move the sleeper");
    assert!(journals > 0, "no journal left after kill -9");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        affinity(pid),
        before,
        "restore did not put the sleeper back"
    );
    let _ = sleeper.kill();
    let _ = sleeper.wait();
}

#[test]
fn the_dispatcher_margin_is_capped_unless_its_cpu_is_shielded() {
    if !is_root() || last_cpu() == 0 {
        punctual_testkit::skip(
            "the_dispatcher_margin_is_capped_unless_its_cpu_is_shielded",
            "needs root and two CPUs",
        );
        return;
    }
    let _cpu = punctual_testkit::exclusive_cpu();
    let dir = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    // Ten tasks at 5 ms on one CPU: a release every 500 us on average, so the margin may reach 250 us.
    let mut text = "[plan]\nname = \"capped\"\nduration = \"300ms\"\n".to_string();
    for i in 0..10 {
        text += &format!(
            "[[task]]\nname = \"t{i}\"\nperiod = \"5ms\"\noffset = \"auto\"\naction = {{ kind = \"mark\" }}\n"
        );
    }
    let plan = write(dir.path(), "p.toml", &text);
    let cpu = last_cpu().to_string();
    let exe = assert_cmd::cargo::cargo_bin("punctual");
    let cap_of = |json: &Path| {
        let doc: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap();
        doc["dispatchers"][0]["spin_margin_cap_ns"].clone()
    };
    let plain = dir.path().join("plain.json");
    let o = punctual()
        .args(["run", plan.to_str().unwrap(), "-a", &cpu, "--json"])
        .arg(&plain)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(cap_of(&plain), 250_000);
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(table.contains("(cap 250 us)"), "{table}");

    let shielded = dir.path().join("shielded.json");
    let o = Std::new(&exe)
        .args(["shield", "--cpus", &cpu, "--"])
        .arg(&exe)
        .args(["run", plan.to_str().unwrap(), "-a", &cpu, "--json"])
        .arg(&shielded)
        .env("PUNCTUAL_STATE_DIR", state.path())
        .env("PUNCTUAL_DATA_DIR", data_dir())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        cap_of(&shielded).is_null(),
        "inside `punctual shield` the CPU holds no normal task to starve"
    );
}
