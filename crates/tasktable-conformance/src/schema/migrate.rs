//! Migrations run again, or by several processes at once, leave one working schema.

use crate::pinned::{get, submit_one};
use crate::Backend;
use serde_json::json;
use tasktable_core::{NewTask, TaskState};

pub async fn migrate_is_idempotent_and_safe_concurrently(db: &impl Backend) {
    let mut handles = Vec::new();
    for _ in 0..4 {
        let s = db.store().await;
        handles.push(tokio::spawn(async move { s.migrate().await }));
    }
    for h in handles {
        h.await.unwrap().expect("concurrent migrate");
    }
    let s = db.store().await;
    s.migrate().await.unwrap();
    let id = submit_one(&*s, NewTask::new("k", json!(0))).await;
    assert_eq!(get(&*s, id).await.state, TaskState::Pending);
}
