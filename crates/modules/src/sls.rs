//! SLS files from the file roots, rendered through `halite-render`: the
//! engine's [`SlsSource`].

use halite_state::{RenderedSls, SlsSource, Value};

use crate::Host;

/// Renders SLS of a host's file roots with the host's grains and pillar.
pub struct FileSls<'a> {
    host: &'a Host,
}

impl<'a> FileSls<'a> {
    /// A source over `host`'s file client.
    pub fn new(host: &'a Host) -> Self {
        FileSls { host }
    }

    /// The relative path of `sls` (`a.b` -> `a/b.sls` or `a/b/init.sls`).
    pub fn locate(&self, sls: &str, saltenv: &str) -> Option<(String, String)> {
        if sls.is_empty() || sls.contains("..") || sls.starts_with('/') {
            return None;
        }
        let base = sls.replace('.', "/");
        for candidate in [format!("{base}.sls"), format!("{base}/init.sls")] {
            if let Ok(Some(text)) = self.host.files.read_text(&candidate, saltenv) {
                return Some((candidate, text));
            }
        }
        None
    }
}

/// The SLS name of a file path (`a/b/init.sls` -> `a.b`), if it is one.
pub fn sls_name(path: &str) -> Option<String> {
    let stem = path.strip_suffix(".sls")?;
    let stem = stem.strip_suffix("/init").unwrap_or(stem);
    if stem.contains('.') {
        // a file like foo.bar.sls cannot be addressed as an SLS
        return None;
    }
    Some(stem.replace('/', "."))
}

impl SlsSource for FileSls<'_> {
    fn render(&self, sls: &str, saltenv: &str) -> Result<Option<RenderedSls>, String> {
        let Some((path, text)) = self.locate(sls, saltenv) else {
            // Not found: say why when the file client could not look (a
            // gitfs remote never fetched), rather than "not available".
            let valid = !(sls.is_empty() || sls.contains("..") || sls.starts_with('/'));
            let base = sls.replace('.', "/");
            if let (true, Err(e)) = (
                valid,
                self.host.files.read_text(&format!("{base}.sls"), saltenv),
            ) {
                return Err(e.to_string());
            }
            return Ok(None);
        };
        let ctx = self
            .host
            .render_context(saltenv, sls, &path, Default::default());
        match halite_render::render_sls(&text, &ctx) {
            Ok(data) => Ok(Some(RenderedSls {
                data,
                yamlex: halite_render::renders_yamlex_strings(&text, &ctx.opts),
                source: path,
            })),
            Err(e) => Err(e.to_string()),
        }
    }

    fn available(&self, saltenv: &str) -> Vec<String> {
        let mut out: Vec<String> = self
            .host
            .files
            .list_files(saltenv, "")
            .unwrap_or_default()
            .iter()
            .filter_map(|p| sls_name(p))
            .collect();
        out.sort();
        out.dedup();
        out
    }

    fn has_env(&self, saltenv: &str) -> bool {
        self.host.files.envs().iter().any(|e| e == saltenv)
    }
}

/// The empty high data `state.show_sls` prints for nothing.
pub fn empty() -> Value {
    Value::Object(Default::default())
}
