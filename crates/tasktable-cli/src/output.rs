//! Writing to stdout: plain-text tables and values for people, JSON documents for scripts.
//! A closed pipe (`tasktable ls | head`) ends the output quietly instead of panicking.

use crate::error::CliError;
use chrono::{DateTime, Utc};
use serde_json::Value;
use std::io::Write;

/// Writes `text` to stdout as it is.
pub fn emit(text: &str) -> Result<(), CliError> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(CliError::failure(format!("cannot write to stdout: {e}")))
        }
        _ => Ok(()),
    }
}

/// Writes `text` and a newline.
pub fn line(text: impl AsRef<str>) -> Result<(), CliError> {
    emit(&format!("{}\n", text.as_ref()))
}

/// Writes one JSON document, indented, for `--json`.
pub fn json(value: &Value) -> Result<(), CliError> {
    line(serde_json::to_string_pretty(value).expect("a JSON value serializes"))
}

/// Columns padded to their widest cell; the last column is not padded.
#[derive(Debug)]
pub struct Table {
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new<S: Into<String>>(headers: impl IntoIterator<Item = S>) -> Self {
        Table {
            rows: vec![headers.into_iter().map(Into::into).collect()],
        }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    pub fn is_empty(&self) -> bool {
        self.rows.len() <= 1
    }

    pub fn render(&self) -> String {
        let columns = self.rows.iter().map(Vec::len).max().unwrap_or(0);
        let widths: Vec<usize> = (0..columns)
            .map(|c| {
                self.rows
                    .iter()
                    .filter_map(|r| r.get(c))
                    .map(|cell| cell.chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let mut text = String::new();
        for row in &self.rows {
            let mut line = String::new();
            for (c, cell) in row.iter().enumerate() {
                if c + 1 == row.len() {
                    line.push_str(cell);
                } else {
                    line.push_str(&format!("{cell:<w$}  ", w = widths[c]));
                }
            }
            text.push_str(line.trim_end());
            text.push('\n');
        }
        text
    }
}

/// A time in UTC to the second, the way every table shows times.
pub fn time(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M:%SZ").to_string()
}

pub fn opt_time(t: Option<DateTime<Utc>>) -> String {
    t.map_or_else(|| "-".into(), time)
}

/// At most `max` characters on one line, with `…` when cut.
pub fn one_line(text: &str, max: usize) -> String {
    let flat: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if flat.chars().count() <= max {
        return flat;
    }
    let mut cut: String = flat.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// `1 task`, `3 tasks`.
pub fn tasks(n: u64) -> String {
    if n == 1 {
        "1 task".into()
    } else {
        format!("{n} tasks")
    }
}

/// A duration in milliseconds, the shortest way people write it (`90s`, `1500ms`, `2h`).
pub fn millis(ms: u64) -> String {
    const UNITS: [(u64, &str); 4] = [
        (86_400_000, "d"),
        (3_600_000, "h"),
        (60_000, "m"),
        (1000, "s"),
    ];
    UNITS
        .iter()
        .find(|(size, _)| ms >= *size && ms % size == 0)
        .map_or_else(
            || format!("{ms}ms"),
            |(size, unit)| format!("{}{unit}", ms / size),
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_pads_every_column_but_the_last() {
        let mut t = Table::new(["ID", "STATE", "ERROR"]);
        t.row(vec!["7".into(), "failed".into(), "boom".into()]);
        t.row(vec!["1234".into(), "ok".into(), String::new()]);
        assert_eq!(
            t.render(),
            "ID    STATE   ERROR\n7     failed  boom\n1234  ok\n"
        );
    }

    #[test]
    fn one_line_flattens_and_cuts() {
        assert_eq!(one_line("a\nb", 10), "a b");
        assert_eq!(one_line("abcdefgh", 5), "abcd…");
    }

    #[test]
    fn millis_uses_the_largest_whole_unit() {
        assert_eq!(millis(90_000), "90s");
        assert_eq!(millis(1500), "1500ms");
        assert_eq!(millis(7_200_000), "2h");
        assert_eq!(millis(0), "0ms");
    }
}
