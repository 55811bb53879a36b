//! A small SVG line chart: stacked panels sharing one x axis, each with its own y axis
//! from zero, a few polylines and a legend. Enough for the soak's figures over time
//! (RSS, file size, latency); written here because a plotting crate would pull in font
//! rendering and image codecs for what is a few hundred bytes of markup.

use std::fmt::Write as _;

/// One line of a panel.
pub(crate) struct Series {
    /// Its name in the legend.
    pub name: String,
    /// `(x, y)` points in x order; a missing reading is left out (the line joins
    /// the points on either side).
    pub points: Vec<(f64, f64)>,
}

/// One chart: a y axis from zero and its lines.
pub(crate) struct Panel {
    /// Shown above the panel.
    pub title: String,
    /// The y axis' unit, shown beside its ticks' labels.
    pub unit: String,
    /// The lines.
    pub series: Vec<Series>,
}

/// The lines' colours, in order (distinct in print and for the common colour
/// blindnesses).
const COLOURS: [&str; 6] = [
    "#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9",
];

const WIDTH: f64 = 960.0;
const PANEL_HEIGHT: f64 = 220.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 24.0;
/// Room above each panel for its title.
const TOP: f64 = 34.0;
/// Room below each panel for the x ticks' labels.
const BOTTOM: f64 = 30.0;
/// Room at the top of the image for each line of its title, and below them.
const TITLE_LINE: f64 = 18.0;
/// Room at the bottom for the x axis' label.
const FOOTER: f64 = 26.0;

/// An axis from zero for values up to `v`: its end, the smallest "round" number at or
/// just below `v` (within 0.5%, so that a last reading a hair past the hour does not
/// double the axis), and the step between its 4 to 6 ticks.
pub(crate) fn axis(v: f64) -> (f64, f64) {
    if !v.is_finite() || v <= 0.0 {
        return (1.0, 0.2);
    }
    /// Round ends (times a power of ten) and their steps.
    const ENDS: [(f64, f64); 11] = [
        (1.0, 0.2),
        (1.2, 0.2),
        (1.5, 0.3),
        (2.0, 0.5),
        (2.5, 0.5),
        (3.0, 0.5),
        (4.0, 1.0),
        (5.0, 1.0),
        (6.0, 1.0),
        (8.0, 2.0),
        (10.0, 2.0),
    ];
    let p = 10f64.powf(v.log10().floor());
    let (end, step) = ENDS
        .into_iter()
        .find(|(e, _)| e * p >= v * 0.995)
        .unwrap_or((10.0, 2.0));
    (end * p, step * p)
}

/// A tick's label with as many decimals as the step between ticks needs.
fn label(v: f64, step: f64) -> String {
    let decimals = (0..4)
        .find(|&d| {
            let scaled = step * 10f64.powi(d);
            (scaled - scaled.round()).abs() < 1e-6
        })
        .unwrap_or(4) as usize;
    format!("{v:.decimals$}")
}

/// Escapes text for SVG.
fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Renders `panels` one above the other over a shared x axis (`x_label`) under `title`
/// (a line of it per `\n`).
pub(crate) fn svg(title: &str, x_label: &str, panels: &[Panel]) -> String {
    let title: Vec<&str> = title.lines().collect();
    let header = TITLE_LINE * (title.len() as f64 + 1.0);
    let height = header + panels.len() as f64 * (TOP + PANEL_HEIGHT + BOTTOM) + FOOTER;
    let x_max = panels
        .iter()
        .flat_map(|p| p.series.iter().flat_map(|s| s.points.iter().map(|pt| pt.0)))
        .fold(0.0f64, f64::max);
    let (x_top, x_step) = axis(x_max);
    let plot_w = WIDTH - LEFT - RIGHT;
    let sx = |x: f64| LEFT + x / x_top * plot_w;

    let mut o = String::new();
    let _ = writeln!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(o, r#"<rect width="100%" height="100%" fill="white"/>"#);
    for (k, line) in title.iter().enumerate() {
        let _ = writeln!(
            o,
            r#"<text x="{LEFT}" y="{:.1}" font-size="15" font-weight="bold">{}</text>"#,
            TITLE_LINE * (k as f64 + 1.0) + 4.0,
            esc(line)
        );
    }
    for (i, panel) in panels.iter().enumerate() {
        let top = header + i as f64 * (TOP + PANEL_HEIGHT + BOTTOM) + TOP;
        let bottom = top + PANEL_HEIGHT;
        let y_max = panel
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|pt| pt.1))
            .fold(0.0f64, f64::max);
        let (y_top, y_step) = axis(y_max);
        let sy = |y: f64| bottom - y / y_top * PANEL_HEIGHT;
        let _ = writeln!(
            o,
            r#"<text x="{LEFT}" y="{}" font-weight="bold">{}</text>"#,
            top - 10.0,
            esc(&panel.title)
        );
        // The grid and the y ticks.
        for k in 0..=(y_top / y_step).round() as u32 {
            let v = y_step * f64::from(k);
            let y = sy(v);
            let _ = writeln!(
                o,
                r##"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{} {}</text>"##,
                WIDTH - RIGHT,
                LEFT - 6.0,
                y + 4.0,
                label(v, y_step),
                esc(&panel.unit)
            );
        }
        // The x ticks.
        for k in 0..=(x_top / x_step).round() as u32 {
            let v = x_step * f64::from(k);
            let x = sx(v);
            let _ = writeln!(
                o,
                r##"<line x1="{x:.1}" y1="{bottom:.1}" x2="{x:.1}" y2="{:.1}" stroke="#999"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
                bottom + 4.0,
                bottom + 17.0,
                label(v, x_step)
            );
        }
        let _ = writeln!(
            o,
            r##"<rect x="{LEFT}" y="{top:.1}" width="{plot_w:.1}" height="{PANEL_HEIGHT}" fill="none" stroke="#444"/>"##
        );
        for (j, s) in panel.series.iter().enumerate() {
            let colour = COLOURS[j % COLOURS.len()];
            let pts: Vec<String> = s
                .points
                .iter()
                .filter(|(x, y)| x.is_finite() && y.is_finite())
                .map(|&(x, y)| format!("{:.1},{:.1}", sx(x), sy(y)))
                .collect();
            if pts.len() == 1 {
                // One reading: a dot, since a polyline of one point draws nothing.
                let (x, y) = pts[0].split_once(',').unwrap_or(("0", "0"));
                let _ = writeln!(o, r#"<circle cx="{x}" cy="{y}" r="3" fill="{colour}"/>"#);
            } else if !pts.is_empty() {
                let _ = writeln!(
                    o,
                    r#"<polyline fill="none" stroke="{colour}" stroke-width="1.8" points="{}"/>"#,
                    pts.join(" ")
                );
            }
            // The legend, right-aligned in the title's line.
            let lx = WIDTH - RIGHT - 150.0 * (panel.series.len() - j) as f64;
            let _ = writeln!(
                o,
                r#"<line x1="{lx:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="{colour}" stroke-width="3"/><text x="{:.1}" y="{:.1}">{}</text>"#,
                top - 14.0,
                lx + 18.0,
                top - 14.0,
                lx + 22.0,
                top - 10.0,
                esc(&s.name)
            );
        }
    }
    let _ = writeln!(
        o,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
        LEFT + plot_w / 2.0,
        height - 8.0,
        esc(x_label)
    );
    o.push_str("</svg>\n");
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_axis_ends_on_a_round_number_at_or_above_the_largest_value() {
        let near = |(a, b): (f64, f64), (c, d): (f64, f64)| {
            assert!(
                (a - c).abs() < 1e-9 && (b - d).abs() < 1e-9,
                "{a},{b} vs {c},{d}"
            )
        };
        near(axis(0.0), (1.0, 0.2));
        near(axis(7.0), (8.0, 2.0));
        near(axis(10.0), (10.0, 2.0));
        near(axis(11.0), (12.0, 2.0));
        near(axis(23.0), (25.0, 5.0));
        near(axis(0.31), (0.4, 0.1));
        near(axis(3.0), (3.0, 0.5));
        // An hour's last sample, a moment after minute 60.
        near(axis(60.02), (60.0, 10.0));
        near(axis(61.0), (80.0, 20.0));
    }

    #[test]
    fn tick_labels_carry_the_decimals_their_step_needs() {
        assert_eq!(label(20.0, 10.0), "20");
        assert_eq!(label(0.5, 0.5), "0.5");
        assert_eq!(label(0.75, 0.25), "0.75");
        assert_eq!(label(0.2, 0.1), "0.2");
    }

    #[test]
    fn each_series_is_a_polyline_scaled_into_its_panel() {
        let panel = Panel {
            title: "RSS <broker>".into(),
            unit: "MiB".into(),
            series: vec![
                Series {
                    name: "rss".into(),
                    points: vec![(0.0, 0.0), (5.0, 50.0), (10.0, 100.0)],
                },
                Series {
                    name: "one".into(),
                    points: vec![(1.0, 1.0)],
                },
            ],
        };
        let s = svg("soak", "minutes", &[panel]);
        assert!(s.starts_with("<svg") && s.ends_with("</svg>\n"));
        assert_eq!(s.matches("<polyline").count(), 1);
        assert_eq!(s.matches("<circle").count(), 1);
        // x 0..10 spans the plot's width, y 0..100 its height (under one title line).
        let (x0, x1) = (LEFT, WIDTH - RIGHT);
        let header = 2.0 * TITLE_LINE;
        let (y_bottom, y_top) = (header + TOP + PANEL_HEIGHT, header + TOP);
        assert!(s.contains(&format!(
            "points=\"{x0:.1},{y_bottom:.1} {:.1},{:.1} {x1:.1},{y_top:.1}\"",
            (x0 + x1) / 2.0,
            (y_bottom + y_top) / 2.0
        )));
        assert!(s.contains("RSS &lt;broker&gt;"));
    }

    #[test]
    fn a_title_takes_a_line_per_newline() {
        let s = svg("soak\n0 errors", "minutes", &[]);
        assert_eq!(s.matches(r#"font-size="15""#).count(), 2);
        assert!(s.contains(">soak</text>") && s.contains(">0 errors</text>"));
    }
}
