//! `ftp://` sources against a real FTP server on 127.0.0.1: a small
//! passive-mode server on a thread (USER/PASS/TYPE/PASV/SIZE/RETR/QUIT over
//! real sockets), since no FTP server package is installed here. It checks
//! the client's login, passive data connection, binary transfer, the 550
//! "not found" path and the cache layout.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

use std::collections::BTreeMap;
use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use halite_modules::exec::Args;
use halite_modules::host::LogEvents;
use halite_modules::{table, Host, LocalFileClient};
use halite_state::Map;
use serde_json::json;

/// Serves the files of `root` until the test ends; records each login.
fn ftp_server(root: PathBuf, logins: Arc<Mutex<Vec<String>>>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let root = root.clone();
            let logins = logins.clone();
            std::thread::spawn(move || {
                let _ = session(conn, &root, &logins);
            });
        }
    });
    port
}

fn session(conn: TcpStream, root: &Path, logins: &Mutex<Vec<String>>) -> std::io::Result<()> {
    let mut out = conn.try_clone()?;
    let mut reader = BufReader::new(conn);
    out.write_all(b"220 halite test ftp\r\n")?;
    let mut user = String::new();
    let mut data: Option<TcpListener> = None;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let line = line.trim_end();
        let (cmd, arg) = line.split_once(' ').unwrap_or((line, ""));
        match cmd.to_ascii_uppercase().as_str() {
            "USER" => {
                user = arg.to_string();
                out.write_all(b"331 password please\r\n")?;
            }
            "PASS" => {
                logins.lock().expect("logins").push(format!("{user}:{arg}"));
                out.write_all(b"230 logged in\r\n")?;
            }
            "TYPE" => out.write_all(b"200 type set\r\n")?,
            "PASV" => {
                let l = TcpListener::bind("127.0.0.1:0")?;
                let p = l.local_addr()?.port();
                data = Some(l);
                out.write_all(
                    format!(
                        "227 Entering Passive Mode (127,0,0,1,{},{})\r\n",
                        p / 256,
                        p % 256
                    )
                    .as_bytes(),
                )?;
            }
            "SIZE" => match fs::metadata(root.join(arg.trim_start_matches('/'))) {
                Ok(md) => out.write_all(format!("213 {}\r\n", md.len()).as_bytes())?,
                Err(_) => out.write_all(b"550 no such file\r\n")?,
            },
            "RETR" => {
                let path = root.join(arg.trim_start_matches('/'));
                match (fs::read(&path), data.take()) {
                    (Ok(bytes), Some(l)) => {
                        out.write_all(b"150 sending\r\n")?;
                        let (mut d, _) = l.accept()?;
                        d.write_all(&bytes)?;
                        drop(d);
                        out.write_all(b"226 done\r\n")?;
                    }
                    (Err(_), _) => out.write_all(b"550 no such file\r\n")?,
                    (_, None) => out.write_all(b"425 use PASV first\r\n")?,
                }
            }
            "QUIT" => {
                out.write_all(b"221 bye\r\n")?;
                return Ok(());
            }
            _ => out.write_all(b"502 not implemented\r\n")?,
        }
    }
}

#[test]
fn ftp_sources_are_fetched_anonymously_or_with_credentials() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("ftp");
    fs::create_dir_all(root.join("pub")).expect("mkdir");
    // Binary content: every byte value, so an ASCII-mode transfer would show.
    let payload: Vec<u8> = (0u8..=255).cycle().take(70_000).collect();
    fs::write(root.join("pub/blob.bin"), &payload).expect("write");
    let logins = Arc::new(Mutex::new(Vec::new()));
    let port = ftp_server(root, logins.clone());
    let cache = dir.path().join("cache");
    let host = Host {
        opts: json!({"cachedir": cache.display().to_string()}),
        grains: json!({}),
        pillar: json!({}),
        files: Arc::new(LocalFileClient::new(BTreeMap::new())),
        exec: table::exec_modules(),
        states: table::state_modules(),
        events: Arc::new(LogEvents),
    };
    let call = |url: String, dest: Option<String>| {
        let mut positional = vec![json!(url)];
        if let Some(d) = dest {
            positional.push(json!(d));
        }
        host.call(
            "cp.get_url",
            &Args {
                positional,
                kwargs: Map::new(),
            },
        )
    };

    let url = format!("ftp://127.0.0.1:{port}/pub/blob.bin");
    let got = call(url.clone(), None).expect("cp.get_url over ftp");
    let cached = cache.join(format!("extrn_files/base/127.0.0.1{port}/pub/blob.bin"));
    assert_eq!(got, json!(cached.display().to_string()));
    assert_eq!(fs::read(&cached).expect("cached"), payload);

    let dest = dir.path().join("blob.bin");
    let url = format!("ftp://bob:s%40cret@127.0.0.1:{port}/pub/blob.bin");
    call(url, Some(dest.display().to_string())).expect("cp.get_url with credentials");
    assert_eq!(fs::read(&dest).expect("dest"), payload);
    assert_eq!(
        *logins.lock().expect("logins"),
        vec!["anonymous:anonymous@".to_string(), "bob:s@cret".to_string()]
    );

    let missing = format!("ftp://127.0.0.1:{port}/pub/nope.bin");
    let err = call(missing, Some(dir.path().join("nope").display().to_string()))
        .expect_err("a 550 is an error");
    assert!(err.to_string().contains("nope.bin"), "{err}");
    assert!(!dir.path().join("nope").exists());
}
