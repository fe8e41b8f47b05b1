//! The Rust client's view of the event log: its changes carry its actor, a task's
//! timeline tells them, and a follower sees them as they happen.

use serde_json::json;
use std::time::Duration;
use tasktable::store::feed::FeedFilter;
use tasktable::{Actor, ActorKind, Client, EventKind, NewTask};

#[tokio::test]
async fn a_clients_changes_carry_its_actor_into_the_timeline_the_audit_and_the_feed() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("t.db").display());
    let store = tasktable::connect(&url).await.unwrap();
    store.migrate().await.unwrap();
    let billing = Actor::new(ActorKind::Rust, "billing-app", None);
    let client = Client::new(store).acting_as(billing.clone());
    let mut follower = client.follow(FeedFilter::default(), None).await.unwrap();

    let id = client
        .submit(NewTask::new("invoice", json!({"n": 1})))
        .await
        .unwrap()
        .id;
    client.hold(id).await.unwrap();

    let timeline = client.timeline(id).await.unwrap().expect("the task exists");
    let seen: Vec<&str> = timeline.iter().map(|e| e.event.as_str()).collect();
    assert_eq!(seen, ["submitted", "held"]);
    assert_eq!(timeline[1].actor.as_ref(), Some(&billing));

    let log = client.audit(Default::default(), None, 10).await.unwrap();
    assert_eq!(log.len(), 1);
    assert_eq!((log[0].event, &log[0].actor), (EventKind::Held, &billing));

    let mut followed = Vec::new();
    while followed.len() < 2 {
        let items = tokio::time::timeout(Duration::from_secs(10), follower.next())
            .await
            .expect("the follower sees them within 10 s")
            .unwrap();
        followed.extend(items.into_iter().map(|(item, _)| item.event));
    }
    assert_eq!(followed, ["submitted", "held"]);
    assert!(client.timeline(id + 1).await.unwrap().is_none());
}
