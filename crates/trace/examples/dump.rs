//! Print the events of a trace file as text (debugging aid): `cargo run -p punctual-trace --example dump FILE [PID]`.
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let t = punctual_trace::file::read_trace_file(std::path::Path::new(&args[1]))
        .expect("readable trace");
    let pid: Option<i32> = args.get(2).map(|p| p.parse().unwrap());
    for e in &t.events {
        let s = format!("{:?}", e.kind);
        if let Some(p) = pid {
            if !s.contains(&format!("pid: {p},")) && !s.contains(&format!("pid: {p} ")) {
                continue;
            }
        }
        println!("{:>16} cpu{} {s}", e.ts, e.cpu);
    }
}
