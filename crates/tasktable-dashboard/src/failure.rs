//! Store errors as the dashboard shows them. A mistake the operator can fix (a wrong
//! state, an unknown task, a bad value) is shown as the store words it. A database
//! failure is not: its text can name tables, columns, hosts or values, so it goes to the
//! log under a short random reference, and the page shows only that reference.

use crate::layout::page;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use maud::html;
use tasktable_store::StoreError;

/// What to tell the operator about `err`; a database failure is logged here, except an
/// unreachable database, which the store logs once for the whole outage.
pub fn message(err: &StoreError) -> String {
    if err.is_client_error() {
        return err.to_string();
    }
    if err.is_unreachable() {
        return "the database cannot be reached; try again when it is back".into();
    }
    let reference = hex::encode(rand::random::<[u8; 4]>());
    tracing::error!(%reference, error = %err, "a dashboard request failed in the database");
    format!(
        "the database could not complete the request; try again. The server's log has the \
         details under reference {reference}."
    )
}

/// A page saying a read failed: 503 for a database failure, 422 for a bad request.
pub fn page_for(err: StoreError) -> Response {
    let status = if err.is_client_error() {
        StatusCode::UNPROCESSABLE_ENTITY
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let body = html! {
        h1 { "Not available" }
        div.flash.error { (message(&err)) }
        p { a href="/ui" { "Overview" } }
    };
    (status, page("Not available", "", None, false, body)).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_database_failure_is_shown_only_by_reference() {
        let raw =
            std::io::Error::other("relation \"tasktable_tasks\" does not exist at db-7.internal");
        let shown = message(&StoreError::database(raw));
        assert!(
            !shown.contains("tasktable_tasks") && !shown.contains("db-7"),
            "{shown}"
        );
        let reference = shown
            .rsplit("reference ")
            .next()
            .unwrap()
            .trim_end_matches('.');
        assert_eq!(reference.len(), 8, "{shown}");
        assert!(message(&StoreError::Migration("secret dsn".into())).contains("reference"));
        let away = message(&StoreError::unreachable(std::io::Error::other(
            "db-7.internal",
        )));
        assert!(
            away.contains("cannot be reached") && !away.contains("db-7"),
            "{away}"
        );
    }

    #[test]
    fn a_mistake_the_operator_can_fix_is_shown_as_worded() {
        let err = StoreError::illegal(
            7,
            tasktable_core::Operation::Release,
            tasktable_core::TaskState::Pending,
        );
        assert_eq!(message(&err), err.to_string());
    }
}
