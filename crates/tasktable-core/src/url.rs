//! Reading a URL the one way tasktable reads it, and hiding its password from whoever only
//! looks at it: a reader seeing an `http` task's URL, an error naming a database.
//!
//! The built-in `http` handlers send what [`parse_http`] parses, and [`redact_password`]
//! and [`has_password`] read a URL with the same parser (the WHATWG URL rules of the `url`
//! crate, which the HTTP client and sqlx use too). A textual scan cannot keep up with
//! those rules: `https:/u:pw@h`, `https:\\u:pw@h`, `HTTPS:u:pw@h` and a tab inside the
//! scheme are all `https://u:pw@h/` to the parser, so a scan for `://` showed their
//! passwords to readers while the handler sent them.

use ::url::{Position, Url};

/// What a hidden password (or, in text that is no URL, the whole user information) is
/// shown as.
pub const REDACTED: &str = "[redacted]";

/// `text` as the URL an `http` task sends to: parsed by WHATWG rules, and `http` or
/// `https` only. An `Err` says why it can never be sent, without repeating the URL.
pub fn parse_http(text: &str) -> Result<Url, String> {
    let url = Url::parse(text).map_err(|e| format!("invalid url: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!(
            "url scheme {:?} is not allowed; use http or https",
            url.scheme()
        ));
    }
    Ok(url)
}

/// `text`, a URL shown to someone who may not see its password, with the password
/// replaced by [`REDACTED`].
///
/// - A URL with a password is shown as the parser reads it (normalised: `https:/u:pw@h`
///   becomes `https://u:[redacted]@h/`), its user name kept.
/// - A URL without one (`https://user@h/`, an empty password `https://u:@h/`) is shown as
///   written: there is nothing to hide.
/// - Text that does not parse is redacted by hand, erring on hiding too much: everything
///   from after the scheme and its slashes up to the last `@` of the text becomes
///   [`REDACTED`], user name included (`https://[redacted]@h:99999/`). A password that
///   does not parse may hold a `/`, `?` or `#`, so the scan does not stop at them.
///
/// A query parameter whose name holds `password` (`?password=`, `?sslpassword=`, as
/// database drivers read them) is a password too: its value is hidden the same way.
pub fn redact_password(text: &str) -> String {
    match Url::parse(text) {
        Ok(mut url) if url.password().is_some() || password_in_query(&url) => {
            hide_query_passwords(&mut url);
            if url.password().is_none() {
                return url.to_string();
            }
            format!(
                "{}{REDACTED}{}",
                &url[..Position::BeforePassword],
                &url[Position::AfterPassword..]
            )
        }
        Ok(_) => text.to_owned(),
        Err(_) => {
            let seen = hide_unparsed_query_passwords(&as_the_parser_sees(text));
            match unparsed_user_info(&seen) {
                Some(hidden) => {
                    format!("{}{REDACTED}{}", &seen[..hidden.start], &seen[hidden.end..])
                }
                None if seen != as_the_parser_sees(text) => seen,
                None => text.to_owned(),
            }
        }
    }
}

/// Whether a query parameter's name, decoded, holds `password` (any case).
fn is_password_key(key: &str) -> bool {
    key.to_ascii_lowercase().contains("password")
}

fn password_in_query(url: &Url) -> bool {
    url.query_pairs().any(|(k, _)| is_password_key(&k))
}

/// `url` with the value of every password parameter of its query hidden.
fn hide_query_passwords(url: &mut Url) {
    if !password_in_query(url) {
        return;
    }
    let pairs: Vec<(String, String)> = url
        .query_pairs()
        .map(|(k, v)| {
            let v = if is_password_key(&k) {
                REDACTED.to_owned()
            } else {
                v.into_owned()
            };
            (k.into_owned(), v)
        })
        .collect();
    url.query_pairs_mut().clear().extend_pairs(pairs);
}

/// In text that does not parse: the value of every query parameter whose name holds
/// `password` hidden, by hand (up to the next `&` or `#`).
fn hide_unparsed_query_passwords(text: &str) -> String {
    let Some(q) = text.find('?') else {
        return text.to_owned();
    };
    let (head, query) = text.split_at(q + 1);
    let (query, fragment) = query.split_at(query.find('#').unwrap_or(query.len()));
    let pairs: Vec<String> = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((k, _)) if is_password_key(&decoded(k)) => format!("{k}={REDACTED}"),
            _ => pair.to_owned(),
        })
        .collect();
    format!("{head}{}{fragment}", pairs.join("&"))
}

/// A query key percent-decoded (`+` as a space), as the parser would read it.
fn decoded(key: &str) -> String {
    ::url::form_urlencoded::parse(format!("{key}=").as_bytes())
        .next()
        .map(|(k, _)| k.into_owned())
        .unwrap_or_default()
}

/// Whether `text` holds a password, as [`redact_password`] would hide it: a URL with a
/// non-empty password (`postgres://u:pw@h/db`, `https:/u:pw@h`) or a password parameter
/// (`postgres://u@h/db?password=pw`), or text that does not parse but has a `:` before
/// its last `@` after the scheme, or a password parameter, which may be one.
pub fn has_password(text: &str) -> bool {
    match Url::parse(text) {
        Ok(url) => url.password().is_some() || password_in_query(&url),
        Err(_) => {
            let seen = as_the_parser_sees(text);
            unparsed_user_info(&seen).is_some_and(|hidden| seen[hidden].contains(':'))
                || hide_unparsed_query_passwords(&seen) != seen
        }
    }
}

/// `text` as the WHATWG parser reads it before anything else: without leading and trailing
/// C0 controls and spaces, and without any ASCII tab or newline.
fn as_the_parser_sees(text: &str) -> String {
    text.trim_matches(|c: char| c <= ' ')
        .chars()
        .filter(|c| !matches!(c, '\t' | '\n' | '\r'))
        .collect()
}

/// In text that does not parse as a URL, the bytes that may be user information: from
/// after the scheme (`name:`, if the text starts with one) and any `/` or `\` after it, to
/// the last `@`. `None` when no `@` follows.
fn unparsed_user_info(text: &str) -> Option<std::ops::Range<usize>> {
    let after_scheme = match text.split_once(':') {
        Some((scheme, _)) if is_scheme(scheme) => scheme.len() + 1,
        _ => 0,
    };
    let rest = &text[after_scheme..];
    let start = text.len() - rest.trim_start_matches(['/', '\\']).len();
    let at = start + text[start..].rfind('@')?;
    Some(start..at)
}

/// A URL scheme: an ASCII letter, then ASCII letters, digits, `+`, `-` and `.`.
fn is_scheme(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every spelling of a URL with the password `s3cr3t`, as its text and as the host and
    /// user name the handler would send to (`None`: the handler refuses it).
    const SPELLINGS: &[(&str, Option<(&str, &str)>)] = &[
        ("https://u:s3cr3t@h.example/x", Some(("h.example", "u"))),
        ("https:/u:s3cr3t@h.example", Some(("h.example", "u"))),
        ("https:\\u:s3cr3t@h.example", Some(("h.example", "u"))),
        ("https:\\\\u:s3cr3t@h.example", Some(("h.example", "u"))),
        ("https:/\\u:s3cr3t@h.example", Some(("h.example", "u"))),
        ("https:u:s3cr3t@h.example", Some(("h.example", "u"))),
        ("https:///u:s3cr3t@h.example", Some(("h.example", "u"))),
        ("HTTPS://u:s3cr3t@H.Example", Some(("h.example", "u"))),
        ("hTtP:u:s3cr3t@h.example:8080/", Some(("h.example", "u"))),
        ("ht\ttps://u:s3cr3t@h.example", Some(("h.example", "u"))),
        ("https:\n//u:s3\tcr\n3t@h.example", Some(("h.example", "u"))),
        ("https://u\r:s3cr3t@h.example", Some(("h.example", "u"))),
        ("  https://u:s3cr3t@h.example  ", Some(("h.example", "u"))),
        (
            "\u{0}\u{1f} https:u:s3cr3t@h.example\u{7}\u{0}",
            Some(("h.example", "u")),
        ),
        (
            "https://u:s3cr3t%40x%2F@h.example/",
            Some(("h.example", "u")),
        ),
        ("https://u:s3cr3t@x@h.example/p@q", Some(("h.example", "u"))),
        ("https://u:s3:cr3t@h.example/", Some(("h.example", "u"))),
        ("https://u:s3cr3t@[::1]:8443/x", Some(("[::1]", "u"))),
        ("https:u:s3cr3t@[2001:db8::1]", Some(("[2001:db8::1]", "u"))),
        (
            "https://us%20er:s3cr3t@h.example",
            Some(("h.example", "us%20er")),
        ),
        ("https://:s3cr3t@h.example", Some(("h.example", ""))),
        // Not sendable, but the password is still one.
        ("https://u:s3cr3t@h.example:99999/", None),
        ("https://u:s3cr3t@[::1/x", None),
        ("https://u:s3cr3t@", None),
        ("https://u:s3/cr3t@h.example/", None),
        ("https://u:s3cr3t@exa mple.com", None),
        ("postgres://app:s3cr3t@db:5432/tasks?sslmode=require", None),
        ("mysql://root:s3cr3t@127.0.0.1/test", None),
        ("ftp://u:s3cr3t@h.example/", None),
        ("no scheme u:s3cr3t@h", None),
    ];

    #[test]
    fn no_spelling_shows_the_password_and_the_handler_sends_to_what_was_shown() {
        for (text, sent_to) in SPELLINGS {
            let shown = redact_password(text);
            for secret in ["s3cr3t", "cr3t", "s3%3Acr3t"] {
                assert!(!shown.contains(secret), "{text:?} is shown as {shown:?}");
            }
            assert!(shown.contains(REDACTED), "{text:?} is shown as {shown:?}");
            assert!(has_password(text), "{text:?}");
            match (Url::parse(text), Url::parse(&shown)) {
                (Ok(url), Ok(read)) => {
                    assert_eq!(read.scheme(), url.scheme(), "{text:?}");
                    assert_eq!(read.host_str(), url.host_str(), "{text:?}");
                    assert_eq!(read.username(), url.username(), "{text:?}");
                    assert_eq!(read.port(), url.port(), "{text:?}");
                    assert_eq!(read.path(), url.path(), "{text:?}");
                }
                (Err(_), _) => assert!(!has_password(&shown), "{text:?}: {shown:?}"),
                (Ok(_), Err(e)) => panic!("{text:?} is shown as {shown:?}: {e}"),
            }
            match (parse_http(text), sent_to) {
                (Ok(sent), Some((host, user))) => {
                    assert_eq!(sent.host_str(), Some(*host), "{text:?}");
                    assert_eq!(sent.username(), *user, "{text:?}");
                    assert!(sent.password().is_some_and(|p| p.contains("cr3t")));
                }
                (Err(_), None) => {}
                (sent, _) => panic!("{text:?}: the handler parses {sent:?}"),
            }
        }
    }

    #[test]
    fn the_normalised_url_keeps_everything_but_the_password() {
        for (text, shown) in [
            ("https:/u:pw@h", "https://u:[redacted]@h/"),
            ("https:\\\\u:pw@h", "https://u:[redacted]@h/"),
            ("https:u:pw@h", "https://u:[redacted]@h/"),
            ("HTTPS://u:pw@H/P?q=1#f", "https://u:[redacted]@h/P?q=1#f"),
            (" ht\ttps://u:p\nw@h ", "https://u:[redacted]@h/"),
            ("https://u:p@w@h/p@x", "https://u:[redacted]@h/p@x"),
            (
                "https://u:pw@[::1]:8443/x",
                "https://u:[redacted]@[::1]:8443/x",
            ),
            (
                "postgres://app:s3cr%40t@db:5432/x?y=1",
                "postgres://app:[redacted]@db:5432/x?y=1",
            ),
            ("mysql://u:p:q@h/db", "mysql://u:[redacted]@h/db"),
        ] {
            assert_eq!(redact_password(text), shown, "{text:?}");
        }
    }

    #[test]
    fn text_that_does_not_parse_hides_everything_up_to_its_last_at() {
        for (text, shown) in [
            ("https://u:pw@h:99999/", "https://[redacted]@h:99999/"),
            ("https:\\/u:pw@h:99999", "https:\\/[redacted]@h:99999"),
            ("https://u:p/w@h:1/", "https://[redacted]@h:1/"),
            ("ht\ttps://u:pw@[::1", "https://[redacted]@[::1"),
            ("not a url: u:pw@h", "[redacted]@h"),
            ("//u:pw@h", "//[redacted]@h"),
        ] {
            assert_eq!(redact_password(text), shown, "{text:?}");
        }
    }

    #[test]
    fn a_url_without_a_password_is_shown_as_written() {
        for text in [
            "https://user@h/x",
            "https:/user@h",
            "https://u:@h",
            "https://h/p@x",
            "https://h/x?a=b:c@d",
            "https://h",
            "sqlite://tasks.db",
            "sqlite:///var/lib/tasktable/a b.db",
            "postgres://app@db/x",
            "mailto:someone@h.example",
            "no url at all",
            "",
        ] {
            assert_eq!(redact_password(text), text, "{text:?}");
            assert!(!has_password(text), "{text:?}");
        }
    }

    #[test]
    fn database_urls_yield_their_passwords() {
        for text in [
            "postgres://u:pw@h/db",
            "postgresql://u:pw@h:5432/db?sslmode=require",
            "mysql://u:pw@h/db",
            "mariadb://u:pw@h/db",
            "sqlite://u:pw@h/db",
        ] {
            let url = Url::parse(text).unwrap();
            assert_eq!(url.password(), Some("pw"), "{text:?}");
            assert_eq!(url.host_str(), Some("h"), "{text:?}");
            assert!(has_password(text), "{text:?}");
            assert!(!redact_password(text).contains("pw"), "{text:?}");
        }
    }

    #[test]
    fn a_password_in_the_query_is_a_password_too() {
        for text in [
            "postgres://postgres@127.0.0.1/db?password=S3CRETQ",
            "postgres://127.0.0.1/db?user=postgres&password=S3CRETQ",
            "postgresql://h/db?sslmode=require&sslpassword=S3CRETQ#x",
            "mysql://u@h/db?PASSWORD=S3CRETQ",
            "postgres://h/db?pass%77ord=S3CRETQ",
            "postgres://u:S3CRETP@h/db?password=S3CRETQ",
            "postgres://h:99999/db?password=S3CRETQ&x=1",
        ] {
            assert!(has_password(text), "{text:?}");
            let shown = redact_password(text);
            assert!(
                !shown.contains("S3CRET") && shown.contains(REDACTED.trim_matches(['[', ']'])),
                "{text:?} -> {shown:?}"
            );
        }
        let shown = redact_password("postgres://127.0.0.1/db?user=postgres&password=pw&x=1");
        assert!(
            shown.contains("user=postgres") && shown.contains("x=1"),
            "{shown}"
        );
        for text in [
            "postgres://u@h/db?sslmode=require",
            "postgres://u@h/db?note=password",
        ] {
            assert!(!has_password(text), "{text:?}");
            assert_eq!(redact_password(text), text);
        }
    }

    #[test]
    fn only_http_and_https_are_sendable() {
        for text in ["ftp://h/f", "file:///etc/passwd", "mailto:a@b", "ws://h/"] {
            let e = parse_http(text).unwrap_err();
            assert!(e.starts_with("url scheme"), "{e}");
        }
        let e = parse_http("not a url").unwrap_err();
        assert!(e.starts_with("invalid url"), "{e}");
        assert_eq!(parse_http("HTTP:h").unwrap().as_str(), "http://h/");
    }
}
