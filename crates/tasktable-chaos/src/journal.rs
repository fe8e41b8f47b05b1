//! Each worker process's own account of what it did: one JSON line per claim and per
//! write it made about a task, with the fencing token it used and the answer it got.
//! The checks hold these accounts against the task table, so they do not have to trust
//! the table they check.
//!
//! Lines are appended with one `write` each to a file opened for appending, so a process
//! killed with SIGKILL leaves every line it finished writing; a torn last line is
//! skipped and counted.

use crate::behaviour::Mark;
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::sync::Mutex;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    /// The worker was handed the task under `token` (with the checkpoint in `mark`).
    Claim,
    Renew,
    /// A checkpoint write of `mark`.
    Checkpoint,
    /// The task's side effect.
    Effect,
    /// The end of the attempt (`outcome`: the history outcome it asks for).
    Finish,
    /// A write made on purpose with a token the server has just called lost.
    Probe,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub worker: String,
    pub op: Op,
    pub task: i64,
    /// `None` when the worker cannot tell which of its attempts this was.
    pub token: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u32>,
    /// Wall-clock milliseconds since the epoch when the call was made.
    pub at_ms: i64,
    /// `Some(true)`: applied. `Some(false)`: refused because the lease was gone.
    /// `None`: unknown (no answer, or an answer that may follow an unanswered try that
    /// was applied).
    #[serde(default)]
    pub accepted: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mark: Option<Mark>,
}

impl Entry {
    pub fn new(worker: &str, op: Op, task: i64, token: Option<i64>) -> Self {
        Entry {
            worker: worker.to_owned(),
            op,
            task,
            token,
            attempt: None,
            at_ms: now_ms(),
            accepted: None,
            outcome: None,
            mark: None,
        }
    }
}

pub fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// Appends entries to one worker's file.
#[derive(Debug)]
pub struct Journal {
    file: Mutex<File>,
}

impl Journal {
    pub fn open(path: &Path) -> std::io::Result<Journal> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(Journal {
            file: Mutex::new(file),
        })
    }

    /// Writes the entry as one line. A journal that cannot be written makes the run's
    /// evidence incomplete, so it ends the process loudly.
    pub fn record(&self, entry: &Entry) {
        let mut line = serde_json::to_vec(entry).expect("journal entry");
        line.push(b'\n');
        let mut file = self.file.lock().expect("journal");
        if let Err(e) = file.write_all(&line) {
            eprintln!("cannot write the journal: {e}");
            std::process::exit(3);
        }
    }
}

/// Every entry of every journal in `dir`, and the number of lines that did not parse
/// (a process killed in the middle of a line).
pub fn read_dir(dir: &Path) -> std::io::Result<(Vec<Entry>, usize)> {
    let mut entries = Vec::new();
    let mut torn = 0;
    for file in std::fs::read_dir(dir)? {
        let text = std::fs::read_to_string(file?.path())?;
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            match serde_json::from_str(line) {
                Ok(entry) => entries.push(entry),
                Err(_) => torn += 1,
            }
        }
    }
    Ok((entries, torn))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_written_by_two_journals_are_read_back_and_a_torn_line_is_counted() {
        let dir = tempfile::tempdir().unwrap();
        let a = Journal::open(&dir.path().join("a.jsonl")).unwrap();
        let b = Journal::open(&dir.path().join("b.jsonl")).unwrap();
        let mut claim = Entry::new("w-a", Op::Claim, 7, Some(3));
        claim.mark = Some(Mark {
            token: 2,
            step: 1,
            snoozed: false,
        });
        a.record(&claim);
        b.record(&Entry::new("w-b", Op::Renew, 8, None));
        std::fs::write(dir.path().join("c.jsonl"), "{\"worker\": \"w-c\", \"op\"").unwrap();
        let (mut entries, torn) = read_dir(dir.path()).unwrap();
        entries.sort_by_key(|e| e.task);
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[0], claim);
        assert_eq!(
            (entries[1].worker.as_str(), entries[1].op),
            ("w-b", Op::Renew)
        );
        assert_eq!(torn, 1);
    }
}
