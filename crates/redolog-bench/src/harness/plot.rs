//! `--plot FILE.svg`: commits/s and p99 latency against threads (log scales),
//! one line per system, as SVG and, built with the `png` feature (the
//! bitmap backend and its image encoder: a third of this binary's
//! dependencies), as a PNG beside it.
//!
//! The text needs a TrueType font: the first of `FONTS` found (Debian's
//! fonts-dejavu-core, installed by `.ci/run` where missing).

use std::path::{Path, PathBuf};

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::{register_font, FontStyle};

use super::BoxError;

/// One system's medians: a line of the plot.
pub struct Line {
    pub system: &'static str,
    pub points: Vec<LinePoint>,
}

/// One point of a line: the median throughput and p99 at one count.
pub struct LinePoint {
    pub threads: usize,
    pub commits_per_sec: f64,
    pub p99_us: u64,
}

/// Where a sans-serif TrueType font usually is on Linux.
const FONTS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/liberation-sans/LiberationSans-Regular.ttf",
];

const SIZE: (u32, u32) = (1200, 480);

/// Draws `lines` under `title` to `svg` and, with the `png` feature, to
/// `svg` with the extension `png`; returns the files written.
pub fn draw_lines(title: &str, lines: &[Line], svg: &Path) -> Result<Vec<PathBuf>, BoxError> {
    load_font()?;
    draw_on(SVGBackend::new(svg, SIZE).into_drawing_area(), title, lines)
        .map_err(|error| format!("drawing {}: {error}", svg.display()))?;
    #[cfg(feature = "png")]
    {
        let png = svg.with_extension("png");
        draw_on(BitMapBackend::new(&png, SIZE).into_drawing_area(), title, lines)
            .map_err(|error| format!("drawing {}: {error}", png.display()))?;
        Ok(vec![svg.to_path_buf(), png])
    }
    #[cfg(not(feature = "png"))]
    Ok(vec![svg.to_path_buf()])
}

/// Registers the first font of `FONTS` found as "sans-serif", once.
fn load_font() -> Result<(), BoxError> {
    static LOADED: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    let loaded = LOADED.get_or_init(|| {
        let (path, bytes) = FONTS.iter().find_map(|path| Some((path, std::fs::read(path).ok()?))).ok_or_else(|| {
            format!("--plot needs a TrueType font, none of {FONTS:?} exists: install fonts-dejavu-core")
        })?;
        // plotters keeps fonts for the life of the process.
        register_font("sans-serif", FontStyle::Normal, Box::leak(bytes.into_boxed_slice()))
            .map_err(|_| format!("{path}: not a font plotters can read"))
    });
    loaded.clone().map_err(Into::into)
}

fn draw_on<DB: DrawingBackend>(root: DrawingArea<DB, Shift>, title: &str, lines: &[Line]) -> Result<(), String> {
    let text = |error: &dyn std::fmt::Display| error.to_string();
    root.fill(&WHITE).map_err(|e| text(&e))?;
    let root = root.titled(title, ("sans-serif", 20)).map_err(|e| text(&e))?;
    let (left, right) = root.split_horizontally(SIZE.0 / 2);
    let threads = lines.iter().flat_map(|line| line.points.iter().map(|p| p.threads as f64));
    let (low, high) = threads.fold((f64::INFINITY, 0.0f64), |(low, high), t| (low.min(t), high.max(t)));
    let x = (low / 1.5)..(high * 1.5);
    panel(&left, lines, x.clone(), "commits/s", |p| p.commits_per_sec).map_err(|e| text(&e))?;
    panel(&right, lines, x, "p99 latency (µs)", |p| p.p99_us as f64).map_err(|e| text(&e))?;
    root.present().map_err(|e| text(&e))
}

/// Matplotlib's "tab10": distinguishable, and none too pale on white.
const COLORS: [(u8, u8, u8); 10] = [
    (31, 119, 180),
    (214, 39, 40),
    (44, 160, 44),
    (255, 127, 14),
    (148, 103, 189),
    (140, 86, 75),
    (227, 119, 194),
    (127, 127, 127),
    (23, 190, 207),
    (188, 189, 34),
];

/// 1500 as "1.5k", 2000000 as "2M".
fn si(value: f64) -> String {
    let (scaled, unit) = match value {
        v if v >= 1e6 => (v / 1e6, "M"),
        v if v >= 1e3 => (v / 1e3, "k"),
        v => (v, ""),
    };
    let text = format!("{scaled:.1}");
    format!("{}{unit}", text.trim_end_matches(".0"))
}

/// One log-log panel: `value` of each point against threads.
fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    lines: &[Line],
    x: std::ops::Range<f64>,
    what: &str,
    value: fn(&LinePoint) -> f64,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let values = lines.iter().flat_map(|line| line.points.iter().map(value)).filter(|v| *v > 0.0);
    let (low, high) = values.fold((f64::INFINITY, 0.0f64), |(low, high), v| (low.min(v), high.max(v)));
    let (low, high) = if low.is_finite() { (low / 1.5, high * 1.5) } else { (1.0, 10.0) };
    let mut chart = ChartBuilder::on(area)
        .margin(15)
        .caption(what, ("sans-serif", 17))
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(x.log_scale(), (low..high).log_scale())?;
    chart
        .configure_mesh()
        .x_desc("threads")
        .y_desc(what)
        .x_label_formatter(&|threads| format!("{threads:.0}"))
        .y_label_formatter(&|value| si(*value))
        .max_light_lines(1)
        .label_style(("sans-serif", 13))
        .draw()?;
    for (index, line) in lines.iter().enumerate() {
        let (r, g, b) = COLORS[index % COLORS.len()];
        let color = RGBColor(r, g, b);
        let points = line.points.iter().map(|p| (p.threads as f64, value(p))).filter(|p| p.1 > 0.0);
        chart
            .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))?
            .label(line.system)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
        chart.draw_series(points.map(|p| Circle::new(p, 3, color.filled())))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .label_font(("sans-serif", 13))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
}
