//! The answers of pagebench's own resolver (pure: query bytes in, reply bytes out): A and AAAA
//! for every name of the plan, an HTTPS record (RFC 9460) per TLS origin when asked to
//! announce, NXDOMAIN for every other name. It answers as the client's recursive resolver
//! would (recursion available), from nothing but this table: it never asks anyone.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use anyhow::{bail, Result};
use hickory_proto::op::{Edns, Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::rdata::svcb::{Alpn, SvcParamKey, SvcParamValue, SVCB};
use hickory_proto::rr::rdata::{A, AAAA, HTTPS};
use hickory_proto::rr::{Name, RData, Record, RecordType};
use serde::{Deserialize, Serialize};

pub use crate::config::name_lookup::check_dns_name;

/// How long a browser may keep an answer: longer than any run (each run has a fresh browser).
const TTL: u32 = 300;
/// The UDP payload this server offers over EDNS (the DNS flag day's safe size).
const EDNS_PAYLOAD: u16 = 1232;
/// The UDP payload of a query without EDNS.
const PLAIN_PAYLOAD: usize = 512;

/// One name of the plan and what it resolves to.
#[derive(Debug, Clone, PartialEq)]
pub struct ZoneName {
    /// A host name as pages name it (no trailing dot).
    pub host: String,
    pub v4: Option<Ipv4Addr>,
    pub v6: Option<Ipv6Addr>,
    /// The HTTPS records to publish for it, one per port (none: no HTTPS record).
    pub https: Vec<HttpsService>,
    /// How long every answer about this name is held back beyond the resolver's round trip
    /// (a recorded lookup that took longer than the link's round trip).
    pub hold: Duration,
}

/// An HTTPS record's service: the origin's port and the protocols it offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpsService {
    pub port: u16,
    /// ALPN ids, most preferred first (`h3`, `h2`, `http/1.1`).
    pub alpn: Vec<String>,
}

/// The names the resolver knows, by lower-case name.
#[derive(Debug, Clone, Default)]
pub struct Zone {
    names: BTreeMap<String, ZoneName>,
}

/// The reply to one query, and what it said (for the run's record).
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    pub bytes: Vec<u8>,
    pub hold: Duration,
    pub said: Said,
}

/// One query and its answer in words: what the record of a run lists per lookup.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Said {
    /// The name asked for, lower case, without the trailing dot.
    pub name: String,
    /// `A`, `AAAA`, `HTTPS`, …
    pub qtype: String,
    /// `NOERROR`, `NXDOMAIN`, `FORMERR`, `NOTIMP`.
    pub rcode: String,
    /// Each answer record's data in presentation form (`10.1.2.2`, `1 . alpn=h3`).
    pub answers: Vec<String>,
    /// The ALPN ids its HTTPS answers announced, in order (none: no HTTPS answer).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub alpn: Vec<String>,
}

impl Zone {
    /// A zone of `names`, each a valid DNS host name (else an error naming it) given once.
    pub fn new(names: Vec<ZoneName>) -> Result<Zone> {
        let mut zone = Zone::default();
        for n in names {
            check_dns_name(&n.host)?;
            let key = n.host.to_ascii_lowercase();
            if zone.names.insert(key, n.clone()).is_some() {
                bail!("the resolver's zone names {} twice", n.host);
            }
        }
        Ok(zone)
    }

    pub fn names(&self) -> impl Iterator<Item = &ZoneName> {
        self.names.values()
    }

    /// The reply to `query` (a DNS message as received), sized for `transport`'s payload;
    /// None when it is not even a DNS header (dropped, as a resolver would).
    pub fn answer(&self, query: &[u8], over_udp: bool) -> Option<Reply> {
        let msg = match Message::from_vec(query) {
            Ok(m) => m,
            Err(_) if query.len() >= 12 => {
                let id = u16::from_be_bytes([query[0], query[1]]);
                let said = said("", "?", ResponseCode::FormErr, &[]);
                let bytes = Message::error_msg(id, OpCode::Query, ResponseCode::FormErr)
                    .to_vec()
                    .ok()?;
                return Some(Reply {
                    bytes,
                    hold: Duration::ZERO,
                    said,
                });
            }
            Err(_) => return None,
        };
        let mut reply = Message::response(msg.metadata.id, msg.metadata.op_code);
        reply.metadata.recursion_desired = msg.metadata.recursion_desired;
        reply.metadata.recursion_available = true;
        reply.metadata.authoritative = true;
        let payload = match &msg.edns {
            Some(edns) => {
                let mut ours = Edns::new();
                ours.set_max_payload(EDNS_PAYLOAD);
                reply.edns = Some(ours);
                usize::from(edns.max_payload().clamp(512, EDNS_PAYLOAD))
            }
            None => PLAIN_PAYLOAD,
        };
        let (said, hold) = self.fill(&msg, &mut reply);
        let mut bytes = reply.to_vec().ok()?;
        if over_udp && bytes.len() > payload {
            // Too big for the datagram: the client asks again over TCP.
            reply.answers.clear();
            reply.metadata.truncation = true;
            bytes = reply.to_vec().ok()?;
        }
        Some(Reply { bytes, hold, said })
    }

    /// Answers `msg`'s one question into `reply`.
    fn fill(&self, msg: &Message, reply: &mut Message) -> (Said, Duration) {
        let (q, code) = match (msg.metadata.op_code, msg.queries.as_slice()) {
            (OpCode::Query, [q]) if msg.metadata.message_type == MessageType::Query => {
                (q.clone(), ResponseCode::NoError)
            }
            (OpCode::Query, _) => (Query::new(), ResponseCode::FormErr),
            _ => (Query::new(), ResponseCode::NotImp),
        };
        if code != ResponseCode::NoError {
            reply.metadata.response_code = code;
            return (said("", "?", code, &[]), Duration::ZERO);
        }
        reply.add_query(q.clone());
        let asked = lower_name(q.name());
        let (entry, port) = match https_port_prefix(&asked) {
            Some((port, host)) if q.query_type() == RecordType::HTTPS => {
                (self.names.get(host), Some(port))
            }
            Some(_) => (None, None),
            None => (self.names.get(&asked), None),
        };
        let Some(entry) = entry else {
            reply.metadata.response_code = ResponseCode::NXDomain;
            return (
                said(
                    &asked,
                    &q.query_type().to_string(),
                    ResponseCode::NXDomain,
                    &[],
                ),
                Duration::ZERO,
            );
        };
        let records = records_for(entry, q.name(), q.query_type(), port);
        let shown: Vec<String> = records.iter().map(|r| presentation(&r.data)).collect();
        let alpn = records
            .iter()
            .flat_map(|r| announced_alpn(&r.data))
            .collect();
        reply.answers.extend(records);
        let s = Said {
            alpn,
            ..said(
                &asked,
                &q.query_type().to_string(),
                ResponseCode::NoError,
                &shown,
            )
        };
        (s, entry.hold)
    }
}

/// The records of `entry` answering a `qtype` question for `owner` (`port`: the question was
/// port-prefixed, `_PORT._https.HOST`).
fn records_for(
    entry: &ZoneName,
    owner: &Name,
    qtype: RecordType,
    port: Option<u16>,
) -> Vec<Record> {
    let rdata: Vec<RData> = match qtype {
        RecordType::A => entry.v4.map(|ip| RData::A(A(ip))).into_iter().collect(),
        RecordType::AAAA => entry
            .v6
            .map(|ip| RData::AAAA(AAAA(ip)))
            .into_iter()
            .collect(),
        RecordType::HTTPS => {
            let port = port.unwrap_or(443);
            entry
                .https
                .iter()
                .filter(|s| s.port == port)
                .filter_map(|s| https_rdata(entry, s))
                .collect()
        }
        _ => Vec::new(),
    };
    rdata
        .into_iter()
        .map(|d| Record::from_rdata(owner.clone(), TTL, d))
        .collect()
}

/// `1 . alpn=…` on 443; elsewhere the host as target (a port-prefixed owner has no address)
/// and the port.
fn https_rdata(entry: &ZoneName, service: &HttpsService) -> Option<RData> {
    let mut params = vec![(
        SvcParamKey::Alpn,
        SvcParamValue::Alpn(Alpn(service.alpn.clone())),
    )];
    let target = if service.port == 443 {
        Name::root()
    } else {
        params.push((SvcParamKey::Port, SvcParamValue::Port(service.port)));
        Name::from_ascii(format!("{}.", entry.host)).ok()?
    };
    Some(RData::HTTPS(HTTPS(SVCB::new(1, target, params))))
}

/// A record's data as a zone file writes it (hickory's HTTPS display ends its ALPN list with a
/// comma).
fn presentation(data: &RData) -> String {
    let RData::HTTPS(HTTPS(svcb)) = data else {
        return data.to_string();
    };
    let mut out = format!("{} {}", svcb.svc_priority, svcb.target_name);
    for (key, value) in &svcb.svc_params {
        match value {
            SvcParamValue::Alpn(Alpn(ids)) => out.push_str(&format!(" alpn={}", ids.join(","))),
            SvcParamValue::Port(port) => out.push_str(&format!(" port={port}")),
            _ => out.push_str(&format!(" {key}")),
        }
    }
    out
}

/// The ALPN ids an HTTPS record announces (none for any other record).
fn announced_alpn(data: &RData) -> Vec<String> {
    let RData::HTTPS(HTTPS(svcb)) = data else {
        return Vec::new();
    };
    svcb.svc_params
        .iter()
        .flat_map(|(_, v)| match v {
            SvcParamValue::Alpn(Alpn(ids)) => ids.clone(),
            _ => Vec::new(),
        })
        .collect()
}

/// `_8443._https.www.site.test` → (8443, `www.site.test`).
fn https_port_prefix(name: &str) -> Option<(u16, &str)> {
    let rest = name.strip_prefix('_')?;
    let (port, rest) = rest.split_once('.')?;
    let host = rest.strip_prefix("_https.")?;
    Some((port.parse().ok()?, host))
}

fn lower_name(name: &Name) -> String {
    name.to_ascii().trim_end_matches('.').to_ascii_lowercase()
}

fn said(name: &str, qtype: &str, code: ResponseCode, answers: &[String]) -> Said {
    Said {
        name: name.to_string(),
        qtype: qtype.to_string(),
        rcode: rcode_name(code),
        answers: answers.to_vec(),
        alpn: Vec::new(),
    }
}

/// The mnemonic resolvers print (`dig`'s `status:`).
fn rcode_name(code: ResponseCode) -> String {
    match code {
        ResponseCode::NoError => "NOERROR".into(),
        ResponseCode::FormErr => "FORMERR".into(),
        ResponseCode::ServFail => "SERVFAIL".into(),
        ResponseCode::NXDomain => "NXDOMAIN".into(),
        ResponseCode::NotImp => "NOTIMP".into(),
        other => format!("RCODE{}", u16::from(other)),
    }
}

#[cfg(test)]
mod tests;
