//! `etsion-frames`: Etsion et al. 2003, Section 5 and Figs. 1 and 5, fully simulated: a video player
//! woken only at clock ticks skips frames depending on where its first frame falls between two
//! ticks (its start shift). 60 fps at 100 Hz skips one frame in three for half the shifts, 50 fps
//! at 50 Hz shows all frames or none, and above HZ/2 fps the achieved rate falls towards HZ/2.
//!
//! measure: [`EtsionFrames::run`] (one frames study per rate and HZ); model: [`Model`]; tables:
//! [`tables`]; figures: [`figures`].

use crate::common::simulated_clock;
use crate::published::etsion_frames::{FIFTY_AT_50HZ, FIG1_60FPS, FIG1_OTHER, FIG5_WINDOWS};
use punctual_result::{Failure, ResultDoc, Table};
use punctual_session::{Ctx, Figure, LiveSpec, Measurement, Report};
use punctual_sim::frames::{study, FramesConfig, FramesResult};
use punctual_sim::{report, Control};
use serde_json::json;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

pub const NAME: &str = "etsion-frames";

/// The experiment: its size, and how many studies are done (for the live line).
pub struct EtsionFrames {
    pub quick: bool,
    /// Frames each simulated player shows.
    pub frames: u64,
    /// Start shifts studied per rate and HZ.
    pub shifts: u32,
    /// Fig. 1's desired frame rates.
    pub desired: Vec<u64>,
    done: Arc<AtomicU64>,
}

impl EtsionFrames {
    pub fn new(opts: crate::Options) -> EtsionFrames {
        let desired = if opts.quick {
            vec![20, 30, 50, 60, 80]
        } else {
            vec![10, 20, 24, 25, 30, 40, 50, 60, 70, 75, 80, 90, 100]
        };
        EtsionFrames {
            quick: opts.quick,
            frames: if opts.quick { 120 } else { 500 },
            shifts: if opts.quick { 30 } else { 60 },
            desired,
            done: Arc::default(),
        }
    }

    /// Fig. 5, Section 5's 50 fps at 50 Hz, and two per desired rate.
    fn studies(&self) -> u64 {
        2 + 2 * self.desired.len() as u64
    }

    fn study(&self, ctx: &Ctx, fps: u64, hz: u32) -> Result<FramesResult, Failure> {
        if ctx.stop().load(Ordering::Relaxed) {
            return Err(Failure::interrupted());
        }
        ctx.step(format!("{fps} fps at {hz} Hz"));
        let cfg = FramesConfig {
            fps_milli: fps * 1000,
            hz,
            frames: self.frames,
            shifts: self.shifts,
            ..FramesConfig::default()
        };
        let control = Control {
            stop: Some(ctx.stop()),
            progress: None,
        };
        let r = study(&cfg, &control)?;
        self.done.fetch_add(1, Ordering::Relaxed);
        Ok(r)
    }
}

/// Every study, in the order the tables use them.
pub struct Studies {
    /// 60 fps at 100 Hz.
    pub fig5: FramesResult,
    /// 50 fps at 50 Hz.
    pub fifty: FramesResult,
    /// Per desired rate: at 100 Hz, at 1000 Hz.
    pub fig1: Vec<(u64, FramesResult, FramesResult)>,
}

impl Measurement for EtsionFrames {
    type Outcome = Studies;

    fn label(&self) -> String {
        NAME.into()
    }
    fn live(&self) -> Option<LiveSpec> {
        let (done, total) = (self.done.clone(), self.studies());
        Some(LiveSpec::counted(total, move || {
            let n = done.load(Ordering::Relaxed);
            (n, format!("{n} of {total} studies"))
        }))
    }
    fn run(&mut self, ctx: &Ctx) -> Result<Studies, Failure> {
        let fig5 = self.study(ctx, 60, 100)?;
        let fifty = self.study(ctx, 50, 50)?;
        let mut fig1 = Vec::new();
        for &d in &self.desired {
            fig1.push((d, self.study(ctx, d, 100)?, self.study(ctx, d, 1000)?));
        }
        Ok(Studies { fig5, fifty, fig1 })
    }
    fn report(&self, s: Studies, _ctx: &Ctx, doc: &mut ResultDoc) -> Result<Report, Failure> {
        let model = Model::of(&s);
        let all: Vec<&FramesResult> = [&s.fig5, &s.fifty]
            .into_iter()
            .chain(s.fig1.iter().flat_map(|(_, a, b)| [a, b]))
            .collect();
        let events: u64 = all.iter().map(|f| f.events()).sum();
        let simulated: u64 = all.iter().map(|f| f.simulated_ns()).sum();
        simulated_clock(doc);
        crate::common::mark(doc, NAME, self.quick);
        doc.settings
            .extra
            .insert("frames".into(), self.frames.into());
        doc.settings
            .extra
            .insert("shifts".into(), self.shifts.into());
        let pair = [s.fig5, s.fifty];
        doc.series = report::frames_series(&pair);
        let fig1: Vec<serde_json::Value> = model
            .fig1
            .iter()
            .map(|r| json!({"desired_fps": r.desired, "hz100_mean": r.mean[0], "hz100_min": r.worst[0], "hz1000_mean": r.mean[1], "hz1000_min": r.worst[1]}))
            .collect();
        doc.extra.insert("fig1".into(), json!(fig1));
        doc.extra.insert("events".into(), events.into());
        doc.extra.insert("simulated_ns".into(), simulated.into());
        Ok(Report {
            tables: tables(&model),
            figures: figures(&model, &pair)?,
            ..Report::default()
        })
    }
}

/// The numbers of the tables.
pub struct Model {
    /// Fig. 5 (60 fps at 100 Hz): runs of start shifts that skip the same frames.
    pub fig5: Vec<ShiftRange>,
    /// Share of Fig. 5's start shifts that skip a frame.
    pub share_skipping: f64,
    /// 50 fps at 50 Hz: shifts studied, shifts showing every frame, shifts showing none.
    pub fifty: (usize, usize, usize),
    pub fig1: Vec<Fig1Row>,
}

/// Start shifts from `from` to `to` (ns) skipping the same frames of each cycle.
pub struct ShiftRange {
    pub from: u64,
    pub to: u64,
    /// 0-based positions in the 3-frame cycle.
    pub skipped: Vec<u64>,
    pub fps: f64,
}

/// Achieved frame rate for a desired one: mean and worst over start shifts, at 100 and 1000 Hz.
pub struct Fig1Row {
    pub desired: u64,
    pub mean: [f64; 2],
    pub worst: [f64; 2],
}

impl Model {
    pub fn of(s: &Studies) -> Model {
        let fig5 = s
            .fig5
            .shift_ranges()
            .into_iter()
            .map(|(from, to, skipped)| ShiftRange {
                from,
                to,
                skipped,
                fps: s
                    .fig5
                    .shifts
                    .iter()
                    .find(|x| x.shift_ns == from)
                    .map_or(0.0, |x| x.achieved_fps),
            })
            .collect();
        let shifts = &s.fifty.shifts;
        let fifty = (
            shifts.len(),
            shifts.iter().filter(|x| x.skipped == 0).count(),
            shifts.iter().filter(|x| x.shown == 0).count(),
        );
        let fig1 = s
            .fig1
            .iter()
            .map(|(d, a, b)| Fig1Row {
                desired: *d,
                mean: [a.mean_fps(), b.mean_fps()],
                worst: [a.min_fps(), b.min_fps()],
            })
            .collect();
        Model {
            fig5,
            share_skipping: s.fig5.share_skipping(),
            fifty,
            fig1,
        }
    }
}

/// Fig. 5's skipping windows, Section 5's all-or-nothing, and Fig. 1, each beside Etsion's.
pub fn tables(m: &Model) -> Vec<Table> {
    let mut t5 = Table::new(&[
        "start shift",
        "to",
        "simulated: skipped",
        "fps",
        "Etsion Fig. 5",
    ])
    .titled("Etsion Fig. 5: 60 fps at 100 Hz, which start shifts skip which frames");
    for r in &m.fig5 {
        let mid = (r.from + r.to) as f64 / 2e6;
        let published = FIG5_WINDOWS
            .iter()
            .find(|(a, b, _)| mid > *a && mid < *b)
            .map_or("none".to_string(), |(a, b, f)| {
                format!("frame {f} ({a:.2}-{b:.2} ms)")
            });
        let sim = if r.skipped.is_empty() {
            "none".to_string()
        } else {
            r.skipped
                .iter()
                .map(|p| format!("frame {} of 3", p + 1))
                .collect::<Vec<_>>()
                .join(", ")
        };
        t5.row([
            punctual_time::format_ns(r.from),
            punctual_time::format_ns(r.to),
            sim,
            format!("{:.1}", r.fps),
            published,
        ]);
    }
    t5.note(format!(
        "{:.0} % of start shifts skip one frame in three (Etsion: 5 ms of every 10, i.e. 50 %, giving about 40 fps).",
        m.share_skipping * 100.0
    ));
    let (n, all, none) = m.fifty;
    let mut t50 = Table::new(&[
        "start shifts",
        "all frames shown",
        "all skipped",
        "mixed",
        "Etsion",
    ])
    .titled("Etsion Sec. 5: 50 fps at 50 Hz is all or nothing");
    t50.row([
        n.to_string(),
        all.to_string(),
        none.to_string(),
        (n - all - none).to_string(),
        FIFTY_AT_50HZ.to_string(),
    ]);
    let mut t1 = Table::new(&[
        "desired fps",
        "100 Hz mean",
        "100 Hz worst",
        "1000 Hz mean",
        "1000 Hz worst",
        "Etsion Fig. 1",
    ])
    .titled("Etsion Fig. 1: desired and achieved frame rate (mean and worst over start shifts)");
    for r in &m.fig1 {
        t1.row([
            r.desired.to_string(),
            format!("{:.1}", r.mean[0]),
            format!("{:.1}", r.worst[0]),
            format!("{:.1}", r.mean[1]),
            format!("{:.1}", r.worst[1]),
            if r.desired == 60 {
                FIG1_60FPS
            } else {
                FIG1_OTHER
            }
            .to_string(),
        ]);
    }
    t1.note("Etsion measured Xine showing 500 frames; the published figure shows 60 fps falling to about 40 at 100 Hz only.");
    t1.note("Above HZ/2 frames a second a player woken at each tick shows HZ/2 on average: a frame is shown only when a tick");
    t1.note("falls in the first half of its display time, which happens for (1/2 fps) / (1/HZ) of the frames.");
    vec![t5, t50, t1]
}

/// Fig. 1 (desired against achieved) and Fig. 5 (achieved rate by start shift, from the studies
/// of 60 fps at 100 Hz and 50 fps at 50 Hz).
pub fn figures(m: &Model, fig5: &[FramesResult]) -> Result<Vec<Figure>, Failure> {
    let line = |label: &str, f: &dyn Fn(&Fig1Row) -> f64| punctual_plot::Line {
        label: label.into(),
        points: m.fig1.iter().map(|r| (r.desired as f64, f(r))).collect(),
    };
    let lines = [
        line("desired", &|r| r.desired as f64),
        line("100 Hz, mean over shifts", &|r| r.mean[0]),
        line("100 Hz, worst shift", &|r| r.worst[0]),
        line("1000 Hz, worst shift", &|r| r.worst[1]),
    ];
    let f1 = punctual_plot::line_plot(
        "Etsion Fig. 1 (simulated): desired and achieved frame rate",
        "desired fps",
        "achieved fps",
        &lines,
        false,
        false,
    );
    Ok(vec![
        crate::common::figure("etsion-frames-fig1", f1)?,
        crate::common::figure("etsion-frames-fig5", report::frames_plot(fig5))?,
    ])
}
