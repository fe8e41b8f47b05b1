//! What happens to slots that passed while nothing ran (the missed-slot policies), and to
//! slots that come while the previous slot's task is unfinished (the overlap policy).

use super::{create_at, cron, fired_slots, run_due_at, spec};
use crate::pinned::{at, claim_params, finish};
use crate::Backend;
use tasktable_core::schedule::{Missed, Overlap};
use tasktable_core::HandlerOutcome;
use tasktable_store::*;

pub async fn each_missed_slot_policy_fires_what_it_says_after_an_outage(db: &impl Backend) {
    let s = db.store().await;
    let mut ids = Vec::new();
    for (name, missed) in [
        ("skip", Missed::Skip),
        ("latest", Missed::RunLatest),
        ("all", Missed::RunAll { max: 3 }),
        ("all-of-few", Missed::RunAll { max: 100 }),
    ] {
        let mut sp = spec(name, cron("*/10 * * * *", "UTC"));
        sp.missed = missed;
        ids.push(create_at(&*s, sp, at(0)).await.id);
    }
    // Every process was down from the start until 50 min 30 s: slots at 10, 20, 30, 40
    // and 50 minutes passed; only the last is on time (at most a minute old).
    let fired = run_due_at(&*s, at(50 * 60 + 30)).await;
    assert_eq!(fired.len(), 4, "each schedule fired once");
    let minutes = |ms: &[i64]| ms.iter().map(|m| at(m * 60)).collect::<Vec<_>>();
    assert_eq!(
        fired_slots(&*s, ids[0]).await,
        minutes(&[50]),
        "skip: the on-time slot only"
    );
    assert_eq!(
        fired_slots(&*s, ids[1]).await,
        minutes(&[40, 50]),
        "the latest missed and the on-time"
    );
    assert_eq!(
        fired_slots(&*s, ids[2]).await,
        minutes(&[20, 30, 40, 50]),
        "the 3 newest missed"
    );
    assert_eq!(
        fired_slots(&*s, ids[3]).await,
        minutes(&[10, 20, 30, 40, 50]),
        "every missed"
    );
    // Each firing says how many missed slots it fired late, and which it left.
    let told = |id: i64| {
        let f = fired.iter().find(|f| f.schedule_id == id).expect("fired");
        let left = f.missed_skipped;
        (f.caught_up, left.count, left.more, left.first, left.last)
    };
    let first = Some(at(10 * 60));
    assert_eq!(told(ids[0]), (0, 4, false, first, Some(at(40 * 60))));
    assert_eq!(told(ids[1]), (1, 3, false, first, Some(at(30 * 60))));
    assert_eq!(told(ids[2]), (3, 1, false, first, first));
    assert_eq!(told(ids[3]), (4, 0, false, None, None));

    // A skip schedule that was down past its on-time window fires nothing and waits for
    // its next slot.
    let later = run_due_at(&*s, at(62 * 60)).await;
    let skip = later
        .iter()
        .find(|f| f.schedule_id == ids[0])
        .expect("skip settled");
    assert!(
        skip.tasks.is_empty(),
        "the 60-minute slot is two minutes late"
    );
    assert_eq!(
        (skip.missed_skipped.count, skip.missed_skipped.first),
        (1, Some(at(60 * 60)))
    );
    let after = s
        .schedule_get(ScheduleRef::Id(ids[0]))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(after.next_run_at, Some(at(70 * 60)));
    assert_eq!(fired_slots(&*s, ids[0]).await, minutes(&[50]));
}

pub async fn overlap_skip_fires_no_slot_while_the_previous_task_is_unfinished(db: &impl Backend) {
    let s = db.store().await;
    let mut sp = spec("exclusive", cron("* * * * *", "UTC"));
    sp.overlap = Overlap::Skip;
    sp.missed = Missed::RunAll { max: 10 };
    let sched = create_at(&*s, sp, at(0)).await;
    let mut allow = spec("overlapping", cron("* * * * *", "UTC"));
    allow.template.queue = "other".into();
    let allowed = create_at(&*s, allow, at(0)).await;

    let first = run_due_at(&*s, at(60)).await;
    let mine = first.iter().find(|f| f.schedule_id == sched.id).unwrap();
    assert_eq!(mine.tasks.len(), 1);
    // Pending at 120 s, running at 180 s: both slots skipped. Several missed slots at
    // once fire one task, not a pile of them.
    let second = run_due_at(&*s, at(120)).await;
    let mine = second.iter().find(|f| f.schedule_id == sched.id).unwrap();
    assert_eq!((mine.tasks.len(), mine.skipped.clone()), (0, vec![at(120)]));
    let claimed = s
        .task_claim(claim_params("reports", &["report"], 1, at(150)))
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1);
    run_due_at(&*s, at(180)).await;
    assert_eq!(fired_slots(&*s, sched.id).await, [at(60)]);
    // Finished at 200 s: the 240 s slot fires.
    let task = &claimed[0];
    assert!(
        finish(
            &*s,
            task.lease(),
            HandlerOutcome::Succeeded { result: None },
            task.attempt,
            at(200)
        )
        .await
    );
    run_due_at(&*s, at(240)).await;
    assert_eq!(fired_slots(&*s, sched.id).await, [at(60), at(240)]);
    // A cancelled previous task is finished: it blocks nothing.
    s.task_update(UpdateParams {
        actor: tasktable_core::Actor::rust(),
        target: Target::Id(fired_slots_task(&*s, sched.id, at(240)).await),
        change: Change::Cancel,
        now: Some(at(250)),
        action: None,
    })
    .await
    .unwrap();
    run_due_at(&*s, at(300)).await;
    assert_eq!(fired_slots(&*s, sched.id).await, [at(60), at(240), at(300)]);
    // Overlap allowed: a task every minute, however many are unfinished.
    assert_eq!(fired_slots(&*s, allowed.id).await.len(), 5);
}

async fn fired_slots_task(
    s: &dyn Store,
    schedule_id: i64,
    slot: chrono::DateTime<chrono::Utc>,
) -> i64 {
    let page = s
        .task_list(ListParams {
            filter: TaskFilter::default().schedule(schedule_id),
            after: None,
            limit: 100,
            light: true,
        })
        .await
        .unwrap();
    page.tasks
        .iter()
        .find(|t| t.slot_at == Some(slot))
        .expect("the slot's task")
        .id
}
