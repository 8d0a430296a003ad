//! The console's files, embedded with `include_str!`: a handful of small
//! text files need no asset crate (rust-embed would add a proc macro and a
//! build-time directory walk for seven files), and the binary serves them
//! without touching the disk.

/// The one HTML page.
pub const INDEX: &str = include_str!("assets/index.html");

const FILES: [(&str, &str, &str); 7] = [
    (
        "style.css",
        "text/css; charset=utf-8",
        include_str!("assets/style.css"),
    ),
    (
        "app.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/app.js"),
    ),
    (
        "dom.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/dom.js"),
    ),
    (
        "api.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/api.js"),
    ),
    (
        "live.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/live.js"),
    ),
    (
        "highstate.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/highstate.js"),
    ),
    (
        "graph.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/graph.js"),
    ),
];

/// The content type and text of asset `name` (only the embedded names:
/// nothing is read from the disk, so no path can escape).
pub fn find(name: &str) -> Option<(&'static str, &'static str)> {
    FILES
        .iter()
        .find(|(n, _, _)| *n == name)
        .map(|(_, ct, text)| (*ct, *text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_embedded_names_are_served() {
        assert!(find("app.js").is_some());
        assert!(find("../lib.rs").is_none());
        assert!(find("").is_none());
    }

    #[test]
    fn no_page_has_inline_script_or_style() {
        // The CSP forbids them; an inline handler would silently not run.
        for text in std::iter::once(INDEX).chain(FILES.iter().map(|f| f.2)) {
            assert!(!text.contains("onclick="), "inline handler");
            assert!(!text.contains("style=\""), "inline style");
            assert!(!text.contains("innerHTML"), "innerHTML parses markup");
        }
        assert!(!INDEX.contains("<script>"), "inline script");
    }
}
