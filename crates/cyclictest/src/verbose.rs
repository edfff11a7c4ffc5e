//! `-v`: every sample as cyclictest prints it (`thread:cycle:value`), made from the engine's
//! sample stream (`thread,release_ns,latency_ns` CSV, written by its writer thread, never by a
//! measuring thread). With `-o RED` only the largest of every RED samples, with its cycle.

use crate::format::value_line;
use std::io::Write;
use std::sync::{Arc, Mutex};

/// One writer shared by the status lines, the value lines and the run's own lines.
#[derive(Clone)]
pub struct Shared(pub Arc<Mutex<Box<dyn Write + Send>>>);

impl Shared {
    pub fn new(w: Box<dyn Write + Send>) -> Shared {
        Shared(Arc::new(Mutex::new(w)))
    }

    /// Write `text` at once and flush (status lines are read as they come).
    pub fn put(&self, text: &str) {
        let mut w = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let _ = w.write_all(text.as_bytes());
        let _ = w.flush();
    }
}

#[derive(Clone, Copy, Default)]
struct Reduce {
    cycle: u64,
    redmax: u64,
    cycleofmax: u64,
    reduce: u64,
}

pub(crate) struct Verbose {
    out: Shared,
    pending: Vec<u8>,
    unit_ns: u64,
    oscope: u64,
    threads: Vec<Reduce>,
}

impl Verbose {
    pub(crate) fn new(out: Shared, unit_ns: u64, oscope: u64, threads: usize) -> Verbose {
        Verbose {
            out,
            pending: Vec::new(),
            unit_ns: unit_ns.max(1),
            oscope: oscope.max(1),
            threads: vec![Reduce::default(); threads],
        }
    }

    /// One CSV line; the header and anything unreadable are skipped.
    fn line(&mut self, line: &str, text: &mut String) {
        let mut f = line.split(',');
        let (Some(t), Some(_), Some(lat)) = (f.next(), f.next(), f.next()) else {
            return;
        };
        let (Ok(t), Ok(lat)) = (t.parse::<usize>(), lat.trim().parse::<u64>()) else {
            return;
        };
        let Some(r) = self.threads.get_mut(t) else {
            return;
        };
        let v = lat / self.unit_ns;
        // cyclictest's reduction, its `diff > redmax` included.
        if v > r.redmax {
            r.redmax = v;
            r.cycleofmax = r.cycle;
        }
        r.reduce += 1;
        if r.reduce == self.oscope {
            text.push_str(&value_line(t, r.cycleofmax, r.redmax));
            r.reduce = 0;
            r.redmax = 0;
        }
        r.cycle += 1;
    }
}

impl Write for Verbose {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.pending.extend_from_slice(buf);
        let mut text = String::new();
        let end = match self.pending.iter().rposition(|&b| b == b'\n') {
            Some(e) => e,
            None => return Ok(buf.len()),
        };
        let complete: Vec<u8> = self.pending.drain(..=end).collect();
        for line in String::from_utf8_lossy(&complete).lines() {
            self.line(line, &mut text);
        }
        if !text.is_empty() {
            self.out.put(&text);
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Sink(Arc<Mutex<Vec<u8>>>);
    impl Write for Sink {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn run(oscope: u64, csv: &[&str]) -> String {
        let got = Arc::new(Mutex::new(Vec::new()));
        let mut v = Verbose::new(Shared::new(Box::new(Sink(got.clone()))), 1000, oscope, 2);
        for chunk in csv {
            v.write_all(chunk.as_bytes()).unwrap();
        }
        let text = String::from_utf8(got.lock().unwrap().clone()).unwrap();
        text
    }

    #[test]
    fn every_sample_becomes_a_value_line_even_when_split_across_writes() {
        let text = run(
            1,
            &[
                "thread,release_ns,latency_ns\n0,10,20500\n1,1",
                "0,35000\n0,20,22999\n",
            ],
        );
        assert_eq!(
            text,
            "       0:       0:      20\n       1:       0:      35\n       0:       1:      22\n"
        );
    }

    #[test]
    fn oscope_keeps_the_largest_of_each_group_with_its_cycle() {
        let text = run(
            3,
            &["0,1,5000\n0,2,9000\n0,3,7000\n0,4,1000\n0,5,2000\n0,6,3000\n"],
        );
        assert_eq!(
            text,
            "       0:       1:       9\n       0:       5:       3\n"
        );
    }
}
