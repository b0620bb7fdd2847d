//! SVG charts of a matrix run, drawn with `plotters` (SVG backend only): requests per second
//! against workers, one panel per scenario and one line per server; and the latency CDF of each
//! server at the largest worker count measured, one panel per scenario.
//!
//! Charts are rendered into strings (the caller writes the files), so tests can look at them.
//! plotters does not measure text in the SVG backend, so each panel's label areas and margins
//! are sized here from the labels it will draw (estimated widths, `Frame`): no text leaves
//! its panel, whatever the names and values.

use plotters::prelude::*;

use super::point::{Point, Trial};
use super::scenario::Scenario;
use super::server::Server;

/// Panel size in pixels; panels are laid out three to a row.
const PANEL: (u32, u32) = (420, 300);
const COLUMNS: usize = 3;
/// The CDF's x axis ends at 99.999 %: "five nines", as far as a few seconds of samples go.
const MAX_NINES: f64 = 5.0;
/// Width of a character of a sans-serif font, as a share of its size: the wide side of the
/// average (digits are about 0.55, capitals more), so an estimate errs towards room to spare.
const GLYPH: f64 = 0.6;
/// Sizes as given to plotters: tick labels and axis descriptions (its default) and captions.
/// The SVG says 1/1.24 of each, so widths estimated from these are generous.
const LABEL_SIZE: f64 = 12.0;
const CAPTION_SIZE: f64 = 16.0;
/// Space around a panel's plot, in pixels.
const MARGIN: u32 = 10;
/// The y label area holds the labels, their tick marks and the rotated axis description.
const Y_AREA_MIN: u32 = 60;
const Y_AREA_EXTRA: u32 = 30;
/// At most this many worker counts are labelled; more would overlap.
const MAX_X_LABELS: usize = 12;

/// A chart that could not be drawn.
#[derive(Debug, thiserror::Error)]
#[error("cannot draw the {chart} chart: {message}")]
pub struct Error {
    pub chart: &'static str,
    pub message: String,
}

fn color(server: Server) -> RGBColor {
    match server {
        Server::ServeryThread => RGBColor(0x1f, 0x77, 0xb4),
        Server::ServeryProcess => RGBColor(0x17, 0xbe, 0xcf),
        Server::Nginx => RGBColor(0x2c, 0xa0, 0x2c),
        Server::H2o => RGBColor(0xd6, 0x27, 0x28),
        Server::Caddy => RGBColor(0x94, 0x67, 0xbd),
        Server::AxumTokio => RGBColor(0xff, 0x7f, 0x0e),
    }
}

/// Scenarios and servers in the order they first appear in `points`.
fn axes(points: &[Point]) -> (Vec<Scenario>, Vec<Server>) {
    let mut scenarios = Vec::new();
    let mut servers = Vec::new();
    for p in points {
        if !scenarios.contains(&p.scenario) {
            scenarios.push(p.scenario);
        }
        if !servers.contains(&p.server) {
            servers.push(p.server);
        }
    }
    (scenarios, servers)
}

/// How wide `text` is drawn at `size`, estimated.
fn text_width(text: &str, size: f64) -> f64 {
    text.chars().count() as f64 * size * GLYPH
}

/// The widest `label` of 65 values spread across `from..to` (evenly, or evenly on a log
/// scale), as an estimate of the widest tick label plotters will draw there: the formats grow
/// with the value, and every unit the range spans is sampled.
fn widest(from: f64, to: f64, log: bool, label: &dyn Fn(f64) -> String) -> f64 {
    const SAMPLES: u32 = 64;
    (0..=SAMPLES)
        .map(|i| {
            let t = f64::from(i) / f64::from(SAMPLES);
            let v = if log {
                (from.ln() + t * (to.ln() - from.ln())).exp()
            } else {
                from + t * (to - from)
            };
            text_width(&label(v), LABEL_SIZE)
        })
        .fold(0.0, f64::max)
}

/// Where a panel's texts go so that each stays inside it: the y label area wide enough for
/// the widest y label, a right margin for half the widest x label (the last one is centred on
/// the plot's edge), and a caption size at which the caption fits the panel's width.
struct Frame {
    y_area: u32,
    right: u32,
    caption: f64,
}

impl Frame {
    fn new(caption: &str, widest_y: f64, widest_x: f64) -> Frame {
        let room = f64::from(PANEL.0 - 2 * MARGIN);
        Frame {
            y_area: (widest_y.ceil() as u32 + Y_AREA_EXTRA).max(Y_AREA_MIN),
            right: ((widest_x / 2.0).ceil() as u32 + 4).max(MARGIN),
            caption: CAPTION_SIZE.min(room / (caption.chars().count().max(1) as f64 * GLYPH)),
        }
    }

    /// A chart builder on `panel` laid out by this frame.
    fn builder<'a, 'b>(
        &self,
        panel: &'a DrawingArea<SVGBackend<'b>, plotters::coord::Shift>,
        caption: &str,
    ) -> ChartBuilder<'a, 'b, SVGBackend<'b>> {
        let mut b = ChartBuilder::on(panel);
        b.caption(caption, ("sans-serif", self.caption))
            .margin(MARGIN)
            .margin_right(self.right)
            .x_label_area_size(30)
            .y_label_area_size(self.y_area);
        b
    }
}

fn canvas_size(panels: usize) -> (u32, u32) {
    let columns = panels.clamp(1, COLUMNS);
    let rows = panels.div_ceil(COLUMNS).max(1);
    (PANEL.0 * columns as u32, PANEL.1 * rows as u32)
}

/// Median RPS against workers, per scenario and server. A server with only the 1-worker point
/// shows as a single dot.
pub fn rps_vs_workers(points: &[Point]) -> Result<String, Error> {
    let fail = |e: &dyn std::fmt::Display| Error {
        chart: "RPS vs workers",
        message: e.to_string(),
    };
    let (scenarios, servers) = axes(points);
    let size = canvas_size(scenarios.len());
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        root.fill(&WHITE).map_err(|e| fail(&e))?;
        let rows = scenarios.len().div_ceil(COLUMNS).max(1);
        let columns = scenarios.len().clamp(1, COLUMNS);
        let panels = root.split_evenly((rows, columns));
        for (panel, &scenario) in panels.iter().zip(&scenarios) {
            let mine: Vec<&Point> = points.iter().filter(|p| p.scenario == scenario).collect();
            let max_workers = mine.iter().map(|p| p.workers).max().unwrap_or(1) as f64;
            let max_rps = mine
                .iter()
                .filter_map(|p| p.summary.rps_median)
                .fold(0.0, f64::max);
            let top = (max_rps * 1.15).max(1.0);
            let frame = Frame::new(
                scenario.name(),
                widest(0.0, top, false, &super::render::rps),
                text_width(&format!("{max_workers:.0}"), LABEL_SIZE),
            );
            let mut chart = frame
                .builder(panel, scenario.name())
                .build_cartesian_2d(0.5..max_workers + 0.5, 0.0..top)
                .map_err(|e| fail(&e))?;
            chart
                .configure_mesh()
                .x_desc("workers")
                .y_desc("median req/s")
                .max_light_lines(1)
                .x_labels((max_workers as usize + 1).min(MAX_X_LABELS))
                .x_label_formatter(&|x| format!("{x:.0}"))
                .y_label_formatter(&|y| super::render::rps(*y))
                .draw()
                .map_err(|e| fail(&e))?;
            for &server in &servers {
                let mut line: Vec<(f64, f64)> = mine
                    .iter()
                    .filter(|p| p.server == server)
                    .filter_map(|p| Some((p.workers as f64, p.summary.rps_median?)))
                    .collect();
                line.sort_by(|a, b| a.0.total_cmp(&b.0));
                let c = color(server);
                chart
                    .draw_series(LineSeries::new(line.clone(), c.stroke_width(2)))
                    .map_err(|e| fail(&e))?
                    .label(server.label())
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], c));
                chart
                    .draw_series(line.iter().map(|&xy| Circle::new(xy, 4, c.filled())))
                    .map_err(|e| fail(&e))?;
            }
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::LowerRight)
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .draw()
                .map_err(|e| fail(&e))?;
        }
        root.present().map_err(|e| fail(&e))?;
    }
    Ok(svg)
}

/// The trial whose RPS is closest to the point's median: the "typical" run's distribution.
fn typical(point: &Point) -> Option<&Trial> {
    let median = point.summary.rps_median?;
    point
        .trials
        .iter()
        .filter(|t| t.report.is_some() && !t.latency_cdf.is_empty())
        .min_by(|a, b| {
            let d = |t: &Trial| {
                t.report
                    .as_ref()
                    .map_or(f64::MAX, |r| (r.rps - median).abs())
            };
            d(a).total_cmp(&d(b))
        })
}

/// `q` as "nines": 0.9 -> 1, 0.99 -> 2, 0.999 -> 3.
pub fn nines(q: f64) -> f64 {
    -(1.0 - q).max(1e-12).log10()
}

/// Latency against quantile (log-scaled "nines" axis, log latency axis), per scenario and
/// server, at the largest worker count each scenario has.
pub fn latency_cdf(points: &[Point]) -> Result<String, Error> {
    let fail = |e: &dyn std::fmt::Display| Error {
        chart: "latency CDF",
        message: e.to_string(),
    };
    let (scenarios, servers) = axes(points);
    let size = canvas_size(scenarios.len());
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        root.fill(&WHITE).map_err(|e| fail(&e))?;
        let rows = scenarios.len().div_ceil(COLUMNS).max(1);
        let columns = scenarios.len().clamp(1, COLUMNS);
        let panels = root.split_evenly((rows, columns));
        for (panel, &scenario) in panels.iter().zip(&scenarios) {
            let workers = points
                .iter()
                .filter(|p| p.scenario == scenario)
                .map(|p| p.workers)
                .max()
                .unwrap_or(1);
            let curves: Vec<(Server, Vec<(f64, f64)>)> = servers
                .iter()
                .filter_map(|&server| {
                    let point = points.iter().find(|p| {
                        p.scenario == scenario && p.server == server && p.workers == workers
                    })?;
                    let cdf = &typical(point)?.latency_cdf;
                    let curve = cdf
                        .iter()
                        // 0.99999 is a hair above 5 nines in binary floating point.
                        .filter(|q| nines(q.q) <= MAX_NINES + 1e-6)
                        .map(|q| (nines(q.q).min(MAX_NINES), q.us.max(1) as f64))
                        .collect();
                    Some((server, curve))
                })
                .collect();
            let all: Vec<f64> = curves
                .iter()
                .flat_map(|(_, c)| c.iter().map(|p| p.1))
                .collect();
            let lo = all.iter().copied().fold(f64::MAX, f64::min).clamp(1.0, 1e6);
            let hi = all.iter().copied().fold(1.0, f64::max);
            let caption = format!("{} ({workers} worker(s))", scenario.name());
            let frame = Frame::new(
                &caption,
                widest(lo * 0.8, hi * 1.25, true, &super::render::micros),
                widest(0.0, MAX_NINES, false, &percentile_label),
            );
            let mut chart = frame
                .builder(panel, &caption)
                .build_cartesian_2d(0.0..MAX_NINES, (lo * 0.8..hi * 1.25).log_scale())
                .map_err(|e| fail(&e))?;
            chart
                .configure_mesh()
                .x_desc("percentile")
                .y_desc("latency")
                .max_light_lines(1)
                .x_labels(MAX_NINES as usize + 1)
                .x_label_formatter(&|x| percentile_label(*x))
                .y_label_formatter(&|y| super::render::micros(*y))
                .draw()
                .map_err(|e| fail(&e))?;
            for (server, curve) in curves {
                let c = color(server);
                chart
                    .draw_series(LineSeries::new(curve, c.stroke_width(2)))
                    .map_err(|e| fail(&e))?
                    .label(server.label())
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], c));
            }
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::LowerRight)
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .draw()
                .map_err(|e| fail(&e))?;
        }
        root.present().map_err(|e| fail(&e))?;
    }
    Ok(svg)
}

/// Axis label for a "nines" value: 0 -> "0%", 1 -> "90%", 3 -> "99.9%".
fn percentile_label(nines: f64) -> String {
    let n = nines.round() as i32;
    if (nines - f64::from(n)).abs() > 1e-6 || n < 0 {
        return String::new();
    }
    match n {
        0 => "0%".to_string(),
        1 => "90%".to_string(),
        n => format!("99.{}%", "9".repeat(n as usize - 2)).replace(".%", "%"),
    }
}

/// Trials whose CDF the latency chart uses, for the report: (scenario, server, trial number).
pub fn cdf_sources(points: &[Point]) -> Vec<(Scenario, Server, usize)> {
    points
        .iter()
        .filter_map(|p| Some((p.scenario, p.server, typical(p)?.trial)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matrix::point::summarize;
    use crate::matrix::point::tests::trial;
    use crate::report::Quantile;

    fn point(server: Server, workers: usize, rps: f64) -> Point {
        let mut t = trial(rps, 900, 0);
        t.latency_cdf = [
            (0.0, 50),
            (0.5, 200),
            (0.9, 400),
            (0.99, 900),
            (0.999, 2000),
            (1.0, 5000),
        ]
        .iter()
        .map(|&(q, us)| Quantile { q, us })
        .collect();
        let trials = vec![t];
        Point {
            scenario: Scenario::Static1k,
            server,
            workers,
            server_cpus: (0..workers).collect(),
            summary: summarize(&trials),
            trials,
        }
    }

    #[test]
    fn nines_axis() {
        assert!((nines(0.99) - 2.0).abs() < 1e-9);
        assert_eq!(nines(0.0), 0.0);
        assert_eq!(percentile_label(0.0), "0%");
        assert_eq!(percentile_label(1.0), "90%");
        assert_eq!(percentile_label(2.0), "99%");
        assert_eq!(percentile_label(3.0), "99.9%");
        assert_eq!(percentile_label(2.5), "");
    }

    #[test]
    fn charts_are_svg_with_a_series_per_server() {
        let points = vec![
            point(Server::ServeryThread, 1, 100.0),
            point(Server::ServeryThread, 2, 190.0),
            point(Server::Nginx, 1, 90.0),
        ];
        let rps = rps_vs_workers(&points).expect("rps chart");
        assert!(rps.starts_with("<svg"));
        assert!(rps.contains("static-1k") && rps.contains("workers"));
        assert!(rps.contains("servery (thread)") && rps.contains("nginx"));
        assert!(rps.contains("<polyline") && rps.contains("<circle"));
        // The CDF panel shows the scenario's largest worker count: only servery has 2.
        let cdf = latency_cdf(&points).expect("cdf chart");
        assert!(cdf.starts_with("<svg"));
        assert!(cdf.contains("static-1k (2 worker(s))") && cdf.contains("99.9%"));
        assert!(cdf.contains("servery (thread)") && !cdf.contains(">\nnginx"));
        assert!(cdf.contains("<polyline"));
        // Every quantile up to five nines is drawn, 0.99999 included.
        let curve = cdf
            .split("<polyline")
            .find(|p| p.contains("stroke=\"#1F77B4\""))
            .expect("servery curve");
        let drawn = curve.split("points=\"").nth(1).expect("points");
        let drawn = drawn.split('"').next().unwrap_or_default();
        assert_eq!(drawn.split_whitespace().count(), 5, "{drawn}");
        assert_eq!(cdf_sources(&points).len(), 3);
    }

    /// A `<text>` of an SVG: its anchor point, anchor, size, rotation and content.
    struct Text {
        x: f64,
        y: f64,
        anchor: String,
        size: f64,
        rotated: bool,
        content: String,
    }

    fn attr<'a>(tag: &'a str, name: &str) -> Option<&'a str> {
        let start = tag.find(&format!(" {name}=\""))? + name.len() + 3;
        tag[start..].split('"').next()
    }

    fn texts(svg: &str) -> Vec<Text> {
        svg.split("<text ")
            .skip(1)
            .map(|t| {
                let (tag, rest) = t.split_once('>').expect("a closed tag");
                let tag = format!(" {tag}");
                let tag = tag.as_str();
                let number = |n| attr(tag, n).and_then(|v| v.parse().ok()).expect(n);
                Text {
                    x: number("x"),
                    y: number("y"),
                    anchor: attr(tag, "text-anchor").unwrap_or("start").to_owned(),
                    size: number("font-size"),
                    rotated: attr(tag, "transform").is_some(),
                    content: rest.split("</text>").next().unwrap_or("").trim().to_owned(),
                }
            })
            .collect()
    }

    /// The box a text covers, (left, top, right, bottom), with each character `GLYPH` of the
    /// font size wide and the line a font size above and below its anchor (plotters shifts it
    /// by `dy`, less than that); a rotated text (the y axis's description, turned 270° about
    /// its anchor) runs up the page instead.
    fn extent(t: &Text) -> (f64, f64, f64, f64) {
        let width = t.content.chars().count() as f64 * t.size * GLYPH;
        let (before, after) = match t.anchor.as_str() {
            "middle" => (width / 2.0, width / 2.0),
            "end" => (width, 0.0),
            _ => (0.0, width),
        };
        if t.rotated {
            (t.x - t.size, t.y - after, t.x + t.size, t.y + before)
        } else {
            (t.x - before, t.y - t.size, t.x + after, t.y + t.size)
        }
    }

    /// Every text of `svg` that does not fit its viewBox, described for the failure message.
    fn outside(svg: &str) -> Vec<String> {
        let view = attr(svg, "viewBox").expect("a viewBox");
        let view: Vec<f64> = view
            .split(' ')
            .map(|v| v.parse().expect("a number"))
            .collect();
        let (w, h) = (view[2], view[3]);
        texts(svg)
            .iter()
            .filter_map(|t| {
                let (left, top, right, bottom) = extent(t);
                let inside = left >= 0.0 && top >= 0.0 && right <= w && bottom <= h;
                (!inside).then(|| {
                    format!(
                        "{:?} at ({}, {}) spans x {left:.0}..{right:.0}, y {top:.0}..{bottom:.0} \
                         of 0..{w} × 0..{h}",
                        t.content, t.x, t.y
                    )
                })
            })
            .collect()
    }

    #[test]
    fn every_label_lies_inside_the_canvas() {
        let servers = [
            Server::ServeryThread,
            Server::ServeryProcess,
            Server::Nginx,
            Server::H2o,
            Server::Caddy,
            Server::AxumTokio,
        ];
        // The longest scenario names, four of them so the canvas has a second row, every
        // server, up to 128 workers, billions of requests a second and a 98 s tail.
        let scenarios = [
            Scenario::StaticNotModified,
            Scenario::Static1kPipelined,
            Scenario::App1kPipelined,
            Scenario::StaticRange64k,
        ];
        let mut points = Vec::new();
        for scenario in scenarios {
            for (i, &server) in servers.iter().enumerate() {
                for workers in [1, 2, 4, 8, 16, 32, 64, 128] {
                    let mut p = point(
                        server,
                        workers,
                        12_345_678.9 * (i + 1) as f64 * workers as f64,
                    );
                    p.scenario = scenario;
                    p.trials[0].latency_cdf.push(Quantile {
                        q: 0.99999,
                        us: 98_765_432,
                    });
                    points.push(p);
                }
            }
        }
        for (name, svg) in [
            ("rps", rps_vs_workers(&points).expect("rps chart")),
            ("cdf", latency_cdf(&points).expect("cdf chart")),
        ] {
            let all = texts(&svg);
            let drawn = |s: &str| all.iter().any(|t| t.content.starts_with(s));
            assert!(
                drawn("static-not-modified") && drawn("servery (process)"),
                "{name}: the test's captions and legend are drawn"
            );
            assert!(
                drawn("9,000,000,000") || drawn("99.999%"),
                "{name}: the test's widest labels are drawn"
            );
            let out = outside(&svg);
            assert!(
                out.is_empty(),
                "{name}: labels outside the canvas:\n{}",
                out.join("\n")
            );
        }
    }
}
