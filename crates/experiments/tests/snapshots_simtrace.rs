//! The tables of `etsion-frames`, `etsion-billing` (both halves) and `kurt-irq` from canned models
//! (numbers made up here, deterministic): the seed's layout with the published numbers beside.

use punctual_experiments::etsion_billing::{self, AppRow, Billed, SimModel};
use punctual_experiments::etsion_frames::{self, Fig1Row, ShiftRange};
use punctual_experiments::kurt_irq::{self, Durations};
use punctual_result::Table;
use punctual_trace::analyze::classify::Category;

const MS: u64 = 1_000_000;

fn render(tables: &[Table]) -> String {
    tables
        .iter()
        .map(Table::render)
        .collect::<Vec<_>>()
        .join("\n")
}

fn billed(ratio: f64, missed_pct: f64, quanta_per_s: f64) -> Billed {
    Billed {
        ratio,
        missed_pct,
        quanta_per_s,
    }
}

#[test]
fn etsion_frames_tables() {
    let third = MS / 3;
    let range = |from: u64, to: u64, skipped: &[u64]| ShiftRange {
        from,
        to,
        skipped: skipped.to_vec(),
        fps: if skipped.is_empty() { 60.0 } else { 40.0 },
    };
    let m = etsion_frames::Model {
        fig5: vec![
            range(third / 2, 1_500_000, &[]),
            range(1_833_333, 3_166_667, &[2]),
            range(3_500_000, 4_833_333, &[]),
            range(5_166_667, 6_500_000, &[1]),
            range(6_833_333, 8_166_667, &[]),
            range(8_500_000, 9_833_333, &[0]),
        ],
        share_skipping: 0.5,
        fifty: (30, 15, 15),
        fig1: vec![
            Fig1Row {
                desired: 30,
                mean: [30.0, 30.0],
                worst: [30.0, 30.0],
            },
            Fig1Row {
                desired: 60,
                mean: [50.0, 60.0],
                worst: [40.0, 60.0],
            },
            Fig1Row {
                desired: 80,
                mean: [50.7, 80.0],
                worst: [40.0, 80.0],
            },
        ],
    };
    insta::assert_snapshot!(render(&etsion_frames::tables(&m)));
}

#[test]
fn etsion_billing_sim_tables() {
    let m = SimModel {
        rows: vec![
            (
                "Emacs",
                [billed(1.3893, 94.92, 8.85), billed(1.0343, 62.15, 8.85)],
            ),
            (
                "Xine",
                [billed(1.3106, 71.33, 175.1), billed(0.9988, 65.6, 314.35)],
            ),
            (
                "Quake",
                [billed(0.9923, 49.92, 161.35), billed(1.0058, 2.05, 163.35)],
            ),
            (
                "X Server (w/ Xine)",
                [billed(0.0, 100.0, 25.0), billed(0.9598, 0.1, 49.95)],
            ),
            (
                "CPU-bound",
                [billed(1.0005, 0.0, 16.65), billed(1.005, 0.0, 19.6)],
            ),
            (
                "CPU+Quake",
                [billed(1.038, 74.37, 170.0), billed(1.0163, 5.91, 180.0)],
            ),
        ],
        table5: Some([[38.5, 19.75, 40.0, 1.75], [38.75, 20.0, 39.0, 2.25]]),
    };
    insta::assert_snapshot!(render(&etsion_billing::sim_tables(&m)));
}

#[test]
fn etsion_billing_tables() {
    let row = |label: &str, app: &'static str, k: f64| AppRow {
        label: label.into(),
        app,
        sim: [
            Some(billed(1.0 + k / 10.0, 50.0 + k, 10.0 * k)),
            Some(billed(1.0 - k / 100.0, 10.0 + k, 20.0 * k)),
        ],
        ratio: [Some(0.9 + k / 20.0), Some(1.0 + k / 50.0)],
        missed: [Some(0.9 + k / 100.0), Some(0.8 + k / 100.0)],
        phases: [Some((0.5 + k / 10.0, 1.5 + k / 10.0)), Some((0.9, 1.1))],
        quanta_per_s: 100.0 * k,
        cpu_share: k / 10.0,
    };
    let mut editor = row("Interactive (editor-like)", "Emacs", 1.0);
    // An application that consumed nothing: no ratio, no phases.
    editor.ratio = [None, None];
    editor.missed = [None, None];
    editor.phases = [None, None];
    let m = etsion_billing::Model {
        rows: vec![
            editor,
            row("Video pipeline (decoder, displayer)", "Xine", 2.0),
            row("Game loop", "Quake", 4.0),
            row("Display server (w/ video)", "X Server", 3.0),
            row("CPU-bound", "CPU-bound", 5.0),
            // The paper has no Table 4 figure for it: left out of Table 4.
            row("CPU-bound (w/ game loop)", "CPU+Quake", 6.0),
        ],
        secs: 8,
        cpu: 1,
        kernel_hz: Some(250),
        sim_secs: 20,
        sharing: vec![
            "CPU 1 was shared while a CPU-bound task ran: other tasks ran 41.3 % of its 2.00 s there (busiest: cc1 [4242] 38.0 %), and the host took 0.4 % (traced twice, the less shared kept): its figures are not the stand-in's alone.".into(),
        ],
    };
    insta::assert_snapshot!(render(&etsion_billing::tables(&m)));
}

#[test]
fn kurt_irq_tables() {
    let d = |count: u64, min: u64, mean: u64, max: u64| Durations {
        count,
        min,
        mean,
        max,
    };
    let none = Durations::default();
    let m = kurt_irq::Model {
        rows: vec![
            (Category::Console, none, none),
            (
                Category::Network,
                d(4, 2_850, 4_410, 7_160),
                d(61_182, 1_120, 2_040, 376_980),
            ),
            (
                Category::Disk,
                d(932, 1_140, 1_840, 6_490),
                d(932, 2_710, 6_750, 27_610),
            ),
            (
                Category::Process,
                d(35_117, 200, 320, 29_850),
                d(90, 1_830, 7_090, 19_800),
            ),
            (
                Category::Timer,
                d(15_990, 3_500, 6_640, 53_210),
                d(213, 620, 4_810, 16_470),
            ),
            (Category::Memory, d(1_768, 740, 1_290, 14_430), none),
            (
                Category::Other,
                d(6, 3_150, 5_120, 9_430),
                d(4_140, 390, 9_450, 20_845_460),
            ),
        ],
        phases: vec![
            (Category::Console, vec![]),
            (
                Category::Network,
                vec![
                    "softirq NET_RX x61182".into(),
                    "vector local_timer x1204 (other subsystem)".into(),
                ],
            ),
            (
                Category::Disk,
                vec!["irq 36 virtio1-req.0 (virtio_blk) x932".into()],
            ),
            (Category::Process, vec!["vector reschedule x35117".into()]),
            (Category::Timer, vec!["vector local_timer x15990".into()]),
            (
                Category::Memory,
                vec!["vector call_function_single x1768".into()],
            ),
        ],
    };
    insta::assert_snapshot!(render(&kurt_irq::tables(&m)));
}

/// KURT Table 4.3 (us: min, mean, max), as transcribed, in the table's row order.
#[test]
fn kurt_table_4_3_is_the_published_numbers() {
    let got: Vec<_> = [
        Category::Console,
        Category::Network,
        Category::Disk,
        Category::Process,
        Category::Timer,
        Category::Memory,
        Category::Other,
    ]
    .iter()
    .map(|c| c.kurt_table_4_3())
    .collect();
    assert_eq!(
        got,
        [
            (0.51, 0.86, 12.13),
            (0.35, 0.64, 2.74),
            (0.55, 34.68, 250.45),
            (0.48, 1.47, 12.06),
            (0.50, 1.81, 40.65),
            (0.49, 1.40, 6.40),
            (1.48, 2.34, 7.55),
        ]
    );
}
