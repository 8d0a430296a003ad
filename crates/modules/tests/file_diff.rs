//! `changes['diff']` must be byte-identical to Salt's, which is Python's
//! `difflib.unified_diff`. This compares our diff with the real difflib on
//! generated edits, including files long enough (200+ lines) for difflib's
//! "popular line" heuristic to matter.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

use std::io::Write;
use std::process::{Command, Stdio};

use halite_modules::exec::file::diff::unified_diff;

/// A small deterministic generator, so failures reproduce.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A text of `n` lines drawn from a small vocabulary (so lines repeat, as
/// braces and blank lines do in config files).
fn text(rng: &mut Lcg, n: usize) -> Vec<String> {
    const WORDS: &[&str] = &[
        "}",
        "",
        "{",
        "key = value",
        "# comment",
        "listen 80;",
        "server {",
        "a",
        "b",
    ];
    (0..n)
        .map(|i| {
            if rng.below(3) == 0 {
                format!("unique line {i} {}\n", rng.next())
            } else {
                format!("{}\n", WORDS[rng.below(WORDS.len() as u64) as usize])
            }
        })
        .collect()
}

fn edit(rng: &mut Lcg, lines: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for l in lines {
        match rng.below(12) {
            0 => {}
            1 => out.push(format!("changed {}\n", rng.next())),
            2 => {
                out.push(l.clone());
                out.push("}\n".to_string());
            }
            _ => out.push(l.clone()),
        }
    }
    out
}

/// Every pair's diff from Python's difflib, in one interpreter run.
fn python_diffs(pairs: &[(String, String)]) -> Option<Vec<String>> {
    let script = "import difflib,json,sys\nd=json.load(sys.stdin)\n\
                  json.dump([''.join(difflib.unified_diff(a.splitlines(True), b.splitlines(True))) for a,b in d], sys.stdout)";
    let mut child = Command::new("python3")
        .arg("-c")
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .ok()?;
    let input = serde_json::to_string(pairs).ok()?;
    child.stdin.take()?.write_all(input.as_bytes()).ok()?;
    let out = child.wait_with_output().ok()?;
    if !out.status.success() {
        return None;
    }
    serde_json::from_slice(&out.stdout).ok()
}

#[test]
fn diff_matches_python_difflib() {
    let mut rng = Lcg(42);
    let mut pairs = Vec::new();
    for size in [5usize, 12, 40, 120, 250, 400].iter().cycle().take(30) {
        let old = text(&mut rng, *size);
        let new = edit(&mut rng, &old);
        pairs.push((old.concat(), new.concat()));
    }
    // No trailing newline on either side; empty sides.
    pairs.push(("a\nb".into(), "a\nc".into()));
    pairs.push((String::new(), "x\ny\n".into()));
    pairs.push(("x\ny\n".into(), String::new()));
    let Some(expected) = python_diffs(&pairs) else {
        eprintln!("skipping: python3 is needed to compare with the real difflib");
        return;
    };
    assert_eq!(expected.len(), pairs.len());
    for (case, ((old, new), want)) in pairs.iter().zip(&expected).enumerate() {
        assert_eq!(&unified_diff(old, new), want, "case {case}");
    }
}
