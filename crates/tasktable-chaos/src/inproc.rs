//! `tasktable-chaos worker`: a process running tasktable's own runtime ([`Worker`]) with
//! the chaos handler, against the database directly. It journals every claim, checkpoint
//! and effect from inside the handler, and every attempt's end from the worker's events
//! (the runtime writes ends in batches, so only its events say whether one was applied).
//!
//! The handler never checks whether it was told to stop before writing its effect: it
//! relies on the fenced write. A worker frozen past its lease therefore makes a real
//! stale write when it thaws, and the run sees whether it was refused.

use crate::behaviour::{script, Behaviour, Ending, Mark, Step, KIND, QUEUE};
use crate::effects::Effects;
use crate::journal::{Entry, Journal, Op};
use clap::Args;
use serde_json::Value;
use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tasktable::{
    ContextError, Handler, HandlerError, QueueConfig, TaskContext, Worker, WorkerConfig,
    WorkerEvent, WorkerIdentity,
};
use tokio::sync::broadcast;

#[derive(Args, Debug, Clone)]
pub struct WorkerArgs {
    #[arg(long)]
    pub database_url: String,
    /// Worker id, also the journal's name.
    #[arg(long)]
    pub id: String,
    #[arg(long)]
    pub journal: PathBuf,
    #[arg(long, default_value_t = 8)]
    pub concurrency: usize,
    #[arg(long, default_value_t = 2000)]
    pub lease_ms: u64,
    /// 0 runs no rescuer in this worker.
    #[arg(long, default_value_t = 1000)]
    pub rescue_ms: u64,
    #[arg(long, default_value_t = 250)]
    pub poll_ms: u64,
    /// Write effects without testing the fencing token (to show the checks fire).
    #[arg(long)]
    pub unfenced_effects: bool,
}

/// The tokens of this process's attempts whose end has not been seen yet, per task, in
/// claim order. Events name only the task, so an end is matched to the oldest attempt of
/// its task; when two attempts of one task are in flight here the match is uncertain and
/// the end is journaled without a token.
type InFlight = Arc<Mutex<HashMap<i64, VecDeque<i64>>>>;

struct ChaosHandler {
    id: String,
    effects: Effects,
    journal: Arc<Journal>,
    fenced: bool,
    in_flight: InFlight,
}

impl Handler for ChaosHandler {
    const KIND: &'static str = KIND;
    type Payload = Behaviour;
    type Output = Value;

    async fn run(&self, ctx: TaskContext, behaviour: Behaviour) -> Result<Value, HandlerError> {
        let task = ctx.task_id();
        let token = ctx.lease().token;
        self.in_flight
            .lock()
            .expect("in flight")
            .entry(task)
            .or_default()
            .push_back(token);
        let received = Mark::from_value(ctx.task().checkpoint.as_ref());
        let mut claim = Entry::new(&self.id, Op::Claim, task, Some(token));
        claim.attempt = Some(ctx.attempt());
        claim.mark = received;
        claim.accepted = Some(true);
        self.journal.record(&claim);

        let (steps, ending) = script(&behaviour, ctx.attempt(), received, token);
        for step in steps {
            match step {
                Step::Work(d) => tokio::time::sleep(d).await,
                // A careless handler (the `unfenced-effects` break) carries on past a
                // refused checkpoint to its effect, as the fence's absence would let it.
                Step::Save(mark) => {
                    let saved = self.save(&ctx, mark).await;
                    if self.fenced {
                        saved?;
                    }
                }
                Step::Effect => self.effect(task, token).await?,
            }
        }
        match ending {
            Ending::Succeed(result) => Ok(result),
            Ending::Retry(m) => Err(HandlerError::retry(m)),
            Ending::Fail(m) => Err(HandlerError::permanent(m)),
            Ending::Snooze(d) => Err(HandlerError::snooze(d)),
            Ending::Overrun => {
                std::future::pending::<()>().await;
                Err(HandlerError::retry("unreachable"))
            }
        }
    }
}

impl ChaosHandler {
    async fn save(&self, ctx: &TaskContext, mark: Mark) -> Result<(), HandlerError> {
        let mut entry = Entry::new(&self.id, Op::Checkpoint, ctx.task_id(), Some(mark.token));
        entry.mark = Some(mark);
        // A handler already told to stop is refused without a write; that is not the
        // database's answer, so it is not journaled as one.
        let already_stopped = ctx.is_stopped();
        let saved = ctx.save_checkpoint(&mark).await;
        entry.accepted = match &saved {
            Ok(()) => Some(true),
            Err(ContextError::Stopped(_)) if !already_stopped => Some(false),
            Err(_) => None,
        };
        if !already_stopped {
            self.journal.record(&entry);
        }
        saved.map_err(|e| HandlerError::retry(format!("checkpoint not saved: {e}")))
    }

    async fn effect(&self, task: i64, token: i64) -> Result<(), HandlerError> {
        let mut entry = Entry::new(&self.id, Op::Effect, task, Some(token));
        let written = self
            .effects
            .record(task, token, &self.id, self.fenced)
            .await;
        entry.accepted = written.as_ref().ok().copied();
        self.journal.record(&entry);
        match written {
            Ok(true) => Ok(()),
            Ok(false) => Err(HandlerError::retry("the lease was lost before the effect")),
            Err(e) => Err(HandlerError::retry(format!("effect not recorded: {e}"))),
        }
    }
}

pub async fn run(
    args: WorkerArgs,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<(), String> {
    let store = tasktable::connect(&args.database_url)
        .await
        .map_err(|e| format!("cannot open the database: {e}"))?;
    // Other processes write the same SQLite file; wait for its lock as the store does.
    let effects = Effects::connect(&args.database_url, Duration::from_secs(10))
        .await
        .map_err(|e| format!("cannot open the effects table: {e}"))?;
    let journal = Arc::new(Journal::open(&args.journal).map_err(|e| e.to_string())?);
    let in_flight = InFlight::default();
    let lease_for = Duration::from_millis(args.lease_ms);
    let config = WorkerConfig {
        identity: WorkerIdentity::named(&args.id),
        concurrency: args.concurrency,
        queues: vec![QueueConfig {
            name: QUEUE.into(),
            concurrency: args.concurrency,
        }],
        lease_for,
        poll_interval: Duration::from_millis(args.poll_ms),
        shutdown_grace: Duration::from_millis(500),
        rescue_interval: (args.rescue_ms > 0).then(|| Duration::from_millis(args.rescue_ms)),
        ..WorkerConfig::default()
    };
    let handler = ChaosHandler {
        id: args.id.clone(),
        effects,
        journal: journal.clone(),
        fenced: !args.unfenced_effects,
        in_flight: in_flight.clone(),
    };
    let worker = Worker::builder(store)
        .config(config)
        .register(handler)
        .build()
        .map_err(|e| e.to_string())?;
    let events = worker.subscribe();
    let ends = tokio::spawn(journal_ends(events, args.id.clone(), in_flight, journal));
    worker.run(shutdown).await;
    ends.abort();
    Ok(())
}

/// Journals the end of every attempt as the worker's events report it.
async fn journal_ends(
    mut events: broadcast::Receiver<WorkerEvent>,
    id: String,
    in_flight: InFlight,
    journal: Arc<Journal>,
) {
    loop {
        let event = match events.recv().await {
            Ok(event) => event,
            Err(broadcast::error::RecvError::Lagged(n)) => {
                // Ends were missed: the tokens of later ends can no longer be matched.
                tracing::error!(missed = n, "worker events lagged; journal incomplete");
                in_flight.lock().expect("in flight").clear();
                continue;
            }
            Err(broadcast::error::RecvError::Closed) => return,
        };
        let (task, finished) = match event {
            WorkerEvent::Finished {
                task_id,
                outcome,
                applied,
            } => (task_id, Some((outcome, applied))),
            WorkerEvent::Stopped { task_id, .. } => (task_id, None),
            _ => continue,
        };
        let token = {
            let mut map = in_flight.lock().expect("in flight");
            let queue = map.entry(task).or_default();
            let certain = queue.len() == 1;
            let token = queue.pop_front().filter(|_| certain);
            if queue.is_empty() {
                map.remove(&task);
            }
            token
        };
        if let Some((outcome, applied)) = finished {
            let mut entry = Entry::new(&id, Op::Finish, task, token);
            entry.outcome = Some(outcome.as_str().to_owned());
            // `false` may follow a write whose answer was lost and that was retried, so
            // only `true` is certain.
            entry.accepted = applied.then_some(true);
            journal.record(&entry);
        }
    }
}
