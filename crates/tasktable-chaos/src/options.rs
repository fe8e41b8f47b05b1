//! What a run is asked to do: the command line of `tasktable-chaos`, and what follows
//! from it (which faults to inject, which `tasktable` binary serves the API).

use crate::database::Backend;
use crate::plan::FaultKind;
use clap::{Args, ValueEnum};
use std::path::PathBuf;
use std::time::Duration;

/// A mechanism to switch off on purpose, to show that the checks see what it prevents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Break {
    /// In-process workers write their effects without the fencing test, and carry on past
    /// a refused checkpoint to the effect; only freezes of in-process workers are
    /// injected. `no_stale_write_accepted` must fail.
    UnfencedEffects,
    /// In-process workers run no rescuer (the API's runs every 5 s); only kills are
    /// injected. `nothing_stuck` must fail.
    NoRescue,
}

#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    #[arg(long, value_enum, default_value = "sqlite")]
    pub backend: Backend,
    /// How long faults are injected (tasks are submitted over the first 80 % of it);
    /// the drain comes after.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Seed of the task mix and the fault schedule; random (and printed) by default.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Tasks submitted (1 to 1,000,000).
    #[arg(long, default_value_t = 3000)]
    pub tasks: usize,
    /// In-process worker processes (at least 1: one always runs a rescuer).
    #[arg(long, default_value_t = 3)]
    pub workers: usize,
    /// Pull-protocol worker processes.
    #[arg(long, default_value_t = 2)]
    pub pull_workers: usize,
    /// Tasks an in-process worker runs at once (pull workers run half as many).
    #[arg(long, default_value_t = 8)]
    pub concurrency: usize,
    /// The workers' lease (1 s to 1 h, as the pull protocol allows).
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    pub lease: Duration,
    /// How often each in-process worker's rescuer scans.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub rescue_interval: Duration,
    /// Mean time between faults.
    #[arg(long, default_value = "3s", value_parser = parse_duration)]
    pub fault_every: Duration,
    /// How long the drain after the fault window may take before the run gives up.
    #[arg(long, default_value = "120s", value_parser = parse_duration)]
    pub drain_timeout: Duration,
    /// The `tasktable` binary that serves the API; by default the one beside this one.
    #[arg(long)]
    pub tasktable_bin: Option<PathBuf>,
    /// Keep the run's directory (database, journals, logs) and print where it is.
    #[arg(long)]
    pub keep: bool,
    /// Inject only faults of this kind (repeatable); by default every kind the backend
    /// allows.
    #[arg(long = "fault", value_enum)]
    pub faults: Vec<FaultKind>,
    /// Clients that send requests and hang up 0-4 ms later, before any answer (claims of
    /// the run's tasks and submits, in turn), through the fault window.
    #[arg(long, default_value_t = 2)]
    pub hangups: usize,
    /// Longest pause of a hang-up client between two requests.
    #[arg(long, default_value = "20ms", value_parser = parse_duration)]
    pub hangup_pause: Duration,
    /// Switch a mechanism off to see a check fire (repeatable).
    #[arg(long = "break", value_enum)]
    pub breaks: Vec<Break>,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `500ms`, `30s`, `2m`, `1h`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let n: u64 = number.parse().map_err(|_| {
        format!("{text:?}: a duration is a whole number and a unit, like 500ms, 30s, 2m")
    })?;
    match unit {
        "ms" => Ok(Duration::from_millis(n)),
        "s" => Ok(Duration::from_secs(n)),
        "m" => Ok(Duration::from_secs(n * 60)),
        "h" => Ok(Duration::from_secs(n * 3600)),
        _ => Err(format!("{text:?}: the unit must be ms, s, m or h")),
    }
}

impl RunArgs {
    /// Refuses a run that could not test anything, with what to change.
    pub fn validate(&self) -> Result<(), String> {
        let bad = |what: &str| Err(what.to_owned());
        if !(1..=1_000_000).contains(&self.tasks) {
            return bad("--tasks must be between 1 and 1000000");
        }
        if self.workers == 0 {
            return bad("--workers must be at least 1: an in-process worker always runs a rescuer");
        }
        if self.concurrency == 0 {
            return bad("--concurrency must be at least 1");
        }
        if !(Duration::from_secs(1)..=Duration::from_secs(3600)).contains(&self.lease) {
            return bad("--lease must be between 1s and 1h (the pull protocol's bounds)");
        }
        if self.backend == Backend::Sqlite && self.faults.contains(&FaultKind::RestartDatabase) {
            return bad("--fault restart_database needs a database server: SQLite has none");
        }
        if !self.faults.is_empty() && !self.breaks.is_empty() {
            return bad("--break picks its own faults; leave out --fault");
        }
        if self.duration.is_zero() || self.fault_every.is_zero() || self.rescue_interval.is_zero() {
            return bad("--duration, --fault-every and --rescue-interval must be longer than 0");
        }
        Ok(())
    }

    pub fn fault_kinds(&self) -> Vec<FaultKind> {
        if self.breaks.contains(&Break::UnfencedEffects) {
            return vec![FaultKind::FreezeWorker];
        }
        if self.breaks.contains(&Break::NoRescue) {
            return vec![FaultKind::KillWorker];
        }
        if !self.faults.is_empty() {
            return self.faults.clone();
        }
        let mut kinds = vec![
            FaultKind::KillWorker,
            FaultKind::KillPullWorker,
            FaultKind::FreezeWorker,
            FaultKind::StopWorker,
            FaultKind::KillApi,
        ];
        if self.backend != Backend::Sqlite {
            kinds.push(FaultKind::RestartDatabase);
        }
        kinds
    }

    pub fn tasktable_bin(&self) -> Result<PathBuf, String> {
        tasktable_bin(self.tasktable_bin.as_ref())
    }
}

/// The `tasktable` binary: `given`, or the one beside this one.
pub fn tasktable_bin(given: Option<&PathBuf>) -> Result<PathBuf, String> {
    if let Some(bin) = given {
        return Ok(bin.clone());
    }
    let me = std::env::current_exe().map_err(|e| e.to_string())?;
    let bin = me.with_file_name("tasktable");
    if bin.is_file() {
        Ok(bin)
    } else {
        Err(format!(
            "{} not found: build it (cargo build -p tasktable-cli) or pass --tasktable-bin",
            bin.display()
        ))
    }
}
