//! The `halite-spm` binary: Salt's command forms, the prompt, outputs.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

mod common;

use std::io::Write;
use std::process::{Command, Output, Stdio};

use common::{formula_dir, simple_formula, Sandbox};

fn run(sandbox: &Sandbox, args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_halite-spm"))
        .arg("-c")
        .arg(sandbox.config_dir())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn halite-spm");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
        .expect("write stdin");
    child.wait_with_output().expect("wait")
}

fn stdout(output: &Output) -> String {
    assert!(
        output.status.success(),
        "failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn build_install_query_and_remove_through_the_binary() {
    let sandbox = Sandbox::new();
    let dir = formula_dir(
        &sandbox.root().join("src"),
        &simple_formula("redis", "dependencies: ''\n"),
        &[
            ("redis/init.sls", "redis: {}\n"),
            ("pillar.example", "redis: {}\n"),
        ],
    );
    let built = stdout(&run(&sandbox, &["build", &dir.display().to_string()], ""));
    let spm = sandbox.config.spm_build_dir.join("redis-201506-2.spm");
    assert_eq!(built, format!("Built package {}\n", spm.display()));

    let members = stdout(&run(
        &sandbox,
        &["local", "files", &spm.display().to_string()],
        "",
    ));
    assert_eq!(
        members,
        "redis\nredis/FORMULA\nredis/pillar.example\nredis/redis\nredis/redis/init.sls\n"
    );
    let local_info = stdout(&run(
        &sandbox,
        &["local", "info", &spm.display().to_string()],
        "",
    ));
    assert!(
        local_info
            .contains("Name: redis\nVersion: 201506\nRelease: 2\nInstall Date: Not installed\n"),
        "{local_info}"
    );

    let installed = stdout(&run(
        &sandbox,
        &["-y", "local", "install", &spm.display().to_string()],
        "",
    ));
    assert_eq!(installed, "... installing redis\n");
    assert_eq!(stdout(&run(&sandbox, &["list"], "")), "redis\n");
    assert_eq!(stdout(&run(&sandbox, &["list", "packages"], "")), "redis\n");
    let info = stdout(&run(&sandbox, &["info", "redis"], ""));
    assert!(
        info.starts_with("Name: redis\nVersion: 201506\nRelease: 2\nInstall Date: "),
        "{info}"
    );
    assert!(
        info.contains("Summary: The redis formula\nDescription:\nInstalls redis"),
        "{info}"
    );
    let files = stdout(&run(&sandbox, &["files", "redis"], ""));
    let init = sandbox.config.formula_path.join("redis/init.sls");
    assert!(
        files.lines().any(|l| l == init.display().to_string()),
        "{files}"
    );
    assert_eq!(
        files,
        stdout(&run(&sandbox, &["list", "files", "redis"], ""))
    );

    let removed = stdout(&run(&sandbox, &["-y", "remove", "redis"], ""));
    assert_eq!(removed, "... removing redis\n");
    assert!(!init.exists());
    assert_eq!(stdout(&run(&sandbox, &["list"], "")), "");
    let missing = run(&sandbox, &["info", "redis"], "");
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("Package redis not installed"));
}

#[test]
fn the_prompt_installs_only_on_yes() {
    let sandbox = Sandbox::new();
    let spm = common::build_simple(&sandbox, "memcached", "")
        .display()
        .to_string();
    let before = sandbox.snapshot();
    let declined = run(&sandbox, &["local", "install", &spm], "n\n");
    assert!(!declined.status.success());
    let prompt = String::from_utf8_lossy(&declined.stdout);
    assert!(
        prompt.contains("Installing packages:\n\tmemcached\n") && prompt.contains("Proceed? [N/y]"),
        "{prompt}"
    );
    assert!(String::from_utf8_lossy(&declined.stderr).contains("canceled"));
    assert_eq!(sandbox.snapshot(), before);

    let accepted = run(&sandbox, &["local", "install", &spm], "y\n");
    assert!(stdout(&accepted).contains("... installing memcached"));
    assert!(sandbox
        .config
        .formula_path
        .join("memcached/init.sls")
        .is_file());
}

#[test]
fn errors_say_what_is_wrong() {
    let sandbox = Sandbox::new();
    let out = run(&sandbox, &["-y", "remove", "nothing"], "");
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("No database at"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let out = run(
        &sandbox,
        &["-y", "local", "install", "/nonexistent/x-1-1.spm"],
        "",
    );
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("Package file /nonexistent/x-1-1.spm not found"));

    std::fs::write(
        sandbox.config_dir().join("spm"),
        "formula_path: [unclosed\n",
    )
    .expect("bad config");
    let out = run(&sandbox, &["list"], "");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("cannot read the SPM config file") && stderr.contains("/etc/spm"),
        "{stderr}"
    );
}
