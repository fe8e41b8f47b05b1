//! The schedules pages over real HTTP on a real database (SQLite, PostgreSQL and MySQL):
//! fire times in each schedule's own zone, the tasks a schedule fired, the enable, disable
//! and fire-now forms and who may use them, and the template's payload as a reader sees it.

mod common;

use chrono::{DateTime, TimeZone, Utc};
use common::{csrf, Ui, ADMIN, OPERATOR, READER};
use reqwest::header::LOCATION;
use reqwest::StatusCode;
use serde_json::json;
use tasktable_store::{FireNowParams, Schedule, ScheduleRef};

on_every_backend!(
    the_list_shows_each_schedules_next_fire_times_in_its_own_zone,
    a_schedules_page_lists_the_tasks_it_fired,
    an_operator_disables_enables_and_fires_a_schedule_from_its_page,
    a_reader_sees_no_schedule_buttons_and_a_forged_post_is_refused,
    a_missing_schedule_is_not_found,
    readers_see_secret_template_fields_redacted,
);

/// The time the schedules below are created at: a few days before Berlin's clocks go
/// back (25 October 2026, 03:00 CEST becomes 02:00 CET).
fn created_at() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 10, 21, 12, 0, 0).unwrap()
}

async fn create(ui: &Ui, spec: serde_json::Value) -> Schedule {
    ui.schedule(spec, Some(created_at())).await
}

/// A nightly cron schedule in Berlin, a one-minute interval, and a disabled daily one.
async fn three_schedules(ui: &Ui) -> [Schedule; 3] {
    let nightly = create(
        ui,
        json!({
            "name": "nightly-report",
            "recurrence": {"type": "cron", "expr": "0 2 * * *", "zone": "Europe/Berlin"},
            "template": {"kind": "report.render", "queue": "reports", "payload": {"month": "last"}},
            "missed": {"policy": "skip"},
        }),
    )
    .await;
    let ping = create(
        ui,
        json!({
            "name": "ping",
            "recurrence": {"type": "every", "every_ms": 60_000, "start": "2026-10-21T00:00:00Z"},
            "template": {"kind": "health.ping"},
            "overlap": "skip",
        }),
    )
    .await;
    let digest = create(
        ui,
        json!({
            "name": "daily-digest",
            "recurrence": {"type": "daily", "at": "02:30:00", "zone": "UTC"},
            "template": {"kind": "email.digest", "queue": "email"},
            "missed": {"policy": "run_all", "max": 3},
            "enabled": false,
        }),
    )
    .await;
    [nightly, ping, digest]
}

/// The table row of `html` that holds `text`.
fn row<'a>(html: &'a str, text: &str) -> &'a str {
    let at = html
        .find(text)
        .unwrap_or_else(|| panic!("{text} on the page: {html}"));
    let start = html[..at].rfind("<tr>").expect("in a row");
    let end = at + html[at..].find("</tr>").expect("a row's end");
    &html[start..end]
}

/// Fires schedule `id` as if `minutes` after the schedules were created; the task fired.
async fn fire(ui: &Ui, id: i64, minutes: i64) -> i64 {
    let fired = ui
        .store
        .schedule_fire_now(FireNowParams {
            actor: tasktable_core::Actor::rust(),
            schedule: ScheduleRef::Id(id),
            now: Some(created_at() + chrono::Duration::minutes(minutes)),
        })
        .await
        .unwrap();
    fired.tasks[0].task_id
}

async fn the_list_shows_each_schedules_next_fire_times_in_its_own_zone(backend: &str) {
    let Some(ui) = Ui::start(backend).await else {
        return;
    };
    let [nightly, ping, digest] = three_schedules(&ui).await;
    let (client, _) = ui.sign_in(READER).await;
    let html = ui.page(&client, "/ui/schedules").await;
    assert!(
        html.contains("<a href=\"/ui/schedules\" class=\"on\">Schedules</a>"),
        "the navigation bar names the page"
    );

    let nightly_row = row(&html, "nightly-report");
    assert!(nightly_row.contains(&format!("href=\"/ui/schedules/{}\"", nightly.id)));
    assert!(nightly_row.contains("cron 0 2 * * * (Europe/Berlin)"));
    assert!(nightly_row.contains(">enabled<"));
    // 02:00 happens twice on the 25th; the first one fires, still in summer time.
    let times = [
        "2026-10-22 02:00 +02:00",
        "2026-10-23 02:00 +02:00",
        "2026-10-24 02:00 +02:00",
        "2026-10-25 02:00 +02:00",
        "2026-10-26 02:00 +01:00",
    ];
    let mut from = 0;
    for t in times {
        let at = nightly_row[from..]
            .find(&format!(">{t}<"))
            .unwrap_or_else(|| panic!("{t}, in order: {nightly_row}"));
        from += at + 1;
    }
    assert_eq!(nightly_row.matches("<time ").count(), 5, "{nightly_row}");
    for cell in ["report.render", "reports", "missed: skip", "overlap: allow"] {
        assert!(nightly_row.contains(cell), "{cell}: {nightly_row}");
    }

    let ping_row = row(&html, ">ping<");
    assert!(ping_row.contains(&format!("href=\"/ui/schedules/{}\"", ping.id)));
    assert!(ping_row.contains("every 1m from 2026-10-21 00:00:00 UTC"));
    for minute in 1..=5 {
        let t = format!(">2026-10-21 12:0{minute} +00:00<");
        assert!(ping_row.contains(&t), "{t}: {ping_row}");
    }
    assert!(ping_row.contains("missed: run latest") && ping_row.contains("overlap: skip"));

    let digest_row = row(&html, "daily-digest");
    assert!(digest_row.contains(&format!("href=\"/ui/schedules/{}\"", digest.id)));
    assert!(digest_row.contains("daily 02:30:00 (UTC)"));
    assert!(digest_row.contains(">disabled<"), "{digest_row}");
    assert!(digest_row.contains("none while disabled"), "{digest_row}");
    assert!(!digest_row.contains("<time "), "no fire time: {digest_row}");
    assert!(digest_row.contains("missed: run all (at most 3)"));

    // The last slot fired, linked to its task.
    let task = fire(&ui, nightly.id, 1).await;
    let html = ui.page(&client, "/ui/schedules").await;
    let nightly_row = row(&html, "nightly-report");
    assert!(
        nightly_row.contains(&format!("<a href=\"/ui/tasks/{task}\">task {task}</a>")),
        "{nightly_row}"
    );
    assert_eq!(nightly_row.matches("<time ").count(), 6, "{nightly_row}");
}

async fn a_schedules_page_lists_the_tasks_it_fired(backend: &str) {
    let Some(ui) = Ui::start(backend).await else {
        return;
    };
    let [nightly, ping, _] = three_schedules(&ui).await;
    let (client, _) = ui.sign_in(READER).await;
    let path = format!("/ui/schedules/{}", nightly.id);
    let html = ui.page(&client, &path).await;
    assert!(html.contains("It has fired no task yet."));
    assert!(html.contains(">2026-10-26 02:00 +01:00<"), "{html}");

    let first = fire(&ui, nightly.id, 30).await;
    let second = fire(&ui, nightly.id, 45).await;
    let other = fire(&ui, ping.id, 45).await;
    let html = ui.page(&client, &path).await;
    let table = &html[html.find("id=\"fired\"").unwrap()..];
    // Slots read in Berlin, still on summer time.
    for (id, slot) in [
        (first, "2026-10-21 14:30 +02:00"),
        (second, "2026-10-21 14:45 +02:00"),
    ] {
        let row = row(table, &format!("<a href=\"/ui/tasks/{id}\">{id}</a>"));
        assert!(row.contains(">pending<"), "{row}");
        assert!(row.contains(">0/"), "no attempt yet: {row}");
        assert!(row.contains(&format!(">{slot}<")), "{slot}: {row}");
    }
    let newest_first = table.find(&format!("/ui/tasks/{second}\"")).unwrap()
        < table.find(&format!("/ui/tasks/{first}\"")).unwrap();
    assert!(newest_first, "{table}");
    assert!(
        !table.contains(&format!("/ui/tasks/{other}\"")),
        "only this schedule's tasks"
    );
    let task_page = ui.page(&client, &format!("/ui/tasks/{first}")).await;
    assert!(
        task_page.contains(&format!("<a href=\"{path}\">schedule {}</a>", nightly.id)),
        "a fired task links back to its schedule"
    );
}

async fn post(client: &reqwest::Client, ui: &Ui, path: &str, token: &str) -> reqwest::Response {
    client
        .post(ui.url(path))
        .form(&[("csrf", token)])
        .send()
        .await
        .unwrap()
}

async fn enabled(ui: &Ui, id: i64) -> bool {
    ui.store
        .schedule_get(ScheduleRef::Id(id))
        .await
        .unwrap()
        .unwrap()
        .spec
        .enabled
}

async fn an_operator_disables_enables_and_fires_a_schedule_from_its_page(backend: &str) {
    let Some(ui) = Ui::start(backend).await else {
        return;
    };
    let [nightly, ..] = three_schedules(&ui).await;
    let id = nightly.id;
    let path = format!("/ui/schedules/{id}");
    for token in [OPERATOR, ADMIN] {
        let (client, _) = ui.sign_in(token).await;
        let html = ui.page(&client, &path).await;
        assert!(
            html.contains(&format!("action=\"{path}/disable\"")),
            "{html}"
        );
        assert!(html.contains(&format!("action=\"{path}/fire\"")));
        assert!(!html.contains(&format!("action=\"{path}/enable\"")));
        let csrf = csrf(&html);

        let resp = post(&client, &ui, &format!("{path}/disable"), &csrf).await;
        assert_eq!(resp.status(), StatusCode::SEE_OTHER);
        assert_eq!(resp.headers()[LOCATION], format!("{path}?done=disabled"));
        assert!(!enabled(&ui, id).await);
        let html = ui.page(&client, &format!("{path}?done=disabled")).await;
        assert!(html.contains("<div class=\"flash\">disabled</div>"));
        assert!(html.contains(&format!("action=\"{path}/enable\"")));
        assert!(html.contains("none while disabled"));

        let resp = post(&client, &ui, &format!("{path}/enable"), &csrf).await;
        assert_eq!(resp.headers()[LOCATION], format!("{path}?done=enabled"));
        assert!(enabled(&ui, id).await);
        let html = ui.page(&client, &path).await;
        assert!(!html.contains("none while disabled"), "fires again");
        assert!(html.contains(&format!("action=\"{path}/disable\"")));

        let resp = post(&client, &ui, &format!("{path}/fire"), &csrf).await;
        assert_eq!(resp.status(), StatusCode::SEE_OTHER);
        let to = resp.headers()[LOCATION].to_str().unwrap().to_owned();
        let task: i64 = to
            .strip_prefix("/ui/tasks/")
            .and_then(|rest| rest.split('?').next())
            .and_then(|id| id.parse().ok())
            .unwrap_or_else(|| panic!("to the new task: {to}"));
        let fired = ui.store.task_get(task).await.unwrap().unwrap();
        assert_eq!(fired.schedule_id, Some(id));
        assert_eq!(fired.kind, "report.render");
        let html = ui.page(&client, &to).await;
        assert!(html.contains("fired now by its schedule"), "{html}");
        let html = ui.page(&client, &path).await;
        assert!(html.contains(&format!("<a href=\"/ui/tasks/{task}\">{task}</a>")));

        let resp = post(&client, &ui, &format!("{path}/explode"), &csrf).await;
        assert_eq!(resp.status(), StatusCode::NOT_FOUND);
    }
    // A schedule gone by the time the form is sent: back to the list, saying so.
    let (client, _) = ui.sign_in(OPERATOR).await;
    let csrf = csrf(&ui.page(&client, &path).await);
    ui.store
        .schedule_delete(tasktable_store::DeleteScheduleParams {
            schedule: ScheduleRef::Id(id),
            actor: tasktable_core::Actor::rust(),
        })
        .await
        .unwrap();
    let resp = post(&client, &ui, &format!("{path}/fire"), &csrf).await;
    let to = resp.headers()[LOCATION].to_str().unwrap().to_owned();
    assert!(to.starts_with("/ui/schedules?error="), "{to}");
    let html = ui.page(&client, &to).await;
    assert!(html.contains("class=\"flash error\""), "{html}");
}

async fn a_reader_sees_no_schedule_buttons_and_a_forged_post_is_refused(backend: &str) {
    let Some(ui) = Ui::start(backend).await else {
        return;
    };
    let [nightly, ..] = three_schedules(&ui).await;
    let path = format!("/ui/schedules/{}", nightly.id);
    let (client, _) = ui.sign_in(READER).await;
    let html = ui.page(&client, &path).await;
    assert!(!html.contains("id=\"actions\""), "{html}");
    for op in ["disable", "enable", "fire"] {
        assert!(!html.contains(&format!("{path}/{op}")), "{op}");
    }
    let token = csrf(&html); // the sign-out form
    for op in ["disable", "fire"] {
        let resp = post(&client, &ui, &format!("{path}/{op}"), &token).await;
        assert_eq!(resp.status(), StatusCode::FORBIDDEN, "{op}");
        assert!(resp.text().await.unwrap().contains("role reader may not"));
    }
    assert!(enabled(&ui, nightly.id).await, "still enabled");
    assert!(html.contains("It has fired no task yet."));
    let html = ui.page(&client, &path).await;
    assert!(html.contains("It has fired no task yet."), "nothing fired");

    // An operator's session without its CSRF token is refused too.
    let (operator, _) = ui.sign_in(OPERATOR).await;
    let resp = post(&operator, &ui, &format!("{path}/disable"), "wrong").await;
    assert_eq!(resp.status(), StatusCode::FORBIDDEN);
    assert!(enabled(&ui, nightly.id).await);
}

async fn a_missing_schedule_is_not_found(backend: &str) {
    let Some(ui) = Ui::start(backend).await else {
        return;
    };
    let (client, _) = ui.sign_in(OPERATOR).await;
    let html = ui.page(&client, "/ui/schedules").await;
    assert!(html.contains("No schedule is defined."));
    let resp = client
        .get(ui.url("/ui/schedules/4242"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);
    let html = resp.text().await.unwrap();
    assert!(html.contains("No such schedule."), "{html}");
    assert!(!html.contains("id=\"actions\""));
}

async fn readers_see_secret_template_fields_redacted(backend: &str) {
    let Some(ui) = Ui::start(backend).await else {
        return;
    };
    let hook = create(
        &ui,
        json!({
            "name": "partner-hook",
            "recurrence": {"type": "cron", "expr": "*/15 * * * *", "zone": "UTC"},
            "template": {"kind": "http", "queue": "webhooks", "payload": {
                "url": "https://bot:pa55word@hooks.example/x",
                "headers": {"Authorization": "Bearer sekr1t-header"},
            }},
        }),
    )
    .await;
    let path = format!("/ui/schedules/{}", hook.id);
    let (reader, _) = ui.sign_in(READER).await;
    for page in [path.as_str(), "/ui/schedules"] {
        let html = ui.page(&reader, page).await;
        for secret in ["sekr1t-header", "pa55word"] {
            assert!(!html.contains(secret), "a reader sees {secret} on {page}");
        }
    }
    let html = ui.page(&reader, &path).await;
    let payload = &html[html.find("id=\"payload\"").unwrap()..];
    assert!(
        payload.contains("Authorization")
            && payload.contains("https://bot:[redacted]@hooks.example/x"),
        "{payload}"
    );
    let (operator, _) = ui.sign_in(OPERATOR).await;
    let html = ui.page(&operator, &path).await;
    assert!(
        html.contains("sekr1t-header") && html.contains("pa55word"),
        "an operator, who may edit the template, sees it whole"
    );
}
