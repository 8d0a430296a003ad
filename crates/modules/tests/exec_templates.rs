//! The execution functions templates and `module.run` reach for (issue 19):
//! `config.*`, the newer `file.*`, `hashutil.*`, `status.*`, `disk.*`,
//! `environ.*`, `slsutil.*`, `network.*`... on the real host (temp files,
//! real /proc, loopback), through the registry as every caller reaches them.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

use std::collections::BTreeMap;
use std::sync::Arc;

use halite_modules::host::LogEvents;
use halite_modules::{table, Args, Host, LocalFileClient};
use halite_state::Value;
use serde_json::json;

fn host_with(opts: Value, grains: Value, pillar: Value) -> Host {
    Host {
        opts,
        grains,
        pillar,
        files: Arc::new(LocalFileClient::new(BTreeMap::new())),
        exec: table::exec_modules(),
        states: table::state_modules(),
        events: Arc::new(LogEvents),
    }
}

fn host() -> Host {
    host_with(json!({}), json!({}), json!({}))
}

fn call(h: &Host, fun: &str, positional: Vec<Value>, kwargs: Value) -> Result<Value, String> {
    let kwargs = kwargs.as_object().cloned().unwrap_or_default();
    h.call(fun, &Args { positional, kwargs })
        .map_err(|e| e.to_string())
}

fn render(h: &Host, template: &str) -> String {
    let ctx = h.render_context("base", "", "", Default::default());
    halite_render::render_text(template, "jinja", &ctx).expect("renders")
}

#[test]
fn config_get_and_option_answer_from_the_cli_as_templates_do() {
    let h = host_with(
        json!({"id": "m1", "file_client": "local"}),
        json!({"os": "Debian", "id": "grain-id"}),
        json!({"users": {"alice": {"uid": 1001}}, "master": {"from_master": "yes"}}),
    );
    let get = |args: Vec<Value>, kw: Value| call(&h, "config.get", args, kw);
    assert_eq!(get(vec![json!("id")], json!({})), Ok(json!("m1")));
    assert_eq!(get(vec![json!("os")], json!({})), Ok(json!("Debian")));
    assert_eq!(
        get(vec![json!("users:alice:uid")], json!({})),
        Ok(json!(1001))
    );
    assert_eq!(get(vec![json!("from_master")], json!({})), Ok(json!("yes")));
    assert_eq!(get(vec![json!("nope")], json!({})), Ok(json!("")));
    assert_eq!(get(vec![json!("nope"), json!(7)], json!({})), Ok(json!(7)));
    assert_eq!(
        get(vec![json!("id")], json!({"omit_opts": true})),
        Ok(json!("grain-id"))
    );
    assert_eq!(
        get(vec![json!("users/alice/uid")], json!({"delimiter": "/"})),
        Ok(json!(1001))
    );
    assert_eq!(
        get(vec![], json!({})),
        Err("get() missing 1 required positional argument: 'key'".into())
    );
    assert_eq!(
        call(&h, "config.option", vec![json!("file_client")], json!({})),
        Ok(json!("local"))
    );
    // option does not traverse nested keys
    assert_eq!(
        call(&h, "config.option", vec![json!("users:alice")], json!({})),
        Ok(json!(""))
    );
    assert_eq!(
        call(&h, "config.items", vec![], json!({})),
        Ok(json!({"id": "m1", "file_client": "local"}))
    );
    // the template answers the same
    assert_eq!(
        render(
            &h,
            "{{ salt['config.get']('users:alice:uid') }} {{ salt['config.option']('id') }}"
        ),
        "1001 m1"
    );
}

#[test]
fn file_hashes_and_listing_answer_as_salt() {
    let h = host();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display().to_string();
    let f = format!("{d}/f.txt");
    std::fs::write(&f, "hello\n").unwrap();
    std::os::unix::fs::symlink(&f, format!("{d}/l.txt")).unwrap();
    let md5 = "b1946ac92492d2347c6235b4d2611184";
    let sha256 = "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03";
    for (hash, want) in [
        (md5.to_string(), true),
        (format!("md5:{md5}"), true),
        (format!("md5={md5}"), true),
        (format!("sha256:{sha256}"), true),
        ("sha256:bad".to_string(), false),
    ] {
        assert_eq!(
            call(
                &h,
                "file.check_hash",
                vec![json!(f), json!(hash)],
                json!({})
            ),
            Ok(json!(want)),
            "{hash}"
        );
    }
    assert!(call(
        &h,
        "file.check_hash",
        vec![json!(f), json!("abc")],
        json!({})
    )
    .unwrap_err()
    .starts_with("Hash abc (length: 3) could not be matched"));
    assert_eq!(
        call(&h, "file.get_sum", vec![json!(f)], json!({})),
        Ok(json!(sha256))
    );
    assert_eq!(
        call(&h, "file.get_sum", vec![json!(f), json!("md5")], json!({})),
        Ok(json!(md5))
    );
    assert_eq!(
        call(
            &h,
            "file.get_sum",
            vec![json!(format!("{d}/none"))],
            json!({})
        ),
        Ok(json!("File not found"))
    );
    let mut listed = call(&h, "file.readdir", vec![json!(d)], json!({})).unwrap();
    listed.as_array_mut().unwrap()[2..].sort_by_key(|v| v.to_string());
    assert_eq!(listed, json!([".", "..", "f.txt", "l.txt"]));
    assert_eq!(
        call(&h, "file.readdir", vec![json!("rel")], json!({})),
        Err("Dir path must be absolute.".into())
    );
    assert_eq!(
        call(
            &h,
            "file.readdir",
            vec![json!(format!("{d}/none"))],
            json!({})
        ),
        Err(format!("A valid directory was not specified: {d}/none"))
    );
    assert_eq!(
        call(
            &h,
            "file.contains_regex",
            vec![json!(f), json!("hel+o")],
            json!({})
        ),
        Ok(json!(true))
    );
    assert_eq!(
        call(
            &h,
            "file.contains_regex",
            vec![json!(f), json!("^ello"), json!("h")],
            json!({})
        ),
        Ok(json!(true))
    );
    assert_eq!(
        call(
            &h,
            "file.contains_regex",
            vec![json!(f), json!("^ello")],
            json!({})
        ),
        Ok(json!(false))
    );
    assert_eq!(
        call(
            &h,
            "file.is_link",
            vec![json!(format!("{d}/l.txt"))],
            json!({})
        ),
        Ok(json!(true))
    );
    assert_eq!(
        call(&h, "file.is_link", vec![json!(f)], json!({})),
        Ok(json!(false))
    );
    let st = call(
        &h,
        "file.lstat",
        vec![json!(format!("{d}/l.txt"))],
        json!({}),
    )
    .unwrap();
    assert_eq!(st["st_mode"], json!(0o120777));
    assert_eq!(st.as_object().unwrap().len(), 8);
    assert_eq!(
        call(
            &h,
            "file.lstat",
            vec![json!(format!("{d}/none"))],
            json!({})
        ),
        Ok(json!({}))
    );
    assert_eq!(
        call(&h, "file.access", vec![json!(f), json!("f")], json!({})),
        Ok(json!(true))
    );
    assert_eq!(
        call(&h, "file.access", vec![json!(f), json!("x")], json!({})),
        Ok(json!(false))
    );
    assert_eq!(
        call(&h, "file.access", vec![json!(f), json!("rwx")], json!({})),
        Err("Invalid mode specified.".into())
    );
}

#[test]
fn file_changes_answer_as_salt() {
    let h = host();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display().to_string();
    let f = format!("{d}/f.txt");
    std::fs::write(&f, "hello\n").unwrap();
    assert_eq!(
        call(
            &h,
            "file.set_mode",
            vec![json!(f), json!("0640")],
            json!({})
        ),
        Ok(json!("0640"))
    );
    assert_eq!(
        call(&h, "file.set_mode", vec![json!(f), json!("abc")], json!({})),
        Ok(json!("Invalid Mode abc"))
    );
    assert_eq!(
        call(
            &h,
            "file.set_mode",
            vec![json!(format!("{d}/none")), json!(644)],
            json!({})
        ),
        Err(format!("{d}/none: File not found"))
    );
    // copy keeps the source's mode
    assert_eq!(
        call(
            &h,
            "file.copy",
            vec![json!(f), json!(format!("{d}/g.txt"))],
            json!({})
        ),
        Ok(json!(true))
    );
    assert_eq!(
        std::fs::read_to_string(format!("{d}/g.txt")).unwrap(),
        "hello\n"
    );
    assert_eq!(
        call(
            &h,
            "file.get_mode",
            vec![json!(format!("{d}/g.txt"))],
            json!({})
        ),
        Ok(json!("0640"))
    );
    assert_eq!(
        call(
            &h,
            "file.copy",
            vec![json!(format!("{d}/none")), json!(format!("{d}/x"))],
            json!({})
        ),
        Err(format!("No such file or directory '{d}/none'"))
    );
    std::fs::create_dir_all(format!("{d}/src/sub")).unwrap();
    std::fs::write(format!("{d}/src/sub/a"), "a").unwrap();
    assert_eq!(
        call(
            &h,
            "file.copy",
            vec![json!(format!("{d}/src")), json!(format!("{d}/dst"))],
            json!({})
        ),
        Err("Cannot copy overwriting a directory without recurse flag set to true!".into())
    );
    assert_eq!(
        call(
            &h,
            "file.copy",
            vec![json!(format!("{d}/src")), json!(format!("{d}/dst"))],
            json!({"recurse": true})
        ),
        Ok(json!(true))
    );
    assert_eq!(
        std::fs::read_to_string(format!("{d}/dst/sub/a")).unwrap(),
        "a"
    );
    assert_eq!(
        call(
            &h,
            "file.rename",
            vec![json!(format!("{d}/g.txt")), json!(format!("{d}/h.txt"))],
            json!({})
        ),
        Ok(json!(true))
    );
    assert!(std::path::Path::new(&format!("{d}/h.txt")).exists());
    assert_eq!(
        call(
            &h,
            "file.rename",
            vec![json!(format!("{d}/none")), json!(format!("{d}/h2"))],
            json!({})
        ),
        Err(format!("Could not rename '{d}/none' to '{d}/h2'"))
    );
    assert_eq!(
        call(
            &h,
            "file.chown",
            vec![json!(f), json!("nosuchuser-h19"), json!("root")],
            json!({})
        ),
        Ok(json!("User does not exist\n"))
    );
    assert_eq!(
        call(
            &h,
            "file.chown",
            vec![json!(format!("{d}/none")), json!("root"), json!("root")],
            json!({})
        ),
        Ok(json!("File not found"))
    );
    assert_eq!(
        call(
            &h,
            "file.chown",
            vec![json!(f), json!("root"), json!("root")],
            json!({})
        ),
        Ok(Value::Null)
    );
    assert_eq!(
        call(
            &h,
            "file.makedirs",
            vec![json!(format!("{d}/m/n/o/"))],
            json!({"mode": "0700"})
        ),
        Ok(Value::Null)
    );
    assert!(std::path::Path::new(&format!("{d}/m/n/o")).is_dir());
    assert_eq!(
        call(
            &h,
            "file.get_mode",
            vec![json!(format!("{d}/m/n"))],
            json!({})
        ),
        Ok(json!("0700"))
    );
    assert_eq!(
        call(
            &h,
            "file.makedirs",
            vec![json!(format!("{d}/m/n/o/"))],
            json!({})
        ),
        Ok(json!(format!("Directory '{d}/m/n/o' already exists")))
    );
    assert_eq!(
        call(&h, "file.makedirs", vec![json!("relative/x/")], json!({})),
        Err("Recursive creation for path '' would result in an infinite loop. Please use an absolute path.".into())
    );
}

#[test]
fn hashutil_digests_base64_and_hmac_match_salt() {
    let h = host();
    let c = |fun: &str, args: Vec<Value>| call(&h, fun, args, json!({}));
    assert_eq!(
        c("hashutil.digest", vec![json!("hello")]),
        Ok(json!("5d41402abc4b2a76b9719d911017c592"))
    );
    assert_eq!(
        c("hashutil.digest", vec![json!("hello"), json!("sha1")]),
        Err("Hash func 'sha1' is not supported.".into())
    );
    assert_eq!(
        c("hashutil.md5_digest", vec![json!("hello")]),
        Ok(json!("5d41402abc4b2a76b9719d911017c592"))
    );
    assert_eq!(
        c("hashutil.sha256_digest", vec![json!("hello")]),
        Ok(json!(
            "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
        ))
    );
    assert_eq!(
        c("hashutil.sha512_digest", vec![json!("hello")]),
        Ok(json!("9b71d224bd62f3785d96d46ad3ea3d73319bfbc2890caadae2dff72519673ca72323c3d99ba5c11d7c7acc6e14b8c5da0c4663475c2e5c3adef46f73bcdec043"))
    );
    assert_eq!(
        c("hashutil.md5_digest", vec![]),
        Err("md5_digest() missing 1 required positional argument: 'instr'".into())
    );
    assert_eq!(
        c("hashutil.base64_b64encode", vec![json!("hello")]),
        Ok(json!("aGVsbG8="))
    );
    assert_eq!(
        c("hashutil.base64_b64decode", vec![json!("aGVsbG8=")]),
        Ok(json!("hello"))
    );
    assert_eq!(
        c("hashutil.base64_b64decode", vec![json!("!!!")]),
        Ok(json!(""))
    );
    assert_eq!(
        c("hashutil.base64_encodestring", vec![json!("x".repeat(100))]),
        Ok(json!("eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4\neHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eA==\n"))
    );
    assert_eq!(
        c(
            "hashutil.hmac_compute",
            vec![json!("hello"), json!("secret")]
        ),
        Ok(json!(
            "88aab3ede8d3adf94d26ab90d3bafd4a2083070c3bcce9c014ee04a443847c0b"
        ))
    );
    assert_eq!(
        c(
            "hashutil.hmac_signature",
            vec![
                json!("hello"),
                json!("secret"),
                json!("iKqz7ejTrflNJquQ07r9SiCDBww7zOnAFO4EpEOEfAs=")
            ]
        ),
        Ok(json!(true))
    );
    assert_eq!(
        c(
            "hashutil.hmac_signature",
            vec![json!("hello"), json!("secret"), json!("nope")]
        ),
        Ok(json!(false))
    );
    assert_eq!(
        c(
            "hashutil.github_signature",
            vec![
                json!("hello"),
                json!("secret"),
                json!("sha1=5112055c05f944f85755efc5cd8970e194e9f45b")
            ]
        ),
        Ok(json!(true))
    );
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("f.txt").display().to_string();
    std::fs::write(&f, "hello\n").unwrap();
    assert_eq!(
        c("hashutil.digest_file", vec![json!(f)]),
        Ok(json!("b1946ac92492d2347c6235b4d2611184"))
    );
    assert_eq!(
        c("hashutil.digest_file", vec![json!(format!("{f}.none"))]),
        Err(format!("File path '{f}.none' not found."))
    );
    assert_eq!(
        c("hashutil.base64_encodefile", vec![json!(f)]),
        Ok(json!("aGVsbG8K\n"))
    );
    let out = dir.path().join("out").display().to_string();
    assert_eq!(
        c(
            "hashutil.base64_decodefile",
            vec![json!("aGVsbG8K"), json!(out)]
        ),
        Ok(json!(true))
    );
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "hello\n");
    // templates reach the same functions
    assert_eq!(
        render(&h, "{{ salt['hashutil.base64_b64encode']('hello') }}"),
        "aGVsbG8="
    );
}

#[test]
fn status_reads_the_real_proc() {
    let h = host();
    let c = |fun: &str, args: Vec<Value>| call(&h, fun, args, json!({}));
    let up = c("status.uptime", vec![]).unwrap();
    let proc_up: f64 = std::fs::read_to_string("/proc/uptime")
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let seconds = up["seconds"].as_i64().unwrap();
    assert!(seconds <= proc_up as i64 && seconds > 0, "{up}");
    assert_eq!(up["days"], json!(seconds / 86400));
    assert!(up["since_iso"].as_str().unwrap().contains('T'));
    assert!(up["time"].as_str().unwrap().contains(':'));
    let load = c("status.loadavg", vec![]).unwrap();
    let keys: Vec<&String> = load.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["1-min", "5-min", "15-min"]);
    assert!(load["1-min"].is_f64());
    let mem = c("status.meminfo", vec![]).unwrap();
    assert_eq!(mem["MemTotal"]["unit"], json!("kB"));
    assert!(
        mem["MemTotal"]["value"]
            .as_str()
            .unwrap()
            .parse::<u64>()
            .unwrap()
            > 0
    );
    let cpu = c("status.cpuinfo", vec![]).unwrap();
    assert!(cpu["processor"].is_string());
    assert!(cpu["flags"].is_array(), "{}", cpu["flags"]);
    let root = c("status.diskusage", vec![json!("/")]).unwrap();
    let st = nix::sys::statvfs::statvfs("/").unwrap();
    assert_eq!(root["/"]["total"], json!(st.blocks() * st.block_size()));
    assert_eq!(root.as_object().unwrap().len(), 1);
    let all = c("status.diskusage", vec![]).unwrap();
    assert!(
        all.get("/").is_some() && all.get("/proc").is_some(),
        "{all}"
    );
    let proc_only = c("status.diskusage", vec![json!("proc")]).unwrap();
    assert!(proc_only.get("/proc").is_some() && proc_only.get("/").is_none());
}

#[test]
fn disk_usage_parses_the_real_df() {
    let h = host();
    let usage = call(&h, "disk.usage", vec![], json!({})).unwrap();
    let root = &usage["/"];
    assert!(
        root["1K-blocks"].as_str().unwrap().parse::<u64>().is_ok(),
        "{usage}"
    );
    assert!(root["capacity"].as_str().unwrap().ends_with('%'));
    assert_eq!(
        call(&h, "disk.usage", vec![], json!({"args": "z"})),
        Err("Invalid flag passed to disk.usage".into())
    );
    let inodes = call(&h, "disk.usage", vec![], json!({"args": "i"})).unwrap();
    assert!(inodes.get("/").is_some());
    // a filesystem name with spaces, and a line wrapped after a long name
    let parsed = halite_modules::exec::disk::parse_df(
        "Filesystem 1024-blocks Used Available Capacity Mounted on\n\
         my fs 10 5 5 50% /mnt/a\n\
         /dev/very-long-name\n 20 10 10 50% /mnt/b\n",
    );
    assert_eq!(parsed["/mnt/a"]["filesystem"], json!("my fs"));
    assert_eq!(parsed["/mnt/b"]["filesystem"], json!("/dev/very-long-name"));
    assert_eq!(parsed["/mnt/b"]["1K-blocks"], json!("20"));
}

#[test]
fn environ_and_slsutil_answer_as_salt() {
    let h = host();
    let c = |fun: &str, args: Vec<Value>, kw: Value| call(&h, fun, args, kw);
    let home = std::env::var("HOME").unwrap_or_default();
    assert_eq!(
        c("environ.get", vec![json!("HOME")], json!({})),
        Ok(json!(home))
    );
    assert_eq!(
        c("environ.get", vec![json!("H19_NOPE_X")], json!({})),
        Ok(json!(""))
    );
    assert_eq!(
        c(
            "environ.get",
            vec![json!("H19_NOPE_X"), json!("dflt")],
            json!({})
        ),
        Ok(json!("dflt"))
    );
    assert_eq!(
        c("environ.has_value", vec![json!("HOME")], json!({})),
        Ok(json!(true))
    );
    assert_eq!(
        c("environ.has_value", vec![json!("H19_NOPE_X")], json!({})),
        Ok(json!(false))
    );
    assert_eq!(
        c(
            "slsutil.serialize",
            vec![json!("json"), json!({"é": [1, 2], "b": 1})],
            json!({})
        ),
        Ok(json!("{\"é\": [1, 2], \"b\": 1}"))
    );
    assert_eq!(
        c(
            "slsutil.serialize",
            vec![json!("json"), json!({"a": 1})],
            json!({"indent": 2})
        ),
        Ok(json!("{\n  \"a\": 1\n}"))
    );
    assert_eq!(
        c(
            "slsutil.serialize",
            vec![json!("yaml"), json!({"b": [1, {"x": 1}], "a": {"c": "x"}})],
            json!({})
        ),
        Ok(json!("a: {c: x}\nb:\n- 1\n- {x: 1}"))
    );
    assert_eq!(
        c(
            "slsutil.serialize",
            vec![json!("yaml"), json!([1, 2])],
            json!({})
        ),
        Ok(json!("[1, 2]"))
    );
    assert_eq!(
        c(
            "slsutil.serialize",
            vec![json!("yaml"), json!("str")],
            json!({})
        ),
        Ok(json!("str"))
    );
    assert_eq!(
        c(
            "slsutil.serialize",
            vec![json!("yaml"), json!({"a": [1]})],
            json!({"default_flow_style": false})
        ),
        Ok(json!("a:\n- 1"))
    );
    assert_eq!(
        c(
            "slsutil.serialize",
            vec![json!("nope"), json!({})],
            json!({})
        ),
        Err("Serializer 'nope' not found.".into())
    );
    assert_eq!(
        c(
            "slsutil.deserialize",
            vec![json!("yaml"), json!("a: [1, 2]")],
            json!({})
        ),
        Ok(json!({"a": [1, 2]}))
    );
    assert_eq!(
        render(&h, "{{ salt['slsutil.serialize']('json', {'a': 1}) }}"),
        "{\"a\": 1}"
    );
}

#[test]
fn network_reads_the_real_interfaces_and_routes() {
    let h = host();
    let ifaces = call(&h, "network.interfaces", vec![], json!({})).unwrap();
    let lo = &ifaces["lo"];
    assert_eq!(lo["up"], json!(true), "{ifaces}");
    assert_eq!(lo["hwaddr"], json!("00:00:00:00:00:00"));
    assert_eq!(
        lo["inet"][0],
        json!({"address": "127.0.0.1", "netmask": "255.0.0.0", "broadcast": null, "label": "lo"})
    );
    // loopback only with include_loopback, and only the interface asked
    assert_eq!(
        call(&h, "network.ip_addrs", vec![json!("lo")], json!({})),
        Ok(json!([]))
    );
    assert_eq!(
        call(
            &h,
            "network.ip_addrs",
            vec![json!("lo")],
            json!({"include_loopback": true})
        ),
        Ok(json!(["127.0.0.1"]))
    );
    assert_eq!(
        call(
            &h,
            "network.ip_addrs",
            vec![],
            json!({"include_loopback": true, "cidr": "127.0.0.0/8"})
        ),
        Ok(json!(["127.0.0.1"]))
    );
    let all = call(&h, "network.ip_addrs", vec![], json!({})).unwrap();
    assert!(!all.as_array().unwrap().contains(&json!("127.0.0.1")));
    assert_eq!(
        call(&h, "network.default_route", vec![json!("ipx")], json!({})),
        Err("Invalid address family ipx".into())
    );
    let routes = call(&h, "network.default_route", vec![json!("inet")], json!({})).unwrap();
    for r in routes.as_array().unwrap() {
        assert_eq!(r["destination"], json!("0.0.0.0"));
        assert_eq!(r["flags"], json!("UG"));
    }
    let parsed = halite_modules::exec::network::parse_default_routes(
        "default via 192.0.2.1 dev eth0 \n192.0.2.0/24 dev eth0 proto kernel scope link src 192.0.2.2\n",
        "default via fd00::1 dev eth0 metric 1024 pref medium\n",
    );
    assert_eq!(
        parsed,
        vec![
            json!({"addr_family": "inet", "destination": "0.0.0.0", "gateway": "192.0.2.1",
                   "netmask": "0.0.0.0", "flags": "UG", "interface": "eth0"}),
            json!({"addr_family": "inet6", "destination": "::/0", "gateway": "fd00::1",
                   "netmask": "", "flags": "UG", "interface": "eth0"}),
        ]
    );
    // ping only 127.0.0.1; without a ping binary Salt fails to run it too
    let pinged = call(
        &h,
        "network.ping",
        vec![json!("127.0.0.1")],
        json!({"return_boolean": true, "timeout": 2}),
    );
    if halite_modules::exec::cmd::which("ping").is_some() {
        assert_eq!(pinged, Ok(json!(true)));
    } else {
        assert!(pinged
            .unwrap_err()
            .starts_with("Unable to run command 'ping -W"));
    }
}

/// Waits (bounded) for `path` to hold text; the content, or `None`.
fn wait_for_text(path: &std::path::Path) -> Option<String> {
    for _ in 0..200 {
        if let Ok(text) = std::fs::read_to_string(path) {
            if !text.is_empty() {
                return Some(text);
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    None
}

#[test]
fn cmd_run_bg_returns_before_the_command_ends() {
    let h = host();
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    let out = dir.path().join("out");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    // The command blocks until the fifo is written: run_bg must return first.
    let ret = call(
        &h,
        "cmd.run_bg",
        vec![json!(format!("cat {} > {}", fifo.display(), out.display()))],
        json!({}),
    )
    .unwrap();
    let pid = ret["pid"].as_u64().unwrap();
    assert!(pid > 1, "{ret}");
    assert_eq!(ret.as_object().unwrap().len(), 1);
    std::fs::write(&fifo, "through the fifo\n").unwrap();
    assert_eq!(wait_for_text(&out).as_deref(), Some("through the fifo\n"));
    // python_shell=False runs the words without a shell, cwd honoured
    let ret = call(
        &h,
        "cmd.run_bg",
        vec![json!("touch made-here")],
        json!({"python_shell": false, "cwd": dir.path().display().to_string()}),
    )
    .unwrap();
    assert!(ret["pid"].as_u64().is_some());
    for _ in 0..200 {
        if dir.path().join("made-here").exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(dir.path().join("made-here").exists());
    assert_eq!(
        call(&h, "cmd.run_bg", vec![], json!({})),
        Err("cmd.run_bg() missing 1 required positional argument: 'cmd'".into())
    );
}

#[test]
fn service_systemctl_reload_reports_systemctl_failures_as_salt() {
    if halite_modules::exec::cmd::which("systemctl").is_none() {
        println!("skipping: systemctl is not installed");
        return;
    }
    let h = host();
    let booted = std::path::Path::new("/run/systemd/system").is_dir();
    let ret = call(&h, "service.systemctl_reload", vec![], json!({}));
    if booted {
        assert_eq!(ret, Ok(json!(true)));
    } else {
        let err = ret.unwrap_err();
        assert!(
            err.starts_with("Problem performing systemctl daemon-reload: System has not been booted with systemd"),
            "{err}"
        );
    }
}

#[test]
fn user_rename_renames_a_real_account() {
    if !nix::unistd::geteuid().is_root() {
        println!("skipping: user.rename needs root");
        return;
    }
    let h = host();
    let (old, new) = ("h19xren1", "h19xren2");
    for u in [old, new] {
        let _ = std::process::Command::new("userdel").arg(u).status();
    }
    assert!(std::process::Command::new("useradd")
        .arg(old)
        .status()
        .unwrap()
        .success());
    assert_eq!(
        call(
            &h,
            "user.rename",
            vec![json!("h19xnosuch"), json!(new)],
            json!({})
        ),
        Err("User 'h19xnosuch' does not exist".into())
    );
    assert_eq!(
        call(
            &h,
            "user.rename",
            vec![json!(old), json!("root")],
            json!({})
        ),
        Err("User 'root' already exists".into())
    );
    // Salt answers False after a rename (it looks the old name up again)
    let renamed = call(&h, "user.rename", vec![json!(old), json!(new)], json!({}));
    let info = call(&h, "user.info", vec![json!(new)], json!({}));
    let gone = call(&h, "user.info", vec![json!(old)], json!({}));
    let _ = std::process::Command::new("userdel").arg(new).status();
    let _ = std::process::Command::new("groupdel").arg(old).status();
    assert_eq!(renamed, Ok(json!(false)));
    assert_eq!(info.unwrap()["name"], json!(new));
    assert_eq!(gone, Ok(json!({})));
}

#[test]
fn system_reboot_is_guarded_and_never_runs_here() {
    use halite_modules::exec::system::{reboot_command, valid_at_time};
    for ok in ["now", "+5", "5", "23:59", "7:05"] {
        assert!(valid_at_time(ok), "{ok}");
    }
    for bad in ["abc", "24:00", "12:6", "+", "5m", "now "] {
        assert!(!valid_at_time(bad), "{bad}");
    }
    assert_eq!(reboot_command(None), "shutdown -r now");
    assert_eq!(reboot_command(Some("+5")), "shutdown -r +5");
    let h = host();
    // A time shutdown cannot parse: Salt's answer, nothing run.
    assert_eq!(
        call(&h, "system.reboot", vec![], json!({"at_time": "abc"})),
        Ok(json!("Failed to parse time specification: abc"))
    );
    // The dry-run switch: test=True, or a host in test mode.
    assert_eq!(
        call(&h, "system.reboot", vec![json!(10)], json!({"test": true})),
        Ok(json!("Would run: shutdown -r 10"))
    );
    let test_host = host_with(json!({"test": true}), json!({}), json!({}));
    assert_eq!(
        call(&test_host, "system.reboot", vec![], json!({})),
        Ok(json!("Would run: shutdown -r now"))
    );
}
