//! Every URL the dashboard builds from data.
//!
//! Names (queues, kinds, keys, filter values, messages) go only into query strings,
//! encoded by `form_urlencoded`, or into form fields, which the browser encodes; never
//! into a path. A path segment cannot carry every name safely: browsers resolve `.` and
//! `..` segments, `%2E%2E` included, before sending, so a queue named `..` would make a
//! form post somewhere else. Paths hold only fixed words and task and schedule ids, which
//! are numbers.

/// `path` with `pairs` as its query string; `path` alone when there are none.
pub fn with_query(path: &str, pairs: &[(&str, &str)]) -> String {
    let query = form_urlencoded::Serializer::new(String::new())
        .extend_pairs(pairs.iter())
        .finish();
    if query.is_empty() {
        path.to_owned()
    } else {
        format!("{path}?{query}")
    }
}

/// The task list filtered by `pairs`.
pub fn tasks(pairs: &[(&str, &str)]) -> String {
    with_query("/ui/tasks", pairs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_encoded_so_they_cannot_leave_their_value() {
        assert_eq!(
            tasks(&[("queue", "../tasks/7/cancel?"), ("kind", "a&b=c #d")]),
            "/ui/tasks?queue=..%2Ftasks%2F7%2Fcancel%3F&kind=a%26b%3Dc+%23d"
        );
        assert_eq!(with_query("/ui", &[]), "/ui");
        let back: Vec<(String, String)> = form_urlencoded::parse(
            tasks(&[("key", "ü+ /%")])
                .split_once('?')
                .unwrap()
                .1
                .as_bytes(),
        )
        .into_owned()
        .collect();
        assert_eq!(back, [("key".to_owned(), "ü+ /%".to_owned())]);
    }
}
