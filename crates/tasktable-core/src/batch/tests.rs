use super::*;
use proptest::prelude::*;

#[test]
fn the_window_defaults_to_ten_times_the_rate_or_the_parallelism() {
    assert_eq!(BatchSpec::items(10).rate(50).window_size(), 500);
    assert_eq!(BatchSpec::items(10).parallelism(100).window_size(), 100_000);
    assert_eq!(BatchSpec::items(10).rate(50).window(7).window_size(), 7);
}

#[test]
fn bad_specs_are_refused() {
    let bad = [
        BatchSpec::items(1).parallelism(0),
        BatchSpec::items(1).parallelism(MAX_PARALLELISM + 1),
        BatchSpec::items(1).rate(0),
        BatchSpec::items(1).window(0),
        BatchSpec::items(1).window(MAX_WINDOW + 1),
        BatchSpec::items(1).item_retries(101, Duration::ZERO),
        BatchSpec::items(1).item_retries(1, Duration::from_secs(3601)),
        BatchSpec::items(1).prestart_timeout(Duration::ZERO),
    ];
    for spec in bad {
        assert!(spec.validate().is_err(), "{spec:?}");
    }
    assert!(
        BatchSpec::items(0).validate().is_ok(),
        "an empty batch is done at once"
    );
    assert!(BatchSpec::open_ended().validate().is_ok());
}

#[test]
fn item_retries_wait_longer_each_time() {
    let spec = BatchSpec::items(1).item_retries(3, Duration::from_millis(100));
    let waits: Vec<_> = (1..=3).map(|r| spec.item_retry_delay(r)).collect();
    assert_eq!(
        waits,
        [100, 200, 400].map(Duration::from_millis).to_vec(),
        "doubling from the first wait"
    );
}

#[test]
fn an_item_that_asked_for_a_wait_gets_it_up_to_an_hour() {
    let spec = BatchSpec::items(1).item_retries(3, Duration::from_millis(100));
    let asked = Duration::from_secs(3);
    assert_eq!(
        spec.item_retry_wait(1, Some(asked)),
        asked,
        "a Retry-After of 3 s"
    );
    assert_eq!(spec.item_retry_wait(2, None), spec.item_retry_delay(2));
    assert_eq!(
        spec.item_retry_wait(1, Some(Duration::from_secs(86_400))),
        Duration::from_secs(3600)
    );
}

#[test]
fn the_window_hands_out_no_more_than_its_size_past_the_mark() {
    let mut w = Window::new(10, 3, Some(100));
    assert_eq!(
        (
            w.start_next(),
            w.start_next(),
            w.start_next(),
            w.start_next()
        ),
        (Some(10), Some(11), Some(12), None)
    );
    assert!(!w.finish(11), "the mark waits for 10");
    assert_eq!(w.start_next(), None);
    assert!(w.finish(10));
    assert_eq!(w.low(), 12, "10 and 11 are done");
    assert_eq!(
        w.start_next(),
        None,
        "the window moves only as far as the saved mark allows"
    );
    assert_eq!(w.unsaved(), 2);
    w.mark_saved(12);
    assert_eq!(
        (w.start_next(), w.start_next(), w.start_next()),
        (Some(13), Some(14), None)
    );
    assert_eq!(w.in_flight(), 3);
    assert!(!w.finish(99), "an index not handed out changes nothing");
    assert!(!w.finish(10), "nor one below the mark");
}

#[test]
fn the_window_stops_at_the_end_and_completes_there() {
    let mut w = Window::new(0, 10, Some(2));
    assert_eq!(
        (w.start_next(), w.start_next(), w.start_next()),
        (Some(0), Some(1), None)
    );
    w.finish(1);
    assert!(!w.is_complete());
    w.finish(0);
    assert!(w.is_complete());
    assert!(
        Window::new(5, 10, Some(5)).is_complete(),
        "a batch saved at its end is done"
    );
}

#[test]
fn an_open_ended_window_ends_where_the_handler_says() {
    let mut w = Window::new(0, 10, None);
    let handed: Vec<_> = std::iter::from_fn(|| w.start_next()).collect();
    assert_eq!(handed.len(), 10);
    for i in [0, 1, 2, 6, 7] {
        w.finish(i);
    }
    w.end_at(4);
    assert_eq!((w.end(), w.low()), (Some(4), 3));
    assert_eq!(w.start_next(), None, "nothing at or past the end starts");
    assert!(!w.is_complete());
    w.finish(3);
    assert!(w.is_complete());
    assert_eq!(w.low(), 4);
}

proptest! {
    /// Whatever order items finish in, the mark is the count of done items from the
    /// start with no gap, never more than the window ahead of it is handed out, and
    /// every index is handed out exactly once.
    #[test]
    fn the_mark_never_passes_an_unfinished_index(
        size in 1u64..20,
        n in 0u64..60,
        picks in proptest::collection::vec(any::<prop::sample::Index>(), 0..200),
        saves in proptest::collection::vec(any::<bool>(), 0..200),
    ) {
        let mut w = Window::new(0, size, Some(n));
        let mut out: Vec<u64> = Vec::new();
        let mut done = vec![false; n as usize];
        let mut handed = 0u64;
        let mut picks = picks.into_iter();
        let mut saves = saves.into_iter();
        let mut saved = 0u64;
        loop {
            while let Some(i) = w.start_next() {
                prop_assert_eq!(i, handed);
                handed += 1;
                out.push(i);
            }
            prop_assert!(handed <= saved + size, "never past the saved mark plus the window");
            if out.is_empty() {
                if w.unsaved() == 0 {
                    break;
                }
                saved = w.low();
                w.mark_saved(saved);
                continue;
            }
            if saves.next().unwrap_or(true) {
                saved = w.low();
                w.mark_saved(saved);
            }
            let at = picks.next().map_or(0, |p| p.index(out.len()));
            let i = out.swap_remove(at);
            done[i as usize] = true;
            w.finish(i);
            let gapless = done.iter().take_while(|d| **d).count() as u64;
            prop_assert_eq!(w.low(), gapless);
        }
        prop_assert_eq!(handed, n);
        prop_assert!(w.is_complete());
    }

    /// Over any run of takes, no more than `rate * elapsed + burst` succeed.
    #[test]
    fn the_bucket_holds_the_rate_within_its_burst(
        rate in 1u32..5000,
        steps in proptest::collection::vec(0.0f64..0.01, 1..500),
    ) {
        let mut bucket = TokenBucket::new(rate, 0.0);
        let (mut now, mut taken) = (0.0, 0u64);
        for step in steps {
            now += step;
            while bucket.take(now).is_ok() {
                taken += 1;
            }
            prop_assert!(taken as f64 <= f64::from(rate) * now + bucket.burst() + 1e-9);
        }
    }
}

#[test]
fn the_bucket_says_how_long_until_the_next_token() {
    let mut bucket = TokenBucket::new(10, 0.0);
    assert!(bucket.take(0.0).is_ok());
    let wait = bucket.take(0.0).unwrap_err();
    assert_eq!(wait, Duration::from_millis(100));
    assert!(bucket.take(0.1).is_ok());
}

#[test]
fn the_budget_allows_e_failures_and_stops_at_the_next() {
    let mut b = Budget {
        allowed: 2,
        spent: 0,
    };
    assert!(b.spend() && b.spend());
    assert!(!b.spend());
    assert!(b.exhausted());
}

#[test]
fn actions_follow_the_lifecycle() {
    use BatchAction as A;
    use BatchControl as C;
    use TaskState as S;
    let ok = |control, state| {
        Ok(ControlChange {
            control,
            state,
            release: false,
        })
    };
    // Submitted held: waits for the business, whose start releases it.
    assert_eq!(
        A::Start.apply(S::Held, C::Run, true),
        Ok(ControlChange {
            control: C::Run,
            state: Some(S::Pending),
            release: true
        })
    );
    assert_eq!(
        A::Start.apply(S::Held, C::Run, false),
        Err(BatchRefusal::NotWaiting)
    );
    assert_eq!(
        A::Start.apply(S::Pending, C::Run, true),
        Err(BatchRefusal::NotWaiting)
    );
    assert_eq!(
        A::Start.apply(S::Held, C::Pause, true),
        Err(BatchRefusal::NotWaiting),
        "a paused batch is resumed (back to waiting) before it is started"
    );
    // A running batch's runner acts on pause and stop; others move at once.
    assert_eq!(
        A::Pause.apply(S::Running, C::Run, false),
        ok(C::Pause, None)
    );
    assert_eq!(
        A::Pause.apply(S::Pending, C::Run, false),
        ok(C::Pause, Some(S::Held))
    );
    assert_eq!(
        A::Stop.apply(S::Running, C::Pause, false),
        ok(C::Stop, None)
    );
    assert_eq!(
        A::Stop.apply(S::Held, C::Pause, false),
        ok(C::Stop, Some(S::Cancelled))
    );
    assert_eq!(
        A::Pause.apply(S::Succeeded, C::Run, false),
        Err(BatchRefusal::Ended(S::Succeeded))
    );
    // Resume goes on from a pause, a stop or a failure, or takes back a request not seen.
    assert_eq!(
        A::Resume.apply(S::Held, C::Pause, false),
        ok(C::Run, Some(S::Pending))
    );
    assert_eq!(
        A::Resume.apply(S::Cancelled, C::Stop, false),
        ok(C::Run, Some(S::Pending))
    );
    assert_eq!(
        A::Resume.apply(S::Failed, C::Run, false),
        ok(C::Run, Some(S::Pending))
    );
    assert_eq!(
        A::Resume.apply(S::Running, C::Pause, false),
        ok(C::Run, None)
    );
    assert_eq!(
        A::Resume.apply(S::Running, C::Run, false),
        Err(BatchRefusal::NotResumable(S::Running))
    );
    assert_eq!(
        A::Resume.apply(S::Held, C::Run, true),
        Err(BatchRefusal::NotResumable(S::Held)),
        "a batch waiting for the business is started, not resumed"
    );
    assert_eq!(
        A::Resume.apply(S::Succeeded, C::Run, false),
        Err(BatchRefusal::NotResumable(S::Succeeded))
    );
    // One that waits for the business goes back to waiting from a pause or a stop.
    assert_eq!(
        A::Pause.apply(S::Held, C::Run, true),
        ok(C::Pause, Some(S::Held))
    );
    assert_eq!(
        A::Resume.apply(S::Held, C::Pause, true),
        ok(C::Run, Some(S::Held))
    );
    assert_eq!(
        A::Stop.apply(S::Held, C::Run, true),
        ok(C::Stop, Some(S::Cancelled))
    );
    assert_eq!(
        A::Resume.apply(S::Cancelled, C::Stop, true),
        ok(C::Run, Some(S::Held))
    );
}

#[test]
fn each_action_moves_the_task_through_operator_changes() {
    use crate::Change;
    use BatchAction as A;
    use BatchControl as C;
    use TaskState as S;
    let changes = |a: A, from: S, control: C, awaiting: bool| {
        a.apply(from, control, awaiting).unwrap().task_changes(from)
    };
    assert_eq!(
        changes(A::Resume, S::Held, C::Pause, false),
        [Change::Release]
    );
    assert_eq!(
        changes(A::Resume, S::Failed, C::Run, false),
        [Change::Retry]
    );
    assert_eq!(
        changes(A::Resume, S::Cancelled, C::Stop, false),
        [Change::Retry]
    );
    assert_eq!(
        changes(A::Resume, S::Cancelled, C::Stop, true),
        [Change::Retry, Change::Hold],
        "a stopped batch that waits for its start goes back to waiting"
    );
    assert_eq!(changes(A::Start, S::Held, C::Run, true), [Change::Release]);
    assert_eq!(changes(A::Pause, S::Pending, C::Run, false), [Change::Hold]);
    assert_eq!(changes(A::Stop, S::Held, C::Pause, false), [Change::Cancel]);
    assert!(
        changes(A::Pause, S::Running, C::Run, false).is_empty(),
        "the runner moves it"
    );
    assert!(
        changes(A::Pause, S::Held, C::Pause, false).is_empty(),
        "already held"
    );
    assert!(
        changes(A::Resume, S::Held, C::Pause, true).is_empty(),
        "held, waiting again"
    );
}

#[test]
fn status_follows_state_control_and_start() {
    use BatchControl as C;
    use BatchStatus as B;
    use TaskState as S;
    // (state, control, waits for its start, status)
    let cases = [
        (S::Held, C::Run, true, B::Waiting),
        (S::Held, C::Run, false, B::Paused),
        (S::Held, C::Pause, true, B::Paused),
        (S::Held, C::Pause, false, B::Paused),
        (S::Pending, C::Run, false, B::Queued),
        (S::Running, C::Run, false, B::Running),
        (S::Running, C::Pause, false, B::Pausing),
        (S::Running, C::Stop, false, B::Stopping),
        (S::Cancelled, C::Stop, false, B::Stopped),
        (S::Cancelled, C::Stop, true, B::Stopped),
        (S::Succeeded, C::Run, false, B::Succeeded),
        (S::Failed, C::Run, false, B::Failed),
    ];
    for (state, control, awaiting, want) in cases {
        assert_eq!(
            B::of(state, control, awaiting),
            want,
            "{state:?} {control:?} {awaiting}"
        );
    }
    assert!(awaits_start(false, false), "submitted held, never run");
    assert!(!awaits_start(true, false), "started by the business");
    assert!(!awaits_start(false, true), "a runner had it");
}

#[test]
fn data_changes_while_waiting_or_serial() {
    let parallel = BatchSpec::items(10).parallelism(4);
    assert!(data_may_change(&parallel, BatchStatus::Waiting));
    assert!(!data_may_change(&parallel, BatchStatus::Running));
    assert!(data_may_change(
        &parallel.parallelism(1),
        BatchStatus::Running
    ));
    assert!(data_may_change(&parallel.rate(1), BatchStatus::Running));
}

#[test]
fn eta_is_the_items_left_at_the_measured_rate() {
    assert_eq!(
        eta(100, Some(1100), Some(500.0)),
        Some(Duration::from_secs(2))
    );
    assert_eq!(eta(100, None, Some(500.0)), None, "open-ended");
    assert_eq!(eta(100, Some(1100), Some(0.0)), None);
    assert_eq!(eta(100, Some(1100), None), None);
    assert_eq!(eta(2000, Some(1100), Some(5.0)), Some(Duration::ZERO));
}
