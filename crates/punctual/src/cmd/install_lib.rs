//! `punctual install-lib --prefix DIR`: install libpunctual.so, punctual.h and punctual.pc (SPEC
//! section 4), or remove them (`--uninstall`).

use clap::Args;
use punctual_result::Failure;
use punctual_session::{Env, Exit};
use std::path::{Path, PathBuf};

const HEADER: &str = include_str!("../../../libpunctual/include/punctual.h");
const LIB: &str = "libpunctual.so";

#[derive(Args, Debug)]
pub struct InstallLibArgs {
    /// Install into PREFIX/lib and PREFIX/include (and PREFIX/lib/pkgconfig/punctual.pc).
    #[arg(long, value_name = "DIR")]
    pub prefix: PathBuf,
    /// The libpunctual.so to install (default: next to this punctual binary, else in the cargo
    /// target directory of the current directory).
    #[arg(long, value_name = "FILE", conflicts_with = "uninstall")]
    pub from: Option<PathBuf>,
    /// Remove what install-lib installed under PREFIX instead.
    #[arg(long)]
    pub uninstall: bool,
}

/// libpunctual.so beside the binary (a build of the workspace), or in `./target` (the source tree
/// after `cargo build --release -p punctual-libpunctual`, whatever installed the binary; `cargo
/// test` leaves it in `deps/` only).
fn find_library() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?.to_path_buf();
    let mut places = vec![
        dir.join(LIB),
        dir.join("deps").join(LIB),
        dir.join("../lib").join(LIB),
    ];
    for profile in ["target/release", "target/debug"] {
        places.push(PathBuf::from(profile).join(LIB));
        places.push(PathBuf::from(profile).join("deps").join(LIB));
    }
    places.into_iter().find(|p| p.is_file())
}

struct Layout {
    lib: PathBuf,
    header: PathBuf,
    pc: PathBuf,
}

fn layout(prefix: &Path) -> Layout {
    Layout {
        lib: prefix.join("lib").join(LIB),
        header: prefix.join("include/punctual.h"),
        pc: prefix.join("lib/pkgconfig/punctual.pc"),
    }
}

pub fn run(a: InstallLibArgs, env: &Env) -> anyhow::Result<Exit> {
    let at = layout(&a.prefix);
    if a.uninstall {
        let mut removed = 0;
        for f in [&at.lib, &at.header, &at.pc] {
            match std::fs::remove_file(f) {
                Ok(()) => removed += 1,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(Failure::system(format!("removing {}: {e}", f.display())).into())
                }
            }
        }
        env.show(
            &format!(
                "removed {removed} file(s) of libpunctual from {}\n",
                a.prefix.display()
            ),
            false,
        );
        return Ok(Exit::Ok);
    }
    let lib = match &a.from {
        Some(f) if f.is_file() => f.clone(),
        Some(f) => {
            return Err(Failure::usage(format!("--from {}: no such file", f.display())).into())
        }
        None => find_library().ok_or_else(|| {
            Failure::system(format!(
                "{LIB} is neither next to this punctual binary nor in ./target: in the source tree run \
                 `cargo build --release -p punctual-libpunctual`, then run install-lib from there or \
                 pass --from target/release/{LIB}"
            ))
        })?,
    };
    // Read, not loaded: a file that is not libpunctual is refused before anything is created.
    punctual_dispatch::actions::plugin::inspect_library(
        "--from",
        &lib,
        "punctual_wait_next_period",
        "give the libpunctual.so that `cargo build -p punctual-libpunctual` makes",
    )
    .map_err(Failure::usage)?;
    for d in [&at.lib, &at.header, &at.pc] {
        let dir = d.parent().expect("a file under the prefix");
        std::fs::create_dir_all(dir)
            .map_err(|e| Failure::usage(format!("--prefix: creating {}: {e}", dir.display())))?;
    }
    // Through punctual's one file writer: atomic, never through a link someone else planted, the
    // owner and mode of a library being replaced kept.
    let copy = || -> std::io::Result<()> {
        let mut out = punctual_result::output::AtomicFile::create_mode(&at.lib, 0o755)?;
        std::io::copy(&mut std::fs::File::open(&lib)?, &mut out)?;
        out.commit()
    };
    copy().map_err(|e| {
        Failure::system(format!(
            "copying {} to {}: {e}",
            lib.display(),
            at.lib.display()
        ))
    })?;
    punctual_result::output::write_atomic(&at.header, HEADER.as_bytes())?;
    // The run path is in the link line, so a program linked with `pkg-config --libs punctual`
    // starts without ldconfig or LD_LIBRARY_PATH.
    let pc = format!(
        "prefix={}\nlibdir=${{prefix}}/lib\nincludedir=${{prefix}}/include\n\nName: punctual\n\
         Description: periodic tasks with punctual's accuracy\nVersion: {}\n\
         Libs: -L${{libdir}} -Wl,-rpath,${{libdir}} -lpunctual\nCflags: -I${{includedir}}\n",
        a.prefix.display(),
        env!("CARGO_PKG_VERSION")
    );
    punctual_result::output::write_atomic(&at.pc, pc.as_bytes())?;
    let installed = format!(
        "installed {} (from {}), {} and {}; compile with:",
        at.lib.display(),
        lib.display(),
        at.header.display(),
        at.pc.display(),
    );
    // The commands on lines of their own, never wrapped, so they can be copied whole.
    env.show(
        &format!(
            "{}\n  export PKG_CONFIG_PATH={}\n  cc prog.c $(pkg-config --cflags --libs punctual)\n",
            punctual_result::table::wrap(&installed),
            at.pc.parent().expect("pkgconfig dir").display()
        ),
        false,
    );
    Ok(Exit::Ok)
}
