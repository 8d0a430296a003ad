//! Renders one SLS from a file root and prints the data as JSON: a quick way
//! to compare halite's renderer with `salt-call --local state.show_sls`.
//!
//! `cargo run -p halite-render --example render_tree -- ROOT SLS GRAINS_JSON PILLAR_JSON`

use std::sync::Arc;

use halite_render::{Map, RenderContext, SaltFunctions, TemplateSource, Value};

struct Dir(std::path::PathBuf);

impl TemplateSource for Dir {
    fn get(&self, path: &str, _saltenv: &str) -> Result<Option<String>, String> {
        match std::fs::read_to_string(self.0.join(path)) {
            Ok(text) => Ok(Some(text)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e.to_string()),
        }
    }
}

struct NoFunctions;

impl SaltFunctions for NoFunctions {
    fn has(&self, _fun: &str) -> bool {
        false
    }
    fn call(&self, fun: &str, _args: &[Value], _kwargs: &Map) -> Result<Value, String> {
        Err(format!("'{fun}' is not available"))
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 5 {
        eprintln!("usage: render_tree ROOT SLS GRAINS_JSON PILLAR_JSON");
        std::process::exit(2);
    }
    let root = std::path::PathBuf::from(&args[1]);
    let sls = args[2].clone();
    let rel = sls.replace('.', "/");
    let (path, text) = [format!("{rel}.sls"), format!("{rel}/init.sls")]
        .into_iter()
        .find_map(|p| std::fs::read_to_string(root.join(&p)).ok().map(|t| (p, t)))
        .unwrap_or_else(|| {
            eprintln!("no such sls: {sls}");
            std::process::exit(2)
        });
    let parse = |s: &str| {
        serde_json::from_str::<Value>(s).unwrap_or_else(|e| {
            eprintln!("bad JSON argument: {e}");
            std::process::exit(2)
        })
    };
    let ctx = RenderContext {
        grains: parse(&args[3]),
        pillar: parse(&args[4]),
        opts: serde_json::json!({"__cli": "salt-call", "file_client": "local"}),
        saltenv: "base".into(),
        sls,
        source_path: path,
        extra: Map::new(),
        salt: Arc::new(NoFunctions),
        files: Arc::new(Dir(root)),
    };
    if std::env::var_os("RENDER_TEXT_ONLY").is_some() {
        match halite_render::render_text(&text, "jinja", &ctx) {
            Ok(out) => print!("{out}"),
            Err(e) => eprintln!("{e}"),
        }
        return;
    }
    match halite_render::render_sls(&text, &ctx) {
        Ok(data) => println!(
            "{}",
            serde_json::to_string_pretty(&data).unwrap_or_default()
        ),
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1)
        }
    }
}
