//! GnuPG keys of a test's own, shared by the pillar tests that render a
//! `#!yaml|gpg` SLS (`crates/master/tests/pillar_sources.rs`,
//! `crates/modules/tests/pillar_sources.rs`): a GnuPG home in the test's
//! temp dir with one key without passphrase, and text encrypted to it.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

/// The user id of the key [`key_and_cipher`] generates.
pub const KEY_UID: &str = "halite-test@example.invalid";

/// Whether the `gpg` binary is installed; prints why the caller skips when
/// it is not.
pub fn available() -> bool {
    if Command::new("gpg").arg("--version").output().is_err() {
        println!("skipped: gpg is not installed (scripts/install-deps.sh installs gnupg)");
        return false;
    }
    true
}

/// Makes `dir` a GnuPG home (mode 0700, as gpg wants) holding one key
/// without passphrase, and returns the ASCII-armored encryption of `text`
/// to it.
///
/// # Panics
/// When gpg fails: the test cannot run then.
pub fn key_and_cipher(dir: &Path, text: &str) -> String {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::set_permissions(dir, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let home = dir.to_str().unwrap();
    let gen = Command::new("gpg")
        .args(["--homedir", home, "--batch", "--passphrase", ""])
        .args(["--quick-gen-key", KEY_UID, "rsa2048", "encrypt", "never"])
        .output()
        .unwrap();
    assert!(
        gen.status.success(),
        "gpg --quick-gen-key failed: {}",
        String::from_utf8_lossy(&gen.stderr)
    );
    let mut enc = Command::new("gpg")
        .args(["--homedir", home, "--batch", "--armor"])
        .args(["--trust-model", "always", "-r", KEY_UID, "--encrypt"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    enc.stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = enc.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "gpg --encrypt failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}
