//! The process's open-file limit (`RLIMIT_NOFILE`), raised at a daemon's
//! start as Salt's master does with `max_open_files`: every minion holds
//! two TCP connections to the master (the ROUTER and the PUB), so the
//! common soft limit of 1,024 caps a master at ~500 minions, and a
//! minion running many jobs at once (or a swarm of identities) opens a
//! file or socket per job.

/// The open-file limit before and after [`raise_open_files_limit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenFilesLimit {
    /// The soft limit the process started with.
    pub before: u64,
    /// The soft limit now.
    pub after: u64,
    /// The hard limit: the soft limit can go no higher without privilege.
    pub hard: u64,
}

impl OpenFilesLimit {
    /// Whether `wanted` could not be reached because the hard limit is
    /// lower (the daemon runs with `hard` and should say so).
    pub fn capped(&self, wanted: u64) -> bool {
        self.after < wanted
    }
}

/// Raises the soft `RLIMIT_NOFILE` to `wanted`, or to the hard limit when
/// that is lower (Salt's `max_open_files`: the soft limit is never
/// lowered, the hard limit never touched). Fails only when the system
/// refuses to read or set the limit.
pub fn raise_open_files_limit(wanted: u64) -> std::io::Result<OpenFilesLimit> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one plain struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let (before, hard) = (lim.rlim_cur, lim.rlim_max);
    // RLIM_INFINITY is u64::MAX: `min` leaves `wanted`.
    let target = wanted.min(hard);
    if target <= before {
        return Ok(OpenFilesLimit {
            before,
            after: before,
            hard,
        });
    }
    let new = libc::rlimit {
        rlim_cur: target,
        rlim_max: hard,
    };
    // SAFETY: setrlimit reads one plain struct we own.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &new) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(OpenFilesLimit {
        before,
        after: target,
        hard,
    })
}

/// [`raise_open_files_limit`] at a daemon's start, with its outcome in the
/// log: a limit capped by the hard one is a warning that says how to lift
/// it (a daemon still runs with what it has). The limit now in force.
pub fn apply_max_open_files(wanted: u64) -> Option<OpenFilesLimit> {
    match raise_open_files_limit(wanted) {
        Ok(l) if l.capped(wanted) => {
            tracing::warn!(
                "open files limited to {} (max_open_files is {wanted}, the hard limit {}): \
                 raise the hard limit (LimitNOFILE= in the systemd unit, or \
                 /etc/security/limits.conf) for a large fleet",
                l.after,
                l.hard
            );
            Some(l)
        }
        Ok(l) => {
            tracing::info!("open files limit {} (was {})", l.after, l.before);
            Some(l)
        }
        Err(e) => {
            tracing::warn!("cannot raise the open files limit to {wanted}: {e}");
            None
        }
    }
}
