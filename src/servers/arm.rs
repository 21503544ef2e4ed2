//! A server with knobs of its own, as one arm of a comparison (`--servers
//! embedded,embedded:priorities=rfc9218`): the same server started again, on its own port, with
//! the matrix's knobs overlaid by the arm's, and named by its spec so it is a series of its own
//! that interleaves with the others in every round. A knob's list is written with `+`
//! (`embedded:server-protocols=h3:early-hints=true`, `…:server-protocols=h2+h3`).

use anyhow::{bail, Context, Result};
use clap::Parser;

use super::{Registration, ServerDescription, ServerEvidence, ServerUnderTest, StartContext};
use crate::config::identity::ServerId;
use crate::config::protocol::Protocol;
use crate::config::site_archive::replay::Replay;
use crate::embedded_server::ServerKnobs;

/// `NAME:knob=value[:knob=value…]`, parsed.
#[derive(Clone)]
pub struct Arm {
    pub base: &'static Registration,
    /// The knobs the arm sets (over the matrix's).
    pub knobs: ServerKnobs,
    /// As written (trimmed): the arm's name in the plan, the records and the report.
    pub spec: String,
}

impl PartialEq for Arm {
    fn eq(&self, other: &Arm) -> bool {
        self.spec == other.spec
    }
}

impl std::fmt::Debug for Arm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Arm({})", self.spec)
    }
}

#[derive(Parser)]
#[command(no_binary_name = true)]
struct ArmKnobs {
    #[command(flatten)]
    knobs: ServerKnobs,
}

impl Arm {
    /// `rest`: what follows `NAME:` in `spec`.
    pub fn parse(base: &'static Registration, spec: &str, rest: &str) -> Result<Arm> {
        let mut args = Vec::new();
        for setting in rest.split(':') {
            let Some((knob, value)) = setting.split_once('=') else {
                bail!(
                    "--servers {spec}: {setting:?} is not knob=value (write an arm as \
                     NAME:knob=value[:knob=value], e.g. embedded:priorities=rfc9218)"
                );
            };
            args.push(format!("--{}", knob.trim()));
            // `,` separates the servers: a list inside an arm is written with `+`.
            args.push(value.trim().replace('+', ","));
        }
        let parsed = ArmKnobs::try_parse_from(&args).map_err(|e| {
            let first = e.to_string();
            let first = first.lines().next().unwrap_or("").trim_start_matches("error: ");
            anyhow::anyhow!(
                "--servers {spec}: {first} (an arm's knobs are the server knobs of `pagebench matrix --help`, without the leading --)"
            )
        })?;
        // Validated with the matrix's knobs when it starts: some rules span knobs
        // (`early-hints` needs `server-protocols=h3`, from either).
        Ok(Arm {
            base,
            knobs: parsed.knobs,
            spec: spec.to_string(),
        })
    }

    /// Starts the base server with the matrix's knobs overlaid by the arm's.
    pub fn start(&self, ctx: &StartContext) -> Result<Box<dyn ServerUnderTest>> {
        let knobs = ctx.knobs.overlay(&self.knobs);
        knobs.validate().map_err(|e| {
            anyhow::anyhow!("--servers {}: with the matrix's knobs, {e}", self.spec)
        })?;
        let log_dir = ctx.log_dir.map(|d| {
            d.join("arms")
                .join(ServerId::new(self.spec.clone()).file_name())
        });
        let arm_ctx = StartContext {
            ns: ctx.ns,
            ip: ctx.ip,
            port: ctx.port,
            root: ctx.root,
            cert: ctx.cert,
            knobs: &knobs,
            work: ctx.work.clone(),
            log_dir: log_dir.as_deref(),
            namespace_tcp: ctx.namespace_tcp,
            site_ports: ctx.site_ports,
        };
        let inner =
            (self.base.start)(&arm_ctx).with_context(|| format!("--servers {}", self.spec))?;
        Ok(Box::new(Named {
            inner,
            name: ServerId::new(self.spec.clone()),
        }))
    }
}

/// A running server under its arm's name.
struct Named {
    inner: Box<dyn ServerUnderTest>,
    name: ServerId,
}

impl ServerUnderTest for Named {
    fn name(&self) -> ServerId {
        self.name.clone()
    }
    fn port(&self) -> u16 {
        self.inner.port()
    }
    fn offers(&self, p: Protocol) -> bool {
        self.inner.offers(p)
    }
    fn mark(&mut self) {
        self.inner.mark()
    }
    fn collect(&mut self) -> ServerEvidence {
        self.inner.collect()
    }
    fn exited(&mut self) -> Option<String> {
        self.inner.exited()
    }
    fn process_group(&self) -> Option<i32> {
        self.inner.process_group()
    }
    fn tasks(&self) -> Vec<crate::support::contention::Tasks> {
        self.inner.tasks()
    }
    fn describe(&self) -> ServerDescription {
        ServerDescription {
            server: self.name.clone(),
            ..self.inner.describe()
        }
    }
    fn set_qlog(&mut self, on: bool) -> bool {
        self.inner.set_qlog(on)
    }
    fn replay(&mut self, replay: Option<Replay>) -> Result<()> {
        self.inner.replay(replay)
    }
}
