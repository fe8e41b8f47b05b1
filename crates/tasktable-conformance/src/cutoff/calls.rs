use crate::pinned::*;
use crate::{Backend, Probe};
use serde_json::json;
use std::task::Poll;
use std::time::Duration;
use std::time::Instant;
use tasktable_core::runs::Runs;
use tasktable_core::{AttemptOutcome, NewTask, TaskState};
use tasktable_store::*;
use tokio::sync::broadcast;

/// How long a case waits for a signal before it fails.
const PATIENCE: Duration = Duration::from_secs(60);

/// Each kind of call is cut off `CUTS` times, each `CUT_STEP` later into its work than
/// the one before (from its first poll to well past a round trip to the database), then a
/// few times a millisecond apart.
const CUTS: u32 = 250;
const CUT_STEP: Duration = Duration::from_micros(10);
const LATE_CUTS: u32 = 8;

/// Polls `call` until `after` has passed, then drops it wherever it is. It is polled
/// again at once after every `Pending` rather than woken by a timer, whose ticks are a
/// millisecond apart: so the cut falls within a few microseconds of `after`.
async fn cut_off<T>(after: Duration, call: impl std::future::Future<Output = T>) {
    let start = Instant::now();
    let mut call = std::pin::pin!(call);
    std::future::poll_fn(|cx| {
        if call.as_mut().poll(cx).is_ready() || start.elapsed() >= after {
            return Poll::Ready(());
        }
        cx.waker().wake_by_ref();
        Poll::Pending
    })
    .await
}

/// A task that wants many runs, any worker again and again: every claim of one of its runs
/// writes in a transaction of several statements.
fn open_runs(n: i64) -> NewTask {
    NewTask::new("k", json!(n))
        .queue("runs")
        .max_attempts(10_000)
        .runs(
            Runs::copies(10_000)
                .at_once(10_000)
                .repeat(true)
                .max_failed(10_000),
        )
}

/// Cuts off, one after another, the calls that write in transactions of several
/// statements (a claim of a run, a submit of a multi-run task, an operator's change) and
/// the hot path's submit, each `CUT_STEP` later into its work than the one before, from
/// its first poll to past its end; after each, `probe` finds no connection inside a
/// transaction.
async fn cut_calls_everywhere(s: &dyn Store, probe: &Probe) {
    submit_at(s, (0..4).map(open_runs).collect(), t0()).await;
    let single = submit_one(s, NewTask::new("k", json!("single")).queue("single")).await;
    let fine = (0..CUTS).map(|n| CUT_STEP * n);
    let late = (1..=LATE_CUTS).map(|n| Duration::from_millis(n.into()));
    let cuts: Vec<Duration> = fine.chain(late).collect();
    let calls = (0..4).flat_map(|kind| cuts.iter().map(move |&after| (kind, after)));
    for (step, (kind, after)) in calls.enumerate() {
        match kind {
            0 => {
                let mut claim = claim_params("runs", &["k"], 1, at(1));
                claim.worker_id = format!("w{step}");
                cut_off(after, s.task_claim(claim)).await
            }
            1 => {
                let submit = SubmitParams {
                    tasks: vec![open_runs(step as i64)],
                    now: Some(at(1)),
                };
                cut_off(after, s.task_submit(submit)).await
            }
            2 => {
                let change = UpdateParams {
                    target: Target::Id(single),
                    change: Change::SetPriority {
                        priority: step as i32,
                    },
                    actor: tasktable_core::Actor::rust(),
                    now: Some(at(1)),
                    action: None,
                };
                cut_off(after, s.task_update(change)).await
            }
            _ => {
                let submit = SubmitParams {
                    tasks: vec![NewTask::new("k", json!(step)).queue("plain")],
                    now: Some(at(1)),
                };
                cut_off(after, s.task_submit(submit)).await
            }
        }
        // At once: the next transaction's COMMIT would end one left open, and the writes
        // made inside it meanwhile would be undone only if the session ended first.
        let open = probe().await;
        assert_eq!(
            open, 0,
            "call {kind} cut off after {after:?} left a transaction open"
        );
    }
}

/// After calls were cut off: no connection of the pool is inside a transaction, and a
/// task goes through submit, claim and finish as ever.
async fn the_pool_is_clean_and_the_store_works(s: &dyn Store, probe: &Probe) {
    assert_eq!(
        probe().await,
        0,
        "connections went back to the pool inside a transaction"
    );
    let id = submit_one(s, NewTask::new("k", json!("after")).queue("after")).await;
    let t = s
        .task_claim(claim_params("after", &["k"], 1, at(2)))
        .await
        .unwrap()
        .remove(0);
    assert_eq!(t.id, id);
    assert!(finish(s, t.lease(), ok(), 1, at(3)).await);
    assert_eq!(get(s, id).await.state, TaskState::Succeeded);
    assert_eq!(probe().await, 0);
}

/// A shielded store's calls cut off anywhere (their callers' futures dropped at one point
/// after another) run to their end on tasks of their own, on a pool of two connections:
/// none is left inside a transaction or out of step with the database, and the store
/// works as before.
pub async fn shielded_calls_cut_off_anywhere_leave_the_pool_clean(db: &impl Backend) {
    let (raw, probe) = db.store_with_probe(2).await;
    let s = Shielded::wrap(raw);
    cut_calls_everywhere(&*s, &probe).await;
    the_pool_is_clean_and_the_store_works(&*s, &probe).await;
}

/// The same with the calls of the store itself cut off, for backends whose driver stays
/// in step with the database wherever a statement is dropped (PostgreSQL, SQLite; not
/// sqlx's MySQL driver, which can lose its place in a reply, so MySQL stores are only used
/// shielded): no transaction is left open, a `BEGIN` whose answer was still on its way
/// included. Called by those backends' own tests.
pub async fn raw_calls_cut_off_anywhere_leave_no_connection_inside_a_transaction(
    s: &dyn Store,
    probe: &Probe,
) {
    cut_calls_everywhere(s, probe).await;
    the_pool_is_clean_and_the_store_works(s, probe).await;
}

/// Waits for wake-ups of `queue` until `done` holds (checked after each), failing after
/// [`PATIENCE`] with `what`.
async fn until_woken<F, Fut>(
    wakes: &mut broadcast::Receiver<Wake>,
    queue: &str,
    what: &str,
    mut done: F,
) where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let waited = tokio::time::timeout(PATIENCE, async {
        loop {
            match wakes.recv().await {
                Ok(w) if w.queue != queue => continue,
                Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(broadcast::error::RecvError::Closed) => panic!("the wake-ups stopped"),
            }
            if done().await {
                return;
            }
        }
    })
    .await;
    waited.unwrap_or_else(|_| panic!("{what}"));
}

/// A shielded store's submit, dropped right after its first poll, still commits: its
/// caller never hears of it, but the task is there, and workers are woken for it.
pub async fn a_shielded_call_dropped_after_its_first_poll_still_commits(db: &impl Backend) {
    let (raw, probe) = db.store_with_probe(2).await;
    let s = Shielded::wrap(raw);
    let mut wakes = s.subscribe().await.unwrap();
    let submit = SubmitParams {
        tasks: vec![NewTask::new("k", json!(1)).queue("cut")],
        now: None,
    };
    // Polled exactly once, then dropped. (A zero timeout polls the call again whenever
    // it wakes before the timer does, which a quick database answer can win.)
    let mut cut = Box::pin(s.task_submit(submit));
    assert!(
        futures::FutureExt::now_or_never(&mut cut).is_none(),
        "the submit answered on its first poll"
    );
    drop(cut);
    let count = || {
        s.task_count(CountParams {
            filter: TaskFilter::default().queue("cut"),
            cap: 10,
        })
    };
    until_woken(
        &mut wakes,
        "cut",
        "the cut-off submit never committed",
        || async { count().await.unwrap() == 1 },
    )
    .await;
    assert_eq!(count().await.unwrap(), 1);
    assert_eq!(probe().await, 0);
}

/// A shielded store's claim, dropped right after its first poll, claims the task for
/// nobody; it gives the task back at once, as a worker gives back a task it never
/// started: pending again, the attempt refunded and recorded as interrupted with the
/// reason, so it does not wait out a lease nobody holds.
pub async fn a_shielded_claim_whose_caller_went_away_gives_its_tasks_back(db: &impl Backend) {
    let (raw, probe) = db.store_with_probe(2).await;
    let s = Shielded::wrap(raw);
    let submitted = s
        .task_submit(SubmitParams {
            tasks: vec![NewTask::new("k", json!(1)).queue("cut")],
            now: None,
        })
        .await
        .unwrap();
    let id = submitted[0].id;
    let mut wakes = s.subscribe().await.unwrap();
    let claim = ClaimParams {
        now: None,
        ..claim_params("cut", &["k"], 1, t0())
    };
    // Polled exactly once, then dropped, as the submit above.
    let mut cut = Box::pin(s.task_claim(claim));
    assert!(
        futures::FutureExt::now_or_never(&mut cut).is_none(),
        "the claim answered on its first poll"
    );
    drop(cut);
    let given_back = || async { outcomes(&*s, id).await == [AttemptOutcome::Interrupted] };
    until_woken(
        &mut wakes,
        "cut",
        "the task claimed for nobody was not given back",
        given_back,
    )
    .await;
    let t = get(&*s, id).await;
    assert_eq!((t.state, t.attempt), (TaskState::Pending, 0));
    let history = s.attempt_list(id).await.unwrap();
    assert_eq!(
        history[0].error.as_deref(),
        Some(tasktable_core::outcome::UNHEARD)
    );
    assert_eq!(probe().await, 0);
}
