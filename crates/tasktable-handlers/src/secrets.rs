//! Which parts of a payload are secret, for whoever shows payloads to people, and blanking
//! those secrets out of the messages a handler writes.

/// The payload fields whose values are secret, as `(kind, JSON pointer)`: the pointer names
/// an object in a task's payload whose every value is a credential (the names are not
/// secret). Anything that shows payloads to readers (the API, the dashboard) should replace
/// those values, for example with `"[redacted]"`, and keep the names.
///
/// This is plain data so that the server and the dashboard need not depend on this crate:
/// the binary that registers the handlers hands it to them.
pub const SECRET_FIELDS: &[(&str, &str)] = &[
    ("http", "/headers"),
    ("http_batch", "/headers"),
    ("exec", "/env"),
];

/// The payload fields that are URLs which may carry a password (`https://user:pw@host/`),
/// as `(kind, JSON pointer to a string)`: readers should be shown the URL with its password
/// replaced. Secrets in a path or a query string cannot be told apart from the rest and are
/// shown; the handlers' documentation says to put credentials in headers instead.
pub const SECRET_URL_FIELDS: &[(&str, &str)] = &[("http", "/url"), ("http_batch", "/url")];

/// Values shorter than this are not searched for in messages: they cannot be secrets worth
/// the name, and blanking them would garble the message (a value `1` would hide every 1).
const MIN_SECRET_LEN: usize = 4;

/// What a hidden secret is shown as.
const REDACTED: &str = "[redacted]";

/// `message` with every occurrence of each secret replaced by `[redacted]`.
pub(crate) fn redact<'a>(
    mut message: String,
    secrets: impl IntoIterator<Item = &'a str>,
) -> String {
    for secret in secrets {
        if secret.len() >= MIN_SECRET_LEN {
            message = message.replace(secret, REDACTED);
        }
    }
    message
}

/// `text`, cut out of a longer output at its start (`cut_start`) or its end (`cut_end`),
/// with every secret hidden, and a piece of one at a cut edge too: a cut may split a
/// secret, and its piece must not show (two outputs cut at different places would give
/// the whole of it).
pub(crate) fn redact_cut(text: String, secrets: &[&str], cut_start: bool, cut_end: bool) -> String {
    let mut text = redact(text, secrets.iter().copied());
    for secret in secrets.iter().filter(|s| s.len() >= MIN_SECRET_LEN) {
        // Byte offsets of the secret's second to last characters: where a proper prefix
        // ends, or a proper suffix starts.
        let inner: Vec<usize> = secret.char_indices().map(|(i, _)| i).skip(1).collect();
        if cut_end {
            if let Some(end) = inner.iter().rev().find(|&&i| text.ends_with(&secret[..i])) {
                text.truncate(text.len() - end);
                text.push_str(REDACTED);
            }
        }
        if cut_start {
            if let Some(start) = inner.iter().find(|&&i| text.starts_with(&secret[i..])) {
                text = format!("{REDACTED}{}", &text[secret.len() - start..]);
            }
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_piece_of_a_secret_at_a_cut_edge_is_hidden() {
        let secrets = ["ENVSECRET111"];
        let head = "aaaaENVSEC".to_owned();
        assert_eq!(
            redact_cut(head.clone(), &secrets, false, true),
            "aaaa[redacted]"
        );
        assert_eq!(redact_cut(head, &secrets, false, false), "aaaaENVSEC");
        let tail = "RET111aaaa".to_owned();
        assert_eq!(redact_cut(tail, &secrets, true, false), "[redacted]aaaa");
        let whole = "x ENVSECRET111 y".to_owned();
        assert_eq!(redact_cut(whole, &secrets, true, true), "x [redacted] y");
        let unrelated = "nothing here".to_owned();
        assert_eq!(redact_cut(unrelated, &secrets, true, true), "nothing here");
    }
    use crate::{ExecPayload, HttpPayload};
    use serde_json::Value;

    #[test]
    fn every_secret_field_points_at_an_object_of_the_payload_it_names() {
        let mut http = HttpPayload::new("https://user:pw@h.example/");
        http.headers
            .insert("Authorization".into(), "Bearer t0ken".into());
        let mut exec = ExecPayload::new(["true"]);
        exec.env.insert("API_KEY".into(), "k3y-value".into());
        let batch = serde_json::json!({
            "url": "https://user:pw@h.example/items",
            "headers": {"Authorization": "Bearer t0ken"},
            "data": {"list": 7}
        });
        let parsed: crate::HttpBatchData = serde_json::from_value(batch.clone()).unwrap();
        assert_eq!(parsed.headers.len(), 1);
        let payload = |kind: &str| match kind {
            "http" => serde_json::to_value(&http).unwrap(),
            "http_batch" => batch.clone(),
            "exec" => serde_json::to_value(&exec).unwrap(),
            other => panic!("no payload for kind {other}"),
        };
        for (kind, pointer) in SECRET_FIELDS {
            let field = payload(kind).pointer(pointer).cloned();
            assert!(
                matches!(field, Some(Value::Object(ref o)) if !o.is_empty()),
                "{kind} {pointer}: {field:?}"
            );
        }
        for (kind, pointer) in SECRET_URL_FIELDS {
            let field = payload(kind).pointer(pointer).cloned();
            assert!(
                matches!(field, Some(Value::String(ref s)) if s.contains("user:pw@")),
                "{kind} {pointer}: {field:?}"
            );
        }
    }

    #[test]
    fn secrets_are_blanked_but_short_values_are_left_alone() {
        let message = "HTTP 401: bad token Bearer abc123 for 1".to_owned();
        let redacted = redact(message, ["Bearer abc123", "1"]);
        assert_eq!(redacted, "HTTP 401: bad token [redacted] for 1");
    }
}
