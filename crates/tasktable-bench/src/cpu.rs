//! CPU time spent by this process (the worker, and SQLite, which runs inside it) and by
//! the database server's processes, read from `/proc`. On a shared machine the rate of a
//! run drifts with its neighbours' load; the CPU a task costs drifts far less, so A/B
//! runs compare it beside the rate. Linux only: elsewhere the figures are left out.

use crate::Backend;
use std::collections::HashMap;

/// `/proc` reports times in ticks of USER_HZ, which Linux fixes at 100 for user space.
const TICKS_PER_SECOND: f64 = 100.0;

/// CPU seconds used so far: by this process, and by each process of the server's
/// program on this machine, by pid (`None` when the server is not local).
#[derive(Debug, Clone)]
pub struct CpuClock {
    pub own: f64,
    pub server: Option<HashMap<u32, f64>>,
}

impl CpuClock {
    pub fn read(backend: Backend, url: &str) -> Option<Self> {
        let own = ticks(&std::fs::read_to_string("/proc/self/stat").ok()?)? / TICKS_PER_SECOND;
        let programs: &[&str] = match backend {
            Backend::Postgres => &["postgres"],
            Backend::Mysql => &["mariadbd", "mysqld"],
            Backend::Sqlite => &[],
        };
        // Every local process of the program: a second local server of it is counted too.
        let server = (!programs.is_empty() && is_local(url))
            .then(|| server_seconds(programs))
            .filter(|found| !found.is_empty());
        Some(CpuClock { own, server })
    }

    /// (own, server) microseconds of CPU per task since `before`. The server's is what
    /// its processes alive now used since then (all of it for those started since);
    /// a process that ended in between takes its share along, so the measured window
    /// should be one in which the server's connections stay open.
    pub fn per_task(&self, before: &CpuClock, tasks: u64) -> (f64, Option<f64>) {
        let us = |secs: f64| secs * 1e6 / tasks.max(1) as f64;
        let server = match (&self.server, &before.server) {
            (Some(a), Some(b)) => Some(us(a
                .iter()
                .map(|(pid, t)| t - b.get(pid).copied().unwrap_or(0.0))
                .sum())),
            _ => None,
        };
        (us(self.own - before.own), server)
    }
}

fn is_local(url: &str) -> bool {
    [
        "@127.0.0.1",
        "@localhost",
        "@[::1]",
        "://127.0.0.1",
        "://localhost",
    ]
    .iter()
    .any(|h| url.contains(h))
}

/// CPU seconds of every process whose name is one of `programs`, by pid.
fn server_seconds(programs: &[&str]) -> HashMap<u32, f64> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return HashMap::new();
    };
    dir.filter_map(|e| {
        let pid: u32 = e.ok()?.file_name().into_string().ok()?.parse().ok()?;
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let comm = stat.get(stat.find('(')? + 1..stat.rfind(')')?)?;
        programs
            .contains(&comm)
            .then(|| Some((pid, ticks(&stat)? / TICKS_PER_SECOND)))
            .flatten()
    })
    .collect()
}

/// utime + stime (fields 14 and 15) of one `/proc/<pid>/stat` line.
fn ticks(stat: &str) -> Option<f64> {
    let rest = stat.get(stat.rfind(')')? + 2..)?;
    let fields: Vec<&str> = rest.split(' ').collect();
    // `rest` starts at field 3 (the state), so field n is fields[n - 3].
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_fields_fourteen_and_fifteen_even_with_spaces_in_the_name() {
        let stat = "42 (post gres) S 1 42 42 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 1 0 5";
        assert_eq!(ticks(stat), Some(325.0));
    }

    #[test]
    fn this_process_has_a_clock() {
        let c = CpuClock::read(Backend::Sqlite, "").expect("linux /proc");
        assert!(c.own >= 0.0);
        assert!(c.server.is_none());
    }
}
