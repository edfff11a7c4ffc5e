//! Distributions of durations for reports: percentile curves and histograms of several runs on
//! one figure, on axes named after what the series measures, in the unit its values call for,
//! and (for histograms) on a scale shared by every figure of the same quantity.

use crate::{
    err, finish, nines_label, percentile_points, PlotError, CAPTION_PX, DESC_PX, LABEL_PX, SIZE,
};
use plotters::prelude::*;
use punctual_stats::Recorder;

/// A unit of time for an axis.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Unit {
    pub name: &'static str,
    /// Nanoseconds in one unit.
    pub ns: f64,
}

impl Unit {
    /// The unit for an axis from `lo_ns` to `hi_ns`: the one its geometric middle reads best
    /// in, so a latency axis from 8 us to 4 ms reads in us (10, 100, 1000), not in ms.
    pub fn for_range(lo_ns: u64, hi_ns: u64) -> Unit {
        let mid = ((lo_ns.max(1) as f64) * (hi_ns.max(1) as f64)).sqrt();
        Unit::for_max(mid as u64)
    }

    /// The unit in which the largest value drawn (`max_ns`) reads best: ns below 2 us, us below
    /// 2 ms, ms below 2 s, else s.
    pub fn for_max(max_ns: u64) -> Unit {
        match max_ns {
            0..2_000 => Unit {
                name: "ns",
                ns: 1.0,
            },
            2_000..2_000_000 => Unit {
                name: "us",
                ns: 1e3,
            },
            2_000_000..2_000_000_000 => Unit {
                name: "ms",
                ns: 1e6,
            },
            _ => Unit { name: "s", ns: 1e9 },
        }
    }
}

/// One run's distribution on a figure.
#[derive(Clone, Debug)]
pub struct Curve<'a> {
    pub label: String,
    pub rec: &'a Recorder,
    pub color: (u8, u8, u8),
}

/// A number as a tick label: three significant digits at most, no trailing zeros, so two ticks
/// read alike only when they are within 0.5 % of each other.
pub fn tick(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return "0".into();
    }
    let digits = (2 - v.abs().log10().floor() as i32).clamp(0, 9) as usize;
    let s = format!("{v:.digits$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// `svg` without repeated text elements: plotters' log axes can put the same tick twice at one
/// spot (10 as the last light tick of a decade and as the next decade's), two texts on top of
/// each other.
pub(crate) fn without_repeated_text(svg: String) -> String {
    let mut seen = std::collections::HashSet::new();
    let mut out = String::with_capacity(svg.len());
    for line in svg.split_inclusive('\n') {
        if line.trim_start().starts_with("<text") && !seen.insert(line.to_string()) {
            continue;
        }
        out.push_str(line);
    }
    out
}

/// A tick label on a logarithmic axis: 1, 2 and 5 times a power of ten are labelled, the ticks
/// between them (3, 4, 6 ... 9) left to their grid lines, where their labels would run into
/// each other.
pub fn log_tick(v: f64) -> String {
    if v <= 0.0 || !v.is_finite() {
        return String::new();
    }
    let mantissa = v / 10f64.powf(v.log10().floor());
    if [1.0, 2.0, 5.0, 10.0]
        .iter()
        .any(|m| (mantissa - m).abs() < 0.01 * m)
    {
        tick(v)
    } else {
        String::new()
    }
}

/// A tick label on a linear axis spanning `span`: as many decimals as ten ticks over that span
/// need to read apart, trailing zeros dropped.
pub fn linear_tick(v: f64, span: f64) -> String {
    let decimals = (-(span.abs().max(1e-12) / 10.0).log10())
        .ceil()
        .clamp(0.0, 9.0) as usize;
    let s = format!("{v:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// The power of ten at or below `v`.
fn decade_below(v: f64) -> f64 {
    10f64.powf(v.max(1e-12).log10().floor())
}

fn rgb(c: (u8, u8, u8)) -> RGBColor {
    RGBColor(c.0, c.1, c.2)
}

/// A curve ready to draw: label, points in the axis' unit, colour.
type Drawn = (String, Vec<(f64, f64)>, RGBColor);

/// Value against percentile on a nines axis (90, 99, 99.9 evenly spaced), one curve per run; the
/// y axis is logarithmic, labelled `quantity (unit)`. Without `legend` the caller names the
/// curves (a report lists them under the figure, where they cover no data).
pub fn percentiles(
    title: &str,
    quantity: &str,
    curves: &[Curve<'_>],
    legend: bool,
) -> Result<String, PlotError> {
    let max = curves.iter().filter_map(|c| c.rec.max()).max().unwrap_or(1);
    let min = curves.iter().filter_map(|c| c.rec.min()).min().unwrap_or(1);
    let unit = Unit::for_range(min, max);
    let lines: Vec<Drawn> = curves
        .iter()
        .map(|c| {
            let pts = percentile_points(c.rec)
                .into_iter()
                .map(|(x, us)| (x, (us * 1e3 / unit.ns).max(1e-3 / unit.ns)))
                .collect();
            (c.label.clone(), pts, rgb(c.color))
        })
        .collect();
    let (mut y0, mut y1, mut x1) = (f64::MAX, f64::MIN, 1.0f64);
    for (_, pts, _) in &lines {
        for &(x, y) in pts {
            y0 = y0.min(y);
            y1 = y1.max(y);
            x1 = x1.max(x);
        }
    }
    if y0 > y1 {
        (y0, y1) = (1.0, 10.0);
    }
    // From a power of ten (plotters puts log ticks at and after powers of ten) and over a decade
    // at least, so the axis carries several distinct ticks even for a single value.
    let y1 = (y1 * 1.5).max(y0 * 3.2);
    let y0 = decade_below(y0 / 1.2);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", CAPTION_PX))
            .margin(14)
            // The last percentile's label is centred on the right edge.
            .margin_right(40)
            .x_label_area_size(50)
            .y_label_area_size(80)
            .build_cartesian_2d(0f64..x1.ceil(), (y0..y1).log_scale())
            .map_err(err)?;
        chart
            .configure_mesh()
            .label_style(("sans-serif", LABEL_PX))
            .axis_desc_style(("sans-serif", DESC_PX))
            .x_desc("percentile (%)")
            .y_desc(format!("{quantity} ({})", unit.name))
            .x_labels(x1.ceil() as usize + 1)
            .x_label_formatter(&nines_label)
            .y_labels(12)
            .y_label_formatter(&|v| log_tick(*v))
            .draw()
            .map_err(err)?;
        for (label, pts, color) in lines {
            let c = color;
            chart
                .draw_series(LineSeries::new(pts, c.stroke_width(2)))
                .map_err(err)?
                .label(label)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(3))
                });
        }
        if legend {
            chart
                .configure_series_labels()
                .label_font(("sans-serif", LABEL_PX))
                .position(SeriesLabelPosition::UpperLeft)
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .draw()
                .map_err(err)?;
        }
        finish(&root)?;
    }
    Ok(without_repeated_text(svg))
}

/// The x range, bucketing and count range several histograms share.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HistScale {
    pub lo_ns: u64,
    pub hi_ns: u64,
    /// Logarithmic buckets and axis: the values span more than 20 times.
    pub log_x: bool,
    pub buckets: usize,
    /// The largest bucket count of any run drawn on the scale.
    pub max_count: u64,
}

impl HistScale {
    /// The scale that holds every one of `recs` whole.
    pub fn of(recs: &[&Recorder]) -> HistScale {
        let mut lo = recs.iter().filter_map(|r| r.min()).min().unwrap_or(0);
        let mut hi = recs
            .iter()
            .filter_map(|r| r.max())
            .max()
            .unwrap_or(1)
            .max(lo + 1);
        // A range narrower than 4 % of its values (one value, say) is widened to that, so its
        // ticks, at three significant digits, read differently.
        let least = (hi / 25).max(4);
        if hi - lo < least {
            let pad = (least - (hi - lo)).div_ceil(2);
            lo = lo.saturating_sub(pad);
            hi += pad;
        }
        let mut s = HistScale {
            lo_ns: lo,
            hi_ns: hi,
            log_x: lo > 0 && hi >= 20 * lo,
            buckets: 60,
            max_count: 1,
        };
        s.max_count = recs
            .iter()
            .flat_map(|r| s.buckets_of(r))
            .map(|b| b.2)
            .max()
            .unwrap_or(1)
            .max(1);
        s
    }

    /// Bucket `i`'s edges in ns.
    fn edges(&self, i: usize) -> (f64, f64) {
        let (lo, hi) = (self.lo_ns as f64, self.hi_ns as f64);
        let n = self.buckets as f64;
        let at = |k: f64| {
            if self.log_x {
                lo * (hi / lo).powf(k / n)
            } else {
                lo + (hi - lo) * k / n
            }
        };
        (at(i as f64), at(i as f64 + 1.0))
    }

    fn bucket(&self, v: u64) -> usize {
        let (lo, hi) = (self.lo_ns as f64, self.hi_ns as f64);
        let v = (v as f64).clamp(lo, hi);
        let f = if self.log_x {
            (v / lo).ln() / (hi / lo).ln()
        } else {
            (v - lo) / (hi - lo)
        };
        ((f * self.buckets as f64) as usize).min(self.buckets - 1)
    }

    /// A recorder's counts per bucket of this scale: (low edge, high edge, count), in ns.
    pub fn buckets_of(&self, rec: &Recorder) -> Vec<(f64, f64, u64)> {
        let mut counts = vec![0u64; self.buckets];
        let h = rec.histogram();
        for v in h.iter_recorded() {
            let value = h.median_equivalent(v.value_iterated_to());
            counts[self.bucket(value)] += v.count_at_value();
        }
        counts
            .into_iter()
            .enumerate()
            .map(|(i, c)| {
                let (a, b) = self.edges(i);
                (a, b, c)
            })
            .collect()
    }
}

/// Counts per bucket of `scale` on a logarithmic count axis: bars for one curve, a step line per
/// run for several; x labelled `quantity (unit)`, logarithmic when the scale is.
pub fn histograms(
    title: &str,
    quantity: &str,
    scale: &HistScale,
    curves: &[Curve<'_>],
    legend: bool,
) -> Result<String, PlotError> {
    let unit = Unit::for_range(scale.lo_ns, scale.hi_ns);
    let (mut x0, x1) = (scale.lo_ns as f64 / unit.ns, scale.hi_ns as f64 / unit.ns);
    if scale.log_x {
        x0 = decade_below(x0);
    }
    let ymax = scale.max_count as f64 * 2.0;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut b = ChartBuilder::on(&root);
        b.caption(title, ("sans-serif", CAPTION_PX))
            .margin(14)
            .margin_right(30)
            .x_label_area_size(50)
            .y_label_area_size(80);
        let x_desc = format!("{quantity} ({})", unit.name);
        macro_rules! body {
            ($chart:expr) => {{
                let mut chart = $chart.map_err(err)?;
                chart
                    .configure_mesh()
                    // A log axis gives each of its ticks light lines: bunched, they read as a band.
                    .max_light_lines(if scale.log_x { 0 } else { 4 })
                    .label_style(("sans-serif", LABEL_PX))
                    .axis_desc_style(("sans-serif", DESC_PX))
                    .x_desc(x_desc.as_str())
                    .y_desc("count")
                    .x_labels(10)
                    .y_labels(12)
                    .x_label_formatter(&|v| {
                        if scale.log_x {
                            log_tick(*v)
                        } else {
                            linear_tick(*v, x1 - x0)
                        }
                    })
                    .y_label_formatter(&|v| log_tick(*v))
                    .draw()
                    .map_err(err)?;
                for c in curves {
                    let color = rgb(c.color);
                    let buckets = scale.buckets_of(c.rec);
                    let scaled = buckets
                        .iter()
                        .map(|&(a, b, n)| (a / unit.ns, b / unit.ns, n));
                    if curves.len() == 1 {
                        chart
                            .draw_series(scaled.filter(|b| b.2 > 0).map(|(a, b, n)| {
                                Rectangle::new([(a, 0.5), (b, n as f64)], color.filled())
                            }))
                            .map_err(err)?;
                    } else {
                        let steps: Vec<(f64, f64)> = scaled
                            .flat_map(|(a, b, n)| {
                                let y = (n as f64).max(0.5);
                                [(a, y), (b, y)]
                            })
                            .collect();
                        chart
                            .draw_series(LineSeries::new(steps, color.stroke_width(2)))
                            .map_err(err)?
                            .label(c.label.clone())
                            .legend(move |(x, y)| {
                                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(3))
                            });
                    }
                }
                if legend && curves.len() > 1 {
                    chart
                        .configure_series_labels()
                        .label_font(("sans-serif", LABEL_PX))
                        .position(SeriesLabelPosition::UpperRight)
                        .background_style(WHITE.mix(0.85))
                        .border_style(BLACK)
                        .draw()
                        .map_err(err)?;
                }
            }};
        }
        if scale.log_x {
            body!(b.build_cartesian_2d((x0..x1).log_scale(), (0.5f64..ymax).log_scale()))
        } else {
            body!(b.build_cartesian_2d(x0..x1, (0.5f64..ymax).log_scale()))
        }
        finish(&root)?;
    }
    Ok(without_repeated_text(svg))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(values: impl IntoIterator<Item = u64>) -> Recorder {
        let mut r = Recorder::new();
        for v in values {
            r.record(v);
        }
        r
    }

    /// Tick labels of each axis as plotters writes them: y labels end at one x (text-anchor
    /// end), x labels are centred on one y.
    fn axes(svg: &str) -> (Vec<String>, Vec<String>) {
        let (mut ys, mut xs) = (Vec::new(), Vec::new());
        let mut by_x: std::collections::BTreeMap<String, Vec<String>> = Default::default();
        let mut by_y: std::collections::BTreeMap<String, Vec<String>> = Default::default();
        for t in svg.split("<text").skip(1) {
            let head = t.split('>').next().unwrap_or("");
            let body = t.split_once('>').map(|x| x.1).unwrap_or("");
            let text = body.split('<').next().unwrap_or("").trim().to_string();
            let attr = |n: &str| {
                head.split(&format!("{n}=\""))
                    .nth(1)
                    .and_then(|r| r.split('"').next())
                    .unwrap_or("")
                    .to_string()
            };
            if text.is_empty() || head.contains("rotate") {
                continue;
            }
            if attr("text-anchor") == "end" {
                by_x.entry(attr("x")).or_default().push(text);
            } else if attr("text-anchor") == "middle" {
                by_y.entry(attr("y")).or_default().push(text);
            }
        }
        if let Some(v) = by_x.into_values().max_by_key(Vec::len) {
            ys = v;
        }
        if let Some(v) = by_y.into_values().max_by_key(Vec::len) {
            xs = v;
        }
        (ys, xs)
    }

    fn distinct(v: &[String]) -> bool {
        let v: Vec<String> = v.iter().filter(|s| !s.is_empty()).cloned().collect();
        let mut u = v.to_vec();
        u.sort();
        u.dedup();
        u.len() == v.len() && v.len() >= 2
    }

    #[test]
    fn ticks_read_distinctly_whatever_the_values() {
        assert_eq!(tick(12.5), "12.5");
        assert_eq!(tick(0.0015), "0.0015");
        assert_eq!(tick(1500.0), "1500");
        assert_eq!(tick(2.0), "2");
        assert_eq!(log_tick(20.0), "20");
        assert_eq!(log_tick(5e-3), "0.005");
        assert_eq!(log_tick(9.0), "");
        // One value, a narrow range, a wide range, all zeros (latencies of 0 ns read as 1 ns).
        let cases = [
            rec(std::iter::repeat_n(4_000, 1_000)),
            rec((0..1_000).map(|i| 10_000 + i % 7)),
            rec((0..10_000).map(|i| {
                if i % 1000 == 0 {
                    5_000_000
                } else {
                    3_000 + i % 900
                }
            })),
            rec(std::iter::repeat_n(0, 100)),
        ];
        for (i, r) in cases.iter().enumerate() {
            let curve = [Curve {
                label: "a".into(),
                rec: r,
                color: (0, 0, 200),
            }];
            let svg = percentiles("p", "wake-up latency", &curve, true).unwrap();
            let (ys, xs) = axes(&svg);
            assert!(distinct(&ys), "case {i}: percentile y ticks {ys:?}");
            assert!(distinct(&xs) || xs.len() <= 2, "case {i}: x ticks {xs:?}");
            let scale = HistScale::of(&[r]);
            let svg = histograms("h", "wake-up latency", &scale, &curve, true).unwrap();
            let (ys, xs) = axes(&svg);
            assert!(distinct(&ys), "case {i}: count ticks {ys:?}");
            assert!(distinct(&xs), "case {i}: histogram x ticks {xs:?}");
        }
    }

    #[test]
    fn a_wide_range_gets_a_log_axis_and_runs_share_one_scale() {
        let a = rec((0..10_000).map(|i| 2_000 + i % 1_000));
        let b = rec((0..10_000).map(|i| if i == 0 { 900_000 } else { 2_500 + i % 1_000 }));
        let shared = HistScale::of(&[&a, &b]);
        assert!(shared.log_x, "{shared:?}");
        assert_eq!((shared.lo_ns, shared.hi_ns), (2_000, 900_000));
        // Every sample lands in a bucket, and the outlier does not squash the rest into one.
        let bb = shared.buckets_of(&b);
        assert_eq!(bb.iter().map(|x| x.2).sum::<u64>(), 10_000);
        assert!(bb.iter().filter(|x| x.2 > 0).count() >= 5, "{bb:?}");
        let narrow = HistScale::of(&[&a]);
        assert!(!narrow.log_x);
        let curves = [
            Curve {
                label: "A1 kernel=6.1".into(),
                rec: &a,
                color: (31, 119, 180),
            },
            Curve {
                label: "B1 kernel=6.12".into(),
                rec: &b,
                color: (214, 39, 40),
            },
        ];
        let svg = histograms("h", "lateness", &shared, &curves, true).unwrap();
        assert!(
            svg.contains("A1 kernel=6.1") && svg.contains("lateness (us)"),
            "legend and axis"
        );
        let svg = percentiles("p", "quantum length", &curves, true).unwrap();
        assert!(svg.contains("quantum length (us)"));
        assert!(!svg.contains("latency (us)"));
    }

    #[test]
    fn units_follow_the_largest_value() {
        assert_eq!(Unit::for_max(900).name, "ns");
        assert_eq!(Unit::for_max(150_000).name, "us");
        assert_eq!(Unit::for_max(30_000_000).name, "ms");
        assert_eq!(Unit::for_max(3_000_000_000).name, "s");
        assert_eq!(Unit::for_range(8_000, 4_000_000).name, "us");
    }
}
