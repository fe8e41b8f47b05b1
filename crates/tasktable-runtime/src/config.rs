//! How a worker is set up: [`WorkerConfig`] with its queues, the documented defaults, and
//! the checks a configuration passes before a worker runs with it.

use crate::identity::WorkerIdentity;
use std::time::Duration;
use tasktable_core::worker::{Protocol, Queues, WorkerFacts};

/// A queue a worker takes tasks from, with its own limit.
#[derive(Debug, Clone)]
pub struct QueueConfig {
    /// The queue's name, as tasks give it at submit (`default` unless they name one).
    pub name: String,
    /// Most tasks of this queue running at once on this worker.
    pub concurrency: usize,
}

/// How a worker behaves. Every field has a documented default.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// Default: host name, pid and a short random suffix.
    pub identity: WorkerIdentity,
    /// Most tasks running at once, over all queues. Default 10.
    pub concurrency: usize,
    /// Default: the `default` queue, limited only by `concurrency` (unless `all_queues`).
    pub queues: Vec<QueueConfig>,
    /// Also take every other queue that has work, each limited only by `concurrency`;
    /// queues are found as tasks appear in them (see [`Store::queue_discover`]).
    /// Default false.
    ///
    /// [`Store::queue_discover`]: tasktable_store::Store::queue_discover
    pub all_queues: bool,
    /// The groups this worker belongs to: shown in the registry, and it takes tasks aimed
    /// at any of them. Default none.
    pub groups: Vec<String>,
    /// Time between heartbeats to the worker registry (±20 % jitter). Default 5 s.
    pub heartbeat_interval: Duration,
    /// Workers (this one's peers) not heard from for this long are marked gone by this
    /// worker's heartbeat. At least twice `heartbeat_interval`. Default 30 s.
    pub worker_silence: Duration,
    /// Gone workers are removed from the registry this long after they went, unless an
    /// operator's drain still holds for them. Default 24 h.
    pub forget_workers_after: Duration,
    /// Lease length; renewed every third of it. At least 300 ms. Default 30 s.
    pub lease_for: Duration,
    /// Time between polls when no notification arrives (±20 % jitter). Default 1 s.
    pub poll_interval: Duration,
    /// How long running handlers may go on after a shutdown signal before their tasks are
    /// released as interrupted. Default 10 s.
    pub shutdown_grace: Duration,
    /// How long a handler told to stop (lease lost, cancelled) may wind down before it is
    /// aborted. Default 5 s.
    pub stop_grace: Duration,
    /// Run a [`Rescuer`](crate::Rescuer) in this worker, scanning at this interval.
    /// Default 5 s; `None` leaves rescue to other processes.
    pub rescue_interval: Option<Duration>,
    /// Run a [`Scheduler`](crate::Scheduler) in this worker, looking for due schedules at
    /// this interval. Default 1 s; `None` leaves schedules to other processes.
    pub schedule_interval: Option<Duration>,
    /// Schedules declared in code: saved when the worker starts (see
    /// [`SchedulerConfig::declared`](crate::SchedulerConfig::declared)).
    pub schedules: Vec<tasktable_core::schedule::ScheduleSpec>,
    /// How long finished tasks are kept; swept every minute by a
    /// [`Retainer`](crate::Retainer) in this worker. Default: kept forever.
    pub retention: tasktable_core::retention::Retention,
    /// Most attempt ends written in one store call. Default 800 (the ends of two claims).
    pub finish_batch: usize,
    /// Most tasks claimed in one store call. Default 400: a statement and a commit cost
    /// about as much as a hundred rows, so large claims keep a worker of short
    /// handlers fast (docs/benchmarks.md, section 25).
    pub claim_batch: u32,
}

/// The default `claim_batch` (see [`WorkerConfig::claim_batch`]).
pub(crate) const DEFAULT_CLAIM_BATCH: u32 = 400;

impl Default for WorkerConfig {
    fn default() -> Self {
        WorkerConfig {
            identity: WorkerIdentity::generate(),
            concurrency: 10,
            queues: Vec::new(),
            all_queues: false,
            groups: Vec::new(),
            heartbeat_interval: Duration::from_secs(5),
            worker_silence: Duration::from_secs(30),
            forget_workers_after: Duration::from_secs(24 * 3600),
            lease_for: Duration::from_secs(30),
            poll_interval: Duration::from_secs(1),
            shutdown_grace: Duration::from_secs(10),
            stop_grace: Duration::from_secs(5),
            rescue_interval: Some(Duration::from_secs(5)),
            schedule_interval: Some(Duration::from_secs(1)),
            schedules: Vec::new(),
            retention: Default::default(),
            finish_batch: 2 * DEFAULT_CLAIM_BATCH as usize,
            claim_batch: DEFAULT_CLAIM_BATCH,
        }
    }
}

/// Why [`WorkerBuilder::build`](crate::WorkerBuilder::build) refused to build a worker.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// A setting no worker can run with (a zero limit or interval, a lease under 300 ms,
    /// a `worker_silence` under two heartbeats, an invalid group, schedule or retention),
    /// or no handler registered; the text names the setting.
    #[error("invalid worker configuration: {0}")]
    Config(String),
}

impl WorkerConfig {
    /// The configuration a worker runs with: the `default` queue when none is named,
    /// refused when a limit or interval is one no worker can run with.
    pub(crate) fn validate(mut self) -> Result<Self, WorkerError> {
        if self.queues.is_empty() && !self.all_queues {
            self.queues.push(QueueConfig {
                name: tasktable_core::task::DEFAULT_QUEUE.into(),
                concurrency: self.concurrency,
            });
        }
        let bad = |m: String| Err(WorkerError::Config(m));
        if self.concurrency == 0 {
            return bad("concurrency must be at least 1".into());
        }
        if let Some(q) = self.queues.iter().find(|q| q.concurrency == 0) {
            return bad(format!("queue {:?} has concurrency 0", q.name));
        }
        if self.lease_for < Duration::from_millis(300) {
            return bad(format!(
                "lease_for must be at least 300 ms, got {:?}",
                self.lease_for
            ));
        }
        if self.poll_interval.is_zero() || self.finish_batch == 0 || self.claim_batch == 0 {
            return bad(
                "poll_interval, finish_batch and claim_batch must be greater than zero".into(),
            );
        }
        if self.heartbeat_interval.is_zero() || self.worker_silence < self.heartbeat_interval * 2 {
            return bad(format!(
                "worker_silence ({:?}) must be at least twice heartbeat_interval ({:?}), \
                 which must be greater than zero",
                self.worker_silence, self.heartbeat_interval
            ));
        }
        if let Err(e) = facts(&self, &[]).validate() {
            return bad(format!("worker registry: {e}"));
        }
        if self.schedule_interval.is_some_and(|d| d.is_zero()) {
            return bad("schedule_interval must be greater than zero".into());
        }
        if !self.schedules.is_empty() && self.schedule_interval.is_none() {
            return bad(
                "schedules are declared but schedule_interval is None: nothing would save them"
                    .into(),
            );
        }
        if let Err(e) = self.retention.validate() {
            return bad(format!("retention: {e}"));
        }
        for spec in &self.schedules {
            if let Err(e) = spec.validate() {
                return bad(format!("schedule {:?}: {e}", spec.name));
            }
        }
        Ok(self)
    }
}

/// The most tasks a worker of `concurrency` claims ahead of its free slots: 80 per slot,
/// and never more than 800 (two claims at the default `claim_batch`). It is a ceiling:
/// how many a worker does claim ahead follows its handlers' recent run time, and is none
/// until a handler has run.
pub fn ahead_limit(concurrency: usize) -> usize {
    (80 * concurrency).min(AHEAD_MAX)
}

/// Two claims' worth at the default `claim_batch`: a worker of short handlers claims its
/// next four hundred tasks while the last four hundred still wait for slots.
pub(crate) const AHEAD_MAX: usize = 2 * DEFAULT_CLAIM_BATCH as usize;

/// `d` give or take a fifth, drawn at random, so that workers started together do not
/// poll, beat or renew in step.
pub(crate) fn jittered(d: Duration) -> Duration {
    d.mul_f64(0.8 + 0.4 * rand::random::<f64>())
}

/// What a worker with `config` and handlers for `kinds` tells the registry. A kind no
/// task could have (not a valid name) is left out, as is any beyond the registry's
/// [`MAX_KINDS`](tasktable_core::worker::MAX_KINDS), so the heartbeat is never refused
/// for them; the kinds are sorted, so that beats of the same worker read alike.
pub(crate) fn facts<'a>(
    config: &WorkerConfig,
    kinds: impl IntoIterator<Item = &'a String>,
) -> WorkerFacts {
    let mut kinds: Vec<String> = kinds
        .into_iter()
        .filter(|k| tasktable_core::worker::valid_name(k))
        .cloned()
        .collect();
    kinds.sort_unstable();
    kinds.truncate(tasktable_core::worker::MAX_KINDS);
    let queues = if config.all_queues {
        Queues::All
    } else {
        Queues::Listed(config.queues.iter().map(|q| q.name.clone()).collect())
    };
    WorkerFacts {
        id: config.identity.id.clone(),
        host: config.identity.host.clone(),
        pid: Some(std::process::id()),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        groups: config.groups.clone(),
        queues,
        capacity: u32::try_from(config.concurrency).unwrap_or(u32::MAX),
        protocol: Protocol::Process,
        kinds: Some(kinds),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_queue_named_means_the_default_queue_at_the_workers_concurrency() {
        let config = WorkerConfig {
            concurrency: 7,
            ..Default::default()
        }
        .validate()
        .unwrap();
        assert_eq!(config.queues.len(), 1);
        assert_eq!(config.queues[0].name, tasktable_core::task::DEFAULT_QUEUE);
        assert_eq!(config.queues[0].concurrency, 7);
    }

    #[test]
    fn all_queues_alone_adds_no_default_queue() {
        let config = WorkerConfig {
            all_queues: true,
            ..Default::default()
        }
        .validate()
        .unwrap();
        assert!(config.queues.is_empty());
    }

    #[test]
    fn a_silence_shorter_than_two_heartbeats_and_a_bad_group_are_refused() {
        let err = WorkerConfig {
            worker_silence: Duration::from_secs(9),
            ..Default::default()
        }
        .validate()
        .unwrap_err();
        assert!(err.to_string().contains("worker_silence"), "{err}");
        let err = WorkerConfig {
            groups: vec!["a\nb".into()],
            ..Default::default()
        }
        .validate()
        .unwrap_err();
        assert!(err.to_string().contains("group"), "{err}");
    }

    #[test]
    fn a_queue_with_no_capacity_is_refused_by_name() {
        let err = WorkerConfig {
            queues: vec![QueueConfig {
                name: "emails".into(),
                concurrency: 0,
            }],
            ..Default::default()
        }
        .validate()
        .unwrap_err();
        assert!(err.to_string().contains("\"emails\""), "{err}");
    }

    #[test]
    fn a_lease_too_short_to_renew_is_refused() {
        let err = WorkerConfig {
            lease_for: Duration::from_millis(299),
            ..Default::default()
        }
        .validate()
        .unwrap_err();
        assert!(err.to_string().contains("lease_for"), "{err}");
    }
}
