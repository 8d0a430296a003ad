//! Pre/post states: rendered with the FORMULA's variables, run in order
//! around the file writes; a failing pre state (or a targeted state with no
//! master) stops the install with nothing written.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

mod common;

use std::fs;
use std::path::{Path, PathBuf};

use common::{formula_dir, simple_formula, RecordingRunner, Sandbox};
use halite_spm::{install_package, read_package, HaliteCallRunner, SpmError};

const HOOKS: &str = "\
listen_port: 8080
pre_local_state: |
  pre_{{ name }}:
    cmd.run:
      - name: echo {{ listen_port }} {{ version }}
post_local_state: |
  post_{{ name }}:
    file.exists:
      - name: {{ opts['formula_path'] }}/{{ top_level_dir | default(name) }}/init.sls
";

fn build_with(sandbox: &Sandbox, name: &str, extra: &str) -> PathBuf {
    let init = format!("{name}/init.sls");
    let dir = formula_dir(
        &sandbox.root().join("src"),
        &simple_formula(name, extra),
        &[(init.as_str(), "x: {}\n")],
    );
    halite_spm::build(&dir, &sandbox.config.spm_build_dir, &[])
        .expect("build")
        .path
}

#[test]
fn pre_and_post_local_states_run_in_order_with_formula_variables_rendered() {
    let sandbox = Sandbox::new();
    let spm = build_with(&sandbox, "web", HOOKS);
    let init = sandbox.config.formula_path.join("web/init.sls");
    let runner = RecordingRunner::new(init.clone());
    let mut db = sandbox.db();
    let report = install_package(
        &sandbox.config,
        &mut db,
        &read_package(&spm).expect("read"),
        false,
        &runner,
    )
    .expect("install");
    let calls = runner.calls();
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert_eq!(
        calls[0].0,
        "#!yaml\npre_web:\n  cmd.run:\n    - name: echo 8080 201506\n"
    );
    assert!(!calls[0].1, "the pre state runs before any file is written");
    assert_eq!(
        calls[1].0,
        format!(
            "#!yaml\npost_web:\n  file.exists:\n    - name: {}\n",
            init.display()
        )
    );
    assert!(
        calls[1].1,
        "the post state runs after the files are in place"
    );
    assert!(report
        .notes
        .iter()
        .any(|n| n.starts_with("pre_local_state:")));
}

#[test]
fn a_failing_pre_state_stops_the_install_with_nothing_written() {
    let sandbox = Sandbox::new();
    let spm = build_with(&sandbox, "web", HOOKS);
    let mut runner = RecordingRunner::new(sandbox.config.formula_path.join("web/init.sls"));
    runner.fail = true;
    let before = sandbox.snapshot();
    let mut db = sandbox.db();
    let err = install_package(
        &sandbox.config,
        &mut db,
        &read_package(&spm).expect("read"),
        false,
        &runner,
    )
    .expect_err("pre state fails");
    assert!(
        matches!(&err, SpmError::StateFailed { stage, .. } if stage == "pre_local_state"),
        "{err}"
    );
    assert!(err.to_string().contains("Command \"false\" run"), "{err}");
    assert_eq!(runner.calls().len(), 1, "the post state never runs");
    assert_eq!(sandbox.snapshot(), before);
    assert!(db.package("web").expect("query").is_none());
}

#[test]
fn a_targeted_state_without_a_master_is_refused_before_anything_runs() {
    let sandbox = Sandbox::new();
    let spm = build_with(
        &sandbox,
        "web",
        "post_tgt_state:\n  tgt: 'web*'\n  data: |\n    a:\n      test.nop\n",
    );
    let runner = RecordingRunner::new(PathBuf::from("/nonexistent"));
    let before = sandbox.snapshot();
    let mut db = sandbox.db();
    let err = install_package(
        &sandbox.config,
        &mut db,
        &read_package(&spm).expect("read"),
        false,
        &runner,
    )
    .expect_err("no master");
    assert!(err.to_string().starts_with("no master reachable:"), "{err}");
    assert!(err.to_string().contains("web*"), "{err}");
    assert!(runner.calls().is_empty());
    assert_eq!(sandbox.snapshot(), before);
}

#[test]
fn the_formula_renderer_decides_jinja_and_the_data_format() {
    let sandbox = Sandbox::new();
    let plain = "renderer: yaml\npre_local_state: |\n  keep_{{ name }}: {}\n";
    let spm = build_with(&sandbox, "plain", plain);
    let runner = RecordingRunner::new(PathBuf::from("/nonexistent"));
    let mut db = sandbox.db();
    install_package(
        &sandbox.config,
        &mut db,
        &read_package(&spm).expect("read"),
        false,
        &runner,
    )
    .expect("install");
    assert_eq!(
        runner.calls()[0].0,
        "#!yaml\nkeep_{{ name }}: {}\n",
        "no Jinja with the yaml renderer"
    );

    let json = "renderer: jinja|json\npre_local_state: '{\"{{ name }}\": {\"test.nop\": []}}'\n";
    let spm = build_with(&sandbox, "asjson", json);
    let runner = RecordingRunner::new(PathBuf::from("/nonexistent"));
    install_package(
        &sandbox.config,
        &mut db,
        &read_package(&spm).expect("read"),
        false,
        &runner,
    )
    .expect("install");
    assert_eq!(
        runner.calls()[0].0,
        "#!json\n{\"asjson\": {\"test.nop\": []}}"
    );

    let mako = "renderer: mako|yaml\npre_local_state: 'a: b'\n";
    let spm = build_with(&sandbox, "mako", mako);
    let runner = RecordingRunner::new(PathBuf::from("/nonexistent"));
    let err = install_package(
        &sandbox.config,
        &mut db,
        &read_package(&spm).expect("read"),
        false,
        &runner,
    )
    .expect_err("unsupported renderer");
    assert!(err.to_string().contains("mako"), "{err}");
    assert!(!sandbox.config.formula_path.join("mako").exists());
}

/// halite-call built in this workspace, when it is there and applies SLS.
/// Its runs keep their cache under `cachedir` (each test its own: the
/// state-run lock lives there).
fn working_halite_call(cachedir: &Path) -> Option<HaliteCallRunner> {
    let candidate = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/debug/halite-call");
    if !candidate.is_file() {
        println!(
            "skipping: {} is not built (cargo build -p halite-cli)",
            candidate.display()
        );
        return None;
    }
    let runner = HaliteCallRunner {
        halite_call: candidate,
        cachedir: Some(cachedir.to_path_buf()),
    };
    let probe = halite_spm::states::LocalStateRunner::apply(
        &runner,
        "#!yaml\nprobe:\n  test.succeed_without_changes: []\n",
        Path::new("/"),
    );
    match probe {
        Ok(outcome) if outcome.success => Some(runner),
        other => {
            println!("skipping: halite-call cannot apply a test state yet: {other:?}");
            None
        }
    }
}

#[test]
fn halite_call_applies_pre_and_post_states_for_real() {
    let sandbox = Sandbox::new();
    let Some(runner) = working_halite_call(&sandbox.root().join("caller-cache")) else {
        return;
    };
    let marker = sandbox.root().join("markers");
    let hooks = format!(
        "pre_local_state: |\n  pre_marker:\n    file.managed:\n      - name: {m}/pre\n      - makedirs: True\n      - contents: pre {{{{ name }}}}\n\
         post_local_state: |\n  post_marker:\n    file.managed:\n      - name: {m}/post\n      - makedirs: True\n      - contents: post {{{{ version }}}}\n",
        m = marker.display()
    );
    let spm = build_with(&sandbox, "real", &hooks);
    let mut db = sandbox.db();
    install_package(
        &sandbox.config,
        &mut db,
        &read_package(&spm).expect("read"),
        false,
        &runner,
    )
    .expect("install");
    assert_eq!(
        fs::read_to_string(marker.join("pre"))
            .expect("pre ran")
            .trim_end(),
        "pre real"
    );
    assert_eq!(
        fs::read_to_string(marker.join("post"))
            .expect("post ran")
            .trim_end(),
        "post 201506"
    );

    let failing = "pre_local_state: |\n  boom:\n    test.fail_without_changes: []\n";
    let spm = build_with(&sandbox, "failing", failing);
    let before = sandbox.snapshot();
    let err = install_package(
        &sandbox.config,
        &mut db,
        &read_package(&spm).expect("read"),
        false,
        &runner,
    )
    .expect_err("pre state fails for real");
    assert!(matches!(err, SpmError::StateFailed { .. }), "{err}");
    assert_eq!(sandbox.snapshot(), before);
}

#[test]
fn the_binary_finds_halite_call_beside_it_and_runs_the_hooks() {
    let sandbox = Sandbox::new();
    if working_halite_call(&sandbox.root().join("probe-cache")).is_none() {
        return;
    }
    let marker = sandbox.root().join("cli-marker");
    let hooks = format!(
        "pre_local_state: |\n  marker:\n    file.managed:\n      - name: {}\n      - contents: {{{{ summary }}}}\n",
        marker.display()
    );
    let spm = build_with(&sandbox, "hooked", &hooks);
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_halite-spm"))
        .arg("-c")
        .arg(sandbox.config_dir())
        .args(["-y", "local", "install"])
        .arg(&spm)
        .output()
        .expect("run halite-spm");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        fs::read_to_string(&marker).expect("hook ran").trim_end(),
        "The hooked formula"
    );
    assert!(sandbox
        .config
        .formula_path
        .join("hooked/init.sls")
        .is_file());
    // The hook ran with SPM's own cache, not the host minion's.
    assert!(sandbox.config.spm_cache_dir.join("caller").is_dir());
}
