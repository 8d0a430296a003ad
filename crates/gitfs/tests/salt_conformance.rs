//! gitfs's listings against Salt 3008.5's own on the same repository and
//! config: `fileserver.envs`, `file_list` and `dir_list` of every saltenv,
//! with two remotes (one plain; one with `name`, `root`, `mountpoint`, a
//! `saltenv` mapping to a tag and `disable_saltenv_mapping`). Salt runs
//! in-process through its `RunnerClient` (GitPython provider), from
//! Salt's venv (`halite-salt-oracle`); skipped with a reason when it or GitPython is missing.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use halite_gitfs::Fileserver;
use halite_state::FileClient;
use serde_json::{json, Map, Value};

const PROBE: &str = r#"
import json, sys
import salt.config, salt.runner
opts = salt.config.master_config(sys.argv[1])
r = salt.runner.RunnerClient(opts)
out = {"update": r.cmd("fileserver.update", print_event=False),
       "envs": r.cmd("fileserver.envs", print_event=False)}
for env in out["envs"]:
    out["file_list " + env] = r.cmd("fileserver.file_list", kwarg={"saltenv": env}, print_event=False)
    out["dir_list " + env] = r.cmd("fileserver.dir_list", kwarg={"saltenv": env}, print_event=False)
print(json.dumps(out, sort_keys=True))
"#;

/// Salt's Python with GitPython, through the one helper every comparison
/// with Salt uses; prints why it is absent.
fn salt_python() -> Option<PathBuf> {
    halite_salt_oracle::Salt::with_modules("gitfs listings_match_salt_3008", &["salt", "git"])
        .map(|s| s.python())
}

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

#[test]
fn listings_match_salt_3008() {
    let Some(python) = salt_python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path();
    let work = t.join("work");
    std::fs::create_dir_all(&work).unwrap();
    git(&work, &["init", "-q", "-b", "master"]);
    write(&work.join("top.sls"), "base: {}\n");
    write(&work.join("web.sls"), "web\n");
    write(&work.join("salt/app/conf"), "conf\n");
    git(&work, &["add", "-A"]);
    git(&work, &["commit", "-q", "-m", "one"]);
    git(&work, &["tag", "v1"]);
    git(&work, &["checkout", "-q", "-b", "dev"]);
    write(&work.join("dev.sls"), "dev\n");
    git(&work, &["add", "-A"]);
    git(&work, &["commit", "-q", "-m", "dev"]);
    git(t, &["clone", "-q", "--bare", "work", "remote.git"]);
    let url = format!("file://{}/remote.git", t.display());
    let remotes = json!([
        url,
        {url.clone(): [
            {"name": "second"}, {"root": "salt"}, {"mountpoint": "salt://deep/mnt"},
            {"saltenv": [{"prod": [{"ref": "v1"}]}]}, {"disable_saltenv_mapping": true}
        ]}
    ]);
    // Salt's master config, in its own root.
    let root = t.join("salt-root");
    std::fs::create_dir_all(root.join("cache/proc")).unwrap();
    let conf = json!({
        "root_dir": root, "cachedir": root.join("cache"), "pki_dir": root.join("pki"),
        "sock_dir": root.join("sock"), "log_file": root.join("log"), "user": "root",
        "fileserver_backend": ["gitfs"], "gitfs_provider": "gitpython",
        "gitfs_remotes": remotes,
    });
    let conf_path = t.join("master");
    std::fs::write(&conf_path, serde_json::to_string(&conf).unwrap()).unwrap();
    let probe = t.join("probe.py");
    std::fs::write(&probe, PROBE).unwrap();
    let out = Command::new(python)
        .arg(&probe)
        .arg(&conf_path)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let salt: Value = serde_json::from_str(text.lines().last().unwrap_or("")).unwrap_or_else(|e| {
        panic!(
            "Salt's answer is not JSON ({e}): {text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });

    // halite on the same config.
    let cache = t.join("halite-cache");
    let opts = json!({"fileserver_backend": ["gitfs"], "gitfs_remotes": conf["gitfs_remotes"]});
    let fs = Fileserver::from_opts(&opts, BTreeMap::new(), &cache);
    let report = fs.gitfs().unwrap().update(None);
    let mut ours = Map::new();
    ours.insert(
        "update".into(),
        Value::Bool(report.iter().all(|(_, e)| e.is_none())),
    );
    let envs = fs.envs();
    ours.insert("envs".into(), json!(envs));
    for env in &envs {
        ours.insert(
            format!("file_list {env}"),
            json!(fs.list_files(env, "").unwrap()),
        );
        ours.insert(
            format!("dir_list {env}"),
            json!(fs.list_dirs(env, "").unwrap()),
        );
    }
    assert_eq!(Value::Object(ours), salt);
}
