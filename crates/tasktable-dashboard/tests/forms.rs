//! The dashboard over real HTTP on a real database: sign-in, roles, CSRF, escaping, and
//! the effect of each form on the task rows.

use reqwest::redirect::Policy;
use reqwest::{Client, StatusCode};
use std::sync::Arc;
use tasktable_core::{NewTask, TaskState};
use tasktable_server::{AppState, Role, TokenSet};
use tasktable_store::{Store, SubmitParams};
use tasktable_testdb::TestDb;

const OPERATOR: &str = "operator-token-0123456789";
const READER: &str = "reader-token-0123456789";
const WORKER: &str = "worker-token-0123456789";

struct Ui {
    base: String,
    store: Arc<dyn Store>,
    _db: TestDb,
}

async fn start() -> Ui {
    let db = TestDb::fresh("sqlite")
        .await
        .expect("sqlite is always there");
    let store = db.store().await;
    let mut tokens = TokenSet::default();
    tokens.add_plain("ops", Role::Operator, OPERATOR).unwrap();
    tokens.add_plain("viewer", Role::Reader, READER).unwrap();
    tokens.add_plain("w", Role::Worker, WORKER).unwrap();
    let app = tasktable_dashboard::router(AppState::new(store.clone(), tokens));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ui {
        base,
        store,
        _db: db,
    }
}

impl Ui {
    async fn submit(&self, task: NewTask) -> i64 {
        self.store
            .task_submit(SubmitParams {
                tasks: vec![task],
                now: None,
            })
            .await
            .unwrap()[0]
            .id
    }

    async fn state(&self, id: i64) -> TaskState {
        self.store.task_get(id).await.unwrap().unwrap().state
    }

    /// A browser-like client signed in with `token`.
    async fn sign_in(&self, token: &str) -> (Client, StatusCode) {
        let client = Client::builder()
            .cookie_store(true)
            .redirect(Policy::none())
            .build()
            .unwrap();
        let resp = client
            .post(format!("{}/ui/login", self.base))
            .form(&[("token", token)])
            .send()
            .await
            .unwrap();
        (client, resp.status())
    }

    async fn page(&self, client: &Client, path: &str) -> String {
        let resp = client
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200, "{path}");
        resp.text().await.unwrap()
    }
}

/// The CSRF token in a page's forms.
fn csrf(html: &str) -> String {
    let at = html
        .find("name=\"csrf\" value=\"")
        .expect("a form with a CSRF token")
        + 19;
    html[at..at + 64].to_owned()
}

#[tokio::test]
async fn an_operator_cancels_and_retries_from_the_task_page() {
    let ui = start().await;
    let id = ui
        .submit(NewTask::new("mail", serde_json::json!({"to": "ada"})))
        .await;
    let (client, status) = ui.sign_in(OPERATOR).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    let html = ui.page(&client, &format!("/ui/tasks/{id}")).await;
    assert!(html.contains("Cancel") && html.contains("ops (operator)"));
    let token = csrf(&html);

    let resp = client
        .post(format!("{}/ui/tasks/{id}/cancel", ui.base))
        .form(&[("csrf", token.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    assert_eq!(ui.state(id).await, TaskState::Cancelled);
    let html = ui
        .page(&client, &format!("/ui/tasks/{id}?done=cancel%3A%20done"))
        .await;
    assert!(html.contains("cancel: done"));

    client
        .post(format!("{}/ui/tasks/{id}/retry", ui.base))
        .form(&[("csrf", token.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(ui.state(id).await, TaskState::Pending);
    // An illegal change is reported on the page, not applied.
    let resp = client
        .post(format!("{}/ui/tasks/{id}/release", ui.base))
        .form(&[("csrf", token.as_str())])
        .send()
        .await
        .unwrap();
    let to = resp.headers()["location"].to_str().unwrap().to_owned();
    assert!(to.contains("error="), "{to}");
    assert_eq!(ui.state(id).await, TaskState::Pending);
}

#[tokio::test]
async fn forms_without_the_csrf_token_are_refused_and_change_nothing() {
    let ui = start().await;
    let id = ui.submit(NewTask::new("mail", serde_json::json!(1))).await;
    let (client, _) = ui.sign_in(OPERATOR).await;
    for form in [vec![], vec![("csrf", "0".repeat(64))]] {
        let resp = client
            .post(format!("{}/ui/tasks/{id}/cancel", ui.base))
            .form(&form)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::FORBIDDEN);
        assert!(resp.text().await.unwrap().contains("CSRF"));
    }
    // A cross-site post carries no session cookie (SameSite=Strict): refused as well.
    let stranger = Client::builder().redirect(Policy::none()).build().unwrap();
    let resp = stranger
        .post(format!("{}/ui/queues/default/pause", ui.base))
        .form(&[("csrf", "x")])
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::FORBIDDEN);
    assert_eq!(ui.state(id).await, TaskState::Pending);
    let queues = ui.store.queue_list().await.unwrap();
    assert!(!queues[0].paused);
}

#[tokio::test]
async fn markup_in_payloads_and_errors_is_shown_escaped() {
    let ui = start().await;
    let evil = "<script>alert('x')</script>";
    let id = ui
        .submit(NewTask::new("mail", serde_json::json!({ "html": evil })).key(evil))
        .await;
    let (client, _) = ui.sign_in(READER).await;
    for path in [
        format!("/ui/tasks/{id}"),
        "/ui/tasks".to_owned(),
        format!("/ui/tasks?key={}", "%3Cscript%3E"),
    ] {
        let html = ui.page(&client, &path).await;
        assert!(!html.contains("<script>"), "{path} shows raw markup");
    }
    let html = ui.page(&client, &format!("/ui/tasks/{id}")).await;
    assert!(html.contains("&lt;script&gt;alert("), "shown, escaped");
}

#[tokio::test]
async fn readers_see_but_cannot_act_and_workers_cannot_sign_in() {
    let ui = start().await;
    let id = ui.submit(NewTask::new("mail", serde_json::json!(1))).await;
    let (client, _) = ui.sign_in(READER).await;
    let html = ui.page(&client, &format!("/ui/tasks/{id}")).await;
    assert!(
        !html.contains(&format!("/ui/tasks/{id}/cancel")),
        "no action forms for a reader"
    );
    let token = csrf(&html); // the sign-out form
    let resp = client
        .post(format!("{}/ui/tasks/{id}/cancel", ui.base))
        .form(&[("csrf", token.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::FORBIDDEN);
    assert_eq!(ui.state(id).await, TaskState::Pending);

    let (_, status) = ui.sign_in(WORKER).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (_, status) = ui.sign_in("not-a-token-at-all-xxxx").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let anonymous = Client::builder().redirect(Policy::none()).build().unwrap();
    let resp = anonymous
        .get(format!("{}/ui", ui.base))
        .send()
        .await
        .unwrap();
    assert_eq!(
        resp.headers()["location"],
        "/ui/login",
        "pages need a session"
    );
}

#[tokio::test]
async fn bulk_actions_show_how_many_tasks_they_touch_then_apply() {
    let ui = start().await;
    for i in 0..4 {
        ui.submit(NewTask::new(
            if i < 3 { "mail" } else { "sms" },
            serde_json::json!(i),
        ))
        .await;
    }
    let (client, _) = ui.sign_in(OPERATOR).await;
    let html = ui.page(&client, "/ui/tasks/bulk?op=hold&kind=mail").await;
    assert!(html.contains("<strong>3</strong> tasks"), "{html}");
    let token = csrf(&html);
    let resp = client
        .post(format!("{}/ui/tasks/bulk", ui.base))
        .form(&[("csrf", token.as_str()), ("op", "hold"), ("kind", "mail")])
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    let held = ui.store.queue_list().await.unwrap()[0]
        .counts
        .iter()
        .find(|(s, _)| *s == TaskState::Held)
        .map(|(_, n)| *n);
    assert_eq!(held, Some(3));
    let html = ui.page(&client, "/ui").await;
    assert!(
        html.contains("Pause"),
        "the overview offers to pause the queue"
    );
}

#[tokio::test]
async fn a_filter_value_that_does_not_parse_refuses_the_bulk_action_instead_of_widening_it() {
    let ui = start().await;
    let early = ui.submit(NewTask::new("mail", serde_json::json!(1))).await;
    let (client, _) = ui.sign_in(OPERATOR).await;
    let html = ui.page(&client, "/ui/tasks").await;
    let token = csrf(&html);
    for (field, value) in [("state", "exploded"), ("created_after", "yesterday")] {
        let resp = client
            .get(format!(
                "{}/ui/tasks/bulk?op=cancel&{field}={value}",
                ui.base
            ))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY, "{field}");
        assert!(resp.text().await.unwrap().contains(value), "{field}");
        let resp = client
            .post(format!("{}/ui/tasks/bulk", ui.base))
            .form(&[("csrf", token.as_str()), ("op", "cancel"), (field, value)])
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY, "{field}");
        assert_eq!(
            ui.state(early).await,
            TaskState::Pending,
            "nothing cancelled"
        );
        let list = ui
            .page(&client, &format!("/ui/tasks?{field}={value}"))
            .await;
        assert!(list.contains("No task matches."), "{field}: no rows shown");
        assert!(list.contains("class=\"flash error\""), "{field}: says why");
    }

    // A time range narrows the list and a bulk action to the tasks created in it.
    let created = ui.store.task_get(early).await.unwrap().unwrap().created_at;
    let after = (created + chrono::Duration::minutes(1)).format("%Y-%m-%dT%H:%M");
    let html = ui
        .page(&client, &format!("/ui/tasks?created_after={after}"))
        .await;
    assert!(html.contains("No task matches."), "{html}");
    let before = (created + chrono::Duration::minutes(1)).format("%Y-%m-%dT%H:%M");
    let html = ui
        .page(
            &client,
            &format!("/ui/tasks/bulk?op=hold&created_before={before}"),
        )
        .await;
    assert!(html.contains("<strong>1</strong> task "), "{html}");
}
