//! `kurt-arts`: KURT's ARTS check (thesis section 4.4.2, Fig. 4.7) on this machine. A stream of
//! frames at a fixed spacing is sent over a veth pair between two network namespaces made for the
//! run, by punctual's replay (the dispatcher: anchored instants, wake early, spin, send) and by
//! tcpreplay from the same capture file, one after the other; a capture in the other namespace takes
//! every frame's kernel receive timestamp, and the inter-arrival times are compared with the
//! spacing (the thesis used an ATM cell analyzer).
//!
//! measure: [`KurtArts::run`] (each stream by `KurtArts::stream`); model: [`Model`]; tables:
//! [`tables`]; figures: [`figures`].

use punctual_dispatch::engine::SlotProgress;
use punctual_result::doc::kind;
use punctual_result::{Failure, ResultDoc, Series, Table};
use punctual_rt::{setup_current_thread, Policy, RtWant, ThreadRequest};
use punctual_session::{Ctx, Figure, LiveSpec, Measurement, Report};
use punctual_time::clock::read_clock;
use punctual_time::{format_ns, MarginPolicy, SystemClock};
use punctual_traffic::arrivals::Arrivals;
use punctual_traffic::netns::Pair;
use punctual_traffic::read::read_capture;
use punctual_traffic::record::{write_pcapng, Capturer, NsPcapNg, Until};
use punctual_traffic::replay::{replay, LoopSettings, RawSender};
use punctual_traffic::schedule::{Schedule, ScheduleConfig, Timing};
use punctual_traffic::store::PacketStore;
use punctual_traffic::DataLink;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;

pub const NAME: &str = "kurt-arts";

/// The spacings of the thesis' figure (100 us is its worked example, 500 us its quoted one).
pub const SPACINGS_NS: [u64; 4] = [100_000, 500_000, 1_000_000, 10_000_000];

/// The thesis at 500 us: the "variance" (us), the share within 1 % and within 7 % of the spacing.
pub const ARTS_500US: (f64, f64, f64) = (2.74, 99.7, 100.0);

/// The frames' EtherType (IEEE local experimental): the receiving stack ignores them.
const ETHERTYPE: [u8; 2] = [0x88, 0xb5];
/// Frame length (the Ethernet minimum without its checksum).
const FRAME: usize = 60;
/// Sender priority: the experiment's class, below the kernel's own threaded work.
const SENDER_PRIORITY: u32 = 90;

/// The methods compared, in table order.
pub const METHODS: [&str; 2] = ["punctual", "tcpreplay"];

/// The experiment.
pub struct KurtArts {
    pub quick: bool,
    /// Frames per stream (the issue's: 10,000).
    pub packets: u64,
    pub spacings: Vec<u64>,
    /// The sender's CPU.
    pub cpu: usize,
    sent: std::sync::Arc<AtomicU64>,
}

impl KurtArts {
    pub fn new(opts: crate::Options) -> KurtArts {
        KurtArts {
            quick: opts.quick,
            packets: if opts.quick { 300 } else { 10_000 },
            spacings: SPACINGS_NS.to_vec(),
            cpu: punctual_rt::affinity::last_online_cpu(),
            sent: Default::default(),
        }
    }

    fn expected_ns(&self) -> u64 {
        let per: u64 = self.spacings.iter().map(|s| s * self.packets).sum();
        per * METHODS.len() as u64
    }
}

/// One stream as the receiver saw it.
pub struct Stream {
    pub spacing_ns: u64,
    pub method: &'static str,
    pub sent: u64,
    /// `None` when fewer than two frames arrived.
    pub arrivals: Option<Arrivals>,
}

/// What `run` measured, and why tcpreplay was left out when it was.
pub struct Outcome {
    pub streams: Vec<Stream>,
    pub tcpreplay: Result<String, String>,
}

/// `n` frames from `src` to `dst`, each carrying its sequence number, `spacing` apart in the file.
pub fn frames(src: [u8; 6], dst: [u8; 6], n: u64, spacing: u64) -> PacketStore {
    let mut store = PacketStore::with_capacity(n as usize, n as usize * FRAME);
    for i in 0..n {
        let mut f = Vec::with_capacity(FRAME);
        f.extend_from_slice(&dst);
        f.extend_from_slice(&src);
        f.extend_from_slice(&ETHERTYPE);
        f.extend_from_slice(&i.to_le_bytes());
        f.resize(FRAME, 0);
        store.push(i * spacing, &f);
    }
    store
}

/// Receive timestamps of the stream's frames (from `src`, of our EtherType) in a capture.
pub fn stream_timestamps(capture: &PacketStore, src: [u8; 6]) -> Vec<u64> {
    (0..capture.len())
        .filter(|&i| {
            let f = capture.get(i);
            f.len() >= 14 && f[6..12] == src && f[12..14] == ETHERTYPE
        })
        .map(|i| capture.timestamps()[i])
        .collect()
}

/// tcpreplay's version line, or why it cannot run.
fn tcpreplay_version() -> Result<String, String> {
    match std::process::Command::new("tcpreplay")
        .arg("--version")
        .output()
    {
        Ok(o) => Ok(String::from_utf8_lossy(&o.stdout)
            .lines()
            .chain(String::from_utf8_lossy(&o.stderr).lines())
            .find(|l| l.contains("version"))
            .unwrap_or("tcpreplay")
            .trim()
            .to_string()),
        Err(e) => Err(format!(
            "tcpreplay is not installed ({e}; apt-get install tcpreplay)"
        )),
    }
}

impl KurtArts {
    /// Capture in the second namespace while `send` runs, then the stream's timestamps.
    fn captured<T>(
        &self,
        pair: &Pair,
        dir: &Path,
        src: [u8; 6],
        spacing: u64,
        send: impl FnOnce() -> Result<T, Failure>,
    ) -> Result<(Vec<u64>, T), Failure> {
        let file = dir.join(format!("rx-{spacing}.pcapng"));
        let stop = AtomicBool::new(false);
        let (ready_tx, ready_rx) = mpsc::channel();
        let (sent, recorded) = std::thread::scope(|s| {
            let rx = s.spawn(|| -> Result<_, Failure> {
                pair.enter(1)?;
                let cap = Capturer::open(&pair.dev[1])?;
                let out = std::fs::File::create(&file)
                    .map_err(|e| Failure::system(format!("{}: {e}", file.display())))?;
                let mut out = NsPcapNg::new(out, cap.link, Some(&pair.dev[1]))?;
                let _ = ready_tx.send(());
                let until = Until {
                    duration: Some(self.packets * spacing + 30_000_000_000),
                    count: None,
                };
                Ok(cap.run(&mut out, until, &stop, &AtomicU64::new(0))?)
            });
            if ready_rx.recv().is_err() {
                return (
                    Err(Failure::system("the receiver did not start")),
                    rx.join(),
                );
            }
            let sent = send();
            // Frames still in flight arrive well within this.
            std::thread::sleep(std::time::Duration::from_millis(200));
            stop.store(true, Ordering::Relaxed);
            (sent, rx.join())
        });
        let recorded = recorded.map_err(|_| Failure::system("the receiver panicked"))?;
        recorded?;
        let sent = sent?;
        let capture = read_capture(&file)?;
        Ok((stream_timestamps(&capture.packets, src), sent))
    }

    /// One spacing: punctual's replay, then tcpreplay's (when it is there), same frames, same
    /// receiver.
    fn stream(
        &self,
        ctx: &Ctx,
        pair: &Pair,
        dir: &Path,
        macs: ([u8; 6], [u8; 6]),
        spacing: u64,
        out: &mut Outcome,
    ) -> Result<(), Failure> {
        let store = frames(macs.0, macs.1, self.packets, spacing);
        ctx.step(format!(
            "{} every {}: punctual",
            self.packets,
            format_ns(spacing)
        ));
        let (ts, sent) = self.captured(pair, dir, macs.0, spacing, || {
            self.send_punctual(ctx, pair, &store, spacing)
        })?;
        out.streams.push(Stream {
            spacing_ns: spacing,
            method: METHODS[0],
            sent,
            arrivals: Arrivals::of(&ts, spacing),
        });
        if out.tcpreplay.is_err() || ctx.stop().load(Ordering::Relaxed) {
            return Ok(());
        }
        ctx.step(format!(
            "{} every {}: tcpreplay",
            self.packets,
            format_ns(spacing)
        ));
        let file = dir.join(format!("tx-{spacing}.pcapng"));
        let w = std::fs::File::create(&file)
            .map_err(|e| Failure::system(format!("{}: {e}", file.display())))?;
        write_pcapng(std::io::BufWriter::new(w), DataLink::ETHERNET, &store)?;
        let (ts, sent) = self.captured(pair, dir, macs.0, spacing, || {
            // tcpreplay at its best: its nanosleep timer (the default gettimeofday one took
            // 3.8 ms per packet at 1 ms spacing here), the file in memory, and punctual's CPU and
            // class, so the comparison is of the method.
            let cpu = self.cpu.to_string();
            let prio = ctx.rt.priority.to_string();
            let mut args = vec!["netns", "exec", &pair.ns[0], "taskset", "-c", &cpu];
            if ctx.rt.policy == Policy::Fifo {
                args.extend(["chrt", "-f", &prio]);
            }
            args.extend(["tcpreplay", "-q", "-T", "nano", "-K", "-i", &pair.dev[0]]);
            let o = std::process::Command::new("ip")
                .args(&args)
                .arg(&file)
                .output()
                .map_err(|e| Failure::system(format!("running tcpreplay: {e}")))?;
            if !o.status.success() {
                return Err(Failure::system(format!(
                    "tcpreplay: {}",
                    String::from_utf8_lossy(&o.stderr).trim()
                )));
            }
            Ok(self.packets)
        })?;
        self.sent.fetch_add(sent, Ordering::Relaxed);
        out.streams.push(Stream {
            spacing_ns: spacing,
            method: METHODS[1],
            sent,
            arrivals: Arrivals::of(&ts, spacing),
        });
        Ok(())
    }

    /// punctual's replay from the first namespace, on the sender CPU in the real-time class.
    fn send_punctual(
        &self,
        ctx: &Ctx,
        pair: &Pair,
        store: &PacketStore,
        spacing: u64,
    ) -> Result<u64, Failure> {
        let req = ThreadRequest {
            cpu: Some(self.cpu),
            policy: ctx.rt.policy,
            priority: ctx.rt.priority,
            timer_slack_ns: ctx.rt.timer_slack_ns,
            fall_back_on_refusal: true,
        };
        std::thread::scope(|s| {
            s.spawn(|| -> Result<u64, Failure> {
                pair.enter(0)?;
                let _g = setup_current_thread(&req)
                    .map_err(|e| Failure::system(format!("the sending thread: {e}")))?;
                let mut sender = RawSender::open(&pair.dev[0], FRAME, false)?;
                let cfg = ScheduleConfig {
                    timing: Timing::Interval(spacing),
                    loops: 1,
                    limit: None,
                };
                let sched = Schedule::new(&cfg, store.timestamps())?;
                let settings = LoopSettings {
                    start: read_clock(libc::CLOCK_MONOTONIC) + 20_000_000,
                    margin: MarginPolicy::Auto,
                    shielded: false,
                    breather_every: Some(500_000_000),
                    partner: None,
                    steal: None,
                    txtime_lead: 0,
                    explain_bound: None,
                    avoid: None,
                };
                let progress = [SlotProgress::default()];
                let r = replay(
                    &SystemClock::monotonic(),
                    store,
                    &sched,
                    &mut sender,
                    &settings,
                    ctx.stop(),
                    &progress,
                );
                self.sent.fetch_add(r.timing.sent, Ordering::Relaxed);
                Ok(r.timing.sent)
            })
            .join()
            .map_err(|_| Failure::system("the sending thread panicked"))?
        })
    }
}

impl Measurement for KurtArts {
    type Outcome = Outcome;

    fn label(&self) -> String {
        NAME.into()
    }
    fn wants(&self) -> Option<RtWant> {
        Some(RtWant {
            policy: Policy::Fifo,
            priority: SENDER_PRIORITY,
            mlock: true,
            dma_latency_us: Some(0),
        })
    }
    fn live(&self) -> Option<LiveSpec> {
        let sent = self.sent.clone();
        Some(LiveSpec::timed(self.expected_ns(), move || {
            format!("{} frames sent", sent.load(Ordering::Relaxed))
        }))
    }
    fn run(&mut self, ctx: &Ctx) -> Result<Outcome, Failure> {
        if self.packets < 2 || self.spacings.contains(&0) {
            return Err(Failure::usage(
                "kurt-arts: at least 2 packets and non-zero spacings",
            ));
        }
        let pair = Pair::new("arts", 214)?;
        let macs = (pair.mac(0)?, pair.mac(1)?);
        let dir = tempfile::Builder::new()
            .prefix("punctual-arts-")
            .tempdir()
            .map_err(|e| Failure::system(format!("a scratch directory: {e}")))?;
        let mut out = Outcome {
            streams: Vec::new(),
            tcpreplay: tcpreplay_version(),
        };
        if let Err(why) = &out.tcpreplay {
            ctx.note(format!("tcpreplay left out: {why}"));
        }
        for &spacing in &self.spacings.clone() {
            if ctx.stop().load(Ordering::Relaxed) {
                break;
            }
            self.stream(ctx, &pair, dir.path(), macs, spacing, &mut out)?;
        }
        Ok(out)
    }
    fn report(&self, out: Outcome, _ctx: &Ctx, doc: &mut ResultDoc) -> Result<Report, Failure> {
        crate::common::mark(doc, NAME, self.quick);
        let st = &mut doc.settings.extra;
        st.insert("packets_per_stream".into(), self.packets.into());
        st.insert("sender_cpu".into(), self.cpu.into());
        st.insert(
            "tcpreplay".into(),
            match &out.tcpreplay {
                Ok(v) => v.clone().into(),
                Err(why) => format!("left out: {why}").into(),
            },
        );
        for s in &out.streams {
            let Some(a) = &s.arrivals else { continue };
            doc.series.push(
                Series::from_recorder(
                    format!("{} every {}", s.method, format_ns(s.spacing_ns)),
                    kind::INTERVAL_DEVIATION,
                    None,
                    &a.error,
                )
                .with("method", s.method)
                .with("spacing_ns", s.spacing_ns)
                .with("sent", s.sent)
                .with("received", a.received)
                .with("sd_ns", a.sd_ns)
                .with("within_1pct", a.within_1pct)
                .with("within_7pct", a.within_7pct)
                .with("stretch", a.stretch),
            );
        }
        let m = Model::of(&out, self.packets);
        Ok(Report {
            tables: tables(&m),
            figures: figures(&out)?,
            ..Report::default()
        })
    }
}

/// One table row's numbers.
#[derive(Clone, Debug, PartialEq)]
pub struct RowNumbers {
    pub sent: u64,
    pub received: u64,
    pub sd_us: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
    pub within_1pct: f64,
    pub within_7pct: f64,
    pub stretch: f64,
}

/// The numbers of the table.
pub struct Model {
    pub packets: u64,
    pub tcpreplay: Result<String, String>,
    /// (spacing, method, numbers; `None`: under two frames arrived).
    pub rows: Vec<(u64, &'static str, Option<RowNumbers>)>,
}

impl Model {
    pub fn of(out: &Outcome, packets: u64) -> Model {
        let us = |ns: u64| ns as f64 / 1000.0;
        Model {
            packets,
            tcpreplay: out.tcpreplay.clone(),
            rows: out
                .streams
                .iter()
                .map(|s| {
                    let n = s.arrivals.as_ref().map(|a| RowNumbers {
                        sent: s.sent,
                        received: a.received,
                        sd_us: a.sd_ns / 1000.0,
                        p50_us: us(a.error.percentile(50_000)),
                        p99_us: us(a.error.percentile(99_000)),
                        max_us: us(a.error.max().unwrap_or(0)),
                        within_1pct: a.within_1pct * 100.0,
                        within_7pct: a.within_7pct * 100.0,
                        stretch: a.stretch * 100.0,
                    });
                    (s.spacing_ns, s.method, n)
                })
                .collect(),
        }
    }
}

/// Fig. 4.7 as a table: per spacing, the thesis (500 us only), punctual and tcpreplay.
pub fn tables(m: &Model) -> Vec<Table> {
    let mut t = Table::new(&[
        "spacing",
        "sender",
        "sent/received",
        "sd us",
        "p50 |e| us",
        "p99 |e| us",
        "max |e| us",
        "within 1 %",
        "within 7 %",
        "stretch",
    ])
    .titled("KURT Fig. 4.7 (ARTS): inter-arrival time - spacing, at the receiver");
    let mut spacings: Vec<u64> = m.rows.iter().map(|r| r.0).collect();
    spacings.dedup();
    for (i, spacing) in spacings.iter().enumerate() {
        if i > 0 {
            t.rule();
        }
        if *spacing == 500_000 {
            let (var, w1, w7) = ARTS_500US;
            t.row([
                format_ns(*spacing),
                "ARTS (thesis)".into(),
                "-".into(),
                format!("{var:.2}"),
                "-".into(),
                "-".into(),
                "-".into(),
                format!("{w1:.1} %"),
                format!("{w7:.0} %"),
                "-".into(),
            ]);
        }
        for (_, method, n) in m.rows.iter().filter(|r| r.0 == *spacing) {
            let cells = match n {
                Some(n) => vec![
                    format!("{}/{}", n.sent, n.received),
                    format!("{:.2}", n.sd_us),
                    format!("{:.2}", n.p50_us),
                    format!("{:.2}", n.p99_us),
                    format!("{:.1}", n.max_us),
                    format!("{:.2} %", n.within_1pct),
                    format!("{:.2} %", n.within_7pct),
                    format!("{:+.4} %", n.stretch),
                ],
                None => vec!["-".into(); 8],
            };
            t.row(
                [format_ns(*spacing), method.to_string()]
                    .into_iter()
                    .chain(cells),
            );
        }
    }
    t.note(format!(
        "{} frames of 60 bytes per stream over a veth pair between two namespaces made for the run; receive times are the kernel's \
         (AF_PACKET, SO_TIMESTAMPNS) in the other namespace. e: each inter-arrival time less the spacing. The thesis measured with an \
         ATM cell analyzer and quotes only 500 us (its \"variance\", 2.74 us, is shown as sd). stretch: (last - first arrival) against \
         (n - 1) x spacing.",
        m.packets
    ));
    match &m.tcpreplay {
        Ok(v) => {
            let ratios: Vec<String> = spacings
                .iter()
                .filter_map(|s| {
                    let get = |meth: &str| {
                        m.rows
                            .iter()
                            .find(|r| r.0 == *s && r.1 == meth)
                            .and_then(|r| r.2.as_ref())
                            .map(|n| n.p99_us)
                    };
                    let (p, t) = (get("punctual")?, get("tcpreplay")?);
                    (p > 0.0).then(|| format!("{} {:.1}x", format_ns(*s), t / p))
                })
                .collect();
            t.note(format!(
                "tcpreplay ({v}) replays the same frames from a pcapng file with the same timestamps, preloaded (-K), with its \
                 nanosleep timer (-T nano), on the sender's CPU in its class; its p99 |e| against punctual's: {}.",
                ratios.join(", ")
            ));
        }
        Err(why) => {
            t.note(format!("tcpreplay left out: {why}."));
        }
    }
    vec![t]
}

/// The distributions of |e| per spacing and sender, on the percentile axis.
pub fn figures(out: &Outcome) -> Result<Vec<Figure>, Failure> {
    let lines: Vec<(String, &punctual_stats::Recorder)> = out
        .streams
        .iter()
        .filter_map(|s| {
            let a = s.arrivals.as_ref()?;
            Some((
                format!("{} {}", s.method, format_ns(s.spacing_ns)),
                &a.error,
            ))
        })
        .collect();
    if lines.is_empty() {
        return Ok(Vec::new());
    }
    Ok(vec![crate::common::figure(
        "kurt-arts-fig4-7",
        punctual_plot::percentile_plot(
            "KURT Fig. 4.7: |inter-arrival - spacing| at the receiver",
            &lines,
        ),
    )?])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_carry_their_sequence_and_are_found_in_a_capture() {
        let (a, b) = ([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
        let s = frames(a, b, 3, 500_000);
        assert_eq!(s.len(), 3);
        assert_eq!(s.timestamps(), [0, 500_000, 1_000_000]);
        let f = s.get(2);
        assert_eq!(f.len(), FRAME);
        assert_eq!(
            (&f[0..6], &f[6..12], &f[12..14]),
            (&b[..], &a[..], &ETHERTYPE[..])
        );
        assert_eq!(u64::from_le_bytes(f[14..22].try_into().unwrap()), 2);
        // A capture with someone else's frame in it: only ours are the stream.
        let mut cap = PacketStore::new();
        cap.push(10, s.get(0));
        cap.push(15, frames(b, a, 1, 1).get(0));
        cap.push(20, s.get(1));
        assert_eq!(stream_timestamps(&cap, a), [10, 20]);
    }

    #[test]
    fn the_table_puts_the_thesis_at_500us_and_the_ratio_of_p99s() {
        let row = |p99: f64| RowNumbers {
            sent: 10,
            received: 10,
            sd_us: 1.0,
            p50_us: 0.5,
            p99_us: p99,
            max_us: 9.0,
            within_1pct: 99.0,
            within_7pct: 100.0,
            stretch: 0.001,
        };
        let m = Model {
            packets: 10,
            tcpreplay: Ok("tcpreplay version: 4.4.3".into()),
            rows: vec![
                (500_000, "punctual", Some(row(2.0))),
                (500_000, "tcpreplay", Some(row(50.0))),
                (1_000_000, "punctual", None),
            ],
        };
        let t = &tables(&m)[0];
        assert_eq!(t.rows[0][1], "ARTS (thesis)");
        assert_eq!(
            (
                t.rows[0][3].as_str(),
                t.rows[0][7].as_str(),
                t.rows[0][8].as_str()
            ),
            ("2.74", "99.7 %", "100 %")
        );
        assert_eq!(t.rows[1][1], "punctual");
        assert_eq!(t.rows[2][5], "50.00");
        assert!(t.rows[4][2..].iter().all(|c| c == "-"), "{:?}", t.rows[4]);
        assert!(
            t.notes[1].contains("500us 25.0x") || t.notes[1].contains("500 us 25.0x"),
            "{}",
            t.notes[1]
        );
    }
}
