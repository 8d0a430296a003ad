//! `git` states and execution functions against real repositories the
//! tests create (file:// remotes and a `git daemon` on 127.0.0.1), with
//! the real `git` binary: tags, branches, a force-pushed history, local
//! modifications, every state applied twice and predicted with test=True.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use halite_modules::{Args, Host};
use halite_state::StateResult;
use halite_test_support::git::{git, ready, Daemon};
use halite_test_support::sshd::{keygen, Sshd, SSHD};
use serde_json::{json, Value};

fn host() -> Host {
    common::host()
}

fn state(host: &Host, fun: &str, name: &str, args: Value, test: bool) -> StateResult {
    common::state(host, "git", fun, name, args, test)
}

fn exec(host: &Host, fun: &str, positional: Vec<Value>, kwargs: Value) -> Result<Value, String> {
    let kwargs = match kwargs {
        Value::Object(m) => m,
        _ => Default::default(),
    };
    host.call(fun, &Args { positional, kwargs })
        .map_err(|e| e.to_string())
}

/// A remote repository with one commit on `main`, a tag `v1` and a
/// branch `dev`, in its own temp dir.
struct Remote {
    dir: tempfile::TempDir,
}

impl Remote {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let r = Remote { dir };
        git(r.dir.path(), &["init", "-q", "-b", "main", "remote"]);
        r.write("f", "one\n");
        r.commit("one");
        git(&r.repo(), &["tag", "v1"]);
        git(&r.repo(), &["branch", "dev"]);
        r
    }
    fn repo(&self) -> PathBuf {
        self.dir.path().join("remote")
    }
    fn url(&self) -> String {
        format!("file://{}", self.repo().display())
    }
    fn write(&self, file: &str, text: &str) {
        std::fs::write(self.repo().join(file), text).unwrap();
    }
    fn commit(&self, msg: &str) -> String {
        git(&self.repo(), &["add", "-A"]);
        git(&self.repo(), &["commit", "-qm", msg]);
        self.head()
    }
    fn head(&self) -> String {
        git(&self.repo(), &["rev-parse", "HEAD"])
    }
    /// A target path beside the remote.
    fn target(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }
}

fn short(sha: &str) -> &str {
    &sha[..7]
}

#[test]
fn latest_predicts_clones_is_idempotent_and_fast_forwards() {
    if !ready() {
        return;
    }
    let host = host();
    let remote = Remote::new();
    let url = remote.url();
    let target = remote.target("work");
    let args = json!({"target": target});
    let first = remote.head();

    let t = state(&host, "latest", &url, args.clone(), true);
    assert_eq!(t.result, None);
    assert_eq!(
        t.comment,
        format!("Repository {url} would be cloned to {target}")
    );
    assert_eq!(t.changes["new"], json!(format!("{url} => {target}")));
    assert!(!Path::new(&target).exists(), "test=True changed nothing");

    let r = state(&host, "latest", &url, args.clone(), false);
    assert_eq!(r.result, Some(true), "{}", r.comment);
    assert_eq!(r.comment, format!("{url} cloned to {target}"));
    assert_eq!(r.changes["new"], json!(format!("{url} => {target}")));
    assert_eq!(r.changes["revision"], json!({"old": null, "new": first}));

    let again = state(&host, "latest", &url, args.clone(), false);
    assert_eq!(again.result, Some(true));
    assert!(again.changes.is_empty(), "{:?}", again.changes);
    assert_eq!(again.comment, format!("Repository {target} is up-to-date"));
    let t = state(&host, "latest", &url, args.clone(), true);
    assert_eq!(t.result, Some(true), "nothing to predict: {}", t.comment);

    remote.write("f", "one\ntwo\n");
    let second = remote.commit("two");
    let t = state(&host, "latest", &url, args.clone(), true);
    assert_eq!(t.result, None);
    assert_eq!(t.changes["revision"], json!({"old": first, "new": second}));
    assert_eq!(
        t.comment,
        format!(
            "Remote 'origin' would be fetched. Repository would be updated from {} to {}.",
            short(&first),
            short(&second)
        )
    );
    let up = state(&host, "latest", &url, args.clone(), false);
    assert_eq!(up.result, Some(true), "{}", up.comment);
    assert_eq!(
        up.comment,
        format!(
            "{url} was fetched, resulting in updated refs. Repository was fast-forwarded to \
             remote HEAD ({}).",
            short(&second)
        )
    );
    assert_eq!(up.changes["revision"], json!({"old": first, "new": second}));
    assert_eq!(
        std::fs::read_to_string(Path::new(&target).join("f")).unwrap(),
        "one\ntwo\n"
    );
    let again = state(&host, "latest", &url, args, false);
    assert!(again.changes.is_empty(), "{:?}", again.changes);
}

#[test]
fn latest_follows_tags_and_branches_and_refuses_an_unknown_rev() {
    if !ready() {
        return;
    }
    let host = host();
    let remote = Remote::new();
    let url = remote.url();
    let v1 = remote.head();
    remote.write("f", "later\n");
    remote.commit("later");

    let tagged = remote.target("tagged");
    let r = state(
        &host,
        "latest",
        &url,
        json!({"target": tagged, "rev": "v1"}),
        false,
    );
    assert_eq!(r.result, Some(true), "{}", r.comment);
    assert_eq!(
        r.comment,
        format!(
            "{url} cloned to {tagged}. Repository was reset to v1 ({}). Tracking branch was unset.",
            short(&v1)
        )
    );
    assert_eq!(r.changes["revision"]["new"], json!(v1));
    let again = state(
        &host,
        "latest",
        &url,
        json!({"target": tagged, "rev": "v1"}),
        false,
    );
    assert!(again.changes.is_empty(), "{}", again.comment);

    let branch = remote.target("branch");
    let args = json!({"target": branch, "rev": "dev", "branch": "dev"});
    let r = state(&host, "latest", &url, args.clone(), false);
    assert_eq!(r.result, Some(true), "{}", r.comment);
    assert_eq!(
        r.comment,
        format!(
            "{url} cloned to {branch}. Branch 'dev' checked out, with origin/dev ({}) as a \
             starting point.",
            short(&v1)
        )
    );
    let h = host.clone();
    assert_eq!(
        exec(&h, "git.current_branch", vec![json!(branch)], json!({})).unwrap(),
        json!("dev")
    );
    let again = state(&host, "latest", &url, args, false);
    assert!(again.changes.is_empty(), "{}", again.comment);
    assert_eq!(again.comment, format!("Repository {branch} is up-to-date"));

    let nope = state(
        &host,
        "latest",
        &url,
        json!({"target": remote.target("nope"), "rev": "nosuchrev"}),
        false,
    );
    assert_eq!(nope.result, Some(false));
    assert_eq!(
        nope.comment,
        "No revision matching 'nosuchrev' exists in the remote repository"
    );
}

#[test]
fn local_changes_need_force_reset_and_remote_changes_resets_only_on_news() {
    if !ready() {
        return;
    }
    let host = host();
    let remote = Remote::new();
    let url = remote.url();
    let target = remote.target("work");
    let first = remote.head();
    state(&host, "latest", &url, json!({"target": target}), false);
    std::fs::write(Path::new(&target).join("f"), "local\n").unwrap();

    let r = state(&host, "latest", &url, json!({"target": target}), false);
    assert_eq!(r.result, Some(true));
    assert_eq!(
        r.comment,
        format!(
            "Repository {target} is up-to-date, but with uncommitted changes. Set \
             'force_reset' to True to purge uncommitted changes."
        )
    );
    // 'remote-changes' keeps local edits while the remote has nothing new.
    let r = state(
        &host,
        "latest",
        &url,
        json!({"target": target, "force_reset": "remote-changes"}),
        false,
    );
    assert!(r.changes.is_empty(), "{}", r.comment);
    assert_eq!(
        std::fs::read_to_string(Path::new(&target).join("f")).unwrap(),
        "local\n"
    );
    let t = state(
        &host,
        "latest",
        &url,
        json!({"target": target, "force_reset": true}),
        true,
    );
    assert_eq!(t.result, None);
    assert_eq!(t.changes["forced update"], json!(true));

    remote.write("g", "two\n");
    let second = remote.commit("two");
    let refused = state(&host, "latest", &url, json!({"target": target}), false);
    assert_eq!(refused.result, Some(false));
    assert_eq!(
        refused.comment,
        format!(
            "Repository would be updated from {} to {}, but there are uncommitted changes. \
             Set 'force_reset' to True (or 'remote-changes') to force this update and \
             discard these changes.",
            short(&first),
            short(&second)
        )
    );
    let reset = state(
        &host,
        "latest",
        &url,
        json!({"target": target, "force_reset": "remote-changes"}),
        false,
    );
    assert_eq!(reset.result, Some(true), "{}", reset.comment);
    assert_eq!(
        reset.comment,
        format!(
            "{url} was fetched, resulting in updated refs. Uncommitted changes were \
             discarded. Repository was fast-forwarded to remote HEAD ({}).",
            short(&second)
        )
    );
    assert_eq!(
        std::fs::read_to_string(Path::new(&target).join("f")).unwrap(),
        "one\n",
        "the local edit was discarded"
    );
    let again = state(&host, "latest", &url, json!({"target": target}), false);
    assert!(again.changes.is_empty(), "{}", again.comment);
}

#[test]
fn a_force_pushed_history_over_git_daemon_needs_force_reset() {
    if !ready() {
        return;
    }
    let host = host();
    let remote = Remote::new();
    let daemon = Daemon::start(remote.dir.path(), "remote");
    let url = daemon.url("remote");
    let target = remote.target("work");
    let args = json!({"target": target});
    let r = state(&host, "latest", &url, args.clone(), false);
    assert_eq!(r.result, Some(true), "{}", r.comment);
    let before = remote.head();

    // Rewrite the remote's history: its main no longer contains ours.
    git(&remote.repo(), &["reset", "-q", "--hard", "HEAD"]);
    git(
        &remote.repo(),
        &["commit", "-q", "--amend", "-m", "rewritten"],
    );
    git(&remote.repo(), &["tag", "v2"]);
    let rewritten = remote.head();
    assert_ne!(before, rewritten);

    let refused = state(&host, "latest", &url, args.clone(), false);
    assert_eq!(refused.result, Some(false));
    assert!(
        refused.comment.starts_with(
            "Fetch failed. Set 'force_fetch' to True to force the fetch if the failure was due \
             to not being able to fast-forward."
        ),
        "{}",
        refused.comment
    );
    let t = state(
        &host,
        "latest",
        &url,
        json!({"target": target, "force_reset": true, "force_fetch": true}),
        true,
    );
    assert_eq!(t.result, None);
    assert_eq!(
        t.changes["revision"],
        json!({"old": before, "new": rewritten})
    );
    // As Salt's, the prediction returns before the tags are compared.
    assert!(t.changes.get("new_tags").is_none(), "{:?}", t.changes);

    let forced = state(
        &host,
        "latest",
        &url,
        json!({"target": target, "force_reset": true, "force_fetch": true}),
        false,
    );
    assert_eq!(forced.result, Some(true), "{}", forced.comment);
    assert_eq!(forced.changes["forced update"], json!(true));
    assert_eq!(
        forced.changes["revision"],
        json!({"old": before, "new": rewritten})
    );
    // The refused fetch already brought tag v2 (git updates what it can),
    // so, as in Salt, only the reset is reported.
    assert_eq!(
        forced.comment,
        format!(
            "Repository was hard-reset to remote HEAD ({})",
            short(&rewritten)
        )
    );
    assert!(forced.changes.get("new_tags").is_none());
    let tags = exec(&host, "git.list_tags", vec![json!(target)], json!({})).unwrap();
    assert_eq!(tags, json!(["v1", "v2"]));
    let again = state(
        &host,
        "latest",
        &url,
        json!({"target": target, "force_reset": true, "force_fetch": true}),
        false,
    );
    assert!(again.changes.is_empty(), "{}", again.comment);

    // A new commit with a new tag: fetched, fast-forwarded, the tag
    // reported as Salt's JSON shows its set.
    remote.write("f", "three\n");
    let third = remote.commit("three");
    git(&remote.repo(), &["tag", "v3"]);
    // origin/main still points before the rewrite (the reset used the
    // commit the refused fetch brought): as in Salt, force_fetch stays.
    let r = state(
        &host,
        "latest",
        &url,
        json!({"target": target, "force_reset": true, "force_fetch": true}),
        false,
    );
    assert_eq!(r.result, Some(true), "{}", r.comment);
    assert_eq!(r.changes["new_tags"], json!("{'v3'}"));
    assert_eq!(
        r.changes["revision"],
        json!({"old": rewritten, "new": third})
    );
    assert_eq!(
        r.comment,
        format!(
            "{url} was fetched, resulting in updated refs. Repository was fast-forwarded to \
             remote HEAD ({}).",
            short(&third)
        )
    );
}

#[test]
fn cloned_and_present_are_idempotent() {
    if !ready() {
        return;
    }
    let host = host();
    let remote = Remote::new();
    let url = remote.url();
    let target = remote.target("cloned");
    let args = json!({"target": target, "branch": "main"});
    let t = state(&host, "cloned", &url, args.clone(), true);
    assert_eq!(t.result, None);
    assert_eq!(
        t.comment,
        format!("{url} would be cloned to {target} with branch 'main'")
    );
    let r = state(&host, "cloned", &url, args.clone(), false);
    assert_eq!(r.result, Some(true), "{}", r.comment);
    assert_eq!(r.changes["new"], json!(format!("{url} => {target}")));
    let again = state(&host, "cloned", &url, args, false);
    assert!(again.changes.is_empty());
    assert_eq!(
        again.comment,
        format!("Repository already exists at {target} and is checked out to branch 'main'")
    );
    let switch = state(
        &host,
        "cloned",
        &url,
        json!({"target": target, "branch": "dev"}),
        false,
    );
    assert_eq!(
        switch.changes["branch"],
        json!({"old": "main", "new": "dev"})
    );
    assert_eq!(switch.comment, "Branch changed to 'dev'");

    let bare = remote.target("bare.git");
    let t = state(&host, "present", &bare, json!({}), true);
    assert_eq!(t.comment, "New bare repository would be created");
    let r = state(&host, "present", &bare, json!({}), false);
    assert_eq!(r.comment, format!("Initialized bare repository in {bare}"));
    assert!(Path::new(&bare).join("HEAD").is_file());
    let again = state(&host, "present", &bare, json!({}), false);
    assert_eq!(again.result, Some(true));
    assert!(again.changes.is_empty());
    assert_eq!(again.comment, "");

    let occupied = remote.target("occupied");
    std::fs::create_dir(&occupied).unwrap();
    std::fs::write(Path::new(&occupied).join("x"), "x").unwrap();
    let refused = state(&host, "present", &occupied, json!({}), false);
    assert_eq!(refused.result, Some(false));
    let forced = state(&host, "present", &occupied, json!({"force": true}), false);
    assert_eq!(forced.changes["forced init"], json!(true));
    assert!(!Path::new(&occupied).join("x").exists());
}

#[test]
fn config_set_and_unset_converge() {
    if !ready() {
        return;
    }
    let host = host();
    let remote = Remote::new();
    let repo = remote.repo().display().to_string();
    let set = |v: Value, test: bool| {
        state(
            &host,
            "config_set",
            "foo.bar",
            json!({"repo": repo, "multivar": v}),
            test,
        )
    };
    let t = set(json!(["a", "b"]), true);
    assert_eq!(t.comment, "'foo.bar' would be added as ['a', 'b']");
    let r = set(json!(["a", "b"]), false);
    assert_eq!(r.comment, "'foo.bar' was added as ['a', 'b']");
    assert_eq!(
        r.changes["foo.bar"],
        json!({"old": null, "new": ["a", "b"]})
    );
    let again = set(json!(["a", "b"]), false);
    assert_eq!(again.comment, "'foo.bar' is already set to ['a', 'b']");
    assert!(again.changes.is_empty());
    assert_eq!(
        exec(
            &host,
            "git.config_get",
            vec![json!("foo.bar")],
            json!({"cwd": repo, "all": true})
        )
        .unwrap(),
        json!(["a", "b"])
    );

    let unset = |all: bool, test: bool| {
        state(
            &host,
            "config_unset",
            "foo.bar",
            json!({"repo": repo, "all": all}),
            test,
        )
    };
    let refused = unset(false, false);
    assert_eq!(
        refused.comment,
        "Multivar(s) matched by the key expression (set 'all' to True to force removal): \
         foo.bar (a, b)"
    );
    let t = unset(true, true);
    assert_eq!(t.comment, "1 key(s) would have value(s) unset");
    let r = unset(true, false);
    assert_eq!(r.result, Some(true), "{}", r.comment);
    assert_eq!(r.comment, "Value(s) successfully unset");
    assert_eq!(r.changes["foo.bar"], json!(["a", "b"]));
    let again = unset(true, false);
    assert_eq!(again.comment, "No matching keys are set");
    assert!(again.changes.is_empty());
}

#[test]
fn exec_functions_read_and_change_a_checkout() {
    if !ready() {
        return;
    }
    let host = host();
    let remote = Remote::new();
    let target = remote.target("work");
    let url = remote.url();
    assert_eq!(
        exec(
            &host,
            "git.clone",
            vec![json!(target), json!(url)],
            json!({})
        )
        .unwrap(),
        json!(true)
    );
    let cwd = json!(target);
    let head = remote.head();
    assert_eq!(
        exec(&host, "git.revision", vec![cwd.clone()], json!({})).unwrap(),
        json!(head)
    );
    assert_eq!(
        exec(
            &host,
            "git.rev_parse",
            vec![cwd.clone(), json!("v1")],
            json!({})
        )
        .unwrap(),
        json!(head)
    );
    assert_eq!(
        exec(&host, "git.describe", vec![cwd.clone()], json!({})).unwrap(),
        json!(short(&head)),
        "describe --always names a commit with only a lightweight tag by its SHA"
    );
    assert_eq!(
        exec(&host, "git.remote_get", vec![cwd.clone()], json!({})).unwrap(),
        json!({"fetch": url, "push": url})
    );
    let refs = exec(&host, "git.ls_remote", vec![cwd.clone()], json!({})).unwrap();
    assert_eq!(refs["refs/tags/v1"], json!(head));
    assert_eq!(refs["refs/heads/dev"], json!(head));
    assert_eq!(
        exec(
            &host,
            "git.list_branches",
            vec![cwd.clone()],
            json!({"remote": true})
        )
        .unwrap(),
        json!(["origin", "origin/dev", "origin/main"]),
        "origin/HEAD is named `origin` by %(refname:short), as in Salt"
    );
    std::fs::write(Path::new(&target).join("f"), "changed\n").unwrap();
    std::fs::write(Path::new(&target).join("new"), "n\n").unwrap();
    assert_eq!(
        exec(&host, "git.status", vec![cwd.clone()], json!({})).unwrap(),
        json!({"modified": ["f"], "untracked": ["new"]})
    );
    let err = exec(
        &host,
        "git.rev_parse",
        vec![cwd.clone(), json!("nosuch")],
        json!({}),
    )
    .unwrap_err();
    assert!(
        err.starts_with("Command 'git rev-parse nosuch' failed: "),
        "{err}"
    );
    let set = exec(
        &host,
        "git.remote_set",
        vec![cwd.clone(), json!("https://example.invalid/r.git")],
        json!({"https_user": "me", "https_pass": "s3cr:t"}),
    )
    .unwrap();
    assert_eq!(
        set["fetch"],
        json!("https://<redacted>@example.invalid/r.git")
    );
    let raw = exec(
        &host,
        "git.remotes",
        vec![cwd],
        json!({"redact_auth": false}),
    )
    .unwrap();
    assert_eq!(
        raw["origin"]["fetch"],
        json!("https://me:s3cr%3At@example.invalid/r.git")
    );
    let refused = exec(
        &host,
        "git.remote_set",
        vec![json!(target), json!("http://example.invalid/r.git")],
        json!({"https_user": "me"}),
    )
    .unwrap_err();
    assert_eq!(refused, "Basic Auth only supported for HTTPS");
}

#[test]
fn a_missing_identity_is_reported_as_salt_does() {
    if !ready() {
        return;
    }
    let host = host();
    let remote = Remote::new();
    let r = state(
        &host,
        "latest",
        &remote.url(),
        json!({"target": remote.target("w"), "identity": "/nonexistent/id_rsa"}),
        false,
    );
    assert_eq!(r.result, Some(false));
    assert_eq!(
        r.comment,
        "Failed to check remote refs: Unable to authenticate using identity file:\n\nThe \
         following identity file(s) were not found: /nonexistent/id_rsa"
    );
    let rel = state(
        &host,
        "latest",
        &remote.url(),
        json!({"target": remote.target("w"), "identity": "id_rsa"}),
        false,
    );
    assert_eq!(rel.comment, "identity 'id_rsa' is not an absolute path");
}

/// A user created for one test (with a home), removed afterwards.
struct TestUser(String);

impl TestUser {
    fn new() -> Option<Self> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            println!("skipped: needs root to create a test user");
            return None;
        }
        Self::named(format!("hgit{}", std::process::id() % 100000))
    }

    /// A user called `name` (root only).
    fn named(name: String) -> Option<Self> {
        let ok = Command::new("useradd")
            .args(["-m", "-s", "/bin/sh", &name])
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        assert!(ok, "useradd {name}");
        Some(TestUser(name))
    }
}

impl Drop for TestUser {
    fn drop(&mut self) {
        let _ = Command::new("userdel").args(["-r", "-f", &self.0]).output();
    }
}

#[test]
fn latest_runs_git_as_the_given_user() {
    if !ready() {
        return;
    }
    let Some(user) = TestUser::new() else {
        return;
    };
    let host = host();
    let remote = Remote::new();
    let daemon = Daemon::start(remote.dir.path(), "remote");
    let url = daemon.url("remote");
    let home = format!("/home/{}", user.0);
    let target = format!("{home}/checkout");
    let args = json!({"target": target, "user": user.0});
    let r = state(&host, "latest", &url, args.clone(), false);
    assert_eq!(r.result, Some(true), "{}", r.comment);
    assert_eq!(r.comment, format!("{url} cloned to {target}"));
    use std::os::unix::fs::MetadataExt;
    let owner = std::fs::metadata(Path::new(&target).join("f"))
        .unwrap()
        .uid();
    let uid = nix::unistd::User::from_name(&user.0)
        .unwrap()
        .unwrap()
        .uid
        .as_raw();
    assert_eq!(owner, uid, "the checkout belongs to the user");
    let again = state(&host, "latest", &url, args.clone(), false);
    assert!(again.changes.is_empty(), "{}", again.comment);
    // A relative cwd is the user's home, as Salt's _expand_path.
    assert_eq!(
        exec(
            &host,
            "git.current_branch",
            vec![json!("checkout")],
            json!({"user": user.0})
        )
        .unwrap(),
        json!("main")
    );
}

#[test]
fn detached_checks_out_a_rev_once() {
    if !ready() {
        return;
    }
    let host = host();
    let remote = Remote::new();
    let url = remote.url();
    let v1 = remote.head();
    remote.write("f", "two\n");
    let two = remote.commit("two");
    let target = remote.target("detached");
    let args = json!({"target": target, "rev": "v1"});
    let t = state(&host, "detached", &url, args.clone(), true);
    assert_eq!(t.result, None);
    assert_eq!(
        t.comment,
        format!("Repository {url} would be cloned to {target}")
    );
    let r = state(&host, "detached", &url, args.clone(), false);
    assert_eq!(r.result, Some(true), "{}", r.comment);
    assert_eq!(r.changes["HEAD"], json!({"old": null, "new": v1}));
    let again = state(&host, "detached", &url, args, false);
    assert!(again.changes.is_empty());
    assert_eq!(again.comment, "Already checked out at correct revision");
    let hash = json!({"target": target, "rev": two});
    let t = state(&host, "detached", &url, hash.clone(), true);
    assert_eq!(t.changes["HEAD"], json!({"old": v1, "new": two}));
    let moved = state(&host, "detached", &url, hash, false);
    assert_eq!(
        moved.comment,
        format!("Commit ID {two} was checked out at {target}")
    );
    assert_eq!(
        exec(&host, "git.current_branch", vec![json!(target)], json!({})).unwrap(),
        json!("HEAD"),
        "HEAD is detached"
    );
}

#[test]
fn latest_clones_over_ssh_with_an_identity_as_another_user() {
    if !ready() {
        return;
    }
    if !Path::new(SSHD).exists() {
        println!("skipped: sshd is missing (openssh-server, scripts/install-deps.sh)");
        return;
    }
    let Some(user) = TestUser::named(format!("hgitssh{}", std::process::id() % 10000)) else {
        return;
    };
    let found = nix::unistd::User::from_name(&user.0).unwrap().unwrap();
    let remote = Remote::new();
    let bare = remote.target("bare.git");
    git(
        remote.dir.path(),
        &[
            "clone",
            "-q",
            "--bare",
            &remote.repo().display().to_string(),
            &bare,
        ],
    );
    let keys = tempfile::tempdir().unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(keys.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let identity = keys.path().join("id_test");
    keygen(&identity);
    nix::unistd::chown(&identity, Some(found.uid), None).unwrap();
    let work = keys.path().join("work");
    std::fs::create_dir(&work).unwrap();
    nix::unistd::chown(&work, Some(found.uid), Some(found.gid)).unwrap();
    let sshd = Sshd::authorizing(keys.path(), &identity).unwrap();
    let url = sshd.url(Path::new(&bare));
    let target = work.join("clone").display().to_string();
    let args =
        json!({"target": target, "identity": identity.display().to_string(), "user": user.0});

    let r = state(&host(), "latest", &url, args.clone(), false);
    assert_eq!(r.result, Some(true), "{}", r.comment);
    assert_eq!(
        r.changes["revision"],
        json!({"old": null, "new": remote.head()}),
        "{:?}",
        r.changes
    );
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(work.join("clone/f")).unwrap();
    assert_eq!(meta.uid(), found.uid.as_raw(), "cloned as the user");
    let again = state(&host(), "latest", &url, args, false);
    assert_eq!(again.result, Some(true), "{}", again.comment);
    assert!(again.changes.is_empty(), "{:?}", again.changes);
}
