//! SVG charts of a matrix run, drawn with `plotters` (SVG backend only): requests per second
//! against workers, one panel per scenario and one line per server; and the latency CDF of each
//! server at the largest worker count measured, one panel per scenario.
//!
//! Charts are rendered into strings (the caller writes the files), so tests can look at them.

use plotters::prelude::*;

use super::point::{Point, Trial};
use super::scenario::Scenario;
use super::server::Server;

/// Panel size in pixels; panels are laid out three to a row.
const PANEL: (u32, u32) = (420, 300);
const COLUMNS: usize = 3;
/// The CDF's x axis ends at 99.999 %: "five nines", as far as a few seconds of samples go.
const MAX_NINES: f64 = 5.0;

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
            let mut chart = ChartBuilder::on(panel)
                .caption(scenario.name(), ("sans-serif", 16))
                .margin(10)
                .x_label_area_size(30)
                .y_label_area_size(60)
                .build_cartesian_2d(0.5..max_workers + 0.5, 0.0..(max_rps * 1.15).max(1.0))
                .map_err(|e| fail(&e))?;
            chart
                .configure_mesh()
                .x_desc("workers")
                .y_desc("median req/s")
                .max_light_lines(1)
                .x_labels(max_workers as usize + 1)
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
            let mut chart = ChartBuilder::on(panel)
                .caption(
                    format!("{} ({workers} worker(s))", scenario.name()),
                    ("sans-serif", 16),
                )
                .margin(10)
                .x_label_area_size(30)
                .y_label_area_size(60)
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
}
