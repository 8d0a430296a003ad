//! Salt's `gpg` renderer (salt/renderers/gpg.py): every armored
//! `-----BEGIN PGP MESSAGE----- ... -----END PGP MESSAGE-----` block in the
//! data (strings at any depth of mappings and lists) is decrypted with the
//! `gpg` binary and the keys of `gpg_keydir` (default
//! `<config_dir>/gpgkeys`), as Salt shells out to GnuPG. A block that cannot
//! be decrypted is an error when `gpg_decrypt_must_succeed` (Salt 3008's
//! default), else it is left as it was with Salt's warning.
//!
//! What a compile decrypted is remembered per thread ([`take_decrypted`]),
//! so the master can mask those cleartexts in everything it writes to disk
//! (its pillar cache, its job cache).

use std::cell::RefCell;
use std::io::Write;
use std::process::{Command, Stdio};

use halite_state::Value;

const BEGIN: &str = "-----BEGIN PGP MESSAGE-----";
const END: &str = "-----END PGP MESSAGE-----";

thread_local! {
    static DECRYPTED: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}

/// The cleartexts this thread decrypted since the last call (and forgets
/// them): empty when nothing was decrypted.
pub fn take_decrypted() -> Vec<String> {
    DECRYPTED.with(|d| std::mem::take(&mut *d.borrow_mut()))
}

/// The GnuPG home holding the private keys: `gpg_keydir`, else
/// `<config_dir>/gpgkeys` (`/etc/salt/gpgkeys` when no config dir is known).
pub fn key_dir(opts: &Value) -> String {
    if let Some(dir) = opts
        .get("gpg_keydir")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
    {
        return dir.to_string();
    }
    let base = opts
        .get("config_dir")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .unwrap_or("/etc/salt");
    format!("{}/gpgkeys", base.trim_end_matches('/'))
}

/// The `gpg` renderer: `data` with every armored block decrypted.
pub fn render(data: &Value, opts: &Value) -> Result<Value, String> {
    let must_succeed = opts
        .get("gpg_decrypt_must_succeed")
        .is_none_or(halite_salt_rules::truth::python_bool);
    let keydir = key_dir(opts);
    tracing::debug!("Reading GPG keys from: {keydir}");
    let dec = Decryptor {
        keydir,
        must_succeed,
    };
    dec.object(data)
}

struct Decryptor {
    keydir: String,
    must_succeed: bool,
}

impl Decryptor {
    fn object(&self, v: &Value) -> Result<Value, String> {
        Ok(match v {
            Value::String(s) => Value::String(self.text(s)?),
            Value::Array(a) => {
                Value::Array(a.iter().map(|x| self.object(x)).collect::<Result<_, _>>()?)
            }
            Value::Object(m) => {
                let mut out = serde_json::Map::new();
                for (k, x) in m {
                    out.insert(k.clone(), self.object(x)?);
                }
                Value::Object(out)
            }
            other => other.clone(),
        })
    }

    /// `_decrypt_ciphertexts`: each block replaced; with one or more, the
    /// trailing newlines of the result are stripped as Salt does.
    fn text(&self, s: &str) -> Result<String, String> {
        let mut out = String::new();
        let mut rest = s;
        let mut found = false;
        while let Some(start) = rest.find(BEGIN) {
            let Some(end_rel) = rest[start..].find(END) else {
                break;
            };
            let end = start + end_rel + END.len();
            out.push_str(&rest[..start]);
            out.push_str(&self.block(&rest[start..end])?);
            rest = &rest[end..];
            found = true;
        }
        if !found {
            return Ok(s.to_string());
        }
        out.push_str(rest);
        Ok(out.trim_end_matches('\n').to_string())
    }

    /// One block through `gpg --homedir <keydir> --batch --no-tty -d`.
    fn block(&self, cipher: &str) -> Result<String, String> {
        let cipher = cipher.replace("\\n", "\n");
        let result = Command::new("gpg")
            .args([
                "--homedir",
                &self.keydir,
                "--batch",
                "--status-fd",
                "2",
                "--no-tty",
                "-d",
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .and_then(|mut child| {
                if let Some(mut stdin) = child.stdin.take() {
                    // A gpg that exits early closes its stdin: its status says why.
                    let _ = stdin.write_all(cipher.as_bytes());
                }
                child.wait_with_output()
            });
        let (stdout, stderr) = match result {
            Ok(out) => (
                out.stdout,
                String::from_utf8_lossy(&out.stderr).into_owned(),
            ),
            Err(e) => (Vec::new(), format!("cannot run gpg (install gnupg): {e}")),
        };
        if stdout.is_empty() {
            tracing::warn!("Could not decrypt cipher {cipher:?}, received: {stderr:?}");
            if self.must_succeed {
                return Err(format!(
                    "Could not decrypt cipher {cipher:?}, received: {stderr:?} (keys looked up in gpg_keydir {})",
                    self.keydir
                ));
            }
            return Ok(cipher);
        }
        let clear = String::from_utf8_lossy(&stdout).into_owned();
        DECRYPTED.with(|d| d.borrow_mut().push(clear.clone()));
        Ok(clear)
    }
}
