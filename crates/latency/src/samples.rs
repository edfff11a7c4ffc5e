//! Streaming every sample to a file without touching the timing loop: each thread pushes
//! `(release, latency)` into its own wait-free ring; one writer thread drains the rings into the file.
//! A full ring drops the sample and counts the drop (reported, never silent).

use std::io::Write;

pub(crate) type Sample = (u64, u64);
pub(crate) const RING: usize = 1 << 16;

pub(crate) fn rings(n: usize) -> (Vec<rtrb::Producer<Sample>>, Vec<rtrb::Consumer<Sample>>) {
    (0..n).map(|_| rtrb::RingBuffer::new(RING)).unzip()
}

/// Drain until every producer has gone and every ring is empty. Returns samples written.
pub(crate) fn drain(
    mut consumers: Vec<rtrb::Consumer<Sample>>,
    out: Box<dyn Write + Send>,
) -> std::io::Result<u64> {
    let mut w = std::io::BufWriter::with_capacity(1 << 20, out);
    writeln!(w, "thread,release_ns,latency_ns")?;
    let mut written = 0u64;
    loop {
        let mut all_done = true;
        let mut got = 0usize;
        for (t, c) in consumers.iter_mut().enumerate() {
            let abandoned = c.is_abandoned();
            let n = c.slots();
            if n > 0 {
                let chunk = c.read_chunk(n).expect("slots() said they are there");
                for &(release, latency) in chunk.as_slices().0.iter().chain(chunk.as_slices().1) {
                    writeln!(w, "{t},{release},{latency}")?;
                }
                chunk.commit_all();
                got += n;
            }
            if !(abandoned && c.is_empty()) {
                all_done = false;
            }
        }
        written += got as u64;
        if all_done {
            break;
        }
        if got == 0 {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }
    w.flush()?;
    Ok(written)
}
