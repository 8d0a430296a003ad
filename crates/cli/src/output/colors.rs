//! Terminal colours as Salt's outputters use them.

/// ANSI sequences, or empty strings when colour is off.
#[derive(Debug, Clone, PartialEq)]
pub struct Colors {
    pub green: &'static str,
    pub cyan: &'static str,
    pub red: &'static str,
    pub light_red: &'static str,
    pub yellow: &'static str,
    pub light_yellow: &'static str,
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
