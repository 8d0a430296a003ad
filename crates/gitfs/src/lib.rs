//! Salt's git sources for the master: **gitfs** (branches and tags of git
//! remotes served as saltenvs, `fileserver_backend` order) and
//! **git_pillar** (`ext_pillar: - git: ...`).
//!
//! Why the `git` binary and not gix or git2: it is the tool the `git`
//! execution module already runs, it speaks every transport Salt users
//! have (https with credentials, ssh keys with passphrases, `git://`,
//! `file://`) with the system's own ssh and TLS configuration, and it
//! adds nothing to build (libgit2 and gix are large builds on a machine
//! shared by many). It runs only on the fetch path (a background thread
//! every `gitfs_update_interval`, and `halite-run fileserver.update`);
//! reads come from plain directories, one per commit, checked out when
//! the commit was fetched, so a compile never waits for git.
//!
//! - [`config`]: the master's `gitfs_*` / `git_pillar_*` keys and the
//!   per-remote option dicts, read as Salt reads them;
//! - [`repo`]: one remote's cache (`<cachedir>/gitfs/<hash>/`): fetch,
//!   refs, a checked-out tree per commit, the last good state;
//! - [`gitfs`]: the saltenv mapping over the fetched refs, as a backend;
//! - [`backends`]: `fileserver_backend` — gitfs and roots in order, first
//!   match wins — as one [`halite_state::FileClient`];
//! - [`pillar`]: git_pillar as a [`halite_modules::pillar_source::PillarSource`].

pub mod backends;
pub mod config;
pub mod gitfs;
pub mod pillar;
pub mod repo;

pub use backends::Fileserver;
pub use gitfs::GitFs;
