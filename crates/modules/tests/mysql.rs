//! The `mysql` execution module and the `mysql_*` states against a real
//! MariaDB server each test starts in a temp dir (its own data directory,
//! socket and loopback port) and stops when it ends.
//!
//! `salt_3008_5_answers_replayed` replays `fixtures/mysql/steps.json` and
//! compares every return with what Salt 3008.5 (saltext-mysql 1.1.0,
//! PyMySQL) answered for the same steps on a server of the same package
//! (`fixtures/mysql/salt-3008.5.json`, recorded by `record.py` there).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;

use halite_modules::host::LogEvents;
use halite_modules::{table, Args, Host, LocalFileClient};
use halite_state::{LowChunk, StateCall, StateResult};
use serde_json::{json, Value};

/// A MariaDB server of the test's own; stopped on drop (also when the
/// test fails).
struct Server {
    child: Child,
    dir: tempfile::TempDir,
    port: u16,
}

fn find(prog: &str) -> Option<PathBuf> {
    ["/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin"]
        .iter()
        .map(|d| Path::new(d).join(prog))
        .find(|p| p.is_file())
}

impl Server {
    /// Starts a server, or says why it cannot and returns `None`.
    fn start() -> Option<Server> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            println!("skipped: needs root to run mariadbd as root in a temp dir");
            return None;
        }
        let (Some(install), Some(mariadbd)) = (find("mariadb-install-db"), find("mariadbd")) else {
            println!(
                "skipped: mariadb-server is not installed (scripts/install-deps.sh installs it)"
            );
            return None;
        };
        let dir = tempfile::Builder::new()
            .prefix("halite-mysql-")
            .tempdir()
            .unwrap();
        let data = dir.path().join("data");
        // The server's temporary tables go in the test's own dir, not the
        // shared /tmp: the bootstrap failed in CI when its temp table there
        // was gone before it deleted it ("Error on delete of
        // '/tmp/#sql-temptable-...'"), beside other tests using /tmp.
        let tmp = dir.path().join("tmp");
        std::fs::create_dir(&tmp).unwrap();
        let out = Command::new(install)
            .args(["--no-defaults", "--user=root", "--skip-test-db"])
            .arg(format!("--datadir={}", data.display()))
            .arg(format!("--tmpdir={}", tmp.display()))
            .arg("--auth-root-authentication-method=socket")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "mariadb-install-db: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(mariadbd)
            .arg("--no-defaults")
            .arg(format!("--datadir={}", data.display()))
            .arg(format!("--tmpdir={}", tmp.display()))
            .arg(format!("--socket={}", dir.path().join("sock").display()))
            .arg(format!("--pid-file={}", dir.path().join("pid").display()))
            .arg(format!(
                "--log-error={}",
                dir.path().join("err.log").display()
            ))
            .arg(format!("--port={port}"))
            .args([
                "--bind-address=127.0.0.1",
                "--user=root",
                "--innodb-buffer-pool-size=16M",
                "--skip-log-bin",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut server = Server { child, dir, port };
        server.wait_ready();
        Some(server)
    }

    fn sock(&self) -> String {
        self.dir.path().join("sock").display().to_string()
    }

    /// Waits until the server answers on its socket (it fails the test if
    /// the server exits first).
    fn wait_ready(&mut self) {
        for _ in 0..600 {
            if let Some(status) = self.child.try_wait().unwrap() {
                let log =
                    std::fs::read_to_string(self.dir.path().join("err.log")).unwrap_or_default();
                panic!("mariadbd exited ({status}): {log}");
            }
            if self.sql("SELECT 1").is_ok() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
        panic!("mariadbd did not answer on {}", self.sock());
    }

    /// Runs SQL as root through the client, for the test's own checks.
    fn sql(&self, sql: &str) -> Result<String, String> {
        let out = Command::new("mariadb")
            .args(["--no-defaults", "-uroot", "-N", "-B", "-r"])
            .arg(format!("--socket={}", self.sock()))
            .args(["-e", sql])
            .output()
            .map_err(|e| e.to_string())?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).to_string())
        }
    }

    /// A host whose config points `mysql.*` at this server as root.
    fn host(&self) -> Host {
        Host {
            opts: json!({"mysql.unix_socket": self.sock(), "mysql.user": "root"}),
            grains: json!({}),
            pillar: json!({}),
            files: Arc::new(LocalFileClient::default()),
            exec: table::exec_modules(),
            states: table::state_modules(),
            events: Arc::new(LogEvents),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // SAFETY: kill on our own child's pid.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let _ = self.child.wait();
    }
}

fn state(
    host: &Host,
    module: &str,
    fun: &str,
    name: &str,
    args: &Value,
    test: bool,
) -> StateResult {
    let mut chunk = serde_json::Map::new();
    chunk.insert("state".into(), json!(module));
    chunk.insert("name".into(), json!(name));
    chunk.insert("__id__".into(), json!(name));
    if let Value::Object(extra) = args {
        chunk.extend(extra.clone());
    }
    chunk.insert("fun".into(), json!(fun));
    let chunk = LowChunk::from(chunk);
    let call = StateCall {
        chunk: &chunk,
        test,
        env: host,
        sfun: None,
        reqs: None,
    };
    match host.states.get(module).expect(module).call(fun, &call) {
        Ok(r) => r,
        Err(e) => StateResult::fail(name, e.to_string()),
    }
}

fn exec(host: &Host, fun: &str, positional: Vec<Value>, kwargs: Value) -> Value {
    let kwargs = match kwargs {
        Value::Object(m) => m.into_iter().collect(),
        _ => Default::default(),
    };
    host.call(fun, &Args { positional, kwargs })
        .unwrap_or_else(|e| panic!("{fun}: {e}"))
}

fn result_json(r: &StateResult) -> Value {
    json!({"result": r.result, "comment": r.comment, "changes": Value::Object(r.changes.clone().into_iter().collect())})
}

fn fixture(name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/mysql")
        .join(name);
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn salt_3008_5_answers_replayed() {
    let Some(server) = Server::start() else {
        return;
    };
    let host = server.host();
    let steps = fixture("steps.json");
    let salt = fixture("salt-3008.5.json");
    let steps = steps["steps"].as_array().unwrap();
    let expected = salt["returns"].as_array().unwrap();
    assert_eq!(
        steps.len(),
        expected.len(),
        "record.py again after changing steps.json"
    );
    let mut mismatches = Vec::new();
    for (i, (step, want)) in steps.iter().zip(expected).enumerate() {
        let got = state(
            &host,
            step["state"].as_str().unwrap(),
            step["fun"].as_str().unwrap(),
            step["name"].as_str().unwrap(),
            &step["args"],
            step["test"].as_bool().unwrap(),
        );
        let got = result_json(&got);
        // Where Salt raised (a traceback as its comment), halite fails the
        // state with the server's error instead: result and changes agree.
        let salt_raised = want["comment"]
            .as_str()
            .is_some_and(|c| c.starts_with("An exception occurred in this state"));
        if salt_raised {
            let error = want["comment"]
                .as_str()
                .unwrap()
                .lines()
                .last()
                .unwrap_or("");
            let code = error.split(['(', ',']).nth(1).unwrap_or("").trim();
            let same = got["result"] == want["result"]
                && got["changes"] == want["changes"]
                && got["comment"]
                    .as_str()
                    .unwrap()
                    .contains(&format!("MySQL Error {code}: "));
            if !same {
                mismatches.push(format!(
                    "step {i} {step}:\n  salt:   {error}\n  halite: {got}"
                ));
            }
            continue;
        }
        if &got != want {
            mismatches.push(format!(
                "step {i} {step}:\n  salt:   {want}\n  halite: {got}"
            ));
        }
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}

#[test]
fn exec_functions_on_databases_users_grants_and_queries() {
    let Some(server) = Server::start() else {
        return;
    };
    let h = server.host();
    let none = json!({});
    let version = exec(&h, "mysql.version", vec![], none.clone());
    assert!(version.as_str().unwrap().contains("MariaDB"), "{version}");
    assert_eq!(
        exec(&h, "mysql.db_exists", vec![json!("halite_x")], none.clone()),
        json!(false)
    );
    assert_eq!(
        exec(&h, "mysql.db_create", vec![json!("halite_x")], none.clone()),
        json!(true)
    );
    // A second create is refused, as in Salt.
    assert_eq!(
        exec(&h, "mysql.db_create", vec![json!("halite_x")], none.clone()),
        json!(false)
    );
    assert!(exec(&h, "mysql.db_list", vec![], none.clone())
        .as_array()
        .unwrap()
        .contains(&json!("halite_x")));
    assert_eq!(
        server.sql("SHOW DATABASES LIKE 'halite_x'").unwrap(),
        "halite_x"
    );

    // query: DDL, DML with rows affected, SELECT with columns, NULL and quotes.
    let q = |sql: &str| {
        exec(
            &h,
            "mysql.query",
            vec![json!("halite_x"), json!(sql)],
            json!({}),
        )
    };
    assert_eq!(
        q("CREATE TABLE t (id INT, name VARCHAR(20))")["rows affected"],
        json!(0)
    );
    assert_eq!(
        q("INSERT INTO t VALUES (1, 'it''s'), (2, NULL), (3, 'NULL')")["rows affected"],
        json!(3)
    );
    let sel = q("SELECT id, name FROM t ORDER BY id");
    assert_eq!(sel["rows returned"], json!(3));
    assert_eq!(sel["columns"], json!(["id", "name"]));
    assert_eq!(
        sel["results"],
        json!([["1", "it's"], ["2", null], ["3", "NULL"]])
    );
    assert!(sel["query time"]["human"].as_str().unwrap().ends_with('s'));
    assert_eq!(
        q("UPDATE t SET name = 'x' WHERE id > 1")["rows affected"],
        json!(2)
    );
    assert_eq!(q("SELECT nope FROM t"), json!(false));
    assert_eq!(
        exec(&h, "mysql.db_tables", vec![json!("halite_x")], none.clone()),
        json!(["t"])
    );
    assert_eq!(
        exec(
            &h,
            "mysql.db_tables",
            vec![json!("halite_nodb")],
            none.clone()
        ),
        json!(false)
    );
    let status = exec(&h, "mysql.status", vec![], none.clone());
    assert!(status.get("Uptime").is_some(), "{status}");

    // Users: create with a password, check it, change it, inspect, remove.
    let user = |fun: &str, kw: Value| exec(&h, fun, vec![json!("halite_eu")], kw);
    assert_eq!(
        user("mysql.user_create", json!({"password": "s3cret'\""})),
        json!(true)
    );
    assert_eq!(
        user("mysql.user_exists", json!({"password": "s3cret'\""})),
        json!(true)
    );
    assert_eq!(
        user("mysql.user_exists", json!({"password": "other"})),
        json!(false)
    );
    assert_eq!(
        user("mysql.user_chpass", json!({"password": "other"})),
        json!(true)
    );
    assert_eq!(
        user("mysql.user_exists", json!({"password": "other"})),
        json!(true)
    );
    let info = user("mysql.user_info", json!({}));
    assert_eq!(info["User"], json!("halite_eu"));
    assert_eq!(info["Host"], json!("localhost"));
    assert!(exec(&h, "mysql.user_list", vec![], none.clone())
        .as_array()
        .unwrap()
        .contains(&json!({"User": "halite_eu", "Host": "localhost"})));

    // Grants.
    let grant = |fun: &str, g: &str| {
        exec(
            &h,
            fun,
            vec![json!(g), json!("halite_x.*"), json!("halite_eu")],
            json!({}),
        )
    };
    assert_eq!(grant("mysql.grant_exists", "select"), json!(false));
    assert_eq!(grant("mysql.grant_add", "select, insert"), json!(true));
    assert_eq!(grant("mysql.grant_exists", "insert,select"), json!(true));
    assert_eq!(
        user("mysql.user_grants", json!({})),
        json!([
            "GRANT USAGE ON *.* TO `halite_eu`@`localhost`",
            "GRANT SELECT, INSERT ON `halite\\_x`.* TO `halite_eu`@`localhost`"
        ])
    );
    assert_eq!(grant("mysql.grant_revoke", "insert"), json!(true));
    assert_eq!(grant("mysql.grant_exists", "select"), json!(true));
    assert_eq!(grant("mysql.grant_exists", "insert"), json!(false));
    assert_eq!(
        exec(
            &h,
            "mysql.verify_login",
            vec![json!("halite_eu"), json!("other")],
            json!({})
        ),
        json!(true)
    );
    assert_eq!(
        exec(
            &h,
            "mysql.verify_login",
            vec![json!("halite_eu"), json!("wrong")],
            json!({})
        ),
        json!(false)
    );
    let plugins = exec(&h, "mysql.plugins_list", vec![], json!({}));
    assert!(
        plugins
            .as_array()
            .unwrap()
            .contains(&json!({"name": "unix_socket", "status": "ACTIVE"})),
        "{plugins}"
    );
    let vars = exec(&h, "mysql.showglobal", vec![], json!({}));
    assert!(
        vars.as_array()
            .unwrap()
            .contains(&json!({"Variable_name": "port", "Value": server.port.to_string()})),
        "{vars}"
    );
    assert_eq!(user("mysql.user_remove", json!({})), json!(true));
    assert_eq!(user("mysql.user_exists", json!({})), json!(false));
    assert_eq!(
        exec(&h, "mysql.db_remove", vec![json!("halite_x")], none.clone()),
        json!(true)
    );
    assert_eq!(
        exec(&h, "mysql.db_exists", vec![json!("halite_x")], none),
        json!(false)
    );
}

#[test]
fn connection_arguments_tcp_password_and_default_file() {
    let Some(server) = Server::start() else {
        return;
    };
    server
        .sql("CREATE USER 'halite_tcp'@'127.0.0.1' IDENTIFIED BY 'pa\"ss w'; GRANT ALL ON *.* TO 'halite_tcp'@'127.0.0.1'")
        .unwrap();
    // No mysql.* config: everything from connection_* arguments, over TCP.
    let mut h = server.host();
    h.opts = json!({});
    let tcp = json!({
        "connection_host": "127.0.0.1",
        "connection_port": server.port,
        "connection_user": "halite_tcp",
        "connection_pass": "pa\"ss w",
    });
    let who = |h: &Host, kw: Value| {
        exec(
            h,
            "mysql.query",
            vec![json!(""), json!("SELECT CURRENT_USER()")],
            kw,
        )["results"][0][0]
            .clone()
    };
    assert_eq!(who(&h, tcp.clone()), json!("halite_tcp@127.0.0.1"));
    // A wrong password fails with Salt's wording of the server's error.
    let mut wrong = tcp.clone();
    wrong["connection_pass"] = json!("nope");
    let r = state(&h, "mysql_database", "present", "halite_y", &wrong, false);
    assert_eq!(r.result, Some(false));
    assert!(
        r.comment
            .starts_with("MySQL Error 1045: Access denied for user 'halite_tcp'@'localhost'")
            || r.comment
                .starts_with("MySQL Error 1045: Access denied for user 'halite_tcp'@'127.0.0.1'"),
        "{}",
        r.comment
    );
    // A default file gives the rest; connection_pass still wins over it.
    let cnf = server.dir.path().join("client.cnf");
    std::fs::write(
        &cnf,
        format!(
            "[client]\nhost=127.0.0.1\nport={}\nuser=halite_tcp\npassword=\"pa\\\"ss w\"\n",
            server.port
        ),
    )
    .unwrap();
    let file = json!({"connection_default_file": cnf.display().to_string()});
    assert_eq!(who(&h, file.clone()), json!("halite_tcp@127.0.0.1"));
    let mut file_wrong = file.clone();
    file_wrong["connection_pass"] = json!("nope");
    assert_eq!(
        exec(
            &h,
            "mysql.query",
            vec![json!(""), json!("SELECT 1")],
            file_wrong
        ),
        json!(false)
    );
    // The mysql.* config keys, from the pillar too.
    h.pillar = json!({"mysql.unix_socket": server.sock(), "mysql.user": "root"});
    assert_eq!(who(&h, json!({})), json!("root@localhost"));
    // Nothing reachable: the error is the state's comment.
    h.pillar =
        json!({"mysql.unix_socket": server.dir.path().join("nope.sock").display().to_string()});
    let r = state(&h, "mysql_user", "absent", "halite_z", &json!({}), false);
    assert_eq!(r.result, Some(false));
    assert!(r.comment.starts_with("MySQL Error 2002: "), "{}", r.comment);
}

#[test]
fn query_run_writes_its_output_file_unless_there() {
    let Some(server) = Server::start() else {
        return;
    };
    let h = server.host();
    server
        .sql("CREATE DATABASE halite_q; CREATE TABLE halite_q.t (k VARCHAR(9), v VARCHAR(9)); INSERT INTO halite_q.t VALUES ('a','1'),('b','2')")
        .unwrap();
    let out = server.dir.path().join("out.txt");
    let args = json!({
        "database": "halite_q",
        "query": "SELECT k, v FROM t ORDER BY k",
        "output": out.display().to_string(),
        "overwrite": false,
    });
    let t = state(&h, "mysql_query", "run", "q", &args, true);
    assert_eq!(t.result, None);
    assert_eq!(
        t.comment,
        format!(
            "Query would execute, storing result in file: {}",
            out.display()
        )
    );
    assert!(!out.exists());
    let r = state(&h, "mysql_query", "run", "q", &args, false);
    assert_eq!(r.result, Some(true), "{}", r.comment);
    assert_eq!(
        Value::Object(r.changes.clone().into_iter().collect()),
        json!({"query": format!("Executed. Output into {}", out.display())})
    );
    assert!(
        r.comment
            .contains("'results': [{'k': 'a', 'v': '1'}, {'k': 'b', 'v': '2'}]"),
        "{}",
        r.comment
    );
    assert_eq!(
        std::fs::read_to_string(&out).unwrap(),
        "k:a\nv:1\nk:b\nv:2\n"
    );
    let again = state(&h, "mysql_query", "run", "q", &args, false);
    assert_eq!(again.result, Some(true));
    assert!(again.changes.is_empty());
    assert_eq!(
        again.comment,
        format!("No execution needed. File {} already set", out.display())
    );
    // Without output: executed, nothing stored.
    let ins = json!({"database": "halite_q", "query": "INSERT INTO t VALUES ('c', '3')"});
    let r = state(&h, "mysql_query", "run", "ins", &ins, false);
    assert_eq!(
        Value::Object(r.changes.clone().into_iter().collect()),
        json!({"query": "Executed"})
    );
    assert!(r.comment.contains("'rows affected': 1"), "{}", r.comment);
    assert_eq!(server.sql("SELECT COUNT(*) FROM halite_q.t").unwrap(), "3");
}

/// (id, result, changes empty?) of every state of a `state.apply` return,
/// in run order.
fn outcome(ret: &Value) -> Vec<(String, Value, bool)> {
    let mut states: Vec<&Value> = ret.as_object().unwrap().values().collect();
    states.sort_by_key(|s| s["__run_num__"].as_u64());
    states
        .iter()
        .map(|s| {
            (
                s["__id__"].as_str().unwrap().to_string(),
                s["result"].clone(),
                s["changes"].as_object().is_none_or(|c| c.is_empty()),
            )
        })
        .collect()
}

#[test]
fn an_application_tree_through_state_apply_test_first_then_twice() {
    let Some(server) = Server::start() else {
        return;
    };
    let tree = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(tree.path().join("salt")).unwrap();
    std::fs::write(
        tree.path().join("salt/app.sls"),
        "app_db:\n  mysql_database.present:\n    - name: halite_app\n    - character_set: utf8mb4\n\
         app_user:\n  mysql_user.present:\n    - name: halite_app\n    - password: {{ 'app' ~ '-pw' }}\n    - require:\n      - mysql_database: app_db\n\
         app_grant:\n  mysql_grants.present:\n    - grant: select,insert,update\n    - database: halite_app.*\n    - user: halite_app\n    - require:\n      - mysql_user: app_user\n\
         app_seed:\n  mysql_query.run:\n    - database: halite_app\n    - query: CREATE TABLE IF NOT EXISTS t (id INT)\n    - output: {{ opts['seed_out'] }}\n    - overwrite: False\n    - require:\n      - mysql_grants: app_grant\n",
    )
    .unwrap();
    let seed_out = tree.path().join("seed.out");
    let opts = json!({
        "id": "db01",
        "file_client": "local",
        "local": true,
        "file_roots": {"base": [tree.path().join("salt")]},
        "pillar_roots": {"base": [tree.path().join("pillar")]},
        "mysql.unix_socket": server.sock(),
        "mysql.user": "root",
        "seed_out": seed_out.display().to_string(),
    });
    let (host, errors) = halite_modules::local::local_host(opts, Arc::new(LogEvents));
    assert!(errors.is_empty(), "{errors:?}");
    let apply = |test: bool| {
        let mut kwargs = serde_json::Map::new();
        if test {
            kwargs.insert("test".into(), json!(true));
        }
        host.call(
            "state.apply",
            &Args {
                positional: vec![json!("app")],
                kwargs: kwargs.into_iter().collect(),
            },
        )
        .unwrap()
    };
    let ids = ["app_db", "app_user", "app_grant", "app_seed"];
    let predicted = outcome(&apply(true));
    assert_eq!(
        predicted,
        ids.iter()
            .map(|i| (i.to_string(), Value::Null, true))
            .collect::<Vec<_>>()
    );
    assert_eq!(server.sql("SHOW DATABASES LIKE 'halite_app'").unwrap(), "");
    let first = outcome(&apply(false));
    assert_eq!(
        first,
        ids.iter()
            .map(|i| (i.to_string(), json!(true), false))
            .collect::<Vec<_>>()
    );
    assert_eq!(
        server
            .sql("SHOW GRANTS FOR 'halite_app'@'localhost'")
            .unwrap()
            .lines()
            .last()
            .unwrap(),
        "GRANT SELECT, INSERT, UPDATE ON `halite\\_app`.* TO `halite_app`@`localhost`"
    );
    assert!(seed_out.exists());
    let second = outcome(&apply(false));
    assert_eq!(
        second,
        ids.iter()
            .map(|i| (i.to_string(), json!(true), true))
            .collect::<Vec<_>>()
    );
}
