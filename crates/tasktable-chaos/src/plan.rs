//! Everything random about a run comes from its seed: the mix of tasks, which fault comes
//! next, whom it hits, and how long it lasts. The same seed gives the same tasks and the
//! same sequence of fault decisions; what the processes happen to be doing when a fault
//! lands still depends on timing.

use crate::behaviour::Behaviour;
use crate::database::StopMode;
use rand::rngs::StdRng;
use rand::seq::{IndexedRandom, SliceRandom};
use rand::{Rng, SeedableRng};
use serde::Serialize;
use std::time::Duration;

/// The tasks of a run, in submission order.
pub fn tasks(seed: u64, n: usize) -> Vec<Behaviour> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..n)
        .map(|_| match rng.random_range(0..100) {
            0..47 => Behaviour::Ok {
                ms: rng.random_range(5..80),
            },
            47..50 => Behaviour::Long {
                steps: rng.random_range(6..=10),
                ms: rng.random_range(400..600),
            },
            50..65 => Behaviour::Flaky {
                fail: rng.random_range(1..=2),
                ms: rng.random_range(5..50),
            },
            65..77 => Behaviour::Checkpoint {
                steps: rng.random_range(3..=6),
                ms: rng.random_range(50..150),
            },
            77..87 => Behaviour::Snooze {
                ms: rng.random_range(100..400),
            },
            87..93 => Behaviour::Permanent,
            _ => Behaviour::Timeout,
        })
        .collect()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
#[value(rename_all = "snake_case")]
pub enum FaultKind {
    /// SIGKILL an in-process worker; a new one starts in its place.
    KillWorker,
    /// SIGKILL a pull worker; a new one starts in its place.
    KillPullWorker,
    /// SIGSTOP a worker for longer than its lease, then SIGCONT.
    FreezeWorker,
    /// SIGTERM a worker (graceful shutdown gives its tasks back); a new one starts.
    StopWorker,
    /// Stop the database server (clean, immediate or crash) and start it again.
    RestartDatabase,
    /// SIGKILL `tasktable serve` and start it again on the same port.
    KillApi,
}

impl FaultKind {
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::KillWorker => "kill_worker",
            FaultKind::KillPullWorker => "kill_pull_worker",
            FaultKind::FreezeWorker => "freeze_worker",
            FaultKind::StopWorker => "stop_worker",
            FaultKind::RestartDatabase => "restart_database",
            FaultKind::KillApi => "kill_api",
        }
    }
}

#[derive(Debug)]
pub struct Faults {
    rng: StdRng,
    kinds: Vec<FaultKind>,
    bag: Vec<FaultKind>,
    /// Mean time between faults.
    every: Duration,
}

impl Faults {
    /// Faults of `kinds`, about one per `every`. Kinds come in shuffled rounds, so every
    /// kind is injected within the first few of a short run.
    pub fn new(seed: u64, kinds: Vec<FaultKind>, every: Duration) -> Faults {
        assert!(!kinds.is_empty(), "at least one kind of fault");
        Faults {
            rng: StdRng::seed_from_u64(seed ^ 0x0fa1_7000),
            kinds,
            bag: Vec::new(),
            every,
        }
    }

    pub fn next_kind(&mut self) -> FaultKind {
        if self.bag.is_empty() {
            self.bag = self.kinds.clone();
            self.bag.shuffle(&mut self.rng);
        }
        self.bag.pop().expect("refilled")
    }

    /// The pause before the next fault: between half and one and a half times `every`.
    pub fn gap(&mut self) -> Duration {
        self.every.mul_f64(self.rng.random_range(0.5..1.5))
    }

    pub fn pick<'a>(&mut self, ids: &'a [String]) -> Option<&'a String> {
        ids.choose(&mut self.rng)
    }

    /// Long enough that the lease expires and a rescuer takes the tasks back before the
    /// worker thaws, by a clear margin.
    pub fn freeze_for(&mut self, lease: Duration, rescue: Duration) -> Duration {
        lease + rescue + Duration::from_millis(self.rng.random_range(2000..4000))
    }

    pub fn stop_mode(&mut self) -> StopMode {
        *[StopMode::Clean, StopMode::Immediate, StopMode::Crash]
            .choose(&mut self.rng)
            .expect("modes")
    }

    /// How long the database stays down.
    pub fn downtime(&mut self) -> Duration {
        Duration::from_millis(self.rng.random_range(300..2000))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_tasks_and_every_behaviour_appears() {
        let a = tasks(7, 500);
        assert_eq!(a, tasks(7, 500));
        assert_ne!(a, tasks(8, 500));
        let names: std::collections::BTreeSet<&str> = a.iter().map(Behaviour::name).collect();
        assert_eq!(names.len(), 7, "{names:?}");
    }

    #[test]
    fn every_kind_of_fault_comes_once_in_each_round() {
        let kinds = vec![
            FaultKind::KillWorker,
            FaultKind::KillApi,
            FaultKind::FreezeWorker,
        ];
        let mut faults = Faults::new(1, kinds.clone(), Duration::from_secs(1));
        for _ in 0..3 {
            let mut round: Vec<FaultKind> = (0..3).map(|_| faults.next_kind()).collect();
            round.sort();
            let mut want = kinds.clone();
            want.sort();
            assert_eq!(round, want);
        }
    }
}
