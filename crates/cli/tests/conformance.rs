//! The conformance ratchet: runs the shared Salt corpus
//! (`../shared/conformance`) and this repo's own cases
//! (`tests/conformance/cases`) through the real `halite-call`, and fails
//! when a case listed in `tests/conformance/passing.txt` (semantics level)
//! or `exact.txt` (exact level) stops passing. The lists only grow.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("repo root")
}

fn read_list(path: &Path) -> BTreeSet<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(String::from)
        .collect()
}

/// Runs run.py over `cases_dir` and returns (case -> level) from its report.
fn run_corpus(run_py: &Path, cases_dir: Option<&Path>) -> Vec<(String, String)> {
    let bin = env!("CARGO_BIN_EXE_halite-call");
    let report = tempfile::NamedTempFile::new().expect("temp report");
    let template = format!(
        "{bin} --local --config-dir={{config_dir}} --file-root={{file_root}} --out=json --retcode-passthrough state.apply {{sls}} {{args}}"
    );
    let mut cmd = Command::new("python3");
    cmd.arg(run_py)
        .arg("--cmd")
        .arg(&template)
        .arg("--report")
        .arg(report.path());
    if let Some(d) = cases_dir {
        // Our own corpus has cases that run real tools (pip builds and
        // installs wheels into a venv): they need more than run.py's
        // default minute on a loaded 2-core machine.
        cmd.arg("--cases-dir").arg(d).arg("--timeout").arg("300");
    }
    let out = cmd
        .output()
        .expect("python3 must be installed to run the conformance corpus");
    println!("{}", String::from_utf8_lossy(&out.stdout));
    let text = std::fs::read_to_string(report.path()).expect("run.py wrote no report");
    let doc: serde_json::Value = serde_json::from_str(&text).expect("report is JSON");
    doc["cases"]
        .as_array()
        .expect("cases list")
        .iter()
        .map(|c| {
            (
                c["case"].as_str().unwrap_or("").to_string(),
                c["level"].as_str().unwrap_or("none").to_string(),
            )
        })
        .collect()
}

#[test]
fn conformance_ratchet() {
    let root = repo_root();
    let shared = root.join("../shared/conformance/run.py");
    if !shared.exists() {
        assert!(
            std::env::var_os("CI").is_none(),
            "../shared/conformance/run.py is missing: CI must run with shared/ beside the repo"
        );
        println!(
            "skipping: {} not found (run with the shared/ folder beside the repo)",
            shared.display()
        );
        return;
    }
    let mut results = run_corpus(&shared, None);
    let own = root.join("tests/conformance/cases");
    if own.is_dir() {
        results.extend(run_corpus(&shared, Some(&own)));
    }
    let passing = read_list(&root.join("tests/conformance/passing.txt"));
    let exact = read_list(&root.join("tests/conformance/exact.txt"));
    let mut regressions = Vec::new();
    let mut newly = Vec::new();
    for (case, level) in &results {
        let passes = level == "semantics" || level == "exact";
        if passing.contains(case) && !passes {
            regressions.push(format!("{case}: was passing, now {level}"));
        }
        if exact.contains(case) && level != "exact" {
            regressions.push(format!("{case}: was exact, now {level}"));
        }
        if passes && !passing.contains(case) {
            newly.push(case.clone());
        }
    }
    let seen: BTreeSet<&String> = results.iter().map(|(c, _)| c).collect();
    for case in passing.iter().filter(|c| !seen.contains(c)) {
        regressions.push(format!(
            "{case}: listed as passing but no longer in any corpus"
        ));
    }
    if !newly.is_empty() {
        println!(
            "newly passing (add to tests/conformance/passing.txt): {}",
            newly.join(", ")
        );
    }
    let n_exact = results.iter().filter(|(_, l)| l == "exact").count();
    println!(
        "conformance: {} cases, {} exact, {} listed passing",
        results.len(),
        n_exact,
        passing.len()
    );
    assert!(
        regressions.is_empty(),
        "conformance regressions:\n{}",
        regressions.join("\n")
    );
}
