//! Where each member of a package goes on disk: the formula path, the
//! pillar path, the reactor path, the config dir or the share dir, after
//! Salt's rules (`salt/spm/pkgfiles/local.py`).

use std::path::{Component, Path, PathBuf};

use crate::archive::{Member, MemberKind};
use crate::config::SpmConfig;
use crate::formula::{FileType, Formula};

/// A member's destination: `root` is the configured directory it belongs
/// to, `relative` its path below that root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Destination {
    /// The directory the file type installs below.
    pub root: PathBuf,
    /// The path below that root.
    pub relative: PathBuf,
    /// The FORMULA type tag that chose the root.
    pub file_type: Option<FileType>,
}

impl Destination {
    /// The full path on disk.
    pub fn path(&self) -> PathBuf {
        self.root.join(&self.relative)
    }
}

/// Where `member` of the package described by `formula` is installed;
/// `None` for members that are not installed (FORMULA, the package's own
/// top directory, and anything outside `top_level_dir` that is not a
/// loader dir, `pillar.example`, README or LICENSE — Salt packs those).
pub fn destination(formula: &Formula, member: &Member, config: &SpmConfig) -> Option<Destination> {
    let rel = member.path.as_str();
    if rel.is_empty() || rel == "FORMULA" {
        return None;
    }
    let name = &formula.name;
    let first = rel.split('/').next().unwrap_or(rel);
    let file_type = tag_of(formula, rel);
    let dest = |root: &Path, relative: String| {
        Some(Destination {
            root: root.to_path_buf(),
            relative: PathBuf::from(relative),
            file_type,
        })
    };
    if file_type.is_some_and(FileType::goes_to_share_dir) {
        return dest(&config.spm_share_dir, format!("{name}/{rel}"));
    }
    if rel == "pillar.example" {
        return dest(&config.pillar_path, format!("{name}.sls"));
    }
    if first.starts_with('_') && first.len() > 1 {
        return dest(&config.formula_path, rel.to_string());
    }
    if !rel.contains('/') && (rel.starts_with("README") || rel.starts_with("LICENSE")) {
        let implied = if rel.starts_with("README") {
            FileType::Readme
        } else {
            FileType::License
        };
        return Some(Destination {
            root: config.spm_share_dir.clone(),
            relative: PathBuf::from(format!("{name}/{rel}")),
            file_type: file_type.or(Some(implied)),
        });
    }
    if first != formula.top_level_dir {
        return None;
    }
    if name.ends_with("-conf") {
        let inner = rel.split_once('/').map(|(_, rest)| rest)?;
        return dest(&config.conf_path, inner.to_string());
    }
    if name.ends_with("-reactor") {
        return dest(&config.reactor_path, rel.to_string());
    }
    dest(&config.formula_path, rel.to_string())
}

/// The tag FORMULA gives `rel` or the nearest listed directory above it.
fn tag_of(formula: &Formula, rel: &str) -> Option<FileType> {
    let mut candidate = rel;
    loop {
        if let Some(tag) = formula.tag_of(candidate) {
            return Some(tag);
        }
        candidate = candidate.rsplit_once('/')?.0;
    }
}

/// Whether a link installed at `dest` with `target` stays inside `dest.root`.
pub fn link_stays_inside(dest: &Destination, member: &Member) -> bool {
    let MemberKind::Symlink(target) = &member.kind else {
        return true;
    };
    let mut depth: i64 = dest.relative.components().count() as i64 - 1;
    for component in Path::new(target).components() {
        match component {
            Component::Normal(_) => depth += 1,
            Component::ParentDir => depth -= 1,
            Component::CurDir => {}
            Component::RootDir | Component::Prefix(_) => return false,
        }
        if depth < 0 {
            return false;
        }
    }
    true
}
