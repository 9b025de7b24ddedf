//! `GET /metrics` is behind the status page's guard: loopback clients without an admin
//! token; with one, any client presenting it (how Prometheus scrapes from another host).
//! `/healthz` stays open to everyone.
//!
//! A real proxy on 127.0.0.1 serves the loopback cases; a client on another host is a
//! request through the proxy's router carrying that peer's address (what the accept loop
//! attaches), since a test has no second host.

#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub)] // test code: a failure is a test failure

mod common;

use std::net::SocketAddr;

use axum::body::Body;
use axum::extract::ConnectInfo;
use cascade_proxy::{AdminToken, AppState, ProxyConfig, router};
use common::{Script, start};
use tower::ServiceExt;

const TOKEN: &str = "scrape-me";

fn config(token: Option<&str>) -> ProxyConfig {
    let mut config = ProxyConfig::new("http://127.0.0.1:9");
    config.state.path = cascade_proxy::config::IN_MEMORY_DB.into();
    config.window.discover = false;
    config.status.admin_token = token.map(|t| AdminToken::new(t).unwrap());
    config
}

/// The status of `GET path` from `peer`, with `bearer` when given.
async fn status_from(config: ProxyConfig, peer: &str, path: &str, bearer: Option<&str>) -> u16 {
    let mut request = axum::http::Request::get(path);
    if let Some(token) = bearer {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    let mut request = request.body(Body::empty()).unwrap();
    let peer: SocketAddr = peer.parse().unwrap();
    request.extensions_mut().insert(ConnectInfo(peer));
    let app = router(AppState::new(config).unwrap());
    app.oneshot(request).await.unwrap().status().as_u16()
}

#[tokio::test]
async fn a_client_on_another_host_needs_the_admin_token() {
    let remote = "10.0.0.2:40000";
    // No token set: loopback only.
    assert_eq!(
        status_from(config(None), remote, "/metrics", None).await,
        403
    );
    assert_eq!(
        status_from(config(None), remote, "/healthz", None).await,
        200
    );
    // A token set: whoever presents it, in the header or the address.
    assert_eq!(
        status_from(config(Some(TOKEN)), remote, "/metrics", None).await,
        401
    );
    let wrong = Some("guess");
    assert_eq!(
        status_from(config(Some(TOKEN)), remote, "/metrics", wrong).await,
        401
    );
    assert_eq!(
        status_from(config(Some(TOKEN)), remote, "/metrics", Some(TOKEN)).await,
        200
    );
    let in_the_address = format!("/metrics?token={TOKEN}");
    assert_eq!(
        status_from(config(Some(TOKEN)), remote, &in_the_address, None).await,
        200
    );
    // The mapped form of a remote IPv4 address is not loopback either.
    let mapped = "[::ffff:10.0.0.2]:40000";
    assert_eq!(
        status_from(config(None), mapped, "/metrics", None).await,
        403
    );
}

#[tokio::test]
async fn a_real_proxy_serves_metrics_to_loopback_and_with_a_token_to_its_holder() {
    let open = start(Script::new(u64::MAX), |_| {}).await;
    let response = (open.client.get(format!("{}/metrics", open.proxy)).send())
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert!(response.text().await.unwrap().contains("cascade_up 1"));

    let guarded = start(Script::new(u64::MAX), |c| {
        c.status.admin_token = Some(AdminToken::new(TOKEN).unwrap());
    })
    .await;
    let url = format!("{}/metrics", guarded.proxy);
    let refused = guarded.client.get(&url).send().await.unwrap();
    assert_eq!(refused.status(), 401);
    assert!(refused.headers().contains_key("www-authenticate"));
    let scraped = (guarded.client.get(&url).bearer_auth(TOKEN).send())
        .await
        .unwrap();
    assert_eq!(scraped.status(), 200);
    let health = guarded
        .client
        .get(format!("{}/healthz", guarded.proxy))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
}
