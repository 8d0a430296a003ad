//! User and group names by id (and ids by name), remembered while
//! `/etc/passwd` and `/etc/group` are unchanged (issue 25).
//!
//! Every `file.managed` state reads its file's owner and group twice
//! (before and after enforcing them), and each `getpwuid`/`getgrgid` of
//! glibc opens and parses the whole database file: a 1,000-state highstate
//! with 50 files paid ~200 of them per job. The answers are kept here,
//! keyed by the database file's identity (device, inode, size, mtime,
//! ctime), so a user or group added, renamed or removed (by `useradd`, a
//! `user.present` state earlier in the same job, or an edit) is seen by the
//! next lookup. Names that come from other NSS sources (LDAP, systemd's
//! dynamic users) cannot be seen changing that way: [`forget_all`] is
//! called when a job starts, so those are at most one job old (each
//! lookup of Salt's minion is fresh; within one job halite keeps them).

use std::collections::HashMap;
use std::path::Path;
use std::sync::{LazyLock, Mutex, MutexGuard, PoisonError};

use nix::unistd::{Gid, Group, Uid, User};

use super::meta::FileStamp;

/// The user database glibc's `files` source reads.
const PASSWD: &str = "/etc/passwd";
/// The group database glibc's `files` source reads.
const GROUP: &str = "/etc/group";

/// What identifies one version of a database file (`None`: it is missing).
type Stamp = Option<FileStamp>;

/// The stamp of `path` now.
fn stamp(path: &Path) -> Stamp {
    FileStamp::of(path)
}

/// Answers of one database, valid while its file has `stamp`.
#[derive(Default)]
struct Table {
    stamp: Stamp,
    by_id: HashMap<u32, Option<String>>,
    by_name: HashMap<String, Option<u32>>,
}

impl Table {
    /// The table, emptied first when the file's stamp is not the one its
    /// answers were read under.
    fn fresh(&mut self, file: &str) -> &mut Self {
        let now = stamp(Path::new(file));
        if now != self.stamp {
            self.by_id.clear();
            self.by_name.clear();
            self.stamp = now;
        }
        self
    }
}

/// Both databases' remembered answers.
#[derive(Default)]
struct Names {
    users: Table,
    groups: Table,
}

/// The process's remembered answers (a poisoned lock only ever held whole
/// maps, so its contents are still usable).
fn names() -> MutexGuard<'static, Names> {
    static NAMES: LazyLock<Mutex<Names>> = LazyLock::new(Mutex::default);
    NAMES.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Forgets every remembered answer (a new job starts: names from NSS
/// sources other than the files are looked up again).
pub fn forget_all() {
    let mut n = names();
    *n = Names::default();
}

/// The name of uid `uid` (`None`: no such user).
pub fn user_name(uid: u32) -> Option<String> {
    let mut n = names();
    let table = n.users.fresh(PASSWD);
    if let Some(hit) = table.by_id.get(&uid) {
        return hit.clone();
    }
    let found = User::from_uid(Uid::from_raw(uid))
        .ok()
        .flatten()
        .map(|u| u.name);
    table.by_id.insert(uid, found.clone());
    found
}

/// The name of gid `gid` (`None`: no such group).
pub fn group_name(gid: u32) -> Option<String> {
    let mut n = names();
    let table = n.groups.fresh(GROUP);
    if let Some(hit) = table.by_id.get(&gid) {
        return hit.clone();
    }
    let found = Group::from_gid(Gid::from_raw(gid))
        .ok()
        .flatten()
        .map(|g| g.name);
    table.by_id.insert(gid, found.clone());
    found
}

/// The uid of user `name` (`None`: no such user).
pub fn user_id(name: &str) -> Option<u32> {
    let mut n = names();
    let table = n.users.fresh(PASSWD);
    if let Some(hit) = table.by_name.get(name) {
        return *hit;
    }
    let found = User::from_name(name).ok().flatten().map(|u| u.uid.as_raw());
    table.by_name.insert(name.to_string(), found);
    found
}

/// The gid of group `name` (`None`: no such group).
pub fn group_id(name: &str) -> Option<u32> {
    let mut n = names();
    let table = n.groups.fresh(GROUP);
    if let Some(hit) = table.by_name.get(name) {
        return *hit;
    }
    let found = Group::from_name(name)
        .ok()
        .flatten()
        .map(|g| g.gid.as_raw());
    table.by_name.insert(name.to_string(), found);
    found
}
