//! `punctual __load KIND`: the body of one load process (started by [`punctual_load::Loads`]).

use crate::cli::LoadBodyArgs;

pub fn run(a: LoadBodyArgs) -> anyhow::Result<i32> {
    let report = punctual_load::run_body(
        a.kind,
        &punctual_load::BodyOptions {
            cpu: a.cpu,
            dir: a.dir,
        },
    )?;
    println!("{}", serde_json::to_string(&report)?);
    Ok(0)
}
