//! The dashboard's defences over real HTTP on a real database: names that look like paths
//! (in the pause and the policy forms),
//! the headers every response carries, cross-site posts, the session cookie over HTTPS,
//! the bounded session store, slowed-down failed sign-ins, database failures kept off the
//! page, the caps on rows a page reads, and the Host rule of a server without tokens.

mod common;

use base64::Engine;
use common::{client, csrf, tokens, Ui, ADMIN, OPERATOR, READER};
use reqwest::header::{HeaderMap, HOST, LOCATION, RETRY_AFTER, SET_COOKIE};
use reqwest::{Client, StatusCode};
use serde_json::json;
use sha2::{Digest, Sha256};
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;
use tasktable_core::{NewTask, TaskState};
use tasktable_dashboard::{DashConfig, ThrottleConfig};
use tasktable_server::TokenSet;
use tasktable_store::ClaimParams;

on_every_backend!(
    a_queue_named_like_a_path_is_paused_by_its_own_button_and_nothing_else_changes,
    a_post_from_another_site_is_refused_even_with_the_session_and_its_csrf_token,
    a_database_failure_is_shown_as_a_reference_never_as_the_databases_words,
    a_bulk_review_counts_queue_filters_exactly_and_stops_reading_other_filters_at_the_cap,
    the_workers_page_reads_at_most_the_cap_and_says_it_shows_part,
);

/// A schedule for the pages below to show.
fn hourly() -> serde_json::Value {
    json!({
        "name": "hourly",
        "recurrence": {"type": "cron", "expr": "0 * * * *", "zone": "Europe/Berlin"},
        "template": {"kind": "mail"},
    })
}

/// What maud makes of `text` inside an attribute.
fn escaped(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('"', "&quot;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The action of the form on `html` whose hidden `queue` field holds `queue`, as a
/// browser would read it.
fn queue_form_action(html: &str, queue: &str) -> String {
    let field = format!("name=\"queue\" value=\"{}\"", escaped(queue));
    let at = html
        .find(&field)
        .unwrap_or_else(|| panic!("a form for {queue}"));
    let form = html[..at].rfind("<form").unwrap();
    let action = &html[form..at];
    let start = action.find("action=\"").unwrap() + 8;
    let end = start + action[start..].find('"').unwrap();
    action[start..end].replace("&amp;", "&")
}

async fn a_queue_named_like_a_path_is_paused_by_its_own_button_and_nothing_else_changes(
    backend: &str,
) {
    let Some(ui) = Ui::start(backend).await else {
        return;
    };
    let mut ids = Vec::new();
    for i in 0..7 {
        ids.push(ui.submit(NewTask::new("mail", json!(i))).await);
    }
    assert!(
        ids.contains(&7),
        "task 7 is there to be cancelled by mistake"
    );
    let odd = ["../tasks/7/cancel?", "..", ".", "a b&c=d#e\"<x>"];
    for name in odd {
        ui.submit(NewTask::new("mail", json!({})).queue(name)).await;
    }
    let (client, _) = ui.sign_in(OPERATOR).await;
    let html = ui.page(&client, "/ui").await;
    let token = csrf(&html);
    for name in odd {
        let action = queue_form_action(&html, name);
        assert_eq!(action, "/ui/queues/pause", "{name}: no name in the path");
        let resp = client
            .post(ui.url(&action))
            .form(&[("csrf", token.as_str()), ("queue", name)])
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::SEE_OTHER, "{name}");
        assert!(ui.paused(name).await, "{name} is paused");
    }
    assert_eq!(ui.state(7).await, TaskState::Pending, "nothing cancelled");
    assert!(!ui.paused("default").await);

    // Each queue's policy page, linked from its row, sets that queue's policy only.
    for (i, name) in odd.into_iter().enumerate() {
        let link = format!(
            "/ui/queues/policy?{}",
            form_urlencoded::Serializer::new(String::new())
                .append_pair("queue", name)
                .finish()
        );
        assert!(
            html.contains(&format!("href=\"{}\"", escaped(&link))),
            "{name}: {html}"
        );
        let page = ui.page(&client, &link).await;
        let action = queue_form_action(&page, name);
        assert_eq!(action, "/ui/queues/policy", "{name}: no name in the path");
        let max = (i + 1).to_string();
        let resp = client
            .post(ui.url(&action))
            .form(&[
                ("csrf", token.as_str()),
                ("queue", name),
                ("max_running", max.as_str()),
            ])
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::SEE_OTHER, "{name}");
        let to = resp.headers()[LOCATION].to_str().unwrap().to_owned();
        assert!(to.starts_with("/ui/queues/policy?queue="), "{to}");
        assert!(ui.page(&client, &to).await.contains("policy set"), "{name}");
    }
    for (i, name) in odd.into_iter().enumerate() {
        let q = ui.store.queue_list().await.unwrap();
        let q = q.iter().find(|q| q.name == name).unwrap();
        assert_eq!(q.policy.max_running, Some(i as u32 + 1), "{name}");
    }
    let queues = ui.store.queue_list().await.unwrap();
    let default = queues.iter().find(|q| q.name == "default").unwrap();
    assert!(!default.policy.is_limited(), "no other queue has a policy");
    assert_eq!(queues.len(), odd.len() + 1, "no queue made");

    // Each queue's link lists that queue's tasks, the name decoded back intact.
    let html = ui.page(&client, "/ui").await;
    let href = "/ui/tasks?queue=..%2Ftasks%2F7%2Fcancel%3F";
    assert!(html.contains(&format!("href=\"{href}\"")), "{html}");
    let list = ui.page(&client, href).await;
    assert!(list.contains("name=\"queue\" placeholder=\"queue\" value=\"../tasks/7/cancel?\""));
    assert_eq!(
        list.matches("<td><a href=\"/ui/tasks/").count(),
        1,
        "one task"
    );
    let href = "/ui/tasks?queue=a+b%26c%3Dd%23e%22%3Cx%3E";
    assert!(html.contains(&format!("href=\"{href}\"")), "{html}");
    assert!(ui.page(&client, href).await.contains(&escaped(odd[3])));
}

fn assert_protected(headers: &HeaderMap, what: &str) {
    let csp = headers["content-security-policy"].to_str().unwrap();
    for part in [
        "default-src 'none'",
        "style-src 'sha256-",
        "form-action 'self'",
        "frame-ancestors 'none'",
        "base-uri 'none'",
    ] {
        assert!(csp.contains(part), "{what}: {part} in {csp}");
    }
    assert!(!csp.contains("unsafe"), "{what}: {csp}");
    assert_eq!(headers["x-frame-options"], "DENY", "{what}");
    assert_eq!(headers["referrer-policy"], "no-referrer", "{what}");
    assert_eq!(headers["x-content-type-options"], "nosniff", "{what}");
    assert_eq!(headers["cache-control"], "no-store", "{what}");
}

#[tokio::test]
async fn every_dashboard_response_allows_only_its_own_style_and_script_and_no_frames_or_referrers()
{
    let Some(ui) = Ui::start("sqlite").await else {
        return;
    };
    let id = ui.submit(NewTask::new("mail", json!({"to": "ada"}))).await;
    let schedule = ui.schedule(hourly(), None).await.id;
    let stranger = client();
    for path in [
        "/ui/login",
        "/ui",
        "/ui/tasks",
        "/ui/audit",
        "/ui/events",
        "/ui/no/such/page",
    ] {
        let resp = stranger.get(ui.url(path)).send().await.unwrap();
        assert_protected(resp.headers(), path);
    }
    // The refresh's event stream is a signed-in user's, like every page.
    let resp = stranger.get(ui.url("/ui/events")).send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    assert_eq!(resp.headers()[LOCATION], "/ui/login");
    let resp = stranger
        .post(ui.url("/ui/login"))
        .form(&[("token", "not-a-token-at-all-0000")])
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    assert_protected(resp.headers(), "a refused sign-in");

    let (client, _) = ui.sign_in(OPERATOR).await;
    for path in [
        "/ui".to_owned(),
        "/ui?window=7d".to_owned(),
        "/ui/tasks".to_owned(),
        format!("/ui/tasks/{id}"),
        "/ui/workers".to_owned(),
        "/ui/tasks/bulk?op=hold&queue=default".to_owned(),
        "/ui/schedules".to_owned(),
        format!("/ui/schedules/{schedule}"),
        "/ui/queues/policy?queue=default".to_owned(),
        "/ui/audit".to_owned(),
        "/ui/audit?actor=ops&event=held&queue=default".to_owned(),
        "/ui/audit?task=not-a-number".to_owned(),
        "/ui/audit?from=2030-01-01T00:00&to=yesterday".to_owned(),
    ] {
        let resp = client.get(ui.url(&path)).send().await.unwrap();
        assert_eq!(resp.status(), StatusCode::OK, "{path}");
        assert_protected(resp.headers(), &path);
        let csp = resp.headers()["content-security-policy"]
            .to_str()
            .unwrap()
            .to_owned();
        let html = resp.text().await.unwrap();
        assert!(!html.contains(" style=\""), "{path}: a style attribute");
        // The one script, on pages that refresh, is the one the policy names by its hash.
        assert!(html.matches("<script").count() <= 1, "{path}");
        if let Some(start) = html.find("<script>") {
            let end = html.find("</script>").unwrap();
            let js = &html[start + 8..end];
            let hash = base64::engine::general_purpose::STANDARD.encode(Sha256::digest(js));
            assert!(
                csp.contains(&format!("script-src 'sha256-{hash}'")),
                "{path}: {csp}"
            );
        }
        // The one style element is the one the policy names by its hash.
        assert_eq!(html.matches("<style>").count(), 1, "{path}");
        let css = &html[html.find("<style>").unwrap() + 7..html.find("</style>").unwrap()];
        let hash = base64::engine::general_purpose::STANDARD.encode(Sha256::digest(css));
        assert!(csp.contains(&format!("'sha256-{hash}'")), "{path}: {csp}");
    }
    let resp = client
        .post(ui.url(&format!("/ui/tasks/{id}/cancel")))
        .form(&[("csrf", "wrong")])
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::FORBIDDEN);
    assert_protected(resp.headers(), "a refused form");
}

async fn a_post_from_another_site_is_refused_even_with_the_session_and_its_csrf_token(
    backend: &str,
) {
    let Some(ui) = Ui::start(backend).await else {
        return;
    };
    let id = ui.submit(NewTask::new("mail", json!(1))).await;
    let (client, _) = ui.sign_in(OPERATOR).await;
    let token = csrf(&ui.page(&client, &format!("/ui/tasks/{id}")).await);
    // `same-site` is another port of this host: it shares the cookie, not the origin.
    for site in ["cross-site", "same-site"] {
        let resp = client
            .post(ui.url(&format!("/ui/tasks/{id}/cancel")))
            .header("sec-fetch-site", site)
            .form(&[("csrf", token.as_str())])
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::FORBIDDEN, "{site}");
        assert!(resp.text().await.unwrap().contains("another site"));
        let resp = client
            .post(ui.url("/ui/queues/policy"))
            .header("sec-fetch-site", site)
            .form(&[
                ("csrf", token.as_str()),
                ("queue", "default"),
                ("max_running", "0"),
            ])
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::FORBIDDEN, "{site}: no policy");
        assert!(resp.text().await.unwrap().contains("another site"));
        let resp = client
            .post(ui.url("/ui/login"))
            .header("sec-fetch-site", site)
            .form(&[("token", ADMIN)])
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::FORBIDDEN, "{site}: no sign-in");
        assert!(resp.headers().get(SET_COOKIE).is_none());
    }
    assert_eq!(ui.state(id).await, TaskState::Pending);
    let queues = ui.store.queue_list().await.unwrap();
    assert!(!queues[0].policy.is_limited(), "no policy set");
    let resp = client
        .post(ui.url(&format!("/ui/tasks/{id}/cancel")))
        .header("sec-fetch-site", "same-origin")
        .form(&[("csrf", token.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    assert_eq!(ui.state(id).await, TaskState::Cancelled);
}

fn cookie(resp: &reqwest::Response) -> String {
    resp.headers()[SET_COOKIE].to_str().unwrap().to_owned()
}

#[tokio::test]
async fn the_session_cookie_is_secure_when_the_browser_used_https() {
    let Some(ui) = Ui::start("sqlite").await else {
        return;
    };
    let sign_in = |proxy: Option<(&'static str, &'static str)>| {
        let mut req = client().post(ui.url("/ui/login")).form(&[("token", ADMIN)]);
        if let Some((name, value)) = proxy {
            req = req.header(name, value);
        }
        req.send()
    };
    let plain = cookie(&sign_in(None).await.unwrap());
    assert!(plain.contains("HttpOnly") && plain.contains("SameSite=Strict"));
    assert!(!plain.contains("Secure"), "{plain}");
    for proxy in [
        ("x-forwarded-proto", "https"),
        ("forwarded", "for=192.0.2.60;proto=https"),
    ] {
        let secure = cookie(&sign_in(Some(proxy)).await.unwrap());
        assert!(secure.contains("; Secure"), "{proxy:?}: {secure}");
    }

    let config = DashConfig {
        secure_cookies: true,
        ..DashConfig::default()
    };
    let Some(ui) = Ui::start_with("sqlite", tokens(), config).await else {
        return;
    };
    let resp = client()
        .post(ui.url("/ui/login"))
        .form(&[("token", ADMIN)])
        .send()
        .await
        .unwrap();
    assert!(cookie(&resp).contains("; Secure"), "always, when told");
}

#[tokio::test]
async fn the_oldest_session_ends_when_the_store_is_full() {
    let config = DashConfig {
        max_sessions: 2,
        ..DashConfig::default()
    };
    let Some(ui) = Ui::start_with("sqlite", tokens(), config).await else {
        return;
    };
    let mut clients = Vec::new();
    for _ in 0..3 {
        let (client, status) = ui.sign_in(OPERATOR).await;
        assert_eq!(status, StatusCode::SEE_OTHER);
        clients.push(client);
    }
    let resp = clients[0].get(ui.url("/ui")).send().await.unwrap();
    assert_eq!(resp.headers()[LOCATION], "/ui/login", "the first one ended");
    for client in &clients[1..] {
        ui.page(client, "/ui").await;
    }
}

#[tokio::test]
async fn one_token_signing_in_again_and_again_signs_no_one_else_out() {
    let config = DashConfig {
        max_sessions: 4,
        max_sessions_per_token: 2,
        ..DashConfig::default()
    };
    let Some(ui) = Ui::start_with("sqlite", tokens(), config).await else {
        return;
    };
    let (admin, status) = ui.sign_in(ADMIN).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    let mut readers = Vec::new();
    for _ in 0..10 {
        let (client, status) = ui.sign_in(READER).await;
        assert_eq!(status, StatusCode::SEE_OTHER);
        readers.push(client);
    }
    ui.page(&admin, "/ui").await;
    let mut signed_in = 0;
    for client in &readers {
        let resp = client.get(ui.url("/ui")).send().await.unwrap();
        if resp.status() == StatusCode::OK {
            signed_in += 1;
        }
    }
    assert_eq!(signed_in, 2, "the reader token keeps its newest two");
    ui.page(&readers[9], "/ui").await;
}

/// A client whose connections come from `addr` (any 127.0.0.0/8 address is this machine).
fn client_from(addr: Ipv4Addr) -> Client {
    Client::builder()
        .local_address(IpAddr::V4(addr))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

async fn try_sign_in(ui: &Ui, from: &Client, token: &str) -> reqwest::Response {
    from.post(ui.url("/ui/login"))
        .form(&[("token", token)])
        .send()
        .await
        .unwrap()
}

/// Waits long enough never to end inside a test.
fn slow(client_free: u32, global_free: u32) -> DashConfig {
    DashConfig {
        sign_in: ThrottleConfig {
            client_free,
            global_free,
            first_wait: Duration::from_secs(600),
            max_wait: Duration::from_secs(600),
            ..ThrottleConfig::default()
        },
        ..DashConfig::default()
    }
}

#[tokio::test]
async fn repeated_failed_sign_ins_make_that_address_wait_whatever_token_it_sends() {
    let Some(ui) = Ui::start_with("sqlite", tokens(), slow(2, 1000)).await else {
        return;
    };
    let here = client_from(Ipv4Addr::new(127, 0, 0, 1));
    for _ in 0..2 {
        let resp = try_sign_in(&ui, &here, "not-a-token-at-all-0000").await;
        assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    }
    let resp = try_sign_in(&ui, &here, ADMIN).await;
    assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
    let wait: u64 = resp.headers()[RETRY_AFTER]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((590..=600).contains(&wait), "{wait}");
    assert!(resp.headers().get(SET_COOKIE).is_none(), "no session");
    assert!(resp
        .text()
        .await
        .unwrap()
        .contains("Too many failed sign-ins"));

    let elsewhere = client_from(Ipv4Addr::new(127, 0, 0, 2));
    let resp = try_sign_in(&ui, &elsewhere, ADMIN).await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER, "another address");
}

#[tokio::test]
async fn failed_sign_ins_from_many_addresses_together_make_everyone_wait() {
    let Some(ui) = Ui::start_with("sqlite", tokens(), slow(1000, 2)).await else {
        return;
    };
    for last in [1, 2] {
        let from = client_from(Ipv4Addr::new(127, 0, 0, last));
        let resp = try_sign_in(&ui, &from, "not-a-token-at-all-0000").await;
        assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    }
    let fresh = client_from(Ipv4Addr::new(127, 0, 0, 3));
    let resp = try_sign_in(&ui, &fresh, ADMIN).await;
    assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(resp.headers().contains_key(RETRY_AFTER));
}

async fn a_database_failure_is_shown_as_a_reference_never_as_the_databases_words(backend: &str) {
    use sqlx::Connection;
    let Some(ui) = Ui::start(backend).await else {
        return;
    };
    let id = ui.submit(NewTask::new("mail", json!(1))).await;
    let schedule = ui.schedule(hourly(), None).await.id;
    let (client, _) = ui.sign_in(OPERATOR).await;
    let token = csrf(&ui.page(&client, &format!("/ui/tasks/{id}")).await);
    // A real failure of the real database: the tasks table is gone.
    let rename = "ALTER TABLE tasktable_tasks RENAME TO tasktable_tasks_gone";
    match backend {
        "sqlite" => {
            let mut conn = sqlx::SqliteConnection::connect(ui.db.url()).await.unwrap();
            sqlx::query(rename).execute(&mut conn).await.unwrap();
        }
        "postgres" => {
            let mut conn = sqlx::PgConnection::connect(ui.db.url()).await.unwrap();
            sqlx::query(rename).execute(&mut conn).await.unwrap();
        }
        _ => {
            let mut conn = sqlx::MySqlConnection::connect(ui.db.url()).await.unwrap();
            sqlx::query(rename).execute(&mut conn).await.unwrap();
        }
    }
    let raw = [
        "tasktable_tasks",
        "no such table",
        "does not exist",
        "database error",
    ];
    for path in [
        "/ui".to_owned(),
        "/ui/tasks".to_owned(),
        format!("/ui/tasks/{id}"),
        "/ui/workers".to_owned(),
        "/ui/tasks/bulk?op=hold&kind=mail".to_owned(),
        format!("/ui/schedules/{schedule}"),
    ] {
        let resp = client.get(ui.url(&path)).send().await.unwrap();
        assert_eq!(resp.status(), StatusCode::SERVICE_UNAVAILABLE, "{path}");
        let html = resp.text().await.unwrap();
        assert!(html.contains("under reference"), "{path}: {html}");
        for words in raw {
            assert!(!html.contains(words), "{path} shows {words:?}: {html}");
        }
    }
    // A task's form, and firing a schedule, whose task cannot be written.
    for action in [
        format!("/ui/tasks/{id}/cancel"),
        format!("/ui/schedules/{schedule}/fire"),
    ] {
        let resp = client
            .post(ui.url(&action))
            .form(&[("csrf", token.as_str())])
            .send()
            .await
            .unwrap();
        let to = resp.headers()[LOCATION].to_str().unwrap().to_owned();
        let shown: String = form_urlencoded::parse(to.split_once('?').unwrap().1.as_bytes())
            .map(|(_, v)| v.into_owned())
            .collect();
        assert!(shown.contains("under reference"), "{action}: {shown}");
        for words in raw {
            assert!(!shown.contains(words), "{action}: {shown}");
        }
    }
}

async fn a_bulk_review_counts_queue_filters_exactly_and_stops_reading_other_filters_at_the_cap(
    backend: &str,
) {
    let config = DashConfig {
        max_count: 5,
        ..DashConfig::default()
    };
    let Some(ui) = Ui::start_with(backend, tokens(), config).await else {
        return;
    };
    for i in 0..12 {
        ui.submit(NewTask::new("mail", json!(i)).queue("bulk"))
            .await;
    }
    for i in 0..3 {
        ui.submit(NewTask::new("mail", json!(i)).queue("other"))
            .await;
    }
    let (client, _) = ui.sign_in(OPERATOR).await;
    let html = ui.page(&client, "/ui/tasks/bulk?op=hold&queue=bulk").await;
    assert!(
        html.contains("<strong>12</strong> tasks"),
        "counted: {html}"
    );
    let html = ui
        .page(&client, "/ui/tasks/bulk?op=hold&queue=bulk&state=pending")
        .await;
    assert!(html.contains("<strong>12</strong> tasks"), "{html}");
    let html = ui
        .page(&client, "/ui/tasks/bulk?op=release&queue=bulk")
        .await;
    assert!(
        html.contains("<strong>0</strong> tasks"),
        "none held: {html}"
    );
    let html = ui.page(&client, "/ui/tasks/bulk?op=hold&kind=mail").await;
    assert!(html.contains("<strong>at least 5</strong> tasks"), "{html}");
    assert!(html.contains("Counting stopped after 5 tasks"), "{html}");

    // The action itself is not capped.
    let resp = client
        .post(ui.url("/ui/tasks/bulk"))
        .form(&[
            ("csrf", csrf(&html).as_str()),
            ("op", "hold"),
            ("kind", "mail"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    let held: u64 = ui
        .store
        .queue_list()
        .await
        .unwrap()
        .iter()
        .flat_map(|q| &q.counts)
        .filter(|(s, _)| *s == TaskState::Held)
        .map(|(_, n)| n)
        .sum();
    assert_eq!(held, 15);
}

async fn the_workers_page_reads_at_most_the_cap_and_says_it_shows_part(backend: &str) {
    let config = DashConfig {
        max_scan_rows: 5,
        ..DashConfig::default()
    };
    let Some(ui) = Ui::start_with(backend, tokens(), config).await else {
        return;
    };
    for i in 0..12 {
        ui.submit(NewTask::new("mail", json!(i))).await;
    }
    for worker in ["worker-a", "worker-b"] {
        let claimed = ui
            .store
            .task_claim(ClaimParams {
                queue: "default".into(),
                kinds: vec!["mail".into()],
                limit: 6,
                worker_id: worker.into(),
                worker_host: "host-1".into(),
                worker_groups: Vec::new(),
                lease_for: Duration::from_secs(600),
                now: None,
            })
            .await
            .unwrap();
        assert_eq!(claimed.len(), 6);
    }
    let (client, _) = ui.sign_in(OPERATOR).await;
    let html = ui.page(&client, "/ui/workers").await;
    assert!(
        html.contains("12 tasks are running; this page shows the workers of the newest 5"),
        "{html}"
    );
    let shown: usize = html
        .match_indices("<td class=\"num\">")
        .map(|(at, m)| {
            let rest = &html[at + m.len()..];
            rest[..rest.find('<').unwrap()].parse::<usize>().unwrap()
        })
        .sum();
    assert_eq!(shown, 5, "{html}");
}

#[tokio::test]
async fn without_tokens_the_dashboard_answers_only_loopback_host_names() {
    let Some(ui) = Ui::start_with("sqlite", TokenSet::default(), DashConfig::default()).await
    else {
        return;
    };
    ui.submit(NewTask::new("mail", json!(1))).await;
    let browser = client();
    for (method, path) in [
        ("GET", "/ui/login"),
        ("GET", "/ui"),
        ("POST", "/ui/queues/pause"),
        ("POST", "/ui/queues/policy"),
    ] {
        let req = match method {
            "GET" => browser.get(ui.url(path)),
            _ => browser.post(ui.url(path)).form(&[("queue", "default")]),
        };
        let resp = req.header(HOST, "evil.example:8080").send().await.unwrap();
        assert_eq!(resp.status(), StatusCode::MISDIRECTED_REQUEST, "{path}");
        assert!(
            resp.headers().get(SET_COOKIE).is_none(),
            "{path}: no session"
        );
        let body: serde_json::Value = resp.json().await.unwrap();
        assert_eq!(body["error"]["code"], "host_not_allowed");
    }
    // Opening the sign-in page by a loopback name signs in as an admin...
    let port = ui.base.rsplit(':').next().unwrap();
    let resp = browser
        .get(ui.url("/ui/login"))
        .header(HOST, format!("localhost:{port}"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    let html = ui.page(&browser, "/ui").await;
    assert!(html.contains("anonymous (admin)"));
    // ...and a page that rebinds its own name to this server still gets nothing.
    let resp = browser
        .post(ui.url("/ui/queues/pause"))
        .header(HOST, "evil.example")
        .form(&[("csrf", csrf(&html).as_str()), ("queue", "default")])
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::MISDIRECTED_REQUEST);
    assert!(!ui.paused("default").await);
    let resp = browser
        .post(ui.url("/ui/queues/policy"))
        .header(HOST, "evil.example")
        .form(&[
            ("csrf", csrf(&html).as_str()),
            ("queue", "default"),
            ("max_running", "0"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::MISDIRECTED_REQUEST);
    assert!(!ui.store.queue_list().await.unwrap()[0].policy.is_limited());
}
