//! The dashboard in a real headless Chromium, driven through chromedriver: sign-in, the
//! overview's counts, the task filter, a task's page, and the forms that cancel, retry and
//! pause, set and clear a queue's policy, a schedule's disable, enable and fire-now
//! buttons, and a batch's progress and its pause and resume buttons, each checked on the page and in the store; a
//! cancel's row in the task's history and on the audit page. The last test saves screenshots of the main pages.
//!
//! Needs `chromium` and `chromedriver` (Debian: `apt-get install chromium chromium-driver`;
//! other paths through TASKTABLE_TEST_CHROME and TASKTABLE_TEST_CHROMEDRIVER). Without
//! them each test says why on stderr and passes, except under CI, where it fails.

mod browser {
    pub mod app;
    pub mod driver;
    pub mod showcase;
}

use browser::app::{App, ADMIN, OPERATOR};
use browser::driver::Browser;
use browser::showcase;
use fantoccini::Locator::XPath;
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use tasktable_core::{NewTask, TaskId, TaskState};
use tasktable_store::{ListParams, StatsParams, TaskFilter};

const SIGN_IN: &str = "form[action='/ui/login'] button[type=submit]";

/// Signs in through the form and waits for the overview to name the user.
async fn sign_in(b: &Browser, app: &App, token: &str, who: &str) {
    b.goto(&app.url("/ui/login")).await;
    b.fill("token", token).await;
    b.click(SIGN_IN).await;
    b.find(XPath(&format!(
        "//header//*[contains(@class, 'who') and contains(., '{who}')]"
    )))
    .await;
}

/// The state badge in a task page's heading.
async fn heading_state(b: &Browser) -> String {
    b.text("h1 .state").await
}

#[tokio::test]
async fn signing_in_takes_a_valid_token_and_refuses_an_unknown_one() {
    let Some(b) = Browser::start().await else {
        return;
    };
    let app = App::start().await;
    let id = app
        .submit(NewTask::new("email.send", json!({"to": "ada@example.com"})))
        .await;

    b.goto(&app.url("/ui/tasks")).await;
    b.css("input[name=token]").await;
    assert_eq!(b.path().await, "/ui/login", "pages need a session");

    b.fill("token", "not-a-token-at-all-0000").await;
    b.click(SIGN_IN).await;
    b.flash("error", "Unknown token.").await;
    assert!(
        b.client()
            .get_named_cookie("tasktable_session")
            .await
            .is_err(),
        "no session for an unknown token"
    );

    b.fill("token", ADMIN).await;
    b.click(SIGN_IN).await;
    b.find(XPath(
        "//header//*[contains(@class, 'who') and contains(., 'root (admin)')]",
    ))
    .await;
    assert_eq!(b.path().await, "/ui");
    let cookie = b
        .client()
        .get_named_cookie("tasktable_session")
        .await
        .expect("a session cookie");
    assert_eq!(cookie.http_only(), Some(true), "scripts cannot read it");

    b.goto(&app.url("/ui/tasks")).await;
    let link = b.css(&format!("#tasks a[href='/ui/tasks/{id}']")).await;
    assert_eq!(link.text().await.unwrap(), id.to_string());
    assert_eq!(
        b.text("#tasks tbody tr td:nth-child(3)").await,
        app.task(id).await.kind
    );

    b.click("header form[action='/ui/logout'] button").await;
    b.css("input[name=token]").await;
    b.goto(&app.url("/ui")).await;
    b.css("input[name=token]").await;
    assert_eq!(b.path().await, "/ui/login", "signed out");
    b.close().await;
}

#[tokio::test]
async fn the_overview_counts_what_the_store_holds_and_the_filter_narrows_the_list() {
    let Some(b) = Browser::start().await else {
        return;
    };
    let app = App::start().await;
    let mut wanted = BTreeSet::new();
    for to in ["ada", "grace", "linus"] {
        let task = NewTask::new("email.send", json!({ "to": to })).queue("email");
        wanted.insert(app.submit(task).await);
    }
    let held = NewTask::new("email.send", json!({"to": "alan"})).queue("email");
    app.submit(held.held(true)).await;
    app.submit(NewTask::new("email.digest", json!({})).queue("email"))
        .await;
    app.submit(NewTask::new("email.send", json!({"to": "edsger"})))
        .await;
    // Failed first: a worker claims the first due task of its kind.
    let broken = NewTask::new("report.render", json!({"month": "1999-13"})).queue("reports");
    app.failed(broken, "no such month").await;
    for month in ["2025-04", "2025-05"] {
        let task = NewTask::new("report.render", json!({ "month": month })).queue("reports");
        app.submit(task).await;
    }

    sign_in(&b, &app, OPERATOR, "ops (operator)").await;
    let mut totals: BTreeMap<TaskState, u64> = TaskState::ALL.iter().map(|s| (*s, 0)).collect();
    for queue in app.store.queue_list().await.unwrap() {
        for (state, n) in queue.counts {
            *totals.entry(state).or_default() += n;
        }
    }
    assert_eq!(
        (
            totals[&TaskState::Pending],
            totals[&TaskState::Held],
            totals[&TaskState::Failed]
        ),
        (7, 1, 1)
    );
    for (state, n) in &totals {
        let card = format!("a.card[href='/ui/tasks?state={state}'] .n");
        assert_eq!(b.text(&card).await, n.to_string(), "the {state} card");
    }
    // The statistics: one row per queue and kind the store reports, the failing kind
    // first with its failure linked to the failed tasks, and both charts drawn.
    let stats = app
        .store
        .stats(StatsParams::window(Duration::from_secs(3600)))
        .await
        .unwrap();
    assert_eq!(b.count("#kinds tbody tr").await, stats.groups.len());
    let first_row = b.text("#kinds tbody tr:first-child").await;
    assert!(
        first_row.starts_with("reports report.render"),
        "{first_row}"
    );
    assert_eq!(
        b.text("#kinds a[href='/ui/tasks?queue=reports&kind=report.render&state=failed']")
            .await,
        "1"
    );
    assert_eq!(b.count("figure.chart svg[role=img]").await, 2);

    b.goto(&app.url("/ui/tasks")).await;
    b.css("#tasks").await;
    assert_eq!(
        b.count("#tasks tbody tr").await,
        9,
        "every task, unfiltered"
    );
    b.fill("queue", "email").await;
    b.fill("kind", "email.send").await;
    let state = b.css("select[name=state]").await;
    state.select_by_value("pending").await.unwrap();
    b.click("form.filters button[type=submit]").await;
    // The filled-in value is in the markup only once the filtered page has loaded.
    b.css("form.filters input[name=queue][value=email]").await;

    let mut shown = BTreeSet::new();
    for row in b
        .client()
        .find_all(XPath("//table[@id='tasks']/tbody/tr"))
        .await
        .unwrap()
    {
        let mut cells = Vec::new();
        for cell in row.find_all(fantoccini::Locator::Css("td")).await.unwrap() {
            cells.push(cell.text().await.unwrap());
        }
        assert_eq!(cells[1..4], ["pending", "email.send", "email"], "{cells:?}");
        shown.insert(cells[0].parse::<TaskId>().unwrap());
    }
    let filter = TaskFilter {
        queue: Some("email".into()),
        kind: Some("email.send".into()),
        states: vec![TaskState::Pending],
        ..TaskFilter::default()
    };
    let matching = app
        .store
        .task_list(ListParams {
            filter,
            after: None,
            limit: 100,
            light: false,
        })
        .await
        .unwrap();
    let in_store: BTreeSet<TaskId> = matching.tasks.iter().map(|t| t.id).collect();
    assert_eq!(shown, in_store);
    assert_eq!(shown, wanted);
    b.close().await;
}

#[tokio::test]
async fn a_task_opened_from_the_list_shows_its_payload_as_text() {
    let Some(b) = Browser::start().await else {
        return;
    };
    let app = App::start().await;
    let evil = "<script>alert(1)</script><img src=x onerror=alert(2)>";
    let payload = json!({ "to": "ada@example.com", "html": evil });
    let id = app
        .submit(NewTask::new("email.send", payload.clone()).key("<b>vip</b>"))
        .await;
    app.submit(NewTask::new(
        "email.send",
        json!({"to": "grace@example.org"}),
    ))
    .await;

    sign_in(&b, &app, OPERATOR, "ops (operator)").await;
    b.goto(&app.url("/ui/tasks")).await;
    b.click(&format!("#tasks a[href='/ui/tasks/{id}']")).await;
    let shown = b.css("#payload pre").await.text().await.unwrap();
    assert_eq!(b.path().await, format!("/ui/tasks/{id}"));

    assert!(shown.contains(evil), "shown literally: {shown}");
    let parsed: serde_json::Value = serde_json::from_str(&shown).expect("the payload as JSON");
    assert_eq!(parsed, app.task(id).await.payload);
    assert_eq!(parsed, payload);
    assert!(b
        .client()
        .get_alert_text()
        .await
        .unwrap_err()
        .is_no_such_alert());
    let scripts = b
        .client()
        .execute("return document.scripts.length", vec![])
        .await
        .unwrap();
    assert_eq!(scripts, json!(0), "the page runs no script at all");
    assert_eq!(b.count("main img").await, 0);
    assert_eq!(b.count("main b").await, 0);
    assert!(b.text("main dl").await.contains("<b>vip</b>"));
    b.close().await;
}

#[tokio::test]
async fn a_multi_run_task_shows_copies_in_the_list_and_its_runs_on_its_page() {
    let Some(b) = Browser::start().await else {
        return;
    };
    let app = App::start().await;
    let id = app
        .submit(
            NewTask::new("cache.warm", json!({"region": "eu"}))
                .runs(tasktable_core::runs::Runs::copies(3)),
        )
        .await;
    let first = app.claim(id, "edge-a", "a.example").await;
    app.finish(
        &first,
        tasktable_core::HandlerOutcome::Succeeded { result: None },
    )
    .await;
    app.claim(id, "edge-b", "b.example").await;

    sign_in(&b, &app, OPERATOR, "ops (operator)").await;
    b.goto(&app.url("/ui/tasks")).await;
    let row = b
        .find(XPath(&format!(
            "//table[@id='tasks']//tr[td/a[@href='/ui/tasks/{id}']]"
        )))
        .await;
    assert!(row.text().await.unwrap().contains("1/3 done"));
    b.click(&format!("#tasks a[href='/ui/tasks/{id}']")).await;
    assert_eq!(heading_state(&b).await, "running");
    assert_eq!(
        b.text("#runs-summary").await,
        "1 of 3 done, 1 running · at most 3 at once"
    );
    assert_eq!(b.count("#runs tbody tr").await, 2);
    let runs = b.text("#runs tbody").await;
    assert!(
        runs.contains("edge-a") && runs.contains("succeeded"),
        "{runs}"
    );
    assert!(
        runs.contains("edge-b") && runs.contains("running"),
        "{runs}"
    );
    b.close().await;
}

#[tokio::test]
async fn cancelling_a_pending_task_from_its_page() {
    let Some(b) = Browser::start().await else {
        return;
    };
    let app = App::start().await;
    let id = app
        .submit(NewTask::new("email.send", json!({"to": "ada@example.com"})))
        .await;

    sign_in(&b, &app, OPERATOR, "ops (operator)").await;
    b.goto(&app.url(&format!("/ui/tasks/{id}"))).await;
    b.css("#actions").await;
    assert_eq!(heading_state(&b).await, "pending");
    // A pending task says why it waits: no worker has registered.
    let waiting = b.text("#waiting").await;
    assert!(waiting.contains("Why it waits"), "{waiting}");
    assert!(waiting.contains("no worker is live"), "{waiting}");
    b.click(&format!(
        "#actions form[action='/ui/tasks/{id}/cancel'] button"
    ))
    .await;
    b.flash("flash", "cancel: done").await;
    assert_eq!(heading_state(&b).await, "cancelled");
    assert_eq!(app.state(id).await, TaskState::Cancelled);
    assert_eq!(
        b.count("#waiting").await,
        0,
        "a cancelled task does not wait"
    );

    // The task's history and the audit both say who cancelled it, from where.
    let history = b.text("#history").await;
    assert!(history.contains("submitted"), "{history}");
    assert!(
        history.contains("cancelled") && history.contains("ops (operator, dashboard)"),
        "{history}"
    );
    b.goto(&app.url("/ui/audit")).await;
    let row = b.text("#audit tbody tr").await;
    assert!(row.contains("cancelled"), "{row}");
    assert!(row.contains(&format!("task {id}")), "{row}");
    assert!(row.contains("ops (operator, dashboard)"), "{row}");
    b.goto(&app.url("/ui/audit?actor=someone-else")).await;
    assert!(b.text("#audit").await.contains("No events match."));
    b.close().await;
}

#[tokio::test]
async fn a_live_page_follows_the_event_stream_and_reloads_when_something_happens() {
    let Some(b) = Browser::start().await else {
        return;
    };
    let app = App::start().await;
    app.submit(NewTask::new("email.send", json!({})).queue("email"))
        .await;
    sign_in(&b, &app, OPERATOR, "ops (operator)").await;
    app.wait_for_streams(1).await;
    b.execute("window.unchanged = true; return null").await;
    app.submit(NewTask::new("report.render", json!({})).queue("fresh"))
        .await;
    b.find(XPath("//a[@href='/ui/tasks?queue=fresh']")).await;
    assert_eq!(
        b.execute("return typeof window.unchanged").await,
        json!("undefined"),
        "the page was loaded again"
    );
    app.wait_for_streams(1).await;
    b.goto(&app.url("/ui/tasks")).await;
    app.wait_for_streams(0).await;
    b.close().await;
}

#[tokio::test]
async fn retrying_a_failed_task_makes_it_pending_again() {
    let Some(b) = Browser::start().await else {
        return;
    };
    let app = App::start().await;
    let error = "renderer exited with signal 9";
    let id = app
        .failed(
            NewTask::new("report.render", json!({"month": "2025-05"})),
            error,
        )
        .await;

    sign_in(&b, &app, OPERATOR, "ops (operator)").await;
    b.goto(&app.url(&format!("/ui/tasks/{id}"))).await;
    b.css("#actions").await;
    assert_eq!(heading_state(&b).await, "failed");
    assert!(b.text("dd.err").await.contains(error));
    b.click(&format!(
        "#actions form[action='/ui/tasks/{id}/retry'] button"
    ))
    .await;
    b.flash("flash", "retry: done").await;
    assert_eq!(heading_state(&b).await, "pending");
    assert_eq!(app.state(id).await, TaskState::Pending);
    let history = b.text("#attempts tbody tr").await;
    assert!(
        history.contains("error") && history.contains(error),
        "the failed attempt stays in the history: {history}"
    );
    b.close().await;
}

#[tokio::test]
async fn pausing_and_resuming_a_queue_from_the_overview() {
    let Some(b) = Browser::start().await else {
        return;
    };
    let app = App::start().await;
    app.submit(NewTask::new("email.send", json!({})).queue("email"))
        .await;
    app.submit(NewTask::new("report.render", json!({})).queue("reports"))
        .await;
    let badge = "//tr[td/a[@href='/ui/tasks?queue=email']]//span[contains(@class, 'state')]";

    sign_in(&b, &app, OPERATOR, "ops (operator)").await;
    assert_eq!(b.find(XPath(badge)).await.text().await.unwrap(), "active");
    b.click("form[action='/ui/queues/pause']:has(input[name=queue][value=email]) button")
        .await;
    b.flash("flash", "queue email: paused").await;
    assert_eq!(b.find(XPath(badge)).await.text().await.unwrap(), "paused");
    assert!(app.queue("email").await.paused);
    assert!(!app.queue("reports").await.paused, "only the one queue");

    b.click("form[action='/ui/queues/resume']:has(input[name=queue][value=email]) button")
        .await;
    b.flash("flash", "queue email: resumed").await;
    assert_eq!(b.find(XPath(badge)).await.text().await.unwrap(), "active");
    assert!(!app.queue("email").await.paused);
    b.close().await;
}

#[tokio::test]
async fn setting_and_clearing_a_queue_policy_from_its_page() {
    let Some(b) = Browser::start().await else {
        return;
    };
    let app = App::start().await;
    app.submit(NewTask::new("email.send", json!({})).queue("email"))
        .await;
    app.submit(NewTask::new("report.render", json!({})).queue("reports"))
        .await;
    let cell = "//tr[td/a[@href='/ui/tasks?queue=email']]/td[contains(@class, 'policy')]";

    sign_in(&b, &app, OPERATOR, "ops (operator)").await;
    assert_eq!(b.find(XPath(cell)).await.text().await.unwrap(), "— edit");
    b.find(XPath(&format!("{cell}/a[text()='edit']")))
        .await
        .click()
        .await
        .unwrap();
    b.css("#policy-form").await;
    assert_eq!(b.path().await, "/ui/queues/policy");
    assert_eq!(b.text("#policy").await, "—");

    b.fill("max_running", "4").await;
    b.fill("kind_max_running", "email.send=2").await;
    b.fill("rate", "2.5").await;
    b.fill("rate_burst", "5").await;
    b.click("#policy-form input[name=one_per_worker]").await;
    b.click("#policy-form button[type=submit]").await;
    let brief = "≤ 4 running · email.send ≤ 2 · 2.5/s (burst 5) · one per worker";
    b.flash("flash", &format!("queue email: policy set: {brief}"))
        .await;
    assert_eq!(b.text("#policy").await, brief);
    let policy = app.queue("email").await.policy;
    assert_eq!(policy.max_running, Some(4));
    assert_eq!(policy.kind_max_running.get("email.send"), Some(&2));
    assert_eq!(
        policy.rate.map(|r| (r.per_second, r.burst)),
        Some((2.5, Some(5)))
    );
    assert!(policy.one_per_worker && !policy.fair_share && policy.key_rate.is_none());
    assert!(
        !app.queue("reports").await.policy.is_limited(),
        "only the one queue"
    );

    // A mistake is refused with its reason; what was typed stays in the form.
    b.fill("kind_max_running", "email.send:3").await;
    b.click("#policy-form button[type=submit]").await;
    b.flash("error", "is not kind=N").await;
    assert_eq!(
        b.css("input[name=kind_max_running]")
            .await
            .prop("value")
            .await
            .unwrap()
            .as_deref(),
        Some("email.send:3")
    );
    assert_eq!(app.queue("email").await.policy, policy, "nothing changed");

    b.click("header a[href='/ui']").await;
    assert_eq!(
        b.find(XPath(cell)).await.text().await.unwrap(),
        format!("{brief} edit")
    );
    b.find(XPath(&format!("{cell}/a[text()='edit']")))
        .await
        .click()
        .await
        .unwrap();
    b.click("form:has(input[name=clear]) button").await;
    b.flash("flash", "queue email: policy cleared").await;
    assert_eq!(b.text("#policy").await, "—");
    assert!(!app.queue("email").await.policy.is_limited());
    b.close().await;
}

#[tokio::test]
async fn disabling_enabling_and_firing_a_schedule_from_its_page() {
    let Some(b) = Browser::start().await else {
        return;
    };
    let app = App::start().await;
    let id = app
        .schedule(json!({
            "name": "nightly-report",
            "recurrence": {"type": "cron", "expr": "0 2 * * *", "zone": "Europe/Berlin"},
            "template": {"kind": "report.render", "queue": "reports"},
        }))
        .await
        .id;
    let page = format!("/ui/schedules/{id}");

    sign_in(&b, &app, OPERATOR, "ops (operator)").await;
    b.click("header a[href='/ui/schedules']").await;
    b.click(&format!("#schedules a[href='{page}']")).await;
    assert_eq!(b.path().await, page);
    assert!(
        b.text("main dl").await.contains("+0"),
        "fire times with offsets"
    );

    b.click(&format!("#actions form[action='{page}/disable'] button"))
        .await;
    b.flash("flash", "disabled").await;
    assert!(!app.schedule_get(id).await.spec.enabled);
    assert!(b.text("main dl").await.contains("none while disabled"));

    b.click(&format!("#actions form[action='{page}/enable'] button"))
        .await;
    b.flash("flash", "enabled").await;
    assert!(app.schedule_get(id).await.spec.enabled);

    b.click(&format!("#actions form[action='{page}/fire'] button"))
        .await;
    b.flash("flash", "fired now by its schedule").await;
    let path = b.path().await;
    let task: TaskId = path
        .strip_prefix("/ui/tasks/")
        .and_then(|id| id.parse().ok())
        .unwrap_or_else(|| panic!("on the fired task's page: {path}"));
    assert_eq!(app.task(task).await.schedule_id, Some(id));
    assert_eq!(app.schedule_get(id).await.last_task_id, Some(task));

    b.click(&format!("main dl a[href='{page}']")).await;
    b.css(&format!("#fired a[href='/ui/tasks/{task}']")).await;
    b.close().await;
}

#[tokio::test]
async fn draining_and_releasing_a_worker_from_the_workers_page() {
    let Some(b) = Browser::start().await else {
        return;
    };
    let app = App::start().await;
    app.register("gpu-7", "gpu-host", &["gpu"], &["render"], 2)
        .await;
    let id = app
        .submit(NewTask::new("render", json!({})).queue("render"))
        .await;
    app.claim(id, "gpu-7", "gpu-host").await;

    sign_in(&b, &app, OPERATOR, "ops (operator)").await;
    b.click("header a[href='/ui/workers']").await;
    let row = "tr[data-worker='gpu-7']";
    let shown = b.text(row).await;
    for text in ["gpu-host", "active", "1 / 2", "render", "gpu"] {
        assert!(shown.contains(text), "{text} in {shown}");
    }
    b.css(&format!("{row} a[href='/ui/tasks/{id}']")).await;

    b.click(&format!("{row} form[action='/ui/workers/drain'] button"))
        .await;
    b.flash("flash", "worker gpu-7 draining").await;
    assert!(app.worker("gpu-7").await.draining);
    assert!(b.text(row).await.contains("draining"));

    b.click(&format!("{row} form[action='/ui/workers/release'] button"))
        .await;
    b.flash("flash", "worker gpu-7 released").await;
    assert!(!app.worker("gpu-7").await.draining);
    b.close().await;
}

#[tokio::test]
async fn a_batch_shows_its_progress_and_pauses_and_resumes_from_its_pages() {
    use tasktable_core::batch::{BatchSpec, BatchStatus};
    use tasktable_core::HandlerOutcome;
    use tasktable_store::{BatchSaveParams, ItemFailure};
    let Some(b) = Browser::start().await else {
        return;
    };
    let app = App::start().await;
    let id = app
        .submit(NewTask::new("notify", json!({})).batch(BatchSpec::items(400).error_budget(3)))
        .await;
    let task = app.claim(id, "edge", "edge-host").await;
    app.store
        .batch_save(BatchSaveParams {
            lease: task.lease(),
            low_water: 100,
            end: Some(400),
            errors: 1,
            failures: vec![ItemFailure {
                item: 9,
                error: "no such user".into(),
                tries: 3,
                failed_at: None,
            }],
            items_per_second: Some(30.0),
            lease_for: Duration::from_secs(600),
            data_version: 0,
            now: None,
        })
        .await
        .unwrap();

    sign_in(&b, &app, OPERATOR, "ops (operator)").await;
    b.click("header a[href='/ui/batches']").await;
    let row = format!("tr[data-batch='{id}']");
    let shown = b.text(&row).await;
    for text in ["running", "100 / 400", "1 / 3", "30/s", "10s"] {
        assert!(shown.contains(text), "{text} in {shown}");
    }
    let value = eval(
        &b,
        &format!("return document.querySelector(\"{row} progress\").value"),
    )
    .await;
    assert_eq!(value, json!(100), "the bar stands at the offset");

    b.click(&format!("{row} form[action='/ui/batches/pause'] button"))
        .await;
    b.flash("flash", &format!("batch {id}: pausing")).await;
    assert!(b.text("#failures").await.contains("no such user"));
    // Its runner gives it back held; an operator resumes it from its page.
    app.finish(
        &task,
        HandlerOutcome::Hold {
            reason: "paused".into(),
        },
    )
    .await;
    b.goto(&app.url(&format!("/ui/batches/{id}"))).await;
    b.click("form[action='/ui/batches/resume'] button").await;
    b.flash("flash", &format!("batch {id}: queued")).await;
    let status = app.store.batch_get(id).await.unwrap().unwrap().status;
    assert_eq!(status, BatchStatus::Queued);
    b.close().await;
}

/// What `script` returns on the current page.
async fn eval(b: &Browser, script: &str) -> serde_json::Value {
    b.client()
        .execute(script, vec![])
        .await
        .unwrap_or_else(|e| panic!("{script}: {e}"))
}

#[tokio::test]
async fn the_pages_keep_their_look_under_the_content_security_policy() {
    let Some(b) = Browser::start().await else {
        return;
    };
    let app = App::start().await;
    let broken = NewTask::new("report.render", json!({"month": "1999-13"}));
    app.failed(broken, "no such month").await;
    let id = app.submit(NewTask::new("email.send", json!({}))).await;

    sign_in(&b, &app, OPERATOR, "ops (operator)").await;
    // The style element applies: the header's colour and the cards' plain links.
    assert_eq!(
        eval(
            &b,
            "return getComputedStyle(document.querySelector('header')).backgroundColor"
        )
        .await,
        "rgb(29, 35, 48)"
    );
    assert_eq!(
        eval(
            &b,
            "return getComputedStyle(document.querySelector('a.card')).textDecorationLine"
        )
        .await,
        "none"
    );
    // The charts draw: the failed attempt's bar has its colour and a size, and so has
    // each legend swatch.
    let bar = eval(
        &b,
        "const r = document.querySelector(\"figure.chart svg[role=img] rect[fill='#c8362d']\");
         const box = r.getBoundingClientRect();
         return [getComputedStyle(r).fill, box.width > 0 && box.height > 0];",
    )
    .await;
    assert_eq!(bar, json!(["rgb(200, 54, 45)", true]));
    let swatch = eval(
        &b,
        "const box = document.querySelector('figure.chart .key svg').getBoundingClientRect();
         return [box.width, box.height];",
    )
    .await;
    assert_eq!(swatch, json!([10, 10]));
    // The policy is in force: a style attribute added now is ignored.
    let colour = eval(
        &b,
        "const h = document.querySelector('h1');
         h.setAttribute('style', 'color: rgb(1, 2, 3)');
         return getComputedStyle(h).color;",
    )
    .await;
    assert_ne!(colour, "rgb(1, 2, 3)");

    b.goto(&app.url(&format!("/ui/tasks/{id}"))).await;
    b.css("#actions").await;
    let width = eval(
        &b,
        "return document.querySelector('input[name=priority]').getBoundingClientRect().width",
    )
    .await;
    assert_eq!(width, json!(90), "the narrow inputs keep their width");
    b.close().await;
}

#[tokio::test]
async fn screenshots_of_the_main_pages() {
    let Some(b) = Browser::start().await else {
        return;
    };
    let app = App::start().await;
    let seeded = showcase::seed(&app).await;
    let dir = showcase::screenshot_dir();
    let docs = showcase::docs_dir();
    let mut saved = Vec::new();
    let mut keep = |name: &str, png: Vec<u8>, for_docs: bool| {
        assert_eq!(
            showcase::png_size(&png).0,
            1280,
            "{name}.png is window-wide"
        );
        saved.push(showcase::save(&dir, name, &png));
        if let (true, Some(docs)) = (for_docs, &docs) {
            saved.push(showcase::save(docs, name, &png));
        }
    };

    b.goto(&app.url("/ui/login")).await;
    b.css("input[name=token]").await;
    keep("login", b.screenshot(false).await, false);

    sign_in(&b, &app, OPERATOR, "ops (operator)").await;
    let pending: u64 = app
        .store
        .queue_list()
        .await
        .unwrap()
        .iter()
        .flat_map(|q| &q.counts)
        .filter(|(s, _)| *s == TaskState::Pending)
        .map(|(_, n)| n)
        .sum();
    assert_eq!(
        b.text("a.card[href='/ui/tasks?state=pending'] .n").await,
        pending.to_string()
    );
    let policy = "//tr[td/a[@href='/ui/tasks?queue=reports']]/td[contains(@class, 'policy')]";
    assert_eq!(
        b.find(XPath(policy)).await.text().await.unwrap(),
        "≤ 2 running · report.render ≤ 1 · 30/min · one per worker edit"
    );
    keep("overview", b.screenshot(true).await, true);

    b.find(XPath(&format!("{policy}/a[text()='edit']")))
        .await
        .click()
        .await
        .unwrap();
    b.css("#policy-form").await;
    assert_eq!(
        b.text("#policy").await,
        "≤ 2 running · report.render ≤ 1 · 30/min · one per worker"
    );
    keep("queue-policy", b.screenshot(false).await, false);

    b.goto(&app.url("/ui/tasks")).await;
    b.css("#tasks").await;
    let webhook = app.task(seeded.webhook).await;
    let row = format!("//tr[td/a[@href='/ui/tasks/{}']]", seeded.webhook);
    let shown = b.find(XPath(&row)).await.text().await.unwrap();
    assert!(
        shown.contains(&webhook.last_error.unwrap()[..40]),
        "{shown}"
    );
    keep("tasks", b.screenshot(false).await, false);

    b.goto(&app.url(&format!("/ui/tasks/{}", seeded.report)))
        .await;
    b.css("#attempts").await;
    let report = app.task(seeded.report).await;
    assert_eq!((report.state, report.attempt), (TaskState::Running, 3));
    let history = b.text("#attempts tbody").await;
    assert!(
        history.contains("error") && history.contains("timed_out"),
        "{history}"
    );
    assert!(b.text("main").await.contains("rendering charts"));
    keep("task", b.screenshot(true).await, true);

    b.goto(&app.url("/ui/workers")).await;
    b.css("#workers").await;
    let running = app
        .store
        .task_list(ListParams {
            filter: TaskFilter {
                states: vec![TaskState::Running],
                ..TaskFilter::default()
            },
            after: None,
            limit: 100,
            light: false,
        })
        .await
        .unwrap()
        .tasks;
    for (worker, capacity) in [("worker-7f3a", 8), ("worker-c91e", 4)] {
        let n = running
            .iter()
            .filter(|t| t.worker_id.as_deref() == Some(worker))
            .count();
        let cell = format!("//tr[td[1][text()='{worker}']]/td[5]");
        assert_eq!(
            b.find(XPath(&cell)).await.text().await.unwrap(),
            format!("{n} / {capacity}")
        );
    }
    let drained = b.text("tr[data-worker='worker-0b52']").await;
    assert!(
        drained.contains("draining") && drained.contains("Release"),
        "{drained}"
    );
    keep("workers", b.screenshot(false).await, false);

    b.click("header a[href='/ui/schedules']").await;
    b.css("#schedules").await;
    let schedules = app.store.schedule_list().await.unwrap();
    assert_eq!(b.count("#schedules tbody tr").await, schedules.len());
    let nightly = app.schedule_get(seeded.nightly).await;
    let row = format!("//tr[td/a[@href='/ui/schedules/{}']]", seeded.nightly);
    let shown = b.find(XPath(&row)).await.text().await.unwrap();
    assert!(shown.contains("cron 0 2 * * * (Europe/Berlin)"), "{shown}");
    assert!(
        shown.contains(&format!("task {}", nightly.last_task_id.unwrap())),
        "{shown}"
    );
    keep("schedules", b.screenshot(false).await, false);

    b.click(&format!(
        "#schedules a[href='/ui/schedules/{}']",
        seeded.nightly
    ))
    .await;
    b.css("#fired").await;
    assert_eq!(b.count("#fired tbody tr a").await, 2, "fired twice");
    assert!(b.text("#payload pre").await.contains("monthly-revenue"));
    keep("schedule", b.screenshot(true).await, false);
    b.close().await;
    for path in saved {
        eprintln!("saved {}", path.display());
    }
}
