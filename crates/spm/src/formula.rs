//! The `FORMULA` file: what a package is, what it needs, which files it
//! ships and what to run around its install.

use serde_json::{Map, Value};

use crate::error::{Result, SpmError};

/// The fields `build` refuses to go without, in the order they are checked.
pub const REQUIRED_FIELDS: [&str; 7] = [
    "name",
    "os",
    "os_family",
    "version",
    "release",
    "summary",
    "description",
];

/// The fields an install needs from a package's FORMULA (Salt's own check;
/// packages built by Salt need not carry `os`/`os_family`).
pub const REQUIRED_AT_INSTALL: [&str; 5] = ["name", "version", "release", "summary", "description"];

/// A type tag of an entry in FORMULA's `files` list (`d|docs/index.rst`),
/// as in RPM: it decides where the file is installed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileType {
    /// `c`: a config file.
    Config,
    /// `d`: documentation.
    Doc,
    /// `g`: a ghost (recorded, not installed).
    Ghost,
    /// `l`: a licence.
    License,
    /// `r`: a readme.
    Readme,
    /// `s`: a state file (the default).
    Sls,
    /// `m`: a Salt module.
    Module,
}

impl FileType {
    /// The tag letter, as written in FORMULA and stored in the database.
    pub fn letter(self) -> char {
        match self {
            FileType::Config => 'c',
            FileType::Doc => 'd',
            FileType::Ghost => 'g',
            FileType::License => 'l',
            FileType::Readme => 'r',
            FileType::Sls => 's',
            FileType::Module => 'm',
        }
    }

    fn from_letter(letter: &str) -> Option<Self> {
        Some(match letter {
            "c" => FileType::Config,
            "d" => FileType::Doc,
            "g" => FileType::Ghost,
            "l" => FileType::License,
            "r" => FileType::Readme,
            "s" => FileType::Sls,
            "m" => FileType::Module,
            _ => return None,
        })
    }

    /// Config, doc, ghost, license and readme files live in `spm_share_dir`.
    pub fn goes_to_share_dir(self) -> bool {
        matches!(
            self,
            FileType::Config
                | FileType::Doc
                | FileType::Ghost
                | FileType::License
                | FileType::Readme
        )
    }
}

/// One entry of FORMULA's `files` list: a path relative to the formula dir
/// and its optional type tag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileEntry {
    /// The type tag, when the entry has one.
    pub tag: Option<FileType>,
    /// The path below the formula's top directory.
    pub path: String,
}

impl FileEntry {
    /// Splits `d|docs/index.rst` into its tag and path.
    pub fn parse(line: &str) -> Self {
        if let Some((letter, rest)) = line.split_once('|') {
            if let Some(tag) = FileType::from_letter(letter.trim()) {
                return FileEntry {
                    tag: Some(tag),
                    path: rest.trim().to_string(),
                };
            }
        }
        FileEntry {
            tag: None,
            path: line.trim().to_string(),
        }
    }
}

/// A `*_tgt_state` section: SLS text published to `tgt` through the master.
#[derive(Debug, Clone, PartialEq)]
pub struct TargetedState {
    /// The target expression.
    pub tgt: String,
    /// How the target is read (`glob`, `list`...).
    pub tgt_type: String,
    /// The SLS text to apply.
    pub data: String,
}

/// A parsed FORMULA. `variables` keeps every key (known or not) for the
/// pre/post state templates, as Salt passes the whole FORMULA to them.
#[derive(Debug, Clone)]
pub struct Formula {
    /// The package name.
    pub name: String,
    /// The formula's version (`201506`).
    pub version: String,
    /// The release of that version (`2`).
    pub release: String,
    /// One line saying what the formula does.
    pub summary: String,
    /// A longer description.
    pub description: String,
    /// The OS the formula is for, if it is limited to one.
    pub os: Option<String>,
    /// The OS family the formula is for, if limited to one.
    pub os_family: Option<String>,
    /// The directory holding the formula's files (default: the name).
    pub top_level_dir: String,
    /// Packages that must be installed first.
    pub dependencies: Vec<String>,
    /// Packages that may be installed alongside.
    pub optional: Vec<String>,
    /// Packages that should be installed alongside.
    pub recommended: Vec<String>,
    /// The oldest SPM that can install it.
    pub minimum_version: Option<String>,
    /// Which files to package, with their type tags (default: all).
    pub files: Option<Vec<FileEntry>>,
    /// SLS applied on this host before installing.
    pub pre_local_state: Option<String>,
    /// SLS applied to a target through the master before installing.
    pub pre_tgt_state: Option<TargetedState>,
    /// SLS applied on this host after installing.
    pub post_local_state: Option<String>,
    /// SLS applied to a target through the master after installing.
    pub post_tgt_state: Option<TargetedState>,
    /// The renderer pipe for the states (default `jinja|yaml`).
    pub renderer: Option<String>,
    /// Other FORMULA keys, passed to the states as variables.
    pub variables: Map<String, Value>,
}

impl Formula {
    /// Parses FORMULA text. `required` lists the fields that must be
    /// present ([`REQUIRED_FIELDS`] for a build, [`REQUIRED_AT_INSTALL`]
    /// for an install); `origin` names the file in errors.
    pub fn parse(text: &str, origin: &str, required: &[&str]) -> Result<Self> {
        let invalid = |message: String| SpmError::FormulaInvalid {
            origin: origin.to_string(),
            message,
        };
        let value = crate::yaml::load(text).map_err(invalid)?;
        let Value::Object(map) = value else {
            return Err(invalid(
                "the top level must be a mapping of field: value".to_string(),
            ));
        };
        Formula::from_map(map, origin, required)
    }

    /// Builds a formula from already-loaded data (repository metadata).
    pub fn from_map(map: Map<String, Value>, origin: &str, required: &[&str]) -> Result<Self> {
        let invalid = |message: String| SpmError::FormulaInvalid {
            origin: origin.to_string(),
            message,
        };
        for field in required {
            if map.get(*field).is_none_or(Value::is_null) {
                return Err(SpmError::FormulaFieldMissing((*field).to_string()));
            }
        }
        let text = |field: &str| -> Result<Option<String>> {
            match map.get(field) {
                None | Some(Value::Null) => Ok(None),
                Some(v) => scalar_text(v)
                    .map(Some)
                    .ok_or_else(|| invalid(format!("{field} must be a single value"))),
            }
        };
        let need = |field: &str| -> Result<String> {
            text(field)?.ok_or_else(|| SpmError::FormulaFieldMissing(field.to_string()))
        };
        let name = need("name")?;
        check_path_word(&name, "name").map_err(invalid)?;
        let version = need("version")?;
        let release = need("release")?;
        check_path_word(&version, "version").map_err(invalid)?;
        check_path_word(&release, "release").map_err(invalid)?;
        let top_level_dir = text("top_level_dir")?.unwrap_or_else(|| name.clone());
        check_path_word(&top_level_dir, "top_level_dir").map_err(invalid)?;
        let files = match map.get("files") {
            None | Some(Value::Null) => None,
            Some(Value::Array(items)) => {
                let mut entries = Vec::with_capacity(items.len());
                for item in items {
                    let line = scalar_text(item)
                        .ok_or_else(|| invalid("each entry of files must be a path".to_string()))?;
                    entries.push(FileEntry::parse(&line));
                }
                Some(entries)
            }
            Some(_) => return Err(invalid("files must be a list of paths".to_string())),
        };
        Ok(Formula {
            summary: text("summary")?.unwrap_or_default(),
            description: text("description")?.unwrap_or_default(),
            os: listable_text(map.get("os")),
            os_family: listable_text(map.get("os_family")),
            dependencies: name_list(map.get("dependencies")),
            optional: name_list(map.get("optional")),
            recommended: name_list(map.get("recommended")),
            minimum_version: text("minimum_version")?,
            pre_local_state: text("pre_local_state")?,
            post_local_state: text("post_local_state")?,
            pre_tgt_state: targeted_state(map.get("pre_tgt_state"), "pre_tgt_state")
                .map_err(invalid)?,
            post_tgt_state: targeted_state(map.get("post_tgt_state"), "post_tgt_state")
                .map_err(invalid)?,
            renderer: text("renderer")?,
            files,
            name,
            version,
            release,
            top_level_dir,
            variables: map,
        })
    }

    /// `<name>-<version>-<release>.spm`, the package's file name.
    pub fn package_file_name(&self) -> String {
        format!("{}-{}-{}.spm", self.name, self.version, self.release)
    }

    /// The tag FORMULA's `files` list gives `path` (relative to the formula dir).
    pub fn tag_of(&self, path: &str) -> Option<FileType> {
        self.files
            .as_ref()?
            .iter()
            .find(|entry| entry.path.trim_end_matches('/') == path)?
            .tag
    }
}

/// A scalar as text (`version: 201506` is a YAML integer); `None` for maps and lists.
fn scalar_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(if *b { "True" } else { "False" }.to_string()),
        _ => None,
    }
}

/// `os: RedHat, Debian` as written, or a YAML list joined the same way.
fn listable_text(value: Option<&Value>) -> Option<String> {
    match value? {
        Value::Array(items) => Some(
            items
                .iter()
                .filter_map(scalar_text)
                .collect::<Vec<_>>()
                .join(", "),
        ),
        other => scalar_text(other),
    }
}

/// `dependencies: apache, mysql` (Salt's comma-separated form) or a YAML list.
pub fn name_list(value: Option<&Value>) -> Vec<String> {
    let raw: Vec<String> = match value {
        Some(Value::Array(items)) => items.iter().filter_map(scalar_text).collect(),
        Some(v) => scalar_text(v)
            .map(|s| s.split(',').map(str::to_string).collect())
            .unwrap_or_default(),
        None => Vec::new(),
    };
    raw.into_iter()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

/// Names that become path components must be one plain component.
fn check_path_word(word: &str, field: &str) -> Result<(), String> {
    if word.is_empty() || word == "." || word == ".." || word.contains('/') || word.contains('\0') {
        return Err(format!(
            "{field} '{word}' must be a plain name (no '/', not '.' or '..')"
        ));
    }
    Ok(())
}

fn targeted_state(value: Option<&Value>, field: &str) -> Result<Option<TargetedState>, String> {
    let Some(value) = value.filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let Value::Object(map) = value else {
        return Err(format!(
            "{field} must be a mapping with tgt, tgt_type and data"
        ));
    };
    let get = |key: &str| map.get(key).and_then(scalar_text);
    let tgt = get("tgt").ok_or_else(|| format!("{field} needs a tgt"))?;
    let data = get("data").ok_or_else(|| format!("{field} needs data (the SLS text)"))?;
    Ok(Some(TargetedState {
        tgt,
        tgt_type: get("tgt_type").unwrap_or_else(|| "glob".to_string()),
        data,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_entry_tags_are_split_from_paths() {
        assert_eq!(
            FileEntry::parse("d|docs/index.rst"),
            FileEntry {
                tag: Some(FileType::Doc),
                path: "docs/index.rst".into()
            }
        );
        assert_eq!(
            FileEntry::parse("apache/init.sls"),
            FileEntry {
                tag: None,
                path: "apache/init.sls".into()
            }
        );
        assert_eq!(
            FileEntry::parse("x|odd"),
            FileEntry {
                tag: None,
                path: "x|odd".into()
            }
        );
    }

    #[test]
    fn comma_separated_dependencies_are_trimmed() {
        let deps = name_list(Some(&Value::String(" apache, mysql ,,".into())));
        assert_eq!(deps, vec!["apache".to_string(), "mysql".to_string()]);
    }

    #[test]
    fn names_with_slashes_are_refused() {
        assert!(check_path_word("../x", "name").is_err());
        assert!(check_path_word("apache", "name").is_ok());
    }
}
