//! Write a synthetic trace of a busy machine (many short-lived processes) to a file, to measure
//! `punctual trace analyze` on it: `cargo run --release -p punctual-trace --example synth_trace --
//! PROCESSES SECONDS OUT.ptf`.
fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 4 {
        eprintln!("usage: synth_trace PROCESSES SECONDS OUT.ptf");
        std::process::exit(2);
    }
    let processes: u32 = args[1].parse().expect("PROCESSES: a whole number");
    let seconds: u64 = args[2].parse().expect("SECONDS: a whole number");
    let synth = punctual_trace::synth::short_processes(processes, 2, seconds * 1_000_000_000);
    std::fs::write(&args[3], synth.file_bytes()).expect("writing the trace file");
}
