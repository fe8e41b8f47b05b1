//! The dashboard over real HTTP on a real database (SQLite, PostgreSQL and MySQL): sign-in,
//! roles, CSRF, escaping, and the effect of each form on the task rows.

mod common;

use common::{csrf, Ui, OPERATOR, READER, WORKER};
use reqwest::StatusCode;
use tasktable_core::policy::{QueuePolicy, Rate};
use tasktable_core::{NewTask, TaskState};
use tasktable_store::QueuePolicyParams;

on_every_backend!(
    an_operator_cancels_and_retries_from_the_task_page,
    the_task_page_offers_what_the_state_allows_and_an_error_while_it_is_current,
    forms_without_the_csrf_token_are_refused_and_change_nothing,
    markup_in_payloads_and_errors_is_shown_escaped,
    readers_see_but_cannot_act_and_workers_cannot_sign_in,
    bulk_actions_show_how_many_tasks_they_touch_then_apply,
    a_filter_value_that_does_not_parse_refuses_the_bulk_action_instead_of_widening_it,
    readers_see_secret_payload_fields_redacted,
    an_operator_sets_and_clears_a_target_and_a_bad_one_changes_nothing,
    the_task_page_shows_the_affinity_and_whom_a_retry_waits_for,
    an_operator_sets_a_queue_policy_from_its_page_and_clears_it,
    a_bad_queue_policy_is_refused_with_its_reason_and_changes_nothing,
    readers_see_a_queue_policy_but_cannot_set_one,
);

async fn readers_see_secret_payload_fields_redacted(backend: &str) {
    let Some(ui) = Ui::start(backend).await else {
        return;
    };
    let payload = serde_json::json!({
        "url": "https://bot:pa55word@hooks.example/x",
        "headers": {"Authorization": "Bearer sekr1t-header"},
    });
    let id = ui.submit(NewTask::new("http", payload)).await;
    let (reader, _) = ui.sign_in(READER).await;
    let html = ui.page(&reader, &format!("/ui/tasks/{id}")).await;
    for secret in ["sekr1t-header", "pa55word"] {
        assert!(!html.contains(secret), "a reader sees {secret}");
    }
    assert!(!html.contains("id=\"trace\""), "no trace, no row: {html}");
    assert!(
        html.contains("Authorization") && html.contains("[redacted]"),
        "{html}"
    );
    let (operator, _) = ui.sign_in(OPERATOR).await;
    let html = ui.page(&operator, &format!("/ui/tasks/{id}")).await;
    assert!(
        html.contains("sekr1t-header") && html.contains("pa55word"),
        "an operator, who may edit the payload, sees it whole"
    );
}

async fn an_operator_cancels_and_retries_from_the_task_page(backend: &str) {
    let Some(ui) = Ui::start(backend).await else {
        return;
    };
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

async fn the_task_page_offers_what_the_state_allows_and_an_error_while_it_is_current(
    backend: &str,
) {
    use std::time::Duration;
    use tasktable_core::outcome::{FinishPlan, HandlerOutcome};
    use tasktable_store::{ClaimParams, FinishItem, FinishParams};
    let Some(ui) = Ui::start(backend).await else {
        return;
    };
    let traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let id = ui
        .submit(
            NewTask::new("mail", serde_json::json!(1))
                .traceparent(tasktable_core::trace::TraceParent::parse(traceparent).unwrap()),
        )
        .await;
    let (client, _) = ui.sign_in(OPERATOR).await;
    let offered = |html: &str| -> Vec<String> {
        let ops = [
            "cancel",
            "retry",
            "hold",
            "release",
            "reschedule",
            "set-priority",
            "set-max-attempts",
            "set-target",
        ];
        ops.iter()
            .filter(|op| html.contains(&format!("action=\"/ui/tasks/{id}/{op}\"")))
            .map(|op| op.to_string())
            .collect()
    };
    let html = ui.page(&client, &format!("/ui/tasks/{id}")).await;
    assert_eq!(
        offered(&html),
        [
            "cancel",
            "retry",
            "hold",
            "reschedule",
            "set-priority",
            "set-max-attempts",
            "set-target"
        ],
        "pending: no release"
    );
    assert!(
        html.contains("Run now") && !html.contains("Retry now"),
        "{html}"
    );
    // The trace its attempts continue, by the id tracing tools search for.
    assert!(
        html.contains(&format!(
            "<dd id=\"trace\" title=\"{traceparent}\">4bf92f3577b34da6a3ce929d0e0e4736</dd>"
        )),
        "{html}"
    );
    // An attempt fails, then the task succeeds on its retry: its old error is history.
    let claim = || ClaimParams {
        queue: "default".into(),
        kinds: vec!["mail".into()],
        limit: 1,
        worker_id: "w1".into(),
        worker_host: "h".into(),
        worker_groups: Vec::new(),
        lease_for: Duration::from_secs(30),
        now: None,
    };
    let end = |t: &tasktable_core::Task, outcome| FinishParams {
        items: vec![FinishItem {
            lease: t.lease(),
            plan: FinishPlan::for_handler(outcome, t.attempt, &t.backoff, 0.0),
        }],
        only_if_expired: false,
        now: None,
    };
    let t = ui.store.task_claim(claim()).await.unwrap().remove(0);
    let failed = HandlerOutcome::Failed {
        message: "Traceback (most recent call last):\n  File \"job.py\", line 3\nValueError: bad"
            .into(),
    };
    ui.store.task_finish(end(&t, failed)).await.unwrap();
    let html = ui.page(&client, &format!("/ui/tasks/{id}")).await;
    assert!(
        html.contains("id=\"last-error\""),
        "failed: its error shows"
    );
    assert_eq!(offered(&html), ["retry", "set-target"], "failed");
    assert!(html.contains("Retry now"));
    // The history shows the traceback as text on its lines, not as escaped JSON.
    assert!(
        html.contains("<pre class=\"detail\">Traceback (most recent call last):\n  File &quot;job.py&quot;, line 3"),
        "{html}"
    );
    ui.store
        .task_update(tasktable_store::UpdateParams {
            target: tasktable_store::Target::Id(id),
            change: tasktable_store::Change::Retry,
            actor: tasktable_core::Actor::rust(),
            now: None,
            action: None,
        })
        .await
        .unwrap();
    let t = ui.store.task_claim(claim()).await.unwrap().remove(0);
    ui.store
        .task_finish(end(&t, HandlerOutcome::Succeeded { result: None }))
        .await
        .unwrap();
    let html = ui.page(&client, &format!("/ui/tasks/{id}")).await;
    assert!(offered(&html).is_empty(), "succeeded: {:?}", offered(&html));
    assert!(
        html.contains("No action applies to a succeeded task."),
        "{html}"
    );
    assert!(!html.contains("id=\"last-error\""), "{html}");
    let list = ui.page(&client, "/ui/tasks?error=ValueError").await;
    assert!(list.contains("No task matches."), "{list}");
}

async fn forms_without_the_csrf_token_are_refused_and_change_nothing(backend: &str) {
    let Some(ui) = Ui::start(backend).await else {
        return;
    };
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
    let resp = common::client()
        .post(format!("{}/ui/queues/pause", ui.base))
        .form(&[("csrf", "x"), ("queue", "default")])
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::FORBIDDEN);
    assert_eq!(ui.state(id).await, TaskState::Pending);
    let queues = ui.store.queue_list().await.unwrap();
    assert!(!queues[0].paused);
}

async fn markup_in_payloads_and_errors_is_shown_escaped(backend: &str) {
    let Some(ui) = Ui::start(backend).await else {
        return;
    };
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

async fn readers_see_but_cannot_act_and_workers_cannot_sign_in(backend: &str) {
    let Some(ui) = Ui::start(backend).await else {
        return;
    };
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
    let resp = common::client()
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

async fn bulk_actions_show_how_many_tasks_they_touch_then_apply(backend: &str) {
    let Some(ui) = Ui::start(backend).await else {
        return;
    };
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

async fn a_filter_value_that_does_not_parse_refuses_the_bulk_action_instead_of_widening_it(
    backend: &str,
) {
    let Some(ui) = Ui::start(backend).await else {
        return;
    };
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

async fn an_operator_sets_and_clears_a_target_and_a_bad_one_changes_nothing(backend: &str) {
    use tasktable_core::Target;
    let Some(ui) = Ui::start(backend).await else {
        return;
    };
    let id = ui
        .submit(
            NewTask::new("render", serde_json::json!(1)).target(Target::Groups(vec!["gpu".into()])),
        )
        .await;
    let (client, _) = ui.sign_in(OPERATOR).await;
    let html = ui.page(&client, &format!("/ui/tasks/{id}")).await;
    assert!(
        html.contains("groups gpu"),
        "the task page shows the target"
    );
    let list = ui.page(&client, "/ui/tasks").await;
    assert!(list.contains("groups gpu"), "the list shows it too");
    let token = csrf(&html);
    let target = |ui: &Ui| {
        let store = ui.store.clone();
        async move { store.task_get(id).await.unwrap().unwrap().target }
    };
    let post = |runs_on: &'static str, names: &'static str| {
        let client = client.clone();
        let url = format!("{}/ui/tasks/{id}/set-target", ui.base);
        let token = token.clone();
        async move {
            let resp = client
                .post(url)
                .form(&[
                    ("csrf", token.as_str()),
                    ("runs_on", runs_on),
                    ("names", names),
                ])
                .send()
                .await
                .unwrap();
            assert_eq!(resp.status(), StatusCode::SEE_OTHER);
            resp.headers()["location"].to_str().unwrap().to_owned()
        }
    };
    post("workers", "w1, w2").await;
    assert_eq!(
        target(&ui).await,
        Target::Workers(vec!["w1".into(), "w2".into()])
    );
    for (runs_on, names) in [("groups", ""), ("groups", "a|b"), ("hosts", "x")] {
        let to = post(runs_on, names).await;
        assert!(to.contains("error="), "{runs_on} {names:?}: {to}");
    }
    assert_eq!(
        target(&ui).await,
        Target::Workers(vec!["w1".into(), "w2".into()])
    );
    post("any", "").await;
    assert_eq!(target(&ui).await, Target::Any);
}

async fn the_task_page_shows_the_affinity_and_whom_a_retry_waits_for(backend: &str) {
    use std::time::Duration;
    use tasktable_core::outcome::{FinishPlan, HandlerOutcome};
    use tasktable_core::worker::{Protocol, Queues, WorkerFacts};
    use tasktable_store::{ClaimParams, FinishItem, FinishParams, WorkerBeatParams};
    let Some(ui) = Ui::start(backend).await else {
        return;
    };
    // A worker id with markup in it, to see it escaped.
    let worker = "w<b>1</b>";
    let id = ui
        .submit(NewTask::new("render", serde_json::json!(1)).affinity(Duration::from_secs(3600)))
        .await;
    let plain = ui.submit(NewTask::new("other", serde_json::json!(2))).await;
    let (client, _) = ui.sign_in(READER).await;
    let html = ui.page(&client, &format!("/ui/tasks/{id}")).await;
    assert!(html.contains("<dd id=\"affinity\">1h</dd>"), "{html}");
    assert!(!html.contains("waits for"), "no attempt failed yet: {html}");
    let html = ui.page(&client, &format!("/ui/tasks/{plain}")).await;
    assert!(html.contains("<dd id=\"affinity\">—</dd>"), "{html}");

    // The worker is registered, so live; its attempt fails and the retry waits for it.
    ui.store
        .worker_beat(WorkerBeatParams {
            facts: WorkerFacts {
                id: worker.into(),
                host: "h".into(),
                pid: None,
                version: "test".into(),
                groups: Vec::new(),
                queues: Queues::All,
                capacity: 1,
                protocol: Protocol::Process,
                kinds: None,
            },
            address: None,
            starting: true,
            now: None,
            owner: None,
            max_live_per_owner: None,
        })
        .await
        .unwrap();
    let claimed = ui
        .store
        .task_claim(ClaimParams {
            queue: "default".into(),
            kinds: vec!["render".into()],
            limit: 1,
            worker_id: worker.into(),
            worker_host: "h".into(),
            worker_groups: Vec::new(),
            lease_for: Duration::from_secs(30),
            now: None,
        })
        .await
        .unwrap();
    assert_eq!(claimed.iter().map(|t| t.id).collect::<Vec<_>>(), vec![id]);
    let failed = HandlerOutcome::Error {
        message: "try again".into(),
        retry_after: None,
    };
    let t = &claimed[0];
    let applied = ui
        .store
        .task_finish(FinishParams {
            items: vec![FinishItem {
                lease: t.lease(),
                plan: FinishPlan::for_handler(failed, t.attempt, &t.backoff, 0.5),
            }],
            only_if_expired: false,
            now: None,
        })
        .await
        .unwrap();
    assert_eq!(applied, vec![true]);
    let task = ui.store.task_get(id).await.unwrap().unwrap();
    let until = task.affinity_until.expect("the retry waits for its worker");
    assert_eq!(task.state, TaskState::Pending);

    let html = ui.page(&client, &format!("/ui/tasks/{id}")).await;
    let wait = format!(
        "<dd id=\"affinity\">1h<br><span id=\"affinity-wait\">waits for worker \
         w&lt;b&gt;1&lt;/b&gt; until <time datetime=\"{}\">",
        until.to_rfc3339()
    );
    assert!(html.contains(&wait), "{wait} in {html}");
    assert!(!html.contains("<b>1</b>"), "the worker id is escaped");
}

/// The policy the store holds for `queue` (the default when it lists no such queue).
async fn policy_of(ui: &Ui, queue: &str) -> QueuePolicy {
    ui.store
        .queue_list()
        .await
        .unwrap()
        .into_iter()
        .find(|q| q.name == queue)
        .map(|q| q.policy)
        .unwrap_or_default()
}

/// The text of the overview's policy cell on `queue`'s row, tags left out.
fn policy_cell(html: &str, queue: &str) -> String {
    // The queues table, after the statistics, whose rows link their queues the same way.
    let html = &html[html.find("<h2>Queues</h2>").expect("the queues table")..];
    let row = format!("<td><a href=\"/ui/tasks?queue={queue}\">{queue}</a></td>");
    let at = html
        .find(&row)
        .unwrap_or_else(|| panic!("a row for {queue}"));
    let cell = &html[at..];
    let start = cell.find("<td class=\"policy\">").expect("a policy cell");
    let cell = &cell[start..];
    let cell = &cell[..cell.find("</td>").unwrap()];
    let mut text = String::new();
    let mut in_tag = false;
    for c in cell.chars() {
        match c {
            '<' => in_tag = true,
            '>' => in_tag = false,
            c if !in_tag => text.push(c),
            _ => {}
        }
    }
    text.trim().to_owned()
}

/// Posts the policy form of `queue` with `fields`; answers where it redirects to.
async fn post_policy(
    ui: &Ui,
    client: &reqwest::Client,
    token: &str,
    queue: &str,
    fields: &[(&str, &str)],
) -> String {
    let mut form = vec![("csrf", token), ("queue", queue)];
    form.extend_from_slice(fields);
    let resp = client
        .post(ui.url("/ui/queues/policy"))
        .form(&form)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::SEE_OTHER, "{fields:?}");
    resp.headers()["location"].to_str().unwrap().to_owned()
}

/// A redirect's query value `name`, decoded.
fn query_value(location: &str, name: &str) -> Option<String> {
    let query = location.split_once('?')?.1;
    form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
}

async fn an_operator_sets_a_queue_policy_from_its_page_and_clears_it(backend: &str) {
    let Some(ui) = Ui::start(backend).await else {
        return;
    };
    ui.submit(NewTask::new("send", serde_json::json!(1)).queue("email"))
        .await;
    ui.submit(NewTask::new("render", serde_json::json!(1)).queue("reports"))
        .await;
    let (client, _) = ui.sign_in(OPERATOR).await;
    let html = ui.page(&client, "/ui").await;
    assert_eq!(policy_cell(&html, "email"), "— edit");
    let link = "/ui/queues/policy?queue=email";
    assert!(html.contains(&format!("href=\"{link}\"")), "{html}");

    let page = ui.page(&client, link).await;
    assert!(page.contains("action=\"/ui/queues/policy\""), "{page}");
    assert!(page.contains("Clear policy"), "{page}");
    let token = csrf(&page);
    let to = post_policy(
        &ui,
        &client,
        &token,
        "email",
        &[
            ("max_running", "4"),
            ("kind_max_running", "send=2, digest=1"),
            ("rate", "2.5"),
            ("rate_burst", "5"),
            ("key_rate", "0.5"),
            ("key_rate_burst", ""),
            ("one_per_worker", "on"),
            ("fair_share", "on"),
        ],
    )
    .await;
    let done = query_value(&to, "done").unwrap_or_else(|| panic!("done: {to}"));
    let brief = "≤ 4 running · digest ≤ 1, send ≤ 2 · 2.5/s (burst 5) · 30/min per key · \
                 one per worker · fair share";
    assert_eq!(done, format!("queue email: policy set: {brief}"));
    assert_eq!(query_value(&to, "queue").as_deref(), Some("email"));
    let want = QueuePolicy {
        max_running: Some(4),
        kind_max_running: [("send".to_owned(), 2), ("digest".to_owned(), 1)].into(),
        rate: Some(Rate::per_second(2.5).with_burst(5)),
        key_rate: Some(Rate::per_second(0.5)),
        one_per_worker: true,
        fair_share: true,
    };
    assert_eq!(policy_of(&ui, "email").await, want);
    assert_eq!(policy_of(&ui, "reports").await, QueuePolicy::default());

    // The page it comes back to says so, shows it, and fills the form in with it.
    let page = ui.page(&client, &to).await;
    assert!(
        page.contains(&format!("<div class=\"flash\">{done}</div>")),
        "{page}"
    );
    assert!(
        page.contains(&format!("<strong id=\"policy\">{brief}</strong>")),
        "{page}"
    );
    for field in [
        "name=\"max_running\" min=\"0\" max=\"1000000\" class=\"narrow\" value=\"4\"",
        "value=\"digest=1, send=2\"",
        "name=\"rate\" step=\"any\"",
        "value=\"2.5\"",
        "value=\"0.5\"",
        "name=\"one_per_worker\" checked",
        "name=\"fair_share\" checked",
    ] {
        assert!(page.contains(field), "{field}: {page}");
    }
    let html = ui.page(&client, "/ui").await;
    assert_eq!(policy_cell(&html, "email"), format!("{brief} edit"));
    assert_eq!(policy_cell(&html, "reports"), "— edit");

    // Saving with fields emptied limits only what is left.
    let to = post_policy(&ui, &client, &token, "email", &[("max_running", "1")]).await;
    assert_eq!(
        query_value(&to, "done").as_deref(),
        Some("queue email: policy set: ≤ 1 running")
    );
    let only_one = QueuePolicy {
        max_running: Some(1),
        ..QueuePolicy::default()
    };
    assert_eq!(policy_of(&ui, "email").await, only_one);

    // The clear button.
    let to = post_policy(&ui, &client, &token, "email", &[("clear", "1")]).await;
    assert_eq!(
        query_value(&to, "done").as_deref(),
        Some("queue email: policy cleared")
    );
    assert_eq!(policy_of(&ui, "email").await, QueuePolicy::default());
    assert!(!policy_of(&ui, "email").await.is_limited());
    let html = ui.page(&client, "/ui").await;
    assert_eq!(policy_cell(&html, "email"), "— edit");

    // A queue with no tasks yet can be given a policy from its page; it is then listed.
    let page = ui.page(&client, "/ui/queues/policy?queue=later").await;
    assert!(page.contains("no tasks yet"), "{page}");
    post_policy(&ui, &client, &token, "later", &[("rate", "10")]).await;
    assert_eq!(
        policy_of(&ui, "later").await.rate,
        Some(Rate::per_second(10.0))
    );
    let html = ui.page(&client, "/ui").await;
    assert_eq!(policy_cell(&html, "later"), "10/s edit");
}

async fn a_bad_queue_policy_is_refused_with_its_reason_and_changes_nothing(backend: &str) {
    let Some(ui) = Ui::start(backend).await else {
        return;
    };
    ui.submit(NewTask::new("send", serde_json::json!(1)).queue("email"))
        .await;
    let (client, _) = ui.sign_in(OPERATOR).await;
    let token = csrf(&ui.page(&client, "/ui/queues/policy?queue=email").await);
    post_policy(
        &ui,
        &client,
        &token,
        "email",
        &[("max_running", "3"), ("one_per_worker", "on")],
    )
    .await;
    let before = policy_of(&ui, "email").await;
    assert_eq!(before.max_running, Some(3));

    for (fields, reason) in [
        (
            vec![("max_running", "four")],
            "max running must be a whole number from 0 to 1000000, not \"four\"",
        ),
        (
            vec![("max_running", "-1")],
            "max running must be a whole number",
        ),
        (
            vec![("max_running", "5000000")],
            "max running must be a whole number",
        ),
        (
            vec![("kind_max_running", "send:2")],
            "per-kind limits: \"send:2\" is not kind=N",
        ),
        (
            vec![("kind_max_running", "send=2, send=3")],
            "kind \"send\" is limited twice",
        ),
        (
            vec![("kind_max_running", "send=lots")],
            "the limit of kind \"send\" must be a whole number",
        ),
        (
            vec![("rate", "fast")],
            "the rate must be a number of starts per second",
        ),
        (vec![("rate", "0")], "one a day"),
        (
            vec![("rate", "1"), ("rate_burst", "0")],
            "the burst of the rate must be a whole number from 1",
        ),
        (
            vec![("key_rate_burst", "4")],
            "a burst needs a rate per key",
        ),
        (
            vec![("key_rate", "1e9")],
            "the rate per key must be a number",
        ),
    ] {
        let mut typed = fields.clone();
        typed.push(("fair_share", "on"));
        let to = post_policy(&ui, &client, &token, "email", &typed).await;
        let error = query_value(&to, "error").unwrap_or_else(|| panic!("{fields:?}: {to}"));
        assert!(
            error.starts_with("queue email: nothing changed: "),
            "{error}"
        );
        assert!(error.contains(reason), "{fields:?}: {error}");
        assert_eq!(policy_of(&ui, "email").await, before, "{fields:?}");
        // Back on the page: the reason, the policy in force, and what was typed.
        let page = ui.page(&client, &to).await;
        assert!(page.contains("class=\"flash error\""), "{page}");
        assert!(
            page.contains("<strong id=\"policy\">≤ 3 running · one per worker</strong>"),
            "{page}"
        );
        let (name, value) = fields[0];
        assert!(
            page.contains(&format!("name=\"{name}\""))
                && page.contains(&format!("value=\"{value}\"")),
            "{name}={value} refilled: {page}"
        );
        assert!(page.contains("name=\"fair_share\" checked"), "{page}");
        assert!(
            !page.contains("name=\"one_per_worker\" checked"),
            "as typed: {page}"
        );
    }
    // A name the store refuses is reported the same way.
    let long = "q".repeat(300);
    let to = post_policy(&ui, &client, &token, &long, &[("max_running", "1")]).await;
    let error = query_value(&to, "error").unwrap_or_else(|| panic!("{to}"));
    assert!(error.contains("a queue is 1 to 255 characters"), "{error}");
    // No queue at all is no form of this page.
    let resp = client
        .post(ui.url("/ui/queues/policy"))
        .form(&[("csrf", token.as_str()), ("max_running", "1")])
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let resp = client
        .get(ui.url("/ui/queues/policy"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
    assert_eq!(policy_of(&ui, "email").await, before);
    assert_eq!(
        ui.store.queue_list().await.unwrap().len(),
        1,
        "no queue made"
    );
}

async fn readers_see_a_queue_policy_but_cannot_set_one(backend: &str) {
    let Some(ui) = Ui::start(backend).await else {
        return;
    };
    ui.submit(NewTask::new("send", serde_json::json!(1)).queue("email"))
        .await;
    ui.submit(NewTask::new("render", serde_json::json!(1)).queue("reports"))
        .await;
    let set = QueuePolicy {
        max_running: Some(2),
        rate: Some(Rate::per_second(1.0 / 600.0)),
        ..QueuePolicy::default()
    };
    ui.store
        .queue_set_policy(QueuePolicyParams {
            actor: tasktable_core::Actor::rust(),
            queue: "email".into(),
            policy: set.clone(),
        })
        .await
        .unwrap();
    let (reader, _) = ui.sign_in(READER).await;
    let html = ui.page(&reader, "/ui").await;
    assert_eq!(policy_cell(&html, "email"), "≤ 2 running · 6/h details");
    assert_eq!(
        policy_cell(&html, "reports"),
        "—",
        "no link to an empty policy"
    );
    let page = ui.page(&reader, "/ui/queues/policy?queue=email").await;
    assert!(
        page.contains("<strong id=\"policy\">≤ 2 running · 6/h</strong>"),
        "{page}"
    );
    for form in [
        "action=\"/ui/queues/policy\"",
        "name=\"max_running\"",
        "Clear policy",
    ] {
        assert!(!page.contains(form), "a reader sees {form}: {page}");
    }
    let token = csrf(&page); // the sign-out form's
    for fields in [vec![("max_running", "9")], vec![("clear", "1")]] {
        let mut form = vec![("csrf", token.as_str()), ("queue", "email")];
        form.extend(fields);
        let resp = reader
            .post(ui.url("/ui/queues/policy"))
            .form(&form)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::FORBIDDEN);
        assert!(resp.text().await.unwrap().contains("may not change"));
        assert_eq!(policy_of(&ui, "email").await, set);
    }
    // An operator's post without the session's CSRF token is refused too.
    let (operator, _) = ui.sign_in(OPERATOR).await;
    for form in [vec![], vec![("csrf", "0".repeat(64))]] {
        let mut form: Vec<(&str, String)> = form;
        form.push(("queue", "email".into()));
        form.push(("clear", "1".into()));
        let resp = operator
            .post(ui.url("/ui/queues/policy"))
            .form(&form)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::FORBIDDEN);
        assert!(resp.text().await.unwrap().contains("CSRF"));
    }
    assert_eq!(policy_of(&ui, "email").await, set);
}
