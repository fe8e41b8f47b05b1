//! The batches pages over real HTTP on a real database (SQLite, PostgreSQL and MySQL):
//! progress, failures, rate and ETA; the buttons each status allows and who may use
//! them; bad forms refused with nothing changed.

mod common;

use common::{csrf, Ui, ADMIN, READER};
use reqwest::header::LOCATION;
use reqwest::StatusCode;
use serde_json::json;
use std::time::Duration;
use tasktable_core::batch::{BatchSpec, BatchStatus};
use tasktable_core::NewTask;
use tasktable_store::{BatchSaveParams, ClaimParams, ItemFailure};

on_every_backend!(
    the_pages_show_progress_failures_and_the_allowed_actions,
    readers_and_bad_forms_change_no_batch,
);

/// The `<tr>` of batch `id`.
fn row(html: &str, id: i64) -> &str {
    let start = html
        .find(&format!("<tr data-batch=\"{id}\">"))
        .unwrap_or_else(|| panic!("no row for {id} in {html}"));
    let end = html[start..].find("</tr>").unwrap() + start;
    &html[start..end]
}

async fn status(ui: &Ui, id: i64) -> BatchStatus {
    ui.store.batch_get(id).await.unwrap().unwrap().status
}

/// A held batch, and a running one with saved progress and a failed item.
async fn two_batches(ui: &Ui) -> (i64, i64) {
    let running = ui
        .submit(NewTask::new("notify", json!({})).batch(BatchSpec::items(500).error_budget(2)))
        .await;
    let task = ui
        .store
        .task_claim(ClaimParams {
            queue: "default".into(),
            kinds: vec!["notify".into()],
            limit: 1,
            worker_id: "edge".into(),
            worker_host: "edge".into(),
            worker_groups: Vec::new(),
            lease_for: Duration::from_secs(30),
            now: None,
        })
        .await
        .unwrap()
        .pop()
        .unwrap();
    ui.store
        .batch_save(BatchSaveParams {
            lease: task.lease(),
            low_water: 120,
            end: Some(500),
            errors: 1,
            failures: vec![ItemFailure {
                item: 17,
                error: "no such user".into(),
                tries: 3,
                failed_at: None,
            }],
            items_per_second: Some(38.0),
            lease_for: Duration::from_secs(30),
            data_version: 0,
            now: None,
        })
        .await
        .unwrap();
    let waiting = ui
        .submit(
            NewTask::new("notify", json!({}))
                .batch(BatchSpec::items(10))
                .held(true),
        )
        .await;
    (running, waiting)
}

async fn the_pages_show_progress_failures_and_the_allowed_actions(backend: &str) {
    let Some(ui) = Ui::start(backend).await else {
        return;
    };
    let (running, waiting) = two_batches(&ui).await;
    let (admin, _) = ui.sign_in(ADMIN).await;
    let html = ui.page(&admin, "/ui/batches").await;
    let r = row(&html, running);
    for want in [
        "s-running",
        "<progress max=\"500\" value=\"120\">",
        "120 / 500",
        "1 / 2",
        "38/s",
        "10s",
        ">Pause<",
        ">Stop<",
    ] {
        assert!(r.contains(want), "{want:?} in {r}");
    }
    assert!(!r.contains(">Start<") && !r.contains(">Resume<"), "{r}");
    let w = row(&html, waiting);
    assert!(w.contains("waiting") && w.contains(">Start<"), "{w}");
    assert!(!w.contains(">Resume<"), "{w}");
    let page = ui.page(&admin, &format!("/ui/batches/{running}")).await;
    assert!(
        page.contains("no such user") && page.contains(">17<"),
        "{page}"
    );

    let token = csrf(&html);
    let resp = admin
        .post(ui.url("/ui/batches/start"))
        .form(&[("csrf", token.as_str()), ("batch", &waiting.to_string())])
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    let to = resp.headers()[LOCATION].to_str().unwrap().to_owned();
    assert!(
        to.starts_with(&format!("/ui/batches/{waiting}?done=")),
        "{to}"
    );
    assert_eq!(status(&ui, waiting).await, BatchStatus::Queued);
    // An action the status does not allow comes back as an error on the page.
    let resp = admin
        .post(ui.url("/ui/batches/start"))
        .form(&[("csrf", token.as_str()), ("batch", &waiting.to_string())])
        .send()
        .await
        .unwrap();
    let to = resp.headers()[LOCATION].to_str().unwrap().to_owned();
    assert!(to.contains("error="), "{to}");
    let missing = admin
        .get(ui.url("/ui/batches/999999"))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
}

async fn readers_and_bad_forms_change_no_batch(backend: &str) {
    let Some(ui) = Ui::start(backend).await else {
        return;
    };
    let (running, waiting) = two_batches(&ui).await;
    let (reader, _) = ui.sign_in(READER).await;
    let html = ui.page(&reader, "/ui/batches").await;
    assert!(
        !row(&html, waiting).contains(">Start<"),
        "readers get no buttons"
    );
    let token = csrf(&html);
    let resp = reader
        .post(ui.url("/ui/batches/start"))
        .form(&[("csrf", token.as_str()), ("batch", &waiting.to_string())])
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::FORBIDDEN);

    let (admin, _) = ui.sign_in(ADMIN).await;
    let token = csrf(&ui.page(&admin, "/ui/batches").await);
    let id = running.to_string();
    let cases = [
        (
            "pause",
            vec![("csrf", "wrong"), ("batch", id.as_str())],
            StatusCode::FORBIDDEN,
        ),
        (
            "pause",
            vec![("csrf", token.as_str())],
            StatusCode::BAD_REQUEST,
        ),
        (
            "pause",
            vec![("csrf", token.as_str()), ("batch", "x")],
            StatusCode::BAD_REQUEST,
        ),
        (
            "explode",
            vec![("csrf", token.as_str()), ("batch", id.as_str())],
            StatusCode::NOT_FOUND,
        ),
    ];
    for (op, fields, want) in cases {
        let resp = admin
            .post(ui.url(&format!("/ui/batches/{op}")))
            .form(&fields)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), want, "{op} {fields:?}");
    }
    assert_eq!(
        status(&ui, running).await,
        BatchStatus::Running,
        "nothing changed"
    );
    assert_eq!(
        status(&ui, waiting).await,
        BatchStatus::Waiting,
        "nothing changed"
    );
}
