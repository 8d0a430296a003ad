//! Terminal colours as Salt's outputters use them.

/// ANSI sequences, or empty strings when colour is off.
#[derive(Debug, Clone, PartialEq)]
pub struct Colors {
    /// Unchanged successes (Salt's GREEN).
    pub green: &'static str,
    /// Headings and ids (Salt's CYAN).
    pub cyan: &'static str,
    /// Failures (Salt's RED).
    pub red: &'static str,
    /// Failed details (Salt's LIGHT_RED).
    pub light_red: &'static str,
    /// Changes and warnings (Salt's YELLOW).
    pub yellow: &'static str,
    /// Changes in test mode (Salt's LIGHT_YELLOW).
    pub light_yellow: &'static str,
    /// Back to the terminal's color (Salt's ENDC).
    pub endc: &'static str,
}

impl Colors {
    /// Salt's default theme.
    pub fn ansi() -> Self {
        Colors {
            green: "\x1b[0;32m",
            cyan: "\x1b[0;36m",
            red: "\x1b[0;31m",
            light_red: "\x1b[1;31m",
            yellow: "\x1b[0;33m",
            light_yellow: "\x1b[1;33m",
            endc: "\x1b[0m",
        }
    }

    /// No colour (output is not a terminal, or `--no-color`).
    pub fn none() -> Self {
        Colors {
            green: "",
            cyan: "",
            red: "",
            light_red: "",
            yellow: "",
            light_yellow: "",
            endc: "",
        }
    }
}
