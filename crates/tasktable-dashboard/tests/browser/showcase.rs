//! Data that looks like a real deployment, for screenshots that read well, and where the
//! screenshots go.

use super::app::{retryable, App};
use chrono::{DateTime, Duration as Span, DurationRound, Utc};
use serde_json::json;
use std::path::PathBuf;
use std::time::Duration;
use tasktable_core::{HandlerOutcome, NewTask, TaskId};

/// The tasks the screenshot test looks at.
pub struct Showcase {
    /// A report on its third attempt, after an error and a timeout, with a checkpoint.
    pub report: TaskId,
    /// A webhook whose attempts all failed.
    pub webhook: TaskId,
    /// A nightly schedule in Berlin that has fired twice.
    pub nightly: i64,
}

fn ago(now: DateTime<Utc>, minutes: i64) -> DateTime<Utc> {
    now - Span::minutes(minutes)
}

/// Fills four queues with tasks in every state, spread over the last hour and a half, gives
/// one a policy, and adds three schedules.
pub async fn seed(app: &App) -> Showcase {
    let now = Utc::now();
    let recipients = [
        ("ada@example.com", "welcome"),
        ("grace@example.org", "receipt"),
        ("linus@example.net", "password-reset"),
        ("margaret@example.com", "receipt"),
        ("barbara@example.org", "weekly-digest"),
        ("edsger@example.net", "receipt"),
    ];
    // The registry: two web workers and a reports worker that an operator drained.
    app.set_time(ago(now, 0));
    app.register("worker-7f3a", "app-1", &["web"], &["email", "webhooks"], 8)
        .await;
    app.register("worker-c91e", "app-2", &["web", "eu"], &[], 4)
        .await;
    app.register("worker-0b52", "batch-1", &["reports"], &["reports"], 2)
        .await;
    app.store
        .worker_set_draining(tasktable_store::WorkerDrainParams {
            actor: tasktable_core::Actor::rust(),
            id: "worker-0b52".into(),
            draining: true,
        })
        .await
        .unwrap();
    for (i, (to, template)) in recipients.iter().enumerate() {
        app.set_time(ago(now, 95 - 9 * i as i64));
        let id = app
            .submit(
                NewTask::new("email.send", json!({ "to": to, "template": template }))
                    .queue("email")
                    .key(format!("user-{}", 5521 + 37 * i)),
            )
            .await;
        let running = app.claim(id, "worker-7f3a", "app-1").await;
        app.set_time(ago(now, 95 - 9 * i as i64) + Span::seconds(2));
        let result = json!({ "message_id": format!("<{}.{id}@mail.example.com>", 9000 + i) });
        app.finish(&running, ok(result)).await;
    }

    let mut status = 200;
    for (i, order) in [10477, 10479, 10480, 10481].into_iter().enumerate() {
        app.set_time(ago(now, 80 - 12 * i as i64));
        let id = app.submit(webhook(order, "shipped")).await;
        let running = app.claim(id, "worker-c91e", "app-2").await;
        app.finish(&running, ok(json!({ "status": status, "ms": 84 + 31 * i })))
            .await;
        status = if status == 200 { 204 } else { 200 };
    }

    app.set_time(ago(now, 70));
    let failing = app.submit(webhook(10482, "paid").max_attempts(3)).await;
    for minute in [70, 55, 25] {
        app.set_time(ago(now, minute));
        let running = app.claim(failing, "worker-c91e", "app-2").await;
        app.set_time(ago(now, minute) + Span::seconds(30));
        let error = "POST https://hooks.partner.example/orders returned 503 Service \
                     Unavailable: upstream is under maintenance";
        app.finish(&running, retryable(error)).await;
    }

    app.set_time(ago(now, 40));
    app.failed(
        NewTask::new(
            "invoice.generate",
            json!({ "customer_id": 9931, "period": "2025-05" }),
        )
        .key("cust-9931"),
        "customer 9931 has no billing address",
    )
    .await;

    app.set_time(ago(now, 30));
    let report = app
        .submit(
            NewTask::new(
                "report.render",
                json!({
                    "report": "monthly-revenue",
                    "customer_id": 4821,
                    "month": "2025-05",
                    "format": "pdf",
                    "sections": ["summary", "by-region", "by-product", "refunds"]
                }),
            )
            .queue("reports")
            .key("cust-4821")
            .priority(5)
            .timeout(Duration::from_secs(600)),
        )
        .await;
    let first = app.claim(report, "worker-c91e", "app-2").await;
    app.set_time(ago(now, 27));
    let crash = "renderer exited with signal 9 (out of memory) while drawing chart 14";
    app.finish(&first, retryable(crash)).await;
    app.set_time(ago(now, 26));
    let second = app.claim(report, "worker-7f3a", "app-1").await;
    app.set_time(ago(now, 16));
    app.finish(&second, HandlerOutcome::TimedOut).await;
    app.set_time(ago(now, 4));
    let third = app.claim(report, "worker-c91e", "app-2").await;
    app.checkpoint(
        &third,
        json!({ "page": 37, "parts": "s3://reports/cust-4821/2025-05/" }),
        json!({ "pages_done": 37, "pages_total": 120, "stage": "rendering charts" }),
    )
    .await;

    app.set_time(ago(now, 2));
    let sending = app
        .submit(
            NewTask::new(
                "email.send",
                json!({ "to": "alan@example.com", "template": "receipt" }),
            )
            .queue("email")
            .key("user-7730"),
        )
        .await;
    app.claim(sending, "worker-7f3a", "app-1").await;
    let delivering = app.submit(webhook(10483, "paid")).await;
    app.claim(delivering, "worker-7f3a", "app-1").await;

    // What no worker has taken yet: due, scheduled for later, held, cancelled.
    app.set_time(ago(now, 1));
    for (i, to) in [
        "hedy@example.com",
        "katherine@example.org",
        "tim@example.net",
    ]
    .into_iter()
    .enumerate()
    {
        app.submit(
            NewTask::new("email.send", json!({ "to": to, "template": "welcome" }))
                .queue("email")
                .key(format!("user-{}", 7731 + i)),
        )
        .await;
    }
    let unsubscribed = app
        .submit(
            NewTask::new(
                "email.send",
                json!({ "to": "dennis@example.com", "template": "weekly-digest" }),
            )
            .queue("email")
            .key("user-6012"),
        )
        .await;
    app.cancel(unsubscribed).await;
    for (customer, month) in [(1207, "2025-06"), (3310, "2025-06")] {
        app.submit(
            NewTask::new(
                "report.render",
                json!({ "report": "monthly-revenue", "customer_id": customer, "month": month }),
            )
            .queue("reports")
            .key(format!("cust-{customer}"))
            .run_at(now + Span::hours(6)),
        )
        .await;
    }
    app.submit(
        NewTask::new(
            "report.render",
            json!({ "report": "audit-export", "customer_id": 77, "format": "csv" }),
        )
        .queue("reports")
        .key("cust-77")
        .held(true),
    )
    .await;
    app.submit(
        NewTask::new(
            "invoice.generate",
            json!({ "customer_id": 4821, "period": "2025-05" }),
        )
        .key("cust-4821"),
    )
    .await;
    app.submit(webhook(10484, "refunded")).await;

    // Schedules: one that has fired (from its page, as an operator would), one that
    // has not yet, one turned off.
    app.set_time(ago(now, 90));
    let nightly = app
        .schedule(json!({
            "name": "monthly-revenue-reports",
            "recurrence": {"type": "cron", "expr": "0 2 * * *", "zone": "Europe/Berlin"},
            "template": {
                "kind": "report.render",
                "queue": "reports",
                "payload": {"report": "monthly-revenue", "format": "pdf"},
                "max_attempts": 3,
                "timeout_ms": 600_000
            },
            "missed": {"policy": "run_latest"},
            "overlap": "skip",
        }))
        .await
        .id;
    for minute in [60, 3] {
        app.set_time(ago(now, minute));
        app.fire(nightly).await;
    }
    let on_the_minute = ago(now, 90).duration_trunc(Span::minutes(1)).unwrap();
    app.schedule(json!({
        "name": "partner-webhook-sync",
        "recurrence": {"type": "every", "every_ms": 900_000, "start": on_the_minute},
        "template": {"kind": "http", "queue": "webhooks",
                     "payload": {"method": "POST", "url": "https://hooks.partner.example/sync"}},
    }))
    .await;
    app.schedule(json!({
        "name": "weekly-digest",
        "recurrence": {"type": "cron", "expr": "0 8 * * 1", "zone": "America/New_York"},
        "template": {"kind": "email.send", "queue": "email", "payload": {"template": "weekly-digest"}},
        "missed": {"policy": "skip"},
        "enabled": false,
    }))
    .await;
    // A policy on the reports queue, set last so that it limits none of the claims above.
    app.store
        .queue_set_policy(tasktable_store::QueuePolicyParams {
            actor: tasktable_core::Actor::rust(),
            queue: "reports".into(),
            policy: tasktable_core::policy::QueuePolicy {
                max_running: Some(2),
                kind_max_running: [("report.render".to_owned(), 1)].into(),
                rate: Some(tasktable_core::policy::Rate::per_second(0.5)),
                one_per_worker: true,
                ..Default::default()
            },
        })
        .await
        .unwrap();
    Showcase {
        report,
        webhook: failing,
        nightly,
    }
}

fn webhook(order: u32, status: &str) -> NewTask {
    NewTask::new(
        "http",
        json!({
            "method": "POST",
            "url": "https://hooks.partner.example/orders",
            "body": { "order": order, "status": status }
        }),
    )
    .queue("webhooks")
    .key(format!("order-{order}"))
}

fn ok(result: serde_json::Value) -> HandlerOutcome {
    HandlerOutcome::Succeeded {
        result: Some(result),
    }
}

/// `<target>/screenshots`: under `CARGO_TARGET_DIR` when set, else the workspace's target.
pub fn screenshot_dir() -> PathBuf {
    let workspace = workspace();
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(|dir| workspace.join(dir))
        .unwrap_or_else(|| workspace.join("target"));
    target.join("screenshots")
}

/// The README's pictures, written only when asked (`TASKTABLE_UPDATE_SCREENSHOTS=1`) so a
/// test run leaves the work tree as it was.
pub fn docs_dir() -> Option<PathBuf> {
    let asked = std::env::var("TASKTABLE_UPDATE_SCREENSHOTS").is_ok_and(|v| v == "1");
    asked.then(|| workspace().join("docs").join("screenshots"))
}

fn workspace() -> PathBuf {
    let crate_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    crate_dir.ancestors().nth(2).expect("crates/<name>").into()
}

/// Saves `png` as `name`.png in `dir`.
pub fn save(dir: &std::path::Path, name: &str, png: &[u8]) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
    let path = dir.join(format!("{name}.png"));
    std::fs::write(&path, png).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    path
}

/// The width and height a PNG declares.
pub fn png_size(png: &[u8]) -> (u32, u32) {
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "a PNG");
    let word = |at: usize| u32::from_be_bytes(png[at..at + 4].try_into().unwrap());
    (word(16), word(20))
}
