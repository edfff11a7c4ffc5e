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
    // The measuring threads' stalls (`--explain-trace` files), after the events.
    for st in t.trailer.iter().flat_map(|t| &t.stalls) {
        if pid.is_none_or(|p| p == st.tid) {
            println!(
                "stall {:?} tid {} cpu{} {}..{} ({} ns)",
                st.kind,
                st.tid,
                st.cpu,
                st.from,
                st.to,
                st.to - st.from
            );
        }
    }
}
