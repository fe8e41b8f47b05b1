//! The workers page over real HTTP on a real database (SQLite, PostgreSQL and MySQL): the
//! registry with what each worker runs, the drain and release forms and who may use them,
//! and bad forms refused with nothing changed.

mod common;

use common::{csrf, Ui, ADMIN, OPERATOR, READER};
use reqwest::header::LOCATION;
use reqwest::StatusCode;
use tasktable_core::worker::{Protocol, Queues, WorkerFacts, WorkerInfo};
use tasktable_store::{WorkerBeatParams, WorkerListParams};

on_every_backend!(
    the_page_lists_the_registry_and_workers_that_never_registered,
    an_operator_drains_and_releases_a_worker,
    readers_and_bad_forms_change_no_worker,
    the_registry_is_shown_a_page_at_a_time,
    a_pending_tasks_page_says_why_it_waits_and_workers_show_their_kinds,
);

/// 200 workers a page, by id, and a link to the next; the live count is the registry's.
async fn the_registry_is_shown_a_page_at_a_time(backend: &str) {
    let Some(ui) = Ui::start(backend).await else {
        return;
    };
    for i in 0..205 {
        register(&ui, &format!("w-{i:03}"), Queues::All).await;
    }
    let (client, _) = ui.sign_in(READER).await;
    let first = ui.page(&client, "/ui/workers").await;
    assert!(first.contains("205 live."), "{first}");
    assert_eq!(first.matches("<tr data-worker=").count(), 200);
    assert!(first.contains("w-199") && !first.contains("w-200"));
    assert!(
        first.contains("href=\"/ui/workers?after=w-199\""),
        "a link to the next page"
    );
    let second = ui.page(&client, "/ui/workers?after=w-199").await;
    assert_eq!(second.matches("<tr data-worker=").count(), 5);
    assert!(second.contains("w-204") && !second.contains("w-199"));
    assert!(!second.contains("id=\"next-page\""), "the last page");
}

/// A form's fields.
type Fields<'a> = Vec<(&'a str, &'a str)>;

async fn register(ui: &Ui, id: &str, queues: Queues) {
    register_with_kinds(ui, id, queues, None).await;
}

async fn register_with_kinds(ui: &Ui, id: &str, queues: Queues, kinds: Option<&[&str]>) {
    ui.store
        .worker_beat(WorkerBeatParams {
            facts: WorkerFacts {
                id: id.into(),
                host: format!("{id}.example"),
                pid: Some(7),
                version: "0.1.0".into(),
                groups: vec!["blue".into()],
                queues,
                capacity: 3,
                protocol: Protocol::Process,
                kinds: kinds.map(|k| k.iter().map(|s| s.to_string()).collect()),
            },
            address: None,
            starting: true,
            now: None,
            owner: None,
            max_live_per_owner: None,
        })
        .await
        .unwrap();
}

async fn worker(ui: &Ui, id: &str) -> WorkerInfo {
    ui.store
        .worker_list(WorkerListParams {
            include_gone: true,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_iter()
        .find(|w| w.facts.id == id)
        .unwrap()
}

/// The `<tr>` of worker `id`.
fn row<'a>(html: &'a str, id: &str) -> &'a str {
    let start = html
        .find(&format!("<tr data-worker=\"{id}\">"))
        .unwrap_or_else(|| panic!("no row for {id} in {html}"));
    let end = html[start..].find("</tr>").unwrap() + start;
    &html[start..end]
}

async fn form(
    client: &reqwest::Client,
    ui: &Ui,
    op: &str,
    fields: &[(&str, &str)],
) -> reqwest::Response {
    client
        .post(ui.url(&format!("/ui/workers/{op}")))
        .form(fields)
        .send()
        .await
        .unwrap()
}

async fn the_page_lists_the_registry_and_workers_that_never_registered(backend: &str) {
    let Some(ui) = Ui::start(backend).await else {
        return;
    };
    register(&ui, "w-every", Queues::All).await;
    register(
        &ui,
        "w-listed",
        Queues::Listed(vec!["mail".into(), "sms".into()]),
    )
    .await;
    ui.store.worker_leave("w-listed".into()).await.unwrap();
    let (client, _) = ui.sign_in(READER).await;
    let html = ui.page(&client, "/ui/workers").await;
    assert!(html.contains("1 live."), "{html}");
    let every = row(&html, "w-every");
    for text in [
        "w-every.example",
        ">active<",
        "0 / 3",
        "every queue",
        "blue",
    ] {
        assert!(every.contains(text), "{text} in {every}");
    }
    let listed = row(&html, "w-listed");
    assert!(
        listed.contains(">gone<") && listed.contains("mail, sms"),
        "{listed}"
    );
    assert!(
        !html.contains("/ui/workers/drain"),
        "a reader gets no buttons"
    );
}

async fn an_operator_drains_and_releases_a_worker(backend: &str) {
    let Some(ui) = Ui::start(backend).await else {
        return;
    };
    register(&ui, "w-1", Queues::All).await;
    for token in [OPERATOR, ADMIN] {
        let (client, _) = ui.sign_in(token).await;
        let html = ui.page(&client, "/ui/workers").await;
        assert!(
            row(&html, "w-1").contains("action=\"/ui/workers/drain\""),
            "{html}"
        );
        let csrf = csrf(&html);
        let resp = form(&client, &ui, "drain", &[("csrf", &csrf), ("worker", "w-1")]).await;
        assert_eq!(resp.status(), StatusCode::SEE_OTHER);
        let to = resp.headers()[LOCATION].to_str().unwrap().to_owned();
        assert!(to.starts_with("/ui/workers?done="), "{to}");
        assert!(worker(&ui, "w-1").await.draining);
        let html = ui.page(&client, &to).await;
        assert!(html.contains("worker w-1 draining"), "{html}");
        let w1 = row(&html, "w-1");
        assert!(w1.contains(">draining<") && w1.contains("action=\"/ui/workers/release\""));

        let resp = form(
            &client,
            &ui,
            "release",
            &[("csrf", &csrf), ("worker", "w-1")],
        )
        .await;
        assert_eq!(resp.status(), StatusCode::SEE_OTHER);
        assert!(!worker(&ui, "w-1").await.draining);

        // A worker that is not in the registry: back to the page, saying so.
        let resp = form(
            &client,
            &ui,
            "drain",
            &[("csrf", &csrf), ("worker", "nobody")],
        )
        .await;
        let to = resp.headers()[LOCATION].to_str().unwrap().to_owned();
        assert!(to.starts_with("/ui/workers?error="), "{to}");
    }
}

async fn readers_and_bad_forms_change_no_worker(backend: &str) {
    let Some(ui) = Ui::start(backend).await else {
        return;
    };
    register(&ui, "w-1", Queues::All).await;
    let (reader, _) = ui.sign_in(READER).await;
    let token = csrf(&ui.page(&reader, "/ui/workers").await); // the sign-out form
    let resp = form(
        &reader,
        &ui,
        "drain",
        &[("csrf", &token), ("worker", "w-1")],
    )
    .await;
    assert_eq!(resp.status(), StatusCode::FORBIDDEN);
    assert!(resp.text().await.unwrap().contains("role reader may not"));

    let (operator, _) = ui.sign_in(OPERATOR).await;
    let token = csrf(&ui.page(&operator, "/ui/workers").await);
    let cases: [(&str, Fields<'_>, StatusCode); 4] = [
        (
            "drain",
            vec![("csrf", "wrong"), ("worker", "w-1")],
            StatusCode::FORBIDDEN,
        ),
        ("drain", vec![("csrf", &token)], StatusCode::BAD_REQUEST),
        (
            "drain",
            vec![("csrf", &token), ("worker", " ")],
            StatusCode::BAD_REQUEST,
        ),
        (
            "explode",
            vec![("csrf", &token), ("worker", "w-1")],
            StatusCode::NOT_FOUND,
        ),
    ];
    for (op, fields, status) in cases {
        let resp = form(&operator, &ui, op, &fields).await;
        assert_eq!(resp.status(), status, "{op} {fields:?}");
    }
    assert!(!worker(&ui, "w-1").await.draining, "nothing changed");
}

/// A pending task's page says why it waits, in the registry's terms; the workers page
/// shows the kinds each worker handles, or that it did not say.
async fn a_pending_tasks_page_says_why_it_waits_and_workers_show_their_kinds(backend: &str) {
    let Some(ui) = Ui::start(backend).await else {
        return;
    };
    let mailer = Queues::Listed(vec!["default".into()]);
    register_with_kinds(&ui, "w-mail", mailer, Some(&["email", "sms"])).await;
    let submitted = ui
        .store
        .task_submit(tasktable_store::SubmitParams {
            tasks: vec![
                tasktable_core::NewTask::new("resize", serde_json::json!({})),
                tasktable_core::NewTask::new("resize", serde_json::json!({})).held(true),
            ],
            now: None,
        })
        .await
        .unwrap();
    let (client, _) = ui.sign_in(READER).await;
    let html = ui
        .page(&client, &format!("/ui/tasks/{}", submitted[0].id))
        .await;
    assert!(html.contains("<div id=\"waiting\">"), "{html}");
    assert!(
        html.contains(
            "<li data-reason=\"no_worker_for_kind\">no live worker handles kind &quot;resize&quot; in queue &quot;default&quot;</li>"
        ),
        "{html}"
    );
    let held = ui
        .page(&client, &format!("/ui/tasks/{}", submitted[1].id))
        .await;
    assert!(
        !held.contains("id=\"waiting\""),
        "a held task does not wait: {held}"
    );

    register(&ui, "w-old", Queues::All).await;
    let html = ui.page(&client, "/ui/workers").await;
    assert!(row(&html, "w-mail").contains("email, sms"), "{html}");
    assert!(row(&html, "w-old").contains(">unknown<"), "{html}");
    let html = ui
        .page(&client, &format!("/ui/tasks/{}", submitted[0].id))
        .await;
    assert!(
        html.contains("<li data-reason=\"turn\">"),
        "a worker whose kinds are unknown might take it: {html}"
    );
}
