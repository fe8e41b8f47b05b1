//! The OpenAPI document, kept beside the code in `openapi.json`. It is a contract: the
//! tests here check that it describes exactly the routes the router serves and states the
//! server's own limits, and `.ci/schemathesis` checks the running server against it
//! (docs/api.md, "The document as a contract").
//!
//! Where a route names its operation in the path (`/tasks/{id}/{op}`), the document lists
//! each operation as a path of its own, as each takes a body of its own.

use axum::http::header;
use axum::response::IntoResponse;

pub const DOCUMENT: &str = include_str!("../openapi.json");

pub async fn document() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/json")], DOCUMENT)
}

#[cfg(test)]
mod tests {
    use super::DOCUMENT;
    use crate::{Access, Limits, ROUTES};
    use serde_json::Value;
    use std::time::Duration;
    use tasktable_core::task::{MAX_ATTEMPTS_LIMIT, MAX_DELAY, MAX_NAME_LEN};
    use tasktable_core::{AttemptOutcome, LeaseCredential, NewTask, TaskState};

    fn doc() -> Value {
        serde_json::from_str(DOCUMENT).expect("valid JSON")
    }

    /// The paths the document lists for one route of the router.
    fn documented_paths(path: &str) -> Vec<String> {
        let ops: Vec<&str> = match path {
            "/api/v1/tasks/{id}/{op}" | "/api/v1/tasks/bulk/{op}" => crate::tasks::operations(),
            "/api/v1/leases/{id}/{op}" => crate::leases::LEASE_OPERATIONS
                .iter()
                .map(|(name, _)| *name)
                .collect(),
            "/api/v1/queues/{name}/{op}" => crate::queues::QUEUE_OPERATIONS.to_vec(),
            "/api/v1/schedules/{schedule}/{op}" => crate::schedules::SCHEDULE_OPERATIONS.to_vec(),
            "/api/v1/workers/{id}/{op}" => crate::workers::WORKER_OPERATIONS.to_vec(),
            "/api/v1/batches/{id}/{op}" => crate::batches::BATCH_OPERATIONS.to_vec(),
            _ => return vec![path.to_owned()],
        };
        ops.iter().map(|op| path.replace("{op}", op)).collect()
    }

    /// The schema at `pointer` (a JSON pointer into the document).
    fn at<'a>(doc: &'a Value, pointer: &str) -> &'a Value {
        doc.pointer(pointer)
            .unwrap_or_else(|| panic!("the document has nothing at {pointer}"))
    }

    fn body_schema<'a>(doc: &'a Value, path: &str) -> &'a Value {
        let path = path.replace('~', "~0").replace('/', "~1");
        at(
            doc,
            &format!("/paths/{path}/post/requestBody/content/application~1json/schema"),
        )
    }

    fn millis(d: Duration) -> u64 {
        d.as_millis() as u64
    }

    #[test]
    fn the_feeds_event_names_are_the_servers() {
        let doc = doc();
        let documented: std::collections::BTreeSet<&str> = at(
            &doc,
            "/paths/~1api~1v1~1events/get/parameters/3/schema/items/enum",
        )
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
        let served: std::collections::BTreeSet<&str> =
            crate::live::feed_event_names().into_iter().collect();
        assert_eq!(documented, served);
        let audit: Vec<&str> = at(&doc, "/components/schemas/EventName/enum")
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        let kinds: Vec<&str> = tasktable_core::EventKind::ALL
            .iter()
            .map(|k| k.as_str())
            .collect();
        assert_eq!(audit, kinds);
    }

    #[test]
    fn document_describes_exactly_the_served_routes() {
        let doc = doc();
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
            .flat_map(|(m, p, _)| documented_paths(p).into_iter().map(|p| (m.to_string(), p)))
            .collect();
        described.sort();
        served.sort();
        assert_eq!(described, served);
    }

    #[test]
    fn document_names_the_role_each_route_needs() {
        let doc = doc();
        for (method, route, access) in ROUTES {
            for path in documented_paths(route) {
                let text = doc["paths"][&path][method.to_lowercase()]["description"]
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

    #[test]
    fn each_lease_call_takes_exactly_the_fields_the_server_takes() {
        let doc = doc();
        for (op, fields) in crate::leases::LEASE_OPERATIONS {
            let schema = body_schema(&doc, &format!("/api/v1/leases/{{id}}/{op}"));
            assert_eq!(schema["additionalProperties"], false, "{op}");
            let mut documented: Vec<&str> = schema["properties"]
                .as_object()
                .unwrap()
                .keys()
                .map(String::as_str)
                .collect();
            let mut taken = vec!["token", "credential", "run"];
            taken.extend_from_slice(fields);
            documented.sort();
            taken.sort();
            assert_eq!(documented, taken, "{op}");
        }
    }

    /// Each call of a batched acknowledgement is its single route's body plus `task` and
    /// `op`, one variant per operation, at most `max_lease_calls` of them.
    #[test]
    fn each_batched_lease_call_is_its_single_routes_body_with_task_and_op() {
        let doc = doc();
        let leases = &body_schema(&doc, "/api/v1/leases")["properties"]["leases"];
        assert_eq!(leases["maxItems"], Limits::default().max_lease_calls);
        let variants = leases["items"]["oneOf"].as_array().unwrap();
        assert_eq!(variants.len(), crate::leases::LEASE_OPERATIONS.len());
        for ((op, _), variant) in crate::leases::LEASE_OPERATIONS.iter().zip(variants) {
            assert_eq!(variant["properties"]["op"]["const"], *op);
            let single = body_schema(&doc, &format!("/api/v1/leases/{{id}}/{op}"));
            let mut expected = single.clone();
            let props = expected["properties"].as_object_mut().unwrap();
            props.insert("task".into(), variant["properties"]["task"].clone());
            props.insert("op".into(), variant["properties"]["op"].clone());
            let required = expected["required"].as_array_mut().unwrap();
            required.splice(0..0, [Value::from("task"), Value::from("op")]);
            expected["title"] = variant["title"].clone();
            assert_eq!(variant, &expected, "{op}");
        }
    }

    #[test]
    fn document_states_the_policy_bounds_core_enforces() {
        use tasktable_core::policy::{MAX_KIND_LIMITS, MAX_LIMIT, MAX_PER_SECOND, MIN_PER_SECOND};
        let doc = doc();
        let p = at(&doc, "/components/schemas/QueuePolicy/properties");
        assert_eq!(p["max_running"]["maximum"], MAX_LIMIT);
        assert_eq!(p["kind_max_running"]["maxProperties"], MAX_KIND_LIMITS);
        assert_eq!(
            p["kind_max_running"]["additionalProperties"]["maximum"],
            MAX_LIMIT
        );
        let r = at(&doc, "/components/schemas/Rate/properties");
        assert_eq!(r["per_second"]["minimum"].as_f64(), Some(MIN_PER_SECOND));
        assert_eq!(r["per_second"]["maximum"].as_f64(), Some(MAX_PER_SECOND));
        assert_eq!(r["burst"]["maximum"], MAX_LIMIT);
    }

    #[test]
    fn document_states_the_kinds_a_heartbeat_carries_and_every_wait_reason() {
        use tasktable_core::waiting::WaitReason;
        use tasktable_core::worker::MAX_KINDS;
        let doc = doc();
        let beat = body_schema(&doc, "/api/v1/heartbeat");
        let kinds = &beat["properties"]["kinds"]["anyOf"][0];
        assert_eq!(kinds["maxItems"], MAX_KINDS);
        let shown = at(&doc, "/components/schemas/Worker/properties/kinds");
        assert_eq!(shown["maxItems"], MAX_KINDS);
        let codes = at(
            &doc,
            "/components/schemas/WaitReason/properties/reason/enum",
        );
        assert_eq!(codes, &serde_json::json!(WaitReason::CODES));
    }

    #[test]
    fn document_states_the_servers_limits() {
        let doc = doc();
        let limits = Limits::default();
        let schemas = "/components/schemas";
        let claim = format!("{schemas}/ClaimRequest/properties");
        let renew = body_schema(&doc, "/api/v1/leases/{id}/renew");
        let batch = body_schema(&doc, "/api/v1/tasks/batch");
        let page_size = at(&doc, "/paths/~1api~1v1~1tasks/get/parameters")
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == "limit")
            .unwrap();
        let ten_years = millis(MAX_DELAY);
        let checks: Vec<(&str, &Value, u64)> = vec![
            (
                "name length",
                at(&doc, &format!("{schemas}/Name/maxLength")),
                MAX_NAME_LEN as u64,
            ),
            (
                "max_attempts",
                at(
                    &doc,
                    &format!("{schemas}/SubmitTask/properties/max_attempts/maximum"),
                ),
                MAX_ATTEMPTS_LIMIT.into(),
            ),
            (
                "delay_ms",
                at(
                    &doc,
                    &format!("{schemas}/SubmitTask/properties/delay_ms/maximum"),
                ),
                ten_years,
            ),
            (
                "timeout_ms",
                at(
                    &doc,
                    &format!("{schemas}/SubmitTask/properties/timeout_ms/maximum"),
                ),
                ten_years,
            ),
            (
                "backoff max_ms",
                at(
                    &doc,
                    &format!("{schemas}/Backoff/properties/max_ms/maximum"),
                ),
                millis(tasktable_core::backoff::MAX_BACKOFF),
            ),
            (
                "batch size",
                &batch["properties"]["tasks"]["maxItems"],
                limits.max_batch as u64,
            ),
            (
                "claim limit",
                at(&doc, &format!("{claim}/limit/maximum")),
                limits.max_claim.into(),
            ),
            (
                "claim wait_ms",
                at(&doc, &format!("{claim}/wait_ms/maximum")),
                millis(limits.max_claim_wait),
            ),
            (
                "claim lease_ms min",
                at(&doc, &format!("{claim}/lease_ms/minimum")),
                millis(crate::leases::MIN_LEASE),
            ),
            (
                "claim lease_ms max",
                at(&doc, &format!("{claim}/lease_ms/maximum")),
                millis(crate::leases::MAX_PULL_LEASE),
            ),
            (
                "claim lease_ms default",
                at(&doc, &format!("{claim}/lease_ms/default")),
                millis(crate::leases::DEFAULT_LEASE),
            ),
            (
                "renew lease_ms min",
                &renew["properties"]["lease_ms"]["minimum"],
                millis(crate::leases::MIN_LEASE),
            ),
            (
                "renew lease_ms max",
                &renew["properties"]["lease_ms"]["maximum"],
                millis(crate::leases::MAX_PULL_LEASE),
            ),
            (
                "page size",
                &page_size["schema"]["maximum"],
                tasktable_store::MAX_PAGE_SIZE.into(),
            ),
            (
                "series points",
                at(
                    &doc,
                    &format!("{schemas}/Stats/properties/series/properties/points/maxItems"),
                ),
                tasktable_store::stats::MAX_POINTS as u64,
            ),
        ];
        for (what, documented, server) in checks {
            assert_eq!(documented.as_u64(), Some(server), "{what}");
        }
        for op in ["snooze", "fail"] {
            let schema = body_schema(&doc, &format!("/api/v1/leases/{{id}}/{op}"));
            let field = if op == "snooze" {
                "delay_ms"
            } else {
                "retry_after_ms"
            };
            assert_eq!(
                schema["properties"][field]["maximum"].as_u64(),
                Some(ten_years)
            );
        }
        let reschedule = body_schema(&doc, "/api/v1/tasks/{id}/reschedule");
        assert_eq!(
            reschedule["properties"]["delay_ms"]["maximum"].as_u64(),
            Some(ten_years)
        );
        let names = |list: &Value| -> Vec<String> {
            list.as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_str().unwrap().to_owned())
                .collect()
        };
        let states: Vec<String> = TaskState::ALL
            .iter()
            .map(|s| s.as_str().to_owned())
            .collect();
        assert_eq!(names(at(&doc, &format!("{schemas}/State/enum"))), states);
        let outcomes: Vec<String> = AttemptOutcome::ALL
            .iter()
            .map(|o| o.as_str().to_owned())
            .collect();
        let mut documented = names(at(
            &doc,
            &format!("{schemas}/Attempt/properties/outcome/enum"),
        ));
        let mut outcomes_sorted = outcomes.clone();
        documented.sort();
        outcomes_sorted.sort();
        assert_eq!(documented, outcomes_sorted);
        let credential = at(&doc, &format!("{schemas}/Credential/pattern"));
        assert_eq!(
            credential,
            &format!("^[0-9a-fA-F]{{{}}}$", LeaseCredential::HEX_LEN)
        );
    }

    /// The document's pattern at `pointer`, as the validators read it: a search.
    fn pattern(doc: &Value, pointer: &str) -> regex::Regex {
        regex::Regex::new(at(doc, pointer).as_str().unwrap()).expect("the pattern compiles")
    }

    #[test]
    fn name_pattern_admits_exactly_the_names_the_server_takes() {
        let doc = doc();
        let name = pattern(&doc, "/components/schemas/Name/pattern");
        let samples = [
            "",
            " ",
            "a",
            " a ",
            "\u{3000}",
            "a\u{85}",
            "\u{a0}x",
            "x\u{7f}",
            "\t",
            "a\nb",
            "😀",
            "\u{2028}",
            "\u{200b}",
            "\u{feff}",
            "\u{1680}",
            "\u{9f}",
            "kind.with-dots",
        ];
        for sample in samples {
            let documented = name.is_match(sample) && !sample.is_empty();
            let task = NewTask::new(sample, Value::Null).validate().is_ok();
            let worker = crate::leases::check_name("worker_id", sample).is_ok();
            assert_eq!((documented, documented), (task, worker), "{sample:?}");
        }
    }

    #[test]
    fn window_pattern_admits_exactly_the_windows_the_server_takes() {
        let doc = doc();
        let parameters = at(&doc, "/paths/~1api~1v1~1stats/get/parameters");
        let window = parameters
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == "window")
            .unwrap();
        let documented = regex::Regex::new(window["schema"]["pattern"].as_str().unwrap()).unwrap();
        let takes = |text: &str| {
            crate::wire::parse_window(text)
                .map(|w| tasktable_store::StatsParams::window(w).validate().is_ok())
                .unwrap_or(false)
        };
        let mut samples: Vec<String> = Vec::new();
        for n in 0..=50_000 {
            for unit in ["m", "h", "d"] {
                samples.push(format!("{n}{unit}"));
            }
        }
        samples.extend(
            [
                "007h", "0001d", "+1h", " 1h", "1h ", "1H", "1", "h", "", "1.5h", "1w", "44641m",
            ]
            .map(String::from),
        );
        for sample in samples {
            assert_eq!(documented.is_match(&sample), takes(&sample), "{sample:?}");
        }
    }

    /// The payload's schema spells out its NUL rule level by level, each level's arrays
    /// and objects holding the next, down to a last level that says it in words: no
    /// schema refers to itself, which generators cannot follow.
    #[test]
    fn payload_levels_refuse_nul_down_to_a_level_that_says_it_in_words() {
        let doc = doc();
        let schemas = at(&doc, "/components/schemas");
        let no_nul = serde_json::json!({"pattern": "^[^\\u0000]*$"});
        let mut name = "Payload".to_owned();
        let mut levels = 1;
        while let Some(alternatives) = schemas[&name]["anyOf"].as_array() {
            assert_eq!(alternatives.len(), 4, "{name}");
            let scalars = serde_json::json!(["null", "boolean", "number"]);
            assert_eq!(alternatives[0]["type"], scalars, "{name}");
            assert_eq!(alternatives[1]["type"], "string");
            assert_eq!(alternatives[1]["pattern"], no_nul["pattern"], "{name}");
            let next = alternatives[2]["items"]["$ref"].as_str().unwrap();
            assert_eq!(
                alternatives[3]["additionalProperties"]["$ref"], next,
                "{name}"
            );
            assert_eq!(alternatives[3]["propertyNames"], no_nul, "{name}");
            name = next
                .strip_prefix("#/components/schemas/")
                .unwrap()
                .to_owned();
            levels += 1;
            assert_eq!(name, format!("PayloadLevel{levels}"));
        }
        assert_eq!(levels, 4, "three levels spelled out, then words");
        let last = schemas[&name].as_object().unwrap();
        assert_eq!(last.keys().collect::<Vec<_>>(), ["description"], "any JSON");
        assert!(last["description"].as_str().unwrap().contains("NUL"));
    }

    #[test]
    fn schedule_name_pattern_admits_exactly_the_names_the_server_takes() {
        let doc = doc();
        let name = at(&doc, "/components/schemas/Name/pattern")
            .as_str()
            .unwrap();
        let schedule = at(&doc, "/components/schemas/ScheduleName/pattern")
            .as_str()
            .unwrap();
        // Rust's regex has no look-ahead: check the document's pattern is Name's behind
        // "not a number", and what those two admit together.
        assert_eq!(schedule, format!("^(?![+-]?[0-9]+$){}", &name[1..]));
        let name = regex::Regex::new(name).unwrap();
        let number = regex::Regex::new("^[+-]?[0-9]+$").unwrap();
        for sample in [
            "12", "+3", "-0", "1a", "a1", "nightly", " 1", "1 ", "++1", "+", "-", "", "\t",
        ] {
            let documented =
                !sample.is_empty() && name.is_match(sample) && !number.is_match(sample);
            let server = matches!(
                crate::schedules::schedule_ref(sample),
                Ok(tasktable_store::ScheduleRef::Name(_))
            );
            assert_eq!(documented, server, "{sample:?}");
        }
    }
}
