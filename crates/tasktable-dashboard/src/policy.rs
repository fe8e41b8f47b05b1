//! A queue's policy ([`tasktable_core::policy`]): a one-line summary for the overview,
//! and the queue's policy page, where operators set or clear it.
//!
//! The page is its own (`/ui/queues/policy?queue=NAME`) rather than a form on the
//! overview, which reloads itself every 5 seconds and would wipe a half-filled form. The
//! queue's name travels only as a query value or a form field (see [`crate::links`]). As
//! with every form, the session's CSRF token and role are checked before anything else;
//! a value that does not parse is refused before the store is called, with the reason
//! and the values typed sent back to the page, so nothing changes and nothing is lost.

use crate::actions::check;
use crate::failure;
use crate::layout::{action_form, flash, page};
use crate::links;
use crate::session::Session;
use crate::DashState;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use axum::Form;
use maud::html;
use std::collections::{BTreeMap, HashMap};
use tasktable_core::policy::{
    QueuePolicy, Rate, MAX_KIND_LIMITS, MAX_LIMIT, MAX_PER_SECOND, MIN_PER_SECOND,
};
use tasktable_core::task::MAX_NAME_LEN;
use tasktable_store::QueuePolicyParams;

/// Where a queue's policy page is.
pub fn link(queue: &str) -> String {
    links::with_query("/ui/queues/policy", &[("queue", queue)])
}

/// The policy in one line, `≤ 4 running · send ≤ 2 · 2.5/s · one per worker`; "—" for
/// none. At most `kinds` kind limits are named (the rest are counted).
pub fn summary(p: &QueuePolicy, kinds: usize) -> String {
    let mut parts = Vec::new();
    if let Some(n) = p.max_running {
        parts.push(format!("≤ {n} running"));
    }
    if !p.kind_max_running.is_empty() {
        let mut named: Vec<String> = p
            .kind_max_running
            .iter()
            .take(kinds)
            .map(|(kind, n)| format!("{kind} ≤ {n}"))
            .collect();
        let more = p.kind_max_running.len().saturating_sub(kinds);
        if more > 0 {
            named.push(format!("{more} more {}", plural(more, "kind")));
        }
        parts.push(named.join(", "));
    }
    if let Some(r) = &p.rate {
        parts.push(rate_text(r));
    }
    if let Some(r) = &p.key_rate {
        parts.push(format!("{} per key", rate_text(r)));
    }
    if p.one_per_worker {
        parts.push("one per worker".to_owned());
    }
    if p.fair_share {
        parts.push("fair share".to_owned());
    }
    if parts.is_empty() {
        "—".to_owned()
    } else {
        parts.join(" · ")
    }
}

fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        word.to_owned()
    } else {
        format!("{word}s")
    }
}

/// A rate in the largest unit that keeps it at least 1: `2.5/s`, `30/min`, `1/day`,
/// with its burst when one is set.
fn rate_text(r: &Rate) -> String {
    let per = r.per_second;
    let (n, unit) = if per >= 1.0 {
        (per, "s")
    } else if per * 60.0 >= 1.0 {
        (per * 60.0, "min")
    } else if per * 3600.0 >= 1.0 {
        (per * 3600.0, "h")
    } else {
        (per * 86_400.0, "day")
    };
    let shown = format!("{n:.3}");
    let shown = shown.trim_end_matches('0').trim_end_matches('.');
    match r.burst {
        Some(b) => format!("{shown}/{unit} (burst {b})"),
        None => format!("{shown}/{unit}"),
    }
}

/// The form's fields as text, as typed or as the stored policy fills them in.
#[derive(Debug, Default, Clone, PartialEq)]
struct Fields {
    max_running: String,
    kinds: String,
    rate: String,
    rate_burst: String,
    key_rate: String,
    key_rate_burst: String,
    one_per_worker: bool,
    fair_share: bool,
}

/// The names of the text fields, in the form's order.
const TEXT_FIELDS: [&str; 6] = [
    "max_running",
    "kind_max_running",
    "rate",
    "rate_burst",
    "key_rate",
    "key_rate_burst",
];

impl Fields {
    fn from_policy(p: &QueuePolicy) -> Fields {
        let number = |n: Option<u32>| n.map(|n| n.to_string()).unwrap_or_default();
        let per_second = |r: Option<&Rate>| r.map(|r| r.per_second.to_string()).unwrap_or_default();
        Fields {
            max_running: number(p.max_running),
            kinds: p
                .kind_max_running
                .iter()
                .map(|(kind, n)| format!("{kind}={n}"))
                .collect::<Vec<_>>()
                .join(", "),
            rate: per_second(p.rate.as_ref()),
            rate_burst: number(p.rate.and_then(|r| r.burst)),
            key_rate: per_second(p.key_rate.as_ref()),
            key_rate_burst: number(p.key_rate.and_then(|r| r.burst)),
            one_per_worker: p.one_per_worker,
            fair_share: p.fair_share,
        }
    }

    /// From a posted form, or from the query a refused form was sent back with. A box
    /// that is ticked is sent, one that is not is left out.
    fn from_map(m: &HashMap<String, String>) -> Fields {
        let text = |name: &str| m.get(name).cloned().unwrap_or_default();
        Fields {
            max_running: text("max_running"),
            kinds: text("kind_max_running"),
            rate: text("rate"),
            rate_burst: text("rate_burst"),
            key_rate: text("key_rate"),
            key_rate_burst: text("key_rate_burst"),
            one_per_worker: m.contains_key("one_per_worker"),
            fair_share: m.contains_key("fair_share"),
        }
    }

    /// The fields to send back to the page, the ones left empty left out.
    fn pairs(&self) -> Vec<(&'static str, &str)> {
        let texts = [
            &self.max_running,
            &self.kinds,
            &self.rate,
            &self.rate_burst,
            &self.key_rate,
            &self.key_rate_burst,
        ];
        let mut pairs: Vec<(&'static str, &str)> = TEXT_FIELDS
            .into_iter()
            .zip(texts)
            .filter(|(_, v)| !v.trim().is_empty())
            .map(|(k, v)| (k, v.as_str()))
            .collect();
        if self.one_per_worker {
            pairs.push(("one_per_worker", "on"));
        }
        if self.fair_share {
            pairs.push(("fair_share", "on"));
        }
        pairs
    }

    /// The policy the fields describe; an empty field limits nothing. Every mistake is
    /// worded for the form, and core's own check runs last as a backstop.
    fn parse(&self) -> Result<QueuePolicy, String> {
        let policy = QueuePolicy {
            max_running: whole("max running", &self.max_running, 0)?,
            kind_max_running: kinds(&self.kinds)?,
            rate: rate("rate", &self.rate, &self.rate_burst)?,
            key_rate: rate("rate per key", &self.key_rate, &self.key_rate_burst)?,
            one_per_worker: self.one_per_worker,
            fair_share: self.fair_share,
        };
        policy.validate().map_err(|e| e.to_string())?;
        Ok(policy)
    }
}

/// A whole number from `min` to [`MAX_LIMIT`]; none when the field is empty.
fn whole(label: &str, raw: &str, min: u32) -> Result<Option<u32>, String> {
    let raw = raw.trim();
    if raw.is_empty() {
        return Ok(None);
    }
    match raw.parse::<u32>() {
        Ok(n) if (min..=MAX_LIMIT).contains(&n) => Ok(Some(n)),
        _ => Err(format!(
            "{label} must be a whole number from {min} to {MAX_LIMIT}, not {raw:?}"
        )),
    }
}

/// A rate from its two fields; none when both are empty.
fn rate(label: &str, per_second: &str, burst: &str) -> Result<Option<Rate>, String> {
    let burst = whole(&format!("the burst of the {label}"), burst, 1)?;
    let raw = per_second.trim();
    if raw.is_empty() {
        return match burst {
            Some(_) => Err(format!(
                "a burst needs a {label}: fill in its starts per second, or empty the burst"
            )),
            None => Ok(None),
        };
    }
    let per_second = raw
        .parse::<f64>()
        .ok()
        .filter(|n| n.is_finite() && (MIN_PER_SECOND..=MAX_PER_SECOND).contains(n))
        .ok_or_else(|| {
            format!(
                "the {label} must be a number of starts per second from {MIN_PER_SECOND:.7} \
                 (one a day) to {MAX_PER_SECOND}, not {raw:?}"
            )
        })?;
    Ok(Some(Rate { per_second, burst }))
}

/// `send=2, digest=1`: a kind (which may hold `=`, not `,`), `=`, and its limit.
fn kinds(raw: &str) -> Result<BTreeMap<String, u32>, String> {
    let mut limits = BTreeMap::new();
    for item in raw.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let Some((kind, n)) = item.rsplit_once('=') else {
            return Err(format!(
                "per-kind limits: {item:?} is not kind=N; write them as send=2, digest=1"
            ));
        };
        let kind = kind.trim();
        if kind.is_empty()
            || kind.chars().count() > MAX_NAME_LEN
            || kind.chars().any(char::is_control)
        {
            return Err(format!(
                "per-kind limits: in {item:?}, a kind must be 1 to {MAX_NAME_LEN} characters \
                 with no control characters"
            ));
        }
        let Some(n) = whole(&format!("the limit of kind {kind:?}"), n, 0)? else {
            return Err(format!("per-kind limits: {item:?} has no number after ="));
        };
        if limits.insert(kind.to_owned(), n).is_some() {
            return Err(format!("per-kind limits: kind {kind:?} is limited twice"));
        }
    }
    if limits.len() > MAX_KIND_LIMITS {
        return Err(format!(
            "per-kind limits: at most {MAX_KIND_LIMITS} kinds, not {}",
            limits.len()
        ));
    }
    Ok(limits)
}

/// A queue's policy page: the policy in force for everyone, and for operators the form
/// that changes it (filled in with it, or with what was typed when a form was refused)
/// and the button that clears it. A queue that has no tasks yet has no policy yet, and
/// can be given one.
pub async fn policy_page(
    State(state): State<DashState>,
    session: Session,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let Some(name) = q.get("queue").filter(|n| !n.trim().is_empty()).cloned() else {
        let body = html! {
            h1 { "Queue policy" }
            div.flash.error { "Which queue? Open a queue's policy from the overview." }
            p { a href="/ui" { "Overview" } }
        };
        return (
            StatusCode::BAD_REQUEST,
            page("Queue policy", "Overview", Some(&session), false, body),
        )
            .into_response();
    };
    let queues = match state.app.store.queue_list().await {
        Ok(q) => q,
        Err(e) => return failure::page_for(e),
    };
    let info = queues.into_iter().find(|q| q.name == name);
    let policy = info.as_ref().map(|q| q.policy.clone()).unwrap_or_default();
    let fields = if q.contains_key("typed") {
        Fields::from_map(&q)
    } else {
        Fields::from_policy(&policy)
    };
    let narrow = "narrow";
    let body = html! {
        h1 { "Queue " (name) ": policy" }
        (flash(q.get("done").map(String::as_str), q.get("error").map(String::as_str)))
        p {
            a href="/ui" { "Overview" } " · "
            a href=(links::tasks(&[("queue", name.as_str())])) { "its tasks" } " · "
            @match &info {
                Some(i) if i.paused => span.state.s-held { "paused" },
                Some(_) => span.state.s-succeeded { "active" },
                None => span.muted { "no tasks yet" },
            }
        }
        p { "In force: " strong id="policy" { (summary(&policy, usize::MAX)) } }
        @if session.can_act() {
            h2 { "Change it" }
            p.muted {
                "An empty field limits nothing. Limits count this queue's tasks on every "
                "worker; a policy applies from each worker's next claim, and tasks already "
                "running go on."
            }
            form id="policy-form" method="post" action="/ui/queues/policy" {
                input type="hidden" name="csrf" value=(session.csrf);
                input type="hidden" name="queue" value=(name);
                dl {
                    dt { label for="max_running" { "Max running" } }
                    dd {
                        input id="max_running" type="number" name="max_running" min="0"
                            max=(MAX_LIMIT) class=(narrow) value=(fields.max_running);
                        " " span.muted { "tasks of this queue at once" }
                    }
                    dt { label for="kind_max_running" { "Per kind" } }
                    dd {
                        input id="kind_max_running" name="kind_max_running"
                            placeholder="send=2, digest=1" value=(fields.kinds);
                        " " span.muted { "at most N of a kind at once: kind=N, kind=N" }
                    }
                    dt { label for="rate" { "Rate" } }
                    dd {
                        input id="rate" type="number" name="rate" step="any"
                            min=(MIN_PER_SECOND) max=(MAX_PER_SECOND) class=(narrow)
                            value=(fields.rate);
                        " starts per second, burst "
                        input type="number" name="rate_burst" min="1" max=(MAX_LIMIT)
                            class=(narrow) value=(fields.rate_burst) aria-label="rate burst";
                        " " span.muted { "(burst: starts at once after a quiet spell; default one second's worth)" }
                    }
                    dt { label for="key_rate" { "Rate per key" } }
                    dd {
                        input id="key_rate" type="number" name="key_rate" step="any"
                            min=(MIN_PER_SECOND) max=(MAX_PER_SECOND) class=(narrow)
                            value=(fields.key_rate);
                        " starts per second, burst "
                        input type="number" name="key_rate_burst" min="1" max=(MAX_LIMIT)
                            class=(narrow) value=(fields.key_rate_burst)
                            aria-label="rate per key burst";
                        " " span.muted { "for the tasks sharing a task key (tasks without one: unlimited)" }
                    }
                    dt { "One per worker" }
                    dd {
                        label {
                            input type="checkbox" name="one_per_worker" checked[fields.one_per_worker];
                            " a worker holds at most one of this queue's tasks at a time"
                        }
                    }
                    dt { "Fair share" }
                    dd {
                        label {
                            input type="checkbox" name="fair_share" checked[fields.fair_share];
                            " long tasks: each live worker runs at most its share of those wanting to run"
                        }
                    }
                }
                p { button type="submit" { "Save policy" } }
            }
            (action_form(&session, "/ui/queues/policy", "Clear policy", true, html! {
                input type="hidden" name="queue" value=(name);
                input type="hidden" name="clear" value="1";
            }))
        }
    };
    page(
        &format!("Queue {name}: policy"),
        "Overview",
        Some(&session),
        false,
        body,
    )
    .into_response()
}

/// Sets the policy of the queue named in the form's `queue` field from the form's
/// fields, or clears it (`clear`). Back to the queue's policy page either way.
pub async fn set_policy(
    State(state): State<DashState>,
    session: Session,
    Form(form): Form<HashMap<String, String>>,
) -> Response {
    if let Err(refused) = check(&session, &form, true) {
        return refused.into_response();
    }
    let Some(name) = form.get("queue").filter(|q| !q.trim().is_empty()) else {
        return (StatusCode::UNPROCESSABLE_ENTITY, "queue is required").into_response();
    };
    let back = |pairs: &[(&str, &str)]| {
        let mut all = vec![("queue", name.as_str())];
        all.extend_from_slice(pairs);
        links::with_query("/ui/queues/policy", &all)
    };
    let fields = Fields::from_map(&form);
    let clear = form.contains_key("clear");
    // What was typed goes back with a refusal, so the operator corrects it, not retypes.
    let refused = |message: &str| {
        let mut pairs = vec![("error", message)];
        if !clear {
            pairs.push(("typed", "1"));
            pairs.extend(fields.pairs());
        }
        Redirect::to(&back(&pairs)).into_response()
    };
    let policy = if clear {
        QueuePolicy::default()
    } else {
        match fields.parse() {
            Ok(p) => p,
            Err(e) => return refused(&format!("queue {name}: nothing changed: {e}")),
        }
    };
    let done = if policy.is_limited() {
        format!("queue {name}: policy set: {}", summary(&policy, usize::MAX))
    } else {
        format!("queue {name}: policy cleared")
    };
    let set = state
        .app
        .store
        .queue_set_policy(QueuePolicyParams {
            actor: session.actor(),
            queue: name.clone(),
            policy,
        })
        .await;
    match set {
        Ok(()) => Redirect::to(&back(&[("done", &done)])).into_response(),
        Err(e) => refused(&format!("queue {name}: {}", failure::message(&e))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form(pairs: &[(&str, &str)]) -> Fields {
        let map = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Fields::from_map(&map)
    }

    #[test]
    fn every_field_parses_into_the_policy_and_back() {
        let fields = form(&[
            ("max_running", " 4 "),
            ("kind_max_running", "send=2,  digest = 1, a=b=3,"),
            ("rate", "2.5"),
            ("rate_burst", "5"),
            ("key_rate", "0.5"),
            ("one_per_worker", "on"),
            ("fair_share", "on"),
        ]);
        let policy = fields.parse().unwrap();
        let want = QueuePolicy {
            max_running: Some(4),
            kind_max_running: [("send", 2), ("digest", 1), ("a=b", 3)]
                .into_iter()
                .map(|(k, n)| (k.to_owned(), n))
                .collect(),
            rate: Some(Rate::per_second(2.5).with_burst(5)),
            key_rate: Some(Rate::per_second(0.5)),
            one_per_worker: true,
            fair_share: true,
        };
        assert_eq!(policy, want);
        assert_eq!(Fields::from_policy(&want).parse().unwrap(), want);
        assert_eq!(
            summary(&want, 2),
            "≤ 4 running · a=b ≤ 3, digest ≤ 1, 1 more kind · 2.5/s (burst 5) · \
             30/min per key · one per worker · fair share"
        );
        assert_eq!(form(&[]).parse().unwrap(), QueuePolicy::default());
        assert_eq!(summary(&QueuePolicy::default(), 3), "—");
    }

    #[test]
    fn rates_read_in_the_unit_that_keeps_them_whole() {
        let text = |per_second: f64| rate_text(&Rate::per_second(per_second));
        assert_eq!(text(2.5), "2.5/s");
        assert_eq!(text(1000.0), "1000/s");
        assert_eq!(text(0.5), "30/min");
        assert_eq!(text(1.0 / 600.0), "6/h");
        assert_eq!(text(MIN_PER_SECOND), "1/day");
        // The smallest rate the form takes from its own message's wording.
        let min = format!("{MIN_PER_SECOND:.7}");
        assert!(form(&[("rate", &min)]).parse().is_ok(), "{min}");
    }

    #[test]
    fn each_mistake_is_refused_with_its_reason() {
        for (pairs, reason) in [
            (
                vec![("max_running", "four")],
                "max running must be a whole number",
            ),
            (
                vec![("max_running", "-1")],
                "max running must be a whole number",
            ),
            (
                vec![("max_running", "2.5")],
                "max running must be a whole number",
            ),
            (vec![("max_running", "1000001")], "from 0 to 1000000"),
            (
                vec![("kind_max_running", "send:2")],
                "\"send:2\" is not kind=N",
            ),
            (vec![("kind_max_running", "=2")], "a kind must be 1 to"),
            (vec![("kind_max_running", "send=")], "has no number"),
            (
                vec![("kind_max_running", "send=x")],
                "the limit of kind \"send\"",
            ),
            (vec![("kind_max_running", "a=1, a=2")], "limited twice"),
            (vec![("rate", "fast")], "the rate must be a number"),
            (vec![("rate", "NaN")], "the rate must be a number"),
            (vec![("rate", "inf")], "the rate must be a number"),
            (vec![("rate", "0")], "one a day"),
            (vec![("rate", "2000000")], "to 1000000"),
            (
                vec![("rate", "1"), ("rate_burst", "0")],
                "burst of the rate",
            ),
            (vec![("rate_burst", "3")], "a burst needs a rate"),
            (vec![("key_rate", "-1")], "the rate per key must be"),
            (
                vec![("key_rate_burst", "3")],
                "a burst needs a rate per key",
            ),
        ] {
            let err = form(&pairs).parse().unwrap_err();
            assert!(err.contains(reason), "{pairs:?}: {err}");
        }
        let many: Vec<String> = (0..=MAX_KIND_LIMITS).map(|i| format!("k{i}=1")).collect();
        let err = form(&[("kind_max_running", &many.join(","))])
            .parse()
            .unwrap_err();
        assert!(err.contains("at most 64 kinds"), "{err}");
    }

    #[test]
    fn what_was_typed_goes_back_as_it_was() {
        let typed = form(&[
            ("max_running", "four"),
            ("rate", "2.5"),
            ("fair_share", "on"),
            ("csrf", "not sent back"),
        ]);
        let pairs: HashMap<String, String> = typed
            .pairs()
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        assert!(!pairs.contains_key("csrf") && !pairs.contains_key("rate_burst"));
        assert_eq!(Fields::from_map(&pairs), typed);
    }
}
