//! The owner and group names `file` states read are remembered only while
//! `/etc/passwd` and `/etc/group` are unchanged: a user or group renamed,
//! added or removed between two states (or two jobs) is seen by the next
//! one. Real `useradd`/`usermod`/`groupadd`/`groupmod` on throwaway
//! accounts (root only; removed by guards).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

mod common;

use std::os::unix::fs::MetadataExt;
use std::process::Command;

use halite_modules::exec::file::meta;
use halite_modules::exec::file::owner_names;
use serde_json::json;

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn run(cmd: &str, args: &[&str]) {
    let out = Command::new(cmd).args(args).output().expect(cmd);
    assert!(
        out.status.success(),
        "{cmd} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Whether `tool` is installed (shadow's tools answer `--help`; their
/// `--version` is an error).
fn has_tool(tool: &str) -> bool {
    Command::new(tool)
        .arg("--help")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Removes the throwaway user and group, under whichever name they have.
struct Accounts(Vec<String>);

impl Drop for Accounts {
    fn drop(&mut self) {
        for name in &self.0 {
            let _ = Command::new("userdel").arg(name).output();
            let _ = Command::new("groupdel").arg(name).output();
        }
    }
}

/// A uid and gid no account uses, from `from` up: the tests of this file
/// run at once, each from its own range, so two never take the same id.
fn free_id(from: u32) -> u32 {
    (from..from + 8_000)
        .find(|&id| {
            nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(id))
                .ok()
                .flatten()
                .is_none()
                && nix::unistd::Group::from_gid(nix::unistd::Gid::from_raw(id))
                    .ok()
                    .flatten()
                    .is_none()
        })
        .expect("a free id")
}

#[test]
fn a_renamed_user_and_group_are_seen_by_the_next_lookup_and_state() {
    if !is_root() || !has_tool("useradd") || !has_tool("groupmod") {
        println!("skipped: needs root, useradd and groupmod");
        return;
    }
    let tag = std::process::id();
    let (old, new) = (format!("hon{tag}a"), format!("hon{tag}b"));
    let _accounts = Accounts(vec![old.clone(), new.clone()]);
    let id = free_id(42_000);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("owned");
    std::fs::write(&path, "x\n").unwrap();
    std::os::unix::fs::chown(&path, Some(id), Some(id)).unwrap();

    // Unknown id: the number, as Salt prints it; remembered as unknown.
    let before = meta::ownership(&path, true).unwrap();
    assert_eq!(
        (before.user.as_str(), before.group.as_str()),
        (&*id.to_string(), &*id.to_string())
    );
    assert!(meta::user_to_uid(&old).is_err());

    // The accounts appear: the next lookups name them.
    let ids = id.to_string();
    run("groupadd", &["-g", &ids, &old]);
    run("useradd", &["-M", "-N", "-u", &ids, "-g", &ids, &old]);
    let named = meta::ownership(&path, true).unwrap();
    assert_eq!(
        (named.user.as_str(), named.group.as_str()),
        (old.as_str(), old.as_str())
    );
    assert_eq!(meta::user_to_uid(&old).unwrap(), id);
    assert_eq!(meta::group_to_gid(&old).unwrap(), id);

    // A file state asking for them: nothing to change.
    let host = common::host();
    let managed = |user: &str| {
        common::state(
            &host,
            "file",
            "managed",
            path.to_str().unwrap(),
            json!({"contents": "x", "user": user, "group": user}),
            false,
        )
    };
    let same = managed(&old);
    assert_eq!(same.result, Some(true), "{}", same.comment);
    assert!(same.changes.is_empty(), "{:?}", same.changes);

    // Renamed between two states (or jobs): the new names are seen, the
    // old ones are gone, and the file is left as it is.
    run("usermod", &["-l", &new, &old]);
    run("groupmod", &["-n", &new, &old]);
    let renamed = meta::ownership(&path, true).unwrap();
    assert_eq!(
        (renamed.user.as_str(), renamed.group.as_str()),
        (new.as_str(), new.as_str())
    );
    assert!(meta::user_to_uid(&old).is_err());
    assert!(meta::group_to_gid(&old).is_err());
    let after = managed(&new);
    assert_eq!(after.result, Some(true), "{}", after.comment);
    assert!(after.changes.is_empty(), "{:?}", after.changes);
    let gone = managed(&old);
    assert_eq!(gone.result, Some(false));
    assert!(
        gone.comment
            .contains(&format!("User {old} is not available")),
        "{}",
        gone.comment
    );
    let md = std::fs::metadata(&path).unwrap();
    assert_eq!((md.uid(), md.gid()), (id, id));

    // A job start forgets everything (names from other NSS sources).
    owner_names::forget_all();
    assert_eq!(owner_names::user_name(id).as_deref(), Some(new.as_str()));
    assert_eq!(owner_names::group_name(id).as_deref(), Some(new.as_str()));
}

/// Within one state's scope `/etc/passwd` is stamped once (issue 25,
/// session 22): a user added meanwhile is not seen until the scope is
/// restamped (as a state does after it writes a file) or the next scope
/// (the next state) opens, which sees it as Salt's fresh lookups would.
#[test]
fn a_scope_stamps_once_and_the_next_state_sees_a_change() {
    if !is_root() || !has_tool("useradd") {
        println!("skipped: needs root and useradd");
        return;
    }
    let name = format!("hos{}", std::process::id());
    let _accounts = Accounts(vec![name.clone()]);
    let id = free_id(50_000);
    let ids = id.to_string();
    {
        let _state = owner_names::stamped_once();
        assert_eq!(owner_names::user_name(id), None);
        run("useradd", &["-M", "-N", "-u", &ids, &name]);
        assert_eq!(owner_names::user_name(id), None, "stamped once in a scope");
        {
            let _helper = owner_names::stamped_once();
            assert_eq!(owner_names::user_name(id), None, "a nested scope joins");
        }
        owner_names::restamp();
        assert_eq!(owner_names::user_name(id).as_deref(), Some(name.as_str()));
    }
    run("userdel", &[&name]);
    let _next = owner_names::stamped_once();
    assert_eq!(
        owner_names::user_name(id),
        None,
        "the next state sees it gone"
    );
}

/// Lookups from many job threads at once, while jobs start (each start
/// forgets every answer): every answer is the system's own, for users and
/// groups alike (an id whose user and group names differ tells the two
/// tables apart). The names are looked up without a lock held across
/// the lookup (issue 25, session 19); what a lookup keeps must still be
/// right.
#[test]
fn lookups_from_many_threads_while_jobs_start_stay_right() {
    let truth = |id: u32| {
        let user = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(id))
            .unwrap()
            .map(|u| u.name);
        let group = nix::unistd::Group::from_gid(nix::unistd::Gid::from_raw(id))
            .unwrap()
            .map(|g| g.name);
        (user, group)
    };
    // root, and an id whose user and group names differ when there is one
    // (not an unused id: the other test of this file adds accounts there).
    let mut ids = vec![0u32];
    ids.extend(
        [65_534]
            .into_iter()
            .chain(1..1_000)
            .find(|&id| matches!(truth(id), (Some(u), Some(g)) if u != g)),
    );
    let expected: Vec<_> = ids.iter().map(|&id| (id, truth(id))).collect();
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                owner_names::forget_all();
                std::thread::yield_now();
            }
        });
        // The forgetting thread stops even when a worker's check fails.
        struct Stop<'a>(&'a std::sync::atomic::AtomicBool);
        impl Drop for Stop<'_> {
            fn drop(&mut self) {
                self.0.store(true, std::sync::atomic::Ordering::Relaxed);
            }
        }
        let _stop = Stop(&stop);
        let workers: Vec<_> = (0..8)
            .map(|_| {
                s.spawn(|| {
                    for _ in 0..500 {
                        for (id, (user, group)) in &expected {
                            assert_eq!(&owner_names::user_name(*id), user, "uid {id}");
                            assert_eq!(&owner_names::group_name(*id), group, "gid {id}");
                            if let Some(user) = user {
                                assert_eq!(owner_names::user_id(user), Some(*id), "{user}");
                            }
                            if let Some(group) = group {
                                assert_eq!(owner_names::group_id(group), Some(*id), "{group}");
                            }
                        }
                    }
                })
            })
            .collect();
        let failed = workers
            .into_iter()
            .map(|w| w.join())
            .filter(Result::is_err)
            .count();
        drop(_stop);
        assert_eq!(failed, 0, "a lookup gave a wrong answer");
    });
}
