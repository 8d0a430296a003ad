//! Helpers shared by the tests that need a loopback HTTP(S) server.

#![allow(dead_code)]

use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// The python3 file server of tests/fixtures/http_server.py on 127.0.0.1,
/// killed when dropped.
pub struct Server {
    child: Child,
    /// The port it listens on.
    pub port: u16,
}

impl Server {
    /// Serves `dir`, over TLS when `tls` gives a certificate and key.
    pub fn start(dir: &Path, tls: Option<(&Path, &Path)>) -> Server {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/http_server.py");
        let mut cmd = Command::new("python3");
        cmd.arg(script).arg("--dir").arg(dir);
        if let Some((cert, key)) = tls {
            cmd.arg("--cert").arg(cert).arg("--key").arg(key);
        }
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("start python3 http server: {e}"));
        let mut line = String::new();
        let out = child
            .stdout
            .take()
            .unwrap_or_else(|| panic!("server stdout"));
        BufReader::new(out)
            .read_line(&mut line)
            .unwrap_or_else(|e| panic!("server port: {e}"));
        let port = line
            .trim()
            .parse()
            .unwrap_or_else(|e| panic!("server printed {line:?}: {e}"));
        Server { child, port }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A CA and a server certificate for 127.0.0.1 made with openssl in `dir`:
/// (CA pem, server cert pem, server key pem).
pub fn make_certs(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let run = |args: &[&str]| {
        let st = Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .stderr(Stdio::null())
            .status()
            .unwrap_or_else(|e| panic!("run openssl: {e}"));
        assert!(st.success(), "openssl {args:?} failed");
    };
    run(&[
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=halite test CA",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
    ]);
    run(&[
        "req",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-keyout",
        "srv.key",
        "-out",
        "srv.csr",
        "-subj",
        "/CN=127.0.0.1",
    ]);
    fs::write(
        dir.join("ext"),
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap_or_else(|e| panic!("write ext: {e}"));
    run(&[
        "x509",
        "-req",
        "-in",
        "srv.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "srv.pem",
        "-days",
        "2",
        "-extfile",
        "ext",
    ]);
    (dir.join("ca.pem"), dir.join("srv.pem"), dir.join("srv.key"))
}
