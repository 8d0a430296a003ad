//! Core grains against the real host: independent tools (`uname`,
//! `hostname`, `id`, `nproc`) and, when it is installed, Salt's own
//! `salt-call --local grains.items`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use halite_modules::grains::{core_grains, grains_for};
use halite_modules::host::LogEvents;
use halite_modules::{table, Args, Host, LocalFileClient};
use serde_json::{json, Value};

/// Salt's `salt-call`, from the one helper every comparison with Salt
/// uses (`halite-salt-oracle`); `None` after printing why it is absent.
fn salt_call_bin(test: &str) -> Option<std::path::PathBuf> {
    halite_salt_oracle::Salt::for_test(test).map(|s| s.salt_call())
}

fn run(cmd: &str, args: &[&str]) -> String {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd}: {e}"));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn host_with(grains: Value) -> Host {
    Host {
        opts: json!({}),
        grains,
        pillar: json!({}),
        files: Arc::new(LocalFileClient::default()),
        exec: table::exec_modules(),
        states: table::state_modules(),
        events: Arc::new(LogEvents),
    }
}

#[test]
fn grains_match_what_system_tools_report() {
    let g = core_grains(&json!({"id": "minion-1"}));
    assert_eq!(g["id"], "minion-1");
    assert_eq!(g["kernel"], run("uname", &["-s"]));
    assert_eq!(g["kernelrelease"], run("uname", &["-r"]));
    assert_eq!(g["kernelversion"], run("uname", &["-v"]));
    assert_eq!(g["cpuarch"], run("uname", &["-m"]));
    assert_eq!(g["nodename"], run("uname", &["-n"]));
    assert_eq!(g["localhost"], run("hostname", &[]));
    assert_eq!(
        g["num_cpus"].as_u64().map(|n| n.to_string()),
        Some(run("nproc", &["--all"]))
    );
    assert_eq!(g["uid"].to_string(), run("id", &["-u"]));
    assert_eq!(g["gid"].to_string(), run("id", &["-g"]));
    assert_eq!(g["username"], run("id", &["-un"]));
    assert_eq!(g["groupname"], run("id", &["-gn"]));
    assert_eq!(g["pid"], std::process::id());
    assert_eq!(g["saltversion"], "3008.5");
    assert_eq!(g["saltversioninfo"], json!([3008, 5]));
    assert!(
        g["ipv4"]
            .as_array()
            .is_some_and(|a| a.contains(&json!("127.0.0.1"))),
        "{:?}",
        g["ipv4"]
    );
    assert_eq!(g["hwaddr_interfaces"]["lo"], "00:00:00:00:00:00");
    assert!(g["mem_total"].as_i64().is_some_and(|m| m > 0));
    if Path::new("/usr/bin/dpkg").exists() {
        assert_eq!(g["osarch"], run("dpkg", &["--print-architecture"]));
    }
    let release = std::fs::read_to_string("/etc/os-release").unwrap_or_default();
    if let Some(version) = release.lines().find_map(|l| l.strip_prefix("VERSION_ID=")) {
        assert_eq!(g["osrelease"], version.trim_matches('"'));
    }
    // Reported, not asserted (no timed assertions): the cost of one refresh.
    let runs = 20;
    let started = std::time::Instant::now();
    for _ in 0..runs {
        let _ = core_grains(&json!({"id": "minion-1"}));
    }
    println!(
        "core_grains: {:?} per call (mean of {runs})",
        started.elapsed() / runs
    );
    // Without an id in the config, the id is the fqdn (Salt's generated id).
    let unnamed = core_grains(&json!({}));
    assert_eq!(unnamed["id"], unnamed["fqdn"]);
}

#[test]
fn server_id_is_salts_sha256_derivation() {
    // Reference values computed with Python:
    // abs(int(hashlib.sha256(id.encode()).hexdigest(), 16) % 2**31)
    let expected = Command::new("python3")
        .args([
            "-c",
            "import hashlib;print(abs(int(hashlib.sha256(b'vm').hexdigest(),16)%2**31))",
        ])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    match expected {
        Ok(text) if !text.is_empty() => {
            assert_eq!(halite_modules::grains::server_id("vm").to_string(), text)
        }
        _ => println!("skipped the python cross-check: python3 is not runnable"),
    }
    // The value Salt 3008.5 printed for id "vm" on this project's CI host.
    assert_eq!(halite_modules::grains::server_id("vm"), 2067164805);
}

#[test]
fn blacklist_drops_detected_grains_and_config_grains_override() {
    let opts = json!({
        "id": "m1",
        "grains_blacklist": ["ip*_interfaces", "cpu_fl[a]gs", "^mem_.*$"],
        "grains": {"roles": ["web"], "os": "Custom", "ip4_interfaces": "kept: configured grains are not filtered"},
    });
    let g = grains_for(&opts);
    assert!(!g.contains_key("ip6_interfaces"));
    assert!(!g.contains_key("cpu_flags"));
    assert!(!g.contains_key("mem_total"), "regex fallback of expr_match");
    assert!(g.contains_key("ipv4"));
    assert_eq!(
        g["ip4_interfaces"],
        "kept: configured grains are not filtered"
    );
    assert_eq!(g["roles"], json!(["web"]));
    assert_eq!(g["os"], "Custom");

    let deep =
        grains_for(&json!({"grains_deep_merge": true, "grains": {"locale_info": {"extra": 1}}}));
    assert_eq!(deep["locale_info"]["extra"], 1);
    assert!(
        deep["locale_info"].get("timezone").is_some(),
        "deep merge keeps detected keys"
    );
}

#[test]
fn grains_execution_module_reads_the_hosts_grains() {
    let host = host_with(json!({
        "os_family": "Debian",
        "a": {"b": {"c": 3}},
        "roles": ["db", "web"],
        "empty": "",
    }));
    let call = |fun: &str, positional: Vec<Value>, kwargs: Value| {
        let args = Args {
            positional,
            kwargs: kwargs.as_object().cloned().unwrap_or_default(),
        };
        host.call(fun, &args)
    };
    assert_eq!(
        call("grains.get", vec![json!("a:b:c")], json!({})).ok(),
        Some(json!(3))
    );
    assert_eq!(
        call("grains.get", vec![json!("a/b")], json!({"delimiter": "/"})).ok(),
        Some(json!({"c": 3}))
    );
    assert_eq!(
        call(
            "grains.get",
            vec![json!("nope")],
            json!({"default": "dflt"})
        )
        .ok(),
        Some(json!("dflt"))
    );
    assert_eq!(
        call("grains.get", vec![json!("nope")], json!({})).ok(),
        Some(json!(""))
    );
    assert_eq!(
        call("grains.get", vec![json!("roles:1")], json!({})).ok(),
        Some(json!("web"))
    );
    assert_eq!(
        call(
            "grains.item",
            vec![json!("os_family"), json!("a:b")],
            json!({})
        )
        .ok(),
        Some(json!({"os_family": "Debian", "a:b": {"c": 3}}))
    );
    assert_eq!(
        call("grains.ls", vec![], json!({})).ok(),
        Some(json!(["a", "empty", "os_family", "roles"]))
    );
    assert_eq!(
        call("grains.has_value", vec![json!("empty")], json!({})).ok(),
        Some(json!(true))
    );
    assert_eq!(
        call("grains.has_value", vec![json!("a:x")], json!({})).ok(),
        Some(json!(false))
    );
    assert_eq!(
        call(
            "grains.filter_by",
            vec![json!({"Debian": "apt", "RedHat": "yum"})],
            json!({})
        )
        .ok(),
        Some(json!("apt"))
    );
    assert_eq!(
        call(
            "grains.filter_by",
            vec![json!({"w*": "w", "default": "d"}), json!("roles")],
            json!({})
        )
        .ok(),
        Some(json!("w"))
    );
    assert_eq!(
        call("grains.items", vec![], json!({})).ok(),
        Some(host.grains.clone())
    );
    assert!(
        call("grains.get", vec![], json!({})).is_err(),
        "a missing key is an invocation error"
    );
    // The writers exist (tests/grains_file.rs drives them on a temp config
    // dir); a missing value is refused before anything is written.
    assert!(call("grains.setval", vec![json!("k")], json!({})).is_err());
}

/// Grains whose values must equal Salt's own on this host.
const SAME_AS_SALT: &[&str] = &[
    "os",
    "os_family",
    "osrelease",
    "osrelease_info",
    "osmajorrelease",
    "oscodename",
    "osfullname",
    "osfinger",
    "osarch",
    "kernel",
    "kernelrelease",
    "kernelversion",
    "host",
    "fqdn",
    "domain",
    "nodename",
    "localhost",
    "ipv4",
    "ipv6",
    "fqdn_ip4",
    "fqdn_ip6",
    "ip4_interfaces",
    "ip6_interfaces",
    "ip_interfaces",
    "hwaddr_interfaces",
    "num_cpus",
    "cpu_model",
    "cpuarch",
    "cpu_flags",
    "mem_total",
    "swap_total",
    "init",
    "saltversion",
    "saltversioninfo",
    "uid",
    "gid",
    "username",
    "groupname",
    "machine_id",
    "server_id",
    "virtual",
    "virtual_subtype",
    "kernelparams",
    "dns",
    "efi",
    "id",
    "lsb_distrib_id",
    "lsb_distrib_release",
    "lsb_distrib_codename",
    "master",
    "ip_gw",
    "ip4_gw",
    "ip6_gw",
    "disks",
    "ssds",
    "transactional",
    "systemd",
    "selinux",
    "biosversion",
    "productname",
    "manufacturer",
    "uuid",
    "serialnumber",
    "biosvendor",
    "boardname",
];

#[test]
fn grains_equal_salt_calls_on_this_host() {
    let Some(salt_call) = salt_call_bin("grains_equal_salt_calls_on_this_host") else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let conf = dir.path().join("conf");
    std::fs::create_dir_all(&conf).expect("conf dir");
    let base = dir.path().display();
    std::fs::write(
        conf.join("minion"),
        format!("id: vm\ncachedir: {base}/cache\npki_dir: {base}/pki\nsock_dir: {base}/sock\nlog_file: {base}/log\n"),
    )
    .expect("minion config");
    let out = Command::new(&salt_call)
        .args(["--local", "--config-dir"])
        .arg(&conf)
        .args(["--out", "json", "grains.items"])
        .output()
        .expect("salt-call runs");
    let salt: Value = serde_json::from_slice(&out.stdout).expect("salt-call prints JSON");
    let salt = &salt["local"];
    let ours = Value::Object(core_grains(&json!({"id": "vm"})));
    let mut differences = Vec::new();
    for key in SAME_AS_SALT {
        let (theirs, mine) = (salt.get(*key), ours.get(*key));
        let normalise = |v: Option<&Value>| match (key.starts_with("fqdn_ip"), v) {
            (true, Some(Value::Array(a))) => {
                let mut a = a.clone();
                a.sort_by_key(|v| v.to_string());
                Some(Value::Array(a))
            }
            (_, v) => v.cloned(),
        };
        if normalise(theirs) != normalise(mine) {
            differences.push(format!("{key}: salt={theirs:?} halite={mine:?}"));
        }
    }
    assert!(
        differences.is_empty(),
        "grains differ from Salt's:\n{}",
        differences.join("\n")
    );
    assert_eq!(
        salt["locale_info"]["timezone"],
        ours["locale_info"]["timezone"]
    );
}

#[test]
fn grains_functions_answer_like_salt_call() {
    let Some(salt_call) = salt_call_bin("grains_functions_answer_like_salt_call") else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let conf = dir.path().join("conf");
    std::fs::create_dir_all(&conf).expect("conf dir");
    let base = dir.path().display();
    std::fs::write(
        conf.join("minion"),
        format!("id: vm\ncachedir: {base}/cache\npki_dir: {base}/pki\nsock_dir: {base}/sock\nlog_file: {base}/log\n"),
    )
    .expect("minion config");
    let host = host_with(Value::Object(core_grains(&json!({"id": "vm"}))));
    // (function, CLI words for salt-call, the same arguments as data for halite)
    let cases: Vec<(&str, Vec<&str>, Vec<Value>, Value)> = vec![
        (
            "grains.filter_by",
            vec![
                r#"{"Deb*": {"pkg": "apt"}, "RedHat": {"pkg": "yum"}, "default": {"pkg": "x", "port": 1}}"#,
            ],
            vec![
                json!({"Deb*": {"pkg": "apt"}, "RedHat": {"pkg": "yum"}, "default": {"pkg": "x", "port": 1}}),
            ],
            json!({}),
        ),
        (
            "grains.filter_by",
            vec![
                r#"{"a": {"k": 1}, "default": {"k": 2, "d": {"x": 1}}}"#,
                "grain=nosuch",
                r#"merge={"d": {"y": 2}}"#,
                "base=default",
            ],
            vec![json!({"a": {"k": 1}, "default": {"k": 2, "d": {"x": 1}}})],
            json!({"grain": "nosuch", "merge": {"d": {"y": 2}}, "base": "default"}),
        ),
        (
            "grains.get",
            vec!["ip4_interfaces:lo"],
            vec![json!("ip4_interfaces:lo")],
            json!({}),
        ),
        (
            "grains.get",
            vec!["nosuch", "default=42"],
            vec![json!("nosuch")],
            json!({"default": 42}),
        ),
        (
            "grains.get",
            vec!["ipv4;0", "delimiter=;"],
            vec![json!("ipv4;0")],
            json!({"delimiter": ";"}),
        ),
        (
            "grains.has_value",
            vec!["locale_info:timezone"],
            vec![json!("locale_info:timezone")],
            json!({}),
        ),
        (
            "grains.item",
            vec!["os", "kernel", "nosuch"],
            vec![json!("os"), json!("kernel"), json!("nosuch")],
            json!({}),
        ),
    ];
    for (fun, words, positional, kwargs) in cases {
        let out = Command::new(&salt_call)
            .args(["--local", "--config-dir"])
            .arg(&conf)
            .args(["--out", "json", fun])
            .args(&words)
            .output()
            .expect("salt-call runs");
        let theirs: Value = serde_json::from_slice(&out.stdout).expect("salt-call prints JSON");
        let args = Args {
            positional,
            kwargs: kwargs.as_object().cloned().unwrap_or_default(),
        };
        let ours = host
            .call(fun, &args)
            .unwrap_or_else(|e| panic!("{fun}: {e}"));
        assert_eq!(theirs["local"], ours, "{fun} {words:?}");
    }
}

/// `reload_grains` gives the states after it grains detected again from
/// the host (configured grains still on top); a job from the master keeps
/// its pillar on `reload_pillar` (the master compiled it).
#[test]
fn refreshed_host_detects_grains_again() {
    use halite_state::StateEnv;
    let mut host = host_with(json!({"id": "stale", "kernel": "Plan9"}));
    host.opts = json!({"id": "vm", "grains": {"role": "web"}, "file_client": "remote"});
    host.pillar = json!({"from": "master"});
    let fresh = host
        .refreshed(true, true, Some(&json!({"given": 1})))
        .expect("a host can refresh");
    assert_eq!(fresh.grains()["kernel"], json!(run("uname", &["-s"])));
    assert_eq!(fresh.grains()["role"], json!("web"));
    assert_eq!(fresh.grains()["id"], json!("vm"));
    assert_eq!(fresh.pillar(), &json!({"from": "master"}));
    // Asked for nothing, nothing changes.
    let same = host.refreshed(false, false, None).expect("refresh");
    assert_eq!(same.grains()["kernel"], json!("Plan9"));
}
