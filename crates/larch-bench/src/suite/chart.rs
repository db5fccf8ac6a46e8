//! Charts for the suite reports, drawn with plotters into PNG and SVG from one description.
//!
//! Text is drawn with DejaVu Sans, shipped in `assets/fonts` (Bitstream Vera licence, beside the
//! file) and registered with plotters' ab_glyph backend under the generic family `sans-serif`,
//! so a PNG looks the same on every machine whatever fonts it has, and the SVG names only the
//! generic family. Every engine keeps one colour in every chart ([`engine_color`]).

use crate::error::{Error, Result};
use plotters::coord::ranged1d::{AsRangedCoord, Ranged, ValueFormatter};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::Path;

/// DejaVu Sans 2.37 (see assets/fonts/LICENSE-DejaVu.txt).
static FONT_TTF: &[u8] = include_bytes!("../../assets/fonts/DejaVuSans.ttf");

/// Pixels per panel; a figure is a grid of panels under its title.
pub const PANEL_W_PX: u32 = 640;
pub const PANEL_H_PX: u32 = 440;
const TITLE_H_PX: u32 = 44;
/// Wide enough for a title and a legend of all eight engines on one line.
const FIGURE_W_PX_MIN: u32 = 1040;

fn register_font() -> Result<()> {
    static ONCE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let ok = *ONCE.get_or_init(|| {
        plotters::style::register_font("sans-serif", FontStyle::Normal, FONT_TTF).is_ok()
    });
    if ok {
        Ok(())
    } else {
        Err(Error::System(
            "the embedded DejaVu Sans font did not load".into(),
        ))
    }
}

/// The engines, each with its colour (Tableau 10, then black, a light orange and a dark red
/// for larch-mapped beside larch's red; larch-pages and any other name take the olive of
/// `engine_color`'s fallback).
const ENGINE_COLORS: &[(&str, RGBColor)] = &[
    ("larch", RGBColor(214, 39, 40)),
    ("larch-mapped", RGBColor(120, 20, 20)),
    ("lmdb", RGBColor(31, 119, 180)),
    ("rocksdb", RGBColor(255, 127, 14)),
    ("leveldb", RGBColor(44, 160, 44)),
    ("bdb", RGBColor(148, 103, 189)),
    ("wiredtiger", RGBColor(140, 86, 75)),
    ("wiredtiger-lsm", RGBColor(227, 119, 194)),
    ("redb", RGBColor(127, 127, 127)),
    ("libmdbx", RGBColor(23, 190, 207)),
    ("canopydb", RGBColor(0, 0, 0)),
    ("fjall", RGBColor(255, 187, 120)),
];

/// Colours for series that are not engines (threads, memory levels).
pub const SERIES_COLORS: &[RGBColor] = &[
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// One colour per engine, the same in every chart.
pub fn engine_color(engine: &str) -> RGBColor {
    ENGINE_COLORS
        .iter()
        .find(|(n, _)| *n == engine)
        .map(|(_, c)| *c)
        .unwrap_or(RGBColor(188, 189, 34))
}

pub fn series_color(i: usize) -> RGBColor {
    SERIES_COLORS[i % SERIES_COLORS.len()]
}

#[derive(Debug, Clone)]
pub struct Line {
    pub name: String,
    pub color: RGBColor,
    pub points: Vec<(f64, f64)>,
    /// Draw a marker at each point (for sparse series such as thread counts).
    pub markers: bool,
}

#[derive(Debug, Clone)]
pub struct LinePanel {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub x_log: bool,
    pub y_log: bool,
    pub lines: Vec<Line>,
    /// Vertical marks (x, label), e.g. where a phase starts.
    pub marks: Vec<(f64, String)>,
}

impl LinePanel {
    /// Whether the x values are small whole numbers (thread counts): label only integers.
    fn integer_x(&self) -> bool {
        !self.x_log
            && self
                .lines
                .iter()
                .flat_map(|l| l.points.iter())
                .all(|p| p.0.fract() == 0.0 && p.0.abs() <= 1024.0)
    }
}

#[derive(Debug, Clone)]
pub struct Bar {
    pub label: String,
    pub color: RGBColor,
    pub value: f64,
}

#[derive(Debug, Clone)]
pub struct BarPanel {
    pub title: String,
    pub y_label: String,
    pub bars: Vec<Bar>,
    /// A log value axis (for values orders of magnitude apart, such as tail latencies).
    pub y_log: bool,
}

#[derive(Debug, Clone)]
pub enum Panel {
    Lines(LinePanel),
    Bars(BarPanel),
}

#[derive(Debug, Clone)]
pub struct Figure {
    pub title: String,
    pub panels: Vec<Panel>,
    /// Panels per row.
    pub cols: usize,
    /// One legend for the whole figure, under the title (every panel then goes without its
    /// own): the engines, whose colours are the same in every panel.
    pub legend: Vec<(String, RGBColor)>,
}

const LEGEND_H_PX: u32 = 30;

impl Figure {
    fn size_px(&self) -> (u32, u32) {
        let cols = self.cols.clamp(1, self.panels.len().max(1));
        let rows = self.panels.len().div_ceil(cols).max(1);
        let legend = if self.legend.is_empty() {
            0
        } else {
            LEGEND_H_PX
        };
        (
            (cols as u32 * PANEL_W_PX).max(FIGURE_W_PX_MIN),
            rows as u32 * PANEL_H_PX + TITLE_H_PX + legend,
        )
    }
}

/// Writes `dir/stem.png` and `dir/stem.svg`.
pub fn render(fig: &Figure, dir: &Path, stem: &str) -> Result<()> {
    register_font()?;
    let size = fig.size_px();
    let png = dir.join(format!("{stem}.png"));
    let svg = dir.join(format!("{stem}.svg"));
    {
        let root = BitMapBackend::new(&png, size).into_drawing_area();
        draw_figure(&root, fig).map_err(|e| Error::System(format!("{}: {e}", png.display())))?;
        root.present()
            .map_err(|e| Error::System(format!("{}: {e}", png.display())))?;
    }
    {
        let root = SVGBackend::new(&svg, size).into_drawing_area();
        draw_figure(&root, fig).map_err(|e| Error::System(format!("{}: {e}", svg.display())))?;
        root.present()
            .map_err(|e| Error::System(format!("{}: {e}", svg.display())))?;
    }
    Ok(())
}

type Draw = std::result::Result<(), String>;

fn err<E: std::fmt::Debug>(e: E) -> String {
    format!("{e:?}")
}

fn draw_figure<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, fig: &Figure) -> Draw {
    root.fill(&WHITE).map_err(err)?;
    let body = root
        .titled(&fig.title, ("sans-serif", 24).into_font())
        .map_err(err)?;
    let body = if fig.legend.is_empty() {
        body
    } else {
        let (strip, rest) = body.split_vertically(LEGEND_H_PX);
        draw_legend(&strip, &fig.legend)?;
        rest
    };
    let cols = fig.cols.clamp(1, fig.panels.len().max(1));
    let rows = fig.panels.len().div_ceil(cols).max(1);
    let areas = body.split_evenly((rows, cols));
    let own_legend = fig.legend.is_empty();
    for (panel, area) in fig.panels.iter().zip(areas.iter()) {
        match panel {
            Panel::Lines(p) => draw_line_panel(area, p, own_legend)?,
            Panel::Bars(p) => draw_bar_panel(area, p)?,
        }
    }
    Ok(())
}

/// A row of colour swatches and names, centred.
fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    items: &[(String, RGBColor)],
) -> Draw {
    let font: TextStyle = ("sans-serif", 14).into_font().color(&BLACK);
    let widths: Vec<i32> = items
        .iter()
        .map(|(name, _)| {
            let w = area
                .estimate_text_size(name, &font)
                .map_or(8 * name.len() as u32, |s| s.0);
            28 + w as i32 + 18
        })
        .collect();
    let total: i32 = widths.iter().sum();
    let (w, _) = area.dim_in_pixel();
    let mut x = ((w as i32 - total) / 2).max(4);
    let y = (LEGEND_H_PX / 2) as i32;
    for ((name, color), width) in items.iter().zip(widths) {
        area.draw(&Rectangle::new(
            [(x, y - 4), (x + 22, y + 4)],
            color.filled(),
        ))
        .map_err(err)?;
        area.draw(&Text::new(
            name.clone(),
            (x + 28, y),
            font.clone().pos(Pos::new(HPos::Left, VPos::Center)),
        ))
        .map_err(err)?;
        x += width;
    }
    Ok(())
}

/// Formats an axis value compactly: 1.2M, 350k, 12, 0.25.
pub fn fmt_si(v: f64) -> String {
    let a = v.abs();
    let (x, suffix) = if a >= 1e9 {
        (v / 1e9, "G")
    } else if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e4 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    let s = if x.abs() >= 100.0 || x.fract() == 0.0 {
        format!("{x:.0}")
    } else if x.abs() >= 10.0 {
        format!("{x:.1}")
    } else if x.abs() >= 0.01 || x == 0.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.1e}")
    };
    let s = if s.contains('.') && !s.contains('e') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    };
    format!("{s}{suffix}")
}

/// The data range of one axis, padded; a log axis keeps to positive values.
fn axis_range(values: impl Iterator<Item = f64>, log: bool, from_zero: bool) -> (f64, f64) {
    let vals: Vec<f64> = values
        .filter(|v| v.is_finite() && (!log || *v > 0.0))
        .collect();
    let (mut lo, mut hi) = vals
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &v| {
            (a.min(v), b.max(v))
        });
    if !lo.is_finite() {
        return if log { (1.0, 10.0) } else { (0.0, 1.0) };
    }
    if log {
        lo /= 1.5;
        hi *= 1.5;
        if hi / lo < 10.0 {
            let mid = (lo * hi).sqrt();
            lo = mid / 3.2;
            hi = mid * 3.2;
        }
        (lo, hi)
    } else {
        if from_zero {
            lo = lo.min(0.0);
        }
        if hi <= lo {
            hi = lo + 1.0;
        }
        (lo, hi + (hi - lo) * 0.08)
    }
}

fn draw_line_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    p: &LinePanel,
    legend: bool,
) -> Draw {
    let xs = p.lines.iter().flat_map(|l| l.points.iter().map(|q| q.0));
    let ys = p.lines.iter().flat_map(|l| l.points.iter().map(|q| q.1));
    let (x0, x1) = axis_range(xs, p.x_log, false);
    let (y0, y1) = axis_range(ys, p.y_log, true);
    match (p.x_log, p.y_log) {
        (false, false) => line_panel_in(area, p, legend, x0..x1, y0..y1),
        (true, false) => line_panel_in(area, p, legend, (x0..x1).log_scale(), y0..y1),
        (false, true) => line_panel_in(area, p, legend, x0..x1, (y0..y1).log_scale()),
        (true, true) => line_panel_in(area, p, legend, (x0..x1).log_scale(), (y0..y1).log_scale()),
    }
}

fn line_panel_in<DB, X, Y>(
    area: &DrawingArea<DB, Shift>,
    p: &LinePanel,
    legend: bool,
    x: X,
    y: Y,
) -> Draw
where
    DB: DrawingBackend,
    X: AsRangedCoord<Value = f64>,
    Y: AsRangedCoord<Value = f64>,
    X::CoordDescType: Ranged<ValueType = f64> + ValueFormatter<f64>,
    Y::CoordDescType: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let mut chart = ChartBuilder::on(area)
        .caption(&p.title, ("sans-serif", 17).into_font())
        .margin(10)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(x, y)
        .map_err(err)?;
    let integer_x = p.integer_x();
    let x_span = {
        let r = chart.x_range();
        (r.end - r.start).ceil() as usize + 1
    };
    chart
        .configure_mesh()
        .x_desc(&p.x_label)
        .y_desc(&p.y_label)
        .x_labels(if integer_x { x_span.clamp(2, 12) } else { 10 })
        .x_label_formatter(&|v| {
            if integer_x && v.fract() != 0.0 {
                String::new()
            } else {
                fmt_si(*v)
            }
        })
        .y_label_formatter(&|v| fmt_si(*v))
        .label_style(("sans-serif", 13).into_font())
        .axis_desc_style(("sans-serif", 14).into_font())
        .light_line_style(RGBColor(246, 246, 246))
        .bold_line_style(RGBColor(215, 215, 215))
        .draw()
        .map_err(err)?;
    let (ylo, yhi) = {
        let r = chart.y_range();
        (r.start, r.end)
    };
    for (x, label) in &p.marks {
        let grey = RGBColor(90, 90, 90);
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(*x, ylo), (*x, yhi)],
                grey.stroke_width(1),
            )))
            .map_err(err)?;
        chart
            .draw_series(std::iter::once(Text::new(
                label.clone(),
                (*x, yhi),
                ("sans-serif", 12).into_font().color(&grey),
            )))
            .map_err(err)?;
    }
    for l in &p.lines {
        let color = l.color;
        let pts: Vec<(f64, f64)> = l
            .points
            .iter()
            .copied()
            .filter(|(a, b)| {
                a.is_finite() && b.is_finite() && (!p.x_log || *a > 0.0) && (!p.y_log || *b > 0.0)
            })
            // Kept inside the plotting area: the backends do not clip lines to it.
            .map(|(a, b)| (a, b.clamp(ylo.min(yhi), yhi.max(ylo))))
            .collect();
        chart
            // Dense series (time series) are drawn 1 px wide: plotters joins wider polylines
            // with mitres, which shoot far past the data at the sharp turns such series have.
            .draw_series(LineSeries::new(
                pts.clone(),
                color.stroke_width(if l.markers { 2 } else { 1 }),
            ))
            .map_err(err)?
            .label(&l.name)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(3))
            });
        if l.markers {
            chart
                .draw_series(pts.iter().map(|&q| Circle::new(q, 3, color.filled())))
                .map_err(err)?;
        }
    }
    if legend && !p.lines.is_empty() {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(RGBColor(160, 160, 160))
            .label_font(("sans-serif", 12).into_font())
            .draw()
            .map_err(err)?;
    }
    Ok(())
}

fn draw_bar_panel<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, p: &BarPanel) -> Draw {
    if p.y_log {
        let (y0, y1) = axis_range(p.bars.iter().map(|b| b.value), true, false);
        bar_panel_in(area, p, (y0..y1).log_scale(), y0)
    } else {
        let (_, y1) = axis_range(p.bars.iter().map(|b| b.value), false, true);
        bar_panel_in(area, p, 0f64..y1, 0.0)
    }
}

/// Bars from `base` (the axis' bottom) up to each value.
fn bar_panel_in<DB, Y>(area: &DrawingArea<DB, Shift>, p: &BarPanel, y: Y, base: f64) -> Draw
where
    DB: DrawingBackend,
    Y: AsRangedCoord<Value = f64>,
    Y::CoordDescType: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let n = p.bars.len().max(1);
    let labels: Vec<String> = p.bars.iter().map(|b| b.label.clone()).collect();
    let mut chart = ChartBuilder::on(area)
        .caption(&p.title, ("sans-serif", 17).into_font())
        .margin(10)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d((0..n - 1).into_segmented(), y)
        .map_err(err)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .y_desc(&p.y_label)
        .x_labels(n)
        .x_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) => labels.get(*i).cloned().unwrap_or_default(),
            _ => String::new(),
        })
        .y_label_formatter(&|v| fmt_si(*v))
        .label_style(("sans-serif", if n > 6 { 10 } else { 12 }).into_font())
        .axis_desc_style(("sans-serif", 14).into_font())
        .light_line_style(RGBColor(246, 246, 246))
        .bold_line_style(RGBColor(215, 215, 215))
        .draw()
        .map_err(err)?;
    for (i, b) in p.bars.iter().enumerate() {
        let color = b.color;
        let v = if b.value.is_finite() && b.value > base {
            b.value
        } else {
            base
        };
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [
                    (SegmentValue::Exact(i), base),
                    (SegmentValue::Exact(i + 1), v),
                ],
                color.filled(),
            )))
            .map_err(err)?;
        chart
            .draw_series(std::iter::once(Text::new(
                fmt_si(b.value),
                (SegmentValue::CenterOf(i), v),
                ("sans-serif", 11)
                    .into_font()
                    .color(&BLACK)
                    .pos(Pos::new(HPos::Center, VPos::Bottom)),
            )))
            .map_err(err)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn si_format_is_short() {
        assert_eq!(fmt_si(1_250_000.0), "1.25M");
        assert_eq!(fmt_si(35_000.0), "35k");
        assert_eq!(fmt_si(12.0), "12");
        assert_eq!(fmt_si(0.25), "0.25");
        assert_eq!(fmt_si(0.0), "0");
    }

    #[test]
    fn every_engine_has_its_own_colour() {
        let names = crate::engines::names();
        for (i, a) in names.iter().enumerate() {
            for b in &names[i + 1..] {
                assert_ne!(engine_color(a), engine_color(b), "{a} and {b}");
            }
        }
    }
}
