//! The summary of a run: what ran, which faults were injected, how often each mechanism
//! under test was exercised, and each check's verdict, as text for people or as JSON.

use crate::behaviour::Behaviour;
use crate::check::{Evidence, Verdict};
use crate::database::Backend;
use crate::faults::{Injected, Injector};
use crate::journal::Op;
use crate::options::{Break, RunArgs};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write;

#[derive(Debug, Serialize)]
pub struct Report {
    pub backend: Backend,
    pub seed: u64,
    pub breaks: Vec<Break>,
    pub workers: usize,
    pub pull_workers: usize,
    pub fault_window_s: f64,
    pub drain_s: f64,
    pub total_s: f64,
    pub tasks: Tasks,
    /// History rows by outcome.
    pub attempts: BTreeMap<&'static str, usize>,
    pub faults: BTreeMap<&'static str, usize>,
    pub fault_log: Vec<Injected>,
    pub exercised: Exercised,
    /// Requests sent by clients that hang up mid-request, by what they asked.
    pub hung_up: BTreeMap<&'static str, u64>,
    /// Lease expiries no injected fault explains (see `check::unexplained_expiries`).
    pub unexplained_lease_expiries: Vec<String>,
    pub checks: Vec<Verdict>,
    pub passed: bool,
}

#[derive(Debug, Serialize)]
pub struct Tasks {
    pub submitted: usize,
    pub by_behaviour: BTreeMap<&'static str, usize>,
    pub final_states: BTreeMap<&'static str, usize>,
}

/// How often the run made each mechanism work, so a pass is not a pass of an idle run.
#[derive(Debug, Default, Serialize)]
pub struct Exercised {
    pub claims_in_process: usize,
    pub claims_pull: usize,
    pub completions_accepted_in_process: usize,
    pub completions_accepted_pull: usize,
    /// Effect writes a thawed in-process worker made under a lost lease, refused.
    pub stale_effects_refused: usize,
    pub stale_checkpoints_refused: usize,
    /// Pull workers' deliberate writes under a token the server had just called lost.
    pub probes_sent: usize,
    pub probes_refused: usize,
    pub resumed_from_checkpoint: usize,
    /// Ends the in-process journal could not tie to a token (two attempts of one task in
    /// flight in one process); the checks skip them.
    pub ends_without_token: usize,
    pub torn_journal_lines: usize,
    pub samples: usize,
    /// Samples at which the database took no write (restarting, or an SQLite write lock
    /// held by a frozen process).
    pub unwritable_samples: usize,
}

impl Report {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        args: &RunArgs,
        seed: u64,
        e: &Evidence,
        checks: Vec<Verdict>,
        injector: &Injector,
        torn: usize,
        drain_s: f64,
        total_s: f64,
    ) -> Report {
        let mut final_states = BTreeMap::new();
        let mut attempts = BTreeMap::new();
        for task in e.tasks.values() {
            *final_states.entry(task.state.as_str()).or_default() += 1;
            for row in &task.rows {
                *attempts.entry(row.outcome.as_str()).or_default() += 1;
            }
        }
        Report {
            backend: args.backend,
            seed,
            breaks: args.breaks.clone(),
            workers: args.workers,
            pull_workers: args.pull_workers,
            fault_window_s: args.duration.as_secs_f64(),
            drain_s,
            total_s,
            tasks: Tasks {
                submitted: e.specs.len(),
                by_behaviour: behaviour_counts(&e.specs),
                final_states,
            },
            attempts,
            faults: injector.counts(),
            fault_log: injector.injected.clone(),
            exercised: exercised(e, torn),
            hung_up: BTreeMap::new(),
            unexplained_lease_expiries: crate::check::unexplained_expiries(e),
            passed: checks.iter().all(Verdict::passed),
            checks,
        }
    }

    pub fn text(&self) -> String {
        let mut out = String::new();
        let list = |m: &BTreeMap<&str, usize>| {
            m.iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let _ = writeln!(
            out,
            "tasktable-chaos on {:?}, seed {}: {} in-process and {} pull workers, {:.0} s of faults, drained in {:.1} s ({:.1} s in all)",
            self.backend, self.seed, self.workers, self.pull_workers, self.fault_window_s, self.drain_s, self.total_s
        );
        if !self.breaks.is_empty() {
            let _ = writeln!(out, "broken on purpose: {:?}", self.breaks);
        }
        let _ = writeln!(
            out,
            "tasks      {} submitted ({}); ended {}",
            self.tasks.submitted,
            list(&self.tasks.by_behaviour),
            list(&self.tasks.final_states)
        );
        let total: usize = self.attempts.values().sum();
        let _ = writeln!(out, "attempts   {total}: {}", list(&self.attempts));
        let faults: usize = self.faults.values().sum();
        let _ = writeln!(out, "faults     {faults}: {}", list(&self.faults));
        let hung_up: Vec<String> = self
            .hung_up
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        let _ = writeln!(out, "hung up    {}", hung_up.join(", "));
        let x = &self.exercised;
        let _ = writeln!(
            out,
            "exercised  claims {} in-process / {} pull; completions {} / {}; stale effects refused {}; \
             stale checkpoints refused {}; probes refused {} of {}; resumed from a checkpoint {}; \
             ends without a token {}; torn journal lines {}; samples {} ({} unwritable)",
            x.claims_in_process, x.claims_pull, x.completions_accepted_in_process,
            x.completions_accepted_pull, x.stale_effects_refused, x.stale_checkpoints_refused,
            x.probes_refused, x.probes_sent, x.resumed_from_checkpoint, x.ends_without_token,
            x.torn_journal_lines, x.samples, x.unwritable_samples
        );
        let unexplained = &self.unexplained_lease_expiries;
        let _ = writeln!(
            out,
            "observed   {} lease expiries no fault explains{}",
            unexplained.len(),
            if unexplained.is_empty() { "" } else { ":" }
        );
        for line in unexplained.iter().take(10) {
            let _ = writeln!(out, "       - {line}");
        }
        let _ = writeln!(out, "checks");
        for check in &self.checks {
            let mark = if check.passed() { "PASS" } else { "FAIL" };
            let _ = writeln!(
                out,
                "  {mark} {} ({} examined): {}",
                check.name, check.examined, check.proves
            );
            if !check.passed() {
                let _ = writeln!(
                    out,
                    "       {} violations, for example:",
                    check.violations.len()
                );
                for v in check.violations.iter().take(10) {
                    let _ = writeln!(out, "       - {v}");
                }
            }
        }
        let failed = self.checks.iter().filter(|c| !c.passed()).count();
        let _ = match failed {
            0 => writeln!(out, "result: all {} checks passed", self.checks.len()),
            n => writeln!(
                out,
                "result: {n} of {} checks failed (seed {}; --keep keeps the journals and logs)",
                self.checks.len(),
                self.seed
            ),
        };
        out
    }
}

fn exercised(e: &Evidence, torn: usize) -> Exercised {
    let mut x = Exercised {
        torn_journal_lines: torn,
        samples: e.samples.len(),
        unwritable_samples: e.samples.iter().filter(|s| !s.writable).count(),
        ..Exercised::default()
    };
    for entry in &e.journal {
        let pull = e.pull_workers.contains(&entry.worker);
        let refused = entry.accepted == Some(false);
        match entry.op {
            Op::Claim if pull => x.claims_pull += 1,
            Op::Claim => {
                x.claims_in_process += 1;
                if entry.mark.is_some_and(|m| m.step > 0) {
                    x.resumed_from_checkpoint += 1;
                }
            }
            Op::Finish if entry.token.is_none() => x.ends_without_token += 1,
            Op::Finish
                if entry.accepted == Some(true)
                    && entry.outcome.as_deref() == Some("succeeded") =>
            {
                if pull {
                    x.completions_accepted_pull += 1;
                } else {
                    x.completions_accepted_in_process += 1;
                }
            }
            Op::Effect if refused => x.stale_effects_refused += 1,
            Op::Checkpoint if refused => x.stale_checkpoints_refused += 1,
            Op::Probe => {
                x.probes_sent += 1;
                x.probes_refused += usize::from(refused);
            }
            _ => {}
        }
        if entry.op == Op::Claim && pull && entry.mark.is_some_and(|m| m.step > 0) {
            x.resumed_from_checkpoint += 1;
        }
    }
    x
}

/// Names the behaviours of a run, for the summary.
fn behaviour_counts(specs: &[Behaviour]) -> BTreeMap<&'static str, usize> {
    let mut counts = BTreeMap::new();
    for s in specs {
        *counts.entry(s.name()).or_default() += 1;
    }
    counts
}
