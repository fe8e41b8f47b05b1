use super::*;
use crate::backoff::Backoff;
use crate::policy::Rate;
use crate::runs::Runs;
use crate::worker::{Protocol, Queues};
use chrono::TimeZone;
use serde_json::json;

fn at(secs: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(1_800_000_000 + secs, 0).unwrap()
}

fn task() -> Task {
    Task {
        id: 1,
        kind: "resize".into(),
        queue: "default".into(),
        state: TaskState::Pending,
        payload: json!(null),
        result: None,
        checkpoint: None,
        progress: None,
        key: None,
        idempotency_key: None,
        priority: 0,
        run_at: at(0),
        attempt: 0,
        max_attempts: 5,
        backoff: Backoff::default(),
        timeout: None,
        lease_token: 0,
        lease_credential: None,
        lease_expires_at: None,
        deadline_at: None,
        worker_id: None,
        worker_host: None,
        last_error: None,
        created_at: at(0),
        updated_at: at(0),
        started_at: None,
        finished_at: None,
        schedule_id: None,
        slot_at: None,
        target: Target::Any,
        affinity: None,
        affinity_until: None,
        runs: None,
        run_counts: None,
        run: None,
        created_by: None,
        traceparent: None,
    }
}

fn worker(id: &str, kinds: Option<&[&str]>) -> LiveWorker {
    LiveWorker {
        facts: WorkerFacts {
            id: id.into(),
            host: "h".into(),
            pid: None,
            version: "v".into(),
            groups: vec![],
            queues: Queues::Listed(vec!["default".into()]),
            capacity: 4,
            protocol: Protocol::Process,
            kinds: kinds.map(|k| k.iter().map(|s| s.to_string()).collect()),
        },
        draining: false,
        running: 0,
        running_in_queue: 0,
    }
}

fn around(live: Vec<LiveWorker>) -> Surroundings {
    Surroundings {
        now: at(10),
        live,
        ..Surroundings::default()
    }
}

fn codes(t: &Task, a: &Surroundings) -> Vec<&'static str> {
    reasons(t, a).iter().map(WaitReason::code).collect()
}

#[test]
fn only_a_pending_task_has_reasons() {
    let a = around(vec![]);
    for state in [
        TaskState::Held,
        TaskState::Running,
        TaskState::Succeeded,
        TaskState::Failed,
        TaskState::Cancelled,
    ] {
        let t = Task { state, ..task() };
        assert!(reasons(&t, &a).is_empty(), "{state:?}");
    }
    assert!(!reasons(&task(), &a).is_empty());
}

#[test]
fn a_free_worker_for_the_task_finds_no_cause_and_says_so() {
    let a = around(vec![worker("w1", Some(&["resize"]))]);
    let found = reasons(&task(), &a);
    assert_eq!(found, vec![WaitReason::Turn]);
    assert_eq!(
        found[0].to_string(),
        "nothing holds it back: it waits for a worker with a free slot to claim it"
    );
}

#[test]
fn a_task_due_later_says_when_and_what_else_holds_it() {
    let t = Task {
        run_at: at(3600),
        ..task()
    };
    let a = around(vec![worker("w1", Some(&["resize"]))]);
    let found = reasons(&t, &a);
    assert_eq!(found, vec![WaitReason::NotDue { until: at(3600) }]);
    assert_eq!(
        found[0].to_string(),
        "not due until 2027-01-15 09:00:00 UTC"
    );
    let a = Surroundings {
        paused: true,
        ..around(vec![])
    };
    assert_eq!(
        codes(&t, &a),
        vec!["not_due", "queue_paused", "no_live_worker"]
    );
}

#[test]
fn a_paused_queue_is_named() {
    let a = Surroundings {
        paused: true,
        ..around(vec![worker("w1", None)])
    };
    let found = reasons(&task(), &a);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].to_string(), "queue \"default\" is paused");
}

#[test]
fn no_worker_for_the_kind_only_when_every_worker_of_the_queue_said_its_kinds() {
    let a = around(vec![
        worker("w1", Some(&["email"])),
        worker("w2", Some(&[])),
    ]);
    let found = reasons(&task(), &a);
    assert_eq!(
        found[0].to_string(),
        "no live worker handles kind \"resize\" in queue \"default\""
    );
    // A worker whose kinds are unknown might handle it: nothing definite is said.
    let a = around(vec![worker("w1", Some(&["email"])), worker("old", None)]);
    assert_eq!(codes(&task(), &a), vec!["turn"]);
    // A worker of another queue that handles the kind does not help.
    let mut other = worker("w3", Some(&["resize"]));
    other.facts.queues = Queues::Listed(vec!["emails".into()]);
    let a = around(vec![worker("w1", Some(&["email"])), other]);
    assert_eq!(codes(&task(), &a), vec!["no_worker_for_kind"]);
}

#[test]
fn no_worker_at_all_or_none_of_the_queue() {
    assert_eq!(codes(&task(), &around(vec![])), vec!["no_live_worker"]);
    let mut w = worker("w1", None);
    w.facts.queues = Queues::Listed(vec!["emails".into()]);
    let found = reasons(&task(), &around(vec![w]));
    assert_eq!(
        found[0].to_string(),
        "no live worker takes queue \"default\""
    );
    let mut w = worker("w1", Some(&["resize"]));
    w.facts.queues = Queues::All;
    assert_eq!(codes(&task(), &around(vec![w])), vec!["turn"]);
}

#[test]
fn a_target_to_absent_workers_or_groups_says_so() {
    let t = Task {
        target: Target::Workers(vec!["alice".into(), "bob".into()]),
        ..task()
    };
    let found = reasons(&t, &around(vec![worker("w1", None)]));
    assert_eq!(
        found[0].to_string(),
        "its target names worker ids none of which is live (\"alice\", \"bob\")"
    );
    let t = Task {
        target: Target::Groups(vec!["gpu".into()]),
        ..task()
    };
    let found = reasons(&t, &around(vec![worker("w1", None)]));
    assert_eq!(found[0].to_string(), "no live worker is in group \"gpu\"");
    // In the group but of another queue: the target leaves out every worker that fits.
    let mut gpu = worker("g1", None);
    gpu.facts.groups = vec!["gpu".into()];
    gpu.facts.queues = Queues::Listed(vec!["render".into()]);
    let found = reasons(&t, &around(vec![worker("w1", None), gpu.clone()]));
    assert_eq!(found[0].code(), "target_unfit");
    assert!(
        found[0].to_string().contains("(groups gpu)"),
        "{}",
        found[0]
    );
    gpu.facts.queues = Queues::All;
    assert_eq!(codes(&t, &around(vec![gpu])), vec!["turn"]);
}

#[test]
fn draining_workers_claim_nothing() {
    let mut w = worker("w1", Some(&["resize"]));
    w.draining = true;
    assert_eq!(codes(&task(), &around(vec![w])), vec!["all_draining"]);
}

#[test]
fn an_affinity_waits_for_its_worker_and_says_when_it_is_away() {
    let t = Task {
        affinity_until: Some(at(60)),
        worker_id: Some("w1".into()),
        ..task()
    };
    let mut w1 = worker("w1", Some(&["resize"]));
    w1.running = 4;
    let found = reasons(&t, &around(vec![w1, worker("w2", Some(&["resize"]))]));
    assert_eq!(
        found.iter().map(WaitReason::code).collect::<Vec<_>>(),
        vec!["affinity", "all_busy"]
    );
    assert_eq!(
        found[0].to_string(),
        "it waits for worker \"w1\", which ran its last attempt, until 2027-01-15 08:01:00 UTC"
    );
    // Its worker gone: the wait ends at the rescuer's next round; the others may take it.
    assert_eq!(
        codes(&t, &around(vec![worker("w2", Some(&["resize"]))])),
        vec!["affinity", "affinity_worker_away"]
    );
    // Past its end, until the rescuer's round: said as over, not as a wait to come.
    let later = Surroundings {
        now: at(61),
        ..around(vec![worker("w1", Some(&["resize"]))])
    };
    assert_eq!(
        reasons(&t, &later)[0].to_string(),
        "its wait for worker \"w1\", which ran its last attempt, ended at 2027-01-15 08:01:00 UTC: \
         the rescuer lets any allowed worker take it at its next round"
    );
}

#[test]
fn a_limited_queue_names_what_is_spent() {
    let policy = QueuePolicy {
        max_running: Some(2),
        kind_max_running: [("resize".to_owned(), 1)].into(),
        rate: Some(Rate::per_second(1.0)),
        key_rate: Some(Rate::per_second(0.5)),
        one_per_worker: true,
        ..QueuePolicy::default()
    };
    let mut w = worker("w1", Some(&["resize"]));
    w.running_in_queue = 1;
    w.running = 1;
    let a = Surroundings {
        policy: policy.clone(),
        running_by_kind: [("resize".to_owned(), 1), ("other".to_owned(), 1)].into(),
        rate_tat: Some(at(20)),
        key_tat: Some(at(30)),
        ..around(vec![w])
    };
    let t = Task {
        key: Some("acme".into()),
        ..task()
    };
    let found = reasons(&t, &a);
    let text: Vec<String> = found.iter().map(ToString::to_string).collect();
    assert_eq!(
        text,
        vec![
            "queue \"default\" is at its limit of 2 running",
            "kind \"resize\" is at its limit of 1 running in queue \"default\"",
            "queue \"default\" has started as many tasks as its rate of 1 a second allows for now",
            "tasks with key \"acme\" have started as many as their rate of 0.5 a second allows for now",
            "every worker that could run it already runs a task of queue \"default\", which allows one per worker",
        ]
    );
    // With room everywhere, the policy holds nothing back.
    let a = Surroundings {
        policy,
        ..around(vec![worker("w1", Some(&["resize"]))])
    };
    assert_eq!(codes(&t, &a), vec!["turn"]);
}

#[test]
fn busy_workers_are_named_only_when_all_are() {
    let mut busy = worker("w1", None);
    busy.running = 4;
    assert_eq!(
        codes(&task(), &around(vec![busy.clone()])),
        vec!["all_busy"]
    );
    assert_eq!(
        codes(&task(), &around(vec![busy, worker("w2", None)])),
        vec!["turn"]
    );
}

#[test]
fn a_multi_run_task_waits_for_a_worker_that_has_not_succeeded_at_it() {
    let t = Task {
        runs: Some(Runs::copies(2)),
        ..task()
    };
    let a = Surroundings {
        succeeded_runs: vec!["w1".into()],
        ..around(vec![worker("w1", None)])
    };
    assert_eq!(codes(&t, &a), vec!["runs_done_here"]);
    let repeating = Task {
        runs: Some(Runs::copies(2).repeat(true)),
        ..task()
    };
    assert_eq!(codes(&repeating, &a), vec!["turn"]);
}

#[test]
fn every_code_is_listed() {
    let listed: std::collections::BTreeSet<&str> = WaitReason::CODES.into_iter().collect();
    assert_eq!(listed.len(), WaitReason::CODES.len());
    for r in [
        WaitReason::Turn,
        WaitReason::AllBusy,
        WaitReason::RunsDoneHere,
        WaitReason::AllDraining,
        WaitReason::NoLiveWorker,
    ] {
        assert!(listed.contains(r.code()));
    }
}
