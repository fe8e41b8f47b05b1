//! Not a check but an observation: lease expiries that no injected fault explains. A
//! lease runs out when its worker stops renewing; in a chaos run that should happen only
//! to a worker that was killed, stopped or frozen, to any worker while the database
//! took no writes, to a pull worker while the API was down, and to a claim of a client
//! that hung up (`hangup-N`) answered before the server saw it go (a claim the server saw
//! go in time is given back, not left to expire). An expiry outside all of those means a healthy worker lost a task: a bug in the runtime (one was found this
//! way), or renewals delayed past the lease by load, so it is reported, not failed.

use super::Evidence;
use tasktable::AttemptOutcome;

/// The worker ids of the run's hang-up claims start so.
pub const HANGUP_WORKER: &str = "hangup-";

/// One line per `lease_expired` attempt that no fault explains.
pub fn unexplained_expiries(e: &Evidence) -> Vec<String> {
    let limits = e.limits();
    // After a fault ends, a lease it stopped may still take a lease length to expire and
    // a rescue interval to be taken back.
    let after = limits.lease_ms + limits.stuck_after_ms;
    let mut lines = Vec::new();
    for task in e.tasks.values() {
        for (i, row) in task.rows.iter().enumerate() {
            if row.outcome != AttemptOutcome::LeaseExpired {
                continue;
            }
            let worker = row.worker.as_deref().unwrap_or_default();
            if worker.starts_with(HANGUP_WORKER) {
                continue;
            }
            let from = row.started_ms.unwrap_or(row.finished_ms) - 1000;
            let to = row.finished_ms;
            let overlaps = |a: i64, b: i64| a <= to && from <= b + after;
            let by_fault = e.disruptions.iter().any(|d| {
                let hits = match d.target.as_deref() {
                    None => true,
                    Some(target) if target == worker => true,
                    Some(api) => api.starts_with("api") && e.pull_workers.contains(worker),
                };
                hits && overlaps(d.from_ms, d.to_ms)
            });
            let by_outage = e
                .outages
                .iter()
                .any(|w| overlaps(w.from_ms, w.to_ms + limits.after_outage(*w)))
                || e.samples
                    .iter()
                    .any(|s| !s.writable && overlaps(s.at_ms, s.at_ms));
            if !by_fault && !by_outage {
                lines.push(format!(
                    "task {}: attempt {} by {worker} ran {} ms and its lease expired with no fault on that worker, the API or the database",
                    task.id,
                    i + 1,
                    to - row.started_ms.unwrap_or(to)
                ));
            }
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::healthy;
    use super::super::Disruption;
    use super::*;

    #[test]
    fn a_lease_expiry_is_explained_only_by_a_fault_that_could_cause_it() {
        // The healthy history: w1's attempt 1 (4.9 s to 5.0 s) expired.
        let mut e = healthy();
        assert_eq!(unexplained_expiries(&e).len(), 1);
        let freeze = |target: &str| Disruption {
            kind: "freeze_worker",
            target: Some(target.into()),
            from_ms: 4_950,
            to_ms: 9_000,
        };
        e.disruptions.push(freeze("w2"));
        assert_eq!(
            unexplained_expiries(&e).len(),
            1,
            "a fault on another worker"
        );
        e.disruptions.push(freeze("w1"));
        assert!(unexplained_expiries(&e).is_empty());
        let mut e = healthy();
        e.disruptions.push(Disruption {
            kind: "kill_api",
            target: Some("api-1".into()),
            from_ms: 4_000,
            to_ms: 4_500,
        });
        assert_eq!(unexplained_expiries(&e).len(), 1, "w1 is not a pull worker");
        e.pull_workers.insert("w1".into());
        assert!(unexplained_expiries(&e).is_empty());
    }
}
