//! `halite_modules::command`: real processes run the way Salt's cmdmod
//! runs them, with and without a timeout.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

use halite_modules::command::{run_argv, run_command};
use halite_state::{CmdOptions, CmdTimeout, Value};

fn timeout(v: Value) -> Option<CmdTimeout> {
    CmdTimeout::from_value(Some(&v)).expect("a number")
}

#[test]
fn a_command_that_finishes_in_time_returns_its_own_output() {
    let opts = CmdOptions {
        python_shell: true,
        timeout: timeout(Value::from(30)),
        stdin: Some("in".into()),
        ..Default::default()
    };
    let out = run_command("cat; echo err >&2; exit 3", &opts).unwrap();
    assert_eq!(out.stdout, "in");
    assert_eq!(out.stderr, "err");
    assert_eq!(out.retcode, 3);
    assert!(!out.timed_out);
}

#[test]
fn a_command_that_ignores_its_stdin_is_killed_at_its_timeout() {
    // 1 MiB of stdin fills the pipe: writing it blocks until the kill.
    let opts = CmdOptions {
        python_shell: true,
        timeout: timeout(Value::from(1)),
        stdin: Some("x".repeat(1 << 20)),
        ..Default::default()
    };
    let out = run_command("sleep 40", &opts).unwrap();
    assert!(out.timed_out);
    assert_eq!(out.retcode, 1);
    assert_eq!(out.stdout, "sleep 40 : Timed out after 1 seconds");
}

#[test]
fn timeouts_read_like_salts() {
    assert_eq!(CmdTimeout::from_value(None), Ok(None));
    assert_eq!(CmdTimeout::from_value(Some(&Value::from(0))), Ok(None));
    assert_eq!(CmdTimeout::from_value(Some(&Value::Null)), Ok(None));
    let t = timeout(Value::from(2.5)).unwrap();
    assert_eq!(t.shown, "2.5");
    assert_eq!(t.duration, std::time::Duration::from_millis(2500));
    assert_eq!(
        CmdTimeout::from_value(Some(&Value::from("abc"))),
        Err("Error: timeout abc must be a number".to_string())
    );
}

/// `run_argv` hands each word to the program as it is: spaces, quotes and
/// shell syntax in a value reach it untouched and nothing runs a shell.
#[test]
fn run_argv_passes_each_word_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let tricky = format!("a b'c\"; touch {}", marker.display());
    let argv = vec![
        "printf".to_string(),
        "%s|%s".to_string(),
        tricky.clone(),
        "$HOME".to_string(),
    ];
    let out = run_argv(&argv, &CmdOptions::default()).unwrap();
    assert_eq!(out.retcode, 0);
    assert_eq!(out.stdout, format!("{tricky}|$HOME"));
    assert!(!marker.exists());
    let err = run_argv(&[], &CmdOptions::default()).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
}
