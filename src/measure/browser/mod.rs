//! The measuring hand: one page load in a real browser, forced onto a protocol, observed
//! through its DevTools protocol. Two extension points: the [`Browser`] trait (what a run does
//! with a browser: launch, load, close) and the registry [`ENGINES`] (what pagebench knows of
//! each engine before it runs: its name, how to make one, whether it is installed, what it
//! cannot do, its HAR). Each engine lives in its own folder and turns its protocol's events
//! into the engine-neutral evidence (`metrics::Observation`: Resource Timing and paint entries,
//! a typed `NetworkView`; HAR entries): Chromium (CDP over a pipe) and Firefox (WebDriver BiDi
//! over a WebSocket). The run protocol (`testbed::measure`) drives them; [`make`] builds the
//! one a run names.

pub mod browser_contract;
pub mod engines;
pub mod launch_options;
pub mod prelaunch;
pub mod process_group;
pub mod requests;
pub mod resolver;
pub mod returning_visitor;
pub mod rpc;
pub mod sandbox;
pub mod scripts;
pub mod video;

pub use browser_contract::{Asked, Browser, ClientSide, Engine, HostSide};
pub use engines::{
    check_request, engine, installed_versions, make, parse_browsers, tells_of, ENGINES,
};
pub use launch_options::{LaunchOptions, RepeatView, HOST};
