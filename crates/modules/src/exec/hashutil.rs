//! Salt's `hashutil` execution module: digests, base64 and HMAC of strings
//! and files, as templates and `module.run` call them. Hashes come from the
//! RustCrypto crates the file module already uses (`md-5`, `sha2`), HMAC
//! from `hmac` (the RustCrypto companion of `sha2`), base64 from `base64`.

use std::path::Path;

use base64::Engine;
use halite_state::Value;
use hmac::Mac;
use serde_json::json;

use crate::exec::file::meta::HashType;
use crate::exec::{py_str, Args, ExecError, ExecFunction, ExecTable};
use crate::Host;

/// The module's table.
pub const MODULE: ExecTable = ExecTable {
    name: "hashutil",
    functions: &[
        ExecFunction::new("digest", digest),
        ExecFunction::new("digest_file", digest_file),
        ExecFunction::new("md5_digest", |a, _| {
            text_digest(a, "md5_digest", HashType::Md5)
        }),
        ExecFunction::new("sha256_digest", |a, _| {
            text_digest(a, "sha256_digest", HashType::Sha256)
        }),
        ExecFunction::new("sha512_digest", |a, _| {
            text_digest(a, "sha512_digest", HashType::Sha512)
        }),
        ExecFunction::new("base64_b64encode", base64_b64encode),
        ExecFunction::new("base64_b64decode", base64_b64decode),
        ExecFunction::new("base64_encodestring", base64_encodestring),
        ExecFunction::new("base64_decodestring", base64_b64decode),
        ExecFunction::new("base64_encodefile", base64_encodefile),
        ExecFunction::new("base64_decodefile", base64_decodefile),
        ExecFunction::new("hmac_signature", hmac_signature),
        ExecFunction::new("hmac_compute", hmac_compute),
        ExecFunction::new("github_signature", github_signature),
    ],
};

type HmacSha256 = hmac::Hmac<sha2::Sha256>;

/// A required argument as Python's `str()` gives it (Salt's `to_bytes`).
fn text(args: &Args, i: usize, key: &str, fun: &str) -> Result<String, ExecError> {
    args.get(i, key).map(py_str).ok_or_else(|| {
        ExecError::Invocation(format!(
            "{fun}() missing 1 required positional argument: '{key}'"
        ))
    })
}

/// The checksums `digest` and `digest_file` take.
fn checksum(args: &Args) -> Result<HashType, ExecError> {
    let name = args.get_str(1, "checksum").unwrap_or_else(|| "md5".into());
    match name.as_str() {
        "md5" => Ok(HashType::Md5),
        "sha256" => Ok(HashType::Sha256),
        "sha512" => Ok(HashType::Sha512),
        _ => Err(ExecError::Execution(format!(
            "Hash func '{name}' is not supported."
        ))),
    }
}

fn text_digest(args: &Args, fun: &str, kind: HashType) -> Result<Value, ExecError> {
    Ok(json!(kind.digest(text(args, 0, "instr", fun)?.as_bytes())))
}

/// `hashutil.digest <instr> [checksum=md5]`: md5, sha256 or sha512 in hex.
fn digest(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let instr = text(args, 0, "instr", "digest")?;
    Ok(json!(checksum(args)?.digest(instr.as_bytes())))
}

/// `hashutil.digest_file <infile> [checksum=md5]`: the digest of a file.
fn digest_file(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let infile = text(args, 0, "infile", "digest_file")?;
    let kind = checksum(args)?;
    if !Path::new(&infile).is_file() {
        return Err(ExecError::Execution(format!(
            "File path '{infile}' not found."
        )));
    }
    crate::exec::file::meta::file_hash(Path::new(&infile), kind)
        .map(Value::from)
        .map_err(|e| ExecError::Execution(e.to_string()))
}

/// `hashutil.base64_b64encode <instr>`: base64 without newlines.
fn base64_b64encode(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let instr = text(args, 0, "instr", "base64_b64encode")?;
    Ok(json!(
        base64::engine::general_purpose::STANDARD.encode(instr.as_bytes())
    ))
}

/// Python's `base64.encodebytes`: lines of 76 characters, each ending in
/// a newline.
fn encode_lines(data: &[u8]) -> String {
    let encoded = base64::engine::general_purpose::STANDARD.encode(data);
    let mut out = String::with_capacity(encoded.len() + encoded.len() / 76 + 1);
    for chunk in encoded.as_bytes().chunks(76) {
        out.push_str(&String::from_utf8_lossy(chunk));
        out.push('\n');
    }
    out
}

/// `hashutil.base64_encodestring <instr>`: base64 in 76-character lines.
fn base64_encodestring(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let instr = text(args, 0, "instr", "base64_encodestring")?;
    Ok(json!(encode_lines(instr.as_bytes())))
}

/// Decodes base64 as Python's `b64decode` does by default: characters
/// outside the alphabet are dropped first.
fn decode(instr: &str) -> Result<Vec<u8>, ExecError> {
    let clean: String = instr
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '='))
        .collect();
    let unpadded = clean.trim_end_matches('=');
    base64::engine::general_purpose::STANDARD_NO_PAD
        .decode(unpadded)
        .map_err(|e| ExecError::Execution(format!("Incorrect padding or bad base64 input: {e}")))
}

/// `hashutil.base64_b64decode <instr>` (and `base64_decodestring`): the
/// decoded text (undecodable UTF-8 replaced).
fn base64_b64decode(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let instr = text(args, 0, "instr", "base64_b64decode")?;
    Ok(json!(String::from_utf8_lossy(&decode(&instr)?)))
}

/// `hashutil.base64_encodefile <fname>`: a file's content as
/// `base64.encode` writes it (76-character lines).
fn base64_encodefile(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let fname = text(args, 0, "fname", "base64_encodefile")?;
    let data = std::fs::read(&fname)
        .map_err(|e| ExecError::Execution(format!("Unable to read {fname}: {e}")))?;
    Ok(json!(encode_lines(&data)))
}

/// `hashutil.base64_decodefile <instr> <outfile>`: writes the decoded bytes.
fn base64_decodefile(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let instr = text(args, 0, "instr", "base64_decodefile")?;
    let outfile = text(args, 1, "outfile", "base64_decodefile")?;
    std::fs::write(&outfile, decode(&instr)?)
        .map_err(|e| ExecError::Execution(format!("Unable to write {outfile}: {e}")))?;
    Ok(json!(true))
}

fn hmac_sha256(message: &str, secret: &str) -> Result<Vec<u8>, ExecError> {
    let mut mac = HmacSha256::new_from_slice(secret.as_bytes())
        .map_err(|e| ExecError::Execution(e.to_string()))?;
    mac.update(message.as_bytes());
    Ok(mac.finalize().into_bytes().to_vec())
}

/// `hashutil.hmac_signature <string> <shared_secret> <challenge_hmac>`:
/// whether the base64 HMAC-SHA256 of the string is the challenge.
fn hmac_signature(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let string = text(args, 0, "string", "hmac_signature")?;
    let secret = text(args, 1, "shared_secret", "hmac_signature")?;
    let challenge = text(args, 2, "challenge_hmac", "hmac_signature")?;
    let valid = base64::engine::general_purpose::STANDARD.encode(hmac_sha256(&string, &secret)?);
    Ok(json!(valid == challenge))
}

/// `hashutil.hmac_compute <string> <shared_secret>`: HMAC-SHA256 in hex.
fn hmac_compute(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let string = text(args, 0, "string", "hmac_compute")?;
    let secret = text(args, 1, "shared_secret", "hmac_compute")?;
    Ok(json!(hex::encode(hmac_sha256(&string, &secret)?)))
}

/// `hashutil.github_signature <string> <shared_secret> <type=hex>`: a
/// GitHub webhook signature (`sha1=...` or `sha256=...`) check.
fn github_signature(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let string = text(args, 0, "string", "github_signature")?;
    let secret = text(args, 1, "shared_secret", "github_signature")?;
    let challenge = text(args, 2, "challenge_hmac", "github_signature")?;
    let Some((kind, want)) = challenge.split_once('=') else {
        return Err(ExecError::Execution(
            "not enough values to unpack (expected 2, got 1)".into(),
        ));
    };
    let key = secret.as_bytes();
    let got = match kind {
        "sha1" => {
            let mut mac = hmac::Hmac::<sha1::Sha1>::new_from_slice(key)
                .map_err(|e| ExecError::Execution(e.to_string()))?;
            mac.update(string.as_bytes());
            hex::encode(mac.finalize().into_bytes())
        }
        "sha256" => hex::encode(hmac_sha256(&string, &secret)?),
        other => {
            return Err(ExecError::Execution(format!(
                "module 'hashlib' has no attribute '{other}'"
            )))
        }
    };
    Ok(json!(got == want))
}
