//! How long finished tasks are kept: an age per final state, and whether a task past its
//! age is deleted or moved to the archive tables. Pure: the store applies it in small
//! batches on the database's clock.

use crate::TaskState;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Ages of finished tasks to keep; `None` keeps a state forever.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Retention {
    /// Succeeded tasks older than this (by `finished_at`) go.
    pub succeeded: Option<Duration>,
    /// Failed tasks older than this go.
    pub failed: Option<Duration>,
    /// Cancelled tasks older than this go.
    pub cancelled: Option<Duration>,
    /// Move them (and their attempts) to `tasktable_tasks_archive` and
    /// `tasktable_attempts_archive` instead of deleting them.
    pub archive: bool,
    /// Events that concern no task (a queue paused, a worker drained, a schedule
    /// edited) older than this go. A task's events go with the task.
    #[serde(default)]
    pub events: Option<Duration>,
}

/// Why a retention policy cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidRetention {
    /// The age given for the tasks of this final state is longer than [`MAX_AGE`].
    #[error("{0} tasks are kept for at most 100 years; give a shorter age")]
    TooLong(TaskState),
    /// The age given for events is longer than [`MAX_AGE`].
    #[error("events are kept for at most 100 years; give a shorter age")]
    EventsTooLong,
}

/// Longest age a policy may give: 100 years (of 366 days).
pub const MAX_AGE: Duration = Duration::from_secs(100 * 366 * 24 * 3600);

impl Retention {
    /// Each final state with the age its tasks are kept for, where one is set.
    pub fn ages(&self) -> Vec<(TaskState, Duration)> {
        [
            (TaskState::Succeeded, self.succeeded),
            (TaskState::Failed, self.failed),
            (TaskState::Cancelled, self.cancelled),
        ]
        .into_iter()
        .filter_map(|(state, age)| Some((state, age?)))
        .collect()
    }

    /// Whether the policy removes anything at all.
    pub fn is_empty(&self) -> bool {
        self.ages().is_empty() && self.events.is_none()
    }

    /// Checks every age against [`MAX_AGE`]: events' first, then the states' in the
    /// order of [`Retention::ages`].
    pub fn validate(&self) -> Result<(), InvalidRetention> {
        if self.events.is_some_and(|age| age > MAX_AGE) {
            return Err(InvalidRetention::EventsTooLong);
        }
        match self.ages().into_iter().find(|(_, age)| *age > MAX_AGE) {
            Some((state, _)) => Err(InvalidRetention::TooLong(state)),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_states_given_an_age_are_purged() {
        let day = Duration::from_secs(86_400);
        let r = Retention {
            succeeded: Some(day),
            cancelled: Some(day * 30),
            ..Default::default()
        };
        assert_eq!(
            r.ages(),
            [
                (TaskState::Succeeded, day),
                (TaskState::Cancelled, day * 30)
            ]
        );
        assert!(Retention::default().is_empty());
        assert!(r.validate().is_ok());
        let long = Retention {
            failed: Some(MAX_AGE + Duration::from_secs(1)),
            ..Default::default()
        };
        assert_eq!(
            long.validate(),
            Err(InvalidRetention::TooLong(TaskState::Failed))
        );
    }
}
