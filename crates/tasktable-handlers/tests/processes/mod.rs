//! Watching the processes a command started, through `/proc`, for tests that check what
//! was killed. The kernel sends no signal when another process's process dies, so these
//! poll, within a deadline.

use crate::harness::PATIENCE;
use std::path::Path;
use std::time::Duration;

/// The pids a command wrote to `path` on one line, once the line is complete.
pub async fn read_pids(path: &Path) -> Vec<i32> {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        // The line is complete once its newline is there.
        if let Some(line) = std::fs::read_to_string(path)
            .ok()
            .filter(|s| s.ends_with('\n'))
        {
            return line
                .split_whitespace()
                .map(|p| p.parse().unwrap())
                .collect();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the command never wrote its pids"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits until no live process is left in `group`, failing after 20 s.
pub async fn process_group_ends(group: i32) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let left = members(group);
        if left.is_empty() {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "processes {left:?} of group {group} are still running"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Live processes in `group`. A zombie is dead: it only waits for its parent to reap it.
pub fn members(group: i32) -> Vec<i32> {
    let pids = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok());
    pids.filter(|&pid| stat(pid).is_some_and(|(state, pgrp)| state != 'Z' && pgrp == group))
        .collect()
}

pub fn alive(pid: i32) -> bool {
    stat(pid).is_some_and(|(state, _)| state != 'Z')
}

/// A process's state letter and process group, from `/proc/<pid>/stat`.
fn stat(pid: i32) -> Option<(char, i32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // "pid (comm) state ppid pgrp ...": comm may hold spaces, so start after its ')'.
    let mut fields = stat[stat.rfind(')')? + 1..].split_whitespace();
    let state = fields.next()?.chars().next()?;
    let pgrp = fields.nth(1)?.parse().ok()?;
    Some((state, pgrp))
}
