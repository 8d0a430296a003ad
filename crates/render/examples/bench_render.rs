//! Measures how long rendering a map.jinja-style formula takes:
//! `cargo run --release -p halite-render --example bench_render -- [ROUNDS]`.

use std::sync::Arc;
use std::time::Instant;

use halite_render::{Map, RenderContext, SaltFunctions, TemplateSource, Value};

struct Files;

impl TemplateSource for Files {
    fn get(&self, path: &str, _saltenv: &str) -> Result<Option<String>, String> {
        Ok(match path {
            "app/map.jinja" => Some(
                "{%- import_yaml 'app/defaults.yaml' as d %}\
{%- set os_map = salt['grains.filter_by']({'Debian': {'pkg': 'apache2'}, 'RedHat': {'pkg': 'httpd'}}) %}\
{%- do d.app.update(os_map) %}\
{%- set mapdata = salt['pillar.get']('app', d.app, merge=True) %}"
                    .to_string(),
            ),
            "app/defaults.yaml" => Some("app:\n  port: 80\n  mode: 0644\n  modules: [a, b, c]\n".to_string()),
            _ => None,
        })
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
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(500);
    let mut sls = String::from("{% from 'app/map.jinja' import mapdata with context %}\n");
    for i in 0..50 {
        sls.push_str(&format!(
            "state-{i}:\n  file.managed:\n    - name: /etc/app/{i}.conf\n    - mode: {{{{ mapdata.mode }}}}\n    - context: {{{{ mapdata|yaml }}}}\n"
        ));
    }
    let ctx = RenderContext {
        grains: serde_json::json!({"os_family": "Debian", "id": "bench"}),
        pillar: serde_json::json!({"app": {"port": 8080}}),
        opts: serde_json::json!({}),
        saltenv: "base".into(),
        sls: "app".into(),
        source_path: "app/init.sls".into(),
        extra: Map::new(),
        salt: Arc::new(NoFunctions),
        files: Arc::new(Files),
    };
    let start = Instant::now();
    for _ in 0..rounds {
        if let Err(e) = halite_render::render_sls(&sls, &ctx) {
            eprintln!("{e}");
            std::process::exit(1);
        }
    }
    let elapsed = start.elapsed();
    println!(
        "{rounds} renders of a 50-state SLS with map.jinja: {:.3} ms each",
        elapsed.as_secs_f64() * 1000.0 / rounds as f64
    );
}
