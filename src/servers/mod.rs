//! The servers under test: one contract ([`server_contract`]: the [`ServerUnderTest`] trait and its
//! types), one file per stack (`stacks/`, whose `mod.rs` is the registry `--servers NAME` is
//! parsed through), a server with knobs of its own as one arm ([`arm`]), the choice of servers
//! ([`choice`]), what the reference servers share ([`reference`]) and an h3-only stack beside
//! the embedded server's h1/h2 ([`split`]).

pub mod arm;
pub mod choice;
pub mod reference;
pub mod server_contract;
pub mod server_view;
pub mod split;
pub mod stacks;

pub use choice::{parse_servers, ServerChoice};
pub use server_contract::{
    descriptions_or_null, sort_keys, AccessLogDescription, ConfiguredWindow, NamespaceTcp,
    OfferedProtocols, Registration, ServerDescription, ServerDescriptions, ServerEvidence,
    ServerUnderTest, StartContext,
};
pub use server_view::{ServerView, TransportSummary};
pub use stacks::REGISTRY;
