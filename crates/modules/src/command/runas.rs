//! `runas=`: running a command as another user the way Salt 3008's
//! `cmdmod._run` does on Linux.
//!
//! Salt reads the user's login environment once (`su -s <shell> - <user>
//! -c <dump>`), lays the caller's `env` over it, forces `USER` and `HOME`
//! to the user's, and then starts the command itself as that user
//! (initgroups, setgid, setuid in the child) — not through `su`, so
//! `env=`, `cwd=` and stdin reach the command unchanged.

use std::io;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use halite_state::{CmdOptions, CmdTimeout};
use nix::unistd::{Gid, Uid, User};

/// Salt waits 10 seconds for the login environment, then goes on without.
const LOGIN_ENV_TIMEOUT: Duration = Duration::from_secs(10);

/// What the child needs to become `user`: ids, groups, environment, and
/// the directory it starts in when the caller gave none.
pub(super) struct RunAs {
    uid: Uid,
    gid: Gid,
    groups: Vec<Gid>,
    env: Vec<(String, String)>,
    home: String,
}

/// Looks `user` up and reads their login environment (one `su` per call),
/// with `env` laid over it as Salt does.
///
/// An unknown user is Salt's "User 'x' is not available" error, before
/// anything runs.
pub(super) fn resolve(user: &str, opts: &CmdOptions) -> io::Result<RunAs> {
    let found = User::from_name(user)
        .map_err(io::Error::other)?
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("User '{user}' is not available"),
            )
        })?;
    let name = std::ffi::CString::new(user).map_err(io::Error::other)?;
    // initgroups(3)'s list: the primary group and every group naming the
    // user; a lookup failure leaves the primary group alone.
    let groups = nix::unistd::getgrouplist(&name, found.gid).unwrap_or_else(|e| {
        tracing::warn!("cannot list the groups of {user}: {e}; using its primary group only");
        vec![found.gid]
    });
    let shell = opts.shell.as_deref().unwrap_or("/bin/sh");
    let mut env = login_env(user, shell);
    for (k, v) in &opts.env {
        set(&mut env, k, v);
    }
    let home = found.dir.to_string_lossy().into_owned();
    set(&mut env, "USER", user);
    set(&mut env, "HOME", &home);
    // Salt leaves these to the login environment; when it could not be
    // read (a locked account, PAM refusing su), the user's own values
    // still beat the daemon's.
    let login_shell = found.shell.to_string_lossy().into_owned();
    for (k, v) in [("LOGNAME", user), ("SHELL", login_shell.as_str())] {
        if !env.iter().any(|(key, _)| key == k) {
            env.push((k.to_string(), v.to_string()));
        }
    }
    Ok(RunAs {
        uid: found.uid,
        gid: found.gid,
        groups,
        env,
        home,
    })
}

/// Sets up `command` to run as the user: their environment over the
/// daemon's (as Salt's `os.environ.copy().update(env)`), Salt's default
/// directory (the user's home, `/` when it is missing), and the ids.
pub(super) fn apply(command: &mut Command, runas: RunAs, cwd_given: bool) {
    command.envs(runas.env.iter().map(|(k, v)| (k, v)));
    if !cwd_given {
        let home = Path::new(&runas.home);
        command.current_dir(if home.is_dir() { home } else { Path::new("/") });
    }
    if runas.uid == nix::unistd::geteuid() {
        // Salt's chugid_and_umask leaves the ids alone for the same user.
        return;
    }
    let RunAs {
        uid, gid, groups, ..
    } = runas;
    // SAFETY: the closure runs in the forked child before exec and only
    // makes three system calls on data prepared before the fork (no
    // allocation, no lock), which is what pre_exec requires.
    unsafe {
        command.pre_exec(move || {
            nix::unistd::setgroups(&groups).map_err(io::Error::from)?;
            nix::unistd::setgid(gid).map_err(io::Error::from)?;
            nix::unistd::setuid(uid).map_err(io::Error::from)?;
            Ok(())
        });
    }
}

/// The user's login environment, read as Salt reads it: a login shell
/// (`su -s <shell> - <user>`) prints its environment between two markers.
/// Empty, with an error logged, when it cannot be read (Salt goes on the
/// same way).
fn login_env(user: &str, shell: &str) -> Vec<(String, String)> {
    const MARKER: &str = "<<<halite-login-env>>>";
    let dump = format!("printf %s '{MARKER}'; env -0; printf %s '{MARKER}'");
    let opts = CmdOptions {
        timeout: Some(CmdTimeout {
            duration: LOGIN_ENV_TIMEOUT,
            shown: LOGIN_ENV_TIMEOUT.as_secs().to_string(),
        }),
        ..CmdOptions::default()
    };
    let words = ["su", "-s", shell, "-", user, "-c", &dump];
    let line = words
        .iter()
        .map(|w| super::shell_quote(w))
        .collect::<Vec<_>>()
        .join(" ");
    let out = match super::run_command(&line, &opts) {
        Ok(out) => out,
        Err(e) => {
            tracing::error!("Environment could not be retrieved for user '{user}': {e}");
            return Vec::new();
        }
    };
    let parts: Vec<&str> = out.stdout.split(MARKER).collect();
    match parts.as_slice() {
        [_, inner, _] => parse_env0(inner),
        _ => {
            tracing::error!(
                "Environment could not be retrieved for user '{user}': stderr={:?} stdout={:?}",
                out.stderr,
                out.stdout
            );
            Vec::new()
        }
    }
}

/// `env -0` output: `KEY=value` entries separated by NUL.
fn parse_env0(text: &str) -> Vec<(String, String)> {
    text.split('\0')
        .filter_map(|entry| entry.split_once('='))
        .filter(|(k, _)| !k.is_empty())
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Sets `key` in `env`, replacing an earlier value.
fn set(env: &mut Vec<(String, String)>, key: &str, value: &str) {
    env.retain(|(k, _)| k != key);
    env.push((key.to_string(), value.to_string()));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env0_entries_split_at_the_first_equals_sign() {
        let got = parse_env0("A=1\0B=x=y\0\0=bad\0C=");
        assert_eq!(
            got,
            vec![
                ("A".to_string(), "1".to_string()),
                ("B".to_string(), "x=y".to_string()),
                ("C".to_string(), String::new()),
            ]
        );
    }

    #[test]
    fn a_later_value_replaces_an_earlier_one() {
        let mut env = vec![("HOME".to_string(), "/a".to_string())];
        set(&mut env, "HOME", "/b");
        assert_eq!(env, vec![("HOME".to_string(), "/b".to_string())]);
    }
}
