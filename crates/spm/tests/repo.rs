//! Repositories: `create_repo`, `update_repo`, and `install NAME` pulling
//! dependencies first from file:// and http:// repositories.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

mod common;

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{formula_dir, no_states, simple_formula, Sandbox};
use halite_spm::{execute_plan, plan_install, InstallSource, SpmError};

/// Builds `name` version `version` into `repo_dir`.
fn publish(sandbox: &Sandbox, repo_dir: &Path, name: &str, version: &str, extra: &str) -> PathBuf {
    let formula =
        simple_formula(name, extra).replace("version: 201506", &format!("version: {version}"));
    let src = sandbox.root().join(format!("src-{name}-{version}"));
    let init = format!("{name}/init.sls");
    let dir = formula_dir(
        &src,
        &formula,
        &[(init.as_str(), &format!("{name}: {{}}\n"))],
    );
    halite_spm::build(&dir, repo_dir, &[]).expect("build").path
}

fn configure_repo(sandbox: &Sandbox, name: &str, url: &str) {
    fs::write(
        &sandbox.config.spm_repos_config,
        format!("{name}:\n  url: {url}\n"),
    )
    .expect("repos config");
}

fn run_cli(sandbox: &Sandbox, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_halite-spm"))
        .arg("-c")
        .arg(sandbox.config_dir())
        .args(args)
        .output()
        .expect("run halite-spm")
}

#[test]
fn create_repo_lists_the_newest_release_of_each_package() {
    let sandbox = Sandbox::new();
    let repo = sandbox.root().join("repo");
    publish(&sandbox, &repo, "base", "201501", "");
    publish(&sandbox, &repo, "base", "201612", "");
    publish(&sandbox, &repo, "base", "201601", "");
    publish(&sandbox, &repo, "web", "1", "dependencies: base\n");
    fs::write(repo.join("junk.spm"), "not a package").expect("junk");
    let listed = halite_spm::repo::create_repo(&repo).expect("create_repo");
    assert_eq!(listed, ["base", "web"]);
    let text = fs::read_to_string(repo.join("SPM-METADATA")).expect("metadata written");
    let metadata = halite_spm::yaml::load(&text).expect("metadata is YAML");
    assert_eq!(metadata["base"]["filename"], "base-201612-2.spm");
    assert_eq!(metadata["base"]["info"]["version"], 201612);
    assert_eq!(metadata["web"]["info"]["dependencies"], "base");
}

#[test]
fn install_by_name_installs_the_dependency_first() {
    let sandbox = Sandbox::new();
    let repo = sandbox.root().join("repo");
    publish(&sandbox, &repo, "base", "1", "");
    publish(
        &sandbox,
        &repo,
        "web",
        "1",
        "dependencies: base\noptional: php\nrecommended: ssl\n",
    );
    halite_spm::repo::create_repo(&repo).expect("create_repo");
    configure_repo(&sandbox, "local", &format!("file://{}", repo.display()));

    for spelling in ["update_repo", "update_repos", "refresh"] {
        let output = run_cli(&sandbox, &[spelling]);
        assert!(
            output.status.success(),
            "{spelling}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert_eq!(String::from_utf8_lossy(&output.stdout), "Updated local\n");
    }
    assert!(sandbox
        .config
        .spm_cache_dir
        .join("local.metadata.json")
        .is_file());
    let output = run_cli(&sandbox, &["-y", "install", "web"]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let base_at = stdout.find("... installing base").expect("base installed");
    let web_at = stdout.find("... installing web").expect("web installed");
    assert!(base_at < web_at, "dependency first: {stdout}");
    assert!(
        stdout.contains("The following dependencies are optional:\n\tphp"),
        "{stdout}"
    );
    assert!(
        stdout.contains("The following dependencies are recommended:\n\tssl"),
        "{stdout}"
    );
    let db = sandbox.db();
    assert!(db.package("base").expect("query").is_some());
    assert!(db.package("web").expect("query").is_some());
    assert!(sandbox.config.formula_path.join("base/init.sls").is_file());
    assert!(sandbox.config.formula_path.join("web/init.sls").is_file());
    assert!(
        sandbox
            .config
            .spm_cache_dir
            .join("local/web-1-2.spm")
            .is_file(),
        "downloaded into the cache"
    );

    let listed = run_cli(&sandbox, &["list", "packages"]);
    assert_eq!(String::from_utf8_lossy(&listed.stdout), "base\nweb\n");
}

#[test]
fn a_missing_dependency_refuses_the_install_with_nothing_written() {
    let sandbox = Sandbox::new();
    let repo = sandbox.root().join("repo");
    publish(
        &sandbox,
        &repo,
        "web",
        "1",
        "dependencies: base, missing-lib\n",
    );
    publish(&sandbox, &repo, "base", "1", "");
    halite_spm::repo::create_repo(&repo).expect("create_repo");
    configure_repo(&sandbox, "local", &format!("file://{}", repo.display()));
    let before = sandbox.snapshot();
    let db = sandbox.db();
    let err = plan_install(&sandbox.config, &db, &["web".to_string()], false).expect_err("refused");
    assert!(
        matches!(&err, SpmError::MissingDependencies { package, missing } if package == "web" && missing == "missing-lib"),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains("Cannot install web, the following dependencies are needed"),
        "{err}"
    );
    assert_eq!(sandbox.snapshot(), before);

    let err =
        plan_install(&sandbox.config, &db, &["nosuch".to_string()], false).expect_err("unknown");
    assert!(matches!(err, SpmError::NotInRepos(_)), "{err}");
}

#[test]
fn a_local_file_uses_the_repository_for_its_dependencies() {
    let sandbox = Sandbox::new();
    let repo = sandbox.root().join("repo");
    publish(&sandbox, &repo, "base", "1", "");
    halite_spm::repo::create_repo(&repo).expect("create_repo");
    configure_repo(&sandbox, "local", &format!("file://{}", repo.display()));
    let web = publish(
        &sandbox,
        &sandbox.root().join("elsewhere"),
        "web",
        "1",
        "dependencies: base\n",
    );
    let mut db = sandbox.db();
    let plan =
        plan_install(&sandbox.config, &db, &[web.display().to_string()], false).expect("plan");
    let order: Vec<(&str, bool)> = plan
        .order
        .iter()
        .map(|(n, s)| (n.as_str(), matches!(s, InstallSource::File(_))))
        .collect();
    assert_eq!(order, [("base", false), ("web", true)]);
    execute_plan(&sandbox.config, &mut db, &plan, false, &no_states()).expect("install");
    assert_eq!(db.packages().expect("list").len(), 2);
}

/// Serves files of `dir` over HTTP/1.1 on 127.0.0.1 until `requests` were answered.
fn serve(
    dir: PathBuf,
    requests: usize,
) -> (String, std::thread::JoinHandle<Vec<(String, String)>>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let handle = std::thread::spawn(move || {
        let mut seen = Vec::new();
        for stream in listener.incoming().take(requests) {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().expect("clone"));
            let mut request_line = String::new();
            reader.read_line(&mut request_line).expect("request line");
            let mut auth = String::new();
            loop {
                let mut header = String::new();
                if reader.read_line(&mut header).expect("header") <= 2 {
                    break;
                }
                if let Some(value) = header
                    .strip_prefix("authorization: ")
                    .or_else(|| header.strip_prefix("Authorization: "))
                {
                    auth = value.trim().to_string();
                }
            }
            let path = request_line
                .split_whitespace()
                .nth(1)
                .unwrap_or("/")
                .trim_start_matches('/')
                .to_string();
            seen.push((path.clone(), auth));
            match fs::read(dir.join(&path)) {
                Ok(body) => {
                    let head = format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                        body.len()
                    );
                    let _ = stream
                        .write_all(head.as_bytes())
                        .and_then(|()| stream.write_all(&body));
                }
                Err(_) => {
                    let _ = stream.write_all(
                        b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                    );
                }
            }
        }
        seen
    });
    (url, handle)
}

#[test]
fn an_http_repository_serves_metadata_and_packages() {
    let sandbox = Sandbox::new();
    let repo = sandbox.root().join("repo");
    publish(&sandbox, &repo, "base", "1", "");
    publish(&sandbox, &repo, "web", "1", "dependencies: base\n");
    halite_spm::repo::create_repo(&repo).expect("create_repo");
    // One request for the metadata, one per package.
    let (url, server) = serve(repo.clone(), 3);
    let repos_d = sandbox.root().join("etc/spm.repos.d");
    fs::create_dir_all(&repos_d).expect("mkdir");
    fs::write(
        repos_d.join("web.repo"),
        format!("webrepo:\n  url: {url}\n  username: alice\n  password: secret\n"),
    )
    .expect("repo file");
    fs::write(
        repos_d.join("off.repo"),
        "off:\n  url: file:///nonexistent\n  enabled: False\n",
    )
    .expect("repo file");

    let updated = halite_spm::repo::update_repos(&sandbox.config, None).expect("update");
    assert_eq!(updated, ["webrepo"]);
    let mut db = sandbox.db();
    let plan = plan_install(&sandbox.config, &db, &["web".to_string()], false).expect("plan");
    execute_plan(&sandbox.config, &mut db, &plan, false, &no_states()).expect("install");
    assert!(sandbox.config.formula_path.join("web/init.sls").is_file());
    let seen = server.join().expect("server");
    let paths: Vec<&str> = seen.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(paths, ["SPM-METADATA", "base-1-2.spm", "web-1-2.spm"]);
    // HTTP basic auth from the repo's username/password: base64("alice:secret").
    assert!(
        seen.iter()
            .all(|(_, auth)| auth == "Basic YWxpY2U6c2VjcmV0"),
        "{seen:?}"
    );
}
