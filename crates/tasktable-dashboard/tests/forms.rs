//! The dashboard over real HTTP on a real database (SQLite, PostgreSQL and MySQL): sign-in,
//! roles, CSRF, escaping, and the effect of each form on the task rows.

mod common;

use common::{csrf, Ui, OPERATOR, READER, WORKER};
use reqwest::StatusCode;
use tasktable_core::{NewTask, TaskState};

on_every_backend!(
    an_operator_cancels_and_retries_from_the_task_page,
    forms_without_the_csrf_token_are_refused_and_change_nothing,
    markup_in_payloads_and_errors_is_shown_escaped,
    readers_see_but_cannot_act_and_workers_cannot_sign_in,
    bulk_actions_show_how_many_tasks_they_touch_then_apply,
    a_filter_value_that_does_not_parse_refuses_the_bulk_action_instead_of_widening_it,
    readers_see_secret_payload_fields_redacted,
    an_operator_sets_and_clears_a_target_and_a_bad_one_changes_nothing,
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
