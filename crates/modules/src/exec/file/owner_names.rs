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
//!
//! Within one state the two files are stamped once, not once per lookup
//! (issue 25, session 22: a warm `file.managed` with an owner stamped each
//! file four to six times): a state opens a [`StampedOnce`] scope, and a
//! state that writes a file (which may be `/etc/passwd` itself) calls
//! [`restamp`] after it. A change made by another state, or between two
//! states, is seen by the next state, as Salt's fresh lookups see it.

use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::Hash;
use std::marker::PhantomData;
use std::path::Path;
use std::sync::{LazyLock, PoisonError, RwLock};

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

/// The stamps of this thread's open [`StampedOnce`] scope, by [`Db`]
/// (`None` inside: not stamped yet in this scope).
type ScopeStamps = [Option<Stamp>; 2];

thread_local! {
    /// The innermost [`StampedOnce`] scope open on this thread, if any.
    static SCOPE: RefCell<Option<ScopeStamps>> = const { RefCell::new(None) };
}

/// While it lives, the lookups of this thread stamp `/etc/passwd` and
/// `/etc/group` at most once each (one state's lookups: its owner
/// checked, the file's owner read before and after enforcing it). Not
/// `Send`: a scope is its thread's. A scope opened inside another one
/// (a helper of the state that opens its own) is part of it.
pub struct StampedOnce {
    /// Whether this guard opened the scope (and closes it).
    opened: bool,
    _thread: PhantomData<*const ()>,
}

/// Opens a [`StampedOnce`] scope on this thread (one state's lookups), or
/// joins the one already open.
pub fn stamped_once() -> StampedOnce {
    let opened = SCOPE.with_borrow_mut(|s| {
        if s.is_some() {
            return false;
        }
        *s = Some([None, None]);
        true
    });
    StampedOnce {
        opened,
        _thread: PhantomData,
    }
}

impl Drop for StampedOnce {
    fn drop(&mut self) {
        if self.opened {
            SCOPE.with_borrow_mut(|s| *s = None);
        }
    }
}

/// The open scope's stamps are dropped: the next lookup stamps the files
/// again (a state wrote a file, which may be one of them, or ran a
/// command that may have changed them).
pub fn restamp() {
    SCOPE.with_borrow_mut(|s| {
        if let Some(stamps) = s {
            *stamps = [None, None];
        }
    });
}

/// The stamp of `db`'s file for a lookup: the one taken earlier in this
/// thread's open scope, else taken now (and kept by the scope).
fn stamp_for(db: Db) -> Stamp {
    SCOPE.with_borrow_mut(|s| match s {
        Some(stamps) => *stamps[db.index()].get_or_insert_with(|| stamp(Path::new(db.file()))),
        None => stamp(Path::new(db.file())),
    })
}

/// Answers of one database, valid while its file has `stamp`.
#[derive(Default)]
struct Table {
    stamp: Stamp,
    by_id: HashMap<u32, Option<String>>,
    by_name: HashMap<String, Option<u32>>,
}

impl Table {
    /// The table, emptied first when the file's stamp is not `now`, the
    /// one its answers were read under.
    fn fresh(&mut self, now: Stamp) -> &mut Self {
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
    /// Bumped by [`forget_all`]: an answer looked up before it is not kept.
    generation: u64,
}

/// The process's remembered answers (a poisoned lock only ever held whole
/// maps, so its contents are still usable).
///
/// Read-mostly, and never held across a system call (issue 25, session
/// 19): a swarm's 64 job threads each look up ~200 names per highstate,
/// and with one mutex held across the database's `stat` and glibc's
/// lookup, a third of the job threads of a fleet run sat waiting for it
/// (`gdb` on the swarm during a warm apply: 22 of 64 in
/// `Mutex::lock_contended` under `user_name`/`group_name`/`forget_all`).
/// Hits now share a read lock; the `stat` and the lookup run unlocked, and
/// only a miss's insertion takes the write lock.
static NAMES: LazyLock<RwLock<Names>> = LazyLock::new(RwLock::default);

/// Which database a lookup reads.
#[derive(Clone, Copy)]
enum Db {
    Users,
    Groups,
}

impl Db {
    fn file(self) -> &'static str {
        match self {
            Db::Users => PASSWD,
            Db::Groups => GROUP,
        }
    }

    fn index(self) -> usize {
        match self {
            Db::Users => 0,
            Db::Groups => 1,
        }
    }

    fn table(self, names: &Names) -> &Table {
        match self {
            Db::Users => &names.users,
            Db::Groups => &names.groups,
        }
    }

    fn table_mut(self, names: &mut Names) -> &mut Table {
        match self {
            Db::Users => &mut names.users,
            Db::Groups => &mut names.groups,
        }
    }
}

/// The answer for `key` in `db`: remembered while the database file's
/// stamp is the one it was looked up under, else `resolve`d (without the
/// lock held) and remembered, unless [`forget_all`] ran meanwhile.
fn remembered<K, V>(
    db: Db,
    map: fn(&Table) -> &HashMap<K, V>,
    map_mut: fn(&mut Table) -> &mut HashMap<K, V>,
    key: &K,
    resolve: impl FnOnce() -> V,
) -> V
where
    K: Eq + Hash + Clone,
    V: Clone,
{
    // Stamped before the lookup: an answer is never kept under a stamp
    // older than the file it was read from.
    let now = stamp_for(db);
    let generation = {
        let names = NAMES.read().unwrap_or_else(PoisonError::into_inner);
        let table = db.table(&names);
        if table.stamp == now {
            if let Some(hit) = map(table).get(key) {
                return hit.clone();
            }
        }
        names.generation
    };
    let found = resolve();
    let mut names = NAMES.write().unwrap_or_else(PoisonError::into_inner);
    if names.generation == generation {
        let table = db.table_mut(&mut names).fresh(now);
        map_mut(table).insert(key.clone(), found.clone());
    }
    found
}

/// Forgets every remembered answer (a new job starts: names from NSS
/// sources other than the files are looked up again).
pub fn forget_all() {
    let mut names = NAMES.write().unwrap_or_else(PoisonError::into_inner);
    let generation = names.generation.wrapping_add(1);
    *names = Names {
        generation,
        ..Names::default()
    };
}

/// The name of uid `uid` (`None`: no such user).
pub fn user_name(uid: u32) -> Option<String> {
    remembered(
        Db::Users,
        |t| &t.by_id,
        |t| &mut t.by_id,
        &uid,
        || {
            User::from_uid(Uid::from_raw(uid))
                .ok()
                .flatten()
                .map(|u| u.name)
        },
    )
}

/// The name of gid `gid` (`None`: no such group).
pub fn group_name(gid: u32) -> Option<String> {
    remembered(
        Db::Groups,
        |t| &t.by_id,
        |t| &mut t.by_id,
        &gid,
        || {
            Group::from_gid(Gid::from_raw(gid))
                .ok()
                .flatten()
                .map(|g| g.name)
        },
    )
}

/// The uid of user `name` (`None`: no such user).
pub fn user_id(name: &str) -> Option<u32> {
    remembered(
        Db::Users,
        |t| &t.by_name,
        |t| &mut t.by_name,
        &name.to_string(),
        || User::from_name(name).ok().flatten().map(|u| u.uid.as_raw()),
    )
}

/// The gid of group `name` (`None`: no such group).
pub fn group_id(name: &str) -> Option<u32> {
    remembered(
        Db::Groups,
        |t| &t.by_name,
        |t| &mut t.by_name,
        &name.to_string(),
        || {
            Group::from_name(name)
                .ok()
                .flatten()
                .map(|g| g.gid.as_raw())
        },
    )
}
