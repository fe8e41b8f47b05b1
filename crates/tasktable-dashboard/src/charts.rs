//! Charts drawn on the server as inline SVG: no script, and readable in a screenshot.
//! Each bar carries a `<title>`, which browsers show on hover.

use chrono::{DateTime, Utc};
use maud::{html, Markup};

const W: f64 = 560.0;
const H: f64 = 150.0;
const LEFT: f64 = 44.0;
const BOTTOM: f64 = 20.0;
const TOP: f64 = 8.0;

/// One stacked layer of a bar chart.
#[derive(Debug)]
pub struct Layer<'a> {
    pub name: &'a str,
    pub colour: &'a str,
    pub values: Vec<u64>,
}

/// The smallest of 1, 2, 5 x 10^n at or above `n`, so the axis reads in round numbers.
fn nice_ceiling(n: u64) -> u64 {
    let mut scale = 1u64;
    loop {
        for step in [1, 2, 5] {
            if step * scale >= n.max(1) {
                return step * scale;
            }
        }
        scale = scale.saturating_mul(10);
    }
}

fn label(at: DateTime<Utc>, step_secs: u64, points: usize) -> String {
    let span = step_secs * points as u64;
    if span > 2 * 86_400 {
        at.format("%m-%d %H:%M").to_string()
    } else {
        at.format("%H:%M").to_string()
    }
}

/// The rectangles of bar `i`, bottom layer first: (top, height, colour).
fn segments<'a>(
    layers: &'a [Layer<'a>],
    i: usize,
    y: &impl Fn(f64) -> f64,
) -> Vec<(f64, f64, &'a str)> {
    let mut base = 0u64;
    let mut out = Vec::new();
    for l in layers {
        let v = l.values.get(i).copied().unwrap_or(0);
        if v > 0 {
            let (bottom, top) = (y(base as f64), y((base + v) as f64));
            out.push((top, bottom - top, l.colour));
        }
        base += v;
    }
    out
}

/// A stacked bar chart over time; `at` holds each bar's start.
pub fn stacked_bars(
    title: &str,
    at: &[DateTime<Utc>],
    step_secs: u64,
    layers: &[Layer<'_>],
) -> Markup {
    let n = at.len().max(1);
    let totals: Vec<u64> = (0..n)
        .map(|i| {
            layers
                .iter()
                .map(|l| l.values.get(i).copied().unwrap_or(0))
                .sum()
        })
        .collect();
    let max = nice_ceiling(totals.iter().copied().max().unwrap_or(0));
    let plot_w = W - LEFT - 4.0;
    let plot_h = H - TOP - BOTTOM;
    let slot = plot_w / n as f64;
    let bar = (slot * 0.8).max(1.0);
    let y = |v: f64| TOP + plot_h - v / max as f64 * plot_h;
    let ticks = [0, max / 2, max];
    let marks: Vec<usize> = if n > 2 {
        vec![0, n / 2, n - 1]
    } else {
        (0..n).collect()
    };
    let total_all: u64 = totals.iter().sum();
    html! {
        figure.chart {
            figcaption {
                strong { (title) }
                @for l in layers {
                    span.key {
                        svg.swatch viewBox="0 0 10 10" aria-hidden="true" { rect width="10" height="10" rx="2" fill=(l.colour) {} }
                        (l.name) " " (l.values.iter().sum::<u64>())
                    }
                }
            }
            svg viewBox={ "0 0 " (W) " " (H) } role="img" aria-label=(title) {
                @for t in ticks {
                    line x1=(LEFT) x2=(W - 4.0) y1=(y(t as f64)) y2=(y(t as f64)) stroke="#e3e6ec" {}
                    text x=(LEFT - 6.0) y=(y(t as f64) + 4.0) text-anchor="end" font-size="11" fill="#6b7385" { (t) }
                }
                @for i in 0..at.len() {
                    @let x = LEFT + slot * i as f64 + (slot - bar) / 2.0;
                    g {
                        title {
                            (label(at[i], step_secs, n))
                            @for l in layers { " · " (l.name) " " (l.values.get(i).copied().unwrap_or(0)) }
                        }
                        @for (top, height, colour) in segments(layers, i, &y) {
                            rect x=(x) width=(bar) y=(top) height=(height) fill=(colour) {}
                        }
                        // An invisible full-height target, so hovering an empty slot
                        // still shows its numbers.
                        rect x=(LEFT + slot * i as f64) width=(slot) y=(TOP) height=(plot_h) fill="transparent" {}
                    }
                }
                @for i in &marks {
                    // The first and last labels are anchored inward so they stay whole.
                    @let (x, anchor) = match *i {
                        0 => (LEFT, "start"),
                        i if i + 1 == n => (W - 4.0, "end"),
                        i => (LEFT + slot * (i as f64 + 0.5), "middle"),
                    };
                    text x=(x) y=(H - 5.0) text-anchor=(anchor) font-size="11" fill="#6b7385" { (label(at[*i], step_secs, n)) }
                }
                @if total_all == 0 {
                    text x=(LEFT + plot_w / 2.0) y=(TOP + plot_h / 2.0) text-anchor="middle" font-size="12" fill="#6b7385" { "nothing in this window" }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn axis_tops_are_round_numbers() {
        let got: Vec<u64> = [0, 1, 3, 7, 10, 11, 260, 999].map(nice_ceiling).to_vec();
        assert_eq!(got, vec![1, 1, 5, 10, 10, 20, 500, 1000]);
    }

    #[test]
    fn bars_stack_and_carry_their_numbers() {
        let t0 = Utc.with_ymd_and_hms(2030, 1, 1, 12, 0, 0).unwrap();
        let at: Vec<_> = (0..3).map(|i| t0 + chrono::Duration::minutes(i)).collect();
        let svg = stacked_bars(
            "Done",
            &at,
            60,
            &[
                Layer {
                    name: "ok",
                    colour: "#0a0",
                    values: vec![3, 0, 1],
                },
                Layer {
                    name: "<bad>",
                    colour: "#a00",
                    values: vec![1, 0, 0],
                },
            ],
        )
        .into_string();
        assert_eq!(
            svg.matches("<rect").count(),
            3 + 3 + 2,
            "three bars, three targets and two legend swatches"
        );
        assert!(svg.contains("12:00 · ok 3 · &lt;bad&gt; 1"), "{svg}");
        assert!(svg.contains("ok 4"), "legend totals");
        assert!(!svg.contains("nothing in this window"));
    }
}
