//! The `postgres_*` states and the `postgres` execution module against a
//! real PostgreSQL server the test starts itself: `initdb` into a temp
//! dir as the `postgres` OS user, `pg_ctl start` on 127.0.0.1 and a free
//! port with its socket in the temp dir, stopped by a Drop guard.
//!
//! The states run the steps of `fixtures/postgres/steps.json` in order
//! (each `test=True` first, applied, applied again) and must return what
//! Salt 3008.5 returned for the same steps against the same kind of
//! server (`fixtures/postgres/record.py` recorded it): result, comment
//! and changes, exactly.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

mod common;

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use halite_modules::{Args, Host};
use halite_state::{LowChunk, StateCall, StateResult};
use serde_json::{json, Value};

/// A PostgreSQL server of the test's own, stopped when dropped.
struct Server {
    bin: PathBuf,
    dir: tempfile::TempDir,
    port: u16,
    uid: nix::unistd::Uid,
    gid: nix::unistd::Gid,
}

impl Server {
    /// Why the test cannot run here, if it cannot.
    fn missing() -> Option<String> {
        if !nix::unistd::Uid::effective().is_root() {
            return Some("needs root (initdb runs as the postgres user)".into());
        }
        if halite_modules::grains::hw::which("psql").is_none() {
            return Some("needs psql (scripts/install-deps.sh installs postgresql)".into());
        }
        if Self::bindir().is_none() {
            return Some("needs initdb under /usr/lib/postgresql/*/bin (postgresql)".into());
        }
        if nix::unistd::User::from_name("postgres")
            .ok()
            .flatten()
            .is_none()
        {
            return Some("needs the postgres OS user (postgresql package)".into());
        }
        None
    }

    /// The newest `/usr/lib/postgresql/<v>/bin` holding `initdb`.
    fn bindir() -> Option<PathBuf> {
        let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
            .ok()?
            .flatten()
            .filter_map(|e| {
                let v = e.file_name().to_str()?.parse::<u32>().ok()?;
                let bin = e.path().join("bin");
                bin.join("initdb").is_file().then_some((v, bin))
            })
            .collect();
        found.sort();
        found.pop().map(|(_, b)| b)
    }

    fn as_postgres(&self, prog: &str) -> Command {
        let mut c = Command::new(self.bin.join(prog));
        c.uid(self.uid.as_raw())
            .gid(self.gid.as_raw())
            .current_dir(self.dir.path());
        c
    }

    /// initdb (local socket: peer, TCP: md5 passwords) and start.
    fn start() -> Server {
        let user = nix::unistd::User::from_name("postgres").unwrap().unwrap();
        let dir = tempfile::Builder::new()
            .prefix("halite-pg-")
            .tempdir_in("/tmp")
            .unwrap();
        std::fs::set_permissions(
            dir.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        nix::unistd::chown(dir.path(), Some(user.uid), Some(user.gid)).unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let server = Server {
            bin: Self::bindir().unwrap(),
            dir,
            port,
            uid: user.uid,
            gid: user.gid,
        };
        let data = server.data();
        let out = server
            .as_postgres("initdb")
            .args([
                "-D",
                &data,
                "-U",
                "postgres",
                "--auth-local=peer",
                "--auth-host=md5",
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "initdb: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let opts = format!("-k {} -p {port} -h 127.0.0.1", server.socket());
        let log = format!("{}/log", server.socket());
        let out = server
            .as_postgres("pg_ctl")
            .args(["-D", &data, "-l", &log, "-o", &opts, "-w", "start"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "pg_ctl start: {}{}",
            String::from_utf8_lossy(&out.stdout),
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        server
    }

    fn data(&self) -> String {
        format!("{}/data", self.socket())
    }

    fn socket(&self) -> String {
        self.dir.path().display().to_string()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self
            .as_postgres("pg_ctl")
            .args(["-D", &self.data(), "-m", "immediate", "-w", "stop"])
            .output();
    }
}

fn host() -> Host {
    common::host_with(json!({}), json!({"os_family": "Debian"}))
}

fn run_state(host: &Host, state: &str, name: &str, args: &Value, test: bool) -> StateResult {
    let (module, fun) = state.split_once('.').unwrap();
    let mut chunk = args.as_object().unwrap().clone();
    chunk.insert("state".into(), json!(module));
    chunk.insert("name".into(), json!(name));
    chunk.insert("__id__".into(), json!(name));
    chunk.insert("fun".into(), json!(fun));
    let chunk = LowChunk::from(chunk);
    let call = StateCall {
        chunk: &chunk,
        test,
        env: host,
        sfun: None,
        reqs: None,
    };
    host.states
        .get(module)
        .unwrap_or_else(|| panic!("no state module {module}"))
        .call(fun, &call)
        .unwrap_or_else(|e| panic!("{state} {name}: {e}"))
}

/// `args` with the server's socket dir and port in place of the
/// placeholders of steps.json.
fn placed(args: &Value, server: &Server) -> Value {
    let text = args
        .to_string()
        .replace("@SOCKET@", &server.socket())
        .replace("@PORT@", &server.port.to_string());
    serde_json::from_str(&text).unwrap()
}

fn call(host: &Host, fun: &str, args: Value) -> Value {
    let args = Args {
        positional: Vec::new(),
        kwargs: args.as_object().unwrap().clone(),
    };
    host.call(fun, &args)
        .unwrap_or_else(|e| panic!("{fun}: {e}"))
}

#[test]
fn postgres_states_match_salt_step_by_step_on_a_real_server() {
    if let Some(why) = Server::missing() {
        println!("skipped: {why}");
        return;
    }
    let server = Server::start();
    let host = host();
    let steps: Vec<Value> = serde_json::from_str(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/postgres/steps.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let mut previous: Option<(String, String, Value, bool)> = None;
    for (i, step) in steps.iter().enumerate() {
        let state = step["state"].as_str().unwrap();
        let name = step["name"].as_str().unwrap();
        let test = step["test"].as_bool().unwrap();
        let args = placed(&step["args"], &server);
        let got = run_state(&host, state, name, &args, test);
        let got = json!({
            "result": got.result,
            "comment": got.comment,
            "changes": Value::Object(got.changes.clone()),
        });
        assert_eq!(
            got, step["salt"],
            "step {i}: {state} {name} test={test}: halite (left) and Salt 3008.5 (right) differ"
        );
        // The same state applied twice in a row: the second run changes nothing.
        let key = (state.to_string(), name.to_string(), args.clone(), test);
        if !test && previous.as_ref() == Some(&key) {
            assert_eq!(
                got["changes"],
                json!({}),
                "step {i}: second run of {state} {name}"
            );
        }
        previous = Some(key);
    }
}

#[test]
fn postgres_exec_functions_reach_the_server_as_salt_does() {
    if let Some(why) = Server::missing() {
        println!("skipped: {why}");
        return;
    }
    let server = Server::start();
    let host = host();
    let conn = json!({"host": server.socket(), "port": server.port});
    let with = |extra: Value| {
        let mut m = conn.as_object().unwrap().clone();
        m.extend(extra.as_object().unwrap().clone());
        Value::Object(m)
    };
    let version = call(&host, "postgres.version", conn.clone());
    assert!(version
        .as_str()
        .unwrap()
        .chars()
        .next()
        .unwrap()
        .is_ascii_digit());
    assert_eq!(
        call(
            &host,
            "postgres.user_create",
            with(json!({"username": "halite_t_app", "rolepassword": "pa'ss", "createdb": true}))
        ),
        json!(true)
    );
    // A second create is refused, as Salt's returns False.
    assert_eq!(
        call(
            &host,
            "postgres.user_create",
            with(json!({"username": "halite_t_app"}))
        ),
        json!(false)
    );
    let role = call(
        &host,
        "postgres.role_get",
        with(json!({"name": "halite_t_app"})),
    );
    assert_eq!(role["can create databases"], json!(true));
    assert_eq!(role["can login"], json!(true));
    // Over TCP with the role's password (md5 auth): psql runs as root
    // with a PGPASSFILE, as Salt's does; a wrong password gets nothing.
    let tcp = |pw: &str| {
        json!({"host": "127.0.0.1", "port": server.port, "user": "halite_t_app",
               "password": pw, "maintenance_db": "postgres"})
    };
    // Salt doubles the quote before hashing: the stored password is pa''ss.
    assert_eq!(call(&host, "postgres.version", tcp("pa''ss")), version);
    assert_eq!(call(&host, "postgres.version", tcp("wrong")), Value::Null);
    assert_eq!(
        call(
            &host,
            "postgres.db_create",
            with(json!({"name": "halite_t_appdb", "owner": "halite_t_app"}))
        ),
        json!(true)
    );
    let dbs = call(&host, "postgres.db_list", conn.clone());
    assert_eq!(dbs["halite_t_appdb"]["Owner"], json!("halite_t_app"));
    assert_eq!(
        call(
            &host,
            "postgres.psql_query",
            with(json!({
                "query": "SELECT 'a,b' AS x, 2 AS y", "maintenance_db": "halite_t_appdb"
            }))
        ),
        json!([{"x": "a,b", "y": "2"}])
    );
    let schema = json!({"dbname": "halite_t_appdb", "name": "halite_t_s", "db_host": server.socket(), "db_port": server.port});
    assert_eq!(
        call(&host, "postgres.schema_create", schema.clone()),
        json!(true)
    );
    assert_eq!(
        call(&host, "postgres.schema_exists", schema.clone()),
        json!(true)
    );
    let grant = with(
        json!({"name": "halite_t_app", "object_name": "halite_t_s", "object_type": "schema",
                            "privileges": "USAGE", "maintenance_db": "halite_t_appdb"}),
    );
    assert_eq!(
        call(&host, "postgres.has_privileges", grant.clone()),
        json!(false)
    );
    assert_eq!(
        call(&host, "postgres.privileges_grant", grant.clone()),
        json!(true)
    );
    assert_eq!(
        call(&host, "postgres.has_privileges", grant.clone()),
        json!(true)
    );
    let listed = call(
        &host,
        "postgres.privileges_list",
        with(json!({
            "name": "halite_t_s", "object_type": "schema", "maintenance_db": "halite_t_appdb"
        })),
    );
    assert_eq!(listed["halite_t_app"], json!({"USAGE": false}));
    assert_eq!(
        call(&host, "postgres.privileges_revoke", grant.clone()),
        json!(true)
    );
    assert_eq!(call(&host, "postgres.has_privileges", grant), json!(false));
    assert_eq!(
        call(&host, "postgres.schema_remove", schema.clone()),
        json!(true)
    );
    assert_eq!(
        call(
            &host,
            "postgres.db_remove",
            with(json!({"name": "halite_t_appdb"}))
        ),
        json!(true)
    );
    assert_eq!(
        call(
            &host,
            "postgres.user_remove",
            with(json!({"username": "halite_t_app"}))
        ),
        json!(true)
    );
    assert_eq!(
        call(
            &host,
            "postgres.user_exists",
            with(json!({"name": "halite_t_app"}))
        ),
        json!(false)
    );
    // The postgres.* config keys stand in for the arguments.
    let mut configured = host.clone();
    configured.opts = json!({"postgres.host": server.socket(), "postgres.port": server.port});
    let dbs = call(&configured, "postgres.db_list", json!({}));
    assert!(dbs.get("template1").is_some(), "{dbs}");
}

/// `psql` as the postgres OS user on the server's socket: the rows of `sql`.
fn psql_as_postgres(server: &Server, db: &str, sql: &str) -> String {
    let out = server
        .as_postgres("psql")
        .args([
            "-h",
            &server.socket(),
            "-p",
            &server.port.to_string(),
            "-d",
            db,
            "-v",
            "ON_ERROR_STOP=1",
            "-At",
            "-c",
            sql,
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{sql}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The `postgres` and `pgjsonb` returners insert one row per return into
/// Salt's `salt_returns` schema, over TCP with a password, with the
/// options under `returner.postgres.*` / a `ret_config` profile.
#[test]
fn postgres_and_pgjsonb_returners_store_returns_on_a_real_server() {
    if let Some(why) = Server::missing() {
        println!("skipped: {why}");
        return;
    }
    let server = Server::start();
    psql_as_postgres(
        &server,
        "postgres",
        "CREATE ROLE salt LOGIN PASSWORD 'pw''s'",
    );
    psql_as_postgres(&server, "postgres", "CREATE DATABASE salt OWNER salt");
    psql_as_postgres(&server, "postgres", "CREATE DATABASE saltj OWNER salt");
    let owned = |table: &str| format!("{table}; ALTER TABLE salt_returns OWNER TO salt");
    psql_as_postgres(
        &server,
        "salt",
        &owned("CREATE TABLE salt_returns (fun varchar(50) NOT NULL, jid varchar(255) NOT NULL, return text NOT NULL, full_ret text, id varchar(255) NOT NULL, success varchar(10) NOT NULL, alter_time TIMESTAMP WITH TIME ZONE DEFAULT now())"),
    );
    psql_as_postgres(
        &server,
        "saltj",
        &owned("CREATE TABLE salt_returns (fun varchar(50) NOT NULL, jid varchar(255) NOT NULL, return jsonb NOT NULL, id varchar(255) NOT NULL, success varchar(10) NOT NULL, full_ret jsonb NOT NULL, alter_time TIMESTAMP WITH TIME ZONE DEFAULT NOW())"),
    );
    let port = server.port;
    let host = common::host_with(
        json!({
            "returner.postgres.host": "127.0.0.1",
            "returner.postgres.port": port,
            "returner.postgres.passwd": "pw's",
            // A ret_config profile for pgjsonb (Salt's `<profile>.<name>.<attr>`).
            "jsonb.returner.pgjsonb": {"host": "127.0.0.1", "port": port, "pass": "pw's", "db": "saltj"},
        }),
        json!({"os_family": "Debian"}),
    );
    let dict = halite_modules::returners::return_dict(
        "20261126060000000001",
        "web1",
        "test.echo",
        &[json!("it's")],
        &json!({"said": "it's"}),
        0,
        true,
    );
    let spec = halite_modules::returners::ReturnSpec::from_names(&json!("postgres")).unwrap();
    let errors = halite_modules::returners::send(&host, &spec, dict.clone());
    assert!(errors.is_empty(), "{errors:?}");
    let row = psql_as_postgres(
        &server,
        "salt",
        "SELECT fun, jid, id, success, return, full_ret::json->>'fun_args' FROM salt_returns",
    );
    assert_eq!(
        row.trim(),
        r#"test.echo|20261126060000000001|web1|true|{"said": "it's"}|["it's"]"#
    );

    let mut spec = halite_modules::returners::ReturnSpec::from_names(&json!("pgjsonb")).unwrap();
    spec.ret_config = Some("jsonb".into());
    let errors = halite_modules::returners::send(&host, &spec, dict);
    assert!(errors.is_empty(), "{errors:?}");
    let row = psql_as_postgres(
        &server,
        "saltj",
        "SELECT id, success, return->>'said', full_ret->>'ret_config', alter_time IS NOT NULL FROM salt_returns",
    );
    assert_eq!(row.trim(), "web1|true|it's|jsonb|t");

    // A wrong password: an error that says what to check, nothing panics.
    let mut spec = halite_modules::returners::ReturnSpec::from_names(&json!("postgres")).unwrap();
    spec.ret_kwargs.insert("passwd".into(), json!("wrong"));
    let errors = halite_modules::returners::send(
        &host,
        &spec,
        halite_modules::returners::return_dict(
            "1",
            "web1",
            "test.ping",
            &[],
            &json!(true),
            0,
            true,
        ),
    );
    assert_eq!(errors.len(), 1);
    assert!(
        errors[0]
            .to_string()
            .contains("Could not store return with postgres returner"),
        "{}",
        errors[0]
    );
}
