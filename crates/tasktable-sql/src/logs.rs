//! Task logs: lines a handler appends under its lease, capped per task, and read back
//! with the task (from the archive when retention moved it).

use crate::exec::{count, required};
use crate::{Arg, Backend, Cells, Exec, Sql};
use tasktable_core::TaskId;
use tasktable_store::{
    LeaseStatus, LogLine, LogParams, StoreError, StoreResult, MAX_LOG_LINES,
    MAX_LOG_LINES_PER_CALL, MAX_LOG_LINE_BYTES,
};

/// A line as it is kept: NUL replaced, cut to [`MAX_LOG_LINE_BYTES`] on a character
/// boundary.
pub fn stored_line(line: &str) -> String {
    let text = line.replace('\0', "\u{FFFD}");
    let mut end = text.len().min(MAX_LOG_LINE_BYTES);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

/// What the line that reaches the cap says instead.
fn cap_note() -> String {
    format!("[log full: a task keeps {MAX_LOG_LINES} lines; later lines were dropped]")
}

/// Appends `p.lines` in one write transaction, if the lease holds.
pub async fn append<B: Backend>(b: &B, p: &LogParams) -> StoreResult<LeaseStatus> {
    if p.lines.is_empty() || p.lines.len() > MAX_LOG_LINES_PER_CALL {
        return Err(StoreError::InvalidInput(format!(
            "a log call appends 1 to {MAX_LOG_LINES_PER_CALL} lines, not {}",
            p.lines.len()
        )));
    }
    b.transact("task_log", |mut tx| async move {
        let status = append_in(&mut tx, p).await?;
        Ok((tx, status))
    })
    .await
}

/// [`append`] inside the caller's write transaction.
async fn append_in<E: Exec>(tx: &mut E, p: &LogParams) -> StoreResult<LeaseStatus> {
    let d = tx.dialect();
    // The task's row (and the run's) locked first: a finish or a rescue waits for this
    // append or goes first, and appends to one task take their turns at the cap.
    let mut lock = Sql::new(d, "SELECT id FROM tasktable_tasks WHERE id = ");
    lock.bind(p.lease.task_id).push(d.lock_rows());
    tx.fetch(lock).await?;
    if let Some(run) = p.lease.run {
        let mut lock = Sql::new(d, "SELECT run FROM tasktable_runs WHERE task_id = ");
        lock.bind(p.lease.task_id)
            .push(" AND run = ")
            .bind(i64::from(run))
            .push(d.lock_rows());
        tx.fetch(lock).await?;
    }
    let status = crate::query::lease_status(tx, &p.lease).await?;
    if !matches!(status, LeaseStatus::Held { .. }) {
        return Ok(status);
    }
    let now = tx.now(p.now).await?;
    let attempt = match p.lease.run {
        Some(run) => i64::from(run),
        None => {
            let mut sql = Sql::new(d, "SELECT attempt FROM tasktable_tasks WHERE id = ");
            sql.bind(p.lease.task_id);
            let rows = tx.fetch(sql).await?;
            required(
                rows.first().map_or(Ok(None), |r| r.int("attempt")),
                "attempt",
            )?
        }
    };
    let mut held = Sql::new(
        d,
        "SELECT count(*) AS n FROM tasktable_task_logs WHERE task_id = ",
    );
    held.bind(p.lease.task_id);
    let rows = tx.fetch(held).await?;
    let kept = rows.first().map_or(Ok(0), |r| count(r, "n"))?;
    let cap = MAX_LOG_LINES as usize;
    let kept = kept as usize;
    if kept >= cap {
        return Ok(status);
    }
    let mut lines: Vec<String> = p.lines.iter().map(|l| stored_line(l)).collect();
    if kept + lines.len() >= cap {
        // The last place is the note's: whatever comes later is dropped, and it says so.
        lines.truncate(cap - 1 - kept);
        lines.push(cap_note());
    }
    let mut insert = Sql::new(
        d,
        "INSERT INTO tasktable_task_logs (task_id, attempt, run, logged_at, line) VALUES ",
    );
    for (i, line) in lines.into_iter().enumerate() {
        if i > 0 {
            insert.push(", ");
        }
        insert
            .push("(")
            .bind(p.lease.task_id)
            .push(", ")
            .bind(attempt)
            .push(", ")
            .bind(Arg::MaybeInt(p.lease.run.map(i64::from)))
            .push(", ")
            .bind(now)
            .push(", ")
            .bind(line)
            .push(")");
    }
    tx.execute(insert).await?;
    Ok(status)
}

/// Every column of `tasktable_task_logs`, as the archive keeps them.
pub const LOG_COLUMNS: &str = "id, task_id, attempt, run, logged_at, line";

/// A task's log, oldest first, from the live table or the archive.
pub async fn of_task<E: Exec>(e: &mut E, id: TaskId, archived: bool) -> StoreResult<Vec<LogLine>> {
    let table = if archived {
        "tasktable_task_logs_archive"
    } else {
        "tasktable_task_logs"
    };
    let mut sql = Sql::new(
        e.dialect(),
        format!("SELECT {LOG_COLUMNS} FROM {table} WHERE task_id = "),
    );
    sql.bind(id).push(" ORDER BY id");
    e.fetch(sql)
        .await?
        .iter()
        .map(|r| {
            Ok(LogLine {
                id: required(r.int("id"), "id")?,
                task_id: required(r.int("task_id"), "task_id")?,
                attempt: required(r.int("attempt"), "attempt")?.clamp(0, u32::MAX.into()) as u32,
                run: r.int("run")?.map(|n| n.clamp(0, u32::MAX.into()) as u32),
                at: required(r.time("logged_at"), "logged_at")?,
                line: required(r.text("line"), "line")?,
            })
        })
        .collect()
}
