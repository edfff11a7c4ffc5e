//! McKenney's kernel build, scaled to a few seconds: a generated C project (many translation units
//! of arithmetic-heavy functions and a main that calls them all), compiled with `gcc -O2` in
//! parallel, one job per CPU this instance may use, then linked; the objects are removed and the
//! build starts over. Each gcc runs in a process group of its own with a parent-death signal, so
//! stopping (or killing) the load leaves no compiler behind.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Translation units in the generated project.
pub const FILES: usize = 48;
const FUNCTIONS_PER_FILE: usize = 8;

/// The compiler the load runs.
pub const COMPILER: &str = "gcc";

/// Whether the compiler can be started here.
pub fn compiler_available() -> bool {
    Command::new(COMPILER)
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn unit_source(file: usize) -> String {
    let mut s = String::from("#include <stdint.h>\n");
    for f in 0..FUNCTIONS_PER_FILE {
        // Loops, branches and a small table: enough for the optimiser to work at, different in
        // every function so nothing is merged.
        s.push_str(&format!(
            "uint64_t f{file}_{f}(uint64_t x) {{\n  uint64_t t[16];\n  for (int i = 0; i < 16; i++) t[i] = x * {a}u + i;\n  \
             for (int r = 0; r < {r}; r++) {{\n    for (int i = 0; i < 16; i++) {{\n      \
             if (t[i] & 1) t[i] = t[i] * 3 + {b}u; else t[i] = (t[i] >> 1) ^ {c}u;\n      \
             t[(i + {d}) & 15] += t[i] << (i & 7);\n    }}\n  }}\n  \
             uint64_t s = 0;\n  for (int i = 0; i < 16; i++) s ^= t[i] * (i + {e}u);\n  \
             switch (s % 7) {{ case 0: s += {a}; break; case 1: s ^= {b}; break; case 2: s *= {c}; break; \
             case 3: s -= {d}; break; case 4: s >>= 3; break; case 5: s <<= 2; break; default: s = ~s; }}\n  return s;\n}}\n",
            a = 2 * (file * 131 + f * 17) + 1,
            b = file * 7 + f * 3 + 11,
            c = file * 19 + f * 23 + 5,
            d = (file + f) % 15 + 1,
            e = f + 2,
            r = 3 + (file + f) % 5,
        ));
    }
    s
}

fn main_source() -> String {
    let mut s = String::from("#include <stdint.h>\n#include <stdio.h>\n");
    for file in 0..FILES {
        for f in 0..FUNCTIONS_PER_FILE {
            s.push_str(&format!("uint64_t f{file}_{f}(uint64_t);\n"));
        }
    }
    s.push_str("int main(void) {\n  uint64_t s = 1;\n");
    for file in 0..FILES {
        for f in 0..FUNCTIONS_PER_FILE {
            s.push_str(&format!("  s = f{file}_{f}(s);\n"));
        }
    }
    s.push_str("  printf(\"%llu\\n\", (unsigned long long)s);\n  return 0;\n}\n");
    s
}

/// Write the project into `dir`; returns the source files (main.c last).
pub fn generate(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut files = Vec::new();
    for file in 0..FILES {
        let p = dir.join(format!("u{file}.c"));
        std::fs::write(&p, unit_source(file))?;
        files.push(p);
    }
    let m = dir.join("main.c");
    std::fs::write(&m, main_source())?;
    files.push(m);
    Ok(files)
}

/// CPUs this process may run on (its affinity), at least 1.
pub fn allowed_cpus() -> usize {
    // SAFETY: a zeroed cpu_set_t filled by the kernel.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) == 0 {
            (libc::CPU_COUNT(&set) as usize).max(1)
        } else {
            1
        }
    }
}

fn spawn(args: &[&std::ffi::OsStr], dir: &Path) -> std::io::Result<Child> {
    let mut cmd = Command::new(COMPILER);
    // gcc's temporary files go into the project too, so a killed compile leaves nothing in /tmp.
    cmd.args(args)
        .current_dir(dir)
        .env("TMPDIR", dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    punctual_rt::child::ChildSetup::new(nix::sys::signal::Signal::SIGKILL)
        .process_group()
        .install(&mut cmd);
    cmd.spawn()
}

/// Kill a compile and everything it started (cc1, as: same process group), and reap it.
fn kill_job(mut c: Child) {
    // Our unreaped child leads its group, so the group id cannot have been reused.
    let _ = nix::sys::signal::killpg(
        nix::unistd::Pid::from_raw(c.id() as i32),
        nix::sys::signal::SIGKILL,
    );
    let _ = c.wait();
}

/// Build again and again in `dir` until `stop`; returns files compiled. The project directory is
/// removed before returning.
pub fn run(stop: &AtomicBool, dir: &Path) -> std::io::Result<u64> {
    let project = dir.join(format!("punctual-build-{}", std::process::id()));
    let result = build_loop(stop, &project);
    let _ = std::fs::remove_dir_all(&project);
    result
}

fn build_loop(stop: &AtomicBool, project: &Path) -> std::io::Result<u64> {
    let sources = generate(project)?;
    let jobs = allowed_cpus();
    let mut compiled = 0u64;
    let mut running: Vec<Child> = Vec::new();
    let outcome = (|| {
        while !stop.load(Ordering::Relaxed) {
            let mut queue: Vec<&PathBuf> = sources.iter().collect();
            queue.reverse();
            while !(queue.is_empty() && running.is_empty()) {
                if stop.load(Ordering::Relaxed) {
                    running.drain(..).for_each(kill_job);
                    return Ok(());
                }
                while running.len() < jobs {
                    let Some(src) = queue.pop() else { break };
                    let obj = src.with_extension("o");
                    running.push(spawn(
                        &[
                            "-O2".as_ref(),
                            "-c".as_ref(),
                            src.as_os_str(),
                            "-o".as_ref(),
                            obj.as_os_str(),
                        ],
                        project,
                    )?);
                }
                let mut i = 0;
                while i < running.len() {
                    if let Some(status) = running[i].try_wait()? {
                        // Reaped by try_wait: dropping the handle leaves no zombie.
                        #[allow(clippy::zombie_processes)]
                        running.swap_remove(i);
                        if !status.success() {
                            return Err(std::io::Error::other(format!(
                                "{COMPILER} failed: {status}"
                            )));
                        }
                        compiled += 1;
                    } else {
                        i += 1;
                    }
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            // Link, then start over from clean objects.
            let objs: Vec<PathBuf> = sources.iter().map(|s| s.with_extension("o")).collect();
            let mut args: Vec<&std::ffi::OsStr> = objs.iter().map(|o| o.as_os_str()).collect();
            args.extend([std::ffi::OsStr::new("-o"), std::ffi::OsStr::new("prog")]);
            let mut link = spawn(&args, project)?;
            loop {
                if stop.load(Ordering::Relaxed) {
                    kill_job(link);
                    return Ok(());
                }
                if link.try_wait()?.is_some() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            for o in &objs {
                let _ = std::fs::remove_file(o);
            }
        }
        Ok(())
    })();
    for c in running.drain(..) {
        kill_job(c);
    }
    outcome.map(|()| compiled)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_project_compiles_and_runs() {
        if !compiler_available() {
            punctual_testkit::skip(
                "generated_project_compiles_and_runs",
                "gcc is not installed",
            );
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let files = generate(tmp.path()).unwrap();
        assert_eq!(files.len(), FILES + 1);
        let st = Command::new(COMPILER)
            .args(["-O0", "-o", "prog"])
            .args(&files)
            .current_dir(tmp.path())
            .status()
            .unwrap();
        assert!(st.success());
        let out = Command::new(tmp.path().join("prog")).output().unwrap();
        assert!(out.status.success());
        assert!(String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse::<u64>()
            .is_ok());
    }
}
