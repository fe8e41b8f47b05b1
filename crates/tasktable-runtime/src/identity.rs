use rand::distr::{Alphanumeric, SampleString};

/// Who a worker is: recorded on every task it runs and in the attempt history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerIdentity {
    /// The worker's name: its key in the registry and the `worker_id` of the tasks it
    /// runs. Keep it unique among live workers; an operator's drain holds for the id, so
    /// a worker restarted under the same id stays drained.
    pub id: String,
    /// The machine's host name, recorded as the `worker_host` of the tasks it runs.
    pub host: String,
}

impl WorkerIdentity {
    /// `host-pid-suffix`, with a short random suffix so two workers in one process (or a
    /// restarted process that reuses a pid) never share an id.
    pub fn generate() -> Self {
        let host = gethostname::gethostname().to_string_lossy().into_owned();
        let suffix = Alphanumeric
            .sample_string(&mut rand::rng(), 6)
            .to_lowercase();
        WorkerIdentity {
            id: format!("{host}-{}-{suffix}", std::process::id()),
            host,
        }
    }

    /// An explicit id on this machine's host name.
    pub fn named(id: impl Into<String>) -> Self {
        WorkerIdentity {
            id: id.into(),
            host: gethostname::gethostname().to_string_lossy().into_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_ids_name_the_host_and_pid_and_differ() {
        let a = WorkerIdentity::generate();
        let b = WorkerIdentity::generate();
        assert!(a
            .id
            .starts_with(&format!("{}-{}-", a.host, std::process::id())));
        assert_ne!(a.id, b.id);
    }
}
