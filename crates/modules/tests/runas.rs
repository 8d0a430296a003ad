//! `runas=` in `halite_modules::command` against a real user the test
//! creates: the command runs as that user, in their home, with their
//! login environment and the caller's `env=` on top (Salt 3008's
//! `cmdmod._run`), not through `su -`, which would drop `env=`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

use std::process::Command;

use halite_modules::command::run_command;
use halite_state::{CmdOptions, CmdOutput, CmdTimeout, Value};

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// A throwaway user (and its own group) with a home in a temp dir and a
/// `.profile` exporting a marker; removed when dropped.
struct TestUser {
    name: String,
    home: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl TestUser {
    fn create(tag: &str) -> Self {
        let name = format!("halite-t-ra{tag}{}", std::process::id() % 100_000);
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let ok = Command::new("useradd")
            .args(["-m", "-d"])
            .arg(&home)
            .args(["-s", "/bin/sh", &name])
            .status()
            .unwrap()
            .success();
        assert!(ok, "useradd {name}");
        std::fs::write(
            home.join(".profile"),
            "export HALITE_FROM_PROFILE=login-shell\nexport SHARED=from-profile\n",
        )
        .unwrap();
        // The temp dir is root's 0700: let the user reach its home.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        Self {
            name,
            home,
            _dir: dir,
        }
    }

    fn run(&self, cmd: &str, cwd: Option<&str>, env: &[(&str, &str)]) -> CmdOutput {
        let opts = CmdOptions {
            runas: Some(self.name.clone()),
            cwd: cwd.map(String::from),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            python_shell: true,
            ..Default::default()
        };
        run_command(cmd, &opts).unwrap()
    }
}

impl Drop for TestUser {
    fn drop(&mut self) {
        let _ = Command::new("userdel").args(["-r", &self.name]).status();
    }
}

macro_rules! require_root {
    () => {
        if !is_root() {
            println!("skipped: needs root to create a user and switch to it");
            return;
        }
    };
}

#[test]
fn env_reaches_a_command_run_as_another_user_over_their_login_environment() {
    require_root!();
    let user = TestUser::create("e");
    let out = user.run(
        r#"printf '%s|%s|%s|%s|%s' "$HALITE_FROM_ENV" "$HALITE_FROM_PROFILE" "$SHARED" "$USER" "$LOGNAME""#,
        None,
        &[("HALITE_FROM_ENV", "given"), ("SHARED", "from-env")],
    );
    assert_eq!(out.retcode, 0, "{out:?}");
    // env= wins over the login environment, which is read (the .profile).
    assert_eq!(
        out.stdout,
        format!("given|login-shell|from-env|{0}|{0}", user.name)
    );
}

#[test]
fn a_command_run_as_another_user_has_their_ids_home_and_default_directory() {
    require_root!();
    let user = TestUser::create("h");
    let found = nix::unistd::User::from_name(&user.name).unwrap().unwrap();
    let out = user.run(r#"echo "$(id -u) $(id -g) $HOME $(pwd)""#, None, &[]);
    assert_eq!(out.retcode, 0, "{out:?}");
    let home = user.home.display();
    assert_eq!(
        out.stdout,
        format!("{} {} {home} {home}", found.uid, found.gid)
    );
    // HOME cannot be overridden by env=, as in Salt.
    let out = user.run("echo $HOME", None, &[("HOME", "/elsewhere")]);
    assert_eq!(out.stdout, home.to_string());
}

#[test]
fn cwd_and_stdin_reach_a_command_run_as_another_user() {
    require_root!();
    let user = TestUser::create("c");
    let work = user.home.join("work");
    std::fs::create_dir(&work).unwrap();
    let found = nix::unistd::User::from_name(&user.name).unwrap().unwrap();
    nix::unistd::chown(&work, Some(found.uid), Some(found.gid)).unwrap();
    let opts = CmdOptions {
        runas: Some(user.name.clone()),
        cwd: Some(work.display().to_string()),
        stdin: Some("fed".into()),
        python_shell: true,
        ..Default::default()
    };
    let out = run_command("pwd; cat; touch made-here", &opts).unwrap();
    assert_eq!(out.stdout, format!("{}\nfed", work.display()), "{out:?}");
    let meta = std::fs::metadata(work.join("made-here")).unwrap();
    use std::os::unix::fs::MetadataExt;
    assert_eq!(meta.uid(), found.uid.as_raw(), "the file is the user's");
}

#[test]
fn words_are_found_on_the_users_path_and_a_timeout_still_kills() {
    require_root!();
    let user = TestUser::create("t");
    let opts = CmdOptions {
        runas: Some(user.name.clone()),
        timeout: CmdTimeout::from_value(Some(&Value::from(1))).unwrap(),
        ..Default::default()
    };
    let out = run_command("sleep 30", &opts).unwrap();
    assert!(out.timed_out, "{out:?}");
    let opts = CmdOptions {
        runas: Some(user.name.clone()),
        ..Default::default()
    };
    let out = run_command("id -un", &opts).unwrap();
    assert_eq!(out.stdout, user.name);
}

#[test]
fn an_unknown_user_is_salts_error_and_nothing_runs() {
    let opts = CmdOptions {
        runas: Some("halite-t-no-such-user".into()),
        ..Default::default()
    };
    let err = run_command("true", &opts).unwrap_err();
    assert_eq!(
        err.to_string(),
        "User 'halite-t-no-such-user' is not available"
    );
}
