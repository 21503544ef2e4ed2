//! The measuring hand: one page load in real Chromium, forced onto a protocol, observed through
//! the DevTools protocol.

pub mod cdp;
pub mod launch;
pub mod load;

pub use launch::{Browser, LaunchOptions, CHROMIUM, HOST};
