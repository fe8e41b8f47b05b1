//! What the dashboard tells browsers with every response, and the cross-site posts it
//! refuses before any form handler runs.
//!
//! The pages load nothing and run one script, the refresh of pages that show live
//! numbers ([`crate::refresh`]): the content security policy allows that script by its
//! hash and nothing else, no frame, no plugin, fetches only from the dashboard's own
//! origin (the script's event stream), and styles only from the one `<style>` element
//! every page carries, named by its hash. Inline SVG charts draw with
//! presentation attributes, which the policy does not govern, so they need no exception.
//! Nobody may frame a page (clickjacking), no URL leaks in a `Referer`, content types are
//! not sniffed, and pages (payloads, CSRF tokens) are not cached.

use axum::extract::Request;
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use sha2::{Digest, Sha256};
use std::sync::LazyLock;

static CSP: LazyLock<HeaderValue> = LazyLock::new(|| {
    let hash = |text: &str| base64::engine::general_purpose::STANDARD.encode(Sha256::digest(text));
    let (style, script) = (hash(crate::layout::STYLE), hash(crate::layout::SCRIPT));
    HeaderValue::try_from(format!(
        "default-src 'none'; style-src 'sha256-{style}'; script-src 'sha256-{script}'; \
         connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ))
    .expect("the policy is ASCII")
});

/// Adds the headers above to every response, after refusing a cross-site post.
pub async fn protect(req: Request, next: Next) -> Response {
    let changes = !matches!(*req.method(), Method::GET | Method::HEAD);
    let mut response = if changes && cross_site(req.headers()) {
        (
            StatusCode::FORBIDDEN,
            "refused: this form was sent from another site; open the dashboard itself and use its forms",
        )
            .into_response()
    } else {
        next.run(req).await
    };
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_SECURITY_POLICY, CSP.clone());
    for (name, value) in [
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::CACHE_CONTROL, "no-store"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}

/// Whether the browser says the request comes from a page of another origin's site or of
/// a sibling origin (another port of this host is "same-site", and shares its cookies).
/// Browsers that send no `Sec-Fetch-Site` are left to the CSRF token.
fn cross_site(headers: &HeaderMap) -> bool {
    headers
        .get("sec-fetch-site")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|site| matches!(site, "cross-site" | "same-site"))
}
