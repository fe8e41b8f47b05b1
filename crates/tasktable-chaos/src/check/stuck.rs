//! Nothing stuck: at no sample did a running task's lease lie expired for longer than the
//! rescue interval plus a scan's time, except while the database took no writes (its
//! server down, or on SQLite the write lock held by a frozen process) and until workers
//! could have caught up (their pools reconnect, then a rescue interval); and the drain
//! ended with every task in a final state.

use super::{Evidence, Verdict};

pub fn check(e: &Evidence) -> Verdict {
    let mut v = Verdict::new(
        "nothing_stuck",
        "a task whose worker stops renewing is taken back within lease + rescue interval, and the run drains",
    );
    let limits = e.limits();
    let limit = limits.stuck_after_ms;
    let unwritable: Vec<i64> = e
        .samples
        .iter()
        .filter(|s| !s.writable)
        .map(|s| s.at_ms)
        .collect();
    let excused = |at: i64| {
        e.outages
            .iter()
            .any(|w| w.from_ms <= at && at <= w.to_ms + limits.after_outage(*w))
            || unwritable.iter().any(|&u| u <= at && at <= u + limit)
    };
    let first = e.samples.first().map_or(0, |s| s.at_ms);
    for sample in &e.samples {
        v.examined += 1;
        if excused(sample.at_ms) {
            continue;
        }
        for x in sample.expired.iter().filter(|x| x.ago_ms > limit) {
            v.fail(format!(
                "{:.1} s into the run, task {}'s lease (held by {}) had been expired for {} ms (limit {limit} ms)",
                (sample.at_ms - first) as f64 / 1000.0,
                x.task,
                x.worker.as_deref().unwrap_or("nobody"),
                x.ago_ms
            ));
        }
    }
    if let Some(waited) = e.drain_gave_up_after_ms {
        let open: Vec<String> = e
            .tasks
            .values()
            .filter(|t| !t.state.is_finished())
            .take(10)
            .map(|t| format!("{} ({})", t.id, t.state.as_str()))
            .collect();
        v.fail(format!(
            "the drain gave up after {} s with tasks not finished, e.g. {}",
            waited / 1000,
            open.join(", ")
        ));
    }
    v
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::healthy;
    use super::super::Window;
    use super::*;
    use crate::sampler::{Expired, Sample};

    fn expired(task: i64, ago_ms: i64) -> Expired {
        Expired {
            task,
            ago_ms,
            worker: Some("w1".into()),
        }
    }

    #[test]
    fn a_lease_left_expired_past_the_limit_is_stuck_unless_the_database_was_down() {
        let mut e = healthy();
        e.samples.push(Sample {
            at_ms: 10_000,
            writable: true,
            expired: vec![expired(1, 3_500), expired(2, 2_000)],
        });
        let v = check(&e);
        assert_eq!(v.violations.len(), 1, "{:?}", v.violations);
        assert!(v.violations[0].contains(
            "6.0 s into the run, task 1's lease (held by w1) had been expired for 3500 ms"
        ));
        e.outages.push(Window {
            from_ms: 5_000,
            to_ms: 5_400,
        });
        assert!(
            !check(&e).passed(),
            "a short outage long before is no excuse"
        );
        e.outages[0] = Window {
            from_ms: 4_000,
            to_ms: 6_000,
        };
        assert!(
            check(&e).passed(),
            "within the pools' reconnect wait and a rescue: {:?}",
            check(&e).violations
        );
    }

    #[test]
    fn a_sample_soon_after_the_database_refused_a_write_is_excused() {
        let mut e = healthy();
        for (at_ms, writable) in [(8_000, false), (10_000, true), (12_000, true)] {
            e.samples.push(Sample {
                at_ms,
                writable,
                expired: vec![expired(1, 3_500)],
            });
        }
        let v = check(&e);
        assert_eq!(v.violations.len(), 1, "{:?}", v.violations);
        assert!(
            v.violations[0].starts_with("8.0 s into the run"),
            "{:?}",
            v.violations
        );
    }

    #[test]
    fn a_drain_that_gave_up_is_reported() {
        let mut e = healthy();
        e.drain_gave_up_after_ms = Some(120_000);
        let v = check(&e);
        assert!(
            v.violations[0].contains("the drain gave up after 120 s"),
            "{:?}",
            v.violations
        );
    }
}
