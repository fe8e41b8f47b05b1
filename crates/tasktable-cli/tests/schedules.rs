//! `tasktable schedule ...` as people run it: a `tasktable serve` child process on a free
//! loopback port with a SQLite file of its own and no in-process worker (fired tasks stay
//! pending), and every command a separate process against it.

mod common;

use chrono::{DateTime, Datelike, FixedOffset, Timelike};
use common::serve::{command, finish, Server, ADMIN, READER};
use serde_json::{json, Value};

/// 02:00 on February 29th. serve's scheduler fires whatever is due, so a test that counts
/// a schedule's tasks gives it slots that never come while a test runs.
const LEAP_DAY: &str = "0 2 29 2 *";

impl Server {
    /// `schedule show NAME --json`.
    fn show(&self, schedule: &str) -> Value {
        self.tt(&["schedule", "show", schedule, "--json"]).json()
    }
}

fn upcoming(schedule: &Value) -> Vec<DateTime<FixedOffset>> {
    serde_json::from_value(schedule["upcoming"].clone()).expect("upcoming times")
}

/// The row of the `schedule ls` table whose first cell is `name`.
fn row<'a>(table: &'a str, name: &str) -> &'a str {
    table
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name))
        .unwrap_or_else(|| panic!("no row {name:?} in\n{table}"))
}

#[test]
fn schedules_of_each_recurrence_are_created_listed_and_shown_with_their_next_fire_times() {
    let server = Server::start();
    let created = server
        .tt(&[
            "schedule",
            "create",
            "nightly",
            "--cron",
            LEAP_DAY,
            "--zone",
            "Europe/Berlin",
            "--kind",
            "report",
            "--queue",
            "reports",
            "--payload",
            r#"{"month": "current"}"#,
        ])
        .ok()
        .stdout;
    assert!(
        created.starts_with("created schedule \"nightly\" (id ")
            && created.contains(": cron 0 2 29 2 * Europe/Berlin; next run "),
        "{created}"
    );
    server
        .tt(&[
            "schedule",
            "create",
            "heartbeat",
            "--every",
            "1m",
            "--start",
            "2026-01-01T00:00:00Z",
            "--kind",
            "ping",
            "--priority",
            "-2",
            "--max-attempts",
            "1",
            "--timeout",
            "30s",
            "--key",
            "beat",
            "--overlap",
            "skip",
            "--missed",
            "skip",
        ])
        .ok();
    server
        .tt(&[
            "schedule",
            "create",
            "morning",
            "--daily",
            "7:30",
            "--zone",
            "America/New_York",
            "--kind",
            "email",
            "--missed",
            "all:3",
            "--disabled",
        ])
        .ok();

    let list = server.tt(&["schedule", "ls", "--json"]).json();
    let schedules = list["schedules"].as_array().expect("schedules");
    let names: Vec<&str> = schedules
        .iter()
        .filter_map(|s| s["name"].as_str())
        .collect();
    assert_eq!(names, ["heartbeat", "morning", "nightly"], "sorted by name");
    let [heartbeat, morning, nightly] = [&schedules[0], &schedules[1], &schedules[2]];
    assert_eq!(
        nightly["recurrence"],
        json!({"type": "cron", "expr": LEAP_DAY, "zone": "Europe/Berlin"})
    );
    assert_eq!(
        (
            &nightly["template"]["queue"],
            &nightly["template"]["payload"]
        ),
        (&json!("reports"), &json!({"month": "current"}))
    );
    assert_eq!(
        heartbeat["recurrence"],
        json!({"type": "every", "every_ms": 60_000, "start": "2026-01-01T00:00:00Z"})
    );
    let t = &heartbeat["template"];
    assert_eq!(
        (
            &t["priority"],
            &t["max_attempts"],
            &t["timeout_ms"],
            &t["key"]
        ),
        (&json!(-2), &json!(1), &json!(30_000), &json!("beat"))
    );
    assert_eq!(
        (&heartbeat["overlap"], &heartbeat["missed"]),
        (&json!("skip"), &json!({"policy": "skip"}))
    );
    assert_eq!(
        morning["recurrence"],
        json!({"type": "daily", "at": "07:30:00", "zone": "America/New_York"})
    );
    assert_eq!(morning["missed"], json!({"policy": "run_all", "max": 3}));
    assert_eq!(morning["enabled"], false);

    let table = server.tt(&["schedule", "ls"]).ok().stdout;
    let header = table.lines().next().unwrap();
    for column in [
        "NAME",
        "ID",
        "WHEN",
        "ENABLED",
        "NEXT RUN",
        "LAST SLOT",
        "KIND/QUEUE",
    ] {
        assert!(header.contains(column), "{table}");
    }
    assert_eq!(table.lines().count(), 4, "{table}");
    for (name, when, enabled, kind) in [
        (
            "nightly",
            "cron 0 2 29 2 * Europe/Berlin",
            "yes",
            "report/reports",
        ),
        ("heartbeat", "every 1m", "yes", "ping/default"),
        (
            "morning",
            "daily 07:30:00 America/New_York",
            "no",
            "email/default",
        ),
    ] {
        let line = row(&table, name);
        for cell in [when, enabled, kind] {
            assert!(line.contains(&format!("  {cell}")), "{cell:?} in {line:?}");
        }
    }
    let nightly_next = upcoming(nightly)[0]
        .format("%Y-%m-%d %H:%M:%S%:z")
        .to_string();
    assert!(
        row(&table, "nightly").contains(&nightly_next),
        "the next run in the schedule's zone: {table}"
    );
    assert!(row(&table, "morning").contains("- (disabled)"), "{table}");

    // The next five fire times, each in the schedule's own zone.
    let shown = server.show("nightly");
    let times = upcoming(&shown["schedule"]);
    assert_eq!(times.len(), 5, "{shown}");
    for t in &times {
        assert_eq!((t.hour(), t.minute(), t.second()), (2, 0, 0), "{shown}");
        assert_eq!(
            (t.day(), t.month(), t.offset().local_minus_utc()),
            (29, 2, 3600),
            "{shown}"
        );
    }
    assert_eq!(shown["recent_tasks"], json!([]));
    let beats = upcoming(&server.show("heartbeat")["schedule"]);
    assert_eq!(beats.len(), 5);
    for pair in beats.windows(2) {
        assert_eq!((pair[1] - pair[0]).num_seconds(), 60, "{beats:?}");
    }
    assert_eq!(beats[0].second(), 0, "counted from --start: {beats:?}");
    let id = shown["schedule"]["id"].as_i64().unwrap().to_string();
    assert_eq!(server.show(&id)["schedule"]["name"], "nightly", "by id too");

    let page = server.tt(&["schedule", "show", "nightly"]).ok().stdout;
    assert!(
        page.starts_with(&format!("schedule nightly (id {id})\n")),
        "{page}"
    );
    assert!(
        page.contains("  when        cron 0 2 29 2 * Europe/Berlin\n"),
        "{page}"
    );
    assert!(
        page.contains("  payload     {\"month\":\"current\"}\n"),
        "{page}"
    );
    let listed: Vec<&str> = page
        .lines()
        .skip_while(|l| *l != "upcoming")
        .skip(1)
        .take_while(|l| !l.is_empty())
        .collect();
    assert_eq!(listed.len(), 5, "{page}");
    assert_eq!(listed[0], format!("  {nightly_next}"), "{page}");
    assert!(page.ends_with("no tasks fired yet\n"), "{page}");
    let morning_page = server.tt(&["schedule", "show", "morning"]).ok().stdout;
    assert!(
        morning_page.contains("no upcoming fire times: the schedule is disabled"),
        "{morning_page}"
    );
}

#[test]
fn a_schedule_is_fired_edited_disabled_enabled_and_deleted() {
    let server = Server::start();
    server
        .tt(&[
            "schedule",
            "create",
            "nightly",
            "--cron",
            LEAP_DAY,
            "--zone",
            "Europe/Berlin",
            "--kind",
            "report",
            "--queue",
            "reports",
            "--payload",
            r#"{"month": "current"}"#,
        ])
        .ok();

    // fire: a task now, listed among the schedule's recent tasks.
    let fired = server.tt(&["schedule", "fire", "nightly"]).ok().stdout;
    let task: i64 = fired
        .strip_prefix("created task ")
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|id| id.parse().ok())
        .unwrap_or_else(|| panic!("no task id in {fired:?}"));
    assert!(
        fired.contains(" from schedule \"nightly\" (slot "),
        "{fired}"
    );
    let shown = server.show("nightly");
    assert_eq!(shown["recent_tasks"][0]["id"], task, "{shown}");
    assert_eq!(shown["recent_tasks"][0]["state"], "pending", "{shown}");
    assert_eq!(shown["schedule"]["last_task_id"], task, "{shown}");
    let fired_task = server.tt(&["show", &task.to_string(), "--json"]).json();
    assert_eq!(
        (
            &fired_task["task"]["kind"],
            &fired_task["task"]["queue"],
            &fired_task["task"]["payload"]
        ),
        (
            &json!("report"),
            &json!("reports"),
            &json!({"month": "current"})
        )
    );
    let id = shown["schedule"]["id"].as_i64().unwrap().to_string();
    let again = server.tt(&["schedule", "fire", &id, "--json"]).json();
    assert_eq!(again["created"], true, "{again}");
    let second = again["task_id"].as_i64().expect("task_id");
    assert_ne!(second, task);
    let page = server.tt(&["schedule", "show", "nightly"]).ok().stdout;
    let recent: Vec<&str> = page
        .lines()
        .skip_while(|l| *l != "recent tasks, newest first")
        .skip(2)
        .collect();
    assert_eq!(recent.len(), 2, "{page}");
    assert!(
        recent[0].starts_with(&format!("{second}  ")) && recent[0].contains("pending"),
        "{page}"
    );
    assert!(
        page.contains("  last slot   ") && page.contains(&format!("(task {second})")),
        "{page}"
    );

    // edit: only what is given changes; a template keeps the fields not given.
    let changed = server
        .tt(&[
            "schedule",
            "edit",
            "nightly",
            "--zone",
            "Asia/Tokyo",
            "--priority",
            "3",
            "--missed",
            "skip",
        ])
        .ok()
        .stdout;
    assert!(
        changed.starts_with("changed schedule \"nightly\"")
            && changed.contains("cron 0 2 29 2 * Asia/Tokyo; next run ")
            && changed.trim_end().ends_with("+09:00"),
        "{changed}"
    );
    let s = &server.show("nightly")["schedule"];
    assert_eq!(
        s["recurrence"],
        json!({"type": "cron", "expr": LEAP_DAY, "zone": "Asia/Tokyo"})
    );
    assert_eq!(
        (
            &s["template"]["priority"],
            &s["template"]["queue"],
            &s["template"]["payload"],
            &s["missed"],
            &s["overlap"]
        ),
        (
            &json!(3),
            &json!("reports"),
            &json!({"month": "current"}),
            &json!({"policy": "skip"}),
            &json!("allow")
        )
    );
    let edited = server
        .tt(&[
            "schedule",
            "edit",
            &id,
            "--daily",
            "06:15",
            "--rename",
            "early",
            "--payload",
            "null",
            "--json",
        ])
        .json();
    assert_eq!(edited["schedule"]["name"], "early");
    assert_eq!(
        edited["schedule"]["recurrence"],
        json!({"type": "daily", "at": "06:15:00", "zone": "Asia/Tokyo"}),
        "a new recurrence keeps the zone unless --zone is given"
    );
    assert_eq!(edited["schedule"]["template"]["payload"], Value::Null);
    let from_stdin = server.tt_as(
        ADMIN,
        &["schedule", "edit", "early", "--payload", "-", "--json"],
        Some(r#"{"from": "stdin"}"#),
    );
    assert_eq!(
        from_stdin.json()["schedule"]["template"]["payload"],
        json!({"from": "stdin"})
    );
    server
        .tt(&[
            "schedule",
            "create",
            "heartbeat",
            "--every",
            "1m",
            "--start",
            "2026-01-01T00:00:30Z",
            "--kind",
            "ping",
        ])
        .ok();
    let every = server
        .tt(&["schedule", "edit", "heartbeat", "--every", "2h", "--json"])
        .json();
    assert_eq!(
        every["schedule"]["recurrence"],
        json!({"type": "every", "every_ms": 7_200_000, "start": "2026-01-01T00:00:30Z"}),
        "a new interval keeps the start unless --start is given"
    );

    // disable and enable, as verbs and as edit flags.
    let disabled = server.tt(&["schedule", "disable", "early"]).ok().stdout;
    assert!(
        disabled.starts_with("disabled schedule \"early\""),
        "{disabled}"
    );
    let s = &server.show("early")["schedule"];
    assert_eq!((&s["enabled"], &s["upcoming"]), (&json!(false), &json!([])));
    let table = server.tt(&["schedule", "ls"]).ok().stdout;
    assert!(row(&table, "early").contains("  no  "), "{table}");
    let enabled = server.tt(&["schedule", "enable", &id]).ok().stdout;
    assert!(
        enabled.starts_with("enabled schedule \"early\"") && enabled.contains("; next run 20"),
        "{enabled}"
    );
    assert_eq!(upcoming(&server.show("early")["schedule"]).len(), 5);
    let off = server
        .tt(&["schedule", "edit", "early", "--disable", "--json"])
        .json();
    assert_eq!(off["schedule"]["enabled"], false);
    let on = server.tt(&["schedule", "enable", "early", "--json"]).json();
    assert_eq!(on["schedule"]["enabled"], true);

    // rm: the schedule goes, the tasks it fired stay.
    let removed = server.tt(&["schedule", "rm", "early"]).ok().stdout;
    assert_eq!(
        removed,
        "deleted schedule \"early\"; the tasks it fired stay\n"
    );
    server
        .tt(&["schedule", "show", "early"])
        .refused(3, "schedule \"early\" not found");
    server.tt(&["show", &task.to_string()]).ok();
    let list = server.tt(&["schedule", "ls", "--json"]).json();
    assert_eq!(
        list["schedules"].as_array().map(Vec::len),
        Some(1),
        "{list}"
    );
    assert_eq!(
        server.tt(&["schedule", "rm", "heartbeat", "--json"]).json(),
        json!({"deleted": true})
    );
    assert_eq!(
        server.tt(&["schedule", "ls"]).ok().stdout,
        "no schedules yet; `tasktable schedule create --help` says how to make one\n"
    );
}

#[test]
fn a_schedule_is_created_from_a_file_and_the_file_goes_alone() {
    let server = Server::start();
    let spec = server.dir.path().join("spec.json");
    std::fs::write(
        &spec,
        r#"{"name": "cleanup", "recurrence": {"type": "daily", "at": "03:00:00", "zone": "UTC"},
            "template": {"kind": "cleanup", "payload": {"older_than_days": 30}},
            "missed": {"policy": "skip"}, "enabled": false}"#,
    )
    .unwrap();
    let path = spec.to_str().unwrap();
    let created = server
        .tt(&["schedule", "create", "--file", path, "--json"])
        .json();
    let s = &created["schedule"];
    assert_eq!(
        (
            &s["name"],
            &s["template"]["payload"],
            &s["missed"],
            &s["enabled"]
        ),
        (
            &json!("cleanup"),
            &json!({"older_than_days": 30}),
            &json!({"policy": "skip"}),
            &json!(false)
        )
    );
    let text = server
        .tt_as(
            ADMIN,
            &["schedule", "create", "--file", "-"],
            Some(r#"{"name": "other", "recurrence": {"type": "cron", "expr": "0 * * * *", "zone": "UTC"}, "template": {"kind": "k"}}"#),
        )
        .ok()
        .stdout;
    assert!(
        text.starts_with("created schedule \"other\"") && text.contains("cron 0 * * * * UTC"),
        "{text}"
    );

    let beside = server.tt(&["schedule", "create", "--file", path, "--kind", "x"]);
    beside.fails(2, "'--file <PATH>' cannot be used with '--kind <KIND>'");
    server
        .tt(&["schedule", "create", "named", "--file", path])
        .fails(2, "cannot be used with '--file <PATH>'");
    std::fs::write(&spec, "[1, 2]").unwrap();
    server
        .tt(&["schedule", "create", "--file", path])
        .refused(2, "holds no JSON object");
}

#[test]
fn bad_options_are_refused_before_any_request_and_the_servers_refusals_are_reported() {
    let server = Server::start();
    server
        .tt(&[
            "schedule",
            "create",
            "nightly",
            "--cron",
            "0 2 * * *",
            "--kind",
            "report",
        ])
        .ok();
    server
        .tt(&[
            "schedule",
            "create",
            "heartbeat",
            "--every",
            "1m",
            "--kind",
            "ping",
        ])
        .ok();

    // Refused by the command line: against a port nobody listens on, so a request would
    // fail with exit code 1 instead.
    let nobody = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let offline = |args: &[&str]| {
        let mut cmd = command(args);
        cmd.env("TASKTABLE_SERVER", format!("http://{nobody}"))
            .env("TASKTABLE_TOKEN", ADMIN);
        finish(cmd, None)
    };
    let create = |extra: &[&str]| {
        let mut args = vec!["schedule", "create", "x", "--kind", "k"];
        args.extend_from_slice(extra);
        offline(&args)
    };
    create(&["--cron", "0 2 * * *", "--every", "1m"]).fails(
        2,
        "'--cron <EXPR>' cannot be used with '--every <DURATION>'",
    );
    create(&["--daily", "02:30", "--cron", "0 2 * * *"]).fails(2, "cannot be used with");
    create(&[]).fails(2, "the following required arguments were not provided");
    offline(&["schedule", "create", "x", "--cron", "0 2 * * *"])
        .fails(2, "the following required arguments were not provided");
    create(&["--every", "1m", "--zone", "UTC"]).fails(2, "cannot be used with");
    create(&["--daily", "02:30", "--start", "2030-01-02T03:04:05Z"])
        .fails(2, "cannot be used with");
    create(&["--daily", "25:00"]).fails(2, "\"25:00\" is not a time of day");
    create(&["--every", "soon"]).fails(2, "\"soon\" is not a duration");
    for bad in ["all:0", "all:1001", "sometimes"] {
        create(&["--cron", "0 2 * * *", "--missed", bad])
            .fails(2, &format!("{bad:?} is not a missed-slot policy"));
    }
    create(&["--cron", "0 2 * * *", "--overlap", "never"]).fails(2, "invalid value 'never'");
    create(&["--cron", "0 2 * * *", "--payload", "{to: ada}"])
        .refused(2, "--payload is not valid JSON");
    offline(&["schedule", "edit", "nightly"]).refused(2, "nothing to change");
    offline(&["schedule", "edit", "nightly", "--enable", "--disable"])
        .fails(2, "cannot be used with");

    // Refused by the command line once it has read the schedule.
    server
        .tt(&["schedule", "edit", "heartbeat", "--zone", "Europe/Berlin"])
        .refused(2, "--zone applies to --cron and --daily schedules");
    server
        .tt(&[
            "schedule",
            "edit",
            "nightly",
            "--start",
            "2030-01-02T03:04:05Z",
        ])
        .refused(2, "--start applies to --every schedules");

    // Refused by the server, with its message and an exit code of its kind.
    for verb in ["show", "enable", "disable", "rm", "fire"] {
        server
            .tt(&["schedule", verb, "nope"])
            .refused(3, "schedule \"nope\" not found (not_found)");
    }
    server
        .tt(&["schedule", "show", "999"])
        .refused(3, "schedule 999 not found");
    server
        .tt(&["schedule", "edit", "nope", "--kind", "x"])
        .refused(3, "schedule \"nope\" not found");
    server
        .tt(&["schedule", "edit", "nope", "--rename", "x"])
        .refused(3, "schedule \"nope\" not found");
    server
        .tt(&[
            "schedule", "create", "nightly", "--daily", "01:00", "--kind", "other",
        ])
        .refused(4, "a schedule named \"nightly\" exists (schedule_exists)");
    server
        .tt(&["schedule", "edit", "heartbeat", "--rename", "nightly"])
        .refused(4, "(schedule_exists)");
    server
        .tt(&[
            "schedule", "create", "x", "--cron", "0 2 * *", "--kind", "k",
        ])
        .refused(1, "bad cron expression \"0 2 * *\"");
    server
        .tt(&[
            "schedule",
            "create",
            "x",
            "--cron",
            "0 2 * * *",
            "--zone",
            "Mars/Olympus",
            "--kind",
            "k",
        ])
        .refused(1, "unknown time zone \"Mars/Olympus\"");
    server
        .tt(&["schedule", "create", "x", "--every", "10ms", "--kind", "k"])
        .refused(1, "interval");
    server
        .tt(&[
            "schedule", "create", "42", "--daily", "01:00", "--kind", "k",
        ])
        .refused(1, "is a number");
    server
        .tt_as(READER, &["schedule", "fire", "nightly"], None)
        .refused(5, "role reader");
    assert_eq!(
        server
            .tt_as(READER, &["schedule", "ls", "--json"], None)
            .json()["schedules"]
            .as_array()
            .map(Vec::len),
        Some(2),
        "readers list schedules"
    );
    let names: Vec<Value> = server.tt(&["schedule", "ls", "--json"]).json()["schedules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].clone())
        .collect();
    assert_eq!(
        names,
        [json!("heartbeat"), json!("nightly")],
        "nothing else was made"
    );
}
