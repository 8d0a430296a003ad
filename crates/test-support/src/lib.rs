//! Helpers the tests of several crates share, so each setup exists once:
//! [`git`] (the `git` binary with fixed identities, a work repository and
//! its bare remote, a `git daemon` on 127.0.0.1) and [`sshd`] (an ssh
//! server of the test's own on 127.0.0.1). A dev-dependency only.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test support: a helper that cannot set up panics, and a panic is a failed test"
)]

pub mod git;
pub mod sshd;
