//! What readers must not see of a payload. The handlers that read secrets from their
//! payloads (the built-in `http` headers and `exec` environment, say) are known only to
//! the binary that registers them, which hands their fields over as plain data; the API
//! and the dashboard apply them to every payload they show a reader.

use serde_json::Value;

/// What replaces a secret value, as it replaces a URL's password.
pub const REDACTED: &str = tasktable_core::url::REDACTED;

/// The secret fields of payloads, by task kind.
#[derive(Debug, Clone, Default)]
pub struct Redactions {
    /// `(kind, JSON pointer)`: the object at the pointer holds only secret values; its
    /// names stay visible.
    objects: Vec<(String, String)>,
    /// `(kind, JSON pointer)`: a URL string whose password (`user:password@`) is secret,
    /// read as the `http` handler reads it ([`tasktable_core::url::redact_password`]).
    urls: Vec<(String, String)>,
}

impl Redactions {
    pub fn new(objects: &[(&str, &str)], urls: &[(&str, &str)]) -> Self {
        let own = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, p)| (k.to_string(), p.to_string()))
                .collect()
        };
        Redactions {
            objects: own(objects),
            urls: own(urls),
        }
    }

    /// `payload` of a task of `kind` as a reader may see it.
    pub fn apply(&self, kind: &str, payload: &mut Value) {
        for (_, pointer) in self.objects.iter().filter(|(k, _)| k == kind) {
            if let Some(Value::Object(fields)) = payload.pointer_mut(pointer) {
                for value in fields.values_mut() {
                    *value = Value::String(REDACTED.to_owned());
                }
            }
        }
        for (_, pointer) in self.urls.iter().filter(|(k, _)| k == kind) {
            if let Some(Value::String(url)) = payload.pointer_mut(pointer) {
                *url = tasktable_core::url::redact_password(url);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn redactions() -> Redactions {
        Redactions::new(
            &[("http", "/headers"), ("exec", "/env")],
            &[("http", "/url")],
        )
    }

    #[test]
    fn secret_values_are_replaced_and_names_kept() {
        let mut payload = json!({
            "url": "https://bot:s3cret@hooks.example:8443/path?q=1",
            "headers": {"Authorization": "Bearer t0ken", "X-Key": "k"},
            "body": {"Authorization": "stays: not a secret field"}
        });
        redactions().apply("http", &mut payload);
        assert_eq!(
            payload,
            json!({
                "url": "https://bot:[redacted]@hooks.example:8443/path?q=1",
                "headers": {"Authorization": "[redacted]", "X-Key": "[redacted]"},
                "body": {"Authorization": "stays: not a secret field"}
            })
        );
        let mut exec = json!({"command": ["env"], "env": {"TOKEN": "abc"}});
        redactions().apply("exec", &mut exec);
        assert_eq!(exec["env"], json!({"TOKEN": "[redacted]"}));
    }

    #[test]
    fn other_kinds_and_odd_shapes_are_left_alone() {
        let original = json!({"headers": {"a": "b"}, "url": "https://u:p@h/"});
        let mut other = original.clone();
        redactions().apply("mail", &mut other);
        assert_eq!(other, original);
        let mut odd = json!({"headers": "not an object", "url": 7});
        redactions().apply("http", &mut odd);
        assert_eq!(odd, json!({"headers": "not an object", "url": 7}));
        for url in ["https://h/p@x", "https://user@h/", "https://h"] {
            let mut payload = json!({ "url": url });
            redactions().apply("http", &mut payload);
            assert_eq!(payload, json!({ "url": url }));
        }
    }

    #[test]
    fn a_url_password_is_hidden_in_every_spelling_the_handler_sends() {
        for url in [
            "https:/bot:s3cret@h.example/x",
            "https:\\\\bot:s3cret@h.example/x",
            "https:bot:s3cret@h.example/x",
            "HTTPS://bot:s3cret@h.example/x",
            "ht\ttps://bot:s3cret@h.example/x",
        ] {
            let mut payload = json!({ "url": url });
            redactions().apply("http", &mut payload);
            assert_eq!(
                payload,
                json!({"url": "https://bot:[redacted]@h.example/x"}),
                "{url:?}"
            );
        }
        let mut unparsed = json!({"url": "https://bot:s3/cret@h.example:99999/"});
        redactions().apply("http", &mut unparsed);
        assert_eq!(
            unparsed,
            json!({"url": "https://[redacted]@h.example:99999/"})
        );
    }
}
