//! The OpenAPI document, kept beside the code in `openapi.json`; a test checks that it
//! describes exactly the routes the router serves.

use axum::http::header;
use axum::response::IntoResponse;

pub const DOCUMENT: &str = include_str!("../openapi.json");

pub async fn document() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/json")], DOCUMENT)
}

#[cfg(test)]
mod tests {
    use super::DOCUMENT;
    use crate::{Access, ROUTES};
    use serde_json::Value;

    #[test]
    fn document_describes_exactly_the_served_routes() {
        let doc: Value = serde_json::from_str(DOCUMENT).expect("valid JSON");
        let paths = doc["paths"].as_object().unwrap();
        let mut described: Vec<(String, String)> = paths
            .iter()
            .flat_map(|(path, item)| {
                item.as_object()
                    .unwrap()
                    .keys()
                    .map(move |m| (m.to_uppercase(), path.clone()))
            })
            .filter(|(_, p)| p != "/healthz" && p != "/api/v1/openapi.json")
            .collect();
        let mut served: Vec<(String, String)> = ROUTES
            .iter()
            .map(|(m, p, _)| (m.to_string(), p.to_string()))
            .collect();
        described.sort();
        served.sort();
        assert_eq!(described, served);
    }

    #[test]
    fn document_names_the_role_each_route_needs() {
        let doc: Value = serde_json::from_str(DOCUMENT).unwrap();
        for (method, path, access) in ROUTES {
            let text = doc["paths"][path][method.to_lowercase()]["description"]
                .as_str()
                .unwrap_or_default();
            let expected = match access {
                Access::Read => "reader, operator or admin",
                Access::Operate => "operator or admin",
                Access::Work => "worker or admin",
                Access::Admin => "role: admin",
            };
            assert!(text.contains(expected), "{method} {path}: {text:?}");
        }
    }
}
