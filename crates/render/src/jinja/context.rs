//! The per-template variables Salt derives from the SLS name and path
//! (`salt.utils.templates.generate_sls_context`): `tplpath`, `tplfile`,
//! `tpldir`, `tpldot`, `slspath`, `slsdotpath`, `slscolonpath`, `sls_path`.

use crate::Map;

/// Computes Salt's SLS context variables for `sls` read from `tmplpath`.
pub fn sls_context(tmplpath: &str, sls: &str) -> Map {
    let mut context = Map::new();
    let mut slspath = sls.replace('.', "/").trim_end_matches('/').to_string();
    if !tmplpath.is_empty() {
        let mut template = tmplpath.replace('\\', "/");
        if sls.is_empty() {
            template = template.rsplit('/').next().unwrap_or_default().to_string();
        } else if template.ends_with(&format!("{slspath}.sls")) {
            template = template[template.len() - (4 + slspath.len())..].to_string();
        } else if template.ends_with(&format!("{slspath}/init.sls")) {
            template = template[template.len() - (9 + slspath.len())..].to_string();
        } else {
            let parent = match sls.rfind('/') {
                Some(at) => sls[..at].to_string(),
                None => ".".to_string(),
            };
            context.insert("tplpath".into(), tmplpath.into());
            context.insert("tplfile".into(), sls.into());
            context.insert("tpldir".into(), parent.into());
            return context;
        }
        slspath = match template.rsplit_once('/') {
            Some((dir, _)) => dir.to_string(),
            None => String::new(),
        };
        context.insert("tplpath".into(), tmplpath.into());
        context.insert("tplfile".into(), template.into());
        context.insert(
            "tpldir".into(),
            if slspath.is_empty() {
                ".".to_string()
            } else {
                slspath.clone()
            }
            .into(),
        );
        context.insert("tpldot".into(), slspath.replace('/', ".").into());
    }
    context.insert("slspath".into(), slspath.clone().into());
    context.insert("slsdotpath".into(), slspath.replace('/', ".").into());
    context.insert("slscolonpath".into(), slspath.replace('/', ":").into());
    context.insert("sls_path".into(), slspath.replace('/', "_").into());
    context
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn nested_sls_file() {
        let context = sls_context("apache/config.sls", "apache.config");
        assert_eq!(
            serde_json::Value::Object(context),
            json!({"tplpath": "apache/config.sls", "tplfile": "apache/config.sls", "tpldir": "apache", "tpldot": "apache",
                   "slspath": "apache", "slsdotpath": "apache", "slscolonpath": "apache", "sls_path": "apache"})
        );
    }

    #[test]
    fn init_and_top_level_files() {
        let init = sls_context("web/app/init.sls", "web.app");
        assert_eq!(init["tpldir"], json!("web/app"));
        assert_eq!(init["sls_path"], json!("web_app"));
        assert_eq!(init["slscolonpath"], json!("web:app"));
        let top = sls_context("main.sls", "main");
        assert_eq!(top["tpldir"], json!("."));
        assert_eq!(top["slspath"], json!(""));
    }
}
