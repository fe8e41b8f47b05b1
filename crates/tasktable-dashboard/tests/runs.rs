//! A multi-run task on the dashboard, over real HTTP on each database: the task page
//! lists its runs and sums them up, and the task list shows copies done of those wanted.

mod common;

use common::{Ui, READER};
use serde_json::json;
use std::time::Duration;
use tasktable_core::outcome::{FinishPlan, HandlerOutcome};
use tasktable_core::runs::Runs;
use tasktable_core::NewTask;
use tasktable_store::{ClaimParams, FinishItem, FinishParams};

on_every_backend!(the_task_page_lists_runs_and_the_list_counts_copies);

async fn claim(ui: &Ui, worker: &str) -> tasktable_core::Task {
    let mut got = ui
        .store
        .task_claim(ClaimParams {
            queue: "default".into(),
            kinds: vec!["sync".into()],
            limit: 1,
            worker_id: worker.into(),
            worker_host: format!("{worker}.example"),
            worker_groups: Vec::new(),
            lease_for: Duration::from_secs(60),
            now: None,
        })
        .await
        .unwrap();
    got.pop().expect("a run")
}

async fn the_task_page_lists_runs_and_the_list_counts_copies(backend: &str) {
    let Some(ui) = Ui::start(backend).await else {
        return;
    };
    let id = ui
        .submit(NewTask::new("sync", json!({})).runs(Runs::copies(3).at_once(2)))
        .await;
    let first = claim(&ui, "edge-a").await;
    let applied = ui
        .store
        .task_finish(FinishParams {
            items: vec![FinishItem {
                lease: first.lease(),
                plan: FinishPlan::for_handler(
                    HandlerOutcome::Succeeded { result: None },
                    first.attempt,
                    &first.backoff,
                    0.5,
                ),
            }],
            only_if_expired: false,
            now: None,
        })
        .await
        .unwrap();
    assert_eq!(applied, [true]);
    claim(&ui, "edge-b").await;
    let (client, _) = ui.sign_in(READER).await;
    let html = ui.page(&client, &format!("/ui/tasks/{id}")).await;
    assert!(
        html.contains("1 of 3 done, 1 running · at most 2 at once"),
        "{html}"
    );
    let table = &html[html.find("<table id=\"runs\"").expect("a runs table")..];
    let table = &table[..table.find("</table>").unwrap()];
    assert_eq!(
        table.matches("<tr>").count(),
        3,
        "a header and two runs: {table}"
    );
    assert!(
        table.contains("edge-a") && table.contains("succeeded"),
        "{table}"
    );
    assert!(
        table.contains("edge-b") && table.contains("running"),
        "{table}"
    );
    let list = ui.page(&client, "/ui/tasks").await;
    assert!(list.contains("1/3 done"), "{list}");
    // A task that runs once has no runs table.
    let once = ui.submit(NewTask::new("sync", json!({}))).await;
    let html = ui.page(&client, &format!("/ui/tasks/{once}")).await;
    assert!(!html.contains("id=\"runs\""), "{html}");
}
