//! `--profile auto` judges each broker by what it is, on answers recorded from real
//! brokers (`tests/fixtures/probe-*.json`, replayed by `support::replay`): Queen v0 is
//! judged by the `v0` profile, queen-engine 1.3 as Queen 2 with the capabilities it
//! has, and the reference broker (live, in process) as Queen 2 with all of them.
//!
//! To record a broker's answers again (the probe changed, or another broker):
//!
//! ```sh
//! QUEEN_RECORD_URL=http://127.0.0.1:6650 QUEEN_RECORD_FILE=/tmp/probe.json \
//!   QUEEN_RECORD_BROKER="what it is and how it ran" \
//!   cargo test -p queen-conformance --test probe_recorded -- --ignored record
//! ```

mod support;

use std::time::Duration;

use queen_conformance::probe::{Basis, Decision, Generation, Probe, Reading, Verdict};
use queen_conformance::{Capability, probe, wait_ready};
use support::replay::{Recording, start_recorder, start_replay};
use support::run_binary;

/// The probe against a replay of `recording`; every request it made was recorded.
async fn probe_recording(recording: &Recording) -> Probe {
    let (url, misses) = start_replay(recording).await;
    let found = probe(&url, None).await;
    assert!(
        misses.list().is_empty(),
        "requests the recording of {} does not hold (record it again): {:?}",
        recording.broker,
        misses.list()
    );
    found
}

/// The finding of `cap`: its verdict and the readings of its evidence.
fn finding(found: &Probe, cap: Capability) -> (Verdict, Vec<Reading>) {
    let f = found
        .findings
        .iter()
        .find(|f| f.capability == cap)
        .unwrap_or_else(|| panic!("no finding for {cap:?}"));
    (f.verdict, f.evidence.iter().map(|e| e.reading).collect())
}

/// Records the answers of the broker at `QUEEN_RECORD_URL` to the probe (and to the
/// readiness check before it) into `QUEEN_RECORD_FILE`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "records a real broker: needs QUEEN_RECORD_URL and QUEEN_RECORD_FILE"]
async fn record() {
    let url = std::env::var("QUEEN_RECORD_URL").expect("QUEEN_RECORD_URL");
    let file = std::env::var("QUEEN_RECORD_FILE").expect("QUEEN_RECORD_FILE");
    let broker = std::env::var("QUEEN_RECORD_BROKER").unwrap_or_else(|_| url.clone());
    let (proxy, log) = start_recorder(&url).await;
    wait_ready(&proxy, None, Duration::from_secs(10))
        .await
        .expect("the broker is up");
    let found = probe(&proxy, None).await;
    println!("{}", found.to_text());
    let recording = Recording {
        broker,
        how: "cargo test -p queen-conformance --test probe_recorded -- --ignored record: GET /health, then the probe of --profile auto, through a recording proxy".into(),
        exchanges: log.lock().expect("the log").clone(),
    };
    let text = serde_json::to_string_pretty(&recording).expect("JSON") + "\n";
    std::fs::write(&file, text).expect("the recording is written");
}

/// The reference broker, live: Queen 2 by both signs, every capability present.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_judges_the_reference_broker_queen2_with_every_capability() {
    let broker = queen_mock_broker::MockBroker::start_in_memory()
        .await
        .expect("a broker");
    let found = probe(&broker.url(), None).await;
    let text = found.to_text();
    println!("{text}");
    let d = found.decision();
    assert_eq!(d.generation, Generation::Queen2, "{text}");
    for f in &found.findings {
        assert_eq!(f.verdict, Verdict::Present, "{:?}: {text}", f.capability);
    }
    assert_eq!(
        d,
        Decision {
            generation: Generation::Queen2,
            basis: Basis::Agreed
        },
        "{text}"
    );
    assert!(
        found
            .signs
            .iter()
            .all(|s| s.points_to == Some(Generation::Queen2)),
        "{text}"
    );
    let profile = found.profile();
    assert_eq!(profile.name, "auto");
    assert!(profile.missing_why.is_empty(), "{:?}", profile.missing_why);
    broker.shutdown().await;
}

/// Queen v0, recorded: both signs point to v0, so `auto` runs the `v0` profile (its
/// own page, the Queen 2 conventions it never promised waived), and says why. Its
/// capabilities are read right too: Core only; KV, timers, locks, fetch, ephemeral
/// queues and a retry by hand answer v0's "File Not Found" page; its stream routes
/// register a query but have no partition listing (the stream runner of Queen 2).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_judges_queen_v0_by_the_v0_profile() {
    let found = probe_recording(&Recording::fixture("probe-queen-v0.json")).await;
    let text = found.to_text();
    assert_eq!(
        found.decision(),
        Decision {
            generation: Generation::QueenV0,
            basis: Basis::Agreed
        },
        "{text}"
    );
    assert!(
        found
            .signs
            .iter()
            .all(|s| s.points_to == Some(Generation::QueenV0)),
        "{text}"
    );
    let profile = found.profile();
    assert_eq!(profile.name, "v0", "{text}");
    assert!(!profile.waived.is_empty());
    assert!(
        text.contains("decided    Queen v0, by the empty pop and the lease extension: profile v0"),
        "{text}"
    );
    use Capability::*;
    assert_eq!(finding(&found, Core).0, Verdict::Present, "{text}");
    for cap in [
        Cursor, Positions, Kv, Timers, Locks, Fetch, Streams, Ephemeral, Admin,
    ] {
        assert_eq!(finding(&found, cap).0, Verdict::Absent, "{cap:?}: {text}");
    }
    for cap in [Kv, Timers, Locks, Fetch, Ephemeral] {
        assert_eq!(
            finding(&found, cap).1,
            [Reading::NoRoute],
            "{cap:?}: {text}"
        );
    }
    // A 400 for `positions` is the transaction route refusing them.
    assert_eq!(finding(&found, Positions).1, [Reading::Refused], "{text}");
    assert_eq!(
        finding(&found, Streams).1,
        [Reading::Success, Reading::NoRoute],
        "{text}"
    );
    assert_eq!(
        finding(&found, Admin).1,
        [Reading::Success, Reading::NoRoute],
        "{text}"
    );
}

/// queen-engine 1.3.0, recorded: both signs point to Queen 2, so `auto` runs the
/// capabilities it has. Admin is found although its 404 for retrying a live message
/// carries no `code`: the route answered, and its answer is not the broker's answer
/// for a route it lacks (`no_such_route`). Positions are refused by the transaction
/// route; locks, fetch and the stream runner's partition listing are routes it lacks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_judges_queen_engine_as_queen2_with_what_it_has() {
    let recording = Recording::fixture("probe-queen-engine-1.3.0.json");
    let retry = recording
        .exchanges
        .iter()
        .find(|x| x.path.ends_with("/retry"))
        .expect("the retry is recorded");
    let body: serde_json::Value = serde_json::from_str(&retry.body).expect("JSON");
    assert!(
        retry.status == 404 && body.get("code").is_none(),
        "{}",
        retry.body
    );
    let found = probe_recording(&recording).await;
    let text = found.to_text();
    assert_eq!(
        found.decision(),
        Decision {
            generation: Generation::Queen2,
            basis: Basis::Agreed
        },
        "{text}"
    );
    use Capability::*;
    for cap in [Core, Cursor, Kv, Timers, Ephemeral, Admin] {
        assert_eq!(finding(&found, cap).0, Verdict::Present, "{cap:?}: {text}");
    }
    for cap in [Positions, Locks, Fetch, Streams] {
        assert_eq!(finding(&found, cap).0, Verdict::Absent, "{cap:?}: {text}");
    }
    assert_eq!(
        finding(&found, Admin).1,
        [Reading::Success, Reading::Refused],
        "{text}"
    );
    assert_eq!(finding(&found, Positions).1, [Reading::Refused], "{text}");
    for cap in [Locks, Fetch] {
        assert_eq!(
            finding(&found, cap).1,
            [Reading::NoRoute],
            "{cap:?}: {text}"
        );
    }
    assert_eq!(
        finding(&found, Streams).1,
        [Reading::Success, Reading::NoRoute],
        "{text}"
    );
    let profile = found.profile();
    assert_eq!(profile.name, "auto");
    let mut missing: Vec<Capability> = profile.missing_why.iter().map(|(c, _)| *c).collect();
    missing.sort_by_key(|c| format!("{c:?}"));
    assert_eq!(missing, [Fetch, Locks, Positions, Streams], "{text}");
    assert!(profile.has(Admin) && profile.has(Time) && !profile.has(Positions));
    assert!(
        text.contains("decided    Queen 2, by the empty pop and the lease extension: profile auto"),
        "{text}"
    );
}

/// A 200 whose body is an error is no support: v0's stream listing answered as v0
/// answers `POST /streams/v1/state/get` for an id it cannot read (recorded by hand
/// from the same broker: HTTP 200 with its database's error).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_200_whose_body_is_an_error_is_no_support() {
    let mut recording = Recording::fixture("probe-queen-v0.json");
    let listing = recording
        .exchanges
        .iter_mut()
        .find(|x| x.path == "/streams/v1/state/partitions")
        .expect("the listing is recorded");
    listing.status = 200;
    listing.content_type = Some("application/json".into());
    listing.body = r#"{"error":"ERROR:  invalid input syntax for type uuid: \"0\"\nCONTEXT:  PL/pgSQL function streams_state_get_v1(jsonb) line 11 at FOR over SELECT rows\n","success":false}"#.into();
    let found = probe_recording(&recording).await;
    assert_eq!(
        finding(&found, Capability::Streams),
        (Verdict::Absent, vec![Reading::Success, Reading::ErrorIn2xx]),
        "{}",
        found.to_text()
    );
}

/// The binary prints what decided, and the run is judged by the `v0` profile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_says_which_evidence_decided() {
    let (url, misses) = start_replay(&Recording::fixture("probe-queen-v0.json")).await;
    let r = run_binary(&["--url", &url, "--profile", "auto", "--only", "core.health"]).await;
    assert_eq!(r.code, Some(0), "{}{}", r.stdout, r.stderr);
    for needle in [
        "sign       an empty pop (Queen 2: 204; Queen v0: 200 with messages: []): GET /api/v1/pop/queue/{queue}/partition/{none}: HTTP 200 {\"error\":\"partition_not_found\",\"messages\":[],\"success\":false}",
        "-> Queen v0",
        "decided    Queen v0, by the empty pop and the lease extension: profile v0",
        "(profile v0)",
        "1 passed, 0 failed, 0 skipped",
    ] {
        assert!(r.stdout.contains(needle), "{needle}: {}", r.stdout);
    }
    assert!(misses.list().is_empty(), "{:?}", misses.list());
}
