// SPDX-License-Identifier: Apache-2.0
use super::*;

const MIN: Duration = Duration::from_secs(60);

fn up<'a>(aff: &'a str, data: &'a [u8], eps: &'a [Vec<u8>], ttl: Duration) -> Update<'a> {
    Update { cluster: "c1", affiliate: aff, data, endpoints: eps, ttl }
}

fn eps(names: &[&str]) -> Vec<Vec<u8>> {
    names.iter().map(|n| n.as_bytes().to_vec()).collect()
}

fn drain(r: &mut Registry, id: WatchId) -> Vec<Event> {
    let mut out = Vec::new();
    while let Some(e) = r.next_event(id) {
        out.push((*e.unwrap()).clone());
    }
    out
}

#[test]
fn update_merges_endpoints_in_order_and_keeps_data() {
    let mut r = Registry::default();
    let now = Instant::now();
    r.update(&up("af1", b"data1", &eps(&["e1", "e2"]), MIN), now).unwrap();
    r.update(&up("af1", b"", &eps(&["e3", "e2"]), MIN), now).unwrap();
    let list = r.list("c1").unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].data, b"data1");
    assert_eq!(list[0].endpoints, eps(&["e1", "e2", "e3"]));
}

#[test]
fn delete_of_missing_succeeds_and_update_then_delete_empties() {
    let mut r = Registry::default();
    let now = Instant::now();
    r.delete("c1", "nobody").unwrap();
    r.update(&up("af1", b"d", &[], MIN), now).unwrap();
    r.delete("c1", "af1").unwrap();
    assert!(r.list("c1").unwrap().is_empty());
}

#[test]
fn watch_gives_snapshot_then_one_message_per_change() {
    let mut r = Registry::default();
    let now = Instant::now();
    r.update(&up("af1", b"d1", &[], MIN), now).unwrap();
    let (w, snapshot) = r.watch("c1").unwrap();
    assert_eq!(snapshot.len(), 1);
    assert_eq!(snapshot[0].id, "af1");
    assert!(snapshot[0].endpoints.is_empty());
    r.update(&up("af2", b"d2", &[], MIN), now).unwrap();
    r.delete("c1", "af1").unwrap();
    assert_eq!(r.take_woken(), vec![w]);
    let events = drain(&mut r, w);
    assert_eq!(events.len(), 2);
    assert_eq!(
        (events[0].id.as_str(), events[0].deleted, &events[0].data[..]),
        ("af2", false, &b"d2"[..])
    );
    assert_eq!(events[1], deleted("af1"));
}

#[test]
fn merging_a_known_endpoint_is_not_a_change() {
    let mut r = Registry::default();
    let now = Instant::now();
    r.update(&up("af1", b"", &eps(&["e1"]), MIN), now).unwrap();
    let (w, _) = r.watch("c1").unwrap();
    r.update(&up("af1", b"", &eps(&["e1"]), MIN), now).unwrap();
    assert!(drain(&mut r, w).is_empty());
    // New data is always a change, even the same bytes: clients expect every refresh.
    r.update(&up("af1", b"x", &[], MIN), now).unwrap();
    r.update(&up("af1", b"x", &[], MIN), now).unwrap();
    assert_eq!(drain(&mut r, w).len(), 2);
}

#[test]
fn a_new_affiliate_is_announced_even_without_data() {
    let mut r = Registry::default();
    let (w, _) = r.watch("c1").unwrap();
    r.update(&up("af1", b"", &[], MIN), Instant::now()).unwrap();
    assert_eq!(drain(&mut r, w).len(), 1);
}

#[test]
fn gc_drops_expired_endpoints_then_the_affiliate() {
    let mut r = Registry::default();
    let t0 = Instant::now();
    r.update(&up("af1", b"d", &eps(&["e1", "e2"]), MIN), t0).unwrap();
    // e2 is extended to 3 min; the data (and so the affiliate) to 3 min as well.
    r.update(&up("af1", b"", &eps(&["e2"]), 3 * MIN), t0).unwrap();
    let (w, _) = r.watch("c1").unwrap();
    assert_eq!(r.gc(t0 + 2 * MIN), 0);
    let list = r.list("c1").unwrap();
    assert_eq!(list[0].endpoints, eps(&["e2"]));
    // An endpoint's expiry is announced, with what remains.
    let events = drain(&mut r, w);
    assert_eq!(events.len(), 1);
    assert!(!events[0].deleted);
    assert_eq!(events[0].endpoints, eps(&["e2"]));
    assert_eq!(r.gc(t0 + 4 * MIN), 1);
    assert!(r.list("c1").unwrap().is_empty());
    assert_eq!(drain(&mut r, w), vec![deleted("af1")]);
}

#[test]
fn endpoint_only_updates_keep_the_record_alive_and_data_may_shorten_it() {
    let mut r = Registry::default();
    let t0 = Instant::now();
    r.update(&up("af1", b"d", &[], MIN), t0).unwrap();
    r.update(&up("af1", b"", &eps(&["e"]), 5 * MIN), t0).unwrap();
    assert_eq!(r.gc(t0 + 2 * MIN), 0);
    // New data sets the expiry outright, even earlier than before.
    r.update(&up("af1", b"d2", &[], Duration::ZERO), t0 + 2 * MIN).unwrap();
    assert_eq!(r.gc(t0 + 3 * MIN), 1);
}

#[test]
fn a_zero_ttl_is_accepted_and_gone_at_the_next_gc() {
    let mut r = Registry::default();
    let t0 = Instant::now();
    r.update(&up("af1", b"d", &[], Duration::ZERO), t0).unwrap();
    assert_eq!(r.list("c1").unwrap().len(), 1);
    assert_eq!(r.gc(t0 + Duration::from_millis(1)), 1);
    assert_eq!(r.totals(), Totals::default());
}

#[test]
fn validation_errors_and_their_codes() {
    let mut r = Registry::default();
    let now = Instant::now();
    let long = "x".repeat(257);
    let ok256 = "x".repeat(256);
    assert_eq!(r.check_cluster_id(""), Err(RegistryError::ClusterIdEmpty));
    assert_eq!(r.check_cluster_id(&"x".repeat(1024)), Err(RegistryError::ClusterIdTooLong));
    assert_eq!(r.list(&long).unwrap_err(), RegistryError::ClusterIdTooLong);
    assert_eq!(r.watch("").unwrap_err(), RegistryError::ClusterIdEmpty);
    assert_eq!(r.delete("c1", ""), Err(RegistryError::AffiliateIdEmpty));
    let mut u = up(&long, b"", &[], MIN);
    assert_eq!(r.update(&u, now), Err(RegistryError::AffiliateIdTooLong));
    u.affiliate = &ok256;
    r.update(&u, now).unwrap();
    let big = vec![0u8; 2049];
    assert_eq!(r.update(&up("a", &big, &[], MIN), now), Err(RegistryError::DataTooBig));
    r.update(&up("a", &big[..2048], &[], MIN), now).unwrap();
    let ep = vec![vec![0u8; 33]];
    assert_eq!(r.update(&up("a", b"", &ep, MIN), now), Err(RegistryError::EndpointTooBig));
    assert_eq!(
        r.update(&up("a", b"", &[], 30 * MIN + Duration::from_nanos(1)), now),
        Err(RegistryError::TtlTooLarge)
    );
    r.update(&up("a", b"", &[], 30 * MIN), now).unwrap();
    assert_eq!(RegistryError::DataTooBig.code(), Code::InvalidArgument);
    assert_eq!(RegistryError::TooManyEndpoints.code(), Code::ResourceExhausted);
}

#[test]
fn the_1025th_affiliate_is_refused() {
    let mut r = Registry::default();
    let now = Instant::now();
    for i in 0..1024 {
        r.update(&up(&format!("af{i}"), b"", &[], MIN), now).unwrap();
    }
    assert_eq!(
        r.update(&up("one-more", b"", &[], MIN), now),
        Err(RegistryError::TooManyAffiliates)
    );
    // An existing one may still be updated.
    r.update(&up("af7", b"d", &[], MIN), now).unwrap();
}

#[test]
fn the_65th_endpoint_is_refused_and_earlier_ones_stay() {
    let mut r = Registry::default();
    let now = Instant::now();
    for i in 0..64 {
        r.update(&up("af1", b"", &[vec![i as u8]], MIN), now).unwrap();
    }
    assert_eq!(
        r.update(&up("af1", b"", &[vec![200]], MIN), now),
        Err(RegistryError::TooManyEndpoints)
    );
    // A known one is not a new one.
    r.update(&up("af1", b"", &[vec![3]], MIN), now).unwrap();
    assert_eq!(r.list("c1").unwrap()[0].endpoints.len(), 64);
}

#[test]
fn configured_cluster_limits_apply() {
    let mut r = Registry::new(Limits {
        affiliates_per_cluster: 2,
        endpoints_per_affiliate: 1,
        data_max: 4,
        clusters: 1,
        watchers_per_cluster: 1,
        ..Limits::default()
    });
    let now = Instant::now();
    r.update(&up("a", b"1234", &[], MIN), now).unwrap();
    assert_eq!(r.update(&up("a", b"12345", &[], MIN), now), Err(RegistryError::DataTooBig));
    r.update(&up("b", b"", &eps(&["e"]), MIN), now).unwrap();
    assert_eq!(
        r.update(&up("b", b"", &eps(&["f"]), MIN), now),
        Err(RegistryError::TooManyEndpoints)
    );
    assert_eq!(r.update(&up("c", b"", &[], MIN), now), Err(RegistryError::TooManyAffiliates));
    let mut other = up("a", b"", &[], MIN);
    other.cluster = "c2";
    assert_eq!(r.update(&other, now), Err(RegistryError::TooManyClusters));
    r.watch("c1").unwrap();
    assert_eq!(r.watch("c1").unwrap_err(), RegistryError::TooManyWatchers);
}

#[test]
fn a_full_watcher_is_dropped_while_healthy_ones_get_everything_in_order() {
    let mut r = Registry::default();
    let now = Instant::now();
    let (slow, _) = r.watch("c1").unwrap();
    let (fast, _) = r.watch("c1").unwrap();
    let mut seen = Vec::new();
    for i in 0..(WATCH_QUEUE + 5) {
        r.update(&up(&format!("af{i}"), b"", &[], MIN), now).unwrap();
        seen.extend(drain(&mut r, fast).into_iter().map(|e| e.id));
    }
    let expected: Vec<String> = (0..WATCH_QUEUE + 5).map(|i| format!("af{i}")).collect();
    assert_eq!(seen, expected);
    assert_eq!(r.next_event(slow), Some(Err(LostUpdate)));
    assert_eq!(r.next_event(slow), None);
    assert_eq!(r.totals().watchers, 1);
    // The dropped watcher no longer counts against the cluster.
    r.update(&up("more", b"", &[], MIN), now).unwrap();
    assert_eq!(drain(&mut r, fast).len(), 1);
}

#[test]
fn clusters_without_affiliates_or_watchers_are_collected() {
    let mut r = Registry::default();
    let t0 = Instant::now();
    let (w, _) = r.watch("c1").unwrap();
    r.gc(t0);
    assert_eq!(r.totals().clusters, 1);
    r.unwatch(w);
    r.gc(t0);
    assert_eq!(r.totals().clusters, 0);
}

#[test]
fn export_and_import_keep_remaining_ttls() {
    let mut r = Registry::default();
    let t0 = Instant::now();
    r.update(&up("af1", b"d", &eps(&["e1"]), 10 * MIN), t0).unwrap();
    r.update(&up("af1", b"", &eps(&["e2"]), 2 * MIN), t0).unwrap();
    r.update(&up("gone", b"d", &[], MIN), t0).unwrap();
    let saved = r.export(t0 + 3 * MIN);
    assert_eq!(saved.len(), 1);
    assert_eq!(saved[0].affiliates.len(), 1);
    let a = &saved[0].affiliates[0];
    assert_eq!(a.ttl, 7 * MIN);
    assert_eq!(a.endpoints, vec![(b"e1".to_vec(), 7 * MIN)]);

    let t1 = t0 + 100 * MIN;
    let mut back = Registry::default();
    assert_eq!(back.import(saved.clone(), t1), (1, 0));
    assert_eq!(back.export(t1), saved);
    assert_eq!(back.gc(t1 + 6 * MIN), 0);
    assert_eq!(back.gc(t1 + 7 * MIN), 1);
}

#[test]
fn import_skips_records_beyond_the_limits() {
    let mut r = Registry::default();
    let now = Instant::now();
    let good = SavedAffiliate { id: "ok".into(), data: vec![1], ttl: 999 * MIN, endpoints: vec![] };
    let big = SavedAffiliate { id: "big".into(), data: vec![0; 4096], ..good.clone() };
    let saved = vec![
        SavedCluster { id: "c1".into(), affiliates: vec![good, big] },
        SavedCluster { id: String::new(), affiliates: vec![] },
    ];
    assert_eq!(r.import(saved, now), (1, 2));
    // The TTL was capped at the maximum.
    assert_eq!(r.export(now)[0].affiliates[0].ttl, 30 * MIN);
}
