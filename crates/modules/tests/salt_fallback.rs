//! `salt_fallback`: a function halite does not have runs through Salt's
//! own loader with the Python of Salt's venv (Salt 3008.5, from
//! `scripts/install-salt.sh`; found by `halite-salt-oracle`), and returns what `salt-call
//! --local` returns. Skips with a reason where that Salt is absent.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;

use halite_modules::host::LogEvents;
use halite_modules::{Args, ExecError, Host};
use serde_json::{json, Value};

/// The Salt venv's bin directory, when Salt is installed (one helper for
/// every test that compares with Salt: `halite-salt-oracle`).
fn salt_bin() -> Option<PathBuf> {
    halite_salt_oracle::Salt::for_test("salt_fallback").map(|s| s.bin().to_path_buf())
}

fn host(dir: &std::path::Path, fallback: Option<&PathBuf>) -> Host {
    let mut opts = json!({
        "id": "fb01",
        "file_client": "local",
        "local": true,
        "cachedir": dir.join("cache"),
        "file_roots": {"base": [dir.join("salt")]},
        "pillar_roots": {"base": [dir.join("pillar")]},
    });
    if let Some(py) = fallback {
        opts["salt_fallback"] = json!(py);
    }
    let (host, errors) = halite_modules::local::local_host(opts, Arc::new(LogEvents));
    assert!(errors.is_empty(), "{errors:?}");
    host
}

/// `salt-call --local --out json FUN ARGS` in a config dir of its own.
fn salt_call(bin: &std::path::Path, dir: &std::path::Path, args: &[&str]) -> Value {
    let conf = dir.join("salt-conf");
    std::fs::create_dir_all(&conf).unwrap();
    std::fs::write(
        conf.join("minion"),
        format!(
            "id: fb01\nfile_client: local\nroot_dir: {d}\ncachedir: {d}/salt-cache\npki_dir: {d}/salt-pki\nlog_file: {d}/salt.log\n",
            d = dir.display()
        ),
    )
    .unwrap();
    let out = Command::new(bin.join("salt-call"))
        .arg("-c")
        .arg(&conf)
        .args(["--local", "--out", "json"])
        .args(args)
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("salt-call said {}", String::from_utf8_lossy(&out.stderr)));
    v["local"].clone()
}

#[test]
fn a_function_halite_lacks_runs_through_salts_loader_as_salt_call() {
    let Some(bin) = salt_bin() else { return };
    let dir = tempfile::tempdir().unwrap();
    let args = Args {
        positional: vec![json!({"a": 1, "b": {"c": 2}}), json!({"b": {"d": 3}})],
        kwargs: Default::default(),
    };
    // Without the option halite says what Salt says of a missing function.
    assert!(matches!(
        host(dir.path(), None).call("defaults.merge", &args),
        Err(ExecError::NotAvailable(f)) if f == "defaults.merge"
    ));
    let python = bin.join("python");
    let ours = host(dir.path(), Some(&python))
        .call("defaults.merge", &args)
        .unwrap();
    let salts = salt_call(
        &bin,
        dir.path(),
        &[
            "defaults.merge",
            r#"{"a": 1, "b": {"c": 2}}"#,
            r#"{"b": {"d": 3}}"#,
        ],
    );
    assert_eq!(ours, salts);
    assert_eq!(ours, json!({"a": 1, "b": {"c": 2, "d": 3}}));
    // A function Salt does not have either stays missing, with Salt's text.
    assert!(matches!(
        host(dir.path(), Some(&python)).call("nosuchmod.fun", &Args::default()),
        Err(ExecError::NotAvailable(f)) if f == "nosuchmod.fun"
    ));
}

/// A custom module (in the file roots' `_modules`) whose `__salt__` asks
/// for functions halite does not have.
const NETMOD: &str = r#"
def net(cidr):
    return __salt__["network.calc_net"](cidr)


def knows():
    return ["network.calc_net" in __salt__, "nosuchmod.fun" in __salt__]
"#;

#[test]
fn fallback_functions_reach_templates_and_custom_modules_dunder_salt() {
    let Some(bin) = salt_bin() else { return };
    let dir = tempfile::tempdir().unwrap();
    let roots = dir.path().join("salt");
    std::fs::create_dir_all(roots.join("_modules")).unwrap();
    std::fs::write(roots.join("_modules/netmod.py"), NETMOD).unwrap();
    std::fs::write(
        roots.join("tpl.sls"),
        "calc:\n  test.succeed_without_changes:\n    - name: {{ salt['network.calc_net']('192.168.7.9/22') }} {{ 'network.convert_cidr' in salt }}\n",
    )
    .unwrap();
    let salts = salt_call(&bin, dir.path(), &["network.calc_net", "192.168.7.9/22"]);
    assert_eq!(salts, json!("192.168.4.0/22"));
    let apply = |h: &Host| {
        h.call(
            "state.apply",
            &Args {
                positional: vec![json!("tpl")],
                kwargs: Default::default(),
            },
        )
    };

    // Without salt_fallback the template cannot call it.
    let err = format!("{:?}", apply(&host(dir.path(), None)));
    assert!(err.contains("network.calc_net"), "{err}");

    let python = bin.join("python");
    let h = host(dir.path(), Some(&python));
    let ret = apply(&h).unwrap();
    let calc = ret.as_object().unwrap().values().next().unwrap();
    assert_eq!(
        calc["name"],
        json!(format!("{} True", salts.as_str().unwrap()))
    );

    let args = |a: Vec<Value>| Args {
        positional: a,
        kwargs: Default::default(),
    };
    assert_eq!(
        h.call("netmod.net", &args(vec![json!("192.168.7.9/22")]))
            .unwrap(),
        salts
    );
    assert_eq!(
        h.call("netmod.knows", &args(vec![])).unwrap(),
        json!([true, false])
    );
    // Without the fallback the custom module's __salt__ lacks it (Salt's KeyError text).
    let plain = host(dir.path(), None);
    assert_eq!(
        plain.call("netmod.knows", &args(vec![])).unwrap(),
        json!([false, false])
    );
}
