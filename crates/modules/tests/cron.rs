//! `cron` states and execution functions against real crontabs of a
//! throwaway user, through the real `crontab` binary, as root.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

mod common;

use std::process::Command;

use halite_modules::{Args, Host};
use halite_state::StateResult;
use serde_json::{json, Value};

fn ready() -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        println!("skipped: needs root to create a test user and its crontab");
        return false;
    }
    if Command::new("crontab").arg("-V").output().is_err() {
        println!("skipped: crontab is not installed (apt-get install cron)");
        return false;
    }
    true
}

/// A user created for one test, removed with its crontab afterwards.
struct TestUser(String);

impl TestUser {
    fn new(tag: &str) -> Self {
        let name = format!("hcron{tag}{}", std::process::id() % 100000);
        let ok = Command::new("useradd")
            .args(["-M", "-s", "/bin/sh", &name])
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        assert!(ok, "useradd {name}");
        TestUser(name)
    }
}

impl Drop for TestUser {
    fn drop(&mut self) {
        let _ = Command::new("crontab").args(["-u", &self.0, "-r"]).output();
        let _ = Command::new("userdel").args(["-f", &self.0]).output();
    }
}

fn host() -> Host {
    common::host()
}

fn state(host: &Host, fun: &str, name: &str, args: Value, test: bool) -> StateResult {
    common::state(host, "cron", fun, name, args, test)
}

fn crontab_of(user: &str) -> String {
    let out = Command::new("crontab")
        .args(["-u", user, "-l"])
        .output()
        .expect("crontab -l");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn exec(host: &Host, fun: &str, positional: Vec<Value>, kwargs: Value) -> Result<Value, String> {
    let kwargs = match kwargs {
        Value::Object(m) => m,
        _ => Default::default(),
    };
    host.call(fun, &Args { positional, kwargs })
        .map_err(|e| e.to_string())
}

/// What Salt 3008.5 wrote for the same states (recorded with salt-call on
/// this host): halite must write the same bytes and read them back.
const SALT_WROTE: &str = "# Lines below here are managed by Salt, do not edit\nMAILTO=\"\"\n# say hi SALT_CRON_IDENTIFIER:/bin/echo hi\n5 * * * * /bin/echo hi\n# SALT_CRON_IDENTIFIER:/bin/x\n@reboot /bin/x\n";

#[test]
fn present_env_and_special_write_salts_crontab_and_are_idempotent() {
    if !ready() {
        return;
    }
    let host = host();
    let u = TestUser::new("p");
    let user = json!(u.0);
    let r = state(
        &host,
        "present",
        "/bin/echo hi  ",
        json!({"user": user, "minute": 5, "comment": "say hi"}),
        true,
    );
    assert_eq!(r.result, None);
    assert_eq!(r.comment, "Cron /bin/echo hi is set to be added");
    assert_eq!(crontab_of(&u.0), "", "test=True changed nothing");

    let r = state(
        &host,
        "present",
        "/bin/echo hi  ",
        json!({"user": user, "minute": 5, "comment": "say hi"}),
        false,
    );
    assert_eq!(r.result, Some(true), "{}", r.comment);
    assert_eq!(
        r.comment,
        format!("Cron /bin/echo hi added to {}'s crontab", u.0)
    );
    assert_eq!(r.changes.get(&u.0), Some(&json!("/bin/echo hi")));
    let r = state(
        &host,
        "env_present",
        "MAILTO",
        json!({"user": user, "value": ""}),
        false,
    );
    assert_eq!(
        r.comment,
        format!("Cron env MAILTO added to {}'s crontab", u.0)
    );
    let r = state(
        &host,
        "present",
        "/bin/x",
        json!({"user": user, "special": "@reboot"}),
        false,
    );
    assert_eq!(r.result, Some(true), "{}", r.comment);
    // MAILTO sits above the jobs in Salt's layout, whatever the order of adding.
    assert_eq!(crontab_of(&u.0), SALT_WROTE);

    let again = state(
        &host,
        "present",
        "/bin/echo hi",
        json!({"user": user, "minute": 5, "comment": "say hi"}),
        false,
    );
    assert_eq!(again.comment, "Cron /bin/echo hi already present");
    assert!(again.changes.is_empty());
    let t = state(
        &host,
        "present",
        "/bin/echo hi",
        json!({"user": user, "minute": 6}),
        true,
    );
    assert_eq!(t.comment, "Cron /bin/echo hi is set to be updated");

    let up = state(
        &host,
        "present",
        "/bin/echo hi",
        json!({"user": user, "minute": 6}),
        false,
    );
    assert_eq!(up.comment, "Cron /bin/echo hi updated");
    let tab = exec(&host, "cron.list_tab", vec![user.clone()], json!({})).expect("list_tab");
    let job = &tab["crons"][0];
    assert_eq!(job["minute"], json!("6"));
    assert_eq!(job["comment"], json!("say hi"), "the old comment is kept");
    assert_eq!(job["identifier"], json!("/bin/echo hi"));

    let gone = state(
        &host,
        "absent",
        "/bin/echo hi",
        json!({"user": user}),
        false,
    );
    assert_eq!(
        gone.comment,
        format!("Cron /bin/echo hi removed from {}'s crontab", u.0)
    );
    let gone = state(
        &host,
        "absent",
        "/bin/echo hi",
        json!({"user": user}),
        false,
    );
    assert_eq!(gone.comment, "Cron /bin/echo hi already absent");
    let env = state(&host, "env_absent", "MAILTO", json!({"user": user}), true);
    assert_eq!(env.comment, "Cron env MAILTO is set to be removed");
    let env = state(&host, "env_absent", "MAILTO", json!({"user": user}), false);
    assert_eq!(
        env.comment,
        format!("Cron env MAILTO removed from {}'s crontab", u.0)
    );
    assert!(!crontab_of(&u.0).contains("MAILTO"));
}

#[test]
fn reads_a_crontab_salt_wrote_and_keeps_lines_above_the_tag() {
    if !ready() {
        return;
    }
    let host = host();
    let u = TestUser::new("r");
    let user = json!(u.0);
    let text = format!("# mine\n0 1 * * * /bin/hand-made\n{SALT_WROTE}");
    let tmp = tempfile::NamedTempFile::new().expect("temp file");
    std::fs::write(tmp.path(), &text).expect("write");
    let ok = exec(
        &host,
        "cron.write_cron_file",
        vec![user.clone(), json!(tmp.path())],
        json!({}),
    );
    assert_eq!(ok, Ok(json!(true)));
    assert_eq!(
        exec(&host, "cron.raw_cron", vec![user.clone()], json!({})),
        Ok(json!(text))
    );
    let r = state(
        &host,
        "present",
        "/bin/echo hi",
        json!({"user": user, "minute": 5, "comment": "say hi"}),
        false,
    );
    assert_eq!(r.comment, "Cron /bin/echo hi already present");
    let set = exec(
        &host,
        "cron.set_job",
        vec![
            user.clone(),
            json!("*/5"),
            json!("*"),
            json!("*"),
            json!("*"),
            json!("*"),
            json!("/bin/y"),
        ],
        json!({}),
    );
    assert_eq!(set, Ok(json!("new")));
    assert_eq!(
        exec(
            &host,
            "cron.set_env",
            vec![user.clone(), json!("PATH"), json!("/bin")],
            json!({})
        ),
        Ok(json!("new"))
    );
    let now = crontab_of(&u.0);
    assert!(
        now.starts_with("# mine\n0 1 * * * /bin/hand-made\n# Lines below here"),
        "{now}"
    );
    assert!(now.contains("\n*/5 * * * * /bin/y\n"), "{now}");
    assert_eq!(
        exec(
            &host,
            "cron.rm_job",
            vec![user.clone(), json!("/bin/y")],
            json!({})
        ),
        Ok(json!("removed"))
    );
    assert_eq!(
        exec(
            &host,
            "cron.rm_env",
            vec![user.clone(), json!("PATH")],
            json!({})
        ),
        Ok(json!("removed"))
    );
    let entry = exec(
        &host,
        "cron.get_entry",
        vec![user.clone()],
        json!({"identifier": "/bin/x"}),
    )
    .expect("get_entry");
    assert_eq!(entry["spec"], json!("@reboot"));
}

#[test]
fn bad_input_gets_salts_errors_not_a_panic() {
    if !ready() {
        return;
    }
    let host = host();
    let u = TestUser::new("b");
    let user = json!(u.0);
    let r = state(
        &host,
        "present",
        "/bin/bad",
        json!({"user": user, "minute": "abc"}),
        false,
    );
    assert_eq!(r.result, Some(false));
    assert!(
        r.comment.starts_with(&format!(
            "Cron /bin/bad for user {} failed to commit with error \n",
            u.0
        )) && r
            .comment
            .ends_with(":2: bad minute\nerrors in crontab file, can't install."),
        "{:?}",
        r.comment
    );
    assert_eq!(crontab_of(&u.0), "", "a refused crontab leaves the old one");
    let missing = exec(
        &host,
        "cron.set_job",
        vec![user.clone(), json!("1")],
        json!({}),
    );
    assert_eq!(
        missing,
        Err("set_job() missing 5 required positional arguments: 'hour', 'daymonth', 'month', 'dayweek', and 'cmd'".to_string())
    );
    let unknown = exec(
        &host,
        "cron.list_tab",
        vec![user.clone()],
        json!({"foo": "bar"}),
    );
    assert_eq!(
        unknown,
        Err("The following keyword arguments are not valid: foo=bar".to_string())
    );
    let nouser = exec(
        &host,
        "cron.list_tab",
        vec![json!("no-such-user-h19")],
        json!({}),
    );
    assert!(nouser.is_err());
    let r = state(
        &host,
        "file",
        "/nonexistent/crontab",
        json!({"user": user}),
        false,
    );
    assert_eq!(
        r.comment,
        "Local file source /nonexistent/crontab does not exist"
    );
}

#[test]
fn file_replaces_the_whole_crontab() {
    if !ready() {
        return;
    }
    let host = host();
    let u = TestUser::new("f");
    let user = json!(u.0);
    let dir = tempfile::tempdir().expect("tempdir");
    let src = dir.path().join("tab");
    std::fs::write(&src, "* * * * * /bin/z\n").expect("write source");
    let name = src.to_string_lossy().into_owned();
    let t = state(&host, "file", &name, json!({"user": user}), true);
    assert_eq!(t.result, None);
    assert_eq!(
        t.comment,
        "The following values are set to be changed:\ndiff: --- \n+++ \n@@ -1 +1 @@\n-\n+* * * * * /bin/z\n\n"
    );
    let r = state(&host, "file", &name, json!({"user": user}), false);
    assert_eq!(r.result, Some(true), "{}", r.comment);
    assert_eq!(r.comment, format!("Crontab for user {} was updated", u.0));
    assert_eq!(r.changes.get("user"), Some(&json!(u.0)));
    assert_eq!(crontab_of(&u.0), "* * * * * /bin/z\n");
    let again = state(&host, "file", &name, json!({"user": user}), false);
    assert_eq!(
        again.comment,
        format!("Crontab for user {} is in the correct state", u.0)
    );
    assert!(again.changes.is_empty());
}
