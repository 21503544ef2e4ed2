use super::*;

fn parse(text: &str) -> Result<Profile, String> {
    parse_profile(text, Path::new("x.toml")).map_err(|e| e.to_string())
}

#[test]
fn parses_a_full_profile() {
    let p = parse(
            "name = \"lte\"\nrtt_ms = 70\njitter_ms = 5\nloss_pct = 0.5\ndown_mbit = 12\nup_mbit = 12\nqueue_packets = 100\n",
        )
        .unwrap();
    assert_eq!(p.name, "lte");
    assert_eq!(p.queue_limit(), Some(QueueLimit::Packets(100)));
    assert_eq!(p.min_rtt_ms(), 60.0);
}

#[test]
fn unknown_field_names_file_line_and_field() {
    let e = parse("name = \"a\"\nrtt_ms = 1\nrtt = 5\n").unwrap_err();
    assert!(e.contains("x.toml"), "{e}");
    assert!(e.contains("line 3"), "{e}");
    assert!(e.contains("rtt"), "{e}");
}

#[test]
fn not_toml_names_line() {
    let e = parse("name = \"a\"\nthis is not toml\n").unwrap_err();
    assert!(e.contains("x.toml") && e.contains("line 2"), "{e}");
}

#[test]
fn range_errors_name_the_field() {
    for (text, field) in [
        ("name=\"a\"\nrtt_ms=-1\n", "rtt_ms"),
        ("name=\"a\"\nrtt_ms=10\nloss_pct=101\n", "loss_pct"),
        ("name=\"a\"\nrtt_ms=10\nloss_pct=-0.1\n", "loss_pct"),
        ("name=\"a\"\nrtt_ms=10\ndown_mbit=0\n", "down_mbit"),
        ("name=\"a\"\nrtt_ms=10\nup_mbit=-3\n", "up_mbit"),
        ("name=\"a\"\nrtt_ms=10\njitter_ms=6\n", "jitter_ms"),
        ("name=\"a b\"\nrtt_ms=10\n", "name"),
    ] {
        let e = parse(text).unwrap_err();
        assert!(e.contains(field), "{text}: {e}");
    }
}

#[test]
fn missing_required_field_is_named() {
    let e = parse("name = \"a\"\n").unwrap_err();
    assert!(e.contains("rtt_ms"), "{e}");
}

#[test]
fn shipped_profiles_load_and_all_is_the_study() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("profiles");
    let all = select("all", &dir).unwrap();
    let names: Vec<_> = all.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, STUDY_PROFILES);
    let wired = &all[1];
    assert_eq!(
        (wired.rtt_ms, wired.jitter_ms, wired.loss_pct),
        (40.0, 5.0, 0.0)
    );
    let cell = &all[5];
    assert_eq!(
        (cell.rtt_ms, cell.jitter_ms, cell.loss_pct),
        (100.0, 25.0, 5.0)
    );
    let ext = select("extended", &dir).unwrap();
    assert!(ext.len() >= 2);
    assert!(ext
        .iter()
        .all(|p| p.has_bottleneck() && p.queue_limit().is_some()));
    let e = select("wired,wired", &dir).unwrap_err().to_string();
    assert!(e.contains("twice"), "{e}");
    let e = select("nosuch", &dir).unwrap_err().to_string();
    assert!(e.contains("nosuch") && e.contains("wired"), "{e}");
}

#[test]
fn built_in_profiles_are_exactly_the_shipped_files() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("profiles");
    let mut files: Vec<(String, String)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .map(|p| {
            let name = p.file_name().unwrap().to_str().unwrap().to_string();
            (name, std::fs::read_to_string(&p).unwrap())
        })
        .collect();
    files.sort();
    let built_in: Vec<(String, String)> = BUILT_IN
        .iter()
        .map(|(n, t)| (n.to_string(), t.to_string()))
        .collect();
    assert_eq!(
        built_in, files,
        "profiles/ changed: update profile::BUILT_IN to match"
    );
    let from_files = ProfileSource::Dir(dir).load().unwrap();
    let compiled = ProfileSource::BuiltIn.load().unwrap();
    let values = |m: &BTreeMap<String, LoadedProfile>| -> Vec<Profile> {
        m.values().map(|l| l.profile.clone()).collect()
    };
    assert_eq!(values(&compiled), values(&from_files));
    let all = select_from("all", &ProfileSource::BuiltIn).unwrap();
    let names: Vec<_> = all.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, STUDY_PROFILES);
}

#[test]
fn a_listed_source_resolves_names_and_sets_from_its_values() {
    let wired = Profile::simple("wired", 40.0, 5.0, 0.0);
    let odd = Profile::simple("odd", 10.0, 0.0, 0.0);
    let src = ProfileSource::Listed(vec![wired.clone(), odd.clone()]);
    assert_eq!(
        select_from("odd,wired", &src).unwrap(),
        vec![odd.clone(), wired]
    );
    assert_eq!(select_from("extended", &src).unwrap(), vec![odd]);
    let e = select_from("all", &src).unwrap_err().to_string();
    assert!(
        e.contains("the stored profile set") && e.contains("datacenter"),
        "{e}"
    );
}

#[test]
fn traces_resolve_relative_to_the_profile_file_then_to_the_shipped_ones() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("mine")).unwrap();
    std::fs::write(dir.path().join("mine/link.down"), "0\n0\n5\n10\n").unwrap();
    let file = dir.path().join("p.toml");
    let text = "name = \"t\"\nrtt_ms = 40\ndown_trace = \"mine/link.down\"\nup_trace = \"traces/Verizon-LTE-short.up\"\nqueue_packets = 50\naqm = \"codel\"\n";
    std::fs::write(&file, text).unwrap();
    let p = load_profile_file(&file).unwrap().profile;
    let down = p.down_trace.as_ref().unwrap();
    assert!(down.source.ends_with("mine/link.down"), "{}", down.source);
    // 4 opportunities (the stamp 10 is the next repetition's 0) per 10 ms of 1500 B.
    assert!((down.mean_mbit - 4.8).abs() < 1e-9);
    let up = p.up_trace.as_ref().unwrap();
    assert_eq!(up.source, "built-in:Verizon-LTE-short.up");
    assert_eq!(up.trace().unwrap().opportunities(), 69_367);
    // Stored in meta.json and read back: the same trace, found where it was read.
    let stored: Profile = serde_json::from_str(&serde_json::to_string(&p).unwrap()).unwrap();
    assert_eq!(stored, p);
    let resumed = ProfileSource::Listed(vec![stored]).load().unwrap();
    assert!(resumed["t"]
        .profile
        .down_trace
        .as_ref()
        .unwrap()
        .trace()
        .is_some());
    // A trace changed since: refused.
    std::fs::write(dir.path().join("mine/link.down"), "0\n10\n").unwrap();
    let e = ProfileSource::Listed(vec![serde_json::from_str(
        &serde_json::to_string(&p).unwrap(),
    )
    .unwrap()])
    .load()
    .unwrap_err()
    .to_string();
    assert!(e.contains("has changed"), "{e}");
}

#[test]
fn a_rate_without_a_queue_gets_tc_netem_s_default_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rate.toml");
    std::fs::write(&file, "name = \"rate\"\nrtt_ms = 40\ndown_mbit = 10\n").unwrap();
    let p = load_profile_file(&file).unwrap().profile;
    assert_eq!(
        p.queue_limit(),
        Some(QueueLimit::Packets(DEFAULT_QUEUE_PACKETS))
    );
    assert!(table(&[p]).contains("1000 pkt (default)"));
    std::fs::write(&file, "name = \"plain\"\nrtt_ms = 40\n").unwrap();
    assert_eq!(
        load_profile_file(&file).unwrap().profile.queue_limit(),
        None
    );
}

#[test]
fn real_network_fields_are_checked_with_file_line_field_and_fix() {
    let dir = tempfile::tempdir().unwrap();
    let bad = |body: &str| {
        let file = dir.path().join("bad.toml");
        std::fs::write(&file, format!("name = \"b\"\nrtt_ms = 40\n{body}")).unwrap();
        load_profile_file(&file).unwrap_err().to_string()
    };
    for (body, needles) in [
        (
            "down_trace = \"nope.down\"\nqueue_packets = 10\n",
            &[
                "bad.toml",
                "line 3",
                "down_trace",
                "not found",
                "traces/TMobile-LTE-short.down",
            ][..],
        ),
        (
            "down_mbit = 5\ndown_trace = \"traces/TMobile-LTE-short.down\"\nqueue_packets = 10\n",
            &["line 4", "both set", "remove one"],
        ),
        (
            "aqm = \"codel\"\n",
            &["line 3", "`aqm`", "needs a bottleneck"],
        ),
        ("aqm = \"red\"\n", &["line 3", "aqm", "unknown variant"]),
        (
            "down_mbit = 5\nqueue_packets = 10\naqm = \"codel\"\ncodel_target_ms = 200\n",
            &["line 6", "codel_target_ms", "below `codel_interval_ms`"],
        ),
        (
            "outages = [[5, 1], [5.5, 1]]\n",
            &["line 3", "outages", "entry 2", "time order"],
        ),
        ("outages = [[-1, 1]]\n", &["line 3", "start_s ≥ 0"]),
        (
            "on_off = { mean_on_s = 10, mean_off_s = 0 }\n",
            &["line 3", "on_off.mean_off_s"],
        ),
        (
            "outage_mode = \"hold\"\n",
            &["line 3", "outage_mode", "no effect"],
        ),
        ("nat_rebind_at_s = -2\n", &["line 3", "nat_rebind_at_s"]),
        (
            "cross_traffic = { flows = 2, protocol = \"udp-cbr\" }\n",
            &["line 3", "cross_traffic.rate_mbit", "missing"],
        ),
        (
            "cross_traffic = { flows = 2, protocol = \"tcp\", rate_mbit = 3 }\n",
            &["line 3", "does not apply"],
        ),
        (
            "cross_traffic = { flows = 0, protocol = \"tcp\" }\n",
            &["line 3", "1 to 64"],
        ),
        ("origin_delay_ms = [0, -5]\n", &["line 3", "entry 2"]),
    ] {
        let e = bad(body);
        for n in needles {
            assert!(e.contains(n), "{body:?}: {n:?} not in {e}");
        }
    }
}

#[test]
fn shipped_lte_profiles_replay_their_traces_and_summarise_them() {
    let all = select_from(
        "lte-tmobile,lte-tmobile-fq,lte-verizon",
        &ProfileSource::BuiltIn,
    )
    .unwrap();
    assert_eq!(all[0].down_trace.as_ref().unwrap().mean_mbit, 16.703);
    assert_eq!(all[1].aqm, Aqm::FqCodel);
    assert!(
        all[2].summary().contains("≈5.0 (trace)"),
        "{}",
        all[2].summary()
    );
    let t = table(&all);
    assert!(t.contains("fq_codel"), "{t}");
}
