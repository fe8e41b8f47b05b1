//! What a command may not do whoever it runs as: hold a capability, or gain one (or
//! another user) through a set-user-ID or file-capability program. Applied in the child
//! between fork and exec, after the switch to its [`ExecUser`], so it binds the command
//! and everything it starts, and leaves the worker as it was.
//!
//! The crate denies `unsafe` code everywhere else: a hook between fork and exec exists
//! only as the `unsafe` `pre_exec`, so this module allows it, for that hook and the system
//! calls it makes (docs/security.md, "exec isolation").
#![allow(unsafe_code)]

use super::user::ExecUser;
use tokio::process::Command;

/// Makes `command` run as `user` when that is not this process's own user (with the
/// user's primary group, and no supplementary group), with `no_new_privs` set and no
/// capability in any set.
///
/// The switch is std's: in the child it sets the group, drops the supplementary groups
/// (`setgroups(0)`, which it skips when unprivileged) and sets the user, before any
/// `pre_exec` hook, and before it changes into the working directory, so a directory the
/// user may not enter fails the start.
pub(super) fn confine(command: &mut Command, user: Option<&ExecUser>) {
    if let Some(user) = user.filter(|user| !user.is_current()) {
        command.uid(user.uid()).gid(user.gid());
    }
    #[cfg(target_os = "linux")]
    // SAFETY: the hook runs in the forked child, where only async-signal-safe calls are
    // sound: it makes raw system calls on values on its own stack, and neither allocates
    // nor takes a lock.
    unsafe {
        command.pre_exec(linux::drop_privileges);
    }
}

#[cfg(target_os = "linux")]
mod linux {
    use std::io;

    /// Capabilities are numbered below 64: the kernel's masks are two 32-bit words.
    const LAST_POSSIBLE_CAPABILITY: u8 = 63;
    /// `_LINUX_CAPABILITY_VERSION_3`: 64-bit masks, as two [`CapData`].
    const CAPABILITY_VERSION_3: u32 = 0x2008_0522;
    /// prctl reads its arguments as `unsigned long`.
    const NONE: libc::c_ulong = 0;

    /// `struct __user_cap_header_struct`.
    #[repr(C)]
    struct CapHeader {
        version: u32,
        pid: libc::c_int,
    }

    /// `struct __user_cap_data_struct`: one 32-bit word of each set.
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct CapData {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }

    /// In the child, just before exec:
    ///
    /// 1. Empties the capability bounding set, so no program the command runs can be
    ///    given a capability, file capabilities and a root user included. This takes
    ///    `CAP_SETPCAP`, which a command still running as root has; one already switched
    ///    to another user has none left, nor any other capability.
    /// 2. Empties the permitted, effective and inheritable sets (and with them the
    ///    ambient set): a process that switched users by holding `CAP_SETUID` and
    ///    `CAP_SETGID` without being root keeps them across the switch otherwise.
    /// 3. Sets `no_new_privs`: exec never again grants a user, group or capability
    ///    (set-user-ID bits and file capabilities are ignored), so what 2 emptied stays
    ///    empty in everything the command starts.
    pub(super) fn drop_privileges() -> io::Result<()> {
        for capability in 0..=LAST_POSSIBLE_CAPABILITY {
            // SAFETY: prctl with integer arguments only.
            let dropped = unsafe {
                libc::prctl(
                    libc::PR_CAPBSET_DROP,
                    libc::c_ulong::from(capability),
                    NONE,
                    NONE,
                    NONE,
                )
            };
            if dropped == -1 {
                match io::Error::last_os_error().raw_os_error() {
                    // Past the last capability this kernel knows.
                    Some(libc::EINVAL) => continue,
                    // No CAP_SETPCAP, and so (after the switch) none: 2 and 3 suffice.
                    Some(libc::EPERM) => break,
                    _ => return Err(io::Error::last_os_error()),
                }
            }
        }
        let mut header = CapHeader {
            version: CAPABILITY_VERSION_3,
            pid: 0,
        };
        let none = [CapData {
            effective: 0,
            permitted: 0,
            inheritable: 0,
        }; 2];
        // SAFETY: capset reads one header and two data words, which live on this stack
        // for the call; the kernel may write its preferred version into the header.
        let header = std::ptr::from_mut(&mut header);
        if unsafe { libc::syscall(libc::SYS_capset, header, none.as_ptr()) } == -1 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: prctl with integer arguments only.
        let on: libc::c_ulong = 1;
        if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, on, NONE, NONE, NONE) } == -1 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}
