//! How pages that show live numbers stay fresh: a page that asks for it carries one small
//! script, allowed by the content security policy by its hash, that follows
//! `/ui/events` (a server-sent events stream of the session's, which says only that
//! something happened) and reloads the page when something did, at most every two
//! seconds; nothing happening, nothing reloads. A browser without scripts, or whose stream
//! fails, reloads every five seconds as before (`<noscript>` and the script's fallback).
//! The script itself is the layout's (`crate::layout::SCRIPT`).

use crate::session::Session;
use crate::DashState;
use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use std::time::Duration;
use tasktable_store::feed::{FeedFilter, Follower};

/// `GET /ui/events`: one message each time something happened (its data a count, never
/// what happened: the pages read that themselves), for the signed-in session.
pub async fn events(State(state): State<DashState>, session: Session) -> Response {
    let app = &state.app;
    let guard = match app.streams.open(
        &session.principal.name,
        app.limits.max_event_streams,
        app.streams_per_caller(),
    ) {
        Ok(g) => g,
        Err(e) => return e.into_response(),
    };
    let follower = match Follower::start(app.store.clone(), FeedFilter::default(), None).await {
        Ok(f) => f.poll_every(app.limits.event_poll),
        Err(e) => return crate::failure::page_for(e),
    };
    let stop = app.stop.clone();
    let messages = futures::stream::unfold((follower, guard), |(mut f, guard)| async move {
        let items = f.next().await.ok()?;
        Some((items.len(), (f, guard)))
    })
    .map(|n| Ok::<_, std::convert::Infallible>(Event::default().data(n.to_string())))
    .take_until(async move { stop.cancelled().await });
    Sse::new(messages)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response()
}
