use super::*;
use chrono::TimeZone;

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap()
}

fn ms(n: i64) -> TimeDelta {
    TimeDelta::milliseconds(n)
}

fn kinds(names: &[&str]) -> Vec<String> {
    names.iter().map(|s| (*s).to_owned()).collect()
}

fn running(pairs: &[(&str, u64)]) -> Load {
    Load {
        running_by_kind: pairs.iter().map(|(k, n)| ((*k).to_owned(), *n)).collect(),
        ..Load::default()
    }
}

#[test]
fn no_policy_is_not_limited_and_allows_the_whole_claim() {
    let p = QueuePolicy::default();
    assert!(!p.is_limited());
    let a = p.allowance(7, &kinds(&["a", "b"]), &running(&[("a", 100)]), None, t0());
    assert_eq!(a.total, 7);
    assert_eq!(a.kinds, kinds(&["a", "b"]));
    assert!(p.validate().is_ok());
}

#[test]
fn max_running_counts_every_kind_of_the_queue() {
    let p = QueuePolicy {
        max_running: Some(5),
        ..QueuePolicy::default()
    };
    assert!(p.is_limited());
    let load = running(&[("a", 2), ("b", 1)]);
    assert_eq!(p.allowance(10, &kinds(&["a"]), &load, None, t0()).total, 2);
    assert_eq!(p.allowance(1, &kinds(&["a"]), &load, None, t0()).total, 1);
    let full = running(&[("a", 4), ("b", 3)]);
    assert_eq!(p.allowance(10, &kinds(&["a"]), &full, None, t0()).total, 0);
}

#[test]
fn a_kind_at_its_limit_is_left_out_and_the_others_still_flow() {
    let p = QueuePolicy {
        kind_max_running: [("slow".to_owned(), 2)].into(),
        ..QueuePolicy::default()
    };
    let a = p.allowance(
        10,
        &kinds(&["slow", "fast"]),
        &running(&[("slow", 2)]),
        None,
        t0(),
    );
    assert_eq!(a.kinds, kinds(&["fast"]));
    assert_eq!(a.total, 10);
    let a = p.allowance(
        10,
        &kinds(&["slow", "fast"]),
        &running(&[("slow", 1)]),
        None,
        t0(),
    );
    assert_eq!(a.per_kind.get("slow"), Some(&1));
    let only_slow = p.allowance(10, &kinds(&["slow"]), &running(&[("slow", 2)]), None, t0());
    assert_eq!(only_slow.total, 0);
}

#[test]
fn pick_keeps_to_each_kinds_count_in_claim_order() {
    let p = QueuePolicy {
        kind_max_running: [("slow".to_owned(), 2)].into(),
        ..QueuePolicy::default()
    };
    let a = p.allowance(
        3,
        &kinds(&["slow", "fast"]),
        &running(&[("slow", 1)]),
        None,
        t0(),
    );
    let c = |k: &str| Candidate {
        kind: k.to_owned(),
        key: None,
    };
    let cands = [
        c("slow"),
        c("slow"),
        c("fast"),
        c("slow"),
        c("fast"),
        c("fast"),
    ];
    let (picked, spent) = p.pick(&a, &cands, &mut HashMap::new(), t0());
    assert_eq!(picked, vec![0, 2, 4]);
    assert!(spent.is_empty());
}

#[test]
fn one_per_worker_allows_one_only_while_the_worker_runs_none() {
    let p = QueuePolicy {
        one_per_worker: true,
        ..QueuePolicy::default()
    };
    let mut load = running(&[("a", 9)]);
    assert_eq!(p.allowance(4, &kinds(&["a"]), &load, None, t0()).total, 1);
    load.running_here = 1;
    assert_eq!(p.allowance(4, &kinds(&["a"]), &load, None, t0()).total, 0);
}

#[test]
fn a_fair_share_is_the_ceiling_of_wanting_over_live_workers() {
    let p = QueuePolicy {
        fair_share: true,
        ..QueuePolicy::default()
    };
    let share = |due, workers, here, others| Load {
        running_by_kind: [("long".to_owned(), here + others)].into(),
        running_here: here,
        share: Some(Share { due, workers }),
    };
    // 10 tasks over 3 workers: at most 4 each.
    assert_eq!(
        p.allowance(10, &kinds(&["long"]), &share(10, 3, 0, 0), None, t0())
            .total,
        4
    );
    assert_eq!(
        p.allowance(10, &kinds(&["long"]), &share(2, 3, 4, 4), None, t0())
            .total,
        0
    );
    // The claimer's own limit still caps it.
    assert_eq!(
        p.allowance(2, &kinds(&["long"]), &share(10, 3, 0, 0), None, t0())
            .total,
        2
    );
    // One worker leaves: the rest share 10 over 2.
    assert_eq!(
        p.allowance(10, &kinds(&["long"]), &share(2, 2, 4, 4), None, t0())
            .total,
        1
    );
    // No workers counted (the claimer is always one): treated as one.
    assert_eq!(
        p.allowance(10, &kinds(&["long"]), &share(3, 0, 0, 0), None, t0())
            .total,
        3
    );
}

#[test]
fn a_full_bucket_gives_its_burst_and_then_one_per_interval() {
    let r = Rate::per_second(10.0).with_burst(3);
    assert_eq!(r.available(None, t0()), 3);
    let tat = Rate::stored(r.take(None, t0(), 3));
    assert_eq!(tat, t0() + ms(300));
    assert_eq!(r.available(Some(tat), t0()), 0);
    assert_eq!(r.available(Some(tat), t0() + ms(99)), 0);
    assert_eq!(r.available(Some(tat), t0() + ms(100)), 1);
    assert_eq!(r.available(Some(tat), t0() + ms(250)), 2);
    assert_eq!(r.available(Some(tat), t0() + ms(10_000)), 3);
    // A bucket with a time in the past is full.
    assert_eq!(r.available(Some(t0() - ms(5)), t0()), 3);
}

#[test]
fn the_default_burst_is_one_seconds_worth() {
    assert_eq!(Rate::per_second(10.0).burst(), 10);
    assert_eq!(Rate::per_second(2.5).burst(), 3);
    assert_eq!(Rate::per_second(0.1).burst(), 1);
}

#[test]
fn empty_after_agrees_with_available() {
    let r = Rate::per_second(4.0).with_burst(2);
    let now = t0();
    let edge = r.empty_after(now);
    assert_eq!(r.available(Some(edge), now), 1);
    assert_eq!(r.available(Some(edge + TimeDelta::microseconds(1)), now), 0);
}

#[test]
fn stored_times_are_rounded_up_to_the_millisecond() {
    let r = Rate::per_second(3.0).with_burst(1);
    let tat = Rate::stored(r.take(None, t0(), 1));
    assert_eq!(tat, t0() + ms(334));
    assert_eq!(tat.timestamp_subsec_nanos() % 1_000_000, 0);
}

#[test]
fn a_fast_rate_is_not_charged_a_millisecond_a_token() {
    let r = Rate::per_second(10_000.0).with_burst(10_000);
    let p = QueuePolicy {
        key_rate: Some(r),
        ..QueuePolicy::default()
    };
    let a = p.allowance(10_000, &kinds(&["k"]), &Load::default(), None, t0());
    let c: Vec<Candidate> = (0..5000)
        .map(|_| Candidate {
            kind: "k".into(),
            key: Some("acme".into()),
        })
        .collect();
    let mut keys = HashMap::new();
    let (picked, _) = p.pick(&a, &c, &mut keys, t0());
    assert_eq!(picked.len(), 5000);
    assert_eq!(keys["acme"], Some(t0() + ms(500)));
}

/// Whatever the claims ask and whenever they come, no stretch of time `w` sees more than
/// `burst + w * per_second` starts.
#[test]
fn no_window_ever_holds_more_than_the_burst_and_the_rate() {
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for (per_second, burst) in [(10.0, 1), (10.0, 5), (3.0, 2), (250.0, 20), (0.5, 1)] {
        let r = Rate::per_second(per_second).with_burst(burst);
        let mut tat = None;
        let mut now = t0();
        let mut starts: Vec<DateTime<Utc>> = Vec::new();
        for _ in 0..2000 {
            now += TimeDelta::milliseconds((next() % 400) as i64);
            let want = (next() % 8) as u32;
            let n = r.available(tat, now).min(want);
            if n > 0 {
                tat = Some(Rate::stored(r.take(tat, now, n)));
                starts.extend(std::iter::repeat_n(now, n as usize));
            }
        }
        assert!(starts.len() > 10, "{per_second}/s: too few starts to judge");
        for i in 0..starts.len() {
            for j in i..starts.len() {
                let w = (starts[j] - starts[i]).num_microseconds().unwrap() as f64 / 1e6;
                let bound = f64::from(burst) + w * per_second;
                assert!(
                    (j - i + 1) as f64 <= bound + 1e-9,
                    "{per_second}/s burst {burst}: {} starts in {w}s",
                    j - i + 1
                );
            }
        }
    }
}

#[test]
fn pick_spends_a_keys_tokens_and_passes_over_an_empty_key() {
    let p = QueuePolicy {
        key_rate: Some(Rate::per_second(1.0).with_burst(2)),
        ..QueuePolicy::default()
    };
    let a = p.allowance(10, &kinds(&["k"]), &Load::default(), None, t0());
    let c = |key: Option<&str>| Candidate {
        kind: "k".to_owned(),
        key: key.map(str::to_owned),
    };
    let cands = [
        c(Some("acme")),
        c(Some("acme")),
        c(Some("acme")),
        c(None),
        c(Some("zeta")),
    ];
    let mut keys = HashMap::from([("zeta".to_owned(), Some(t0() + ms(5000)))]);
    let (picked, spent) = p.pick(&a, &cands, &mut keys, t0());
    assert_eq!(picked, vec![0, 1, 3]);
    assert_eq!(spent, vec!["acme".to_owned()]);
    assert_eq!(keys["acme"], Some(t0() + ms(2000)));
}

#[test]
fn the_queue_rate_caps_the_allowance() {
    let p = QueuePolicy {
        rate: Some(Rate::per_second(2.0).with_burst(2)),
        ..QueuePolicy::default()
    };
    let load = Load::default();
    assert_eq!(p.allowance(10, &kinds(&["a"]), &load, None, t0()).total, 2);
    let tat = Some(t0() + ms(1000));
    assert_eq!(p.allowance(10, &kinds(&["a"]), &load, tat, t0()).total, 0);
    assert_eq!(
        p.allowance(10, &kinds(&["a"]), &load, tat, t0() + ms(500))
            .total,
        1
    );
}

#[test]
fn bad_policies_are_refused() {
    let bad = [
        QueuePolicy {
            max_running: Some(MAX_LIMIT + 1),
            ..QueuePolicy::default()
        },
        QueuePolicy {
            rate: Some(Rate::per_second(0.0)),
            ..QueuePolicy::default()
        },
        QueuePolicy {
            rate: Some(Rate::per_second(f64::NAN)),
            ..QueuePolicy::default()
        },
        QueuePolicy {
            key_rate: Some(Rate::per_second(1.0).with_burst(0)),
            ..QueuePolicy::default()
        },
        QueuePolicy {
            kind_max_running: [(" ".to_owned(), 1)].into(),
            ..QueuePolicy::default()
        },
        QueuePolicy {
            kind_max_running: (0..=MAX_KIND_LIMITS)
                .map(|i| (format!("k{i}"), 1))
                .collect(),
            ..QueuePolicy::default()
        },
    ];
    for p in bad {
        assert!(p.validate().is_err(), "{p:?}");
    }
}

#[test]
fn a_policy_reads_back_as_written_and_refuses_unknown_fields() {
    let p: QueuePolicy = serde_json::from_str(
        r#"{"max_running": 3, "rate": {"per_second": 2.5}, "one_per_worker": true}"#,
    )
    .unwrap();
    assert_eq!(p.max_running, Some(3));
    assert_eq!(p.rate, Some(Rate::per_second(2.5)));
    let back: QueuePolicy = serde_json::from_value(serde_json::to_value(&p).unwrap()).unwrap();
    assert_eq!(back, p);
    assert!(serde_json::from_str::<QueuePolicy>(r#"{"max_runing": 3}"#).is_err());
    assert_eq!(
        serde_json::to_string(&QueuePolicy::default()).unwrap(),
        "{}"
    );
}
