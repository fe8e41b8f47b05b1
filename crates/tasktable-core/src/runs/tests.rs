use super::*;

fn counts(active: u32, succeeded: u32, failed: u32) -> RunCounts {
    RunCounts {
        active,
        succeeded,
        failed,
    }
}

const NEW: WorkerRuns = WorkerRuns {
    running: false,
    succeeded: false,
    ran: false,
};

#[test]
fn a_run_starts_only_while_a_slot_and_a_copy_are_free() {
    let runs = Runs::copies(6).at_once(2);
    assert!(runs.may_start(counts(0, 0, 0), NEW));
    assert!(runs.may_start(counts(1, 4, 3), NEW));
    // Both slots taken.
    assert!(!runs.may_start(counts(2, 0, 0), NEW));
    // Five done and one in progress: no copy is left for a sixth worker.
    assert!(!runs.may_start(counts(1, 5, 0), NEW));
    assert!(!runs.may_start(counts(0, 6, 0), NEW));
}

#[test]
fn a_worker_runs_a_copy_once_unless_the_task_repeats() {
    let once = Runs::copies(3);
    let again = Runs::copies(3).repeat(true);
    let done = WorkerRuns {
        running: false,
        succeeded: true,
        ran: true,
    };
    let busy = WorkerRuns {
        running: true,
        succeeded: false,
        ran: true,
    };
    assert!(!once.may_start(counts(0, 1, 0), done));
    assert!(again.may_start(counts(0, 1, 0), done));
    // Never two runs of one task on one worker at the same time.
    assert!(!once.may_start(counts(1, 0, 0), busy));
    assert!(!again.may_start(counts(1, 0, 0), busy));
}

#[test]
fn exhaustively_never_more_than_at_once_nor_more_than_copies() {
    for copies in 1..=6 {
        for at_once in 1..=copies {
            let runs = Runs::copies(copies).at_once(at_once);
            for active in 0..=copies {
                for succeeded in 0..=copies {
                    if runs.may_start(counts(active, succeeded, 0), NEW) {
                        // The run that starts fits in both.
                        assert!(active < at_once);
                        assert!(active + succeeded < copies);
                    }
                }
            }
        }
    }
}

#[test]
fn the_nth_success_ends_the_task() {
    let runs = Runs::copies(2);
    let complete = FinishAction::Complete { result: None };
    let first = runs.after_run(counts(2, 0, 0), AttemptOutcome::Succeeded, &complete, 4);
    assert_eq!(
        (first.state, first.counts),
        (TaskState::Running, counts(1, 1, 0))
    );
    let second = runs.after_run(first.counts, AttemptOutcome::Succeeded, &complete, 4);
    assert_eq!(
        (second.state, second.counts),
        (TaskState::Succeeded, counts(0, 2, 0))
    );
    assert_eq!(second.next_run_after, None);
}

#[test]
fn failures_beyond_the_allowance_fail_the_task_and_cancel_the_rest() {
    let runs = Runs::copies(5).max_failed(1);
    let retry = FinishAction::Retry {
        delay: Duration::from_secs(3),
    };
    let one = runs.after_run(counts(3, 0, 0), AttemptOutcome::Error, &retry, 1);
    assert_eq!(
        (one.state, one.counts),
        (TaskState::Running, counts(2, 0, 1))
    );
    assert_eq!(one.next_run_after, Some(Duration::from_secs(3)));
    let two = runs.after_run(one.counts, AttemptOutcome::LeaseExpired, &retry, 1);
    assert_eq!(
        (two.state, two.counts),
        (TaskState::Failed, counts(0, 0, 2))
    );
    assert_eq!(two.next_run_after, None);
}

#[test]
fn a_permanent_error_or_a_cancel_ends_the_task_at_once() {
    let runs = Runs::copies(5);
    let failed = runs.after_run(
        counts(2, 1, 0),
        AttemptOutcome::Failed,
        &FinishAction::Fail,
        9,
    );
    assert_eq!(failed.state, TaskState::Failed);
    let cancelled = runs.after_run(
        counts(2, 1, 0),
        AttemptOutcome::Cancelled,
        &FinishAction::Cancel,
        9,
    );
    assert_eq!(
        (cancelled.state, cancelled.counts),
        (TaskState::Cancelled, counts(0, 1, 0))
    );
}

#[test]
fn a_snooze_or_interruption_gives_its_run_back() {
    let runs = Runs::copies(2);
    let requeue = FinishAction::Requeue {
        delay: Duration::ZERO,
    };
    let end = runs.after_run(counts(1, 0, 0), AttemptOutcome::Interrupted, &requeue, 0);
    assert_eq!(
        (end.state, end.counts),
        (TaskState::Pending, counts(0, 0, 0))
    );
    assert_eq!(end.next_run_after, Some(Duration::ZERO));
}

#[test]
fn the_default_allowance_follows_max_attempts() {
    assert_eq!(Runs::copies(3).failures_allowed(5), 4);
    assert_eq!(Runs::copies(3).failures_allowed(1), 0);
    assert_eq!(Runs::copies(3).max_failed(7).failures_allowed(1), 7);
}

#[test]
fn bad_requests_are_refused() {
    assert!(Runs::copies(0).validate().is_err());
    assert!(Runs::copies(MAX_COPIES + 1).validate().is_err());
    assert!(Runs::copies(3).at_once(4).validate().is_err());
    assert!(Runs::copies(3).at_once(0).validate().is_err());
    assert!(Runs::copies(3).at_once(3).validate().is_ok());
}

#[test]
fn run_states_round_trip() {
    assert_eq!("running".parse::<RunState>().unwrap(), RunState::Running);
    for o in AttemptOutcome::ALL {
        let s = RunState::Ended(o);
        assert_eq!(s.as_str().parse::<RunState>().unwrap(), s);
    }
    assert!("nonsense".parse::<RunState>().is_err());
}

#[test]
fn a_joining_broadcast_adds_a_copy_for_each_newcomer_only() {
    let runs = Runs::everywhere().joining(true);
    let runs = Runs {
        copies: 2,
        at_once: 2,
        ..runs
    };
    // Both copies taken: a newcomer still gets a run, which adds a copy.
    assert!(runs.may_start(counts(2, 0, 0), NEW));
    assert!(runs.joins(counts(2, 0, 0), NEW));
    assert!(runs.joins(counts(0, 2, 0), NEW));
    // A copy is left: the newcomer takes it without adding one.
    assert!(!runs.joins(counts(1, 0, 0), NEW));
    // A worker that ran it, however that ended, is no newcomer.
    let failed = WorkerRuns { ran: true, ..NEW };
    assert!(!runs.joins(counts(2, 0, 1), failed));
    assert!(!runs.may_start(counts(2, 0, 1), failed));
    assert!(Runs::copies(2).joining(true).validate().is_err());
}
