//! gitfs and git_pillar against real repositories the tests create, with
//! the real `git` binary: file:// remotes and a `git daemon` on
//! 127.0.0.1, branches and tags as saltenvs, `root`/`mountpoint`, a
//! commit pushed after the first fetch served after an update, a remote
//! that became unreachable (the last good fetch stays served), one never
//! fetched (an error naming it), and git_pillar with two branches.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;

use halite_gitfs::pillar::GitPillar;
use halite_gitfs::{Fileserver, GitFs};
use halite_modules::pillar_source::PillarSource;
use halite_state::FileClient;
use halite_test_support::git::{git, ready, Daemon, Upstream};
use halite_test_support::sshd;
use serde_json::{json, Value};

/// master: top.sls + web.sls; branch dev: web.sls changed; tag v1 (annotated) at master.
fn states_repo() -> Upstream {
    let u = Upstream::new();
    u.write("top.sls", "base:\n  '*':\n    - web\n");
    u.write("web.sls", "master-web\n");
    u.write("salt/app/conf", "in root\n");
    u.commit("master");
    git(&u.work(), &["tag", "-a", "v1", "-m", "v1"]);
    git(&u.work(), &["checkout", "-q", "-b", "dev"]);
    u.write("web.sls", "dev-web\n");
    u.commit("dev");
    git(&u.work(), &["checkout", "-q", "master"]);
    u.push();
    u
}

fn read(fs: &Fileserver, path: &str, env: &str) -> Option<String> {
    fs.read_text(path, env).unwrap()
}

#[test]
fn branches_and_tags_are_saltenvs_and_backends_go_in_order() {
    if !ready() {
        return;
    }
    let up = states_repo();
    let cache = tempfile::tempdir().unwrap();
    let roots = tempfile::tempdir().unwrap();
    std::fs::write(roots.path().join("web.sls"), "roots-web\n").unwrap();
    std::fs::write(roots.path().join("only-roots.sls"), "roots\n").unwrap();
    let file_roots = BTreeMap::from([("base".to_string(), vec![roots.path().to_path_buf()])]);
    let opts = json!({"fileserver_backend": ["gitfs", "roots"], "gitfs_remotes": [up.url()]});
    let fs = Fileserver::from_opts(&opts, file_roots.clone(), cache.path());
    let report = fs.gitfs().unwrap().update(None);
    assert_eq!(report, vec![(up.url(), None)]);
    // gitfs first: its web.sls wins; roots still serves what gitfs lacks.
    assert_eq!(
        read(&fs, "web.sls", "base").as_deref(),
        Some("master-web\n")
    );
    assert_eq!(
        read(&fs, "only-roots.sls", "base").as_deref(),
        Some("roots\n")
    );
    assert_eq!(read(&fs, "web.sls", "dev").as_deref(), Some("dev-web\n"));
    assert_eq!(read(&fs, "web.sls", "v1").as_deref(), Some("master-web\n"));
    assert_eq!(
        read(&fs, "web.sls", "master"),
        None,
        "master is served as base"
    );
    assert_eq!(fs.envs(), vec!["base", "dev", "v1"]);
    assert_eq!(
        fs.list_files("base", "").unwrap(),
        vec!["only-roots.sls", "salt/app/conf", "top.sls", "web.sls"]
    );
    // The cache is <cachedir>/gitfs/<sha256 of the remote's id>/.
    let hash = halite_gitfs::repo::cache_name(&up.url());
    assert!(cache
        .path()
        .join("gitfs")
        .join(&hash)
        .join("repo.git")
        .is_dir());
    // roots first: its web.sls wins.
    let opts = json!({"fileserver_backend": ["roots", "gitfs"], "gitfs_remotes": [up.url()]});
    let fs = Fileserver::from_opts(&opts, file_roots, cache.path());
    assert_eq!(read(&fs, "web.sls", "base").as_deref(), Some("roots-web\n"));
    // The bundle's commit names: each remote's commit for each saltenv.
    let master = git(&up.work(), &["rev-parse", "master"]);
    let commits = fs.commits(&["base".to_string()].into());
    assert_eq!(
        commits,
        BTreeMap::from([(format!("{} base", up.url()), master)])
    );
}

#[test]
fn root_mountpoint_and_saltenv_mapping_per_remote() {
    if !ready() {
        return;
    }
    let up = states_repo();
    let cache = tempfile::tempdir().unwrap();
    let opts = json!({"fileserver_backend": ["gitfs"], "gitfs_remotes": [
        {up.url(): [{"root": "salt"}, {"mountpoint": "salt://deep/mnt"}, {"name": "apps"},
                    {"saltenv": [{"prod": [{"ref": "v1"}]}]}, {"disable_saltenv_mapping": true}]}
    ]});
    let fs = Fileserver::from_opts(&opts, BTreeMap::new(), cache.path());
    fs.gitfs().unwrap().update(Some("apps"));
    assert_eq!(
        read(&fs, "deep/mnt/app/conf", "base").as_deref(),
        Some("in root\n")
    );
    assert_eq!(read(&fs, "app/conf", "base"), None);
    assert_eq!(
        read(&fs, "deep/mnt/app/conf", "prod").as_deref(),
        Some("in root\n")
    );
    assert_eq!(fs.envs(), vec!["base", "prod"], "dev is not mapped");
    assert_eq!(
        fs.list_files("base", "deep").unwrap(),
        vec!["deep/mnt/app/conf"]
    );
    assert_eq!(
        fs.list_dirs("base", "").unwrap(),
        vec!["deep/mnt", "deep/mnt/app"]
    );
    // The whitelist hides a saltenv (and a blacklisted one is not served).
    let opts = json!({"fileserver_backend": ["gitfs"], "gitfs_saltenv_blacklist": ["v*"],
        "gitfs_remotes": [up.url()]});
    let fs = Fileserver::from_opts(&opts, BTreeMap::new(), cache.path());
    fs.gitfs().unwrap().update(None);
    assert_eq!(fs.envs(), vec!["base", "dev"]);
    assert_eq!(read(&fs, "web.sls", "v1"), None);
}

#[test]
fn a_pushed_commit_is_served_after_update_and_an_unreachable_remote_keeps_the_last_fetch() {
    if !ready() {
        return;
    }
    let up = states_repo();
    let cache = tempfile::tempdir().unwrap();
    let opts = json!({"fileserver_backend": ["gitfs"], "gitfs_remotes": [up.url()]});
    let fs = Fileserver::from_opts(&opts, BTreeMap::new(), cache.path());
    let gitfs: &Arc<GitFs> = fs.gitfs().unwrap();
    gitfs.update(None);
    assert_eq!(
        read(&fs, "web.sls", "base").as_deref(),
        Some("master-web\n")
    );
    up.write("web.sls", "second\n");
    let second = up.commit("second");
    up.push();
    // Not fetched yet: the old commit is still served (no git on the read path).
    assert_eq!(
        read(&fs, "web.sls", "base").as_deref(),
        Some("master-web\n")
    );
    // Another process's update (halite-run) is seen through the stamp.
    let other = Fileserver::from_opts(&opts, BTreeMap::new(), cache.path());
    other.gitfs().unwrap().update(None);
    assert_eq!(read(&fs, "web.sls", "base").as_deref(), Some("second\n"));
    assert_eq!(
        fs.commits(&["base".to_string()].into()).values().next(),
        Some(&second)
    );
    // The remote goes away: the update fails, names the remote, and the
    // last good fetch is still served.
    std::fs::rename(up.bare(), up.dir.path().join("gone.git")).unwrap();
    let report = gitfs.update(None);
    let err = report[0].1.as_deref().unwrap();
    assert!(err.contains(&up.url()), "{err}");
    assert_eq!(read(&fs, "web.sls", "base").as_deref(), Some("second\n"));
    let state = gitfs.repos()[0].state();
    assert!(
        state.error.is_some() && state.fetched.is_some(),
        "{state:?}"
    );
}

/// The background fetch runs every `gitfs_update_interval` all through a
/// fleet's compiles: a fetch that moves nothing must leave the readers'
/// view (refs, each saltenv's mounts) as it is, and one that moves a
/// branch must still replace it at once.
#[test]
fn a_fetch_that_moves_nothing_keeps_the_view_and_a_moved_branch_replaces_it() {
    if !ready() {
        return;
    }
    let up = states_repo();
    let cache = tempfile::tempdir().unwrap();
    let opts = json!({"fileserver_backend": ["gitfs"], "gitfs_remotes": [up.url()]});
    let fs = Fileserver::from_opts(&opts, BTreeMap::new(), cache.path());
    let gitfs: &Arc<GitFs> = fs.gitfs().unwrap();
    assert_eq!(gitfs.update(None), vec![(up.url(), None)]);
    assert_eq!(
        read(&fs, "web.sls", "base").as_deref(),
        Some("master-web\n")
    );
    let stamp = std::fs::metadata(cache.path().join("gitfs/generation"))
        .unwrap()
        .modified()
        .unwrap();
    let loaded = gitfs.reloads();
    let mounts = gitfs.mounts("base");
    // Fetches that find the remote as it was: nothing is reread, and the
    // saltenv's mounts are the very same (not worked out again).
    for _ in 0..3 {
        assert_eq!(gitfs.update(None), vec![(up.url(), None)]);
        // Another process's fetch (halite-run) that moved nothing, too.
        Fileserver::from_opts(&opts, BTreeMap::new(), cache.path())
            .gitfs()
            .unwrap()
            .update(None);
        assert_eq!(
            read(&fs, "web.sls", "base").as_deref(),
            Some("master-web\n")
        );
    }
    assert_eq!(
        gitfs.reloads(),
        loaded,
        "an unchanged fetch reloaded the refs"
    );
    assert!(Arc::ptr_eq(&mounts, &gitfs.mounts("base")));
    assert_eq!(
        std::fs::metadata(cache.path().join("gitfs/generation"))
            .unwrap()
            .modified()
            .unwrap(),
        stamp
    );
    // A pushed commit moves the branch: the next update replaces the view
    // and the next read serves the new commit's file.
    up.write("web.sls", "moved\n");
    let moved = up.commit("moved");
    up.push();
    assert_eq!(gitfs.update(None), vec![(up.url(), None)]);
    assert_eq!(read(&fs, "web.sls", "base").as_deref(), Some("moved\n"));
    assert!(gitfs.reloads() > loaded);
    let now = gitfs.mounts("base");
    assert!(!Arc::ptr_eq(&mounts, &now));
    assert_eq!(now[0].commit, moved);
    // A tag moving is a change too (the saltenv v1).
    git(&up.work(), &["tag", "-f", "-a", "v1", "-m", "v1 again"]);
    up.push();
    let before = gitfs.reloads();
    gitfs.update(None);
    assert_eq!(read(&fs, "web.sls", "v1").as_deref(), Some("moved\n"));
    assert!(gitfs.reloads() > before);
}

#[test]
fn a_remote_never_fetched_is_named_in_the_error() {
    if !ready() {
        return;
    }
    let cache = tempfile::tempdir().unwrap();
    let url = "git://127.0.0.1:9/nothing-listens-here";
    let opts = json!({"fileserver_backend": ["gitfs"], "gitfs_remotes": [url]});
    let fs = Fileserver::from_opts(&opts, BTreeMap::new(), cache.path());
    let report = fs.gitfs().unwrap().update(None);
    assert!(report[0].1.is_some());
    let err = fs.read_text("top.sls", "base").unwrap_err().to_string();
    assert!(
        err.contains(url) && err.contains("never been fetched"),
        "{err}"
    );
}

#[test]
fn https_credentials_never_reach_errors_or_the_cache() {
    if !ready() {
        return;
    }
    let cache = tempfile::tempdir().unwrap();
    // Nothing listens on port 9: the fetch fails, and its error is what we check.
    let opts = json!({"fileserver_backend": ["gitfs"],
        "gitfs_user": "alice", "gitfs_password": "pw-s3cret-42", "gitfs_insecure_auth": true,
        "gitfs_remotes": ["http://127.0.0.1:9/r.git", "https://bob:hunter2pass@127.0.0.1:9/s.git"]});
    let fs = Fileserver::from_opts(&opts, BTreeMap::new(), cache.path());
    let report = fs.gitfs().unwrap().update(None);
    let text = format!("{report:?}");
    assert!(report.iter().all(|(_, e)| e.is_some()), "{text}");
    assert!(
        !text.contains("pw-s3cret-42") && !text.contains("hunter2pass"),
        "{text}"
    );
    let out = Command::new("grep")
        .args(["-r", "-l", "-e", "pw-s3cret-42", "-e", "hunter2pass"])
        .arg(cache.path())
        .output()
        .unwrap();
    assert!(
        out.stdout.is_empty(),
        "secrets on disk: {}",
        String::from_utf8_lossy(&out.stdout)
    );
}

fn pillar_host(opts: Value) -> halite_modules::Host {
    halite_modules::Host {
        opts,
        grains: json!({"id": "web1", "os": "Debian"}),
        pillar: json!({}),
        files: Arc::new(halite_modules::LocalFileClient::default()),
        exec: halite_modules::table::exec_modules(),
        states: halite_modules::table::state_modules(),
        events: Arc::new(halite_modules::host::LogEvents),
    }
}

#[test]
fn git_pillar_over_git_daemon_two_branches_are_two_pillarenvs() {
    if !ready() {
        return;
    }
    let up = Upstream::new();
    up.write("pillar/top.sls", "base:\n  '*':\n    - common\n");
    up.write("pillar/common.sls", "role: base-role\nshared: {a: 1}\n");
    up.commit("base");
    git(&up.work(), &["checkout", "-q", "-b", "prod"]);
    up.write("pillar/top.sls", "prod:\n  '*':\n    - common\n");
    up.write("pillar/common.sls", "role: prod-role\nshared: {b: 2}\n");
    up.commit("prod");
    up.push();
    let daemon = Daemon::start(up.dir.path(), "remote.git");
    let url = daemon.url("remote.git");
    let cache = tempfile::tempdir().unwrap();
    let opts = json!({"id": "web1", "ext_pillar": [{"git": [
        format!("master {url}"),
        {format!("prod {url}"): [{"root": "pillar"}]}
    ]}], "git_pillar_root": "pillar"});
    let sources = GitPillar::from_opts(&opts, cache.path());
    assert_eq!(sources.len(), 1);
    let report = sources[0].update();
    assert!(report.iter().all(|(_, e)| e.is_none()), "{report:?}");
    // No pillarenv: both environments, merged in order.
    let part = sources[0].compile(&pillar_host(opts.clone()));
    assert!(part.errors.is_empty(), "{:?}", part.errors);
    assert_eq!(part.data["role"], "prod-role");
    assert_eq!(part.data["shared"], json!({"a": 1, "b": 2}));
    // pillarenv=prod: the prod branch alone.
    let mut prod = opts.clone();
    prod["pillarenv"] = json!("prod");
    let part = sources[0].compile(&pillar_host(prod));
    assert_eq!(part.data, json!({"role": "prod-role", "shared": {"b": 2}}));
    // pillarenv=base: master alone.
    let mut base = opts.clone();
    base["pillarenv"] = json!("base");
    let part = sources[0].compile(&pillar_host(base));
    assert_eq!(part.data, json!({"role": "base-role", "shared": {"a": 1}}));
    // __env__ follows the pillarenv.
    let env_opts = json!({"id": "web1", "pillarenv": "prod", "git_pillar_root": "pillar",
        "ext_pillar": [{"cmd_json": "echo {}"}, {"git": [format!("__env__ {url}")]}]});
    let sources = GitPillar::from_opts(&env_opts, cache.path());
    assert_eq!(sources.len(), 1, "the cmd_json entry is another source's");
    assert_eq!(sources[0].position(), 1);
    sources[0].update();
    let part = sources[0].compile(&pillar_host(env_opts));
    assert_eq!(part.data["role"], "prod-role");
    // A remote never fetched: an error naming it, no data.
    let bad = json!({"id": "web1", "ext_pillar": [{"git": ["master git://127.0.0.1:9/none"]}]});
    let sources = GitPillar::from_opts(&bad, cache.path());
    let part = sources[0].compile(&pillar_host(bad));
    assert!(
        part.errors[0].contains("git://127.0.0.1:9/none"),
        "{:?}",
        part.errors
    );
}

/// `git http-backend` behind HTTP basic auth on 127.0.0.1 (a small
/// Python server; over TLS when given a certificate and its key), stopped
/// on drop.
struct HttpGit {
    child: Child,
    port: u16,
}

const HTTP_SERVER: &str = r#"
import base64, http.server, os, subprocess, sys
root, port, user, password = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
want = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def handle_one(self, body):
        if self.headers.get("Authorization") != want:
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="git"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        path, _, query = self.path.partition("?")
        env = dict(os.environ, GIT_PROJECT_ROOT=root, GIT_HTTP_EXPORT_ALL="1",
                   PATH_INFO=path, QUERY_STRING=query, REQUEST_METHOD=self.command,
                   CONTENT_TYPE=self.headers.get("Content-Type", ""),
                   CONTENT_LENGTH=str(len(body)), REMOTE_USER=user)
        out = subprocess.run(["git", "http-backend"], input=body, env=env, capture_output=True).stdout
        head, _, rest = out.partition(b"\r\n\r\n")
        status = 200
        headers = []
        for line in head.decode().split("\r\n"):
            k, _, v = line.partition(":")
            if k.lower() == "status":
                status = int(v.split()[0])
            elif k:
                headers.append((k, v.strip()))
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(rest)))
        self.end_headers()
        self.wfile.write(rest)
    def do_GET(self):
        self.handle_one(b"")
    def do_POST(self):
        self.handle_one(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
srv = http.server.ThreadingHTTPServer(("127.0.0.1", port), H)
if len(sys.argv) > 6:
    import ssl
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(sys.argv[5], sys.argv[6])
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
srv.serve_forever()
"#;

impl HttpGit {
    fn start(root: &Path, user: &str, password: &str) -> Option<Self> {
        Self::start_with(root, user, password, &[])
    }

    /// The server over TLS with `cert` and `key` (PEM files).
    fn start_tls(root: &Path, user: &str, password: &str, cert: &Path, key: &Path) -> Option<Self> {
        Self::start_with(root, user, password, &[cert, key])
    }

    fn start_with(root: &Path, user: &str, password: &str, tls: &[&Path]) -> Option<Self> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new("python3")
            .args(["-c", HTTP_SERVER])
            .arg(root)
            .arg(port.to_string())
            .args([user, password])
            .args(tls)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        let server = HttpGit { child, port };
        for _ in 0..200 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Some(server);
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        None
    }
}

impl Drop for HttpGit {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A self-signed certificate for 127.0.0.1 made by `openssl` in `dir`:
/// (certificate, key), or `None` when openssl is not installed.
fn self_signed(dir: &Path) -> Option<(std::path::PathBuf, std::path::PathBuf)> {
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let made = Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
        ])
        .args([
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .ok()?;
    made.success().then_some((cert, key))
}

/// An https remote with `gitfs_user`/`gitfs_password` (no
/// `gitfs_insecure_auth` needed over TLS): a certificate git cannot
/// verify is refused with the remote named (`gitfs_ssl_verify` defaults
/// on, as in Salt); with `gitfs_ssl_verify: False` the fetch goes through
/// and the password is on no error and in no file of the cache.
#[test]
fn https_remotes_fetch_with_gitfs_user_and_password_and_verify_the_certificate() {
    if !ready() {
        return;
    }
    let up = states_repo();
    let tls = tempfile::tempdir().unwrap();
    let Some((cert, key)) = self_signed(tls.path()) else {
        println!("skipped: openssl is needed for the loopback https git server");
        return;
    };
    let Some(server) = HttpGit::start_tls(up.dir.path(), "alice", "pw-tls-55", &cert, &key) else {
        println!("skipped: python3 is needed for the loopback https git server");
        return;
    };
    let url = format!("https://127.0.0.1:{}/remote.git", server.port);
    let cache = tempfile::tempdir().unwrap();
    let opts = |verify: bool| {
        json!({"fileserver_backend": ["gitfs"], "gitfs_remotes": [url],
            "gitfs_user": "alice", "gitfs_password": "pw-tls-55", "gitfs_ssl_verify": verify})
    };
    let fs = Fileserver::from_opts(&opts(true), BTreeMap::new(), cache.path());
    let report = fs.gitfs().unwrap().update(None);
    let err = report[0]
        .1
        .clone()
        .expect("a self-signed certificate is refused");
    assert!(err.contains(&url) && !err.contains("pw-tls-55"), "{err}");
    assert!(err.to_lowercase().contains("certificate"), "{err}");
    let fs = Fileserver::from_opts(&opts(false), BTreeMap::new(), cache.path());
    let report = fs.gitfs().unwrap().update(None);
    assert_eq!(report, vec![(url.clone(), None)]);
    assert_eq!(read(&fs, "web.sls", "dev").as_deref(), Some("dev-web\n"));
    let out = Command::new("grep")
        .args(["-r", "-l", "pw-tls-55"])
        .arg(cache.path())
        .output()
        .unwrap();
    assert!(
        out.stdout.is_empty(),
        "the password is on disk: {}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn http_remotes_fetch_with_gitfs_user_and_password() {
    if !ready() {
        return;
    }
    let up = states_repo();
    let Some(server) = HttpGit::start(up.dir.path(), "alice", "pw-right-77") else {
        println!("skipped: python3 is needed for the loopback HTTP git server");
        return;
    };
    let url = format!("http://127.0.0.1:{}/remote.git", server.port);
    let cache = tempfile::tempdir().unwrap();
    let opts = |password: &str| {
        json!({"fileserver_backend": ["gitfs"], "gitfs_remotes": [url],
            "gitfs_user": "alice", "gitfs_password": password, "gitfs_insecure_auth": true})
    };
    // A wrong password: refused, and the error does not show it.
    let fs = Fileserver::from_opts(&opts("pw-wrong-99"), BTreeMap::new(), cache.path());
    let report = fs.gitfs().unwrap().update(None);
    let err = report[0].1.clone().expect("a wrong password fails");
    assert!(err.contains(&url) && !err.contains("pw-wrong-99"), "{err}");
    // The right one: fetched through the askpass helper.
    let fs = Fileserver::from_opts(&opts("pw-right-77"), BTreeMap::new(), cache.path());
    let report = fs.gitfs().unwrap().update(None);
    assert_eq!(report, vec![(url.clone(), None)]);
    assert_eq!(read(&fs, "web.sls", "dev").as_deref(), Some("dev-web\n"));
    let out = Command::new("grep")
        .args(["-r", "-l", "-e", "pw-right-77", "-e", "pw-wrong-99"])
        .arg(cache.path())
        .output()
        .unwrap();
    assert!(
        out.stdout.is_empty(),
        "secrets on disk: {}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// An sshd of the test's own in `dir` that accepts only the key pair at
/// `key`, and the ssh:// url of `up`'s bare repository on it; `None` (the
/// skip reason printed) when sshd is not installed.
fn ssh_remote(dir: &Path, key: &Path, up: &Upstream) -> Option<(sshd::Sshd, String)> {
    let Some(server) = sshd::Sshd::authorizing(dir, key) else {
        println!("skipped: sshd is missing (openssh-server, scripts/install-deps.sh)");
        return None;
    };
    let url = server.url(&up.bare());
    Some((server, url))
}

/// Master options serving `url` through gitfs with the key pair at `key`
/// (`gitfs_pubkey` is its `.pub`) and, when given, its `gitfs_passphrase`.
fn ssh_opts(url: &str, key: &Path, passphrase: Option<&str>) -> Value {
    let mut opts = json!({"fileserver_backend": ["gitfs"], "gitfs_remotes": [url],
        "gitfs_pubkey": format!("{}.pub", key.display()),
        "gitfs_privkey": key.display().to_string()});
    if let Some(passphrase) = passphrase {
        opts["gitfs_passphrase"] = json!(passphrase);
    }
    opts
}

#[test]
fn ssh_remotes_fetch_with_gitfs_pubkey_and_privkey() {
    if !ready() {
        return;
    }
    let up = states_repo();
    let keys = tempfile::tempdir().unwrap();
    let identity = keys.path().join("id_gitfs");
    sshd::keygen(&identity);
    let stranger = keys.path().join("id_stranger");
    sshd::keygen(&stranger);
    let Some((_server, url)) = ssh_remote(keys.path(), &identity, &up) else {
        return;
    };
    let cache = tempfile::tempdir().unwrap();
    let opts = |key: &Path| ssh_opts(&url, key, None);
    // A key the server does not know: refused, and the error names the remote.
    let fs = Fileserver::from_opts(&opts(&stranger), BTreeMap::new(), cache.path());
    let report = fs.gitfs().unwrap().update(None);
    let err = report[0].1.clone().expect("an unknown key is refused");
    assert!(err.contains(&url), "{err}");
    // The authorized key: fetched over ssh, branches are saltenvs.
    let fs = Fileserver::from_opts(&opts(&identity), BTreeMap::new(), cache.path());
    let report = fs.gitfs().unwrap().update(None);
    assert_eq!(report, vec![(url.clone(), None)]);
    assert_eq!(
        read(&fs, "web.sls", "base").as_deref(),
        Some("master-web\n")
    );
    assert_eq!(read(&fs, "web.sls", "dev").as_deref(), Some("dev-web\n"));
    // A pushed commit is served after the next update.
    up.write("web.sls", "pushed-web\n");
    up.commit("pushed");
    up.push();
    let report = fs.gitfs().unwrap().update(None);
    assert_eq!(report, vec![(url.clone(), None)]);
    assert_eq!(
        read(&fs, "web.sls", "base").as_deref(),
        Some("pushed-web\n")
    );
}

/// `gitfs_passphrase`: a key protected by a passphrase reaches an sshd of
/// the test's own through `SSH_ASKPASS`; a wrong passphrase fails with the
/// remote named, and neither passphrase is in an error or a cache file.
#[test]
fn ssh_remotes_fetch_with_a_passphrase_protected_key() {
    if !ready() {
        return;
    }
    let up = states_repo();
    let keys = tempfile::tempdir().unwrap();
    let identity = keys.path().join("id_locked");
    let made = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "pass-Phrase-61", "-f"])
        .arg(&identity)
        .status()
        .unwrap();
    assert!(made.success(), "ssh-keygen");
    let Some((_server, url)) = ssh_remote(keys.path(), &identity, &up) else {
        return;
    };
    let cache = tempfile::tempdir().unwrap();
    let opts = |passphrase: &str| ssh_opts(&url, &identity, Some(passphrase));
    let fs = Fileserver::from_opts(&opts("wrong-Phrase-62"), BTreeMap::new(), cache.path());
    let report = fs.gitfs().unwrap().update(None);
    let err = report[0].1.clone().expect("a wrong passphrase fails");
    assert!(
        err.contains(&url) && !err.contains("wrong-Phrase-62"),
        "{err}"
    );
    let fs = Fileserver::from_opts(&opts("pass-Phrase-61"), BTreeMap::new(), cache.path());
    let report = fs.gitfs().unwrap().update(None);
    assert_eq!(report, vec![(url.clone(), None)]);
    assert_eq!(read(&fs, "web.sls", "dev").as_deref(), Some("dev-web\n"));
    let out = Command::new("grep")
        .args(["-r", "-l", "-e", "pass-Phrase-61", "-e", "wrong-Phrase-62"])
        .arg(cache.path())
        .output()
        .unwrap();
    assert!(
        out.stdout.is_empty(),
        "a passphrase is on disk: {}",
        String::from_utf8_lossy(&out.stdout)
    );
}
