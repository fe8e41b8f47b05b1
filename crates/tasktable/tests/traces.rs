//! The Rust client and worker with an OpenTelemetry layer, as an application sets one up:
//! a submit inside a span records that span's trace with the task, and the attempt that
//! runs it is a span of that trace, current while the handler runs (so the handler's own
//! spans are its children). Without the layer, nothing is recorded.

use opentelemetry::trace::{SpanId, TracerProvider as _};
use opentelemetry::Value;
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use serde_json::json;
use tasktable::{
    Client, Handler, HandlerError, NewTask, Store, TaskContext, TaskState, Worker, WorkerEvent,
};
use tracing::Instrument;
use tracing_subscriber::layer::SubscriberExt;

struct Traced;

impl Handler for Traced {
    const KIND: &'static str = "traced";
    type Payload = serde_json::Value;
    type Output = ();

    async fn run(&self, _ctx: TaskContext, _: serde_json::Value) -> Result<(), HandlerError> {
        tracing::info_span!("inside the handler").in_scope(|| ());
        Ok(())
    }
}

async fn store() -> (tempfile::TempDir, std::sync::Arc<dyn Store>) {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("t.db").display());
    let store = tasktable::connect(&url).await.unwrap();
    store.migrate().await.unwrap();
    (dir, store)
}

/// Runs a worker until one attempt has finished.
async fn run_one(store: std::sync::Arc<dyn Store>) {
    let worker = Worker::builder(store).register(Traced).build().unwrap();
    let mut events = worker.subscribe();
    worker
        .run(async move {
            while let Ok(event) = events.recv().await {
                if matches!(event, WorkerEvent::Finished { .. }) {
                    break;
                }
            }
        })
        .await;
}

fn attribute<'a>(span: &'a SpanData, key: &str) -> Option<&'a Value> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| &kv.value)
}

// One thread: the subscriber set for this test is the one its tasks see.
#[tokio::test(flavor = "current_thread")]
async fn a_submit_in_a_span_and_its_attempt_are_one_trace() {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test")));
    let _default = tracing::subscriber::set_default(subscriber);

    let (_dir, store) = store().await;
    let client = Client::new(store.clone());
    let caller = tracing::info_span!("checkout");
    let id = client
        .submit(NewTask::new("traced", json!({})))
        .instrument(caller.clone())
        .await
        .unwrap()
        .id;
    drop(caller);
    run_one(store).await;
    provider.force_flush().unwrap();

    let spans = exporter.get_finished_spans().unwrap();
    let named = |name: &str| {
        spans
            .iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("no span {name}: {spans:#?}"))
    };
    let (checkout, attempt, inside) = (
        named("checkout"),
        named("run traced"),
        named("inside the handler"),
    );
    let trace = checkout.span_context.trace_id();
    assert_eq!(attempt.span_context.trace_id(), trace);
    assert_eq!(attempt.parent_span_id, checkout.span_context.span_id());
    assert!(
        attempt.parent_span_is_remote,
        "its parent came from the task's row"
    );
    assert_eq!(inside.parent_span_id, attempt.span_context.span_id());
    assert_eq!(
        attribute(attempt, "tasktable.task.id"),
        Some(&Value::I64(id))
    );
    assert_eq!(
        attribute(attempt, "tasktable.attempt.outcome"),
        Some(&Value::from("succeeded"))
    );

    let task = client.get(id).await.unwrap().expect("the task");
    assert_eq!(task.state, TaskState::Succeeded);
    let recorded = task
        .traceparent
        .expect("the task records the caller's trace");
    assert_eq!(recorded.trace_id(), trace.to_string());
    assert_eq!(
        recorded.parent_id(),
        checkout.span_context.span_id().to_string()
    );
    assert_ne!(checkout.span_context.span_id(), SpanId::INVALID);
}

#[tokio::test(flavor = "current_thread")]
async fn without_a_layer_a_task_records_no_trace() {
    let (_dir, store) = store().await;
    let client = Client::new(store);
    let id = client
        .submit(NewTask::new("traced", json!({})))
        .instrument(tracing::info_span!("checkout"))
        .await
        .unwrap()
        .id;
    let task = client.get(id).await.unwrap().expect("the task");
    assert_eq!(task.traceparent, None);
}
