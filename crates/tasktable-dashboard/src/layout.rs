//! The frame every page shares, and small pieces of markup. Everything shown goes through
//! maud, which escapes it: payloads and error texts are user data. All styling lives in
//! [`STYLE`], whose hash the content security policy names, so no element carries a
//! `style` attribute (the policy would drop it).

use crate::session::Session;
use chrono::{DateTime, Utc};
use maud::{html, Markup, PreEscaped, DOCTYPE};
use tasktable_core::TaskState;

/// The one style sheet, inline in every page.
pub const STYLE: &str = r#"
:root { --fg:#1d2330; --muted:#6b7385; --line:#e3e6ec; --bg:#f6f7f9; --accent:#2f5bd3; }
* { box-sizing:border-box; }
body { margin:0; font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif; color:var(--fg); background:var(--bg); }
header { display:flex; gap:24px; align-items:center; padding:10px 24px; background:#1d2330; color:#fff; }
header a { color:#cfd6e6; text-decoration:none; } header a.on, header a:hover { color:#fff; }
header .who { margin-left:auto; color:#9aa3b5; font-size:13px; }
main { max-width:1200px; margin:0 auto; padding:20px 24px; }
h1 { font-size:20px; margin:0 0 16px; } h2 { font-size:16px; margin:24px 0 8px; }
table { width:100%; border-collapse:collapse; background:#fff; border:1px solid var(--line); }
th, td { text-align:left; padding:6px 10px; border-bottom:1px solid var(--line); vertical-align:top; }
th { font-weight:600; color:var(--muted); font-size:12px; text-transform:uppercase; letter-spacing:.03em; }
td.num, th.num { text-align:right; font-variant-numeric:tabular-nums; }
.nw { white-space:nowrap; }
#kinds { font-size:13px; } #kinds th, #kinds td { padding:6px 7px; }
.cards { display:flex; gap:12px; flex-wrap:wrap; }
a.card { text-decoration:none; color:inherit; }
.card { background:#fff; border:1px solid var(--line); border-radius:6px; padding:12px 16px; min-width:140px; }
.card .n { font-size:24px; font-weight:600; font-variant-numeric:tabular-nums; }
.card .l { color:var(--muted); font-size:12px; text-transform:uppercase; }
.state { display:inline-block; padding:1px 8px; border-radius:10px; font-size:12px; font-weight:600; }
.s-pending { background:#e8eefc; color:#2f5bd3; } .s-running { background:#fff3d6; color:#8a5a00; }
.s-held { background:#eee; color:#555; } .s-succeeded { background:#e3f6e8; color:#1c7a3a; }
.s-failed { background:#fde6e6; color:#b3261e; } .s-cancelled { background:#f0e8f7; color:#6b3d8f; }
pre { background:#fff; border:1px solid var(--line); padding:10px; overflow:auto; max-height:320px; margin:0; }
pre.detail { padding:4px 6px; max-height:200px; white-space:pre-wrap; }
form.inline { display:inline-flex; gap:6px; align-items:center; margin:0 8px 8px 0; }
form.inline.signout { margin:0; } form.signout button { padding:0 6px; }
input.narrow { width:90px; }
progress { width:160px; vertical-align:middle; }
input, select, button { font:inherit; padding:4px 8px; border:1px solid #c8cdd8; border-radius:4px; background:#fff; }
button { cursor:pointer; background:var(--accent); color:#fff; border-color:var(--accent); }
button.danger { background:#b3261e; border-color:#b3261e; }
.filters { display:flex; gap:8px; flex-wrap:wrap; margin-bottom:12px; }
.flash { padding:8px 12px; border-radius:4px; margin-bottom:12px; background:#e3f6e8; }
.flash.error { background:#fde6e6; }
.muted { color:var(--muted); } .err { color:#b3261e; white-space:pre-wrap; word-break:break-word; }
dl { display:grid; grid-template-columns:160px 1fr; gap:4px 12px; background:#fff; border:1px solid var(--line); padding:12px; margin:0; }
dt { color:var(--muted); }
.windows { display:flex; gap:10px; align-items:baseline; margin:20px 0 8px; }
.charts { display:grid; grid-template-columns:repeat(auto-fit, minmax(420px, 1fr)); gap:12px; }
figure.chart { margin:0; background:#fff; border:1px solid var(--line); border-radius:6px; padding:10px 12px 4px; }
figure.chart figcaption { display:flex; gap:14px; align-items:center; font-size:13px; margin-bottom:4px; }
figure.chart .key { color:var(--muted); } figure.chart .key svg { display:inline-block; width:10px; height:10px; margin-right:4px; }
figure.chart svg { width:100%; height:auto; display:block; }
"#;

/// The one script of the dashboard: reload when the stream `/ui/events`
/// ([`crate::refresh`]) says something happened.
pub const SCRIPT: &str = "(function(){var loaded=Date.now(),timer=null;\
function reload(){location.reload();}\
function soon(){if(timer)return;timer=setTimeout(reload,Math.max(0,2000-(Date.now()-loaded)));}\
if(!window.EventSource){setTimeout(reload,5000);return;}\
var es=new EventSource('/ui/events');es.onmessage=soon;\
es.onerror=function(){es.close();if(!timer)timer=setTimeout(reload,5000);};})();";

/// A full page: navigation, the signed-in user, and `body`.
pub fn page(
    title: &str,
    nav: &str,
    session: Option<&Session>,
    refresh: bool,
    body: Markup,
) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                @if refresh {
                    noscript { meta http-equiv="refresh" content="5"; }
                    script { (PreEscaped(SCRIPT)) }
                }
                title { (title) " · tasktable" }
                style { (PreEscaped(STYLE)) }
            }
            body {
                header {
                    strong { "tasktable" }
                    @for (href, name) in [("/ui", "Overview"), ("/ui/tasks", "Tasks"), ("/ui/workers", "Workers"), ("/ui/batches", "Batches"), ("/ui/schedules", "Schedules"), ("/ui/audit", "Audit")] {
                        a href=(href) class=[(nav == name).then_some("on")] { (name) }
                    }
                    @if let Some(s) = session {
                        span.who {
                            (s.principal.name) " (" (s.principal.role) ") · "
                            form.inline.signout method="post" action="/ui/logout" {
                                input type="hidden" name="csrf" value=(s.csrf);
                                button type="submit" { "Sign out" }
                            }
                        }
                    }
                }
                main { (body) }
            }
        }
    }
}

pub fn state_badge(state: TaskState) -> Markup {
    html! { span class={ "state s-" (state.as_str()) } { (state.as_str()) } }
}

pub fn time(t: Option<DateTime<Utc>>) -> Markup {
    match t {
        Some(t) => html! { time datetime=(t.to_rfc3339()) { (t.format("%Y-%m-%d %H:%M:%S%.3f")) } },
        None => html! { span.muted { "—" } },
    }
}

pub fn json(value: Option<&serde_json::Value>) -> Markup {
    match value {
        Some(v) => html! { pre { (serde_json::to_string_pretty(v).unwrap_or_default()) } },
        None => html! { span.muted { "none" } },
    }
}

/// A one-line form that posts `fields` (plus the CSRF token) to `action`.
pub fn action_form(
    session: &Session,
    action: &str,
    label: &str,
    danger: bool,
    fields: Markup,
) -> Markup {
    html! {
        form.inline method="post" action=(action) {
            input type="hidden" name="csrf" value=(session.csrf);
            (fields)
            button type="submit" class=[danger.then_some("danger")] { (label) }
        }
    }
}

/// Messages carried to the page a form redirects to.
#[derive(Debug, Default, serde::Deserialize)]
pub struct Flash {
    pub done: Option<String>,
    pub error: Option<String>,
}

/// A UTC time from a datetime-local field (minutes or seconds) or RFC 3339.
pub(crate) fn utc_field(
    name: &str,
    text: &str,
) -> Result<Option<chrono::DateTime<chrono::Utc>>, String> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(None);
    }
    if let Ok(t) = chrono::DateTime::parse_from_rfc3339(text) {
        return Ok(Some(t.with_timezone(&chrono::Utc)));
    }
    ["%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S"]
        .iter()
        .find_map(|f| chrono::NaiveDateTime::parse_from_str(text, f).ok())
        .map(|t| Some(t.and_utc()))
        .ok_or_else(|| format!("{name}: {text:?} is not a time like 2026-11-22T05:40"))
}

pub fn flash(done: Option<&str>, error: Option<&str>) -> Markup {
    html! {
        @if let Some(d) = done { div.flash { (d) } }
        @if let Some(e) = error { div.flash.error { (e) } }
    }
}
