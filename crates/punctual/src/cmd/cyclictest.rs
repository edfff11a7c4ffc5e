//! `punctual cyclictest [cyclictest's options]`: rt-tests' cyclictest on punctual's engine. Its
//! flags are cyclictest's, read by `punctual_cyclictest::args`; the measurement and its formats
//! are `punctual_cyclictest::measure`.

use clap::Args;
use punctual_cyclictest::measure::Cyclictest;
use punctual_cyclictest::{Parsed, HELP};
use punctual_result::Failure;
use punctual_session::{drive, Env, Exit};

#[derive(Args, Debug)]
#[command(
    disable_help_flag = true,
    long_about = "rt-tests' cyclictest (2.4): its flags, their meaning and its output formats, on \
                  punctual's latency engine. `punctual cyclictest --help` lists the flags."
)]
pub struct CyclictestArgs {
    /// cyclictest's options (`punctual cyclictest --help` lists them).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
    pub args: Vec<String>,
}

pub fn run(a: CyclictestArgs, env: &Env) -> anyhow::Result<Exit> {
    let s = match punctual_cyclictest::parse(&a.args, &punctual_rt::online_cpus())
        .map_err(Failure::from)?
    {
        Parsed::Help => {
            env.show(HELP, false);
            return Ok(Exit::Ok);
        }
        Parsed::Run(s) => *s,
    };
    let mut m = Cyclictest::new(s, Box::new(std::io::stdout())).map_err(Failure::from)?;
    let outputs = m.outputs()?;
    Ok(drive(&mut m, &outputs, env)?)
}
