//! SVG figures for reports and experiments. Three shapes cover the seeds' figures:
//!
//! - [`percentile_plot`]: latency against percentile on an exponential ("nines") axis, so 90, 99,
//!   99.9 and 99.99 % are evenly spaced (the SVR4 study's and Etsion Fig. 7's way of showing tails);
//! - [`histogram_plot`]: counts per bucket on a logarithmic count axis, so rare long samples show;
//! - [`line_plot`]: series of (x, y) points, optionally on log axes (rates, throughput, frame rates);
//! - [`bar_plot`]: grouped bars per category (the time the host and the kernel took from each CPU);
//! - [`percentiles`] and [`histograms`]: several runs' distributions on one figure, with axes
//!   named after the quantity, in the unit its values call for, on a shared scale;
//! - [`stacked_bar_plot`]: one horizontal bar per category, stacked by group (late releases by cause).
//!
//! Plotting never prints; every function returns the SVG text.

mod dist;

pub use dist::{histograms, linear_tick, log_tick, percentiles, tick, Curve, HistScale, Unit};

use plotters::coord::{CoordTranslate, Shift};
use plotters::prelude::*;
use punctual_stats::Recorder;

pub(crate) const SIZE: (u32, u32) = (900, 540);
/// Text sizes asked of plotters, whose SVG backend writes them divided by 1.24 (a size of 12,
/// its default, became 9.7 px in a browser): 18 is 14.5 px, so tick labels stay at 12 px or
/// more on screen down to a page 750 px wide (figures are drawn at most at their own width).
pub(crate) const CAPTION_PX: u32 = 22;
pub(crate) const LABEL_PX: u32 = 18;
pub(crate) const DESC_PX: u32 = 19;
const COLORS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

/// Why a figure could not be drawn.
#[derive(Debug)]
pub struct PlotError(pub String);

impl std::fmt::Display for PlotError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "drawing the figure: {}", self.0)
    }
}
impl std::error::Error for PlotError {}

pub(crate) fn err<E: std::fmt::Debug>(e: E) -> PlotError {
    PlotError(format!("{e:?}"))
}

/// A named series of points.
#[derive(Clone, Debug)]
pub struct Line {
    pub label: String,
    pub points: Vec<(f64, f64)>,
}

/// "Nines" of a percentile: 90 -> 1, 99 -> 2, 99.9 -> 3.
pub fn nines(percentile: f64) -> f64 {
    -(1.0 - (percentile / 100.0).min(0.999_999_999)).log10()
}

/// A cumulative distribution as a staircase (x in ms, y from 0 to 1): flat until each recorded
/// value, then up, so values in whole ticks show as steps; it starts at zero below the minimum, so
/// a distribution of one value still draws a step.
pub fn cdf_points(r: &Recorder) -> Vec<(f64, f64)> {
    let n = r.count().max(1) as f64;
    let mut seen = 0u64;
    let mut pts = Vec::new();
    if let Some(min) = r.min() {
        pts.push(((min as f64 / 1e6).max(1e-3), 0.0));
    }
    for v in r.histogram().iter_recorded() {
        let x = (r.histogram().highest_equivalent(v.value_iterated_to()) as f64 / 1e6).max(1e-3);
        pts.push((x, seen as f64 / n));
        seen += v.count_at_value();
        pts.push((x, seen as f64 / n));
    }
    pts
}

/// Points (nines, latency in us) from a recorder, from the median to the last sample's percentile.
pub fn percentile_points(rec: &Recorder) -> Vec<(f64, f64)> {
    let n = rec.count();
    if n == 0 {
        return Vec::new();
    }
    // The deepest percentile the data supports: one sample in n.
    let max_nines = (n as f64).log10().min(7.0);
    let mut pts = Vec::new();
    let mut x = 0.0f64;
    while x <= max_nines + 1e-9 {
        let p = 100.0 * (1.0 - 10f64.powf(-x));
        let mp = (p * 1000.0).round() as u64;
        pts.push((x, rec.percentile(mp.min(100_000)) as f64 / 1000.0));
        x += 0.05;
    }
    pts.push((max_nines, rec.max().unwrap_or(0) as f64 / 1000.0));
    pts
}

/// Labels only on whole nines (90, 99, 99.9...): between them plotters may put ticks whose
/// percentiles round to the same text (two "99.999" on one axis).
pub(crate) fn nines_label(x: &f64) -> String {
    if (x - x.round()).abs() > 1e-9 {
        return String::new();
    }
    let p = 100.0 * (1.0 - 10f64.powf(-x));
    if p < 99.0 {
        format!("{p:.0}")
    } else {
        let digits = (x.round() as usize).saturating_sub(2);
        format!("{p:.digits$}")
    }
}

pub(crate) fn finish<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>) -> Result<(), PlotError> {
    root.present().map_err(err)
}

fn draw_lines<DB, CT>(chart: &mut ChartContext<'_, DB, CT>, lines: &[Line]) -> Result<(), PlotError>
where
    DB: DrawingBackend,
    CT: CoordTranslate<From = (f64, f64)>,
{
    for (i, l) in lines.iter().enumerate() {
        let c = COLORS[i % COLORS.len()];
        chart
            .draw_series(LineSeries::new(l.points.iter().copied(), c.stroke_width(2)))
            .map_err(err)?
            .label(l.label.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2)));
    }
    Ok(())
}

fn bounds(lines: &[Line], log: (bool, bool)) -> ((f64, f64), (f64, f64)) {
    let pts = lines
        .iter()
        .flat_map(|l| l.points.iter())
        .filter(|(x, y)| (!log.0 || *x > 0.0) && (!log.1 || *y > 0.0));
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for &(x, y) in pts {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y0 = y0.min(y);
        y1 = y1.max(y);
    }
    if x0 > x1 {
        return ((0.0, 1.0), (0.0, 1.0));
    }
    let widen = |a: f64, b: f64, log: bool| {
        if log {
            (a / 1.5, b * 1.5)
        } else if (b - a).abs() < 1e-12 {
            (a - 1.0, b + 1.0)
        } else {
            let pad = (b - a) * 0.05;
            ((a - pad).min(if a >= 0.0 { 0.0 } else { a - pad }), b + pad)
        }
    };
    (widen(x0, x1, log.0), widen(y0, y1, log.1))
}

/// Latency against percentile on a nines axis, one line per series (log y, in the unit the
/// values call for).
pub fn percentile_plot(title: &str, series: &[(String, &Recorder)]) -> Result<String, PlotError> {
    percentile_plot_of(title, "latency", series)
}

/// [`percentile_plot`] of another quantity (`quantum length`, `handler duration`), named on the
/// y axis.
pub fn percentile_plot_of(
    title: &str,
    quantity: &str,
    series: &[(String, &Recorder)],
) -> Result<String, PlotError> {
    let curves: Vec<Curve<'_>> = series
        .iter()
        .enumerate()
        .map(|(i, (l, r))| {
            let c = COLORS[i % COLORS.len()];
            Curve {
                label: l.clone(),
                rec: r,
                color: (c.0, c.1, c.2),
            }
        })
        .collect();
    percentiles(title, quantity, &curves, true)
}

/// Counts per bucket, bars, on a log count axis. `buckets`: (low edge, high edge, count).
pub fn histogram_plot(
    title: &str,
    x_desc: &str,
    buckets: &[(f64, f64, u64)],
) -> Result<String, PlotError> {
    let x0 = buckets
        .iter()
        .map(|b| b.0)
        .fold(f64::MAX, f64::min)
        .min(0.0);
    let x1 = buckets.iter().map(|b| b.1).fold(0.0, f64::max).max(1.0);
    let ymax = buckets.iter().map(|b| b.2).max().unwrap_or(1).max(1) as f64;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", CAPTION_PX))
            .margin(12)
            .x_label_area_size(45)
            .y_label_area_size(70)
            .build_cartesian_2d(x0..x1, (0.5f64..ymax * 2.0).log_scale())
            .map_err(err)?;
        chart
            .configure_mesh()
            .label_style(("sans-serif", LABEL_PX))
            .axis_desc_style(("sans-serif", DESC_PX))
            .x_desc(x_desc)
            .y_desc("count")
            .draw()
            .map_err(err)?;
        chart
            .draw_series(buckets.iter().filter(|b| b.2 > 0).map(|&(lo, hi, c)| {
                Rectangle::new([(lo, 0.5), (hi, c as f64)], COLORS[0].filled())
            }))
            .map_err(err)?;
        finish(&root)?;
    }
    Ok(svg)
}

/// Histogram buckets of `width_ns` from a recorder, in microseconds, for [`histogram_plot`].
pub fn histogram_buckets(rec: &Recorder, width_ns: u64) -> Vec<(f64, f64, u64)> {
    let width_ns = width_ns.max(1);
    let mut out: Vec<(f64, f64, u64)> = Vec::new();
    let h = rec.histogram();
    for v in h.iter_recorded() {
        let b = h.lowest_equivalent(v.value_iterated_to()) / width_ns;
        let (lo, hi) = (
            (b * width_ns) as f64 / 1000.0,
            ((b + 1) * width_ns) as f64 / 1000.0,
        );
        match out.last_mut() {
            Some(last) if last.0 == lo => last.2 += v.count_at_value(),
            _ => out.push((lo, hi, v.count_at_value())),
        }
    }
    out
}

/// Grouped bars: for each category (a CPU, say) one bar per group (steal, gaps...), on a linear
/// axis from 0. `groups`: (name, one value per category).
pub fn bar_plot(
    title: &str,
    y_desc: &str,
    categories: &[String],
    groups: &[(String, Vec<f64>)],
) -> Result<String, PlotError> {
    let n = categories.len().max(1);
    let g = groups.len().max(1);
    let ymax = groups
        .iter()
        .flat_map(|(_, v)| v.iter().copied())
        .fold(0.0f64, f64::max);
    // All zero: a unit axis rather than one whose ticks all read 0.0.
    let ymax = if ymax > 0.0 { ymax * 1.15 } else { 1.0 };
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", CAPTION_PX))
            .margin(12)
            .x_label_area_size(45)
            .y_label_area_size(70)
            .build_cartesian_2d(0f64..n as f64, 0f64..ymax)
            .map_err(err)?;
        let names = categories.to_vec();
        chart
            .configure_mesh()
            .label_style(("sans-serif", LABEL_PX))
            .axis_desc_style(("sans-serif", DESC_PX))
            .disable_x_mesh()
            // Ticks every half unit: each category's name at its centre, the edges unlabelled.
            .x_labels(2 * n + 1)
            .x_label_formatter(&|x| {
                let half = (x * 2.0).round();
                if (x * 2.0 - half).abs() < 1e-6 && half as usize % 2 == 1 {
                    names.get(half as usize / 2).cloned().unwrap_or_default()
                } else {
                    String::new()
                }
            })
            .y_desc(y_desc)
            .y_label_formatter(&|v| linear_tick(*v, ymax))
            .draw()
            .map_err(err)?;
        let width = 0.8 / g as f64;
        for (k, (name, values)) in groups.iter().enumerate() {
            let color = COLORS[k % COLORS.len()];
            chart
                .draw_series(values.iter().enumerate().map(|(i, &v)| {
                    let x0 = i as f64 + 0.1 + k as f64 * width;
                    Rectangle::new([(x0, 0.0), (x0 + width * 0.9, v)], color.filled())
                }))
                .map_err(err)?
                .label(name.clone())
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 10, y + 5)], color.filled())
                });
        }
        chart
            .configure_series_labels()
            .label_font(("sans-serif", LABEL_PX))
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(err)?;
        finish(&root)?;
    }
    Ok(svg)
}

/// One horizontal bar per category (named on the left, first at the top), each made of one
/// segment per group in group order; groups whose values are all zero are left out of the legend.
/// `groups`: (name, one value per category).
pub fn stacked_bar_plot(
    title: &str,
    x_desc: &str,
    categories: &[String],
    groups: &[(String, Vec<f64>)],
) -> Result<String, PlotError> {
    let n = categories.len().max(1);
    let xmax = (0..n)
        .map(|i| {
            groups
                .iter()
                .map(|(_, v)| v.get(i).copied().unwrap_or(0.0).max(0.0))
                .sum::<f64>()
        })
        .fold(0.0f64, f64::max)
        .max(1e-9)
        * 1.1;
    let longest = categories
        .iter()
        .map(|c| c.chars().count())
        .max()
        .unwrap_or(4);
    let height = (SIZE.1).max(120 + 22 * n as u32);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (SIZE.0, height)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(45)
            .y_label_area_size((longest as u32 * 7 + 20).clamp(60, 320))
            .build_cartesian_2d(0f64..xmax, 0f64..n as f64)
            .map_err(err)?;
        let names = categories.to_vec();
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(2 * n + 1)
            .y_label_formatter(&|y| {
                let half = (y * 2.0).round();
                if (y * 2.0 - half).abs() < 1e-6 && half as usize % 2 == 1 {
                    // The first category at the top.
                    names
                        .get(n - 1 - half as usize / 2)
                        .cloned()
                        .unwrap_or_default()
                } else {
                    String::new()
                }
            })
            .x_desc(x_desc)
            .draw()
            .map_err(err)?;
        let mut start = vec![0.0f64; n];
        for (k, (name, values)) in groups.iter().enumerate() {
            if values.iter().all(|v| *v <= 0.0) {
                continue;
            }
            let color = COLORS[k % COLORS.len()];
            let bars: Vec<Rectangle<(f64, f64)>> = (0..n)
                .filter_map(|i| {
                    let v = values.get(i).copied().unwrap_or(0.0).max(0.0);
                    (v > 0.0).then(|| {
                        let y = (n - 1 - i) as f64;
                        let r = Rectangle::new(
                            [(start[i], y + 0.15), (start[i] + v, y + 0.85)],
                            color.filled(),
                        );
                        start[i] += v;
                        r
                    })
                })
                .collect();
            chart
                .draw_series(bars)
                .map_err(err)?
                .label(name.clone())
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 10, y + 5)], color.filled())
                });
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(err)?;
        finish(&root)?;
    }
    Ok(svg)
}

/// Lines on linear or logarithmic axes.
pub fn line_plot(
    title: &str,
    x_desc: &str,
    y_desc: &str,
    lines: &[Line],
    log_x: bool,
    log_y: bool,
) -> Result<String, PlotError> {
    let ((x0, x1), (y0, y1)) = bounds(lines, (log_x, log_y));
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut b = ChartBuilder::on(&root);
        b.caption(title, ("sans-serif", CAPTION_PX))
            .margin(12)
            .x_label_area_size(45)
            .y_label_area_size(70);
        macro_rules! body {
            ($chart:expr) => {{
                let mut chart = $chart.map_err(err)?;
                chart
                    .configure_mesh()
                    .label_style(("sans-serif", LABEL_PX))
                    .axis_desc_style(("sans-serif", DESC_PX))
                    .x_desc(x_desc)
                    .y_desc(y_desc)
                    .draw()
                    .map_err(err)?;
                draw_lines(&mut chart, lines)?;
                chart
                    .configure_series_labels()
                    .label_font(("sans-serif", LABEL_PX))
                    .background_style(WHITE.mix(0.8))
                    .border_style(BLACK)
                    .draw()
                    .map_err(err)?;
            }};
        }
        match (log_x, log_y) {
            (false, false) => body!(b.build_cartesian_2d(x0..x1, y0..y1)),
            (true, false) => body!(b.build_cartesian_2d((x0..x1).log_scale(), y0..y1)),
            (false, true) => body!(b.build_cartesian_2d(x0..x1, (y0..y1).log_scale())),
            (true, true) => body!(b.build_cartesian_2d((x0..x1).log_scale(), (y0..y1).log_scale())),
        }
        finish(&root)?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec() -> Recorder {
        let mut r = Recorder::new();
        for i in 0..100_000u64 {
            r.record(2_000 + (i * 7919) % 5_000 + if i % 10_000 == 0 { 500_000 } else { 0 });
        }
        r
    }

    #[test]
    fn a_nines_axis_never_labels_two_ticks_alike() {
        assert_eq!(nines_label(&4.5), "");
        // A million samples reach 99.9999 %: the chart's x labels, read back from the SVG.
        let mut r = Recorder::new();
        for i in 0..1_000_000u64 {
            r.record(1_000 + i % 997);
        }
        let svg = percentile_plot("t", &[("a".into(), &r)]).unwrap();
        let labels: Vec<&str> = svg
            .split("<text")
            .skip(1)
            .filter_map(|t| Some(t.split_once('>')?.1.split('<').next()?.trim()))
            .filter(|t| t.starts_with("99.") || *t == "99" || *t == "90")
            .collect();
        assert!(labels.contains(&"99.999"), "{labels:?}");
        let mut unique = labels.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), labels.len(), "{labels:?}");
    }

    #[test]
    fn bars_draw_one_rectangle_per_value_with_each_category_named_once() {
        let cats = vec!["CPU 0".to_string(), "CPU 1".to_string()];
        let svg = bar_plot(
            "taken",
            "% of the run",
            &cats,
            &[
                ("steal".into(), vec![1.5, 0.0]),
                ("gaps".into(), vec![2.0, 3.0]),
            ],
        )
        .unwrap();
        let texts: Vec<&str> = svg
            .split("<text")
            .skip(1)
            .filter_map(|t| Some(t.split_once('>')?.1.split('<').next()?.trim()))
            .collect();
        for c in &cats {
            let n = texts.iter().filter(|t| **t == c.as_str()).count();
            assert_eq!(n, 1, "{c} in {texts:?}");
        }
        assert!(
            texts.contains(&"steal") && texts.contains(&"gaps"),
            "legend: {texts:?}"
        );
        // Four bars (a zero-height one included) plus the two legend swatches and the frame.
        assert!(
            svg.matches("<rect").count() >= 6,
            "{}",
            svg.matches("<rect").count()
        );
    }

    #[test]
    fn stacked_bars_name_each_category_once_and_leave_empty_groups_out() {
        let cats = vec!["wake idle 30".to_string(), "abs idle 30".to_string()];
        let svg = stacked_bar_plot(
            "late releases by cause",
            "% of releases",
            &cats,
            &[
                ("task".into(), vec![1.0, 4.0]),
                ("lead".into(), vec![0.0, 0.0]),
                ("irq".into(), vec![0.5, 0.0]),
            ],
        )
        .unwrap();
        let texts: Vec<&str> = svg
            .split("<text")
            .skip(1)
            .filter_map(|t| Some(t.split_once('>')?.1.split('<').next()?.trim()))
            .collect();
        for c in &cats {
            assert_eq!(
                texts.iter().filter(|t| **t == c.as_str()).count(),
                1,
                "{c}: {texts:?}"
            );
        }
        assert!(
            texts.contains(&"task") && texts.contains(&"irq"),
            "{texts:?}"
        );
        assert!(
            !texts.contains(&"lead"),
            "an empty group has no legend entry: {texts:?}"
        );
        // Three non-zero segments, two legend swatches, the background and the legend box.
        assert!(svg.matches("<rect").count() >= 5, "{svg}");
    }

    #[test]
    fn nines_axis() {
        assert!((nines(90.0) - 1.0).abs() < 1e-9);
        assert!((nines(99.9) - 3.0).abs() < 1e-9);
        assert_eq!(nines_label(&2.0), "99");
        assert_eq!(nines_label(&4.0), "99.99");
    }

    #[test]
    fn percentile_points_rise_and_end_at_max() {
        let r = rec();
        let p = percentile_points(&r);
        assert!(p.windows(2).all(|w| w[1].1 >= w[0].1), "not monotone");
        assert_eq!(p.last().unwrap().1, r.max().unwrap() as f64 / 1000.0);
        assert!((p.last().unwrap().0 - 5.0).abs() < 1e-9); // 100k samples support five nines
    }

    #[test]
    fn figures_are_svg_with_their_labels() {
        let r = rec();
        let svg = percentile_plot(
            "Wake-up latency",
            &[("abs".into(), &r), ("hybrid".into(), &r)],
        )
        .unwrap();
        assert!(
            svg.starts_with("<svg") && svg.contains("Wake-up latency") && svg.contains("hybrid")
        );
        assert!(svg.contains("99.9"));
        let h = histogram_plot("h", "latency (us)", &histogram_buckets(&r, 1_000)).unwrap();
        assert!(h.contains("<rect"));
        let l = line_plot(
            "fps",
            "HZ",
            "frames/s",
            &[Line {
                label: "60 fps".into(),
                points: vec![(100.0, 40.0), (1000.0, 60.0)],
            }],
            true,
            false,
        )
        .unwrap();
        assert!(l.contains("60 fps"));
    }

    #[test]
    fn histogram_buckets_sum_to_count() {
        let r = rec();
        let b = histogram_buckets(&r, 1_000);
        assert_eq!(b.iter().map(|x| x.2).sum::<u64>(), r.count());
        assert!(b.windows(2).all(|w| w[0].0 < w[1].0));
    }
}
