use super::*;

fn zone(https: bool) -> Zone {
    let service = |port| HttpsService {
        port,
        alpn: vec!["h3".into(), "h2".into()],
    };
    Zone::new(vec![
        ZoneName {
            host: "pagebench.test".into(),
            v4: Some("10.1.2.2".parse().unwrap()),
            v6: None,
            https: if https { vec![service(443)] } else { vec![] },
            hold: Duration::ZERO,
        },
        ZoneName {
            host: "Static.Site.test".into(),
            v4: Some("10.1.2.3".parse().unwrap()),
            v6: None,
            https: if https { vec![service(8443)] } else { vec![] },
            hold: Duration::from_millis(40),
        },
    ])
    .unwrap()
}

fn ask(zone: &Zone, name: &str, qtype: RecordType, edns: bool) -> (Message, Reply) {
    let mut q = Message::query();
    q.metadata.recursion_desired = true;
    q.add_query(Query::query(Name::from_ascii(name).unwrap(), qtype));
    if edns {
        let mut e = Edns::new();
        e.set_max_payload(4096);
        q.edns = Some(e);
    }
    let reply = zone.answer(&q.to_vec().unwrap(), true).unwrap();
    (Message::from_vec(&reply.bytes).unwrap(), reply)
}

#[test]
fn a_name_of_the_plan_gets_its_address() {
    let (m, reply) = ask(&zone(false), "pagebench.test.", RecordType::A, true);
    assert_eq!(m.metadata.response_code, ResponseCode::NoError);
    assert!(m.metadata.recursion_available && m.metadata.recursion_desired);
    assert_eq!(m.answers.len(), 1);
    assert_eq!(m.answers[0].data.to_string(), "10.1.2.2");
    assert!(m.edns.is_some(), "an EDNS query gets an EDNS answer");
    assert_eq!(reply.said.answers, vec!["10.1.2.2".to_string()]);
    assert_eq!(reply.said.qtype, "A");
}

#[test]
fn names_match_whatever_their_case_and_hold_as_told() {
    let (m, reply) = ask(&zone(false), "STATIC.site.TEST", RecordType::A, false);
    assert_eq!(m.answers[0].data.to_string(), "10.1.2.3");
    assert_eq!(reply.said.name, "static.site.test");
    assert_eq!(reply.hold, Duration::from_millis(40));
    assert!(m.edns.is_none());
}

#[test]
fn any_other_name_is_nxdomain_and_a_missing_type_is_empty() {
    let (m, reply) = ask(&zone(true), "www.google.com.", RecordType::A, true);
    assert_eq!(m.metadata.response_code, ResponseCode::NXDomain);
    assert_eq!(reply.said.rcode, "NXDOMAIN");
    let (m, _) = ask(&zone(true), "pagebench.test.", RecordType::AAAA, true);
    assert_eq!(m.metadata.response_code, ResponseCode::NoError);
    assert!(m.answers.is_empty());
}

#[test]
fn an_https_record_on_443_names_the_alpn_and_no_target() {
    let (m, reply) = ask(&zone(true), "pagebench.test.", RecordType::HTTPS, true);
    assert_eq!(m.answers.len(), 1);
    let RData::HTTPS(HTTPS(svcb)) = &m.answers[0].data else {
        panic!("{:?}", m.answers[0]);
    };
    assert_eq!(svcb.svc_priority, 1);
    assert!(svcb.target_name.is_root());
    assert_eq!(
        svcb.svc_params,
        vec![(
            SvcParamKey::Alpn,
            SvcParamValue::Alpn(Alpn(vec!["h3".into(), "h2".into()]))
        )]
    );
    assert_eq!(reply.said.answers, vec!["1 . alpn=h3,h2".to_string()]);
    assert_eq!(reply.said.alpn, vec!["h3", "h2"]);
    let (m, _) = ask(&zone(false), "pagebench.test.", RecordType::HTTPS, true);
    assert!(m.answers.is_empty(), "announcing off: no HTTPS record");
}

#[test]
fn another_port_is_asked_by_its_prefix_and_answered_with_target_and_port() {
    let (m, _) = ask(
        &zone(true),
        "_8443._https.static.site.test.",
        RecordType::HTTPS,
        true,
    );
    let RData::HTTPS(HTTPS(svcb)) = &m.answers[0].data else {
        panic!("{:?}", m.answers);
    };
    assert_eq!(svcb.target_name.to_ascii(), "Static.Site.test.");
    assert!(svcb
        .svc_params
        .contains(&(SvcParamKey::Port, SvcParamValue::Port(8443))));
    // The plain name has no service on 443; an A for the prefixed name does not exist.
    let (m, _) = ask(&zone(true), "static.site.test.", RecordType::HTTPS, true);
    assert!(m.answers.is_empty());
    let (m, _) = ask(
        &zone(true),
        "_8443._https.static.site.test.",
        RecordType::A,
        true,
    );
    assert_eq!(m.metadata.response_code, ResponseCode::NXDomain);
}

#[test]
fn garbage_gets_formerr_or_nothing() {
    assert!(zone(false).answer(&[1, 2, 3], true).is_none());
    let mut junk = vec![0xab, 0xcd];
    junk.extend([0xff; 20]);
    let reply = zone(false).answer(&junk, true).unwrap();
    let m = Message::from_vec(&reply.bytes).unwrap();
    assert_eq!(m.metadata.id, 0xabcd);
    assert_eq!(m.metadata.response_code, ResponseCode::FormErr);
}

#[test]
fn two_questions_are_a_format_error() {
    let mut q = Message::query();
    for n in ["a.test.", "b.test."] {
        q.add_query(Query::query(Name::from_ascii(n).unwrap(), RecordType::A));
    }
    let reply = zone(false).answer(&q.to_vec().unwrap(), true).unwrap();
    assert_eq!(reply.said.rcode, "FORMERR");
}

#[test]
fn a_bad_name_or_a_name_twice_is_refused_with_why() {
    for bad in ["", "a..b", "-a.test", "a b.test", &"x".repeat(64), "é.test"] {
        let e = check_dns_name(bad).unwrap_err().to_string();
        assert!(e.contains("is not a DNS name"), "{bad}: {e}");
    }
    check_dns_name("www.site-1.test.").unwrap();
    let twice = ZoneName {
        host: "a.test".into(),
        v4: None,
        v6: None,
        https: vec![],
        hold: Duration::ZERO,
    };
    let e = Zone::new(vec![
        twice.clone(),
        ZoneName {
            host: "A.test".into(),
            ..twice
        },
    ])
    .unwrap_err()
    .to_string();
    assert!(e.contains("twice"), "{e}");
}
