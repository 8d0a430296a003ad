//! The render context of a host's templates and SLS files: its grains,
//! pillar and options, `salt[...]` calls into its execution modules and
//! `{% include %}`/`import` through its file client.

use std::sync::Arc;

use halite_state::{FileClient, Map, Value};

use crate::exec::Args;
use crate::Host;

/// `salt[...]` in a template: the host's execution functions, and the
/// options `config.get` reads (fetched once per template).
struct HostSalt(Host, std::sync::OnceLock<Option<Value>>);

impl halite_render::SaltFunctions for HostSalt {
    fn has(&self, fun: &str) -> bool {
        self.0.exec.has(fun) || crate::salt_fallback::has(&self.0, fun)
    }
    fn call(&self, fun: &str, args: &[Value], kwargs: &Map) -> Result<Value, String> {
        let mut args = Args {
            positional: args.to_vec(),
            kwargs: kwargs.clone(),
        };
        crate::exec::pillar::unmask_for_render(fun, &mut args.kwargs);
        self.0.call(fun, &args).map_err(|e| e.to_string())
    }
    fn opts(&self) -> Option<Value> {
        self.1
            .get_or_init(|| crate::exec::config::minion_opts(&self.0))
            .clone()
    }

    /// The lookups a master answers itself (grains, pillar, config, the
    /// file roots, the mine, `test.echo`...): they read and never run on
    /// the minion, so a render that called them can be reused for a
    /// minion they give the same results for.
    fn replayable(&self, fun: &str) -> bool {
        crate::exec::ANSWERED_ON_MASTER.contains(&fun)
    }

    fn render_external(
        &self,
        renderer: &str,
        input: &Value,
        ctx: &halite_render::RenderContext,
    ) -> Option<Result<Value, String>> {
        if renderer == "gpg" {
            return Some(crate::gpg::render(input, &self.0.opts));
        }
        crate::python::render(&self.0, renderer, input, ctx)
    }
}

/// `{% include %}` and `import` in a template: the host's file client.
struct HostTemplates(Arc<dyn FileClient>);

impl halite_render::TemplateSource for HostTemplates {
    fn get(&self, path: &str, saltenv: &str) -> Result<Option<String>, String> {
        let path = halite_state::strip_salt_url(path)
            .map(|(p, _)| p)
            .unwrap_or(path);
        self.0.read_text(path, saltenv).map_err(|e| e.to_string())
    }
}

impl Host {
    /// The render context for a template or SLS of this host.
    pub fn render_context(
        &self,
        saltenv: &str,
        sls: &str,
        source_path: &str,
        extra: Map,
    ) -> halite_render::RenderContext {
        halite_render::RenderContext {
            grains: self.grains.clone(),
            pillar: self.pillar.clone(),
            opts: self.opts.clone(),
            saltenv: saltenv.to_string(),
            sls: sls.to_string(),
            source_path: source_path.to_string(),
            extra,
            salt: Arc::new(HostSalt(self.clone(), std::sync::OnceLock::new())),
            files: Arc::new(HostTemplates(self.files.clone())),
        }
    }
}
