//! One command in a process group of its own: fed its stdin, drained of its output while
//! it runs, and killed as a group when it exits, when told to stop, or when dropped.

use crate::captured::{Head, Tail, RESULT_LIMIT, TAIL_LIMIT};
use nix::errno::Errno;
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use std::io;
use std::process::{ExitStatus, Stdio};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, Command};

/// How a command ended, with the output that was kept.
#[derive(Debug)]
pub(super) struct Exited {
    pub status: ExitStatus,
    pub stdout: Head,
    pub stderr: Tail,
}

/// A started command. Dropping it kills its whole process group.
#[derive(Debug)]
pub(super) struct Running {
    child: Child,
    group: ProcessGroup,
}

impl Running {
    /// Starts `command` as the leader of a new process group, with piped stdout and
    /// stderr, and stdin piped when there is input (closed otherwise).
    pub fn spawn(mut command: Command, has_input: bool) -> io::Result<Self> {
        command
            .stdin(if has_input {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        let child = command.spawn()?;
        let leader = child
            .id()
            .expect("a child just spawned has not been reaped");
        let group = ProcessGroup {
            id: Some(Pid::from_raw(leader as i32)),
        };
        Ok(Running { child, group })
    }

    /// Writes `input` and reads both outputs at once (so no pipe fills up and blocks the
    /// command), until the command exits. Then the rest of its group is killed: whatever
    /// it left running would otherwise outlive the attempt and keep the pipes open.
    pub async fn finish(mut self, input: Option<Vec<u8>>) -> io::Result<Exited> {
        let stdin = self.child.stdin.take();
        let stdout = self.child.stdout.take().expect("stdout is piped");
        let stderr = self.child.stderr.take().expect("stderr is piped");
        let feed = async move {
            if let (Some(mut pipe), Some(input)) = (stdin, input) {
                match pipe.write_all(&input).await {
                    // The command need not read all its input.
                    Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {}
                    other => other?,
                }
            } // dropping the pipe closes the command's stdin
            Ok::<_, io::Error>(())
        };
        let child = &mut self.child;
        let group = &mut self.group;
        let exit = async move {
            let status = child.wait().await;
            group.kill();
            status
        };
        let (status, fed, stdout, stderr) = tokio::join!(
            exit,
            feed,
            drain(stdout, Head::new(RESULT_LIMIT), Head::push),
            drain(stderr, Tail::new(TAIL_LIMIT), Tail::push),
        );
        fed?;
        Ok(Exited {
            status: status?,
            stdout: stdout?,
            stderr: stderr?,
        })
    }
}

/// Reads `pipe` to its end, keeping what `keep` keeps.
async fn drain<K>(
    mut pipe: impl AsyncRead + Unpin,
    mut kept: K,
    keep: fn(&mut K, &[u8]),
) -> io::Result<K> {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match pipe.read(&mut buf).await? {
            0 => return Ok(kept),
            n => keep(&mut kept, &buf[..n]),
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
        let Some(id) = self.id.take() else { return };
        match killpg(id, Signal::SIGKILL) {
            // ESRCH: every process of the group has already exited.
            Ok(()) | Err(Errno::ESRCH) => {}
            Err(e) => tracing::warn!(pgid = id.as_raw(), error = %e, "cannot kill process group"),
        }
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        self.kill();
    }
}
