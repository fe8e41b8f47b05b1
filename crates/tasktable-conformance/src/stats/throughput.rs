//! Statistics: the same numbers whether a minute is summed from raw rows or read back
//! from its rollup.

use crate::pinned::{at, claim_params, finish, no_jitter, submit_at, t0};
use crate::Backend;
use chrono::DateTime;
use chrono::Utc;
use serde_json::json;
use std::time::Duration;
use tasktable_core::{HandlerOutcome, NewTask, TaskState};
use tasktable_store::*;

fn stats(now: DateTime<Utc>, window_min: u64) -> StatsParams {
    StatsParams {
        window: Duration::from_secs(window_min * 60),
        queue: None,
        kind: None,
        now: Some(now),
    }
}

fn group<'a>(s: &'a Stats, queue: &str, kind: &str) -> &'a GroupStats {
    s.groups
        .iter()
        .find(|g| g.queue == queue && g.kind == kind)
        .unwrap_or_else(|| panic!("no group {queue}/{kind} in {:#?}", s.groups))
}

fn within(value: Option<f64>, lo: f64, hi: f64) -> bool {
    value.is_some_and(|v| v >= lo && v <= hi)
}

pub async fn stats_count_throughput_and_latency_per_queue_and_kind(db: &impl Backend) {
    let s = db.store().await;
    let err = || HandlerOutcome::Error {
        message: "boom".into(),
        retry_after: None,
    };
    let ok = || HandlerOutcome::Succeeded { result: None };
    // Minute 0: four of kind `a` and one of kind `b` in `default`.
    let mut batch: Vec<NewTask> = (0..3).map(|i| NewTask::new("a", json!(i))).collect();
    batch[2] = NewTask::new("a", json!(2)).max_attempts(1);
    batch.push(NewTask::new("a", json!(3)));
    batch.push(
        NewTask::new("b", json!(4))
            .max_attempts(2)
            .backoff(no_jitter()),
    );
    submit_at(&*s, batch, t0()).await;
    // Minute 1: one in another queue, left pending.
    submit_at(
        &*s,
        vec![NewTask::new("a", json!(5)).queue("other")],
        at(61),
    )
    .await;

    // Three of `a` wait 2 s; they run 1 s, 0.5 s and 2 s; the third fails for good.
    let ts = s
        .task_claim(claim_params("default", &["a"], 3, at(2)))
        .await
        .unwrap();
    assert_eq!(ts.len(), 3);
    assert!(finish(&*s, ts[0].lease(), ok(), 1, at(3)).await);
    let half = at(2) + chrono::Duration::milliseconds(500);
    assert!(finish(&*s, ts[1].lease(), ok(), 1, half).await);
    assert!(finish(&*s, ts[2].lease(), err(), 1, at(4)).await);
    // `b` waits 70 s, fails once and is retried.
    let b = s
        .task_claim(claim_params("default", &["b"], 1, at(70)))
        .await
        .unwrap()
        .remove(0);
    assert!(finish(&*s, b.lease(), err(), 1, at(71)).await);

    let check = |st: &Stats, how: &str| {
        let a = group(st, "default", "a");
        let w = &a.window;
        assert_eq!(
            (w.submitted, w.succeeded, w.failed, w.retried, w.cancelled),
            (4, 2, 1, 0, 0),
            "{how}: default/a totals"
        );
        assert_eq!(a.active, vec![(TaskState::Pending, 1)], "{how}");
        assert_eq!(
            a.oldest_due,
            Some(t0()),
            "{how}: the fourth has waited since t0"
        );
        assert_eq!(w.success_rate, Some(2.0 / 3.0), "{how}");
        assert!((w.submitted_per_min - 4.0 / 60.0).abs() < 1e-9, "{how}");
        assert_eq!((w.wait.count, w.run.count), (3, 3), "{how}");
        // Percentiles are read from histogram buckets: 2 s lies in [2 s, 5 s), the
        // median run (1 s) in [1 s, 2 s).
        assert!(within(w.wait.p50, 2.0, 5.0), "{how}: wait {:?}", w.wait);
        assert!(within(w.run.p50, 1.0, 2.0), "{how}: run {:?}", w.run);
        assert!(within(w.run.p99, 2.0, 5.0), "{how}: run {:?}", w.run);

        let b = &group(st, "default", "b").window;
        assert_eq!((b.submitted, b.retried, b.failed), (1, 1, 0), "{how}");
        assert_eq!(b.success_rate, None, "{how}: nothing ended yet");
        assert!(within(b.wait.p50, 60.0, 300.0), "{how}: wait {:?}", b.wait);

        let retry_due = group(st, "default", "b").oldest_due;
        assert_eq!(
            retry_due,
            Some(at(81)),
            "{how}: b is due again 10 s after its failure"
        );
        let other = group(st, "other", "a");
        assert_eq!(other.window.submitted, 1, "{how}");
        assert_eq!(other.active, vec![(TaskState::Pending, 1)], "{how}");

        let minute0 = st.series.iter().find(|p| p.at == t0()).expect("t0 point");
        assert_eq!(
            (minute0.submitted, minute0.succeeded, minute0.failed),
            (5, 2, 1),
            "{how}: first minute"
        );
        let minute1 = st.series.iter().find(|p| p.at == at(60)).expect("t0+1m");
        assert_eq!((minute1.submitted, minute1.retried), (1, 1), "{how}");
        assert_eq!(st.series.len(), 60, "{how}: one point per minute");
    };

    // Two minutes in, nothing is old enough to be rolled up: all from raw rows.
    let live = s.stats(stats(at(100), 60)).await.unwrap();
    check(&live, "raw rows");
    // Ten minutes in, the same minutes come back from the rollup table.
    let rolled = s.stats(stats(at(600), 60)).await.unwrap();
    check(&rolled, "rollups");
    // Asked again (nothing left to roll), the answer is the same.
    assert_eq!(s.stats(stats(at(600), 60)).await.unwrap(), rolled);

    // A filter narrows every part of the answer.
    let mut p = stats(at(600), 60);
    p.queue = Some("default".into());
    p.kind = Some("a".into());
    let only = s.stats(p).await.unwrap();
    assert_eq!(only.groups.len(), 1);
    assert_eq!(only.series.iter().map(|p| p.submitted).sum::<u64>(), 4);

    // A window that has moved past the activity keeps the active counts only.
    let later = s.stats(stats(at(3 * 3600), 60)).await.unwrap();
    let a = group(&later, "default", "a");
    assert_eq!((a.window.submitted, a.window.succeeded), (0, 0));
    assert_eq!(a.active, vec![(TaskState::Pending, 1)]);

    // Long windows are summed into at most 120 points.
    let week = s.stats(stats(at(600), 7 * 24 * 60)).await.unwrap();
    assert!(week.series.len() <= 120);
    assert_eq!(week.series.iter().map(|p| p.submitted).sum::<u64>(), 6);

    // A pending task that is not due yet is not waiting.
    submit_at(
        &*s,
        vec![NewTask::new("c", json!(6)).delay(Duration::from_secs(3600))],
        at(100),
    )
    .await;
    let c = s.stats(stats(at(200), 60)).await.unwrap();
    let c = group(&c, "default", "c");
    assert_eq!(
        (c.active.clone(), c.oldest_due),
        (vec![(TaskState::Pending, 1)], None)
    );

    let too_short = s.stats(StatsParams::window(Duration::from_secs(30))).await;
    assert!(matches!(too_short, Err(StoreError::InvalidInput(_))));
}
