//! One command in a process group of its own: fed its stdin, drained of its output while
//! it runs, its group killed when it exits, and stopped (SIGTERM, then SIGKILL after a
//! grace period) when dropped before that.
//!
//! Nothing here waits on anything the command's group does not control. Its output pipes
//! may be held open by a process that left the group (`setsid`, a daemon), so after the
//! command exits they are read for [`DRAIN_AFTER_EXIT`] at most. A dropped command's group
//! gets its SIGKILL from a task of its own, so the attempt ends at once whether or not the
//! group heeds SIGTERM.

use crate::captured::{Head, Tail, RESULT_LIMIT, TAIL_LIMIT};
use nix::errno::Errno;
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use std::io;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStdin, Command};

/// How long the pipes are still read after the command exits. Its group is killed then,
/// so they close at once unless a process outside the group holds them.
const DRAIN_AFTER_EXIT: Duration = Duration::from_secs(2);

/// How a command ended, with the output that was kept.
#[derive(Debug)]
pub(super) struct Exited {
    pub status: ExitStatus,
    pub stdout: Head,
    pub stderr: Tail,
    /// Whether reading stopped while a pipe was still open, after [`DRAIN_AFTER_EXIT`].
    pub abandoned_pipes: bool,
}

/// A started command. Dropping it before [`Running::finish`] returns stops its group.
#[derive(Debug)]
pub(super) struct Running {
    /// `None` once handed to the task that stops it.
    child: Option<Child>,
    group: ProcessGroup,
    kill_grace: Duration,
}

impl Running {
    /// Starts `command` as the leader of a new process group, with piped stdout and
    /// stderr, and stdin piped when there is input (closed otherwise). `kill_grace`: how
    /// long the group has between SIGTERM and SIGKILL when stopped.
    pub fn spawn(mut command: Command, has_input: bool, kill_grace: Duration) -> io::Result<Self> {
        command
            .stdin(if has_input {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        let child = command.spawn()?;
        let leader = child
            .id()
            .expect("a child just spawned has not been reaped");
        let group = ProcessGroup {
            id: Some(Pid::from_raw(leader as i32)),
        };
        Ok(Running {
            child: Some(child),
            group,
            kill_grace,
        })
    }

    /// Writes `input` and reads both outputs at once (so no pipe fills up and blocks the
    /// command), until the command exits. Then the rest of its group is killed: whatever
    /// it left running would otherwise outlive the attempt and keep the pipes open.
    pub async fn finish(mut self, input: Option<Vec<u8>>) -> io::Result<Exited> {
        let child = self.child.as_mut().expect("not yet handed over");
        let stdin = child.stdin.take();
        let stdout_pipe = child.stdout.take().expect("stdout is piped");
        let stderr_pipe = child.stderr.take().expect("stderr is piped");
        let mut stdout = Head::new(RESULT_LIMIT);
        let mut stderr = Tail::new(TAIL_LIMIT);
        let (status, done, abandoned_pipes) = {
            let io = async {
                tokio::try_join!(
                    feed(stdin, input),
                    drain(stdout_pipe, &mut stdout, Head::push),
                    drain(stderr_pipe, &mut stderr, Tail::push),
                )
                .map(|_| ())
            };
            tokio::pin!(io);
            let early = tokio::select! {
                status = child.wait() => Ok(status),
                done = &mut io => Err(done),
            };
            let (status, done) = match early {
                Ok(status) => (status, None),
                // The pipes closed first; the command may still be running.
                Err(done) => (child.wait().await, Some(done)),
            };
            self.group.kill();
            match done {
                Some(done) => (status, done, false),
                None => match tokio::time::timeout(DRAIN_AFTER_EXIT, &mut io).await {
                    Ok(done) => (status, done, false),
                    Err(_) => {
                        tracing::warn!(
                            "stopped reading a command's output {DRAIN_AFTER_EXIT:?} after \
                             it exited: a process outside its process group holds the pipes"
                        );
                        (status, Ok(()), true)
                    }
                },
            }
        };
        done?;
        Ok(Exited {
            status: status?,
            stdout,
            stderr,
            abandoned_pipes,
        })
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if self.group.id.is_none() {
            return; // finished: the group was killed when the command exited
        }
        self.group.signal(Signal::SIGTERM);
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return; // no runtime to wait on: the group is killed now, as `group` drops
        };
        let group = std::mem::replace(&mut self.group, ProcessGroup { id: None });
        // Kept unreaped until the group is killed, so its pid (the group's id) cannot be
        // reused for another group in the meantime.
        let leader = self.child.take();
        let grace = self.kill_grace;
        // Should the runtime shut down first, dropping this task drops `group`: SIGKILL.
        runtime.spawn(async move {
            tokio::time::sleep(grace).await;
            drop(group);
            drop(leader);
        });
    }
}

/// Writes `input` to the command's stdin, then closes it.
async fn feed(stdin: Option<ChildStdin>, input: Option<Vec<u8>>) -> io::Result<()> {
    if let (Some(mut pipe), Some(input)) = (stdin, input) {
        match pipe.write_all(&input).await {
            // The command need not read all its input.
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {}
            other => other?,
        }
    } // dropping the pipe closes the command's stdin
    Ok(())
}

/// Reads `pipe` to its end into `kept`. What was read stays in `kept` even when reading
/// is given up before the end.
async fn drain<K>(
    mut pipe: impl AsyncRead + Unpin,
    kept: &mut K,
    keep: fn(&mut K, &[u8]),
) -> io::Result<()> {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match pipe.read(&mut buf).await? {
            0 => return Ok(()),
            n => keep(kept, &buf[..n]),
        }
    }
}

/// A process group that is sent SIGKILL once: on [`ProcessGroup::kill`] or on drop.
#[derive(Debug)]
struct ProcessGroup {
    id: Option<Pid>,
}

impl ProcessGroup {
    fn kill(&mut self) {
        self.signal(Signal::SIGKILL);
        self.id = None;
    }

    fn signal(&self, signal: Signal) {
        let Some(id) = self.id else { return };
        match killpg(id, signal) {
            // ESRCH: every process of the group has already exited.
            Ok(()) | Err(Errno::ESRCH) => {}
            Err(e) => {
                tracing::warn!(pgid = id.as_raw(), %signal, error = %e, "cannot signal process group");
            }
        }
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        self.kill();
    }
}
