//! The postgres execution module is there only where `psql` is (Salt's
//! `__virtual__`), and templates see it through `'mod.fun' in salt`: a
//! real `halite-call` run with and without psql on its PATH.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

use std::path::Path;
use std::process::Command;

const SLS: &str = "{% if 'postgres.user_exists' in salt %}\nhas_postgres:\n{% else %}\nno_postgres:\n{% endif %}\n  test.succeed_without_changes\n";

/// `state.apply main` and `sys.list_functions postgres` with `path` as PATH.
fn run(dir: &Path, path: &str) -> (String, String) {
    let call = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_halite-call"))
            .env("PATH", path)
            .arg("--local")
            .arg("--config-dir")
            .arg(dir)
            .arg("--file-root")
            .arg(dir)
            .arg("--out=json")
            .args(args)
            .output()
            .expect("run halite-call");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    (
        call(&["state.apply", "main"]),
        call(&["sys.list_functions", "postgres"]),
    )
}

#[test]
fn postgres_module_follows_psql_like_salts_virtual() {
    let Some(psql) = which_psql() else {
        println!("skipped: needs psql (scripts/install-deps.sh installs postgresql)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("main.sls"), SLS).unwrap();
    // Its own cachedir: the state-run lock lives there (tests run at once,
    // and the default one is the host's).
    std::fs::write(
        dir.path().join("minion"),
        format!("id: local\ncachedir: {}/cache\n", dir.path().display()),
    )
    .unwrap();
    let with_dir = Path::new(&psql).parent().unwrap().display().to_string();
    let (state, functions) = run(
        dir.path(),
        &format!("{with_dir}:/usr/sbin:/usr/bin:/sbin:/bin"),
    );
    assert!(state.contains("has_postgres"), "{state}");
    assert!(functions.contains("postgres.user_create"), "{functions}");
    let empty = tempfile::tempdir().unwrap();
    let (state, functions) = run(dir.path(), &empty.path().display().to_string());
    assert!(state.contains("no_postgres"), "{state}");
    assert!(!functions.contains("postgres."), "{functions}");
}

fn which_psql() -> Option<String> {
    std::env::var("PATH")
        .ok()?
        .split(':')
        .map(|d| Path::new(d).join("psql"))
        .find(|p| p.is_file())
        .map(|p| p.display().to_string())
}
