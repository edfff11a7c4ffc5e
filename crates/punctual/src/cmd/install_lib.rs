//! `punctual install-lib --prefix DIR`: install libpunctual.so and punctual.h (SPEC section 4).

use clap::Args;
use punctual_result::Failure;
use std::path::PathBuf;

const HEADER: &str = include_str!("../../../libpunctual/include/punctual.h");

#[derive(Args, Debug)]
pub struct InstallLibArgs {
    /// Install into PREFIX/lib and PREFIX/include (and PREFIX/lib/pkgconfig/punctual.pc).
    #[arg(long, value_name = "DIR")]
    pub prefix: PathBuf,
}

/// libpunctual.so is built next to the punctual binary (same cargo target directory).
fn find_library() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?;
    [
        dir.join("libpunctual.so"),
        dir.join("deps/libpunctual.so"),
        dir.join("../lib/libpunctual.so"),
    ]
    .into_iter()
    .find(|p| p.is_file())
}

pub fn run(a: InstallLibArgs) -> anyhow::Result<punctual_session::Exit> {
    let lib = find_library().ok_or_else(|| {
        Failure::system("libpunctual.so is not next to this punctual binary; build it with `cargo build --release -p punctual-libpunctual` (or build the whole workspace)")
    })?;
    let libdir = a.prefix.join("lib");
    let incdir = a.prefix.join("include");
    let pcdir = libdir.join("pkgconfig");
    for d in [&libdir, &incdir, &pcdir] {
        std::fs::create_dir_all(d)
            .map_err(|e| Failure::usage(format!("--prefix: creating {}: {e}", d.display())))?;
    }
    let dest = libdir.join("libpunctual.so");
    // Through punctual's one file writer: atomic, never through a link someone else planted, the
    // owner and mode of a library being replaced kept.
    let copy = || -> std::io::Result<()> {
        let mut out = punctual_result::output::AtomicFile::create_mode(&dest, 0o755)?;
        std::io::copy(&mut std::fs::File::open(&lib)?, &mut out)?;
        out.commit()
    };
    copy().map_err(|e| {
        Failure::system(format!(
            "copying {} to {}: {e}",
            lib.display(),
            dest.display()
        ))
    })?;
    punctual_result::output::write_atomic(&incdir.join("punctual.h"), HEADER.as_bytes())?;
    let pc = format!(
        "prefix={}\nlibdir=${{prefix}}/lib\nincludedir=${{prefix}}/include\n\nName: punctual\nDescription: periodic tasks with punctual's accuracy\nVersion: {}\nLibs: -L${{libdir}} -lpunctual\nCflags: -I${{includedir}}\n",
        a.prefix.display(),
        env!("CARGO_PKG_VERSION")
    );
    punctual_result::output::write_atomic(&pcdir.join("punctual.pc"), pc.as_bytes())?;
    println!(
        "installed {} and {}",
        dest.display(),
        incdir.join("punctual.h").display()
    );
    println!(
        "compile with: cc prog.c -I{} -L{} -lpunctual -Wl,-rpath,{}",
        incdir.display(),
        libdir.display(),
        libdir.display()
    );
    Ok(punctual_session::Exit::Ok)
}
