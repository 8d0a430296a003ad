//! apt's one-line sources (`deb [opts] uri dist comps...`): parsing, and
//! reading / rewriting `sources.list` and `sources.list.d/*.list` under a
//! base directory (`/etc/apt` unless told otherwise).
//!
//! deb822 `.sources` files in `sources.list.d` are read (listed and
//! matched) but not rewritten: changing one is refused with a clear error.

use std::path::{Path, PathBuf};

use halite_state::{Map, Value};
use serde_json::json;

use super::error::{PkgError, PkgResult};

/// The base directory of apt's configuration.
pub const DEFAULT_BASEDIR: &str = "/etc/apt";

/// One source line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceEntry {
    /// Commented out with `#`.
    pub disabled: bool,
    /// `deb` or `deb-src`.
    pub kind: String,
    /// The `[key=value ...]` options in order (`arch`, `signed-by`, `trusted`).
    pub options: Vec<(String, String)>,
    /// The repository's URI.
    pub uri: String,
    /// The distribution (`bookworm`, `stable`...).
    pub dist: String,
    /// The components (`main contrib`...).
    pub comps: Vec<String>,
    /// A trailing `# comment`.
    pub comment: String,
}

impl SourceEntry {
    /// Parses a line; `None` for blank lines, comments and anything that is
    /// not a source line (a malformed line is not an entry, as in apt).
    pub fn parse(line: &str) -> Option<SourceEntry> {
        let mut text = line.trim();
        let mut disabled = false;
        if let Some(rest) = text.strip_prefix('#') {
            disabled = true;
            text = rest.trim_start();
        }
        let (body, comment) = match text.split_once('#') {
            Some((b, c)) => (b.trim(), c.trim().to_string()),
            None => (text, String::new()),
        };
        let (kind, mut rest) = body.split_once(char::is_whitespace)?;
        if kind != "deb" && kind != "deb-src" {
            return None;
        }
        rest = rest.trim_start();
        let mut options = Vec::new();
        if let Some(after) = rest.strip_prefix('[') {
            let (opts, tail) = after.split_once(']')?;
            for opt in opts.split_whitespace() {
                let (k, v) = opt.split_once('=').unwrap_or((opt, ""));
                options.push((k.to_string(), v.to_string()));
            }
            rest = tail.trim_start();
        }
        let mut words = rest.split_whitespace();
        let uri = words.next()?.to_string();
        let dist = words.next()?.to_string();
        let comps = words.map(str::to_string).collect();
        Some(SourceEntry {
            disabled,
            kind: kind.to_string(),
            options,
            uri,
            dist,
            comps,
            comment,
        })
    }

    /// An option's value (`arch`, `signed-by`...).
    pub fn option(&self, key: &str) -> Option<&str> {
        self.options
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Sets (or with `None` removes) an option.
    pub fn set_option(&mut self, key: &str, value: Option<&str>) {
        self.options.retain(|(k, _)| k != key);
        if let Some(v) = value {
            self.options.push((key.to_string(), v.to_string()));
        }
    }

    /// The architectures of `arch=`.
    pub fn architectures(&self) -> Vec<String> {
        self.option("arch")
            .map(|a| a.split(',').map(str::to_string).collect())
            .unwrap_or_default()
    }

    /// The line as written to a file.
    pub fn to_line(&self) -> String {
        let mut s = String::new();
        if self.disabled {
            s.push_str("# ");
        }
        s.push_str(&self.kind);
        if !self.options.is_empty() {
            let opts: Vec<String> = self
                .options
                .iter()
                .map(|(k, v)| {
                    if v.is_empty() {
                        k.clone()
                    } else {
                        format!("{k}={v}")
                    }
                })
                .collect();
            s.push_str(&format!(" [{}]", opts.join(" ")));
        }
        s.push_str(&format!(" {} {}", self.uri, self.dist));
        for c in &self.comps {
            s.push(' ');
            s.push_str(c);
        }
        if !self.comment.is_empty() {
            s.push_str(" # ");
            s.push_str(&self.comment);
        }
        s
    }

    /// Same repository: type, URI (trailing `/` ignored) and dist.
    pub fn same_repo(&self, other: &SourceEntry) -> bool {
        self.kind == other.kind
            && self.uri.trim_end_matches('/') == other.uri.trim_end_matches('/')
            && self.dist == other.dist
    }

    /// Salt's repo dict (`pkg.list_repos` / `pkg.get_repo`).
    pub fn to_repo_dict(&self, file: &Path) -> Map {
        let mut m = Map::new();
        m.insert("file".into(), json!(file.display().to_string()));
        m.insert("comps".into(), json!(self.comps));
        m.insert("disabled".into(), json!(self.disabled));
        m.insert("enabled".into(), json!(!self.disabled));
        m.insert("dist".into(), json!(self.dist));
        m.insert("suites".into(), json!([self.dist]));
        m.insert("type".into(), json!(self.kind));
        m.insert("types".into(), json!([self.kind]));
        m.insert("uri".into(), json!(self.uri));
        m.insert("uris".into(), json!([self.uri]));
        m.insert("line".into(), json!(self.to_line()));
        m.insert("architectures".into(), json!(self.architectures()));
        m.insert(
            "signedby".into(),
            json!(self.option("signed-by").unwrap_or("")),
        );
        m
    }
}

/// Parses a repo definition given by the user; an error says what a valid
/// one looks like.
pub fn parse_repo(repo: &str) -> PkgResult<SourceEntry> {
    SourceEntry::parse(repo).filter(|e| !e.disabled).ok_or_else(|| {
        PkgError::Invocation(format!(
            "Error: repo '{repo}' is not a well formatted definition (expected 'deb [options] URI DIST [COMPONENTS...]')"
        ))
    })
}

/// One sources file: its path and its lines, entries parsed.
#[derive(Debug, Clone)]
pub struct SourcesFile {
    /// The file.
    pub path: PathBuf,
    /// Its lines, as they are, to be changed in place.
    pub lines: Vec<String>,
}

impl SourcesFile {
    /// The entries with their line index.
    pub fn entries(&self) -> Vec<(usize, SourceEntry)> {
        self.lines
            .iter()
            .enumerate()
            .filter_map(|(i, l)| SourceEntry::parse(l).map(|e| (i, e)))
            .collect()
    }
    /// Writes the file back (creating its directory).
    pub fn save(&self) -> PkgResult<()> {
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| PkgError::io(dir, e))?;
        }
        let mut text = self.lines.join("\n");
        if !text.is_empty() {
            text.push('\n');
        }
        std::fs::write(&self.path, text).map_err(|e| PkgError::io(&self.path, e))
    }
}

/// The sources files under `basedir`: `sources.list`, then
/// `sources.list.d/*.list` sorted by name (apt's order).
pub fn read_sources(basedir: &Path) -> PkgResult<Vec<SourcesFile>> {
    let mut paths = vec![basedir.join("sources.list")];
    let dir = basedir.join("sources.list.d");
    match std::fs::read_dir(&dir) {
        Ok(rd) => {
            let mut more: Vec<PathBuf> = rd
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "list"))
                .collect();
            more.sort();
            paths.extend(more);
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(PkgError::io(&dir, e)),
    }
    let mut files = Vec::new();
    for path in paths {
        match std::fs::read_to_string(&path) {
            Ok(text) => files.push(SourcesFile {
                path,
                lines: text.lines().map(str::to_string).collect(),
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(PkgError::io(&path, e)),
        }
    }
    Ok(files)
}

/// Parses a deb822 `.sources` file into one entry per type, URI and suite.
pub fn parse_deb822(text: &str) -> Vec<SourceEntry> {
    let mut out = Vec::new();
    for stanza in text.split("\n\n") {
        let mut fields: Vec<(String, String)> = Vec::new();
        for line in stanza.lines() {
            if line.starts_with('#') {
                continue;
            }
            if line.starts_with([' ', '\t']) {
                if let Some((_, v)) = fields.last_mut() {
                    v.push(' ');
                    v.push_str(line.trim());
                }
            } else if let Some((k, v)) = line.split_once(':') {
                fields.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
            }
        }
        let get = |k: &str| {
            fields
                .iter()
                .find(|(f, _)| f == k)
                .map(|(_, v)| v.as_str())
                .unwrap_or("")
        };
        let words = |k: &str| {
            get(k)
                .split_whitespace()
                .map(str::to_string)
                .collect::<Vec<_>>()
        };
        let mut options = Vec::new();
        if !get("architectures").is_empty() {
            options.push(("arch".to_string(), words("architectures").join(",")));
        }
        let signed_by = get("signed-by");
        if !signed_by.is_empty() && !signed_by.contains("BEGIN PGP") {
            options.push(("signed-by".to_string(), signed_by.to_string()));
        }
        if halite_state::truthy(&Value::from(get("trusted"))) {
            options.push(("trusted".to_string(), "yes".to_string()));
        }
        let disabled = get("enabled").eq_ignore_ascii_case("no");
        for kind in words("types") {
            for uri in words("uris") {
                for dist in words("suites") {
                    out.push(SourceEntry {
                        disabled,
                        kind: kind.clone(),
                        options: options.clone(),
                        uri: uri.clone(),
                        dist,
                        comps: words("components"),
                        comment: String::new(),
                    });
                }
            }
        }
    }
    out
}

/// The deb822 files of `<basedir>/sources.list.d` and their entries.
pub fn read_deb822_sources(basedir: &Path) -> PkgResult<Vec<(PathBuf, Vec<SourceEntry>)>> {
    let dir = basedir.join("sources.list.d");
    let mut paths: Vec<PathBuf> = match std::fs::read_dir(&dir) {
        Ok(rd) => rd
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "sources"))
            .collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(PkgError::io(&dir, e)),
    };
    paths.sort();
    let mut out = Vec::new();
    for path in paths {
        let text = std::fs::read_to_string(&path).map_err(|e| PkgError::io(&path, e))?;
        out.push((path, parse_deb822(&text)));
    }
    Ok(out)
}

/// Every entry with the file it is in: one-line files first, then deb822.
fn all_entries(basedir: &Path) -> PkgResult<Vec<(PathBuf, SourceEntry)>> {
    let mut out = Vec::new();
    for file in read_sources(basedir)? {
        for (_, e) in file.entries() {
            out.push((file.path.clone(), e));
        }
    }
    for (path, entries) in read_deb822_sources(basedir)? {
        out.extend(entries.into_iter().map(|e| (path.clone(), e)));
    }
    Ok(out)
}

/// Refuses to edit a repo that lives in a deb822 file.
fn refuse_deb822(basedir: &Path, wanted: &SourceEntry, repo: &str) -> PkgResult<()> {
    for (path, entries) in read_deb822_sources(basedir)? {
        if entries.iter().any(|e| e.same_repo(wanted)) {
            return Err(PkgError::Unsupported(format!(
                "repo '{repo}' is defined in the deb822 file {}; halite does not rewrite deb822 sources yet, \
                 manage that file with file.managed",
                path.display()
            )));
        }
    }
    Ok(())
}

/// `pkg.list_repos`: uri -> [repo dict...].
pub fn list_repos(basedir: &Path) -> PkgResult<Map> {
    let mut repos = Map::new();
    for (path, e) in all_entries(basedir)? {
        let entry = repos
            .entry(e.uri.clone())
            .or_insert_with(|| Value::Array(Vec::new()));
        if let Value::Array(list) = entry {
            list.push(Value::Object(e.to_repo_dict(&path)));
        }
    }
    Ok(repos)
}

/// `pkg.get_repo`: the first entry with the same type, URI and dist (and,
/// when the definition names components, one of them); `{}` when none.
pub fn get_repo(basedir: &Path, repo: &str) -> PkgResult<Map> {
    let wanted = parse_repo(repo)?;
    for (path, e) in all_entries(basedir)? {
        if e.same_repo(&wanted)
            && (wanted.comps.is_empty() || wanted.comps.iter().any(|c| e.comps.contains(c)))
        {
            return Ok(e.to_repo_dict(&path));
        }
    }
    Ok(Map::new())
}

/// `pkg.del_repo`: removes the matching entries; a `sources.list.d` file
/// left without entries is deleted.
pub fn del_repo(basedir: &Path, repo: &str) -> PkgResult<String> {
    let wanted = parse_repo(repo)?;
    let mut msg = String::new();
    for mut file in read_sources(basedir)? {
        let matching: Vec<usize> = file
            .entries()
            .into_iter()
            .filter(|(_, e)| e.same_repo(&wanted) && e.architectures() == wanted.architectures())
            .map(|(i, _)| i)
            .collect();
        if matching.is_empty() {
            continue;
        }
        for i in matching.iter().rev() {
            file.lines.remove(*i);
        }
        let in_parts_dir = file
            .path
            .parent()
            .is_some_and(|p| p.ends_with("sources.list.d"));
        if file.entries().is_empty() && in_parts_dir {
            std::fs::remove_file(&file.path).map_err(|e| PkgError::io(&file.path, e))?;
            msg.push_str(&format!(
                "File {} containing repo '{repo}' has been removed.\n",
                file.path.display()
            ));
        } else {
            file.save()?;
            msg.push_str(&format!(
                "Repo '{repo}' has been removed from {}.\n",
                file.path.display()
            ));
        }
    }
    if msg.is_empty() {
        refuse_deb822(basedir, &wanted, repo)?;
        return Err(PkgError::failed(
            format!("Repo {repo} doesn't exist in the sources.list(s)"),
            "",
        ));
    }
    Ok(msg)
}

/// `pkg.mod_repo`: rewrites the matching entry in place, or appends the
/// repo to `file` (default `<basedir>/sources.list`). `settings` may set
/// `disabled`, `architectures`, `signedby`, `trusted`, `comps`, `comments`.
pub fn mod_repo(basedir: &Path, repo: &str, settings: &Map) -> PkgResult<Map> {
    let mut entry = parse_repo(repo)?;
    apply_settings(&mut entry, settings);
    let target_file = settings
        .get("file")
        .and_then(Value::as_str)
        .map(PathBuf::from);
    let mut files = read_sources(basedir)?;
    let mut done = false;
    for file in files.iter_mut() {
        if let Some((i, _)) = file
            .entries()
            .into_iter()
            .find(|(_, e)| e.same_repo(&entry))
        {
            file.lines[i] = entry.to_line();
            file.save()?;
            done = true;
            break;
        }
    }
    if !done {
        refuse_deb822(basedir, &entry, repo)?;
        let path = target_file.unwrap_or_else(|| basedir.join("sources.list"));
        let mut file = match files.into_iter().find(|f| f.path == path) {
            Some(f) => f,
            None => match std::fs::read_to_string(&path) {
                Ok(text) => SourcesFile {
                    path,
                    lines: text.lines().map(str::to_string).collect(),
                },
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => SourcesFile {
                    path,
                    lines: Vec::new(),
                },
                Err(e) => return Err(PkgError::io(&path, e)),
            },
        };
        file.lines.push(entry.to_line());
        file.save()?;
    }
    let mut ret = Map::new();
    ret.insert(
        repo.to_string(),
        Value::Object(get_repo(basedir, entry.to_line().trim_start_matches("# "))?),
    );
    Ok(ret)
}

fn value_list(v: &Value) -> Vec<String> {
    match v {
        Value::Array(a) => a
            .iter()
            .filter_map(|x| x.as_str().map(str::to_string))
            .collect(),
        Value::String(s) => s
            .split([',', ' '])
            .filter(|x| !x.is_empty())
            .map(str::to_string)
            .collect(),
        _ => Vec::new(),
    }
}

/// Applies pkgrepo/mod_repo settings to an entry.
pub fn apply_settings(entry: &mut SourceEntry, settings: &Map) {
    if let Some(v) = settings.get("disabled").filter(|v| !v.is_null()) {
        entry.disabled = halite_state::truthy(v);
    } else if let Some(v) = settings.get("enabled").filter(|v| !v.is_null()) {
        entry.disabled = !halite_state::truthy(v);
    }
    if let Some(v) = settings.get("architectures").filter(|v| !v.is_null()) {
        let archs = value_list(v);
        let joined = archs.join(",");
        entry.set_option(
            "arch",
            if archs.is_empty() {
                None
            } else {
                Some(joined.as_str())
            },
        );
    }
    if let Some(v) = settings
        .get("signedby")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
    {
        entry.set_option("signed-by", Some(v));
    }
    if let Some(v) = settings.get("trusted").filter(|v| !v.is_null()) {
        entry.set_option(
            "trusted",
            if halite_state::truthy(v) {
                Some("yes")
            } else {
                None
            },
        );
    }
    if let Some(v) = settings.get("comps").filter(|v| !v.is_null()) {
        let comps = value_list(v);
        if !comps.is_empty() {
            entry.comps = comps;
        }
    }
    if let Some(v) = settings.get("comments").filter(|v| !v.is_null()) {
        entry.comment = match v {
            Value::Array(a) => a
                .iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(" "),
            Value::String(s) => s.clone(),
            _ => String::new(),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_print() {
        let e = SourceEntry::parse(
            "deb [arch=amd64 signed-by=/k.gpg] http://x/debian bookworm main contrib # hi",
        )
        .unwrap_or_else(|| panic!("should parse"));
        assert_eq!(e.architectures(), vec!["amd64"]);
        assert_eq!(e.option("signed-by"), Some("/k.gpg"));
        assert_eq!(e.comps, vec!["main", "contrib"]);
        assert_eq!(
            e.to_line(),
            "deb [arch=amd64 signed-by=/k.gpg] http://x/debian bookworm main contrib # hi"
        );
        let d =
            SourceEntry::parse("# deb-src http://x/ y").unwrap_or_else(|| panic!("should parse"));
        assert!(d.disabled);
        assert!(SourceEntry::parse("# just a comment").is_none());
        assert!(parse_repo("deb onlyuri").is_err());
    }
}
