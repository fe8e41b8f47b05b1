//! Schedules under real workers: each worker saves the schedules declared in its code and
//! fires due ones on the database's clock, and the workers run what fired.

use super::{fast, start};
use crate::schedule::fired_slots;
use crate::Backend;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tasktable_core::schedule::{Missed, Recurrence, ScheduleSpec};
use tasktable_runtime::*;
use tasktable_store::*;
use tokio::sync::Notify;

struct Tick {
    runs: Arc<AtomicUsize>,
    enough: Arc<Notify>,
}

impl Handler for Tick {
    const KIND: &'static str = "tick";
    type Payload = serde_json::Value;
    type Output = ();
    async fn run(&self, _: TaskContext, _: serde_json::Value) -> Result<(), HandlerError> {
        if self.runs.fetch_add(1, Ordering::SeqCst) + 1 == 3 {
            self.enough.notify_one();
        }
        Ok(())
    }
}

pub async fn workers_save_declared_schedules_and_fire_each_slot_once(db: &impl Backend) {
    let spec = ScheduleSpec {
        name: "tick".into(),
        recurrence: Recurrence::Every {
            every_ms: 1000,
            start: chrono::DateTime::UNIX_EPOCH,
        },
        template: serde_json::from_value(serde_json::json!({"kind": "tick", "queue": "ticks"}))
            .unwrap(),
        missed: Missed::Skip,
        overlap: Default::default(),
        enabled: true,
    };
    let runs = Arc::new(AtomicUsize::new(0));
    let enough = Arc::new(Notify::new());
    let mut workers = Vec::new();
    for _ in 0..3 {
        let w = fast(db.store().await)
            .queue("ticks", 2)
            .schedule_interval(Some(Duration::from_millis(200)))
            .schedule(spec.clone())
            .register(Tick {
                runs: runs.clone(),
                enough: enough.clone(),
            })
            .build()
            .unwrap();
        workers.push(start(w));
    }
    tokio::time::timeout(super::PATIENCE, enough.notified())
        .await
        .expect("three scheduled tasks ran");
    for w in workers {
        w.shutdown().await;
    }
    let store = db.store().await;
    let all = store.schedule_list().await.unwrap();
    assert_eq!(all.len(), 1, "three workers declared one schedule");
    let slots = fired_slots(&*store, all[0].id).await;
    assert!(slots.len() >= 3, "{slots:?}");
    for pair in slots.windows(2) {
        assert_eq!(
            (pair[1] - pair[0]).num_milliseconds(),
            1000,
            "every slot fired once, none skipped: {slots:?}"
        );
    }
    let ran = store
        .task_count(CountParams {
            filter: TaskFilter::default()
                .schedule(all[0].id)
                .state(tasktable_core::TaskState::Succeeded),
            cap: 1000,
        })
        .await
        .unwrap();
    assert!(ran >= 3, "the workers ran what fired");
}
