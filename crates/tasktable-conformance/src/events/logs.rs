//! Task logs: lines appended under the task's lease, capped per task, cut per line, and
//! kept (or archived) with the task.

use crate::pinned::{at, claim, finish, ok, submit_at, t0};
use crate::Backend;
use serde_json::json;
use std::time::Duration;
use tasktable_core::{NewTask, TaskState};
use tasktable_store::*;

fn log(lease: tasktable_core::Lease, lines: Vec<String>) -> LogParams {
    LogParams {
        lease,
        lines,
        now: Some(at(2)),
    }
}

pub async fn a_tasks_log_is_fenced_capped_cut_and_archived_with_it(db: &impl Backend) {
    let s = db.store().await;
    let id = submit_at(&*s, vec![NewTask::new("job", json!({}))], t0()).await[0];
    let task = claim(&*s, &["job"], 1, at(1)).await.remove(0);
    let lease = task.lease();

    let first = vec!["hello\0world".to_owned(), "é".repeat(600)];
    let status = s.task_log(log(lease, first)).await.unwrap();
    assert!(matches!(status, LeaseStatus::Held { .. }));
    let stale = tasktable_core::Lease {
        token: lease.token + 1,
        ..lease
    };
    let status = s
        .task_log(log(stale, vec!["not mine".into()]))
        .await
        .unwrap();
    assert_eq!(status, LeaseStatus::Lost, "a stale lease appends nothing");
    let kept = s.task_logs(id).await.unwrap();
    assert_eq!(kept.len(), 2);
    assert_eq!(
        kept[0].line, "hello\u{FFFD}world",
        "NUL is kept as nothing can"
    );
    assert_eq!((kept[0].attempt, kept[0].run), (1, None));
    assert_eq!(kept[0].at, at(2));
    assert!(kept[1].line.len() <= MAX_LOG_LINE_BYTES && kept[1].line.len() > 1000);
    assert!(
        kept[1].line.chars().all(|c| c == 'é'),
        "cut on a character boundary"
    );
    let refused = s.task_log(log(lease, Vec::new())).await;
    assert!(matches!(refused, Err(StoreError::InvalidInput(_))));

    // The cap: the line that reaches it says so, and later lines are dropped.
    let hundred: Vec<String> = (0..100).map(|i| format!("line {i}")).collect();
    for _ in 0..10 {
        let status = s.task_log(log(lease, hundred.clone())).await.unwrap();
        assert!(matches!(status, LeaseStatus::Held { .. }));
    }
    let kept = s.task_logs(id).await.unwrap();
    assert_eq!(kept.len() as u64, MAX_LOG_LINES);
    assert!(
        kept.last().unwrap().line.contains("log full"),
        "{:?}",
        kept.last()
    );
    assert!(kept.windows(2).all(|w| w[0].id < w[1].id), "oldest first");

    // Archived with its task.
    assert!(finish(&*s, lease, ok(), task.attempt, at(3)).await);
    let purged = s
        .task_purge(PurgeParams {
            state: TaskState::Succeeded,
            older_than: Duration::from_secs(3600),
            archive: true,
            limit: 10,
            dry_run: false,
            now: Some(at(3) + chrono::Duration::days(1)),
        })
        .await
        .unwrap();
    assert_eq!(purged.count, 1);
    assert!(s.task_get(id).await.unwrap().is_none());
    assert_eq!(
        s.task_logs(id).await.unwrap(),
        kept,
        "read from the archive"
    );
}
