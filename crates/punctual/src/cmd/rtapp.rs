//! `punctual __rtapp-task` (hidden): the wake client of a task converted from an rt-app file, started
//! by the dispatcher (`punctual_dispatch::rtapp_client`).

use clap::Args;
use punctual_session::Exit;

#[derive(Args, Debug)]
pub struct RtAppTaskArgs {
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
    pub args: Vec<String>,
}

pub fn task(a: RtAppTaskArgs) -> anyhow::Result<Exit> {
    let channel = std::env::var("PUNCTUAL_WAKE_CHANNEL").ok();
    match punctual_dispatch::rtapp_client::serve(&a.args, channel) {
        Ok(_) => Ok(Exit::Ok),
        Err(e) => {
            eprintln!("punctual __rtapp-task: {e}");
            Ok(Exit::System)
        }
    }
}

/// The argv the converted plan's wake actions start: this executable and `__rtapp-task`.
pub fn client() -> Vec<String> {
    let exe = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| "punctual".into());
    vec![exe, "__rtapp-task".into()]
}
