//! The `hosts` execution module on a copy of a hosts file (`hosts.file`),
//! with the line formats Salt 3008.5 writes.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

use std::sync::Arc;

use halite_modules::host::LogEvents;
use halite_modules::{table, Args, Host, LocalFileClient};
use serde_json::{json, Value};

fn call(host: &Host, fun: &str, positional: Vec<Value>) -> Value {
    let args = Args {
        positional,
        kwargs: Default::default(),
    };
    host.call(fun, &args)
        .unwrap_or_else(|e| panic!("{fun} failed: {e}"))
}

#[test]
fn hosts_functions_read_and_edit_a_hosts_file_copy() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("hosts");
    std::fs::write(
        &file,
        "127.0.0.1\tlocalhost\n# lab\n10.0.0.1 web1 web1.lab # web\n10.0.0.1 www\n",
    )
    .expect("write hosts");
    let host = Host {
        opts: json!({"hosts.file": file.display().to_string()}),
        grains: json!({}),
        pillar: json!({}),
        files: Arc::new(LocalFileClient::default()),
        exec: table::exec_modules(),
        states: table::state_modules(),
        events: Arc::new(LogEvents),
    };
    assert_eq!(
        call(&host, "hosts.list_hosts", vec![]),
        json!({
            "127.0.0.1": {"aliases": ["localhost"]},
            "comment-0": ["# lab"],
            "10.0.0.1": {"aliases": ["web1", "web1.lab", "www"], "comment": "web"},
        })
    );
    assert_eq!(
        call(&host, "hosts.get_ip", vec![json!("www")]),
        json!("10.0.0.1")
    );
    assert_eq!(call(&host, "hosts.get_ip", vec![json!("nope")]), json!(""));
    assert_eq!(
        call(&host, "hosts.get_alias", vec![json!("10.0.0.1")]),
        json!(["web1", "web1.lab", "www"])
    );
    assert_eq!(
        call(
            &host,
            "hosts.has_pair",
            vec![json!("10.0.0.1"), json!(["www", "web1"])]
        ),
        json!(true)
    );
    assert_eq!(
        call(
            &host,
            "hosts.has_pair",
            vec![json!("10.0.0.9"), json!("www")]
        ),
        json!(false)
    );
    // set_host replaces every line of the address with one.
    assert_eq!(
        call(
            &host,
            "hosts.set_host",
            vec![json!("10.0.0.1"), json!("app1 app1.lab")]
        ),
        json!(true)
    );
    assert_eq!(
        std::fs::read_to_string(&file).expect("read"),
        "127.0.0.1\tlocalhost\n# lab\n10.0.0.1\t\tapp1 app1.lab\n"
    );
    assert_eq!(
        call(
            &host,
            "hosts.rm_host",
            vec![json!("10.0.0.1"), json!("app1")]
        ),
        json!(true)
    );
    assert_eq!(
        call(
            &host,
            "hosts.add_host",
            vec![json!("10.0.0.7"), json!("new1")]
        ),
        json!(true)
    );
    assert_eq!(
        std::fs::read_to_string(&file).expect("read"),
        "127.0.0.1\t\tlocalhost\n# lab\n10.0.0.1\t\tapp1.lab\n10.0.0.7\t\tnew1\n"
    );
    // An alias of only spaces removes the address.
    call(&host, "hosts.set_host", vec![json!("10.0.0.7"), json!(" ")]);
    assert_eq!(
        call(&host, "hosts.get_alias", vec![json!("10.0.0.7")]),
        json!([])
    );
}
