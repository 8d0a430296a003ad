//! The README's commands (`bash scripts/test.sh`, `bash scripts/quickstart.sh`)
//! work as root on a fresh Debian machine, where there is no `sudo`, and
//! for a user through `sudo`: both start with `scripts/as-root.sh`'s
//! `as_root`, tested here on a small script that sources it. The user
//! cases run as `nobody` (through `setpriv`), so they need root.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// A world-readable scratch dir holding `as-root.sh`, a script that
/// sources it, and a `bin/` with only the tools the script needs (so that
/// whether `sudo` is found is up to the test).
fn scratch() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::copy(
        repo().join("scripts/as-root.sh"),
        dir.path().join("as-root.sh"),
    )
    .unwrap();
    let script = dir.path().join("needs-root.sh");
    std::fs::write(
        &script,
        format!(
            ". {}/as-root.sh\nas_root \"$0\" \"$@\"\necho \"ran as $(id -u) with $*\"\n",
            dir.path().display()
        ),
    )
    .unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    for tool in ["bash", "id", "env"] {
        let found = ["/usr/bin", "/bin"]
            .iter()
            .map(|d| Path::new(d).join(tool))
            .find(|p| p.exists())
            .unwrap();
        std::os::unix::fs::symlink(found, bin.join(tool)).unwrap();
    }
    for p in [&script, &dir.path().join("as-root.sh")] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    (dir, script)
}

/// Runs `bash script a b` as `nobody` with only `bin` on PATH (found
/// before PATH is replaced: Command looks the program up in the new one).
fn run_as_nobody(dir: &Path, script: &Path) -> Output {
    let setpriv = ["/usr/bin/setpriv", "/bin/setpriv"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .expect("setpriv (util-linux) to run a script as nobody");
    Command::new(setpriv)
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(dir.join("bin/bash"))
        .arg(script)
        .args(["a", "b"])
        .env_clear()
        .env("PATH", dir.join("bin"))
        .env("HOME", dir)
        .current_dir(dir)
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn as_root_runs_the_script_in_place_for_root() {
    if !is_root() {
        eprintln!("skipped: needs root (it checks what root gets)");
        return;
    }
    let (dir, script) = scratch();
    let out = Command::new("bash")
        .arg(&script)
        .args(["a", "b"])
        .env("PATH", dir.path().join("bin"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "ran as 0 with a b\n");
}

#[test]
fn as_root_without_sudo_says_how_to_run_it() {
    if !is_root() {
        eprintln!("skipped: needs root to run the script as nobody");
        return;
    }
    let (dir, script) = scratch();
    let out = run_as_nobody(dir.path(), &script);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("needs root and sudo is not installed: run it as root"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(text(&out.stdout), "", "the script must not go on as a user");
}

/// There is no real `sudo` on the test machines (a fresh Debian has none),
/// so a stand-in records how it is called.
#[test]
fn as_root_re_executes_through_sudo_for_a_user() {
    if !is_root() {
        eprintln!("skipped: needs root to run the script as nobody");
        return;
    }
    let (dir, script) = scratch();
    let record = dir.path().join("sudo-args");
    let sudo = dir.path().join("bin/sudo");
    std::fs::write(
        &sudo,
        format!(
            "#!{}/bin/bash\nprintf '%s\\n' \"$@\" > {}\n",
            dir.path().display(),
            record.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&sudo, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let out = run_as_nobody(dir.path(), &script);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "", "exec replaces the user's run");
    let home = dir.path().display();
    let want = format!(
        "env\nPATH={home}/bin\nCARGO_HOME={home}/.cargo\nRUSTUP_HOME={home}/.rustup\nbash\n{}\na\nb\n",
        script.display()
    );
    assert_eq!(std::fs::read_to_string(&record).unwrap(), want);
}

/// The README says exactly the commands that work without `sudo`, and
/// `.ci/run` runs exactly the README's test command.
#[test]
fn readme_and_ci_say_the_commands_without_sudo() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    for command in ["bash scripts/quickstart.sh", "bash scripts/test.sh"] {
        assert!(
            readme.contains(&format!("\n{command}\n")),
            "README lacks {command}"
        );
        assert!(
            !readme.contains(&format!("sudo {command}")),
            "README still says sudo {command}"
        );
    }
    let ci = std::fs::read_to_string(repo().join(".ci/run")).unwrap();
    assert!(ci.contains("exec bash scripts/test.sh"), "{ci}");
    for script in ["scripts/test.sh", "scripts/quickstart.sh"] {
        let body = std::fs::read_to_string(repo().join(script)).unwrap();
        assert!(
            body.contains(&format!("as_root {script} \"$@\"")),
            "{script}"
        );
    }
}
