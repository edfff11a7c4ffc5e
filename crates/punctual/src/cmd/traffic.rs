//! `punctual traffic record|replay` (ARTS): the flags checked, the file read and the socket opened
//! before the lifecycle starts, so bad input exits 2 or 3 with nothing sent.

use crate::args::{duration, run_duration, ExplainArgs, OutputArgs, RtArgs};
use clap::{Args, Subcommand};
use punctual_result::Failure;
use punctual_session::{drive, Env, Exit};
use punctual_time::MarginPolicy;
use punctual_traffic::measure::{load, open_sender, Record, Replay, ReplayConfig, Target};
use punctual_traffic::record::{Filter, Until};
use punctual_traffic::schedule::{ScheduleConfig, Timing};
use std::net::SocketAddr;
use std::path::PathBuf;

#[derive(Subcommand, Debug)]
pub enum TrafficCmd {
    /// Capture packets with kernel nanosecond receive timestamps into a pcapng file.
    Record(RecordArgs),
    /// Send a pcap/pcapng capture at its instants (or a fixed spacing) with the dispatcher, and
    /// report every packet's timing error.
    Replay(ReplayArgs),
}

#[derive(Args, Debug)]
pub struct RecordArgs {
    /// The interface to capture on.
    #[arg(short = 'i', long, value_name = "IFACE")]
    pub interface: String,
    /// The pcapng file to write (nanosecond timestamps).
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: PathBuf,
    /// How long to capture (default: until --count, or Ctrl-C).
    #[arg(short = 'D', long, allow_hyphen_values = true, value_parser = run_duration, value_name = "DURATION")]
    pub duration: Option<u64>,
    /// Stop after N packets.
    #[arg(long, value_name = "N", value_parser = punctual_time::parse_count::<1, { u64::MAX }>)]
    pub count: Option<u64>,
    /// Keep only these frames: udp, port N (UDP or TCP, either end), or udp port N.
    #[arg(long, value_name = "EXPR")]
    pub filter: Option<Filter>,
    /// Compare the received packets' inter-arrival times with this original capture's own (matched
    /// in order, by whole frame or UDP payload): error series, share within 1 %/7 %, drift.
    #[arg(long, value_name = "ORIGINAL")]
    pub against: Option<PathBuf>,
    #[command(flatten)]
    pub out: OutputArgs,
}

#[derive(Args, Debug)]
#[command(group(clap::ArgGroup::new("target").required(true).args(["udp_to", "interface"])))]
#[command(group(clap::ArgGroup::new("timing").args(["speed", "pps", "interval"])))]
// clap's own usage line is 85 columns (issue 31: help fits 80).
#[command(override_usage = "punctual traffic replay [OPTIONS] <--udp-to <ADDR>|-i <IFACE>> <FILE>")]
pub struct ReplayArgs {
    /// The capture to send (pcap or pcapng, micro- or nanosecond).
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// Send the UDP payloads of the capture's UDP datagrams to ADDR (host:port) over a UDP socket.
    #[arg(long, value_name = "ADDR")]
    pub udp_to: Option<SocketAddr>,
    /// Send the whole frames on this interface (AF_PACKET; needs CAP_NET_RAW).
    #[arg(short = 'i', long, value_name = "IFACE")]
    pub interface: Option<String>,
    /// Bypass the interface's queueing discipline (-i only).
    #[arg(long, requires = "interface")]
    pub qdisc_bypass: bool,
    /// Hand each packet to the kernel LEAD (default 1ms) early with its transmit time (SO_TXTIME),
    /// for an etf or fq qdisc to send it then; without one, say so and send from the dispatcher.
    #[arg(long, value_name = "LEAD", num_args = 0..=1, default_missing_value = "1ms", value_parser = duration, conflicts_with = "qdisc_bypass")]
    pub txtime: Option<u64>,
    /// Play the capture's own timing this many times faster (0.5: half as fast).
    #[arg(long, value_name = "X")]
    pub speed: Option<f64>,
    /// Send at a fixed rate, packets a second.
    #[arg(long, value_name = "N")]
    pub pps: Option<u64>,
    /// Send at a fixed spacing.
    #[arg(long, allow_hyphen_values = true, value_parser = duration, value_name = "DURATION")]
    pub interval: Option<u64>,
    /// Send the capture N times (each pass one spacing after the previous one's last packet).
    #[arg(long = "loop", default_value_t = 1, value_name = "N")]
    pub loops: u64,
    /// Stop after N sends.
    #[arg(long, value_name = "N")]
    pub limit: Option<u64>,
    /// Replay the valid part of a truncated or corrupt file instead of refusing it.
    #[arg(long)]
    pub partial: bool,
    /// Real-time mode on the sending CPU (the first of -a) while replaying: other tasks and IRQs
    /// moved off it, restored after.
    #[arg(long)]
    pub shield: bool,
    /// How early to stop sleeping and start spinning before each send (a duration, or auto).
    #[arg(long, value_name = "DURATION|auto")]
    pub spin_margin: Option<MarginPolicy>,
    /// Watch the sending CPU for 0.5 s first and start the sends at the phase of their fixed
    /// spacing (--interval, or --pps dividing a second) that keeps them out of the interruptions
    /// seen: the timer tick's above all. During the run, move the rest of the sends by part of
    /// the spacing when their late ones line up (a host's periodic stop drifting onto them).
    #[arg(long)]
    pub avoid_interference: bool,
    #[command(flatten)]
    pub rt: RtArgs,
    #[command(flatten)]
    pub out: OutputArgs,
    /// With --explain, a gap is late when it is off by more than --explain-bound (default 1 % of
    /// the spacing, ARTS's measure).
    #[command(flatten)]
    pub explain: ExplainArgs,
}

pub fn run(c: TrafficCmd, env: &Env) -> anyhow::Result<Exit> {
    match c {
        TrafficCmd::Record(a) => record(a, env),
        TrafficCmd::Replay(a) => replay(a, env),
    }
}

fn record(a: RecordArgs, env: &Env) -> anyhow::Result<Exit> {
    let (outputs, until) = (a.out.outputs()?, Until::of(a.duration, a.count));
    let m = Record::open(&a.interface, a.output, until, a.filter, a.against);
    let mut m = m.map_err(Failure::from)?;
    Ok(drive(&mut m, &outputs, env)?)
}

fn replay(a: ReplayArgs, env: &Env) -> anyhow::Result<Exit> {
    a.rt.validate()?;
    let cpus = a.rt.cpus().map_err(Failure::usage)?;
    let cpu = cpus.and_then(|c| c.first().copied());
    let (shielded, shield) = punctual_traffic::measure::shield_for(a.shield, cpu)?;
    let target = Target::from_flags(a.udp_to, a.interface, a.qdisc_bypass)
        .ok_or_else(|| Failure::usage("give --udp-to ADDR or -i IFACE"))?;
    let cfg = ReplayConfig {
        file: a.file,
        target,
        schedule: ScheduleConfig {
            timing: Timing::from_flags(a.speed, a.pps, a.interval),
            loops: a.loops,
            limit: a.limit,
        },
        partial: a.partial,
        cpu,
        margin: a.spin_margin.unwrap_or(MarginPolicy::Auto),
        want: a.rt.want(),
        shielded,
        txtime: a.txtime,
    };
    let outputs = a.explain.outputs(a.out.outputs()?)?;
    let loaded = load(&cfg).map_err(Failure::from)?;
    // ARTS's measure: a gap within 1 % of the spacing.
    let gap_bound = (loaded.schedule.spacing() / 100.0).max(1.0) as u64;
    let explain = a.explain.config(gap_bound)?;
    let sender = open_sender(&cfg.target, &loaded).map_err(Failure::from)?;
    let mut m = Replay::new(cfg, loaded, sender);
    m.shield = shield;
    m.explain = explain;
    m.avoid_interference = a.avoid_interference;
    Ok(drive(&mut m, &outputs, env)?)
}
