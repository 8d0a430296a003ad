//! Shared pieces of halite's command-line tools.
