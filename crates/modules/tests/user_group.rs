//! `user` and `group` states and execution functions against the real
//! account database, as root, with throwaway `halite-t-*` names that a
//! guard removes even when an assertion fails.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

mod common;

use std::path::Path;
use std::process::Command;

use halite_modules::{Args, Host};
use halite_state::{LowChunk, StateCall, StateResult};
use serde_json::{json, Value};

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

macro_rules! require_root {
    () => {
        if !is_root() {
            println!("skipped: needs root to create users and groups");
            return;
        }
    };
}

/// Removes the users and groups a test created, whatever happens.
struct Cleanup {
    users: Vec<String>,
    groups: Vec<String>,
    dirs: Vec<String>,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        for u in &self.users {
            let _ = Command::new("userdel").args(["-r", "-f", u]).output();
        }
        for g in &self.groups {
            let _ = Command::new("groupdel").arg(g).output();
        }
        for d in &self.dirs {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

fn unique(tag: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("halite-t-{tag}{:x}", (nanos ^ std::process::id()) & 0xfffff)
}

/// An id free as both uid and gid, starting at `from`.
fn free_id(from: u32) -> u32 {
    (from..from + 5000)
        .find(|id| {
            let s = id.to_string();
            let taken = |db: &str| {
                Command::new("getent")
                    .args([db, &s])
                    .output()
                    .map(|o| o.status.success())
                    .unwrap_or(true)
            };
            !taken("passwd") && !taken("group")
        })
        .unwrap_or(from)
}

fn host() -> Host {
    common::host()
}

fn state(host: &Host, module: &str, fun: &str, name: &str, args: Value, test: bool) -> StateResult {
    let mut chunk = serde_json::Map::new();
    chunk.insert("state".into(), json!(module));
    chunk.insert("name".into(), json!(name));
    chunk.insert("__id__".into(), json!(name));
    if let Value::Object(extra) = args {
        chunk.extend(extra);
    }
    chunk.insert("fun".into(), json!(fun));
    let chunk = LowChunk::from(chunk);
    let call = StateCall {
        chunk: &chunk,
        test,
        env: host,
        sfun: None,
        reqs: None,
    };
    let module = host
        .states
        .get(module)
        .unwrap_or_else(|| panic!("state module {module} is registered"));
    module
        .call(fun, &call)
        .unwrap_or_else(|e| panic!("{fun} returned an error: {e}"))
}

fn exec(host: &Host, fun: &str, positional: Vec<Value>) -> Value {
    host.call(
        fun,
        &Args {
            positional,
            kwargs: Default::default(),
        },
    )
    .unwrap_or_else(|e| panic!("{fun}: {e}"))
}

#[test]
fn group_present_creates_updates_and_absent_removes() {
    require_root!();
    let host = host();
    let group = unique("g");
    let member = unique("m");
    let mut guard = Cleanup {
        users: vec![member.clone()],
        groups: vec![group.clone(), member.clone()],
        dirs: vec![],
    };
    let gid = free_id(47100);
    assert!(Command::new("useradd")
        .args(["-M", &member])
        .status()
        .is_ok_and(|s| s.success()));

    let r = state(&host, "group", "present", &group, json!({"gid": gid}), true);
    assert_eq!(
        (r.result, r.comment.as_str()),
        (None, format!("Group {group} set to be added").as_str())
    );
    assert!(exec(&host, "group.info", vec![json!(group)])
        .as_object()
        .is_some_and(|m| m.is_empty()));

    let r = state(
        &host,
        "group",
        "present",
        &group,
        json!({"gid": gid}),
        false,
    );
    assert_eq!(r.result, Some(true), "{}", r.comment);
    assert_eq!(r.comment, format!("New group {group} created"));
    assert_eq!(
        serde_json::Value::Object(r.changes),
        json!({"name": group, "passwd": "x", "gid": gid, "members": []})
    );

    let r = state(
        &host,
        "group",
        "present",
        &group,
        json!({"gid": gid}),
        false,
    );
    assert_eq!(
        (r.result, r.comment.clone()),
        (
            Some(true),
            format!("Group {group} is present and up to date")
        )
    );
    assert!(r.changes.is_empty());

    let args = json!({"gid": gid, "members": [member]});
    let r = state(&host, "group", "present", &group, args.clone(), true);
    assert_eq!(r.result, None);
    assert_eq!(
        r.comment,
        format!("The following group attributes are set to be changed:\nmembers: ['{member}']\n")
    );
    let r = state(&host, "group", "present", &group, args.clone(), false);
    assert_eq!(r.result, Some(true), "{}", r.comment);
    assert_eq!(
        serde_json::Value::Object(r.changes),
        json!({"Final": "All changes applied successfully"})
    );
    let r = state(
        &host,
        "group",
        "present",
        &group,
        json!({"delusers": [member]}),
        false,
    );
    assert_eq!(
        r.comment,
        format!("The following group attributes are set to be changed:\ndelusers: ['{member}']\n")
    );
    assert_eq!(
        exec(&host, "group.info", vec![json!(group)])["members"],
        json!([])
    );
    let r = state(
        &host,
        "group",
        "present",
        &group,
        json!({"addusers": [member]}),
        false,
    );
    assert_eq!(r.result, Some(true), "{}", r.comment);
    assert_eq!(
        exec(&host, "group.info", vec![json!(group)])["members"],
        json!([member])
    );
    let r = state(
        &host,
        "group",
        "present",
        &group,
        json!({"addusers": [member], "members": [member]}),
        false,
    );
    assert_eq!(
        r.result, None,
        "members with addusers is refused as in Salt"
    );
    assert_eq!(
        exec(&host, "group.members", vec![json!(group), json!("")]),
        json!(true)
    );
    assert_eq!(
        exec(&host, "group.adduser", vec![json!(group), json!(member)]),
        json!(true)
    );
    assert_eq!(
        exec(&host, "group.info", vec![json!(group)])["members"],
        json!([member])
    );
    assert_eq!(
        exec(&host, "group.deluser", vec![json!(group), json!(member)]),
        json!(true)
    );
    assert_eq!(
        exec(&host, "group.info", vec![json!(group)])["members"],
        json!([])
    );
    assert!(exec(&host, "group.getent", vec![])
        .as_array()
        .is_some_and(|all| all.iter().any(|g| g["name"] == json!(group))));

    let r = state(
        &host,
        "group",
        "present",
        &format!("{group}x"),
        json!({"gid": gid}),
        false,
    );
    assert_eq!(r.result, Some(false));
    assert_eq!(
        r.comment,
        format!("Group {group}x is not present but gid {gid} is already taken by group {group}")
    );

    let r = state(&host, "group", "absent", &group, json!({}), true);
    assert_eq!(
        (r.result, r.comment.clone()),
        (None, format!("Group {group} is set for removal"))
    );
    let r = state(&host, "group", "absent", &group, json!({}), false);
    assert_eq!(
        (r.result, r.comment.clone()),
        (Some(true), format!("Removed group {group}"))
    );
    assert_eq!(
        serde_json::Value::Object(r.changes),
        json!({group.clone(): ""})
    );
    let r = state(&host, "group", "absent", &group, json!({}), false);
    assert_eq!(
        (r.result, r.comment.clone()),
        (Some(true), "Group not present".to_string())
    );
    guard.groups.retain(|g| *g != group);
}

#[test]
fn user_present_creates_with_every_field_then_updates_and_absent_purges() {
    require_root!();
    let host = host();
    let user = unique("u");
    let group = unique("ug");
    let home = format!("/tmp/{user}-home");
    let _guard = Cleanup {
        users: vec![user.clone()],
        groups: vec![group.clone(), user.clone()],
        dirs: vec![home.clone()],
    };
    let id = free_id(47200);
    let r = state(&host, "group", "present", &group, json!({"gid": id}), false);
    assert_eq!(r.result, Some(true), "{}", r.comment);

    let args = json!({
        "uid": id, "gid": id, "fullname": "Test User", "roomnumber": "12", "shell": "/bin/sh",
        "home": home, "groups": [group], "password": "$6$abc$xyz",
    });
    let r = state(&host, "user", "present", &user, args.clone(), true);
    assert_eq!(
        (r.result, r.comment.clone()),
        (None, format!("User {user} set to be added"))
    );
    assert!(!Path::new(&home).exists());

    let r = state(&host, "user", "present", &user, args.clone(), false);
    assert_eq!(r.result, Some(true), "{}", r.comment);
    assert_eq!(r.comment, format!("New user {user} created"));
    // Same keys, order and values as Salt 3008.5 reports for this SLS.
    assert_eq!(
        serde_json::to_string(&r.changes).unwrap_or_default(),
        serde_json::to_string(&json!({
            "gid": id, "groups": [group], "home": home, "name": user, "passwd": "x", "shell": "/bin/sh",
            "uid": id, "fullname": "Test User", "roomnumber": "12", "workphone": "", "homephone": "",
            "other": "", "password": "XXX-REDACTED-XXX",
        }))
        .unwrap_or_default()
    );
    assert!(
        Path::new(&home).is_dir(),
        "createhome made the home directory"
    );
    let shadow = std::fs::read_to_string("/etc/shadow").unwrap_or_default();
    assert!(
        shadow
            .lines()
            .any(|l| l.starts_with(&format!("{user}:$6$abc$xyz:"))),
        "password hash stored"
    );

    let r = state(&host, "user", "present", &user, args, false);
    assert_eq!(
        (r.result, r.comment.clone()),
        (Some(true), format!("User {user} is present and up to date")),
        "{:?}",
        r.changes
    );

    let update = json!({
        "uid": id, "gid": id, "fullname": "Test User2", "workphone": "555", "shell": "/bin/bash",
        "home": home, "groups": [],
    });
    let r = state(&host, "user", "present", &user, update.clone(), true);
    assert_eq!(r.result, None);
    assert_eq!(r.comment, "The following user attributes are set to be changed:\nshell: /bin/bash\nfullname: Test User2\nworkphone: 555\n");
    let r = state(&host, "user", "present", &user, update.clone(), false);
    assert_eq!(
        (r.result, r.comment.clone()),
        (Some(true), format!("Updated user {user}"))
    );
    assert_eq!(
        serde_json::Value::Object(r.changes),
        json!({"shell": "/bin/bash", "fullname": "Test User2", "workphone": "555"})
    );
    let info = exec(&host, "user.info", vec![json!(user)]);
    assert_eq!(info["shell"], "/bin/bash");
    assert_eq!(info["workphone"], "555");
    assert_eq!(
        info["groups"],
        json!([group]),
        "the primary group is listed, as Salt lists it"
    );

    // Dropping the supplementary group: remove_groups defaults to True.
    let other = unique("o");
    let mut g2 = Cleanup {
        users: vec![],
        groups: vec![other.clone()],
        dirs: vec![],
    };
    assert_eq!(exec(&host, "group.add", vec![json!(other)]), json!(true));
    let r = state(
        &host,
        "user",
        "present",
        &user,
        json!({"groups": [other]}),
        false,
    );
    assert_eq!(r.result, Some(true), "{}", r.comment);
    assert_eq!(
        serde_json::Value::Object(r.changes),
        json!({"groups": [other, group]})
    );
    let r = state(
        &host,
        "user",
        "present",
        &user,
        json!({"groups": []}),
        false,
    );
    assert_eq!(
        serde_json::Value::Object(r.changes),
        json!({"groups": [group]})
    );

    let r = state(&host, "user", "present", &user, json!({"gid": 0}), false);
    assert_eq!(r.result, Some(false));
    assert_eq!(
        r.comment,
        format!("Encountered error checking for needed changes. Additional info follows:\n\n- Changing gid ({id} -> 0) not permitted, set allow_gid_change to True to force this change. Note that this will not change file ownership.")
    );
    let r = state(
        &host,
        "user",
        "present",
        &user,
        json!({"groups": ["halite-t-nosuchgroup"]}),
        false,
    );
    assert_eq!(
        (r.result, r.comment.clone()),
        (
            Some(false),
            "The following group(s) are not present: halite-t-nosuchgroup".to_string()
        )
    );
    let r = state(
        &host,
        "user",
        "present",
        &user,
        json!({"fullname": "a,b"}),
        false,
    );
    assert_eq!(
        (r.result, r.comment.clone()),
        (Some(false), "Unsupported char ',' in a,b".to_string())
    );

    assert!(exec(&host, "user.list_users", vec![])
        .as_array()
        .is_some_and(|a| a.contains(&json!(user))));
    assert_eq!(
        exec(&host, "user.primary_group", vec![json!(user)]),
        json!(group)
    );
    assert_eq!(
        exec(&host, "user.chshell", vec![json!(user), json!("/bin/sh")]),
        json!(true)
    );
    assert_eq!(
        exec(
            &host,
            "user.chfullname",
            vec![json!(user), json!("Renamed")]
        ),
        json!(true)
    );
    let info = exec(&host, "user.info", vec![json!(user)]);
    assert_eq!(
        (
            info["shell"].clone(),
            info["fullname"].clone(),
            info["workphone"].clone()
        ),
        (json!("/bin/sh"), json!("Renamed"), json!("555"))
    );

    let r = state(&host, "user", "absent", &user, json!({"purge": true}), true);
    assert_eq!(
        (r.result, r.comment.clone()),
        (None, format!("User {user} set for removal"))
    );
    let r = state(
        &host,
        "user",
        "absent",
        &user,
        json!({"purge": true}),
        false,
    );
    assert_eq!(
        (r.result, r.comment.clone()),
        (Some(true), format!("Removed user {user}"))
    );
    assert_eq!(
        serde_json::Value::Object(r.changes),
        json!({user.clone(): "removed"})
    );
    assert!(
        !Path::new(&home).exists(),
        "purge removed the home directory"
    );
    let r = state(&host, "user", "absent", &user, json!({}), false);
    assert_eq!(
        (r.result, r.comment.clone()),
        (Some(true), format!("User {user} is not present"))
    );
    g2.groups.push(group);
}

#[test]
fn user_absent_reports_the_private_group_userdel_removes() {
    require_root!();
    let host = host();
    let user = unique("p");
    let _guard = Cleanup {
        users: vec![user.clone()],
        groups: vec![user.clone()],
        dirs: vec![],
    };
    let r = state(
        &host,
        "user",
        "present",
        &user,
        json!({"usergroup": true, "createhome": false}),
        false,
    );
    assert_eq!(r.result, Some(true), "{}", r.comment);
    assert_eq!(
        r.changes["home"], "",
        "createhome: False reports an empty home as Salt does"
    );
    assert_eq!(
        exec(&host, "user.primary_group", vec![json!(user)]),
        json!(user)
    );
    let r = state(&host, "user", "absent", &user, json!({}), false);
    assert_eq!(r.result, Some(true), "{}", r.comment);
    assert_eq!(
        serde_json::Value::Object(r.changes),
        json!({format!("{user} group"): "removed", user.clone(): "removed"})
    );
}

/// Salt's `salt-call`, from the one helper every comparison with Salt
/// uses (`halite-salt-oracle`); `None` after printing why it is absent.
fn salt_call_bin(test: &str) -> Option<std::path::PathBuf> {
    halite_salt_oracle::Salt::for_test(test).map(|s| s.salt_call())
}

/// One SLS step: `(id/name, "module.fun", args)`, run in order.
type Step = Vec<(String, &'static str, Value)>;

/// The SLS text for a step (JSON is YAML; mapping order is kept by Salt).
fn sls(step: &Step) -> String {
    let mut top = serde_json::Map::new();
    for (name, fun, args) in step {
        let list: Vec<Value> = args
            .as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| json!({k.clone(): v.clone()}))
                    .collect()
            })
            .unwrap_or_default();
        top.insert(name.clone(), json!({*fun: list}));
    }
    Value::Object(top).to_string()
}

/// Runs a step through salt-call; the (result, comment, changes) of each
/// state in run order.
fn salt_step(salt_call: &Path, base: &Path, step: &Step, test: bool) -> Vec<String> {
    std::fs::write(base.join("files/step.sls"), sls(step)).expect("write sls");
    let mut cmd = Command::new(salt_call);
    cmd.args(["--local", "--config-dir"])
        .arg(base.join("conf"))
        .arg("--file-root")
        .arg(base.join("files"));
    cmd.args(["--out", "json", "state.apply", "step"]);
    if test {
        cmd.arg("test=True");
    }
    let out = cmd.output().expect("salt-call runs");
    let ret: Value = serde_json::from_slice(&out.stdout).expect("salt-call prints JSON");
    let mut states: Vec<&Value> = ret["local"]
        .as_object()
        .map(|m| m.values().collect())
        .unwrap_or_default();
    states.sort_by_key(|s| s["__run_num__"].as_i64());
    states
        .into_iter()
        .map(|s| format!("{} | {} | {}", s["result"], s["comment"], s["changes"]))
        .collect()
}

fn halite_step(host: &Host, step: &Step, test: bool) -> Vec<String> {
    step.iter()
        .map(|(name, fun, args)| {
            let (module, f) = fun.split_once('.').unwrap_or((fun, ""));
            let r = state(host, module, f, name, args.clone(), test);
            format!(
                "{} | {} | {}",
                json!(r.result),
                json!(r.comment),
                Value::Object(r.changes)
            )
        })
        .collect()
}

#[test]
fn user_and_group_states_return_what_salt_call_returns() {
    require_root!();
    let Some(salt_call) = salt_call_bin("user_and_group_states_return_what_salt_call_returns")
    else {
        return;
    };
    let user = unique("cu");
    let group = unique("cg");
    let home = format!("/tmp/{user}-home");
    let _guard = Cleanup {
        users: vec![user.clone()],
        groups: vec![group.clone(), user.clone()],
        dirs: vec![home.clone()],
    };
    let id = free_id(47300);
    let create: Step = vec![
        (group.clone(), "group.present", json!({"gid": id})),
        (
            user.clone(),
            "user.present",
            json!({"uid": id, "gid": id, "fullname": "Conformance", "roomnumber": "7", "shell": "/bin/sh",
                   "home": home, "groups": [group], "password": "$6$salt$hash"}),
        ),
    ];
    let update: Step = vec![
        (
            group.clone(),
            "group.present",
            json!({"gid": id, "members": [user]}),
        ),
        (
            user.clone(),
            "user.present",
            json!({"fullname": "Changed", "workphone": "42", "shell": "/bin/bash", "groups": []}),
        ),
    ];
    let forbidden: Step = vec![(user.clone(), "user.present", json!({"uid": id + 1}))];
    let optional: Step = vec![(
        user.clone(),
        "user.present",
        json!({"optional_groups": [group, "halite-t-nosuchgroup"], "remove_groups": false, "usergroup": false}),
    )];
    let remove: Step = vec![
        (user.clone(), "user.absent", json!({"purge": true})),
        (group.clone(), "group.absent", json!({})),
    ];
    let script: Vec<(&Step, bool)> = vec![
        (&create, true),
        (&create, false),
        (&create, false),
        (&update, true),
        (&update, false),
        (&forbidden, false),
        (&optional, true),
        (&optional, false),
        (&optional, false),
        (&remove, true),
        (&remove, false),
        (&remove, false),
    ];
    let dir = tempfile::tempdir().expect("temp dir");
    let base = dir.path();
    std::fs::create_dir_all(base.join("conf")).expect("conf");
    std::fs::create_dir_all(base.join("files")).expect("files");
    let b = base.display();
    std::fs::write(
        base.join("conf/minion"),
        format!("cachedir: {b}/cache\npki_dir: {b}/pki\nsock_dir: {b}/sock\nlog_file: {b}/log\n"),
    )
    .expect("minion");
    // Salt first, on the same names and ids; its last step removes everything again.
    let theirs: Vec<Vec<String>> = script
        .iter()
        .map(|(step, test)| salt_step(&salt_call, base, step, *test))
        .collect();
    assert!(usr_absent(&user), "salt's run cleaned up after itself");
    let host = host();
    let ours: Vec<Vec<String>> = script
        .iter()
        .map(|(step, test)| halite_step(&host, step, *test))
        .collect();
    for (i, (t, o)) in theirs.iter().zip(&ours).enumerate() {
        assert_eq!(t, o, "step {i} differs from Salt");
    }
}

fn usr_absent(name: &str) -> bool {
    !Command::new("getent")
        .args(["passwd", name])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(true)
}

fn shadow_hash(user: &str) -> String {
    std::fs::read_to_string("/etc/shadow")
        .unwrap_or_default()
        .lines()
        .find_map(|l| {
            l.strip_prefix(&format!("{user}:"))
                .map(|rest| rest.split(':').next().unwrap_or("").to_string())
        })
        .unwrap_or_default()
}

#[test]
fn hash_password_hashes_clear_text_and_stays_idempotent() {
    require_root!();
    let host = host();
    let user = unique("h");
    let _guard = Cleanup {
        users: vec![user.clone()],
        groups: vec![user.clone()],
        dirs: vec![],
    };
    let args = json!({"password": "s3cret", "hash_password": true, "createhome": false});
    let r = state(&host, "user", "present", &user, args.clone(), false);
    assert_eq!(r.result, Some(true), "{}", r.comment);
    let hash = shadow_hash(&user);
    assert!(hash.starts_with("$6$"), "{hash}");
    let salt = hash.split('$').nth(2).unwrap_or_default().to_string();
    if halite_modules::grains::hw::which("openssl").is_some() {
        let out = Command::new("openssl")
            .args(["passwd", "-6", "-salt", &salt, "s3cret"])
            .output()
            .expect("openssl runs");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            hash,
            "openssl computes the same crypt hash"
        );
    }
    let r = state(&host, "user", "present", &user, args, false);
    assert_eq!(
        (r.result, r.comment.clone()),
        (Some(true), format!("User {user} is present and up to date"))
    );
    let r = state(
        &host,
        "user",
        "present",
        &user,
        json!({"password": "other", "hash_password": true}),
        false,
    );
    assert_eq!(
        (r.result, r.comment.clone()),
        (Some(true), format!("Updated user {user}"))
    );
    assert_eq!(r.changes.get("passwd"), Some(&json!("XXX-REDACTED-XXX")));
    assert_eq!(
        shadow_hash(&user).split('$').nth(2),
        Some(salt.as_str()),
        "the salt is kept"
    );
}
