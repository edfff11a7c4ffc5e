//! `traffic replay` and `traffic record` as measurements of the lifecycle
//! (`punctual_session::execute`). Everything that can fail before the first packet (reading the
//! file, the schedule, opening the socket) is done by [`load`] and [`open_sender`], which the
//! binary calls before driving the measurement: bad input exits 2 or 3 with nothing sent.

use crate::against::{Against, Original};
use crate::read::{read_capture, read_capture_keeping, Format, Keep, Stopped};
pub use crate::read::{sliced, udp_payload};
use crate::record::{Capturer, Filter, NsPcapNg, Recorded, Until};
use crate::replay::{replay, LoopSettings, RawSender, Replayed, Sender, UdpSender};
use crate::schedule::{Schedule, ScheduleConfig, Timing};
use crate::store::PacketStore;
use crate::txtime::NoTxTime;
use crate::TrafficError;
use pcap_file::DataLink;
use punctual_dispatch::engine::SlotProgress;
use punctual_dispatch::partner::{Breath, Partner};
use punctual_dispatch::shield::{Shield, ShieldPlan};
use punctual_measure::{Applied, Ctx, LiveSpec, Measurement, Report};
use punctual_result::{doc::kind, Failure, Fallback, ResultDoc, Series, Table};
use punctual_rt::{setup_current_thread, RtWant, ThreadRequest};
use punctual_time::clock::read_clock;
use punctual_time::{format_ns, MarginPolicy, SystemClock};
use serde_json::json;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// From the thread being ready to the first send: page faults and the first sleep settle.
pub const LEAD_IN_NS: u64 = 50_000_000;
/// The loop takes a 20 us breather when it has not blocked for this long (dense replays), so the
/// CPU's kernel threads run.
pub const BREATHER_EVERY_NS: u64 = 500_000_000;

/// Where the packets go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// The UDP payloads, over a UDP socket.
    Udp(SocketAddr),
    /// Whole frames, over AF_PACKET on this interface.
    Iface { name: String, qdisc_bypass: bool },
}

impl Target {
    /// From `--udp-to` or `-i` (`None` when neither was given).
    pub fn from_flags(
        udp_to: Option<SocketAddr>,
        iface: Option<String>,
        qdisc_bypass: bool,
    ) -> Option<Target> {
        match (udp_to, iface) {
            (Some(to), _) => Some(Target::Udp(to)),
            (None, Some(name)) => Some(Target::Iface { name, qdisc_bypass }),
            (None, None) => None,
        }
    }
}

#[derive(Clone, Debug)]
pub struct ReplayConfig {
    pub file: PathBuf,
    pub target: Target,
    pub schedule: ScheduleConfig,
    /// Replay the valid part of a damaged file instead of refusing it.
    pub partial: bool,
    /// The CPU the sending thread is pinned to (`None`: not pinned).
    pub cpu: Option<usize>,
    pub margin: MarginPolicy,
    pub want: RtWant,
    /// The sending CPU is shielded (by `--shield` or an enclosing `punctual shield`): the loop's
    /// margin is not capped by the spin budget.
    pub shielded: bool,
    /// `--txtime`: hand each packet to the kernel this long before its instant, with its transmit
    /// time, where the egress queueing discipline holds packets to them.
    pub txtime: Option<u64>,
}

/// `--shield` on the sending CPU `cpu` (the first of `-a`, required): whether the CPU is shielded
/// (by `--shield` or an enclosing `punctual shield`), and the plan `--shield` applies.
pub fn shield_for(shield: bool, cpu: Option<usize>) -> Result<(bool, Option<ShieldPlan>), Failure> {
    if shield && cpu.is_none() {
        return Err(Failure::usage(
            "--shield needs the sending CPU: add -a CPU, e.g. -a 1",
        ));
    }
    let cpus: Vec<usize> = cpu.into_iter().collect();
    let shielded = shield || punctual_dispatch::shield::shielded_by_parent(&cpus);
    let me = [std::process::id() as i32];
    let plan = shield
        .then(|| punctual_dispatch::shield::plan(&cpus, &me))
        .transpose()?;
    Ok((shielded, plan))
}

/// A capture read and scheduled, ready to send.
pub struct Loaded {
    pub format: Format,
    pub link: DataLink,
    /// Packets in the file (before UDP extraction).
    pub file_packets: u64,
    pub store: PacketStore,
    pub schedule: Schedule,
    pub stopped: Option<Stopped>,
    /// Packets without a UDP payload, left out with `--udp-to`.
    pub not_udp: u64,
}

/// Reads and schedules the capture; refuses a damaged file without `--partial`, link types the
/// target cannot send, and captures with nothing to send.
pub fn load(cfg: &ReplayConfig) -> Result<Loaded, TrafficError> {
    let name = cfg.file.display();
    let udp = matches!(cfg.target, Target::Udp(_));
    let cap = read_capture_keeping(&cfg.file, udp.then_some(udp_payload as Keep))?;
    if let Some(st) = &cap.stopped {
        if !cfg.partial {
            return Err(TrafficError::Usage(format!(
                "{name}: {st}; pass --partial to replay the {} packets before it",
                st.packet
            )));
        }
    }
    let file_packets = cap.packets.len() as u64 + cap.left_out;
    let (store, not_udp) = match &cfg.target {
        Target::Udp(_) => {
            if !matches!(
                cap.link,
                DataLink::ETHERNET
                    | DataLink::LINUX_SLL
                    | DataLink::RAW
                    | DataLink::IPV4
                    | DataLink::IPV6
            ) {
                return Err(TrafficError::Usage(format!(
                    "{name}: link type {:?} is not supported with --udp-to (Ethernet, Linux cooked, raw IP are)",
                    cap.link
                )));
            }
            if cap.packets.is_empty() {
                return Err(TrafficError::Usage(format!(
                    "{name}: none of its {file_packets} packets is a UDP datagram: nothing for --udp-to to send"
                )));
            }
            (cap.packets, cap.left_out)
        }
        Target::Iface { .. } => {
            if cap.link != DataLink::ETHERNET {
                return Err(TrafficError::Usage(format!(
                    "{name}: link type {:?}: -i sends whole Ethernet frames only; use --udp-to for the UDP payloads",
                    cap.link
                )));
            }
            (cap.packets, 0)
        }
    };
    let schedule = Schedule::new(&cfg.schedule, store.timestamps())?;
    Ok(Loaded {
        format: cap.format,
        link: cap.link,
        file_packets,
        store,
        schedule,
        stopped: cap.stopped,
        not_udp,
    })
}

/// The socket, opened before anything is sent.
pub fn open_sender(target: &Target, loaded: &Loaded) -> Result<Box<dyn Sender>, TrafficError> {
    Ok(match target {
        Target::Udp(to) => Box::new(UdpSender::new(*to)?),
        Target::Iface { name, qdisc_bypass } => Box::new(RawSender::open(
            name,
            loaded.store.max_len(),
            *qdisc_bypass,
        )?),
    })
}

/// `punctual traffic replay`.
pub struct Replay {
    /// `--shield`: real-time mode on the sending CPU while the replay runs.
    pub shield: Option<ShieldPlan>,
    cfg: ReplayConfig,
    loaded: Loaded,
    sender: Option<Box<dyn Sender>>,
    describe: String,
    progress: Arc<[SlotProgress; 1]>,
    /// Kernel transmit stamps turned on, or why not.
    stamps: Result<(), String>,
    /// With `--txtime`: the queueing discipline and clock used, or why not.
    txtime: Option<Result<(String, i32), NoTxTime>>,
    /// `--explain`: trace the run and attribute every gap off by more than the bound.
    pub explain: Option<punctual_explain::ExplainConfig>,
    explained: Option<punctual_explain::Explanation>,
    /// `--avoid-interference`: start a fixed-spacing replay at the phase of its spacing that a
    /// watch of the sending CPU found quietest (`Replay::quiet_grid`).
    pub avoid_interference: bool,
    /// What that watch saw and chose, for the result document.
    avoided: Option<serde_json::Value>,
    /// What the watch saw, by phase of the spacing, which the sends keep clear of when they move
    /// during the run.
    interference: Option<punctual_plan::admission::PhaseCosts>,
}

pub struct ReplayOutcome {
    pub replayed: Replayed,
    pub fallback: Option<Fallback>,
    pub expected_ns: u64,
}

impl Replay {
    /// Turns the sender's kernel transmit stamps on where it can (recorded either way).
    pub fn new(cfg: ReplayConfig, loaded: Loaded, mut sender: Box<dyn Sender>) -> Replay {
        let stamps = sender.enable_stamps().map_err(|e| e.to_string());
        // Transmit times only with transmit stamps: without them a send would be timed at its
        // hand-over, a lead before it leaves.
        let txtime = cfg.txtime.map(|_| match &stamps {
            Ok(()) => sender.enable_txtime(),
            Err(e) => Err(NoTxTime::new(
                format!("without kernel transmit timestamps ({e}) the sends could not be timed"),
                "a kernel with SO_TIMESTAMPING on this socket type",
            )),
        });
        Replay {
            stamps,
            txtime,
            shield: None,
            describe: sender.describe(),
            cfg,
            loaded,
            sender: Some(sender),
            progress: Arc::new([SlotProgress::default()]),
            explain: None,
            explained: None,
            avoid_interference: false,
            avoided: None,
            interference: None,
        }
    }

    /// What the replay was asked to do, for the result document's settings.
    fn settings(&self, s: &mut serde_json::Map<String, serde_json::Value>) {
        let l = &self.loaded;
        s.insert("file".into(), self.cfg.file.display().to_string().into());
        s.insert("format".into(), l.format.name().into());
        s.insert("link_type".into(), u32::from(l.link).into());
        s.insert("target".into(), self.describe.clone().into());
        s.insert("timing".into(), timing_json(self.cfg.schedule.timing));
        s.insert("loops".into(), self.cfg.schedule.loops.into());
        s.insert("limit".into(), self.cfg.schedule.limit.into());
        s.insert("partial".into(), self.cfg.partial.into());
        s.insert("cpu".into(), self.cfg.cpu.into());
        s.insert("shielded".into(), self.cfg.shielded.into());
        s.insert("txtime".into(), self.txtime_json());
        if let Some(a) = &self.avoided {
            s.insert("interference".into(), a.clone());
        }
    }

    /// `--avoid-interference`: watch the sending CPU (every CPU when not pinned) as `run
    /// --avoid-interference` does, and return the grid of the spacing's quietest phase (its
    /// sends fell in the fewest gaps the watch saw: the tick's, a host's periodic stop), for the
    /// first send. `None` when the spacing is not a whole number of nanoseconds of 1 us or more
    /// (the capture's own timing, or a rate that does not divide a second).
    fn quiet_grid(&mut self, ctx: &Ctx) -> Result<Option<(u64, u64)>, Failure> {
        let spacing = match self.cfg.schedule.timing {
            Timing::Interval(i) => Some(i),
            Timing::Pps(p) if p > 0 && 1_000_000_000 % p == 0 => Some(1_000_000_000 / p),
            _ => None,
        };
        let Some(spacing) = spacing.filter(|&s| s >= 1_000) else {
            ctx.note(
                "--avoid-interference: not applied: the sends have no fixed spacing of a whole \
                 number of nanoseconds (give --interval, or --pps dividing a second)",
            );
            return Ok(None);
        };
        let cpus = self
            .cfg
            .cpu
            .map_or_else(punctual_rt::online_cpus, |c| vec![c]);
        let sched = punctual_rt::SchedParams {
            policy: ctx.rt.policy,
            priority: ctx.rt.priority.min(98),
        };
        ctx.step("watching for interference");
        let inf = punctual_dispatch::watch_interference(&cpus, sched, ctx.stop())?;
        ctx.step("");
        // The costs by phase choose the start and, looked up, where the sends move in the run.
        let costs = inf.phase_costs(spacing, punctual_plan::admission::AVOID_GUARD);
        let (phase, hit, mean) = costs.quietest();
        ctx.note(format!(
            "{}; the sends start at the phase of their {} spacing where {:.2} % of them fell in \
             a gap (a start at any instant: {:.2} % on average)",
            punctual_dispatch::describe_watch(&cpus, &inf),
            format_ns(spacing),
            hit * 100.0,
            mean * 100.0,
        ));
        let mut m = punctual_dispatch::watch_json(&cpus, &inf);
        m.insert("hit_share".into(), hit.into());
        m.insert("mean_hit_share".into(), mean.into());
        m.insert("phase_ns".into(), phase.into());
        m.insert("grid_ns".into(), spacing.into());
        self.avoided = Some(serde_json::Value::Object(m));
        self.interference = Some(costs);
        Ok(Some((inf.from + phase, spacing)))
    }

    /// What the sending socket could not give: kernel transmit stamps, `--txtime`.
    fn socket_fallbacks(&self) -> Vec<Fallback> {
        let mut v = Vec::new();
        if let Err(why) = &self.stamps {
            v.push(Fallback {
                setting: "tx_timestamps".into(),
                wanted: "kernel software transmit timestamps (SO_TIMESTAMPING)".into(),
                got: "the clock read just before each send call".into(),
                why: why.clone(),
                fix: "a kernel with SO_TIMESTAMPING on this socket type".into(),
            });
        }
        if let Some(Err(no)) = &self.txtime {
            v.push(Fallback {
                setting: "txtime".into(),
                wanted: "each packet handed to the kernel early with its transmit time (SO_TXTIME)"
                    .into(),
                got: "each packet sent at its instant by the dispatcher".into(),
                why: no.why.clone(),
                fix: no.fix.clone(),
            });
        }
        v
    }

    /// `settings.txtime`: null when not asked for; else the lead and the qdisc and clock, or why not.
    fn txtime_json(&self) -> serde_json::Value {
        match (&self.txtime, self.cfg.txtime) {
            (Some(Ok((qdisc, clockid))), Some(lead)) => {
                json!({"used": true, "lead_ns": lead, "qdisc": qdisc, "clockid": clockid})
            }
            (Some(Err(no)), Some(lead)) => {
                json!({"used": false, "lead_ns": lead, "why": no.why})
            }
            _ => serde_json::Value::Null,
        }
    }

    fn expected_ns(&self) -> u64 {
        let s = &self.loaded.schedule;
        s.at(s.total() - 1, self.loaded.store.timestamps())
    }
}

impl Measurement for Replay {
    type Outcome = ReplayOutcome;

    fn label(&self) -> String {
        "traffic replay".into()
    }

    fn wants(&self) -> Option<RtWant> {
        Some(self.cfg.want)
    }

    fn apply(&mut self, ctx: &Ctx) -> Result<Option<Box<dyn Applied>>, Failure> {
        let Some(sp) = &self.shield else {
            return Ok(None);
        };
        let s = Shield::apply_noted(sp, ctx, |s| {
            format!(
                "real-time mode on CPU {}: {} change(s) applied, {} refused, {} task(s) cannot \
                 move",
                punctual_rt::format_cpu_list(&sp.cpus),
                s.applied,
                s.refused.len(),
                sp.skipped.len()
            )
        })?;
        Ok(Some(Box::new(s)))
    }

    fn live(&self) -> Option<LiveSpec> {
        let p = self.progress.clone();
        let total = self.loaded.schedule.total();
        Some(LiveSpec {
            total: Some(total),
            poll: Box::new(move || {
                let sent = p[0].releases.load(Ordering::Relaxed);
                let max = p[0].max_ns.load(Ordering::Relaxed);
                (sent, format!("{sent} sent, max late {}", format_ns(max)))
            }),
        })
    }

    fn run(&mut self, ctx: &Ctx) -> Result<ReplayOutcome, Failure> {
        let mut sender = self.sender.take().expect("run once");
        let req = ThreadRequest {
            cpu: self.cfg.cpu,
            policy: ctx.rt.policy,
            priority: ctx.rt.priority,
            timer_slack_ns: ctx.rt.timer_slack_ns,
            fall_back_on_refusal: true,
        };
        ctx.note(format!(
            "replaying {} sends of {} packets to {} over {}",
            self.loaded.schedule.total(),
            self.loaded.store.len(),
            self.describe,
            format_ns(self.expected_ns())
        ));
        let grid = if self.avoid_interference {
            self.quiet_grid(ctx)?
        } else {
            None
        };
        let (store, schedule) = (&self.loaded.store, &self.loaded.schedule);
        let (margin, cpu, progress) = (self.cfg.margin, self.cfg.cpu, &*self.progress);
        let avoid = grid.and(self.interference.as_ref());
        let shielded = self.cfg.shielded;
        for f in self.socket_fallbacks() {
            ctx.note(format!("fallback: {f}"));
        }
        let txtime_lead = match self.txtime {
            Some(Ok(_)) => self.cfg.txtime.unwrap_or(0),
            _ => 0,
        };
        let stop = ctx.stop().clone();
        // Read off the sending thread: a read of `/proc/stat` there is a stall of its own.
        let sampler = cpu.and_then(|c| punctual_rt::host::StealSampler::start(&[c]));
        let explain_bound = self.explain.as_ref().map(|x| x.bound);
        let explainer = self
            .explain
            .as_ref()
            .map(|x| {
                let mut x = x.clone();
                if let (true, Some(c)) = (x.cpus.is_empty(), cpu) {
                    x.cpus = vec![c];
                }
                if let (true, Some(c)) = (shielded, cpu) {
                    x.quiet = vec![c];
                }
                punctual_explain::Explainer::start(&x)
            })
            .transpose()?;
        let mut r = std::thread::scope(|s| {
            s.spawn(move || {
                let guards = setup_current_thread(&req)
                    .map_err(|e| Failure::system(format!("the sending thread: {e}")))?;
                let steal = sampler.as_ref().zip(cpu).and_then(|(s, c)| s.cpu(c));
                // Only sends closer than a timed breather fits between need one.
                let dense = schedule.spacing() < punctual_dispatch::partner::DENSE_BELOW_NS as f64;
                let partner = cpu.filter(|_| dense).and_then(|c| {
                    let cpus = punctual_dispatch::partner::partner_cpus(c, &[])?;
                    Partner::start(&cpus, guards.sched(), c)
                });
                // A dense loop keeps its CPU throughout: punctual's idle poller there waits,
                // breathers included (design.md, "Idle that halts").
                let _aside = cpu
                    .filter(|_| dense)
                    .map(|c| punctual_rt::idle_poll::Claim::aside(&[c]));
                let settings = LoopSettings {
                    start: punctual_dispatch::on_grid(
                        read_clock(libc::CLOCK_MONOTONIC) + LEAD_IN_NS,
                        grid,
                    ),
                    margin,
                    shielded,
                    breather_every: Some(BREATHER_EVERY_NS),
                    partner: partner.as_ref().map(|p| p as &dyn Breath),
                    steal: steal
                        .as_ref()
                        .map(|s| s as &dyn punctual_dispatch::engine::StolenTime),
                    txtime_lead,
                    explain_bound,
                    avoid,
                };
                let replayed = replay(
                    &SystemClock::monotonic(),
                    store,
                    schedule,
                    &mut *sender,
                    &settings,
                    &stop,
                    progress,
                );
                Ok::<_, Failure>((replayed, guards.fallback.clone()))
            })
            .join()
            .map_err(|_| Failure::system("the sending thread panicked"))
        })??;
        if let Some(x) = explainer {
            let (records, dropped) = r.0.timing.late_records();
            let mut trace = x.stop()?;
            trace.add_stalls(std::mem::take(&mut r.0.stalls), r.0.stalls_dropped);
            self.explained = Some(trace.explain(&records, &[(0, dropped)]));
        }
        Ok(ReplayOutcome {
            replayed: r.0,
            fallback: r.1,
            expected_ns: self.expected_ns(),
        })
    }

    fn report(&self, o: ReplayOutcome, ctx: &Ctx, doc: &mut ResultDoc) -> Result<Report, Failure> {
        ctx.runtime_fallbacks(doc, o.fallback.iter());
        // Said before the first send (`run`); they leave the scheduling policy as it was.
        doc.settings.fallbacks.extend(self.socket_fallbacks());
        let l = &self.loaded;
        let t = &o.replayed.timing;
        self.settings(&mut doc.settings.extra);
        let spacing = l.schedule.spacing();
        doc.series = vec![
            Series::from_recorder("send lateness", kind::LATENESS, self.cfg.cpu, &t.lateness)
                .with("measured_at", measured_at(t))
                .with("kernel_stamped", t.stamped),
            Series::from_recorder(
                "gap error",
                kind::INTERVAL_DEVIATION,
                self.cfg.cpu,
                &t.gap_error,
            )
            .with("spacing_ns", spacing),
        ];
        doc.extra.insert(
            "traffic".into(),
            json!({
                "file_packets": l.file_packets,
                "packets": l.store.len(),
                "not_udp": l.not_udp,
                "reordered": l.store.reordered(),
                "stopped": l.stopped.as_ref().map(|s| json!({"packet": s.packet, "offset": s.offset, "why": s.why})),
                "scheduled": l.schedule.total(),
                "sent": t.sent,
                "send_errors": t.errors,
                "first_send_error": t.first_error,
                "spacing_ns": spacing,
                "drift": t.drift(),
                "gaps_within_1pct": t.share_within_1pct(),
                "gaps_within_7pct": t.share_within_7pct(),
                "margin_ns": o.replayed.margin_ns,
                "woke_late": o.replayed.woke_late,
                "spun_through": o.replayed.spun_through,
                "breathers": o.replayed.breathers,
                "breathers_partnered": o.replayed.breathers_partnered,
                "expected_ns": o.expected_ns,
                "send_instant": {
                    "source": measured_at(t),
                    "kernel_stamped": t.stamped,
                    "before_send_call": t.sent - t.stamped,
                    "stale_stamps": t.stale_stamps,
                    "txtime_dropped": t.txtime_dropped,
                    "tx_timestamps": self.stamps.as_ref().map(|_| "on").unwrap_or_else(|e| e),
                    "realtime_minus_monotonic_ns": o.replayed.stamp_offset.map(|(a, b)| [a, b]),
                },
                "sends_moved": self.interference.as_ref().map(|_| {
                    o.replayed.moves.iter().map(|m| json!({
                        "from_send": m.from,
                        "late_every": m.every,
                        "shift_ns": m.shift_ns,
                    })).collect::<Vec<_>>()
                }),
            }),
        );
        let mut tab = Table::new(&[
            "sent",
            "errors",
            "spacing",
            "p50 late",
            "p99 late",
            "max late",
            "gap p99",
            "within 1%",
            "within 7%",
            "drift",
        ])
        .titled(format!(
            "traffic replay {} -> {}",
            self.cfg.file.display(),
            self.describe
        ));
        let pct = |v: Option<f64>| v.map_or("-".into(), |v| format!("{:.2}%", v * 100.0));
        let [p50, p99] = t.lateness.percentiles_of([50_000, 99_000]);
        let [g99] = t.gap_error.percentiles_of([99_000]);
        tab.row([
            format!("{}/{}", t.sent, l.schedule.total()),
            t.errors.to_string(),
            format_ns(spacing.round() as u64),
            format_ns(p50),
            format_ns(p99),
            format_ns(t.lateness.max().unwrap_or(0)),
            format_ns(g99),
            pct(t.share_within_1pct()),
            pct(t.share_within_7pct()),
            t.drift()
                .map_or("-".into(), |d| format!("{:.4}%", d * 100.0)),
        ]);
        tab.note(format!(
            "late: from each packet's instant to its actual send: {}",
            measured_at(t)
        ));
        tab.note("gap: |actual - intended| between consecutive sends; within: gaps off by at most 1 % / 7 % of the spacing (ARTS's metric); drift: slope of the error over the run");
        let mut text = String::new();
        if let Some(st) = &l.stopped {
            text.push_str(&format!(
                "\n--partial: {st}; the {} packets before it were replayed.\n",
                st.packet
            ));
        }
        if l.not_udp > 0 {
            text.push_str(&format!(
                "\n{} packets of the file were not UDP datagrams and were left out (--udp-to).\n",
                l.not_udp
            ));
        }
        if let Some(e) = &t.first_error {
            text.push_str(&format!("\n{} sends failed; the first: {e}\n", t.errors));
        }
        // Nothing reached the network: the replay did not happen, whatever its timing says
        // (issue 32: 100 failed sends exited 0).
        let all_failed = t.sent > 0 && t.errors >= t.sent;
        if all_failed {
            text.push_str("every send failed: nothing was replayed (exit 3)\n");
        }
        if let (Some(Ok((qdisc, clockid))), Some(lead)) = (&self.txtime, self.cfg.txtime) {
            text.push_str(&format!(
                "\n--txtime: each packet handed to the kernel {} before its instant, sent by the \
                 {qdisc} qdisc at its transmit time (clock {clockid}); {} dropped for a transmit \
                 time the qdisc could not meet.\n",
                format_ns(lead),
                t.txtime_dropped
            ));
        }
        if self.interference.is_some() {
            text.push_str(&moves_text(&o.replayed.moves, spacing));
        }
        let out = Report {
            tables: vec![tab],
            text,
            exit: all_failed.then_some(punctual_measure::Exit::System),
            ..Report::default()
        };
        match &self.explained {
            Some(x) => punctual_explain::render::into_report(
                out,
                doc,
                x,
                &[(0, "gap error".to_string())],
                &[t.gaps],
            ),
            None => Ok(out),
        }
    }

    fn worst(&self, doc: &ResultDoc) -> Option<(u64, &'static str)> {
        doc.series.first().map(|s| (s.summary.max, "send lateness"))
    }
}

/// `--avoid-interference`: how often the sends moved during the run, and why.
fn moves_text(moves: &[crate::replay::SendsMoved], spacing: f64) -> String {
    let Some(last) = moves.last() else {
        return "\n--avoid-interference: the sends kept their phase (no late sends lined up).\n"
            .into();
    };
    let every: Vec<String> = moves.iter().map(|m| m.every.to_string()).collect();
    format!(
        "\n--avoid-interference: the sends moved {} time(s) during the run, when their late ones \
         (over {}) lined up one in {} sends: something periodic sat on their phase. Each move made \
         one gap longer by less than the {} spacing; the last left the sends {} after their \
         schedule.\n",
        moves.len(),
        format_ns(punctual_dispatch::rephase::LATE_NS),
        every.join(", "),
        format_ns(spacing.round() as u64),
        format_ns(last.shift_ns),
    )
}

/// Where the actual send instants came from.
fn measured_at(t: &crate::replay::Timing) -> String {
    match (t.stamped, t.sent) {
        (0, _) => "the clock read just before the send call".into(),
        (s, n) if s == n => "the kernel's software transmit timestamp (SO_TIMESTAMPING)".into(),
        (s, n) => format!(
            "the kernel's software transmit timestamp for {s} of {n} sends, the clock read \
             just before the send call for the rest"
        ),
    }
}

fn timing_json(t: Timing) -> serde_json::Value {
    match t {
        Timing::Speed(s) => json!({"speed": s}),
        Timing::Interval(i) => json!({"interval_ns": i}),
        Timing::Pps(p) => json!({"pps": p}),
    }
}

/// `punctual traffic record`.
pub struct Record {
    capturer: Option<Capturer>,
    out: Option<NsPcapNg<std::io::BufWriter<std::fs::File>>>,
    path: PathBuf,
    until: Until,
    seen: Arc<AtomicU64>,
    /// `--against FILE`: the original the received stream is compared with.
    against: Option<(PathBuf, Original)>,
}

/// The original capture of `--against`, read whole before anything is captured: a damaged or
/// empty file is refused (exit 2).
pub fn load_original(path: &std::path::Path) -> Result<Original, TrafficError> {
    let c = read_capture(path)?;
    let name = path.display();
    if let Some(st) = c.stopped {
        return Err(TrafficError::Usage(format!("--against {name}: {st}")));
    }
    if c.packets.len() < 2 {
        return Err(TrafficError::Usage(format!(
            "--against {name}: {} packet(s): no inter-arrival time to compare with",
            c.packets.len()
        )));
    }
    Ok(Original {
        link: c.link,
        packets: c.packets,
    })
}

/// What `record` did, and the stream against the original with `--against`.
pub struct RecordOutcome {
    pub recorded: Recorded,
    pub against: Option<Against>,
}

impl Record {
    /// Reads `--against`'s file, opens the socket and creates the output file (errors before
    /// anything is captured).
    pub fn open(
        iface: &str,
        path: PathBuf,
        until: Until,
        filter: Option<Filter>,
        against: Option<PathBuf>,
    ) -> Result<Record, TrafficError> {
        let against = match against {
            Some(p) => Some((p.clone(), load_original(&p)?)),
            None => None,
        };
        let mut capturer = Capturer::open(iface)?;
        capturer.filter = filter;
        let f = std::fs::File::create(&path)
            .map_err(|e| TrafficError::Usage(format!("-o {}: {e}", path.display())))?;
        let out = NsPcapNg::new(std::io::BufWriter::new(f), capturer.link, Some(iface))?;
        Ok(Record {
            capturer: Some(capturer),
            out: Some(out),
            path,
            until,
            seen: Arc::default(),
            against,
        })
    }
}

impl Measurement for Record {
    type Outcome = RecordOutcome;

    fn label(&self) -> String {
        "traffic record".into()
    }

    fn records_steal(&self) -> bool {
        false
    }

    fn live(&self) -> Option<LiveSpec> {
        let seen = self.seen.clone();
        Some(LiveSpec {
            total: self.until.count,
            poll: Box::new(move || {
                let n = seen.load(Ordering::Relaxed);
                (n, format!("{n} packets"))
            }),
        })
    }

    fn run(&mut self, ctx: &Ctx) -> Result<RecordOutcome, Failure> {
        let cap = self.capturer.take().expect("run once");
        let mut out = self.out.take().expect("run once");
        let r = cap.run(&mut out, self.until, ctx.stop(), &self.seen)?;
        use std::io::Write;
        out.into_inner()
            .flush()
            .map_err(|e| Failure::system(format!("-o {}: {e}", self.path.display())))?;
        // The capture as written (what tcpdump would see), read back and compared.
        let against = match &self.against {
            Some((_, orig)) => {
                let rx = read_capture(&self.path)?;
                Some(orig.compare(&rx.packets, rx.link))
            }
            None => None,
        };
        Ok(RecordOutcome {
            recorded: r,
            against,
        })
    }

    fn report(&self, o: RecordOutcome, _ctx: &Ctx, doc: &mut ResultDoc) -> Result<Report, Failure> {
        let r = o.recorded;
        doc.settings
            .extra
            .insert("output".into(), self.path.display().to_string().into());
        doc.extra.insert(
            "traffic".into(),
            json!({
                "packets": r.packets,
                "bytes": r.bytes,
                "truncated": r.truncated,
                "untimestamped": r.untimestamped,
                "kernel_packets": r.kernel_packets,
                "kernel_drops": r.kernel_drops,
                "filtered_out": r.filtered_out,
                "timestamps": "kernel receive (SO_TIMESTAMPNS), ns",
            }),
        );
        let mut t = Table::new(&[
            "packets",
            "bytes",
            "kernel drops",
            "cut to snaplen",
            "no kernel timestamp",
            "filtered out",
        ])
        .titled(format!("traffic record -> {}", self.path.display()));
        t.row([
            r.packets.to_string(),
            r.bytes.to_string(),
            r.kernel_drops.to_string(),
            r.truncated.to_string(),
            r.untimestamped.to_string(),
            r.filtered_out.to_string(),
        ]);
        let mut tables = vec![t];
        if let (Some(a), Some((file, _))) = (&o.against, &self.against) {
            doc.settings
                .extra
                .insert("against".into(), file.display().to_string().into());
            doc.series = against_series(a);
            doc.extra.get_mut("traffic").expect("set above")["against"] = against_json(a, file);
            tables.push(against_table(a, file));
        }
        Ok(Report::tables(tables))
    }

    fn worst(&self, doc: &ResultDoc) -> Option<(u64, &'static str)> {
        doc.series
            .first()
            .map(|s| (s.summary.max, "inter-arrival error against the file"))
    }
}

/// The series of `record --against`: |e| and the positive part of e, e = received gap - file gap.
fn against_series(a: &Against) -> Vec<Series> {
    let by = a.by.map_or("nothing matched", |b| b.name());
    vec![
        Series::from_recorder(
            "inter-arrival error vs file",
            kind::INTERVAL_DEVIATION,
            None,
            &a.error,
        )
        .with("unit", "ns")
        .with(
            "measures",
            "|received gap - the file's gap between the same two packets|",
        )
        .with("matched_by", by)
        .with("mean_signed_ns", a.mean_ns)
        .with("sd_ns", a.sd_ns),
        Series::from_recorder("arrival lateness vs file", kind::LATENESS, None, &a.late)
            .with("unit", "ns")
            .with(
                "measures",
                "received gap - the file's gap, 0 when shorter (early gaps counted in `early`)",
            )
            .with("early", a.early)
            .with("early_max_ns", a.early_max),
    ]
}

fn against_json(a: &Against, file: &std::path::Path) -> serde_json::Value {
    json!({
        "file": file.display().to_string(),
        "matched_by": a.by.map(|b| b.name()),
        "file_packets": a.file_packets,
        "received": a.received,
        "matched": a.matched,
        "unmatched": a.unmatched,
        "lost": a.lost,
        "passes": a.passes,
        "compared_gaps": a.compared,
        "within_1pct": a.share_within_1pct(),
        "within_7pct": a.share_within_7pct(),
        "mean_signed_ns": a.mean_ns,
        "sd_ns": a.sd_ns,
        "drift": a.drift,
        "stretch": a.stretch,
    })
}

fn against_table(a: &Against, file: &std::path::Path) -> Table {
    let mut t = Table::new(&[
        "file packets",
        "matched",
        "lost",
        "not in file",
        "gaps",
        "sd",
        "p50 |e|",
        "p99 |e|",
        "max |e|",
        "within 1%",
        "within 7%",
        "drift",
    ])
    .titled(format!(
        "received against {} (e = received gap - file gap)",
        file.display()
    ));
    let pct = |v: Option<f64>| v.map_or("-".into(), |v| format!("{:.2}%", v * 100.0));
    let [p50, p99] = a.error.percentiles_of([50_000, 99_000]);
    t.row([
        a.file_packets.to_string(),
        a.matched.to_string(),
        a.lost.to_string(),
        a.unmatched.to_string(),
        a.compared.to_string(),
        format_ns(a.sd_ns.round() as u64),
        format_ns(p50),
        format_ns(p99),
        format_ns(a.error.max().unwrap_or(0)),
        pct(a.share_within_1pct()),
        pct(a.share_within_7pct()),
        a.drift.map_or("-".into(), |d| format!("{:.4}%", d * 100.0)),
    ]);
    t.note(format!(
        "matched by {} (each received frame is the next packet of the file it equals, within {} \
         packets); lost: packets of the file skipped; not in file: received frames matching none; \
         gaps: pairs adjacent in the file and in one pass ({} pass(es)); within: |e| at most 1 % / 7 % \
         of the file's gap; drift: slope of the accumulated error over the file's time",
        a.by.map_or("nothing (no frame matched)", |b| b.name()),
        crate::against::WINDOW,
        a.passes
    ));
    if a.matched != a.file_packets * a.passes.max(1) {
        t.note(format!(
            "count mismatch: {} matched of {} in the file over {} pass(es)",
            a.matched,
            a.file_packets,
            a.passes.max(1)
        ));
    }
    t
}
