//! `punctual __man DIR` and `punctual __completions SHELL` (hidden): the man pages (one per command)
//! and the shell completions the package installs, generated from this command line's definition.

use clap::{Args, CommandFactory};
use punctual_session::{Env, Exit};
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct ManArgs {
    /// Where to write punctual.1, punctual-latency.1, ... (created if missing).
    pub dir: PathBuf,
}

#[derive(Args, Debug)]
pub struct CompletionsArgs {
    /// bash, zsh, fish, elvish or powershell.
    pub shell: clap_complete::Shell,
}

pub fn man(a: ManArgs, env: &Env) -> anyhow::Result<Exit> {
    std::fs::create_dir_all(&a.dir)?;
    let mut cmd = crate::cli::Cli::command().disable_help_subcommand(true);
    cmd.build();
    pages(cmd, &a.dir)?;
    cyclictest_page(&a.dir)?;
    env.show(
        &format!("man pages written to {}\n", a.dir.display()),
        false,
    );
    Ok(Exit::Ok)
}

/// One page per visible command (`punctual-plan-check.1`), each saying which punctual it documents.
fn pages(cmd: clap::Command, dir: &std::path::Path) -> std::io::Result<()> {
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()).cloned() {
        pages(sub, dir)?;
    }
    page(cmd).generate_to(dir).map(|_| ())
}

fn page(cmd: clap::Command) -> clap_mangen::Man {
    clap_mangen::Man::new(cmd)
        .source(format!("punctual {}", crate::cli::VERSION))
        .manual("punctual")
}

/// `punctual cyclictest` reads its flags itself: its page lists them as its `--help` does.
fn cyclictest_page(dir: &std::path::Path) -> std::io::Result<()> {
    let mut cmd = crate::cli::Cli::command().disable_help_subcommand(true);
    cmd.build();
    let Some(sub) = cmd.find_subcommand("cyclictest").cloned() else {
        return Ok(());
    };
    let page = page(sub);
    let mut out = Vec::new();
    page.render_title(&mut out)?;
    page.render_name_section(&mut out)?;
    page.render_synopsis_section(&mut out)?;
    out.extend_from_slice(punctual_cyclictest::help_roff().as_bytes());
    std::fs::write(dir.join(page.get_filename()), out)
}

pub fn completions(a: CompletionsArgs) -> anyhow::Result<Exit> {
    let mut cmd = crate::cli::Cli::command();
    clap_complete::generate(a.shell, &mut cmd, "punctual", &mut std::io::stdout());
    Ok(Exit::Ok)
}
