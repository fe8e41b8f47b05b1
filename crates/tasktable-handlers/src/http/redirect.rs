//! Following a redirect: where the next request goes, with which method, body and headers.
//!
//! The handler follows redirects itself instead of leaving them to the HTTP client: the
//! client's policies can refuse a hop but cannot change the next request, and on a change
//! of host it drops only `Authorization` and cookies. A payload's headers may hold any
//! credential (`X-Api-Key`, a signature), so here they are all dropped when the origin
//! changes.

use super::request::Prepared;
use reqwest::header::{HeaderMap, CONTENT_ENCODING, CONTENT_LENGTH, CONTENT_TYPE, LOCATION};
use reqwest::{Method, StatusCode};

/// The `Location` of a redirect the handler follows (301, 302, 303, 307, 308); `None`
/// for any other answer, which is then judged as it is.
pub(super) fn location(status: StatusCode, headers: &HeaderMap) -> Option<&str> {
    let follows = matches!(status.as_u16(), 301 | 302 | 303 | 307 | 308);
    follows
        .then(|| headers.get(LOCATION)?.to_str().ok())
        .flatten()
}

/// Turns `request` into the request the redirect asks for, or says why it is not followed.
pub(super) fn follow(
    request: &mut Prepared,
    status: StatusCode,
    location: &str,
) -> Result<(), String> {
    let next = request
        .url
        .join(location)
        .map_err(|e| format!("redirect to an invalid location {location:?}: {e}"))?;
    if !matches!(next.scheme(), "http" | "https") {
        return Err(format!(
            "redirect to a {:?} URL refused; only http and https are followed",
            next.scheme()
        ));
    }
    if request.url.scheme() == "https" && next.scheme() == "http" {
        return Err(format!(
            "redirect from https to http ({}) refused: the request would leave TLS",
            Prepared::describe_url(&next)
        ));
    }
    if next.origin() != request.url.origin() {
        request.headers.clear();
    }
    // As browsers and curl do: 303 always becomes a GET; 301 and 302 turn a POST into a
    // GET; 307 and 308 repeat the request as it was.
    let to_get = status == StatusCode::SEE_OTHER
        || (request.method == Method::POST && matches!(status.as_u16(), 301 | 302));
    if to_get {
        request.method = Method::GET;
        request.body = None;
        for name in [CONTENT_TYPE, CONTENT_LENGTH, CONTENT_ENCODING] {
            request.headers.remove(name);
        }
    }
    request.url = next;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::HttpPayload;
    use serde_json::json;

    fn request(url: &str, method: &str) -> Prepared {
        let payload = json!({
            "url": url,
            "method": method,
            "headers": {"X-Api-Key": "k3y", "Content-Type": "application/json"},
            "body": {"a": 1},
        });
        let payload: HttpPayload = serde_json::from_value(payload).unwrap();
        Prepared::new(payload, None).unwrap()
    }

    fn status(code: u16) -> StatusCode {
        StatusCode::from_u16(code).unwrap()
    }

    #[test]
    fn a_same_origin_redirect_keeps_the_headers() {
        let mut r = request("https://a.example/x", "PUT");
        follow(&mut r, status(307), "/y?z=1").unwrap();
        assert_eq!(r.url.as_str(), "https://a.example/y?z=1");
        assert_eq!((r.method, r.body), (Method::PUT, Some(json!({"a": 1}))));
        assert_eq!(r.headers.len(), 2);
    }

    #[test]
    fn another_host_port_or_scheme_drops_every_payload_header() {
        for (from, next) in [
            ("https://a.example/x", "https://b.example/x"),
            ("https://a.example/x", "https://a.example:8443/x"),
            ("http://a.example/x", "https://a.example/x"),
        ] {
            let mut r = request(from, "PUT");
            follow(&mut r, status(308), next).unwrap();
            assert!(r.headers.is_empty(), "{next}: {:?}", r.headers);
            assert_eq!(
                r.body,
                Some(json!({"a": 1})),
                "{next}: a 308 keeps the body"
            );
        }
    }

    #[test]
    fn https_never_downgrades_to_http() {
        let mut r = request("https://a.example/x", "POST");
        let err = follow(&mut r, status(302), "http://a.example/x").unwrap_err();
        assert!(err.contains("from https to http"), "{err}");
        assert_eq!(r.url.as_str(), "https://a.example/x", "unchanged");
        let mut r = request("http://a.example/x", "POST");
        follow(&mut r, status(302), "https://a.example/x").unwrap();
    }

    #[test]
    fn see_other_and_a_moved_post_become_a_get_without_a_body() {
        for (code, method, want) in [
            (303, "PUT", Method::GET),
            (301, "POST", Method::GET),
            (302, "POST", Method::GET),
            (302, "DELETE", Method::DELETE),
            (307, "POST", Method::POST),
        ] {
            let mut r = request("https://a.example/x", method);
            follow(&mut r, status(code), "/y").unwrap();
            assert_eq!(r.method, want, "{code} {method}");
            assert_eq!(r.body.is_some(), want != Method::GET, "{code} {method}");
            assert_eq!(r.headers.contains_key(CONTENT_TYPE), want != Method::GET);
        }
    }

    #[test]
    fn other_schemes_and_bad_locations_are_not_followed() {
        let mut r = request("https://a.example/x", "GET");
        let err = follow(&mut r, status(302), "file:///etc/passwd").unwrap_err();
        assert!(err.contains("\"file\" URL refused"), "{err}");
        let err = follow(&mut r, status(302), "http://[::1").unwrap_err();
        assert!(err.contains("invalid location"), "{err}");
    }

    #[test]
    fn only_redirects_with_a_location_are_followed() {
        let mut headers = HeaderMap::new();
        headers.insert(LOCATION, "/next".parse().unwrap());
        assert_eq!(location(status(308), &headers), Some("/next"));
        assert_eq!(location(status(300), &headers), None);
        assert_eq!(location(status(304), &headers), None);
        assert_eq!(location(status(302), &HeaderMap::new()), None);
    }
}
