//! `tasktable schedule`: recurring schedules, each submitting a task from its template at
//! every slot of its recurrence. List, show, create, edit, enable, disable, delete, and
//! fire one now. The server owns the rules (which slots fire, what is a valid cron
//! expression or zone); these commands send what the operator typed and report the answer.

mod flags;
mod view;

use crate::client::{field, Api};
use crate::error::{CliError, EXIT_CODES_HELP};
use crate::output;
use chrono::{DateTime, Utc};
use clap::{Args, Subcommand};
use serde_json::{json, Value};

pub use flags::{CreateArgs, EditArgs};

#[derive(Subcommand, Debug)]
pub enum ScheduleCommand {
    /// List the schedules by name, with when each fires and runs next.
    #[command(after_long_help = EXIT_CODES_HELP)]
    Ls,
    /// Show a schedule, its next five fire times and the last tasks it fired.
    #[command(after_long_help = EXIT_CODES_HELP)]
    Show(Named),
    /// Create a schedule: when it fires (--cron, --every or --daily) and its task's --kind.
    ///
    /// The task options (--queue, --payload, ...) set the task it submits at each slot;
    /// --file gives all of it as JSON instead. It takes effect from its next slot: no slot
    /// before it was created fires.
    #[command(after_long_help = EXIT_CODES_HELP)]
    Create(CreateArgs),
    /// Change a schedule: only the options given change.
    ///
    /// A new recurrence takes effect from its next slot. The task options change the
    /// template of tasks fired from now on, not tasks already fired.
    #[command(after_long_help = EXIT_CODES_HELP)]
    Edit(EditArgs),
    /// Enable a schedule: it fires again from its next slot on.
    ///
    /// Slots that passed while it was disabled do not fire.
    #[command(after_long_help = EXIT_CODES_HELP)]
    Enable(Named),
    /// Disable a schedule: it fires nothing until it is enabled again.
    #[command(after_long_help = EXIT_CODES_HELP)]
    Disable(Named),
    /// Delete a schedule. The tasks it fired stay.
    #[command(after_long_help = EXIT_CODES_HELP)]
    Rm(Named),
    /// Submit the schedule's task now, and print the task's id.
    ///
    /// It fires whatever the recurrence, the enabled flag and the overlap policy say, with
    /// now as its slot; the slots the schedule fires at stay as they were.
    #[command(after_long_help = EXIT_CODES_HELP)]
    Fire(Named),
}

/// The schedule a command applies to.
#[derive(Args, Debug)]
pub struct Named {
    /// The schedule's name or id.
    #[arg(value_name = "NAME|ID")]
    schedule: String,
}

pub async fn run(api: &Api, command: &ScheduleCommand, json: bool) -> Result<(), CliError> {
    match command {
        ScheduleCommand::Ls => list(api, json).await,
        ScheduleCommand::Show(n) => show(api, &n.schedule, json).await,
        ScheduleCommand::Create(args) => create(api, args, json).await,
        ScheduleCommand::Edit(args) => edit(api, args, json).await,
        ScheduleCommand::Enable(n) => set_enabled(api, &n.schedule, true, json).await,
        ScheduleCommand::Disable(n) => set_enabled(api, &n.schedule, false, json).await,
        ScheduleCommand::Rm(n) => delete(api, &n.schedule, json).await,
        ScheduleCommand::Fire(n) => fire(api, &n.schedule, json).await,
    }
}

/// The path of a schedule, or of one of its operations.
fn path<'a>(schedule: &'a str, op: Option<&'a str>) -> Vec<&'a str> {
    let mut path = vec!["api", "v1", "schedules", schedule];
    path.extend(op);
    path
}

/// A schedule as the command line named it, the way the server's messages do:
/// `schedule 3`, `schedule "nightly"`.
fn named(schedule: &str) -> String {
    if schedule.parse::<i64>().is_ok() {
        format!("schedule {schedule}")
    } else {
        format!("schedule {schedule:?}")
    }
}

async fn list(api: &Api, json: bool) -> Result<(), CliError> {
    let answer = api.get(&["api", "v1", "schedules"], &[]).await?;
    if json {
        return output::json(&answer);
    }
    let schedules: Vec<view::Schedule> = field(&answer, "schedules")?;
    if schedules.is_empty() {
        return output::line(
            "no schedules yet; `tasktable schedule create --help` says how to make one",
        );
    }
    output::emit(&view::table(&schedules).render())
}

async fn show(api: &Api, schedule: &str, json: bool) -> Result<(), CliError> {
    let answer = api.get(&path(schedule, None), &[]).await?;
    if json {
        return output::json(&answer);
    }
    output::emit(&view::page(&answer)?)
}

async fn create(api: &Api, args: &CreateArgs, json: bool) -> Result<(), CliError> {
    let body = args.body()?;
    let answer = api.post(&["api", "v1", "schedules"], &body).await?;
    if json {
        return output::json(&answer);
    }
    let s = view::schedule(&answer)?;
    output::line(format!(
        "created {}: {}; next run {}",
        view::label(&s),
        view::when(&s),
        view::next_run(&s)
    ))
}

async fn edit(api: &Api, args: &EditArgs, json: bool) -> Result<(), CliError> {
    args.check()?;
    // A template is replaced whole, so the options given are laid over the one the
    // server has now. An edit by someone else between the two requests is overwritten.
    let current = if args.needs_current() {
        let answer = api.get(&path(&args.schedule, None), &[]).await?;
        Some(field::<Value>(&answer, "schedule")?)
    } else {
        None
    };
    let body = args.body(current.as_ref())?;
    let answer = api.patch(&path(&args.schedule, None), &body).await?;
    if json {
        return output::json(&answer);
    }
    let s = view::schedule(&answer)?;
    output::line(format!(
        "changed {}: {}; next run {}",
        view::label(&s),
        view::when(&s),
        view::next_run(&s)
    ))
}

async fn set_enabled(api: &Api, schedule: &str, enabled: bool, json: bool) -> Result<(), CliError> {
    let op = if enabled { "enable" } else { "disable" };
    let answer = api.post(&path(schedule, Some(op)), &json!({})).await?;
    if json {
        return output::json(&answer);
    }
    let s = view::schedule(&answer)?;
    output::line(if enabled {
        format!(
            "enabled {}; next run {}",
            view::label(&s),
            view::next_run(&s)
        )
    } else {
        format!(
            "disabled {}: it fires nothing until `tasktable schedule enable`",
            view::label(&s)
        )
    })
}

async fn delete(api: &Api, schedule: &str, json: bool) -> Result<(), CliError> {
    let answer = api.delete(&path(schedule, None)).await?;
    if json {
        return output::json(&answer);
    }
    output::line(format!(
        "deleted {}; the tasks it fired stay",
        named(schedule)
    ))
}

async fn fire(api: &Api, schedule: &str, json: bool) -> Result<(), CliError> {
    let answer = api.post(&path(schedule, Some("fire")), &json!({})).await?;
    if json {
        return output::json(&answer);
    }
    let task: i64 = field(&answer, "task_id")?;
    let slot: DateTime<Utc> = field(&answer, "slot_at")?;
    if field::<bool>(&answer, "created")? {
        output::line(format!(
            "created task {task} from {} (slot {})",
            named(schedule),
            output::time(slot)
        ))
    } else {
        output::line(format!(
            "not created: task {task} already holds the slot {} of {}",
            output::time(slot),
            named(schedule)
        ))
    }
}
