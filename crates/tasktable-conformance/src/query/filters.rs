//! Filters no stored text can match are refused alike on every backend, before the
//! database is asked, wherever a filter is taken: lists, counts, bulk changes, statistics.

use crate::pinned::{at, get, submit_at, update};
use crate::Backend;
use serde_json::json;
use tasktable_core::{NewTask, TaskState};
use tasktable_store::*;

/// A filter holding NUL matches no stored text, and PostgreSQL cannot even compare with
/// one: every backend refuses it as bad input before asking the database.
pub async fn filters_holding_nul_are_refused_on_every_backend(db: &impl Backend) {
    let s = db.store().await;
    let id = submit_at(&*s, vec![NewTask::new("k", json!(1))], at(0)).await[0];
    let nul = TaskFilter::default().queue("a\u{0}b");
    let list = s
        .task_list(ListParams {
            filter: nul.clone(),
            after: None,
            limit: 10,
            light: false,
        })
        .await;
    assert!(matches!(list, Err(StoreError::InvalidInput(_))), "{list:?}");
    let count = s
        .task_count(CountParams {
            filter: nul.clone(),
            cap: 10,
        })
        .await;
    assert!(
        matches!(count, Err(StoreError::InvalidInput(_))),
        "{count:?}"
    );
    let changed = update(&*s, Target::Filter(nul), Change::Cancel).await;
    assert!(
        matches!(changed, Err(StoreError::InvalidInput(_))),
        "{changed:?}"
    );
    let stats = s
        .stats(StatsParams {
            kind: Some("\u{0}".into()),
            ..StatsParams::window(std::time::Duration::from_secs(3600))
        })
        .await;
    assert!(
        matches!(stats, Err(StoreError::InvalidInput(_))),
        "{stats:?}"
    );
    assert_eq!(
        get(&*s, id).await.state,
        TaskState::Pending,
        "nothing changed"
    );
}
