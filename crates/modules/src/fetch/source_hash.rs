//! Salt's `file.extract_hash` and the parsing half of `file.get_source_sum`:
//! a `source_hash` given as a digest or `<type>=<digest>`, or the text of a
//! hash file in which the line for the file is found by
//! `source_hash_name`, the target's name or the source's basename. Fetching
//! a hash file is the fetch layer's ([`super::get_source_sum`]), so this
//! file needs nothing from its parent.

use std::path::Path;

use regex::Regex;

use crate::exec::file::meta::{file_hash, HashType};

/// A hash a source must have (Salt's `source_sum`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceSum {
    /// The algorithm.
    pub hash_type: HashType,
    /// The lowercase hex digest.
    pub hsum: String,
}

/// Salt's hash names and lengths, as its error messages list them.
const SUPPORTED: &str = "md5 (32), sha1 (40), sha224 (56), sha256 (64), sha384 (96), sha512 (128)";
const PROTOS: &str = "salt, file, http, https, ftp, swift, s3";

impl SourceSum {
    /// The algorithm's name (`sha256`).
    pub fn type_name(&self) -> String {
        format!("{:?}", self.hash_type).to_ascii_lowercase()
    }

    /// Whether the file at `path` has this hash.
    pub fn matches_file(&self, path: &Path) -> bool {
        file_hash(path, self.hash_type).is_ok_and(|h| h == self.hsum)
    }
}

pub(crate) fn invalid_format(spec: &str) -> String {
    format!(
        "Source hash {spec} format is invalid. The supported formats are: 1) a hash, 2) an expression in the format <hash_type>=<hash>, or 3) either a path to a local file containing hashes, or a URI of a remote hash file. Supported protocols for remote hash files are: {PROTOS}. The hash may also not be of a valid length, the following are supported hash types and lengths: {SUPPORTED}."
    )
}

/// A `source_hash` that is a digest or `<type>=<digest>`, checked as Salt
/// checks it (with its error messages).
pub fn parse_spec(spec: &str) -> Result<SourceSum, String> {
    let (kind, hsum) = match spec.split_once('=') {
        Some((k, h)) => (k.trim().to_string(), h.trim().to_string()),
        None => {
            if spec.is_empty() || !spec.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(invalid_format(spec));
            }
            let kind = HashType::from_hex_len(spec.len()).ok_or_else(|| invalid_format(spec))?;
            return Ok(SourceSum {
                hash_type: kind,
                hsum: spec.to_ascii_lowercase(),
            });
        }
    };
    let Ok(hash_type) = HashType::parse(&kind) else {
        return Err(format!(
            "Invalid hash type '{kind}'. Supported hash types are: md5, sha1, sha224, sha256, sha384, sha512. Either remove the hash type and simply use '{hsum}' as the source_hash, or change the hash type to a supported type."
        ));
    };
    let Some(by_len) = HashType::from_hex_len(hsum.len()) else {
        return Err(invalid_format(spec));
    };
    if by_len != hash_type {
        let name = format!("{by_len:?}").to_ascii_lowercase();
        return Err(format!(
            "Invalid length ({}) for hash type '{kind}'. Either remove the hash type and simply use '{hsum}' as the source_hash, or change the hash type to '{name}'",
            hsum.len()
        ));
    }
    Ok(SourceSum {
        hash_type,
        hsum: hsum.to_ascii_lowercase(),
    })
}

fn basename(s: &str) -> &str {
    s.rsplit('/').next().unwrap_or(s)
}

/// Whether `line` names `wanted` the way Salt's `extract_hash` looks: it
/// ends with the basename preceded by a separator, or starts with the
/// whole name followed by whitespace.
fn line_names(line: &str, whole: &str, base: &str, separators: &str) -> bool {
    if !base.is_empty() && line.ends_with(base) {
        let before = line[..line.len() - base.len()].chars().next_back();
        return before.is_some_and(|c| separators.contains(c));
    }
    line.strip_prefix(whole)
        .and_then(|rest| rest.chars().next())
        .is_some_and(char::is_whitespace)
}

/// Salt's `file.extract_hash` over the text of a hash file: the hash of the
/// line matching `source_hash_name`, else `file_name`, else `source`; else
/// the first hash in the file.
pub fn extract_hash(
    text: &str,
    file_name: &str,
    source: &str,
    source_hash_name: Option<&str>,
) -> Option<SourceSum> {
    // A hash is a run of hex digits of a supported length, not inside a word.
    let hash_re = Regex::new(r"(?i)(?:^|[^a-z0-9])([a-f0-9]{32,128})(?:$|[^a-z0-9])").ok()?;
    const WS: &str = " \t\n\r\x0b\x0c";
    const SEPS: &str = " \t\n\r\x0b\x0c\\/*";
    let source_path = source
        .split_once("://")
        .map_or(source, |(_, r)| r.split_once('/').map_or(r, |(_, p)| p));
    let source_path = source_path.split(['?', '#']).next().unwrap_or(source_path);
    let source_base = basename(source_path);
    let file_base = basename(file_name);
    let mut partial = None;
    let mut by_name = None;
    let mut by_file = None;
    let mut by_source = None;
    for line in text.lines() {
        let line = line.trim();
        let Some(hex) = hash_re.captures(line).and_then(|c| c.get(1)) else {
            continue;
        };
        let Some(hash_type) = HashType::from_hex_len(hex.len()) else {
            continue;
        };
        let found = SourceSum {
            hash_type,
            hsum: hex.as_str().to_ascii_lowercase(),
        };
        partial.get_or_insert_with(|| found.clone());
        if let Some(name) = source_hash_name.filter(|n| !n.is_empty()) {
            if by_name.is_none() && line_names(line, name, name, WS) {
                by_name = Some(found.clone());
            }
        }
        if !file_name.is_empty()
            && by_file.is_none()
            && line_names(line, file_name, file_base, SEPS)
        {
            by_file = Some(found.clone());
        }
        if !source.is_empty() && by_source.is_none() && line_names(line, source, source_base, SEPS)
        {
            by_source = Some(found.clone());
        }
    }
    by_name.or(by_file).or(by_source).or(partial)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHA_A: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const SHA_B: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
    const MD5_C: &str = "cccccccccccccccccccccccccccccccc";

    #[test]
    fn finds_the_line_of_the_source() {
        let text = format!("{SHA_A}  foo-1.0.tar.gz\n{SHA_B} *bar-2.0.tar.gz\n");
        let got = extract_hash(&text, "", "https://h/dl/bar-2.0.tar.gz", None);
        assert_eq!(got.map(|s| s.hsum), Some(SHA_B.to_string()));
    }

    #[test]
    fn source_hash_name_wins_then_first_hash() {
        let text = format!("{SHA_A}  ./dir1/foo.tar.gz\n{SHA_B}  ./dir2/foo.tar.gz\n");
        let got = extract_hash(&text, "", "http://h/foo.tar.gz", Some("./dir2/foo.tar.gz"));
        assert_eq!(got.map(|s| s.hsum), Some(SHA_B.to_string()));
        // Without a name both lines match the basename: the first wins.
        let got = extract_hash(&text, "", "http://h/foo.tar.gz", None);
        assert_eq!(got.map(|s| s.hsum), Some(SHA_A.to_string()));
        // Nothing matches: the first hash in the file.
        let got = extract_hash(&format!("{MD5_C} other\n"), "/etc/x", "http://h/y", None);
        assert_eq!(
            got.map(|s| (s.hash_type, s.hsum)),
            Some((HashType::Md5, MD5_C.to_string()))
        );
        assert_eq!(
            extract_hash("no hashes here\n", "", "http://h/y", None),
            None
        );
    }

    #[test]
    fn target_name_beats_source() {
        let text = format!("{SHA_A} src.txt\n{SHA_B} /etc/target.conf\n");
        let got = extract_hash(&text, "/etc/target.conf", "http://h/src.txt", None);
        assert_eq!(got.map(|s| s.hsum), Some(SHA_B.to_string()));
    }

    #[test]
    fn specs_as_salt_checks_them() {
        assert_eq!(
            parse_spec(&format!("sha256={SHA_A}")).map(|s| s.hash_type),
            Ok(HashType::Sha256)
        );
        assert_eq!(parse_spec(MD5_C).map(|s| s.hash_type), Ok(HashType::Md5));
        let e = parse_spec(&format!("md5={SHA_A}")).unwrap_err();
        assert!(
            e.starts_with("Invalid length (64) for hash type 'md5'"),
            "{e}"
        );
        let e = parse_spec("xyz").unwrap_err();
        assert!(e.starts_with("Source hash xyz format is invalid."), "{e}");
        let e = parse_spec(&format!("crc={SHA_A}")).unwrap_err();
        assert!(e.starts_with("Invalid hash type 'crc'"), "{e}");
    }
}
