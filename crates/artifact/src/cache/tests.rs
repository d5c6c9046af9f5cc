use std::time::Duration;

use super::*;
use crate::fetch::tests::{Route, Server, fetcher, sha256, tarball, test_config};

fn app(value: &str) -> bytes::Bytes {
    tarball(&[("deploy/cm.yaml", value.as_bytes())])
}

/// A cache over a server of `routes` (path, route).
async fn cache_of(routes: Vec<(&'static str, Route)>, max_bytes: u64) -> (Server, ArtifactCache) {
    let server = Server::start(routes).await;
    (
        server,
        ArtifactCache::new(fetcher(test_config()), max_bytes),
    )
}

#[tokio::test]
async fn concurrent_readers_of_one_digest_share_one_download_and_one_tree() {
    let body = app("one");
    let digest = sha256(&body);
    let (server, cache) = cache_of(
        vec![("/a.tar.gz", Route::Slow(Duration::from_millis(200), body))],
        ArtifactCache::DEFAULT_MAX_BYTES,
    )
    .await;
    let url = server.url("/a.tar.gz");
    let readers: Vec<String> = (0..20).map(|i| format!("ns/ks-{i}")).collect();
    let checkouts = futures::future::join_all(
        readers
            .iter()
            .map(|reader| cache.checkout(reader, &url, &digest)),
    )
    .await;
    let extractions: Vec<Arc<Extraction>> = checkouts
        .into_iter()
        .map(|c| c.expect("checkout"))
        .collect();
    assert_eq!(server.hits("/a.tar.gz"), 1, "one download for 20 readers");
    assert!(
        extractions.iter().all(|e| Arc::ptr_eq(e, &extractions[0])),
        "every reader reads the same extraction"
    );
    let text = std::fs::read_to_string(extractions[0].path().join("deploy/cm.yaml"))
        .expect("the extracted file");
    assert_eq!(text, "one");

    // A later reader of the same digest reads what is kept.
    let later = cache
        .checkout("other/ks", &url, &digest)
        .await
        .expect("checkout");
    assert!(Arc::ptr_eq(&later, &extractions[0]));
    assert_eq!(server.hits("/a.tar.gz"), 1);
}

#[tokio::test]
async fn a_mismatching_artifact_is_never_shared_and_is_fetched_again_next_time() {
    let body = app("one");
    let wrong = sha256(b"something else");
    let (server, cache) = cache_of(
        vec![("/a.tar.gz", Route::Slow(Duration::from_millis(100), body))],
        ArtifactCache::DEFAULT_MAX_BYTES,
    )
    .await;
    let url = server.url("/a.tar.gz");
    let (a, b) = tokio::join!(
        cache.checkout("ns/a", &url, &wrong),
        cache.checkout("ns/b", &url, &wrong)
    );
    for outcome in [a, b] {
        let error = outcome.expect_err("a digest mismatch fails");
        assert!(
            matches!(
                &*error,
                FetchError::Verify {
                    source: crate::DigestError::Mismatch { .. },
                    ..
                }
            ),
            "{error}"
        );
    }
    assert_eq!(
        server.hits("/a.tar.gz"),
        1,
        "the waiters shared the failed download"
    );
    assert!(cache.held().is_empty(), "nothing failed is kept");
    let again = cache.checkout("ns/a", &url, &wrong).await;
    assert!(again.is_err());
    assert_eq!(server.hits("/a.tar.gz"), 2, "the next checkout tries again");
}

#[tokio::test]
async fn a_digest_no_reader_reads_any_more_is_let_go_and_its_tree_deleted_after_its_last_holder() {
    let (one, two) = (app("one"), app("two"));
    let (d1, d2) = (sha256(&one), sha256(&two));
    let (server, cache) = cache_of(
        vec![("/1.tar.gz", Route::Ok(one)), ("/2.tar.gz", Route::Ok(two))],
        ArtifactCache::DEFAULT_MAX_BYTES,
    )
    .await;
    let (u1, u2) = (server.url("/1.tar.gz"), server.url("/2.tar.gz"));
    let first = cache.checkout("ns/a", &u1, &d1).await.expect("checkout");
    cache.checkout("ns/b", &u1, &d1).await.expect("checkout");
    let path = first.path().to_path_buf();

    // a moves on; b still reads revision 1.
    cache.checkout("ns/a", &u2, &d2).await.expect("checkout");
    let held: Vec<String> = cache.held().into_iter().map(|(d, _)| d).collect();
    assert_eq!(held.len(), 2, "{held:?}");
    // b moves on too: revision 1 is let go, but a reconcile still holds its tree.
    cache.checkout("ns/b", &u2, &d2).await.expect("checkout");
    assert_eq!(cache.held(), [(d2.clone(), 3)]);
    assert!(path.exists(), "the holder still reads it");
    drop(first);
    assert!(!path.exists(), "deleted with its last holder");
    assert_eq!(server.hits("/1.tar.gz"), 1);

    cache.forget("ns/a");
    assert_eq!(cache.held().len(), 1, "b still reads revision 2");
    cache.forget("ns/b");
    assert!(cache.held().is_empty());
}

#[tokio::test]
async fn past_its_size_the_cache_lets_go_of_the_unread_then_the_oldest_first() {
    let bodies = [app("aaaa"), app("bbbb"), app("cccc"), app("dddd")];
    let digests: Vec<String> = bodies.iter().map(|b| sha256(b)).collect();
    let paths = ["/a.tar.gz", "/b.tar.gz", "/c.tar.gz", "/d.tar.gz"];
    let routes = paths
        .iter()
        .zip(&bodies)
        .map(|(path, body)| (*path, Route::Ok(body.clone())))
        .collect();
    // Room for two extractions of 4 bytes.
    let (server, cache) = cache_of(routes, 8).await;
    let urls: Vec<String> = paths.iter().map(|p| server.url(p)).collect();
    let checkout = |reader: &'static str, i: usize| {
        let (url, digest) = (urls[i].clone(), digests[i].clone());
        let cache = &cache;
        async move {
            cache
                .checkout(reader, &url, &digest)
                .await
                .expect("checkout");
        }
    };
    checkout("ns/a", 0).await;
    checkout("ns/b", 1).await;
    cache.forget("ns/b");
    checkout("ns/b", 1).await;
    // b read 1 again and a still reads 0: both are kept, 8 bytes.
    assert_eq!(cache.held().len(), 2);
    checkout("ns/c", 2).await;
    // Over by one: 0 (read by a, used longest ago) goes.
    let held: Vec<String> = cache.held().into_iter().map(|(d, _)| d).collect();
    assert_eq!(
        held,
        {
            let mut expected = vec![digests[1].clone(), digests[2].clone()];
            expected.sort();
            expected
        },
        "the oldest went"
    );
    // An unread extraction goes before a read one, however recent.
    cache.forget("ns/c");
    checkout("ns/d", 3).await;
    let held: Vec<String> = cache.held().into_iter().map(|(d, _)| d).collect();
    assert!(
        held.contains(&digests[3]) && held.contains(&digests[1]),
        "{held:?}"
    );
    assert!(!held.contains(&digests[2]), "the unread one went: {held:?}");
}

#[tokio::test]
async fn without_room_readers_still_share_the_download_in_flight_and_nothing_is_kept() {
    let body = app("one");
    let digest = sha256(&body);
    let (server, cache) = cache_of(
        vec![("/a.tar.gz", Route::Slow(Duration::from_millis(200), body))],
        0,
    )
    .await;
    let url = server.url("/a.tar.gz");
    let (a, b) = tokio::join!(
        cache.checkout("ns/a", &url, &digest),
        cache.checkout("ns/b", &url, &digest)
    );
    let (a, b) = (a.expect("checkout"), b.expect("checkout"));
    assert!(Arc::ptr_eq(&a, &b));
    assert_eq!(server.hits("/a.tar.gz"), 1);
    assert!(cache.held().is_empty(), "nothing is kept without room");
    let path = a.path().to_path_buf();
    drop((a, b));
    assert!(!path.exists());
}
